/* SPDX-License-Identifier: MIT */
/* tests/test_db.c: the tuning database (runtime/db.c), no GPU needed.
 *
 *   make build/tests/test_db && build/tests/test_db --jobs=1
 *
 * Every database lives in a fresh mkdtemp directory, removed after the test.
 */
#include <errno.h>
#include <sys/wait.h>

#include "kt_test.h"

static void setup(void)
{
  kt_test_mkdir();
}

static void teardown(void)
{
  kt_test_rmdir();
}

TestSuite(db, .init = setup, .fini = teardown);

static char err[512];

/* The nth matmul variant: measurements of matmul problems name one, since
 * a ranking loads only variants of its problem's family. */
static const kt_variant *matmul_variant(int nth)
{
  return kt_test_need(kt_test_is_matmul, nth, "matmul");
}

static kt_db *open_ok(const char *path, int mode)
{
  kt_db *db = NULL;
  err[0] = '\0';
  int rc = kt_db_open(&db, path, mode, err, sizeof err);
  cr_assert_eq(rc, KT_OK, "kt_db_open(%s, %s) = %d (%s): %s", path, mode == KT_DB_WRITE ? "write" : "read", rc,
               kt_strerror(rc), err);
  cr_assert_not_null(db);
  return db;
}

/* kt_db_open must refuse the file with `want` in both modes and leave every
 * byte of it (and of a -wal beside it) as it was, with no journal, WAL or
 * -shm added beside it. */
static void assert_refused_untouched(const char *path, int want)
{
  char wal[PATH_MAX + 8];
  snprintf(wal, sizeof wal, "%s-wal", path);
  size_t before_len, after_len, wal_len = 0;
  unsigned char *before = kt_test_slurp(path, &before_len);
  unsigned char *wal_before = kt_test_exists(wal) ? kt_test_slurp(wal, &wal_len) : NULL;
  int entries = kt_test_dir_entries();
  const int modes[] = {KT_DB_READ, KT_DB_WRITE};
  for (int i = 0; i < 2; ++i) {
    kt_db *db = (kt_db *)(uintptr_t)8; /* kt_db_open must reset it to NULL */
    err[0] = '\0';
    int rc = kt_db_open(&db, path, modes[i], err, sizeof err);
    cr_assert_eq(rc, want, "%s mode: got %d (%s), want %d (%s): %s", modes[i] ? "write" : "read", rc, kt_strerror(rc),
                 want, kt_strerror(want), err);
    cr_assert_null(db, "a refused open must leave *db NULL");
    cr_assert_neq(err[0], '\0', "a refused open must say why");
  }
  unsigned char *after = kt_test_slurp(path, &after_len);
  cr_assert_eq(after_len, before_len, "file size changed: %zu -> %zu", before_len, after_len);
  cr_assert_eq(memcmp(before, after, before_len), 0, "file contents changed");
  cr_assert_eq(kt_test_dir_entries(), entries, "a journal or WAL file was left beside the refused file");
  if (wal_before) {
    cr_assert(kt_test_exists(wal), "the refused file's -wal was removed");
    unsigned char *wal_after = kt_test_slurp(wal, &after_len);
    cr_assert(after_len == wal_len && memcmp(wal_before, wal_after, wal_len) == 0, "the refused file's -wal changed");
    free(wal_after);
  }
  free(before);
  free(after);
  free(wal_before);
}

/* ---- opening and checking files ----------------------------------------- */

Test(db, new_file_gets_the_schema_and_reopens)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "new.db");
  cr_assert(!kt_test_exists(path));
  kt_db_close(open_ok(path, KT_DB_WRITE));
  cr_assert(kt_test_exists(path));
  cr_assert_eq(kt_test_sql_int(path, "PRAGMA application_id"), KT_DB_APPLICATION_ID);
  cr_assert_eq(kt_test_sql_int(path, "PRAGMA user_version"), KT_DB_SCHEMA_VERSION);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN"
                                     " ('devices','measurements','winners')"),
               3);
  kt_db_close(open_ok(path, KT_DB_READ));
  kt_db_close(open_ok(path, KT_DB_WRITE)); /* an existing schema is accepted as is */
  cr_assert_eq(kt_test_sql_int(path, "PRAGMA user_version"), KT_DB_SCHEMA_VERSION);
}

Test(db, read_of_missing_file_fails_and_creates_nothing)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "missing.db");
  kt_db *db = (kt_db *)(uintptr_t)8;
  int rc = kt_db_open(&db, path, KT_DB_READ, err, sizeof err);
  cr_assert_eq(rc, KT_ERR_DB_MISSING, "got %d (%s)", rc, kt_strerror(rc));
  cr_assert_null(db);
  cr_assert(!kt_test_exists(path), "a read-only open created the file");
  cr_assert_eq(kt_test_dir_entries(), 0, "a read-only open left a file behind");
}

/* A folder, or a file in a folder that is not there, is refused saying so
 * (SQLite's own words were "disk I/O error" and "unable to open database
 * file"), and nothing is created. */
Test(db, a_folder_or_a_missing_folder_is_named)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "a-folder.db");
  cr_assert_eq(mkdir(path, 0755), 0);
  const int modes[] = {KT_DB_READ, KT_DB_WRITE};
  for (int i = 0; i < 2; ++i) {
    kt_db *db = NULL;
    cr_assert_eq(kt_db_open(&db, path, modes[i], err, sizeof err), KT_ERR_DB_OPEN);
    cr_assert_not_null(strstr(err, "is a folder"), "%s", err);
  }
  kt_test_path(path, sizeof path, "no/such/folder/tune.db");
  kt_db *db = NULL;
  const int entries = kt_test_dir_entries();
  cr_assert_eq(kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err), KT_ERR_DB_OPEN);
  cr_assert_not_null(strstr(err, "no folder"), "%s", err);
  cr_assert_eq(kt_test_dir_entries(), entries, "something was created");
}

Test(db, foreign_sqlite_database_is_refused_untouched)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "other-app.db");
  kt_test_sql(path, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"
                    "INSERT INTO notes (body) VALUES ('keep me'), ('and me');");
  cr_assert_eq(kt_test_sql_int(path, "PRAGMA application_id"), 0);
  assert_refused_untouched(path, KT_ERR_DB_FOREIGN);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM notes"), 2);
}

Test(db, foreign_database_with_a_user_version_is_refused_untouched)
{
  /* Many applications set user_version; only the application_id says ours. */
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "versioned.db");
  kt_test_sql(path, "PRAGMA user_version=1; CREATE TABLE measurements (id INTEGER PRIMARY KEY);");
  assert_refused_untouched(path, KT_ERR_DB_FOREIGN);
  kt_test_path(path, sizeof path, "other-id.db");
  kt_test_sql(path, "PRAGMA application_id=305419896; PRAGMA user_version=1; CREATE TABLE t (x);");
  assert_refused_untouched(path, KT_ERR_DB_FOREIGN);
}

