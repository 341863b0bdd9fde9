/* SPDX-License-Identifier: MIT */
/* bench/bench_gemm.cu: ktune's tensor-core matmul (kt_matmul_ex) against
 * cuBLAS in the same precision, and kt_matmul_ex's exact FP32 layouts.
 *
 *   make build/bench_gemm
 *   ./build/bench_gemm --db tuning-db/ktune.db --out bench/results [--quick]
 *
 * Row-major C = alpha op(A) op(B) + beta C with FP32 C, alpha 1, beta 0,
 * for each input type (TF32: FP32 inputs rounded to TF32; BF16; FP16; all
 * with FP32 accumulation):
 *   - op N, N at the 12 shapes of the FP32 suite (bench_common.h);
 *   - the four op pairs at 4096^3;
 *   - strided batches: 512 products of 128x128x64, 64 of 1024x1024x128;
 * and for exact FP32 (KT_F32: kt_matmul, from scratch for an op T) the
 * four op pairs at 4096^3 and the two batches (its suite of shapes is
 * bench_matmul's).  Each case times, on the same random inputs,
 *   ktune   kt_matmul_ex through a context on --db (the dispatched variant)
 *   cuBLAS  cublasGemmEx / cublasGemmStridedBatchedEx, compute type
 *           CUBLAS_COMPUTE_32F_FAST_TF32 (TF32) or CUBLAS_COMPUTE_32F (FP32,
 *           BF16, FP16), C in FP32
 * checks ktune's C against cuBLAS's (relative Frobenius error), and probes
 * cuBLAS's precision on the same call: A B must come out as FP32 sums
 * (1 + 2^-12 from 1 and 2^-12, which a 16-bit accumulator loses), and for
 * TF32 the inputs must be rounded to TF32 (1 + 2^-12 times 1 gives 1, where
 * FP32 keeps it, as it must for FP32): a comparison in another precision
 * is flagged.
 * Then it times the TF32 repack (a transpose of an 8192 x 8192 FP32
 * operand, as kt_matmul_ex does for TF32 op N of B) against a copy of the
 * same bytes.
 *
 * Then a suite of tensor-core calls drawn from --seed (tc_random_suite:
 * 16 per input type, any op pair, sizes from 32 to 16384, leading
 * dimensions natural, padded or odd, some strided batches): kt_matmul_ex as
 * dispatched against cuBLAS, checked the same way, into
 * OUT/gemm_random.csv, and against an oracle: every variant that serves
 * the type launched directly in a short sweep, the fastest timed again
 * (dispatch / oracle, speed over speed, says what dispatch's pick cost);
 * every variant's sweep time on every call into OUT/gemm_sweep.csv.
 * Per type the geometric mean, 10th percentile and minimum of both.
 *
 * Last, FP32 batches on a suite drawn from --seed (F32_BATCHES of them: M,
 * N and K log-uniform over 1..2048, the batch over 2..2048 within a cap
 * on work and memory, op N, N for 7 in 10, another op pair otherwise):
 * kt_matmul_ex as dispatched, each CUDA-core tile in one launch for the
 * batch, kt_matmul entry by entry (op N, N), and cublasSgemmStridedBatched
 * (FP32), into OUT/gemm_f32_batches.csv.  The oracle is the fastest of
 * ktune's ways; the summary gives dispatch / oracle and ktune / cuBLAS.
 *
 * Writes OUT/gemm.csv, OUT/gemm.gp (ktune / cuBLAS per case) and, with
 * gnuplot on PATH, OUT/gemm.png; ends with a summary per input type.
 */
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench_common.h"
#include "gemm_common.cuh"
#include "kt_internal.h"
#include "matmul_check.cuh"
#include "registry.h"

struct gcase {
  kt_dtype type;
  int op_a, op_b;
  int m, n, k, batch;
  long long lda, ldb; /* 0: the natural leading dimension (op(A) N: K, T: M; op(B) N: N, T: K) */
};

static const char *type_name(kt_dtype t)
{
  return t == KT_TF32 ? "tf32" : t == KT_BF16 ? "bf16" : t == KT_F16 ? "f16" : "f32";
}

/* *count += elements of x[0..n) that are not want. */
__global__ void count_not(const float *x, size_t n, float want, unsigned long long *count)
{
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    c += x[i] != want;
  if (c)
    atomicAdd(count, c);
}

/* The precision probe's inputs, for op(A) M x K and op(B) K x N as stored
 * (rows of lda and ldb elements, the padding zero):
 * op(A)(i, 0) = a0, op(A)(i, 1) = a1, op(B)(0, j) = op(B)(1, j) = 1, zeros
 * elsewhere, so every element of op(A) op(B) is a0 + a1. */
__global__ void probe_inputs(void *A, void *B, int type, int op_a, int op_b, int M, int N, int K, long long lda,
                             long long ldb, float a0, float a1)
{
  /* A is stored M x K (op N) or K x M (op T), B K x N (op N) or N x K (op T). */
  const size_t na = (size_t)(op_a ? K : M) * lda, nb = (size_t)(op_b ? N : K) * ldb;
  const long long cols_a = op_a ? M : K, cols_b = op_b ? K : N;
  for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < na + nb; e += (size_t)gridDim.x * blockDim.x) {
    float v;
    void *p = e < na ? A : B;
    const size_t i = e < na ? e : e - na;
    if (e < na) {
      const long long r = (long long)(i / lda), c = (long long)(i % lda), k = op_a ? r : c;
      v = c >= cols_a ? 0.0f : k == 0 ? a0 : k == 1 ? a1 : 0.0f;
    } else {
      const long long r = (long long)(i / ldb), c = (long long)(i % ldb), k = op_b ? c : r;
      v = c < cols_b && k < 2 ? 1.0f : 0.0f;
    }
    if (type == KT_BF16)
      ((__nv_bfloat16 *)p)[i] = __float2bfloat16(v);
    else if (type == KT_F16)
      ((__half *)p)[i] = __float2half(v);
    else
      ((float *)p)[i] = v;
  }
}

