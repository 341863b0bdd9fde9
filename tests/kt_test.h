/* SPDX-License-Identifier: MIT */
/* tests/kt_test.h: helpers the C tests share (temp directories, a described
 * device, registry look-ups by property, measurements and raw SQL).  No GPU
 * is needed for anything here.  Static inline, so each test uses what it needs. */
#ifndef KT_TEST_H
#define KT_TEST_H

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <sqlite3.h>

#include "kt_internal.h"
#include "registry.h"

/* ---- temp directories ------------------------------------------------- */

/* The test's own directory; each Criterion test runs in its own process. */
static char kt_test_dir[PATH_MAX];

static inline void kt_test_mkdir(void)
{
  const char *tmp = getenv("TMPDIR");
  int n = snprintf(kt_test_dir, sizeof kt_test_dir, "%s/ktune-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  cr_assert(n >= 0 && (size_t)n < sizeof kt_test_dir, "TMPDIR is too long");
  cr_assert_not_null(mkdtemp(kt_test_dir), "mkdtemp failed");
}

/* Remove the directory and everything in it (databases, -wal, -shm, and
 * directories the test made). */
static inline void kt_test_rmtree(const char *dir)
{
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char p[PATH_MAX];
    int n = snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (n < 0 || (size_t)n >= sizeof p)
      continue;
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      kt_test_rmtree(p);
    else
      unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

static inline void kt_test_rmdir(void)
{
  if (kt_test_dir[0])
    kt_test_rmtree(kt_test_dir);
}

/* A path inside the test's directory; valid until the next call with the same buf. */
static inline const char *kt_test_path(char *buf, size_t len, const char *name)
{
  int n = snprintf(buf, len, "%s/%s", kt_test_dir, name);
  cr_assert(n >= 0 && (size_t)n < len, "path too long: %s/%s", kt_test_dir, name);
  return buf;
}

static inline int kt_test_exists(const char *path)
{
  return access(path, F_OK) == 0;
}

/* Entries in the test directory (0 when it is empty). */
static inline int kt_test_dir_entries(void)
{
  DIR *d = opendir(kt_test_dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* The whole file; *len gets its size.  Free the result. */
static inline unsigned char *kt_test_slurp(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot read %s", path);
  unsigned char *buf = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (n == cap) {
      cap = cap ? 2 * cap : 4096;
      buf = realloc(buf, cap);
      cr_assert_not_null(buf);
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
  } while (got > 0);
  fclose(f);
  *len = n;
  return buf;
}

/* Lines in the file `name` of the test directory; 0 when there is none. */
static inline int kt_test_lines(const char *name)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, name);
  if (!kt_test_exists(path))
    return 0;
  size_t len;
  unsigned char *text = kt_test_slurp(path, &len);
  int n = 0;
  for (size_t i = 0; i < len; ++i)
    n += text[i] == '\n';
  free(text);
  return n;
}

static inline void kt_test_write_file(const char *path, const char *text)
{
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

/* ---- raw SQL, independent of db.c --------------------------------------- */

static inline void kt_test_sql(const char *path, const char *sql)
{
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open(path, &h), SQLITE_OK, "sqlite3_open %s", path);
  char *msg = NULL;
  int rc = sqlite3_exec(h, sql, NULL, NULL, &msg);
  cr_assert_eq(rc, SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
  sqlite3_close(h);
}

/* The first column of the first row of a query, read-only. */
static inline long long kt_test_sql_int(const char *path, const char *sql)
{
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "sqlite3_open %s", path);
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
  cr_assert_eq(sqlite3_step(st), SQLITE_ROW, "%s: no row", sql);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

/* The first column of the first row of a query as text ("" for NULL or no
 * row), read-only.  Free the result. */
static inline char *kt_test_sql_text(const char *path, const char *sql)
{
  sqlite3 *h = NULL;
  cr_assert_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "sqlite3_open %s", path);
  sqlite3_stmt *st = NULL;
  cr_assert_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(h));
  const char *t = sqlite3_step(st) == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : NULL;
  char *copy = strdup(t ? t : "");
  sqlite3_finalize(st);
  sqlite3_close(h);
  cr_assert_not_null(copy);
  return copy;
}

/* ---- a described device ------------------------------------------------- */

/* An H100-like device; cc and cluster support as given. */
static inline kt_device_info kt_test_device(const char *name, int cc, int cluster_launch)
{
  kt_device_info d;
  memset(&d, 0, sizeof d);
  snprintf(d.name, sizeof d.name, "%s", name);
  d.cc = cc;
  d.sm_count = 132;
  d.smem_per_sm = 233472;
  d.smem_optin = 232448;
  d.max_threads_per_sm = 2048;
  d.max_blocks_per_sm = 32;
  d.regs_per_sm = 65536;
  d.smem_reserved = 1024;
  d.cluster_launch = cluster_launch;
  d.mem_bytes = 80ULL << 30;
  kt_device_fingerprint(&d);
  return d;
}

/* A context on the test device "Test GPU" (sm_90) whose user database,
 * none.db in the test's folder (made by kt_test_mkdir), does not exist. */
static inline kt_context *kt_test_open_no_db(void)
{
  kt_test_mkdir();
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "none.db");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  kt_options o = kt_default_options();
  o.db_path = path;
  kt_context *ctx = NULL;
  cr_assert_eq(kt_open_described(&ctx, &dev, &o), KT_OK);
  return ctx;
}

/* ---- the registry, by property ------------------------------------------ */

typedef int (*kt_test_pred)(const kt_variant *v);

