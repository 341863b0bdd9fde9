@ -- templates/gemm_mma.cu.tpl: the gemm family's Ampere tensor-core kernel,
@ -- C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b], FP32 C, for one input
@ -- type (bf16, f16 or tf32): mma.sync + ldmatrix + cp.async.  The space
@ -- (templates/gemm.space.lua) sets the values used below;
@ -- templates/gemm_common.cuh holds what the gemm kernels share.  Built for
@ -- sm_80 and newer (it is the tensor-core path of an A100, and runs on
@ -- Hopper beside wgmma).
#include "kt_launch.h"
#include "gemm_common.cuh"

/*
 * Multistage mma.sync kernel.
 *
 * A block computes a BM x BN tile of C for one batch entry with WM x WN
 * warps, each owning a (BM / WM) x (BN / WN) warp tile of m16n8 mma tiles
 * (m16n8k16 for BF16 and FP16, m16n8k8 for TF32; FP32 accumulators).  K
 * goes by slices of BK: STAGES slices of A and B live in shared memory,
 * filled by cp.async while the warps multiply an older one (a classic
 * software pipeline: STAGES - 1 slices in flight).
 *
 * Layouts.  TA = 1 when A is stored K x M (op T: MN-major), TB = 1 when B
 * is stored K x N (op N: MN-major); a slice is kept in shared memory as it
 * is stored (rows of the stored matrix), so cp.async copies rows as they
 * are.  The fragments come out with ldmatrix: K-major tiles as they are,
 * MN-major 16-bit tiles with ldmatrix.trans, which transposes 16-bit
 * elements.  TF32 has no such transpose (ldmatrix.trans would swap the
 * halves of 32-bit elements), and repacking the tile into K-major on the
 * way in would cost the cp.async pipeline (a copy through registers); so
 * an MN-major TF32 tile stays as stored and its fragments are read one
 * 32-bit element at a time, with its own swizzle (below) that keeps those
 * reads conflict-free.  TF32 fragments go to the tensor cores as FP32
 * bits, which they truncate to TF32 (kt_tune_gemm_bound allows it).
 *
 * Shared memory: rows of 16-byte chunks, CPR per row, each chunk's place in
 * its row XORed with a few bits of the row number, so that the 8 rows one
 * ldmatrix phase reads (8 rows x 16 bytes, one chunk column) fall on 8
 * different 16-byte bank groups: with 8 or more chunks a row, chunk ^ (row
 * % 8); with 4 (64-byte rows, two to a 128-byte bank line), chunk ^ (row /
 * 2 % 4).  The scalar TF32 reads touch 4 rows (k) x 2 chunks (8 m) at once:
 * chunk ^ (2 row % 8) puts those 8 on different bank groups too.
 *
 * Alignment and edges.  cp.async copies 16 bytes only from 16-byte aligned
 * addresses, so the launcher gives each operand the widest copy its base,
 * leading dimension and batch stride allow (`gran`: 16, 8 or 4 bytes, all
 * cp.async; a 16-bit operand with an odd leading dimension or base goes
 * element by element through registers, gran 2).  Every copy has a source
 * size: the bytes past the matrix's edge (M, N or K) are zero-filled in
 * shared memory, never read, so edges add nothing and need no other code;
 * the epilogue stores only inside C.  Every call is served.
 */
constexpr int BM = $(bm), BN = $(bn), BK = $(bk); // block tile
constexpr int WM = $(wm), WN = $(wn);              // warps along M and N
constexpr int STAGES = $(stages);
constexpr int GROUP = $(group);                    // tile rows per band of the launch order
constexpr int THREADS = 32 * WM * WN;
constexpr int TYPE = $(type_id);
constexpr int ES = $(es);                          // bytes per input element
constexpr int EPC = 16 / ES;                       // elements per 16-byte chunk
constexpr int KSTEP = 32 / ES;                     // K of one mma: two chunks
constexpr int WTM = BM / WM, WTN = BN / WN;        // warp tile
constexpr int MI = WTM / 16, NI = WTN / 8;         // mma tiles per warp
constexpr int A_BYTES = BM * BK * ES, B_BYTES = BN * BK * ES, STAGE_BYTES = A_BYTES + B_BYTES;
static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tiles are whole m16 tiles and pairs of n8 tiles");
static_assert(BK % KSTEP == 0 && (BK * ES == 64 || BK * ES == 128), "slice rows of 4 or 8 chunks");
static_assert((BM * BK * ES / 16) % THREADS == 0 && (BN * BK * ES / 16) % THREADS == 0,
              "each thread copies whole chunks of both tiles");

