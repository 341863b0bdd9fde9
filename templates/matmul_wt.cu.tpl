@ -- SPDX-License-Identifier: MIT
@ -- templates/matmul_wt.cu.tpl: the matmul family's warp-tiled kernel, C = alpha * A * B + beta * C.
@ -- Row-major fp32 with leading dimensions; any M, N, K >= 1.  The space (templates/matmul.space.lua)
@ -- sets the values used below.
#include "kt_launch.h"
#include "kt_matmul_split.h"
@ -- Every variant includes the staging of B: the float4 ones launch it for a B they
#include "matmul_common.cuh"
@ -- cannot read in place; the 4-byte ones read any B as it is and never launch it.

/*
 * Warp-tiled matrix multiply with a cp.async pipeline.
 *
 * A block computes a BM x BN tile of C.  Its warps split the tile into
 * warp tiles of WM x WN; the 32 lanes of a warp form a WTM x WTN grid and
 * each lane keeps TM x TN accumulators, as TM/4 x TN/4 blocks of 4 x 4
 * spaced ROW_STEP rows and COL_STEP columns apart.  So at each k the lanes
 * of a warp read WTM consecutive float4 of A and WTN consecutive float4 of B
 * from shared memory (at most 128 bytes each, one wavefront), and every value
 * read feeds TN or TM multiply-adds.
 *
 * Global memory goes straight to shared memory with cp.async, STAGES slices
 * of BK deep: while the block computes on one slice, the next STAGES - 1
 * are in flight, and no registers hold them on the way.  A is copied 4 bytes
 * at a time, so it lands transposed (As[k][m]) for float4 reads along m and
 * needs no alignment; B goes in 16-byte pieces when VEC is 4.  Such a
 * kernel reads B in place only when B is 16-byte aligned and ldb a multiple
 * of 4; for any other B its launcher first stages B into an aligned copy
 * (matmul_common.cuh).  C may have any alignment: the epilogue stores a
 * float4 where a row's address allows it and single floats elsewhere.
@ if epi == 1 then
 * Where C's rows are not all 16-byte aligned, each warp first passes its
 * rows through shared memory, so that its stores are runs of whole rows
 * (write_rows).
@ end
 *
 * Edges: copies of rows of A past M and of columns of B past N read nothing
 * and write zeros (cp.async's source size 0), as do copies past K in the
 * last slice.  Zeros add nothing to the sums, and the rows and columns of
 * C they reach are never stored.  Blocks away from the edges skip the tests.
 */
constexpr int BM = $(bm), BN = $(bn), BK = $(bk); // block tile
constexpr int TM = $(tm), TN = $(tn);            // thread tile
constexpr int WTM = $(wtm), WTN = 32 / WTM;       // lanes of a warp along M and N
constexpr int WM = WTM * TM, WN = WTN * TN;      // warp tile
constexpr int WARPS_N = BN / WN;
constexpr int THREADS = 32 * (BM / WM) * WARPS_N;
constexpr int STAGES = $(stages);                // K slices in shared memory
constexpr int VEC = $(vec);                      // floats per copy of B, per store of C
constexpr int GROUP = $(group);                  // tile rows per band of the launch order
constexpr int ROW_STEP = WM / (TM / 4), COL_STEP = WN / (TN / 4); // distance between a lane's 4x4 blocks
constexpr int LDA_S = BM + $(pad_a);             // row stride of the transposed A tile
constexpr int A_STAGE = BK * LDA_S, B_STAGE = BK * BN; // floats per stage
constexpr int A_COPIES = BM * BK / THREADS;      // 4-byte copies of A per thread per stage
constexpr int A_RSTEP = THREADS / BK;            // rows between a thread's copies of A
constexpr int B_COPIES = BK * BN / VEC / THREADS; // copies of B per thread per stage
@ -- A block with fewer threads than a row of the B slice has copies (64 threads, 128 columns of
@ -- 4-byte copies) gives each thread b_groups column groups per row.  The one-group text below is
@ -- kept as it was, so the other tiles' code stays the same and their measurements can be re-keyed.
@ if b_groups == 1 then
constexpr int B_KSTEP = THREADS / (BN / VEC);    // rows between a thread's copies of B
static_assert(A_COPIES * THREADS == BM * BK && THREADS % BK == 0, "each thread copies one column of A");
static_assert(B_COPIES * VEC * THREADS == BK * BN && THREADS % (BN / VEC) == 0, "each thread copies one column of B");
@ else
/* A row of the B slice takes BN / VEC copies, more than there are
 * threads: each thread copies B_GROUPS column groups THREADS copies apart
 * in every row of the slice. */
