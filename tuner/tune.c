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
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
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

/* One option of the usage: its flag, meaning and default (NULL: none),
 * the default wrapped at its commas under the meaning. */
static void option(FILE *f, const char *flag, const char *meaning, const char *fallback)
{
  fprintf(f, "  %-24s %s\n", flag, meaning);
  if (!fallback)
    return;
  const int indent = 27, width = 100;
  int col = fprintf(f, "%*sdefault: ", indent, "");
  for (const char *p = fallback; *p;) {
    const char *comma = strchr(p, ',');
    const int n = comma ? (int)(comma - p) + 1 : (int)strlen(p);
    if (col + n > width && col > indent + 9)
      col = fprintf(f, "\n%*s", indent + 9, "") - 1;
    col += fprintf(f, "%.*s", n, p);
    p += n;
  }
  fputc('\n', f);
}

static void usage(FILE *f)
{
  char user_db[1024], def_db[1100], families[256] = "";
  if (kt_results_user_path(user_db, sizeof user_db) != KT_OK)
    snprintf(user_db, sizeof user_db, "(none: no home folder)");
  snprintf(def_db, sizeof def_db, "$KTUNE_DB, else %s", user_db);
  for (int f = 0; f < kt_tune_family_count; ++f) {
    const kt_family_ops *ops = kt_family_get(kt_tune_families[f]->id);
    snprintf(families + strlen(families), sizeof families - strlen(families), "%s%s", ops->name,
             strcmp(ops->long_name, ops->name) ? " (" : ", ");
    if (strcmp(ops->long_name, ops->name))
      snprintf(families + strlen(families), sizeof families - strlen(families), "%s), ", ops->long_name);
  }
  char family_help[320];
  snprintf(family_help, sizeof family_help, "tune only this family: %sor all", families);
  fprintf(f, "usage: ktune tune [OPTIONS]\n"
             "\n"
             "Check every variant of each family on this GPU against a CPU reference, on fresh random\n"
             "inputs, and time those that pass, each in a worker process; record every result and each\n"
             "problem's ranking in the database, and print a summary.\n"
             "\n"
             "Options:\n");
  option(f, "--db PATH", "the database to record into (made if missing)", def_db);
  option(f, "--family NAME", family_help, "all");
  for (int t = 0; t < kt_tune_family_count; ++t)
    for (const kt_tune_option *opt = kt_tune_families[t]->options; opt->name; ++opt) {
      char flag[64];
      snprintf(flag, sizeof flag, "%s %s", opt->name, opt->arg);
      option(f, flag, opt->help, opt->fallback);
    }
  option(f, "--variants GLOB,...",
         "only the variants whose whole names match one of these shell patterns\n"
         "                           (fnmatch; 'ktune list' shows the names); one that matches none is an error",
         "every variant");
  option(f, "--timeout SECONDS", "how long one variant may take before its worker is killed", "120");
  option(f, "--seed N", "the seed of the random inputs", "the time");
  option(f, "--json",
         "the summary as one JSON object on stdout, instead of tables: device, name,\n"
         "                           generator, target, database, seed, seconds,\n"
         "                           measurements: {total, ok, wrong, launch_failed, timed_out, skipped},\n"
         "                           problems: [{family, problem, winner, ms, ranked}] (winner null: none passed)",
         NULL);
  option(f, "-h, --help", "print this help and exit", NULL);
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

/* Does every pattern of o->variants match some variant, and do they select
 * a variant of a family to tune?  0, or a usage error. */
static int check_variants(const kt_tune_opts *o)
{
  if (!o->variants)
    return 0;
  const char *list = o->variants;
  char pattern[256];
  int more;
  while ((more = kt_tune_family_item(&list, pattern, sizeof pattern)) != 0) {
    int hits = 0;
    for (int i = 0; i < kt_registry_count && more > 0 && !hits; ++i)
      hits = fnmatch(pattern, kt_registry[i].name, 0) == 0;
    if (!hits)
      return kt_cli_usage_error("tune", "--variants: '%s' matches no variant in this build ('ktune list' shows them)",
                                more < 0 ? "(a pattern too long)" : pattern);
  }
  for (int f = 0; f < kt_tune_family_count; ++f)
    for (int i = 0; i < kt_registry_count; ++i)
      if (o->on[f] && kt_registry[i].family == kt_tune_families[f]->id &&
          kt_tune_selected(o->variants, kt_registry[i].name))
        return 0;
  return kt_cli_usage_error("tune", "--variants '%s' selects no variant of the families to tune", o->variants);
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
    if (kt_cli_is_help(a)) {
      o->help = 1;
      return 0;
    }
    if (!strcmp(a, "--json")) {
      o->json = 1;
      continue;
    }
    /* The options that take a value: the common ones, then the families'. */
    static const char *const common[] = {"--db", "--family", "--variants", "--timeout", "--seed", NULL};
    const char **family_value = NULL;
    int known = 0;
    for (int k = 0; common[k] && !known; ++k)
      known = !strcmp(a, common[k]);
    for (int f = 0; f < kt_tune_family_count && !known; ++f)
      for (int k = 0; kt_tune_families[f]->options[k].name && !known; ++k)
        if (!strcmp(a, kt_tune_families[f]->options[k].name)) {
          family_value = &o->values[f][k];
          known = 1;
        }
    if (!known)
      return kt_cli_usage_error("tune", "unknown %s '%s'", a[0] == '-' ? "option" : "argument", a);
    if (!v)
      return kt_cli_usage_error("tune", "%s needs a value", a);
    ++i;
    char *end;
    if (family_value)
      *family_value = v;
    else if (!strcmp(a, "--db"))
      o->db = v;
    else if (!strcmp(a, "--family")) {
      const kt_tune_family *only = strcmp(v, "all") ? kt_tune_family_find(v) : NULL;
      if (strcmp(v, "all") && !only)
        return kt_cli_usage_error("tune", "unknown family '%s'", v);
      for (int f = 0; f < kt_tune_family_count; ++f)
        o->on[f] = !only || kt_tune_families[f] == only;
    } else if (!strcmp(a, "--variants"))
      o->variants = v;
    else if (!strcmp(a, "--timeout")) {
      o->timeout_s = strtod(v, &end);
      if (end == v || *end || !(o->timeout_s > 0))
        return kt_cli_usage_error("tune", "--timeout: bad number of seconds '%s'", v);
    } else {
      errno = 0;
      o->seed = strtoull(v, &end, 10);
      if (errno || end == v || *end || v[0] == '-')
        return kt_cli_usage_error("tune", "--seed: bad seed '%s'", v);
    }
  }
  return check_variants(o);
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
  if (o.help) {
    usage(stdout);
    return 0;
  }
  const int nf = kt_tune_family_count;
  /* Every family's problems, even of the families not tuned now: a bad list
   * is an error either way. */
  static kt_problem probs[KT_TUNE_MAX_FAMILIES][MAX_PROBLEMS];
  int np[KT_TUNE_MAX_FAMILIES];
  for (int f = 0; f < nf; ++f) {
    char err[256] = "";
    np[f] = kt_tune_families[f]->problems(o.values[f], probs[f], MAX_PROBLEMS, err, sizeof err);
    if (np[f] < 0)
      return kt_cli_usage_error("tune", "%s", err);
    if (!o.on[f])
      np[f] = 0;
  }

  char user_db[1024];
  if (!o.db) {
    if (kt_results_user_path(user_db, sizeof user_db) != KT_OK)
      return kt_cli_usage_error("tune", "no home folder for the user database: set KTUNE_DB or pass --db");
    o.db = user_db;
  }
  kt_device_info dev;
  if (kt_cli_device("tune", &dev) != 0)
    return 1;
  if (o.db == user_db)
    make_parent_dirs(user_db);
  char err[512];
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
  if (o.json) {
    printf("{\"device\": ");
    kt_cli_json_string(stdout, dev.fingerprint);
    printf(", \"name\": ");
    kt_cli_json_string(stdout, dev.name);
    printf(", \"generator\": ");
    kt_cli_json_string(stdout, kt_registry_generator_version);
    printf(", \"target\": ");
    kt_cli_json_string(stdout, kt_registry_target);
    printf(", \"database\": ");
    kt_cli_json_string(stdout, o.db);
    printf(", \"seed\": %llu, \"seconds\": ", o.seed);
    kt_cli_json_number(stdout, elapsed);
    printf(",\n \"measurements\": {\"total\": %d", done_jobs);
    for (int s = 0; s < 5; ++s)
      printf(", \"%s\": %d", names[s], counts[s]);
    printf("},\n \"problems\": [");
  } else {
    printf("\nktune tune on %s: %d measurements in %.0f s (ok %d, wrong %d, launch failed %d, timed out %d, "
           "skipped %d)\n",
           dev.name, done_jobs, elapsed, counts[0], counts[1], counts[2], counts[3], counts[4]);
  }
  int nrows = 0;
  for (int f = 0; f < nf; ++f) {
    if (np[f] > 0 && !o.json)
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
      const int passed = t && t->count > 0;
      if (o.json) {
        printf("%s\n  {\"family\": ", nrows++ ? "," : "");
        kt_cli_json_string(stdout, kt_family_name(probs[f][i].family));
        printf(", \"problem\": ");
        kt_cli_json_string(stdout, key);
        printf(", \"winner\": ");
        kt_cli_json_string(stdout, passed ? t->ranked[0]->name : NULL);
        printf(", \"ms\": ");
        kt_cli_json_number(stdout, passed ? t->best_ms : NAN);
        printf(", \"ranked\": %d}", passed ? t->count : 0);
      } else if (!passed)
        printf("%-22s (no variant passed)\n", key);
      else
        kt_tune_families[f]->report_row(key, &runs[f][i], end - i, t);
    }
  }
  if (o.json)
    printf("\n]}\n");
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
