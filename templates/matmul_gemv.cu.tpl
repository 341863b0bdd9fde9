@ -- SPDX-License-Identifier: MIT
@ -- templates/matmul_gemv.cu.tpl: the matmul family's kernel for a few columns, C = alpha * A * B + beta * C.
@ -- Row-major fp32 with leading dimensions; any M, N, K >= 1, any alignment.  The space
@ -- (templates/matmul.space.lua) sets the values used below.
#include "kt_launch.h"

/*
 * Few-column matrix multiply (N <= TN, down to a matrix times a vector):
 * A, M x K, is the large operand and the product is bound by reading it.
 * So A is read once, each row by whole 128-byte pieces per warp, 4 bytes
 * per lane (any lda and alignment).
 *
 * Warp w of a block owns rows w*TM .. w*TM + TM - 1 of the block's RB =
 * WARPS * TM rows; lane l sums k = l, l + 32, ... of its chunk of K, for
 * the TM rows and TN columns at once.  The block walks its chunk in steps
 * of KB: it copies B's KB x TN piece into shared memory (the same for all
 * its warps), then each lane reads the TN values of its k as float4s (a
 * padded row stride keeps a quarter-warp's reads on distinct banks) and
 * KS x TM values of A straight from global memory, all issued before
 * their multiply-adds.  At the end a warp adds its lanes' sums in a fixed
 * butterfly; with clusters (CL blocks along K, one chunk each), the
 * blocks' partial rows are added in the order z = 0, 1, ... through
 * distributed shared memory.  No atomics: the result is the same on every
 * run.  Columns past TN are further column groups: correct, but each reads
 * all of A again.
 */
constexpr int TM = $(tm), TN = $(tn); // rows per warp, columns of C per block
constexpr int THREADS = $(threads), WARPS = THREADS / 32;
constexpr int RB = WARPS * TM;        // rows of C per block
constexpr int CL = $(cluster);        // blocks per cluster along K
constexpr int KS = 4, KB = 32 * KS;   // k per lane and per block in one step
constexpr int LDB_S = $(ldb_s);       // row stride of the B piece (see the space)
static_assert(TN % 4 == 0 && LDB_S % 4 == 0, "B is read as float4");

@ if cluster > 1 then
#include <cooperative_groups.h>
@ end

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C,
        long long ldc, int groups_n, int k_chunk)
{
  __shared__ __align__(16) float Bs[KB * LDB_S];
  __shared__ float red[RB * TN]; // the block's partial rows
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rb0 = (int)(blockIdx.x / groups_n) * RB, col0 = (int)(blockIdx.x % groups_n) * TN;
  const int r0 = rb0 + warp * TM;
  const long long kb_ = (long long)blockIdx.y * k_chunk;
  const int kb = kb_ < K ? (int)kb_ : K, ke = K - kb < k_chunk ? K : kb + k_chunk;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      acc[i][j] = 0.0f;
  bool row_in[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i)
    row_in[i] = r0 + i < M;
  const float *arow = A + (size_t)(r0 < M ? r0 : 0) * lda + lane;

  for (int k0 = kb; k0 < ke; k0 += KB) {
    // A's loads first: they are in flight while B's piece is copied.
    float a[KS][TM];
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int i = 0; i < TM; ++i)
        a[s][i] = row_in[i] && k0 + s * 32 + lane < ke ? arow[(size_t)i * lda + k0 + s * 32] : 0.0f;
    for (int e = threadIdx.x; e < KB * TN; e += THREADS) {
      const int k = e / TN, j = e % TN;
      Bs[k * LDB_S + j] = k0 + k < ke && col0 + j < N ? B[(size_t)(k0 + k) * ldb + col0 + j] : 0.0f;
    }
    __syncthreads(); // the piece of B is complete ...
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      float b[TN];
#pragma unroll
      for (int g = 0; g < TN / 4; ++g) {
        const float4 x = *reinterpret_cast<const float4 *>(&Bs[(s * 32 + lane) * LDB_S + g * 4]);
        b[g * 4 + 0] = x.x; b[g * 4 + 1] = x.y; b[g * 4 + 2] = x.z; b[g * 4 + 3] = x.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i][j] = fmaf(a[s][i], b[j], acc[i][j]);
    }
    __syncthreads(); // ... and read by every warp before the next step overwrites it
  }

  /* The lanes' sums, added in a fixed butterfly: every lane ends with the
   * warp's; lane e % 32 parks element e of the warp's TM x TN. */
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) {
#pragma unroll
      for (int o = 16; o > 0; o /= 2)
        acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], o);
      if ((i * TN + j) % 32 == lane)
        red[(warp * TM + i) * TN + j] = acc[i][j];
    }
@ if cluster > 1 then
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync(); // every block's partial rows are parked and visible to the cluster
  const int z = (int)cluster.block_rank();
  const float *parts[CL];
#pragma unroll
  for (int p = 0; p < CL; ++p)
    parts[p] = cluster.map_shared_rank(red, p);
  // Block z finishes the elements e with e % CL == z.
  for (int e = z + CL * (int)threadIdx.x; e < RB * TN; e += CL * THREADS) {
    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < CL; ++p)
      s += parts[p][e];
@ else
  __syncthreads();
  for (int e = threadIdx.x; e < RB * TN; e += THREADS) {
    const float s = red[e];
@ end
    const int r = rb0 + e / TN, c = col0 + e % TN;
    if (r < M && c < N) {
      float *p = C + (size_t)r * ldc + c;
      // beta == 0 must not read C: it may hold NaN.
      *p = beta == 0.0f ? alpha * s : alpha * s + beta * *p;
    }
  }
@ if cluster > 1 then
  cluster.sync(); // no block leaves while another may still read its rows
@ end
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  const long long groups_m = (a->M + RB - 1) / RB, groups_n = (a->N + TN - 1) / TN;
  if (groups_m * groups_n > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  // CL chunks of whole KB steps, one per block of a cluster (the last may be short or empty).
  const long long steps = (a->K + KB - 1) / KB;
  const int k_chunk = (int)((steps + CL - 1) / CL * KB);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(groups_m * groups_n), CL);
  cfg.blockDim = dim3(THREADS);
  cfg.stream = stream;
@ if cluster > 1 then
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = CL;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
@ end
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda,
                                 a->B, a->ldb, a->beta, a->C, a->ldc, (int)groups_n, k_chunk);
}
