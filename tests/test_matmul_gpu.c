/* SPDX-License-Identifier: MIT */
/* tests/test_matmul_gpu.c: every matmul variant, and kt_matmul through
 * dispatch, against a double-precision reference (tuner/matmul.h states the
 * bound) on fresh random shapes that are not tile multiples. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_test.h"
#include "matmul.h"

TestSuite(matmul_gpu, .init = gpu_or_skip);

static uint64_t fresh_seed(void)
{
  return (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)clock();
}

Test(matmul_gpu, every_variant_is_correct_on_odd_shapes_with_padded_leading_dimensions)
{
  kt_rng r = {fresh_seed()};
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_MATMUL || !kt_variant_runs_on(v, &gpu))
      continue;
    const int a = v->align;
    const int m = 1 + (int)(kt_rng_next(&r) % 300), n = 1 + (int)(kt_rng_next(&r) % 300),
              k = 1 + (int)(kt_rng_next(&r) % 400);
    /* lda is never a multiple of 4: every variant serves any lda. */
    const long long lda = (k + 3) / 4 * 4 + 1, ldb = (n + a - 1) / a * a + a, ldc = (n + a - 1) / a * a + 2 * a;
    kt_check c;
    kt_tune_matmul_check(v, &gpu, m, n, k, lda, ldb, ldc, 0.5f, 2.0f, kt_rng_next(&r), &c);
    cr_expect(c.ok, "%s: %s", v->name, c.reason);
    kt_tune_matmul_check(v, &gpu, m, n, k, lda, ldb, ldc, -1.5f, 0.0f, kt_rng_next(&r), &c);
    cr_expect(c.ok, "%s (beta 0, C holds NaN): %s", v->name, c.reason);
    if (a > 1) { /* odd ldb and ldc, pointers off 16 bytes: B staged, C stored unaligned */
      kt_tune_matmul_check(v, &gpu, m, n, k, lda, n + 1 + (n % 4 == 3), n + 2 + (n % 4 == 2), 0.5f, 2.0f,
                           kt_rng_next(&r), &c);
      cr_expect(c.ok, "%s (B staged): %s", v->name, c.reason);
    }
    ++checked;
  }
  cr_assert_gt(checked, 0);
}

Test(matmul_gpu, every_variant_handles_degenerate_shapes)
{
  static const int shapes[][3] = {{1, 1, 1}, {1, 257, 3}, {129, 1, 65}, {3, 5, 1025}, {64, 64, 1}};
  kt_rng r = {fresh_seed()};
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_MATMUL || !kt_variant_runs_on(v, &gpu))
      continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
      const int a = v->align, m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
      const long long lda = (k + a - 1) / a * a, ldb = (n + a - 1) / a * a, ldc = (n + a - 1) / a * a;
      kt_check c;
      kt_tune_matmul_check(v, &gpu, m, n, k, lda, ldb, ldc, 1.0f, 0.0f, kt_rng_next(&r), &c);
      cr_expect(c.ok, "%s at %dx%dx%d: %s", v->name, m, n, k, c.reason);
    }
  }
}

/* The corners the few-row, few-column and short-K kernels are built for,
 * with odd leading dimensions (float4 variants get theirs rounded up at
 * every other shape, and stage B at the rest): long K split over warps
 * and cluster blocks, sizes of 1, K past one chunk. */
Test(matmul_gpu, every_variant_is_correct_on_skinny_and_short_k_shapes)
{
  static const int shapes[][3] = {{1, 300, 2100}, {17, 129, 777}, {300, 1, 1500}, {250, 13, 333},
                                  {777, 300, 7},  {1, 1, 3000},   {33, 2, 64},    {500, 260, 129}};
  kt_rng r = {fresh_seed()};
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_MATMUL || !kt_variant_runs_on(v, &gpu))
      continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
      const int a = s % 2 ? 1 : v->align, m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
      const long long lda = k + 1, ldb = (n + 1 + a - 1) / a * a + (a == 1 && n % 4 == 3),
                      ldc = (n + 2 + a - 1) / a * a;
      kt_check c;
      kt_tune_matmul_check(v, &gpu, m, n, k, lda, ldb, ldc, 0.75f, s % 2 ? 0.0f : -1.25f, kt_rng_next(&r), &c);
      cr_expect(c.ok, "%s at %dx%dx%d: %s", v->name, m, n, k, c.reason);
    }
  }
}

