/* SPDX-License-Identifier: MIT */
/* tests/test_db_export.c: the database's text form (kt_db_export and
 * kt_db_import in runtime/db.c), on described devices: no GPU.
 *
 *   make build/tests/test_db_export && build/tests/test_db_export --jobs=1
 */
#include <math.h>

#include "kt_test.h"

static void setup(void)
{
  kt_test_mkdir();
}

static void teardown(void)
{
  kt_test_rmdir();
}

TestSuite(db_export, .init = setup, .fini = teardown);

static char err[1024];

/* A name and a reason that JSON must quote: quotes, backslashes, a newline, a tab. */
#define ODD_NAME "Test \"GPU\" \\ 1"
#define ODD_REASON "off by \"1\" \\ at\nrow 7\t!"

static kt_device_info dev_a(void)
{
  return kt_test_device(ODD_NAME, 90, 1);
}

static kt_device_info dev_b(void)
{
  return kt_test_device("Other GPU", 80, 0);
}

static void record(const char *path, const kt_device_info *dev, const char *gen, const kt_measurement *m, int n)
{
  kt_db *db = NULL;
  cr_assert_eq(kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err), KT_OK, "%s", err);
  cr_assert_eq(kt_db_record(db, dev, gen, m, n, err, sizeof err), KT_OK, "%s", err);
  kt_db_close(db);
}

/* Two devices, matmul and a histogram with two distributions, a wrong
 * result with an odd reason, and three stale rows: a source hash that is
 * not this build's, a variant this build lacks, another generator. */
static void fill(const char *path)
{
  const kt_device_info a = dev_a(), b = dev_b();
  const kt_variant *mv[4];
  for (int i = 0; i < 4; ++i)
    mv[i] = kt_test_need(kt_test_is_matmul, i, "matmul");
  const kt_variant *h0 = kt_test_need(kt_test_is_hist, 0, "hist"), *h1 = kt_test_need(kt_test_is_hist, 1, "hist");
  kt_problem mm = kt_test_matmul_problem(1024, 512, 256);
  kt_measurement m[4] = {kt_test_measure(mv[0], mm, "ok", 2.0), kt_test_measure(mv[1], mm, "ok", 1.0 / 3),
                         kt_test_measure(mv[2], mm, "ok", 3.0), kt_test_measure(mv[3], mm, "wrong", 0)};
  m[3].reason = ODD_REASON;
  m[3].max_err = 12.5;
  kt_test_tune(path, &a, m, 4, mm);
  kt_problem hu = kt_test_hist_problem(4096, 1 << 20, "uniform"), hs = kt_test_hist_problem(4096, 1 << 20, "skewed");
  kt_measurement h[4] = {kt_test_measure(h0, hu, "ok", 1.0), kt_test_measure(h0, hs, "ok", 2.0),
                         kt_test_measure(h1, hu, "ok", 1.5), kt_test_measure(h1, hs, "ok", 1.2)};
  kt_test_tune(path, &a, h, 4, kt_test_hist_problem(4096, 1 << 20, ""));
  kt_problem small = kt_test_matmul_problem(64, 64, 64);
  kt_measurement mb[2] = {kt_test_measure(mv[0], small, "ok", 0.25), kt_test_measure(mv[1], small, "timed_out", 0)};
  kt_test_tune(path, &b, mb, 2, small);
  kt_measurement stale[2] = {kt_test_measure(mv[0], mm, "ok", 0.05), kt_test_measure(mv[1], mm, "ok", 0.04)};
  stale[0].source_hash = "0123456789abcdef";
  stale[1].variant = "matmul_gone_1x1x1";
  kt_test_tune(path, &a, stale, 2, mm);
  kt_measurement old = kt_test_measure(mv[0], mm, "ok", 0.01);
  record(path, &a, "0.0-old", &old, 1);
}

/* The export of one device, or of all (NULL); *rc gets kt_db_export's code. */
static char *export_text(const char *path, const char *device, int *rc)
{
  kt_db *db = NULL;
  cr_assert_eq(kt_db_open(&db, path, KT_DB_READ, err, sizeof err), KT_OK, "%s", err);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  *rc = kt_db_export(db, device, f, err, sizeof err);
  fclose(f);
  kt_db_close(db);
  return text;
}

