/* SPDX-License-Identifier: MIT */
/* tests/test_tune.c: `ktune tune` without a GPU: its arguments and its
 * choice of GPUs (tune.c), the table of the tuner's families (family.c),
 * what each family's file (matmul.c, hist.c) reads from its options and
 * finds in the registry, and whole tunes on described GPUs with a fake
 * worker: resumed after a kill, --fresh, spread over two GPUs. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "gemm.h"
#include "hist.h"
#include "kt_test.h"
#include "matmul.h"
#include "tuner.h"

/* ---- the family table ----------------------------------------------------- */

static int index_of(const kt_tune_family *tf)
{
  for (int f = 0; f < kt_tune_family_count; ++f)
    if (kt_tune_families[f] == tf)
      return f;
  cr_assert_fail("not in kt_tune_families");
  return -1;
}

Test(tune_families, every_runtime_family_has_one_tuner_entry)
{
  cr_assert_leq(kt_tune_family_count, KT_TUNE_MAX_FAMILIES);
  for (int i = 0; i < kt_family_count; ++i) {
    const kt_tune_family *tf = kt_tune_family_get(kt_families[i]->id);
    cr_assert_not_null(tf, "family %s cannot be tuned", kt_families[i]->name);
    cr_expect_eq(tf->id, kt_families[i]->id);
    cr_expect_not_null(tf->options[0].name, "%s has no problem list option", kt_families[i]->name);
    index_of(tf);
  }
}

Test(tune_families, are_found_by_name_and_by_long_name)
{
  const kt_tune_family *hist = kt_tune_family_find("hist");
  cr_assert_not_null(hist);
  cr_expect_eq(hist->id, KT_FAMILY_HIST);
  cr_expect_eq(kt_tune_family_find("histogram"), hist);
  const kt_tune_family *matmul = kt_tune_family_find("matmul");
  cr_assert_not_null(matmul);
  cr_expect_eq(matmul->id, KT_FAMILY_MATMUL);
  cr_expect_null(kt_tune_family_find("all"));
  cr_expect_null(kt_tune_family_find("histo"));
  cr_expect_null(kt_tune_family_find(""));
  cr_expect_null(kt_tune_family_find(NULL));
}

/* ---- ktune tune's arguments --------------------------------------------- */

/* kt_tune_parse_args on "ktune tune" followed by up to 4 arguments. */
static int parse(kt_tune_opts *o, const char *a0, const char *a1, const char *a2, const char *a3)
{
  char *argv[8] = {"ktune", "tune", (char *)a0, (char *)a1, (char *)a2, (char *)a3, NULL};
  int argc = 2;
  while (argv[argc])
    ++argc;
  return kt_tune_parse_args(argc, argv, o);
}

Test(tune_options, by_default_every_family_is_tuned_on_its_default_problems)
{
  kt_tune_opts o;
  cr_assert_eq(parse(&o, NULL, NULL, NULL, NULL), 0);
  for (int f = 0; f < kt_tune_family_count; ++f) {
    cr_expect(o.on[f]);
    for (int k = 0; kt_tune_families[f]->options[k].name; ++k)
      cr_expect_str_eq(o.values[f][k], kt_tune_families[f]->options[k].fallback);
  }
  cr_expect_null(o.variants);
  cr_expect_float_eq(o.timeout_s, 120, 1e-9);
}

Test(tune_options, family_takes_the_long_name_too)
{
  const int hist = index_of(kt_tune_family_find("hist")), matmul = index_of(kt_tune_family_find("matmul"));
  kt_tune_opts o;
  cr_assert_eq(parse(&o, "--family", "histogram", NULL, NULL), 0);
  cr_expect(o.on[hist]);
  cr_expect_not(o.on[matmul]);
  cr_assert_eq(parse(&o, "--family", "hist", NULL, NULL), 0);
  cr_expect(o.on[hist]);
  cr_expect_not(o.on[matmul]);
  cr_assert_eq(parse(&o, "--family", "matmul", NULL, NULL), 0);
  cr_expect_not(o.on[hist]);
  cr_expect(o.on[matmul]);
  cr_assert_eq(parse(&o, "--family", "matmul", "--family", "all"), 0);
  cr_expect(o.on[hist]);
  cr_expect(o.on[matmul]);
}

Test(tune_options, an_unknown_family_option_or_missing_value_is_an_error)
{
  kt_tune_opts o;
  cr_expect_eq(parse(&o, "--family", "bogus", NULL, NULL), 2);
  cr_expect_eq(parse(&o, "--bogus", "1", NULL, NULL), 2);
  cr_expect_eq(parse(&o, "--matmul", NULL, NULL, NULL), 2);
  cr_expect_eq(parse(&o, "--timeout", "0", NULL, NULL), 2);
  cr_expect_eq(parse(&o, "--timeout", "1s", NULL, NULL), 2);
  cr_expect_eq(parse(&o, "--seed", "-1", NULL, NULL), 2);
  cr_expect_eq(parse(&o, "--seed", "x", NULL, NULL), 2);
  cr_expect_eq(parse(&o, "matmul", NULL, NULL, NULL), 2);
}

Test(tune_options, help_and_json_take_no_value)
{
  kt_tune_opts o;
  cr_assert_eq(parse(&o, "--json", NULL, NULL, NULL), 0);
  cr_expect(o.json);
  cr_expect_not(o.help);
  cr_assert_eq(parse(&o, "--json", "--help", NULL, NULL), 0);
  cr_expect(o.help);
  cr_assert_eq(parse(&o, "-h", NULL, NULL, NULL), 0);
  cr_expect(o.help);
  cr_expect_not(o.json);
}

Test(tune_options, variants_patterns_must_each_match_a_variant_to_tune)
{
  kt_tune_opts o;
  cr_expect_eq(parse(&o, "--variants", "matmul_*", NULL, NULL), 0);
  cr_expect_eq(parse(&o, "--variants", "matmul_*,hist_*", NULL, NULL), 0);
  cr_expect_eq(parse(&o, "--variants", "matmul_*,no_such_variant", NULL, NULL), 2);
  cr_expect_eq(parse(&o, "--variants", "", NULL, NULL), 2);
  cr_expect_eq(parse(&o, "--variants", "matmul_*", "--family", "hist"), 2);
  cr_expect_eq(parse(&o, "--variants", "hist_*", "--family", "histogram"), 0);
}

Test(tune_options, a_family_option_goes_to_its_family)
{
  const int hist = index_of(kt_tune_family_find("hist")), matmul = index_of(kt_tune_family_find("matmul"));
  kt_tune_opts o;
  cr_assert_eq(parse(&o, "--matmul", "64x64x64", "--hist-n", "1000"), 0);
  cr_expect_str_eq(o.values[matmul][0], "64x64x64");
  cr_expect_str_eq(o.values[hist][1], "1000");
  cr_expect_str_eq(o.values[hist][0], kt_tune_families[hist]->options[0].fallback);
}

/* ---- --variants ------------------------------------------------------------ */

