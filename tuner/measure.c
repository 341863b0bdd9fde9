/* tuner/measure.c: inputs, correctness checks and timing (see measure.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "measure.h"

void kt_measure_hist_samples(int *out, size_t n, long long nbins, const char *dist, kt_rng *r)
{
  const int skewed = dist && strcmp(dist, "skewed") == 0;
  const long long hot = nbins / 100 > 0 ? nbins / 100 : 1;
  const long long spread = nbins / hot; /* hot bins are spread over the range */
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = kt_rng_next(r);
    const unsigned sel = (unsigned)(x & 1023);
    const uint64_t y = x >> 10;
    long long s;
    if (sel == 0)
      s = -1 - (long long)(y % 1000); /* below the range: counts in bin 0 */
    else if (sel == 1)
      s = nbins + (long long)(y % 1000); /* above: counts in bin nbins - 1 */
    else if (skewed && (y % 10) < 8)
      s = (long long)((y / 10) % hot) * spread;
    else
      s = (long long)((y / 10) % (uint64_t)nbins);
    out[i] = (int)s;
  }
}

void kt_measure_hist_reference(const int *samples, size_t n, long long nbins, unsigned *bins)
{
  memset(bins, 0, sizeof(unsigned) * (size_t)nbins);
  for (size_t i = 0; i < n; ++i) {
    const int s = samples[i];
    bins[s < 0 ? 0 : s >= nbins ? nbins - 1 : s]++;
  }
}

static void set_reason(kt_check *c, const char *fmt, const char *what)
{
  snprintf(c->reason, sizeof c->reason, fmt, what);
}

static int cuda_failed(kt_check *out, cudaError_t e, const char *where)
{
  if (e == cudaSuccess)
    return 0;
  out->ok = 0;
  out->launch_failed = 1;
  snprintf(out->reason, sizeof out->reason, "%s: %s", where, cudaGetErrorString(e));
  cudaGetLastError();
  return 1;
}

