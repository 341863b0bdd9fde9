/* SPDX-License-Identifier: MIT */
/* tests/test_dispatch.c: which variant serves a call (runtime/dispatch.c and
 * the choosing half of runtime/context.c), on described devices: no GPU.
 *
 *   make build/tests/test_dispatch && build/tests/test_dispatch --jobs=1
 */
#include "kt_test.h"

static void setup(void)
{
  kt_test_mkdir();
}

static void teardown(void)
{
  kt_test_rmdir();
}

TestSuite(dispatch, .init = setup, .fini = teardown);

/* Fake device addresses: never dereferenced, only their alignment matters. */
#define A16 ((const float *)0x10000)
#define B16 ((const float *)0x20000)
#define C16 ((const float *)0x30000)
#define A_MISALIGNED ((const float *)0x10004)
#define BINS ((const uint32_t *)0x40000)
#define SAMPLES ((const int32_t *)0x50000)

/* ---- what a tuned problem holds ------------------------------------------ */

/* Every variant a family builds for a target fits a tuned problem's ranking
 * in memory, less the room kept for alignment classes (runtime/db.c): the
 * cost model calibrates each variant only on the problems that keep it. */
Test(dispatch, every_variant_of_a_family_fits_a_ranking)
{
  int most = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    int n = 0;
    for (int j = 0; j < kt_registry_count; ++j)
      n += kt_registry[j].family == kt_registry[i].family && kt_registry[j].target == kt_registry[i].target;
    most = n > most ? n : most;
  }
  cr_assert_gt(most, 0);
  cr_assert_leq(most, KT_MAX_RANKED - 8, "a family builds %d variants for one target; KT_MAX_RANKED is %d", most,
                KT_MAX_RANKED);
}

/* ---- nearest tuned problem ---------------------------------------------- */

/* A tuned problem as kt_db_load makes it (prepared for the search). */
static kt_tuned tuned_matmul(long long m, long long n, long long k)
{
  kt_tuned t;
  memset(&t, 0, sizeof t);
  t.problem = kt_test_matmul_problem(m, n, k);
  kt_problem_key(&t.problem, 0, t.key, sizeof t.key);
  kt_dispatch_prepare(&t);
  return t;
}

static kt_tuned tuned_hist(long long nbins, long long nsamples)
{
  kt_tuned t;
  memset(&t, 0, sizeof t);
  t.problem = kt_test_hist_problem(nbins, nsamples, "");
  kt_problem_key(&t.problem, 0, t.key, sizeof t.key);
  kt_dispatch_prepare(&t);
  return t;
}

/* An entry of the other family that would be an exact match if the search
 * looked at every entry's shape regardless of family. */
static kt_tuned other_family(kt_tuned t)
{
  t.problem.family = t.problem.family == KT_FAMILY_MATMUL ? KT_FAMILY_HIST : KT_FAMILY_MATMUL;
  return t;
}

Test(dispatch, nearest_matmul_is_least_sum_of_squared_log_ratios)
{
  kt_tuned t[4] = {other_family(tuned_matmul(1000, 1000, 1000)), tuned_matmul(1024, 1024, 1024),
                   tuned_matmul(4096, 4096, 4096), tuned_matmul(128, 8192, 8192)};
  cr_assert_eq(kt_matmul_nearest(t, 4, 1000, 1000, 1000), &t[1]);
  cr_assert_eq(kt_matmul_nearest(t, 4, 4000, 4000, 4000), &t[2]);
  cr_assert_eq(kt_matmul_nearest(t, 4, 100, 8000, 9000), &t[3]);
  cr_assert_eq(kt_matmul_nearest(t, 4, 1024, 1024, 1024), &t[1]);
  /* Ratios, not differences: 2500 is nearer 1024 than 4096 by difference. */
  cr_assert_eq(kt_matmul_nearest(t, 4, 2500, 2500, 2500), &t[2]);
}

Test(dispatch, nearest_matmul_squares_each_log_ratio)
{
  /* The call is ln 2 away from t[0] in each of M, N, K (sum of squares
   * 3 ln^2 2) and 2 ln 2 away from t[1] in M only (4 ln^2 2): t[0] is
   * nearer by squares, t[1] by plain sums of |log ratios|. */
  kt_tuned t[2] = {tuned_matmul(1024, 1024, 1024), tuned_matmul(8192, 2048, 2048)};
  cr_assert_eq(kt_matmul_nearest(t, 2, 2048, 2048, 2048), &t[0]);
}

Test(dispatch, nearest_matmul_keeps_m_n_and_k_apart)
{
  kt_tuned t[3] = {tuned_matmul(4096, 256, 4096), tuned_matmul(4096, 4096, 256), tuned_matmul(256, 4096, 4096)};
  cr_assert_eq(kt_matmul_nearest(t, 3, 4000, 250, 4000), &t[0]);
  cr_assert_eq(kt_matmul_nearest(t, 3, 4000, 4000, 250), &t[1]);
  cr_assert_eq(kt_matmul_nearest(t, 3, 250, 4000, 4000), &t[2]);
}

Test(dispatch, nearest_matmul_is_null_without_matmul_entries)
{
  kt_tuned t[2] = {tuned_hist(256, 1 << 20), other_family(tuned_matmul(1024, 1024, 1024))};
  cr_assert_null(kt_matmul_nearest(t, 2, 1024, 1024, 1024));
  cr_assert_null(kt_matmul_nearest(NULL, 0, 1024, 1024, 1024));
}

Test(dispatch, nearest_hist_is_least_log_ratio_of_nbins)
{
  kt_tuned t[4] = {other_family(tuned_hist(3000, 1 << 20)), tuned_hist(256, 1 << 20), tuned_hist(65536, 1 << 20),
                   tuned_hist(1 << 20, 1 << 20)};
  cr_assert_eq(kt_hist_nearest(t, 4, 256, 1 << 20), &t[1]);
  cr_assert_eq(kt_hist_nearest(t, 4, 1000, 1 << 20), &t[1]);
  cr_assert_eq(kt_hist_nearest(t, 4, 3000, 1 << 20), &t[1]);
  /* Ratios: 8000 is 7744 from 256 and 57536 from 65536, but 31x and 8x. */
  cr_assert_eq(kt_hist_nearest(t, 4, 8000, 1 << 20), &t[2]);
  cr_assert_eq(kt_hist_nearest(t, 4, 500000, 1 << 20), &t[3]);
  cr_assert_eq(kt_hist_nearest(t, 4, 1LL << 30, 1), &t[3]);
}

Test(dispatch, nearest_hist_prefers_bins_over_samples)
{
  /* t[0] has the call's n exactly; t[1] has its nbins: nbins decides. */
  kt_tuned t[2] = {tuned_hist(1024, 1000), tuned_hist(1000, 1000000000)};
  cr_assert_eq(kt_hist_nearest(t, 2, 1000, 1000), &t[1]);
}

Test(dispatch, nearest_hist_breaks_ties_by_samples)
{
  kt_tuned t[3] = {tuned_hist(4096, 1 << 20), tuned_hist(4096, 1 << 28), tuned_hist(4096, 1 << 24)};
  cr_assert_eq(kt_hist_nearest(t, 3, 4096, 1 << 27), &t[1]);
  cr_assert_eq(kt_hist_nearest(t, 3, 4096, 1 << 19), &t[0]);
  cr_assert_eq(kt_hist_nearest(t, 3, 4000, 1 << 24), &t[2]);
  cr_assert_eq(kt_hist_nearest(t, 3, 4096, 0), &t[0]); /* n = 0 counts as 1 */
}

Test(dispatch, nearest_hist_is_null_without_hist_entries)
{
  kt_tuned t[2] = {tuned_matmul(1024, 1024, 1024), other_family(tuned_hist(256, 1 << 20))};
  cr_assert_null(kt_hist_nearest(t, 2, 256, 1 << 20));
  cr_assert_null(kt_hist_nearest(NULL, 0, 256, 1 << 20));
}

/* ---- contexts on described devices -------------------------------------- */

/* Messages the log callback received. */
typedef struct log_capture {
  int count[4];
  char last[4][768];
} log_capture;

static void capture(int level, const char *message, void *user)
{
  log_capture *c = user;
  cr_assert(level >= KT_LOG_ERROR && level <= KT_LOG_DEBUG, "bad log level %d", level);
  c->count[level]++;
  snprintf(c->last[level], sizeof c->last[level], "%s", message);
}

static kt_context *open_described(const kt_device_info *dev, const char *db_path, log_capture *log)
{
  kt_options o = kt_default_options();
  o.db_path = db_path;
  if (log) {
    memset(log, 0, sizeof *log);
    o.log = capture;
    o.log_user = log;
  }
  kt_context *ctx = NULL;
  int rc = kt_open_described(&ctx, dev, &o);
  cr_assert_eq(rc, KT_OK, "kt_open_described: %s", kt_strerror(rc));
  cr_assert_not_null(ctx);
  return ctx;
}

static kt_choice matmul_choice(kt_context *ctx, long long M, long long N, long long K, const float *A, long long lda,
                               long long ldb, long long ldc)
{
  kt_choice c;
  memset(&c, 0, sizeof c);
  int rc = kt_matmul_choice(ctx, M, N, K, A, lda, B16, ldb, C16, ldc, &c);
  cr_assert_eq(rc, KT_OK, "kt_matmul_choice: %s", kt_strerror(rc));
  cr_assert(c.reason[0] != '\0', "a choice must give a reason");
  return c;
}

/* The variant dispatch picks for M x N x K with dense rows (lda K, ldb and
 * ldc N) is want. */
static void expect_dense_choice(kt_context *ctx, long long M, long long N, long long K, const kt_variant *want)
{
  const kt_choice c = matmul_choice(ctx, M, N, K, A16, K, N, N);
  cr_expect_str_eq(c.variant, want->name, "%lldx%lldx%lld: %s", M, N, K, c.reason);
}

static kt_choice hist_choice(kt_context *ctx, long long nbins, unsigned long long n)
{
  kt_choice c;
  memset(&c, 0, sizeof c);
  int rc = kt_histogram_choice(ctx, SAMPLES, n, BINS, nbins, &c);
  cr_assert_eq(rc, KT_OK, "kt_histogram_choice(nbins %lld): %s", nbins, kt_strerror(rc));
  cr_assert(c.reason[0] != '\0', "a choice must give a reason");
  return c;
}

/* The variant a choice names, which must exist in the registry. */
static const kt_variant *chosen(const kt_choice *c)
{
  const kt_variant *v = kt_registry_find(c->variant, NULL);
  cr_assert_not_null(v, "the choice names '%s', which is not in the registry", c->variant);
  return v;
}

/* What an untuned call gets: the lowest default_rank among the defaults
 * that serve it, found here independently of context.c. */
