/* SPDX-License-Identifier: MIT */
/* tests/test_api.c: the public API's argument checks (runtime/context.c,
 * runtime/status.c) on a described device: no GPU needed, nothing launched.
 *
 *   make build/tests/test_api && build/tests/test_api --jobs=1
 */
#include <cuda_runtime_api.h>

#include "kt_test.h"

#include <criterion/redirect.h>

static kt_context *ctx;

/* A context on a described device with no tuning database. */
static void setup(void)
{
  ctx = kt_test_open_no_db();
}

static void teardown(void)
{
  kt_close(ctx);
  kt_test_rmdir();
}

TestSuite(api, .init = setup, .fini = teardown);

/* Fake device addresses: never dereferenced. */
#define A ((const float *)0x10000)
#define B ((const float *)0x20000)
#define C ((float *)0x30000)
#define SAMPLES ((const int32_t *)0x40000)
#define BINS ((uint32_t *)0x50000)

/* A choice function that refuses a call leaves no stale text in its
 * kt_choice: ch, filled with 'x' before the call, has only "" strings. */
static void expect_cleared(const kt_choice *ch, int rc, const char *fn)
{
  if (rc == KT_OK)
    return;
  cr_assert(ch->variant[0] == '\0' && ch->matched[0] == '\0' && ch->reason[0] == '\0' && ch->source[0] == '\0' &&
                ch->tuned == 0,
            "%s refused the call (%s) but left its kt_choice filled", fn, kt_strerror(rc));
}

/* Every entry point that checks matmul arguments, with one set of them. */
static void expect_matmul(kt_context *c, int want, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float *cc, int64_t ldc)
{
  kt_choice ch;
  int rc = kt_matmul(c, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, cc, ldc, NULL);
  cr_assert_eq(rc, want, "kt_matmul(M %lld N %lld K %lld lda %lld ldb %lld ldc %lld) = %d (%s), want %d (%s)",
               (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb, (long long)ldc, rc,
               kt_strerror(rc), want, kt_strerror(want));
  if (want == KT_ERR_NOT_DEVICE_POINTER)
    want = KT_OK; /* the choice does not look at the memory */
  memset(&ch, 'x', sizeof ch);
  rc = kt_matmul_choice(c, M, N, K, a, lda, b, ldb, cc, ldc, &ch);
  expect_cleared(&ch, rc, "kt_matmul_choice");
  cr_assert_eq(rc, want, "kt_matmul_choice(M %lld N %lld K %lld lda %lld ldb %lld ldc %lld) = %d (%s), want %d (%s)",
               (long long)M, (long long)N, (long long)K, (long long)lda, (long long)ldb, (long long)ldc, rc,
               kt_strerror(rc), want, kt_strerror(want));
}

static void expect_hist(kt_context *c, int want, const int32_t *samples, uint64_t n, uint32_t *bins, int64_t nbins)
{
  kt_choice ch;
  int rc = kt_histogram(c, samples, n, bins, nbins, NULL);
  cr_assert_eq(rc, want, "kt_histogram(n %llu nbins %lld) = %d (%s), want %d (%s)", (unsigned long long)n,
               (long long)nbins, rc, kt_strerror(rc), want, kt_strerror(want));
  if (want == KT_ERR_NOT_DEVICE_POINTER)
    want = KT_OK;
  memset(&ch, 'x', sizeof ch);
  rc = kt_histogram_choice(c, samples, n, bins, nbins, &ch);
  expect_cleared(&ch, rc, "kt_histogram_choice");
  cr_assert_eq(rc, want, "kt_histogram_choice(n %llu nbins %lld) = %d (%s), want %d (%s)", (unsigned long long)n,
               (long long)nbins, rc, kt_strerror(rc), want, kt_strerror(want));
}

/* ---- contexts ------------------------------------------------------------ */

Test(api, null_context_is_a_bad_context)
{
  expect_matmul(NULL, KT_ERR_BAD_CONTEXT, 64, 64, 64, A, 64, B, 64, C, 64);
  expect_hist(NULL, KT_ERR_BAD_CONTEXT, SAMPLES, 100, BINS, 256);
  cr_assert_eq(kt_tuned_count(NULL), 0);
  cr_assert_not_null(kt_device_name(NULL));
}

Test(api, closed_context_is_a_bad_context)
{
  kt_context *closed = ctx;
  expect_matmul(closed, KT_ERR_NOT_DEVICE_POINTER, 64, 64, 64, A, 64, B, 64, C, 64); /* open: it works */
  kt_close(ctx);
  ctx = NULL;
  expect_matmul(closed, KT_ERR_BAD_CONTEXT, 64, 64, 64, A, 64, B, 64, C, 64);
  expect_hist(closed, KT_ERR_BAD_CONTEXT, SAMPLES, 100, BINS, 256);
  cr_assert_eq(kt_tuned_count(closed), 0);
  kt_close(closed); /* a second close is harmless */
}

Test(api, bad_context_is_reported_before_bad_arguments)
{
  expect_matmul(NULL, KT_ERR_BAD_CONTEXT, 0, 64, 64, NULL, 64, B, 64, C, 64);
  expect_hist(NULL, KT_ERR_BAD_CONTEXT, NULL, 100, NULL, 0);
}

Test(api, close_null_is_a_no_op)
{
  kt_close(NULL);
  /* The live context is unaffected. */
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 64, 64, 64, A, 64, B, 64, C, 64);
}