// ---- shared-memory layout ----------------------------------------------
// Byte offset of chunk `chunk` of row `row` in a tile of CPR chunks a row;
// S2: the scalar TF32 swizzle.  (See the comment above.)
template <int CPR, int S2> static __device__ __forceinline__ unsigned swz(int row, int chunk)
{
  static_assert(CPR >= 4 && (!S2 || CPR >= 8), "the swizzle spans 4 (64-byte rows) or 8 chunks");
  const int x = S2 ? (2 * row) & 7 : CPR >= 8 ? row & 7 : (row >> 1) & 3;
  return (unsigned)(row * CPR * 16 + (chunk ^ x) * 16);
}

// ---- cp.async ------------------------------------------------------------
// Copy `bytes` (0...N) of src to dst and zero the rest of the N bytes; with
// bytes 0 nothing is read (src must still be a valid address).
static __device__ __forceinline__ void cp16(unsigned dst, const void *src, int bytes)
{
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void cp8(unsigned dst, const void *src, int bytes)
{
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void cp4(unsigned dst, const void *src, int bytes)
{
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> static __device__ __forceinline__ void cp_wait()
{
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// One 16-byte chunk of which `bytes` exist at src, in copies of `gran` bytes
// (src and the chunk's end are gran-aligned); the rest is zero.
static __device__ __forceinline__ void copy_chunk(unsigned dst, const char *src, const char *safe, int bytes, int gran)
{
  if (gran == 16) {
    cp16(dst, bytes ? src : safe, bytes);
  } else if (gran == 8) {
#pragma unroll
    for (int p = 0; p < 16; p += 8) {
      const int b = min(8, max(0, bytes - p));
      cp8(dst + p, b ? src + p : safe, b);
    }
  } else if (ES == 4 || gran == 4) {
#pragma unroll
    for (int p = 0; p < 16; p += 4) {
      const int b = min(4, max(0, bytes - p));
      cp4(dst + p, b ? src + p : safe, b);
    }
  } else {
    // 16-bit elements 2-byte aligned: through registers, a plain store that
    // the next __syncthreads publishes like the copies' wait.
    unsigned w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned lo = 4 * j < bytes ? ((const unsigned short *)src)[2 * j] : 0u;
      const unsigned hi = 4 * j + 2 < bytes ? ((const unsigned short *)src)[2 * j + 1] : 0u;
      w[j] = lo | hi << 16;
    }
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
                 : "memory");
  }
}

// Copy a slice of an operand: R rows of CPR chunks, rows row0... of the
// stored matrix (`outer` rows, `ld` elements apart) from element col0 of
// each (`inner` elements a row), into the swizzled tile at dst.
template <int R, int CPR, int S2>
static __device__ __forceinline__ void load_tile(unsigned dst, const char *g, long long ld, int outer, int inner,
                                                 int row0, int col0, int gran)
{
  constexpr int CHUNKS = R * CPR;
#pragma unroll
  for (int i = 0; i < CHUNKS / THREADS; ++i) {
    const int c = (int)threadIdx.x + i * THREADS, row = c / CPR, ch = c % CPR; // a row's chunks: adjacent threads
    const int r = row0 + row, e = col0 + ch * EPC;
    const int valid = r < outer ? min(EPC, max(0, inner - e)) : 0;
    const char *src = valid ? g + ((long long)r * ld + e) * ES : g;
    copy_chunk(dst + swz<CPR, S2>(row, ch), src, g, valid * ES, gran);
  }
}

// ---- fragments and mma ------------------------------------------------
static __device__ __forceinline__ void ldsm4(unsigned (&r)[4], unsigned addr)
{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
static __device__ __forceinline__ void ldsm4_t(unsigned (&r)[4], unsigned addr)
{
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
static __device__ __forceinline__ unsigned lds32(unsigned addr)
{
  unsigned x;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(x) : "r"(addr));
  return x;
}

// d += a (16 x KSTEP) * b (KSTEP x 8).
static __device__ __forceinline__ void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1)
{
  asm("mma.sync.aligned.m16n8k$(ki).row.col.f32.$(ptx_type).$(ptx_type).f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/*
 * Fragments of k step kk of a stage (lane l; g = l / 4, t = l % 4).  An m16
 * A fragment is four 8 x 8 (16-bit) matrices: rows 0-7 and 8-15 of the m16
 * tile, by the k step's first and second chunk; ldmatrix.x4 takes matrix
 * l / 8's row l % 8 from lane l.  K-major, a matrix is 8 rows of the tile at
 * one chunk; MN-major (16-bit), 8 rows of k at one chunk of 8 m, which
 * .trans hands out as the K-major one would be.  One x4 load of B gives two
 * n8 tiles' fragments (k chunks 0, 1 of tile 2p, then of 2p + 1).
 */
template <int TA>
static __device__ __forceinline__ void frag_a(unsigned (&f)[4], unsigned tile, int m0, int kk)
{
  const int l = threadIdx.x % 32, i = l / 8, j = l % 8;
  if constexpr (!TA) {
    ldsm4(f, tile + swz<BK * ES / 16, 0>(m0 + (i & 1) * 8 + j, 2 * kk + (i >> 1)));
  } else if constexpr (ES == 2) {
    ldsm4_t(f, tile + swz<BM * ES / 16, 0>(KSTEP * kk + (i >> 1) * 8 + j, (m0 + (i & 1) * 8) / EPC));
  } else { // TF32, MN-major: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4) as (m, k)
    const int g = l / 4, t = l % 4;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int m = m0 + g + (q & 1) * 8, k = KSTEP * kk + t + (q >> 1) * 4;
      f[q] = lds32(tile + swz<BM * ES / 16, 1>(k, m / EPC) + (m % EPC) * ES);
    }
  }
}

// The fragments of n8 tiles 2p and 2p + 1 from column n0 (= 16p) of the
// warp's tile: f[0], f[1] for the first, f[2], f[3] for the second.
template <int TB>
static __device__ __forceinline__ void frag_b(unsigned (&f)[4], unsigned tile, int n0, int kk)
{
  const int l = threadIdx.x % 32, i = l / 8, j = l % 8;
  if constexpr (!TB) {
    ldsm4(f, tile + swz<BK * ES / 16, 0>(n0 + (i >> 1) * 8 + j, 2 * kk + (i & 1)));
  } else if constexpr (ES == 2) {
    ldsm4_t(f, tile + swz<BN * ES / 16, 0>(KSTEP * kk + (i & 1) * 8 + j, (n0 + (i >> 1) * 8) / EPC));
  } else { // TF32, MN-major: b0 (k t, n g), b1 (k t + 4, n g)
    const int g = l / 4, t = l % 4;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int n = n0 + g + (q >> 1) * 8, k = KSTEP * kk + t + (q & 1) * 4;
      f[q] = lds32(tile + swz<BN * ES / 16, 1>(k, n / EPC) + (n % EPC) * ES);
    }
  }
}

// TA: A is MN-major (op T); TB: B is MN-major (op N).  ga, gb: the copy
// granularity of each operand (bytes).
template <int TA, int TB>
__global__ void __launch_bounds__(THREADS) $(name)(kt_gemm_args a, int ga, int gb, int batch0)
{
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const unsigned tiles = (unsigned)__cvta_generic_to_shared(smem_raw); // STAGES x (A tile, B tile)

  // Launch order: bands of GROUP tile rows, column by column within a band,
  // so that the blocks running together share their B slices in L2.
  const int tiles_m = (a.M + BM - 1) / BM, tiles_n = (a.N + BN - 1) / BN;
  const int per_band = GROUP * tiles_n, band = blockIdx.x / per_band;
  const int first_m = band * GROUP, rows_in_band = min(GROUP, tiles_m - first_m);
  const int tile_m = first_m + (blockIdx.x % per_band) % rows_in_band;
  const int tile_n = (blockIdx.x % per_band) / rows_in_band;
  const long long b = batch0 + blockIdx.y;
  const char *A = (const char *)a.A + b * a.stride_a * ES, *B = (const char *)a.B + b * a.stride_b * ES;
  const int ktiles = (a.K + BK - 1) / BK;

  // Stage s <- slice kt of A (BM rows of op(A)) and B (BN columns of op(B)).
  auto load = [&](int s, int kt) {
    const unsigned ta = tiles + s * STAGE_BYTES, tb = ta + A_BYTES;
    const int k0 = kt * BK;
    if constexpr (!TA)
      load_tile<BM, BK * ES / 16, 0>(ta, A, a.lda, a.M, a.K, tile_m * BM, k0, ga);
    else
      load_tile<BK, BM * ES / 16, ES == 4>(ta, A, a.lda, a.K, a.M, k0, tile_m * BM, ga);
    if constexpr (!TB)
      load_tile<BN, BK * ES / 16, 0>(tb, B, a.ldb, a.N, a.K, tile_n * BN, k0, gb);
    else
      load_tile<BK, BN * ES / 16, ES == 4>(tb, B, a.ldb, a.K, a.N, k0, tile_n * BN, gb);
  };

  const int warp = threadIdx.x / 32;
  const int wm0 = (warp / WN) * WTM, wn0 = (warp % WN) * WTN; // the warp's tile in the block's
  float acc[MI][NI][4];
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int ni = 0; ni < NI; ++ni)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        acc[mi][ni][q] = 0.0f;

  /*
   * The pipeline.  One commit group per slice (empty past the last), so
   * that waiting until STAGES - 2 groups are pending means slice kt has
   * landed, for this thread; the __syncthreads then makes every thread's
   * copies visible, and also says every warp is done with slice kt - 1,
   * whose stage is refilled next (with slice kt + STAGES - 1).
   */
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles)
      load(s, s);
    cp_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_wait<STAGES - 2>();
    __syncthreads();
    const int next = kt + STAGES - 1;
    if (next < ktiles)
      load(next % STAGES, next);
    cp_commit();
    const unsigned ta = tiles + (kt % STAGES) * STAGE_BYTES, tb = ta + A_BYTES;
#pragma unroll
    for (int kk = 0; kk < BK / KSTEP; ++kk) {
      unsigned fa[MI][4], fb[NI / 2][4];
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
        frag_a<TA>(fa[mi], ta, wm0 + 16 * mi, kk);
#pragma unroll
      for (int p = 0; p < NI / 2; ++p)
        frag_b<TB>(fb[p], tb, wn0 + 16 * p, kk);
#pragma unroll
      for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
          mma(acc[mi][ni], fa[mi], fb[ni / 2][2 * (ni % 2)], fb[ni / 2][2 * (ni % 2) + 1]);
    }
  }
  cp_wait<0>(); // nothing is left in flight when the block exits

  /*
   * Epilogue, straight from the accumulators: in an m16n8 tile, lane l
   * holds (row l / 4, columns 2 (l % 4) + {0, 1}) in acc[0], acc[1] and the
   * same columns 8 rows further down in acc[2], acc[3].
   */
  float *Cb = a.C + b * a.stride_c;
  const bool pairs = (a.ldc % 2 == 0) && (((unsigned long long)a.C & 7) == 0) && (a.stride_c % 2 == 0);
  const int l = threadIdx.x % 32;