static const kt_variant *expected_default_matmul(const kt_device_info *d, long long ldb)
{
  const kt_variant *best = NULL;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->default_rank > 0 && kt_matmul_serves(v, d, B16, ldb) && (!best || v->default_rank < best->default_rank))
      best = v;
  }
  cr_assert_not_null(best, "no default matmul variant serves the call");
  return best;
}

static const kt_variant *expected_default_hist(const kt_device_info *d, long long nbins)
{
  const kt_variant *best = NULL;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->default_rank > 0 && kt_hist_serves(v, d, nbins) && (!best || v->default_rank < best->default_rank))
      best = v;
  }
  cr_assert_not_null(best, "no default hist variant serves %lld bins", nbins);
  return best;
}

/* An align-1 matmul variant built for every shape: the few-row,
 * few-column and short-K kernels serve one corner each, not 1024^3. */
static int align1_any_shape(const kt_variant *v)
{
  return kt_test_is_matmul_align1(v) && kt_matmul_serves_shape(v, 1024, 1024, 1024);
}

/* A database tuned for dev at 1024^3: two align-4 variants fastest, then
 * two align-1 variants.  out[] gets them in rank order. */
static void tune_matmul_1024(const char *path, const kt_device_info *dev, const kt_variant *out[4])
{
  out[0] = kt_test_need(kt_test_is_matmul_align4, 0, "matmul align 4");
  out[1] = kt_test_need(kt_test_is_matmul_align4, 1, "matmul align 4");
  out[2] = kt_test_need(align1_any_shape, 0, "matmul align 1");
  out[3] = kt_test_need(align1_any_shape, 1, "matmul align 1");
  kt_problem p = kt_test_matmul_problem(1024, 1024, 1024);
  kt_measurement m[4] = {kt_test_measure(out[3], p, "ok", 4.0), kt_test_measure(out[1], p, "ok", 2.0),
                         kt_test_measure(out[0], p, "ok", 1.0), kt_test_measure(out[2], p, "ok", 3.0)};
  cr_assert_eq(kt_test_tune(path, dev, m, 4, p), 4);
}

Test(dispatch, aligned_call_gets_the_tuned_winner)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *v[4];
  tune_matmul_1024(path, &dev, v);
  kt_context *ctx = open_described(&dev, path, NULL);
  cr_assert_eq(kt_tuned_count(ctx), 1);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_str_eq(c.variant, v[0]->name);
  cr_assert_eq(c.tuned, 1);
  cr_assert_str_eq(c.matched, "1024x1024x1024");
  /* A nearby shape uses the same tuned problem. */
  c = matmul_choice(ctx, 1000, 1000, 1000, A16, 1000, 1000, 1000);
  cr_assert_str_eq(c.variant, v[0]->name);
  cr_assert_eq(c.tuned, 1);
  cr_assert_str_eq(c.matched, "1024x1024x1024");
  kt_close(ctx);
}

/* The float4 kernels store C a float4 where its address allows and single
 * floats elsewhere: C's alignment and ldc never rule them out. */
Test(dispatch, misaligned_c_keeps_the_float4_winner)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *v[4];
  tune_matmul_1024(path, &dev, v);
  kt_context *ctx = open_described(&dev, path, NULL);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1027);
  cr_assert_str_eq(c.variant, v[0]->name, "ldc 1027: got %s", c.variant);
  cr_assert_str_eq(c.matched, "1024x1024x1024");
  cr_assert(strstr(c.reason, "staged") == NULL, "B is read in place: %s", c.reason);
  cr_assert_eq(kt_matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, B16, 1024, (const float *)0x3000c, 1024, &c), KT_OK);
  cr_assert_str_eq(c.variant, v[0]->name, "C off a 16-byte boundary: got %s", c.variant);
  kt_close(ctx);
}

/* The first variant of the matmul kernel `algo` (in kt_test_nth's order);
 * the test fails if this build has none. */
static const kt_variant *need_matmul_algo(const char *algo)
{
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (kt_registry_find(v->name, NULL) == v && v->family == KT_FAMILY_MATMUL && strcmp(v->algo, algo) == 0)
      return v;
  }
  cr_assert_fail("the registry has no matmul %s variant", algo);
  return NULL;
}

/* A context on a "Test GPU" (sm_90) whose database tuned problem p alone,
 * where `fast` measured 0.03 ms and `slow` 0.06. */
static kt_context *open_tuned_fast_slow(const kt_variant *fast, const kt_variant *slow, kt_problem p)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_measurement m[2] = {kt_test_measure(fast, p, "ok", 0.03), kt_test_measure(slow, p, "ok", 0.06)};
  cr_assert_eq(kt_test_tune(path, &dev, m, 2, p), 2);
  return open_described(&dev, path, NULL);
}

/* The matrix-times-vector kernel serves N = 1 with rows of at least 128 KW
 * floats, and dispatch picks it only for a contiguous vector (ldb 1):
 * tuned faster than the few-column kernel, it still loses a strided call,
 * at the tuned shape and off it, whichever call came first. */
Test(dispatch, the_matrix_times_vector_kernel_serves_only_long_rows_of_a_contiguous_vector)
{
  const kt_variant *mv = need_matmul_algo("matvec");
  const kt_variant *gv = need_matmul_algo("gemv");
  const long long kmin = 128LL * kt_variant_param_int(mv, "kwarps", 0);
  cr_assert_gt(kmin, 0);
  cr_expect(kt_matmul_serves_shape(mv, 300, 1, kmin));
  cr_expect(!kt_matmul_serves_shape(mv, 300, 1, kmin - 1), "a row shorter than 128 KW");
  cr_expect(!kt_matmul_serves_shape(mv, 300, 2, 4096), "two columns");

  kt_context *ctx = open_tuned_fast_slow(mv, gv, kt_test_matmul_problem(4096, 1, 4096));
  static const long long shapes[][3] = {{4096, 1, 4096}, {3000, 1, 5000}};
  for (int s = 0; s < 2; ++s) {
    const long long M = shapes[s][0], K = shapes[s][2];
    kt_choice c = matmul_choice(ctx, M, 1, K, A16, K, 1, 1);
    cr_expect_str_eq(c.variant, mv->name, "%lldx1x%lld, ldb 1: %s", M, K, c.reason);
    c = matmul_choice(ctx, M, 1, K, A16, K, 3, 1);
    cr_expect_str_eq(c.variant, gv->name, "%lldx1x%lld, ldb 3: %s", M, K, c.reason);
    c = matmul_choice(ctx, M, 1, K, A16, K, 1, 1);
    cr_expect_str_eq(c.variant, mv->name, "%lldx1x%lld, ldb 1 again: %s", M, K, c.reason);
  }
  kt_close(ctx);
}

/* The vector-times-matrix kernel serves M = 1 with more than 16 columns
 * (fewer are the few-column kernel's): tuned faster than the few-row
 * kernel, dispatch picks it for one row of many columns, at the tuned
 * shape and off it, and the few-row kernel for two rows or 16 columns. */
Test(dispatch, the_vector_times_matrix_kernel_serves_one_row_of_more_than_16_columns)
{
  const kt_variant *vm = need_matmul_algo("vecmat");
  const kt_variant *sk = need_matmul_algo("skinny");
  cr_expect(kt_matmul_serves_shape(vm, 1, 17, 4096));
  cr_expect(kt_matmul_serves_shape(vm, 1, 9000, 7));
  cr_expect(!kt_matmul_serves_shape(vm, 1, 16, 4096), "16 columns");
  cr_expect(!kt_matmul_serves_shape(vm, 2, 4096, 4096), "two rows");

  kt_context *ctx = open_tuned_fast_slow(vm, sk, kt_test_matmul_problem(1, 4096, 4096));
  expect_dense_choice(ctx, 1, 4096, 4096, vm);
  expect_dense_choice(ctx, 1, 3000, 5000, vm);
  expect_dense_choice(ctx, 2, 3000, 5000, sk);
  expect_dense_choice(ctx, 1, 16, 5000, sk);
  kt_close(ctx);
}

/* The warp tile of two warps of 8x8 threads is built for a few dozen rows
 * over a long K: it serves M up to its block's rows (one row of blocks,
 * B read once) and no more; the other warp tiles serve every shape.
 * Tuned faster than a 64x128 tile, dispatch picks it for 20 rows, at the
 * tuned shape and off it, and the other for one row more than it serves. */
Test(dispatch, the_two_warp_8x8_tile_serves_only_one_row_of_blocks)
{
  const kt_variant *few = NULL, *wide = NULL;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (kt_registry_find(v->name, NULL) != v || v->family != KT_FAMILY_MATMUL || strcmp(v->algo, "wt") != 0 ||
        v->align != 1 || v->cluster != 1)
      continue;
    const char *tt = kt_variant_param(v, "tt");
    if (!few && v->threads == 64 && tt && strcmp(tt, "8x8") == 0)
      few = v;
    if (!wide && v->threads == 128 && kt_variant_param_int(v, "bm", 0) == 64 && kt_variant_param_int(v, "bn", 0) == 128)
      wide = v;
  }
  cr_assert(few && wide, "the registry has a 64-thread 8x8 warp tile and a 64x128 one with 4-byte copies");
  const long long bm = kt_variant_param_int(few, "bm", 0);
  cr_expect(kt_matmul_serves_shape(few, bm, 4096, 8192));
  cr_expect(kt_matmul_serves_shape(few, 1, 4096, 8192));
  cr_expect(!kt_matmul_serves_shape(few, bm + 1, 4096, 8192), "%lld rows", bm + 1);
  cr_expect(kt_matmul_serves_shape(wide, bm + 1, 4096, 8192));

  const long long tuned_m = bm < 20 ? bm : 20, off_m = bm < 24 ? bm : 24;
  kt_context *ctx = open_tuned_fast_slow(few, wide, kt_test_matmul_problem(tuned_m, 4096, 8192));
  expect_dense_choice(ctx, tuned_m, 4096, 8192, few);
  expect_dense_choice(ctx, off_m, 3000, 9000, few);
  expect_dense_choice(ctx, bm + 1, 4096, 8192, wide);
  kt_close(ctx);
}

/* So do the tiles of 12x8 threads (48 and 96 rows a block): each serves
 * M up to its block's rows, and no more. */
Test(dispatch, the_12x8_tiles_serve_only_one_row_of_blocks)
{
  int seen = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    const char *tt = kt_variant_param(v, "tt");
    if (v->family != KT_FAMILY_MATMUL || strcmp(v->algo, "wt") != 0 || !tt || strcmp(tt, "12x8") != 0)
      continue;
    const long long bm = kt_variant_param_int(v, "bm", 0);
    cr_assert_gt(bm, 0, "%s", v->name);
    cr_expect(kt_matmul_serves_shape(v, bm, 5000, 3000), "%s, %lld rows", v->name, bm);
    cr_expect(kt_matmul_serves_shape(v, 1, 5000, 3000), "%s, one row", v->name);
    cr_expect(!kt_matmul_serves_shape(v, bm + 1, 5000, 3000), "%s, %lld rows", v->name, bm + 1);
    ++seen;
  }
  cr_expect_gt(seen, 0, "the registry has 12x8 warp tiles");
}

