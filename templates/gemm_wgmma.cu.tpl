@ -- templates/gemm_wgmma.cu.tpl: the gemm family's Hopper tensor-core kernel,
@ -- C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b], FP32 C, for one input
@ -- type (bf16, f16 or tf32).  The space (templates/gemm.space.lua) sets the
@ -- values used below; templates/gemm_common.cuh holds what the gemm kernels
@ -- share.  Built for sm_90a (wgmma, setmaxnreg).
#include <cuda.h>
#include <cudaTypedefs.h>
#include "kt_launch.h"
#include "gemm_common.cuh"

/*
 * Warp-specialised wgmma kernel with a TMA + mbarrier pipeline.
 *
 * A block computes a BM x BN tile of C for one batch entry.  Warpgroup 0 is
 * the producer: one of its threads issues the bulk tensor copies (TMA) of
 * a BM x BK slice of A and a BN x BK slice of B into stage s of STAGES,
 * which complete on the stage's `full` mbarrier.  Warpgroups 1..WG are the
 * consumers: each owns BM / WG rows of the tile, waits for `full`, issues
 * wgmma.mma_async on the stage straight from shared memory, and once the
 * tensor cores are done reading it, arrives on the stage's `empty` mbarrier,
 * which the producer waits for before it refills the stage.  setmaxnreg
 * moves registers from the producer (which needs few) to the consumers
 * (which hold the accumulators).
 *
 * Layouts.  The kernel is instantiated per operand layout: TA = 0 reads A
 * K-major (op N: M x K, K contiguous), TA = 1 MN-major (op T: K x M, M
 * contiguous); TB = 0 reads B K-major (op T: N x K), TB = 1 MN-major (op N:
 * K x N).  wgmma reads 16-bit MN-major operands itself (its transpose
 * bits), so BF16 and FP16 run every op pair in place; TF32 it reads only
 * K-major, so the launcher repacks a TF32 MN-major operand into K-major
 * scratch first (gemm_pack), as it does any operand whose rows or base TMA
 * cannot address (not 16-byte aligned).  Every call is served.  Edges need
 * no code: TMA fills what lies outside the tensor with zeros, which add
 * nothing, and the epilogue stores only inside C.
 *
 * Tiles.  Block x of the grid computes tiles x, x + gridDim.x, ... of the
 * launch order (below), batch entries one after another.  Non-persistent
 * (PERSIST 0), the grid has a block per tile and each block one tile;
 * persistent, the grid has OCC blocks per SM and each loops over its
 * tiles, its producer filling the next tile's stages while the consumers
 * store the last one, so that the epilogue overlaps the loads.
 *
 * Split K.  Where the tiles (times the batch) leave SMs idle, the launcher
 * splits K into up to SPLIT chunks (gridDim.z), each block summing its
 * chunk's k slices into a workspace slot of its own.  A second kernel
 * ($(name)_reduce) then adds the slots of each tile in chunk order and runs
 * the epilogue, spread over the whole GPU; the sum does not depend on which
 * block finished when.
 *
 * Shared memory: rows of 128 bytes, written by TMA with the 128-byte
 * swizzle that wgmma's descriptors name, so that the tensor cores read
 * them without bank conflicts.  K-major, a row is the BK elements of one
 * row of the tile; MN-major, a row is 64 consecutive rows (or columns) of
 * the tile at one k, the tile being BM / 64 (BN / 64) chunks of BK such
 * rows, each chunk one TMA box.  Each tile is a multiple of 1024 bytes (8
 * rows, the swizzle's period) and starts 1024-aligned.
 */