/* The few-column kernel reads B's rows as float4s where every row is
 * 16-byte aligned (ldb a multiple of 4, B on the boundary): whole groups
 * of 4 columns, the columns past the last whole group a float at a time,
 * N past TN in further column groups, and K long enough to be split over
 * the warps along K and a cluster's blocks. */
Test(matmul_gpu, the_few_column_kernel_reads_aligned_rows_of_b_correctly)
{
  static const int shapes[][3] = {{37, 4, 3001}, {300, 5, 2900}, {129, 8, 1500}, {65, 13, 4099},
                                  {9, 20, 5000}, {1, 7, 777},    {260, 16, 33},  {3, 6, 9000}};
  kt_rng r = {fresh_seed()};
  int checked = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != KT_FAMILY_MATMUL || strcmp(v->algo, "gemv") != 0 || !kt_variant_runs_on(v, &gpu))
      continue;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
      const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
      const long long lda = k + 1, ldb = (n + 3) / 4 * 4 + 4 * (s % 2), ldc = n + 1;
      kt_check c;
      kt_tune_matmul_check_at(v, &gpu, m, n, k, lda, ldb, ldc, 1.5f, s % 2 ? 0.0f : 0.5f, 0, kt_rng_next(&r), &c);
      cr_expect(c.ok, "%s at %dx%dx%d, ldb %lld: %s", v->name, m, n, k, ldb, c.reason);
    }
    ++checked;
  }
  cr_assert_gt(checked, 0, "no few-column variant runs on this GPU");
}

/* A B of more than KT_MATMUL_MAX_STAGE bytes is staged a panel of K at a
 * time, each panel after the first adding to C: rows of 2^20 + 1 floats
 * make panels of 63 rows, so K = 150 takes three, the last short. */
static int reads_float4(const kt_variant *v)
{
  return v->align == 4;
}

Test(matmul_gpu, a_float4_variant_stages_a_long_b_a_panel_at_a_time)
{
  const kt_variant *v = gpu_default_variant(KT_FAMILY_MATMUL, reads_float4);
  cr_assert_not_null(v, "no float4 default variant runs on this GPU");
  const int m = 3, n = (1 << 20) + 1, k = 150;
  cr_assert_gt((k + kt_matmul_stage_rows(k, n) - 1) / kt_matmul_stage_rows(k, n), 2, "K must take three panels");
  kt_rng r = {fresh_seed()};
  kt_check c;
  kt_tune_matmul_check(v, &gpu, m, n, k, k + 1, n + 2, n + 1, 1.25f, -0.75f, kt_rng_next(&r), &c);
  cr_expect(c.ok, "%s (beta -0.75): %s", v->name, c.reason);
  kt_tune_matmul_check(v, &gpu, m, n, k, k + 1, n + 2, n + 1, 1.0f, 0.0f, kt_rng_next(&r), &c);
  cr_expect(c.ok, "%s (beta 0, C holds NaN): %s", v->name, c.reason);
}

/* Stand-ins for a broken variant: a real one launched on one row fewer
 * (the last row of C left as it was), one step of K fewer, or on C one
 * row further on (its last row written past the end of C). */
static const kt_variant *faulty_of;
static int faulty_fault;
static int faulty_launch(const void *args, cudaStream_t s)
{
  kt_matmul_args a = *(const kt_matmul_args *)args;
  if (faulty_fault == 0)
    a.M -= 1;
  else if (faulty_fault == 1)
    a.K -= 1;
  else
    a.C += a.ldc;
  return faulty_of->launch(&a, s);
}

/* The tuner's worker keeps the checks' buffers from variant to variant
 * (kt_tune_matmul_check_with): a check must see only what its own launch
 * wrote, so a variant that leaves the last row of C unwritten, right after
 * a correct variant filled those very buffers with the right answer (same
 * shape, same seed), still fails; so do one a step of K short, in buffers
 * that grew and then shrank around it, and one that writes past the end
 * of C, where an earlier, larger check left its numbers. */
