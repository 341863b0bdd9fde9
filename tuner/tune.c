/* SPDX-License-Identifier: MIT */
/* tuner/tune.c: `ktune tune`, the autotuner's driver (kt_tune_).
 *
 * For every family (kt_tune_families), problem and variant: a worker
 * process (worker.c) checks the variant on fresh random inputs, then times
 * it; this process records each result in the database as soon as the
 * worker reports it, ranks each problem's variants (winner first) once all
 * its distributions are in, and has each family print its table.  A worker
 * that faults or hangs past the deadline costs one variant, recorded with
 * its reason; the tune goes on in a fresh worker.
 *
 * A tune resumes.  A result the database holds already for the GPU, the
 * generator, the variant's source, the problem and the distribution is a
 * result, whatever its status, and is not measured again (--fresh measures
 * everything).  So a tune killed at any point and run again measures only
 * the variants that were in flight (one per GPU), and since every problem
 * is ranked again when its distributions are done, measured now or not, a
 * kill between recording and ranking costs nothing either.
 *
 * A tune uses every visible GPU of the current one's chip (--gpus chooses).
 * GPUs whose fingerprints differ (the memory size) are kept apart, in
 * groups: each group measures every variant, spread over its GPUs (one
 * worker runner per GPU, kt_workers_run_spread), and its results are
 * recorded and ranked under its own fingerprint, so a measurement is
 * always filed under the GPU that took it.
 *
 * What the application called comes too.  The runtime keeps the problems
 * it served without a tuned entry of their own beside the user database
 * (runtime/misses.c); a tune adds those of its GPUs to each family whose
 * problem list is the default (--misses: tunes those alone), in the
 * distributions the family measures its own problems in, and once they
 * are ranked removes them from the file.
 */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "kt_internal.h"
#include "registry.h"
#include "tuner.h"

#define MAX_PROBLEMS 256 /* per family */

/* The progress line; workers of several GPUs report at once. */
static pthread_mutex_t progress_lock = PTHREAD_MUTEX_INITIALIZER;
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

/* Where on_event records: results go to the database one by one, as each
 * worker reports it, so that a kill loses only the results in flight. */
typedef struct recorder {
  kt_db *db;
  const struct group *groups;
  int ng;
  int failed; /* a write failed: the tune stops after this problem */
  char err[512];
} recorder;

static void record_one(recorder *r, int device, const kt_tune_result *done);