Test(db, non_sqlite_file_is_refused_untouched)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "notes.txt");
  kt_test_write_file(path, "this is not a database\nwinners: none\n");
  assert_refused_untouched(path, KT_ERR_DB_FOREIGN);
}

Test(db, large_non_sqlite_file_is_refused_untouched)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "garbage.bin");
  char text[9000];
  for (size_t i = 0; i < sizeof text - 1; ++i)
    text[i] = (char)('a' + (i * 7) % 26);
  text[sizeof text - 1] = '\0';
  kt_test_write_file(path, text);
  assert_refused_untouched(path, KT_ERR_DB_FOREIGN);
}

/* A database with one ranked problem (256^3 for the test GPU) and `rows`
 * more measurements of another device, so that it spans many pages. */
static void tuned_with_rows(const char *path, int rows)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(256, 256, 256);
  kt_measurement m = kt_test_measure(matmul_variant(0), p, "ok", 1.0);
  cr_assert_eq(kt_test_tune(path, &dev, &m, 1, p), 1);
  char sql[512];
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE i(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM i WHERE x < %d)"
           " INSERT INTO measurements (device, generator_version, family, problem, variant, source_hash,"
           " status) SELECT 'd', 'g', 'matmul', 'p' || x, 'v', 'h', 'skipped' FROM i",
           rows);
  kt_test_sql(path, sql);
}

/* A ktune database cut short (a copy that stopped, a full disk) reads as
 * SQLite, then its pages do not: damaged, not another program's file. */
Test(db, a_database_cut_short_is_damaged_and_left_untouched)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  tuned_with_rows(path, 2000);
  size_t len;
  unsigned char *whole = kt_test_slurp(path, &len);
  cr_assert_gt(len, 16384);
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f);
  cr_assert_eq(fwrite(whole, 1, len / 2, f), len / 2);
  cr_assert_eq(fclose(f), 0);
  free(whole);
  assert_refused_untouched(path, KT_ERR_DB_DAMAGED);
}

Test(db, newer_schema_is_refused_untouched)
{
  char path[PATH_MAX], sql[256];
  kt_test_path(path, sizeof path, "newer.db");
  snprintf(sql, sizeof sql,
           "PRAGMA application_id=%d; PRAGMA user_version=%d;"
           "CREATE TABLE measurements (id INTEGER PRIMARY KEY, future TEXT);",
           KT_DB_APPLICATION_ID, KT_DB_SCHEMA_VERSION + 1);
  kt_test_sql(path, sql);
  assert_refused_untouched(path, KT_ERR_DB_VERSION);
  cr_assert_eq(kt_test_sql_int(path, "PRAGMA user_version"), KT_DB_SCHEMA_VERSION + 1);
}

static void copy_file(const char *from, const char *to)
{
  size_t len;
  unsigned char *bytes = kt_test_slurp(from, &len);
  FILE *f = fopen(to, "wb");
  cr_assert_not_null(f, "cannot write %s", to);
  cr_assert_eq(fwrite(bytes, 1, len, f), len);
  cr_assert_eq(fclose(f), 0);
  free(bytes);
}

/* path: a database in WAL mode as a crash leaves it, its writes (sql)
 * committed to the -wal and not yet copied into the file, and no -shm.
 * The writes go to live.db of the test directory (new, or a copy the
 * caller made there), which is removed. */
static void wal_left_by_a_crash(const char *path, const char *sql)
{
  char live[PATH_MAX], from[PATH_MAX + 8], to[PATH_MAX + 8];
  kt_test_path(live, sizeof live, "live.db");
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open(live, &h), SQLITE_OK);
  char *msg = NULL;
  cr_assert_eq(sqlite3_exec(h, "PRAGMA journal_mode=WAL", NULL, NULL, &msg), SQLITE_OK, "%s", msg ? msg : "?");
  cr_assert_eq(sqlite3_exec(h, sql, NULL, NULL, &msg), SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
  snprintf(from, sizeof from, "%s-wal", live);
  snprintf(to, sizeof to, "%s-wal", path);
  copy_file(live, path);
  copy_file(from, to);
  sqlite3_close(h);
  unlink(live);
}

/* The last connection to close a WAL file copies the WAL into it and
 * deletes the -wal, and a reader creates a -shm beside it: a refused file
 * must be neither closed so nor read so. */
Test(db, a_refused_file_in_wal_mode_keeps_its_wal_untouched)
{
  char path[PATH_MAX], sql[256];
  kt_test_path(path, sizeof path, "other-app.db");
  wal_left_by_a_crash(path, "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);"
                            "INSERT INTO notes (body) VALUES ('keep me'), ('and me');");
  assert_refused_untouched(path, KT_ERR_DB_FOREIGN);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM notes"), 2);
  kt_test_path(path, sizeof path, "newer.db");
  snprintf(sql, sizeof sql,
           "PRAGMA application_id=%d; PRAGMA user_version=%d;"
           "CREATE TABLE measurements (id INTEGER PRIMARY KEY, future TEXT);",
           KT_DB_APPLICATION_ID, KT_DB_SCHEMA_VERSION + 1);
  wal_left_by_a_crash(path, sql);
  assert_refused_untouched(path, KT_ERR_DB_VERSION);
  /* Ours, damaged by what the -wal holds: refused before a connection
   * that would leave a -shm (and cannot remove it) opens it. */
  char live[PATH_MAX];
  kt_db_close(open_ok(kt_test_path(live, sizeof live, "live.db"), KT_DB_WRITE));
  kt_test_path(path, sizeof path, "damaged.db");
  wal_left_by_a_crash(path, "DROP TABLE winners");
  assert_refused_untouched(path, KT_ERR_DB_DAMAGED);
}

/* Every read of a table that is gone would fail: the file is damaged, not
 * unreadable. */
Test(db, a_ktune_database_without_a_table_is_damaged_and_left_untouched)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_db_close(open_ok(path, KT_DB_WRITE));
  kt_test_sql(path, "DROP TABLE winners");
  assert_refused_untouched(path, KT_ERR_DB_DAMAGED);
  kt_db *db = NULL;
  cr_assert_eq(kt_db_open(&db, path, KT_DB_READ, err, sizeof err), KT_ERR_DB_DAMAGED);
  cr_assert_not_null(strstr(err, "winners"), "%s", err);
}

/* ---- record, rank, load ------------------------------------------------- */

/* Load the tuned problems for dev and this build; the test owns *t. */
static int load(const char *path, const char *fp, const char *gen, kt_tuned **t)
{
  kt_db *db = open_ok(path, KT_DB_READ);
  int n = -1;
  int rc = kt_db_load(db, fp, gen, t, &n, err, sizeof err);
  cr_assert_eq(rc, KT_OK, "kt_db_load: %s", err);
  kt_db_close(db);
  return n;
}

