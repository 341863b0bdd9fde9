/* SPDX-License-Identifier: MIT */
/* tests/test_hist_gpu.c: every histogram variant, and kt_histogram through
 * dispatch, count exactly what the CPU counts: out-of-range samples, any n,
 * misaligned sample pointers, all samples in one bin, sorted input (runs of
 * one bin), half the samples out of range, bin counts above 1M. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_test.h"
#include "hist.h"

TestSuite(hist_gpu, .init = gpu_or_skip);

static uint64_t fresh_seed(void)
{
  return (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)clock();
}

/* May v count nbins bins on this GPU?  The runtime's own rule (fits). */
static int fits(const kt_variant *v, long long nbins)
{
  kt_problem p;
  memset(&p, 0, sizeof p);
  p.family = v->family;
  p.nbins = nbins;
  return kt_family_get(v->family)->fits(v, &gpu, &p);
}

/* v's counts of the n device samples ds into db (filled with garbage
 * first: the output is overwritten, not added to), copied to got: the
 * bins that differ from ref. */
static long long wrong_bins(const kt_variant *v, const int *ds, size_t n, unsigned *db, long long nbins,
                            const unsigned *ref, unsigned *got)
{
  kt_hist_args a = {ds, n, db, (int)nbins, gpu.sm_count, gpu.smem_per_sm, gpu.smem_optin, NULL};
  CUDA_OK(cudaMemset(db, 0xab, sizeof(unsigned) * nbins));
  cr_assert_eq(v->launch(&a, 0), cudaSuccess, "%s", v->name);
  CUDA_OK(cudaMemcpy(got, db, sizeof(unsigned) * nbins, cudaMemcpyDeviceToHost));
  long long wrong = 0;
  for (long long b = 0; b < nbins; ++b)
    wrong += got[b] != ref[b];
  return wrong;
}

Test(hist_gpu, every_variant_counts_exactly_wherever_it_fits)
{
  static const long long nbins[] = {1, 7, 256, 4099, 65536, 262144, 1048576};
  static const char *dists[] = {"uniform", "skewed"};
  kt_rng r = {fresh_seed()};
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_HIST)
      continue;
    for (size_t b = 0; b < sizeof nbins / sizeof nbins[0]; ++b) {
      if (!fits(v, nbins[b]))
        continue;
      const size_t n = 200000 + kt_rng_next(&r) % 5000;
      kt_check c;
      kt_tune_hist_check(v, &gpu, nbins[b], n, (int)(kt_rng_next(&r) % 4), dists[b % 2], kt_rng_next(&r), &c);
      cr_expect(c.ok, "%s, %lld bins: %s", v->name, nbins[b], c.reason);
      ++checked;
    }
  }
  cr_assert_gt(checked, 0);
}

static int fits_1001(const kt_variant *v)
{
  return fits(v, 1001);
}

/* A stand-in for a broken variant: a real one told of one bin more than
 * the caller has, so that the samples at or above nbins land one past the
 * caller's bins. */
static const kt_variant *wide_of;
static int wide_launch(const void *args, cudaStream_t s)
{
  kt_hist_args a = *(const kt_hist_args *)args;
  a.nbins += 1;
  return wide_of->launch(&a, s);
}

/* The check fills bins past nbins too and reads them back: a variant that
 * writes there fails, named for it, where the bins themselves could have
 * come out right (here they do not either: the top bin is short). */
Test(hist_gpu, a_variant_that_writes_past_the_bins_fails_its_check)
{
  const kt_variant *v = gpu_default_variant(KT_FAMILY_HIST, fits_1001);
  cr_assert_not_null(v, "no default histogram variant runs on this GPU");
  kt_variant wide = *v;
  wide.launch = wide_launch;
  wide_of = v;
  kt_rng r = {fresh_seed()};
  kt_check c;
  kt_tune_hist_check(v, &gpu, 1000, 100000, 0, "uniform", kt_rng_next(&r), &c);
  cr_expect(c.ok, "%s: %s", v->name, c.reason);
  kt_tune_hist_check(&wide, &gpu, 1000, 100000, 0, "uniform", kt_rng_next(&r), &c);
  cr_expect(!c.ok && !c.launch_failed, "%s on one bin more passed", v->name);
  cr_expect(strstr(c.reason, "past the 1000 bins") != NULL, "%s on one bin more: %s", v->name, c.reason);
}