/* A B that a float4 kernel cannot read in place (ldb not a multiple of 4,
 * or B off a 16-byte boundary) is staged into an aligned copy first, a
 * kernel of its own: worth it where the float4 winner leads by more than
 * the copy costs (at 1024 x 1024, a few microseconds), not where it leads
 * by less.  Both ways the choice is the model's, not the tuned ranking's:
 * the ranking timed B in place. */
Test(dispatch, a_misaligned_b_is_staged_for_the_float4_winner_where_that_pays)
{
  char lead[PATH_MAX], close[PATH_MAX];
  kt_test_path(lead, sizeof lead, "lead.db");
  kt_test_path(close, sizeof close, "close.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *f4 = kt_test_need(kt_test_is_matmul_align4, 0, "matmul align 4");
  const kt_variant *any = kt_test_need(align1_any_shape, 0, "matmul align 1");
  kt_test_tune_pair(lead, &dev, 1024, f4, 1.0, any, 1.1);    /* 100 us ahead */
  kt_test_tune_pair(close, &dev, 1024, f4, 1.0, any, 1.001); /* 1 us ahead */
  kt_context *ctx = open_described(&dev, lead, NULL);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1026, 1024);
  cr_assert_str_eq(c.variant, f4->name, "ldb 1026, 0.1 ms to gain: got %s", c.variant);
  cr_assert(strstr(c.reason, "B staged") != NULL, "the reason says B is staged: %s", c.reason);
  cr_assert(kt_matmul_stages(chosen(&c), B16, 1026));
  cr_assert_eq(kt_matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, (const float *)0x20008, 1024, C16, 1024, &c), KT_OK);
  cr_assert_str_eq(c.variant, f4->name, "B off 16 bytes: got %s", c.variant);
  /* At a K this short a float4 kernel's time is its stores of C: never
   * staged, however far it led where it was timed. */
  c = matmul_choice(ctx, 16384, 16384, 16, A16, 16, 16386, 16384);
  cr_assert_str_eq(c.variant, any->name, "K 16: got %s", c.variant);
  kt_close(ctx);
  ctx = open_described(&dev, close, NULL);
  c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1026, 1024);
  cr_assert_str_eq(c.variant, any->name, "ldb 1026, 1 us to gain: got %s", c.variant);
  cr_assert(strstr(c.reason, "staged") == NULL, "%s", c.reason);
  c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_str_eq(c.variant, f4->name, "B in place: the tuned winner");
  kt_close(ctx);
}

Test(dispatch, misaligned_a_or_lda_keeps_the_float4_winner)
{
  /* Every kernel copies A four bytes at a time: A's alignment and lda
   * never rule a variant out. */
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *v[4];
  tune_matmul_1024(path, &dev, v);
  kt_context *ctx = open_described(&dev, path, NULL);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A_MISALIGNED, 1024, 1024, 1024);
  cr_assert_str_eq(c.variant, v[0]->name, "A off a 16-byte boundary: got %s", c.variant);
  c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1025, 1024, 1024);
  cr_assert_str_eq(c.variant, v[0]->name, "lda 1025: got %s", c.variant);
  kt_close(ctx);
}

/* More fast float4 variants than the in-memory ranking keeps must not push
 * the fastest align-1 variant out: a misaligned call at a tuned shape of
 * unaligned rows, which takes that shape's ranking as it stands (B read in
 * place), still gets it. */
Test(dispatch, misaligned_call_finds_its_winner_below_many_faster_float4_variants)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(2048, 2047, 2048);
  kt_measurement m[64];
  int n = 0;
  for (int i = 0; n < 30; ++i) {
    const kt_variant *v = kt_test_nth(kt_test_is_matmul_align4, i);
    cr_assert_not_null(v, "the registry has fewer than 30 float4 matmul variants");
    m[n] = kt_test_measure(v, p, "ok", 1.0 + 0.01 * n);
    ++n;
  }
  const kt_variant *slow1 = kt_test_need(align1_any_shape, 0, "matmul align 1");
  const kt_variant *slower1 = kt_test_need(align1_any_shape, 1, "matmul align 1");
  m[n++] = kt_test_measure(slower1, p, "ok", 9.0);
  m[n++] = kt_test_measure(slow1, p, "ok", 5.0);
  cr_assert_eq(kt_test_tune(path, &dev, m, n, p), n);
  kt_context *ctx = open_described(&dev, path, NULL);
  kt_choice c = matmul_choice(ctx, 2048, 2047, 2048, A16, 2048, 2049, 2047); /* ldb not a multiple of 4 */
  cr_assert_str_eq(c.variant, slow1->name, "got %s", c.variant);
  cr_assert_eq(c.tuned, 1);
  c = matmul_choice(ctx, 2048, 2047, 2048, A16, 2048, 2048, 2048);
  cr_assert_str_eq(c.variant, m[0].variant);
  kt_close(ctx);
}

Test(dispatch, untuned_call_gets_the_default)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "empty.db");
  kt_db *db = NULL;
  char err[256];
  cr_assert_eq(kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err), KT_OK, "%s", err);
  kt_db_close(db);
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  log_capture log;
  kt_context *ctx = open_described(&dev, path, &log);
  cr_assert_eq(kt_tuned_count(ctx), 0);
  cr_assert_eq(log.count[KT_LOG_WARN] + log.count[KT_LOG_ERROR], 0, "an empty database is not a problem: %s",
               log.last[KT_LOG_WARN]);

  const kt_variant *want = expected_default_matmul(&dev, 1024);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_str_eq(c.variant, want->name);
  cr_assert_eq(c.tuned, 0);
  cr_assert_str_eq(c.matched, "");

  const kt_variant *want1 = expected_default_matmul(&dev, 1026);
  cr_assert_eq(want1->align, 1);
  c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1026, 1024);
  cr_assert_str_eq(c.variant, want1->name);
  cr_assert_eq(c.tuned, 0);

  const kt_variant *wanth = expected_default_hist(&dev, 256);
  c = hist_choice(ctx, 256, 1 << 20);
  cr_assert_str_eq(c.variant, wanth->name);
  cr_assert_eq(c.tuned, 0);
  cr_assert_str_eq(c.matched, "");
  kt_close(ctx);
}

/* An empty file where the database goes (touched, or made by a tuner that
 * stopped before its schema) holds nothing tuned: the defaults, no warning,
 * and the file stays empty. */
Test(dispatch, an_empty_file_is_a_database_with_nothing_tuned)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "empty.db");
  kt_test_write_file(path, "");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  log_capture log;
  kt_context *ctx = open_described(&dev, path, &log);
  cr_assert_eq(log.count[KT_LOG_WARN] + log.count[KT_LOG_ERROR], 0, "an empty file is not a problem: %s",
               log.last[KT_LOG_WARN]);
  cr_assert_eq(kt_tuned_count(ctx), 0);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_eq(c.tuned, 0);
  cr_assert_str_eq(c.variant, expected_default_matmul(&dev, 1024)->name);
  kt_close(ctx);
  size_t len;
  free(kt_test_slurp(path, &len));
  cr_assert_eq(len, 0, "the empty file was written");
}

Test(dispatch, other_devices_entries_are_not_used)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info tuned_dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *v[4];
  tune_matmul_1024(path, &tuned_dev, v);
  kt_problem p2 = kt_test_matmul_problem(4096, 4096, 4096);
  kt_measurement m2 = kt_test_measure(v[3], p2, "ok", 5.0);
  cr_assert_eq(kt_test_tune(path, &tuned_dev, &m2, 1, p2), 1);

  /* Same chip name and cc, different SM count: a different fingerprint. */
  kt_device_info other = kt_test_device("Test GPU", 90, 1);
  other.sm_count = 114;
  kt_device_fingerprint(&other);
  cr_assert_str_neq(other.fingerprint, tuned_dev.fingerprint);
  kt_context *ctx = open_described(&other, path, NULL);
  cr_assert_eq(kt_tuned_count(ctx), 0);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_eq(c.tuned, 0);
  cr_assert_str_eq(c.variant, expected_default_matmul(&other, 1024)->name);
  kt_close(ctx);

  ctx = open_described(&tuned_dev, path, NULL);
  cr_assert_eq(kt_tuned_count(ctx), 2);
  c = matmul_choice(ctx, 4000, 4000, 4000, A16, 4000, 4000, 4000);
  cr_assert_eq(c.tuned, 1);
  cr_assert_str_eq(c.matched, "4096x4096x4096");
  cr_assert_str_eq(c.variant, v[3]->name);
  kt_close(ctx);
}

/* A database tuned for dev at nbins: variants in rank order (equal times
 * on both distributions). */
static void tune_hist(const char *path, const kt_device_info *dev, long long nbins, const kt_variant *const *v, int n)
{
  kt_measurement m[16];
  cr_assert_leq(n, 8);
  for (int i = 0; i < n; ++i) {
    m[2 * i] = kt_test_measure(v[i], kt_test_hist_problem(nbins, 1 << 24, "uniform"), "ok", 1.0 + i);
    m[2 * i + 1] = kt_test_measure(v[i], kt_test_hist_problem(nbins, 1 << 24, "skewed"), "ok", 1.0 + i);
  }
  cr_assert_eq(kt_test_tune(path, dev, m, 2 * n, kt_test_hist_problem(nbins, 1 << 24, "")), n);
}

static void assert_hist_winner_serves(const kt_device_info *dev, const kt_choice *c, long long nbins)
{
  const kt_variant *v = kt_registry_find(c->variant, dev); /* dev's target's entry */
  cr_assert_not_null(v, "the choice names '%s', which %s has no entry of", c->variant, dev->name);
  cr_assert(kt_hist_max_nbins(v, dev) >= nbins, "%s (at most %lld bins) chosen for %lld bins", v->name,
            kt_hist_max_nbins(v, dev), nbins);
  cr_assert(kt_hist_serves(v, dev, nbins), "%s chosen but cannot serve %lld bins", v->name, nbins);
}