/* Names that SQLite reads as other things than files (":memory:", a
 * "file:" URI) are files too: what is written to them is there again. */
Test(db, special_sqlite_names_are_files)
{
  char dir[PATH_MAX], cwd[PATH_MAX];
  kt_test_path(dir, sizeof dir, "");
  cr_assert_not_null(getcwd(cwd, sizeof cwd));
  cr_assert_eq(chdir(dir), 0);
  const char *names[] = {":memory:", "file:x.db?mode=memory"};
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(256, 256, 256);
  kt_measurement m = kt_test_measure(matmul_variant(0), p, "ok", 1.0);
  for (int i = 0; i < 2; ++i) {
    cr_assert_eq(kt_test_tune(names[i], &dev, &m, 1, p), 1, "%s", names[i]);
    cr_assert(kt_test_exists(names[i]), "no file named %s", names[i]);
    kt_tuned *t = NULL;
    cr_assert_eq(load(names[i], dev.fingerprint, kt_registry_generator_version, &t), 1, "%s", names[i]);
    free(t);
  }
  cr_assert_eq(chdir(cwd), 0);
}

/* An empty file read as a database holds nothing, whatever is read of it
 * (devices, rankings, an export), and stays empty. */
Test(db, an_empty_file_reads_as_an_empty_database)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "empty.db");
  kt_test_write_file(path, "");
  kt_db *db = open_ok(path, KT_DB_READ);
  kt_db_device *d = NULL;
  int n = -1;
  cr_assert_eq(kt_db_devices(db, kt_registry_generator_version, &d, &n, err, sizeof err), KT_OK, "%s", err);
  cr_assert_eq(n, 0);
  free(d);
  kt_tuned *t = NULL;
  cr_assert_eq(kt_db_load(db, "any", kt_registry_generator_version, &t, &n, err, sizeof err), KT_OK, "%s", err);
  cr_assert_eq(n, 0);
  free(t);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_eq(kt_db_export(db, NULL, f, err, sizeof err), KT_OK, "%s", err);
  fclose(f);
  cr_assert_not_null(strstr(text, "\"measurements\":["), "%s", text);
  free(text);
  kt_db_close(db);
  free(kt_test_slurp(path, &len));
  cr_assert_eq(len, 0, "reading the empty file wrote to it");
}

Test(db, ranking_orders_by_time_and_loads_back)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(1024, 2048, 512);
  const double times[] = {3.0, 1.25, 5.5, 0.75, 2.0}; /* not in order */
  enum { NV = sizeof times / sizeof times[0] };
  const kt_variant *v[NV];
  kt_measurement m[NV];
  for (int i = 0; i < NV; ++i) {
    v[i] = kt_test_need(kt_test_is_matmul, i, "matmul");
    m[i] = kt_test_measure(v[i], p, "ok", times[i]);
  }
  cr_assert_eq(kt_test_tune(path, &dev, m, NV, p), NV);

  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].problem.family, KT_FAMILY_MATMUL);
  cr_assert_eq(t[0].problem.m, 1024);
  cr_assert_eq(t[0].problem.n, 2048);
  cr_assert_eq(t[0].problem.k, 512);
  cr_assert_str_eq(t[0].key, "1024x2048x512");
  cr_assert_eq(t[0].count, NV);
  const int order[NV] = {3, 1, 4, 0, 2}; /* indices of times, fastest first */
  for (int i = 0; i < NV; ++i)
    cr_assert_eq(t[0].ranked[i], v[order[i]], "rank %d: got %s, want %s", i + 1, t[0].ranked[i]->name,
                 v[order[i]]->name);
  cr_assert_float_eq(t[0].best_ms, 0.75, 1e-9);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM winners"), NV);
  free(t);
}

Test(db, reranking_replaces_the_old_ranking)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(512, 512, 512);
  const kt_variant *a = kt_test_need(kt_test_is_matmul, 0, "matmul");
  const kt_variant *b = kt_test_need(kt_test_is_matmul, 1, "matmul");
  kt_measurement m1[] = {kt_test_measure(a, p, "ok", 1.0), kt_test_measure(b, p, "ok", 2.0)};
  cr_assert_eq(kt_test_tune(path, &dev, m1, 2, p), 2);
  /* A newer measurement of b is faster: it takes b's place. */
  kt_measurement m2[] = {kt_test_measure(b, p, "ok", 0.5)};
  cr_assert_eq(kt_test_tune(path, &dev, m2, 1, p), 2);
  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].count, 2);
  cr_assert_eq(t[0].ranked[0], b);
  cr_assert_eq(t[0].ranked[1], a);
  cr_assert_float_eq(t[0].best_ms, 0.5, 1e-9);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM winners"), 2);
  free(t);
}

Test(db, wrong_results_never_rank_even_when_fastest)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(2048, 2048, 2048);
  const kt_variant *bad = kt_test_need(kt_test_is_matmul, 0, "matmul");
  const kt_variant *good = kt_test_need(kt_test_is_matmul, 1, "matmul");
  kt_measurement m[] = {
      kt_test_measure(bad, p, "ok", 0.1),
      kt_test_measure(bad, p, "wrong", 0.1),
      kt_test_measure(bad, p, "ok", 0.1), /* newest, still excluded */
      kt_test_measure(good, p, "ok", 1.0),
  };
  cr_assert_eq(kt_test_tune(path, &dev, m, 4, p), 1);
  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].count, 1);
  cr_assert_eq(t[0].ranked[0], good, "got %s", t[0].ranked[0]->name);
  free(t);
}

Test(db, failed_launches_timeouts_and_skips_are_recorded_but_never_rank)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(4096, 4096, 4096);
  const kt_variant *lf = kt_test_need(kt_test_is_matmul, 0, "matmul");
  const kt_variant *to = kt_test_need(kt_test_is_matmul, 1, "matmul");
  const kt_variant *sk = kt_test_need(kt_test_is_matmul, 2, "matmul");
  const kt_variant *ok = kt_test_need(kt_test_is_matmul, 3, "matmul");
  /* Times that would win if failed rows counted. */
  kt_measurement m[] = {
      kt_test_measure(lf, p, "launch_failed", 0.01),
      kt_test_measure(to, p, "timed_out", 0.01),
      kt_test_measure(sk, p, "skipped", 0.01),
      kt_test_measure(ok, p, "ok", 9.0),
  };
  cr_assert_eq(kt_test_tune(path, &dev, m, 4, p), 1);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements"), 4);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements WHERE status='launch_failed'"), 1);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements WHERE status='timed_out'"), 1);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements WHERE status='skipped'"), 1);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM winners"), 1);
  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].count, 1);
  cr_assert_eq(t[0].ranked[0], ok, "got %s", t[0].ranked[0]->name);
  cr_assert_float_eq(t[0].best_ms, 9.0, 1e-9);
  free(t);
}

