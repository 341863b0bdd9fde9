/* SPDX-License-Identifier: MIT */
/* bench/bench_matmul.cu: ktune's matmul against cuBLAS and the seed kernel.
 *
 *   make build/bench_matmul
 *   ./build/bench_matmul --db tuning-db/ktune.db --out bench/results [--quick]
 *
 * For every shape of the suite (row-major fp32, C = A * B, alpha 1, beta 0)
 * it times three ways of computing C on the same random inputs:
 *   ktune   kt_matmul through a context on --db: the dispatched winner
 *   cuBLAS  cublasSgemm in its default math mode (plain fp32, no TF32)
 *   seed    the registry's tiled kernel with bs=16, pad=0 (kt_tune_matmul_seed):
 *           the CUDA Programming Guide's shared-memory kernel (BLOCK_SIZE 16),
 *           launched directly
 * checks ktune's (and the seed's) result against cuBLAS's, and prints
 * TFLOP/s, the ktune/cuBLAS ratio and which variant ktune dispatched to.
 * Then it measures the host cost of dispatch: kt_matmul against a direct
 * launch of the same variant on a tiny problem.
 *
 * Writes OUT/matmul.csv, OUT/matmul_dispatch.csv, OUT/matmul.gp and, with
 * gnuplot on PATH, OUT/matmul.png.
 */
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "bench_common.h"
#include "matmul.h"
#include "matmul_check.cuh"

/* The TF32 probe: A has 1 + 2^-12 in column 0 and zeros elsewhere, B has
 * ones in row 0 and zeros elsewhere, so every element of A B is exactly
 * 1 + 2^-12 in fp32.  TF32 keeps 10 bits of mantissa and would round the
 * product to 1: any element off counts as a TF32 (or otherwise reduced
 * precision) kernel. */
__global__ void tf32_probe_inputs(float *A, float *B, int M, int N, int K)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)M * K; i += (size_t)gridDim.x * blockDim.x)
    A[i] = i % K == 0 ? 1.0f + 0x1p-12f : 0.0f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)K * N; i += (size_t)gridDim.x * blockDim.x)
    B[i] = i < (size_t)N ? 1.0f : 0.0f;
}

__global__ void count_not(const float *x, size_t n, float want, unsigned long long *count)
{
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    c += x[i] != want;
  if (c)
    atomicAdd(count, c);
}

static double tflops(const bench_shape &s, double ms)
{
  return 2.0 * s.m * s.n * (double)s.k / (ms * 1e-3) / 1e12;
}

/* ---- dispatch overhead -------------------------------------------------- */

/* Host time per call of kt_matmul against v->launch of the variant it
 * dispatches to, on a problem small enough that only the host matters.
 *
 * Only the enqueueing is timed (clock_gettime around the loop); the GPU is
 * drained with a synchronize between batches of kBatch calls, outside the
 * timed region.  Without that, the launch queue fills after some thousand
 * calls and each enqueue then waits for a kernel to finish, so both loops
 * would measure the GPU's time per kernel instead of the host's cost.  The
 * two paths alternate batch by batch, so drift affects both alike. */
