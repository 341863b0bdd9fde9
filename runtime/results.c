/* SPDX-License-Identifier: MIT */
/* runtime/results.c: where tuned results live, and loading them in layers.
 *
 * Two layers, the first that has a problem wins it:
 *   user    the tuner's default target: $KTUNE_DB, else
 *           $XDG_DATA_HOME/ktune/ktune.db, else ~/.local/share/ktune/ktune.db;
 *           kt_options.db_path overrides it.
 *   system  shipped results, read-only, installed with the library:
 *           kt_options.system_db_path, else $KTUNE_SYSTEM_DB (either "" for
 *           none), else KT_SYSTEM_DB (DATADIR/ktune/system.db), else
 *           system.db beside the program or library that holds libktune (a
 *           build tree: build/system.db).
 * Within a file, rows for this exact device win; failing those, rows of
 * the same chip (name, compute capability and SM count; only the memory
 * size differs), and the source says so.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kt_internal.h"
#include "registry.h"

#ifndef KT_SYSTEM_DB
#define KT_SYSTEM_DB "/usr/local/share/ktune/system.db"
#endif

static int exists(const char *path)
{
  struct stat sb;
  return stat(path, &sb) == 0;
}

int kt_results_user_path(char *buf, size_t len)
{
  const char *env = getenv("KTUNE_DB");
  if (env && *env)
    return snprintf(buf, len, "%s", env) < (int)len ? KT_OK : KT_ERR_BAD_OPTION;
  const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
  int n;
  if (xdg && xdg[0] == '/')
    n = snprintf(buf, len, "%s/ktune/ktune.db", xdg);
  else if (home && *home)
    n = snprintf(buf, len, "%s/.local/share/ktune/ktune.db", home);
  else
    return KT_ERR_BAD_OPTION; /* nowhere to keep a user's results */
  return n > 0 && (size_t)n < len ? KT_OK : KT_ERR_BAD_OPTION;
}

void kt_results_make_parent_dirs(const char *path)
{
  char dir[1024];
  if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
    return;
  for (char *p = dir + 1; *p; ++p)
    if (*p == '/') {
      *p = 0;
      mkdir(dir, 0755);
      *p = '/';
    }
}

int kt_results_system_path(const char *option, char *buf, size_t len)
{
  const char *p = option ? option : getenv("KTUNE_SYSTEM_DB");
  if (p)
    return *p && snprintf(buf, len, "%s", p) < (int)len ? KT_OK : KT_ERR_DB_MISSING;
  if (exists(KT_SYSTEM_DB))
    return snprintf(buf, len, "%s", KT_SYSTEM_DB) < (int)len ? KT_OK : KT_ERR_BAD_OPTION;
  /* Beside the program or shared library that holds this code. */
  Dl_info info;
  if (dladdr((void *)kt_results_system_path, &info) && info.dli_fname) {
    const char *slash = strrchr(info.dli_fname, '/');
    const int dir = slash ? (int)(slash - info.dli_fname) : 1;
    int n = snprintf(buf, len, "%.*s/system.db", dir, slash ? info.dli_fname : ".");
    if (n > 0 && (size_t)n < len && exists(buf))
      return KT_OK;
  }
  snprintf(buf, len, "%s", KT_SYSTEM_DB);
  return KT_ERR_DB_MISSING;
}

/* One layer's rows for dev, exact device first, else the same chip. */
static int load_layer(const char *path, const kt_device_info *dev, kt_tuned **t, int *n, int *same_chip, char *err,
                      size_t errlen)
{
  kt_db *db = NULL;
  *t = NULL;
  *n = 0;
  *same_chip = 0;
  int rc = kt_db_open(&db, path, KT_DB_READ, err, errlen);
  if (rc == KT_OK)
    rc = kt_db_load(db, dev->fingerprint, kt_registry_generator_version, t, n, err, errlen);
  if (rc == KT_OK && *n == 0) {
    char chip[sizeof dev->fingerprint], other[sizeof dev->fingerprint];
    kt_device_chip(dev, chip, sizeof chip);
    if (kt_db_same_chip(db, chip, kt_registry_generator_version, other, sizeof other) == KT_OK) {
      free(*t);
      rc = kt_db_load(db, other, kt_registry_generator_version, t, n, err, errlen);
      *same_chip = rc == KT_OK && *n > 0;
    }
  }
  kt_db_close(db);
  return rc;
}