/* One measured case, for the summary. */
struct gresult {
  gcase c;
  double kt_ms, cb_ms; /* NAN when a side failed */
};

/* ---- the plot ---------------------------------------------------------- */

/* Bars of ktune / cuBLAS per case, one colour per input type, with the
 * targets' lines at 0.9 and 1.0. */
static void plot(const bench_options &o, const bench_device &d, size_t ncases)
{
  std::string s = bench_gnuplot_preamble("gemm", 400 + 28 * (int)ncases, 700);
  s += "set title \"tensor-core and exact FP32 matmul, ktune / cuBLAS in the same precision, " +
       bench_gnuplot_escape(d.line) + "\"\n";
  s += "set ylabel \"ktune / cuBLAS (higher is better)\"\n"
       "set style fill solid 0.85 border -1\n"
       "set boxwidth 0.8\n"
       "set yrange [0:*]\n"
       "set xrange [-1:*]\n"
       "set offsets 0, 1, 0.15, 0\n"
       "set grid ytics\n"
       "set key top left\n"
       "set bmargin 12\n"
       "set xtics rotate by -60 nomirror\n"
       "label(b) = strcol(1) . \" \" . strcol(2) . \" \" . strcol(3) . \"x\" . strcol(4) . \"x\" . strcol(5) . "
       "(b > 1 ? \" x\" . strcol(6) : \"\")\n"
       "ratio(t) = strcol(1) eq t ? $9 : NaN\n"
       "plot \"gemm.csv\" skip 1 using 0:(ratio(\"tf32\")):xtic(label($6)) with boxes title \"TF32\" lc rgb "
       "\"#1b9e77\", \\\n"
       "     \"\" skip 1 using 0:(ratio(\"bf16\")) with boxes title \"BF16\" lc rgb \"#d95f02\", \\\n"
       "     \"\" skip 1 using 0:(ratio(\"f16\")) with boxes title \"FP16\" lc rgb \"#7570b3\", \\\n"
       "     \"\" skip 1 using 0:(ratio(\"f32\")) with boxes title \"FP32 (exact)\" lc rgb \"#e7298a\", \\\n"
       "     1.0 with lines lc rgb \"black\" title \"cuBLAS\", 0.9 with lines dt 2 lc rgb \"gray40\" title \"0.9\"\n";
  bench_plot(o.out, "gemm", s);
}

/* The gemm variants of this build that serve `type` on this device, each
 * name once (the build of it that runs here), of `algo` only where given. */
static std::vector<const kt_variant *> gemm_variants(const bench_device &d, kt_dtype type,
                                                     const char *algo = nullptr)
{
  std::vector<const kt_variant *> out;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family == KT_FAMILY_GEMM && (!algo || !strcmp(v->algo, algo)) && kt_gemm_serves(v, &d.info, type) &&
        kt_variant_runs_on(v, &d.info) && kt_registry_find(v->name, &d.info) == v)
      out.push_back(v);
  }
  return out;
}

/* ---- FP32 batches on a seeded suite ---------------------------------------- */

constexpr int F32_BATCHES = 40;
constexpr unsigned long long F32_BATCHES_SEED = 0x6261746368ull; /* the default suite */

static double ratio_stats(std::vector<double> v, double *p10, double *lo)
{
  std::sort(v.begin(), v.end());
  *p10 = v.empty() ? NAN : v[v.size() / 10];
  *lo = v.empty() ? NAN : v[0];
  return bench_geomean(v);
}

