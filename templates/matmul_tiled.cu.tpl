@ -- SPDX-License-Identifier: MIT
@ -- templates/matmul_tiled.cu.tpl: the matmul family's tiled kernel (the Programming
@ -- Guide's), C = alpha * A * B + beta * C.  Row-major fp32 with leading dimensions; any
@ -- M, N, K >= 1.  The space (templates/matmul.space.lua) sets the values used below.
#include "kt_launch.h"

/*
 * The CUDA C Programming Guide's shared-memory matrix multiply.
 *
 * Each block computes one BS x BS tile of C, one element per thread.  It
 * walks along K in steps of BS: the block stages a BS x BS tile of A and one
 * of B in shared memory, so each element loaded from global memory is used
 * BS times.  Unlike the Guide's version, edge tiles are predicated: loads
 * outside A or B read as zero (so the inner product needs no test) and
 * threads outside C store nothing.  That makes any M, N, K valid.
 */
constexpr int BS = $(bs);  // BLOCK_SIZE
constexpr int PAD = $(pad); // floats of padding per shared-memory row

extern "C" __global__ void __launch_bounds__(BS * BS)
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C,
        long long ldc, int tiles_n)
{
  __shared__ float As[BS][BS + PAD];
  __shared__ float Bs[BS][BS + PAD];

  // A 1-D grid of tiles, row by row: grids of any size fit in gridDim.x.
  const int tile_m = blockIdx.x / tiles_n, tile_n = blockIdx.x % tiles_n;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = tile_m * BS + ty;
  const int col = tile_n * BS + tx;

  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += BS) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * lda + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * ldb + col] : 0.0f;
    // Both tiles must be complete before any thread reads them ...
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BS; ++k)
      acc += As[ty][k] * Bs[k][tx];
    // ... and fully read before the next step overwrites them.
    __syncthreads();
  }
  if (row < M && col < N) {
    float *c = &C[(size_t)row * ldc + col];
    // beta == 0 must not read C: it may hold NaN.
    *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
  }
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  const long long tiles_m = (a->M + BS - 1) / BS, tiles_n = (a->N + BS - 1) / BS;
  if (tiles_m * tiles_n > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(tiles_m * tiles_n));
  cfg.blockDim = dim3(BS, BS);
  cfg.stream = stream;
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda,
                                 a->B, a->ldb, a->beta, a->C, a->ldc, (int)tiles_n);
}
