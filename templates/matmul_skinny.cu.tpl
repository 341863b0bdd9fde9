@ -- SPDX-License-Identifier: MIT
@ -- templates/matmul_skinny.cu.tpl: the matmul family's kernel for a few rows, C = alpha * A * B + beta * C.
@ -- Row-major fp32 with leading dimensions; any M, N, K >= 1, any alignment.  The space
@ -- (templates/matmul.space.lua) sets the values used below.
#include "$(stream == 1 and 'matmul_stream.cuh' or 'kt_launch.h')"

/*
 * Few-row matrix multiply (M <= TM, down to a row vector times a matrix):
 * B, K x N, is the large operand and the product is bound by reading it.
 * So B is read once, in whole 128-byte rows per warp, 4 bytes per lane
 * (any ldb and alignment), and everything else stays on chip.
 *
 * A block covers BN = 32 * TN columns of C and all TM rows: lane l of every
 * warp owns columns l, l + 32, ..., l + 32 (TN - 1), and keeps TM x TN sums.
 * K is cut into CL * WARPS chunks of whole KU steps: warp w of cluster
 * block z sums chunk z * WARPS + w.  Per step of KU = 32, a warp parks its
 * TM x KU piece of A (each row read coalesced, a step ahead, so that the
 * read is in flight during the step before) in its own shared memory,
 * transposed (As[k][m]), and then at each k reads the TM values of A as
 * float4 broadcasts and TN floats of B from global memory, KI rows of B at
 * a time, all issued before their multiply-adds.  The chunks'
 * partial tiles are then added in a fixed order: the block's warps w = 0,
 * 1, ... into one partial tile in shared memory, then the cluster's blocks
 * z = 0, 1, ... through distributed shared memory, each block finishing a
 * share of the tile.  No atomics: the result is the same on every run.
 * Rows past TM are further row groups (blockIdx.x): correct, but each
 * reads all of B again.
 */
constexpr int TM = $(tm), TN = $(tn); // rows of C per block, columns per lane
constexpr int THREADS = $(threads), WARPS = THREADS / 32;
constexpr int CL = $(cluster);        // blocks per cluster along K
constexpr int BN = 32 * TN;           // columns of C per block
constexpr int KU = 32;                // k per copy of A: one per lane
constexpr int KI = $(depth);          // rows of B whose reads are in flight at once
static_assert(KU % KI == 0, "a step of A is whole rounds of B");
constexpr int LDA_S = $(lda_s);       // row stride of a warp's transposed A piece (see the space)
constexpr int AS_FLOATS = WARPS * KU * LDA_S, RED_FLOATS = TM * BN;
constexpr int SMEM_FLOATS = AS_FLOATS > RED_FLOATS ? AS_FLOATS : RED_FLOATS;
static_assert(TM % 4 == 0 && LDA_S % 4 == 0, "A is copied and read as float4");

@ if cluster > 1 then
#include <cooperative_groups.h>
@ end

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C,
        long long ldc, int tiles_n, int k_chunk)
{
  /* One buffer, used twice: the warps' A pieces while summing, the
   * block's partial tile [TM][BN] afterwards. */
  __shared__ __align__(16) float smem[SMEM_FLOATS];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (int)(blockIdx.x / tiles_n) * TM, col0 = (int)(blockIdx.x % tiles_n) * BN;
  const int rows = M - row0 < TM ? M - row0 : TM;
  const int q = (int)blockIdx.y * WARPS + warp; // this warp's chunk of K
  const long long kb_ = (long long)q * k_chunk;
  const int kb = kb_ < K ? (int)kb_ : K, ke = K - kb < k_chunk ? K : kb + k_chunk;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int t = 0; t < TN; ++t)
      acc[i][t] = 0.0f;

  float *const as = smem + warp * KU * LDA_S;
  const float *arow = A + (size_t)row0 * lda;
  bool col_in[TN];