Test(tune_variants, globs_match_whole_names)
{
  cr_expect(kt_tune_selected(NULL, "matmul_bs16_pad0"));
  cr_expect(kt_tune_selected("matmul_bs16_pad0", "matmul_bs16_pad0"));
  cr_expect_not(kt_tune_selected("matmul_bs16", "matmul_bs16_pad0"));
  cr_expect_not(kt_tune_selected("bs16_pad0", "matmul_bs16_pad0"));
  cr_expect(kt_tune_selected("matmul_*", "matmul_bs16_pad0"));
  cr_expect_not(kt_tune_selected("matmul_*", "hist_smem_t512_r1_a0_w32_u2"));
  cr_expect(kt_tune_selected("*_pad?", "matmul_bs16_pad0"));
  cr_expect(kt_tune_selected("matmul_bs[0-9][0-9]_pad0", "matmul_bs16_pad0"));
  cr_expect(kt_tune_selected("hist_*,matmul_bs16_*", "matmul_bs16_pad0"));
  cr_expect(kt_tune_selected("hist_*,matmul_bs16_*", "hist_global_t512_a0_u2"));
  cr_expect_not(kt_tune_selected("hist_*,matmul_bs16_*", "matmul_bs8_pad0"));
  cr_expect_not(kt_tune_selected("", "matmul_bs16_pad0"));
}

/* ---- each family's problem lists ----------------------------------------- */

static int problems(const char *family, const char *v0, const char *v1, const char *v2, kt_problem *out, int max)
{
  const kt_tune_family *tf = kt_tune_family_find(family);
  cr_assert_not_null(tf);
  const char *values[KT_TUNE_MAX_OPTIONS] = {v0, v1, v2};
  for (int k = 0; tf->options[k].name; ++k)
    if (!values[k])
      values[k] = tf->options[k].fallback;
  char err[256] = "";
  int n = tf->problems(values, out, max, err, sizeof err);
  if (n < 0)
    cr_expect_neq(err[0], 0, "an error without a message");
  return n;
}

Test(tune_matmul, shapes_are_read_in_order)
{
  kt_problem p[8];
  cr_assert_eq(problems("matmul", "64x32x16,1x2x3", NULL, NULL, p, 8), 2);
  cr_expect_eq(p[0].family, KT_FAMILY_MATMUL);
  cr_expect(p[0].m == 64 && p[0].n == 32 && p[0].k == 16);
  cr_expect(p[1].m == 1 && p[1].n == 2 && p[1].k == 3);
  cr_expect_str_eq(p[0].dist, "");
  cr_expect_eq(problems("matmul", "", NULL, NULL, p, 8), 0);
}

Test(tune_matmul, the_default_shapes_parse)
{
  kt_problem p[80];
  /* The 12 hand-tuned shapes, the grid {16, 256, 4096}^3 less the two
   * points already among them, one size of 4 with the others from
   * {256, 4096}, two short-K shapes with N odd (unaligned rows), four
   * matrix-times-vector products, four vector-times-matrix ones, three
   * of few rows and few columns over a long K and three vector products
   * over a short K. */
  const int n = problems("matmul", NULL, NULL, NULL, p, 80);
  cr_assert_eq(n, 12 + 27 - 2 + 12 + 2 + 4 + 4 + 3 + 3);
  int grid = 0, four = 0, odd = 0, vec = 0, row = 0, few = 0, short_vec = 0;
  for (int i = 0; i < n; ++i) {
    few += p[i].m <= 8 && p[i].n <= 8 && p[i].k >= 4096;
    odd += p[i].n % 4 != 0 && p[i].n > 1 && p[i].k <= 64;
    vec += p[i].n == 1 && p[i].m >= 256 && p[i].k >= 256;
    row += p[i].m == 1 && p[i].n >= 32 && p[i].k >= 256;
    short_vec += (p[i].m == 1 || p[i].n == 1) && p[i].k == 16;
    grid += (p[i].m == 16 || p[i].m == 256 || p[i].m == 4096) && (p[i].n == 16 || p[i].n == 256 || p[i].n == 4096) &&
            (p[i].k == 16 || p[i].k == 256 || p[i].k == 4096);
    four += (p[i].m == 4) + (p[i].n == 4) + (p[i].k == 4) == 1 && (p[i].m * p[i].n * p[i].k) % (4 * 256 * 256) == 0;
  }
  cr_expect_eq(grid, 27);
  cr_expect_eq(four, 12);
  cr_expect_eq(odd, 2);
  cr_expect_eq(vec, 4);
  cr_expect_eq(row, 4);
  cr_expect_eq(few, 3);
  cr_expect_eq(short_vec, 3);
}

Test(tune_matmul, bad_shapes_are_errors)
{
  kt_problem p[8];
  cr_expect_eq(problems("matmul", "64x32", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "64x32x0", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "64x32x16x8", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "64x32x16,,1x1x1", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "64x32x16,", NULL, NULL, p, 8), -1); /* a trailing comma */
  cr_expect_eq(problems("matmul", ",", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "4294967296x1x1", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "1x1x1,2x2x2,3x3x3", NULL, NULL, p, 2), -1);
}

Test(tune_hist, every_distribution_of_a_problem_comes_next_to_the_others)
{
  kt_problem p[8];
  cr_assert_eq(problems("hist", "256,4096:5000", "1000", "uniform,skewed", p, 8), 4);
  const long long bins[4] = {256, 256, 4096, 4096}, n[4] = {1000, 1000, 5000, 5000};
  const char *dist[4] = {"uniform", "skewed", "uniform", "skewed"};
  for (int i = 0; i < 4; ++i) {
    cr_expect_eq(p[i].family, KT_FAMILY_HIST);
    cr_expect_eq(p[i].nbins, bins[i], "problem %d: nbins %lld", i, p[i].nbins);
    cr_expect_eq(p[i].nsamples, n[i], "problem %d: n %lld", i, p[i].nsamples);
    cr_expect_str_eq(p[i].dist, dist[i]);
  }
}

Test(tune_hist, the_default_problems_parse)
{
  kt_problem p[64];
  /* 256 to 16M bins at 2^28 samples and five at 2^20, each on uniform and on sorted samples */
  cr_assert_eq(problems("histogram", NULL, NULL, NULL, p, 64), 24);
  cr_expect_eq(p[0].nsamples, 1ll << 28);
  cr_expect_str_eq(p[0].dist, "uniform");
  cr_expect_str_eq(p[1].dist, "sorted");
  cr_expect_eq(p[13].nbins, 1ll << 24);
  cr_expect_eq(p[14].nbins, 65536);
  cr_expect_eq(p[14].nsamples, 1ll << 20);
  cr_expect_eq(p[23].nbins, 1ll << 24);
  cr_expect_eq(p[23].nsamples, 1ll << 20);
  cr_expect_str_eq(p[23].dist, "sorted");
}