constexpr int BM = $(bm), BN = $(bn), BK = $(bk); // block tile; BK elements = 128 bytes
constexpr int WG = $(wg);                          // consumer warpgroups
constexpr int STAGES = $(stages);
constexpr int GROUP = $(group);                    // tile rows per band of the launch order
constexpr int OCC = $(occ);                        // blocks per SM (launch bounds, shared memory, registers)
constexpr int SPLIT = $(split);                    // most chunks K is split into (1: never)
constexpr int PERSIST = $(persist);                // 1: OCC blocks per SM loop over the tiles
constexpr int RM = BM / WG;                        // rows of the tile per consumer
constexpr int MI = RM / 64;                        // m64 wgmmas per consumer and k step
constexpr int KI = $(ki);                          // K of one wgmma instruction
constexpr int EPI_LD = 40;                         // floats per row of an epilogue chunk (32 + 8)
constexpr int THREADS = 128 * (WG + 1);
constexpr int ES = $(es);                          // bytes per input element
constexpr int A_BYTES = BM * BK * ES, B_BYTES = BN * BK * ES, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int NREG = BN / 2;                       // accumulators per thread per m64 tile
constexpr int TYPE = $(type_id);
constexpr int CHUNK_BYTES = 64 * BK * ES;          // one MN-major chunk: 64 rows (or columns) x BK
static_assert(BK * ES == 128, "a slice row is one 128-byte swizzle row");
static_assert(A_BYTES % 1024 == 0 && B_BYTES % 1024 == 0, "tiles keep the swizzle's 1024-byte alignment");
static_assert(RM % 64 == 0, "each consumer owns whole m64 tiles");