static void measure_dispatch(kt_context *ctx, const bench_device &d, const bench_options &o)
{
  const int M = 64, N = 64, K = 64, kCalls = 20000, kBatch = 250;
  float *A, *B, *C;
  BENCH_CUDA(cudaMalloc(&A, sizeof(float) * M * K));
  BENCH_CUDA(cudaMalloc(&B, sizeof(float) * K * N));
  BENCH_CUDA(cudaMalloc(&C, sizeof(float) * M * N));
  kt_rng rng = {0x64697370ull};
  fill(A, (size_t)M * K, &rng, d);
  fill(B, (size_t)K * N, &rng, d);

  kt_choice choice;
  BENCH_KT(kt_matmul_choice(ctx, M, N, K, A, K, B, N, C, N, &choice));
  const kt_variant *v = kt_registry_find(choice.variant, NULL); /* any target's: one launcher */
  if (!v) {
    fprintf(stderr, "dispatch: variant %s is not in the registry\n", choice.variant);
    exit(1);
  }
  /* The same arguments kt_matmul builds for its launcher. */
  kt_matmul_args a = {};
  a.M = M, a.N = N, a.K = K, a.alpha = 1.0f, a.beta = 0.0f;
  a.A = A, a.B = B, a.C = C, a.lda = K, a.ldb = N, a.ldc = N;
  a.sm_count = d.info.sm_count;
  a.pool = kt_device_pool(d.info.ordinal);

  for (int i = 0; i < 2 * kBatch; ++i) { /* warm-up: module load, first-call costs */
    BENCH_KT(kt_matmul(ctx, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N, 0));
    BENCH_CUDA((cudaError_t)v->launch(&a, 0));
  }
  BENCH_CUDA(cudaDeviceSynchronize());

  double t_kt = 0, t_direct = 0;
  int rc_kt = KT_OK, rc_direct = 0;
  for (int b = 0; b < kCalls / kBatch; ++b) {
    double t0 = bench_now_s();
    for (int i = 0; i < kBatch; ++i)
      rc_kt |= kt_matmul(ctx, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N, 0);
    t_kt += bench_now_s() - t0;
    BENCH_CUDA(cudaDeviceSynchronize());

    t0 = bench_now_s();
    for (int i = 0; i < kBatch; ++i)
      rc_direct |= v->launch(&a, 0);
    t_direct += bench_now_s() - t0;
    BENCH_CUDA(cudaDeviceSynchronize());
  }
  BENCH_KT(rc_kt);
  BENCH_CUDA((cudaError_t)rc_direct);

  const int calls = kCalls / kBatch * kBatch;
  const double us_kt = t_kt / calls * 1e6, us_direct = t_direct / calls * 1e6;
  printf("\ndispatch overhead, %dx%dx%d, variant %s, %d calls each\n", M, N, K, v->name, calls);
  printf("  (host time to enqueue, clock_gettime around the loop; the GPU is drained between\n"
         "   batches of %d calls outside the timed region, so a full launch queue never stalls the loop)\n",
         kBatch);
  printf("  kt_matmul        %8.3f us/call\n", us_kt);
  printf("  v->launch        %8.3f us/call\n", us_direct);
  printf("  dispatch costs   %8.3f us/call\n", us_kt - us_direct);

  bench_csv csv(o.out + "/matmul_dispatch.csv", "m,n,k,variant,calls,batch,kt_matmul_us,direct_launch_us,overhead_us");
  csv.row("%d,%d,%d,%s,%d,%d,%.4f,%.4f,%.4f", M, N, K, v->name, calls, kBatch, us_kt, us_direct, us_kt - us_direct);

  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
}

/* ---- the plot ---------------------------------------------------------- */