constexpr int B_GROUPS = $(b_groups);             // column groups per thread, in each row of the slice
static_assert(A_COPIES * THREADS == BM * BK && THREADS % BK == 0, "each thread copies one column of A");
static_assert(B_GROUPS * THREADS * VEC == BN && B_COPIES == BK * B_GROUPS,
              "each thread copies B_GROUPS column groups of every row of B");
@ end
static_assert(A_COPIES <= 32, "the rows-in-range mask has 32 bits");
static_assert(BK % 2 == 0, "the fragment buffers alternate with k, and k = 0 of every slice uses buffer 0");

// 4- or 16-byte asynchronous copies global -> shared.  The _zfill forms
// read only `src_bytes` and fill the rest with zeros (0 reads nothing).
static __device__ __forceinline__ void cp_async4(float *dst, const float *src)
{
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
               : "memory");
}
static __device__ __forceinline__ void cp_async16(float *dst, const float *src)
{
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
               : "memory");
}
static __device__ __forceinline__ void cp_async4_zfill(float *dst, const float *src, int src_bytes)
{
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(src_bytes)
               : "memory");
}
static __device__ __forceinline__ void cp_async16_zfill(float *dst, const float *src, int src_bytes)
{
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(src_bytes)
               : "memory");
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int PENDING> static __device__ __forceinline__ void cp_async_wait()
{
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

/* One thread's share of the copies, global -> shared, for every slice.
 * Thread t copies column t % BK of A, rows t / BK + i * A_RSTEP, and
@ if b_groups == 1 then
 * VEC columns of B from (t % (BN / VEC)) * VEC, rows t / (BN / VEC) +
 * i * B_KSTEP.  The pointers move BK along K per slice. */
@ else
 * VEC columns of B from t * VEC + j * THREADS * VEC (j < B_GROUPS) in
 * every row of the slice.  The pointers move BK along K per slice. */
@ end
struct copier {
  const float *a;     // this thread's first element of A in the next slice
  const float *b;     // and of B
  long long a_rstep;  // A_RSTEP rows of A, in floats
@ if b_groups == 1 then
  long long b_kstep;  // B_KSTEP rows of B, in floats
@ else
  long long b_kstep;  // a row of B, in floats
@ end
  long long b_slice;  // BK rows of B, in floats
  unsigned a_rows;    // bit i: copy i's row of A is inside M
@ if b_groups == 1 then
  int b_bytes;        // bytes of B this thread's column group holds (N edge)
@ else
  int b_bytes[B_GROUPS]; // bytes of B each of this thread's column groups holds (N edge)
@ end
  bool edge;          // the block touches M or N: copies test a_rows, b_bytes
  int k_left;         // K left from the next slice's first column

  // Copies the next slice into stage (as, bs) and moves on one slice.
  __device__ __forceinline__ void slice(float *as, float *bs, const float *A, const float *B)
  {
    const int ka = threadIdx.x % BK, ra = threadIdx.x / BK;
@ if b_groups == 1 then
    const int kb = threadIdx.x / (BN / VEC), cb = (threadIdx.x % (BN / VEC)) * VEC;
    if (!edge && k_left >= BK) { // the common case: every copy is whole
#pragma unroll
      for (int i = 0; i < A_COPIES; ++i)
        cp_async4(&as[ka * LDA_S + ra + i * A_RSTEP], a + i * a_rstep);
#pragma unroll
      for (int i = 0; i < B_COPIES; ++i)
@ if vec == 4 then
        cp_async16(&bs[(kb + i * B_KSTEP) * BN + cb], b + i * b_kstep);
@ else
        cp_async4(&bs[(kb + i * B_KSTEP) * BN + cb], b + i * b_kstep);
@ end
    } else {
      const bool a_k = ka < k_left;
#pragma unroll
      for (int i = 0; i < A_COPIES; ++i) {
        const bool in = a_k && (a_rows >> i & 1);
        cp_async4_zfill(&as[ka * LDA_S + ra + i * A_RSTEP], in ? a + i * a_rstep : A, in ? 4 : 0);
      }
#pragma unroll
      for (int i = 0; i < B_COPIES; ++i) {
        const bool in = kb + i * B_KSTEP < k_left && b_bytes > 0;
@ if vec == 4 then
        cp_async16_zfill(&bs[(kb + i * B_KSTEP) * BN + cb], in ? b + i * b_kstep : B, in ? b_bytes : 0);
@ else
        cp_async4_zfill(&bs[(kb + i * B_KSTEP) * BN + cb], in ? b + i * b_kstep : B, in ? b_bytes : 0);
@ end
      }
    }
@ else
    constexpr int GS = THREADS * VEC; // floats between a thread's column groups
    if (!edge && k_left >= BK) { // the common case: every copy is whole
#pragma unroll
      for (int i = 0; i < A_COPIES; ++i)
        cp_async4(&as[ka * LDA_S + ra + i * A_RSTEP], a + i * a_rstep);
#pragma unroll
      for (int k = 0; k < BK; ++k)
#pragma unroll
        for (int j = 0; j < B_GROUPS; ++j)
@   if vec == 4 then
          cp_async16(&bs[k * BN + threadIdx.x * VEC + j * GS], b + k * b_kstep + j * GS);
@   else
          cp_async4(&bs[k * BN + threadIdx.x * VEC + j * GS], b + k * b_kstep + j * GS);
@   end
    } else {
      const bool a_k = ka < k_left;
#pragma unroll
      for (int i = 0; i < A_COPIES; ++i) {
        const bool in = a_k && (a_rows >> i & 1);
        cp_async4_zfill(&as[ka * LDA_S + ra + i * A_RSTEP], in ? a + i * a_rstep : A, in ? 4 : 0);
      }
#pragma unroll
      for (int k = 0; k < BK; ++k)
#pragma unroll
        for (int j = 0; j < B_GROUPS; ++j) {
          const bool in = k < k_left && b_bytes[j] > 0;
          float *const dst = &bs[k * BN + threadIdx.x * VEC + j * GS];
          const float *const src = in ? b + k * b_kstep + j * GS : B;
@   if vec == 4 then
          cp_async16_zfill(dst, src, in ? b_bytes[j] : 0);
@   else
          cp_async4_zfill(dst, src, in ? b_bytes[j] : 0);
@   end
        }
    }
@ end
    a += BK;
    b += b_slice;
    k_left -= BK;
  }
};

// Shared -> registers: this lane's TM values of A and TN values of B at depth k.
static __device__ __forceinline__ void load_frags(float (&a)[TM], float (&b)[TN], const float *as, const float *bs,
                                                  int k)
{
#pragma unroll
  for (int g = 0; g < TM / 4; ++g) {
    const float4 x = *reinterpret_cast<const float4 *>(&as[k * LDA_S + g * ROW_STEP]);
    a[g * 4 + 0] = x.x; a[g * 4 + 1] = x.y; a[g * 4 + 2] = x.z; a[g * 4 + 3] = x.w;
  }
#pragma unroll
  for (int g = 0; g < TN / 4; ++g) {
    const float4 x = *reinterpret_cast<const float4 *>(&bs[k * BN + g * COL_STEP]);
    b[g * 4 + 0] = x.x; b[g * 4 + 1] = x.y; b[g * 4 + 2] = x.z; b[g * 4 + 3] = x.w;
  }
}

/* acc += a b^T, TM x TN multiply-adds.  The order decides which operand
 * the next FMA can take from the register reuse cache instead of the
 * register file.  Row by row, a[i] repeats along a row; serpentine, the
 * rows alternate direction, so b[j] also repeats where one row meets the
 * next. */
static __device__ __forceinline__ void outer_product(float (&acc)[TM][TN], const float (&a)[TM], const float (&b)[TN])
{
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int jj = 0; jj < TN; ++jj) {
@ if fo == 1 then
      const int j = i % 2 ? TN - 1 - jj : jj;
@ else
      const int j = jj;
@ end
      acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
}

/* crow[c .. c+3] = v + beta * crow[c .. c+3], the columns before N only,
 * never reading C when beta == 0 (it may hold NaN).  v holds alpha * sums.
@ if vec == 4 or epi == 1 then
 * c is a multiple of 4, so whether crow + c takes a float4 depends on the
 * row alone: every row when C is aligned and ldc a multiple of 4, every
 * other row or one in four when ldc is not, none when C is misaligned.
@ end
 */
static __device__ __forceinline__ void store4(float *crow, int c, int N, float (&v)[4], float beta)
{
@ if vec == 4 or epi == 1 then
  if (c + 4 <= N && ((size_t)(crow + c) & 15) == 0) {
    float4 *p = reinterpret_cast<float4 *>(crow + c);
    if (beta != 0.0f) {
      const float4 o = *p;
      v[0] += beta * o.x; v[1] += beta * o.y; v[2] += beta * o.z; v[3] += beta * o.w;
    }
    *p = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
@ end
#pragma unroll
  for (int j = 0; j < 4; ++j)
    if (c + j < N)
      crow[c + j] = beta == 0.0f ? v[j] : v[j] + beta * crow[c + j];
}

/* Epilogue: C = alpha * acc + beta * C, never reading C when beta == 0.
 * acc[i][j] is C's element (r0 + (i/4)*ROW_STEP + i%4, c0 + (j/4)*COL_STEP + j%4).
@ if split > 1 then
 * With split-K (W non-null) the raw sums go to the workspace instead, row
 * stride N, and the reduction kernel applies alpha and beta.
@ end
 */
static __device__ __forceinline__ void write_c(const float (&acc)[TM][TN], int r0, int c0, int M, int N, float alpha,
                                               float beta, float *__restrict__ C, long long ldc, float *__restrict__ W)
{
@ if split > 1 then
  if (W) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int r = r0 + (i / 4) * ROW_STEP + i % 4;
      if (r >= M)
        continue;
#pragma unroll
      for (int g = 0; g < TN / 4; ++g) {
        const int c = c0 + g * COL_STEP;
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (c + j < N)
            W[(size_t)r * N + c + j] = acc[i][g * 4 + j];
      }
    }
    return;
  }
@ end
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = r0 + (i / 4) * ROW_STEP + i % 4;
    if (r >= M)
      continue;
    float *crow = C + (size_t)r * ldc;
#pragma unroll
    for (int g = 0; g < TN / 4; ++g) {
      const int c = c0 + g * COL_STEP;
      float v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        v[j] = alpha * acc[i][g * 4 + j];
      store4(crow, c, N, v, beta);
    }
  }
}

