/* tuner/worker.c: measure variants in a process of their own.
 *
 *   ktune __worker matmul M N K SEED NAME...
 *   ktune __worker hist NBINS N DIST SEED NAME...
 *
 * A kernel that faults poisons the CUDA context of its whole process, so
 * the tuner measures in a worker and reads its results line by line:
 *   START name
 *   RESULT name status time_ms rate max_err reps reason...
 * After any CUDA error the worker stops (exit 3); the tuner records the
 * variant in flight and goes on in a fresh worker.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "hist.h"
#include "matmul.h"
#include "tuner.h"

static void result(const char *name, const char *status, double ms, double rate, double err, int reps,
                   const char *reason)
{
  char clean[256];
  snprintf(clean, sizeof clean, "%s", reason && *reason ? reason : "-");
  for (char *p = clean; *p; ++p)
    if (*p == '\n')
      *p = ' ';
  printf("RESULT %s %s %.6g %.6g %.6g %d %s\n", name, status, ms, rate, err, reps, clean);
  fflush(stdout);
}

static uint64_t name_seed(uint64_t seed, const char *name)
{
  uint64_t h = 1469598103934665603ull ^ seed;
  for (; *name; ++name)
    h = (h ^ (unsigned char)*name) * 1099511628211ull;
  return h;
}

/* A sticky CUDA error ends the worker; anything else is per variant. */
static int fatal_after(const kt_check *c)
{
  return c->launch_failed;
}

static int work_matmul(const kt_device_info *dev, int M, int N, int K, uint64_t seed, char **names, int nnames)
{
  kt_rng r = {seed};
  const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  float *hA = malloc(na * 4), *hB = malloc(nb * 4);
  float *dA, *dB, *dC;
  void *flush;
  const size_t flush_bytes = kt_measure_flush_bytes(dev);
  if (!hA || !hB || cudaMalloc((void **)&dA, na * 4) || cudaMalloc((void **)&dB, nb * 4) ||
      cudaMalloc((void **)&dC, nc * 4) || cudaMalloc(&flush, flush_bytes)) {
    fprintf(stderr, "worker: cannot allocate the %dx%dx%d problem\n", M, N, K);
    return 2;
  }
  for (size_t i = 0; i < na; ++i)
    hA[i] = kt_rng_float(&r);
  for (size_t i = 0; i < nb; ++i)
    hB[i] = kt_rng_float(&r);
  cudaMemcpy(dA, hA, na * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, hB, nb * 4, cudaMemcpyHostToDevice);

  double best = INFINITY;
  for (int i = 0; i < nnames; ++i) {
    const kt_variant *v = kt_registry_find(names[i]);
    printf("START %s\n", names[i]);
    fflush(stdout);
    if (!v || v->family != KT_FAMILY_MATMUL) {
      result(names[i], "skipped", 0, 0, 0, 0, "not a matmul variant of this build");
      continue;
    }
    if (!kt_variant_runs_on(v, dev)) {
      result(v->name, "skipped", 0, 0, 0, 0, "cannot run on this device");
      continue;
    }
    /* Correctness first, on fresh shapes that are not tile multiples, with
     * padded leading dimensions (multiples of the variant's alignment). */
    kt_rng vr = {name_seed(seed, v->name)};
    kt_check c = {1, 0, 0, ""};
    double worst = 0;
    for (int t = 0; t < 2 && c.ok; ++t) {
      const int m = 65 + (int)(kt_rng_next(&vr) % 190), n = 65 + (int)(kt_rng_next(&vr) % 190),
                k = 33 + (int)(kt_rng_next(&vr) % 300);
      const int a = v->align;
      const long long lda = (k + a) / a * a + a, ldb = (n + a) / a * a, ldc = (n + 2 * a) / a * a;
      kt_tune_matmul_check(v, dev, m, n, k, lda, ldb, ldc, t ? 1.0f : 1.25f, t ? 0.0f : -0.75f, kt_rng_next(&vr), &c);
      if (c.worst > worst)
        worst = c.worst;
    }
    if (!c.ok) {
      result(v->name, c.launch_failed ? "launch_failed" : "wrong", 0, 0, c.worst, 0, c.reason);
      if (fatal_after(&c))
        return 3;
      continue;
    }
    /* Then the tuned size: time it, and check a sample of its outputs. */
    cudaMemset(dC, 0xff, nc * 4); /* NaN: an unwritten output shows */
    const int aligned = (K % v->align == 0) && (N % v->align == 0);
    if (!aligned) {
      result(v->name, "skipped", 0, 0, 0, 0, "leading dimensions of this problem are not aligned for it");
      continue;
    }
    kt_matmul_args args = {M, N, K, 1.0f, 0.0f, dA, dB, dC, K, N, N, dev->sm_count, kt_device_pool(dev->ordinal)};
    double ms = 0;
    int reps = 0;
    int e = kt_measure_candidate(v, &args, flush, flush_bytes, best, &ms, &reps);
    if (e) {
      result(v->name, "launch_failed", 0, 0, 0, 0, cudaGetErrorString((cudaError_t)e));
      return 3;
    }
    char why[256] = "";
    for (int s = 0; s < 48 && !why[0]; ++s) {
      const int i0 = (int)(kt_rng_next(&vr) % (uint64_t)M), j0 = (int)(kt_rng_next(&vr) % (uint64_t)N);
      float got;
      cudaMemcpy(&got, dC + (size_t)i0 * N + j0, 4, cudaMemcpyDeviceToHost);
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = (double)hA[(size_t)i0 * K + k] * hB[(size_t)k * N + j0];
        ref += p;
        mag += fabs(p);
      }
      const double err = fabs(got - ref) / ((K + 2) * 0x1p-24 * mag + 1e-30);
      if (!(err <= 1.0))
        snprintf(why, sizeof why, "at %dx%dx%d: C(%d, %d) = %g, expected %g", M, N, K, i0, j0, got, ref);
      else if (err > worst)
        worst = err;
    }
    if (why[0]) {
      result(v->name, "wrong", 0, 0, INFINITY, 0, why);
      continue;
    }
    if (ms < best)
      best = ms;
    result(v->name, "ok", ms, 2.0 * M * N * (double)K / (ms * 1e6), worst, reps, "");
  }
  return 0;
}