/* The nth (0-based) registry variant with the property, or NULL: the entry
 * of the newest target that has it (they come first), the one a test
 * device of cc 90 uses when the build has sm_90. */
static inline const kt_variant *kt_test_nth(kt_test_pred pred, int nth)
{
  for (int i = 0; i < kt_registry_count; ++i)
    if (kt_registry_find(kt_registry[i].name, NULL) == &kt_registry[i] && pred(&kt_registry[i]) && nth-- == 0)
      return &kt_registry[i];
  return NULL;
}

/* Like kt_test_nth, among the entries that device d uses (its target's). */
static inline const kt_variant *kt_test_nth_on(const kt_device_info *d, kt_test_pred pred, int nth)
{
  for (int i = 0; i < kt_registry_count; ++i)
    if (kt_registry[i].target == kt_device_target(d) && pred(&kt_registry[i]) && nth-- == 0)
      return &kt_registry[i];
  return NULL;
}

/* Like kt_test_nth, but the test fails when the registry has too few. */
static inline const kt_variant *kt_test_need(kt_test_pred pred, int nth, const char *what)
{
  const kt_variant *v = kt_test_nth(pred, nth);
  cr_assert_not_null(v, "the registry has no variant #%d that is %s", nth, what);
  return v;
}
static inline const kt_variant *kt_test_need_on(const kt_device_info *d, kt_test_pred pred, int nth, const char *what)
{
  const kt_variant *v = kt_test_nth_on(d, pred, nth);
  cr_assert_not_null(v, "the registry has no variant #%d for %s's target that is %s", nth, d->name, what);
  return v;
}

static inline int kt_test_is_matmul(const kt_variant *v)
{
  return v->family == KT_FAMILY_MATMUL;
}
static inline int kt_test_is_matmul_align4(const kt_variant *v)
{
  return v->family == KT_FAMILY_MATMUL && v->align == 4;
}
static inline int kt_test_is_matmul_align1(const kt_variant *v)
{
  return v->family == KT_FAMILY_MATMUL && v->align == 1;
}
static inline int kt_test_is_hist(const kt_variant *v)
{
  return v->family == KT_FAMILY_HIST;
}
static inline int kt_test_is_hist_smem(const kt_variant *v)
{
  return v->family == KT_FAMILY_HIST && strcmp(v->algo, "smem") == 0 && v->counter_bits > 0;
}
static inline int kt_test_is_hist_global(const kt_variant *v)
{
  return v->family == KT_FAMILY_HIST && v->counter_bits == 0 && v->cluster == 1 && v->min_cc == 0;
}
static inline int kt_test_is_hist_cluster(const kt_variant *v)
{
  return v->family == KT_FAMILY_HIST && v->cluster > 1 && v->min_cc == 90;
}
static inline int kt_test_is_hist_sm90_no_cluster(const kt_variant *v)
{
  return v->family == KT_FAMILY_HIST && v->cluster == 1 && v->min_cc == 90;
}

/* ---- problems and measurements ------------------------------------------ */

static inline kt_problem kt_test_matmul_problem(long long m, long long n, long long k)
{
  kt_problem p;
  memset(&p, 0, sizeof p);
  p.family = KT_FAMILY_MATMUL;
  p.m = m;
  p.n = n;
  p.k = k;
  return p;
}

static inline kt_problem kt_test_hist_problem(long long nbins, long long nsamples, const char *dist)
{
  kt_problem p;
  memset(&p, 0, sizeof p);
  p.family = KT_FAMILY_HIST;
  p.nbins = nbins;
  p.nsamples = nsamples;
  snprintf(p.dist, sizeof p.dist, "%s", dist ? dist : "");
  return p;
}

/* A measurement of v on p with v's own source hash. */
static inline kt_measurement kt_test_measure(const kt_variant *v, kt_problem p, const char *status, double ms)
{
  kt_measurement m;
  memset(&m, 0, sizeof m);
  m.problem = p;
  m.variant = v->name;
  m.source_hash = v->source_hash;
  m.status = status;
  m.reason = strcmp(status, "ok") == 0 ? "" : "test";
  m.time_ms = ms;
  m.rate = ms > 0 ? 1.0 / ms : 0;
  m.max_err = 0;
  m.reps = 10;
  return m;
}

/* Record measurements and rank p, for dev and this build's generator. */
static inline int kt_test_tune(const char *path, const kt_device_info *dev, const kt_measurement *m, int n,
                               kt_problem p)
{
  kt_db *db = NULL;
  char err[512] = "";
  int rc = kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err);
  cr_assert_eq(rc, KT_OK, "kt_db_open: %s", err);
  rc = kt_db_record(db, dev, kt_registry_generator_version, m, n, err, sizeof err);
  cr_assert_eq(rc, KT_OK, "kt_db_record: %s", err);
  int ranked = kt_db_rank(db, dev->fingerprint, kt_registry_generator_version, &p, err, sizeof err);
  cr_assert_geq(ranked, 0, "kt_db_rank: %s", err);
  kt_db_close(db);
  return ranked;
}

/* Record two variants' times at the matmul problem n^3 in path, for dev,
 * and rank it. */
static inline void kt_test_tune_pair(const char *path, const kt_device_info *dev, long long n, const kt_variant *a,
                                     double a_ms, const kt_variant *b, double b_ms)
{
  kt_problem p = kt_test_matmul_problem(n, n, n);
  kt_measurement m[2] = {kt_test_measure(a, p, "ok", a_ms), kt_test_measure(b, p, "ok", b_ms)};
  cr_assert_eq(kt_test_tune(path, dev, m, 2, p), 2);
}

#endif