@ if epi == 1 then
/* The epilogue where C's rows are not all 16-byte aligned (ldc not a
 * multiple of 4, or C off 16 bytes).  Stored from registers, each store of
 * a warp would be 8 floats 16 bytes apart in each of WTM rows: 8 bytes into
 * each of 4 WTM sectors, written in part four times over.  So the
 * warp passes its tile through shared memory (buf, WTM x WN floats: the
 * rows its lanes hold for one i), and each store is then 32 consecutive
 * floats of one row, 4 or 5 sectors, written whole.  As many stores per
 * lane as before; C = alpha * acc + beta * C as store4 computes it.
 * (wrow, wcol): the warp tile's first element in C. */
static __device__ __forceinline__ void write_rows(const float (&acc)[TM][TN], float *buf, int wrow, int wcol,
                                                  int lane, int M, int N, float alpha, float beta,
                                                  float *__restrict__ C, long long ldc)
{
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    // Lane l holds, for this i, row l / WTN of buf at columns g * COL_STEP + (l % WTN) * 4 + 0..3.
#pragma unroll
    for (int g = 0; g < TN / 4; ++g)
      *reinterpret_cast<float4 *>(&buf[(lane / WTN) * WN + g * COL_STEP + (lane % WTN) * 4]) =
          make_float4(alpha * acc[i][g * 4], alpha * acc[i][g * 4 + 1], alpha * acc[i][g * 4 + 2],
                      alpha * acc[i][g * 4 + 3]);
    __syncwarp();
#pragma unroll
    for (int q = 0; q < WTM; ++q) {
      const int r = wrow + (i / 4) * ROW_STEP + q * 4 + i % 4;
      if (r >= M)
        continue;
      float *crow = C + (size_t)r * ldc;
#pragma unroll
      for (int t = 0; t < WN / 32; ++t) {
        const int c = wcol + t * 32 + lane;
        const float v = buf[q * WN + t * 32 + lane];
        if (c < N)
          crow[c] = beta == 0.0f ? v : v + beta * crow[c];
      }
    }
    __syncwarp(); // buf is read before the next i overwrites it
  }
}
static_assert(WN % 32 == 0 && COL_STEP == WTN * 4 && ROW_STEP == WTM * 4, "a warp's rows of one i are whole");