Test(db, measurement_with_stale_source_hash_never_ranks)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(1024, 1024, 1024);
  const kt_variant *a = kt_test_need(kt_test_is_matmul, 0, "matmul");
  const kt_variant *b = kt_test_need(kt_test_is_matmul, 1, "matmul");
  const kt_variant *c = kt_test_need(kt_test_is_matmul, 2, "matmul");
  kt_measurement m[] = {
      kt_test_measure(a, p, "ok", 2.0), kt_test_measure(a, p, "ok", 0.1), /* newest and fastest, but a stale build */
      kt_test_measure(b, p, "ok", 1.0), kt_test_measure(c, p, "ok", 0.2), /* only ever measured stale */
  };
  m[1].source_hash = "0000000000000000";
  m[3].source_hash = "ffffffffffffffff";
  cr_assert_str_neq(a->source_hash, m[1].source_hash);
  cr_assert_str_neq(c->source_hash, m[3].source_hash);
  cr_assert_eq(kt_test_tune(path, &dev, m, 4, p), 2);
  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].count, 2);
  cr_assert_eq(t[0].ranked[0], b, "got %s", t[0].ranked[0]->name);
  cr_assert_eq(t[0].ranked[1], a, "got %s", t[0].ranked[1]->name);
  cr_assert_float_eq(t[0].best_ms, 1.0, 1e-9);
  free(t);
}

Test(db, winner_with_stale_source_hash_is_not_loaded)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(1024, 1024, 1024);
  const kt_variant *a = kt_test_need(kt_test_is_matmul, 0, "matmul");
  const kt_variant *b = kt_test_need(kt_test_is_matmul, 1, "matmul");
  kt_measurement m[] = {kt_test_measure(a, p, "ok", 0.5), kt_test_measure(b, p, "ok", 1.0)};
  cr_assert_eq(kt_test_tune(path, &dev, m, 2, p), 2);
  /* As if a was regenerated after the ranking was written. */
  char sql[256];
  snprintf(sql, sizeof sql, "UPDATE winners SET source_hash='0123456789abcdef' WHERE variant='%s'", a->name);
  kt_test_sql(path, sql);
  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].count, 1);
  cr_assert_eq(t[0].ranked[0], b, "got %s", t[0].ranked[0]->name);
  free(t);
  /* A problem whose only winner is stale is not loaded at all. */
  snprintf(sql, sizeof sql, "UPDATE winners SET source_hash='0123456789abcdef' WHERE variant='%s'", b->name);
  kt_test_sql(path, sql);
  t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 0);
  free(t);
}

Test(db, other_devices_and_generator_versions_are_not_loaded)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev1 = kt_test_device("Test GPU", 90, 1);
  kt_device_info dev2 = kt_test_device("Other GPU", 90, 1);
  cr_assert_str_neq(dev1.fingerprint, dev2.fingerprint);
  const char *old_gen = "0.0-test";
  cr_assert_str_neq(old_gen, kt_registry_generator_version);
  kt_problem p = kt_test_matmul_problem(1024, 1024, 1024);
  const kt_variant *a = kt_test_need(kt_test_is_matmul, 0, "matmul");
  const kt_variant *b = kt_test_need(kt_test_is_matmul, 1, "matmul");
  const kt_variant *c = kt_test_need(kt_test_is_matmul, 2, "matmul");
  kt_measurement ma = kt_test_measure(a, p, "ok", 2.0);
  kt_measurement mb = kt_test_measure(b, p, "ok", 1.0);
  kt_measurement mc = kt_test_measure(c, p, "ok", 0.5);

  kt_db *db = open_ok(path, KT_DB_WRITE);
  cr_assert_eq(kt_db_record(db, &dev1, kt_registry_generator_version, &ma, 1, err, sizeof err), KT_OK, "%s", err);
  cr_assert_eq(kt_db_record(db, &dev2, kt_registry_generator_version, &mb, 1, err, sizeof err), KT_OK, "%s", err);
  cr_assert_eq(kt_db_record(db, &dev1, old_gen, &mc, 1, err, sizeof err), KT_OK, "%s", err);
  cr_assert_eq(kt_db_rank(db, dev1.fingerprint, kt_registry_generator_version, &p, err, sizeof err), 1, "%s", err);
  cr_assert_eq(kt_db_rank(db, dev2.fingerprint, kt_registry_generator_version, &p, err, sizeof err), 1, "%s", err);
  cr_assert_eq(kt_db_rank(db, dev1.fingerprint, old_gen, &p, err, sizeof err), 1, "%s", err);
  kt_db_close(db);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM winners"), 3);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM devices"), 2);

  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev1.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].count, 1);
  cr_assert_eq(t[0].ranked[0], a, "got %s", t[0].ranked[0]->name);
  cr_assert_float_eq(t[0].best_ms, 2.0, 1e-9);
  free(t);
  t = NULL;
  cr_assert_eq(load(path, dev2.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].ranked[0], b, "got %s", t[0].ranked[0]->name);
  free(t);
  kt_device_info dev3 = kt_test_device("Unseen GPU", 90, 1);
  t = NULL;
  cr_assert_eq(load(path, dev3.fingerprint, kt_registry_generator_version, &t), 0);
  free(t);
}

Test(db, hist_ranks_by_geometric_mean_over_distributions)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem pu = kt_test_hist_problem(4096, 1 << 24, "uniform");
  kt_problem ps = kt_test_hist_problem(4096, 1 << 24, "skewed");
  const kt_variant *x = kt_test_need(kt_test_is_hist, 0, "hist");
  const kt_variant *y = kt_test_need(kt_test_is_hist, 1, "hist");
  const kt_variant *z = kt_test_need(kt_test_is_hist, 2, "hist");
  const kt_variant *w = kt_test_need(kt_test_is_hist, 3, "hist");
  /* geometric means: x 3, y 4, z sqrt(50) ~ 7.07.  The arithmetic mean
   * would put y first (4 < 5); the best single time would put z first. */
  kt_measurement m[] = {
      kt_test_measure(x, pu, "ok", 1.0),      kt_test_measure(x, ps, "ok", 9.0), kt_test_measure(y, pu, "ok", 4.0),
      kt_test_measure(y, ps, "ok", 4.0),      kt_test_measure(z, pu, "ok", 0.5), kt_test_measure(z, ps, "ok", 100.0),
      kt_test_measure(w, pu, "ok", 0.1), /* fastest, but never measured skewed */
      kt_test_measure(w, ps, "timed_out", 0),
  };
  kt_problem p = kt_test_hist_problem(4096, 1 << 24, "");
  cr_assert_eq(kt_test_tune(path, &dev, m, (int)(sizeof m / sizeof m[0]), p), 3);
  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].problem.family, KT_FAMILY_HIST);
  cr_assert_eq(t[0].problem.nbins, 4096);
  cr_assert_eq(t[0].problem.nsamples, 1 << 24);
  cr_assert_eq(t[0].count, 3);
  cr_assert_eq(t[0].ranked[0], x, "rank 1: got %s", t[0].ranked[0]->name);
  cr_assert_eq(t[0].ranked[1], y, "rank 2: got %s", t[0].ranked[1]->name);
  cr_assert_eq(t[0].ranked[2], z, "rank 3: got %s", t[0].ranked[2]->name);
  cr_assert_float_eq(t[0].best_ms, 3.0, 1e-9);
  free(t);
}

