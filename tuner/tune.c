/* SPDX-License-Identifier: MIT */
/* tuner/tune.c: `ktune tune`, the autotuner's driver (kt_tune_).
 *
 * For every family (kt_tune_families), problem and variant: a worker
 * process (worker.c) checks the variant on fresh random inputs, then times
 * it; this process records every result in the database, ranks each
 * problem's variants (winner first) once all its distributions are in, and
 * has each family print its table.  A worker that faults or hangs past the
 * deadline costs one variant, recorded with its reason; the tune goes on in
 * a fresh worker.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kt_internal.h"
#include "registry.h"
#include "tuner.h"

#define MAX_PROBLEMS 256 /* per family */

static int total_jobs, done_jobs;
static int tty;

static void progress(const char *problem, const char *variant)
{
  if (!tty)
    return;
  const int width = 30;
  int fill = total_jobs ? done_jobs * width / total_jobs : 0;
  char bar[64];
  for (int i = 0; i < width; ++i)
    bar[i] = i < fill ? '#' : '.';
  bar[width] = 0;
  fprintf(stderr, "\r[%s] %4d/%-4d %-28.28s %-40.40s", bar, done_jobs, total_jobs, problem, variant ? variant : "");
  fflush(stderr);
}

static void on_event(void *user, const char *key, const char *variant, int finished)
{
  (void)user;
  if (finished)
    ++done_jobs;
  else
    progress(key, variant);
}

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int kt_tune_selected(const char *globs, const char *name)
{
  if (!globs)
    return 1;
  char pattern[256];
  int more;
  while ((more = kt_tune_family_item(&globs, pattern, sizeof pattern)) != 0)
    if (more > 0 && fnmatch(pattern, name, 0) == 0) /* a longer pattern (more < 0) matches nothing */
      return 1;
  return 0;
}

static void usage(void)
{
  char line[1024] = "usage: ktune tune [--db PATH] [--family ";
  for (int f = 0; f < kt_tune_family_count; ++f) {
    const kt_family_ops *ops = kt_family_get(kt_tune_families[f]->id);
    snprintf(line + strlen(line), sizeof line - strlen(line), "%s|", ops->name);
    if (strcmp(ops->long_name, ops->name))
      snprintf(line + strlen(line), sizeof line - strlen(line), "%s|", ops->long_name);
  }
  snprintf(line + strlen(line), sizeof line - strlen(line), "all]");
  fputs(line, stderr);
  int col = (int)strlen(line);
  /* The families' options, then the common ones, wrapped under the first. */
  char item[160];
  for (int f = 0; f <= kt_tune_family_count; ++f) {
    static const kt_tune_option common[] = {
        {"--variants", "GLOB,...", NULL}, {"--timeout", "SECONDS", NULL}, {"--seed", "N", NULL}, {NULL, NULL, NULL}};
    const kt_tune_option *opt = f < kt_tune_family_count ? kt_tune_families[f]->options : common;
    for (; opt->name; ++opt) {
      const int n = snprintf(item, sizeof item, " [%s %s]", opt->name, opt->arg);
      if (col + n > 100) {
        fprintf(stderr, "\n%17s", "");
        col = 17;
      }
      fputs(item, stderr);
      col += n;
    }
  }
  fprintf(stderr, "\n  --variants: comma-separated shell patterns (fnmatch), each matching whole variant names\n"
                  "  (ktune list shows them)\n");
}

/* mkdir -p of the folders above path (the user database's, on first use). */
static void make_parent_dirs(const char *path)
{
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *p = dir + 1; *p; ++p)
    if (*p == '/') {
      *p = 0;
      mkdir(dir, 0755);
      *p = '/';
    }
}

