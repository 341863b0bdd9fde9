@ -- SPDX-License-Identifier: MIT
@ -- templates/matmul_vecmat.cu.tpl: the matmul family's vector-times-matrix kernel, C = alpha * A * B + beta * C
@ -- with M = 1.  Row-major fp32 with leading dimensions; any M, N, K, any 4-byte alignment.  The space
@ -- (templates/matmul.space.lua) sets the values used below.
#include "$(stream == 1 and 'matmul_stream.cuh' or 'kt_launch.h')"

/*
 * A row vector times a matrix (M = 1): B, K x N, is read once and the time
 * is how fast it streams.  The few-row kernel (matmul_skinny) serves this
 * too, but with at least 4 rows of C per block it parks A in shared memory
 * and splits K only over a cluster (16 chunks at most), so a narrow B (N
 * of a few dozen: one or two column blocks) runs on a handful of SMs.
 * This kernel keeps no rows of A at all, and splits K one of two ways:
 * through a cluster of CL blocks (8 or 16: one launch, the chunks' sums
 * added through distributed shared memory), or through a workspace into
 * as many chunks as fill one wave of blocks (kt_matmul_splits_in_wave, the
 * formula dispatch's cost model predicts with; a second kernel adds them,
 * so that it pays for a long K).
 *
 * A block covers BN = 32 TN columns: lane l of every warp owns columns l,
 * l + 32, ..., l + 32 (TN - 1), read 4 bytes a lane, so that every row of
 * B is one coalesced read per warp at any ldb and alignment.  The block's
 * 8 warps take the rows of its K chunk in turns (row k goes to warp k mod
 * 8), so that each step of the block reads KSTEP = 8 KI consecutive rows;
 * each lane has its KI rows' TN reads (and the KI values of A, one address
 * per warp) in flight before their multiply-adds.
 *
 * The sums are added in a fixed order: each lane's rows in order, the
 * block's warps w = 0, 1, ... through shared memory, then the chunks z =
 * 0, 1, ... (the cluster's blocks, or the workspace's chunks by a second
 * kernel; one chunk: the block stores C itself).
 * No atomics: the result is the same on every run.  Rows of C past the
 * first are more row blocks (gridDim.z), each reading all of B again:
 * correct, but the kernel is built for M = 1 and serves only that
 * (kt_matmul_serves_shape).
 */
constexpr int TN = $(tn); // columns of C per lane, 32 apart
constexpr int THREADS = $(threads), WARPS = THREADS / 32;
constexpr int BN = 32 * TN;        // columns of C per block
constexpr int KI = $(depth);       // rows of B a lane has in flight
constexpr int KSTEP = WARPS * KI;  // rows of B a block reads in one step
constexpr int SPLIT = $(split);    // most K chunks through a workspace
constexpr int CL = $(cluster);     // blocks per cluster along K
static_assert(SPLIT == 1 || CL == 1, "K is split one way");
static_assert(BN % CL == 0, "the cluster's blocks finish equal shares of the tile");

@ if cluster > 1 then
#include <cooperative_groups.h>
@ end

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C, long long ldc, int k_chunk,
        float *__restrict__ W)
{
  __shared__ float red[WARPS][BN]; // each warp's column sums
@ if cluster > 1 then
  __shared__ float part[BN]; // the block's column sums, read by the whole cluster
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
@ end
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col0 = (int)blockIdx.x * BN, z = (int)blockIdx.y;
  const long long kb_ = (long long)z * k_chunk;
  const int kb = kb_ < K ? (int)kb_ : K, ke = K - kb < k_chunk ? K : kb + k_chunk;
  bool col_in[TN];
#pragma unroll
  for (int t = 0; t < TN; ++t)
    col_in[t] = col0 + lane + 32 * t < N;

  for (int row = blockIdx.z; row < M; row += gridDim.z) {
    const float *a_row = A + (size_t)row * lda;
    const float *bcol = B + col0 + lane;
    float acc[TN];
#pragma unroll
    for (int t = 0; t < TN; ++t)
      acc[t] = 0.0f;
#pragma unroll 1
    for (int k0 = kb + warp; k0 < ke; k0 += KSTEP) {
      float a[KI], b[KI][TN];
#pragma unroll
      for (int u = 0; u < KI; ++u) {
        const int k = k0 + u * WARPS;
        a[u] = k < ke ? __ldg(a_row + k) : 0.0f;
#pragma unroll
        for (int t = 0; t < TN; ++t)
          b[u][t] = k < ke && col_in[t] ? $(ld)(bcol + (size_t)k * ldb + 32 * t) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < KI; ++u)
#pragma unroll
        for (int t = 0; t < TN; ++t)
          acc[t] = fmaf(a[u], b[u][t], acc[t]);
    }

#pragma unroll
    for (int t = 0; t < TN; ++t)
      red[warp][lane + 32 * t] = acc[t];
    __syncthreads();
    for (int e = threadIdx.x; e < BN; e += THREADS) {
      float s = 0.0f;
#pragma unroll
      for (int w = 0; w < WARPS; ++w)
        s += red[w][e];
@ if cluster > 1 then
      part[e] = s;
    }
    /* Block z of the cluster finishes the columns e = z, z + CL, ...,
     * adding the blocks' sums in the order 0, 1, .... */
    cluster.sync(); // every block's sums are complete and visible to the cluster
    for (int e = z + CL * (int)threadIdx.x; e < BN; e += CL * THREADS) {
      float s = 0.0f;
#pragma unroll
      for (int p = 0; p < CL; ++p)
        s += cluster.map_shared_rank(part, p)[e];
@ end
      const int c = col0 + e;
      if (c < N) {
        if (W) {
          W[((size_t)z * M + row) * N + c] = s;
        } else {
          float *p = C + (size_t)row * ldc + c;
          // beta == 0 must not read C: it may hold NaN.
          *p = beta == 0.0f ? alpha * s : alpha * s + beta * *p;
        }
      }
    }
@ if cluster > 1 then
    cluster.sync(); // no block reuses part, or leaves, while another may still read it
@ else
    __syncthreads(); // red is reused by the next row
@ end
  }
}

