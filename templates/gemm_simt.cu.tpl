@ -- templates/gemm_simt.cu.tpl: the gemm family's kernel on the CUDA cores:
@ -- any input type, either op, any leading dimension, alignment and batch,
@ -- on any target.  The space (templates/gemm.space.lua) sets the values
@ -- used below.
#include "kt_launch.h"
#include "gemm_common.cuh"

/*
 * The Programming Guide's shared-memory tiled multiply, register-tiled:
 * each block of 256 threads computes one BM x BN tile of C for one batch
 * entry, each thread a TM x TN block of it, staging BK-deep slices of
 * op(A) and op(B) in shared memory.  At 16 x 16 (TM = TN = 1) it is the
 * Guide's kernel; larger thread tiles read each staged element TM (or TN)
 * times from registers instead of once from shared memory, which is what
 * bounds the Guide's.  The flat tiles (a few rows by 128 or 256 columns,
 * or the transpose) serve entries with a few rows or columns, which a
 * square tile would mostly pad: on a batch of 1 x 474 x 857 products a
 * 32 x 32 tile spends 31 of every 32 multiply-adds on padding, and its
 * instructions, not the memory, then set its speed.
 *
 * Elements are read one at a time through gemm_load, which widens the
 * 16-bit types exactly and rounds TF32 as the tensor cores' callers
 * expect, so the products are those of the rounded inputs and the sums
 * FP32 (exact FP32 for KT_F32).  The kernel is compiled once per input
 * type (tile<TYPE>), so that a load is one instruction: with the type
 * read at run time (a branch around each element's load) its tiles took
 * 1.16 to 1.41 times as long (geometric means over 40 random batches, up
 * to 1.96; H100, session 51).  Consecutive threads read consecutive
 * addresses whichever way an operand is stored (along K for A with op N
 * and B with op T, along M or N otherwise), so any alignment and leading
 * dimension is served at the same speed.  The next slice is read into
 * registers while the current one is multiplied, and stored into the
 * other of two shared buffers: one barrier a slice.  Fetched under a
 * branch (none after the last slice), the tiles were slower: over 40
 * random batches (H100, sessions 51 and 52, times as a share of
 * cuBLAS's) the fastest tile of each batch reached 0.973 of cuBLAS's
 * speed with the branch and 0.997 without; the tiles of 16 and 64
 * outputs a thread gained 1.08 to 1.13 times, those of 4 lost up to 0.92.
 *
 * A thread's rows are TM / VM runs of VM apart by BM / (TM / VM), VM =
 * min(TM, 4), and its columns likewise: its reads of a staged row are
 * vectors of up to 4 that the warp's lanes take side by side (or the
 * same one, broadcast), free of bank conflicts.  It serves every call;
 * the gemm family's tensor-core kernels are faster where they serve, and
 * kt_matmul where an FP32 product is large (runtime/gemm.c).
 */
constexpr int BM = $(bm), BN = $(bn), BK = $(bk), TM = $(tm), TN = $(tn);
constexpr int THREADS = $(threads), SIDE_N = BN / TN; // (BM / TM) x SIDE_N threads
constexpr int VM = TM < 4 ? TM : 4, RUNS_M = TM / VM, RUN_STRIDE_M = BM / RUNS_M;
constexpr int VN = TN < 4 ? TN : 4, RUNS_N = TN / VN, RUN_STRIDE_N = BN / RUNS_N;
static_assert((BM / TM) * SIDE_N == THREADS && BM % TM == 0 && BN % TN == 0 && TM % VM == 0 && TN % VN == 0 &&
                  (BM / TM) * VM == RUN_STRIDE_M && SIDE_N * VN == RUN_STRIDE_N,
              "the threads' runs tile the block's rows and columns");
static_assert(THREADS % BK == 0 && THREADS % BM == 0 && THREADS % BN == 0,
              "a slice's reads walk whole rows or columns");

// Elements of a BM x BK or BN x BK slice that each thread reads: at least
// one, though then only the first rows x BK threads read.
template <int ROWS> struct slice {
  static constexpr int elems = ROWS * BK;
  static constexpr int per = elems < THREADS ? 1 : elems / THREADS;
  static_assert(elems < THREADS || elems % THREADS == 0, "slice shape");
};
constexpr int PER_A = slice<BM>::per, PER_B = slice<BN>::per;