/* What each distribution promises (tuner/hist.h), on the CPU. */
Test(tune_hist, every_distribution_gives_what_it_names)
{
  enum { N = 200000 };
  static int s[N];
  static unsigned c[1000];
  const long long nbins = 1000;
  for (int d = 0; kt_tune_hist_dists[d]; ++d) {
    const char *dist = kt_tune_hist_dists[d];
    kt_rng r = {12345 + d};
    kt_tune_hist_samples(s, N, nbins, dist, &r);
    long long out = 0, descents = 0, in_center = 0;
    for (int i = 0; i < N; ++i) {
      out += s[i] < 0 || s[i] >= nbins;
      descents += i > 0 && s[i] < s[i - 1];
      in_center += s[i] >= 400 && s[i] < 600; /* within 5 deviations of normal's mean */
    }
    kt_tune_hist_reference(s, N, nbins, c);
    long long sum = 0;
    for (int b = 0; b < nbins; ++b)
      sum += c[b];
    cr_expect_eq(sum, N, "%s: every sample counts", dist);
    if (!strcmp(dist, "onebin"))
      cr_expect_eq(c[nbins / 3], N, "onebin: all in bin nbins / 3");
    else if (!strcmp(dist, "halfout"))
      cr_expect(out > N * 45 / 100 && out < N * 55 / 100, "halfout: %lld of %d out of range", out, N);
    else
      cr_expect(out > N / 512 && out < N / 200, "%s: %lld of %d out of range, about 3 in 1024", dist, out, N);
    if (!strcmp(dist, "sorted"))
      cr_expect_eq(descents, 0, "sorted: %lld descents", descents);
    else if (strcmp(dist, "onebin"))
      cr_expect_gt(descents, N / 4, "%s: not sorted", dist);
    if (!strcmp(dist, "normal"))
      cr_expect_gt(in_center, N * 99 / 100, "normal: %lld of %d within 5 deviations", in_center, N);
  }
  cr_expect(kt_tune_hist_dist_known("sorted") && !kt_tune_hist_dist_known("sideways"));
}

/* Inputs as large as the tuning problems are made and counted on several
 * threads (tuner/hist.c): the count must be the one-thread count, sorted
 * must come out sorted, and the chunks must not repeat one another. */
Test(tune_hist, large_inputs_made_on_threads_count_exactly)
{
  const size_t n = ((size_t)1 << 23) + 12345; /* above the threads' threshold, no multiple of a chunk */
  const long long nbins = 100003;
  int *s = malloc(sizeof(int) * n);
  unsigned *got = malloc(sizeof(unsigned) * nbins), *want = calloc(nbins, sizeof(unsigned));
  cr_assert(s && got && want);
  for (int d = 0; kt_tune_hist_dists[d]; ++d) {
    const char *dist = kt_tune_hist_dists[d];
    kt_rng r = {777 + d};
    kt_tune_hist_samples(s, n, nbins, dist, &r);
    memset(want, 0, sizeof(unsigned) * nbins);
    size_t descents = 0, same_as_first_chunk = 0;
    for (size_t i = 0; i < n; ++i) {
      want[s[i] < 0 ? 0 : s[i] >= nbins ? nbins - 1 : s[i]]++;
      descents += i > 0 && s[i] < s[i - 1];
      same_as_first_chunk += i >= n / 2 && s[i] == s[i - n / 2];
    }
    kt_tune_hist_reference(s, n, nbins, got);
    cr_expect_arr_eq(got, want, sizeof(unsigned) * nbins, "%s: the threaded count differs", dist);
    if (!strcmp(dist, "sorted"))
      cr_expect_eq(descents, 0, "sorted: %zu descents", descents);
    else if (!strcmp(dist, "uniform"))
      cr_expect_lt(same_as_first_chunk, n / 1000, "uniform: %zu samples repeat those n/2 before", same_as_first_chunk);
  }
  free(s), free(got), free(want);
}

/* The counting sort writes its runs on threads, each chunk of the output
 * from its own place: every sample must keep its bin (the out-of-range
 * ones first as -1 and last as nbins), with few bins (a run across many
 * chunks) and many (many runs a chunk). */
Test(tune_hist, sorting_on_threads_keeps_every_sample)
{
  const size_t n = ((size_t)1 << 23) + 4321;
  const long long nbins[] = {7, 100003};
  int *s = malloc(sizeof(int) * n);
  unsigned *before = malloc(sizeof(unsigned) * 100003), *after = malloc(sizeof(unsigned) * 100003);
  cr_assert(s && before && after);
  for (int b = 0; b < 2; ++b) {
    kt_rng r = {4242 + b};
    kt_tune_hist_samples(s, n, nbins[b], "halfout", &r);
    size_t below = 0, above = 0;
    for (size_t i = 0; i < n; ++i)
      below += s[i] < 0, above += s[i] >= nbins[b];
    kt_tune_hist_reference(s, n, nbins[b], before);
    cr_assert_eq(kt_tune_hist_sort(s, n, nbins[b]), 0);
    size_t descents = 0, misplaced = 0;
    for (size_t i = 0; i < n; ++i) {
      descents += i > 0 && s[i] < s[i - 1];
      misplaced += i < below ? s[i] != -1 : i >= n - above ? s[i] != nbins[b] : s[i] < 0 || s[i] >= nbins[b];
    }
    kt_tune_hist_reference(s, n, nbins[b], after);
    cr_expect_eq(descents, 0, "%lld bins: %zu descents", nbins[b], descents);
    cr_expect_eq(misplaced, 0, "%lld bins: %zu samples out of place (%zu below, %zu above)", nbins[b], misplaced, below,
                 above);
    cr_expect_arr_eq(after, before, sizeof(unsigned) * nbins[b], "%lld bins: the sort changed the counts", nbins[b]);
  }
  free(s), free(before), free(after);
}

