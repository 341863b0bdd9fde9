/* SPDX-License-Identifier: MIT */
/* tests/test_results_cli.c: `ktune show`, `ktune export` and `ktune import`
 * (tuner/results.c), run as the program, build/ktune, on files tuned for
 * described devices: no GPU needed.
 *
 *   make build/ktune build/tests/test_results_cli && build/tests/test_results_cli --jobs=1
 */
#include <stdarg.h>
#include <sys/wait.h>

#include "kt_test.h"

static void setup(void)
{
  kt_test_mkdir();
  unsetenv("KTUNE_DB");
  setenv("KTUNE_SYSTEM_DB", "", 1); /* no system layer unless a test sets one */
}

static void teardown(void)
{
  kt_test_rmdir();
}

TestSuite(results_cli, .init = setup, .fini = teardown, .timeout = 60);

/* Run `ktune ARGS` (the ktune beside this test's folder: build/ktune) with
 * its stdout in *out (free it) and stderr in the test folder's stderr.txt;
 * returns its exit status. */
static int ktune(char **out, const char *fmt, ...)
{
  char exe[PATH_MAX], args[4096], cmd[3 * PATH_MAX + 4096], errf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 16);
  cr_assert_gt(n, 0);
  exe[n] = 0;
  strcpy(strrchr(exe, '/'), "/../ktune");
  cr_assert(kt_test_exists(exe), "%s is not built (make build/ktune)", exe);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(cmd, sizeof cmd, "%s %s 2>%s", exe, args, kt_test_path(errf, sizeof errf, "stderr.txt"));
  FILE *p = popen(cmd, "r");
  cr_assert_not_null(p);
  char *text = NULL;
  size_t len = 0, cap = 0, got;
  do {
    if (len + 1 >= cap)
      text = realloc(text, cap = cap ? 2 * cap : 4096);
    got = fread(text + len, 1, cap - len - 1, p);
    len += got;
  } while (got > 0);
  text[len] = 0;
  int status = pclose(p);
  cr_assert(WIFEXITED(status), "%s did not exit", cmd);
  if (out)
    *out = text;
  else
    free(text);
  return WEXITSTATUS(status);
}

static char *stderr_text(void)
{
  char path[PATH_MAX];
  size_t len;
  char *t = (char *)kt_test_slurp(kt_test_path(path, sizeof path, "stderr.txt"), &len);
  t = realloc(t, len + 1);
  t[len] = 0;
  return t;
}

static int has_gpu(void)
{
  kt_device_info d;
  char e[256];
  return kt_device_query(-1, &d, e, sizeof e) == KT_OK;
}

/* Two devices; on the first, two problems ranked and two stale rows (a
 * source this build does not have, a variant it does not have). */
static void fill(const char *path, kt_device_info *a, kt_device_info *b)
{
  *a = kt_test_device("Test GPU", 90, 1);
  *b = kt_test_device("Other \"GPU\"", 80, 0);
  const kt_variant *v0 = kt_test_need(kt_test_is_matmul, 0, "matmul"),
                   *v1 = kt_test_need(kt_test_is_matmul, 1, "matmul");
  kt_problem p = kt_test_matmul_problem(1024, 1024, 1024), q = kt_test_matmul_problem(64, 64, 64);
  kt_measurement m[4] = {kt_test_measure(v0, p, "ok", 2.0), kt_test_measure(v1, p, "ok", 1.0),
                         kt_test_measure(v0, p, "ok", 0.1), kt_test_measure(v1, p, "ok", 0.1)};
  m[2].source_hash = "0000000000000000";
  m[3].variant = "matmul_gone";
  kt_test_tune(path, a, m, 4, p);
  kt_measurement mq[2] = {kt_test_measure(v0, q, "ok", 0.5), kt_test_measure(v1, q, "wrong", 0)};
  kt_test_tune(path, a, mq, 2, q);
  kt_test_tune(path, b, mq, 1, q);
}

Test(results_cli, show_reads_any_file_without_a_gpu)
{
  char path[PATH_MAX];
  kt_device_info a, b;
  fill(kt_test_path(path, sizeof path, "tune.db"), &a, &b);
  char *out;
  cr_assert_eq(ktune(&out, "show --db %s --all", path), 0);
  cr_expect_not_null(strstr(out, a.fingerprint), "%s", out);
  cr_expect_not_null(strstr(out, b.fingerprint), "%s", out);
  cr_expect_not_null(strstr(out, "6 measurements: 4 current, 2 stale"), "%s", out);
  cr_expect_not_null(strstr(out, "2 ranked problems"), "%s", out);
  cr_expect_not_null(strstr(out, "1024x1024x1024"), "%s", out);
  cr_expect_null(strstr(out, "matmul_gone"), "a stale row shown as a winner: %s", out);
  free(out);
  /* One device. */
  cr_assert_eq(ktune(&out, "show --db %s --device '%s'", path, a.fingerprint), 0);
  cr_expect_null(strstr(out, "Other"), "%s", out);
  cr_expect_not_null(strstr(out, a.fingerprint), "%s", out);
  free(out);
}