Test(matmul_gpu, checks_in_kept_buffers_see_only_their_own_launch)
{
  const kt_variant *v = gpu_default_variant(KT_FAMILY_MATMUL, NULL);
  cr_assert_not_null(v, "no default matmul variant runs on this GPU");
  kt_variant faulty = *v;
  faulty.launch = faulty_launch;
  faulty_of = v;
  kt_rng r = {fresh_seed()};
  kt_tune_matmul_buffers b = {0};
  for (int t = 0; t < 6; ++t) {
    const int m = 2 + (int)(kt_rng_next(&r) % 200), n = 1 + (int)(kt_rng_next(&r) % 200),
              k = 2 + (int)(kt_rng_next(&r) % 300), shift = t % 2;
    const long long lda = k + 1, ldb = (n + 3) / 4 * 4 + 4, ldc = (n + 3) / 4 * 4 + 8;
    const float beta = t < 3 ? 0.5f : 0.0f;
    const uint64_t seed = kt_rng_next(&r);
    kt_check c;
    kt_tune_matmul_check_with(&b, v, &gpu, m, n, k, lda, ldb, ldc, 1.0f, beta, shift, seed, &c);
    cr_expect(c.ok, "%s at %dx%dx%d: %s", v->name, m, n, k, c.reason);
    static const char *const faults[] = {"one row short", "one step of K short", "a row further on"};
    faulty_fault = t % 3;
    kt_tune_matmul_check_with(&b, &faulty, &gpu, m, n, k, lda, ldb, ldc, 1.0f, beta, shift, seed, &c);
    cr_expect(!c.ok && !c.launch_failed, "%s %s at %dx%dx%d passed", v->name, faults[t % 3], m, n, k);
    if (t % 3 == 2)
      cr_expect(strstr(c.reason, "past the end of C") != NULL, "%s %s: %s", v->name, faults[2], c.reason);
  }
  kt_tune_matmul_buffers_free(&b);
}

/* Run kt_matmul on device copies at an offset of `shift` floats (A only
 * when a_only) and compare with a double reference; returns the worst error
 * over the bound. */
static double dispatched(kt_context *ctx, int m, int n, int k, int shift, int a_only, float alpha, float beta,
                         char *variant)
{
  kt_rng r = {fresh_seed()};
  /* Aligned calls (shift 0) get leading dimensions that float4 variants
   * accept; shifted ones get odd leading dimensions as well. */
  const int sb = a_only ? 0 : shift;
  const long long lda = shift ? k + 1 : (k + 3) / 4 * 4 + 4, ldb = sb ? n + 3 : (n + 3) / 4 * 4,
                  ldc = sb ? n + 2 : (n + 3) / 4 * 4 + 8;
  const size_t na = m * lda + shift, nb = k * ldb + shift, nc = m * ldc + shift;
  float *A = malloc(na * 4), *B = malloc(nb * 4), *C0 = malloc(nc * 4), *C = malloc(nc * 4);
  for (size_t i = 0; i < na; ++i)
    A[i] = kt_rng_float(&r);
  for (size_t i = 0; i < nb; ++i)
    B[i] = kt_rng_float(&r);
  for (size_t i = 0; i < nc; ++i)
    C0[i] = kt_rng_float(&r);
  float *dA, *dB, *dC;
  CUDA_OK(cudaMalloc((void **)&dA, na * 4));
  CUDA_OK(cudaMalloc((void **)&dB, nb * 4));
  CUDA_OK(cudaMalloc((void **)&dC, nc * 4));
  CUDA_OK(cudaMemcpy(dA, A, na * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dB, B, nb * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dC, C0, nc * 4, cudaMemcpyHostToDevice));
  kt_choice ch;
  cr_assert_eq(kt_matmul_choice(ctx, m, n, k, dA + shift, lda, dB + sb, ldb, dC + sb, ldc, &ch), KT_OK);
  snprintf(variant, 96, "%s", ch.variant);
  cr_assert_eq(kt_matmul(ctx, m, n, k, alpha, dA + shift, lda, dB + sb, ldb, beta, dC + sb, ldc, NULL), KT_OK);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(C, dC, nc * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double ref = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        double x = (double)A[shift + i * lda + p] * B[sb + p * ldb + j];
        ref += x;
        mag += fabs(x);
      }
      const double c0 = C0[sb + i * ldc + j];
      ref = alpha * ref + beta * c0;
      double e = fabs(C[sb + i * ldc + j] - ref) / kt_tune_matmul_bound(k, alpha, mag, beta * c0);
      worst = isnan(e) || e > worst ? (isnan(e) ? INFINITY : e) : worst;
    }
  cudaFree(dA), cudaFree(dB), cudaFree(dC);
  free(A), free(B), free(C0), free(C);
  return worst;
}