static int work_hist(const kt_device_info *dev, long long nbins, size_t n, const char *dist, uint64_t seed,
                     char **names, int nnames)
{
  kt_rng r = {seed};
  int *hs = malloc(sizeof(int) * (n ? n : 1));
  unsigned *ref = malloc(sizeof(unsigned) * (size_t)nbins), *got = malloc(sizeof(unsigned) * (size_t)nbins);
  int *ds;
  unsigned *dbins;
  void *flush;
  const size_t flush_bytes = kt_measure_flush_bytes(dev);
  if (!hs || !ref || !got || cudaMalloc((void **)&ds, sizeof(int) * (n ? n : 1)) ||
      cudaMalloc((void **)&dbins, sizeof(unsigned) * (size_t)nbins) || cudaMalloc(&flush, flush_bytes)) {
    fprintf(stderr, "worker: cannot allocate the histogram problem\n");
    return 2;
  }
  kt_tune_hist_samples(hs, n, nbins, dist, &r);
  kt_tune_hist_reference(hs, n, nbins, ref);
  cudaMemcpy(ds, hs, sizeof(int) * n, cudaMemcpyHostToDevice);
  free(hs);

  double best = INFINITY;
  for (int i = 0; i < nnames; ++i) {
    const kt_variant *v = kt_registry_find(names[i]);
    printf("START %s\n", names[i]);
    fflush(stdout);
    if (!v || v->family != KT_FAMILY_HIST) {
      result(names[i], "skipped", 0, 0, 0, 0, "not a histogram variant of this build");
      continue;
    }
    if (!kt_variant_serves_hist(v, dev, nbins)) {
      char why[200];
      snprintf(why, sizeof why,
               "cannot serve %lld bins here: needs %lld B of shared memory per block, the device allows %d", nbins,
               kt_variant_smem(v, nbins), dev->smem_optin);
      result(v->name, "skipped", 0, 0, 0, 0, why);
      continue;
    }
    /* Correctness first: fresh samples (some out of range), a misaligned
     * and an aligned start, and a tiny n that is all head and tail. */
    kt_rng vr = {name_seed(seed, v->name)};
    kt_check c = {1, 0, 0, ""};
    const size_t sizes[3] = {100003 + kt_rng_next(&vr) % 1000, 65536 + kt_rng_next(&vr) % 64, 7};
    const int offsets[3] = {1, 0, 3};
    for (int t = 0; t < 3 && c.ok; ++t)
      kt_tune_hist_check(v, dev, nbins, sizes[t], offsets[t], dist, kt_rng_next(&vr), &c);
    if (!c.ok) {
      result(v->name, c.launch_failed ? "launch_failed" : "wrong", 0, 0, c.worst, 0, c.reason);
      if (fatal_after(&c))
        return 3;
      continue;
    }
    kt_hist_args args = {ds, n, dbins, (int)nbins, dev->sm_count, dev->smem_per_sm, dev->smem_optin};
    double ms = 0;
    int reps = 0;
    int e = kt_measure_candidate(v, &args, flush, flush_bytes, best, &ms, &reps);
    if (!e)
      e = cudaMemcpy(got, dbins, sizeof(unsigned) * (size_t)nbins, cudaMemcpyDeviceToHost);
    if (e) {
      result(v->name, "launch_failed", 0, 0, 0, 0, cudaGetErrorString((cudaError_t)e));
      return 3;
    }
    long long wrong = 0;
    for (long long b = 0; b < nbins; ++b)
      wrong += got[b] != ref[b];
    if (wrong) {
      char why[128];
      snprintf(why, sizeof why, "%lld bins wrong on the tuning input", wrong);
      result(v->name, "wrong", 0, 0, (double)wrong, 0, why);
      continue;
    }
    if (ms < best)
      best = ms;
    result(v->name, "ok", ms, 4.0 * (double)n / (ms * 1e6), 0, reps, "");
  }
  return 0;
}

int kt_worker_main(int argc, char **argv)
{
  kt_device_info dev;
  char err[256];
  if (kt_device_query(-1, &dev, err, sizeof err) != KT_OK) {
    fprintf(stderr, "worker: %s\n", err);
    return 2;
  }
  if (argc >= 6 && strcmp(argv[1], "matmul") == 0)
    return work_matmul(&dev, atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), strtoull(argv[5], NULL, 10), argv + 6,
                       argc - 6);
  if (argc >= 6 && strcmp(argv[1], "hist") == 0)
    return work_hist(&dev, atoll(argv[2]), strtoull(argv[3], NULL, 10), argv[4], strtoull(argv[5], NULL, 10), argv + 6,
                     argc - 6);
  fprintf(stderr, "usage: ktune __worker matmul M N K SEED NAME... | hist NBINS N DIST SEED NAME...\n");
  return 2;
}