static int f32_batches(const bench_options &o, const bench_device &d, kt_context *ctx, cublasHandle_t h,
                       const bench_flush &flush, const bench_reps &reps)
{
  const std::vector<const kt_variant *> tiles = gemm_variants(d, KT_F32, "simt");
  const unsigned long long seed = o.seed ? o.seed : F32_BATCHES_SEED;
  printf("\nFP32 batches, seed %llu: kt_matmul_ex (dispatched), each CUDA-core tile, kt_matmul per entry, "
         "cuBLAS; us\n",
         seed);
  std::string head = "m,n,k,batch,ops,dispatch_ms,variant";
  printf("%-24s %-3s %9s", "MxNxK x batch", "ops", "dispatch");
  for (const kt_variant *v : tiles) {
    head += std::string(",") + v->name + "_ms";
    printf(" %9s", v->name + strlen("gemm_simt_"));
  }
  head += ",entrywise_ms,cublas_ms,oracle_ms,dispatch_over_oracle,ktune_over_cublas,rel_err,status";
  printf(" %9s %9s %6s %6s  %s\n", "entries", "cuBLAS", "/best", "/cuBLAS", "dispatched to");
  bench_csv csv(o.out + "/gemm_f32_batches.csv", head.c_str());
  kt_rng r = {seed};
  std::vector<double> vs_oracle, vs_cublas;
  int failed = 0;
  const int count = o.quick ? 8 : F32_BATCHES;
  double *scratch;
  BENCH_CUDA(cudaMalloc(&scratch, 2 * sizeof(double)));
  for (int c = 0; c < count; ++c) {
    const long long M = log_uniform(&r, 1, 2048), N = log_uniform(&r, 1, 2048), K = log_uniform(&r, 1, 2048);
    long long nb = log_uniform(&r, 2, 2048);
    const int ops = kt_rng_next(&r) % 10 < 7 ? 0 : 1 + (int)(kt_rng_next(&r) % 3), op_a = ops >> 1, op_b = ops & 1;
    while (nb > 2 && ((double)M * N * K * nb > 1.6e10 || (double)(M * K + K * N + M * N) * nb * 4 > 3e9))
      nb /= 2;
    const long long sa = M * K, sb = K * N, sc = M * N, lda = op_a ? M : K, ldb = op_b ? K : N;
    float *A, *B, *C, *C_ref;
    BENCH_CUDA(cudaMalloc(&A, sa * nb * 4));
    BENCH_CUDA(cudaMalloc(&B, sb * nb * 4));
    BENCH_CUDA(cudaMalloc(&C, sc * nb * 4));
    BENCH_CUDA(cudaMalloc(&C_ref, sc * nb * 4));
    fill_typed<<<d.info.sm_count * 8, 256>>>(A, sa * nb, KT_F32, kt_rng_next(&r));
    fill_typed<<<d.info.sm_count * 8, 256>>>(B, sb * nb, KT_F32, kt_rng_next(&r));
    BENCH_CUDA(cudaGetLastError());

    kt_matmul_desc desc = {};
    desc.type = KT_F32, desc.op_a = (kt_op)op_a, desc.op_b = (kt_op)op_b;
    desc.M = M, desc.N = N, desc.K = K, desc.batch = nb, desc.alpha = 1.0f, desc.beta = 0.0f;
    desc.A = A, desc.lda = lda, desc.stride_a = sa, desc.B = B, desc.ldb = ldb, desc.stride_b = sb;
    desc.C = C, desc.ldc = N, desc.stride_c = sc;
    kt_choice choice = {};
    if (kt_matmul_ex_choice(ctx, &desc, &choice) != KT_OK)
      snprintf(choice.variant, sizeof choice.variant, "?");
    auto run_ktune = [&]() -> int {
      const int rc = kt_matmul_ex(ctx, &desc, 0);
      return rc == KT_OK ? 0 : bench_fail("kt_matmul_ex: %s", kt_strerror(rc));
    };
    const float one = 1.0f, zero = 0.0f;
    auto run_cublas = [&]() -> int {
      const cublasStatus_t st = cublasSgemmStridedBatched(
          h, op_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_a ? CUBLAS_OP_T : CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, B,
          (int)ldb, sb, A, (int)lda, sa, &zero, C_ref, (int)N, sc, (int)nb);
      return st == CUBLAS_STATUS_SUCCESS ? 0 : bench_fail("cublasSgemmStridedBatched: %s", cublasGetStatusString(st));
    };
    BENCH_CUDA(cudaMemset(C, 0xff, sc * nb * 4)); /* NaN: an element never written fails the check */
    const bench_time_result t_kt = bench_time(run_ktune, flush, reps), t_cb = bench_time(run_cublas, flush, reps);
    BENCH_CUDA(cudaDeviceSynchronize());
    const double err = t_kt.ok && t_cb.ok ? rel_error(C, C_ref, (int)(M * nb), (int)N, (int)N, scratch, d) : NAN;
    const double bound = 64.0 * 0x1p-23 * sqrt((double)K);
    const bool ok = t_kt.ok && t_cb.ok && err <= bound;
    failed += !ok;

    std::vector<double> t_tiles;
    double oracle = t_kt.ok ? t_kt.ms : INFINITY;
    for (const kt_variant *v : tiles) {
      kt_gemm_args a = {KT_GEMM_F32,
                        op_a,
                        op_b,
                        (int)M,
                        (int)N,
                        (int)K,
                        (int)nb,
                        1.0f,
                        0.0f,
                        A,
                        B,
                        C,
                        lda,
                        ldb,
                        N,
                        sa,
                        sb,
                        sc,
                        d.info.sm_count,
                        kt_device_pool(d.info.ordinal)};
      auto run = [&]() -> int { return v->launch(&a, 0); };
      const bench_time_result t = bench_time(run, flush, reps);
      t_tiles.push_back(t.ms);
      if (t.ok && t.ms < oracle)
        oracle = t.ms;
    }
    double t_entries = NAN;
    if (!ops) {
      auto run = [&]() -> int {
        for (long long b = 0; b < nb; ++b) {
          const int rc = kt_matmul(ctx, M, N, K, 1.0f, A + b * sa, K, B + b * sb, N, 0.0f, C + b * sc, N, 0);
          if (rc != KT_OK)
            return bench_fail("kt_matmul: %s", kt_strerror(rc));
        }
        return 0;
      };
      const bench_time_result t = bench_time(run, flush, reps);
      t_entries = t.ms;
      if (t.ok && t.ms < oracle)
        oracle = t.ms;
    }
    const double q_oracle = oracle / t_kt.ms, q_cublas = t_cb.ms / t_kt.ms;
    if (ok) {
      vs_oracle.push_back(q_oracle);
      vs_cublas.push_back(q_cublas);
    }
    char shape[64], ops_s[3] = {"nt"[op_a], "nt"[op_b], 0};
    snprintf(shape, sizeof shape, "%lldx%lldx%lld x%lld", M, N, K, nb);
    printf("%-24s %-3s %9.1f", shape, ops_s, t_kt.ms * 1e3);
    std::string row;
    char cell[48];
    for (double t : t_tiles) {
      printf(" %9.1f", t * 1e3);
      snprintf(cell, sizeof cell, ",%.5f", t);
      row += cell;
    }
    printf(" %9.1f %9.1f %6.3f %6.3f  %s%s\n", t_entries * 1e3, t_cb.ms * 1e3, q_oracle, q_cublas, choice.variant,
           ok ? "" : "  FAILED");
    if (!ok)
      printf("  %s %s (rel err %.2e, bound %.2e)\n", t_kt.err.c_str(), t_cb.err.c_str(), err, bound);
    csv.row("%lld,%lld,%lld,%lld,%s,%.5f,%s%s,%.5f,%.5f,%.5f,%.4f,%.4f,%.3e,%s", M, N, K, nb, ops_s, t_kt.ms,
            choice.variant, row.c_str(), t_entries, t_cb.ms, oracle, q_oracle, q_cublas, err, ok ? "ok" : "failed");
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cudaFree(C_ref);
  }
  cudaFree(scratch);
  double p10, lo;
  const double g_oracle = ratio_stats(vs_oracle, &p10, &lo);
  printf("\nFP32 batches: dispatch / oracle %.3f (10th percentile %.3f, min %.3f)", g_oracle, p10, lo);
  const double g_cublas = ratio_stats(vs_cublas, &p10, &lo);
  printf("; ktune / cuBLAS %.3f (10th percentile %.3f, min %.3f); %d of %d failed the check\n", g_cublas, p10, lo,
         failed, count);
  return failed;
}