@ end
@ if cluster > 1 then
/*
 * Split-K inside a cluster: the CL blocks of a cluster (along gridDim.y)
 * compute the same C tile over CL chunks of K, so a tile that alone would
 * leave SMs idle is worked on by CL blocks.  Each block parks its partial
 * tile in its own shared memory; after a cluster barrier, block z sums rows
 * [z*BM/CL, (z+1)*BM/CL) of all CL partial tiles, reading the others
 * through distributed shared memory in the fixed order 0, 1, ..., CL - 1,
 * and writes them to C.  The result does not depend on timing, and no
 * workspace or second kernel is needed.
 */
#include <cooperative_groups.h>
constexpr int CL = $(cluster);      // blocks per cluster = K chunks
constexpr int LDR = BN + 4;    // row stride of the parked partial tile
constexpr int RED_ROWS = BM / CL; // rows each block finishes
static_assert(RED_ROWS * CL == BM, "the tile's rows split evenly over the cluster");

static __device__ __forceinline__ void cluster_reduce(const float (&acc)[TM][TN], float *red, int wr, int wc,
                                                      int row0, int col0, int M, int N, float alpha, float beta,
                                                      float *__restrict__ C, long long ldc)
{
  namespace cg = cooperative_groups;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int g = 0; g < TN / 4; ++g)
      *reinterpret_cast<float4 *>(&red[(wr + (i / 4) * ROW_STEP + i % 4) * LDR + wc + g * COL_STEP]) =
          make_float4(acc[i][g * 4], acc[i][g * 4 + 1], acc[i][g * 4 + 2], acc[i][g * 4 + 3]);
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync(); // every partial tile is parked and visible to the cluster
  const int z = (int)cluster.block_rank();
  const float *parts[CL];
