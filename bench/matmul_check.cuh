/* SPDX-License-Identifier: MIT */
/* bench/matmul_check.cuh: random inputs (fp32, and each gemm type) and the check of a matmul
 * result against cuBLAS's, shared by the matmul benches.  Included by one
 * .cu each (static functions). */
#ifndef KT_BENCH_MATMUL_CHECK_CUH
#define KT_BENCH_MATMUL_CHECK_CUH

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "bench_common.h"

/* A cuBLAS call that must succeed, in a benchmark (a tool: it may exit). */
#define BENCH_CUBLAS(call) bench_cublas_check((call), #call, __FILE__, __LINE__)

static void bench_cublas_check(cublasStatus_t s, const char *what, const char *file, int line)
{
  if (s != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cublasGetStatusString(s));
    exit(1);
  }
}

/* ---- device helpers ------------------------------------------------------ */

__device__ __forceinline__ uint64_t mix64(uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* x[i] = an odd multiple of 2^-23 minus 1: uniform over (-1, 1), exact in
 * fp32, and never zero (2^23 is even), so no product vanishes. */
__global__ void fill_random(float *x, size_t n, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t u = mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1)) >> 41; /* 23 bits */
    x[i] = (float)(2 * u + 1) * 0x1p-23f - 1.0f;
  }
}

/* Random inputs, never zero: TF32 full FP32 values in (-1, 1); the 16-bit
 * types odd multiples of 2^-8 in (-1, 1), exact in both. */
__global__ void fill_typed(void *x, size_t n, int type, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t u = mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1));
    if (type == KT_BF16)
      ((__nv_bfloat16 *)x)[i] = __float2bfloat16((float)(2 * (int)(u >> 57) - 127) * 0x1p-8f);
    else if (type == KT_F16)
      ((__half *)x)[i] = __float2half((float)(2 * (int)(u >> 57) - 127) * 0x1p-8f);
    else
      ((float *)x)[i] = (float)(2 * (u >> 41) + 1) * 0x1p-23f - 1.0f;
  }
}

/* out[0] += sum (x - ref)^2, out[1] += sum ref^2 over the M x N elements
 * of two row-major matrices with row stride ld, in double.  A NaN in x (an
 * element the kernel never wrote) makes out[0] NaN. */
__global__ void diff_norms(const float *x, const float *ref, int M, int N, long long ld, double *out)
{
  double d2 = 0, r2 = 0;
  const size_t mn = (size_t)M * N;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < mn; e += (size_t)gridDim.x * blockDim.x) {
    const size_t at = e / N * ld + e % N;
    const double r = ref[at], d = (double)x[at] - r;
    d2 += d * d;
    r2 += r * r;
  }
  for (int off = 16; off > 0; off >>= 1) {
    d2 += __shfl_down_sync(0xffffffffu, d2, off);
    r2 += __shfl_down_sync(0xffffffffu, r2, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&out[0], d2);
    atomicAdd(&out[1], r2);
  }
}

/* Of the n floats at x, how many outside the M x N matrix that starts at
 * x + first (row stride ld) no longer hold the all-ones bits they were set
 * to: a kernel's stores past a row's N (into ld's padding) or past the
 * matrix's end, which the error above cannot see. */
__global__ void count_spoiled(const float *x, size_t n, size_t first, int M, int N, long long ld,
                              unsigned long long *out)
{
  unsigned long long c = 0;
  const size_t end = first + (size_t)(M - 1) * ld + N;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const bool inside = i >= first && i < end && (i - first) % ld < (size_t)N;
    c += !inside && __float_as_uint(x[i]) != 0xffffffffu;
  }
  atomicAdd(out, c);
}

static unsigned long long spoiled(const float *x, size_t n, size_t first, int M, int N, long long ld,
                                  double *scratch, const bench_device &d)
{
  BENCH_CUDA(cudaMemset(scratch, 0, sizeof(unsigned long long)));
  count_spoiled<<<d.info.sm_count * 8, 256>>>(x, n, first, M, N, ld, (unsigned long long *)scratch);
  BENCH_CUDA(cudaGetLastError());
  unsigned long long h = 0;
  BENCH_CUDA(cudaMemcpy(&h, scratch, sizeof h, cudaMemcpyDeviceToHost));
  return h;
}

static void fill(float *x, size_t n, kt_rng *rng, const bench_device &d)
{
  fill_random<<<d.info.sm_count * 8, 256>>>(x, n, kt_rng_next(rng));
  BENCH_CUDA(cudaGetLastError());
}

/* ||x - ref||_F / ||ref||_F over M x N elements with row stride ld (the
 * norm of the difference alone when ref is all zero). */
static double rel_error(const float *x, const float *ref, int M, int N, long long ld, double *scratch,
                        const bench_device &d)
{
  BENCH_CUDA(cudaMemset(scratch, 0, 2 * sizeof(double)));
  diff_norms<<<d.info.sm_count * 8, 256>>>(x, ref, M, N, ld, scratch);
  BENCH_CUDA(cudaGetLastError());
  double h[2];
  BENCH_CUDA(cudaMemcpy(h, scratch, sizeof h, cudaMemcpyDeviceToHost));
  return h[1] > 0 ? sqrt(h[0]) / sqrt(h[1]) : sqrt(h[0]);
}

/* The bound on ktune's relative Frobenius error against cuBLAS.
 *
 * A different criterion from the componentwise worst-case bound that the
 * tuner and the GPU tests check every variant against (kt_tune_matmul_bound,
 * tuner/matmul.h): that one compares each element with a double-precision
 * reference on the host, too slow for the suite's large shapes; this one
 * compares the whole matrix with another fp32 result on the GPU, and its
 * allowance is statistical rather than worst-case.
 *
 * Both are fp32 sums of K products in different orders.  For independent
 * inputs of mean zero, rounding errors add like a random walk: a sequential
 * sum's relative error is about u * sqrt(K) / sqrt(6) (u = 2^-24), blocked
 * or tree orders less, so the two results differ by about u * sqrt(K).  We
 * allow 64 times that.  It still catches real bugs: one dropped or doubled
 * term of the K costs about 1 / sqrt(K) relative error, above the bound for
 * every K < 2^18; wrong indexing costs O(1). */
static double error_bound(int K)
{
  return 64.0 * 0x1p-24 * sqrt((double)K);
}

#endif