Test(api, open_without_out_pointer_is_a_null_pointer)
{
  cr_assert_eq(kt_open(NULL, NULL), KT_ERR_NULL_POINTER);
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  cr_assert_eq(kt_open_described(NULL, &dev, NULL), KT_ERR_NULL_POINTER);
  kt_context *c = (kt_context *)(uintptr_t)8;
  cr_assert_eq(kt_open_described(&c, NULL, NULL), KT_ERR_NULL_POINTER);
}

Test(api, open_without_gpu_is_no_device)
{
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0)
    cr_skip_test("a GPU is present (%d device(s)); this test is for machines without one", count);
  kt_context *c = (kt_context *)(uintptr_t)8; /* must be reset to NULL */
  cr_assert_eq(kt_open(&c, NULL), KT_ERR_NO_DEVICE);
  cr_assert_null(c);
  c = (kt_context *)(uintptr_t)8;
  kt_options o = kt_default_options();
  cr_assert_eq(kt_open(&c, &o), KT_ERR_NO_DEVICE);
  cr_assert_null(c);
}

Test(api, a_device_below_minus_one_is_a_bad_device)
{
  kt_options o = kt_default_options();
  o.device = -7;
  kt_context *c = (kt_context *)(uintptr_t)8; /* must be reset to NULL */
  cr_assert_eq(kt_open(&c, &o), KT_ERR_BAD_DEVICE);
  cr_assert_null(c);
}

Test(api, default_options)
{
  kt_options o = kt_default_options();
  cr_assert_eq(o.device, -1);
  cr_assert_null(o.db_path);
  cr_assert_null(o.log);
  cr_assert_null(o.log_user);
}

Test(api, bad_log_level_is_a_bad_option)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_options o = kt_default_options();
  char path[PATH_MAX];
  o.db_path = kt_test_path(path, sizeof path, "none.db");
  kt_context *c = NULL;
  o.log_level = KT_LOG_DEBUG + 1;
  cr_assert_eq(kt_open_described(&c, &dev, &o), KT_ERR_BAD_OPTION);
  cr_assert_null(c);
  o.log_level = -1;
  cr_assert_eq(kt_open_described(&c, &dev, &o), KT_ERR_BAD_OPTION);
  cr_assert_null(c);
  /* kt_open refuses it before it asks CUDA for a device: the same code with
   * a GPU or without one (where the device query would say NO_DEVICE). */
  o.log_level = 42;
  cr_assert_eq(kt_open(&c, &o), KT_ERR_BAD_OPTION);
  cr_assert_null(c);
}

Test(api, device_name_describes_the_device)
{
  const char *name = kt_device_name(ctx);
  cr_assert_not_null(strstr(name, "Test GPU"), "%s", name);
  cr_assert_not_null(strstr(name, "sm_90"), "%s", name);
  cr_assert_not_null(strstr(name, "132"), "%s", name);
}

/* ---- matmul arguments --------------------------------------------------- */

Test(api, matmul_null_pointers)
{
  expect_matmul(ctx, KT_ERR_NULL_POINTER, 64, 64, 64, NULL, 64, B, 64, C, 64);
  expect_matmul(ctx, KT_ERR_NULL_POINTER, 64, 64, 64, A, 64, NULL, 64, C, 64);
  expect_matmul(ctx, KT_ERR_NULL_POINTER, 64, 64, 64, A, 64, B, 64, NULL, 64);
  cr_assert_eq(kt_matmul_choice(ctx, 64, 64, 64, A, 64, B, 64, C, 64, NULL), KT_ERR_NULL_POINTER);
}

Test(api, matmul_sizes_below_zero)
{
  expect_matmul(ctx, KT_ERR_BAD_SIZE, 64, 64, -1, A, 64, B, 64, C, 64);
  expect_matmul(ctx, KT_ERR_BAD_SIZE, -1, 64, 64, A, 64, B, 64, C, 64);
  expect_matmul(ctx, KT_ERR_BAD_SIZE, 64, -64, 64, A, 64, B, 64, C, 64);
  expect_matmul(ctx, KT_ERR_BAD_SIZE, 64, 64, INT64_MIN, A, 64, B, 64, C, 64);
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 1, 1, 1, A, 1, B, 1, C, 1);
}

Test(api, matmul_leading_dimensions_below_the_row)
{
  expect_matmul(ctx, KT_ERR_BAD_LD, 64, 32, 48, A, 47, B, 32, C, 32); /* lda < K */
  expect_matmul(ctx, KT_ERR_BAD_LD, 64, 32, 48, A, 48, B, 31, C, 32); /* ldb < N */
  expect_matmul(ctx, KT_ERR_BAD_LD, 64, 32, 48, A, 48, B, 32, C, 31); /* ldc < N */
  expect_matmul(ctx, KT_ERR_BAD_LD, 64, 32, 48, A, -48, B, 32, C, 32);
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 64, 32, 48, A, 48, B, 32, C, 32);    /* equal is fine */
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 64, 32, 48, A, 1000, B, 999, C, 33); /* larger too */
}