/* ---- one case ---------------------------------------------------------- */

/* What measure_case needs of main's setup. */
struct gbench {
  const bench_device &d;
  kt_context *ctx;
  cublasHandle_t h;
  const bench_flush &flush;
  const bench_reps &reps;
  kt_rng &rng;     /* the inputs' seeds */
  double *scratch; /* two doubles on the device */
};

/* One case measured. */
struct gmeasure {
  double kt_ms, cb_ms;   /* NAN where a side failed */
  double f_kt, f_cb;     /* TFLOP/s */
  double err, bound;     /* ktune's relative Frobenius error against cuBLAS, and its bound */
  bool ok;               /* both ran and err <= bound */
  bool precise;          /* cuBLAS computed in the case's precision (the probe) */
  kt_choice choice;
  double oracle_ms;      /* with `oracle`: the fastest variant launched directly, timed as ktune is */
  char oracle[96];       /* its name */
  std::vector<std::pair<const kt_variant *, double>> sweep; /* with `oracle`: every variant's sweep time (NAN: failed) */
};

static const char *ops_name(const gcase &c)
{
  static const char *const names[4] = {"nn", "nt", "tn", "tt"};
  return names[c.op_a * 2 + c.op_b];
}

/* Times ktune (kt_matmul_ex as dispatched) and cuBLAS on the same random
 * inputs, checks ktune's C against cuBLAS's, and probes cuBLAS's precision
 * on the very call.  With `oracle`, also every variant of this build that
 * serves the call's type, launched directly (as kt_matmul_ex launches the
 * one it picks), in a short sweep; the fastest is timed again as ktune
 * is: ktune's best possible choice there. */
