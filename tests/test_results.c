/* SPDX-License-Identifier: MIT */
/* tests/test_results.c: where tuned results live and how the layers stack
 * (runtime/results.c), on described devices: no GPU.
 *
 *   make build/tests/test_results && build/tests/test_results --jobs=1
 */
#include "kt_test.h"

static void setup(void)
{
  kt_test_mkdir();
  unsetenv("KTUNE_DB");
  unsetenv("KTUNE_SYSTEM_DB");
  unsetenv("KTUNE_LOG");
}

static void teardown(void)
{
  kt_test_rmdir();
}

TestSuite(results, .init = setup, .fini = teardown);

#define A16 ((const float *)0x10000)

typedef struct log_capture {
  int count[4];
  char last[4][1536];
} log_capture;

static void capture(int level, const char *message, void *user)
{
  log_capture *c = user;
  c->count[level]++;
  snprintf(c->last[level], sizeof c->last[level], "%s", message);
}

static kt_context *open_layers(const kt_device_info *dev, const char *user_db, const char *system_db, log_capture *log)
{
  kt_options o = kt_default_options();
  o.db_path = user_db;
  o.system_db_path = system_db;
  memset(log, 0, sizeof *log);
  o.log = capture;
  o.log_user = log;
  o.log_level = KT_LOG_DEBUG;
  kt_context *ctx = NULL;
  int rc = kt_open_described(&ctx, dev, &o);
  cr_assert_eq(rc, KT_OK, "kt_open_described: %s", kt_strerror(rc));
  return ctx;
}

static kt_choice choice(kt_context *ctx, long long n)
{
  kt_choice c;
  cr_assert_eq(kt_matmul_choice(ctx, n, n, n, A16, n, A16, n, A16, n, &c), KT_OK);
  return c;
}

/* Tune `dev` at n^3 in `path` with v winning. */
static void tune_with_winner(const char *path, const kt_device_info *dev, long long n, const kt_variant *v,
                             const kt_variant *other)
{
  kt_test_tune_pair(path, dev, n, v, 1.0, other, 2.0);
}

Test(results, the_user_layer_wins_a_problem_both_have_and_the_system_layer_serves_the_rest)
{
  char user[PATH_MAX], sys[PATH_MAX];
  kt_test_path(user, sizeof user, "user.db");
  kt_test_path(sys, sizeof sys, "system.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *a = kt_test_need(kt_test_is_matmul_align4, 0, "matmul align 4");
  const kt_variant *b = kt_test_need(kt_test_is_matmul_align4, 1, "matmul align 4");
  tune_with_winner(user, &dev, 1024, a, b);
  tune_with_winner(sys, &dev, 1024, b, a);
  tune_with_winner(sys, &dev, 8192, b, a);
  log_capture log;
  kt_context *ctx = open_layers(&dev, user, sys, &log);
  cr_assert_eq(kt_tuned_count(ctx), 2, "1024^3 from the user, 8192^3 from the system");
  kt_choice c = choice(ctx, 1024);
  cr_assert_str_eq(c.variant, a->name);
  cr_assert(strstr(c.source, "user database") && strstr(c.source, user), "source: %s", c.source);
  c = choice(ctx, 8192);
  cr_assert_str_eq(c.variant, b->name);
  cr_assert_str_eq(c.matched, "8192x8192x8192");
  cr_assert(strstr(c.source, "system database") && strstr(c.source, sys), "source: %s", c.source);
  cr_assert_eq(log.count[KT_LOG_WARN], 0, "%s", log.last[KT_LOG_WARN]);
  kt_close(ctx);

  /* "" turns the system layer off. */
  ctx = open_layers(&dev, user, "", &log);
  cr_assert_eq(kt_tuned_count(ctx), 1);
  cr_assert_str_eq(choice(ctx, 8192).matched, "1024x1024x1024");
  kt_close(ctx);
}

Test(results, rows_of_the_same_chip_serve_another_memory_size_and_say_so)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info tuned = kt_test_device("Test GPU", 90, 1);
  const kt_variant *a = kt_test_need(kt_test_is_matmul_align4, 0, "matmul align 4");
  const kt_variant *b = kt_test_need(kt_test_is_matmul_align4, 1, "matmul align 4");
  tune_with_winner(path, &tuned, 1024, b, a);
  kt_device_info bigger = tuned;
  bigger.mem_bytes *= 2;
  kt_device_fingerprint(&bigger);
  cr_assert_str_neq(bigger.fingerprint, tuned.fingerprint);
  log_capture log;
  kt_context *ctx = open_layers(&bigger, path, "", &log);
  kt_choice c = choice(ctx, 1024);
  cr_assert_eq(c.tuned, 1);
  cr_assert_str_eq(c.variant, b->name);
  cr_assert(strstr(c.source, "same chip"), "source: %s", c.source);
  kt_close(ctx);

  /* Another chip (other SM count) gets nothing. */
  kt_device_info other = tuned;
  other.sm_count = 114;
  kt_device_fingerprint(&other);
  ctx = open_layers(&other, path, "", &log);
  cr_assert_eq(kt_tuned_count(ctx), 0);
  cr_assert_eq(choice(ctx, 1024).tuned, 0);
  kt_close(ctx);
}