Test(matmul_gpu, kt_matmul_is_correct_through_dispatch_aligned_and_misaligned)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  char v1[96], v2[96];
  double e1 = dispatched(ctx, 333, 271, 517, 0, 0, 1.0f, 0.5f, v1);
  cr_expect(e1 <= 1.0, "aligned call via %s: error %.3g x the bound", v1, e1);
  const kt_variant *va = kt_registry_find(v1, NULL);
  cr_assert_not_null(va);
  cr_expect_eq(va->align, 4, "an aligned call went to %s (align %d), not a float4 variant", v1, va->align);
  /* One float off: 16-byte vector variants cannot serve it. */
  double e2 = dispatched(ctx, 333, 271, 517, 1, 0, 2.0f, -1.0f, v2);
  cr_expect(e2 <= 1.0, "misaligned call via %s: error %.3g x the bound", v2, e2);
  const kt_variant *v = kt_registry_find(v2, NULL);
  cr_assert_not_null(v);
  cr_expect_eq(v->align, 1, "a misaligned call went to %s (align %d)", v2, v->align);
  /* A one float off with an odd lda, B and C aligned: A is read 4 bytes at
   * a time, so the float4 variants serve it. */
  double e3 = dispatched(ctx, 333, 271, 517, 1, 1, 1.0f, 0.0f, v2);
  cr_expect(e3 <= 1.0, "call with A misaligned via %s: error %.3g x the bound", v2, e3);
  v = kt_registry_find(v2, NULL);
  cr_assert_not_null(v);
  cr_expect_eq(v->align, 4, "a call with only A misaligned went to %s (align %d)", v2, v->align);
  kt_close(ctx);
}

Test(matmul_gpu, host_pointers_are_refused_and_nothing_is_written)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  float *host = calloc(64 * 64, sizeof(float));
  float *dev;
  CUDA_OK(cudaMalloc((void **)&dev, 64 * 64 * 4));
  cr_expect_eq(kt_matmul(ctx, 64, 64, 64, 1, host, 64, dev, 64, 0, dev, 64, NULL), KT_ERR_NOT_DEVICE_POINTER);
  cr_expect_eq(kt_matmul(ctx, 64, 64, 64, 1, dev, 64, dev, 64, 0, host, 64, NULL), KT_ERR_NOT_DEVICE_POINTER);
  for (int i = 0; i < 64 * 64; ++i)
    cr_assert_eq(host[i], 0.0f);
  cudaFree(dev);
  free(host);
  kt_close(ctx);
}

/* K = 0 or alpha = 0: C = beta C, as BLAS, A and B not read (NaN there
 * stays out of C); beta 0 writes zeros over NaN; C's padding untouched.
 * Through kt_matmul and kt_matmul_ex (a batch, every type). */
