@ -- templates/gemm_simt.cu.tpl: the gemm family's kernel on the CUDA cores:
@ -- any input type, either op, any leading dimension, alignment and batch,
@ -- on any target.  The space (templates/gemm.space.lua) sets the values
@ -- used below.
#include "kt_launch.h"
#include "gemm_common.cuh"

/*
 * The Programming Guide's shared-memory tiled multiply, register-tiled:
 * each block of 256 threads computes one BS x BS tile of C for one batch
 * entry, each thread a TM x TM block of it, staging BK-deep slices of
 * op(A) and op(B) in shared memory.  At BS 16 (TM 1) it is the Guide's
 * kernel; larger tiles read each staged element TM times from registers
 * instead of once from shared memory, which is what bounds the Guide's.
 *
 * Elements are read one at a time through gemm_load, which widens the
 * 16-bit types exactly and rounds TF32 as the tensor cores' callers
 * expect, so the products are those of the rounded inputs and the sums
 * FP32 (exact FP32 for KT_F32).  Consecutive threads read consecutive
 * addresses whichever way an operand is stored (along K for A with op N
 * and B with op T, along M or N otherwise), so any alignment and leading
 * dimension is served at the same speed.  The next slice is read into
 * registers while the current one is multiplied, and stored into the
 * other of two shared buffers: one barrier a slice.
 *
 * A thread's rows (and columns) are TM / VW runs of VW apart by BS / (TM
 * / VW), VW = min(TM, 4): its reads of a staged row are VW-wide vectors
 * that the warp's lanes take side by side, free of bank conflicts.  It
 * serves every call; the gemm family's tensor-core kernels are faster
 * where they serve, and kt_matmul where an FP32 product is large
 * (runtime/gemm.c).
 */
constexpr int BS = $(bs), BK = $(bk), TM = $(tm);
constexpr int THREADS = $(threads), SIDE = BS / TM; // SIDE x SIDE threads
constexpr int VW = TM < 4 ? TM : 4, RUNS = TM / VW, RUN_STRIDE = BS / RUNS;
constexpr int PER = BS * BK / THREADS; // elements of each operand's slice a thread reads
constexpr int LD = BS + 4;             // a staged row, padded: rows 16-byte aligned, staged along K 4 banks apart
static_assert(SIDE * SIDE == THREADS && BS * BK % THREADS == 0 && SIDE * VW == RUN_STRIDE, "tile shape");

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

// How a thread walks one operand's slices.  Its i-th element of a slice
// (e = t + i THREADS of BS x BK) is taken along K first where the operand
// is stored K-contiguous (k = e % BK: the same k for every i, as THREADS
// is a multiple of BK), else along the row (r = e % BS, the same r).  So
// its elements lie STEP_I apart in memory, and a slice BK further on is
// STEP_K further.
struct walk {
  long long at, step_i, step_k; // element offsets: this slice's first element, per i, per slice
  int r0, dr, k0, dk;           // its i-th element: row r0 + i dr of the tile, k k0 + i dk of the slice
};

static __device__ __forceinline__ walk walk_of(int t, bool k_contiguous, long long row0, long long ld)
{
  walk w;
  if (k_contiguous)
    w.r0 = t / BK, w.dr = THREADS / BK, w.k0 = t % BK, w.dk = 0;
  else
    w.r0 = t % BS, w.dr = 0, w.k0 = t / BS, w.dk = THREADS / BS;
  w.at = k_contiguous ? (row0 + w.r0) * ld + w.k0 : w.k0 * ld + row0 + w.r0;
  w.step_i = k_contiguous ? w.dr * ld : w.dk * ld;
  w.step_k = k_contiguous ? BK : BK * ld;
  return w;
}