static char *export_ok(const char *path, const char *device)
{
  int rc;
  char *text = export_text(path, device, &rc);
  cr_assert_eq(rc, KT_OK, "kt_db_export: %s", err);
  return text;
}

static int import(const char *path, int n, const char **docs, kt_db_import_counts *c)
{
  const char *names[4] = {"a.json", "b.json", "c.json", "d.json"};
  kt_db *db = NULL;
  cr_assert_eq(kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err), KT_OK, "%s", err);
  err[0] = 0;
  int rc = kt_db_import(db, n, names, docs, c, err, sizeof err);
  kt_db_close(db);
  return rc;
}

/* Everything a database holds, as one string (ids and times of recording left out). */
static char *contents(const char *path)
{
  return kt_test_sql_text(
      path, "SELECT (SELECT group_concat(x, ';') FROM (SELECT fingerprint || name || cc || sm_count || mem_bytes AS x"
            " FROM devices ORDER BY fingerprint)) || '#' || (SELECT group_concat(x, ';') FROM (SELECT device ||"
            " generator_version || family || problem || dist || variant || source_hash || status || reason ||"
            " printf('%.9g|%.9g|%.9g', time_ms, rate, max_err) || reps || measured_at AS x FROM measurements"
            " ORDER BY 1)) || '#' || coalesce((SELECT group_concat(x, ';') FROM (SELECT device || generator_version"
            " || family || problem || rank || variant || source_hash || printf('%.9g', time_ms) AS x FROM winners"
            " ORDER BY 1)), '')");
}

static char *winners(const char *path)
{
  return kt_test_sql_text(path, "SELECT group_concat(x, ';') FROM (SELECT device || '|' || generator_version || '|' ||"
                                " family || '|' || problem || '|' || rank || '|' || variant || '|' || source_hash ||"
                                " '|' || printf('%.9g', time_ms) AS x FROM winners ORDER BY device, family, problem,"
                                " rank)");
}

/* ---- round trips ----------------------------------------------------------- */