Test(hist_gpu, every_variant_handles_tiny_inputs)
{
  kt_rng r = {fresh_seed()};
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    /* 300 bins, or past one block's shared memory for the partition kernel,
     * which serves no fewer */
    const long long nbins = fits(v, 300) ? 300 : fits(v, 300007) ? 300007 : 0;
    if (v->family != KT_FAMILY_HIST || !nbins)
      continue;
    for (size_t n = 1; n <= 9; ++n)
      for (int off = 0; off < 4; ++off) {
        kt_check c;
        kt_tune_hist_check(v, &gpu, nbins, n, off, "uniform", kt_rng_next(&r), &c);
        cr_expect(c.ok, "%s, n=%zu offset %d: %s", v->name, n, off, c.reason);
      }
  }
}

/* Every sample in one bin, enough of them that each block's 16-bit counter
 * carries into the output many times: bin 0 and bin 1 are the low and high
 * halves of one shared-memory word. */
Test(hist_gpu, every_variant_counts_a_single_hot_bin_past_16_bits)
{
  const size_t n = (size_t)1 << 26;
  int *s = malloc(sizeof(int) * n);
  unsigned got[4];
  int *ds;
  unsigned *db;
  CUDA_OK(cudaMalloc((void **)&ds, sizeof(int) * n));
  CUDA_OK(cudaMalloc((void **)&db, sizeof got));
  for (int hot = 0; hot < 2; ++hot) {
    for (size_t i = 0; i < n; ++i)
      s[i] = hot;
    CUDA_OK(cudaMemcpy(ds, s, sizeof(int) * n, cudaMemcpyHostToDevice));
    for (int i = 0; i < kt_registry_count; ++i) {
      const kt_variant *v = &kt_registry[i];
      if (v->family != KT_FAMILY_HIST || !fits(v, 4))
        continue;
      kt_hist_args a = {ds, n, db, 4, gpu.sm_count, gpu.smem_per_sm, gpu.smem_optin, NULL};
      CUDA_OK(cudaMemset(db, 0xab, sizeof got));
      cr_assert_eq(v->launch(&a, 0), cudaSuccess, "%s", v->name);
      CUDA_OK(cudaMemcpy(got, db, sizeof got, cudaMemcpyDeviceToHost));
      for (int b = 0; b < 4; ++b)
        cr_expect_eq(got[b], b == hot ? (unsigned)n : 0u, "%s: bin %d = %u with every sample in bin %d", v->name, b,
                     got[b], hot);
    }
  }
  cudaFree(ds), cudaFree(db);
  free(s);
}

/* Runs of one bin are what the merge parameter and the copies per lane are
 * for: sorted, single-bin, narrow-normal and half-out-of-range inputs, long
 * enough that whole warps see one bin, at bin counts from 3 to past 2M. */
Test(hist_gpu, every_variant_is_exact_on_runs_and_out_of_range_samples)
{
  static const long long nbins[] = {3, 1000, 65536, 300007, (1 << 21) + 1};
  static const char *dists[] = {"sorted", "onebin", "normal", "halfout"};
  kt_rng r = {fresh_seed()};
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_HIST)
      continue;
    for (size_t b = 0; b < sizeof nbins / sizeof nbins[0]; ++b) {
      if (!fits(v, nbins[b]))
        continue;
      for (size_t d = 0; d < sizeof dists / sizeof dists[0]; ++d) {
        const size_t n = (d == 0 ? 1 << 22 : 300000) + kt_rng_next(&r) % 5000;
        kt_check c;
        kt_tune_hist_check(v, &gpu, nbins[b], n, (int)(kt_rng_next(&r) % 4), dists[d], kt_rng_next(&r), &c);
        cr_expect(c.ok, "%s, %lld bins, %s: %s", v->name, nbins[b], dists[d], c.reason);
        ++checked;
      }
    }
  }
  cr_assert_gt(checked, 0);
}