static gmeasure measure_case(const gcase &c, const gbench &g, bool oracle = false)
{
  const bench_device &d = g.d;
  const int M = c.m, N = c.n, K = c.k, nb = c.batch;
  const long long lda = c.lda ? c.lda : c.op_a ? M : K, ldb = c.ldb ? c.ldb : c.op_b ? K : N;
  const size_t es = (size_t)kt_gemm_elem_bytes(c.type), na = (size_t)(c.op_a ? K : M) * lda,
               nbb = (size_t)(c.op_b ? N : K) * ldb, nc = (size_t)M * N;
  void *A, *B;
  float *C_kt, *C_ref;
  BENCH_CUDA(cudaMalloc(&A, na * nb * es));
  BENCH_CUDA(cudaMalloc(&B, nbb * nb * es));
  BENCH_CUDA(cudaMalloc(&C_kt, nc * nb * 4));
  BENCH_CUDA(cudaMalloc(&C_ref, nc * nb * 4));

  /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B
   * first, with its own op, then A; M and N swap; leading dimensions stay. */
  const cudaDataType_t dt = c.type == KT_BF16 ? CUDA_R_16BF : c.type == KT_F16 ? CUDA_R_16F : CUDA_R_32F;
  const cublasComputeType_t ct = c.type == KT_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasOperation_t ta = c.op_b ? CUBLAS_OP_T : CUBLAS_OP_N, tb = c.op_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const float one = 1.0f, zero = 0.0f;
  auto run_cublas = [&]() -> int {
    cublasStatus_t st =
        nb == 1 ? cublasGemmEx(g.h, ta, tb, N, M, K, &one, B, dt, (int)ldb, A, dt, (int)lda, &zero, C_ref, CUDA_R_32F,
                               N, ct, CUBLAS_GEMM_DEFAULT)
                : cublasGemmStridedBatchedEx(g.h, ta, tb, N, M, K, &one, B, dt, (int)ldb, (long long)nbb, A, dt,
                                             (int)lda, (long long)na, &zero, C_ref, CUDA_R_32F, N, (long long)nc, nb,
                                             ct, CUBLAS_GEMM_DEFAULT);
    return st == CUBLAS_STATUS_SUCCESS ? 0 : bench_fail("cublasGemm(Strided)Ex: %s", cublasGetStatusString(st));
  };

  /* cuBLAS's precision on this very call (batch entry 0 suffices: the
   * same kernel runs every entry). */
  auto probe = [&](float a0, float a1, float want) -> long long {
    probe_inputs<<<d.info.sm_count * 8, 256>>>(A, B, c.type, c.op_a, c.op_b, M, N, K, lda, ldb, a0, a1);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaMemset(g.scratch, 0, sizeof(unsigned long long)));
    if (run_cublas() != 0)
      return -1;
    count_not<<<d.info.sm_count * 8, 256>>>(C_ref, nc, want, (unsigned long long *)g.scratch);
    BENCH_CUDA(cudaGetLastError());
    unsigned long long off = 0;
    BENCH_CUDA(cudaMemcpy(&off, g.scratch, sizeof off, cudaMemcpyDeviceToHost));
    return (long long)off;
  };
  gmeasure m = {};
  const long long acc_off = probe(1.0f, 0x1p-12f, 1.0f + 0x1p-12f);
  const long long in_off = c.type == KT_TF32  ? probe(1.0f + 0x1p-12f, 0.0f, 1.0f)
                           : c.type == KT_F32 ? probe(1.0f + 0x1p-12f, 0.0f, 1.0f + 0x1p-12f)
                                              : 0;
  m.precise = acc_off == 0 && in_off == 0;
  if (!m.precise)
    printf("  cuBLAS precision probe: %lld elements not FP32 sums, %lld not %s inputs\n", acc_off, in_off,
           c.type == KT_F32 ? "FP32" : "TF32-rounded");

  fill_typed<<<d.info.sm_count * 8, 256>>>(A, na * nb, c.type, kt_rng_next(&g.rng));
  fill_typed<<<d.info.sm_count * 8, 256>>>(B, nbb * nb, c.type, kt_rng_next(&g.rng));
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaMemset(C_kt, 0xff, nc * nb * 4)); /* NaN: an element never written fails the check */
  BENCH_CUDA(cudaDeviceSynchronize());

  kt_matmul_desc desc = {};
  desc.type = c.type, desc.op_a = (kt_op)c.op_a, desc.op_b = (kt_op)c.op_b;
  desc.M = M, desc.N = N, desc.K = K, desc.batch = nb, desc.alpha = 1.0f, desc.beta = 0.0f;
  desc.A = A, desc.lda = lda, desc.stride_a = (int64_t)na;
  desc.B = B, desc.ldb = ldb, desc.stride_b = (int64_t)nbb;
  desc.C = C_kt, desc.ldc = N, desc.stride_c = (int64_t)nc;
  const int rc = kt_matmul_ex_choice(g.ctx, &desc, &m.choice);
  if (rc != KT_OK)
    snprintf(m.choice.variant, sizeof m.choice.variant, "(%s)", kt_strerror(rc));
  auto run_ktune = [&]() -> int {
    int r = kt_matmul_ex(g.ctx, &desc, 0);
    return r == KT_OK ? 0 : bench_fail("kt_matmul_ex: %s", kt_strerror(r));
  };

  const bench_time_result t_kt = bench_time(run_ktune, g.flush, g.reps);
  const bench_time_result t_cb = bench_time(run_cublas, g.flush, g.reps);
  BENCH_CUDA(cudaDeviceSynchronize());

  /* Both sum exact (16-bit) or TF32-rounded products in FP32; ktune may
   * truncate TF32 inputs where cuBLAS rounds them (2^-11 relative each). */
  m.bound = c.type == KT_TF32 ? 0x1p-8 : 64.0 * 0x1p-23 * sqrt((double)K);
  m.err = t_kt.ok && t_cb.ok ? rel_error(C_kt, C_ref, M * nb, N, N, g.scratch, d) : NAN;
  m.ok = t_kt.ok && t_cb.ok && m.err <= m.bound;
  m.kt_ms = t_kt.ok ? t_kt.ms : NAN;
  m.cb_ms = t_cb.ok ? t_cb.ms : NAN;
  const double flop = 2.0 * M * N * (double)K * nb;
  m.f_kt = flop / (m.kt_ms * 1e9);
  m.f_cb = flop / (m.cb_ms * 1e9);
  if (!t_kt.ok)
    printf("  ktune failed: %s\n", t_kt.err.c_str());
  if (!t_cb.ok)
    printf("  cuBLAS failed: %s\n", t_cb.err.c_str());
  m.oracle_ms = NAN;
  if (oracle) {
    kt_gemm_args a = {(int)c.type, c.op_a, c.op_b, M, N, K, nb, 1.0f, 0.0f, A, B, C_kt, lda, ldb, N,
                      (long long)na, (long long)nbb, (long long)nc, d.info.sm_count, kt_device_pool(d.info.ordinal)};
    const bench_reps sweep = {3, 10, 50.0};
    const kt_variant *best = nullptr;
    double best_ms = INFINITY;
    for (const kt_variant *v : gemm_variants(d, c.type)) {
      auto run = [&]() -> int { return v->launch(&a, 0); };
      const bench_time_result t = bench_time(run, g.flush, sweep);
      m.sweep.emplace_back(v, t.ok ? t.ms : NAN);
      if (t.ok && t.ms < best_ms)
        best_ms = t.ms, best = v;
    }
    if (best) {
      auto run = [&]() -> int { return best->launch(&a, 0); };
      const bench_time_result t = bench_time(run, g.flush, g.reps);
      m.oracle_ms = t.ok ? std::min(t.ms, m.kt_ms) : NAN; /* ktune's own pick is a way too */
      snprintf(m.oracle, sizeof m.oracle, "%s", t.ok && t.ms < m.kt_ms ? best->name : m.choice.variant);
    }
  }
  cudaFree(A);
  cudaFree(B);
  cudaFree(C_kt);
  cudaFree(C_ref);
  return m;
}

/* ---- a seeded suite of tensor-core calls nobody tuned ---------------------- */

constexpr int TC_RANDOM = 16;                                  /* shapes per input type */
constexpr unsigned long long TC_RANDOM_SEED = 0x7463726e64ull; /* the default suite */

/* Per input type, `count` calls drawn from r: M, N and K log-uniform over
 * 32..16384, the largest halved until one call is at most 2^38 flop (about
 * 0.7 ms at 400 TFLOP/s) and its matrices at most 4 GB; op pairs uniform;
 * leading dimensions natural half of the time, padded to 64 elements a
 * quarter, and natural plus 1 to 15 elements the rest (so that rows start
 * anywhere a user's may); one call in five a strided batch of 2 to 256
 * entries within the same caps. */