int kt_tune_parse_args(int argc, char **argv, kt_tune_opts *o)
{
  memset(o, 0, sizeof *o);
  o->db = NULL; /* the user database (kt_results_user_path) */
  for (int f = 0; f < kt_tune_family_count; ++f) {
    o->on[f] = 1;
    for (int k = 0; kt_tune_families[f]->options[k].name; ++k)
      o->values[f][k] = kt_tune_families[f]->options[k].fallback;
  }
  o->timeout_s = 120;
  o->seed = (unsigned long long)time(NULL);
  for (int i = 2; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      usage();
      return 2;
    }
    int known = 1;
    if (!strcmp(a, "--db"))
      o->db = v;
    else if (!strcmp(a, "--family")) {
      const kt_tune_family *only = strcmp(v, "all") ? kt_tune_family_find(v) : NULL;
      if (strcmp(v, "all") && !only) {
        fprintf(stderr, "ktune tune: unknown family '%s'\n", v);
        usage();
        return 2;
      }
      for (int f = 0; f < kt_tune_family_count; ++f)
        o->on[f] = !only || kt_tune_families[f] == only;
    } else if (!strcmp(a, "--variants"))
      o->variants = v;
    else if (!strcmp(a, "--timeout"))
      o->timeout_s = atof(v);
    else if (!strcmp(a, "--seed"))
      o->seed = strtoull(v, NULL, 10);
    else {
      known = 0;
      for (int f = 0; f < kt_tune_family_count && !known; ++f)
        for (int k = 0; kt_tune_families[f]->options[k].name && !known; ++k)
          if (!strcmp(a, kt_tune_families[f]->options[k].name)) {
            o->values[f][k] = v;
            known = 1;
          }
    }
    if (!known) {
      usage();
      return 2;
    }
    ++i;
  }
  if (!(o->timeout_s > 0)) {
    fprintf(stderr, "ktune tune: bad --timeout\n");
    return 2;
  }
  return 0;
}

/* Do p and q differ only in their distribution? */
static int same_problem(const kt_problem *p, const kt_problem *q)
{
  if (p->family != q->family)
    return 0;
  const kt_family_ops *ops = kt_family_get(p->family);
  for (int d = 0; d < ops->ndims; ++d)
    if (p->dim[d] != q->dim[d])
      return 0;
  return 1;
}