extern "C" __global__ void __launch_bounds__(THREADS, $(min_blocks))
$(name)(kt_gemm_args a, int tiles_n, int batch0)
{
  __shared__ __align__(16) float As[2][BK][LD]; // As[.][k][m]: op(A)(m0 + m, k0 + k)
  __shared__ __align__(16) float Bs[2][BK][LD]; // Bs[.][k][n]: op(B)(k0 + k, n0 + n)
  const long long b = batch0 + blockIdx.y;
  const int es = a.type == KT_GEMM_BF16 || a.type == KT_GEMM_F16 ? 2 : 4;
  const char *A = (const char *)a.A + b * a.stride_a * es, *B = (const char *)a.B + b * a.stride_b * es;
  float *C = a.C + b * a.stride_c;
  const int m0 = blockIdx.x / tiles_n * BS, n0 = blockIdx.x % tiles_n * BS;
  const int t = threadIdx.x, tx = t % SIDE, ty = t / SIDE;
  const bool a_kc = a.op_a == KT_GEMM_OP_N, b_kc = a.op_b == KT_GEMM_OP_T; // stored with K contiguous

  const walk wa = walk_of(t, a_kc, m0, a.lda), wb = walk_of(t, b_kc, n0, a.ldb);
  long long at_a = wa.at, at_b = wb.at;
  float ra[PER], rb[PER];
  // Slice k0 of both operands into registers, zeros past M, N and K.
  auto fetch = [&](int k0) {
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int ka = k0 + wa.k0 + i * wa.dk, kb = k0 + wb.k0 + i * wb.dk;
      ra[i] = m0 + wa.r0 + i * wa.dr < a.M && ka < a.K ? gemm_load(A, at_a + i * wa.step_i, a.type) : 0.0f;
      rb[i] = n0 + wb.r0 + i * wb.dr < a.N && kb < a.K ? gemm_load(B, at_b + i * wb.step_i, a.type) : 0.0f;
    }
    at_a += wa.step_k, at_b += wb.step_k;
  };
  auto stage = [&](int buf) {
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      As[buf][wa.k0 + i * wa.dk][wa.r0 + i * wa.dr] = ra[i];
      Bs[buf][wb.k0 + i * wb.dk][wb.r0 + i * wb.dr] = rb[i];
    }
  };

  float acc[TM][TM];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TM; ++j)
      acc[i][j] = 0.0f;

  fetch(0);
  stage(0);
  __syncthreads(); // the first slice is staged before any thread reads it
  for (int k0 = 0, buf = 0; k0 < a.K; k0 += BK, buf ^= 1) {
    const bool more = k0 + BK < a.K;
    if (more)
      fetch(k0 + BK); // in flight while this slice is multiplied
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float x[TM], y[TM];
#pragma unroll
      for (int q = 0; q < RUNS; ++q) {
        load_vec<VW>(&As[buf][k][q * RUN_STRIDE + ty * VW], x + q * VW);
        load_vec<VW>(&Bs[buf][k][q * RUN_STRIDE + tx * VW], y + q * VW);
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TM; ++j)
          acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
    }
    if (more)
      stage(buf ^ 1); // the other buffer: its last readers passed the barrier below a slice ago
    __syncthreads();
  }

  // C, a run of VW columns at a time: one 16-byte store where the run is
  // whole and 16-byte aligned, else a float at a time.
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const long long row = m0 + i / VW * RUN_STRIDE + ty * VW + i % VW;
    if (row >= a.M)
      continue;
#pragma unroll
    for (int q = 0; q < RUNS; ++q) {
      const int col = n0 + q * RUN_STRIDE + tx * VW;
      float *c = &C[row * a.ldc + col];
      if constexpr (VW == 4) {
        if (col + 4 <= a.N && ((size_t)c & 15) == 0) {
          const int j = q * VW;
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
      for (int j = 0; j < VW; ++j)
        if (col + j < a.N)
          c[j] = a.beta == 0.0f ? a.alpha * acc[i][q * VW + j] : a.alpha * acc[i][q * VW + j] + a.beta * c[j];
    }
  }
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_gemm_args *a = (const kt_gemm_args *)args;
  const long long tiles_m = (a->M + BS - 1) / BS, tiles_n = (a->N + BS - 1) / BS;
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