template <int W> struct vec;
template <> struct vec<1> { using t = float; };
template <> struct vec<2> { using t = float2; };
template <> struct vec<4> { using t = float4; };

// W consecutive floats of shared memory into r.
template <int W> static __device__ __forceinline__ void load_vec(const float *p, float *r)
{
  const typename vec<W>::t v = *reinterpret_cast<const typename vec<W>::t *>(p);
  static_assert(W == 1 || W == 2 || W == 4, "width");
  if constexpr (W == 1) {
    r[0] = v;
  } else if constexpr (W == 2) {
    r[0] = v.x, r[1] = v.y;
  } else {
    r[0] = v.x, r[1] = v.y, r[2] = v.z, r[3] = v.w;
  }
}

// How a thread walks one operand's slices (ROWS x BK of them).  Its i-th
// element of a slice (e = t + i THREADS) is taken along K first where the
// operand is stored K-contiguous (k = e % BK: the same k for every i, as
// THREADS is a multiple of BK), else along the row (r = e % ROWS, the
// same r).  So its elements lie STEP_I apart in memory, and a slice BK
// further on is STEP_K further.  `reads`: whether this thread reads at
// all (a slice of fewer elements than threads).
struct walk {
  long long at, step_i, step_k; // element offsets: this slice's first element, per i, per slice
  int r0, dr, k0, dk;           // its i-th element: row r0 + i dr of the tile, k k0 + i dk of the slice
  bool reads;
};

template <int ROWS>
static __device__ __forceinline__ walk walk_of(int t, bool k_contiguous, long long row0, long long ld)
{
  walk w;
  if (k_contiguous)
    w.r0 = t / BK, w.dr = THREADS / BK, w.k0 = t % BK, w.dk = 0;
  else
    w.r0 = t % ROWS, w.dr = 0, w.k0 = t / ROWS, w.dk = THREADS / ROWS;
  w.reads = t < slice<ROWS>::elems;
  w.at = k_contiguous ? (row0 + w.r0) * ld + w.k0 : w.k0 * ld + row0 + w.r0;
  w.step_i = k_contiguous ? w.dr * ld : w.dk * ld;
  w.step_k = k_contiguous ? BK : BK * ld;
  return w;
}

typedef float StageA[BK][BM + 4]; // [k][m]: op(A)(m0 + m, k0 + k); rows 16-byte aligned
typedef float StageB[BK][BN + 4]; // [k][n]: op(B)(k0 + k, n0 + n)

// The block's tile, for inputs of TYPE (a compile-time constant, so that
// each element's load is one instruction, not a branch on the type).
template <int TYPE>
static __device__ __forceinline__ void tile(const kt_gemm_args &a, int tiles_n, int batch0, StageA *As, StageB *Bs)
{
  const long long b = batch0 + blockIdx.y;
  constexpr int es = TYPE == KT_GEMM_BF16 || TYPE == KT_GEMM_F16 ? 2 : 4;
  const char *A = (const char *)a.A + b * a.stride_a * es, *B = (const char *)a.B + b * a.stride_b * es;
  float *C = a.C + b * a.stride_c;
  const int m0 = blockIdx.x / tiles_n * BM, n0 = blockIdx.x % tiles_n * BN;
  const int t = threadIdx.x, tx = t % SIDE_N, ty = t / SIDE_N;
  const bool a_kc = a.op_a == KT_GEMM_OP_N, b_kc = a.op_b == KT_GEMM_OP_T; // stored with K contiguous

  const walk wa = walk_of<BM>(t, a_kc, m0, a.lda), wb = walk_of<BN>(t, b_kc, n0, a.ldb);
  long long at_a = wa.at, at_b = wb.at;
  float ra[PER_A], rb[PER_B];
  // Slice k0 of both operands into registers, zeros past M, N and K.
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < PER_A; ++i) {
      const int ka = k0 + wa.k0 + i * wa.dk;
      ra[i] = wa.reads && m0 + wa.r0 + i * wa.dr < a.M && ka < a.K ? gemm_load(A, at_a + i * wa.step_i, TYPE) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < PER_B; ++i) {
      const int kb = k0 + wb.k0 + i * wb.dk;
      rb[i] = wb.reads && n0 + wb.r0 + i * wb.dr < a.N && kb < a.K ? gemm_load(B, at_b + i * wb.step_i, TYPE) : 0.0f;
    }
    at_a += wa.step_k, at_b += wb.step_k;
  };
  auto stage = [&](int buf) {
    if (wa.reads)
#pragma unroll
      for (int i = 0; i < PER_A; ++i)
        As[buf][wa.k0 + i * wa.dk][wa.r0 + i * wa.dr] = ra[i];
    if (wb.reads)
#pragma unroll
      for (int i = 0; i < PER_B; ++i)
        Bs[buf][wb.k0 + i * wb.dk][wb.r0 + i * wb.dr] = rb[i];
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j)
      acc[i][j] = 0.0f;

  fetch(0);
  stage(0);
  __syncthreads(); // the first slice is staged before any thread reads it
  for (int k0 = 0, buf = 0; k0 < a.K; k0 += BK, buf ^= 1) {
    // The next slice, in flight while this one is multiplied, fetched
    // and staged even after the last one (zeros, read from nowhere), so
    // that no branch keeps its loads from moving above the multiply-adds.
    fetch(k0 + BK); // K <= KT_MATMUL_MAX_DIM: a slice past it stays within int
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float x[TM], y[TN];
#pragma unroll
      for (int q = 0; q < RUNS_M; ++q)
        load_vec<VM>(&As[buf][k][q * RUN_STRIDE_M + ty * VM], x + q * VM);
#pragma unroll
      for (int q = 0; q < RUNS_N; ++q)
        load_vec<VN>(&Bs[buf][k][q * RUN_STRIDE_N + tx * VN], y + q * VN);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
          acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
    }
    stage(buf ^ 1); // the other buffer: its last readers passed the barrier below a slice ago
    __syncthreads();
  }

  // C, a run of VN columns at a time: one 16-byte store where the run is
  // whole and 16-byte aligned, else a float at a time.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const long long row = m0 + i / VM * RUN_STRIDE_M + ty * VM + i % VM;
    if (row >= a.M)
      continue;