Test(tune_hist, bad_bins_counts_and_distributions_are_errors)
{
  kt_problem p[8];
  cr_expect_eq(problems("hist", "0", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("hist", "2147483648", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("hist", "256,x", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("hist", "256", "0", NULL, p, 8), -1);
  cr_expect_eq(problems("hist", "256", "4294967296", NULL, p, 8), -1);
  cr_expect_eq(problems("hist", "256", "1e6", NULL, p, 8), -1);
  cr_expect_eq(problems("hist", "256", NULL, "zipf", p, 8), -1);
  cr_expect_eq(problems("hist", "256,", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("hist", "256", NULL, "uniform,", p, 8), -1);
  cr_expect_eq(problems("hist", "256,512", NULL, "uniform,skewed", p, 3), -1);
}

/* ---- baselines by property ------------------------------------------------ */

Test(tune_matmul, the_reference_row_sums_in_k_order_bit_for_bit)
{
  /* Odd sizes and padded rows; products of every magnitude, and of both
   * signs, so that any reordering of the sums would round differently. */
  kt_rng r = {7};
  for (int t = 0; t < 20; ++t) {
    const int N = 1 + (int)(kt_rng_next(&r) % 77), K = 1 + (int)(kt_rng_next(&r) % 300);
    const long long ldb = N + (long long)(kt_rng_next(&r) % 5);
    float *a = malloc(sizeof(float) * (size_t)K), *B = malloc(sizeof(float) * (size_t)(K * ldb));
    double *ref = malloc(sizeof(double) * (size_t)N), *mag = malloc(sizeof(double) * (size_t)N);
    cr_assert(a && B && ref && mag);
    for (int k = 0; k < K; ++k)
      a[k] = kt_rng_float(&r) * ldexpf(1.0f, (int)(kt_rng_next(&r) % 40) - 20);
    for (long long i = 0; i < K * ldb; ++i)
      B[i] = kt_rng_float(&r) * ldexpf(1.0f, (int)(kt_rng_next(&r) % 40) - 20);
    kt_tune_matmul_reference_row(a, B, ldb, N, K, ref, mag);
    for (int j = 0; j < N; ++j) {
      double want = 0, want_mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = (double)a[k] * B[(size_t)k * ldb + j];
        want += p;
        want_mag += fabs(p);
      }
      cr_assert(ref[j] == want && mag[j] == want_mag,
                "N %d K %d ldb %lld, column %d: %.17g (%.17g), want %.17g (%.17g)", N, K, ldb, j, ref[j], mag[j], want,
                want_mag);
    }
    free(a);
    free(B);
    free(ref);
    free(mag);
  }
}

Test(tune_matmul, the_reference_on_threads_is_row_for_row_the_reference_row)
{
  /* Products large enough to split over every thread the host has (a
   * million products or more) and small ones that stay on one; rows of A
   * padded, so that a thread that took the wrong row's start would show. */
  kt_rng r = {11};
  for (int t = 0; t < 6; ++t) {
    const int M = t % 2 ? 1 + (int)(kt_rng_next(&r) % 9) : 100 + (int)(kt_rng_next(&r) % 157),
              N = 1 + (int)(kt_rng_next(&r) % 200), K = 1 + (int)(kt_rng_next(&r) % 400);
    const long long lda = K + 1 + (long long)(kt_rng_next(&r) % 3), ldb = N + (long long)(kt_rng_next(&r) % 4);
    float *A = malloc(sizeof(float) * (size_t)(M * lda)), *B = malloc(sizeof(float) * (size_t)(K * ldb));
    double *ref = malloc(sizeof(double) * (size_t)M * N), *mag = malloc(sizeof(double) * (size_t)M * N);
    double *row = malloc(sizeof(double) * (size_t)N), *row_mag = malloc(sizeof(double) * (size_t)N);
    cr_assert(A && B && ref && mag && row && row_mag);
    for (long long i = 0; i < M * lda; ++i)
      A[i] = kt_rng_float(&r) * ldexpf(1.0f, (int)(kt_rng_next(&r) % 40) - 20);
    for (long long i = 0; i < K * ldb; ++i)
      B[i] = kt_rng_float(&r) * ldexpf(1.0f, (int)(kt_rng_next(&r) % 40) - 20);
    kt_tune_matmul_reference(A, lda, B, ldb, M, N, K, ref, mag);
    for (int i = 0; i < M; ++i) {
      kt_tune_matmul_reference_row(A + (size_t)i * lda, B, ldb, N, K, row, row_mag);
      for (int j = 0; j < N; ++j)
        cr_assert(ref[(size_t)i * N + j] == row[j] && mag[(size_t)i * N + j] == row_mag[j],
                  "%dx%dx%d lda %lld ldb %lld: (%d, %d) %.17g, the row gives %.17g", M, N, K, lda, ldb, i, j,
                  ref[(size_t)i * N + j], row[j]);
    }
    free(A);
    free(B);
    free(ref);
    free(mag);
    free(row);
    free(row_mag);
  }
}

static float unit_value(kt_rng *r)
{
  return kt_rng_float(r);
}

static void mark_chunk(size_t lo, size_t hi, size_t c, void *p)
{
  int *owner = p;
  for (size_t i = lo; i < hi; ++i)
    owner[i] += (int)c + 1;
}

/* A tuned problem's inputs are drawn on threads, a stream per chunk of
 * 2^20 seeded from the seed and the chunk's index: the numbers do not
 * depend on the threads, and every element is drawn once. */
Test(tune_measure, fill_draws_each_chunk_from_a_stream_of_its_own)
{
  const size_t chunk = (size_t)1 << 20, n = 3 * chunk + 12345;
  float *x = malloc(sizeof(float) * n);
  int *owner = calloc(n, sizeof(int));
  cr_assert(x && owner);
  kt_measure_fill(x, n, 77, unit_value);
  for (size_t c = 0; c * chunk < n; ++c) {
    kt_rng s = {77 + c}, r = {kt_rng_next(&s)};
    for (size_t i = c * chunk; i < n && i < (c + 1) * chunk; ++i) {
      const float want = kt_rng_float(&r);
      cr_assert(x[i] == want, "x[%zu] = %g, want %g", i, x[i], want);
    }
  }
  kt_measure_chunks(n, 1000, mark_chunk, owner);
  for (size_t i = 0; i < n; ++i)
    cr_assert_eq(owner[i], (int)(i / 1000) + 1, "element %zu", i);
  free(x);
  free(owner);
}

typedef struct sum_job {
  long lo, hi, sum;
} sum_job;

static void *sum_range(void *p)
{
  sum_job *j = p;
  j->sum = 0;
  for (long i = j->lo; i < j->hi; ++i)
    j->sum += i;
  return NULL;
}

/* Threads each running batches of every size at once (the histogram
 * bench makes its samples so): every job of every batch runs, once, before
 * its caller returns. */
static void *batches(void *p)
{
  long *bad = p;
  for (int it = 0; it < 400; ++it) {
    const int t = 2 + it % (KT_MEASURE_MAX_THREADS - 1);
    const long n = 1000 + it % 777;
    sum_job jobs[KT_MEASURE_MAX_THREADS];
    for (int i = 0; i < t; ++i)
      jobs[i] = (sum_job){n * i / t, n * (i + 1) / t, -1};
    kt_measure_run_all(sum_range, jobs, sizeof jobs[0], t);
    long sum = 0;
    for (int i = 0; i < t; ++i)
      sum += jobs[i].sum;
    *bad += sum != n * (n - 1) / 2;
  }
  return NULL;
}

Test(tune_measure, batches_from_several_threads_at_once_each_run_whole)
{
  pthread_t th[4];
  long bad[4] = {0};
  for (int i = 0; i < 4; ++i)
    cr_assert_eq(pthread_create(&th[i], NULL, batches, &bad[i]), 0);
  for (int i = 0; i < 4; ++i) {
    pthread_join(th[i], NULL);
    cr_expect_eq(bad[i], 0, "thread %d: %ld batches came back short", i, bad[i]);
  }
}

Test(tune_gemm, the_reference_is_the_element_wise_sum_of_the_rounded_inputs_bit_for_bit)
{
  /* Every type and op pair, padded rows, full FP32 inputs (which TF32 and
   * BF16 round), against the element-at-a-time loop over the stored
   * operands that the check's reference replaced. */
  kt_rng r = {11};
  const int types[] = {KT_F32, KT_TF32, KT_BF16, KT_F16};
  for (int t = 0; t < 16; ++t) {
    kt_tune_gemm_case cs = {.type = types[t % 4], .op_a = (t / 4) >> 1, .op_b = (t / 4) & 1, .batch = 1};
    cs.M = 1 + (int)(kt_rng_next(&r) % 70), cs.N = 1 + (int)(kt_rng_next(&r) % 70);
    cs.K = 1 + (int)(kt_rng_next(&r) % 150), cs.pad = (int)(kt_rng_next(&r) % 5);
    cs.alpha = 1.0f, cs.beta = 0.0f;
    const int M = cs.M, N = cs.N, K = cs.K;
    const long long ar = cs.op_a ? K : M, ac = cs.op_a ? M : K, br = cs.op_b ? N : K, bc = cs.op_b ? K : N;
    const long long lda = ac + cs.pad, ldb = bc + cs.pad;
    float *A = malloc(sizeof(float) * (size_t)(ar * lda)), *B = malloc(sizeof(float) * (size_t)(br * ldb));
    double *ref = malloc(sizeof(double) * (size_t)(M * N)), *mag = malloc(sizeof(double) * (size_t)(M * N));
    cr_assert(A && B && ref && mag);
    /* F16 takes its inputs as drawn representable (kt_tune_gemm_value). */
    for (long long i = 0; i < ar * lda; ++i)
      A[i] = cs.type == KT_F16 ? kt_tune_gemm_value(&r, KT_F16) : kt_rng_float(&r);
    for (long long i = 0; i < br * ldb; ++i)
      B[i] = cs.type == KT_F16 ? kt_tune_gemm_value(&r, KT_F16) : kt_rng_float(&r);
    cr_assert_eq(kt_tune_gemm_reference(&cs, A, lda, B, ldb, ref, mag), 0);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double want = 0, want_mag = 0;
        for (int k = 0; k < K; ++k) {
          const double x = kt_tune_gemm_round(A[cs.op_a ? (long long)k * lda + i : (long long)i * lda + k], cs.type);
          const double y = kt_tune_gemm_round(B[cs.op_b ? (long long)j * ldb + k : (long long)k * ldb + j], cs.type);
          want += x * y;
          want_mag += fabs(x * y);
        }
        cr_assert(ref[(size_t)i * N + j] == want && mag[(size_t)i * N + j] == want_mag,
                  "type %d op %d%d %dx%dx%d pad %d: (%d, %d) %.17g, want %.17g", cs.type, cs.op_a, cs.op_b, M, N, K,
                  cs.pad, i, j, ref[(size_t)i * N + j], want);
      }
    free(A);
    free(B);
    free(ref);
    free(mag);
  }
}

Test(tune_matmul, the_seed_is_the_guide_kernel_with_bs16_unpadded)
{
  const kt_variant *v = kt_tune_matmul_seed();
  cr_assert_not_null(v, "no seed kernel in the registry");
  cr_expect_eq(v->family, KT_FAMILY_MATMUL);
  cr_expect_str_eq(v->algo, "tiled");
  cr_expect_str_eq(kt_variant_param(v, "bs"), "16");
  cr_expect_str_eq(kt_variant_param(v, "pad"), "0");
}

Test(tune_hist, the_guide_layout_is_the_blocked_one)
{
  const kt_param blocked[] = {{"cluster", "4"}, {"layout", "blocked"}}, cyclic[] = {{"layout", "cyclic"}};
  kt_variant v = {.name = "x", .family = KT_FAMILY_HIST, .algo = "dsm", .params = blocked, .nparams = 2};
  cr_expect(kt_tune_hist_guide_layout(&v));
  v.params = cyclic, v.nparams = 1;
  cr_expect_not(kt_tune_hist_guide_layout(&v));
  v.nparams = 0;
  cr_expect_not(kt_tune_hist_guide_layout(&v));
  v.params = blocked, v.nparams = 2, v.family = KT_FAMILY_MATMUL;
  cr_expect_not(kt_tune_hist_guide_layout(&v));
}

/* ---- which GPUs --------------------------------------------------------------- */

/* GPU 0 and 1 of one chip (1 with more memory), 2 of another. */
static void three_gpus(kt_device_info g[3])
{
  g[0] = kt_test_device("Test GPU", 90, 1);
  g[1] = g[0];
  g[1].mem_bytes *= 2;
  kt_device_fingerprint(&g[1]);
  g[2] = kt_test_device("Older GPU", 80, 0);
  for (int i = 0; i < 3; ++i)
    g[i].ordinal = i;
}

Test(tune_gpus, by_default_every_gpu_of_the_current_ones_chip)
{
  kt_device_info g[3];
  three_gpus(g);
  int chosen[3];
  char err[256];
  cr_assert_eq(kt_tune_select_gpus(NULL, g, 3, 0, chosen, err, sizeof err), 2, "%s", err);
  cr_expect(chosen[0] == 0 && chosen[1] == 1);
  cr_assert_eq(kt_tune_select_gpus("all", g, 3, 1, chosen, err, sizeof err), 2, "%s", err);
  cr_assert_eq(kt_tune_select_gpus(NULL, g, 3, 2, chosen, err, sizeof err), 1, "%s", err);
  cr_expect_eq(chosen[0], 2);
}

Test(tune_gpus, a_list_names_gpus_of_one_chip)
{
  kt_device_info g[3];
  three_gpus(g);
  int chosen[3];
  char err[256];
  cr_assert_eq(kt_tune_select_gpus("1,0", g, 3, 0, chosen, err, sizeof err), 2, "%s", err);
  cr_expect(chosen[0] == 1 && chosen[1] == 0);
  cr_assert_eq(kt_tune_select_gpus("2", g, 3, 0, chosen, err, sizeof err), 1, "%s", err);
  const char *bad[] = {"0,2", "3", "-1", "0,0", "", "x", ",0", "1x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    err[0] = 0;
    cr_expect_eq(kt_tune_select_gpus(bad[i], g, 3, 0, chosen, err, sizeof err), -1, "--gpus '%s'", bad[i]);
    cr_expect_neq(err[0], 0, "--gpus '%s' without a message", bad[i]);
  }
}

Test(tune_options, gpus_and_fresh_are_read)
{
  kt_tune_opts o;
  cr_assert_eq(parse(&o, NULL, NULL, NULL, NULL), 0);
  cr_expect_null(o.gpus);
  cr_expect_not(o.fresh);
  cr_assert_eq(parse(&o, "--fresh", "--gpus", "0,1", NULL), 0);
  cr_expect_str_eq(o.gpus, "0,1");
  cr_expect(o.fresh);
  cr_assert_eq(parse(&o, "--gpus", "all", "--fresh", NULL), 0);
  cr_expect(o.fresh);
}

/* ---- resuming, and spreading over GPUs, with a fake worker ------------------ */

/* Speaks the worker protocol (worker.c: `__worker DEVICE`, the job on
 * stdin); each result is a function of the variant, the
 * problem and the distribution (some wrong), so every run ranks alike.  It
 * logs each measurement to measured.log and each worker's GPU to gpus.log,
 * and when measured.log reaches $KILL_AT lines it kills the tuner (its
 * parent) with SIGKILL, mid-measurement: after a pause, so that the tuner
 * has read and recorded every result sent before (whatever lags in the
 * pipe when a real tune is killed is in flight too). */
static const char *TUNE_WORKER =
    "#!/bin/sh\n"
    "read -r family || exit 0\n"
    "read -r key; read -r dist; read -r seed\n"
    "echo \"$2\" >> \"$LOG_DIR/gpus.log\"\n"
    "while read -r name; do\n"
    "  echo \"START $name\"\n"
    "  echo \"$name $key $dist\" >> \"$LOG_DIR/measured.log\"\n"
    "  if [ -n \"$KILL_AT\" ] && [ $(($(wc -l < \"$LOG_DIR/measured.log\"))) -ge \"$KILL_AT\" ]; then\n"
    "    sleep 0.5; kill -9 $PPID; sleep 10; fi\n"
    "  t=$(printf '%s' \"$name $key $dist\" | cksum | cut -d' ' -f1)\n"
    "  if [ $((t % 7)) -eq 0 ]; then echo \"RESULT $name wrong 0 0 9 1 off by \\\"one\\\"\";\n"
    "  else echo \"RESULT $name ok $((t % 997 + 1)).25 $((t % 500)) 0.5 5 -\"; fi\n"
    "done\n";

static char tune_exe[PATH_MAX], variants[4096];

static void tune_setup(void)
{
  kt_test_mkdir();
  kt_test_path(tune_exe, sizeof tune_exe, "fake-worker.sh");
  kt_test_write_file(tune_exe, TUNE_WORKER);
  cr_assert_eq(chmod(tune_exe, 0755), 0);
  setenv("LOG_DIR", kt_test_dir, 1);
  unsetenv("KILL_AT");
  /* Five variants of each family, whatever this build holds. */
  variants[0] = 0;
  kt_test_pred preds[2] = {kt_test_is_matmul, kt_test_is_hist};
  for (int f = 0; f < 2; ++f)
    for (int i = 0; i < 5; ++i) {
      const kt_variant *v = kt_test_need(preds[f], i, "a variant");
      snprintf(variants + strlen(variants), sizeof variants - strlen(variants), "%s%s", variants[0] ? "," : "",
               v->name);
    }
}

static void tune_teardown(void)
{
  kt_test_rmdir();
}

TestSuite(tune_resume, .init = tune_setup, .fini = tune_teardown, .timeout = 240);

enum { PROBLEM_RUNS = 2 + 2 * 2, MEASUREMENTS = 5 * 2 + 5 * 2 * 2 }; /* 2 shapes; 2 bin counts x 2 distributions */

/* `ktune tune` on described GPUs into db, in a child process (so that the
 * fake worker may kill it), its output in tune.out; its wait status. */
static int tune(const char *db, const kt_device_info *gpus, int ngpus, const char *kill_at, int fresh)
{
  char out[PATH_MAX];
  kt_test_path(out, sizeof out, "tune.out");
  fflush(NULL);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    if (kill_at)
      setenv("KILL_AT", kill_at, 1);
    if (!freopen(out, "a", stdout) || !freopen(out, "a", stderr))
      _exit(40);
    char *argv[] = {"ktune",     "tune",       "--db",
                    (char *)db,  "--matmul",   "64x64x64,96x96x96",
                    "--hist",    "256,4096",   "--hist-n",
                    "1000",      "--variants", variants,
                    "--timeout", "20",         fresh ? "--fresh" : NULL,
                    NULL};
    int argc = 0;
    while (argv[argc])
      ++argc;
    kt_tune_opts o;
    if (kt_tune_parse_args(argc, argv, &o) != 0)
      _exit(41);
    kt_db *h = NULL;
    char err[512];
    if (kt_db_open(&h, db, KT_DB_WRITE, err, sizeof err) != KT_OK)
      _exit(42);
    int rc = kt_tune_gpus(&o, gpus, ngpus, h, tune_exe);
    kt_db_close(h);
    fflush(NULL);
    _exit(rc);
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  return status;
}

static int tune_ok(const char *db, const kt_device_info *gpus, int ngpus, int fresh)
{
  int status = tune(db, gpus, ngpus, NULL, fresh);
  char out[PATH_MAX];
  size_t len;
  char *text = (char *)kt_test_slurp(kt_test_path(out, sizeof out, "tune.out"), &len);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tune failed (%d): %.*s", status, (int)len, text);
  free(text);
  return 0;
}

/* Lines in a log of the test directory, which is then emptied. */
static int log_lines(const char *name)
{
  const int n = kt_test_lines(name);
  char path[PATH_MAX];
  unlink(kt_test_path(path, sizeof path, name));
  return n;
}

/* Each problem's ranking on one device, as text. */
static char *rankings(const char *db, const char *fingerprint)
{
  char sql[1024];
  snprintf(sql, sizeof sql,
           "SELECT group_concat(x, ';') FROM (SELECT family || ' ' || problem || ' ' || rank || ' ' || variant ||"
           " ' ' || printf('%%.6g', time_ms) AS x FROM winners WHERE device = '%s' ORDER BY family, problem, rank)",
           fingerprint);
  return kt_test_sql_text(db, sql);
}

static void expect_each_measured_once(const char *db, int devices)
{
  cr_expect_eq(kt_test_sql_int(db, "SELECT count(*) FROM measurements"), devices * MEASUREMENTS);
  cr_expect_eq(kt_test_sql_int(db, "SELECT count(*) FROM (SELECT 1 FROM measurements GROUP BY device, problem, dist,"
                                   " variant HAVING count(*) > 1)"),
               0, "measured twice");
}

/* The reference: one uninterrupted tune. */
static char *reference(const kt_device_info *gpu)
{
  char ref[PATH_MAX];
  kt_test_path(ref, sizeof ref, "reference.db");
  tune_ok(ref, gpu, 1, 0);
  cr_assert_eq(log_lines("measured.log"), MEASUREMENTS);
  log_lines("gpus.log");
  expect_each_measured_once(ref, 1);
  char *r = rankings(ref, gpu->fingerprint);
  cr_assert_gt(strlen(r), 0);
  return r;
}

Test(tune_resume, a_tune_killed_at_any_point_resumes_to_the_same_rankings_measuring_only_what_was_in_flight)
{
  kt_device_info gpu = kt_test_device("Test GPU", 90, 1);
  char *want = reference(&gpu);
  unsigned seed = (unsigned)getpid();
  int points[5] = {1, MEASUREMENTS / 2, MEASUREMENTS};
  for (int k = 3; k < 5; ++k)
    points[k] = 1 + (int)(rand_r(&seed) % MEASUREMENTS);
  for (int k = 0; k < 5; ++k) {
    char db[PATH_MAX], name[32], at[16];
    snprintf(name, sizeof name, "killed-%d.db", k);
    kt_test_path(db, sizeof db, name);
    snprintf(at, sizeof at, "%d", points[k]);
    int status = tune(db, &gpu, 1, at, 0);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the tune was not killed at %d", points[k]);
    cr_assert_eq(log_lines("measured.log"), points[k]);
    const long long kept = kt_test_exists(db) ? kt_test_sql_int(db, "SELECT count(*) FROM measurements") : 0;
    cr_expect_eq(kept, points[k] - 1, "killed at %d: every result but the one in flight is kept (%lld kept)",
                 points[k], kept);
    tune_ok(db, &gpu, 1, 0);
    cr_expect_eq(log_lines("measured.log"), MEASUREMENTS - kept,
                 "killed at %d with %lld recorded: the resumed tune measures only the rest", points[k], kept);
    expect_each_measured_once(db, 1);
    char *got = rankings(db, gpu.fingerprint);
    cr_expect_str_eq(got, want, "killed at %d", points[k]);
    free(got);
  }
  free(want);
}

Test(tune_resume, a_kill_between_recording_and_ranking_is_ranked_on_resume_without_measuring)
{
  kt_device_info gpu = kt_test_device("Test GPU", 90, 1);
  char *want = reference(&gpu);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "reference.db");
  kt_test_sql(db, "DELETE FROM winners");
  tune_ok(db, &gpu, 1, 0);
  cr_expect_eq(log_lines("gpus.log"), 0, "a worker started");
  char *got = rankings(db, gpu.fingerprint);
  cr_expect_str_eq(got, want);
  /* The summary still shows every problem, from the recorded results. */
  char out[PATH_MAX];
  size_t len;
  char *text = (char *)kt_test_slurp(kt_test_path(out, sizeof out, "tune.out"), &len);
  text = realloc(text, len + 1);
  text[len] = 0;
  cr_expect_not_null(strstr(text, "0 measurements"), "%s", text);
  cr_expect_not_null(strstr(text, "96x96x96"), "%s", text);
  cr_expect_not_null(strstr(text, "nbins=4096"), "%s", text);
  free(text), free(got), free(want);
}

/* An ok result whose time is gone (NULL: a row edited by hand; import
 * refuses them) was taken as recorded at 0 ms, so it ranked first; it is
 * measured again instead, and the rankings come out as the reference's. */
Test(tune_resume, an_ok_result_without_a_time_is_measured_again)
{
  kt_device_info gpu = kt_test_device("Test GPU", 90, 1);
  char *want = reference(&gpu);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "reference.db");
  kt_test_sql(db, "UPDATE measurements SET time_ms = NULL WHERE rowid = (SELECT min(rowid) FROM measurements"
                  " WHERE status = 'ok' AND family = 'matmul')");
  kt_test_sql(db, "DELETE FROM winners");
  tune_ok(db, &gpu, 1, 0);
  cr_expect_eq(log_lines("measured.log"), 1, "the result without a time, and it alone, measured again");
  char *got = rankings(db, gpu.fingerprint);
  cr_expect_str_eq(got, want);
  free(got), free(want);
}