#pragma unroll
  for (int q = 0; q < CL; ++q)
    parts[q] = cluster.map_shared_rank(red, q);
  for (int e = threadIdx.x; e < RED_ROWS * (BN / 4); e += THREADS) {
    const int r = z * RED_ROWS + e / (BN / 4), c = (e % (BN / 4)) * 4;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int q = 0; q < CL; ++q) {
      const float4 x = *reinterpret_cast<const float4 *>(&parts[q][r * LDR + c]);
      sum.x += x.x; sum.y += x.y; sum.z += x.z; sum.w += x.w;
    }
    const int gr = row0 + r, gc = col0 + c;
    if (gr >= M)
      continue;
    float v[4] = {alpha * sum.x, alpha * sum.y, alpha * sum.z, alpha * sum.w};
    store4(C + (size_t)gr * ldc, gc, N, v, beta);
  }
  cluster.sync(); // no block leaves while another may still read its tile
}

@ end
@ if split > 1 then
/*
 * Split-K: when M x N has too few tiles to fill the GPU but K is long, the
 * K range is cut into gridDim.y chunks of k_chunk.  Each block writes its
 * partial tile to a workspace W[z][M][N]; a second kernel adds the chunks
 * in a fixed order (see the two reductions below) and applies alpha and
 * beta.  No atomics: the result is the same on every run on a given GPU
 * (which reduction runs depends on its SM count).
 */
@ end
extern "C" __global__ void __launch_bounds__(THREADS$(occ > 0 and (", " .. occ) or ""))
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C,
        long long ldc, int tiles_m, int tiles_n$((split > 1 or cluster > 1) and ", int k_chunk, float *__restrict__ W" or ""))
{
  extern __shared__ float4 smem4[];
  float *const smem = reinterpret_cast<float *>(smem4);

  /* Launch order: the 1-D grid is cut into bands of GROUP tile rows and each
   * band is walked column by column.  Blocks that run at the same time then
   * share the same few B columns and A rows, which stay in L2. */
  const int per_band = GROUP * tiles_n;
  const int first_m = (int)(blockIdx.x / per_band) * GROUP;
  const int band_rows = min(GROUP, tiles_m - first_m);
  const int local = blockIdx.x % per_band;
  const int row0 = (first_m + local % band_rows) * BM;
  const int col0 = (local / band_rows) * BN;

@ if split > 1 or cluster > 1 then
  // This block's chunk of K: [k_begin, K), K lowered to the chunk's end.
  const int k_begin = blockIdx.y * k_chunk;
  if (k_chunk < K - k_begin) // k_begin + k_chunk may pass INT_MAX on the last chunk
    K = k_begin + k_chunk;
@   if split > 1 then
  float *const w = gridDim.y > 1 ? W + (size_t)blockIdx.y * M * N : nullptr;
@   else
  float *const w = nullptr;
  (void)W;
@   end
@ else
  const int k_begin = 0;
  float *const w = nullptr;
@ end
  const int steps = (K - k_begin + BK - 1) / BK;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      acc[i][j] = 0.0f;

  float *const As = smem;                   // [STAGES][BK][LDA_S]
  float *const Bs = smem + STAGES * A_STAGE; // [STAGES][BK][BN]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wr = (warp / WARPS_N) * WM + (lane / WTN) * 4; // this lane's first row in the tile
  const int wc = (warp % WARPS_N) * WN + (lane % WTN) * 4; // and first column

  copier cp;
  {
    const int ra = row0 + (int)threadIdx.x / BK;
@ if b_groups == 1 then
    const int cb = col0 + (int)(threadIdx.x % (BN / VEC)) * VEC;
    cp.a = A + (size_t)(ra < M ? ra : 0) * lda + k_begin + threadIdx.x % BK;
    cp.b = B + (size_t)(k_begin + threadIdx.x / (BN / VEC)) * ldb + (cb < N ? cb : 0);
    cp.a_rstep = (long long)A_RSTEP * lda;
    cp.b_kstep = (long long)B_KSTEP * ldb;
@ else
    const int cb = col0 + (int)threadIdx.x * VEC;
    cp.a = A + (size_t)(ra < M ? ra : 0) * lda + k_begin + threadIdx.x % BK;
    cp.b = B + (size_t)k_begin * ldb + (cb < N ? cb : 0); // groups past N read nothing (b_bytes 0)
    cp.a_rstep = (long long)A_RSTEP * lda;
    cp.b_kstep = ldb;
@ end
    cp.b_slice = (long long)BK * ldb;
    cp.a_rows = 0;
#pragma unroll
    for (int i = 0; i < A_COPIES; ++i)
      cp.a_rows |= (unsigned)(ra + i * A_RSTEP < M) << i;
@ if b_groups == 1 then
    cp.b_bytes = cb >= N ? 0 : (N - cb >= VEC ? 4 * VEC : 4 * (N - cb));
@ else
#pragma unroll
    for (int j = 0; j < B_GROUPS; ++j) {
      const int c = cb + j * THREADS * VEC;
      cp.b_bytes[j] = c >= N ? 0 : (N - c >= VEC ? 4 * VEC : 4 * (N - c));
    }
@ end
    cp.edge = row0 + BM > M || col0 + BN > N;
    cp.k_left = K - k_begin;
  }

  /* Fill every stage; each slice is one commit group (empty past the end),
   * so "slice s has landed" is "at most (groups committed) - s - 1 pending". */
#pragma unroll
  for (int s = 0; s < STAGES; ++s) {
    if (s < steps)
      cp.slice(As + s * A_STAGE, Bs + s * B_STAGE, A, B);
    cp_async_commit();
  }
  cp_async_wait<STAGES - 1>();
  __syncthreads();

  /* The fragments are double-buffered: while the FMAs of depth k run on one
   * set, the loads of depth k + 1 fill the other, so shared-memory latency
   * hides behind TM x TN FMAs of the same warp.  At the last k of a slice
   * the next fragments come from the next stage; the barrier before them
   * (1) makes that stage's copies visible to every thread and (2) shows that
   * every thread has read the whole current stage, since its last
   * fragments were loaded one k earlier, so the stage can be refilled. */
  int stage = 0;
  const float *as = As + wr, *bs = Bs + wc;
  float a[2][TM], b[2][TN];
  if (steps > 0)
    load_frags(a[0], b[0], as, bs, 0);
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k == BK - 1) {
        if (s + 1 == steps)
          break; // after the FMAs below: see the end of the loop body
        // Slices s + 1 .. s + STAGES - 1 were issued; s + 1 must have landed.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        if (s + STAGES < steps) // refill the stage just read with slice s + STAGES
          cp.slice(As + stage * A_STAGE, Bs + stage * B_STAGE, A, B);
        cp_async_commit();
        stage = stage + 1 == STAGES ? 0 : stage + 1;
        as = As + stage * A_STAGE + wr;
        bs = Bs + stage * B_STAGE + wc;
      }
      load_frags(a[(k + 1) & 1], b[(k + 1) & 1], as, bs, (k + 1) % BK);
      outer_product(acc, a[k & 1], b[k & 1]);
    }
  }
  // The last slice's last depth: its fragments are loaded, its FMAs not yet
  // run.  (No slice at all: an empty chunk of split K adds nothing.)
  if (steps > 0)
    outer_product(acc, a[(BK - 1) & 1], b[(BK - 1) & 1]);
  cp_async_wait<0>(); // no copy may land after the block has exited