static std::vector<gcase> tc_random_suite(kt_rng *r, int count)
{
  std::vector<gcase> out;
  const double cap = 0x1p38;
  for (kt_dtype t : {KT_TF32, KT_BF16, KT_F16})
    for (int i = 0; i < count; ++i) {
      gcase c = {};
      c.type = t;
      const int ops = (int)(kt_rng_next(r) % 4);
      c.op_a = ops >> 1, c.op_b = ops & 1;
      long long dim[3] = {log_uniform(r, 32, 16384), log_uniform(r, 32, 16384), log_uniform(r, 32, 16384)};
      long long nb = kt_rng_next(r) % 5 == 0 ? log_uniform(r, 2, 256) : 1;
      /* A, B and two Cs, under 4 GB (rows padded by up to 64 elements). */
      const double es = t == KT_TF32 ? 4 : 2;
      auto bytes = [&]() {
        return ((double)(dim[0] + 64) * (dim[2] + 64) * es + (double)(dim[2] + 64) * (dim[1] + 64) * es +
                8.0 * dim[0] * dim[1]) *
               nb;
      };
      while (nb > 1 && ((double)dim[0] * dim[1] * dim[2] * nb * 2 > cap || bytes() > 4e9))
        nb /= 2;
      while ((double)dim[0] * dim[1] * dim[2] * nb * 2 > cap || bytes() > 4e9) {
        const int big = dim[0] >= dim[1] && dim[0] >= dim[2] ? 0 : dim[1] >= dim[2] ? 1 : 2;
        dim[big] = (dim[big] + 1) / 2;
      }
      c.m = (int)dim[0], c.n = (int)dim[1], c.k = (int)dim[2], c.batch = (int)nb;
      const long long nat_a = c.op_a ? c.m : c.k, nat_b = c.op_b ? c.k : c.n;
      for (long long *ld : {&c.lda, &c.ldb}) {
        const long long nat = ld == &c.lda ? nat_a : nat_b;
        const int kind = (int)(kt_rng_next(r) % 4);
        *ld = kind < 2 ? nat : kind == 2 ? (nat + 63) / 64 * 64 : nat + 1 + (long long)(kt_rng_next(r) % 15);
      }
      out.push_back(c);
    }
  return out;
}

/* Runs the suite, prints a row per call and per type the geometric mean,
 * 10th percentile and minimum of ktune / cuBLAS and of dispatch / oracle;
 * writes OUT/gemm_random.csv.  Returns the number of calls that failed
 * their check. */
static int tc_random(const bench_options &o, const gbench &g)
{
  const unsigned long long seed = o.seed ? o.seed : TC_RANDOM_SEED;
  kt_rng r = {seed};
  const std::vector<gcase> suite = tc_random_suite(&r, o.quick ? 3 : TC_RANDOM);
  printf("\nTensor-core calls drawn from seed %llu (nobody tuned them): kt_matmul_ex as dispatched against "
         "cuBLAS\n",
         seed);
  printf("%-5s %-3s %-26s %-13s %9s %9s %7s %7s  %-9s %-6s %s\n", "type", "ops", "shape MxNxK (x batch)",
         "lda,ldb", "ktune", "cuBLAS", "ktune/", "ktune/", "err", "status", "ktune dispatched to | the oracle's");
  printf("%-5s %-3s %-26s %-13s %9s %9s %7s %7s\n", "", "", "", "", "TFLOP/s", "TFLOP/s", "cuBLAS", "oracle");
  bench_csv csv(o.out + "/gemm_random.csv",
                "type,ops,m,n,k,batch,lda,ldb,ktune_tflops,cublas_tflops,ktune_over_cublas,ktune_ms,cublas_ms,"
                "variant,tuned,oracle_ms,oracle_variant,dispatch_over_oracle,rel_err,bound,cublas_precision,status");
  /* Every variant's sweep time on every call: what a model of dispatch can
   * be fitted to (and checked against on another seed). */
  bench_csv sweep_csv(o.out + "/gemm_sweep.csv", "call,type,ops,m,n,k,batch,lda,ldb,variant,ms,dispatched");
  int call = 0;
  int bad = 0, other = 0;
  std::vector<double> q[3], qo[3];
  std::string worst[3];
  double worst_q[3] = {INFINITY, INFINITY, INFINITY};
  for (const gcase &c : suite) {
    const gmeasure m = measure_case(c, g, true);
    /* As measure_case resolves them (0: natural). */
    const long long lda = c.lda ? c.lda : c.op_a ? c.m : c.k, ldb = c.ldb ? c.ldb : c.op_b ? c.k : c.n;
    char shape[64], lds[32];
    if (c.batch > 1)
      snprintf(shape, sizeof shape, "%dx%dx%d x%d", c.m, c.n, c.k, c.batch);
    else
      snprintf(shape, sizeof shape, "%dx%dx%d", c.m, c.n, c.k);
    snprintf(lds, sizeof lds, "%lld,%lld", lda, ldb);
    const double ratio = m.cb_ms / m.kt_ms, q_oracle = m.oracle_ms / m.kt_ms;
    const bool same = !strcmp(m.oracle, m.choice.variant);
    printf("%-5s %-3s %-26s %-13s %9.1f %9.1f %7.3f %7.3f  %-9.2e %-6s %s%s | %s\n", type_name(c.type), ops_name(c),
           shape, lds, m.f_kt, m.f_cb, ratio, q_oracle, m.err, m.ok ? "ok" : "FAILED", m.choice.variant,
           m.choice.tuned ? " (tuned)" : " (default)", same ? "the same" : m.oracle);
    csv.row("%s,%s,%d,%d,%d,%d,%lld,%lld,%.2f,%.2f,%.4f,%.5f,%.5f,%s,%d,%.5f,%s,%.4f,%.3e,%.3e,%s,%s",
            type_name(c.type), ops_name(c), c.m, c.n, c.k, c.batch, lda, ldb, m.f_kt, m.f_cb, ratio, m.kt_ms, m.cb_ms,
            m.choice.variant, m.choice.tuned, m.oracle_ms, m.oracle, q_oracle, m.err, m.bound,
            m.precise ? "same" : "DIFFERENT", m.ok ? "ok" : "failed");
    for (const auto &[v, ms] : m.sweep)
      sweep_csv.row("%d,%s,%s,%d,%d,%d,%d,%lld,%lld,%s,%.5f,%d", call, type_name(c.type), ops_name(c), c.m, c.n, c.k,
                    c.batch, lda, ldb, v->name, ms, !strcmp(v->name, m.choice.variant));
    ++call;
    bad += !m.ok;
    other += m.ok && !m.precise;
    const int ti = c.type == KT_TF32 ? 0 : c.type == KT_BF16 ? 1 : 2;
    if (m.ok && m.precise) {
      q[ti].push_back(ratio);
      if (std::isfinite(q_oracle))
        qo[ti].push_back(q_oracle);
      if (ratio < worst_q[ti])
        worst_q[ti] = ratio, worst[ti] = std::string(ops_name(c)) + " " + shape + " ld " + lds;
    }
  }
  printf("\n%-5s %26s   %26s   %s\n", "type", "ktune / cuBLAS", "dispatch / oracle",
         "the worst against cuBLAS");
  printf("%-5s %8s %8s %8s   %8s %8s %8s\n", "", "geomean", "10th pct", "min", "geomean", "10th pct", "min");
  for (int ti = 0; ti < 3; ++ti) {
    double p10, lo, op10, olo;
    const double geo = ratio_stats(q[ti], &p10, &lo), ogeo = ratio_stats(qo[ti], &op10, &olo);
    printf("%-5s %8.3f %8.3f %8.3f   %8.3f %8.3f %8.3f   %s\n", ti == 0 ? "tf32" : ti == 1 ? "bf16" : "f16", geo,
           p10, lo, ogeo, op10, olo, worst[ti].c_str());
  }
  /* cuBLAS may serve a drawn call in another precision (FP32 where TF32 was
   * asked: its choice for that shape); such a call is left out of the
   * ratios, and is no failure of ktune's. */
  printf("%d of %zu drawn calls failed the check; %d left out where cuBLAS computed in another precision\n", bad,
         suite.size(), other);
  return bad;
}