Test(api, matmul_sizes_past_int_max_overflow)
{
  const int64_t big = (int64_t)INT_MAX + 1, limit = (int64_t)INT_MAX - 1024;
  expect_matmul(ctx, KT_ERR_OVERFLOW, big, 4, 4, A, 4, B, 4, C, 4);
  expect_matmul(ctx, KT_ERR_OVERFLOW, 4, big, 4, A, 4, B, big, C, big);
  expect_matmul(ctx, KT_ERR_OVERFLOW, 4, 4, big, A, big, B, 4, C, 4);
  expect_matmul(ctx, KT_ERR_OVERFLOW, INT64_MAX, 4, 4, A, 4, B, 4, C, 4);
  /* Within a tile of INT_MAX, a kernel's 32-bit loop counters would wrap:
   * refused.  INT_MAX - 1024 is the largest size allowed. */
  expect_matmul(ctx, KT_ERR_OVERFLOW, INT_MAX, 4, 4, A, 4, B, 4, C, 4);
  expect_matmul(ctx, KT_ERR_OVERFLOW, 4, 4, limit + 1, A, limit + 1, B, 4, C, 4);
  expect_matmul(ctx, KT_ERR_OVERFLOW, 4, limit + 1, 4, A, 4, B, limit + 1, C, limit + 1);
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, limit, 4, 4, A, 4, B, 4, C, 4);
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 4, 4, limit, A, limit, B, 4, C, 4);
}

Test(api, matmul_index_range_overflow)
{
  /* (M - 1) * lda overflows int64. */
  expect_matmul(ctx, KT_ERR_OVERFLOW, 3, 4, 4, A, INT64_MAX / 2 + 1, B, 4, C, 4);
  expect_matmul(ctx, KT_ERR_OVERFLOW, 2, 4, 4, A, INT64_MAX, B, 4, C, 4);
  /* (K - 1) * ldb and (M - 1) * ldc likewise. */
  expect_matmul(ctx, KT_ERR_OVERFLOW, 4, 4, 3, A, 4, B, INT64_MAX / 2 + 1, C, 4);
  expect_matmul(ctx, KT_ERR_OVERFLOW, 3, 4, 4, A, 4, B, 4, C, INT64_MAX / 2 + 1);
  /* The element count fits but its byte count does not. */
  expect_matmul(ctx, KT_ERR_OVERFLOW, 2, 4, 4, A, INT64_MAX / 4, B, 4, C, 4);
  expect_matmul(ctx, KT_ERR_OVERFLOW, 1 << 20, 4, 4, A, INT64_MAX / ((1 << 20) - 1), B, 4, C, 4);
}

Test(api, matmul_pointers_not_float_aligned)
{
  expect_matmul(ctx, KT_ERR_MISALIGNED, 64, 64, 64, (const float *)0x10002, 64, B, 64, C, 64);
  expect_matmul(ctx, KT_ERR_MISALIGNED, 64, 64, 64, A, 64, (const float *)0x20001, 64, C, 64);
  expect_matmul(ctx, KT_ERR_MISALIGNED, 64, 64, 64, A, 64, B, 64, (float *)0x30003, 64);
  /* 4-byte aligned but not 16: legal (A serves any float4 variant, B and
   * C an align-1 one). */
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 64, 64, 64, (const float *)0x10004, 64, B, 64, C, 64);
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 64, 64, 64, A, 64, (const float *)0x20004, 64, C, 64);
}

Test(api, valid_matmul_reaches_the_device_pointer_check)
{
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 1024, 1024, 1024, A, 1024, B, 1024, C, 1024);
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 1, 8192, 3, A, 3, B, 8192, C, 8192);
}

/* ---- histogram arguments ------------------------------------------------ */

Test(api, hist_null_pointers)
{
  expect_hist(ctx, KT_ERR_NULL_POINTER, SAMPLES, 100, NULL, 256);
  expect_hist(ctx, KT_ERR_NULL_POINTER, NULL, 100, BINS, 256);
  expect_hist(ctx, KT_ERR_NULL_POINTER, NULL, 1, BINS, 256);
  expect_hist(ctx, KT_ERR_NULL_POINTER, NULL, 0, NULL, 256);
  cr_assert_eq(kt_histogram_choice(ctx, SAMPLES, 100, BINS, 256, NULL), KT_ERR_NULL_POINTER);
}

Test(api, hist_without_samples_passes_the_checks)
{
  kt_choice ch;
  cr_assert_eq(kt_histogram_choice(ctx, NULL, 0, BINS, 256, &ch), KT_OK);
  cr_assert_neq(ch.variant[0], '\0');
  /* The bins are still checked against the device. */
  cr_assert_eq(kt_histogram(ctx, NULL, 0, BINS, 256, NULL), KT_ERR_NOT_DEVICE_POINTER);
}

Test(api, hist_bins_below_one)
{
  expect_hist(ctx, KT_ERR_BAD_SIZE, SAMPLES, 100, BINS, 0);
  expect_hist(ctx, KT_ERR_BAD_SIZE, SAMPLES, 100, BINS, -1);
  expect_hist(ctx, KT_ERR_BAD_SIZE, SAMPLES, 100, BINS, INT64_MIN);
  expect_hist(ctx, KT_ERR_NOT_DEVICE_POINTER, SAMPLES, 100, BINS, 1);
}

Test(api, hist_too_many_samples_overflow)
{
  expect_hist(ctx, KT_ERR_OVERFLOW, SAMPLES, (uint64_t)UINT32_MAX + 1, BINS, 256);
  expect_hist(ctx, KT_ERR_OVERFLOW, SAMPLES, UINT64_MAX, BINS, 256);
  expect_hist(ctx, KT_ERR_NOT_DEVICE_POINTER, SAMPLES, UINT32_MAX, BINS, 256); /* 2^32 - 1 is allowed */
}