Test(tune_resume, fresh_measures_everything_again)
{
  kt_device_info gpu = kt_test_device("Test GPU", 90, 1);
  char *want = reference(&gpu);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "reference.db");
  tune_ok(db, &gpu, 1, 1);
  cr_expect_eq(log_lines("measured.log"), MEASUREMENTS);
  cr_expect_eq(kt_test_sql_int(db, "SELECT count(*) FROM measurements"), 2 * MEASUREMENTS);
  char *got = rankings(db, gpu.fingerprint);
  cr_expect_str_eq(got, want);
  free(got), free(want);
}

Test(tune_resume, two_gpus_of_one_fingerprint_share_the_work)
{
  kt_device_info gpus[2] = {kt_test_device("Test GPU", 90, 1), kt_test_device("Test GPU", 90, 1)};
  gpus[1].ordinal = 1;
  char *want = reference(&gpus[0]);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "two.db");
  tune_ok(db, gpus, 2, 0);
  cr_expect_eq(log_lines("measured.log"), MEASUREMENTS);
  char path[PATH_MAX];
  size_t len;
  char *text = (char *)kt_test_slurp(kt_test_path(path, sizeof path, "gpus.log"), &len);
  int on[2] = {0, 0};
  for (size_t i = 0; i < len; ++i)
    if ((text[i] == '0' || text[i] == '1') && (i == 0 || text[i - 1] == '\n'))
      ++on[text[i] - '0'];
  free(text);
  cr_expect_eq(on[0], PROBLEM_RUNS, "a worker on GPU 0 for every problem");
  cr_expect_eq(on[1], PROBLEM_RUNS, "a worker on GPU 1 for every problem");
  expect_each_measured_once(db, 1);
  char *got = rankings(db, gpus[0].fingerprint);
  cr_expect_str_eq(got, want);
  free(got), free(want);
}