#pragma unroll
    for (int q = 0; q < RUNS_N; ++q) {
      const int col = n0 + q * RUN_STRIDE_N + tx * VN;
      float *c = &C[row * a.ldc + col];
      if constexpr (VN == 4) {
        if (col + 4 <= a.N && ((size_t)c & 15) == 0) {
          const int j = q * VN;
          float4 o = make_float4(a.alpha * acc[i][j], a.alpha * acc[i][j + 1], a.alpha * acc[i][j + 2],
                                 a.alpha * acc[i][j + 3]);
          if (a.beta != 0.0f) { // beta == 0 must not read C
            const float4 old = *(const float4 *)c;
            o.x += a.beta * old.x, o.y += a.beta * old.y, o.z += a.beta * old.z, o.w += a.beta * old.w;
          }
          *(float4 *)c = o;
          continue;
        }
      }
#pragma unroll
      for (int j = 0; j < VN; ++j)
        if (col + j < a.N)
          c[j] = a.beta == 0.0f ? a.alpha * acc[i][q * VN + j] : a.alpha * acc[i][q * VN + j] + a.beta * c[j];
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS, $(min_blocks))
$(name)(kt_gemm_args a, int tiles_n, int batch0)
{
  __shared__ __align__(16) StageA As[2];
  __shared__ __align__(16) StageB Bs[2];
  switch (a.type) {
  case KT_GEMM_TF32:
    tile<KT_GEMM_TF32>(a, tiles_n, batch0, As, Bs);
    break;
  case KT_GEMM_BF16:
    tile<KT_GEMM_BF16>(a, tiles_n, batch0, As, Bs);
    break;
  case KT_GEMM_F16:
    tile<KT_GEMM_F16>(a, tiles_n, batch0, As, Bs);
    break;
  default:
    tile<KT_GEMM_F32>(a, tiles_n, batch0, As, Bs);
  }
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_gemm_args *a = (const kt_gemm_args *)args;
  const long long tiles_m = (a->M + BM - 1) / BM, tiles_n = (a->N + BN - 1) / BN;
  if (tiles_m * tiles_n > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  cudaError_t err = cudaSuccess;
  for (long long b0 = 0; err == cudaSuccess && b0 < a->batch; b0 += 65535) { // long long: batch may near INT_MAX
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(tiles_m * tiles_n), (unsigned)(a->batch - b0 < 65535 ? a->batch - b0 : 65535));
    cfg.blockDim = dim3(THREADS);
    cfg.stream = stream;
    err = cudaLaunchKernelEx(&cfg, $(name), *a, (int)tiles_n, (int)b0);
  }
  return (int)err;
}