Test(matmul_gpu, k_zero_or_alpha_zero_scales_c_and_reads_neither_operand)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  enum { M = 37, N = 29, LDC = 33, BATCH = 3, CN = BATCH * M * LDC, AN = 64 * 64 };
  float *A, *C, *host = malloc(CN * sizeof(float)), *back = malloc(CN * sizeof(float));
  CUDA_OK(cudaMalloc((void **)&A, AN * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&C, CN * sizeof(float)));
  CUDA_OK(cudaMemset(A, 0xff, AN * sizeof(float))); /* NaN: must not reach C */
  kt_rng r = {fresh_seed()};
  static const struct {
    int64_t k;
    float alpha, beta;
  } calls[] = {{0, 1.0f, 0.5f}, {0, 2.0f, 0.0f}, {17, 0.0f, -2.0f}, {17, 0.0f, 0.0f}, {0, 1.0f, 1.0f}};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i)
    for (int way = 0; way < 5; ++way) { /* kt_matmul, then kt_matmul_ex of each type */
      for (int e = 0; e < CN; ++e)
        host[e] = calls[i].beta == 0.0f && e % 7 == 0 ? NAN : (float)(kt_rng_next(&r) % 2001) / 1000.0f - 1.0f;
      CUDA_OK(cudaMemcpy(C, host, CN * sizeof(float), cudaMemcpyHostToDevice));
      const int64_t k = calls[i].k, batch = way == 0 ? 1 : BATCH;
      int rc;
      if (way == 0)
        rc = kt_matmul(ctx, M, N, k, calls[i].alpha, A, 64, A, 64, calls[i].beta, C, LDC, NULL);
      else {
        kt_matmul_desc d = {0};
        d.type = (kt_dtype)(way - 1), d.op_a = KT_OP_T, d.op_b = KT_OP_N, d.M = M, d.N = N, d.K = k;
        d.batch = batch, d.alpha = calls[i].alpha, d.beta = calls[i].beta;
        d.A = A, d.lda = 64, d.B = A, d.ldb = 64, d.C = C, d.ldc = LDC, d.stride_c = M * LDC;
        rc = kt_matmul_ex(ctx, &d, NULL);
      }
      cr_assert_eq(rc, KT_OK, "K %lld alpha %g, way %d: %s", (long long)k, calls[i].alpha, way, kt_strerror(rc));
      CUDA_OK(cudaMemcpy(back, C, CN * sizeof(float), cudaMemcpyDeviceToHost));
      int bad = 0;
      for (int e = 0; e < CN && !bad; ++e) {
        const int b = e / (M * LDC), row = e % (M * LDC) / LDC, col = e % LDC;
        const int inside = b < batch && row < M && col < N;
        const float want = !inside ? host[e] : calls[i].beta == 0.0f ? 0.0f : calls[i].beta * host[e];
        bad = memcmp(&want, &back[e], sizeof want) != 0;
        cr_expect(!bad, "K %lld alpha %g beta %g, way %d: C[%d] = %g, want %g", (long long)k, calls[i].alpha,
                  calls[i].beta, way, e, back[e], want);
      }
    }
  cudaFree(A);
  cudaFree(C);
  free(host);
  free(back);
  kt_close(ctx);
}

/* The scaling kernel covers 256 / tx rows a block, tx threads along each
 * (the power of two at or above N, at most 256), its grid stopping at
 * 65535 row groups and 65535 batch entries and looping past them.  C is
 * scaled whole and nothing past it is touched: a column of more rows than
 * 65535 groups of 256 hold (kt_matmul), a batch of more entries than the
 * grid (kt_matmul_ex), rows longer than a block's 256 threads and rows of
 * a few columns that are not a power of two (kt_matmul, C padded). */
Test(matmul_gpu, k_zero_scales_c_past_the_scaling_grid)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  static const struct {
    int64_t rows, cols, ldc, batch;
  } calls[] = {{65535LL * 256 + 37, 1, 1, 1}, {1, 1, 1, 70001}, {37, 300, 301, 1}, {1001, 5, 7, 1}};
  enum { CN = 65535 * 256 + 64 };
  float *C, *host = malloc(CN * sizeof(float)), *back = malloc(CN * sizeof(float));
  cr_assert(host && back);
  CUDA_OK(cudaMalloc((void **)&C, CN * sizeof(float)));
  kt_rng r = {fresh_seed()};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i) {
    const int64_t rows = calls[i].rows, cols = calls[i].cols, ldc = calls[i].ldc, batch = calls[i].batch;
    cr_assert_leq(batch * rows * ldc, CN);
    for (int e = 0; e < CN; ++e)
      host[e] = (float)(kt_rng_next(&r) % 2001) / 1000.0f - 1.0f;
    CUDA_OK(cudaMemcpy(C, host, CN * sizeof(float), cudaMemcpyHostToDevice));
    int rc;
    if (batch == 1)
      rc = kt_matmul(ctx, rows, cols, 0, 1.0f, C, 1, C, cols, -0.5f, C, ldc, NULL);
    else { /* entries of rows x cols, one after another */
      kt_matmul_desc d = {0};
      d.type = KT_F32, d.op_a = KT_OP_N, d.op_b = KT_OP_N, d.M = rows, d.N = cols, d.K = 0, d.batch = batch;
      d.alpha = 1.0f, d.beta = -0.5f, d.A = C, d.lda = 1, d.B = C, d.ldb = cols, d.C = C, d.ldc = ldc;
      d.stride_c = rows * ldc;
      rc = kt_matmul_ex(ctx, &d, NULL);
    }
    cr_assert_eq(rc, KT_OK, "%lld x %lld, batch %lld: %s", (long long)rows, (long long)cols, (long long)batch,
                 kt_strerror(rc));
    CUDA_OK(cudaMemcpy(back, C, CN * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int64_t e = 0; e < CN && !bad; ++e) {
      const int64_t entry = e / (rows * ldc), col = e % ldc;
      const float want = entry < batch && col < cols ? -0.5f * host[e] : host[e];
      bad = memcmp(&want, &back[e], sizeof want) != 0;
      cr_expect(!bad, "%lld x %lld, batch %lld: C[%lld] = %g, want %g", (long long)rows, (long long)cols,
                (long long)batch, (long long)e, back[e], want);
    }
  }
  cudaFree(C);
  free(host);
  free(back);
  kt_close(ctx);
}