Test(tune_resume, gpus_of_one_chip_with_other_memory_each_get_their_own_whole_ranking)
{
  kt_device_info gpus[2] = {kt_test_device("Test GPU", 90, 1), kt_test_device("Test GPU", 90, 1)};
  gpus[1].ordinal = 1;
  gpus[1].mem_bytes *= 2;
  kt_device_fingerprint(&gpus[1]);
  char *want = reference(&gpus[0]);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "two.db");
  tune_ok(db, gpus, 2, 0);
  cr_expect_eq(log_lines("measured.log"), 2 * MEASUREMENTS, "each measures everything, under its own fingerprint");
  expect_each_measured_once(db, 2);
  for (int g = 0; g < 2; ++g) {
    char *got = rankings(db, gpus[g].fingerprint);
    cr_expect_str_eq(got, want, "%s", gpus[g].fingerprint);
    free(got);
  }
  free(want);
}

/* ---- tuning what applications called (runtime/misses.c) -------------------- */

/* kt_tune_gpus in this process, into db with the five variants of each
 * family and these arguments after `ktune tune --db DB`; its return. */
static int tune_with(const char *db, const kt_device_info *gpu, const char *a0, const char *a1, const char *a2,
                     const char *a3, const char *a4, const char *a5)
{
  char *argv[16] = {"ktune", "tune", "--db", (char *)db, "--variants", variants, "--timeout", "20"};
  const char *more[] = {a0, a1, a2, a3, a4, a5, NULL};
  int argc = 8;
  for (int i = 0; more[i]; ++i)
    argv[argc++] = (char *)more[i];
  kt_tune_opts o;
  cr_assert_eq(kt_tune_parse_args(argc, argv, &o), 0);
  kt_db *h = NULL;
  char err[512];
  cr_assert_eq(kt_db_open(&h, db, KT_DB_WRITE, err, sizeof err), KT_OK, "%s", err);
  fflush(NULL);
  const int rc = kt_tune_gpus(&o, gpu, 1, h, tune_exe);
  kt_db_close(h);
  return rc;
}

