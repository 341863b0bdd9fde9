/* SPDX-License-Identifier: MIT */
/* bench/bench_matmul_random.cu: matmul on shapes nobody tuned, against
 * cuBLAS and against ktune's own best variant there.
 *
 *   make build/bench_matmul_random
 *   ./build/bench_matmul_random [--db PATH] [--out bench/results] [--seed N] [--quick] [--vectors]
 *                               [--rows LO:HI] [--cols LO:HI]
 *
 * The suite is generated from --seed (default below), never hand-picked:
 * M, N and K log-uniform over 1..16384, the largest sizes scaled down
 * until one product is at most kMaxFlop; shapes of the tuning set are
 * drawn again.  Every third shape has leading dimensions that are not
 * multiples of 4, every fifth of the rest a pointer 4 bytes past a 16-byte
 * boundary, and the others padded leading dimensions half of the time.
 * --vectors draws the corner the few-row and few-column kernels serve
 * instead: one of M and N is 1 (three times in five) or log-uniform over
 * 2..16, the two alternately; the other and K as above.  Its files are
 * named matmul_vectors*.  --rows LO:HI draws M log-uniform over LO..HI
 * alone (the others as before; M is never the size scaled down), --cols
 * the same for N: a look at one band, such as the few dozen rows that
 * neither the few-row kernel nor a full warp tile fits.
 *
 * Per shape, on the same random inputs (row-major fp32, C = A B):
 *   ktune    kt_matmul: what dispatch picks for an untuned shape
 *   oracle   every variant of this build that can serve the call, launched
 *            directly (a float4 variant given a B it cannot read in place
 *            stages B first, as its launcher does for kt_matmul): the
 *            fastest is ktune's best possible choice there.  The sweep
 *            picks it; it is then timed again as ktune is (see below), and
 *            that time is the oracle's
 *   cuBLAS   cublasSgemm in its default math mode (fp32, no TF32)
 * ktune's and the oracle winner's results are checked against cuBLAS's
 * (relative Frobenius error, bench/matmul_check.cuh).
 *
 * Prints a row per shape, then the geometric mean, 10th percentile and
 * minimum of ktune/cuBLAS and of dispatch/oracle, and the geometric mean of
 * ktune/cuBLAS where leading dimensions are not multiples of 4; also
 * dispatch over the sweep's fastest time (the oracle's column before run
 * 16 of bench/reference/matmul_random/README.md), which is biased low.  Writes
 * OUT/matmul_random.csv, OUT/matmul_random_variants.csv (every variant's
 * time on every shape), OUT/matmul_random.gp and, with gnuplot on PATH,
 * OUT/matmul_random.png.
 */
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench_common.h"
#include "matmul.h"
#include "matmul_check.cuh"
#include "registry.h"