#pragma unroll
  for (int t = 0; t < TN; ++t)
    col_in[t] = col0 + lane + 32 * t < N;
  const float *bcol = B + col0 + lane;

  /* Lane l reads A[row][k + l] of every row (each row one coalesced
   * read), for the step after the one being summed. */
  float an[TM];
  auto read_a = [&](int k) {
    const bool k_in = k + lane < ke;
#pragma unroll
    for (int i = 0; i < TM; ++i)
      an[i] = k_in && i < rows ? arow[(size_t)i * lda + k + lane] : 0.0f;
  };
  read_a(kb);
  for (int k0 = kb; k0 < ke; k0 += KU) {
    // The step's A lands as float4 at As[l][0 .. TM).
#pragma unroll
    for (int g = 0; g < TM / 4; ++g)
      *reinterpret_cast<float4 *>(&as[lane * LDA_S + g * 4]) =
          make_float4(an[g * 4], an[g * 4 + 1], an[g * 4 + 2], an[g * 4 + 3]);
    __syncwarp(); // the piece is complete before any lane reads it
    if (k0 + KU < ke)
      read_a(k0 + KU);
    const int kn = ke - k0 < KU ? ke - k0 : KU;
    for (int kk = 0; kk < kn; kk += KI) {
      float b[KI][TN];
#pragma unroll
      for (int u = 0; u < KI; ++u)
#pragma unroll
        for (int t = 0; t < TN; ++t)
          b[u][t] = kk + u < kn && col_in[t] ? $(ld_open)bcol[(size_t)(k0 + kk + u) * ldb + 32 * t]$(ld_close) : 0.0f;
#pragma unroll
      for (int u = 0; u < KI; ++u) {
        float a[TM];
#pragma unroll
        for (int g = 0; g < TM / 4; ++g) {
          const float4 x = *reinterpret_cast<const float4 *>(&as[(kk + u) * LDA_S + g * 4]);
          a[g * 4 + 0] = x.x; a[g * 4 + 1] = x.y; a[g * 4 + 2] = x.z; a[g * 4 + 3] = x.w;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int t = 0; t < TN; ++t)
            acc[i][t] = fmaf(a[i], b[u][t], acc[i][t]);
      }
    }
    __syncwarp(); // every lane has read the piece before it is overwritten
  }

  /* The block's partial tile, red[i][c] (c = lane + 32 t): the warps add
   * theirs in turn, w = 0, 1, ..., a barrier apart, so one tile of shared
   * memory holds it and the order is fixed. */
  float *const red = smem;
  for (int w = 0; w < WARPS; ++w) {
    __syncthreads(); // w = 0: every warp is done with its A piece; then: warp w - 1 has added
    if (warp == w) {
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int t = 0; t < TN; ++t) {
          float *r = &red[i * BN + lane + 32 * t];
          *r = w == 0 ? acc[i][t] : *r + acc[i][t];
        }
    }
  }
@ if cluster > 1 then
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync(); // every block's partial tile is complete and visible to the cluster
  const int z = (int)cluster.block_rank();
  const float *parts[CL];
#pragma unroll
  for (int p = 0; p < CL; ++p)
    parts[p] = cluster.map_shared_rank(red, p);
  /* Block z finishes the elements e with e / BN % CL == z: whole rows of
   * the tile, so its stores stay coalesced. */
  for (int e = (z * BN) + (int)threadIdx.x % BN + (int)threadIdx.x / BN * CL * BN; e < TM * BN;
       e += THREADS / BN * CL * BN) {
    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < CL; ++p)
      s += parts[p][e];
@ else
  __syncthreads();
  for (int e = threadIdx.x; e < TM * BN; e += THREADS) {
    const float s = red[e];
@ end
    const int i = e / BN, c = col0 + e % BN;
    if (i < rows && c < N) {
      float *p = C + (size_t)(row0 + i) * ldc + c;
      // beta == 0 must not read C: it may hold NaN.
      *p = beta == 0.0f ? alpha * s : alpha * s + beta * *p;
    }
  }
@ if cluster > 1 then
  cluster.sync(); // no block leaves while another may still read its tile
@ end
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  const long long groups = (a->M + TM - 1) / TM, tiles_n = (a->N + BN - 1) / BN;
  if (groups * tiles_n > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  /* CL * WARPS chunks of K, each whole KU steps (the last ones may be
   * short or empty). */
  const long long steps = (a->K + KU - 1) / KU;
  const int k_chunk = (int)((steps + CL * WARPS - 1) / (CL * WARPS) * KU);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(groups * tiles_n), CL);
  cfg.blockDim = dim3(THREADS);
  cfg.stream = stream;
@ if cluster > 8 then
  /* Over 8 blocks a cluster needs an opt-in, once per device. */
  static kt_launch_once once;
  const cudaError_t oe = kt_launch_prepare(&once, (const void *)$(name), 0, 1, 0, nullptr);
  if (oe != cudaSuccess)
    return (int)oe;
@ end
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
                                 a->B, a->ldb, a->beta, a->C, a->ldc, (int)tiles_n, k_chunk);
}
