/* bench/bench_stride.cu: does a wgmma variant's speed depend on the
 * operands' row strides?  Not part of `make bench`; it measures for the
 * record in bench/reference/gemm_tiles/README.md ("Row strides ...").
 *
 *   make build/bench_stride
 *   build/bench_stride SEED NSHAPES [VARIANT-SUBSTRING]
 *   build/bench_stride SEED -1          # the repack (gemm_pack) alone
 *   build/bench_stride SEED 0 VARIANT-SUBSTRING MxNxK[,MxNxK...]  # these shapes only
 *
 * op N, N per wgmma variant, at 4096^3 and NSHAPES shapes drawn from SEED,
 * with lda and ldb padded to 128 bytes and then offset by 16, 32 or 64
 * bytes, at the natural strides (K, N), and at the first again (a control
 * for the order of the runs); cuBLAS (cublasGemmEx, same precision) at the
 * same strides beside it.  Each the lower of three interleaved rounds' medians; ms
 * for the first, then ratios to it. */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "bench_common.h"
#include "gemm_common.cuh"
#include "kt_internal.h"
#include "matmul_check.cuh"
#include "registry.h"

int main(int argc, char **argv)
{
  unsigned long long seed = argc > 1 ? strtoull(argv[1], 0, 10) : 62;
  const int nshapes = argc > 2 ? atoi(argv[2]) : 5;
  const char *only = argc > 3 && argv[3][0] ? argv[3] : nullptr;
  bench_device d = bench_device_open();
  bench_flush fl = bench_flush_alloc(d);
  cublasHandle_t h;
  BENCH_CUBLAS(cublasCreate(&h));
  const bench_reps reps = {10, 30, 300.0};
  kt_rng r = {seed};
  struct shp {
    int m, n, k;
  };
  std::vector<shp> shapes = {{4096, 4096, 4096}};
  for (int i = 0; i < nshapes; ++i) {
    const int m = (int)log_uniform(&r, 1500, 9000) / 4 * 4, n = (int)log_uniform(&r, 1500, 9000) / 4 * 4,
              k = (int)log_uniform(&r, 512, 8192) / 4 * 4;
    shapes.push_back({m, n, k});
  }
  if (argc > 4) { // shapes named on the command line, in place of those
    shapes.clear();
    for (const char *q = argv[4]; *q;) {
      shp x = {0, 0, 0};
      int used = 0;
      if (sscanf(q, "%dx%dx%d%n", &x.m, &x.n, &x.k, &used) != 3 || x.m < 1 || x.n < 1 || x.k < 1 || x.m > 9000 ||
          x.n > 9000 || x.k > 9000) {
        fprintf(stderr, "bench_stride: a shape is MxNxK, each 1 to 9000: %s\n", q);
        return 2;
      }
      shapes.push_back(x);
      q += used;
      if (*q == ',')
        ++q;
    }
  }
  const size_t maxe = (size_t)9200 * 9300 + 4096;
  void *A, *B;
  float *C;
  BENCH_CUDA(cudaMalloc(&A, maxe * 4));
  BENCH_CUDA(cudaMalloc(&B, maxe * 4));
  BENCH_CUDA(cudaMalloc(&C, maxe * 4));
  // Inputs of the type at hand (filled again where it changes), never zero.
  int filled = -1;
  auto fill_as = [&](int type) {
    if (type == filled)
      return;
    fill_typed<<<d.info.sm_count * 8, 256>>>(A, maxe, type, kt_rng_next(&r));
    fill_typed<<<d.info.sm_count * 8, 256>>>(B, maxe, type, kt_rng_next(&r));
    BENCH_CUDA(cudaDeviceSynchronize());
    filled = type;
  };
  // Padding in bytes of lda (K-major A) and ldb (MN-major B) past 128-byte
  // aligned rows; -1: the natural stride (K, N).
  // The last repeats the first, as a control for the order of the runs.
  const int pads[][2] = {{0, 0}, {0, 16}, {0, 32}, {0, 64}, {16, 0}, {32, 0}, {64, 0}, {-1, -1}, {0, 0}};
  const int np = sizeof pads / sizeof pads[0];
  if (nshapes < 0) { // the repack alone: GB/s of its reads and writes
    printf("%-6s %-7s %-14s %8s %8s\n", "type", "source", "rows x K, ld", "ms", "GB/s");
    for (int type : {KT_GEMM_TF32, KT_GEMM_BF16})
      for (int kmajor : {0, 1})
        for (int odd : {0, 1}) {
          const int es = type == KT_GEMM_TF32 ? 4 : 2, rows = 8192, K = 8192;
          fill_as(type);
          const long long ld = (kmajor ? K : rows) + (odd ? 3 : 0);
          const int kp = K;
          auto run = [&]() -> int {
            const gemm_pack_op op = {A, ld, 0, kmajor, rows, 1, B};
            return (int)gemm_pack_launch(&op, NULL, K, kp, type, 0);
          };
          double best = NAN;
          for (int round = 0; round < 3; ++round) {
            const bench_time_result x = bench_time(run, fl, reps);
            if (x.ok && !(x.ms >= best))
              best = x.ms;
          }
          printf("%-6s %-7s %5dx%d,%-6lld %8.4f %8.0f\n", es == 4 ? "tf32" : "bf16", kmajor ? "K-major" : "MN-major",
                 rows, K, ld, best, 2.0 * rows * K * es / (best * 1e6));
        }
    return 0;
  }
  printf("%-40s %-16s %-8s %9s", "variant", "shape", "who", "ms(0,0)");
  for (int p = 1; p < np; ++p)
    printf(" a%+d,b%+d", pads[p][0], pads[p][1]);
  printf("\n");
  for (auto &s : shapes)
    for (int vi = 0; vi < kt_registry_count; ++vi) {
      const kt_variant *v = &kt_registry[vi];
      if (strncmp(v->name, "gemm_wgmma_", 11) != 0 || (only && !strstr(v->name, only)))
        continue;
      const bool tf32 = strstr(v->name, "_tf32_") != nullptr;
      const int es = tf32 ? 4 : 2;
      const int type = tf32 ? KT_GEMM_TF32 : strstr(v->name, "_bf16_") ? KT_GEMM_BF16 : KT_GEMM_F16;
      const cudaDataType dt = tf32 ? CUDA_R_32F : type == KT_GEMM_BF16 ? CUDA_R_16BF : CUDA_R_16F;
      const cublasComputeType_t ct = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      const int al = 128 / es;
      fill_as(type);
      // Per round, every stride in turn; each the lower of the rounds.
      std::vector<double> t[2] = {std::vector<double>(np, NAN), std::vector<double>(np, NAN)};
      for (int round = 0; round < 3; ++round)
        for (int p = 0; p < np; ++p) {
          const long long lda = pads[p][0] < 0 ? s.k : (s.k + al - 1) / al * al + pads[p][0] / es;
          const long long ldb = pads[p][1] < 0 ? s.n : (s.n + al - 1) / al * al + pads[p][1] / es;
          kt_gemm_args a = {type, KT_GEMM_OP_N, KT_GEMM_OP_N, s.m, s.n, s.k, 1, 1.0f, 0.0f, A, B, C,
                            lda, ldb, s.n, 0, 0, 0, d.info.sm_count, kt_device_pool(d.info.ordinal)};
          const float one = 1, zero = 0;
          auto run_kt = [&]() -> int { return v->launch(&a, 0); };
          auto run_cb = [&]() -> int {
            return (int)cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s.n, s.m, s.k, &one, B, dt, (int)ldb, A, dt,
                                     (int)lda, &zero, C, CUDA_R_32F, s.n, ct, CUBLAS_GEMM_DEFAULT);
          };
          bench_time_result x = bench_time(run_kt, fl, reps);
          if (x.ok && !(x.ms >= t[0][p]))
            t[0][p] = x.ms;
          x = bench_time(run_cb, fl, reps);
          if (x.ok && !(x.ms >= t[1][p]))
            t[1][p] = x.ms;
        }
      char sh[32];
      snprintf(sh, sizeof sh, "%dx%dx%d", s.m, s.n, s.k);
      for (int w = 0; w < 2; ++w) {
        printf("%-40s %-16s %-8s %9.4f", v->name + 11, sh, w ? "cublas" : "ktune", t[w][0]);
        for (int p = 1; p < np; ++p)
          printf(" %10.3f", t[w][p] / t[w][0]);
        printf("\n");
      }
      fflush(stdout);
    }
  return 0;
}