#pragma unroll
  for (int mi = 0; mi < MI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = tile_m * BM + wm0 + 16 * mi + l / 4 + 8 * h;
      if (row >= a.M)
        continue;
      float *crow = Cb + (long long)row * a.ldc;
#pragma unroll
      for (int ni = 0; ni < NI; ++ni) {
        const int col = tile_n * BN + wn0 + 8 * ni + 2 * (l % 4);
        float x = a.alpha * acc[mi][ni][2 * h], y = a.alpha * acc[mi][ni][2 * h + 1];
        if (pairs && col + 1 < a.N) {
          float2 *p = (float2 *)(crow + col);
          if (a.beta != 0.0f) { // beta == 0 must not read C: it may hold NaN
            const float2 o = *p;
            x += a.beta * o.x;
            y += a.beta * o.y;
          }
          *p = make_float2(x, y);
        } else {
          if (col < a.N)
            crow[col] = a.beta != 0.0f ? x + a.beta * crow[col] : x;
          if (col + 1 < a.N)
            crow[col + 1] = a.beta != 0.0f ? y + a.beta * crow[col + 1] : y;
        }
      }
    }
}

/* ---- launcher ------------------------------------------------------------ */

// The widest copy (bytes) that an operand's base, rows and batch entries
// all allow: 16, 8 or 4 (cp.async), or 2 (16-bit, through registers).
static int granularity(const void *p, long long ld, long long stride, int batch)
{
  const unsigned long long x =
      (unsigned long long)p | (unsigned long long)(ld * ES) | (batch > 1 ? (unsigned long long)(stride * ES) : 0ull);
  return x % 16 == 0 ? 16 : x % 8 == 0 ? 8 : x % 4 == 0 ? 4 : 2;
}

