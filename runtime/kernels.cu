/* SPDX-License-Identifier: MIT */
/* runtime/kernels.cu: the runtime's own kernels (runtime/kt_kernels.h).
 * kt_matmul_ex serves KT_F32 with an op T by transposing that operand into
 * scratch and calling kt_matmul, whose tuned kernels read both operands
 * op N (runtime/gemm.c); kt_matmul and kt_matmul_ex scale C alone where
 * K = 0 or alpha = 0, as BLAS does (runtime/matmul.c). */
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

namespace
{

/* Rows of C over blockIdx.x (a grid-stride loop past the grid), batch
 * entries over blockIdx.y (likewise), columns over the threads. */
__global__ void __launch_bounds__(256) scale(kt_scale_args a)
{
  for (long long b = blockIdx.y; b < a.batch; b += gridDim.y)
    for (long long r = blockIdx.x; r < a.rows; r += gridDim.x) {
      float *row = a.C + b * a.stride_c + r * a.ldc;
      for (long long c = threadIdx.x; c < a.cols; c += blockDim.x)
        row[c] = a.beta == 0.0f ? 0.0f : a.beta * row[c];
    }
}

} // namespace

extern "C" int kt_scale_f32(const void *args, cudaStream_t stream)
{
  const kt_scale_args *a = (const kt_scale_args *)args;
  if (a->rows <= 0 || a->cols <= 0 || a->batch <= 0 || a->beta == 1.0f)
    return (int)cudaSuccess; /* nothing to change */
  const long long rows = a->rows < 65535 ? a->rows : 65535, batch = a->batch < 65535 ? a->batch : 65535;
  return (int)kt_launch_kernel(scale, dim3((unsigned)rows, (unsigned)batch), dim3(256), 0, stream, *a);
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
