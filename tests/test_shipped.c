/* SPDX-License-Identifier: MIT */
/* tests/test_shipped.c: the shipped results (the *.json files of
 * tuning-db/shipped/, the system layer's source) are sound: each imports,
 * alone, into a fresh database.  No GPU needed.  It prints how many of
 * each file's measurements this build can use (its generator, and a
 * variant it has with the same source hash); the rest are stale, kept and
 * never dispatched, until the GPU's file is regenerated (README: "Moving
 * and sharing results").  There may be no shipped files at all.
 *
 *   make build/tests/test_shipped && build/tests/test_shipped --verbose
 */
#include <glob.h>

#include "kt_test.h"

static void setup(void)
{
  kt_test_mkdir();
}

static void teardown(void)
{
  kt_test_rmdir();
}

TestSuite(shipped, .init = setup, .fini = teardown);

/* tuning-db/shipped/ of the tree this test was built in (build/tests/..). */
static void shipped_dir(char *buf, size_t len)
{
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  cr_assert_gt(n, 0);
  exe[n] = 0;
  *strrchr(exe, '/') = 0;
  int m = snprintf(buf, len, "%s/../../tuning-db/shipped", exe);
  cr_assert(m > 0 && (size_t)m < len);
}

Test(shipped, every_shipped_file_imports_and_says_how_many_rows_this_build_can_use)
{
  char dir[PATH_MAX], pattern[PATH_MAX + 16];
  shipped_dir(dir, sizeof dir);
  snprintf(pattern, sizeof pattern, "%s/*.json", dir);
  glob_t g;
  const int grc = glob(pattern, 0, NULL, &g);
  cr_assert(grc == 0 || grc == GLOB_NOMATCH, "glob %s", pattern);
  const size_t nfiles = grc == 0 ? g.gl_pathc : 0;
  long long all = 0, current = 0;
  for (size_t i = 0; i < nfiles; ++i) {
    const char *file = g.gl_pathv[i];
    char db_path[PATH_MAX], name[32], err[1024] = "";
    snprintf(name, sizeof name, "shipped-%zu.db", i);
    kt_test_path(db_path, sizeof db_path, name);
    size_t len;
    char *text = (char *)kt_test_slurp(file, &len);
    text = realloc(text, len + 1);
    text[len] = 0;
    kt_db *db = NULL;
    cr_assert_eq(kt_db_open(&db, db_path, KT_DB_WRITE, err, sizeof err), KT_OK, "%s", err);
    kt_db_import_counts c;
    const char *docs[] = {text}, *names[] = {file};
    const int rc = kt_db_import(db, 1, names, docs, &c, err, sizeof err);
    kt_db_close(db);
    free(text);
    cr_assert_eq(rc, KT_OK, "%s is broken: %s: %s", file, kt_strerror(rc), err);
    cr_assert_eq(kt_db_open(&db, db_path, KT_DB_READ, err, sizeof err), KT_OK, "%s", err);
    kt_db_device *d = NULL;
    int nd = 0;
    cr_assert_eq(kt_db_devices(db, kt_registry_generator_version, &d, &nd, err, sizeof err), KT_OK, "%s", err);
    kt_db_close(db);
    for (int k = 0; k < nd; ++k) {
      printf("shipped: %s: %s: %lld measurements, %lld of this build's sources (%lld stale), %d problems ranked\n",
             strrchr(file, '/') + 1, d[k].fingerprint, d[k].measurements, d[k].current, d[k].stale, c.ranked);
      all += d[k].measurements;
      current += d[k].current;
    }
    free(d);
  }
  printf("shipped: %zu files in %s: %lld measurements, %lld of them match this build's generated sources\n", nfiles,
         dir, all, current);
  fflush(stdout);
  if (grc == 0)
    globfree(&g);
}