static void on_event(void *user, const char *key, const char *variant, int device, const kt_tune_result *done)
{
  pthread_mutex_lock(&progress_lock);
  if (done) {
    ++done_jobs;
    record_one(user, device, done);
  }
  progress(key, variant);
  pthread_mutex_unlock(&progress_lock);
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
             "problem's ranking in the database, and print a summary.  A tune goes on from what the\n"
             "database holds already (a tune cut short measures only what it had not finished), and\n"
             "spreads over every GPU of this one's kind.\n"
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
  option(f, "--gpus all|N,...",
         "the GPUs to spread the work over: all, or CUDA ordinals of one kind of GPU\n"
         "                           (\"0,2\"); GPUs whose memory differs are tuned apart, each for itself",
         "all: every GPU of the current one's kind");
  option(f, "--fresh",
         "measure again what the database holds already; without it a tune goes on from\n"
         "                           what the database holds (for this GPU, generator and variant source)",
         "off: resume");
  option(f, "--misses",
         "tune only the problems this GPU's applications called without a tuned entry of\n"
         "                           their own (kept in DB.misses); without it they join the default problems",
         "off: the default problems and the misses");
  option(f, "--json",
         "the summary as one JSON object on stdout, instead of tables: device, name,\n"
         "                           gpus, generator, target, database, seed, seconds, recorded_before,\n"
         "                           measurements: {total, ok, wrong, launch_failed, timed_out, skipped},\n"
         "                           problems: [{device, family, problem, winner, ms, ranked}]\n"
         "                           (winner null: none passed)",
         NULL);
  option(f, "-h, --help", "print this help and exit", NULL);
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

/* Is list --gpus's form, all or ordinals ("0,2")?  0 or -1.  Whether the
 * GPUs exist is known only once they are asked (kt_tune_select_gpus). */
static int check_gpus(const char *list)
{
  if (!strcmp(list, "all"))
    return 0;
  char item[32];
  int more, n = 0;
  while ((more = kt_tune_family_item(&list, item, sizeof item)) != 0) {
    char *end;
    errno = 0;
    const long g = strtol(item, &end, 10);
    if (more < 0 || !item[0] || *end || errno || g < 0 || g >= KT_TUNE_MAX_GPUS)
      return -1;
    ++n;
  }
  return n > 0 ? 0 : -1;
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
    if (!strcmp(a, "--fresh")) {
      o->fresh = 1;
      continue;
    }
    if (!strcmp(a, "--misses")) {
      o->misses = 1;
      continue;
    }
    /* The options that take a value: the common ones, then the families'. */
    static const char *const common[] = {"--db", "--family", "--variants", "--timeout", "--seed", "--gpus", NULL};
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
    else if (!strcmp(a, "--gpus")) {
      if (check_gpus(v) != 0)
        return kt_cli_usage_error("tune", "--gpus: '%s' is not all or a list of GPU ordinals (\"0,2\")", v);
      o->gpus = v;
    } else if (!strcmp(a, "--timeout")) {
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

int kt_tune_select_gpus(const char *list, const kt_device_info *gpus, int n, int current, int *chosen, char *err,
                        size_t errlen)
{
  char chip[sizeof gpus->fingerprint], other[sizeof gpus->fingerprint], item[32];
  int count = 0;
  if (!list || !strcmp(list, "all")) {
    if (current < 0 || current >= n) {
      snprintf(err, errlen, "no GPU %d", current);
      return -1;
    }
    kt_device_chip(&gpus[current], chip, sizeof chip);
    for (int i = 0; i < n; ++i) {
      kt_device_chip(&gpus[i], other, sizeof other);
      if (!strcmp(other, chip))
        chosen[count++] = i;
    }
    return count;
  }
  int more;
  while ((more = kt_tune_family_item(&list, item, sizeof item)) != 0) {
    char *end;
    const long g = strtol(item, &end, 10);
    if (more < 0 || !item[0] || *end || g < 0 || g >= n) {
      snprintf(err, errlen, "--gpus: '%s' is not a GPU here (0 to %d, or all)", more < 0 ? "(too long)" : item, n - 1);
      return -1;
    }
    for (int k = 0; k < count; ++k)
      if (chosen[k] == g) {
        snprintf(err, errlen, "--gpus: GPU %ld is named twice", g);
        return -1;
      }
    kt_device_chip(&gpus[g], other, sizeof other);
    if (count == 0)
      snprintf(chip, sizeof chip, "%s", other);
    else if (strcmp(other, chip) != 0) {
      snprintf(err, errlen, "--gpus: GPU %ld (%s) is not a %s like GPU %d: tune one kind of GPU at a time", g,
               gpus[g].name, gpus[chosen[0]].name, chosen[0]);
      return -1;
    }
    chosen[count++] = (int)g;
  }
  if (count == 0)
    snprintf(err, errlen, "--gpus: no GPU named");
  return count ? count : -1;
}

/* Every family's problems (np[f] of them), even of the families not tuned
 * now, whose counts are then 0: a bad list is an error either way. */
static int tune_problems(const kt_tune_opts *o, kt_problem (*probs)[MAX_PROBLEMS], int *np)
{
  for (int f = 0; f < kt_tune_family_count; ++f) {
    char err[256] = "";
    np[f] = kt_tune_families[f]->problems(o->values[f], probs[f], MAX_PROBLEMS, err, sizeof err);
    if (np[f] < 0)
      return kt_cli_usage_error("tune", "%s", err);
    if (!o->on[f])
      np[f] = 0;
  }
  return 0;
}

/* GPUs of one fingerprint: their results are one device's (see the top). */
typedef struct group {
  kt_device_info dev; /* the first of them: the fingerprint and the description recorded */
  int gpus[KT_TUNE_MAX_GPUS], ngpus;
} group;

/* Called under progress_lock: one result, filed under its GPU's group. */
static void record_one(recorder *r, int device, const kt_tune_result *done)
{
  if (!r || r->failed)
    return;
  const group *g = NULL;
  for (int k = 0; k < r->ng && !g; ++k)
    for (int i = 0; i < r->groups[k].ngpus; ++i)
      if (r->groups[k].gpus[i] == device)
        g = &r->groups[k];
  if (!g)
    return;
  kt_tune_result x = *done;
  kt_tune_result_link(&x);
  int rc = kt_db_record(r->db, &g->dev, kt_registry_generator_version, &x.m, 1, r->err, sizeof r->err);
  if (rc != KT_OK) {
    fprintf(stderr, "\nktune tune: recording %s on %s: %s: %s\n", x.variant, g->dev.fingerprint, kt_strerror(rc),
            r->err);
    r->failed = 1;
  }
}

/* One problem (in one distribution) on one group: a result per variant of
 * the family, and which of them to measure now. */
typedef struct job {
  kt_tune_result *rs;
  char *todo;
} job;

typedef struct recorded {
  const kt_problem *p;
  const kt_variant **vs;
  int nv;
  job *j;
} recorded;

/* A result the database holds: the variant's, if its source is this
 * build's.  An ok result without a time (a row edited by hand) is measured
 * again: it would rank first at 0 ms. */
static void take_recorded(void *user, const kt_measurement *m)
{
  recorded *r = user;
  if (m->status && strcmp(m->status, "ok") == 0 && !kt_time_ranks(m->time_ms))
    return;
  for (int i = 0; i < r->nv; ++i)
    if (!strcmp(r->vs[i]->name, m->variant) && !strcmp(r->vs[i]->source_hash, m->source_hash)) {
      kt_tune_result *x = &r->j->rs[i];
      kt_tune_result_set(x, r->p, r->vs[i], m->status, m->reason);
      x->m.time_ms = m->time_ms;
      x->m.rate = m->rate;
      x->m.max_err = m->max_err;
      x->m.reps = m->reps;
      r->j->todo[i] = 0;
    }
}

/* The recorded misses of these groups' GPUs (see the top) added to probs:
 * each in the distributions the family gives its own first problem, unless
 * it is among them already.  taken[] gets each miss added (room for
 * KT_TUNE_MAX_FAMILIES * MAX_PROBLEMS); how many, or -1 after a message. */
static int add_misses(const kt_tune_opts *o, const group *groups, int ng, kt_problem (*probs)[MAX_PROBLEMS], int *np,
                      kt_problem *taken)
{
  char path[1100], err[1400];
  kt_misses_entry *e = NULL;
  int n = 0, ntaken = 0, rc;
  if (kt_misses_path(o->db, path, sizeof path) != KT_OK)
    return 0;
  /* Someone else's file in the misses file's place holds no misses: the
   * tune goes on without (and kt_misses_forget leaves it alone). */
  if ((rc = kt_misses_read(path, &e, &n, err, sizeof err)) == KT_ERR_DB_FOREIGN)
    fprintf(stderr, "ktune tune: no misses read: %s\n", err);
  else if (rc != KT_OK) {
    fprintf(stderr, "ktune tune: %s\n", err);
    return -1;
  }
  for (int f = 0; f < kt_tune_family_count; ++f) {
    const int given = o->values[f][0] != kt_tune_families[f]->options[0].fallback;
    if (!o->on[f] || (given && !o->misses))
      continue;
    /* The family's distributions: those of its first problem. */
    kt_problem runs[16];
    int nruns = 0;
    while (nruns < np[f] && nruns < 16 && same_problem(&probs[f][nruns], &probs[f][0]))
      runs[nruns] = probs[f][nruns], ++nruns;
    if (nruns == 0)
      runs[nruns++].dist[0] = 0;
    if (o->misses)
      np[f] = 0;
    for (int i = 0; i < n; ++i) {
      int mine = 0, known = 0;
      for (int g = 0; g < ng; ++g)
        mine |= strcmp(e[i].fingerprint, groups[g].dev.fingerprint) == 0;
      if (!mine || e[i].problem.family != kt_tune_families[f]->id)
        continue;
      for (int k = 0; k < np[f] && !known; ++k)
        known = same_problem(&probs[f][k], &e[i].problem);
      if (known || np[f] + nruns > MAX_PROBLEMS)
        continue;
      for (int r = 0; r < nruns; ++r) {
        probs[f][np[f]] = e[i].problem;
        memcpy(probs[f][np[f]++].dist, runs[r].dist, sizeof runs[r].dist);
      }
      taken[ntaken++] = e[i].problem;
    }
  }
  free(e);
  if (ntaken > 0)
    fprintf(stderr, "ktune tune: %d problem%s that applications called untuned (from %s)\n", ntaken,
            ntaken == 1 ? "" : "s", path);
  else if (o->misses)
    fprintf(stderr, "ktune tune: no problems recorded as called untuned on %s in %s\n",
            ng > 0 ? groups[0].dev.fingerprint : "these GPUs", path);
  return ntaken;
}

/* Spare workers (workers.c) hold a CUDA context beside the worker that
 * measures: not on a GPU whose compute mode lets one process at a time
 * have one (exclusive-process), where the two would shut each other out.
 * A GPU that cannot be asked (described GPUs in tests) does not object. */
static int spares_allowed(const kt_device_info *gpus, int n)
{
  int ok = 1;
  for (int i = 0; i < n && ok; ++i) {
    int mode = cudaComputeModeDefault;
    ok = cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, gpus[i].ordinal) != cudaSuccess ||
         mode == cudaComputeModeDefault;
  }
  cudaGetLastError();
  return ok;
}

int kt_tune_gpus(const kt_tune_opts *o, const kt_device_info *gpus, int ngpus, kt_db *db, const char *worker)
{
  const int nf = kt_tune_family_count;
  kt_problem(*probs)[MAX_PROBLEMS] = calloc(KT_TUNE_MAX_FAMILIES, sizeof *probs);
  group *groups = calloc((size_t)ngpus + 1, sizeof *groups);
  if (!probs || !groups) {
    free(probs), free(groups);
    fprintf(stderr, "ktune tune: out of memory\n");
    return 1;
  }
  int np[KT_TUNE_MAX_FAMILIES], ng = 0, rc = tune_problems(o, probs, np);
  if (rc != 0) {
    free(probs), free(groups);
    return rc;
  }
  for (int k = 0; k < ngpus && k < KT_TUNE_MAX_GPUS; ++k) {
    int g = 0;
    while (g < ng && strcmp(groups[g].dev.fingerprint, gpus[k].fingerprint) != 0)
      ++g;
    if (g == ng)
      groups[ng++].dev = gpus[k];
    groups[g].gpus[groups[g].ngpus++] = gpus[k].ordinal;
  }
  kt_problem *taken = calloc((size_t)KT_TUNE_MAX_FAMILIES * MAX_PROBLEMS, sizeof *taken);
  const int ntaken = taken ? add_misses(o, groups, ng, probs, np, taken) : -1;
  if (ntaken < 0 || (o->misses && ntaken == 0)) {
    free(probs), free(groups), free(taken);
    return ntaken < 0 ? 1 : 0;
  }
  char err[512];
  tty = isatty(STDERR_FILENO);
  total_jobs = done_jobs = 0;
  fprintf(stderr, "ktune tune: generator %s, target %s, database %s\n", kt_registry_generator_version,
          kt_registry_target, o->db);
  for (int g = 0; g < ng; ++g)
    for (int k = 0; k < groups[g].ngpus; ++k)
      fprintf(stderr, "  GPU %d: %s (driver %d, runtime %d)\n", groups[g].gpus[k], groups[g].dev.fingerprint,
              groups[g].dev.driver_version, groups[g].dev.runtime_version);

  /* The variants of each family, as built for these GPUs' target (GPUs of
   * one kind: one target). */
  const kt_variant **vs[KT_TUNE_MAX_FAMILIES];
  int nv[KT_TUNE_MAX_FAMILIES];
  const int target = kt_device_target(&groups[0].dev);
  for (int f = 0; f < nf; ++f) {
    vs[f] = calloc((size_t)kt_registry_count + 1, sizeof *vs[f]);
    nv[f] = 0;
    for (int i = 0; vs[f] && i < kt_registry_count; ++i)
      if (kt_registry[i].family == kt_tune_families[f]->id && kt_registry[i].target == target &&
          kt_tune_selected(o->variants, kt_registry[i].name))
        vs[f][nv[f]++] = &kt_registry[i];
  }

  /* Before any worker starts: what each group has recorded already. */
  job *jobs = calloc((size_t)ng * KT_TUNE_MAX_FAMILIES * MAX_PROBLEMS, sizeof *jobs);
#define JOB(g, f, i) (&jobs[((size_t)(g)*KT_TUNE_MAX_FAMILIES + (size_t)(f)) * MAX_PROBLEMS + (size_t)(i)])
  int recorded_before = 0, failed_db = !jobs;
  for (int g = 0; g < ng && !failed_db; ++g)
    for (int f = 0; f < nf && !failed_db; ++f)
      for (int i = 0; i < np[f] && !failed_db; ++i) {
        job *j = JOB(g, f, i);
        j->rs = calloc((size_t)nv[f] + 1, sizeof *j->rs);
        j->todo = malloc((size_t)nv[f] + 1);
        if (!j->rs || !j->todo) {
          free(j->rs), free(j->todo);
          j->rs = NULL, j->todo = NULL;
          fprintf(stderr, "ktune tune: out of memory\n");
          failed_db = 1;
          break;
        }
        memset(j->todo, 1, (size_t)nv[f]);
        recorded r = {&probs[f][i], vs[f], nv[f], j};
        if (!o->fresh && (rc = kt_db_recorded(db, groups[g].dev.fingerprint, kt_registry_generator_version,
                                              &probs[f][i], take_recorded, &r, err, sizeof err)) != KT_OK) {
          fprintf(stderr, "ktune tune: reading %s: %s: %s\n", o->db, kt_strerror(rc), err);
          failed_db = 1;
        }
        for (int v = 0; v < nv[f]; ++v) {
          total_jobs += j->todo[v];
          recorded_before += !j->todo[v];
        }
      }
  if (recorded_before > 0)
    fprintf(stderr, "ktune tune: %d results recorded already are not measured again (--fresh measures them)\n",
            recorded_before);

  double t0 = kt_now_s();
  const kt_variant **batch = calloc((size_t)kt_registry_count * (size_t)ng + 1, sizeof *batch);
  int *on = calloc((size_t)kt_registry_count * (size_t)ng + 1, sizeof *on);
  int *from = calloc((size_t)kt_registry_count * (size_t)ng + 1, sizeof *from);
  kt_tune_result *out = calloc((size_t)kt_registry_count * (size_t)ng + 1, sizeof *out);
  recorder rec = {db, groups, ng, 0, ""};
  /* NULL (out of memory, or a GPU that takes one process at a time) only
   * costs the head start. */
  kt_workers_spares *spares = spares_allowed(gpus, ngpus) ? kt_workers_spares_new(worker) : NULL;
  if (!batch || !on || !from || !out)
    failed_db = 1;
  for (int f = 0; f < nf && !failed_db; ++f)
    for (int i = 0; i < np[f] && !failed_db; ++i) {
      const kt_problem *p = &probs[f][i];
      char key[96];
      kt_problem_key(p, 1, key, sizeof key);
      /* Every group's variants still to measure, each group's spread
       * round-robin over its GPUs, all measured at once. */
      int n = 0;
      for (int g = 0; g < ng; ++g)
        for (int v = 0, k = 0; v < nv[f]; ++v)
          if (JOB(g, f, i)->todo[v]) {
            batch[n] = vs[f][v];
            on[n] = groups[g].gpus[k++ % groups[g].ngpus];
            from[n++] = g * kt_registry_count + v;
          }
      /* Each result is recorded as it comes (on_event), not when the
       * problem is done: a tune killed mid-problem keeps what it measured. */
      kt_workers_opts w = {worker, o->timeout_s, o->seed, on_event, &rec, 0, spares};
      if (n > 0)
        kt_workers_run_spread(p, key, batch, on, n, &w, out);
      failed_db |= rec.failed;
      for (int k = 0; k < n; ++k)
        JOB(from[k] / kt_registry_count, f, i)->rs[from[k] % kt_registry_count] = out[k];
      for (int g = 0; g < ng && !failed_db; ++g) {
        job *j = JOB(g, f, i);
        for (int v = 0; v < nv[f]; ++v)
          kt_tune_result_link(&j->rs[v]);
        /* Rank once all of a problem's distributions are in, measured now
         * or before. */
        if ((i + 1 == np[f] || !same_problem(&probs[f][i + 1], p)) && !failed_db) {
          kt_problem q = *p;
          q.dist[0] = 0;
          int nr = kt_db_rank(db, groups[g].dev.fingerprint, kt_registry_generator_version, &q, err, sizeof err);
          if (nr < 0) {
            fprintf(stderr, "\nktune tune: ranking %s: %s: %s\n", key, kt_strerror(-nr), err);
            failed_db = 1;
          }
        }
      }
    }
  kt_workers_spares_free(spares);
  free(batch), free(on), free(from), free(out);
  if (tty)
    fprintf(stderr, "\r%-110s\r", "");
  double elapsed = kt_now_s() - t0;
  /* Rankings use the newest measurement of each; keep a little history. */
  if (!failed_db && (rc = kt_db_prune(db, KT_TUNE_HISTORY, err, sizeof err)) != KT_OK)
    fprintf(stderr, "ktune tune: pruning old measurements: %s: %s\n", kt_strerror(rc), err);
  /* The misses tuned now are misses no longer. */
  char misses_path[1100];
  for (int g = 0; g < ng && !failed_db && ntaken > 0; ++g)
    if (kt_misses_path(o->db, misses_path, sizeof misses_path) == KT_OK &&
        (rc = kt_misses_forget(misses_path, groups[g].dev.fingerprint, taken, ntaken, err, sizeof err)) != KT_OK)
      fprintf(stderr, "ktune tune: %s: %s\n", kt_strerror(rc), err);
  free(taken);

  /* Tables: winners as ranked in the database, each family's row beside
   * its seed kernels; a table per group. */
  int counts[5] = {0};
  const char *names[5] = {"ok", "wrong", "launch_failed", "timed_out", "skipped"};
  for (int g = 0; g < ng && jobs; ++g)
    for (int f = 0; f < nf; ++f)
      for (int i = 0; i < np[f]; ++i)
        for (int v = 0; JOB(g, f, i)->todo && v < nv[f]; ++v)
          for (int s = 0; s < 5; ++s)
            counts[s] += JOB(g, f, i)->todo[v] && strcmp(JOB(g, f, i)->rs[v].status, names[s]) == 0;
  if (o->json) {
    printf("{\"device\": ");
    kt_cli_json_string(stdout, ng > 0 ? groups[0].dev.fingerprint : NULL);
    printf(", \"name\": ");
    kt_cli_json_string(stdout, ng > 0 ? groups[0].dev.name : NULL);
    printf(", \"gpus\": [");
    for (int k = 0; k < ngpus && k < KT_TUNE_MAX_GPUS; ++k)
      printf("%s%d", k ? ", " : "", gpus[k].ordinal);
    printf("], \"generator\": ");
    kt_cli_json_string(stdout, kt_registry_generator_version);
    printf(", \"target\": ");
    kt_cli_json_string(stdout, kt_registry_target);
    printf(", \"database\": ");
    kt_cli_json_string(stdout, o->db);
    printf(", \"seed\": %llu, \"seconds\": ", o->seed);
    kt_cli_json_number(stdout, elapsed);
    printf(", \"recorded_before\": %d,\n \"measurements\": {\"total\": %d", recorded_before, done_jobs);
    for (int s = 0; s < 5; ++s)
      printf(", \"%s\": %d", names[s], counts[s]);
    printf("},\n \"problems\": [");
  } else {
    printf("\nktune tune on %s: %d measurements in %.0f s (ok %d, wrong %d, launch failed %d, timed out %d, "
           "skipped %d), %d recorded before\n",
           ng > 0 ? groups[0].dev.name : "no GPU", done_jobs, elapsed, counts[0], counts[1], counts[2], counts[3],
           counts[4], recorded_before);
  }
  int nrows = 0;
  kt_tune_run *runs = calloc(MAX_PROBLEMS + 1, sizeof *runs);
  for (int g = 0; g < ng && jobs && runs; ++g) {
    kt_tuned *tuned = NULL;
    int nt = 0;
    kt_db_load(db, groups[g].dev.fingerprint, kt_registry_generator_version, &tuned, &nt, err, sizeof err);
    if (ng > 1 && !o->json)
      printf("\n%s:\n", groups[g].dev.fingerprint);
    for (int f = 0; f < nf; ++f) {
      if (np[f] > 0 && !o->json)
        kt_tune_families[f]->report_header(o->values[f]);
      for (int i = 0, end; i < np[f]; i = end) {
        for (end = i + 1; end < np[f] && same_problem(&probs[f][end], &probs[f][i]); ++end)
          ;
        char key[96];
        kt_problem_key(&probs[f][i], 0, key, sizeof key);
        const kt_tuned *t = NULL;
        for (int k = 0; k < nt; ++k)
          if (tuned[k].problem.family == probs[f][i].family && strcmp(tuned[k].key, key) == 0)
            t = &tuned[k];
        for (int d = i; d < end; ++d)
          runs[d - i] = (kt_tune_run){probs[f][d], JOB(g, f, d)->rs, JOB(g, f, d)->rs ? nv[f] : 0};
        const int passed = t && t->count > 0;
        if (o->json) {
          printf("%s\n  {\"device\": ", nrows++ ? "," : "");
          kt_cli_json_string(stdout, groups[g].dev.fingerprint);
          printf(", \"family\": ");
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
          kt_tune_families[f]->report_row(key, runs, end - i, t);
      }
    }
    free(tuned);
  }
  free(runs);
  if (o->json)
    printf("\n]}\n");
  for (int g = 0; g < ng && jobs; ++g)
    for (int f = 0; f < nf; ++f)
      for (int i = 0; i < np[f]; ++i)
        free(JOB(g, f, i)->rs), free(JOB(g, f, i)->todo);
#undef JOB
  free(jobs);
  for (int f = 0; f < nf; ++f)
    free(vs[f]);
  free(probs), free(groups);
  return failed_db ? 1 : 0;
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
  /* Every argument is checked before any GPU is asked. */
  kt_problem(*probs)[MAX_PROBLEMS] = calloc(KT_TUNE_MAX_FAMILIES, sizeof *probs);
  int np[KT_TUNE_MAX_FAMILIES];
  rc = probs ? tune_problems(&o, probs, np) : 1;
  free(probs);
  if (rc != 0)
    return rc;
  char user_db[1024];
  if (!o.db) {
    if (kt_results_user_path(user_db, sizeof user_db) != KT_OK)
      return kt_cli_usage_error("tune", "no home folder for the user database: set KTUNE_DB or pass --db");
    o.db = user_db;
  }

  /* The GPUs: all that are visible, then those --gpus chooses, which the
   * build must support (one kind: the first says for all). */
  kt_device_info current, all[KT_TUNE_MAX_GPUS], chosen[KT_TUNE_MAX_GPUS];
  if (kt_cli_device("tune", &current) != 0)
    return 1;
  char err[512];
  int nall = 0, idx[KT_TUNE_MAX_GPUS];
  while (nall < KT_TUNE_MAX_GPUS && kt_device_query(nall, &all[nall], err, sizeof err) == KT_OK)
    ++nall;
  const int n = kt_tune_select_gpus(o.gpus, all, nall, current.ordinal, idx, err, sizeof err);
  if (n < 0)
    return kt_cli_usage_error("tune", "%s", err);
  for (int k = 0; k < n; ++k)
    chosen[k] = all[idx[k]];
  if ((rc = kt_device_supported(&chosen[0], err, sizeof err)) != KT_OK) {
    fprintf(stderr, "ktune tune: GPU %d: %s (%s)\n", chosen[0].ordinal, kt_strerror(rc), err);
    return 1;
  }

  if (o.db == user_db)
    kt_results_make_parent_dirs(user_db);
  kt_db *db;
  if ((rc = kt_db_open(&db, o.db, KT_DB_WRITE, err, sizeof err)) != KT_OK) {
    fprintf(stderr, "ktune tune: %s: %s: %s\nThe file was not modified.\n", o.db, kt_strerror(rc), err);
    return 1;
  }
  rc = kt_tune_gpus(&o, chosen, n, db, NULL);
  kt_db_close(db);
  return rc;
}