/* Past the L2 the global kernel's l2fit variants count in passes planned from
 * a probe of the input (templates/hist_global.cu.tpl): uniform samples need
 * every pass, a narrow normal and a single bin one, and the passes left
 * empty must still leave every count exact.  n above nbins, so the probe
 * runs; the samples are copied once per distribution for every variant. */
Test(hist_gpu, every_variant_is_exact_past_the_l2_however_the_probe_plans_the_passes)
{
  const long long nbins = (1 << 24) + 3;
  const size_t n = ((size_t)1 << 25) + 5;
  static const char *dists[] = {"uniform", "normal", "onebin"};
  kt_rng r = {fresh_seed()};
  int *s = malloc(sizeof(int) * n), *ds;
  unsigned *ref = malloc(sizeof(unsigned) * nbins), *got = malloc(sizeof(unsigned) * nbins), *db;
  CUDA_OK(cudaMalloc((void **)&ds, sizeof(int) * n));
  CUDA_OK(cudaMalloc((void **)&db, sizeof(unsigned) * nbins));
  int checked = 0;
  for (size_t d = 0; d < sizeof dists / sizeof dists[0]; ++d) {
    kt_tune_hist_samples(s, n, nbins, dists[d], &r);
    kt_tune_hist_reference(s, n, nbins, ref);
    CUDA_OK(cudaMemcpy(ds, s, sizeof(int) * n, cudaMemcpyHostToDevice));
    for (int i = 0; i < kt_registry_count; ++i) {
      const kt_variant *v = &kt_registry[i];
      if (v->family != KT_FAMILY_HIST || !fits(v, nbins))
        continue;
      const long long wrong = wrong_bins(v, ds, n, db, nbins, ref, got);
      cr_expect_eq(wrong, 0, "%s, %lld bins, %s: %lld bins wrong", v->name, nbins, dists[d], wrong);
      ++checked;
    }
  }
  cr_assert_gt(checked, 0);
  cudaFree(ds), cudaFree(db);
  free(s), free(ref), free(got);
}

/* More bins than KT_HIST_MAX_BANDS passes of half the L2 hold: the l2fit
 * variants take that many passes, each wider than half the L2, and must
 * still cover every bin; few samples (the probe skipped, every pass used)
 * for a grid sized by the bins it clears.  Only the global kernel serves
 * this many bins. */
Test(hist_gpu, every_variant_is_exact_on_few_samples_past_sixteen_passes_of_the_l2)
{
  int l2 = 0;
  CUDA_OK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, gpu.ordinal));
  const long long fit = l2 / 2 / 4, nbins = (KT_HIST_MAX_BANDS + 1) * fit + 5;
  kt_rng r = {fresh_seed()};
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_HIST || !fits(v, nbins))
      continue;
    for (int t = 0; t < 2; ++t) {
      const size_t n = t ? 1000 + kt_rng_next(&r) % 100 : ((size_t)1 << 20) + 3;
      kt_check c;
      kt_tune_hist_check(v, &gpu, nbins, n, (int)(kt_rng_next(&r) % 4), "uniform", kt_rng_next(&r), &c);
      cr_expect(c.ok, "%s, %lld bins, n=%zu: %s", v->name, nbins, n, c.reason);
      ++checked;
    }
  }
  cr_assert_gt(checked, 0);
}

/* The partition kernel (templates/hist_part.cu.tpl) ranks a whole warp's
 * samples of one bucket with one shared atomic, lets blocks share a bucket
 * when it holds more than their share of the samples, and keeps the end
 * bins out of the partition: every sample in one bucket (one bin, sorted
 * runs), or half of them out of range, past 1M bins, at an n that is no
 * multiple of any tile, from a misaligned start, must count exactly. */
Test(hist_gpu, the_partition_is_exact_when_one_bucket_takes_every_sample)
{
  static const long long nbins[] = {(1 << 20) + 7, (1 << 22) + 1};
  static const char *dists[] = {"onebin", "sorted", "halfout"};
  kt_rng r = {fresh_seed()};
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_HIST || strcmp(v->algo, "part") != 0)
      continue;
    for (size_t b = 0; b < sizeof nbins / sizeof nbins[0]; ++b)
      for (size_t d = 0; d < sizeof dists / sizeof dists[0]; ++d) {
        if (!fits(v, nbins[b]))
          continue;
        const size_t n = ((size_t)1 << 23) + 1 + kt_rng_next(&r) % 1000;
        kt_check c;
        kt_tune_hist_check(v, &gpu, nbins[b], n, 1 + (int)(kt_rng_next(&r) % 3), dists[d], kt_rng_next(&r), &c);
        cr_expect(c.ok, "%s, %lld bins, %s: %s", v->name, nbins[b], dists[d], c.reason);
        ++checked;
      }
  }
  cr_log_info("%d partition checks", checked);
}