/* How many lines of measured.log name this problem key. */
static int measured(const char *key)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "measured.log");
  if (!kt_test_exists(path))
    return 0;
  size_t len;
  char *text = (char *)kt_test_slurp(path, &len);
  text = realloc(text, len + 1);
  text[len] = 0;
  int n = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    const char *sp = strchr(line, ' ');
    n += sp && strncmp(sp + 1, key, strlen(key)) == 0 && sp[1 + strlen(key)] == ' ';
  }
  free(text);
  return n;
}

static void write_misses(const char *db, const kt_device_info *gpu)
{
  char path[PATH_MAX + 8], text[2048];
  kt_misses_path(db, path, sizeof path);
  snprintf(text, sizeof text,
           "%s\n"
           "%s\tmatmul\t48x40x24\t3\n"
           "%s\thist\tnbins=300 n=1000\t1\n"
           "Another GPU|sm_80|108 SMs|40960 MiB\tmatmul\t7x7x7\t9\n",
           KT_MISSES_HEADER, gpu->fingerprint, gpu->fingerprint);
  kt_test_write_file(path, text);
}

Test(tune_resume, misses_tunes_exactly_the_recorded_misses_of_this_gpu_and_clears_them)
{
  kt_device_info gpu = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, path, sizeof path);
  write_misses(db, &gpu);
  cr_assert_eq(tune_with(db, &gpu, "--misses", "--dists", "uniform,skewed", NULL, NULL, NULL), 0);
  /* Five variants each; the histogram in both distributions. */
  cr_expect_eq(measured("48x40x24"), 5);
  cr_expect_eq(measured("nbins=300 n=1000"), 10);
  cr_expect_eq(log_lines("measured.log"), 15, "only the misses were measured");
  cr_expect_eq(kt_test_sql_int(db, "SELECT count(DISTINCT problem) FROM winners"), 2);
  /* Tuned: gone from the file; another GPU's stay. */
  kt_misses_entry *e = NULL;
  int n = 0;
  char err[PATH_MAX + 200];
  cr_assert_eq(kt_misses_read(path, &e, &n, err, sizeof err), KT_OK, "%s", err);
  cr_expect_eq(n, 1);
  cr_expect(n == 1 && strcmp(e[0].key, "7x7x7") == 0);
  free(e);
  /* Nothing left for this GPU: nothing to do. */
  cr_assert_eq(tune_with(db, &gpu, "--misses", NULL, NULL, NULL, NULL, NULL), 0);
  cr_expect_eq(log_lines("measured.log"), 0);
}

