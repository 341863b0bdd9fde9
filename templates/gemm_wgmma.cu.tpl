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
 * Split K.  Where the tiles (times the batch) leave SMs idle, the launcher
 * splits K into up to SPLIT chunks (gridDim.z), each block summing its
 * chunk's k slices.  The reduction is deterministic: every block of a tile
 * writes its partial sums to a workspace slot of its own and counts itself
 * in on the tile's counter; the block that comes last adds the slots in
 * chunk order 0, 1, ... (its own from registers) and runs the epilogue, so
 * the result does not depend on which block finished when.
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
constexpr int RM = BM / WG;                        // rows of the tile per consumer
constexpr int MI = RM / 64;                        // m64 wgmmas per consumer and k step
constexpr int KI = $(ki);                          // K of one wgmma instruction
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

// The consumers alone (not the producer) meet at named barrier 1.
static __device__ __forceinline__ void consumers_sync()
{
  asm volatile("bar.sync 1, %0;" ::"n"(128 * WG) : "memory");
}

template <int TA, int TB>
__global__ void __launch_bounds__(THREADS, OCC)
$(name)(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, float *__restrict__ C,
        long long ldc, long long stride_c, int M, int N, int K, float alpha, float beta, int batch0, int kper,
        float *ws, unsigned *counters)
{
  extern __shared__ unsigned char smem_raw[];
  // The swizzle needs 1024-byte aligned tiles; the launcher adds 1024 bytes.
  const unsigned raw = (unsigned)__cvta_generic_to_shared(smem_raw);
  const unsigned base = (raw + 1023) & ~1023u;
  const unsigned tiles = base;                        // STAGES x (A tile, B tile)
  const unsigned bars = base + STAGES * STAGE_BYTES;  // full[STAGES], empty[STAGES]
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (STAGES + s); };

  // Launch order: bands of GROUP tile rows, column by column within a band,
  // so that the blocks running together share their B slices in L2.
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  const int per_band = GROUP * tiles_n, band = blockIdx.x / per_band;
  const int first_m = band * GROUP, rows_in_band = min(GROUP, tiles_m - first_m);
  const int tile_m = first_m + (blockIdx.x % per_band) % rows_in_band;
  const int tile_n = (blockIdx.x % per_band) / rows_in_band;
  const int b = batch0 + blockIdx.y;
  // This block's k slices: chunk blockIdx.z of gridDim.z, kper slices each.
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

  if (wg == 0) {
    // Producer.  Stage s is refilled for the n-th time once `empty` has
    // completed n times: parity (n - 1) & 1.
@ if setmaxnreg then
    asm volatile("setmaxnreg.dec.sync.aligned.u32 $(regs_producer);");
@ end
    if (t == 0) {
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % STAGES, n = kt / STAGES;
        if (n > 0)
          mbar_wait(empty(s), (n - 1) & 1);
        mbar_expect_tx(full(s), STAGE_BYTES);
        const unsigned a = tiles + s * STAGE_BYTES;
        tma_slice<TA, BM>(a, &map_a, kfirst + kt, tile_m * BM, b, full(s));
        tma_slice<TB, BN>(a + A_BYTES, &map_b, kfirst + kt, tile_n * BN, b, full(s));
      }
    }
  } else {
@ if setmaxnreg then
    asm volatile("setmaxnreg.inc.sync.aligned.u32 $(regs_consumer);");
@ end
    const int c = wg - 1; // this consumer's rows: c * RM ... + RM
    float d[MI][NREG];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int j = 0; j < NREG; ++j)
        d[mi][j] = 0.0f;
    /*
     * The wgmmas of slice kt are left in flight while the next slice's are
     * issued (wait_group 1): only then is slice kt - 1 surely read, and its
     * stage handed back to the producer.  wgmmas on the same accumulators
     * complete in order, so chaining them is safe.
     */
    for (int kt = 0; kt < ktiles; ++kt) {
      const int s = kt % STAGES;
      mbar_wait(full(s), (kt / STAGES) & 1);
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
        mbar_arrive(empty((kt - 1) % STAGES));
    }
    wgmma_wait<0>();

    if (gridDim.z > 1) {
      /*
       * Split K: this block's partial sums go to slot blockIdx.z of the
       * tile's workspace, four registers at a time in register order
       * (thread t's registers 4v..4v+3 of m64 tile (c, mi) at float4
       * [((c * MI + mi) * NREG / 4 + v) * 128 + t], so a warp's stores are
       * 512 contiguous bytes).  Each thread's fence makes its stores visible
       * before the count; the block that brings the count to gridDim.z
       * sums every slot in chunk order and resets the counter.  Its own
       * slot it reads back too: d is dead past the stores, which leaves the
       * registers to loads in flight.  The loop over slots is unrolled to
       * SPLIT with the absent ones predicated off, so that the loads of
       * many registers and slots are issued before the first sum waits;
       * a loop that waited for each load in turn took 100 us at 1000^3.
       */
      const int splits = gridDim.z;
      const long long tile = ((long long)blockIdx.y * gridDim.x + blockIdx.x);
      float4 *slots = (float4 *)(ws + tile * splits * (BM * BN));
      constexpr int V = NREG / 4, SLOT = BM * BN / 4; // float4s per thread and m64 tile, per slot
      float4 *mine = slots + (long long)blockIdx.z * SLOT;
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int v = 0; v < V; ++v)
          __stcg(mine + ((c * MI + mi) * V + v) * 128 + t,
                 make_float4(d[mi][4 * v], d[mi][4 * v + 1], d[mi][4 * v + 2], d[mi][4 * v + 3]));
      __threadfence();
      consumers_sync();
      __shared__ unsigned last;
      if (threadIdx.x == 128) {
        last = atomicAdd(&counters[tile], 1u) == (unsigned)(splits - 1);
        if (last)
          counters[tile] = 0;
      }
      consumers_sync();
      if (!last)
        return;
      __threadfence();
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const float4 *p = slots + ((c * MI + mi) * V + v) * 128 + t;
          float4 sum = __ldcg(p);
          /* Up to 8 slots fully unrolled and predicated; more, 8 at a time. */