// ---- mbarriers ---------------------------------------------------------
static __device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
static __device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes)
{
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void mbar_arrive(unsigned bar)
{
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
static __device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
  unsigned done;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

// One TMA copy of the box at (x, y, batch) of `map` into shared memory at
// dst, completing on bar: x is the contiguous coordinate (k of a K-major
// map, the row of an MN-major one).
static __device__ __forceinline__ void tma_load(unsigned dst, const CUtensorMap *map, int x, int y, int batch,
                                                unsigned bar)
{
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
               "l"((unsigned long long)map), "r"(x), "r"(y), "r"(batch), "r"(bar)
               : "memory");
}

// Load one operand's slice kt of `rows` rows starting at row0 into dst:
// K-major, one box of BK x rows; MN-major, rows / 64 boxes of 64 x BK, one
// per chunk.
template <int MN, int ROWS>
static __device__ __forceinline__ void tma_slice(unsigned dst, const CUtensorMap *map, int kt, int row0, int batch,
                                                 unsigned bar)
{
  if constexpr (MN) {
#pragma unroll
    for (int i = 0; i < ROWS / 64; ++i)
      tma_load(dst + i * CHUNK_BYTES, map, row0 + 64 * i, kt * BK, batch, bar);
  } else {
    tma_load(dst, map, kt * BK, row0, batch, bar);
  }
}

// ---- wgmma ---------------------------------------------------------------
// A shared-memory matrix descriptor for rows of 128 bytes with the 128-byte
// swizzle.  K-major: 8-row groups (of the tile's rows) 1024 bytes apart
// (the stride offset); the leading offset is unused.  MN-major: 8-row
// groups (of k) 1024 bytes apart (the stride offset), and chunks of 64
// rows (or columns) CHUNK_BYTES apart (the leading offset).
template <int MN> static __device__ __forceinline__ unsigned long long smem_desc(unsigned addr)
{
  const unsigned long long lead = MN ? CHUNK_BYTES >> 4 : 1;
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (lead << 16) | (64ull << 32) | (1ull << 62);
}

// The descriptor of k step kk (KI elements of K) of the operand tile at
// `tile`, from its row `row` (a multiple of 64): K-major, KI elements into
// each 128-byte row (the hardware applies the swizzle to the address);
// MN-major, KI rows of 128 bytes on, in the row's chunk.
template <int MN> static __device__ __forceinline__ unsigned long long operand_desc(unsigned tile, int row, int kk)
{
  if constexpr (MN)
    return smem_desc<1>(tile + (row / 64) * CHUNK_BYTES + kk * KI * 128);
  else
    return smem_desc<0>(tile + row * 128 + kk * KI * ES);
}

// d += A (64 x KI, descriptor da) * B (BN x KI, descriptor db)^T.  The
// predicate is wgmma's scale-d: 1 adds to d rather than overwriting it.
// TA, TB: wgmma's transpose bits (1: that operand is MN-major; 16-bit
// types only).
template <int TA, int TB>
static __device__ __forceinline__ void wgmma(float (&d)[NREG], unsigned long long da, unsigned long long db)
{
  static_assert(KI == 16 || (TA == 0 && TB == 0), "wgmma reads TF32 K-major only");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %$(bn // 2 + 2), 0;\n"
               "wgmma.mma_async.sync.aligned.m64n$(bn)k$(ki).f32.$(ptx_type).$(ptx_type)\n"
               "{"
@ for i = 0, bn // 2 - 1 do
               "%$(i)$(i < bn // 2 - 1 and ', ' or '')"
@ end
               "},\n"
               " %$(bn // 2), %$(bn // 2 + 1), p, 1, 1$(ki == 16 and ', %' .. (bn // 2 + 3) .. ', %' .. (bn // 2 + 4) or '');\n}"
               : "+f"(d[0])
@ for i = 1, bn // 2 - 1 do
                 , "+f"(d[$(i)])
@ end
               : "l"(da), "l"(db), "r"(1)$(ki == 16 and ', "n"(TA), "n"(TB)' or ''));
}
static __device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
static __device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> static __device__ __forceinline__ void wgmma_wait()
{
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Tile `tile` of the launch order: bands of GROUP tile rows, column by
// column within a band, so that the blocks running together share their B
// slices in L2.
static __device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int &tile_m, int &tile_n)
{
  const int per_band = GROUP * tiles_n, band = tile / per_band;
  const int first_m = band * GROUP, rows_in_band = min(GROUP, tiles_m - first_m);
  tile_m = first_m + (tile % per_band) % rows_in_band;
  tile_n = (tile % per_band) / rows_in_band;
}

// C[row][col], C[row][col + 1] = alpha * (x, y) + beta * C (beta 0: C is
// not read, it may hold NaN), within M x N; `pairs`: one 8-byte store.
static __device__ __forceinline__ void store_pair(float *Cb, long long ldc, int row, int col, int M, int N, float x,
                                                  float y, float alpha, float beta, bool pairs)
{
  if (row >= M)
    return;
  float *crow = Cb + (long long)row * ldc;
  x *= alpha, y *= alpha;
  if (pairs && col + 1 < N) {
    float2 *p = (float2 *)(crow + col);
    if (beta != 0.0f) {
      const float2 o = *p;
      x += beta * o.x;
      y += beta * o.y;
    }
    *p = make_float2(x, y);
  } else {
    if (col < N)
      crow[col] = beta != 0.0f ? x + beta * crow[col] : x;
    if (col + 1 < N)
      crow[col + 1] = beta != 0.0f ? y + beta * crow[col + 1] : y;
  }
}

// C[row][col ... col + 3] = alpha * v + beta * C (as store_pair); `quads`:
// one 16-byte load and store where all four lie within N.
static __device__ __forceinline__ void store_quad(float *Cb, long long ldc, int row, int col, int M, int N, float4 v,
                                                  float alpha, float beta, bool quads)
{
  if (row >= M)
    return;
  float *p = Cb + (long long)row * ldc + col;
  if (quads && col + 3 < N) {
    float4 o = make_float4(alpha * v.x, alpha * v.y, alpha * v.z, alpha * v.w);
    if (beta != 0.0f) {
      const float4 x = *(const float4 *)p;
      o.x += beta * x.x, o.y += beta * x.y, o.z += beta * x.z, o.w += beta * x.w;
    }
    *(float4 *)p = o;
  } else {
    const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (col + e < N)
        p[e] = beta != 0.0f ? alpha * x[e] + beta * p[e] : alpha * x[e];
  }
}

// Consumer c's 128 threads meet at named barrier 1 + c (0 is __syncthreads;
// an immediate id, so that ptxas reserves only those).
static __device__ __forceinline__ void consumer_sync(int c)
{
  static_assert(WG <= 2, "a named barrier per consumer");
  if (c == 0)
    asm volatile("bar.sync 1, 128;" ::: "memory");
  else
    asm volatile("bar.sync 2, 128;" ::: "memory");
}

template <int TA, int TB>
__global__ void __launch_bounds__(THREADS, OCC)
$(name)(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, float *__restrict__ C,
        long long ldc, long long stride_c, int M, int N, int K, float alpha, float beta, int batch, int kper,
        float *ws)
{
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(16) float epi[WG * 64 * EPI_LD]; // each consumer's epilogue chunk
  // The swizzle needs 1024-byte aligned tiles; the launcher adds 1024 bytes.
  const unsigned raw = (unsigned)__cvta_generic_to_shared(smem_raw);
  const unsigned base = (raw + 1023) & ~1023u;
  const unsigned tiles = base;                        // STAGES x (A tile, B tile)
  const unsigned bars = base + STAGES * STAGE_BYTES;  // full[STAGES], empty[STAGES]
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (STAGES + s); };

  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const long long per_batch = (long long)tiles_m * tiles_n, work = per_batch * batch;
  // This block's k slices of each tile: chunk blockIdx.z of gridDim.z, kper
  // slices each.
  const int kfirst = blockIdx.z * kper, klast = min((K + BK - 1) / BK, kfirst + kper);
  const int ktiles = klast - kfirst;

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);   // the producer's arrive, plus the copies' bytes
      mbar_init(empty(s), WG); // one arrive per consumer warpgroup
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Behind a repack, the launcher lets this grid start before the repack
  // ends (programmatic dependent launch): the setup above overlaps its
  // tail, and nothing in global memory is touched before it is done.
  asm volatile("griddepcontrol.wait;" ::: "memory");

  if (wg == 0) {
    // Producer.  Its it-th slice (over all its tiles) goes to stage it %
    // STAGES, which is refilled for the n-th time once `empty` has
    // completed n times: parity (n - 1) & 1.
@ if setmaxnreg then
    asm volatile("setmaxnreg.dec.sync.aligned.u32 $(regs_producer);");
@ end
    if (t == 0) {
      unsigned it = 0;
      for (long long w = blockIdx.x; w < work; w += gridDim.x) {
        int tile_m, tile_n;
        tile_coords((int)(w % per_batch), tiles_m, tiles_n, tile_m, tile_n);
        const int b = (int)(w / per_batch);
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int s = it % STAGES, n = it / STAGES;
          if (n > 0)
            mbar_wait(empty(s), (n - 1) & 1);
          mbar_expect_tx(full(s), STAGE_BYTES);
          const unsigned a = tiles + s * STAGE_BYTES;
          tma_slice<TA, BM>(a, &map_a, kfirst + kt, tile_m * BM, b, full(s));
          tma_slice<TB, BN>(a + A_BYTES, &map_b, kfirst + kt, tile_n * BN, b, full(s));
        }
      }
    }
  } else {
@ if setmaxnreg then
    asm volatile("setmaxnreg.inc.sync.aligned.u32 $(regs_consumer);");
@ end
    const int c = wg - 1; // this consumer's rows: c * RM ... + RM
    const bool quads = ((ldc | stride_c) % 4 == 0) && (((unsigned long long)C & 15) == 0);
    unsigned it = 0;
    for (long long w = blockIdx.x; w < work; w += gridDim.x) {
      int tile_m, tile_n;
      tile_coords((int)(w % per_batch), tiles_m, tiles_n, tile_m, tile_n);
      const int b = (int)(w / per_batch);
      float d[MI][NREG];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int j = 0; j < NREG; ++j)
          d[mi][j] = 0.0f;
      /*
       * The wgmmas of slice kt are left in flight while the next slice's
       * are issued (wait_group 1): only then is slice kt - 1 surely read,
       * and its stage handed back to the producer; the tile's last stage
       * goes back once all are done.  wgmmas on the same accumulators
       * complete in order, so chaining them is safe.
       */
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(full(s), (it / STAGES) & 1);
        const unsigned a = tiles + s * STAGE_BYTES, bb = a + A_BYTES;
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / KI; ++kk)
#pragma unroll
          for (int mi = 0; mi < MI; ++mi)
            wgmma<TA, TB>(d[mi], operand_desc<TA>(a, c * RM + mi * 64, kk), operand_desc<TB>(bb, 0, kk));
        wgmma_commit();
        wgmma_wait<1>();
        if (kt > 0 && t == 0)
          mbar_arrive(empty((it - 1) % STAGES));
      }
      wgmma_wait<0>();
      if (ktiles > 0 && t == 0)
        mbar_arrive(empty((it - 1) % STAGES));

      if (gridDim.z > 1) {
        /*
         * Split K: this block's partial sums go to slot blockIdx.z of the
         * tile's workspace, four registers at a time in register order
         * (thread t's registers 4v..4v+3 of m64 tile (c, mi) at float4
         * [((c * MI + mi) * NREG / 4 + v) * 128 + t], so a warp's stores
         * are 512 contiguous bytes); $(name)_reduce adds the slots.
         */
        constexpr int V = NREG / 4;
        float4 *mine = (float4 *)ws + (w * gridDim.z + blockIdx.z) * (BM * BN / 4);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
          for (int v = 0; v < V; ++v)
            __stcg(mine + ((c * MI + mi) * V + v) * 128 + t,
                   make_float4(d[mi][4 * v], d[mi][4 * v + 1], d[mi][4 * v + 2], d[mi][4 * v + 3]));
        continue;
      }

      /*
       * Epilogue, through shared memory, 32 columns at a time.  In an
       * m64nBN tile, thread t (warp wp = t / 32, lane l) holds, for each
       * group j of 8 columns, the pairs (row 16wp + l/4, columns 8j +
       * 2(l%4) + {0, 1}) in d[4j], d[4j+1] and the same columns 8 rows
       * further down in d[4j+2], d[4j+3]: stored from there, a warp's store
       * would touch 8 rows, 32 bytes of each.  The consumer's 64 x 32 chunk
       * goes to its buffer instead (rows EPI_LD floats apart: a half-warp's
       * 8-byte stores hit 32 banks), and is read back by rows, so that a
       * warp loads and stores 4 whole 128-byte lines of C at a time.
       */
      float *Cb = C + (long long)b * stride_c;
      float *buf = epi + c * 64 * EPI_LD;
      const int wp = t / 32, l = t % 32;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int q = 0; q < BN / 32; ++q) {
          consumer_sync(c); // the last chunk is read
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
#pragma unroll
            for (int h = 0; h < 2; ++h)
              *(float2 *)&buf[(16 * wp + l / 4 + 8 * h) * EPI_LD + 8 * jj + 2 * (l % 4)] =
                  make_float2(d[mi][4 * (4 * q + jj) + 2 * h], d[mi][4 * (4 * q + jj) + 2 * h + 1]);
          consumer_sync(c);
          const int row0 = tile_m * BM + c * RM + mi * 64, col = tile_n * BN + 32 * q + 4 * (t % 8);
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int r = 16 * i + t / 8;
            store_quad(Cb, ldc, row0 + r, col, M, N, *(const float4 *)&buf[r * EPI_LD + 4 * (t % 8)], alpha, beta,
                       quads);
          }
        }
    }
  }
}