typedef struct job {
  kt_context *ctx;
  double worst;
  char variant[96];
  int m;
} job;

static void *thread_body(void *p)
{
  job *j = p;
  j->worst = dispatched(j->ctx, j->m, 97, 131, 0, 0, 1.0f, 0.0f, j->variant);
  return NULL;
}

Test(matmul_gpu, one_context_serves_several_threads)
{
  kt_context *ctx;
  cr_assert_eq(kt_open(&ctx, NULL), KT_OK);
  pthread_t t[4];
  job jobs[4];
  for (int i = 0; i < 4; ++i) {
    jobs[i] = (job){ctx, 0, "", 50 + 37 * i};
    pthread_create(&t[i], NULL, thread_body, &jobs[i]);
  }
  for (int i = 0; i < 4; ++i) {
    pthread_join(t[i], NULL);
    cr_expect(jobs[i].worst <= 1.0, "thread %d (%s): error %.3g x the bound", i, jobs[i].variant, jobs[i].worst);
  }
  kt_close(ctx);
}

/* ---- on-line tuning (runtime/online.c) ---------------------------------- */

/* A product on the device whose every kt_matmul result is checked against a
 * double reference computed once (beta 0, C filled with NaN before each
 * call, so that every element must be written). */
typedef struct online_case {
  int m, n, k;
  float *dA, *dB, *dC, *C;
  double *ref, *mag;
} online_case;

static void online_setup(online_case *c, int m, int n, int k, kt_rng *r)
{
  *c = (online_case){
      m, n, k, NULL, NULL, NULL, malloc((size_t)m * n * 4), malloc((size_t)m * n * 8), malloc((size_t)m * n * 8)};
  float *A = malloc((size_t)m * k * 4), *B = malloc((size_t)k * n * 4);
  for (long long i = 0; i < (long long)m * k; ++i)
    A[i] = kt_rng_float(r);
  for (long long i = 0; i < (long long)k * n; ++i)
    B[i] = kt_rng_float(r);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0, a = 0;
      for (int p = 0; p < k; ++p) {
        const double x = (double)A[(size_t)i * k + p] * B[(size_t)p * n + j];
        s += x, a += fabs(x);
      }
      c->ref[(size_t)i * n + j] = s, c->mag[(size_t)i * n + j] = a;
    }
  CUDA_OK(cudaMalloc((void **)&c->dA, (size_t)m * k * 4));
  CUDA_OK(cudaMalloc((void **)&c->dB, (size_t)k * n * 4));
  CUDA_OK(cudaMalloc((void **)&c->dC, (size_t)m * n * 4));
  CUDA_OK(cudaMemcpy(c->dA, A, (size_t)m * k * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(c->dB, B, (size_t)k * n * 4, cudaMemcpyHostToDevice));
  free(A), free(B);
}

/* kt_matmul on stream s; the worst error over the bound, INFINITY where a
 * call failed (no assertion: threads call it). */