/* ---- concurrency --------------------------------------------------------- */

/* Children block on the pipe until the parent closes it, then all start at once. */
static void wait_for_start(int fd)
{
  char c;
  while (read(fd, &c, 1) < 0 && errno == EINTR)
    ;
  close(fd);
}

/* Fork n children that run fn(i, arg) after a common start; each child's
 * exit status is fn's return.  Asserts that every child exited 0. */
static void run_children(int n, int (*fn)(int i, const void *arg), const void *arg)
{
  int gate[2];
  cr_assert_eq(pipe(gate), 0);
  pid_t pid[8];
  cr_assert_leq(n, 8);
  for (int i = 0; i < n; ++i) {
    pid[i] = fork();
    cr_assert_geq(pid[i], 0, "fork failed");
    if (pid[i] == 0) {
      close(gate[1]);
      wait_for_start(gate[0]);
      _exit(fn(i, arg));
    }
  }
  close(gate[0]);
  close(gate[1]);
  /* Reap every child before judging any, so none outlives the test's directory. */
  int status[8];
  for (int i = 0; i < n; ++i)
    if (waitpid(pid[i], &status[i], 0) != pid[i])
      status[i] = -1;
  for (int i = 0; i < n; ++i) {
    cr_assert(status[i] != -1 && WIFEXITED(status[i]), "child %d did not exit normally", i);
    cr_assert_eq(WEXITSTATUS(status[i]), 0, "child %d failed with status %d", i, WEXITSTATUS(status[i]));
  }
}

enum { TRANSACTIONS = 100 };

static int record_many(int i, const void *arg)
{
  const char *path = arg;
  kt_db *db = NULL;
  char e[512];
  if (kt_db_open(&db, path, KT_DB_WRITE, e, sizeof e) != KT_OK)
    return 10;
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  /* Each child measures its own problem, so its rows can be counted. */
  kt_problem p = kt_test_matmul_problem(1000 + i, 1000, 1000);
  int rc = 0;
  for (int t = 0; t < TRANSACTIONS && rc == 0; ++t) {
    kt_measurement m[2] = {kt_test_measure(matmul_variant(0), p, "ok", 1.0 + t),
                           kt_test_measure(matmul_variant(1), p, "ok", 2.0 + t)};
    if (kt_db_record(db, &dev, kt_registry_generator_version, m, 2, e, sizeof e) != KT_OK)
      rc = 11;
  }
  kt_db_close(db);
  return rc;
}

Test(db, concurrent_writers_lose_no_rows, .timeout = 120)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "shared.db");
  kt_db_close(open_ok(path, KT_DB_WRITE));
  cr_assert_geq(kt_registry_count, 2);
  run_children(2, record_many, path);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements"), 4 * TRANSACTIONS);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements WHERE m=1000"), 2 * TRANSACTIONS);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements WHERE m=1001"), 2 * TRANSACTIONS);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM devices"), 1);
}

static int create_schema(int i, const void *arg)
{
  (void)i;
  kt_db *db = NULL;
  char e[512];
  int rc = kt_db_open(&db, arg, KT_DB_WRITE, e, sizeof e);
  kt_db_close(db);
  return rc == KT_OK ? 0 : 20 + rc;
}

Test(db, concurrent_schema_creation_both_succeed, .timeout = 120)
{
  /* The race is short: try it on many fresh files. */
  for (int round = 0; round < 100; ++round) {
    char name[64], path[PATH_MAX];
    snprintf(name, sizeof name, "race-%d.db", round);
    kt_test_path(path, sizeof path, name);
    run_children(2, create_schema, path);
    cr_assert_eq(kt_test_sql_int(path, "PRAGMA application_id"), KT_DB_APPLICATION_ID);
    cr_assert_eq(kt_test_sql_int(path, "PRAGMA user_version"), KT_DB_SCHEMA_VERSION);
    kt_db_close(open_ok(path, KT_DB_READ));
  }
}

/* ---- misuse ------------------------------------------------------------- */

Test(db, read_only_database_refuses_writes)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_db_close(open_ok(path, KT_DB_WRITE));
  kt_db *db = open_ok(path, KT_DB_READ);
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(64, 64, 64);
  kt_measurement m = kt_test_measure(matmul_variant(0), p, "ok", 1.0);
  cr_assert_eq(kt_db_record(db, &dev, kt_registry_generator_version, &m, 1, err, sizeof err), KT_ERR_DB_WRITE);
  cr_assert_eq(kt_db_rank(db, dev.fingerprint, kt_registry_generator_version, &p, err, sizeof err), -KT_ERR_DB_WRITE);
  kt_db_close(db);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements"), 0);
}

/* ---- damaged files ------------------------------------------------------ */

/* A tuned file whose index no longer matches its table: the schema now
 * declares measurements_by_problem over other columns than its b-tree
 * holds.  Every page is sound, so it reads as ours, but SQLite's
 * integrity_check reports rows missing from the index, and a write could
 * make it worse. */
static void make_index_mismatch(const char *path)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(256, 256, 256);
  kt_measurement m[2] = {kt_test_measure(matmul_variant(0), p, "ok", 1.0),
                         kt_test_measure(matmul_variant(1), p, "ok", 2.0)};
  kt_test_tune(path, &dev, m, 2, p);
  kt_test_sql(path, "PRAGMA writable_schema=ON; UPDATE sqlite_master SET"
                    " sql='CREATE INDEX measurements_by_problem ON measurements (variant, problem)'"
                    " WHERE name='measurements_by_problem'");
}

Test(db, damaged_index_is_refused_for_writing_and_left_byte_for_byte)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "damaged.db");
  make_index_mismatch(path);
  size_t before_len, after_len;
  unsigned char *before = kt_test_slurp(path, &before_len);
  const int entries = kt_test_dir_entries();
  kt_db *db = (kt_db *)(uintptr_t)8;
  err[0] = '\0';
  int rc = kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err);
  cr_assert_eq(rc, KT_ERR_DB_DAMAGED, "got %d (%s): %s", rc, kt_strerror(rc), err);
  cr_assert_null(db);
  cr_assert(strstr(err, "missing from index") && strstr(err, "mv "), "the message says what and how: %s", err);
  unsigned char *after = kt_test_slurp(path, &after_len);
  cr_assert_eq(after_len, before_len);
  cr_assert_eq(memcmp(before, after, before_len), 0, "a refused file changed");
  cr_assert_eq(kt_test_dir_entries(), entries, "a journal or WAL file was left beside the refused file");
  free(before);
  free(after);
}