@ if split > 1 then
/* C = alpha * sum_z W[z] + beta * C, one thread per element adding the
 * chunks z = 0, 1, ..., splits - 1 in order. */
extern "C" __global__ void __launch_bounds__(256)
$(name)_sum(int M, int N, int splits, float alpha, const float *__restrict__ W, float beta, float *__restrict__ C,
            long long ldc)
{
  const size_t mn = (size_t)M * N;
  for (size_t e = (size_t)blockIdx.x * 256 + threadIdx.x; e < mn; e += (size_t)gridDim.x * 256) {
    float s = 0.0f;
#pragma unroll 8
    for (int z = 0; z < splits; ++z)
      s += W[(size_t)z * mn + e];
    float *p = C + (e / N) * ldc + e % N;
    *p = beta == 0.0f ? alpha * s : alpha * s + beta * *p;
  }
}

@ end
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  const long long tiles_n = (a->N + BN - 1) / BN;
  if (tiles_n > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  static kt_launch_once once;
  int per_sm = 1;
  cudaError_t e = kt_launch_prepare(&once, (const void *)$(name), 0, CL > 8, THREADS, &per_sm);
  if (e != cudaSuccess)
    return (int)e;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(THREADS);
  cfg.stream = stream;
  const unsigned rows = (unsigned)(a->M < 65535 ? a->M : 65535);
@ if cluster > 1 then
  // CL chunks of whole block steps, one per block of the cluster (a chunk may be empty).
  const long long steps = (a->K + KSTEP - 1) / KSTEP;
  const int k_chunk = (int)((steps + CL - 1) / CL) * KSTEP;
  cfg.gridDim = dim3((unsigned)tiles_n, CL, rows);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = CL;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda, a->B, a->ldb, a->beta,
                                 a->C, a->ldc, k_chunk, (float *)nullptr);
@ else
  /* As many chunks of K as fill one wave of blocks (SPLIT at most, whole
   * block steps each, a bounded workspace); one needs no workspace. */
  long long chunk = 0;
  const long long splits =
      kt_matmul_splits_in_wave(a->M, a->N, a->K, 1, BN, KSTEP, SPLIT, (long long)a->sm_count * per_sm, &chunk);
  float *W = nullptr;
  if (splits > 1) {
    const size_t bytes = (size_t)splits * (size_t)a->M * (size_t)a->N * sizeof(float);
    e = a->pool ? cudaMallocFromPoolAsync((void **)&W, bytes, (cudaMemPool_t)a->pool, stream)
                : cudaMallocAsync((void **)&W, bytes, stream);
    if (e != cudaSuccess)
      return (int)e;
  }
  cfg.gridDim = dim3((unsigned)tiles_n, (unsigned)splits, rows);
  e = cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda, a->B, a->ldb, a->beta, a->C,
                         a->ldc, (int)chunk, W);
  if (e == cudaSuccess && W) {
    const size_t mn = (size_t)a->M * a->N, most = (size_t)a->sm_count * 16, blocks = (mn + 255) / 256;
    e = kt_launch_kernel($(name)_sum, dim3((unsigned)(blocks < most ? blocks : most)), dim3(256), 0, stream, a->M,
                         a->N, (int)splits, a->alpha, W, a->beta, a->C, a->ldc);
  }
  if (W) {
    const cudaError_t f = cudaFreeAsync(W, stream);
    if (e == cudaSuccess)
      e = f;
  }
  return (int)e;
@ end
}