Test(results_cli, show_without_a_device_is_this_gpu_or_every_device)
{
  if (has_gpu())
    cr_skip_test("a GPU is present: show means this GPU");
  char path[PATH_MAX];
  kt_device_info a, b;
  fill(kt_test_path(path, sizeof path, "tune.db"), &a, &b);
  char *out;
  cr_assert_eq(ktune(&out, "show --db %s", path), 0);
  cr_expect(strstr(out, a.fingerprint) && strstr(out, b.fingerprint), "%s", out);
  free(out);
}

Test(results_cli, show_json_is_json_with_the_counts)
{
  char path[PATH_MAX];
  kt_device_info a, b;
  fill(kt_test_path(path, sizeof path, "tune.db"), &a, &b);
  char *out;
  cr_assert_eq(ktune(&out, "show --db %s --all --json", path), 0);
  sqlite3 *h;
  cr_assert_eq(sqlite3_open(":memory:", &h), SQLITE_OK);
  sqlite3_stmt *st;
  cr_assert_eq(sqlite3_prepare_v2(h,
                                  "SELECT json_valid(?1), json_extract(?1, '$.files[0].devices[1].stale'),"
                                  " json_extract(?1, '$.files[0].devices[0].name'),"
                                  " json_extract(?1, '$.files[0].devices[1].winners[0].problem')",
                                  -1, &st, NULL),
               SQLITE_OK);
  sqlite3_bind_text(st, 1, out, -1, SQLITE_STATIC);
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW);
  cr_assert_eq(sqlite3_column_int(st, 0), 1, "not JSON: %s", out);
  cr_expect_eq(sqlite3_column_int(st, 1), 2, "%s", out);
  cr_expect_str_eq((const char *)sqlite3_column_text(st, 2), "Other \"GPU\"");
  cr_expect_str_eq((const char *)sqlite3_column_text(st, 3), "1024x1024x1024");
  sqlite3_finalize(st);
  sqlite3_close(h);
  free(out);
}

Test(results_cli, show_lists_the_user_and_the_system_layer)
{
  char home[PATH_MAX], sys[PATH_MAX], user[PATH_MAX + 64];
  kt_test_path(home, sizeof home, "home");
  kt_test_path(sys, sizeof sys, "system.db");
  snprintf(user, sizeof user, "%s/.local/share/ktune/ktune.db", home);
  kt_device_info a, b;
  fill(sys, &a, &b);
  setenv("HOME", home, 1);
  unsetenv("XDG_DATA_HOME");
  setenv("KTUNE_SYSTEM_DB", sys, 1);
  char *out;
  cr_assert_eq(ktune(&out, "show --all"), 0);
  cr_expect_not_null(strstr(out, "user database"), "%s", out);
  cr_expect_not_null(strstr(out, ": none"), "no user database yet: %s", out);
  cr_expect_not_null(strstr(out, "system database"), "%s", out);
  cr_expect_not_null(strstr(out, a.fingerprint), "%s", out);
  cr_expect(!kt_test_exists(user), "show created the user database");
  free(out);
}

Test(results_cli, export_then_import_through_the_program_round_trips)
{
  char src[PATH_MAX], dst[PATH_MAX], file[PATH_MAX];
  kt_device_info a, b;
  fill(kt_test_path(src, sizeof src, "src.db"), &a, &b);
  kt_test_path(dst, sizeof dst, "dst.db");
  kt_test_path(file, sizeof file, "all.json");
  char *text, *out;
  cr_assert_eq(ktune(&text, "export --db %s --all", src), 0);
  kt_test_write_file(file, text);
  cr_assert_eq(ktune(&out, "import %s --db %s", file, dst), 0, "%s", stderr_text());
  cr_expect_not_null(strstr(out, "7 measurements added"), "%s", out);
  free(out);
  char *again;
  cr_assert_eq(ktune(&again, "export --all --db %s --json", dst), 0);
  cr_expect_str_eq(again, text);
  free(again);
  /* Twice: nothing more. */
  cr_assert_eq(ktune(&out, "import --db %s %s", dst, file), 0);
  cr_expect_not_null(strstr(out, "0 measurements added (7 held already)"), "%s", out);
  free(out);
  free(text);
  /* One device only. */
  cr_assert_eq(ktune(&text, "export --db %s --device '%s'", src, a.fingerprint), 0);
  cr_expect_null(strstr(text, "Other"), "%s", text);
  free(text);
  cr_expect_eq(ktune(&text, "export --db %s --device 'No GPU|sm_1|1 SMs|1 MiB'", src), 1);
  cr_expect_str_eq(text, "", "an unknown device writes nothing");
  free(text);
}