static void plot(const bench_options &o, const bench_device &d)
{
  std::string s = bench_gnuplot_preamble("matmul", 1400, 650);
  s += "set title \"fp32 matmul, " + bench_gnuplot_escape(d.line) + "\"\n";
  s += "set ylabel \"TFLOP/s (higher is better)\"\n"
       "set xlabel \"shape MxNxK\"\n"
       "set style data histograms\n"
       "set style histogram clustered gap 1\n"
       "set style fill solid 0.85 border -1\n"
       "set boxwidth 0.9\n"
       "set yrange [0:*]\n"
       "set xrange [-0.6:*]\n"
       "set grid ytics\n"
       "set key top left\n"
       "set xtics rotate by -30 nomirror\n"
       "plot \"matmul.csv\" skip 1 using 5:xtic(1) title \"ktune\" lc rgb \"#1b9e77\", \\\n"
       "     \"\" skip 1 using 6 title \"cuBLAS (fp32, no TF32)\" lc rgb \"#7570b3\", \\\n"
       "     \"\" skip 1 using 7 title \"seed (Guide kernel, bs16)\" lc rgb \"#d95f02\"\n";
  bench_plot(o.out, "matmul", s);
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
  const bench_options o = bench_parse_args(argc, argv, "ktune matmul against cuBLAS SGEMM and the seed kernel.");
  bench_mkdirs(o.out);
  const bench_device d = bench_device_open();
  kt_context *ctx = bench_open_ktune(o);
  const bench_flush flush = bench_flush_alloc(d);
  const bench_reps reps = o.quick ? bench_reps{3, 10, 100.0} : bench_reps{5, 50, 500.0};

  const kt_variant *seed = kt_tune_matmul_seed();
  if (!seed) {
    fprintf(stderr, "the seed variant (algo tiled, bs=16, pad=0) is not in this build's registry\n");
    return 1;
  }

  cublasHandle_t h;
  BENCH_CUBLAS(cublasCreate(&h));
  int cublas_version = 0;
  BENCH_CUBLAS(cublasGetVersion(h, &cublas_version));
  cublasMath_t mode;
  BENCH_CUBLAS(cublasGetMathMode(h, &mode));
  if (mode != CUBLAS_DEFAULT_MATH) {
    fprintf(stderr, "cuBLAS math mode is %d, not CUBLAS_DEFAULT_MATH: the comparison would not be fp32\n", (int)mode);
    return 1;
  }
  printf("cuBLAS %d: math mode CUBLAS_DEFAULT_MATH (fp32; TF32 and emulation off)\n", cublas_version);
  /* These switch fp32 GEMM to other arithmetic behind the math mode's back. */
  for (const char *env : {"NVIDIA_TF32_OVERRIDE", "CUBLAS_EMULATE_SINGLE_PRECISION", "CUBLAS_EMULATION_STRATEGY"})
    if (getenv(env))
      printf("  note: %s=%s is set in the environment\n", env, getenv(env));
  printf("seed: %s, launched through its registry launcher\n", seed->name);
  printf("timing: %s of %d..%d runs (budget %.0f ms) after a warm-up, CUDA events, %zu MiB L2 flush "
         "before each run\n",
         bench_statistic, reps.min_reps, reps.max_reps, reps.budget_ms, flush.bytes >> 20);
  printf("check: ktune and seed against cuBLAS, relative Frobenius error <= 64 * 2^-24 * sqrt(K)\n\n");

  std::vector<bench_shape> suite;
  if (o.quick)
    suite.assign(std::begin(bench_quick_suite), std::end(bench_quick_suite));
  else
    suite.assign(std::begin(bench_suite), std::end(bench_suite));

  bench_csv csv(o.out + "/matmul.csv",
                "shape,m,n,k,ktune_tflops,cublas_tflops,seed_tflops,ktune_over_cublas,ktune_ms,cublas_ms,seed_ms,"
                "variant,tuned,rel_err_ktune,rel_err_seed,bound,status");
  printf("%-18s %9s %9s %9s %9s  %-9s %-9s %-9s %-7s %s\n", "shape MxNxK", "ktune", "cuBLAS", "seed", "ktune/", "err",
         "err", "bound", "status", "ktune dispatched to");
  printf("%-18s %9s %9s %9s %9s  %-9s %-9s %-9s %-7s\n", "", "TFLOP/s", "TFLOP/s", "TFLOP/s", "cuBLAS", "ktune", "seed",
         "", "");

  kt_rng rng = {0x6b74756e6d6d0001ull};
  double *scratch;
  BENCH_CUDA(cudaMalloc(&scratch, 2 * sizeof(double)));
  std::vector<double> ratios;
  int failed = 0;
  bool tf32_free = true;

  for (const bench_shape &s : suite) {
    const size_t na = (size_t)s.m * s.k, nb = (size_t)s.k * s.n, nc = (size_t)s.m * s.n;
    float *A, *B, *C_kt, *C_ref, *C_seed;
    BENCH_CUDA(cudaMalloc(&A, na * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&B, nb * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&C_kt, nc * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&C_ref, nc * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&C_seed, nc * sizeof(float)));
    const int M = s.m, N = s.n, K = s.k;
    const float one = 1.0f, zero = 0.0f;
    /* Row-major C = A B is column-major C^T = B^T A^T: swap the operands
     * and M with N; every leading dimension stays the row length. */
    auto run_cublas = [&]() -> int {
      cublasStatus_t st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, B, N, A, K, &zero, C_ref, N);
      return st == CUBLAS_STATUS_SUCCESS ? 0 : bench_fail("cublasSgemm: %s", cublasGetStatusString(st));
    };

    /* Same shape, same call: does cuBLAS compute in fp32? */
    tf32_probe_inputs<<<d.info.sm_count * 8, 256>>>(A, B, M, N, K);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaMemset(scratch, 0, sizeof(unsigned long long)));
    unsigned long long reduced = 0;
    const bool probed = run_cublas() == 0; /* a failed call proves nothing: not counted as fp32 */
    if (probed) {
      count_not<<<d.info.sm_count * 8, 256>>>(C_ref, nc, 1.0f + 0x1p-12f, (unsigned long long *)scratch);
      BENCH_CUDA(cudaGetLastError());
      BENCH_CUDA(cudaMemcpy(&reduced, scratch, sizeof reduced, cudaMemcpyDeviceToHost));
      if (reduced)
        printf("  TF32 probe at %dx%dx%d: %llu elements of cuBLAS's result are not 1 + 2^-12\n", M, N, K, reduced);
    }
    tf32_free = tf32_free && probed && reduced == 0;

    fill(A, na, &rng, d);
    fill(B, nb, &rng, d);
    /* All-ones bytes are NaN: an element a kernel never writes fails the check. */
    BENCH_CUDA(cudaMemset(C_kt, 0xff, nc * sizeof(float)));
    BENCH_CUDA(cudaMemset(C_seed, 0xff, nc * sizeof(float)));
    BENCH_CUDA(cudaDeviceSynchronize());

    kt_choice choice = {};
    int rc = kt_matmul_choice(ctx, M, N, K, A, K, B, N, C_kt, N, &choice);
    if (rc != KT_OK)
      snprintf(choice.variant, sizeof choice.variant, "(%s)", kt_strerror(rc));

    auto run_ktune = [&]() -> int {
      int r = kt_matmul(ctx, M, N, K, 1.0f, A, K, B, N, 0.0f, C_kt, N, 0);
      return r == KT_OK ? 0 : bench_fail("kt_matmul: %s", kt_strerror(r));
    };
    kt_matmul_args a = {};
    a.M = M, a.N = N, a.K = K, a.alpha = 1.0f, a.beta = 0.0f;
    a.A = A, a.B = B, a.C = C_seed, a.lda = K, a.ldb = N, a.ldc = N;
    a.sm_count = d.info.sm_count;
    auto run_seed = [&]() -> int { return seed->launch(&a, 0); };

    const bench_time_result t_kt = bench_time(run_ktune, flush, reps);
    const bench_time_result t_cb = bench_time(run_cublas, flush, reps);
    const bench_time_result t_sd = bench_time(run_seed, flush, reps);
    BENCH_CUDA(cudaDeviceSynchronize());

    /* The outputs of the last timed runs; cuBLAS's is the reference. */
    const double bound = error_bound(K);
    const double err_kt = t_kt.ok && t_cb.ok ? rel_error(C_kt, C_ref, M, N, N, scratch, d) : NAN;
    const double err_sd = t_sd.ok && t_cb.ok ? rel_error(C_seed, C_ref, M, N, N, scratch, d) : NAN;
    const bool ok = t_kt.ok && t_cb.ok && err_kt <= bound; /* false for NaN too */
    const bool seed_ok = t_sd.ok && t_cb.ok && err_sd <= bound;

    const double f_kt = t_kt.ok ? tflops(s, t_kt.ms) : NAN;
    const double f_cb = t_cb.ok ? tflops(s, t_cb.ms) : NAN;
    const double f_sd = t_sd.ok ? tflops(s, t_sd.ms) : NAN;
    const double ratio = f_kt / f_cb;
    if (ok)
      ratios.push_back(ratio);
    else
      ++failed;

    char name[48];
    snprintf(name, sizeof name, "%dx%dx%d", M, N, K);
    std::string via = choice.variant;
    via += choice.tuned ? std::string(" (tuned at ") + choice.matched + ")" : std::string(" (untuned default)");
    printf("%-18s %9.2f %9.2f %9.2f %9.3f  %-9.2e %-9.2e %-9.2e %-7s %s\n", name, f_kt, f_cb, f_sd, ratio, err_kt,
           err_sd, bound, ok ? "ok" : "FAILED", via.c_str());
    if (!t_kt.ok)
      printf("  ktune failed: %s\n", t_kt.err.c_str());
    if (!t_cb.ok)
      printf("  cuBLAS failed: %s\n", t_cb.err.c_str());
    if (!t_sd.ok)
      printf("  seed failed: %s\n", t_sd.err.c_str());
    else if (!seed_ok && t_cb.ok)
      printf("  note: the seed's result is off too (error %.2e)\n", err_sd);
    fflush(stdout);

    csv.row("%s,%d,%d,%d,%.4f,%.4f,%.4f,%.4f,%.5f,%.5f,%.5f,%s,%d,%.3e,%.3e,%.3e,%s", name, M, N, K, f_kt, f_cb, f_sd,
            ratio, t_kt.ms, t_cb.ms, t_sd.ms, choice.variant, choice.tuned, err_kt, err_sd, bound,
            ok ? "ok" : "FAILED");

    cudaFree(A);
    cudaFree(B);
    cudaFree(C_kt);
    cudaFree(C_ref);
    cudaFree(C_seed);
  }

  printf("\ngeometric mean of ktune/cuBLAS over %zu shapes: %.3f", ratios.size(), bench_geomean(ratios));
  if (failed)
    printf("  (%d FAILED shape%s left out)", failed, failed > 1 ? "s" : "");
  printf("\n");

  printf("TF32 probe (A B = 1 + 2^-12 exactly in fp32, 1 in TF32), cuBLAS at every shape: %s\n",
         tf32_free ? "fp32 everywhere, no TF32 kernel ran" : "REDUCED PRECISION: some shape did not keep fp32");
  if (!tf32_free)
    ++failed;

  measure_dispatch(ctx, d, o);
  printf("\ncsv: %s/matmul.csv, %s/matmul_dispatch.csv\n", o.out.c_str(), o.out.c_str());
  plot(o, d);

  cudaFree(scratch);
  cudaFree(flush.p);
  cublasDestroy(h);
  kt_close(ctx);
  return failed ? 1 : 0;
}