int kt_tune_main(int argc, char **argv)
{
  kt_tune_opts o;
  int rc = kt_tune_parse_args(argc, argv, &o);
  if (rc != 0)
    return rc;
  const int nf = kt_tune_family_count;
  /* Every family's problems, even of the families not tuned now: a bad list
   * is an error either way. */
  static kt_problem probs[KT_TUNE_MAX_FAMILIES][MAX_PROBLEMS];
  int np[KT_TUNE_MAX_FAMILIES];
  for (int f = 0; f < nf; ++f) {
    char err[256] = "";
    np[f] = kt_tune_families[f]->problems(o.values[f], probs[f], MAX_PROBLEMS, err, sizeof err);
    if (np[f] < 0) {
      fprintf(stderr, "ktune tune: %s\n", err);
      return 2;
    }
    if (!o.on[f])
      np[f] = 0;
  }

  kt_device_info dev;
  char err[512];
  rc = kt_device_query(-1, &dev, err, sizeof err);
  if (rc != KT_OK) {
    fprintf(stderr, "ktune tune: %s (%s)\n", kt_strerror(rc), err);
    return 1;
  }
  char user_db[1024];
  if (!o.db) {
    if (kt_results_user_path(user_db, sizeof user_db) != KT_OK) {
      fprintf(stderr, "ktune tune: no home folder for the user database: set KTUNE_DB or pass --db\n");
      return 2;
    }
    o.db = user_db;
    make_parent_dirs(user_db);
  }
  kt_db *db;
  if ((rc = kt_db_open(&db, o.db, KT_DB_WRITE, err, sizeof err)) != KT_OK) {
    fprintf(stderr, "ktune tune: %s: %s: %s\nThe file was not modified.\n", o.db, kt_strerror(rc), err);
    return 1;
  }
  tty = isatty(STDERR_FILENO);
  fprintf(stderr, "ktune tune: %s (driver %d, runtime %d), generator %s, target %s, database %s\n", dev.fingerprint,
          dev.driver_version, dev.runtime_version, kt_registry_generator_version, kt_registry_target, o.db);

  /* The variants of each family. */
  const kt_variant **vs[KT_TUNE_MAX_FAMILIES];
  int nv[KT_TUNE_MAX_FAMILIES];
  for (int f = 0; f < nf; ++f) {
    vs[f] = calloc((size_t)kt_registry_count + 1, sizeof *vs[f]);
    nv[f] = 0;
    for (int i = 0; i < kt_registry_count; ++i)
      if (kt_registry[i].family == kt_tune_families[f]->id && kt_tune_selected(o.variants, kt_registry[i].name))
        vs[f][nv[f]++] = &kt_registry[i];
    total_jobs += np[f] * nv[f];
  }

  double t0 = now_s();
  kt_tune_run *runs[KT_TUNE_MAX_FAMILIES];
  int failed_db = 0;
  for (int f = 0; f < nf; ++f) {
    runs[f] = calloc((size_t)np[f] + 1, sizeof *runs[f]);
    for (int i = 0; i < np[f]; ++i) {
      const kt_problem *p = &probs[f][i];
      char key[96];
      kt_problem_key(p, 1, key, sizeof key);
      kt_tune_result *rs = calloc((size_t)nv[f] + 1, sizeof *rs);
      kt_workers_opts w = {NULL, o.timeout_s, o.seed, on_event, NULL};
      kt_workers_run(p, key, vs[f], nv[f], &w, rs);
      runs[f][i] = (kt_tune_run){*p, rs, nv[f]};
      kt_measurement *ms = calloc((size_t)nv[f] + 1, sizeof *ms);
      for (int j = 0; j < nv[f]; ++j) {
        kt_tune_result_link(&rs[j]);
        ms[j] = rs[j].m;
      }
      if ((rc = kt_db_record(db, &dev, kt_registry_generator_version, ms, nv[f], err, sizeof err)) != KT_OK) {
        fprintf(stderr, "\nktune tune: recording %s: %s: %s\n", key, kt_strerror(rc), err);
        failed_db = 1;
      }
      free(ms);
      /* Rank once all of a problem's distributions are in. */
      if ((i + 1 == np[f] || !same_problem(&probs[f][i + 1], p)) && !failed_db) {
        kt_problem q = *p;
        q.dist[0] = 0;
        int nr = kt_db_rank(db, dev.fingerprint, kt_registry_generator_version, &q, err, sizeof err);
        if (nr < 0) {
          fprintf(stderr, "\nktune tune: ranking %s: %s: %s\n", key, kt_strerror(-nr), err);
          failed_db = 1;
        }
      }
    }
  }
  if (tty)
    fprintf(stderr, "\r%-110s\r", "");
  double elapsed = now_s() - t0;
  /* Rankings use the newest measurement of each; keep a little history. */
  if (!failed_db && (rc = kt_db_prune(db, KT_TUNE_HISTORY, err, sizeof err)) != KT_OK)
    fprintf(stderr, "ktune tune: pruning old measurements: %s: %s\n", kt_strerror(rc), err);

  /* Tables: winners as ranked in the database, each family's row beside
   * its seed kernels. */
  kt_tuned *tuned = NULL;
  int nt = 0;
  kt_db_load(db, dev.fingerprint, kt_registry_generator_version, &tuned, &nt, err, sizeof err);
  int counts[5] = {0};
  const char *names[5] = {"ok", "wrong", "launch_failed", "timed_out", "skipped"};
  for (int f = 0; f < nf; ++f)
    for (int i = 0; i < np[f]; ++i)
      for (int j = 0; j < runs[f][i].n; ++j)
        for (int s = 0; s < 5; ++s)
          counts[s] += strcmp(runs[f][i].results[j].status, names[s]) == 0;
  printf("\nktune tune on %s: %d measurements in %.0f s (ok %d, wrong %d, launch failed %d, timed out %d, "
         "skipped %d)\n",
         dev.name, done_jobs, elapsed, counts[0], counts[1], counts[2], counts[3], counts[4]);
  for (int f = 0; f < nf; ++f) {
    if (np[f] > 0)
      kt_tune_families[f]->report_header(o.values[f]);
    for (int i = 0, end; i < np[f]; i = end) {
      for (end = i + 1; end < np[f] && same_problem(&probs[f][end], &probs[f][i]); ++end)
        ;
      char key[96];
      kt_problem_key(&probs[f][i], 0, key, sizeof key);
      const kt_tuned *t = NULL;
      for (int k = 0; k < nt; ++k)
        if (tuned[k].problem.family == probs[f][i].family && strcmp(tuned[k].key, key) == 0)
          t = &tuned[k];
      if (!t || t->count == 0)
        printf("%-22s (no variant passed)\n", key);
      else
        kt_tune_families[f]->report_row(key, &runs[f][i], end - i, t);
    }
  }
  free(tuned);
  for (int f = 0; f < nf; ++f) {
    for (int i = 0; i < np[f]; ++i)
      free((void *)runs[f][i].results);
    free(runs[f]);
    free(vs[f]);
  }
  kt_db_close(db);
  return failed_db ? 1 : 0;
}
