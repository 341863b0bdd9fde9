/* SPDX-License-Identifier: MIT */
/* runtime/kernels.cu: the runtime's own kernels (runtime/kt_kernels.h).
 * kt_matmul_ex serves KT_F32 with an op T by transposing that operand into
 * scratch and calling kt_matmul, whose tuned kernels read both operands
 * op N (runtime/gemm.c). */
#include "kt_kernels.h"
#include "gemm_common.cuh"

/* The gemm family's repack (templates/gemm_common.cuh) with kmajor 0 is
 * this transpose: out[r * kp + k] = src[k * ld + r] for r < rows and k < K,
 * zeros from K to kp, any size in one call (it splits grids that are too
 * tall).  Here its rows are src's columns and its K src's rows. */
extern "C" int kt_transpose_f32(const void *args, cudaStream_t stream)
{
  const kt_transpose_args *a = (const kt_transpose_args *)args;
  if (a->rows <= 0 || a->cols <= 0)
    return (int)cudaSuccess;
  if (a->rows > a->ldd || a->ldd > 0x7fffffffLL || a->cols > 0x7fffffffLL)
    return (int)cudaErrorInvalidValue; /* the repack counts in int */
  return (int)gemm_pack_launch(a->src, a->lds, 0, 0, (int)a->cols, (int)a->rows, (int)a->ldd, 1, KT_GEMM_F32, a->dst,
                               stream);
}

extern "C" int kt_scratch_alloc(const void *args, cudaStream_t stream)
{
  const kt_scratch_args *a = (const kt_scratch_args *)args;
  *a->ptr = nullptr;
  const cudaError_t e = a->pool ? cudaMallocFromPoolAsync(a->ptr, a->bytes, (cudaMemPool_t)a->pool, stream)
                                : cudaMallocAsync(a->ptr, a->bytes, stream);
  *a->status = (int)e;
  if (e != cudaSuccess) {
    *a->ptr = nullptr;
    cudaGetLastError(); // the failure is reported through *status, not left pending
  }
  return (int)cudaSuccess;
}

extern "C" int kt_scratch_free(const void *args, cudaStream_t stream)
{
  const kt_scratch_args *a = (const kt_scratch_args *)args;
  return (int)cudaFreeAsync(*a->ptr, stream);
}