Test(results_cli, a_refused_import_leaves_the_database_byte_for_byte_and_creates_none)
{
  char dst[PATH_MAX], none[PATH_MAX], good[PATH_MAX], bad[PATH_MAX];
  kt_device_info a, b;
  fill(kt_test_path(dst, sizeof dst, "dst.db"), &a, &b);
  kt_test_path(none, sizeof none, "none.db");
  kt_test_path(good, sizeof good, "good.json");
  kt_test_path(bad, sizeof bad, "bad.json");
  char *text;
  cr_assert_eq(ktune(&text, "export --db %s --all", dst), 0);
  kt_test_write_file(good, text);
  text[strlen(text) / 2] = 0;
  kt_test_write_file(bad, text);
  free(text);
  size_t before_len, after_len;
  unsigned char *before = kt_test_slurp(dst, &before_len);
  const char *cases[] = {bad, "/etc/hostname", dst};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    cr_expect_eq(ktune(NULL, "import %s %s --db %s", good, cases[i], dst), 1, "%s", cases[i]);
    char *e = stderr_text();
    cr_expect(strstr(e, cases[i]) && strstr(e, "Nothing was imported"), "the message names the file: %s", e);
    free(e);
    unsigned char *after = kt_test_slurp(dst, &after_len);
    cr_expect(after_len == before_len && memcmp(after, before, before_len) == 0, "%s: the database changed", cases[i]);
    free(after);
    cr_expect_eq(ktune(NULL, "import %s --db %s", cases[i], none), 1);
    cr_expect(!kt_test_exists(none), "%s: a refused import created the database", cases[i]);
  }
  free(before);
}

/* A file whose index misses rows passes SQLite's quick_check and fails
 * its integrity_check: show and export must call it damaged, as import
 * does, and not "ok". */
Test(results_cli, show_and_export_call_damaged_what_import_refuses_as_damaged)
{
  char path[PATH_MAX], json[PATH_MAX];
  kt_device_info a, b;
  fill(kt_test_path(path, sizeof path, "tune.db"), &a, &b);
  kt_test_path(json, sizeof json, "good.json");
  char *text;
  cr_assert_eq(ktune(&text, "export --db %s --all", path), 0);
  kt_test_write_file(json, text);
  free(text);
  kt_test_sql(path, "PRAGMA writable_schema=ON; UPDATE sqlite_master SET"
                    " sql='CREATE INDEX measurements_by_problem ON measurements (variant, problem)'"
                    " WHERE name='measurements_by_problem'");
  const char *damaged = kt_strerror(KT_ERR_DB_DAMAGED);
  cr_assert_eq(ktune(NULL, "import %s --db %s", json, path), 1);
  char *e = stderr_text();
  cr_assert_not_null(strstr(e, damaged), "import: %s", e);
  free(e);
  cr_expect_eq(ktune(&text, "show --db %s --all --json", path), 1);
  cr_expect_not_null(strstr(text, damaged), "show: %s", text);
  cr_expect_null(strstr(text, "\"status\": \"ok\""), "show: %s", text);
  free(text);
  cr_expect_eq(ktune(&text, "export --db %s --all", path), 1);
  e = stderr_text();
  cr_expect(text[0] == 0 && strstr(e, damaged), "export: %s", e);
  free(e);
  free(text);
}

Test(results_cli, help_is_on_stdout_and_bad_arguments_exit_2)
{
  const char *cmds[] = {"show", "export", "import"};
  for (int i = 0; i < 3; ++i) {
    char *out;
    cr_expect_eq(ktune(&out, "%s --help", cmds[i]), 0);
    char want[64];
    snprintf(want, sizeof want, "usage: ktune %s", cmds[i]);
    cr_expect_eq(strncmp(out, want, strlen(want)), 0, "%s", out);
    free(out);
    cr_expect_eq(ktune(NULL, "%s --bogus", cmds[i]), 2);
    cr_expect_eq(ktune(NULL, "%s --db", cmds[i]), 2, "--db without a value");
  }
  cr_expect_eq(ktune(NULL, "show --all --device x"), 2);
  cr_expect_eq(ktune(NULL, "import"), 2, "nothing to import");
  cr_expect_eq(ktune(NULL, "show extra"), 2);
  if (!has_gpu()) {
    char path[PATH_MAX];
    kt_device_info a, b;
    fill(kt_test_path(path, sizeof path, "tune.db"), &a, &b);
    cr_expect_eq(ktune(NULL, "export --db %s", path), 2, "no GPU and no device named");
    char *e = stderr_text();
    cr_expect_not_null(strstr(e, "--all"), "%s", e);
    free(e);
  }
}
