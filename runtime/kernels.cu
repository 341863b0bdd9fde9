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
 * zeros from K to kp, any size in one call.  Here its rows are src's
 * columns and its K src's rows. */
extern "C" int kt_transpose_f32(const void *args, cudaStream_t stream)
{
  const kt_transpose_args *a = (const kt_transpose_args *)args;
  if (a->rows <= 0 || a->cols <= 0)
    return (int)cudaSuccess;
  if (a->rows > a->ldd || a->ldd > 0x7fffffffLL || a->cols > 0x7fffffffLL)
    return (int)cudaErrorInvalidValue; /* the repack counts in int */
  const gemm_pack_op op = {a->src, a->lds, 0, 0, (int)a->cols, 1, a->dst};
  return (int)gemm_pack_launch(&op, NULL, (int)a->rows, (int)a->ldd, KT_GEMM_F32, stream);
}

namespace
{

/* A block of 256 threads covers 256 / tx rows of C, tx threads along each
 * (tx the power of two at or above the columns, at most 256), so that a
 * C of a few columns does not leave most of a block's threads idle (a
 * block a row did: 255 of 256 at N = 1).  Row groups over blockIdx.x and
 * batch entries over blockIdx.y, each in a grid-stride loop past the
 * grid's limits. */
__global__ void __launch_bounds__(256) scale(kt_scale_args a, int tx)
{
  const int ty = blockDim.x / tx, lx = threadIdx.x % tx, ly = threadIdx.x / tx;
  for (long long b = blockIdx.y; b < a.batch; b += gridDim.y)
    for (long long r = (long long)blockIdx.x * ty + ly; r < a.rows; r += (long long)gridDim.x * ty) {
      float *row = a.C + b * a.stride_c + r * a.ldc;
      for (long long c = lx; c < a.cols; c += tx)
        row[c] = a.beta == 0.0f ? 0.0f : a.beta * row[c];
    }
}

/* Does nothing: kt_cluster_capacity asks where its clusters would go. */
__global__ void cluster_probe()
{
}

} // namespace

extern "C" int kt_cluster_capacity(int size, size_t smem, int *clusters)
{
  *clusters = 0;
  cudaError_t e = cudaFuncSetAttribute(cluster_probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(cluster_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e == cudaSuccess) {
    cudaLaunchAttribute a;
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = (unsigned)size, a.val.clusterDim.y = a.val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)size), cfg.blockDim = dim3(32), cfg.dynamicSmemBytes = smem;
    cfg.attrs = &a, cfg.numAttrs = 1;
    e = cudaOccupancyMaxActiveClusters(clusters, (const void *)cluster_probe, &cfg);
  }
  if (e != cudaSuccess) {
    *clusters = 0;
    cudaGetLastError();
  }
  return (int)e;
}

extern "C" int kt_scale_f32(const void *args, cudaStream_t stream)
{
  const kt_scale_args *a = (const kt_scale_args *)args;
  if (a->rows <= 0 || a->cols <= 0 || a->batch <= 0 || a->beta == 1.0f)
    return (int)cudaSuccess; /* nothing to change */
  int tx = 1;
  while (tx < a->cols && tx < 256)
    tx *= 2;
  const long long groups = (a->rows + 256 / tx - 1) / (256 / tx);
  const long long gx = groups < 65535 ? groups : 65535, gy = a->batch < 65535 ? a->batch : 65535;
  return (int)kt_launch_kernel(scale, dim3((unsigned)gx, (unsigned)gy), dim3(256), 0, stream, *a, tx);
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
