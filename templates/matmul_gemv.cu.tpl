@ -- SPDX-License-Identifier: MIT
@ -- templates/matmul_gemv.cu.tpl: the matmul family's kernel for a few columns, C = alpha * A * B + beta * C.
@ -- Row-major fp32 with leading dimensions; any M, N, K >= 1, any alignment.  The space
@ -- (templates/matmul.space.lua) sets the values used below.
#include "$(stream == 1 and 'matmul_stream.cuh' or 'kt_launch.h')"

/*
 * Few-column matrix multiply (N <= TN, down to a matrix times a vector):
 * A, M x K, is the large operand and the product is bound by reading it.
 * So A is read once, each row in whole 128-byte pieces per warp, 4 bytes
 * per lane (any lda and alignment), and the time is set by how many of
 * those reads are in flight: the loop has no barrier and no shared memory.
 *
 * The 8 warps of a block are WR = 8 / KW along rows, each owning TM rows,
 * times KW along K.  K is cut into CL * KW chunks of whole steps: warp
 * (r, q) of cluster block z sums chunk z * KW + q of its TM rows.  In one
 * step lane l takes k = l, l + 32, ..., l + 32 (KS - 1) of the chunk: it
 * loads KS x TM values of A and the KS x TN values of B's rows (B is small
 * and shared by every block, so it comes from L2), all before their
 * multiply-adds, and the loop is unrolled twice so that the next step's
 * loads are issued before this step's sums.  KW > 1 serves few rows: the
 * warps of a block then share them instead of idling.
 *
 * The sums are then added in a fixed order: a warp's lanes in a butterfly,
 * the KW warps of one row group q = 0, 1, ... through shared memory, and
 * the cluster's blocks z = 0, 1, ... through distributed shared memory.
 * No atomics: the result is the same on every run.  Columns past TN are
 * further column groups: correct, but each reads all of A again.
 */
constexpr int TM = $(tm), TN = $(tn); // rows per warp, columns of C per block
constexpr int THREADS = $(threads), WARPS = THREADS / 32;
constexpr int KW = $(kwarps), WR = WARPS / KW; // warps along K, along rows
constexpr int RB = WR * TM;                    // rows of C per block
constexpr int CL = $(cluster);                 // blocks per cluster along K
constexpr int KS = $(depth), KB = 32 * KS;     // k per lane and per warp in one step
constexpr int PART = RB * TN;                  // one warp row's partial sums, per K warp
static_assert(WARPS % KW == 0, "the warps along K divide the block");
static_assert(TN % 4 == 0, "B's columns go in groups of 4 (one float4 each where rows are aligned)");

@ if cluster > 1 then
#include <cooperative_groups.h>
@ end

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C,
        long long ldc, int groups_n, int k_chunk)
{
  __shared__ float red[KW * PART]; // the block's partial rows, one set per warp along K
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wr = warp % WR, wq = warp / WR;
  const int rb0 = (int)(blockIdx.x / groups_n) * RB, col0 = (int)(blockIdx.x % groups_n) * TN;
  const int r0 = rb0 + wr * TM;
  const long long kb_ = ((long long)blockIdx.y * KW + wq) * k_chunk;
  const int kb = kb_ < K ? (int)kb_ : K, ke = K - kb < k_chunk ? K : kb + k_chunk;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      acc[i][j] = 0.0f;
  bool row_in[TM], col_in[TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
    row_in[i] = r0 + i < M;
#pragma unroll
  for (int j = 0; j < TN; ++j)
    col_in[j] = col0 + j < N;
  const float *arow = A + (size_t)(r0 < M ? r0 : 0) * lda + lane;
  const float *brow = B + (size_t)lane * ldb + col0;
  /* B's rows as float4s where every row of it is 16-byte aligned: a lane
   * reads its k's TN values in TN / 4 loads rather than TN.  The lanes of a
   * warp read 32 rows of B at once, so a 4-byte load of B costs the cache
   * nearly what a 16-byte one does, and with TN of B read per TM of A, B's
   * loads, not A's, had set the pace.  Only whole groups of 4 columns inside
   * N; the others, and unaligned rows, as single floats. */
  const bool b_vec = ldb % 4 == 0 && ((size_t)B & 15) == 0;
  bool quad_in[TN / 4];
#pragma unroll
  for (int j4 = 0; j4 < TN / 4; ++j4)
    quad_in[j4] = b_vec && col0 + 4 * j4 + 4 <= N;

#pragma unroll 2
  for (int k0 = kb; k0 < ke; k0 += KB) {
    float a[KS][TM], b[KS][TN];
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const bool k_in = k0 + s * 32 + lane < ke;
#pragma unroll
      for (int i = 0; i < TM; ++i)
        a[s][i] = k_in && row_in[i] ? $(ld_open)arow[(size_t)i * lda + k0 + s * 32]$(ld_close) : 0.0f;
#pragma unroll
      for (int j4 = 0; j4 < TN / 4; ++j4) {
        const float *bq = brow + (size_t)(k0 + s * 32) * ldb + 4 * j4;
        if (quad_in[j4]) {
          const float4 x = k_in ? __ldg(reinterpret_cast<const float4 *>(bq)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          b[s][4 * j4] = x.x, b[s][4 * j4 + 1] = x.y, b[s][4 * j4 + 2] = x.z, b[s][4 * j4 + 3] = x.w;
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j)
            b[s][4 * j4 + j] = k_in && col_in[4 * j4 + j] ? bq[j] : 0.0f;
        }
      }
    }
#pragma unroll
    for (int s = 0; s < KS; ++s)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i][j] = fmaf(a[s][i], b[s][j], acc[i][j]);
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
        red[wq * PART + (wr * TM + i) * TN + j] = acc[i][j];
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
  // Block z finishes the elements e with e % CL == z: blocks in order, each its warps along K in order.
  for (int e = z + CL * (int)threadIdx.x; e < PART; e += CL * THREADS) {
    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < CL; ++p)
#pragma unroll
      for (int q = 0; q < KW; ++q)
        s += parts[p][q * PART + e];
@ else
  __syncthreads();
  for (int e = threadIdx.x; e < PART; e += THREADS) {
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < KW; ++q)
      s += red[q * PART + e];
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
  /* CL * KW chunks of whole KB steps, one per warp along K of each block
   * of a cluster (the last ones may be short or empty). */
  const long long steps = (a->K + KB - 1) / KB;
  const int k_chunk = (int)((steps + CL * KW - 1) / (CL * KW) * KB);
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