Test(tune_resume, a_default_problem_list_takes_the_misses_too_and_a_given_one_does_not)
{
  kt_device_info gpu = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "user.db");
  write_misses(db, &gpu);
  /* The histogram's default bins, and the miss; matmul's list is given. */
  cr_assert_eq(tune_with(db, &gpu, "--hist-n", "1000", "--dists", "uniform", "--matmul", "64x64x64"), 0);
  cr_expect_eq(measured("nbins=300 n=1000"), 5);
  cr_expect_eq(measured("nbins=256 n=1000"), 5, "the defaults were not tuned");
  cr_expect_eq(measured("48x40x24"), 0, "a given --matmul list took the misses");
  cr_expect_eq(measured("64x64x64"), 5);
  kt_problem d[64];
  const int defaults = problems("histogram", NULL, "1000", "uniform", d, 64); /* as many as the defaults are */
  cr_assert_gt(defaults, 0);
  cr_expect_eq(log_lines("measured.log"), 5 * (defaults + 1) + 5);
}

/* A file of someone else's where the misses file goes holds no misses: the
 * tune goes on without them and leaves the file as it is. */
Test(tune_resume, a_file_that_is_not_ktunes_in_the_misses_place_is_read_as_none_and_left_alone)
{
  kt_device_info gpu = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, path, sizeof path);
  kt_test_write_file(path, "my notes\n");
  cr_assert_eq(tune_with(db, &gpu, "--matmul", "64x64x64", NULL, NULL, NULL, NULL), 0);
  cr_expect_eq(measured("64x64x64"), 5);
  size_t len;
  char *text = (char *)kt_test_slurp(path, &len);
  cr_expect(len == 9 && memcmp(text, "my notes\n", len) == 0, "the file was changed");
  free(text);
}

/* ---- make tune SHAPES=FILE ------------------------------------------------- */

Test(tune_resume, a_shapes_file_is_read_line_by_line_with_comments)
{
  char path[PATH_MAX], arg[PATH_MAX + 1];
  kt_test_path(path, sizeof path, "shapes.txt");
  kt_test_write_file(path, "# shapes our model calls\n"
                           "64x32x16\n"
                           "\n"
                           "  1x2x3   # padded, with a comment\n"
                           "\t5x6x7\r\n");
  snprintf(arg, sizeof arg, "@%s", path);
  kt_problem p[8];
  cr_assert_eq(problems("matmul", arg, NULL, NULL, p, 8), 3);
  cr_expect(p[0].m == 64 && p[0].n == 32 && p[0].k == 16);
  cr_expect(p[1].m == 1 && p[1].n == 2 && p[1].k == 3);
  cr_expect(p[2].m == 5 && p[2].n == 6 && p[2].k == 7);
  cr_expect_eq(p[2].family, KT_FAMILY_MATMUL);
  cr_expect_eq(problems("matmul", arg, NULL, NULL, p, 2), -1, "more shapes than room");
}

Test(tune_resume, a_bad_line_of_a_shapes_file_is_an_error_that_names_the_line)
{
  char path[PATH_MAX], arg[PATH_MAX + 1], err[512];
  kt_test_path(path, sizeof path, "shapes.txt");
  snprintf(arg, sizeof arg, "@%s", path);
  kt_problem p[8];
  const char *bad[] = {"64x32x16\n64x32\n", "1x1x1\n1x1x1,2x2x2\n", "0x1x1\n", "1x1x1 2x2x2\n", "# only a comment\n",
                       "4294967296x1x1\n"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    kt_test_write_file(path, bad[i]);
    err[0] = 0;
    cr_expect_eq(kt_tune_matmul_shapes_file(path, p, 8, err, sizeof err), -1, "%s", bad[i]);
    cr_expect_not_null(strstr(err, path), "%s: %s", bad[i], err);
  }
  kt_test_write_file(path, "1x1x1\n64x32\n");
  kt_tune_matmul_shapes_file(path, p, 8, err, sizeof err);
  cr_expect_not_null(strstr(err, ":2: bad shape '64x32'"), "%s", err);
  kt_test_path(path, sizeof path, "none.txt");
  snprintf(arg, sizeof arg, "@%s", path);
  cr_expect_eq(problems("matmul", arg, NULL, NULL, p, 8), -1, "a missing file");
}

/* ---- a timing's time from its runs (kt_measure_typical) ------------------- */

/* Runs whose times alternate slow and fast, as a Hopper kernel's may
 * (measure.c): the fast value, whichever parity the slow runs have; the
 * median of all would be half-way or the slow value. */
Test(tune_measure, runs_that_alternate_give_the_fast_value_whichever_runs_are_slow)
{
  for (int slow_parity = 0; slow_parity < 2; ++slow_parity)
    for (int n = 10; n <= 51; ++n) {
      double t[64], scratch[64], copy[64];
      kt_rng r = {(uint64_t)(1000 * slow_parity + n)};
      for (int i = 0; i < n; ++i)
        t[i] = 7.0 + 0.02 * kt_rng_float(&r) + ((i & 1) == slow_parity ? 0.7 : 0.0);
      memcpy(copy, t, sizeof t);
      const double got = kt_measure_typical(t, n, scratch);
      cr_expect(got > 6.97 && got < 7.03, "slow parity %d, %d runs: %g, not the fast value", slow_parity, n, got);
      cr_expect(memcmp(copy, t, sizeof(double) * (size_t)n) == 0, "the runs' times were changed");
    }
}

/* Runs that do not alternate: a value between the fastest run and the
 * whole median, close to the median; one fast outlier (or slow runs here
 * and there, as noise) moves it no further. */
Test(tune_measure, runs_that_do_not_alternate_give_about_the_median)
{
  double t[40], scratch[40], sorted[40];
  kt_rng r = {99};
  for (int i = 0; i < 40; ++i)
    t[i] = 10.0 + 0.2 * kt_rng_float(&r) + (i % 7 == 3 ? 1.0 : 0.0);
  t[17] = 1.0;
  memcpy(sorted, t, sizeof t);
  const double median = kt_measure_median(sorted, 40);
  const double got = kt_measure_typical(t, 40, scratch);
  cr_expect(got <= median && got > median - 0.1, "typical %g, median %g", got, median);
  for (int i = 0; i < 40; ++i)
    t[i] = 3.25;
  cr_expect_eq(kt_measure_typical(t, 40, scratch), 3.25);
}

/* Under 10 runs the halves are too small: exactly the median, even where
 * the runs alternate. */
Test(tune_measure, few_runs_give_the_median_of_all)
{
  double scratch[9];
  const double five[] = {5.0, 1.0, 4.0, 2.0, 3.0};
  cr_expect_eq(kt_measure_typical(five, 5, scratch), 3.0);
  const double alt[] = {8, 7, 8, 7, 8, 7, 8, 7, 8};
  cr_expect_eq(kt_measure_typical(alt, 9, scratch), 8.0);
  const double four[] = {8, 7, 8, 7};
  cr_expect_eq(kt_measure_typical(four, 4, scratch), 7.5);
  cr_expect(isnan(kt_measure_typical(five, 0, scratch)));
}