Test(api, hist_too_many_bins_overflow)
{
  expect_hist(ctx, KT_ERR_OVERFLOW, SAMPLES, 100, BINS, (int64_t)INT_MAX + 1);
  expect_hist(ctx, KT_ERR_OVERFLOW, SAMPLES, 100, BINS, INT64_MAX);
  expect_hist(ctx, KT_ERR_NOT_DEVICE_POINTER, SAMPLES, 100, BINS, INT_MAX);
}

Test(api, hist_pointers_not_int_aligned)
{
  expect_hist(ctx, KT_ERR_MISALIGNED, (const int32_t *)0x40002, 100, BINS, 256);
  expect_hist(ctx, KT_ERR_MISALIGNED, SAMPLES, 100, (uint32_t *)0x50001, 256);
}

Test(api, valid_hist_reaches_the_device_pointer_check)
{
  expect_hist(ctx, KT_ERR_NOT_DEVICE_POINTER, SAMPLES, 1 << 20, BINS, 256);
  expect_hist(ctx, KT_ERR_NOT_DEVICE_POINTER, SAMPLES, 1 << 20, BINS, 200000);
}

/* ---- status messages ---------------------------------------------------- */

Test(api, every_status_has_its_own_message)
{
#define KT_TEST_CODE(name, value, msg) value,
#define KT_TEST_MSG(name, value, msg) msg,
  const int codes[] = {KT_STATUS_TABLE(KT_TEST_CODE)};
  const char *msgs[] = {KT_STATUS_TABLE(KT_TEST_MSG)};
#undef KT_TEST_CODE
#undef KT_TEST_MSG
  const int n = (int)(sizeof codes / sizeof codes[0]);
  cr_assert_eq(n, KT_STATUS_LAST + 1);
  for (int i = 0; i < n; ++i) {
    const char *m = kt_strerror(codes[i]);
    cr_assert_not_null(m, "code %d", codes[i]);
    cr_assert_neq(m[0], '\0', "code %d has an empty message", codes[i]);
    cr_assert_str_eq(m, msgs[i], "code %d", codes[i]);
    for (int j = 0; j < i; ++j) {
      cr_assert_neq(codes[i], codes[j], "codes %d and %d share a value", i, j);
      cr_assert_str_neq(m, kt_strerror(codes[j]), "codes %d and %d share a message", codes[i], codes[j]);
    }
  }
}

Test(api, unknown_status_has_a_message)
{
  const int unknown[] = {-1, KT_STATUS_LAST + 1, 1000, INT_MIN, INT_MAX};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; ++i) {
    const char *m = kt_strerror(unknown[i]);
    cr_assert_not_null(m, "code %d", unknown[i]);
    cr_assert_neq(m[0], '\0', "code %d", unknown[i]);
    cr_assert_str_neq(m, kt_strerror(KT_OK), "code %d reads as success", unknown[i]);
  }
}

/* ---- version ------------------------------------------------------------ */

Test(api, version_is_the_headers_three_numbers)
{
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", KT_VERSION_MAJOR, KT_VERSION_MINOR, KT_VERSION_PATCH);
  cr_expect_str_eq(KT_VERSION_STRING, want);
  cr_expect_str_eq(kt_version(), KT_VERSION_STRING);
}

/* ---- kt_matmul_ex arguments ---------------------------------------------- */

/* The desc's fields A, B and C are not the fake addresses above. */
#undef A
#undef B
#undef C
#define EX_A ((const void *)0x10000)
#define EX_B ((const void *)0x20000)
#define EX_C ((float *)0x30000)

/* A valid 64 x 48 x 32 BF16 N, N call on fake addresses; tests change one
 * field of it. */
static kt_matmul_desc ex_desc(void)
{
  const kt_matmul_desc d = {.type = KT_BF16, .op_a = KT_OP_N, .op_b = KT_OP_N, .M = 64, .N = 48, .K = 32,
                            .batch = 1, .alpha = 1.0f, .beta = 0.0f, .A = EX_A, .lda = 32, .B = EX_B, .ldb = 48,
                            .C = EX_C, .ldc = 48};
  return d;
}

/* kt_matmul_ex and kt_matmul_ex_choice on d. */
static void expect_ex(const kt_matmul_desc *d, int want, const char *what)
{
  kt_choice ch;
  int rc = kt_matmul_ex(ctx, d, NULL);
  cr_assert_eq(rc, want, "%s: kt_matmul_ex = %d (%s), want %d (%s)", what, rc, kt_strerror(rc), want,
               kt_strerror(want));
  if (want == KT_ERR_NOT_DEVICE_POINTER)
    want = KT_OK; /* the choice does not look at the memory */
  memset(&ch, 'x', sizeof ch);
  rc = kt_matmul_ex_choice(ctx, d, &ch);
  expect_cleared(&ch, rc, "kt_matmul_ex_choice");
  cr_assert_eq(rc, want, "%s: kt_matmul_ex_choice = %d (%s), want %d (%s)", what, rc, kt_strerror(rc), want,
               kt_strerror(want));
}