typedef void (*kernel_fn)(kt_gemm_args, int, int, int);
static const kernel_fn kernels[4] = {$(name)<0, 0>, $(name)<0, 1>, $(name)<1, 0>, $(name)<1, 1>};
static kt_launch_once once[4];

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_gemm_args *a = (const kt_gemm_args *)args;
  if (a->type != TYPE)
    return (int)cudaErrorInvalidValue;
  const int ta = a->op_a == KT_GEMM_OP_T, tb = a->op_b == KT_GEMM_OP_N; // MN-major operands
  const kernel_fn kernel = kernels[2 * ta + tb];
  const size_t smem = (size_t)STAGES * STAGE_BYTES;
  cudaError_t err = kt_launch_prepare(&once[2 * ta + tb], (const void *)kernel, smem, 0, 0, NULL);
  if (err != cudaSuccess)
    return (int)err;
  const int ga = granularity(a->A, a->lda, a->stride_a, a->batch), gb = granularity(a->B, a->ldb, a->stride_b, a->batch);
  const long long tiles = (long long)((a->M + BM - 1) / BM) * ((a->N + BN - 1) / BN);
  if (tiles > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  for (long long b0 = 0; err == cudaSuccess && b0 < a->batch; b0 += 65535) { // long long: batch may near INT_MAX
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)tiles, (unsigned)(a->batch - b0 < 65535 ? a->batch - b0 : 65535));
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    err = cudaLaunchKernelEx(&cfg, kernel, *a, ga, gb, (int)b0);
  }
  return (int)err;
}