/* Dispatch's read runs the quick check, which such a file passes; a tool
 * that says whether a file is sound runs the full one. */
Test(db, a_damaged_index_is_damaged_to_the_full_check_of_a_read)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "damaged.db");
  make_index_mismatch(path);
  kt_db_close(open_ok(path, KT_DB_READ));
  kt_db *db = (kt_db *)(uintptr_t)8;
  int rc = kt_db_open(&db, path, KT_DB_CHECK, err, sizeof err);
  cr_assert_eq(rc, KT_ERR_DB_DAMAGED, "got %d (%s): %s", rc, kt_strerror(rc), err);
  cr_assert_null(db);
  cr_assert_not_null(strstr(err, "missing from index"), "%s", err);
}

Test(db, flipped_bytes_are_never_written_through)
{
  /* Damage at many places of a tuned file: whatever SQLite makes of it, a
   * writer either refuses it, leaving every byte, or finds it sound. */
  char path[PATH_MAX], good[PATH_MAX];
  kt_test_path(good, sizeof good, "good.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(512, 512, 512);
  kt_measurement m[4];
  for (int i = 0; i < 4; ++i)
    m[i] = kt_test_measure(matmul_variant(i % 4), p, "ok", 1.0 + i);
  kt_test_tune(good, &dev, m, 4, p);
  size_t len;
  unsigned char *orig = kt_test_slurp(good, &len);
  cr_assert_gt(len, 4096u);
  int refused = 0;
  /* Each page's b-tree header, and a spot inside its cells. */
  for (size_t off = 4096; off < len; off += off % 4096 ? 4096 - 2000 : 2000) {
    kt_test_path(path, sizeof path, "flipped.db");
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite(orig, 1, len, f);
    fclose(f);
    f = fopen(path, "r+b");
    fseek(f, (long)off, SEEK_SET);
    for (int b = 0; b < 8; ++b)
      fputc(orig[off + (size_t)b < len ? off + (size_t)b : off] ^ 0x5a, f);
    fclose(f);
    size_t dlen;
    unsigned char *damaged = kt_test_slurp(path, &dlen);
    kt_db *db = NULL;
    int rc = kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err);
    if (rc == KT_OK) {
      kt_db_close(db);
    } else {
      ++refused;
      size_t alen;
      unsigned char *after = kt_test_slurp(path, &alen);
      cr_assert(alen == dlen && memcmp(after, damaged, dlen) == 0, "refused file changed (offset %zu, %s)", off, err);
      free(after);
    }
    free(damaged);
    unlink(path);
  }
  cr_assert_gt(refused, 0, "no damage was ever found");
  free(orig);
}

/* ---- readers without write access --------------------------------------- */

/* In a child: give up root (root ignores permissions), so the test runs as
 * a user who may read the directory and the file but write neither. */
static int drop_to_reader(void)
{
  if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
    return 1;
  return 0;
}

static int read_tuned_as_reader(int i, const void *arg)
{
  (void)i;
  if (drop_to_reader())
    return 30;
  kt_db *db = NULL;
  char e[512];
  if (kt_db_open(&db, arg, KT_DB_READ, e, sizeof e) != KT_OK) {
    fprintf(stderr, "reader: %s\n", e);
    return 31;
  }
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_tuned *t = NULL;
  int n = 0;
  int rc = kt_db_load(db, dev.fingerprint, kt_registry_generator_version, &t, &n, e, sizeof e);
  kt_db_close(db);
  free(t);
  if (rc != KT_OK) {
    fprintf(stderr, "reader: %s\n", e);
    return 32;
  }
  if (access(arg, W_OK) == 0)
    return 33; /* the test would prove nothing */
  return n == 1 ? 0 : 34;
}

/* A tuned file in a directory the reader cannot write. */
static void tuned_read_only(char *path, size_t len)
{
  char dir[PATH_MAX];
  kt_test_path(dir, sizeof dir, "ro");
  cr_assert_eq(mkdir(dir, 0755), 0);
  int n = snprintf(path, len, "%s/tune.db", dir);
  cr_assert(n > 0 && (size_t)n < len);
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(256, 256, 256);
  kt_measurement m = kt_test_measure(matmul_variant(0), p, "ok", 1.0);
  kt_test_tune(path, &dev, &m, 1, p);
  cr_assert_eq(chmod(kt_test_dir, 0755), 0);
  cr_assert_eq(chmod(path, 0444), 0);
  cr_assert_eq(chmod(dir, 0555), 0);
}

Test(db, a_reader_who_cannot_write_gets_the_tuned_rows)
{
  char path[PATH_MAX];
  tuned_read_only(path, sizeof path);
  /* The tuner returned the file to a rollback journal when it closed
   * (bytes 18 and 19 of the header: 1 rollback, 2 WAL). */
  size_t len;
  unsigned char *head = kt_test_slurp(path, &len);
  cr_assert(len > 100 && head[18] == 1 && head[19] == 1, "journal mode bytes %d %d", head[18], head[19]);
  free(head);
  run_children(1, read_tuned_as_reader, path);
  char dir[PATH_MAX];
  kt_test_path(dir, sizeof dir, "ro");
  chmod(dir, 0755);
}

Test(db, a_reader_who_cannot_write_reads_a_file_left_in_wal_mode)
{
  char path[PATH_MAX], dir[PATH_MAX];
  tuned_read_only(path, sizeof path);
  kt_test_path(dir, sizeof dir, "ro");
  chmod(dir, 0755);
  chmod(path, 0644);
  /* As a tuner leaves it when another connection held it at its close. */
  kt_test_sql(path, "PRAGMA journal_mode=WAL");
  size_t len;
  unsigned char *head = kt_test_slurp(path, &len);
  cr_assert(len > 100 && head[18] == 2 && head[19] == 2, "not in WAL mode");
  free(head);
  chmod(path, 0444);
  chmod(dir, 0555);
  run_children(1, read_tuned_as_reader, path);
  chmod(dir, 0755);
}

/* In a child, as a reader without write access: the tuned time of the
 * file's one ranked problem must be the one its -wal holds (0.5 ms), or,
 * for a path ending in "!", the file must be refused as stale. */
static int read_wal_as_reader(int i, const void *arg)
{
  (void)i;
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s", (const char *)arg);
  const size_t n = strlen(path);
  const int refused = n > 0 && path[n - 1] == '!';
  if (refused)
    path[n - 1] = 0;
  if (drop_to_reader())
    return 30;
  kt_db *db = NULL;
  char e[512];
  int rc = kt_db_open(&db, path, KT_DB_READ, e, sizeof e);
  if (refused && rc == KT_ERR_DB_OPEN && strstr(e, "stale") && strstr(e, "-wal"))
    return 0;
  if (refused) {
    fprintf(stderr, "reader: %d: %s\n", rc, e);
    kt_db_close(db);
    return 35;
  }
  if (rc != KT_OK) {
    fprintf(stderr, "reader: %s\n", e);
    return 31;
  }
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_tuned *t = NULL;
  int count = 0;
  rc = kt_db_load(db, dev.fingerprint, kt_registry_generator_version, &t, &count, e, sizeof e);
  kt_db_close(db);
  const double ms = count == 1 ? t[0].best_ms : -1;
  free(t);
  if (rc != KT_OK || access(path, W_OK) == 0)
    return 32;
  return ms == 0.5 ? 0 : 36; /* 1.0: read around the -wal */
}