static double online_call(kt_context *ctx, online_case *c, cudaStream_t s)
{
  if (cudaMemsetAsync(c->dC, 0xff, (size_t)c->m * c->n * 4, s) != cudaSuccess ||
      kt_matmul(ctx, c->m, c->n, c->k, 1.0f, c->dA, c->k, c->dB, c->n, 0.0f, c->dC, c->n, s) != KT_OK ||
      cudaMemcpyAsync(c->C, c->dC, (size_t)c->m * c->n * 4, cudaMemcpyDeviceToHost, s) != cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < (size_t)c->m * c->n; ++i) {
    const double e = fabs(c->C[i] - c->ref[i]) / kt_tune_matmul_bound(c->k, 1.0, c->mag[i], 0.0);
    worst = isnan(e) ? INFINITY : e > worst ? e : worst;
  }
  return worst;
}

static void online_free(online_case *c)
{
  cudaFree(c->dA), cudaFree(c->dB), cudaFree(c->dC);
  free(c->C), free(c->ref), free(c->mag);
}

static kt_context *open_shipped(void)
{
  kt_options o = kt_default_options();
  o.system_db_path = "build/system.db";
  kt_context *ctx = NULL;
  cr_assert_eq(kt_open(&ctx, &o), KT_OK);
  if (kt_tuned_count(ctx) == 0) {
    char name[256];
    snprintf(name, sizeof name, "%s", kt_device_name(ctx));
    kt_close(ctx);
    cr_skip_test("no shipped results for %s in build/system.db: on-line tuning needs tuned problems", name);
  }
  return ctx;
}

static int starts(const char *s, const char *prefix)
{
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Fresh shapes that no tuned problem matches: every call's result is
 * correct while candidates race, the race ends within its samples, and the
 * choice then says which candidate won. */
Test(matmul_gpu, online_tuning_races_untuned_shapes_with_every_result_correct)
{
  kt_context *ctx = open_shipped();
  cr_assert_eq(kt_online(ctx, 4), KT_OK);
  kt_rng r = {fresh_seed()};
  int raced = 0;
  for (int s = 0; s < 4; ++s) {
    online_case c;
    online_setup(&c, 37 + (int)(kt_rng_next(&r) % 300), 41 + (int)(kt_rng_next(&r) % 300),
                 29 + (int)(kt_rng_next(&r) % 700), &r);
    kt_choice ch;
    int calls = 0;
    do {
      const double e = online_call(ctx, &c, NULL);
      cr_expect(e <= 1.0, "%dx%dx%d, call %d: error %.3g x the bound", c.m, c.n, c.k, calls, e);
      cr_assert_eq(kt_matmul_choice(ctx, c.m, c.n, c.k, c.dA, c.k, c.dB, c.n, c.dC, c.n, &ch), KT_OK);
      cr_assert(starts(ch.reason, "on-line: "), "%dx%dx%d: %s", c.m, c.n, c.k, ch.reason);
    } while (starts(ch.reason, "on-line: racing") && ++calls < 4 * KT_RACE_MAX * KT_RACE_SAMPLES);
    cr_expect_not(starts(ch.reason, "on-line: racing"), "%dx%dx%d: still racing after %d calls: %s", c.m, c.n, c.k,
                  calls, ch.reason);
    cr_expect_not(starts(ch.reason, "on-line: no candidate could be timed"), "%dx%dx%d: %s", c.m, c.n, c.k, ch.reason);
    raced += starts(ch.reason, "on-line: the fastest of");
    /* The winner serves from now on, correctly. */
    cr_expect(online_call(ctx, &c, NULL) <= 1.0, "%dx%dx%d via the winner %s", c.m, c.n, c.k, ch.variant);
    online_free(&c);
  }
  cr_expect_gt(raced, 0, "no shape of four had two candidates to race");
  kt_close(ctx);
}

/* A call being captured into a graph (the strictest mode) is not timed and
 * starts no race; the graph computes the product. */
Test(matmul_gpu, online_tuning_times_no_call_being_captured)
{
  kt_context *ctx = open_shipped();
  cr_assert_eq(kt_online(ctx, 4), KT_OK);
  kt_rng r = {fresh_seed()};
  online_case c;
  online_setup(&c, 150 + (int)(kt_rng_next(&r) % 100), 150 + (int)(kt_rng_next(&r) % 100), 100, &r);
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaMemsetAsync(c.dC, 0xff, (size_t)c.m * c.n * 4, s));
  CUDA_OK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  cudaGraphExec_t x;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const int rc = kt_matmul(ctx, c.m, c.n, c.k, 1.0f, c.dA, c.k, c.dB, c.n, 0.0f, c.dC, c.n, s);
  CUDA_OK(cudaStreamEndCapture(s, &g));
  cr_assert_eq(rc, KT_OK, "%s", kt_strerror(rc));
  CUDA_OK(cudaGraphInstantiate(&x, g, 0));
  CUDA_OK(cudaGraphLaunch(x, s));
  CUDA_OK(cudaMemcpyAsync(c.C, c.dC, (size_t)c.m * c.n * 4, cudaMemcpyDeviceToHost, s));
  CUDA_OK(cudaStreamSynchronize(s));
  double worst = 0;
  for (size_t i = 0; i < (size_t)c.m * c.n; ++i) {
    const double e = fabs(c.C[i] - c.ref[i]) / kt_tune_matmul_bound(c.k, 1.0, c.mag[i], 0.0);
    worst = isnan(e) ? INFINITY : e > worst ? e : worst;
  }
  cr_expect(worst <= 1.0, "the captured call: error %.3g x the bound", worst);
  kt_choice ch;
  cr_assert_eq(kt_matmul_choice(ctx, c.m, c.n, c.k, c.dA, c.k, c.dB, c.n, c.dC, c.n, &ch), KT_OK);
  cr_expect_not(starts(ch.reason, "on-line"), "a race began in the capture: %s", ch.reason);
  /* The capture left no decision behind: the next call races. */
  cr_expect(online_call(ctx, &c, s) <= 1.0, "the call after the capture");
  cr_assert_eq(kt_matmul_choice(ctx, c.m, c.n, c.k, c.dA, c.k, c.dB, c.n, c.dC, c.n, &ch), KT_OK);
  cr_expect(starts(ch.reason, "on-line: "), "no race after the capture: %s", ch.reason);
  cudaGraphExecDestroy(x), cudaGraphDestroy(g), cudaStreamDestroy(s);
  online_free(&c);
  kt_close(ctx);
}

