/* SPDX-License-Identifier: MIT */
/* tests/test_tune.c: `ktune tune` without a GPU: its arguments (tune.c),
 * the table of the tuner's families (family.c), and what each family's
 * file (matmul.c, hist.c) reads from its options and finds in the
 * registry. */
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
  kt_problem p[64];
  cr_expect_eq(problems("matmul", NULL, NULL, NULL, p, 64), 12);
}

Test(tune_matmul, bad_shapes_are_errors)
{
  kt_problem p[8];
  cr_expect_eq(problems("matmul", "64x32", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "64x32x0", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "64x32x16x8", NULL, NULL, p, 8), -1);
  cr_expect_eq(problems("matmul", "64x32x16,,1x1x1", NULL, NULL, p, 8), -1);
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
  cr_assert_eq(problems("histogram", NULL, NULL, NULL, p, 64), 10);
  cr_expect_eq(p[0].nsamples, 1ll << 28);
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
  cr_expect_eq(problems("hist", "256,512", NULL, "uniform,skewed", p, 3), -1);
}

/* ---- baselines by property ------------------------------------------------ */

Test(tune_matmul, the_seed_is_the_guide_kernel_with_bs16_unpadded)
{
  const kt_variant *v = kt_tune_matmul_seed();
  cr_assert_not_null(v, "no seed kernel in the registry");
  cr_expect_eq(v->family, KT_FAMILY_MATMUL);
  cr_expect_str_eq(v->algo, "tiled");
  cr_expect_str_eq(kt_tune_family_param(v, "bs"), "16");
  cr_expect_str_eq(kt_tune_family_param(v, "pad"), "0");
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