/*
 * The split-K sum: for each tile w of `work`, C's tile = alpha * (the sum of
 * its `splits` workspace slots, in chunk order) + beta * C.  A block takes
 * 32 float4s of one tile's slots (a warp's 512 contiguous bytes) and 8 groups
 * of slots: warp g adds slots g * per ... in order, and warp 0 adds the 8
 * groups' sums in order; every launch adds alike, whatever the timing.  A
 * float4 at index f of a slot is thread t = f % 128's registers 4v..4v+3
 * of m64 tile (c, mi), (f / 128) = (c * MI + mi) * V + v: rows r and r + 8,
 * columns col and col + 1 (the epilogue's layout).
 */
__global__ void __launch_bounds__(256) $(name)_reduce(const float4 *__restrict__ ws, float *__restrict__ C,
                                                      long long ldc, long long stride_c, int M, int N, float alpha,
                                                      float beta, long long work, int splits)
{
  constexpr int SLOT = BM * BN / 4, V = NREG / 4, GROUPS = 8;
  __shared__ float4 part[GROUPS][32];
  asm volatile("griddepcontrol.wait;" ::: "memory"); // launched before the slots are all written
  const int lane = threadIdx.x % 32, g = threadIdx.x / 32;
  const long long i = (long long)blockIdx.x * 32 + lane; // float4 over work x SLOT
  const long long w = i / SLOT;
  const int f = (int)(i % SLOT);
  const int per = (splits + GROUPS - 1) / GROUPS, s0 = min(splits, g * per), s1 = min(splits, s0 + per);
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (w < work) {
    const float4 *p = ws + w * splits * SLOT + f;
#pragma unroll 8
    for (int s = s0; s < s1; ++s) {
      const float4 x = __ldcg(p + (long long)s * SLOT);
      sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
    }
  }
  part[g][lane] = sum;
  __syncthreads();
  if (g != 0 || w >= work)
    return;
  sum = part[0][lane];
  for (int h = 1; h < GROUPS && h * per < splits; ++h) {
    const float4 x = part[h][lane];
    sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
  }
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const long long per_batch = (long long)tiles_m * tiles_n;
  int tile_m, tile_n;
  tile_coords((int)(w % per_batch), tiles_m, tiles_n, tile_m, tile_n);
  const int t = f % 128, q = f / 128, v = q % V, cm = q / V, wp = t / 32, l = t % 32;
  const int row = tile_m * BM + cm * 64 + 16 * wp + l / 4, col = tile_n * BN + 8 * v + 2 * (l % 4);
  float *Cb = C + (w / per_batch) * stride_c;
  const bool pairs = ((ldc | stride_c) % 2 == 0) && (((unsigned long long)C & 7) == 0);
  store_pair(Cb, ldc, row, col, M, N, sum.x, sum.y, alpha, beta, pairs);
  store_pair(Cb, ldc, row + 8, col, M, N, sum.z, sum.w, alpha, beta, pairs);
}