typedef struct online_job {
  kt_context *ctx;
  online_case *c;
  double worst;
} online_job;

static void *online_thread(void *p)
{
  online_job *j = p;
  cudaStream_t s;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    j->worst = INFINITY;
    return NULL;
  }
  for (int i = 0; i < 2 * KT_RACE_DEFAULT * KT_RACE_SAMPLES; ++i) {
    const double e = online_call(j->ctx, &j->c[0], s);
    j->worst = e > j->worst ? e : j->worst;
  }
  cudaStreamDestroy(s);
  return NULL;
}

/* Four threads race one shape at once, each on its own stream and C. */
Test(matmul_gpu, online_tuning_serves_several_threads_racing_one_shape)
{
  kt_context *ctx = open_shipped();
  cr_assert_eq(kt_online(ctx, 4), KT_OK);
  kt_rng r = {fresh_seed()};
  online_case c[4];
  online_setup(&c[0], 200 + (int)(kt_rng_next(&r) % 100), 90 + (int)(kt_rng_next(&r) % 100), 300, &r);
  for (int i = 1; i < 4; ++i) { /* the same A, B and reference; a C of its own */
    c[i] = c[0];
    c[i].C = malloc((size_t)c[0].m * c[0].n * 4);
    CUDA_OK(cudaMalloc((void **)&c[i].dC, (size_t)c[0].m * c[0].n * 4));
  }
  pthread_t t[4];
  online_job jobs[4];
  for (int i = 0; i < 4; ++i) {
    jobs[i] = (online_job){ctx, &c[i], 0};
    pthread_create(&t[i], NULL, online_thread, &jobs[i]);
  }
  for (int i = 0; i < 4; ++i) {
    pthread_join(t[i], NULL);
    cr_expect(jobs[i].worst <= 1.0, "thread %d: error %.3g x the bound", i, jobs[i].worst);
  }
  kt_choice ch;
  cr_assert_eq(kt_matmul_choice(ctx, c[0].m, c[0].n, c[0].k, c[0].dA, c[0].k, c[0].dB, c[0].n, c[0].dC, c[0].n, &ch),
               KT_OK);
  cr_expect(starts(ch.reason, "on-line: ") && !starts(ch.reason, "on-line: racing"), "%s", ch.reason);
  for (int i = 1; i < 4; ++i)
    cudaFree(c[i].dC), free(c[i].C);
  online_free(&c[0]);
  kt_close(ctx);
}