#pragma unroll 8
          for (int s = 1; s < (SPLIT <= 8 ? SPLIT : splits); ++s)
            if (s < splits) {
              const float4 x = __ldcg(p + (long long)s * SLOT);
              sum.x += x.x, sum.y += x.y, sum.z += x.z, sum.w += x.w;
            }
          d[mi][4 * v] = sum.x, d[mi][4 * v + 1] = sum.y, d[mi][4 * v + 2] = sum.z, d[mi][4 * v + 3] = sum.w;
        }
    }

    /*
     * Epilogue, straight from the accumulators.  In an m64nBN tile, thread t
     * (warp w = t / 32, lane l) holds, for each group j of 8 columns, the
     * pairs (row 16w + l/4, columns 8j + 2(l%4) + {0, 1}) in d[4j], d[4j+1]
     * and the same columns 8 rows further down in d[4j+2], d[4j+3].
     */
    float *Cb = C + (long long)b * stride_c;
    const bool pairs = (ldc % 2 == 0) && (((unsigned long long)C & 7) == 0) && (stride_c % 2 == 0);
    const int w = t / 32, l = t % 32;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = tile_m * BM + c * RM + mi * 64 + 16 * w + l / 4 + 8 * h;
        if (row >= M)
          continue;
        float *crow = Cb + (long long)row * ldc;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = tile_n * BN + 8 * j + 2 * (l % 4);
          float x = alpha * d[mi][4 * j + 2 * h], y = alpha * d[mi][4 * j + 2 * h + 1];
          if (pairs && col + 1 < N) {
            float2 *p = (float2 *)(crow + col);
            if (beta != 0.0f) { // beta == 0 must not read C: it may hold NaN
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
      }
    }
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
                          int, float *, unsigned *);
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

  const long long tiles = (long long)((a->M + BM - 1) / BM) * ((a->N + BN - 1) / BN);
  const int ktiles = (a->K + BK - 1) / BK;
  const int splits = kt_gemm_splits(tiles * a->batch, ktiles, a->sm_count, OCC, SPLIT);
  const int kper = (ktiles + splits - 1) / splits;
  const size_t smem = (size_t)STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;
  cudaError_t err = kt_launch_prepare(&once[2 * ta + tb], (const void *)kernel, smem, 0, 0, NULL);
  if (err != cudaSuccess)
    return (int)err;
  const int kp = (a->K + 16 / ES - 1) / (16 / ES) * (16 / ES);
  const size_t bytes_a = da ? 0 : (size_t)a->batch * a->M * kp * ES, bytes_b = db ? 0 : (size_t)a->batch * a->N * kp * ES;
  /* Split K: a slot of BM x BN partial sums per block, a counter per tile
   * (zeroed here; the last block of a tile zeroes it again). */
  const size_t packed = (bytes_a + bytes_b + 255) / 256 * 256;
  const size_t bytes_ws = splits > 1 ? (size_t)tiles * a->batch * splits * BM * BN * 4 : 0;
  const size_t bytes_cnt = splits > 1 ? (size_t)tiles * a->batch * 4 : 0;
  const size_t total = packed + bytes_ws + bytes_cnt;
  void *scratch = NULL;
  if (total > 0) {
    err = a->pool ? cudaMallocFromPoolAsync(&scratch, total, (cudaMemPool_t)a->pool, stream)
                  : cudaMallocAsync(&scratch, total, stream);
    if (err != cudaSuccess)
      return (int)err;
  }
  float *ws = splits > 1 ? (float *)((char *)scratch + packed) : NULL;
  unsigned *counters = splits > 1 ? (unsigned *)((char *)scratch + packed + bytes_ws) : NULL;
  if (counters)
    err = cudaMemsetAsync(counters, 0, bytes_cnt, stream);
  const void *A = a->A, *B = a->B;
  long long lda = a->lda, ldb = a->ldb, sa = a->stride_a, sb = a->stride_b;
  if (err == cudaSuccess && !da) {
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

  if (err == cudaSuccess && tiles > 0x7fffffffLL)
    err = cudaErrorInvalidConfiguration;
  for (int b0 = 0; err == cudaSuccess && b0 < a->batch; b0 += 65535) {
    cudaLaunchConfig_t cfg = {};
    // The chunks of K on z: no block waits for another, so any order runs.
    cfg.gridDim = dim3((unsigned)tiles, (unsigned)(a->batch - b0 < 65535 ? a->batch - b0 : 65535), (unsigned)splits);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    err = cudaLaunchKernelEx(&cfg, kernel, map_a, map_b, a->C, a->ldc, a->stride_c, a->M, a->N, a->K, a->alpha,
                             a->beta, b0, kper, ws ? ws + (size_t)b0 * tiles * splits * BM * BN : NULL,
                             counters ? counters + (size_t)b0 * tiles : NULL);
  }
  if (scratch) {
    const cudaError_t e = cudaFreeAsync(scratch, stream);
    if (err == cudaSuccess)
      err = e;
  }
  return (int)err;
}