Test(api, matmul_ex_null_pointers)
{
  kt_choice ch;
  kt_matmul_desc d = ex_desc();
  cr_assert_eq(kt_matmul_ex(ctx, NULL, NULL), KT_ERR_NULL_POINTER);
  cr_assert_eq(kt_matmul_ex_choice(ctx, NULL, &ch), KT_ERR_NULL_POINTER);
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, NULL), KT_ERR_NULL_POINTER);
  cr_assert_eq(kt_matmul_ex(NULL, &d, NULL), KT_ERR_BAD_CONTEXT);
  d.A = NULL;
  expect_ex(&d, KT_ERR_NULL_POINTER, "A NULL");
  d = ex_desc(), d.B = NULL;
  expect_ex(&d, KT_ERR_NULL_POINTER, "B NULL");
  d = ex_desc(), d.C = NULL;
  expect_ex(&d, KT_ERR_NULL_POINTER, "C NULL");
}

Test(api, matmul_ex_types_and_ops_outside_their_enums)
{
  kt_matmul_desc d = ex_desc();
  d.type = (kt_dtype)4;
  expect_ex(&d, KT_ERR_BAD_TYPE, "type 4");
  d.type = (kt_dtype)-1;
  expect_ex(&d, KT_ERR_BAD_TYPE, "type -1");
  d = ex_desc(), d.op_a = (kt_op)2;
  expect_ex(&d, KT_ERR_BAD_TYPE, "op_a 2");
  d = ex_desc(), d.op_b = (kt_op)-1;
  expect_ex(&d, KT_ERR_BAD_TYPE, "op_b -1");
  /* Every type with every op pair passes, when the leading dimensions fit
   * the stored shapes (64 covers them all). */
  for (int t = KT_F32; t <= KT_F16; ++t)
    for (int ops = 0; ops < 4; ++ops) {
      d = ex_desc();
      d.type = (kt_dtype)t, d.op_a = (kt_op)(ops >> 1), d.op_b = (kt_op)(ops & 1);
      d.lda = d.ldb = 64;
      expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "valid type and ops");
    }
}

/* M or N = 0 returns once the arguments are checked (the stand-in
 * pointers, which are not device memory, are never looked at): an empty
 * C, as BLAS.  K = 0 (and alpha = 0) is BLAS's C = beta C: checked like
 * any call, the choice naming no variant.  (test_matmul_gpu runs it.) */
Test(api, matmul_m_or_n_zero_is_checked_and_does_nothing)
{
  kt_choice ch;
  const float *a = (const float *)EX_A, *b = (const float *)EX_B;
  cr_assert_eq(kt_matmul(ctx, 0, 32, 16, 1.0f, a, 16, b, 32, 0.0f, EX_C, 32, NULL), KT_OK);
  cr_assert_eq(kt_matmul(ctx, 64, 0, 16, 1.0f, a, 16, b, 0, 0.0f, EX_C, 0, NULL), KT_OK);
  cr_assert_eq(kt_matmul(ctx, 0, 0, 0, 1.0f, a, 0, b, 0, 0.0f, EX_C, 0, NULL), KT_OK);
  cr_assert_eq(kt_matmul(ctx, 0, 32, 16, 1.0f, a, 15, b, 32, 0.0f, EX_C, 32, NULL), KT_ERR_BAD_LD);
  cr_assert_eq(kt_matmul(ctx, 0, 32, 16, 1.0f, NULL, 16, b, 32, 0.0f, EX_C, 32, NULL), KT_ERR_NULL_POINTER);
  cr_assert_eq(kt_matmul_choice(ctx, 0, 32, 16, a, 16, b, 32, EX_C, 32, &ch), KT_OK);
  cr_assert_str_eq(ch.variant, "");
  cr_assert_not_null(strstr(ch.reason, "M = 0 or N = 0"), "%s", ch.reason);
  for (int t = KT_F32; t <= KT_F16; ++t) {
    kt_matmul_desc d = ex_desc();
    d.type = (kt_dtype)t, d.M = t % 2 ? 0 : d.M, d.N = t % 2 ? d.N : 0, d.ldc = d.N, d.batch = 2;
    d.stride_a = 64, d.stride_b = 64, d.stride_c = 0;
    cr_assert_eq(kt_matmul_ex(ctx, &d, NULL), KT_OK, "%s", kt_gemm_type_name(t));
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_assert_str_eq(ch.variant, "", "%s", kt_gemm_type_name(t));
    d.ldb = d.N - 1; /* still checked */
    cr_assert_eq(kt_matmul_ex(ctx, &d, NULL), KT_ERR_BAD_LD, "%s", kt_gemm_type_name(t));
  }
}

/* K = 0 (and alpha = 0) is BLAS's C = beta C: checked like any call, the
 * choice naming no variant.  (test_matmul_gpu runs it.) */