/* ---- launcher ------------------------------------------------------------ */

// cuTensorMapEncodeTiled from the driver, through the runtime (no -lcuda).
static PFN_cuTensorMapEncodeTiled_v12000 encode_fn(void)
{
  static PFN_cuTensorMapEncodeTiled_v12000 fn;
  PFN_cuTensorMapEncodeTiled_v12000 f = __atomic_load_n(&fn, __ATOMIC_RELAXED);
  if (!f) {
    cudaDriverEntryPointQueryResult q;
    void *p = NULL;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return NULL;
    f = (PFN_cuTensorMapEncodeTiled_v12000)p;
    __atomic_store_n(&fn, f, __ATOMIC_RELAXED);
  }
  return f;
}

// A 3-D map of an operand of `rows` rows (of op(A), or columns of op(B)) by
// K, rows of `ld` elements, batch entries `stride` apart.  K-major (mn 0):
// dims (k, row, batch), boxes of BK x box_rows; MN-major (mn 1): dims (row,
// k, batch), boxes of 64 x BK (one chunk).
static cudaError_t make_map(CUtensorMap *map, const void *p, int mn, int rows, int K, long long ld,
                            long long stride, int batch, int box_rows)
{
  PFN_cuTensorMapEncodeTiled_v12000 encode = encode_fn();
  if (!encode)
    return cudaErrorNotSupported;
  const long long outer = mn ? K : rows; // rows of the stored matrix
  const cuuint64_t dims[3] = {(cuuint64_t)(mn ? rows : K), (cuuint64_t)outer, (cuuint64_t)batch};
  const cuuint64_t strides[2] = {(cuuint64_t)(ld * ES), (cuuint64_t)((batch > 1 ? stride : ld * outer) * ES)};
  const cuuint32_t box[3] = {(cuuint32_t)(mn ? 64 : BK), (cuuint32_t)(mn ? BK : box_rows), 1}, step[3] = {1, 1, 1};
  const CUresult r = encode(map, $(tma_type), 3, (void *)p, dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// Can TMA read this operand where it is, in its layout?  K-major any type,
// MN-major the 16-bit types (wgmma's transpose); 16-byte aligned base, rows
// and batches.  (TF32 read in place is truncated to TF32 by the tensor
// cores, where the repack rounds it to nearest: kt_tune_gemm_bound allows
// both.)
static bool direct(const void *p, int kmajor, long long ld, long long stride, int batch)
{
  return (kmajor || ES == 2) && ((unsigned long long)p % 16) == 0 && (ld * ES) % 16 == 0 &&
         (batch == 1 || ((stride * ES) % 16 == 0 && stride > 0));
}

// The kernel for each layout pair (TA, TB), and its per-device setup.
typedef void (*kernel_fn)(CUtensorMap, CUtensorMap, float *, long long, long long, int, int, int, float, float, int,
                          int, float *);
@ if es == 2 then
static const kernel_fn kernels[4] = {$(name)<0, 0>, $(name)<0, 1>, $(name)<1, 0>, $(name)<1, 1>};
@ else
static const kernel_fn kernels[4] = {$(name)<0, 0>, NULL, NULL, NULL}; // TF32: K-major only
@ end
static kt_launch_once once[4];

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_gemm_args *a = (const kt_gemm_args *)args;
  if (a->type != TYPE)
    return (int)cudaErrorInvalidValue;

  /* Operands TMA cannot read where they are go to K-major scratch, rows of
   * kp elements (K rounded up to 16 bytes), from the scratch pool. */
  const int kma = a->op_a == KT_GEMM_OP_N, kmb = a->op_b == KT_GEMM_OP_T;
  const bool da = direct(a->A, kma, a->lda, a->stride_a, a->batch), db = direct(a->B, kmb, a->ldb, a->stride_b, a->batch);
  const int ta = da && !kma, tb = db && !kmb; // read MN-major in place
  const kernel_fn kernel = kernels[2 * ta + tb];

  const long long work = (long long)((a->M + BM - 1) / BM) * ((a->N + BN - 1) / BN) * a->batch;
  const int ktiles = (a->K + BK - 1) / BK;
  const int splits = kt_gemm_splits(work, ktiles, a->sm_count, OCC, SPLIT);
  const int kper = (ktiles + splits - 1) / splits;
  const size_t smem = (size_t)STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;
  cudaError_t err = kt_launch_prepare(&once[2 * ta + tb], (const void *)kernel, smem, 0, 0, NULL);
  if (err != cudaSuccess)
    return (int)err;
  const int kp = (a->K + 16 / ES - 1) / (16 / ES) * (16 / ES);
  const size_t bytes_a = da ? 0 : (size_t)a->batch * a->M * kp * ES, bytes_b = db ? 0 : (size_t)a->batch * a->N * kp * ES;
  /* Split K: a slot of BM x BN partial sums per tile and chunk. */
  const size_t packed = (bytes_a + bytes_b + 255) / 256 * 256;
  const size_t bytes_ws = splits > 1 ? (size_t)work * splits * BM * BN * 4 : 0;
  const size_t total = packed + bytes_ws;
  void *scratch = NULL;
  if (total > 0) {
    err = a->pool ? cudaMallocFromPoolAsync(&scratch, total, (cudaMemPool_t)a->pool, stream)
                  : cudaMallocAsync(&scratch, total, stream);
    if (err != cudaSuccess)
      return (int)err;
  }
  float *ws = splits > 1 ? (float *)((char *)scratch + packed) : NULL;
  const void *A = a->A, *B = a->B;
  long long lda = a->lda, ldb = a->ldb, sa = a->stride_a, sb = a->stride_b;
  if (!da) {
    err = gemm_pack_launch(a->A, a->lda, a->stride_a, kma, a->M, a->K, kp, a->batch, TYPE, scratch, stream);
    A = scratch, lda = kp, sa = (long long)a->M * kp;
  }
  if (err == cudaSuccess && !db) {
    void *sb_ptr = (char *)scratch + bytes_a;
    err = gemm_pack_launch(a->B, a->ldb, a->stride_b, kmb, a->N, a->K, kp, a->batch, TYPE, sb_ptr, stream);
    B = sb_ptr, ldb = kp, sb = (long long)a->N * kp;
  }
  CUtensorMap map_a, map_b;
  if (err == cudaSuccess)
    err = make_map(&map_a, A, ta, a->M, a->K, lda, sa, a->batch, BM);
  if (err == cudaSuccess)
    err = make_map(&map_b, B, tb, a->N, a->K, ldb, sb, a->batch, BN);

  /* A block per tile (each block loops where there are more than a grid
   * holds), or, persistent, OCC per SM looping over them all. */
  const long long cap = PERSIST ? (long long)a->sm_count * OCC : 0x7fffffffLL;
  /* A kernel of ours that follows another of ours may start as that one's
   * blocks finish; it waits (griddepcontrol.wait) before touching memory. */
  cudaLaunchAttribute early;
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  if (err == cudaSuccess) {
    cudaLaunchConfig_t cfg = {};
    // The chunks of K on z: no block waits for another, so any order runs.
    cfg.gridDim = dim3((unsigned)(work < cap ? work : cap), 1, (unsigned)splits);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = &early;
    cfg.numAttrs = da && db ? 0 : 1; // after a repack of ours
    err = cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, a->C, a->ldc, a->stride_c, a->M, a->N, a->K, a->alpha,
                             a->beta, a->batch, kper, ws);
  }
  if (err == cudaSuccess && splits > 1) {
    const long long blocks = (work * (BM * BN / 4) + 31) / 32;
    if (blocks > 0x7fffffffLL) {
      err = cudaErrorInvalidConfiguration;
    } else {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3((unsigned)blocks);
      cfg.blockDim = dim3(256);
      cfg.stream = stream;
      cfg.attrs = &early;
      cfg.numAttrs = 1;
      err = cudaLaunchKernelEx(&cfg, $(name)_reduce, (const float4 *)ws, a->C, a->ldc, a->stride_c, a->M, a->N,
                               a->alpha, a->beta, work, splits);
    }
  }
  if (scratch) {
    const cudaError_t e = cudaFreeAsync(scratch, stream);
    if (err == cudaSuccess)
      err = e;
  }
  return (int)err;
}
