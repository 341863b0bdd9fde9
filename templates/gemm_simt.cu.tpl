@ -- templates/gemm_simt.cu.tpl: the gemm family's fallback kernel, on the
@ -- CUDA cores: any input type, either op, any leading dimension, alignment
@ -- and batch, on any target.  The space (templates/gemm.space.lua) sets the
@ -- values used below.
#include "kt_launch.h"
#include "gemm_common.cuh"

/*
 * The Programming Guide's shared-memory tiled multiply, generalised: each
 * block computes one BS x BS tile of C for one batch entry, one element per
 * thread, staging BS x BS tiles of op(A) and op(B).  Elements are read
 * one at a time through gemm_load, which widens the 16-bit types exactly
 * and rounds TF32 as the tensor cores' callers expect, so the products are
 * those of the rounded inputs and the sums are FP32.  It is the path that
 * serves what nothing faster can (an older GPU, FP32 with transposes); it
 * makes no attempt at speed.
 */
constexpr int BS = $(bs);

extern "C" __global__ void __launch_bounds__(BS * BS)
$(name)(kt_gemm_args a, int tiles_n, int batch0)
{
  __shared__ float As[BS][BS + 1];
  __shared__ float Bs[BS][BS + 1];
  const long long b = batch0 + blockIdx.y;
  const char *A = (const char *)a.A, *B = (const char *)a.B;
  const int es = a.type == KT_GEMM_BF16 || a.type == KT_GEMM_F16 ? 2 : 4;
  A += b * a.stride_a * es;
  B += b * a.stride_b * es;
  float *C = a.C + b * a.stride_c;
  const int tile_m = blockIdx.x / tiles_n, tile_n = blockIdx.x % tiles_n;
  const int tx = threadIdx.x % BS, ty = threadIdx.x / BS;
  const int row = tile_m * BS + ty, col = tile_n * BS + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < a.K; k0 += BS) {
    // op(A)(i, k) and op(B)(k, j), whichever way they are stored.
    const int ai = tile_m * BS + ty, ak = k0 + tx, bk = k0 + ty, bj = tile_n * BS + tx;
    As[ty][tx] = ai < a.M && ak < a.K
                     ? gemm_load(A, a.op_a == KT_GEMM_OP_N ? ai * a.lda + ak : (long long)ak * a.lda + ai, a.type)
                     : 0.0f;
    Bs[ty][tx] = bk < a.K && bj < a.N
                     ? gemm_load(B, a.op_b == KT_GEMM_OP_N ? bk * a.ldb + bj : (long long)bj * a.ldb + bk, a.type)
                     : 0.0f;
    __syncthreads(); // both tiles complete before any thread reads them
#pragma unroll
    for (int k = 0; k < BS; ++k)
      acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads(); // and read before the next step overwrites them
  }
  if (row < a.M && col < a.N) {
    float *c = &C[(long long)row * a.ldc + col];
    *c = a.beta == 0.0f ? a.alpha * acc : a.alpha * acc + a.beta * *c; // beta == 0 must not read C
  }
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_gemm_args *a = (const kt_gemm_args *)args;
  const long long tiles_m = (a->M + BS - 1) / BS, tiles_n = (a->N + BS - 1) / BS;
  if (tiles_m * tiles_n > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  cudaError_t err = cudaSuccess;
  for (long long b0 = 0; err == cudaSuccess && b0 < a->batch; b0 += 65535) { // long long: batch may near INT_MAX
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(tiles_m * tiles_n), (unsigned)(a->batch - b0 < 65535 ? a->batch - b0 : 65535));
    cfg.blockDim = dim3(BS * BS);
    cfg.stream = stream;
    err = cudaLaunchKernelEx(&cfg, $(name), *a, (int)tiles_n, (int)b0);
  }
  return (int)err;
}
