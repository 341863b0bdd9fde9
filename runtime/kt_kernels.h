/* SPDX-License-Identifier: MIT */
/* runtime/kt_kernels.h: the runtime's own kernels (runtime/kernels.cu),
 * which no family generates: a transpose of FP32 panels into scratch, and
 * that scratch taken from and given back to the device's pool; C scaled by
 * beta where a product has nothing to add (K = 0 or alpha = 0).  Each is a
 * kt_launch_fn, run on the context's device by kt_context_run. */
#ifndef KT_KERNELS_H
#define KT_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Visible from libktune.so to the ktune CLI alone (its version script,
 * build/libktune.map), which takes the kernels from the library. */
#define KT_RUNTIME_KERNEL __attribute__((visibility("default")))

/* dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols: src is rows x
 * cols (row stride lds), dst cols x rows (row stride ldd >= rows, at most
 * INT_MAX, as cols).  Each row of dst is also zeroed from rows up to ldd,
 * so that a reader of 16 bytes at a time finds nothing undefined there. */
typedef struct kt_transpose_args {
  const float *src;
  long long lds, rows, cols;
  float *dst;
  long long ldd;
} kt_transpose_args;

KT_RUNTIME_KERNEL int kt_transpose_f32(const void *args, cudaStream_t stream);

/* C[b][r * ldc + c] = beta * C[b][r * ldc + c] for b < batch, r < rows, c <
 * cols, entry b at C + b * stride_c; with beta == 0, zeros (C is not read,
 * so NaN there goes too). */
typedef struct kt_scale_args {
  float *C;
  long long rows, cols, ldc, batch, stride_c;
  float beta;
} kt_scale_args;

KT_RUNTIME_KERNEL int kt_scale_f32(const void *args, cudaStream_t stream);

/* *ptr = `bytes` from pool (NULL: the current device's default pool),
 * ordered on the stream.  Returns cudaSuccess even when there is no such
 * memory (then *ptr is NULL and *status holds the error, which is cleared):
 * its callers fall back to a path that needs none. */
typedef struct kt_scratch_args {
  void *pool;
  size_t bytes;
  void **ptr;
  int *status;
} kt_scratch_args;

KT_RUNTIME_KERNEL int kt_scratch_alloc(const void *args, cudaStream_t stream);
/* Gives *ptr back, ordered on the stream. */
KT_RUNTIME_KERNEL int kt_scratch_free(const void *args, cudaStream_t stream);

/* *clusters = how many clusters of `size` blocks (1 to 16) the current
 * device runs at once, each block a kernel of the runtime's that holds
 * `smem` bytes of dynamic shared memory (enough, it runs one block an SM):
 * cudaOccupancyMaxActiveClusters.  Its error, cleared, where the device
 * cannot say (then *clusters is 0). */
KT_RUNTIME_KERNEL int kt_cluster_capacity(int size, size_t smem, int *clusters);

#ifdef __cplusplus
}
#endif

#endif
