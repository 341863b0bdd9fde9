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
 * bits), so BF16 and FP16 run every op pair in place.  TF32 it reads from
 * shared memory only K-major, but its first operand may come from
 * registers: with TA = 1 (RA below) each consumer loads its A fragments
 * from the MN-major tile with ld.shared.  That serves op T, T in place; op
 * N, N (and op T, N where A is the smaller operand) the launcher runs as
 * the transpose, C^T = op(B)^T op(A)^T (kt_gemm_tf32_swaps), so that op(B)
 * is the register operand: CT = 1, and the epilogue stores each tile
 * transposed.  What is left, the other operand of op T, N and any operand
 * whose rows or base TMA cannot address (not 16-byte aligned), the launcher
 * repacks into K-major scratch first (gemm_pack), in rows of a multiple of
 * 128 bytes; so too, where that pays, an operand whose rows start 16 bytes
 * into a 32-byte sector (kt_gemm_sector_repack).  Every call is served.
 * Edges need no code: TMA fills what lies outside the tensor with zeros,
 * which add nothing, and the epilogue stores only inside C.
 *
 * Tiles.  Block x of the grid computes tiles x, x + gridDim.x, ... of the
 * launch order (below), batch entries one after another.  Non-persistent
 * (PERSIST 0), the grid has a block per tile and each block one tile;
 * persistent, the grid has OCC blocks per SM and each loops over its
 * tiles, its producer filling the next tile's stages while the consumers
 * store the last one, so that the epilogue overlaps the loads.
 *
 * Clusters.  With CLUSTER > 1, CLUSTER blocks of consecutive tile rows (the
 * same tile column) run as one thread-block cluster and share the slices
 * of B that they all need: block r of the cluster loads part r of each B
 * slice (BN / CLUSTER rows) and TMA multicasts it into the same place in
 * every block's shared memory, completing on each block's own `full`
 * barrier.  Each block thus reads BM + BN / CLUSTER rows per slice from L2
 * rather than BM + BN.  A stage may be refilled only when every block of
 * the cluster has finished with it, so each consumer arrives on the
 * `empty` barrier of every block in the cluster.  Blocks of a cluster
 * share each work item (CLUSTER tile rows of one tile column), so they
 * run the same number of slices; one whose tile row lies past M loads
 * zeros (TMA) and stores nothing.
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
 * row of the tile; MN-major, a row is 128 bytes of consecutive rows (or
 * columns) of the tile at one k, the tile being chunks of BK such rows,
 * each chunk one TMA box.  Each tile is a multiple of 1024 bytes (8 rows,
 * the swizzle's period) and starts 1024-aligned.
 */
constexpr int BM = $(bm), BN = $(bn), BK = $(bk); // block tile; BK elements = 128 bytes
constexpr int WG = $(wg);                          // consumer warpgroups
constexpr int STAGES = $(stages);
constexpr int GROUP = $(group);                    // tile rows per band of the launch order
constexpr int OCC = $(occ);                        // blocks per SM (launch bounds, shared memory, registers)
constexpr int SPLIT = $(split);                    // most chunks K is split into (1: never)
constexpr int PERSIST = $(persist);                // 1: OCC blocks per SM loop over the tiles
constexpr int CLUSTER = $(cluster);                // blocks per cluster, along M, sharing B's slices
constexpr int RM = BM / WG;                        // rows of the tile per consumer
constexpr int MI = RM / 64;                        // m64 wgmmas per consumer and k step
constexpr int KI = $(ki);                          // K of one wgmma instruction
constexpr int EPI_LD = 40;                         // floats per row of an epilogue chunk (32 + 8)
constexpr int EPI_LDT = 68;                        // the same, transposed: floats per column (64 + 4)
constexpr int THREADS = 128 * (WG + 1);
constexpr int ES = $(es);                          // bytes per input element
constexpr int A_BYTES = BM * BK * ES, B_BYTES = BN * BK * ES, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int NREG = BN / 2;                       // accumulators per thread per m64 tile
constexpr int TYPE = $(type_id);
constexpr int CHUNK_ROWS = 128 / ES;               // rows (or columns) of one MN-major chunk: 128 bytes
constexpr int CHUNK_BYTES = CHUNK_ROWS * BK * ES;  // one MN-major chunk: CHUNK_ROWS x BK
static_assert(BK * ES == 128, "a slice row is one 128-byte swizzle row");
static_assert(A_BYTES % 1024 == 0 && B_BYTES % 1024 == 0, "tiles keep the swizzle's 1024-byte alignment");
static_assert(RM % 64 == 0, "each consumer owns whole m64 tiles");
static_assert(64 * EPI_LD >= 32 * EPI_LDT, "the transposed chunk fits the epilogue buffer");
static_assert(SPLIT == 1 || CLUSTER == 1, "split K runs without clusters (a workspace slot per block)");
static_assert(GROUP % CLUSTER == 0, "a band of the launch order holds whole clusters");
static_assert((BN / CLUSTER) % CHUNK_ROWS == 0, "each block of a cluster multicasts whole chunks (and 8-row groups) of B");

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
// Arrive on the mbarrier at offset `bar` in block `rank` of this cluster
// (this block's own included).  The arrive hands back a stage that only the
// tensor cores read, and wgmma.wait_group has seen those reads complete, so
// it orders nothing else: the default (CTA-scope) release is enough.  A
// cluster-scope release (.release.cluster) made every k slice wait for it:
// clustered 128x256 BF16 took 0.33 ms at 4096^3 against 0.18 (H200).
static __device__ __forceinline__ void mbar_arrive_at(unsigned bar, unsigned rank)
{
  asm volatile("{\n .reg .b32 r;\n mapa.shared::cluster.u32 r, %0, %1;\n"
               " mbarrier.arrive.shared::cluster.b64 _, [r];\n}" ::"r"(bar),
               "r"(rank)
               : "memory");
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
// map, the row of an MN-major one).  MC: into dst and onto bar in every
// block of the cluster (multicast; the same offsets in each).
template <int MC>
static __device__ __forceinline__ void tma_load(unsigned dst, const CUtensorMap *map, int x, int y, int batch,
                                                unsigned bar)
{
  if constexpr (MC)
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
                 "l"((unsigned long long)map), "r"(x), "r"(y), "r"(batch), "r"(bar), "h"((unsigned short)((1 << CLUSTER) - 1))
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
                 "l"((unsigned long long)map), "r"(x), "r"(y), "r"(batch), "r"(bar)
                 : "memory");
}

// Load part `part` of PARTS of one operand's slice kt (ROWS rows starting
// at row0; a part is ROWS / PARTS of them) into its place in the tile at
// dst: K-major, one box of BK x ROWS / PARTS rows; MN-major, one box of
// CHUNK_ROWS x BK per chunk of the part.  PARTS > 1: multicast to the
// cluster, whose blocks load the other parts.
template <int MN, int ROWS, int PARTS>
static __device__ __forceinline__ void tma_slice(unsigned dst, const CUtensorMap *map, int kt, int row0, int batch,
                                                 unsigned bar, int part)
{
  constexpr int PR = ROWS / PARTS; // rows of one part
  row0 += part * PR;
  if constexpr (MN) {
    dst += part * (PR / CHUNK_ROWS) * CHUNK_BYTES;
#pragma unroll
    for (int i = 0; i < PR / CHUNK_ROWS; ++i)
      tma_load<(PARTS > 1)>(dst + i * CHUNK_BYTES, map, row0 + CHUNK_ROWS * i, kt * BK, batch, bar);
  } else {
    tma_load<(PARTS > 1)>(dst + part * PR * 128, map, kt * BK, row0, batch, bar);
  }
}

// ---- wgmma ---------------------------------------------------------------
// A shared-memory matrix descriptor for rows of 128 bytes with the 128-byte
// swizzle.  K-major: 8-row groups (of the tile's rows) 1024 bytes apart
// (the stride offset); the leading offset is unused.  MN-major (16-bit
// types only): 8-row groups (of k) 1024 bytes apart (the stride offset),
// and chunks of 64 rows (or columns) CHUNK_BYTES apart (the leading offset).
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
    return smem_desc<1>(tile + (row / CHUNK_ROWS) * CHUNK_BYTES + kk * KI * 128);
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
@ if es == 4 then
// d += A (64 x 8, this thread's fragment a) * B (BN x 8, descriptor db)^T:
// TF32 with the first operand from registers (any layout in memory).
static __device__ __forceinline__ void wgmma_rs(float (&d)[NREG], const unsigned (&a)[4], unsigned long long db)
{
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %$(bn // 2 + 5), 0;\n"
               "wgmma.mma_async.sync.aligned.m64n$(bn)k8.f32.tf32.tf32\n"
               "{"
@ for i = 0, bn // 2 - 1 do
               "%$(i)$(i < bn // 2 - 1 and ', ' or '')"
@ end
               "},\n"
               " {%$(bn // 2), %$(bn // 2 + 1), %$(bn // 2 + 2), %$(bn // 2 + 3)}, %$(bn // 2 + 4), p, 1, 1;\n}"
               : "+f"(d[0])
@ for i = 1, bn // 2 - 1 do
                 , "+f"(d[$(i)])
@ end
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
@ end

/*
 * Register-fed A (RA: TF32, A's tile MN-major).  wgmma's fragment of a
 * 64 x 8 step gives thread t (warp wp = t / 32, lane g * 4 + q) the rows
 * 16wp + g and 16wp + g + 8 (its accumulator rows) at k = q and q + 4.
 * Which row of the tile feeds accumulator row r is ours to choose, so long
 * as the epilogue stores r where that row belongs.  acc_row picks the
 * pair (R, R + 1) for rows g and g + 8, so that each k is one 8-byte load,
 * and spreads a warp's pairs so that its loads from the swizzled tile hit
 * every bank once per half-warp: lanes g = 0..3 of a warp read 16-byte
 * units 0 and 4 of its 32-row chunk (then 1 and 5, 2 and 6, 3 and 7), at 4
 * k rows whose swizzle (XOR k % 8) maps them onto 8 distinct units.
 * Without RA, accumulator row r is tile row r.
 */
template <int RA> static __device__ __forceinline__ int acc_row(int wp, int g, int h)
{
  if constexpr (!RA)
    return 16 * wp + g + 8 * h;
  const int q = g >> 1, unit = (((q & 1) << 2) | (q >> 1)) + 2 * (wp & 1); // 0, 4, 1, 5 (+ 2 odd warps)
  return 32 * (wp >> 1) + 4 * unit + 2 * (g & 1) + h;
}

// The accumulator row that holds tile row R (0..63): acc_row's inverse.
template <int RA> static __device__ __forceinline__ int row_acc(int R)
{
  if constexpr (!RA)
    return R;
  const int unit = (R & 31) >> 2, wp = 2 * (R >> 5) + ((unit >> 1) & 1), v = unit & 5;
  const int g = 2 * (((v & 1) << 1) | (v >> 2)) + ((R >> 1) & 1);
  return 16 * wp + g + 8 * (R & 1);
}

@ if es == 4 then
// This thread's A fragment of k step kk from the MN-major tile at `tile`,
// rows row0 ... row0 + 63 (row0 a multiple of 64): tile row R, k sits in
// chunk R / 32, row k, 16-byte unit (R % 32) / 4 XOR k % 8 (TMA's swizzle).
static __device__ __forceinline__ void load_frag(unsigned tile, int row0, int kk, int wp, int lane, unsigned (&a)[4])
{
  const int g = lane >> 2, q = lane & 3, R = row0 + acc_row<1>(wp, g, 0);
  const unsigned chunk = tile + (R / CHUNK_ROWS) * CHUNK_BYTES + kk * KI * 128;
#pragma unroll
  for (int h = 0; h < 2; ++h) { // k = q, then q + 4: a[0..1], then a[2..3]
    const int k = q + 4 * h;
    const unsigned addr = chunk + k * 128 + ((((R % CHUNK_ROWS) >> 2) ^ k) << 4) + (R & 3) * 4;
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(a[2 * h]), "=r"(a[2 * h + 1]) : "r"(addr));
  }
}
@ end

static __device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
static __device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> static __device__ __forceinline__ void wgmma_wait()
{
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Work item w (a tile of one batch entry) in the launch order: batch entries
// one after another; within one, bands of GROUP tile rows, column by column
// within a band, so that the blocks running together share their B slices
// in L2.
struct tile_at {
  int m, n, b; // tile row, tile column, batch entry
};
// With clusters, tiles_m counts rows of clusters (CLUSTER tile rows each),
// and a band GROUP tile rows.
static __device__ __forceinline__ tile_at tile_of(long long w, int tiles_m, int tiles_n)
{
  constexpr int BAND = GROUP / CLUSTER;
  const long long per_batch = (long long)tiles_m * tiles_n;
  const int tile = (int)(w % per_batch), per_band = BAND * tiles_n, band = tile / per_band;
  const int first_m = band * BAND, rows_in_band = min(BAND, tiles_m - first_m);
  return {first_m + (tile % per_band) % rows_in_band, (tile % per_band) / rows_in_band, (int)(w / per_batch)};
}

template <int W> struct vec_of;
template <> struct vec_of<2> {
  using type = float2;
};
template <> struct vec_of<4> {
  using type = float4;
};

// C[row][col ... col + W - 1] = alpha * v + beta * C, within M x N (beta 0:
// C is not read, it may hold NaN); `vec` (W 2 or 4): one W-wide load and
// store where all W lie within N (the caller has checked the alignment).
template <int W>
static __device__ __forceinline__ void store_run(float *Cb, long long ldc, int row, int col, int M, int N,
                                                 const float (&v)[W], float alpha, float beta, bool vec)
{
  if (row >= M)
    return;
  float *p = Cb + (long long)row * ldc + col;
  if constexpr (W > 1) {
    if (vec && col + W <= N) {
      using V = typename vec_of<W>::type;
      union {
        V v;
        float f[W];
      } o, x;
      if (beta != 0.0f)
        x.v = *(const V *)p;
#pragma unroll
      for (int e = 0; e < W; ++e)
        o.f[e] = beta != 0.0f ? alpha * v[e] + beta * x.f[e] : alpha * v[e];
      *(V *)p = o.v;
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < W; ++e)
    if (col + e < N)
      p[e] = beta != 0.0f ? alpha * v[e] + beta * p[e] : alpha * v[e];
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

// TA, TB: the operands' layouts (above); CT: C^T is computed (M, N, A and B
// are the launcher's swapped ones) and stored transposed.  Q: C's rows (ldc,
// stride_c, C) are 16-byte aligned, and the epilogue stores 16 bytes at a
// time.  RA: A from registers (TF32 with A MN-major).
template <int TA, int TB, int CT, int Q>
__global__ void __launch_bounds__(THREADS, OCC)
$(name)(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, float *__restrict__ C,
        long long ldc, long long stride_c, int M, int N, int K, float alpha, float beta, int batch, int kper,
        float *ws, int shared)
{
  constexpr int RA = ES == 4 && TA;
  static_assert(!CT || RA, "only the register-fed TF32 kernel runs transposed");
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(16) float epi[WG * 64 * EPI_LD]; // each consumer's epilogue chunk
  // The swizzle needs 1024-byte aligned tiles; the launcher adds 1024 bytes.
  const unsigned raw = (unsigned)__cvta_generic_to_shared(smem_raw);
  const unsigned base = (raw + 1023) & ~1023u;
  const unsigned tiles = base;                        // STAGES x (A tile, B tile)
  const unsigned bars = base + STAGES * STAGE_BYTES;  // full[STAGES], empty[STAGES]
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (STAGES + s); };

  // Work items: CLUSTER tile rows of one tile column, one per cluster;
  // this block takes row `rank` of each of its cluster's items.
  const int tiles_m = (M + BM * CLUSTER - 1) / (BM * CLUSTER), tiles_n = (N + BN - 1) / BN;
  const long long work = (long long)tiles_m * tiles_n * batch;
  unsigned rank = 0;
  if constexpr (CLUSTER > 1)
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const long long first = blockIdx.x / CLUSTER, step = gridDim.x / CLUSTER;
  // This block's k slices of each tile: chunk blockIdx.z of gridDim.z, kper
  // slices each.
  const int kfirst = blockIdx.z * kper, klast = min((K + BK - 1) / BK, kfirst + kper);
  const int ktiles = klast - kfirst;

  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full(s), 1);   // the producer's arrive, plus the copies' bytes
      mbar_init(empty(s), WG * CLUSTER); // one arrive per consumer warpgroup of the cluster
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // Every block's barriers are set up before any block's copies or
  // arrives can reach them.
  if constexpr (CLUSTER > 1)
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  else
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
      for (long long w = first; w < work; w += step) {
        const tile_at at = tile_of(w, tiles_m, tiles_n);
        const int m = at.m * CLUSTER + (int)rank;
        for (int kt = 0; kt < ktiles; ++kt, ++it) {
          const int s = it % STAGES, n = it / STAGES;
          if (n > 0)
            mbar_wait(empty(s), (n - 1) & 1);
          mbar_expect_tx(full(s), STAGE_BYTES);
          const unsigned a = tiles + s * STAGE_BYTES;
          // A shared operand's map holds one batch entry (see the launcher).
          tma_slice<TA, BM, 1>(a, &map_a, kfirst + kt, m * BM, shared & 1 ? 0 : at.b, full(s), 0);
          tma_slice<TB, BN, CLUSTER>(a + A_BYTES, &map_b, kfirst + kt, at.n * BN, shared & 2 ? 0 : at.b, full(s),
                                     (int)rank);
        }
      }
    }
  } else {
@ if setmaxnreg then
    asm volatile("setmaxnreg.inc.sync.aligned.u32 $(regs_consumer);");
@ end
    const int c = wg - 1; // this consumer's rows: c * RM ... + RM
    const int wp = t / 32, l = t % 32;
    unsigned it = 0;
    // Hands stage s back to the producers of every block of the cluster.
    auto release = [&](int s) {
      if constexpr (CLUSTER > 1) {
#pragma unroll
        for (int r = 0; r < CLUSTER; ++r)
          mbar_arrive_at(empty(s), r);
      } else {
        mbar_arrive(empty(s));
      }
    };
    for (long long w = first; w < work; w += step) {
      const tile_at at = tile_of(w, tiles_m, tiles_n);
      const int m = at.m * CLUSTER + (int)rank;
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
       * complete in order, so chaining them is safe.  RA: slice kt's A
       * fragments go to register set kt % 2, which the wgmmas of slice kt
       * - 2 (done by then) last read.
       */
      auto slice = [&](unsigned a, auto &frag) {
        const unsigned bb = a + A_BYTES;
@ if es == 4 then
        if constexpr (RA) {
#pragma unroll
          for (int kk = 0; kk < BK / KI; ++kk)
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
              load_frag(a, c * RM + mi * 64, kk, wp, l, frag[mi][kk]);
        }
@ end
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / KI; ++kk)
#pragma unroll
          for (int mi = 0; mi < MI; ++mi) {
@ if es == 4 then
            if constexpr (RA)
              wgmma_rs(d[mi], frag[mi][kk], operand_desc<0>(bb, 0, kk));
            else
@ end
              wgmma<TA, TB>(d[mi], operand_desc<TA>(a, c * RM + mi * 64, kk), operand_desc<TB>(bb, 0, kk));
          }
        wgmma_commit();
      };
      unsigned frag[2][RA ? MI : 1][RA ? BK / KI : 1][4];
      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % STAGES;
        mbar_wait(full(s), (it / STAGES) & 1);
        const unsigned a = tiles + s * STAGE_BYTES;
        if (kt & 1)
          slice(a, frag[1]);
        else
          slice(a, frag[0]);
        wgmma_wait<1>();
        if (kt > 0 && t == 0)
          release((it - 1) % STAGES);
      }
      wgmma_wait<0>();
      if (ktiles > 0 && t == 0)
        release((it - 1) % STAGES);

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
       * m64nBN tile, thread t (warp wp, lane l) holds, for each group j of
       * 8 columns, the pairs (accumulator row 16wp + l/4, columns 8j +
       * 2(l%4) + {0, 1}) in d[4j], d[4j+1] and the same columns 8 rows
       * further down in d[4j+2], d[4j+3]: stored from there, a warp's store
       * would touch 8 rows, 32 bytes of each.  The consumer's 64 x 32 chunk
       * goes to its buffer instead, by accumulator row, and is read back by
       * tile row (row_acc), so that a warp stores whole 128-byte lines of C
       * at a time.  Rows EPI_LD floats apart: a half-warp's 8-byte stores
       * hit 32 banks.  CT: the chunk is stored by column and tile row
       * (EPI_LDT floats apart; with the order of each thread's two rows
       * swapped on half the lanes, a warp's 4-byte stores hit 32 banks),
       * and read back 4 tile rows at a time, which are 4 consecutive floats
       * of one row of C.  Where C's rows are not 16-byte aligned (Q 0: a
       * row stride or base a user's may have), each warp reads and stores
       * 32 consecutive floats of one row of C instead.  Q is a template
       * parameter rather than a branch: both store paths in one kernel
       * made the aligned one 3 to 43% slower on short-K calls (session 66,
       * H200; the persistent tiles most), as a larger kernel has before.
       * In a kernel of its own the unaligned path's 16 stores are unrolled:
       * as a loop they took 1.06 and 1.11 times as long on small and large
       * calls (geometric means; session 67, H100).
       */
      float *Cb = C + (long long)at.b * stride_c;
      float *buf = epi + c * 64 * EPI_LD;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int q = 0; q < BN / 32; ++q) {
          consumer_sync(c); // the last chunk is read
          const int row0 = m * BM + c * RM + mi * 64, col0 = at.n * BN + 32 * q;
          if constexpr (CT) {
#pragma unroll
            for (int jj = 0; jj < 4; ++jj)
#pragma unroll
              for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  const int hs = h ^ ((l % 4) >> 1); // lanes 2, 3 of each 4 store their other row first
                  buf[(8 * jj + 2 * (l % 4) + e) * EPI_LDT + acc_row<RA>(wp, l / 4, hs)] =
                      hs ? d[mi][4 * (4 * q + jj) + 2 + e] : d[mi][4 * (4 * q + jj) + e];
                }
            consumer_sync(c);
            if constexpr (Q) {
              // C[col0 + j][row0 + R ... + 3] = the tile's (R ... R + 3, j).
#pragma unroll
              for (int n = 0; n < 4; ++n) {
                const int j = 8 * n + 2 * wp + l / 16, R = 4 * (l % 16);
                const float4 x = *(const float4 *)&buf[j * EPI_LDT + R];
                const float v[4] = {x.x, x.y, x.z, x.w};
                store_run<4>(Cb, ldc, col0 + j, row0 + R, N, M, v, alpha, beta, true);
              }
            } else {
              // C's rows not 16-byte aligned: a warp stores 32 consecutive
              // floats of one row, C[col0 + j][row0 + R], R = 32h + l.
#pragma unroll
              for (int i = 0; i < 16; ++i) {
                const int j = 4 * (i / 2) + wp, R = 32 * (i % 2) + l;
                const float v[1] = {buf[j * EPI_LDT + R]};
                store_run<1>(Cb, ldc, col0 + j, row0 + R, N, M, v, alpha, beta, false);
              }
            }
          } else {
#pragma unroll
            for (int jj = 0; jj < 4; ++jj)
#pragma unroll
              for (int h = 0; h < 2; ++h)
                *(float2 *)&buf[(16 * wp + l / 4 + 8 * h) * EPI_LD + 8 * jj + 2 * (l % 4)] =
                    make_float2(d[mi][4 * (4 * q + jj) + 2 * h], d[mi][4 * (4 * q + jj) + 2 * h + 1]);
            consumer_sync(c);
            if constexpr (Q) {
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                const int R = 16 * i + t / 8;
                const float4 x = *(const float4 *)&buf[row_acc<RA>(R) * EPI_LD + 4 * (t % 8)];
                const float v[4] = {x.x, x.y, x.z, x.w};
                store_run<4>(Cb, ldc, row0 + R, col0 + 4 * (t % 8), M, N, v, alpha, beta, true);
              }
            } else {
              // C's rows not 16-byte aligned: a warp stores 32 consecutive
              // floats of one tile row (one 4-byte store a lane, 128
              // contiguous bytes a warp, where four lanes' float4s split
              // into single floats would touch four rows' sectors).
#pragma unroll
              for (int i = 0; i < 16; ++i) {
                const int R = 4 * i + wp;
                const float v[1] = {buf[row_acc<RA>(R) * EPI_LD + l]};
                store_run<1>(Cb, ldc, row0 + R, col0 + l, M, N, v, alpha, beta, false);
              }
            }
          }
        }
    }
  }
  // A block's shared memory and barriers go when it exits: none may leave
  // while a consumer of another block of its cluster can still arrive on
  // its `empty` barriers.
  if constexpr (CLUSTER > 1)
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