void kt_measure_check_matmul(const kt_variant *v, const kt_device_info *dev, int M, int N, int K, long long lda,
                             long long ldb, long long ldc, float alpha, float beta, uint64_t seed, kt_check *out)
{
  memset(out, 0, sizeof *out);
  kt_rng r = {seed};
  const size_t na = (size_t)M * lda, nb = (size_t)K * ldb, nc = (size_t)M * ldc;
  float *A = malloc(na * 4), *B = malloc(nb * 4), *C0 = malloc(nc * 4), *C = malloc(nc * 4);
  float *dA = NULL, *dB = NULL, *dC = NULL;
  if (!A || !B || !C0 || !C) {
    set_reason(out, "%s", "out of host memory");
    goto done;
  }
  /* Padding beyond each row holds NaN: reading it would poison the result. */
  for (size_t i = 0; i < na; ++i)
    A[i] = (long long)(i % lda) < K ? kt_rng_float(&r) : NAN;
  for (size_t i = 0; i < nb; ++i)
    B[i] = (long long)(i % ldb) < N ? kt_rng_float(&r) : NAN;
  /* C: random where beta reads it; NaN where beta == 0 (it must not be read,
   * and any element left unwritten stays NaN); a sentinel in the padding. */
  for (size_t i = 0; i < nc; ++i)
    C0[i] = (long long)(i % ldc) < N ? (beta != 0.0f ? kt_rng_float(&r) : NAN) : 1234.5f;
  if (cuda_failed(out, cudaMalloc((void **)&dA, na * 4), "cudaMalloc") ||
      cuda_failed(out, cudaMalloc((void **)&dB, nb * 4), "cudaMalloc") ||
      cuda_failed(out, cudaMalloc((void **)&dC, nc * 4), "cudaMalloc") ||
      cuda_failed(out, cudaMemcpy(dA, A, na * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      cuda_failed(out, cudaMemcpy(dB, B, nb * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      cuda_failed(out, cudaMemcpy(dC, C0, nc * 4, cudaMemcpyHostToDevice), "cudaMemcpy"))
    goto done;
  kt_matmul_args a = {M, N, K, alpha, beta, dA, dB, dC, lda, ldb, ldc, dev->sm_count, kt_device_pool(dev->ordinal)};
  if (cuda_failed(out, (cudaError_t)v->launch(&a, 0), "launch") ||
      cuda_failed(out, cudaDeviceSynchronize(), "kernel") ||
      cuda_failed(out, cudaMemcpy(C, dC, nc * 4, cudaMemcpyDeviceToHost), "cudaMemcpy"))
    goto done;
  out->ok = 1;
  const double u = 0x1p-24;
  for (int i = 0; i < M && out->ok; ++i) {
    for (int j = 0; j < (int)ldc; ++j) {
      const float got = C[(size_t)i * ldc + j];
      if (j >= N) {
        if (got != 1234.5f) {
          out->ok = 0;
          snprintf(out->reason, sizeof out->reason, "wrote C's padding at (%d, %d)", i, j);
          break;
        }
        continue;
      }
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = (double)A[(size_t)i * lda + k] * B[(size_t)k * ldb + j];
        ref += p;
        mag += fabs(p);
      }
      const double c0 = beta != 0.0f ? C0[(size_t)i * ldc + j] : 0.0;
      ref = alpha * ref + beta * c0;
      const double bound = (K + 2) * u * (fabs(alpha) * mag + fabs(beta * c0)) + 1e-30;
      const double e = fabs((double)got - ref) / bound;
      if (!(e <= 1.0)) { /* also catches NaN */
        out->ok = 0;
        out->worst = isnan(e) ? INFINITY : e;
        snprintf(out->reason, sizeof out->reason,
                 "C(%d, %d) = %g, expected %g (error %.3g x the bound) at %dx%dx%d lda %lld ldb %lld ldc %lld "
                 "beta %g",
                 i, j, got, ref, e, M, N, K, lda, ldb, ldc, beta);
        break;
      }
      if (e > out->worst)
        out->worst = e;
    }
  }
done:
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  free(A);
  free(B);
  free(C0);
  free(C);
}

void kt_measure_check_hist(const kt_variant *v, const kt_device_info *dev, long long nbins, size_t n, int offset,
                           const char *dist, uint64_t seed, kt_check *out)
{
  memset(out, 0, sizeof *out);
  kt_rng r = {seed};
  int *s = malloc(sizeof(int) * (n + 1));
  unsigned *ref = malloc(sizeof(unsigned) * (size_t)nbins), *got = malloc(sizeof(unsigned) * (size_t)nbins);
  int *ds = NULL;
  unsigned *dbins = NULL;
  if (!s || !ref || !got) {
    set_reason(out, "%s", "out of host memory");
    goto done;
  }
  kt_measure_hist_samples(s, n, nbins, dist, &r);
  kt_measure_hist_reference(s, n, nbins, ref);
  if (cuda_failed(out, cudaMalloc((void **)&ds, sizeof(int) * (n + 4)), "cudaMalloc") ||
      cuda_failed(out, cudaMalloc((void **)&dbins, sizeof(unsigned) * (size_t)nbins), "cudaMalloc") ||
      cuda_failed(out, cudaMemcpy(ds + offset, s, sizeof(int) * n, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      cuda_failed(out, cudaMemset(dbins, 0xab, sizeof(unsigned) * (size_t)nbins), "cudaMemset"))
    goto done;
  kt_hist_args a = {ds + offset, n, dbins, (int)nbins, dev->sm_count, dev->smem_per_sm, dev->smem_optin};
  if (cuda_failed(out, (cudaError_t)v->launch(&a, 0), "launch") ||
      cuda_failed(out, cudaDeviceSynchronize(), "kernel") ||
      cuda_failed(out, cudaMemcpy(got, dbins, sizeof(unsigned) * (size_t)nbins, cudaMemcpyDeviceToHost), "cudaMemcpy"))
    goto done;
  long long wrong = 0, first = -1;
  for (long long b = 0; b < nbins; ++b)
    if (got[b] != ref[b]) {
      if (first < 0)
        first = b;
      wrong++;
    }
  out->worst = (double)wrong;
  out->ok = wrong == 0;
  if (!out->ok)
    snprintf(out->reason, sizeof out->reason, "%lld of %lld bins wrong (bin %lld: %u, expected %u) n=%zu offset %d %s",
             wrong, nbins, first, got[first], ref[first], n, offset, dist);
done:
  cudaFree(ds);
  cudaFree(dbins);
  free(s);
  free(ref);
  free(got);
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double kt_measure_median(double *x, int n)
{
  if (n <= 0)
    return NAN;
  qsort(x, (size_t)n, sizeof *x, cmp_double);
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int kt_measure_time_fn(kt_measure_fn fn, void *ctx, void *flush, size_t flush_bytes, int min_reps, int max_reps,
                       double budget_ms, double *median_ms, int *reps)
{
  cudaEvent_t start, stop;
  cudaError_t e;
  double *t = malloc(sizeof(double) * (size_t)(max_reps > 0 ? max_reps : 1));
  if (!t)
    return (int)cudaErrorMemoryAllocation;
  if ((e = cudaEventCreate(&start)) != cudaSuccess || (e = cudaEventCreate(&stop)) != cudaSuccess) {
    free(t);
    return (int)e;
  }
  /* Warm-up: module load and first-touch costs stay out of the numbers. */
  if ((e = (cudaError_t)fn(ctx)) != cudaSuccess || (e = cudaDeviceSynchronize()) != cudaSuccess)
    goto out;
  double total = 0;
  int n = 0;
  while (n < max_reps && (n < min_reps || total < budget_ms)) {
    if (flush && flush_bytes)
      cudaMemsetAsync(flush, n & 0xff, flush_bytes, 0);
    cudaEventRecord(start, 0);
    if ((e = (cudaError_t)fn(ctx)) != cudaSuccess)
      goto out;
    cudaEventRecord(stop, 0);
    if ((e = cudaEventSynchronize(stop)) != cudaSuccess)
      goto out;
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    t[n++] = ms;
    total += ms;
  }
  *reps = n;
  *median_ms = kt_measure_median(t, n);
  e = cudaGetLastError();
out:
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  free(t);
  return (int)e;
}

typedef struct variant_call {
  const kt_variant *v;
  const void *args;
} variant_call;

static int call_variant(void *p)
{
  const variant_call *c = p;
  return c->v->launch(c->args, 0);
}

int kt_measure_time(const kt_variant *v, const void *args, void *flush, size_t flush_bytes, int min_reps, int max_reps,
                    double budget_ms, double *median_ms, int *reps)
{
  variant_call c = {v, args};
  return kt_measure_time_fn(call_variant, &c, flush, flush_bytes, min_reps, max_reps, budget_ms, median_ms, reps);
}

int kt_measure_candidate(const kt_variant *v, const void *args, void *flush, size_t flush_bytes, double best_ms,
                         double *median_ms, int *reps)
{
  double est = 0;
  int e = kt_measure_time(v, args, flush, flush_bytes, 1, 1, 0, &est, reps);
  if (e)
    return e;
  const double budget = best_ms < INFINITY && est > 3 * best_ms ? 0 : 60;
  return kt_measure_time(v, args, flush, flush_bytes, 5, 50, budget, median_ms, reps);
}

size_t kt_measure_flush_bytes(const kt_device_info *dev)
{
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev->ordinal);
  return (size_t)(l2 > 0 ? l2 : 64 << 20) * 2;
}