static int has_problem(const kt_tuned *t, int n, const kt_tuned *x)
{
  for (int i = 0; i < n; ++i)
    if (t[i].problem.family == x->problem.family && strcmp(t[i].key, x->key) == 0)
      return 1;
  return 0;
}

static int by_family(const void *a, const void *b)
{
  const kt_tuned *x = a, *y = b;
  if (x->problem.family != y->problem.family)
    return (int)x->problem.family - (int)y->problem.family;
  return x->layer != y->layer ? x->layer - y->layer : strcmp(x->key, y->key);
}

int kt_results_load(kt_results *r, const kt_device_info *dev, const char *user_option, const char *system_option,
                    kt_results_log log, void *user)
{
  memset(r, 0, sizeof *r);
  kt_results_layer *L = r->layer;
  int explicit_user = user_option != NULL || (getenv("KTUNE_DB") && *getenv("KTUNE_DB"));
  int rc = user_option
               ? (snprintf(L[0].path, sizeof L[0].path, "%s", user_option) < (int)sizeof L[0].path ? KT_OK
                                                                                                   : KT_ERR_BAD_OPTION)
               : kt_results_user_path(L[0].path, sizeof L[0].path);
  snprintf(L[0].name, sizeof L[0].name, "user");
  snprintf(L[1].name, sizeof L[1].name, "system");
  char err[512];
  for (int i = 0; i < KT_RESULTS_LAYERS; ++i) {
    if (i == 1)
      rc = kt_results_system_path(system_option, L[1].path, sizeof L[1].path);
    if (rc != KT_OK) {
      L[i].status = rc;
      if (i == 0 && explicit_user)
        log(user, KT_LOG_WARN, "ktune: %s tuning database %s: %s; using the default variants", L[i].name, L[i].path,
            kt_strerror(rc));
      continue;
    }
    kt_tuned *t = NULL;
    int n = 0, same_chip = 0;
    err[0] = 0;
    rc = load_layer(L[i].path, dev, &t, &n, &same_chip, err, sizeof err);
    L[i].status = rc;
    L[i].same_chip = same_chip;
    snprintf(L[i].source, sizeof L[i].source, "%s database %s%s", L[i].name, L[i].path,
             same_chip ? " (rows of the same chip: another memory size)" : "");
    if (rc != KT_OK) {
      /* A missing default file is normal (nothing tuned yet); anything
       * else, or a file the caller named, is worth a warning. */
      const int quiet = rc == KT_ERR_DB_MISSING && (i == 1 || !explicit_user);
      log(user, quiet ? KT_LOG_DEBUG : KT_LOG_WARN, "ktune: %s tuning database %s: %s (%s); using the default variants",
          L[i].name, L[i].path, kt_strerror(rc), err);
      free(t);
      continue;
    }
    log(user, KT_LOG_INFO, "ktune: %d tuned problems for %s from the %s", n, dev->fingerprint, L[i].source);
    kt_tuned *all = realloc(r->tuned, sizeof *all * (size_t)(r->ntuned + n + 1));
    if (!all) {
      free(t);
      return KT_ERR_NO_MEMORY;
    }
    r->tuned = all;
    for (int j = 0; j < n; ++j)
      if (!has_problem(r->tuned, r->ntuned, &t[j])) {
        t[j].layer = i;
        r->tuned[r->ntuned++] = t[j];
      }
    free(t);
  }
  /* Families in order, so that each family's problems are one slice. */
  if (r->ntuned > 1)
    qsort(r->tuned, (size_t)r->ntuned, sizeof *r->tuned, by_family);
  for (int i = 0; i < r->ntuned; ++i)
    r->tuned[i].source = r->layer[r->tuned[i].layer].source;
  if (r->ntuned == 0)
    log(user, KT_LOG_INFO, "ktune: no tuned results for %s in %s or %s; calls use the default variants (run make tune)",
        dev->fingerprint, L[0].path[0] ? L[0].path : "(no user database)", L[1].path);
  return KT_OK;
}