static const unsigned long long kDefaultSeed = 0x6b74756e0b11ull;
static const int kShapes = 48, kQuickShapes = 8;
static const double kMaxFlop = 0x1p37;     /* ~1.4e11: a few ms at most */
static const double kMaxElements = 0x1p27; /* per matrix: 512 MiB */
static const int kTuned[][3] = {{512, 512, 512},    {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
                                {8192, 8192, 8192}, {4096, 4096, 256},  {128, 8192, 8192},  {8192, 128, 8192},
                                {16384, 16384, 64}, {1000, 1000, 1000}, {4000, 4000, 4000}, {64, 64, 65536}};

struct call {
  int m, n, k;
  long long lda, ldb, ldc;
  int offset; /* floats past a 256-byte boundary for A, B and C */
  const char *kind;
};

/* log-uniform over [lo, hi] */
static int draw(kt_rng *r, double lo, double hi)
{
  const double u = (double)(kt_rng_next(r) >> 11) * 0x1p-53;
  const double x = std::floor(std::exp(std::log(lo) + u * (std::log(hi + 1.0) - std::log(lo))));
  return (int)std::min(hi, std::max(lo, x));
}

static long long pad_ld(long long x, kt_rng *r, const char *kind)
{
  if (!strcmp(kind, "ld%4!=0")) { /* one of the three of x .. x + 3 that are not multiples of 4 */
    const long long j = (long long)(kt_rng_next(r) % 3), skip = (4 - x % 4) % 4; /* x + skip: the multiple */
    return x + (j < skip ? j : j + 1);
  }
  if (!strcmp(kind, "padded"))
    return (x + 3) / 4 * 4 + 4 * (long long)(kt_rng_next(r) % 8);
  return x;
}

static std::vector<call> make_suite(unsigned long long seed, int count, const bench_options &o)
{
  kt_rng r = {seed};
  std::vector<call> out;
  while ((int)out.size() < count) {
    double m = draw(&r, 1, 16384), n = draw(&r, 1, 16384), k = draw(&r, 1, 16384);
    if (o.rows_lo > 0)
      m = draw(&r, o.rows_lo, o.rows_hi);
    if (o.cols_lo > 0)
      n = draw(&r, o.cols_lo, o.cols_hi);
    if (o.vectors) {
      const double v = kt_rng_next(&r) % 5 < 3 ? 1 : draw(&r, 2, 16);
      *(out.size() % 2 ? &m : &n) = v; /* few columns, then few rows */
    }
    /* Scale the largest down until the work and the matrices fit. */
    while (2 * m * n * k > kMaxFlop || m * k > kMaxElements || k * n > kMaxElements || m * n > kMaxElements) {
      /* --rows keeps M, --cols N */
      double *big = o.rows_lo == 0 && m >= n && m >= k ? &m : o.cols_lo == 0 && n >= k ? &n : &k;
      if (*big <= 1) /* K is 1 already: the band gives */
        big = m >= n ? &m : &n;
      *big = std::max(1.0, std::floor(*big / 2));
    }
    bool tuned = false;
    for (const auto &t : kTuned)
      tuned |= t[0] == (int)m && t[1] == (int)n && t[2] == (int)k;
    if (tuned)
      continue;
    call c = {(int)m, (int)n, (int)k, 0, 0, 0, 0, "plain"};
    const int i = (int)out.size();
    c.kind = i % 3 == 0 ? "ld%4!=0" : i % 5 == 1 ? "offset" : kt_rng_next(&r) % 2 ? "padded" : "plain";
    c.lda = pad_ld(c.k, &r, c.kind);
    c.ldb = pad_ld(c.n, &r, c.kind);
    c.ldc = pad_ld(c.n, &r, c.kind);
    c.offset = !strcmp(c.kind, "offset") ? 1 : 0;
    out.push_back(c);
  }
  return out;
}

static double percentile(std::vector<double> x, double p)
{
  if (x.empty())
    return NAN;
  std::sort(x.begin(), x.end());
  const double pos = p * (double)(x.size() - 1);
  const size_t lo = (size_t)pos;
  return lo + 1 < x.size() ? x[lo] + (pos - lo) * (x[lo + 1] - x[lo]) : x[lo];
}

/* t, or a second median of the same call where that is lower; a call
 * that failed the first time stays failed. */
static void keep_lower(bench_time_result &t, const bench_time_result &again)
{
  if (t.ok && again.ok && again.ms < t.ms)
    t = again;
}

static void summary(const char *what, const std::vector<double> &x)
{
  printf("%-34s geomean %6.3f   p10 %6.3f   min %6.3f   (%zu shapes)\n", what, bench_geomean(x), percentile(x, 0.1),
         x.empty() ? NAN : *std::min_element(x.begin(), x.end()), x.size());
}

static void plot(const bench_options &o, const bench_device &d, const std::string &base)
{
  std::string s = bench_gnuplot_preamble(base, 1200, 650);
  s += std::string("set title \"fp32 matmul on generated untuned ") + (o.vectors ? "vector-like " : "") + "shapes, " +
       bench_gnuplot_escape(d.line) + "\"\n";
  s += "set datafile separator \",\"\n"
       "set xlabel \"GFLOP per product (log)\"\n"
       "set ylabel \"ratio (higher is better)\"\n"
       "set logscale x\n"
       "set grid\n"
       "set key bottom right\n"
       "set yrange [0:*]\n"
       "plot \"" + base + ".csv\" skip 1 using ($2*$3*$4*2e-9):13 title \"ktune / cuBLAS\" pt 7 lc rgb \"#1b9e77\", "
       "\\\n"
       "     \"\" skip 1 using ($2*$3*$4*2e-9):14 title \"dispatch / oracle\" pt 5 lc rgb \"#d95f02\", \\\n"
       "     1 notitle lc rgb \"#888888\"\n";
  bench_plot(o.out, base, s);
}

int main(int argc, char **argv)
{
  const bench_options o =
      bench_parse_args(argc, argv, "ktune matmul on generated untuned shapes: dispatch, oracle and cuBLAS.");
  bench_mkdirs(o.out);
  const unsigned long long seed = o.seed ? o.seed : kDefaultSeed;
  const bench_device d = bench_device_open();
  kt_context *ctx = bench_open_ktune(o);
  /* --online: a second context whose first calls of each shape race the
   * model's best candidates (kt_online), timed once its race has ended. */
  kt_context *online = o.online ? bench_open_ktune(o) : nullptr;
  if (online)
    BENCH_KT(kt_online(online, 4));
  const bench_flush flush = bench_flush_alloc(d);
  const bench_reps reps = o.quick ? bench_reps{3, 10, 60.0} : bench_reps{5, 30, 200.0};
  const bench_reps oracle_reps = {3, 10, 40.0};
  cublasHandle_t h;
  BENCH_CUBLAS(cublasCreate(&h));
  cublasMath_t mode;
  if (cublasGetMathMode(h, &mode) != CUBLAS_STATUS_SUCCESS || mode != CUBLAS_DEFAULT_MATH) {
    fprintf(stderr, "cuBLAS is not in CUBLAS_DEFAULT_MATH: the comparison would not be fp32\n");
    return 1;
  }
  const std::vector<call> suite = make_suite(seed, o.quick ? kQuickShapes : kShapes, o);
  const std::string base = o.vectors ? "matmul_vectors" : "matmul_random";
  char rows[64] = "", cols[64] = "";
  if (o.rows_lo > 0)
    snprintf(rows, sizeof rows, "; M over %d..%d", o.rows_lo, o.rows_hi);
  if (o.cols_lo > 0)
    snprintf(cols, sizeof cols, "; N over %d..%d", o.cols_lo, o.cols_hi);
  printf("suite: %zu shapes from seed %llu (M, N, K log-uniform over 1..16384%s%s%s, at most %.3g flop)\n",
         suite.size(), seed, rows, cols, o.vectors ? "; M or N 1, or log-uniform over 2..16" : "", kMaxFlop);
  printf("check: ktune and the oracle's winner against cuBLAS, relative Frobenius error <= 64 * 2^-24 * sqrt(K)\n\n");
  printf("%-20s %-8s %9s %9s %9s %8s %8s  %s\n", "shape MxNxK", "kind", "ktune", "oracle", "cuBLAS", "kt/cuBLAS",
         "disp/orc", "dispatched / oracle");

  bench_csv csv(
      o.out + "/" + base + ".csv",
      "shape,m,n,k,lda,ldb,ldc,offset,kind,ktune_ms,oracle_ms,cublas_ms,ktune_over_cublas,"
      "dispatch_over_oracle,dispatched,oracle,rel_err_ktune,rel_err_oracle,bound,status,reason,oracle_sweep_ms,"
      "online_ms,online_variant,online_calls");
  /* Every variant's time on every shape: what dispatch's model is judged by. */
  bench_csv each(o.out + "/" + base + "_variants.csv", "shape,kind,variant,ms,staged");
  kt_rng rng = {seed ^ 0x5eedull};
  double *scratch;
  BENCH_CUDA(cudaMalloc(&scratch, 2 * sizeof(double)));
  std::vector<double> vs_cublas, vs_oracle, vs_sweep, unaligned, vs_online;
  struct worst {
    double r;
    std::string line;
  };
  std::vector<worst> worsts;
  int failed = 0;

  for (const call &c : suite) {
    const size_t na = (size_t)c.m * c.lda + 64, nb = (size_t)c.k * c.ldb + 64, nc = (size_t)c.m * c.ldc + 64;
    float *A0, *B0, *C0, *R0, *O0;
    BENCH_CUDA(cudaMalloc(&A0, na * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&B0, nb * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&C0, nc * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&R0, nc * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&O0, nc * sizeof(float)));
    float *A = A0 + c.offset, *B = B0 + c.offset, *C = C0 + c.offset, *R = R0 + c.offset, *O = O0 + c.offset;
    fill(A0, na, &rng, d);
    fill(B0, nb, &rng, d);
    BENCH_CUDA(cudaMemset(C0, 0xff, nc * sizeof(float))); /* NaN: unwritten elements fail the check */
    BENCH_CUDA(cudaMemset(O0, 0xff, nc * sizeof(float)));
    BENCH_CUDA(cudaDeviceSynchronize());
    const float one = 1.0f, zero = 0.0f;
    auto run_cublas = [&]() -> int {
      cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, c.n, c.m, c.k, &one, B, (int)c.ldb, A, (int)c.lda,
                                      &zero, R, (int)c.ldc);
      return st == CUBLAS_STATUS_SUCCESS ? 0 : bench_fail("cublasSgemm: %s", cublasGetStatusString(st));
    };
    auto run_ktune = [&]() -> int {
      int r = kt_matmul(ctx, c.m, c.n, c.k, 1.0f, A, c.lda, B, c.ldb, 0.0f, C, c.ldc, 0);
      return r == KT_OK ? 0 : bench_fail("kt_matmul: %s", kt_strerror(r));
    };
    kt_choice choice = {};
    if (kt_matmul_choice(ctx, c.m, c.n, c.k, A, c.lda, B, c.ldb, C, c.ldc, &choice) != KT_OK)
      snprintf(choice.variant, sizeof choice.variant, "(no choice)");
    /* ktune and cuBLAS are timed before the oracle and again after it, and
     * each keeps the lower median: a transient that slows one round (on an
     * H100 both once ran 4-6x slow at a few-microsecond shape, while the
     * oracle's variants, timed between, did not) decides no ratio. */
    bench_time_result t_kt = bench_time(run_ktune, flush, reps);
    bench_time_result t_cb = bench_time(run_cublas, flush, reps);

    /* The oracle: every variant that can serve this call.  One that takes
     * over three times the best so far cannot win: a median of three runs
     * is its time (as the tuner's).  A single run is not
     * enough for that: on an H100 one run of a few-microsecond variant
     * has come out 3-8x its time in a few sweeps (a tiled kernel, 8-block
     * clusters), which left those variants' rows wrong in the CSV. */
    const kt_variant *best = nullptr;
    double best_ms = INFINITY;
    kt_matmul_args oa = {}; /* every variant's call: C = A B into O */
    oa.M = c.m, oa.N = c.n, oa.K = c.k, oa.alpha = 1.0f, oa.beta = 0.0f;
    oa.A = A, oa.B = B, oa.C = O, oa.lda = c.lda, oa.ldb = c.ldb, oa.ldc = c.ldc;
    oa.sm_count = d.info.sm_count;
    oa.pool = kt_device_pool(d.info.ordinal);
    for (int i = 0; i < kt_registry_count; ++i) {
      const kt_variant *v = &kt_registry[i];
      if (!kt_matmul_serves_staged(v, &d.info, B, c.ldb, c.n, c.k) || !kt_matmul_serves_shape(v, c.m, c.n, c.k))
        continue;
      auto run_v = [&]() -> int { return v->launch(&oa, 0); };
      bench_time_result t = bench_time(run_v, flush, bench_reps{1, 1, 0.0});
      if (t.ok && t.ms > 3 * best_ms)
        t = bench_time(run_v, flush, bench_reps{3, 3, 0.0});
      if (t.ok && !(t.ms > 3 * best_ms))
        t = bench_time(run_v, flush, oracle_reps);
      if (t.ok)
        each.row("%dx%dx%d,%s,%s,%.5f,%d", c.m, c.n, c.k, c.kind, v->name, t.ms, kt_matmul_stages(v, B, c.ldb));
      if (t.ok && t.ms < best_ms) {
        best_ms = t.ms;
        best = v;
      }
    }
    /* The sweep's fastest time is the least of many noisy ones, and so
     * below its winner's own time: where several variants run alike,
     * dispatch's pick, as fast as the winner, would come out slower than
     * it.  So the winner is timed again as ktune is: a median of `reps`
     * here and another after ktune's and cuBLAS's second ones, the lower
     * kept.  The sweep's time stays in the CSV (oracle_sweep_ms). */
    const double sweep_ms = best_ms;
    auto run_best = [&]() -> int { return best->launch(&oa, 0); };
    bench_time_result t_or = best ? bench_time(run_best, flush, reps) : bench_time_result{};
    const bench_time_result t_kt2 = bench_time(run_ktune, flush, reps);
    const bench_time_result t_cb2 = bench_time(run_cublas, flush, reps);
    const bench_time_result t_or2 = best ? bench_time(run_best, flush, reps) : bench_time_result{};
    keep_lower(t_kt, t_kt2);
    keep_lower(t_cb, t_cb2);
    keep_lower(t_or, t_or2);
    if (best)
      best_ms = t_or.ok ? t_or.ms : INFINITY;
    /* The oracle winner's result, from a run of its own. */
    double err_or = NAN;
    if (best) {
      BENCH_CUDA(cudaMemset(O0, 0xff, nc * sizeof(float)));
      BENCH_CUDA((cudaError_t)best->launch(&oa, 0));
      BENCH_CUDA(cudaDeviceSynchronize());
      err_or = rel_error(O, R, c.m, c.n, c.ldc, scratch, d);
    }
    const double bound = error_bound(c.k);
    const double err_kt = t_kt.ok && t_cb.ok ? rel_error(C, R, c.m, c.n, c.ldc, scratch, d) : NAN;
    /* ...and nothing of C0 outside C (ldc's padding, the 64 floats past
     * its end, the offset before it) was written, over all ktune's runs. */
    const unsigned long long outside = t_kt.ok ? spoiled(C0, nc, (size_t)c.offset, c.m, c.n, c.ldc, scratch, d) : 0;
    /* On-line tuning: the race run to its end, calls enqueued a few at a
     * time as an application would (a call's events are read by later
     * calls once done), then timed as ktune is.  C is checked again after
     * it. */
    bench_time_result t_on = {};
    kt_choice on_choice = {};
    int on_calls = 0;
    double err_on = NAN;
    if (online) {
      auto run_online = [&]() -> int {
        int r = kt_matmul(online, c.m, c.n, c.k, 1.0f, A, c.lda, B, c.ldb, 0.0f, C, c.ldc, 0);
        return r == KT_OK ? 0 : bench_fail("kt_matmul (on-line): %s", kt_strerror(r));
      };
      int err = 0;
      do {
        for (int i = 0; i < 8 && !err; ++i, ++on_calls)
          err = run_online();
        BENCH_CUDA(cudaDeviceSynchronize());
        BENCH_KT(kt_matmul_choice(online, c.m, c.n, c.k, A, c.lda, B, c.ldb, C, c.ldc, &on_choice));
      } while (!err && !strncmp(on_choice.reason, "on-line: racing", 15) && on_calls < 200);
      t_on = bench_time(run_online, flush, reps);
      keep_lower(t_on, bench_time(run_online, flush, reps));
      BENCH_CUDA(cudaMemset(C0, 0xff, nc * sizeof(float)));
      if (t_on.ok && run_online() == 0) {
        BENCH_CUDA(cudaDeviceSynchronize());
        err_on = rel_error(C, R, c.m, c.n, c.ldc, scratch, d);
      }
    }
    if (outside)
      printf("  %dx%dx%d: ktune wrote %llu floats outside C\n", c.m, c.n, c.k, outside);
    const bool ok = t_kt.ok && t_cb.ok && err_kt <= bound && outside == 0 && best && t_or.ok && err_or <= bound &&
                    (!online || (t_on.ok && err_on <= bound));
    const double r_cb = t_cb.ms / t_kt.ms, r_or = best_ms / t_kt.ms;
    char name[64];
    snprintf(name, sizeof name, "%dx%dx%d", c.m, c.n, c.k);
    const double gflop = 2.0 * c.m * c.n * (double)c.k * 1e-9;
    if (ok) {
      vs_cublas.push_back(r_cb);
      vs_oracle.push_back(std::min(r_or, 1.0)); /* the oracle is ktune's best: timing noise above 1 is noise */
      vs_sweep.push_back(std::min(sweep_ms / t_kt.ms, 1.0));
      if (online)
        vs_online.push_back(std::min(best_ms / t_on.ms, 1.0));
      if (!strcmp(c.kind, "ld%4!=0"))
        unaligned.push_back(r_cb);
      char line[512];
      snprintf(line, sizeof line,
               "%s %s lda %lld ldb %lld ldc %lld: kt/cuBLAS %.3f, dispatch/oracle %.3f; dispatched %s, oracle %s", name,
               c.kind, c.lda, c.ldb, c.ldc, r_cb, r_or, choice.variant, best ? best->name : "-");
      worsts.push_back({std::min(r_cb, r_or), line});
    } else
      ++failed;
    printf("%-20s %-8s %9.2f %9.2f %9.2f %8.3f %8.3f  %s / %s%s\n", name, c.kind, gflop / t_kt.ms, gflop / best_ms,
           gflop / t_cb.ms, r_cb, r_or, choice.variant, best ? best->name : "-", ok ? "" : "  FAILED");
    if (!ok)
      printf("  ktune %s (err %.2e), cuBLAS %s, oracle err %.2e, on-line err %.2e, bound %.2e\n",
             t_kt.ok ? "ran" : t_kt.err.c_str(), err_kt, t_cb.ok ? "ran" : t_cb.err.c_str(), err_or, err_on, bound);
    if (online && ok)
      printf("  on-line: %s after %d calls, %.3f of the oracle\n", on_choice.variant, on_calls, best_ms / t_on.ms);
    fflush(stdout);
    std::string reason = choice.reason;
    std::replace(reason.begin(), reason.end(), ',', ';');
    csv.row("%s,%d,%d,%d,%lld,%lld,%lld,%d,%s,%.5f,%.5f,%.5f,%.4f,%.4f,%s,%s,%.3e,%.3e,%.3e,%s,%s,%.5f,%.5f,%s,%d",
            name, c.m, c.n, c.k, c.lda, c.ldb, c.ldc, c.offset, c.kind, t_kt.ms, best_ms, t_cb.ms, r_cb, r_or,
            choice.variant, best ? best->name : "-", err_kt, err_or, bound, ok ? "ok" : "FAILED", reason.c_str(),
            sweep_ms, online ? t_on.ms : NAN, online ? on_choice.variant : "", on_calls);
    cudaFree(A0);
    cudaFree(B0);
    cudaFree(C0);
    cudaFree(R0);
    cudaFree(O0);
  }

  printf("\n");
  summary("ktune / cuBLAS", vs_cublas);
  summary("dispatch / oracle (capped at 1)", vs_oracle);
  summary("dispatch / sweep's fastest (capped)", vs_sweep);
  summary("ktune / cuBLAS, ld % 4 != 0", unaligned);
  if (online)
    summary("on-line tuned / oracle (capped)", vs_online);
  if (failed)
    printf("%d shape%s FAILED (left out of the summary)\n", failed, failed > 1 ? "s" : "");
  std::sort(worsts.begin(), worsts.end(), [](const worst &a, const worst &b) { return a.r < b.r; });
  printf("\nworst five:\n");
  for (size_t i = 0; i < worsts.size() && i < 5; ++i)
    printf("  %s\n", worsts[i].line.c_str());
  printf("\ncsv: %s/%s.csv\n", o.out.c_str(), base.c_str());
  plot(o, d, base);
  cudaFree(scratch);
  cudaFree(flush.p);
  cublasDestroy(h);
  kt_close(online);
  kt_close(ctx);
  return failed ? 1 : 0;
}