@ if cluster > 1 then
  __syncthreads(); // the stages are free: the partial tile goes there
  (void)w;
  cluster_reduce(acc, smem, wr, wc, row0, col0, M, N, alpha, beta, C, ldc);
@ elseif epi == 1 then
  /* C, or split-K's chunk of the workspace (row stride N, the raw sums):
   * a float4 at a time where every row is 16-byte aligned, else each warp's
   * rows through shared memory (write_rows). */
  float *const out = w ? w : C;
  const long long ld = w ? (long long)N : ldc;
  const float scale = w ? 1.0f : alpha, keep = w ? 0.0f : beta;
  if (((size_t)out & 15) == 0 && ld % 4 == 0) {
    write_c(acc, row0 + wr, col0 + wc, M, N, scale, keep, out, ld, nullptr);
  } else {
    __syncthreads(); // every warp is done with the stages: its rows go there
    write_rows(acc, smem + warp * (WTM * WN), row0 + (warp / WARPS_N) * WM, col0 + (warp % WARPS_N) * WN, lane, M, N,
               scale, keep, out, ld);
  }
@ else
  write_c(acc, row0 + wr, col0 + wc, M, N, alpha, beta, C, ldc, w);
@ end
}

@ if split > 1 then
/* Split-K reduction: C = alpha * sum_z W[z] + beta * C, each element's
 * partial sums added in a fixed order, so the result is the same on every
 * run.  Two shapes of the same sum:
 *
 * _reduce: one thread per element adds z = 0, 1, ..., splits - 1.  Right
 * for a few splits of a large C: every thread streams whole rows of W.
 *
 * _reduce_wide: for many splits of a small C (64 x 64 x 65536 has 4096
 * elements and 256 splits).  A block takes RED_E consecutive elements at a
 * time; its RED_Z groups of RED_E threads each add every RED_Z-th partial
 * (z = g, g + RED_Z, ...), and the groups' sums are then added in the order
 * g = 0, 1, ....  So the splits are read by RED_Z times more threads than
 * there are elements. */