Test(api, matmul_k_zero_is_checked_and_multiplies_nothing)
{
  expect_matmul(ctx, KT_ERR_NOT_DEVICE_POINTER, 64, 32, 0, (const float *)EX_A, 0, (const float *)EX_B, 32, EX_C, 32);
  expect_matmul(ctx, KT_ERR_BAD_LD, 64, 32, 0, (const float *)EX_A, 0, (const float *)EX_B, 31, EX_C, 32); /* ldb < N */
  expect_matmul(ctx, KT_ERR_BAD_LD, 64, 32, 0, (const float *)EX_A, -1, (const float *)EX_B, 32, EX_C, 32);
  expect_matmul(ctx, KT_ERR_NULL_POINTER, 64, 32, 0, NULL, 0, (const float *)EX_B, 32, EX_C, 32);
  kt_choice ch;
  cr_assert_eq(kt_matmul_choice(ctx, 64, 32, 0, (const float *)EX_A, 0, (const float *)EX_B, 32, EX_C, 32, &ch), KT_OK);
  cr_assert_str_eq(ch.variant, "");
  cr_assert_not_null(strstr(ch.reason, "K = 0"), "%s", ch.reason);
  for (int t = KT_F32; t <= KT_F16; ++t) {
    kt_matmul_desc d = ex_desc();
    d.type = (kt_dtype)t, d.op_a = KT_OP_T, d.K = 0, d.lda = d.M, d.batch = 3;
    d.stride_a = 64, d.stride_b = 0, d.stride_c = d.M * d.ldc;
    expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "K 0");
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_assert_str_eq(ch.variant, "", "%s", kt_gemm_type_name(t));
    d.K = 5, d.alpha = 0.0f;
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_assert_str_eq(ch.variant, "", "%s: alpha 0", kt_gemm_type_name(t));
    d.alpha = 1.0f;
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_assert_str_neq(ch.variant, "", "%s", kt_gemm_type_name(t));
    /* Checked as any call: outputs that overlap, a span past int64. */
    d.K = 0, d.stride_c = d.ldc;
    expect_ex(&d, KT_ERR_BAD_STRIDE, "K 0, outputs overlapping");
    d.ldc = INT64_MAX / 2, d.stride_c = 0, d.batch = 1;
    expect_ex(&d, KT_ERR_OVERFLOW, "K 0, C past int64");
  }
}

Test(api, matmul_ex_sizes_below_zero_and_batch_below_one)
{
  kt_matmul_desc d = ex_desc();
  d.M = -1;
  expect_ex(&d, KT_ERR_BAD_SIZE, "M -1");
  d = ex_desc(), d.N = -1;
  expect_ex(&d, KT_ERR_BAD_SIZE, "N -1");
  d = ex_desc(), d.K = -1;
  expect_ex(&d, KT_ERR_BAD_SIZE, "K -1");
  d = ex_desc(), d.batch = -1;
  expect_ex(&d, KT_ERR_BAD_SIZE, "batch -1");
  d = ex_desc(), d.batch = 0; /* a zeroed batch is one product */
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "batch 0");
}

Test(api, matmul_ex_leading_dimensions_follow_the_ops)
{
  /* M 64, N 48, K 32: A stored M x K (op N, lda >= 32) or K x M (op T,
   * lda >= 64); B stored K x N (op N, ldb >= 48) or N x K (op T, ldb >= 32). */
  kt_matmul_desc d = ex_desc();
  d.lda = 31;
  expect_ex(&d, KT_ERR_BAD_LD, "op N lda < K");
  d = ex_desc(), d.op_a = KT_OP_T, d.lda = 63;
  expect_ex(&d, KT_ERR_BAD_LD, "op T lda < M");
  d.lda = 64;
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "op T lda == M");
  d = ex_desc(), d.ldb = 47;
  expect_ex(&d, KT_ERR_BAD_LD, "op N ldb < N");
  d = ex_desc(), d.op_b = KT_OP_T, d.ldb = 31;
  expect_ex(&d, KT_ERR_BAD_LD, "op T ldb < K");
  d.ldb = 32;
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "op T ldb == K");
  d = ex_desc(), d.ldc = 47;
  expect_ex(&d, KT_ERR_BAD_LD, "ldc < N");
  d = ex_desc(), d.lda = 1001, d.ldb = 999, d.ldc = 77; /* larger and odd: served (repacked) */
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "odd leading dimensions");
}

Test(api, matmul_ex_batch_strides)
{
  kt_matmul_desc d = ex_desc();
  d.batch = 3, d.stride_a = 64 * 32, d.stride_b = 0, d.stride_c = 64 * 48;
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "packed batches, B shared");
  d.stride_c = 64 * 48 - 1; /* entry b + 1 would overwrite entry b's last element */
  expect_ex(&d, KT_ERR_BAD_STRIDE, "overlapping outputs");
  d.stride_c = 0;
  expect_ex(&d, KT_ERR_BAD_STRIDE, "one output for the whole batch");
  d.stride_c = 64 * 48, d.stride_a = -1;
  expect_ex(&d, KT_ERR_BAD_STRIDE, "negative stride_a");
  d.stride_a = 0, d.stride_b = -5;
  expect_ex(&d, KT_ERR_BAD_STRIDE, "negative stride_b");
  /* With one product the strides are not used, and C's may be 0. */
  d = ex_desc(), d.stride_c = 0;
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "batch 1, stride_c 0");
  /* Side by side in the rows of one wider C (M x 3 N, stride_c N): apart. */
  d = ex_desc(), d.batch = 3, d.ldc = 3 * 48, d.stride_c = 48;
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "outputs side by side");
  d.stride_c = 50, d.ldc = 2 * 50 + 48;
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "outputs side by side with gaps");
  d.ldc = 2 * 50 + 47; /* the last entry's rows run into the next row's first */
  expect_ex(&d, KT_ERR_BAD_STRIDE, "outputs side by side past ldc");
  d.stride_c = 47, d.ldc = 3 * 48; /* each entry's rows run into the next entry's */
  expect_ex(&d, KT_ERR_BAD_STRIDE, "outputs side by side, closer than N");
}