Test(dispatch, hist_winner_too_small_for_the_bins_is_passed_over)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *v[2] = {kt_test_need(kt_test_is_hist_smem, 0, "hist smem"),
                            kt_test_need(kt_test_is_hist_global, 0, "hist global (max_nbins 0)")};
  tune_hist(path, &dev, 4096, v, 2);
  kt_context *ctx = open_described(&dev, path, NULL);
  kt_choice c = hist_choice(ctx, 4096, 1 << 24);
  cr_assert_str_eq(c.variant, v[0]->name);
  cr_assert_eq(c.tuned, 1);
  cr_assert_str_eq(c.matched, "nbins=4096 n=16777216");
  const long long most = kt_hist_max_nbins(v[0], &dev);
  cr_assert(most > 4096 && most < INT_MAX, "%s serves at most %lld bins", v[0]->name, most);
  cr_assert(kt_hist_serves(v[0], &dev, most));
  long long big = most + 1;
  c = hist_choice(ctx, big, 1 << 24);
  cr_assert_str_eq(c.variant, v[1]->name, "got %s for %lld bins", c.variant, big);
  cr_assert_eq(c.tuned, 1);
  assert_hist_winner_serves(&dev, &c, big);
  kt_close(ctx);

  /* The limit is the device's own shared memory (one formula, evaluated
   * per device): a device with less of it passes the winner over sooner. */
  kt_device_info small = dev;
  small.smem_optin = dev.smem_optin / 4;
  small.smem_per_sm = dev.smem_per_sm / 4;
  kt_device_fingerprint(&small);
  cr_assert_str_eq(small.fingerprint, dev.fingerprint);
  const long long small_most = kt_hist_max_nbins(v[0], &small);
  cr_assert(small_most < most && small_most >= 4096 / 4, "%lld bins on the small device", small_most);
  cr_assert(!kt_hist_serves(v[0], &small, small_most + 1));
  ctx = open_described(&small, path, NULL);
  c = hist_choice(ctx, small_most + 1, 1 << 24);
  cr_assert_str_eq(c.variant, v[1]->name, "got %s for %lld bins", c.variant, small_most + 1);
  assert_hist_winner_serves(&small, &c, small_most + 1);
  kt_close(ctx);
}

static const long long nbins_sweep[] = {1, 256, 4096, 50000, 58112, 58113, 100000, 200000, 400000, 1000000};
enum { NSWEEP = sizeof nbins_sweep / sizeof nbins_sweep[0] };

Test(dispatch, no_cluster_variant_without_cluster_launch)
{
  kt_device_info with = kt_test_device("Test GPU", 90, 1);
  kt_device_info without = kt_test_device("Test GPU", 90, 0);
  int clustered = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->cluster <= 1)
      continue;
    ++clustered;
    for (int j = 0; j < NSWEEP; ++j)
      cr_assert(!kt_hist_serves(v, &without, nbins_sweep[j]), "%s serves %lld bins without clusters", v->name,
                nbins_sweep[j]);
    cr_assert(!kt_variant_runs_on(v, &without), "%s runs without clusters", v->name);
  }
  cr_assert_gt(clustered, 0, "the registry has no cluster variant: the test checks nothing");

  /* A cluster variant is the tuned winner; a device without clusters must
   * still never get one, tuned or default. */
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  const kt_variant *v[2] = {kt_test_need(kt_test_is_hist_cluster, 0, "hist with cluster > 1 and min_cc 90"),
                            kt_test_need(kt_test_is_hist_smem, 0, "hist smem")};
  tune_hist(path, &with, 4096, v, 2);
  kt_context *ctx = open_described(&with, path, NULL);
  cr_assert_str_eq(hist_choice(ctx, 4096, 1 << 24).variant, v[0]->name, "the fixture's winner is not used at all");
  kt_close(ctx);

  ctx = open_described(&without, path, NULL);
  cr_assert_eq(kt_tuned_count(ctx), 1);
  kt_choice c = hist_choice(ctx, 4096, 1 << 24);
  cr_assert_str_eq(c.variant, v[1]->name);
  for (int j = 0; j < NSWEEP; ++j) {
    c = hist_choice(ctx, nbins_sweep[j], 1 << 24);
    cr_assert_eq(chosen(&c)->cluster, 1, "%s chosen for %lld bins without clusters", c.variant, nbins_sweep[j]);
    assert_hist_winner_serves(&without, &c, nbins_sweep[j]);
  }
  kt_close(ctx);
}

Test(dispatch, no_sm90_variant_on_sm80)
{
  /* Cluster launch left on, so that only the compute capability can keep
   * the sm_90 variants out. */
  kt_device_info sm80 = kt_test_device("Test GPU sm80", 80, 1);
  kt_device_info sm90 = kt_test_device("Test GPU sm80", 90, 1);
  if (!kt_device_target(&sm80))
    cr_skip_test("this build has no target that an sm_80 GPU runs (ARCHS=%s)", kt_registry_target);
  if (kt_device_target(&sm90) < 90)
    cr_skip_test("this build has no sm_90 target (ARCHS=%s): no variant needs more than sm_80", kt_registry_target);
  int newer = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->min_cc <= 80)
      continue;
    ++newer;
    int serves90 = 0;
    for (int j = 0; j < NSWEEP; ++j) {
      cr_assert(!kt_hist_serves(v, &sm80, nbins_sweep[j]), "%s serves %lld bins on sm_80", v->name, nbins_sweep[j]);
      serves90 |= kt_hist_serves(v, &sm90, nbins_sweep[j]);
    }
    if (v->family == KT_FAMILY_MATMUL) {
      cr_assert(!kt_matmul_serves(v, &sm80, B16, 1024), "%s serves sm_80", v->name);
      serves90 = kt_matmul_serves(v, &sm90, B16, 1024);
    }
    if (v->family == KT_FAMILY_GEMM)
      for (int t = KT_F32; t <= KT_F16; ++t) {
        cr_assert(!kt_gemm_serves(v, &sm80, t), "%s serves %s on sm_80", v->name, kt_gemm_type_name(t));
        serves90 |= kt_gemm_serves(v, &sm90, t);
      }
    cr_assert(serves90, "%s serves no call on sm_90 either: the check proves nothing", v->name);
    cr_assert(!kt_variant_runs_on(v, &sm80), "%s runs on sm_80", v->name);
  }
  cr_assert_gt(newer, 0, "the registry has no sm_90-only variant: the test checks nothing");

  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  const kt_variant *v[3] = {kt_test_need(kt_test_is_hist_sm90_no_cluster, 0, "hist with min_cc 90, no cluster"),
                            kt_test_need(kt_test_is_hist_cluster, 0, "hist with cluster > 1 and min_cc 90"),
                            kt_test_need_on(&sm80, kt_test_is_hist_smem, 0, "hist smem")};
  tune_hist(path, &sm80, 4096, v, 3);
  kt_context *ctx = open_described(&sm80, path, NULL);
  cr_assert_eq(kt_tuned_count(ctx), 1);
  kt_choice c = hist_choice(ctx, 4096, 1 << 24);
  cr_assert_str_eq(c.variant, v[2]->name);
  cr_assert_eq(c.tuned, 1);
  for (int j = 0; j < NSWEEP; ++j) {
    c = hist_choice(ctx, nbins_sweep[j], 1 << 24);
    cr_assert_leq(chosen(&c)->min_cc, 80, "%s chosen for %lld bins on sm_80", c.variant, nbins_sweep[j]);
    assert_hist_winner_serves(&sm80, &c, nbins_sweep[j]);
  }
  c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_leq(chosen(&c)->min_cc, 80);
  kt_close(ctx);
}

/* kt_open_described must succeed on a bad database, warn through the log
 * callback and dispatch to the defaults. */
static void assert_warns_and_defaults(const char *path, const char *what)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  log_capture log;
  kt_context *ctx = open_described(&dev, path, &log);
  cr_assert_eq(log.count[KT_LOG_WARN], 1, "%s: expected one warning, got %d", what, log.count[KT_LOG_WARN]);
  cr_assert_not_null(strstr(log.last[KT_LOG_WARN], path), "%s: the warning does not name the file: %s", what,
                     log.last[KT_LOG_WARN]);
  cr_assert_eq(kt_tuned_count(ctx), 0, "%s", what);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_eq(c.tuned, 0, "%s", what);
  cr_assert_str_eq(c.variant, expected_default_matmul(&dev, 1024)->name, "%s", what);
  kt_close(ctx);
}

Test(dispatch, foreign_database_warns_and_uses_defaults)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "other-app.db");
  kt_test_sql(path, "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x');");
  assert_warns_and_defaults(path, "foreign SQLite database");
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM notes"), 1);
}

Test(dispatch, non_sqlite_database_warns_and_uses_defaults)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "garbage.db");
  kt_test_write_file(path, "garbage, not SQLite\n");
  assert_warns_and_defaults(path, "text file");
}

Test(dispatch, unreadable_database_warns_and_uses_defaults)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "a-directory.db");
  cr_assert_eq(mkdir(path, 0700), 0);
  assert_warns_and_defaults(path, "a directory");
}

Test(dispatch, missing_database_warns_and_uses_defaults)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "missing.db");
  assert_warns_and_defaults(path, "missing file");
  cr_assert(!kt_test_exists(path), "opening a context created the database");
}

Test(dispatch, newer_database_warns_and_uses_defaults)
{
  char path[PATH_MAX], sql[128];
  kt_test_path(path, sizeof path, "newer.db");
  snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d; CREATE TABLE t (x);",
           KT_DB_APPLICATION_ID, KT_DB_SCHEMA_VERSION + 1);
  kt_test_sql(path, sql);
  assert_warns_and_defaults(path, "newer schema");
}

/* A file that SQLite finds sound but whose winners were edited (by hand,
 * or by another program) so that a size is 0 (which the cost model would
 * divide by), disagrees with the problem's key, or a time is no time: the
 * context warns, uses the defaults and leaves the file as it was. */
Test(dispatch, edited_winners_warn_and_use_defaults)
{
  const char *const edits[] = {
      "UPDATE winners SET m = 0",
      "UPDATE winners SET k = -5",
      "UPDATE winners SET n = 4611686018427387904",
      "UPDATE winners SET n = NULL",
      "UPDATE winners SET problem = '0x1024x1024', m = 0",
      "UPDATE winners SET problem = 'not a shape'",
      "UPDATE winners SET time_ms = -1 WHERE rank = 2",
      "UPDATE winners SET time_ms = 0",
  };
  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; ++i) {
    char path[PATH_MAX], name[32];
    snprintf(name, sizeof name, "edited%zu.db", i);
    kt_test_path(path, sizeof path, name);
    kt_device_info dev = kt_test_device("Test GPU", 90, 1);
    const kt_variant *v[4];
    tune_matmul_1024(path, &dev, v);
    kt_test_sql(path, edits[i]);
    size_t before_len, after_len;
    unsigned char *before = kt_test_slurp(path, &before_len);
    assert_warns_and_defaults(path, edits[i]);
    unsigned char *after = kt_test_slurp(path, &after_len);
    cr_assert(after_len == before_len && memcmp(before, after, before_len) == 0, "%s: the file changed", edits[i]);
    free(before);
    free(after);
  }
}

/* ---- matmul: predicting untuned shapes ---------------------------------- */