static __device__ __forceinline__ void store_c(float *__restrict__ C, long long ldc, int N, size_t e, float alpha,
                                               float sum, float beta)
{
  float *c = C + (e / N) * ldc + e % N;
  *c = beta == 0.0f ? alpha * sum : alpha * sum + beta * *c;
}

extern "C" __global__ void __launch_bounds__(256)
$(name)_reduce(int M, int N, int splits, float alpha, const float *__restrict__ W, float beta,
               float *__restrict__ C, long long ldc)
{
  const size_t mn = (size_t)M * N;
  for (size_t e = (size_t)blockIdx.x * 256 + threadIdx.x; e < mn; e += (size_t)gridDim.x * 256) {
    float sum = 0.0f;
#pragma unroll 4
    for (int z = 0; z < splits; ++z)
      sum += W[(size_t)z * mn + e];
    store_c(C, ldc, N, e, alpha, sum, beta);
  }
}

constexpr int RED_E = 32, RED_Z = 8;
static_assert(RED_E * RED_Z == 256, "both reductions run 256 threads a block");
extern "C" __global__ void __launch_bounds__(RED_E * RED_Z)
$(name)_reduce_wide(int M, int N, int splits, float alpha, const float *__restrict__ W, float beta,
                    float *__restrict__ C, long long ldc)
{
  __shared__ float part[RED_Z][RED_E];
  const size_t mn = (size_t)M * N;
  const int e_in = threadIdx.x % RED_E, g = threadIdx.x / RED_E;
  for (size_t e0 = (size_t)blockIdx.x * RED_E; e0 < mn; e0 += (size_t)gridDim.x * RED_E) {
    const size_t e = e0 + e_in;
    float sum = 0.0f;
    if (e < mn) {
#pragma unroll 8
      for (int z = g; z < splits; z += RED_Z)
        sum += W[(size_t)z * mn + e];
    }
    part[g][e_in] = sum;
    __syncthreads();
    if (g == 0 && e < mn) {
#pragma unroll
      for (int q = 1; q < RED_Z; ++q)
        sum += part[q][e_in];
      store_c(C, ldc, N, e, alpha, sum, beta);
    }
    __syncthreads(); // part is reused by the next elements
  }
}

constexpr int SPLIT = $(split); // most K chunks

/* Blocks of this kernel that fit one SM of the current device, asked of
 * the device once (after the launcher's shared-memory opt-in): split-K
 * fills at most four waves of them, and counts an SM's last round busy
 * from a share of them (kt_matmul_splits_balanced).  Dispatch's cost model counts the same
 * number from the kernel's compiled registers (runtime/resident.c). */
static int blocks_per_sm(void)
{
  static kt_launch_once once;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= KT_LAUNCH_MAX_DEVICES)
    return 1;
  int n = __atomic_load_n(&once.per_sm[dev], __ATOMIC_RELAXED);
  if (n == 0) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, $(name), THREADS, $(smem_dynamic)) != cudaSuccess) {
      cudaGetLastError(); // not sticky: clear it, and split as for one block per SM
      return 1;
    }
    n = n < 1 ? 1 : n;
    __atomic_store_n(&once.per_sm[dev], n, __ATOMIC_RELAXED);
  }
  return n;
}