Test(api, matmul_ex_sizes_and_spans_that_overflow)
{
  const int64_t limit = (int64_t)INT_MAX - 1024;
  kt_matmul_desc d = ex_desc();
  d.M = limit + 1;
  expect_ex(&d, KT_ERR_OVERFLOW, "M past the limit");
  d = ex_desc(), d.K = limit + 1, d.lda = limit + 1;
  expect_ex(&d, KT_ERR_OVERFLOW, "K past the limit");
  d = ex_desc(), d.batch = (int64_t)INT_MAX + 1, d.stride_c = 64 * 48;
  expect_ex(&d, KT_ERR_OVERFLOW, "batch past INT_MAX");
  /* The batch's span overflows int64, in elements or in bytes. */
  d = ex_desc(), d.batch = 3, d.stride_a = INT64_MAX / 2, d.stride_c = 64 * 48;
  expect_ex(&d, KT_ERR_OVERFLOW, "stride_a * (batch - 1)");
  d = ex_desc(), d.batch = 2, d.stride_c = INT64_MAX / 4;
  expect_ex(&d, KT_ERR_OVERFLOW, "C's bytes");
  d = ex_desc(), d.lda = INT64_MAX / 64;
  expect_ex(&d, KT_ERR_OVERFLOW, "(M - 1) * lda bytes");
  /* C's rows overflow int64 before its batch does: found as overflow, not
   * by the overlap check's own (undefined) product. */
  d = ex_desc(), d.batch = 2, d.ldc = INT64_MAX / 2, d.stride_c = 1;
  expect_ex(&d, KT_ERR_OVERFLOW, "(M - 1) * ldc with a batch");
}

Test(api, matmul_ex_pointers_aligned_to_their_type)
{
  kt_matmul_desc d = ex_desc(); /* BF16: 2-byte elements */
  d.A = (const void *)0x10001;
  expect_ex(&d, KT_ERR_MISALIGNED, "BF16 A odd");
  d.A = (const void *)0x10002; /* 2-aligned, not 16: served */
  expect_ex(&d, KT_ERR_NOT_DEVICE_POINTER, "BF16 A 2-aligned");
  d = ex_desc(), d.type = KT_TF32, d.A = (const void *)0x10002;
  expect_ex(&d, KT_ERR_MISALIGNED, "TF32 A 2-aligned");
  d = ex_desc(), d.type = KT_F16, d.B = (const void *)0x20003;
  expect_ex(&d, KT_ERR_MISALIGNED, "F16 B odd");
  d = ex_desc(), d.C = (float *)0x30002;
  expect_ex(&d, KT_ERR_MISALIGNED, "C not float-aligned");
}

/* KT_F32 batches (runtime/gemm.c): entries that each fill the GPU go to
 * kt_matmul entry by entry; smaller ones to one launch of a CUDA-core tile,
 * the padding deciding which, square or flat (this device: 132 SMs,
 * nothing tuned). */
Test(api, matmul_ex_f32_batches_go_entry_by_entry_or_in_one_launch)
{
  kt_choice ch, mm;
  kt_matmul_desc d = ex_desc();
  d.type = KT_F32, d.M = 4096, d.N = 4096, d.K = 512, d.lda = 512, d.ldb = 4096, d.ldc = 4096, d.batch = 4;
  d.stride_a = 4096 * 512, d.stride_b = 512 * 4096, d.stride_c = 4096 * 4096;
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
  cr_assert_eq(kt_matmul_choice(ctx, 4096, 4096, 512, EX_A, 512, EX_B, 4096, EX_C, 4096, &mm), KT_OK);
  cr_assert_str_eq(ch.variant, mm.variant, "%s", ch.reason);
  d.K = 128, d.lda = 128, d.stride_a = 4096 * 128, d.stride_b = 128 * 4096; /* each fills the GPU, K too short */
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
  cr_assert_str_eq(ch.variant, "gemm_simt_128x128", "%s", ch.reason);
  cr_assert_not_null(strstr(ch.reason, "one launch for 4 entries"), "%s", ch.reason);
  static const struct {
    int64_t m, n, k, batch;
    const char *tile;
  } batches[] = {{1024, 1024, 256, 16, "gemm_simt_128x128"}, /* no padding: the fastest tile */
                 {1, 1, 1249, 9, "gemm_simt_16x16"},         /* one element an entry: the least padding */
                 {4, 1261, 719, 657, "gemm_simt_4x256"},     /* 4 rows: the flat tile pads none of them */
                 {1261, 3, 719, 657, "gemm_simt_256x4"},     /* and 3 columns, its transpose */
                 {30, 700, 99, 40, "gemm_simt_32x128"},      /* 30 rows: a 64-row tile would pad half */
                 {60, 57, 29, 1892, "gemm_simt_64x64"}};
  for (size_t i = 0; i < sizeof batches / sizeof batches[0]; ++i) {
    d = ex_desc();
    d.type = KT_F32, d.M = batches[i].m, d.N = batches[i].n, d.K = batches[i].k, d.batch = batches[i].batch;
    d.lda = d.K, d.ldb = d.N, d.ldc = d.N, d.stride_a = d.M * d.K, d.stride_b = d.K * d.N, d.stride_c = d.M * d.N;
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_assert_str_eq(ch.variant, batches[i].tile, "%lldx%lldx%lld x%lld: %s", (long long)d.M, (long long)d.N,
                     (long long)d.K, (long long)d.batch, ch.reason);
    d.op_a = KT_OP_T, d.lda = d.M; /* an op T: the same, the kernel reads either way */
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_assert_str_eq(ch.variant, batches[i].tile);
  }
}

/* KT_F32 with an op T: the transposed operand's scratch holds at most 256
 * MiB (runtime/gemm.c), so a long K goes a panel at a time, and where a
 * panel would be shallower than 128 the call goes to the CUDA cores. */