/* ---- the summary ------------------------------------------------------- */

/* Per input type: the geometric mean of ktune / cuBLAS over the NN suite
 * shapes, the two large squares, the batched cases, and each transposed
 * layout's time against NN at 4096^3 (ktune's own: within 10% is the aim),
 * and cuBLAS's own for comparison. */
static void summary(const std::vector<gresult> &res)
{
  printf("\n%-5s %8s %8s %8s %8s %8s   %s\n", "type", "suite", "4096^3", "8192^3", "batch512", "batch64",
         "time vs its own NN at 4096^3, nt tn tt: ktune | cuBLAS");
  printf("%-5s %8s %8s %8s %8s %8s\n", "", "geomean", "", "", "", "");
  for (kt_dtype t : {KT_TF32, KT_BF16, KT_F16, KT_F32}) {
    std::vector<double> suite;
    double sq4 = NAN, sq8 = NAN, b512 = NAN, b64 = NAN, nn4 = NAN, nn4_cb = NAN;
    double tr[4] = {NAN, NAN, NAN, NAN}, tr_cb[4] = {NAN, NAN, NAN, NAN};
    size_t n = 0;
    for (const gresult &r : res) {
      if (r.c.type != t)
        continue;
      const double q = r.cb_ms / r.kt_ms;
      const bool nn = !r.c.op_a && !r.c.op_b, big4 = r.c.m == 4096 && r.c.n == 4096 && r.c.k == 4096;
      if (r.c.batch > 1)
        (r.c.batch == 512 ? b512 : b64) = q;
      else if (nn) {
        ++n;
        if (std::isfinite(q))
          suite.push_back(q);
        if (big4)
          sq4 = q, nn4 = r.kt_ms, nn4_cb = r.cb_ms;
        if (r.c.m == 8192 && r.c.n == 8192 && r.c.k == 8192)
          sq8 = q;
      } else if (big4) {
        tr[r.c.op_a * 2 + r.c.op_b] = r.kt_ms;
        tr_cb[r.c.op_a * 2 + r.c.op_b] = r.cb_ms;
      }
    }
    if (n == 0)
      continue;
    /* FP32's suite is bench_matmul's: here only 4096^3. */
    const double geo = t == KT_F32 ? NAN : bench_geomean(suite);
    printf("%-5s %8.3f %8.3f %8.3f %8.3f %8.3f   %.3f %.3f %.3f | %.3f %.3f %.3f%s\n", type_name(t), geo, sq4, sq8,
           b512, b64, tr[1] / nn4, tr[2] / nn4, tr[3] / nn4, tr_cb[1] / nn4_cb, tr_cb[2] / nn4_cb, tr_cb[3] / nn4_cb,
           suite.size() < n ? "  (a failed shape is left out of the geomean)" : "");
  }
}