/* The partition's count adds runs of equal bins straight to the output and
 * leaves the rest of a warp's samples to the scatter, warp by warp of each
 * tile (templates/hist_part.cu.tpl): input whose runs (1 to 600 samples of
 * one bin, some out of range) alternate with scattered samples at about a
 * warp's share of a tile takes both paths in most tiles, and side by side
 * in many; every sample must count once, from a misaligned start. */
Test(hist_gpu, the_partition_is_exact_where_runs_and_scattered_samples_alternate)
{
  static const long long nbins[] = {(1 << 20) + 5, (1 << 23) + 9};
  kt_rng r = {fresh_seed()};
  const size_t n = ((size_t)1 << 23) + kt_rng_next(&r) % 4096;
  int *s = malloc(sizeof(int) * (n + 4)), *ds;
  unsigned *ref = malloc(sizeof(unsigned) * (1 << 24)), *got = malloc(sizeof(unsigned) * (1 << 24)), *db;
  cr_assert(s && ref && got);
  CUDA_OK(cudaMalloc((void **)&ds, sizeof(int) * (n + 4)));
  CUDA_OK(cudaMalloc((void **)&db, sizeof(unsigned) * (1 << 24)));
  int checked = 0;
  for (size_t b = 0; b < sizeof nbins / sizeof nbins[0]; ++b) {
    const long long nb = nbins[b];
    for (size_t i = 0; i < n;) {
      const size_t len = 1 + kt_rng_next(&r) % 600;
      const int run = kt_rng_next(&r) % 2, bin = (int)(kt_rng_next(&r) % (uint64_t)(nb + 20)) - 10;
      for (size_t j = 0; j < len && i < n; ++j, ++i)
        s[i] = run ? bin : (int)(kt_rng_next(&r) % (uint64_t)(nb + 20)) - 10;
    }
    kt_tune_hist_reference(s, n, nb, ref);
    const int off = 1 + (int)(kt_rng_next(&r) % 3);
    CUDA_OK(cudaMemcpy(ds + off, s, sizeof(int) * n, cudaMemcpyHostToDevice));
    for (int i = 0; i < kt_registry_count; ++i) {
      const kt_variant *v = &kt_registry[i];
      if (v->family != KT_FAMILY_HIST || strcmp(v->algo, "part") != 0 || !fits(v, nb))
        continue;
      const long long wrong = wrong_bins(v, ds + off, n, db, nb, ref, got);
      cr_expect_eq(wrong, 0, "%s, %lld bins, offset %d: %lld bins wrong", v->name, nb, off, wrong);
      ++checked;
    }
  }
  cr_assert_gt(checked, 0);
  cudaFree(ds), cudaFree(db);
  free(s), free(ref), free(got);
}

