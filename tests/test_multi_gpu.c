/* SPDX-License-Identifier: MIT */
/* tests/test_multi_gpu.c: one context on every visible GPU, and every
 * family run there through the public API.  Per-device setup (shared-memory
 * opt-in, occupancy, scratch pools) must happen on each device, not once per
 * process: a histogram that needs more than 48 KB of shared memory failed to
 * launch on a second GPU when it was opted in on the first only.
 * With one GPU it still runs (on that one); without a GPU it is skipped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_test.h"
#include "hist.h"
#include "matmul.h"

TestSuite(multi_gpu, .init = gpu_or_skip);

/* kt_matmul on this context's device, checked element by element against a
 * double reference within the bound (tuner/matmul.h). */
static void check_matmul(kt_context *ctx, int dev, int M, int N, int K, kt_rng *r)
{
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N);
  cr_assert(A && B && C);
  for (int i = 0; i < M * K; ++i)
    A[i] = kt_rng_float(r);
  for (int i = 0; i < K * N; ++i)
    B[i] = kt_rng_float(r);
  float *dA, *dB, *dC;
  CUDA_OK(cudaSetDevice(dev));
  CUDA_OK(cudaMalloc((void **)&dA, sizeof(float) * M * K));
  CUDA_OK(cudaMalloc((void **)&dB, sizeof(float) * K * N));
  CUDA_OK(cudaMalloc((void **)&dC, sizeof(float) * M * N));
  CUDA_OK(cudaMemcpy(dA, A, sizeof(float) * M * K, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dB, B, sizeof(float) * K * N, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dC, 0xff, sizeof(float) * M * N));
  const int rc = kt_matmul(ctx, M, N, K, 1.0f, dA, K, dB, N, 0.0f, dC, N, NULL);
  cr_assert_eq(rc, KT_OK, "GPU %d: kt_matmul %dx%dx%d: %s", dev, M, N, K, kt_strerror(rc));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(C, dC, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = (double)A[i * K + k] * B[k * N + j];
        ref += p;
        mag += fabs(p);
      }
      const double e = fabs(C[i * N + j] - ref) / kt_tune_matmul_bound(K, 1.0, mag, 0.0);
      cr_assert(e <= 1.0, "GPU %d: C(%d, %d) = %g, expected %g", dev, i, j, C[i * N + j], ref);
    }
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  free(A);
  free(B);
  free(C);
}

/* kt_histogram on this context's device, every count exact. */
static void check_hist(kt_context *ctx, int dev, long long nbins, size_t n, kt_rng *r)
{
  int *s = malloc(sizeof(int) * n);
  unsigned *ref = malloc(sizeof(unsigned) * nbins), *got = malloc(sizeof(unsigned) * nbins);
  cr_assert(s && ref && got);
  kt_tune_hist_samples(s, n, nbins, "uniform", r);
  kt_tune_hist_reference(s, n, nbins, ref);
  int *ds;
  unsigned *db;
  CUDA_OK(cudaSetDevice(dev));
  CUDA_OK(cudaMalloc((void **)&ds, sizeof(int) * n));
  CUDA_OK(cudaMalloc((void **)&db, sizeof(unsigned) * nbins));
  CUDA_OK(cudaMemcpy(ds, s, sizeof(int) * n, cudaMemcpyHostToDevice));
  kt_choice c;
  cr_assert_eq(kt_histogram_choice(ctx, ds, n, db, nbins, &c), KT_OK);
  const int rc = kt_histogram(ctx, ds, n, db, nbins, NULL);
  cr_assert_eq(rc, KT_OK, "GPU %d: kt_histogram with %lld bins (%s): %s", dev, nbins, c.variant, kt_strerror(rc));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(got, db, sizeof(unsigned) * nbins, cudaMemcpyDeviceToHost));
  for (long long b = 0; b < nbins; ++b)
    cr_assert_eq(got[b], ref[b], "GPU %d, %s, %lld bins: bin %lld is %u, expected %u", dev, c.variant, nbins, b, got[b],
                 ref[b]);
  cudaFree(ds);
  cudaFree(db);
  free(s);
  free(ref);
  free(got);
}

Test(multi_gpu, every_family_runs_on_every_visible_gpu, .timeout = 300)
{
  int count = 0;
  CUDA_OK(cudaGetDeviceCount(&count));
  cr_assert_geq(count, 1);
  kt_rng r = {(uint64_t)time(NULL) * 2654435761u};
  /* Open every context first, then use them in turn, last GPU first: no
   * device's setup may lean on another's having happened. */
  kt_context *ctx[16] = {0};
  const int n = count < 16 ? count : 16;
  for (int d = 0; d < n; ++d) {
    kt_options o = kt_default_options();
    o.device = d;
    const int rc = kt_open(&ctx[d], &o);
    cr_assert_eq(rc, KT_OK, "kt_open on GPU %d: %s", d, kt_strerror(rc));
  }
  for (int d = n - 1; d >= 0; --d) {
    check_matmul(ctx[d], d, 67, 131, 129, &r);
    /* 65536 bins and more need over 48 KB of shared memory per block. */
    static const long long bins[] = {256, 65536, 262144, 1048576};
    for (size_t b = 0; b < sizeof bins / sizeof bins[0]; ++b)
      check_hist(ctx[d], d, bins[b], (size_t)1 << 22, &r);
  }
  for (int d = 0; d < n; ++d)
    kt_close(ctx[d]);
  cr_log_info("every family ran on %d GPU(s)", n);
}

/* Each GPU says on how many SMs clusters of 2, 4, 8 and 16 blocks go
 * (kt_device_clusters, for matmul's cost model): whole clusters, on no
 * more SMs than it has, fewer or as many as the clusters grow; asking
 * leaves the caller's current device as it was. */
Test(multi_gpu, every_gpu_says_where_its_clusters_go)
{
  int n = 0;
  CUDA_OK(cudaGetDeviceCount(&n));
  for (int d = 0; d < n; ++d) {
    kt_device_info info;
    char err[256];
    cr_assert_eq(kt_device_query(d, &info, err, sizeof err), KT_OK, "%s", err);
    const int current = (d + 1) % n;
    CUDA_OK(cudaSetDevice(current));
    kt_device_clusters(&info);
    int now = -1;
    CUDA_OK(cudaGetDevice(&now));
    cr_assert_eq(now, current, "GPU %d's question moved the current device from %d to %d", d, current, now);
    if (!info.cluster_launch) {
      for (int i = 0; i < KT_CLUSTER_SIZES; ++i)
        cr_assert_eq(info.cluster_sms[i], 0, "GPU %d has no clusters", d);
      continue;
    }
    for (int i = 0; i < KT_CLUSTER_SIZES; ++i) {
      const int size = 2 << i, sms = info.cluster_sms[i];
      cr_log_info("GPU %d (%s): clusters of %d fill %d of its %d SMs", d, info.name, size, sms, info.sm_count);
      /* 16 is a non-portable size, which a GPU need not place */
      cr_assert(i == KT_CLUSTER_SIZES - 1 || sms > 0, "GPU %d: clusters of %d unknown", d, size);
      cr_assert(sms % size == 0 && sms <= info.sm_count, "GPU %d: clusters of %d on %d SMs", d, size, sms);
      cr_assert(i == 0 || sms <= info.cluster_sms[i - 1] || sms == 0, "GPU %d: clusters of %d on %d SMs, of %d on %d",
                d, size, sms, size / 2, info.cluster_sms[i - 1]);
      cr_assert_eq(kt_cluster_sms(&info, size), sms > 0 ? sms : info.sm_count);
    }
  }
}