/*
 * The split-K sum: for each tile w of `work`, C's tile = alpha * (the sum of
 * its `splits` workspace slots, in chunk order) + beta * C.  A block takes
 * 32 float4s of one tile's slots (a warp's 512 contiguous bytes) and 8 groups
 * of slots: warp g adds slots g * per ... in order, and warp 0 adds the 8
 * groups' sums in order; every launch adds alike, whatever the timing.  A
 * float4 at index f of a slot is thread t = f % 128's registers 4v..4v+3
 * of m64 tile (c, mi), (f / 128) = (c * MI + mi) * V + v: accumulator rows
 * r and r + 8, columns col and col + 1 (the epilogue's layout); RA, CT: as
 * the main kernel's.
 */
template <int RA, int CT>
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
  const tile_at at = tile_of(w, (M + BM - 1) / BM, (N + BN - 1) / BN);
  const int t = f % 128, q = f / 128, v = q % V, cm = q / V, wp = t / 32, l = t % 32;
  const int row = at.m * BM + cm * 64, col = at.n * BN + 8 * v + 2 * (l % 4);
  const int r0 = row + acc_row<RA>(wp, l / 4, 0), r1 = row + acc_row<RA>(wp, l / 4, 1);
  float *Cb = C + (long long)at.b * stride_c;
  if constexpr (CT) { // (r, col) is C's (col, r)
    const float x[4][1] = {{sum.x}, {sum.y}, {sum.z}, {sum.w}};
    store_run<1>(Cb, ldc, col, r0, N, M, x[0], alpha, beta, false);
    store_run<1>(Cb, ldc, col + 1, r0, N, M, x[1], alpha, beta, false);
    store_run<1>(Cb, ldc, col, r1, N, M, x[2], alpha, beta, false);
    store_run<1>(Cb, ldc, col + 1, r1, N, M, x[3], alpha, beta, false);
  } else {
    const bool pairs = ((ldc | stride_c) % 2 == 0) && (((unsigned long long)C & 7) == 0);
    const float x[2][2] = {{sum.x, sum.y}, {sum.z, sum.w}};
    store_run<2>(Cb, ldc, r0, col, M, N, x[0], alpha, beta, pairs);
    store_run<2>(Cb, ldc, r1, col, M, N, x[1], alpha, beta, pairs);
  }
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
// k, batch), boxes of CHUNK_ROWS x BK (one chunk).
static cudaError_t make_map(CUtensorMap *map, const void *p, int mn, int rows, int K, long long ld,
                            long long stride, int batch, int box_rows)
{
  PFN_cuTensorMapEncodeTiled_v12000 encode = encode_fn();
  if (!encode)
    return cudaErrorNotSupported;
  const long long outer = mn ? K : rows; // rows of the stored matrix
  const cuuint64_t dims[3] = {(cuuint64_t)(mn ? rows : K), (cuuint64_t)outer, (cuuint64_t)batch};
  // One batch entry: its stride is never used; ld * outer, or ld where that
  // passes TMA's limit (2^40 bytes).
  long long bstride = batch > 1 ? stride : ld * outer;
  if (batch == 1 && bstride * ES >= (1LL << 40))
    bstride = ld;
  const cuuint64_t strides[2] = {(cuuint64_t)(ld * ES), (cuuint64_t)(bstride * ES)};
  const cuuint32_t box[3] = {(cuuint32_t)(mn ? CHUNK_ROWS : BK), (cuuint32_t)(mn ? BK : box_rows), 1};
  const cuuint32_t step[3] = {1, 1, 1};
  const CUresult r = encode(map, $(tma_type), 3, (void *)p, dims, strides, box, step, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The kernel for each layout (index 2 * TA + TB, or for TF32 2 * TA + CT)
// and C's alignment (kernel index 2 * layout + Q: C's rows 16-byte
// aligned), its per-device setup, and each layout's split-K sum.
typedef void (*kernel_fn)(CUtensorMap, CUtensorMap, float *, long long, long long, int, int, int, float, float, int,
                          int, float *, int);
typedef void (*reduce_fn)(const float4 *, float *, long long, long long, int, int, float, float, long long, int);
@ if es == 2 then
static const kernel_fn kernels[8] = {$(name)<0, 0, 0, 0>, $(name)<0, 0, 0, 1>, $(name)<0, 1, 0, 0>, $(name)<0, 1, 0, 1>,
                                     $(name)<1, 0, 0, 0>, $(name)<1, 0, 0, 1>, $(name)<1, 1, 0, 0>, $(name)<1, 1, 0, 1>};
static const reduce_fn reduces[4] = {$(name)_reduce<0, 0>, $(name)_reduce<0, 0>, $(name)_reduce<0, 0>,
                                     $(name)_reduce<0, 0>};
@ else
// TF32: both K-major; -; A MN-major (from registers); the transpose, op(B)
// MN-major (from registers).
static const kernel_fn kernels[8] = {$(name)<0, 0, 0, 0>, $(name)<0, 0, 0, 1>, NULL, NULL,
                                     $(name)<1, 0, 0, 0>, $(name)<1, 0, 0, 1>, $(name)<1, 0, 1, 0>, $(name)<1, 0, 1, 1>};
static const reduce_fn reduces[4] = {$(name)_reduce<0, 0>, NULL, $(name)_reduce<1, 0>, $(name)_reduce<1, 1>};
@ end
static kt_launch_once once[8];
// Clusters of CLUSTER blocks that run at once, per kernel and device (0:
// not yet asked; persistent clustered variants only).
static int active_clusters[8][KT_LAUNCH_MAX_DEVICES];

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_gemm_args *a = (const kt_gemm_args *)args;
  if (a->type != TYPE)
    return (int)cudaErrorInvalidValue;

  /* How each operand is read: in place, MN-major in place (ta, tb), or
   * from K-major scratch (pack_a, pack_b: rows of kp elements, K rounded up
   * to 128 bytes, from the scratch pool), as kt_gemm_wgmma_choose decides:
   * 16-bit types everything TMA can address in place; TF32 K-major in
   * place, and MN-major in place through registers, one operand at most.
   * (TF32 read in place is truncated to TF32 by the tensor cores, where the
   * repack rounds it to nearest: kt_tune_gemm_bound allows both.) */
  const int kma = a->op_a == KT_GEMM_OP_N, kmb = a->op_b == KT_GEMM_OP_T;
  /* An operand whose batch stride is 0 is one matrix for the whole batch:
   * read, or repacked, once (na, nb entries of each). */
  const int na = a->stride_a == 0 ? 1 : a->batch, nb = a->stride_b == 0 ? 1 : a->batch;
  bool ala = kt_gemm_tma_addressable(a->A, a->lda, a->stride_a, na, ES),
       alb = kt_gemm_tma_addressable(a->B, a->ldb, a->stride_b, nb, ES);
  int ta = 0, tb = 0, swap = 0, M = 0, N = 0, splits = 1;
  bool pack_a = false, pack_b = false;
  long long work = 0;
  const int ktiles = (a->K + BK - 1) / BK;
  /* The layout for operands that TMA can (ala, alb) or cannot read in place. */
  auto choose = [&]() {
    const kt_gemm_wgmma_layout l = kt_gemm_wgmma_choose(ES, a->op_a, a->op_b, a->M, a->N, ala, alb);
    ta = l.ta, tb = l.tb, swap = l.swap, pack_a = l.pack_a, pack_b = l.pack_b;
    /* Swapped, the kernel's A is op(B)^T (N x K) and its B is op(A) (M x K). */
    M = swap ? a->N : a->M, N = swap ? a->M : a->N;
    work = (long long)((M + BM - 1) / BM) * ((N + BN - 1) / BN) * a->batch;
    splits = kt_gemm_splits(work, ktiles, a->sm_count, OCC, SPLIT);
  };
  choose();
  /* An operand read in place on a row stride 16 bytes into a 32-byte
   * sector is repacked where that pays (kt_gemm_sector_repack); its tile
   * side is BM as the kernel's A, BN as its B. */
  {
    const double kshare = (double)((ktiles + splits - 1) / splits) / (ktiles > 0 ? ktiles : 1);
    const int side_a = swap ? BN : BM, side_b = swap ? BM : BN;
    const bool sector_a = !pack_a && kt_gemm_sector_repack(a->lda * ES, (long long)na * a->M, side_a,
                                                           BM + BN - side_a, work * splits, a->sm_count, OCC, kshare);
    const bool sector_b = !pack_b && kt_gemm_sector_repack(a->ldb * ES, (long long)nb * a->N, side_b,
                                                           BM + BN - side_b, work * splits, a->sm_count, OCC, kshare);
    if (sector_a || sector_b) {
      ala = ala && !sector_a, alb = alb && !sector_b;
      choose();
    }
  }
  const int layout = ES == 2 ? 2 * ta + tb : 2 * ta + swap;
  const int quads = (a->ldc | a->stride_c) % 4 == 0 && (unsigned long long)a->C % 16 == 0;
  const int ki = 2 * layout + quads;
  const kernel_fn kernel = kernels[ki];
  const int kper = (ktiles + splits - 1) / splits;
  const size_t smem = (size_t)STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;
  cudaError_t err = kt_launch_prepare(&once[ki], (const void *)kernel, smem, 0, 0, NULL);
  if (err != cudaSuccess)
    return (int)err;
  /* Rows of the repacked operands: K rounded up to 128 bytes, so that no
   * TMA row straddles a 32-byte sector (kt_gemm_sector_repack). */
  const int kp = (a->K + 128 / ES - 1) / (128 / ES) * (128 / ES);
  const size_t bytes_a = pack_a ? (size_t)na * a->M * kp * ES : 0;
  const size_t bytes_b = pack_b ? (size_t)nb * a->N * kp * ES : 0;
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
  if (pack_a || pack_b) { /* both in one launch where both are repacked */
    void *sb_ptr = (char *)scratch + bytes_a;
    const gemm_pack_op op_a = {a->A, a->lda, a->stride_a, kma, a->M, na, scratch};
    const gemm_pack_op op_b = {a->B, a->ldb, a->stride_b, kmb, a->N, nb, sb_ptr};
    err = gemm_pack_launch(pack_a ? &op_a : NULL, pack_b ? &op_b : NULL, a->K, kp, TYPE, stream);
    if (pack_a)
      A = scratch, lda = kp, sa = (long long)a->M * kp;
    if (pack_b)
      B = sb_ptr, ldb = kp, sb = (long long)a->N * kp;
  }
  CUtensorMap map_a, map_b;
  if (err == cudaSuccess)
    err = swap ? make_map(&map_a, B, 1, a->N, a->K, ldb, sb, nb, BM) : make_map(&map_a, A, ta, a->M, a->K, lda, sa, na, BM);
  if (err == cudaSuccess) /* each block of a cluster loads BN / CLUSTER rows of B's slices */
    err = swap ? make_map(&map_b, A, 0, a->M, a->K, lda, sa, na, BN / CLUSTER)
               : make_map(&map_b, B, tb, a->N, a->K, ldb, sb, nb, BN / CLUSTER);
  /* The kernel reads a one-entry map at batch 0: bit 0 its A, bit 1 its B. */
  const int shared = ((swap ? nb : na) == 1 ? 1 : 0) | ((swap ? na : nb) == 1 ? 2 : 0);

  /* A kernel of ours that follows another of ours may start as that one's
   * blocks finish; it waits (griddepcontrol.wait) before touching memory. */
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = CLUSTER, attrs[0].val.clusterDim.y = 1, attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = CLUSTER > 1 ? attrs : attrs + 1;
  cfg.numAttrs = (CLUSTER > 1) + (pack_a || pack_b ? 1 : 0); // clusters; after a repack of ours
  /* A cluster per work item (each looping where there are more than a
   * grid holds), or, persistent, as many as run at once, each looping over
   * them all: OCC blocks per SM without clusters; with them, what the
   * GPU's SMs hold of whole clusters (fewer where a GPC's SMs do not
   * divide into clusters). */
  const long long items = (long long)((M + BM * CLUSTER - 1) / (BM * CLUSTER)) * ((N + BN - 1) / BN) * a->batch;
  long long cap = 0x7fffffffLL / CLUSTER;
  if (PERSIST)
    cap = (long long)a->sm_count * OCC / CLUSTER;
  if (PERSIST && CLUSTER > 1 && err == cudaSuccess) {
    int dev = 0, n = 0;
    err = cudaGetDevice(&dev);
    if (err == cudaSuccess && dev >= 0 && dev < KT_LAUNCH_MAX_DEVICES)
      n = __atomic_load_n(&active_clusters[ki][dev], __ATOMIC_RELAXED);
    if (err == cudaSuccess && n == 0) {
      cfg.gridDim = dim3((unsigned)(cap * CLUSTER));
      err = cudaOccupancyMaxActiveClusters(&n, (const void *)kernel, &cfg);
      if (err == cudaSuccess && n < 1)
        err = cudaErrorInvalidConfiguration; /* not one cluster fits: say so rather than hang */
      if (err == cudaSuccess && dev >= 0 && dev < KT_LAUNCH_MAX_DEVICES)
        __atomic_store_n(&active_clusters[ki][dev], n, __ATOMIC_RELAXED);
    }
    if (n > 0 && n < cap)
      cap = n;
  }
  if (err == cudaSuccess) {
    // The chunks of K on z: no block waits for another, so any order runs.
    cfg.gridDim = dim3((unsigned)((items < cap ? items : cap) * CLUSTER), 1, (unsigned)splits);
    err = cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, a->C, a->ldc, a->stride_c, M, N, a->K, a->alpha, a->beta,
                             a->batch, kper, ws, shared);
  }
  if (err == cudaSuccess && splits > 1) {
    const long long blocks = (work * (BM * BN / 4) + 31) / 32;
    if (blocks > 0x7fffffffLL) {
      err = cudaErrorInvalidConfiguration;
    } else {
      cudaLaunchConfig_t rc = {};
      rc.gridDim = dim3((unsigned)blocks);
      rc.blockDim = dim3(256);
      rc.stream = stream;
      rc.attrs = attrs + 1;
      rc.numAttrs = 1;
      err = cudaLaunchKernelEx(&rc, reduces[layout], (const float4 *)ws, a->C, a->ldc, a->stride_c, M, N, a->alpha,
                               a->beta, work, splits);
    }
  }
  if (scratch) {
    const cudaError_t e = cudaFreeAsync(scratch, stream);
    if (err == cudaSuccess)
      err = e;
  }
  return (int)err;
}