/* Two float4 variants without split-K that differ in BM only. */
static int find_bm_pair(const kt_variant **tall, const kt_variant **short_)
{
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *a = &kt_registry[i];
    if (!kt_test_is_matmul_align4(a) || kt_variant_param_int(a, "bm", -1) != 128 ||
        kt_variant_param_int(a, "split", -1) != 1 || a->cluster != 1)
      continue;
    for (int j = 0; j < kt_registry_count; ++j) {
      const kt_variant *b = &kt_registry[j];
      if (kt_test_is_matmul_align4(b) && kt_variant_param_int(b, "bm", -1) == 64 &&
          kt_variant_param_int(b, "bn", -1) == kt_variant_param_int(a, "bn", -1) &&
          kt_variant_param_int(b, "split", -1) == 1 && b->cluster == 1) {
        *tall = a;
        *short_ = b;
        return 1;
      }
    }
  }
  return 0;
}

Test(dispatch, an_untuned_shape_gets_the_variant_whose_tiles_waste_least)
{
  const kt_variant *tall, *shorter;
  cr_assert(find_bm_pair(&tall, &shorter), "the registry has no 128-row and 64-row float4 pair");
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  /* Few SMs, so that time grows with the tiles rather than in whole waves. */
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  dev.sm_count = 4;
  kt_device_fingerprint(&dev);
  /* Equally fast where both tile the shape exactly (the taller one a hair
   * ahead), but 1056 rows cost the 128-row tiles a ninth band of tiles,
   * half of it empty, and the 64-row tiles only a seventeenth. */
  kt_problem p = kt_test_matmul_problem(1024, 1024, 1024);
  kt_measurement m[2] = {kt_test_measure(tall, p, "ok", 1.00), kt_test_measure(shorter, p, "ok", 1.01)};
  cr_assert_eq(kt_test_tune(path, &dev, m, 2, p), 2);
  kt_context *ctx = open_described(&dev, path, NULL);
  kt_choice c = matmul_choice(ctx, 1024, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_str_eq(c.variant, tall->name, "at the tuned shape, the measured winner");
  c = matmul_choice(ctx, 1056, 1024, 1024, A16, 1024, 1024, 1024);
  cr_assert_str_eq(c.variant, shorter->name, "got %s", c.variant);
  cr_assert_eq(c.tuned, 1);
  cr_assert_str_eq(c.matched, "1024x1024x1024");
  cr_assert(strstr(c.reason, "predicted") != NULL, "the reason gives the prediction: %s", c.reason);
  kt_close(ctx);
}

Test(dispatch, predictions_pick_only_variants_that_serve_the_call)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *v[4];
  tune_matmul_1024(path, &dev, v);
  kt_context *ctx = open_described(&dev, path, NULL);
  const long long shapes[][3] = {{1000, 1000, 1000}, {77, 5000, 300}, {4096, 3, 70000}, {1, 1, 1}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
    const long long M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
    kt_choice c = matmul_choice(ctx, M, N, K, A16, K, N + 1, N); /* ldb not a multiple of 4 */
    const kt_variant *x = chosen(&c);
    cr_assert(kt_matmul_serves_staged(x, &dev, B16, N + 1, N, K), "%s at %lldx%lldx%lld", c.variant, M, N, K);
    cr_assert_eq(kt_matmul_stages(x, B16, N + 1), strstr(c.reason, "B staged") != NULL,
                 "%s: the reason says whether B is staged: %s", c.variant, c.reason);
    c = matmul_choice(ctx, M, N, K, A16, K, N, N + 2); /* ldc not a multiple of 4: any variant reads B in place */
    cr_assert(kt_matmul_serves(chosen(&c), &dev, B16, N), "%s for ldc %lld", c.variant, N + 2);
    cr_assert(strstr(c.reason, "staged") == NULL, "%s", c.reason);
  }
  kt_close(ctx);
}

/* What an H100's make tune measured (ms) for the short-K kernels and a
 * 4-byte-copy warp-tiled kernel at the tuned shapes of K <= 256 near the
 * calls below, and, in the comments of the test, what bench_matmul_random
 * measured at those calls with every variant timed. */
typedef struct measured {
  const char *problem, *variant;
  double ms;
} measured;

static const measured h100_short_k[] = {
    {"2048x2047x8", "matmul_direct_64x128x16_tt8x4", 0.014},
    {"2048x2047x8", "matmul_direct_64x128x32_tt8x4", 0.016},
    {"2048x2047x8", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.018432},
    {"2048x8191x64", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.0876},
    {"2048x8191x64", "matmul_direct_64x128x32_tt8x4", 0.107216},
    {"2048x8191x64", "matmul_direct_64x128x16_tt8x4", 0.10952},
    {"4096x256x4", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.00624},
    {"4096x256x4", "matmul_direct_64x128x16_tt8x4", 0.006304},
    {"4096x256x4", "matmul_direct_64x128x32_tt8x4", 0.007328},
    {"4096x256x16", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.006656},
    {"4096x256x16", "matmul_direct_64x128x16_tt8x4", 0.007904},
    {"4096x256x16", "matmul_direct_64x128x32_tt8x4", 0.008592},
    {"4096x256x256", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.024192},
    {"4096x4096x4", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.030304},
    {"4096x4096x4", "matmul_direct_64x128x16_tt8x4", 0.031712},
    {"4096x4096x4", "matmul_direct_64x128x32_tt8x4", 0.037136},
    {"4096x4096x16", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.035712},
    {"4096x4096x16", "matmul_direct_64x128x16_tt8x4", 0.040928},
    {"4096x4096x16", "matmul_direct_64x128x32_tt8x4", 0.047328},
    {"4096x16x16", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.005056},
    {"4096x16x16", "matmul_direct_64x128x16_tt8x4", 0.00704},
    {"4096x16x16", "matmul_direct_64x128x32_tt8x4", 0.008032},
    {"16384x16384x64", "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 1.28563},
    {"16384x16384x64", "matmul_direct_64x128x32_tt8x4", 1.5433},
    {"16384x16384x64", "matmul_direct_64x128x16_tt8x4", 1.5735},
};

/* Record a table of measurements, grouped by problem, and rank each
 * problem; every variant it names must be in the registry. */
static void tune_measured(const char *path, const kt_device_info *dev, const measured *t, size_t n)
{
  for (size_t i = 0; i < n;) {
    const char *key = t[i].problem;
    kt_problem p;
    cr_assert_eq(kt_matmul_ops.parse(key, &p), KT_OK, "%s", key);
    kt_measurement m[8];
    int c = 0;
    for (; i < n && strcmp(t[i].problem, key) == 0 && c < 8; ++i, ++c) {
      const kt_variant *v = kt_registry_find(t[i].variant, NULL);
      cr_assert_not_null(v, "the registry lacks %s: measure this fixture anew", t[i].variant);
      m[c] = kt_test_measure(v, p, "ok", t[i].ms);
    }
    cr_assert_eq(kt_test_tune(path, dev, m, c, p), c);
  }
}

/* A context on a fresh database that holds the n measurements of t, made
 * on a 132-SM sm_90 test GPU. */
static kt_context *open_measured_on(const kt_device_info *dev, const measured *t, size_t n)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  tune_measured(path, dev, t, n);
  return open_described(dev, path, NULL);
}
static kt_context *open_measured(const measured *t, size_t n)
{
  const kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  return open_measured_on(&dev, t, n);
}
#define OPEN_MEASURED(t) open_measured((t), sizeof(t) / sizeof((t)[0]))

/* Dispatch on ctx picks `want` for this call (A, B and C 16-byte aligned). */
static void expect_choice(kt_context *ctx, long long M, long long N, long long K, long long lda, long long ldb,
                          long long ldc, const char *want)
{
  const kt_choice c = matmul_choice(ctx, M, N, K, A16, lda, ldb, ldc);
  cr_assert_str_eq(c.variant, want, "%lldx%lldx%lld: got %s", M, N, K, c.variant);
}

/* The short-K kernel has no pipeline, so its time grows with K faster
 * than a pipelined kernel's: it wins at a K of a few steps, but not at a
 * K of 58, where calibrating it on K 8 and 16 as if those were padded to
 * its BK of 32 made it look cheapest (it measured 0.0227 ms there, the
 * warp-tiled kernel 0.0173). */
Test(dispatch, the_short_k_kernel_is_predicted_to_lose_at_a_mid_k)
{
  kt_context *ctx = OPEN_MEASURED(h100_short_k);
  /* Rows not float4-aligned, as in the suite. */
  expect_choice(ctx, 7180, 258, 58, 59, 260, 258, "matmul_wt_32x64x8_tt4x4_w4_s3_v1_g8_o0_k1_c1");
  /* K 7 and 10: the 64x128x16 short-K kernel (measured 0.0076 and 0.0197
   * ms against 0.0101 and 0.0271). */
  expect_choice(ctx, 4719, 262, 7, 9, 262, 264, "matmul_direct_64x128x16_tt8x4");
  expect_choice(ctx, 11433, 529, 10, 11, 529, 529, "matmul_direct_64x128x16_tt8x4");
  kt_close(ctx);
}

/* What a plain make tune measured (ms) on an H100 for two warp tiles in
 * clusters of 8, 32x64 and 64x32, at the tuned shapes nearest 513x16x1045
 * (session 58).  Clusters of 4 and 8 blocks share a GPC, and that H100's
 * GPCs place them on 120 of its 132 SMs. */