/* A killed tuner leaves its committed writes in the -wal and no one to
 * copy them into the file: a reader who may not create the -shm reads them
 * all the same, and refuses the file when it cannot. */
Test(db, a_reader_who_cannot_write_reads_what_a_killed_tuner_left_in_the_wal)
{
  char path[PATH_MAX], dir[PATH_MAX], from[PATH_MAX + 8], to[PATH_MAX + 8], shm[PATH_MAX + 8];
  tuned_read_only(path, sizeof path);
  kt_test_path(dir, sizeof dir, "ro");
  chmod(dir, 0755);
  chmod(path, 0644);
  kt_test_path(from, sizeof from, "live.db");
  copy_file(path, from);
  wal_left_by_a_crash(path, "UPDATE winners SET time_ms = 0.5");
  snprintf(to, sizeof to, "%s-wal", path);
  cr_assert(kt_test_exists(to), "no -wal: the test proves nothing");
  chmod(path, 0444);
  chmod(to, 0444);
  chmod(dir, 0555);
  run_children(1, read_wal_as_reader, path);
  /* A -shm that the reader may not open: some connection may be writing
   * the -wal, which is then not safe to read without locks. */
  chmod(dir, 0755);
  snprintf(shm, sizeof shm, "%s-shm", path);
  kt_test_write_file(shm, "");
  chmod(shm, 0);
  chmod(dir, 0555);
  snprintf(from, sizeof from, "%s!", path);
  run_children(1, read_wal_as_reader, from);
  chmod(dir, 0755);
}

/* In a child: kt_db_open(path, mode) must answer want, saying `says`; 0,
 * or `code` once it has said what it got instead (`who` names the call). */
static int open_says(const char *path, int mode, int want, const char *says, const char *who, int code)
{
  kt_db *db = NULL;
  char e[512];
  const int rc = kt_db_open(&db, path, mode, e, sizeof e);
  kt_db_close(db);
  if (rc == want && strstr(e, says))
    return 0;
  fprintf(stderr, "%s: %d: %s\n", who, rc, e);
  return code;
}

/* In a child, as a user who may write the file at arg but not its folder:
 * a write to it, and the creation of a file beside it, fail naming the
 * folder (SQLite said "attempt to write a readonly database" and "unable
 * to open database file"). */
static int write_in_a_read_only_folder(int i, const void *arg)
{
  (void)i;
  if (drop_to_reader())
    return 30;
  char dir[PATH_MAX], fresh[PATH_MAX + 8], says[PATH_MAX + 64];
  snprintf(dir, sizeof dir, "%s", (const char *)arg);
  *strrchr(dir, '/') = 0;
  snprintf(fresh, sizeof fresh, "%s/new.db", dir);
  snprintf(says, sizeof says, "no write access to its folder '%s'", dir);
  if (access(arg, W_OK) != 0 || access(dir, W_OK) == 0)
    return 33; /* the test would prove nothing */
  const int rc = open_says(arg, KT_DB_WRITE, KT_ERR_DB_WRITE, says, "writer", 37);
  return rc ? rc : open_says(fresh, KT_DB_WRITE, KT_ERR_DB_OPEN, says, "creator", 38);
}

/* In a child, as a user who may write the folder but not the file at arg
 * (a WAL file, which SQLite then opens read-only without a word, so that
 * the open seemed to succeed and the first write failed): the open is
 * refused, saying so. */
static int write_a_file_it_may_not_write(int i, const void *arg)
{
  (void)i;
  if (drop_to_reader())
    return 30;
  if (access(arg, W_OK) == 0)
    return 33; /* the test would prove nothing */
  return open_says(arg, KT_DB_WRITE, KT_ERR_DB_WRITE, "no write access to it", "writer", 39);
}

Test(db, a_writer_without_write_access_to_the_file_is_refused_at_the_open)
{
  char dir[PATH_MAX], path[PATH_MAX];
  kt_test_path(dir, sizeof dir, "rw");
  cr_assert_eq(mkdir(dir, 0777), 0);
  cr_assert_eq(chmod(dir, 0777), 0);
  cr_assert_eq(chmod(kt_test_dir, 0755), 0);
  cr_assert_lt(snprintf(path, sizeof path, "%s/tune.db", dir), (int)sizeof path);
  kt_db_close(open_ok(path, KT_DB_WRITE));
  kt_test_sql(path, "PRAGMA journal_mode=WAL"); /* stays WAL after the close */
  cr_assert_eq(chmod(path, 0444), 0);
  size_t before_len, after_len;
  unsigned char *before = kt_test_slurp(path, &before_len);
  run_children(1, write_a_file_it_may_not_write, path);
  unsigned char *after = kt_test_slurp(path, &after_len);
  cr_assert(after_len == before_len && memcmp(before, after, before_len) == 0, "the file changed");
  free(before);
  free(after);
}

Test(db, a_writer_without_write_access_to_the_folder_is_told_so)
{
  char path[PATH_MAX], dir[PATH_MAX];
  tuned_read_only(path, sizeof path);
  chmod(path, 0666);
  run_children(1, write_in_a_read_only_folder, path);
  kt_test_path(dir, sizeof dir, "ro");
  chmod(dir, 0755);
}

/* In a child: a write to path through a rollback journal, its pages spilled
 * into the file, left unfinished (the process ends without a commit, as if
 * killed), so that a hot journal stays beside the file. */