Test(db_export, an_export_imported_into_an_empty_file_gives_the_same_rankings)
{
  char src[PATH_MAX], dst[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  kt_test_path(dst, sizeof dst, "dst.db");
  fill(src);
  char *text = export_ok(src, NULL);
  kt_db_import_counts c;
  const char *docs[] = {text};
  cr_assert_eq(import(dst, 1, docs, &c), KT_OK, "%s", err);
  cr_expect_eq(c.files, 1);
  cr_expect_eq(c.devices, 2);
  cr_expect_eq(c.measurements, kt_test_sql_int(src, "SELECT count(*) FROM measurements"));
  cr_expect_eq(c.duplicates, 0);
  cr_expect_eq(c.ranked, 3, "1024x512x256 and the histogram on one device, 64^3 on the other");
  char *w1 = winners(src), *w2 = winners(dst);
  cr_expect_str_eq(w2, w1);
  cr_expect_neq(w1[0], 0);
  /* And what dispatch loads from it. */
  const kt_device_info a = dev_a();
  kt_db *s = NULL, *d = NULL;
  cr_assert_eq(kt_db_open(&s, src, KT_DB_READ, err, sizeof err), KT_OK);
  cr_assert_eq(kt_db_open(&d, dst, KT_DB_READ, err, sizeof err), KT_OK);
  kt_tuned *ts = NULL, *td = NULL;
  int ns = 0, nd = 0;
  cr_assert_eq(kt_db_load(s, a.fingerprint, kt_registry_generator_version, &ts, &ns, err, sizeof err), KT_OK);
  cr_assert_eq(kt_db_load(d, a.fingerprint, kt_registry_generator_version, &td, &nd, err, sizeof err), KT_OK);
  cr_assert_eq(ns, 2);
  cr_assert_eq(nd, ns);
  for (int i = 0; i < ns; ++i) {
    cr_expect_str_eq(td[i].key, ts[i].key);
    cr_assert_eq(td[i].count, ts[i].count);
    for (int j = 0; j < ts[i].count; ++j)
      cr_expect_eq(td[i].ranked[j], ts[i].ranked[j], "%s rank %d", ts[i].key, j + 1);
  }
  kt_db_close(s);
  kt_db_close(d);
  free(ts), free(td), free(w1), free(w2), free(text);
}

Test(db_export, an_export_of_an_import_is_the_same_text)
{
  char src[PATH_MAX], dst[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  kt_test_path(dst, sizeof dst, "dst.db");
  fill(src);
  char *text = export_ok(src, NULL), *again = export_ok(src, NULL);
  cr_expect_str_eq(again, text, "two exports of one file differ");
  kt_db_import_counts c;
  const char *docs[] = {text};
  cr_assert_eq(import(dst, 1, docs, &c), KT_OK, "%s", err);
  char *back = export_ok(dst, NULL);
  cr_expect_str_eq(back, text);
  free(text), free(again), free(back);
}

static void take_max_err(void *user, const kt_measurement *m)
{
  if (strcmp(m->status, "wrong") == 0)
    *(double *)user = m->max_err;
}

/* A wrong result's error is infinite (the tuner records INFINITY), which
 * JSON cannot write: SQLite wrote Inf, which import, like any JSON parser,
 * refused.  It travels as null and reads back as infinite, never as 0. */
Test(db_export, a_wrong_result_of_infinite_error_exports_to_json_that_imports_back)
{
  char src[PATH_MAX], dst[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  kt_test_path(dst, sizeof dst, "dst.db");
  const kt_device_info a = dev_a();
  kt_problem p = kt_test_matmul_problem(128, 128, 128);
  kt_measurement m[2] = {kt_test_measure(kt_test_need(kt_test_is_matmul, 0, "matmul"), p, "ok", 1.0),
                         kt_test_measure(kt_test_need(kt_test_is_matmul, 1, "matmul"), p, "wrong", 0)};
  m[1].max_err = INFINITY;
  kt_test_tune(src, &a, m, 2, p);
  /* And one recorded before non-finite numbers were stored as NULL. */
  m[0].problem = m[1].problem = kt_test_matmul_problem(256, 256, 256);
  kt_test_tune(src, &a, m, 2, m[0].problem);
  kt_test_sql(src, "UPDATE measurements SET max_err = 9e999, time_ms = -9e999 WHERE status = 'wrong' AND m = 256");
  char *text = export_ok(src, NULL);
  cr_expect_null(strstr(text, "Inf"), "%s", text);
  cr_expect_not_null(strstr(text, "\"max_err\":null"), "%s", text);
  kt_db_import_counts c;
  const char *docs[] = {text};
  cr_assert_eq(import(dst, 1, docs, &c), KT_OK, "%s", err);
  cr_expect_eq(c.measurements, 4);
  char *back = export_ok(dst, NULL);
  cr_expect_str_eq(back, text);
  cr_assert_eq(import(src, 1, docs, &c), KT_OK, "%s", err);
  cr_expect_eq(c.duplicates, 4, "the rows of Inf are the rows the export wrote as null");
  kt_db *db = NULL;
  cr_assert_eq(kt_db_open(&db, dst, KT_DB_READ, err, sizeof err), KT_OK, "%s", err);
  double max_err = 0;
  cr_assert_eq(
      kt_db_recorded(db, a.fingerprint, kt_registry_generator_version, &p, take_max_err, &max_err, err, sizeof err),
      KT_OK, "%s", err);
  kt_db_close(db);
  cr_expect(isinf(max_err), "a wrong result's error read back as %g", max_err);
  free(text), free(back);
}

Test(db_export, the_text_names_its_format_and_has_one_row_per_line)
{
  char src[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  fill(src);
  char *text = export_ok(src, NULL);
  char head[128];
  snprintf(head, sizeof head, "{\"format\":\"%s\",\"format_version\":%d,\"generator_version\":", KT_RESULTS_FORMAT,
           KT_RESULTS_FORMAT_VERSION);
  cr_expect_eq(strncmp(text, head, strlen(head)), 0, "header: %.100s", text);
  int lines = 0, rows = 0;
  for (char *line = text, *end; *line; line = end + 1) {
    end = strchr(line, '\n');
    cr_assert_not_null(end, "the text ends without a newline");
    ++lines;
    rows += line[0] == '{' && line != text;
  }
  long long want = kt_test_sql_int(src, "SELECT (SELECT count(*) FROM devices) + (SELECT count(*) FROM"
                                        " measurements) + (SELECT count(*) FROM winners)");
  /* A source per target of each variant measured that this build has. */
  for (int i = 0; i < kt_registry_count; ++i) {
    char q[256];
    snprintf(q, sizeof q, "SELECT count(*) > 0 FROM measurements WHERE variant = '%s'", kt_registry[i].name);
    want += kt_test_sql_int(src, q);
  }
  cr_expect_eq(rows, want, "every row on a line of its own");
  cr_expect_eq(lines, 1 + rows + 4 * 2, "a header, the rows, and each array's opening and closing lines");
  free(text);
}

Test(db_export, quotes_backslashes_and_newlines_survive_the_trip)
{
  char src[PATH_MAX], dst[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  kt_test_path(dst, sizeof dst, "dst.db");
  fill(src);
  char *text = export_ok(src, NULL);
  cr_expect_not_null(strstr(text, "Test \\\"GPU\\\" \\\\ 1"), "the name, quoted");
  kt_db_import_counts c;
  const char *docs[] = {text};
  cr_assert_eq(import(dst, 1, docs, &c), KT_OK, "%s", err);
  char *name = kt_test_sql_text(dst, "SELECT name FROM devices WHERE cc = 90");
  char *reason = kt_test_sql_text(dst, "SELECT reason FROM measurements WHERE status = 'wrong'");
  cr_expect_str_eq(name, ODD_NAME);
  cr_expect_str_eq(reason, ODD_REASON);
  char *c1 = contents(src), *c2 = contents(dst);
  cr_expect_str_eq(c2, c1);
  free(name), free(reason), free(c1), free(c2), free(text);
}

Test(db_export, importing_what_the_file_holds_already_adds_nothing)
{
  char src[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  fill(src);
  char *text = export_ok(src, NULL), *before = contents(src);
  const long long rows = kt_test_sql_int(src, "SELECT count(*) FROM measurements");
  kt_db_import_counts c;
  const char *docs[] = {text, text};
  cr_assert_eq(import(src, 2, docs, &c), KT_OK, "%s", err);
  cr_expect_eq(c.measurements, 0);
  cr_expect_eq(c.duplicates, 2 * rows);
  cr_expect_eq(c.devices, 0);
  char *after = contents(src);
  cr_expect_str_eq(after, before);
  free(text), free(before), free(after);
}

Test(db_export, one_device_exports_alone_and_an_unknown_one_is_an_error)
{
  char src[PATH_MAX], dst[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  kt_test_path(dst, sizeof dst, "dst.db");
  fill(src);
  const kt_device_info b = dev_b();
  char *text = export_ok(src, b.fingerprint);
  cr_expect_null(strstr(text, "sm_90"), "another device's rows");
  kt_db_import_counts c;
  const char *docs[] = {text};
  cr_assert_eq(import(dst, 1, docs, &c), KT_OK, "%s", err);
  cr_expect_eq(kt_test_sql_int(dst, "SELECT count(*) FROM devices"), 1);
  cr_expect_eq(kt_test_sql_int(dst, "SELECT count(*) FROM measurements"), 2);
  cr_expect_eq(kt_test_sql_int(dst, "SELECT count(*) FROM winners"), 1);
  free(text);
  int rc;
  text = export_text(src, "No Such GPU|sm_90|1 SMs|1 MiB", &rc);
  cr_expect_eq(rc, KT_ERR_DB_MISSING);
  cr_expect_str_eq(text, "", "nothing is written for an unknown device");
  free(text);
}

Test(db_export, stale_rows_travel_but_are_never_ranked)
{
  char src[PATH_MAX], dst[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  kt_test_path(dst, sizeof dst, "dst.db");
  fill(src);
  char *text = export_ok(src, NULL);
  kt_db_import_counts c;
  const char *docs[] = {text};
  cr_assert_eq(import(dst, 1, docs, &c), KT_OK, "%s", err);
  cr_expect_eq(kt_test_sql_int(dst, "SELECT count(*) FROM measurements WHERE source_hash = '0123456789abcdef' OR"
                                    " variant LIKE 'matmul_gone%' OR generator_version = '0.0-old'"),
               3);
  cr_expect_eq(kt_test_sql_int(dst, "SELECT count(*) FROM winners WHERE source_hash = '0123456789abcdef' OR"
                                    " variant LIKE 'matmul_gone%' OR generator_version = '0.0-old'"),
               0);
  /* The stale times are the fastest of all: were they ranked, they would win. */
  const kt_variant *v0 = kt_test_need(kt_test_is_matmul, 1, "matmul");
  char sql[256];
  snprintf(sql, sizeof sql, "SELECT variant = '%s' FROM winners WHERE problem = '1024x512x256' AND rank = 1", v0->name);
  cr_expect_eq(kt_test_sql_int(dst, sql), 1);
  kt_db *db = NULL;
  cr_assert_eq(kt_db_open(&db, dst, KT_DB_READ, err, sizeof err), KT_OK);
  kt_db_device *d = NULL;
  int n = 0;
  cr_assert_eq(kt_db_devices(db, kt_registry_generator_version, &d, &n, err, sizeof err), KT_OK, "%s", err);
  kt_db_close(db);
  cr_assert_eq(n, 2);
  const kt_device_info a = dev_a();
  const kt_db_device *x = strcmp(d[0].fingerprint, a.fingerprint) == 0 ? &d[0] : &d[1];
  cr_assert_str_eq(x->fingerprint, a.fingerprint);
  cr_expect_str_eq(x->name, ODD_NAME);
  cr_expect_eq(x->measurements, 4 + 4 + 3);
  cr_expect_eq(x->stale, 3);
  cr_expect_eq(x->current, 8);
  free(d);
  free(text);
}

/* ---- refusals ------------------------------------------------------------- */

/* A small valid export with one measurement, `row` replacing it when given. */
static char *doc(const char *header, const char *row)
{
  const kt_device_info a = dev_a();
  const kt_variant *v = kt_test_need(kt_test_is_matmul, 0, "matmul");
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  char fp[512] = "";
  for (const char *p = a.fingerprint; *p; ++p) /* the fingerprint as a JSON string's inside */
    snprintf(fp + strlen(fp), sizeof fp - strlen(fp), "%s%c", *p == '"' || *p == '\\' ? "\\" : "", *p);
  fprintf(f,
          "%s\n\"devices\":[\n{\"fingerprint\":\"%s\",\"name\":\"x\",\"cc\":90,\"sm_count\":132,"
          "\"mem_bytes\":1,\"driver_version\":null,\"runtime_version\":null}\n],\n\"measurements\":[\n",
          header ? header : "{\"format\":\"ktune-results\",\"format_version\":1,", fp);
  if (row)
    fprintf(f, "%s\n", row);
  else
    fprintf(f,
            "{\"device\":\"%s\",\"generator_version\":\"%s\",\"family\":\"matmul\",\"problem\":\"8x8x8\","
            "\"dist\":\"\",\"m\":8,\"n\":8,\"k\":8,\"nbins\":null,\"nsamples\":null,\"variant\":\"%s\","
            "\"source_hash\":\"%s\",\"status\":\"ok\",\"reason\":\"\",\"time_ms\":1.5,\"rate\":2,\"max_err\":0,"
            "\"reps\":3,\"measured_at\":\"2025-01-02T03:04:05Z\"}\n",
            fp, kt_registry_generator_version, v->name, v->source_hash);
  fprintf(f, "],\n\"rankings\":[],\n\"sources\":[]}\n");
  fclose(f);
  return text;
}

/* A database with rows of its own; importing docs must fail with want and
 * leave it as it was.  kt_db_import_check, which runs before the database
 * is opened, must give check_want. */
static void assert_refused_as(const char *const *docs, int n, int want, int check_want, const char *what)
{
  char dst[PATH_MAX];
  kt_test_path(dst, sizeof dst, "dst.db");
  unlink(dst);
  const kt_device_info b = dev_b();
  kt_problem p = kt_test_matmul_problem(32, 32, 32);
  kt_measurement m = kt_test_measure(kt_test_need(kt_test_is_matmul, 0, "matmul"), p, "ok", 1.0);
  kt_test_tune(dst, &b, &m, 1, p);
  char *before = contents(dst);
  const char *names[4] = {"a.json", "b.json", "c.json", "d.json"};
  err[0] = 0;
  cr_expect_eq(kt_db_import_check(n, names, docs, err, sizeof err), check_want, "%s: check: %s", what, err);
  kt_db_import_counts c;
  int rc = import(dst, n, (const char **)docs, &c);
  cr_expect_eq(rc, want, "%s: got %d (%s): %s", what, rc, kt_strerror(rc), err);
  cr_expect_neq(err[0], 0, "%s: a refusal says why", what);
  cr_expect(strstr(err, names[n - 1]) != NULL, "%s: the message names the file: %s", what, err);
  char *after = contents(dst);
  cr_expect_str_eq(after, before, "%s: the database changed", what);
  free(before), free(after);
}

static void assert_refused(const char *const *docs, int n, int want, const char *what)
{
  assert_refused_as(docs, n, want, want, what);
}

Test(db_export, the_small_document_of_these_tests_imports)
{
  char dst[PATH_MAX];
  kt_test_path(dst, sizeof dst, "dst.db");
  char *d = doc(NULL, NULL);
  const char *docs[] = {d};
  kt_db_import_counts c;
  cr_assert_eq(import(dst, 1, docs, &c), KT_OK, "%s\n%s", err, d);
  cr_expect_eq(c.measurements, 1);
  cr_expect_eq(c.ranked, 1);
  free(d);
}

Test(db_export, files_that_are_not_ours_are_refused_and_nothing_is_written)
{
  const char *foreign[] = {"",
                           "hello, world\n",
                           "[1, 2, 3]",
                           "{\"format\": \"other-results\", \"version\": 1}",
                           "SQLite format 3",
                           "{\"devices\": [], \"measurements\": []}"};
  for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; ++i)
    assert_refused(&foreign[i], 1, KT_ERR_DB_FOREIGN, foreign[i]);
}

Test(db_export, a_newer_format_is_refused_and_nothing_is_written)
{
  char *d = doc("{\"format\":\"ktune-results\",\"format_version\":2,", NULL);
  const char *docs[] = {d};
  assert_refused(docs, 1, KT_ERR_DB_VERSION, "format_version 2");
  free(d);
}

Test(db_export, damaged_files_are_refused_and_nothing_is_written)
{
  char *good = doc(NULL, NULL);
  char *cut = strdup(good);
  cut[strlen(cut) / 2] = 0;
  const char *docs[] = {cut};
  assert_refused(docs, 1, KT_ERR_DB_DAMAGED, "cut in half");
  /* Rows that are whole JSON but wrong. */
  const char *bad_rows[] = {
      "{\"device\":\"x\"}",
      "42",
      "{\"device\":\"nowhere\",\"generator_version\":\"g\",\"family\":\"matmul\",\"problem\":\"8x8x8\",\"dist\":\"\","
      "\"m\":8,\"n\":8,\"k\":8,\"nbins\":null,\"nsamples\":null,\"variant\":\"v\",\"source_hash\":\"h\","
      "\"status\":\"ok\",\"reason\":\"\",\"time_ms\":1,\"rate\":1,\"max_err\":0,\"reps\":1,\"measured_at\":\"t\"}",
  };
  for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; ++i) {
    char *d = doc(NULL, bad_rows[i]);
    docs[0] = d;
    assert_refused(docs, 1, KT_ERR_DB_DAMAGED, bad_rows[i]);
    free(d);
  }
  /* Values the ranking cannot take, made from the good row. */
  const char *edits[][2] = {{"\"status\":\"ok\"", "\"status\":\"great\""},
                            {"\"time_ms\":1.5", "\"time_ms\":0"},
                            {"\"time_ms\":1.5", "\"time_ms\":\"fast\""},
                            {"\"time_ms\":1.5", "\"time_ms\":null"},
                            {"\"time_ms\":1.5", "\"time_ms\":1e999"},
                            {"\"rate\":2", "\"rate\":-1e999"},
                            {"\"max_err\":0", "\"max_err\":1e999"},
                            {"\"format_version\":1", "\"format_version\":\"1\""},
                            {"\"measurements\":[", "\"measurements\":{\"a\":["}};
  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; ++i) {
    char *at = strstr(good, edits[i][0]);
    cr_assert_not_null(at, "%s", edits[i][0]);
    char *d = NULL;
    cr_assert_gt(asprintf(&d, "%.*s%s%s", (int)(at - good), good, edits[i][1], at + strlen(edits[i][0])), 0);
    if (strstr(edits[i][1], "{\"a\"")) { /* keep it JSON: close the object opened */
      char *e = NULL;
      cr_assert_gt(
          asprintf(&e, "%.*s]},\n\"rankings\":[],\n\"sources\":[]}\n", (int)(strstr(d, "],\n\"rankings") - d), d), 0);
      free(d);
      d = e;
    }
    docs[0] = d;
    assert_refused(docs, 1, KT_ERR_DB_DAMAGED, edits[i][1]);
    free(d);
  }
  free(cut);
  free(good);
}

Test(db_export, one_bad_file_among_good_ones_imports_nothing)
{
  char src[PATH_MAX];
  kt_test_path(src, sizeof src, "src.db");
  fill(src);
  char *text = export_ok(src, NULL), *newer = doc("{\"format\":\"ktune-results\",\"format_version\":9,", NULL);
  const char *docs[] = {text, newer};
  assert_refused(docs, 2, KT_ERR_DB_VERSION, "a good export, then a newer one");
  free(text), free(newer);
}

/* The document with its one measurement moved to another problem (whose
 * key and sizes are given). */
static char *moved(const char *problem, const char *sizes)
{
  char *good = doc(NULL, NULL);
  const char *from = "\"problem\":\"8x8x8\",\"dist\":\"\",\"m\":8,\"n\":8,\"k\":8";
  char *at = strstr(good, from);
  cr_assert_not_null(at);
  char *d = NULL;
  cr_assert_gt(asprintf(&d, "%.*s\"problem\":\"%s\",\"dist\":\"\",%s%s", (int)(at - good), good, problem, sizes,
                        at + strlen(from)),
               0);
  free(good);
  return d;
}

Test(db_export, a_failure_after_rows_were_written_takes_them_all_back)
{
  /* The second file's row fails in the database itself (a trigger here; a
   * full disk or an I/O error alike) after the first file's device and row
   * were written: the import must undo both. */
  char dst[PATH_MAX];
  kt_test_path(dst, sizeof dst, "dst.db");
  const kt_device_info b = dev_b();
  kt_problem p = kt_test_matmul_problem(32, 32, 32);
  kt_measurement m = kt_test_measure(kt_test_need(kt_test_is_matmul, 0, "matmul"), p, "ok", 1.0);
  kt_test_tune(dst, &b, &m, 1, p);
  kt_test_sql(dst, "CREATE TRIGGER no16 BEFORE INSERT ON measurements WHEN NEW.problem = '16x16x16'"
                   " BEGIN SELECT RAISE(ABORT, 'no room'); END");
  char *before = contents(dst);
  char *good = doc(NULL, NULL), *d = moved("16x16x16", "\"m\":16,\"n\":16,\"k\":16");
  const char *docs[] = {good, d};
  const char *names[] = {"a.json", "b.json"};
  cr_assert_eq(kt_db_import_check(2, names, docs, err, sizeof err), KT_OK, "%s", err);
  kt_db_import_counts c;
  const int rc = import(dst, 2, docs, &c);
  cr_expect_eq(rc, KT_ERR_DB_WRITE, "got %d (%s): %s", rc, kt_strerror(rc), err);
  cr_expect(strstr(err, "b.json") != NULL, "the message names the file: %s", err);
  char *after = contents(dst);
  cr_expect_str_eq(after, before, "the database changed");
  free(before), free(after), free(d), free(good);
}

/* A measurement whose problem its family cannot read, or whose sizes are
 * not its key's, is refused before the database is opened (which would
 * create it), and leaves it as it was. */
Test(db_export, a_problem_that_does_not_read_or_disagrees_with_its_sizes_is_refused_first)
{
  char *good = doc(NULL, NULL);
  char *bad[] = {moved("banana", "\"m\":8,\"n\":8,\"k\":8"), moved("8x8x8", "\"m\":-5,\"n\":8,\"k\":8"),
                 moved("8x8x8", "\"m\":8,\"n\":8,\"k\":null"), moved("16x16x16", "\"m\":8,\"n\":8,\"k\":8")};
  for (int i = 0; i < 4; ++i) {
    const char *docs[] = {good, bad[i]};
    assert_refused(docs, 2, KT_ERR_DB_DAMAGED, bad[i]);
    free(bad[i]);
  }
  free(good);
}