static const measured h100_clusters_of_8[] = {
    {"256x16x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.006368},
    {"256x16x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.006656},
    {"256x16x4096", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.018048},
    {"256x16x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.02048},
    {"256x4x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.006336},
    {"256x4x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.006624},
    {"256x4x4096", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.017952},
    {"256x4x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.020288},
    {"4096x16x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.01104},
    {"4096x16x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.01392},
    {"4096x16x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.06336},
    {"4096x16x4096", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.084512},
    {"4096x4x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.0112},
    {"4096x4x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.013664},
    {"4096x4x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.064416},
    {"4096x4x4096", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", 0.084448},
};

/* At 513x16x1045 the 32x64 tiles launch 17 x 8 = 136 blocks, the 64x32
 * ones 72.  On the 120 SMs that clusters of 8 fill, 16 SMs take two of the
 * former, and a second block beside another costs more than a free slot
 * (CLUSTER_EXTRA): the 32x64 tiles took 0.0115 ms, the 64x32 ones 0.0102
 * (H100, bench_matmul_random's default seed); counting 132 SMs and a
 * second block as free, dispatch picked the former.  Where the driver does
 * not say where clusters go (kt_cluster_sms unknown), the model counts
 * every SM. */
Test(dispatch, clusters_are_priced_on_the_sms_their_gpcs_can_fill)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  cr_assert_eq(kt_cluster_sms(&dev, 8), 132, "unknown: every SM");
  cr_assert_eq(kt_cluster_sms(&dev, 1), 132);
  const int h100[4] = {132, 120, 120, 112};
  memcpy(dev.cluster_sms, h100, sizeof h100);
  cr_assert_eq(kt_cluster_sms(&dev, 1), 132, "no cluster");
  cr_assert_eq(kt_cluster_sms(&dev, 2), 132);
  cr_assert_eq(kt_cluster_sms(&dev, 4), 120);
  cr_assert_eq(kt_cluster_sms(&dev, 8), 120);
  cr_assert_eq(kt_cluster_sms(&dev, 16), 112);
  cr_assert_eq(kt_cluster_sms(&dev, 3), 132, "not a size the driver was asked about");
  kt_context *ctx = open_measured_on(&dev, h100_clusters_of_8, sizeof h100_clusters_of_8 / sizeof h100_clusters_of_8[0]);
  const kt_choice c = matmul_choice(ctx, 513, 16, 1045, A16, 1056, 16, 24);
  cr_assert_str_eq(c.variant, "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", "%s", c.reason);
  cr_assert(strstr(c.reason, "its clusters of 8 on 120 of the 132 SMs"), "the reason says where they go: %s", c.reason);
  /* 500 rows: 128 blocks of the 32x64 tiles, one an SM if all 132 SMs
   * took clusters of 8, but two on 8 of the 120 that do (the probe of
   * session 58 launched 16 such clusters: 120 SMs touched, two blocks on
   * some). */
  const kt_choice e = matmul_choice(ctx, 500, 16, 1045, A16, 1056, 16, 24);
  cr_assert_str_eq(e.variant, "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", "%s", e.reason);
  /* 300 rows: 80 blocks of the 32x64 tiles, one an SM, and its lead in
   * every measurement stands. */
  const kt_choice d = matmul_choice(ctx, 300, 16, 1045, A16, 1056, 16, 24);
  cr_assert_str_eq(d.variant, "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c8", "%s", d.reason);
  kt_close(ctx);
}

/* An H100's make tune (run 20 of bench/reference/matmul_random, the
 * shipped file): a float4 kernel of 128x256 tiles and a 4-byte one of
 * 16x128 tiles at the 8 tuned shapes nearest 2882x1145x35.  Rows of an
 * odd N take only the latter, so the former was timed with every row of C
 * stored a float4 at a time. */
static const measured h100_scalar_c[] = {
    {"4096x4096x16", "matmul_wt_128x256x8_tt8x16_w4_s3_v4_g8_o1_k1_c1", 0.034144},
    {"4096x4096x16", "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.03624},
    {"2048x2047x8", "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.016096},
    {"4096x256x16", "matmul_wt_128x256x8_tt8x16_w4_s3_v4_g8_o1_k1_c1", 0.009824},
    {"4096x256x16", "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.006784},
    {"2048x8191x64", "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.094512},
    {"4096x4096x256", "matmul_wt_128x256x8_tt8x16_w4_s3_v4_g8_o1_k1_c1", 0.205024},
    {"4096x4096x256", "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.315936},
    {"4096x256x256", "matmul_wt_128x256x8_tt8x16_w4_s3_v4_g8_o1_k1_c1", 0.052448},
    {"4096x256x256", "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.025232},
    {"4096x4096x4", "matmul_wt_128x256x8_tt8x16_w4_s3_v4_g8_o1_k1_c1", 0.028688},
    {"4096x4096x4", "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.029504},
    {"4096x256x4", "matmul_wt_128x256x8_tt8x16_w4_s3_v4_g8_o1_k1_c1", 0.008352},
    {"4096x256x4", "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", 0.006112},
};

/* A float4 kernel stores the rows of C that start off 16 bytes a float at
 * a time, and at a short K those stores are its time: at 2882x1145x35
 * with ldc 1147 the 128x256 tiles, B staged, were predicted at 0.0175 ms
 * and took 0.037; the 16x128 tiles, 0.019 (H100, held-out seed 123457).
 * With C aligned the float4 tiles keep their lead. */
Test(dispatch, a_float4_kernel_is_bound_by_its_scalar_stores_of_an_unaligned_c)
{
  kt_context *ctx = OPEN_MEASURED(h100_scalar_c);
  expect_choice(ctx, 2882, 1145, 35, 36, 1145, 1147, "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1");
  kt_choice c;
  cr_assert_eq(kt_matmul_choice(ctx, 2882, 1148, 35, A16, 36, B16, 1148, C16 + 1, 1148, &c), KT_OK);
  cr_assert_str_eq(c.variant, "matmul_wt_16x128x8_tt4x4_w4_s3_v1_g8_o0_k1_c1", "C off 16 bytes: got %s", c.variant);
  expect_choice(ctx, 2880, 4096, 35, 36, 4096, 4096, "matmul_wt_128x256x8_tt8x16_w4_s3_v4_g8_o1_k1_c1");
  kt_close(ctx);
}

/* An H100's make tune (run 7 of bench/reference/matmul_random): 64x128
 * tiles alone and 128x64 tiles split over clusters of 2, at the 8 tuned
 * shapes nearest 7766x159x1018. */
static const measured h100_lone_block[] = {
    {"4096x256x256", "matmul_wt_64x128x16_tt8x8_w4_s3_v4_g8_o4_k1_c1", 0.020128},
    {"4096x256x256", "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2", 0.020784},
    {"4096x256x4096", "matmul_wt_64x128x16_tt8x8_w4_s3_v4_g8_o4_k1_c1", 0.2292},
    {"4096x256x4096", "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2", 0.208768},
    {"8192x128x8192", "matmul_wt_64x128x16_tt8x8_w4_s3_v4_g8_o4_k1_c1", 0.437536},
    {"8192x128x8192", "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2", 0.410832},
    {"1024x1024x1024", "matmul_wt_64x128x16_tt8x8_w4_s3_v4_g8_o4_k1_c1", 0.062304},
    {"1024x1024x1024", "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2", 0.057984},
    {"1000x1000x1000", "matmul_wt_64x128x16_tt8x8_w4_s3_v4_g8_o4_k1_c1", 0.065424},
    {"1000x1000x1000", "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2", 0.059472},
    {"4096x16x256", "matmul_wt_64x128x16_tt8x8_w4_s3_v4_g8_o4_k1_c1", 0.02112},
    {"4096x16x256", "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2", 0.015616},
    {"4096x16x4096", "matmul_wt_64x128x16_tt8x8_w4_s3_v4_g8_o4_k1_c1", 0.245184},
    {"4096x16x4096", "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2", 0.131664},
    {"2048x2048x2048", "matmul_wt_64x128x16_tt8x8_w4_s3_v4_g8_o4_k1_c1", 0.34824},
    {"2048x2048x2048", "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2", 0.3652},
};

/* At 4096x256x4096 the 64x128 tiles run one block per SM (4 fit), and
 * took about as long as the cluster's two blocks per SM: a lone block of
 * 8x8-output threads keeps an SM nearly busy.  Priced as half the SM's
 * blocks, it looked twice as cheap per step as it is, and 7766x159x1018,
 * two blocks per SM, went to it (measured 0.114 ms; the 128x64 tiles in
 * clusters of 2, 0.089). */
Test(dispatch, a_lone_block_of_wide_thread_tiles_is_not_priced_as_two)
{
  kt_context *ctx = OPEN_MEASURED(h100_lone_block);
  expect_choice(ctx, 7766, 159, 1018, 1018, 159, 159, "matmul_wt_128x64x16_tt8x8_w4_s3_v4_g8_o4_k1_c2");
  kt_close(ctx);
}

/* An H100's make tune (run 8 of bench/reference/matmul_random): the
 * few-column kernel, 4x4 per warp, and a float4 kernel of 64x32 tiles in
 * clusters of 2, at the tuned shapes of N 4 and 16 with M and K from
 * {256, 4096}. */
static const measured h100_few_columns[] = {
    {"256x4x256", "matmul_gemv_tt4x4_t256_q1_d4_c1", 0.005536},
    {"256x4x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c2", 0.00896},
    {"256x4x4096", "matmul_gemv_tt4x4_t256_q1_d4_c1", 0.026176},
    {"256x4x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c2", 0.063712},
    {"4096x4x256", "matmul_gemv_tt4x4_t256_q1_d4_c1", 0.007232},
    {"4096x4x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c2", 0.010448},
    {"4096x4x4096", "matmul_gemv_tt4x4_t256_q1_d4_c1", 0.044528},
    {"4096x4x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c2", 0.075472},
    {"256x16x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c2", 0.00896},
    {"256x16x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c2", 0.06336},
    {"4096x16x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c2", 0.0104},
    {"4096x16x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k1_c2", 0.075216},
};

/* The few-column kernel skips its reads past K, so a chunk costs its own
 * K.  Counted padded to whole 128-deep steps (523 as 640, against the 256
 * it was calibrated at), 7626x1x523 went to the 64x32 tiles (measured
 * 0.0189 ms; the few-column kernel 0.0134). */
Test(dispatch, the_few_column_kernel_costs_its_own_k)
{
  kt_context *ctx = OPEN_MEASURED(h100_few_columns);
  expect_choice(ctx, 7626, 1, 523, 528, 20, 32, "matmul_gemv_tt4x4_t256_q1_d4_c1");
  kt_close(ctx);
}

/* The same make tune: a float4 kernel of 32x64 tiles that splits K over
 * a cluster of 4, and one of 64x32 tiles that splits K into up to 256
 * chunks through a workspace, at the 8 tuned shapes nearest 7x312x509. */
static const measured h100_split[] = {
    {"4x256x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4", 0.006528},
    {"4x256x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k256_c1", 0.008624},
    {"16x256x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4", 0.006752},
    {"16x256x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k256_c1", 0.008624},
    {"4x256x4096", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4", 0.028192},
    {"4x256x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k256_c1", 0.015536},
    {"16x256x4096", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4", 0.028416},
    {"16x256x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k256_c1", 0.015536},
    {"4x4096x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4", 0.009632},
    {"4x4096x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k256_c1", 0.01488},
    {"16x4096x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4", 0.009856},
    {"16x4096x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k256_c1", 0.016496},
    {"16x16x256", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4", 0.006592},
    {"16x16x256", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k256_c1", 0.008304},
    {"4x4096x4096", "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4", 0.05632},
    {"4x4096x4096", "matmul_wt_64x32x16_tt4x4_w4_s3_v4_g8_o0_k256_c1", 0.114176},
};

/* Split-K through a workspace costs a fixed time beyond its second launch
 * (the workspace taken from the pool and given back): at a call of a few
 * microseconds the cluster split wins (measured at 7x312x509: 0.0083 ms,
 * the workspace split 0.0099). */
Test(dispatch, a_call_of_a_few_microseconds_avoids_the_workspace_split)
{
  kt_context *ctx = OPEN_MEASURED(h100_split);
  expect_choice(ctx, 7, 312, 509, 509, 312, 312, "matmul_wt_32x64x16_tt4x4_w4_s3_v4_g8_o0_k1_c4");
  kt_close(ctx);
}

/* The model weighs every tuned problem the database holds, however many
 * tunes of an application's calls have added: here 299 far shapes where
 * one pipeline depth wins, sorted (as the context loads them) before the
 * only shape near the call, where the other depth wins.  The model once
 * read the first 256 problems alone, and took the far shapes' winner. */
Test(dispatch, the_model_weighs_every_tuned_problem)
{
  const char *s3 = "matmul_wt_128x256x8_tt8x16_w4_s3_v4_g8_o1_k1_c1",
             *s4 = "matmul_wt_128x256x8_tt8x16_w4_s4_v4_g8_o1_k1_c1";
  const kt_variant *v3 = kt_registry_find(s3, NULL), *v4 = kt_registry_find(s4, NULL);
  cr_assert(v3 && v4, "the registry lacks %s or %s: pick two variants that differ only in their stages", s3, s4);
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  static kt_measurement m[600];
  kt_problem p[300];
  for (int k = 1; k <= 300; ++k) {
    char key[64];
    snprintf(key, sizeof key, k < 300 ? "1x1x%d" : "9000x9000x9000", k);
    cr_assert_eq(kt_matmul_ops.parse(key, &p[k - 1]), KT_OK, "%s", key);
    const int far = k < 300;
    m[2 * k - 2] = kt_test_measure(v3, p[k - 1], "ok", far ? 0.01 : 2.0);
    m[2 * k - 1] = kt_test_measure(v4, p[k - 1], "ok", far ? 0.02 : 1.0);
  }
  kt_db *db = NULL;
  char err[512] = "";
  cr_assert_eq(kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err), KT_OK, "kt_db_open: %s", err);
  cr_assert_eq(kt_db_record(db, &dev, kt_registry_generator_version, m, 600, err, sizeof err), KT_OK, "%s", err);
  for (int i = 0; i < 300; ++i)
    cr_assert_eq(kt_db_rank(db, dev.fingerprint, kt_registry_generator_version, &p[i], err, sizeof err), 2, "%s", err);
  kt_db_close(db);
  kt_context *ctx = open_described(&dev, path, NULL);
  const kt_choice c = matmul_choice(ctx, 8000, 8000, 8000, A16, 8000, 8000, 8000);
  cr_expect_str_eq(c.variant, s4, "8000x8000x8000: got %s (%s)", c.variant, c.reason);
  cr_expect_str_eq(c.matched, "9000x9000x9000");
  cr_expect(strstr(c.reason, "cost model") != NULL, "the model must decide (past 256 problems too): %s", c.reason);
  kt_close(ctx);
}

/* Tuned gemm problems are keyed by shape and layout (input type and op
 * pair): a call takes its own layout's nearest shape, another op pair of
 * its type only when its layout was not tuned, another type last. */
Test(dispatch, gemm_nearest_prefers_the_calls_layout)
{
  kt_tuned t[4];
  memset(t, 0, sizeof t);
  const char *keys[] = {"4096x4096x4096 bf16 nn", "1024x1024x1024 bf16 nt", "8192x8192x8192 tf32 tn",
                        "4096x4096x4096 f16 tt"};
  const kt_family_ops *ops = kt_family_get(KT_FAMILY_GEMM);
  for (int i = 0; i < 4; ++i) {
    cr_assert_eq(ops->parse(keys[i], &t[i].problem), KT_OK, "%s", keys[i]);
    char back[96];
    ops->key(&t[i].problem, back, sizeof back);
    cr_assert_str_eq(back, keys[i]);
    /* As the database gives it back: sizes from their columns, the layout
     * from the key (prepare). */
    snprintf(t[i].key, sizeof t[i].key, "%s", keys[i]);
    t[i].problem.dim[3] = 0;
    kt_dispatch_prepare(&t[i]);
  }
  cr_assert_eq(t[2].problem.dim[3], kt_gemm_layout(KT_TF32, 1, 0));
  /* BF16 N, T at 4096: the 1024 N, T problem, not the 4096 N, N one. */
  cr_assert_eq(kt_gemm_nearest(t, 4, 4096, 4096, 4096, kt_gemm_layout(KT_BF16, 0, 1)), &t[1]);
  cr_assert_eq(kt_gemm_nearest(t, 4, 4096, 4096, 4096, kt_gemm_layout(KT_BF16, 0, 0)), &t[0]);
  /* BF16 T, T was not tuned: the nearest BF16 shape of another op pair. */
  cr_assert_eq(kt_gemm_nearest(t, 4, 1200, 1200, 1200, kt_gemm_layout(KT_BF16, 1, 1)), &t[1]);
  cr_assert_eq(kt_gemm_nearest(t, 4, 8192, 8192, 8192, kt_gemm_layout(KT_BF16, 1, 1)), &t[0]);
  /* TF32 N, N: TF32's only problem, far as its shape is. */
  cr_assert_eq(kt_gemm_nearest(t, 4, 256, 256, 256, kt_gemm_layout(KT_TF32, 0, 0)), &t[2]);
  /* FP32 has none: the nearest of any type. */
  cr_assert_eq(kt_gemm_nearest(t, 4, 8000, 8000, 8000, kt_gemm_layout(KT_F32, 1, 1)), &t[2]);
  kt_problem p;
  cr_assert_neq(ops->parse("4096x4096x4096", &p), KT_OK);
  cr_assert_neq(ops->parse("4096x4096x4096 bf8 nn", &p), KT_OK);
  cr_assert_neq(ops->parse("4096x4096x4096 bf16 nx", &p), KT_OK);
  cr_assert_neq(ops->parse("4096x4096x4096 bf16 nn x", &p), KT_OK);
}

/* Which gemm variants a tuned problem times: each type's tensor-core
 * variants; the CUDA-core kernel at every size for FP32, and for the
 * tensor-core types only on problems of at most KT_GEMM_SIMT_TC_MACS
 * (2^27) multiply-adds, where its small tiles win some calls. */
static int is_gemm_simt(const kt_variant *v)
{
  return v->family == KT_FAMILY_GEMM && strcmp(v->algo, "simt") == 0;
}

static int is_gemm_mma_bf16(const kt_variant *v)
{
  const char *t = kt_variant_param(v, "type");
  return v->family == KT_FAMILY_GEMM && strcmp(v->algo, "mma") == 0 && t && strcmp(t, "bf16") == 0;
}

Test(dispatch, gemm_times_the_cuda_core_kernel_for_tensor_core_types_only_when_small)
{
  const kt_family_ops *ops = kt_family_get(KT_FAMILY_GEMM);
  const kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *simt = kt_test_need_on(&dev, is_gemm_simt, 0, "a gemm CUDA-core kernel");
  const kt_variant *mma_bf16 = kt_test_need_on(&dev, is_gemm_mma_bf16, 0, "a BF16 mma.sync gemm kernel");
  cr_assert_eq(KT_GEMM_SIMT_TC_MACS, 512LL * 512 * 512, "the cases below straddle 512^3");
  const struct {
    const char *key;
    int simt, mma_bf16;
  } cases[] = {
      /* 512^3 is the largest; one K step more is out; 64x65536x32 is 2^27
       * too, far from a cube; mma.sync BF16 serves BF16 alone. */
      {"512x512x512 bf16 nn", 1, 1},      {"512x512x513 bf16 nn", 0, 1},    {"128x128x128 tf32 tn", 1, 0},
      {"64x65536x32 f16 nt", 1, 0},       {"4096x4096x4096 bf16 nn", 0, 1}, {"4096x4096x4096 f32 nn", 1, 0},
      {"16384x16384x16384 f32 tt", 1, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    kt_problem p;
    cr_assert_eq(ops->parse(cases[i].key, &p), KT_OK, "%s", cases[i].key);
    cr_expect_eq(ops->fits(simt, &dev, &p), cases[i].simt, "%s: %s", cases[i].key, simt->name);
    cr_expect_eq(ops->fits(mma_bf16, &dev, &p), cases[i].mma_bf16, "%s: %s", cases[i].key, mma_bf16->name);
  }
}

/* A tensor-core call of one entry, alpha 1, on the 16-byte aligned
 * stand-in pointers with natural leading dimensions. */
static kt_matmul_desc gemm_desc(kt_dtype type, kt_op op_a, kt_op op_b, long long M, long long N, long long K)
{
  kt_matmul_desc d;
  memset(&d, 0, sizeof d);
  d.type = type, d.op_a = op_a, d.op_b = op_b;
  d.M = M, d.N = N, d.K = K, d.batch = 1, d.alpha = 1.0f;
  d.A = A16, d.lda = op_a == KT_OP_N ? K : M, d.B = B16, d.ldb = op_b == KT_OP_N ? N : K;
  d.C = (float *)C16, d.ldc = N;
  return d;
}

/* The TF32 choice of kt_matmul_ex at M x N on dev, with op(B) op_b. */
static const char *tf32_choice(kt_context *ctx, kt_op op_b, long long M, long long N, long long K, kt_choice *c)
{
  const kt_matmul_desc d = gemm_desc(KT_TF32, KT_OP_N, op_b, M, N, K);
  const int rc = kt_matmul_ex_choice(ctx, &d, c);
  cr_assert_eq(rc, KT_OK, "kt_matmul_ex_choice: %s", kt_strerror(rc));
  return c->variant;
}

/* A context on a test GPU of `sms` SMs (sm_90) whose database has tuned
 * size^3 in each of `layouts` (kt_gemm_layout), with `a` at a_ms and `b`
 * at b_ms. */
static kt_context *gemm_two_tuned(int sms, long long size, const kt_variant *a, double a_ms, const kt_variant *b,
                                  double b_ms, const long long *layouts, int n)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  dev.sm_count = sms;
  kt_device_fingerprint(&dev);
  for (int i = 0; i < n; ++i) {
    kt_problem p;
    memset(&p, 0, sizeof p);
    p.family = KT_FAMILY_GEMM;
    p.m = p.n = p.k = size;
    p.dim[3] = layouts[i];
    kt_measurement m[2] = {kt_test_measure(a, p, "ok", a_ms), kt_test_measure(b, p, "ok", b_ms)};
    cr_assert_eq(kt_test_tune(path, &dev, m, 2, p), 2);
  }
  return open_described(&dev, path, NULL);
}

/* 4 SMs, 4096^3 tuned, `a` at 1.00 ms and `b` a hair behind at 1.01. */
static kt_context *gemm_pair_tuned(const kt_variant *a, const kt_variant *b, const long long *layouts, int n)
{
  return gemm_two_tuned(4, 4096, a, 1.00, b, 1.01, layouts, n);
}

/* The Hopper TF32 kernel runs op N, N as its transpose, C^T = B^T A^T
 * (kt_gemm_tf32_swaps), so its tiles cover N x M: dispatch's model must
 * price them so.  Two variants equally fast at 4096^3 (the 128 x 256 one a
 * hair ahead) on 4 SMs: at 8192 x 128, 128 x 256 tiles are half empty
 * with op N, T and full with op N, N, and the other way round at 128 x
 * 8192; 64 x 128 tiles are full either way. */
Test(dispatch, tf32_nn_tiles_are_priced_as_its_transpose)
{
  const kt_variant *big = kt_registry_find("gemm_wgmma_tf32_128x256_wg2_s4_g8_o1_k1_p0_c1", NULL);
  const kt_variant *small = kt_registry_find("gemm_wgmma_tf32_64x128_wg1_s8_g8_o1_k128_p0_c1", NULL);
  if (!big || !small)
    cr_skip_test("this build has no sm_90a gemm variants (ARCHS without sm_90)");
  const long long layouts[2] = {kt_gemm_layout(KT_TF32, KT_OP_N, KT_OP_N), kt_gemm_layout(KT_TF32, KT_OP_N, KT_OP_T)};
  kt_context *ctx = gemm_pair_tuned(big, small, layouts, 2);
  kt_choice c;
  cr_assert_str_eq(tf32_choice(ctx, KT_OP_N, 4096, 4096, 4096, &c), big->name, "the measured winner");
  cr_assert_str_eq(c.matched, "4096x4096x4096 tf32 nn");
  cr_assert_str_eq(tf32_choice(ctx, KT_OP_N, 8192, 128, 4096, &c), big->name, "nn 8192x128: %s", c.reason);
  cr_assert_str_eq(tf32_choice(ctx, KT_OP_T, 8192, 128, 4096, &c), small->name, "nt 8192x128: %s", c.reason);
  cr_assert_str_eq(tf32_choice(ctx, KT_OP_N, 128, 8192, 4096, &c), small->name, "nn 128x8192: %s", c.reason);
  cr_assert_str_eq(tf32_choice(ctx, KT_OP_T, 128, 8192, 4096, &c), big->name, "nt 128x8192: %s", c.reason);
  /* The launcher swaps only where TMA reads B in place: on B's rows of 129
   * floats (516 bytes) op N, N runs unswapped, its tiles M x N, as op T. */
  kt_matmul_desc d = gemm_desc(KT_TF32, KT_OP_N, KT_OP_N, 8192, 128, 4096);
  d.ldb = 129;
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &c), KT_OK);
  cr_assert_str_eq(c.variant, small->name, "nn 8192x128, ldb 129: %s", c.reason);
  kt_close(ctx);
}

/* The two BF16 tiles of the short-K tests below, tuned at 1024^3 with the
 * times an H100 measured there (wgmma 128x128 persistent 13.0 us, mma.sync
 * 64x64 23.7 us), on 132 SMs; NULL where this build has no sm_90a gemm
 * variants. */
static kt_context *short_k_pair_tuned(const kt_variant **wg, const kt_variant **mma)
{
  *wg = kt_registry_find("gemm_wgmma_bf16_128x128_wg2_s6_g8_o1_k1_p1_c1", NULL);
  *mma = kt_registry_find("gemm_mma_bf16_64x64x32_wp2x2_s4_g8", NULL);
  if (!*wg || !*mma)
    return NULL;
  const long long layout = kt_gemm_layout(KT_BF16, KT_OP_N, KT_OP_N);
  return gemm_two_tuned(132, 1024, *wg, 0.0130, *mma, 0.0237, &layout, 1);
}

/* Each BF16 op N, N call {M, N, K, lda, ldb, 1 where mma.sync goes first,
 * 0 where wgmma does} is dispatched as it says. */
static void expect_short_k_picks(kt_context *ctx, const kt_variant *wg, const kt_variant *mma,
                                 const long long (*calls)[6], size_t n)
{
  kt_choice c;
  for (size_t i = 0; i < n; ++i) {
    kt_matmul_desc d = gemm_desc(KT_BF16, KT_OP_N, KT_OP_N, calls[i][0], calls[i][1], calls[i][2]);
    d.lda = calls[i][3], d.ldb = calls[i][4];
    cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &c), KT_OK);
    cr_expect_str_eq(c.variant, calls[i][5] ? mma->name : wg->name, "%lldx%lldx%lld lda %lld ldb %lld: %s",
                     calls[i][0], calls[i][1], calls[i][2], calls[i][3], calls[i][4], c.reason);
  }
}

/* The wgmma launcher repacks an operand whose rows TMA cannot read in
 * place (here A's rows of 66 halves, 132 bytes), for about 2 us whatever
 * its size; mma.sync reads any alignment.  Where K is a slice or two, that
 * and wgmma's fixed costs a tile are most of its time: mma.sync won such
 * calls by 1.3 to 2 times in bench_gemm's sweeps (H100; 1280x3194x66 with
 * those rows 1.8 times), while on rows TMA reads in place wgmma stays
 * ahead (2048x2048x64: mma.sync 1.23 times slower).  Tuned at 1024^3 only,
 * with the times an H100 measured there, dispatch must tell them apart:
 * with the repack unpriced (or mma.sync unpriced, as before) the odd rows'
 * calls stay on wgmma. */
Test(dispatch, a_repacked_short_k_call_goes_to_mma_sync)
{
  const kt_variant *wg, *mma;
  kt_context *ctx = short_k_pair_tuned(&wg, &mma);
  if (!ctx)
    cr_skip_test("this build has no sm_90a gemm variants (ARCHS without sm_90)");
  const long long calls[][6] = {/* M, N, K, lda, ldb, 1: mma.sync goes first */
                                {1280, 3194, 66, 66, 3200, 1},
                                {2048, 2048, 64, 66, 2048, 1},
                                {2048, 2048, 64, 64, 2048, 0},
                                {2048, 2048, 1024, 1030, 2048, 0},
                                {1024, 1024, 1024, 1024, 1024, 0},
                                {1024, 1024, 1024, 1030, 1024, 0}};
  expect_short_k_picks(ctx, wg, mma, calls, sizeof calls / sizeof calls[0]);
  kt_close(ctx);
}

/* A cluster of the Hopper kernel takes CLUSTER tile rows at once, past M or
 * not, so dispatch's model must price its idle blocks.  64 x 128 tiles in
 * clusters of two and alone, equally fast at 4096^3 (the clustered one a
 * hair ahead) on 4 SMs: at M = 128 both run 64 blocks and the measured
 * order stands; at M = 64 the cluster's second block has no rows, twice
 * the blocks for the same work, so the unclustered variant goes first. */
Test(dispatch, a_clusters_blocks_past_m_are_priced)
{
  const kt_variant *pair = kt_registry_find("gemm_wgmma_bf16_64x128_wg1_s8_g8_o1_k1_p0_c2", NULL);
  const kt_variant *alone = kt_registry_find("gemm_wgmma_bf16_64x128_wg1_s8_g8_o1_k128_p0_c1", NULL);
  if (!pair || !alone)
    cr_skip_test("this build has no sm_90a gemm variants (ARCHS without sm_90)");
  const long long layout = kt_gemm_layout(KT_BF16, KT_OP_N, KT_OP_N);
  kt_context *ctx = gemm_pair_tuned(pair, alone, &layout, 1);
  kt_matmul_desc d = gemm_desc(KT_BF16, KT_OP_N, KT_OP_N, 128, 4096, 4096);
  kt_choice c;
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &c), KT_OK);
  cr_assert_str_eq(c.variant, pair->name, "M = 128: %s", c.reason);
  d.M = 64;
  cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &c), KT_OK);
  cr_assert_str_eq(c.variant, alone->name, "M = 64: %s", c.reason);
  kt_close(ctx);
}

/* The launcher repacks both operands in one launch (gemm_pack), so a call
 * whose A and B both need it pays the repack's fixed cost once: priced
 * per operand, a second 2 us made the drawn calls' dispatch worse (0.940
 * of the oracle against 0.948; run 68's sweeps, H100).  Across K, where
 * the choice between the two tiles above turns from mma.sync to wgmma,
 * B's rows unaligned too (N + 2 halves) must not move the turn. */
Test(dispatch, a_second_repacked_operand_costs_no_second_launch)
{
  const kt_variant *wg, *mma;
  kt_context *ctx = short_k_pair_tuned(&wg, &mma);
  if (!ctx)
    cr_skip_test("this build has no sm_90a gemm variants (ARCHS without sm_90)");
  kt_choice c;
  for (long long mn = 1024; mn <= 2048; mn *= 2) {
    int turns = 0, last = -1;
    for (long long k = 66; k <= 1090; k += 32) {
      kt_matmul_desc d = gemm_desc(KT_BF16, KT_OP_N, KT_OP_N, mn, mn, k);
      d.lda = k; /* 2k bytes: never a multiple of 16 here */
      cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &c), KT_OK);
      const int one = strcmp(c.variant, mma->name) == 0;
      d.ldb = mn + 2;
      cr_assert_eq(kt_matmul_ex_choice(ctx, &d, &c), KT_OK);
      const int both = strcmp(c.variant, mma->name) == 0;
      cr_expect_eq(both, one, "%lldx%lldx%lld: %s with A repacked, %s with A and B", mn, mn, k,
                   one ? "mma.sync" : "wgmma", both ? "mma.sync" : "wgmma");
      turns += last >= 0 && one != last;
      last = one;
    }
    cr_expect_eq(turns, 1, "%lld^2: the choice turns %d times across K (once expected: mma.sync, then wgmma)", mn,
                 turns);
  }
  kt_close(ctx);
}

/* mma.sync copies a 16-bit operand at an odd stride element by element
 * through registers, outside its asynchronous pipeline (gemm_mma.cu.tpl;
 * kt_gemm_copy_granularity 2), at about twice the time of its share of
 * each slice (runtime/gemm.c, MMA_BY_ELEMENT).  Tuned as above, a short-K
 * call whose A rows are 4-byte multiples (cp.async of 4 bytes) still goes
 * to mma.sync; with rows of an odd number of halves it goes to wgmma, which
 * repacks A either way (BF16 1219x4785x285, lda 285: mma.sync 63 us,
 * wgmma 27; run 68's sweep, H100). */
Test(dispatch, an_operand_copied_element_by_element_is_priced_for_mma_sync)
{
  const kt_variant *wg, *mma;
  kt_context *ctx = short_k_pair_tuned(&wg, &mma);
  if (!ctx)
    cr_skip_test("this build has no sm_90a gemm variants (ARCHS without sm_90)");
  const long long calls[][6] = {/* M, N, K, lda, ldb, 1: mma.sync goes first */
                                {1280, 3194, 66, 66, 3200, 1},
                                {1280, 3194, 65, 65, 3200, 0},
                                {1219, 4785, 286, 286, 4792, 1},
                                {1219, 4785, 285, 285, 4792, 0},
                                {1219, 4785, 286, 286, 4785, 0}};
  expect_short_k_picks(ctx, wg, mma, calls, sizeof calls / sizeof calls[0]);
  kt_close(ctx);
}