@ end
/* The kernel (and split-K's reduction) on the B that a holds. */
static int launch(const kt_matmul_args *a, cudaStream_t stream)
{
  const long long tiles_m = (a->M + BM - 1) / BM, tiles_n = (a->N + BN - 1) / BN;
  if (tiles_m * tiles_n > 0x7fffffffLL || tiles_n * GROUP > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(tiles_m * tiles_n));
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = $(smem_dynamic);
  cfg.stream = stream;
@ if smem_dynamic > 48 * 1024 then
  /* Over 48 KB of shared memory needs an opt-in, once per device. */
  static kt_launch_once once;
  const cudaError_t oe = kt_launch_prepare(&once, (const void *)$(name), $(smem_dynamic), 0, 0, nullptr);
  if (oe != cudaSuccess)
    return (int)oe;
@ end
@ if split > 1 then
  /* Up to as many chunks as fill four waves, SPLIT at most, with whole BK
   * steps each and a bounded workspace, as many of those as finish first
   * (kt_matmul_splits_balanced, runtime/kt_matmul_split.h; dispatch's cost
   * model predicts the same split); one chunk needs no workspace. */
  const size_t tile_bytes = (size_t)a->M * a->N * sizeof(float);
  long long chunk = 0;
  const long long splits =
      kt_matmul_splits_balanced(a->M, a->N, a->K, BM, BN, BK, SPLIT, a->sm_count, blocks_per_sm(), &chunk);
  const int k_chunk = (int)chunk;
  cfg.gridDim.y = (unsigned)splits;
  float *W = nullptr;
  cudaError_t e;
  if (splits > 1) {
    e = a->pool ? cudaMallocFromPoolAsync((void **)&W, splits * tile_bytes, (cudaMemPool_t)a->pool, stream)
                : cudaMallocAsync((void **)&W, splits * tile_bytes, stream);
    if (e != cudaSuccess)
      return (int)e;
  }
  e = cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda, a->B, a->ldb,
                         a->beta, a->C, a->ldc, (int)tiles_m, (int)tiles_n, k_chunk, W);
  if (e == cudaSuccess && splits > 1) {
    /* Many splits of a small C: the wide reduction; else one thread per
     * element.  Either way a few waves of blocks at most, striding on. */
    cudaLaunchConfig_t red = {};
    const size_t mn = (size_t)a->M * a->N, most = (size_t)a->sm_count * 16;
    const bool wide = splits >= 2 * RED_Z && mn < (size_t)a->sm_count * 256 * 4;
    const size_t blocks = wide ? (mn + RED_E - 1) / RED_E : (mn + 255) / 256;
    red.gridDim = dim3((unsigned)(blocks < most ? blocks : most));
    red.blockDim = dim3(256);
    red.stream = stream;
    e = cudaLaunchKernelEx(&red, wide ? $(name)_reduce_wide : $(name)_reduce, a->M, a->N, (int)splits, a->alpha,
                           (const float *)W, a->beta, a->C, a->ldc);
  }
  if (W) {
    const cudaError_t f = cudaFreeAsync(W, stream);
    if (e == cudaSuccess)
      e = f;
  }
  return (int)e;
@ elseif cluster > 1 then
  // CL chunks of whole BK steps, one per block of the cluster (a chunk may be empty).
  const long long steps = (a->K + BK - 1) / BK;
  const int k_chunk = (int)((steps + CL - 1) / CL) * BK;
  cfg.gridDim.y = CL;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 1;
  attr[0].val.clusterDim.y = CL;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda, a->B, a->ldb,
                                 a->beta, a->C, a->ldc, (int)tiles_m, (int)tiles_n, k_chunk, (float *)nullptr);
@ else
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->M, a->N, a->K, a->alpha, a->A, a->lda,
                                 a->B, a->ldb, a->beta, a->C, a->ldc, (int)tiles_m, (int)tiles_n);
@ end
}

@ if vec == 4 then
/*
 * B in place when it is 16-byte aligned with ldb a multiple of 4; any other
 * B is first staged into an aligned copy from the pool (matmul_common.cuh),
 * kt_matmul_stage_rows of K at a time: C = alpha A B + beta C becomes, per
 * panel p of K, C = alpha A_p B_p + (p ? 1 : beta) C, the panels in order.
 * The copy is taken once and given back after the last panel's kernel.
 * (Launched as a programmatic dependent of the staging, so that it could
 * start early, the kernel ran 1.1 to 3 times slower on an H100: plain
 * stream order.)
 */
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  if (kt_matmul_b_in_place(a->B, a->ldb))
    return launch(a, stream);
  const long long ldw = kt_matmul_stage_ld(a->N), rows = kt_matmul_stage_rows(a->K, a->N);
  if (rows < 1)
    return (int)cudaErrorInvalidValue; // one row of B is over the limit: dispatch never sends such a call
  float *W = nullptr;
  const size_t bytes = (size_t)(rows * ldw) * sizeof(float);
  cudaError_t e = a->pool ? cudaMallocFromPoolAsync((void **)&W, bytes, (cudaMemPool_t)a->pool, stream)
                          : cudaMallocAsync((void **)&W, bytes, stream);
  if (e != cudaSuccess)
    return (int)e;
  kt_matmul_args p = *a;
  p.B = W;
  p.ldb = ldw;
  for (long long k0 = 0; k0 < a->K && e == cudaSuccess; k0 += rows) {
    p.K = (int)(a->K - k0 < rows ? a->K - k0 : rows);
    p.A = a->A + k0;
    p.beta = k0 ? 1.0f : a->beta;
    e = matmul_stage_launch(a->B + k0 * a->ldb, a->ldb, p.K, a->N, ldw, W, a->sm_count, stream);
    if (e == cudaSuccess)
      e = (cudaError_t)launch(&p, stream);
  }
  const cudaError_t f = cudaFreeAsync(W, stream);
  return (int)(e != cudaSuccess ? e : f);
}
@ else
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  return launch((const kt_matmul_args *)args, stream);
}
@ end