/* kt_histogram of host samples s[0..n) copied to an offset of `off` ints. */
static void dispatched(kt_context *ctx, const int *s, size_t n, int off, long long nbins, char *variant)
{
  int *ds;
  unsigned *db, *got = malloc(sizeof(unsigned) * nbins), *ref = malloc(sizeof(unsigned) * nbins);
  CUDA_OK(cudaMalloc((void **)&ds, sizeof(int) * (n + 4)));
  CUDA_OK(cudaMalloc((void **)&db, sizeof(unsigned) * nbins));
  CUDA_OK(cudaMemcpy(ds + off, s, sizeof(int) * n, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(db, 0x5a, sizeof(unsigned) * nbins)); /* overwritten, not accumulated */
  kt_choice ch;
  cr_assert_eq(kt_histogram_choice(ctx, ds + off, n, db, nbins, &ch), KT_OK);
  snprintf(variant, 96, "%s", ch.variant);
  cr_assert_eq(kt_histogram(ctx, ds + off, n, db, nbins, NULL), KT_OK);
  CUDA_OK(cudaMemcpy(got, db, sizeof(unsigned) * nbins, cudaMemcpyDeviceToHost));
  kt_tune_hist_reference(s, n, nbins, ref);
  long long wrong = 0;
  for (long long b = 0; b < nbins; ++b)
    wrong += got[b] != ref[b];
  cr_expect_eq(wrong, 0, "%lld bins wrong via %s (nbins %lld, n %zu, offset %d)", wrong, variant, nbins, n, off);
  cudaFree(ds), cudaFree(db);
  free(got), free(ref);
}

Test(hist_gpu, kt_histogram_is_exact_through_dispatch_at_every_bin_count)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  static const long long nbins[] = {1, 256, 4096, 65536, 262144, 1048576, 3000000};
  kt_rng r = {fresh_seed()};
  const size_t n = 3000017;
  int *s = malloc(sizeof(int) * n);
  for (size_t b = 0; b < sizeof nbins / sizeof nbins[0]; ++b) {
    char v[96];
    kt_tune_hist_samples(s, n, nbins[b], b % 2 ? "skewed" : "uniform", &r);
    dispatched(ctx, s, n, (int)(b % 4), nbins[b], v);
  }
  free(s);
  kt_close(ctx);
}

Test(hist_gpu, kt_histogram_is_exact_above_1m_bins_on_every_distribution)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  static const long long nbins[] = {(1 << 20) + 7, 1 << 22, (1 << 24) + 3};
  kt_rng r = {fresh_seed()};
  const size_t n = (size_t)1 << 24;
  int *s = malloc(sizeof(int) * n);
  for (size_t b = 0; b < sizeof nbins / sizeof nbins[0]; ++b)
    for (int d = 0; kt_tune_hist_dists[d]; ++d) {
      char v[96];
      kt_tune_hist_samples(s, n, nbins[b], kt_tune_hist_dists[d], &r);
      dispatched(ctx, s, n, (int)((b + d) % 4), nbins[b], v);
    }
  free(s);
  kt_close(ctx);
}

Test(hist_gpu, all_samples_in_one_bin_and_all_out_of_range)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  const size_t n = 1 << 20;
  int *s = malloc(sizeof(int) * n);
  char v[96];
  for (size_t i = 0; i < n; ++i)
    s[i] = 17;
  dispatched(ctx, s, n, 1, 4096, v);
  for (size_t i = 0; i < n; ++i)
    s[i] = i % 2 ? -5 : 1 << 30;
  dispatched(ctx, s, n, 0, 65536, v);
  free(s);
  kt_close(ctx);
}

Test(hist_gpu, zero_samples_zero_the_bins)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  unsigned *db, got[512];
  CUDA_OK(cudaMalloc((void **)&db, sizeof got));
  CUDA_OK(cudaMemset(db, 0xff, sizeof got));
  cr_assert_eq(kt_histogram(ctx, NULL, 0, db, 512, NULL), KT_OK);
  CUDA_OK(cudaMemcpy(got, db, sizeof got, cudaMemcpyDeviceToHost));
  for (int b = 0; b < 512; ++b)
    cr_assert_eq(got[b], 0u, "bin %d = %u", b, got[b]);
  cudaFree(db);
  kt_close(ctx);
}

Test(hist_gpu, host_pointers_are_refused)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  int *hs = calloc(1000, sizeof(int));
  unsigned *hb = calloc(16, sizeof(unsigned)), *db;
  CUDA_OK(cudaMalloc((void **)&db, 16 * sizeof(unsigned)));
  cr_expect_eq(kt_histogram(ctx, hs, 1000, db, 16, NULL), KT_ERR_NOT_DEVICE_POINTER);
  int *ds;
  CUDA_OK(cudaMalloc((void **)&ds, 1000 * sizeof(int)));
  cr_expect_eq(kt_histogram(ctx, ds, 1000, hb, 16, NULL), KT_ERR_NOT_DEVICE_POINTER);
  cudaFree(db), cudaFree(ds);
  free(hs), free(hb);
  kt_close(ctx);
}