Test(results, exact_rows_win_over_the_same_chip)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_device_info twin = dev;
  twin.mem_bytes /= 2;
  kt_device_fingerprint(&twin);
  const kt_variant *a = kt_test_need(kt_test_is_matmul_align4, 0, "matmul align 4");
  const kt_variant *b = kt_test_need(kt_test_is_matmul_align4, 1, "matmul align 4");
  tune_with_winner(path, &twin, 1024, b, a);
  tune_with_winner(path, &dev, 1024, a, b);
  log_capture log;
  kt_context *ctx = open_layers(&dev, path, "", &log);
  kt_choice c = choice(ctx, 1024);
  cr_assert_str_eq(c.variant, a->name);
  cr_assert_null(strstr(c.source, "same chip"), "source: %s", c.source);
  kt_close(ctx);
}

Test(results, a_missing_default_user_database_is_no_warning_and_the_system_layer_serves)
{
  char home[PATH_MAX], sys[PATH_MAX];
  kt_test_path(home, sizeof home, "home");
  kt_test_path(sys, sizeof sys, "system.db");
  cr_assert_eq(mkdir(home, 0700), 0);
  setenv("HOME", home, 1);
  unsetenv("XDG_DATA_HOME");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  const kt_variant *a = kt_test_need(kt_test_is_matmul_align4, 0, "matmul align 4");
  const kt_variant *b = kt_test_need(kt_test_is_matmul_align4, 1, "matmul align 4");
  tune_with_winner(sys, &dev, 2048, a, b);
  log_capture log;
  kt_context *ctx = open_layers(&dev, NULL, sys, &log);
  cr_assert_eq(log.count[KT_LOG_WARN], 0, "%s", log.last[KT_LOG_WARN]);
  cr_assert_eq(kt_tuned_count(ctx), 1);
  cr_assert_str_eq(choice(ctx, 2048).variant, a->name);
  kt_close(ctx);
  char user[PATH_MAX + 64];
  snprintf(user, sizeof user, "%s/.local/share/ktune/ktune.db", home);
  cr_assert(!kt_test_exists(user), "reading created the user database");
}

Test(results, the_user_database_lives_in_the_users_data_folder_unless_ktune_db_says_otherwise)
{
  char buf[PATH_MAX];
  setenv("HOME", "/home/someone", 1);
  unsetenv("XDG_DATA_HOME");
  cr_assert_eq(kt_results_user_path(buf, sizeof buf), KT_OK);
  cr_assert_str_eq(buf, "/home/someone/.local/share/ktune/ktune.db");
  setenv("XDG_DATA_HOME", "/data/someone", 1);
  cr_assert_eq(kt_results_user_path(buf, sizeof buf), KT_OK);
  cr_assert_str_eq(buf, "/data/someone/ktune/ktune.db");
  setenv("XDG_DATA_HOME", "relative/ignored", 1);
  cr_assert_eq(kt_results_user_path(buf, sizeof buf), KT_OK);
  cr_assert_str_eq(buf, "/home/someone/.local/share/ktune/ktune.db");
  setenv("KTUNE_DB", "/elsewhere/k.db", 1);
  cr_assert_eq(kt_results_user_path(buf, sizeof buf), KT_OK);
  cr_assert_str_eq(buf, "/elsewhere/k.db");
}

Test(results, ktune_system_db_names_the_system_layer_and_empty_turns_it_off)
{
  char buf[PATH_MAX];
  setenv("KTUNE_SYSTEM_DB", "/shipped/s.db", 1);
  cr_assert_eq(kt_results_system_path(NULL, buf, sizeof buf), KT_OK);
  cr_assert_str_eq(buf, "/shipped/s.db");
  setenv("KTUNE_SYSTEM_DB", "", 1);
  cr_assert_eq(kt_results_system_path(NULL, buf, sizeof buf), KT_ERR_DB_MISSING);
  cr_assert_eq(kt_results_system_path("/opt/x.db", buf, sizeof buf), KT_OK, "the option wins over the variable");
  cr_assert_str_eq(buf, "/opt/x.db");
}

Test(results, ktune_log_sends_warnings_to_stderr_without_a_callback)
{
  char missing[PATH_MAX], out[PATH_MAX];
  kt_test_path(missing, sizeof missing, "missing.db");
  kt_test_path(out, sizeof out, "stderr.txt");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  fflush(stderr);
  const int saved = dup(2);
  FILE *f = fopen(out, "w");
  cr_assert_not_null(f);
  dup2(fileno(f), 2);
  kt_options o = kt_default_options();
  o.db_path = missing;
  o.system_db_path = "";
  kt_context *ctx = NULL;
  setenv("KTUNE_LOG", "warn", 1);
  int rc = kt_open_described(&ctx, &dev, &o);
  kt_close(ctx);
  unsetenv("KTUNE_LOG");
  rc |= kt_open_described(&ctx, &dev, &o); /* silent again */
  kt_close(ctx);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fclose(f);
  cr_assert_eq(rc, KT_OK);
  size_t len;
  char *text = (char *)kt_test_slurp(out, &len);
  text = realloc(text, len + 1);
  text[len] = 0;
  int times = 0;
  for (const char *p = text; (p = strstr(p, missing)) != NULL; p += strlen(missing))
    ++times;
  cr_assert_eq(times, 1, "one warning naming the file, from the first open only: %s", text);
  free(text);
}