int main(int argc, char **argv)
{
  const bench_options o = bench_parse_args(argc, argv, "ktune's tensor-core matmul against cuBLAS (cublasGemmEx).");
  bench_mkdirs(o.out);
  const bench_device d = bench_device_open();
  kt_context *ctx = bench_open_ktune(o);
  const bench_flush flush = bench_flush_alloc(d);
  const bench_reps reps = o.quick ? bench_reps{3, 10, 100.0} : bench_reps{5, 30, 300.0};

  cublasHandle_t h;
  BENCH_CUBLAS(cublasCreate(&h));
  int cublas_version = 0;
  BENCH_CUBLAS(cublasGetVersion(h, &cublas_version));
  printf("cuBLAS %d: cublasGemmEx / cublasGemmStridedBatchedEx, FP32 C; TF32 as CUBLAS_COMPUTE_32F_FAST_TF32, "
         "BF16 and FP16 as CUBLAS_COMPUTE_32F\n",
         cublas_version);
  for (const char *env : {"NVIDIA_TF32_OVERRIDE", "CUBLAS_EMULATE_SINGLE_PRECISION", "CUBLAS_EMULATION_STRATEGY"})
    if (getenv(env))
      printf("  note: %s=%s is set in the environment\n", env, getenv(env));
  printf("timing: %s of %d..%d runs (budget %.0f ms) after a warm-up, CUDA events, %zu MiB L2 flush "
         "before each run\n\n",
         bench_statistic, reps.min_reps, reps.max_reps, reps.budget_ms, flush.bytes >> 20);

  std::vector<gcase> cases;
  const kt_dtype types[] = {KT_TF32, KT_BF16, KT_F16};
  for (kt_dtype t : types) {
    if (o.quick) {
      cases.push_back({t, 0, 0, 4096, 4096, 4096, 1}); /* the transposes' reference */
      for (const bench_shape &s : bench_quick_suite)
        cases.push_back({t, 0, 0, s.m, s.n, s.k, 1});
    } else
      for (const bench_shape &s : bench_suite)
        cases.push_back({t, 0, 0, s.m, s.n, s.k, 1});
    for (int ops = 1; ops < 4; ++ops)
      cases.push_back({t, ops >> 1, ops & 1, 4096, 4096, 4096, 1});
    cases.push_back({t, 0, 0, 128, 128, 64, 512});
    cases.push_back({t, 0, 0, 1024, 1024, 128, 64});
  }
  for (int ops = 0; ops < 4; ++ops)
    cases.push_back({KT_F32, ops >> 1, ops & 1, 4096, 4096, 4096, 1});
  cases.push_back({KT_F32, 0, 0, 128, 128, 64, 512});
  cases.push_back({KT_F32, 0, 0, 1024, 1024, 128, 64});

  bench_csv csv(o.out + "/gemm.csv",
                "type,ops,m,n,k,batch,ktune_tflops,cublas_tflops,ktune_over_cublas,ktune_ms,cublas_ms,variant,tuned,"
                "rel_err,bound,cublas_precision,status");
  printf("%-5s %-3s %-22s %9s %9s %7s  %-9s %-9s %-6s %s\n", "type", "ops", "shape MxNxK (x batch)", "ktune", "cuBLAS",
         "ktune/", "err", "bound", "status", "ktune dispatched to");
  printf("%-5s %-3s %-22s %9s %9s %7s\n", "", "", "", "TFLOP/s", "TFLOP/s", "cuBLAS");

  kt_rng rng = {0x67656d6d62656e63ull};
  double *scratch;
  BENCH_CUDA(cudaMalloc(&scratch, 2 * sizeof(double)));
  int failed = 0, imprecise = 0;
  std::vector<gresult> results;
  const gbench g = {d, ctx, h, flush, reps, rng, scratch};

  for (const gcase &c : cases) {
    const gmeasure m = measure_case(c, g);
    failed += !m.ok;
    imprecise += !m.precise;
    const char *ops = ops_name(c);
    char shape[48];
    if (c.batch > 1)
      snprintf(shape, sizeof shape, "%dx%dx%d x%d", c.m, c.n, c.k, c.batch);
    else
      snprintf(shape, sizeof shape, "%dx%dx%d", c.m, c.n, c.k);
    printf("%-5s %-3s %-22s %9.1f %9.1f %7.3f  %-9.2e %-9.2e %-6s %s%s\n", type_name(c.type), ops, shape, m.f_kt,
           m.f_cb, m.f_kt / m.f_cb, m.err, m.bound, m.ok ? "ok" : "FAILED", m.choice.variant,
           m.choice.tuned ? " (tuned)" : " (default)");
    /* Only a checked case, against cuBLAS in the same precision, enters the
     * summary's ratios. */
    results.push_back({c, m.ok && m.precise ? m.kt_ms : NAN, m.ok && m.precise ? m.cb_ms : NAN});
    csv.row("%s,%s,%d,%d,%d,%d,%.2f,%.2f,%.4f,%.5f,%.5f,%s,%d,%.3e,%.3e,%s,%s", type_name(c.type), ops, c.m, c.n, c.k,
            c.batch, m.f_kt, m.f_cb, m.f_kt / m.f_cb, m.kt_ms, m.cb_ms, m.choice.variant, m.choice.tuned, m.err,
            m.bound, m.precise ? "same" : "DIFFERENT", m.ok ? "ok" : "failed");
  }

  /* The TF32 repack against a copy of its bytes: 8192 x 8192 FP32. */
  {
    const int R = 8192, Kt = 8192;
    float *src, *dst;
    BENCH_CUDA(cudaMalloc(&src, (size_t)R * Kt * 4));
    BENCH_CUDA(cudaMalloc(&dst, (size_t)R * Kt * 4));
    fill_typed<<<d.info.sm_count * 8, 256>>>(src, (size_t)R * Kt, KT_TF32, 7);
    auto run_pack = [&]() -> int {
      const gemm_pack_op op = {src, R, 0, 0, R, 1, dst};
      return (int)gemm_pack_launch(&op, NULL, Kt, Kt, KT_GEMM_TF32, 0);
    };
    auto run_copy = [&]() -> int {
      return (int)cudaMemcpyAsync(dst, src, (size_t)R * Kt * 4, cudaMemcpyDeviceToDevice, 0);
    };
    const bench_time_result tp = bench_time(run_pack, flush, reps), tc = bench_time(run_copy, flush, reps);
    const double gb = 2.0 * R * (double)Kt * 4 / 1e9;
    printf("\nTF32 repack (transpose) of %d x %d FP32: %.3f ms = %.0f GB/s; cudaMemcpy of the same bytes %.3f ms = "
           "%.0f GB/s\n",
           R, Kt, tp.ms, gb / (tp.ms * 1e-3), tc.ms, gb / (tc.ms * 1e-3));
    cudaFree(src);
    cudaFree(dst);
  }

  summary(results);
  plot(o, d, cases.size());
  failed += tc_random(o, g);
  failed += f32_batches(o, d, ctx, h, flush, reps);
  printf("\n%zu cases, %d failed the check, %d compared against cuBLAS in another precision\n", cases.size(), failed,
         imprecise);
  printf("wrote %s/gemm.csv\n", o.out.c_str());
  cublasDestroy(h);
  kt_close(ctx);
  return failed || imprecise ? 1 : 0;
}