static int interrupt_a_write(int i, const void *arg)
{
  (void)i;
  sqlite3 *h = NULL;
  if (sqlite3_open_v2(arg, &h, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
    return 40;
  if (sqlite3_exec(h,
                   "PRAGMA journal_mode=DELETE; PRAGMA cache_size=2; BEGIN;"
                   " UPDATE measurements SET reason = hex(randomblob(200)); DELETE FROM winners;",
                   NULL, NULL, NULL) != SQLITE_OK)
    return 41;
  _exit(0);
}

Test(db, an_interrupted_write_is_no_damage_and_is_not_read_around)
{
  char path[PATH_MAX], journal[PATH_MAX + 16];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  tuned_with_rows(path, 3000); /* enough that the unfinished write spills pages into the file */
  run_children(1, interrupt_a_write, path);
  snprintf(journal, sizeof journal, "%s-journal", path);
  cr_assert(kt_test_exists(journal), "the interrupted write left no journal: the test proves nothing");
  size_t before_len, after_len;
  unsigned char *before = kt_test_slurp(path, &before_len);
  /* A reader may not roll the journal back: it says so, reads nothing
   * around it, calls nothing damaged and changes nothing. */
  kt_db *db = NULL;
  int rc = kt_db_open(&db, path, KT_DB_READ, err, sizeof err);
  cr_assert_eq(rc, KT_ERR_DB_OPEN, "got %d (%s): %s", rc, kt_strerror(rc), err);
  cr_assert_null(db);
  cr_assert_not_null(strstr(err, "interrupted write"), "%s", err);
  unsigned char *after = kt_test_slurp(path, &after_len);
  cr_assert(after_len == before_len && memcmp(before, after, before_len) == 0, "a reader changed the file");
  cr_assert(kt_test_exists(journal));
  free(before);
  free(after);
  /* A writer rolls it back: the ranking is there again, whole. */
  db = open_ok(path, KT_DB_WRITE);
  kt_db_close(db);
  cr_assert(!kt_test_exists(journal));
  kt_tuned *t = NULL;
  cr_assert_eq(load(path, dev.fingerprint, kt_registry_generator_version, &t), 1);
  cr_assert_eq(t[0].count, 1);
  free(t);
}

/* ---- bounded history ---------------------------------------------------- */

Test(db, prune_keeps_the_newest_measurements_and_the_ranking)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(256, 256, 256);
  for (int round = 0; round < 5; ++round) {
    kt_measurement m[2] = {kt_test_measure(matmul_variant(0), p, "ok", 10.0 - round),
                           kt_test_measure(matmul_variant(1), p, "ok", 5.0)};
    kt_test_tune(path, &dev, m, 2, p);
  }
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements"), 10);
  kt_db *db = open_ok(path, KT_DB_WRITE);
  cr_assert_eq(kt_db_prune(db, 2, err, sizeof err), KT_OK, "%s", err);
  cr_assert_eq(kt_db_rank(db, dev.fingerprint, kt_registry_generator_version, &p, err, sizeof err), 2);
  kt_db_close(db);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements"), 4);
  /* The newest survive: variant 0 took 10, 9, 8, 7 and 6 ms in turn. */
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements WHERE time_ms IN (6, 7)"), 2);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements WHERE time_ms IN (8, 9, 10)"), 0);
  cr_assert_eq(kt_test_sql_int(path, "SELECT round(time_ms) FROM winners WHERE rank = 1"), 5);
}

/* ---- what a tune need not measure again ---------------------------------- */

typedef struct seen {
  int n;
  char variant[8][96], hash[8][24], status[8][16];
  double ms[8];
} seen;

static void collect(void *user, const kt_measurement *m)
{
  seen *s = user;
  cr_assert_lt(s->n, 8);
  snprintf(s->variant[s->n], sizeof s->variant[0], "%s", m->variant);
  snprintf(s->hash[s->n], sizeof s->hash[0], "%s", m->source_hash);
  snprintf(s->status[s->n], sizeof s->status[0], "%s", m->status);
  s->ms[s->n++] = m->time_ms;
}

Test(db, recorded_gives_the_newest_result_of_each_variant_whatever_its_status)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1), other = kt_test_device("Other GPU", 90, 1);
  const kt_variant *h[3];
  for (int i = 0; i < 3; ++i)
    h[i] = kt_test_need(kt_test_is_hist, i, "hist");
  kt_problem u = kt_test_hist_problem(256, 1000, "uniform"), sk = kt_test_hist_problem(256, 1000, "skewed");
  kt_measurement first[3] = {kt_test_measure(h[0], u, "ok", 2.0), kt_test_measure(h[1], u, "wrong", 0),
                             kt_test_measure(h[2], sk, "ok", 1.0)};
  kt_test_tune(path, &dev, first, 3, kt_test_hist_problem(256, 1000, ""));
  kt_measurement second[3] = {kt_test_measure(h[0], u, "ok", 1.5), kt_test_measure(h[2], u, "timed_out", 0),
                              kt_test_measure(h[1], u, "ok", 9.0)};
  second[2].source_hash = "0000000000000000"; /* a since-regenerated source: reported with its hash */
  kt_test_tune(path, &dev, second, 3, kt_test_hist_problem(256, 1000, ""));
  kt_test_tune(path, &other, first, 1, kt_test_hist_problem(256, 1000, ""));
  kt_db *db = open_ok(path, KT_DB_READ);
  seen s = {0};
  cr_assert_eq(kt_db_recorded(db, dev.fingerprint, kt_registry_generator_version, &u, collect, &s, err, sizeof err),
               KT_OK, "%s", err);
  kt_db_close(db);
  cr_assert_eq(s.n, 4, "h0, h1 twice (two sources), h2; not the skewed row or the other device's");
  for (int i = 0; i < s.n; ++i) {
    const int k = strcmp(s.variant[i], h[0]->name) == 0 ? 0 : strcmp(s.variant[i], h[1]->name) == 0 ? 1 : 2;
    cr_assert_str_eq(s.variant[i], h[k]->name);
    if (k == 0) {
      cr_expect_str_eq(s.status[i], "ok");
      cr_expect_float_eq(s.ms[i], 1.5, 1e-12, "the newest of two");
    } else if (k == 1) {
      cr_expect_str_eq(s.status[i], strcmp(s.hash[i], h[1]->source_hash) == 0 ? "wrong" : "ok");
    } else {
      cr_expect_str_eq(s.status[i], "timed_out");
    }
  }
}

Test(db, the_newest_measurement_is_the_latest_measured_not_the_latest_added)
{
  /* An import may add an old measurement after a newer one. */
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "tune.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_problem p = kt_test_matmul_problem(256, 256, 256);
  kt_measurement m[2] = {kt_test_measure(matmul_variant(0), p, "ok", 1.0),
                         kt_test_measure(matmul_variant(1), p, "ok", 2.0)};
  kt_test_tune(path, &dev, m, 2, p);
  kt_test_sql(path, "UPDATE measurements SET measured_at = '2030-01-01T00:00:00Z' WHERE time_ms = 2");
  kt_measurement late = kt_test_measure(matmul_variant(1), p, "ok", 0.5); /* recorded last, measured earlier */
  kt_test_tune(path, &dev, &late, 1, p);
  cr_assert_eq(kt_test_sql_int(path, "SELECT round(time_ms) FROM winners WHERE rank = 1"), 1,
               "registry[1]'s newest time is 2 ms (2030), not 0.5 ms");
  kt_db *db = open_ok(path, KT_DB_WRITE);
  cr_assert_eq(kt_db_prune(db, 1, err, sizeof err), KT_OK, "%s", err);
  kt_db_close(db);
  cr_assert_eq(kt_test_sql_int(path, "SELECT count(*) FROM measurements WHERE time_ms = 0.5"), 0, "pruned as older");
}
