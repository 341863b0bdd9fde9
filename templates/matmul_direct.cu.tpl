@ -- SPDX-License-Identifier: MIT
@ -- templates/matmul_direct.cu.tpl: the matmul family's kernel for a short K, C = alpha * A * B + beta * C.
@ -- Row-major fp32 with leading dimensions; any M, N, K >= 1, any alignment.  The space
@ -- (templates/matmul.space.lua) sets the values used below.
#include "kt_launch.h"

/*
 * Short-K matrix multiply: when K is a few dozen or less, each output
 * costs K multiply-adds and one 4-byte store, and the product is bound by
 * writing C.  What matters then is that the stores are whole 128-byte rows
 * per warp and that nothing else gets in their way: no pipeline to fill,
 * little shared memory, many blocks per SM.
 *
 * A block computes a BM x BN tile of C.  Its threads form a TY x TX grid,
 * TX a multiple of 32 along N: a warp is 32 consecutive tx of one ty.  The
 * thread (ty, tx) keeps the TM x TN outputs at rows ty*TM + i and columns
 * tx + j*TX, so at each (i, j) the 32 lanes of a warp store 32 consecutive
 * floats of one row: coalesced, whatever ldc and C's alignment.  The
 * block walks K in chunks of BK: it copies A's BM x BK panel (transposed,
 * As[k][m]) and B's BK x BN panel into shared memory through registers,
 * 4 bytes at a time (any alignment), then every thread reads its TM values
 * of A as float4 broadcasts (all lanes of a warp share the rows) and its
 * TN values of B as consecutive floats (one wavefront).  One chunk covers
 * the K this kernel is meant for; longer K loops, correct but slow.
 */
constexpr int BM = $(bm), BN = $(bn), BK = $(bk); // block tile; BK: K per chunk in shared memory
constexpr int TM = $(tm), TN = $(tn);            // thread tile
constexpr int TX = BN / TN, TY = BM / TM;        // threads along N and M
constexpr int THREADS = TX * TY;
constexpr int LDA_S = BM + 4;                    // row stride of the transposed A panel: float4 rows
static_assert(TX % 32 == 0, "a warp is 32 consecutive columns of one thread row");
static_assert(TM % 4 == 0, "A is read as float4");

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C,
        long long ldc, int tiles_n)
{
  __shared__ __align__(16) float As[BK][LDA_S];
  __shared__ float Bs[BK][BN];
  const int row0 = (int)(blockIdx.x / tiles_n) * BM, col0 = (int)(blockIdx.x % tiles_n) * BN;
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    /* Panels in, zeros outside A and B: consecutive threads take
     * consecutive k of a row of A, consecutive columns of a row of B. */
    for (int e = threadIdx.x; e < BM * BK; e += THREADS) {
      const int r = e / BK, k = e % BK;
      As[k][r] = row0 + r < M && k0 + k < K ? A[(size_t)(row0 + r) * lda + k0 + k] : 0.0f;
    }
    for (int e = threadIdx.x; e < BK * BN; e += THREADS) {
      const int k = e / BN, c = e % BN;
      Bs[k][c] = k0 + k < K && col0 + c < N ? B[(size_t)(k0 + k) * ldb + col0 + c] : 0.0f;
    }
    __syncthreads(); // the panels are complete ...
    const int kn = K - k0 < BK ? K - k0 : BK;
#pragma unroll 4
    for (int k = 0; k < kn; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int g = 0; g < TM / 4; ++g) {
        const float4 x = *reinterpret_cast<const float4 *>(&As[k][ty * TM + g * 4]);
        a[g * 4 + 0] = x.x; a[g * 4 + 1] = x.y; a[g * 4 + 2] = x.z; a[g * 4 + 3] = x.w;
      }
#pragma unroll
      for (int j = 0; j < TN; ++j)
        b[j] = Bs[k][tx + j * TX];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads(); // ... and read by every thread before the next chunk overwrites them
  }

  // C = alpha * acc + beta * C, never reading C when beta == 0 (it may hold NaN).
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + ty * TM + i;
    if (r >= M)
      break;
    float *crow = C + (size_t)r * ldc;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = col0 + tx + j * TX;
      if (c < N)
        crow[c] = beta == 0.0f ? alpha * acc[i][j] : alpha * acc[i][j] + beta * crow[c];
    }
  }
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  const long long tiles_m = (a->M + BM - 1) / BM, tiles_n = (a->N + BN - 1) / BN;
  if (tiles_m * tiles_n > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(tiles_m * tiles_n));
  cfg.blockDim = dim3(THREADS);
  cfg.stream = stream;
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda,
                                 a->B, a->ldb, a->beta, a->C, a->ldc, (int)tiles_n);
}