Test(api, matmul_ex_f32_op_t_takes_scratch_in_panels_or_the_cuda_cores)
{
  static const struct {
    kt_op op_a, op_b;
    int64_t m, n;
    const char *reason; /* how it starts */
  } calls[] = {
      {KT_OP_T, KT_OP_N, 100000, 3, "op T: A transposed into scratch first, in panels of 668 of K; "},
      {KT_OP_N, KT_OP_T, 3, 100000, "op T: B transposed into scratch first, in panels of 671 of K; "},
      {KT_OP_T, KT_OP_T, 100000, 300000, "op T: A and B transposed into scratch first, in panels of 223 of K; "},
      {KT_OP_T, KT_OP_N, 3, 5, "op T: A transposed into scratch first; "},
      {KT_OP_N, KT_OP_T, 4, 600000, "untuned FP32: one launch for 1 entry on the CUDA cores"}, /* 111 deep */
      {KT_OP_T, KT_OP_N, 600000, 4, "untuned FP32: one launch for 1 entry on the CUDA cores"},
  };
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; ++i) {
    kt_matmul_desc d = ex_desc();
    d.type = KT_F32, d.op_a = calls[i].op_a, d.op_b = calls[i].op_b;
    d.M = calls[i].m, d.N = calls[i].n, d.K = 700;
    d.lda = d.op_a == KT_OP_T ? d.M : d.K, d.ldb = d.op_b == KT_OP_T ? d.K : d.N, d.ldc = d.N;
    kt_choice ch;
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_expect_eq(strncmp(ch.reason, calls[i].reason, strlen(calls[i].reason)), 0, "%lldx%lldx700: %s", (long long)d.M,
                 (long long)d.N, ch.reason);
    cr_expect_eq(strncmp(ch.variant, i < 4 ? "matmul_" : "gemm_simt_", i < 4 ? 7 : 10), 0, "%s", ch.variant);
  }
}

Test(api, matmul_ex_choice_names_a_variant_for_the_type)
{
  /* F32 N, N is kt_matmul's choice, and F32 with an op T kt_matmul's
   * choice from scratch (B's rows 16-byte aligned, 48 apart: its own ldb
   * of 33 would not be); the other types a gemm variant that serves the
   * type on this (sm_90) device. */
  kt_choice ch, mm;
  kt_matmul_desc d = ex_desc();
  d.type = KT_F32, d.lda = 32, d.ldb = 48;
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
  cr_assert_eq(kt_matmul_choice(ctx, 64, 48, 32, EX_A, 32, EX_B, 48, EX_C, 48, &mm), KT_OK);
  cr_assert_str_eq(ch.variant, mm.variant);
  cr_assert_null(strstr(ch.reason, "transposed"), "%s", ch.reason);
  d.op_b = KT_OP_T, d.ldb = 33;
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
  cr_assert_str_eq(ch.variant, mm.variant);
  cr_assert_not_null(strstr(ch.reason, "op T: B transposed into scratch first; "), "%s", ch.reason);
  d = ex_desc(), d.type = KT_F32, d.op_a = KT_OP_T, d.lda = 64;
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
  cr_assert_str_eq(ch.variant, mm.variant);
  cr_assert_not_null(strstr(ch.reason, "op T: A transposed into scratch first; "), "%s", ch.reason);
  for (int t = KT_TF32; t <= KT_F16; ++t) {
    d = ex_desc(), d.type = (kt_dtype)t, d.op_b = KT_OP_T, d.ldb = 32;
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &ch), KT_OK);
    cr_assert_eq(strncmp(ch.variant, "gemm_", 5), 0, "%s: %s", kt_gemm_type_name(t), ch.variant);
    const kt_variant *v = kt_registry_find(ch.variant, kt_context_device(ctx));
    cr_assert_not_null(v, "%s", ch.variant);
    cr_assert(kt_gemm_serves(v, kt_context_device(ctx), t), "%s does not serve %s", ch.variant,
              kt_gemm_type_name(t));
    cr_assert_eq(ch.tuned, 0);
  }
}

/* ---- KTUNE_LOG ------------------------------------------------------------ */

static void redirect_stderr(void)
{
  cr_redirect_stderr();
}

/* A KTUNE_LOG that names no level asked for a log it would not get: said
 * once a process on stderr (two contexts open here), nothing else. */
Test(api_log, a_ktune_log_of_no_level_is_said_once, .init = redirect_stderr)
{
  setenv("KTUNE_LOG", "bogus", 1);
  kt_close(kt_test_open_no_db());
  kt_close(kt_test_open_no_db());
  kt_test_rmdir();
  fflush(stderr);
  cr_assert_stderr_eq_str("ktune: KTUNE_LOG=bogus is not error, warn, info or debug: no log\n");
}

/* The level names in any case: KTUNE_LOG=INFO logs what info does (the
 * databases read), and says nothing of the value. */
Test(api_log, ktune_log_takes_its_names_in_any_case, .init = redirect_stderr)
{
  setenv("KTUNE_LOG", "INFO", 1);
  kt_close(kt_test_open_no_db());
  kt_test_rmdir();
  fflush(stderr);
  char buf[4096] = "";
  FILE *f = cr_get_redirected_stderr();
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  cr_assert(strstr(buf, "is not error") == NULL, "%s", buf);
  cr_assert(n > 0, "KTUNE_LOG=INFO logged nothing");
}
