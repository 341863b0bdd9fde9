/* tuner/tune.c: `ktune tune`, the autotuner's driver.
 *
 * For every family, problem and variant: a worker process (worker.c) checks
 * the variant on fresh random inputs, then times it; this process records
 * every result in the database, ranks each problem's variants (winner
 * first) and prints a table per family.  A worker that faults or hangs past
 * the deadline costs one variant, recorded with its reason; the tune goes
 * on in a fresh worker.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kt_internal.h"
#include "registry.h"
#include "tuner.h"

typedef struct tune_opts {
  const char *db;
  int do_matmul, do_hist;
  char matmul[1024];
  char hist[512];
  long long hist_n;
  char dists[64];
  const char *only; /* comma-separated variant names, or NULL */
  double timeout_s;
  unsigned long long seed;
} tune_opts;

/* The default tuning sets: shapes from 512 to 8192 (squares, flat, tall,
 * thin-K and long-K), and bin counts from 256 to 1M at n = 2^28. */
static const char *DEFAULT_MATMUL = "512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,"
                                    "4096x4096x256,128x8192x8192,8192x128x8192,16384x16384x64,1000x1000x1000,"
                                    "4000x4000x4000,64x64x65536";
static const char *DEFAULT_HIST = "256,4096,65536,262144,1048576";

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

static void run_workers_for(const kt_problem *p, const char *key, const kt_variant **vs, int n, const tune_opts *o,
                            kt_tune_result *out)
{
  kt_workers_opts w = {NULL, o->timeout_s, o->seed, on_event, NULL};
  kt_workers_run(p, key, vs, n, &w, out);
}

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int parse_list(const char *s, long long *out, int max, int per, char sep)
{
  int n = 0;
  const char *p = s;
  while (*p && n < max) {
    for (int j = 0; j < per; ++j) {
      char *end;
      out[n * per + j] = strtoll(p, &end, 10);
      if (end == p || out[n * per + j] <= 0)
        return -1;
      p = end;
      if (j + 1 < per) {
        if (*p != sep)
          return -1;
        ++p;
      }
    }
    ++n;
    if (*p == ',')
      ++p;
    else if (*p)
      return -1;
  }
  return n;
}

static int selected(const tune_opts *o, const char *name)
{
  if (!o->only)
    return 1;
  size_t len = strlen(name);
  for (const char *p = o->only; (p = strstr(p, name)) != NULL; p += len)
    if ((p == o->only || p[-1] == ',') && (p[len] == ',' || p[len] == 0))
      return 1;
  return 0;
}

static void usage(void)
{
  fprintf(stderr, "usage: ktune tune [--db PATH] [--family matmul|hist|all] [--matmul MxNxK,...] [--hist NBINS,...]\n"
                  "                  [--hist-n N] [--dists uniform,skewed] [--variants NAME,...] [--timeout SECONDS]\n"
                  "                  [--seed N]\n");
}

int kt_tune_main(int argc, char **argv)
{
  tune_opts o = {0};
  o.db = getenv("KTUNE_DB") ? getenv("KTUNE_DB") : KT_DEFAULT_DB;
  o.do_matmul = o.do_hist = 1;
  snprintf(o.matmul, sizeof o.matmul, "%s", DEFAULT_MATMUL);
  snprintf(o.hist, sizeof o.hist, "%s", DEFAULT_HIST);
  snprintf(o.dists, sizeof o.dists, "uniform,skewed");
  o.hist_n = 1ll << 28;
  o.timeout_s = 120;
  o.seed = (unsigned long long)time(NULL);
  for (int i = 2; i < argc; ++i) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      usage();
      return 2;
    }
    if (!strcmp(a, "--db"))
      o.db = v;
    else if (!strcmp(a, "--family")) {
      o.do_matmul = !strcmp(v, "matmul") || !strcmp(v, "all");
      o.do_hist = !strcmp(v, "hist") || !strcmp(v, "all");
      if (!o.do_matmul && !o.do_hist) {
        usage();
        return 2;
      }
    } else if (!strcmp(a, "--matmul"))
      snprintf(o.matmul, sizeof o.matmul, "%s", v);
    else if (!strcmp(a, "--hist"))
      snprintf(o.hist, sizeof o.hist, "%s", v);
    else if (!strcmp(a, "--hist-n"))
      o.hist_n = atoll(v);
    else if (!strcmp(a, "--dists"))
      snprintf(o.dists, sizeof o.dists, "%s", v);
    else if (!strcmp(a, "--variants"))
      o.only = v;
    else if (!strcmp(a, "--timeout"))
      o.timeout_s = atof(v);
    else if (!strcmp(a, "--seed"))
      o.seed = strtoull(v, NULL, 10);
    else {
      usage();
      return 2;
    }
    ++i;
  }
  long long shapes[3 * 64], bins[64];
  int nshapes = parse_list(o.matmul, shapes, 64, 3, 'x'), nbins = parse_list(o.hist, bins, 64, 1, 0);
  if (nshapes < 0 || nbins < 0 || o.hist_n <= 0 || o.hist_n > 0xffffffffll || o.timeout_s <= 0) {
    fprintf(stderr, "ktune tune: bad problem list, --hist-n or --timeout\n");
    return 2;
  }
  for (int i = 0; i < nbins; ++i)
    if (bins[i] > 0x7fffffff) {
      fprintf(stderr, "ktune tune: nbins %lld is too large\n", bins[i]);
      return 2;
    }
  char dists[4][16], dist_list[64];
  int ndists = 0;
  snprintf(dist_list, sizeof dist_list, "%s", o.dists); /* strtok_r cuts its input */
  for (char *save = NULL, *d = strtok_r(dist_list, ",", &save); d && ndists < 4; d = strtok_r(NULL, ",", &save)) {
    if (strcmp(d, "uniform") && strcmp(d, "skewed")) {
      fprintf(stderr, "ktune tune: unknown distribution '%s' (uniform, skewed)\n", d);
      return 2;
    }
    snprintf(dists[ndists++], sizeof dists[0], "%.15s", d);
  }

  kt_device_info dev;
  char err[512];
  int rc = kt_device_query(-1, &dev, err, sizeof err);
  if (rc != KT_OK) {
    fprintf(stderr, "ktune tune: %s (%s)\n", kt_strerror(rc), err);
    return 1;
  }
  kt_db *db;
  if ((rc = kt_db_open(&db, o.db, KT_DB_WRITE, err, sizeof err)) != KT_OK) {
    fprintf(stderr, "ktune tune: %s: %s: %s\nThe file was not modified.\n", o.db, kt_strerror(rc), err);
    return 1;
  }
  tty = isatty(STDERR_FILENO);
  fprintf(stderr, "ktune tune: %s (driver %d, runtime %d), generator %s, target %s, database %s\n", dev.fingerprint,
          dev.driver_version, dev.runtime_version, kt_registry_generator_version, kt_registry_target, o.db);

  /* Problems, and the variants of each family. */
  kt_problem probs[128];
  int np = 0;
  if (o.do_matmul)
    for (int i = 0; i < nshapes && np < 128; ++i) {
      kt_problem p = {.family = KT_FAMILY_MATMUL, .m = shapes[3 * i], .n = shapes[3 * i + 1], .k = shapes[3 * i + 2]};
      probs[np++] = p;
    }
  if (o.do_hist)
    for (int i = 0; i < nbins; ++i)
      for (int d = 0; d < ndists && np < 128; ++d) {
        kt_problem p = {.family = KT_FAMILY_HIST, .nbins = bins[i], .nsamples = o.hist_n};
        snprintf(p.dist, sizeof p.dist, "%.15s", dists[d]);
        probs[np++] = p;
      }
  const kt_variant **fam[2];
  int nfam[2] = {0, 0};
  for (int f = 0; f < 2; ++f) {
    fam[f] = calloc((size_t)kt_registry_count, sizeof *fam[f]);
    for (int i = 0; i < kt_registry_count; ++i)
      if ((int)kt_registry[i].family == f && selected(&o, kt_registry[i].name))
        fam[f][nfam[f]++] = &kt_registry[i];
  }
  for (int i = 0; i < np; ++i)
    total_jobs += nfam[probs[i].family];

  double t0 = now_s();
  kt_tune_result **all = calloc((size_t)np, sizeof *all);
  int failed_db = 0;
  for (int i = 0; i < np; ++i) {
    const kt_problem *p = &probs[i];
    const int f = p->family;
    char key[96];
    kt_problem_key(p, 1, key, sizeof key);
    all[i] = calloc((size_t)nfam[f] + 1, sizeof(kt_tune_result));
    run_workers_for(p, key, fam[f], nfam[f], &o, all[i]);
    kt_measurement *ms = calloc((size_t)nfam[f] + 1, sizeof *ms);
    for (int j = 0; j < nfam[f]; ++j) {
      kt_tune_result_link(&all[i][j]);
      ms[j] = all[i][j].m;
    }
    if ((rc = kt_db_record(db, &dev, kt_registry_generator_version, ms, nfam[f], err, sizeof err)) != KT_OK) {
      fprintf(stderr, "\nktune tune: recording %s: %s: %s\n", key, kt_strerror(rc), err);
      failed_db = 1;
    }
    free(ms);
    /* Rank once all of a problem's distributions are in. */
    int last_of_problem = i + 1 == np || probs[i + 1].family != p->family || (p->family == KT_FAMILY_MATMUL) ||
                          probs[i + 1].nbins != p->nbins;
    if (last_of_problem && !failed_db) {
      kt_problem q = *p;
      q.dist[0] = 0;
      int nr = kt_db_rank(db, dev.fingerprint, kt_registry_generator_version, &q, err, sizeof err);
      if (nr < 0) {
        fprintf(stderr, "\nktune tune: ranking %s: %s: %s\n", key, kt_strerror(-nr), err);
        failed_db = 1;
      }
    }
  }
  if (tty)
    fprintf(stderr, "\r%-110s\r", "");
  double elapsed = now_s() - t0;

  /* Tables: winners as ranked in the database, beside the seed kernels. */
  kt_tuned *tuned = NULL;
  int nt = 0;
  kt_db_load(db, dev.fingerprint, kt_registry_generator_version, &tuned, &nt, err, sizeof err);
  int counts[5] = {0};
  const char *names[5] = {"ok", "wrong", "launch_failed", "timed_out", "skipped"};
  for (int i = 0; i < np; ++i)
    for (int j = 0; j < nfam[probs[i].family]; ++j)
      for (int s = 0; s < 5; ++s)
        counts[s] += strcmp(all[i][j].status, names[s]) == 0;
  printf("\nktune tune on %s: %d measurements in %.0f s (ok %d, wrong %d, launch failed %d, timed out %d, "
         "skipped %d)\n",
         dev.name, done_jobs, elapsed, counts[0], counts[1], counts[2], counts[3], counts[4]);
  for (int f = 0; f < 2; ++f) {
    int header = 0;
    for (int i = 0; i < np; ++i) {
      const kt_problem *p = &probs[i];
      if ((int)p->family != f)
        continue;
      if (f == KT_FAMILY_HIST && i > 0 && probs[i - 1].family == p->family && probs[i - 1].nbins == p->nbins)
        continue;
      kt_problem q = *p;
      q.dist[0] = 0;
      char key[96];
      kt_problem_key(&q, 0, key, sizeof key);
      const kt_tuned *t = NULL;
      for (int k = 0; k < nt; ++k)
        if (tuned[k].problem.family == p->family && strcmp(tuned[k].key, key) == 0)
          t = &tuned[k];
      if (!header) {
        if (f == KT_FAMILY_MATMUL)
          printf("\nmatmul                 winner                            time ms   GFLOP/s   seed bs16 GFLOP/s  "
                 "speed-up\n");
        else
          printf("\nhistogram (geomean over %s)\n%-26s winner                            time ms   GB/s      "
                 "Guide-layout dsm GB/s (best)\n",
                 o.dists, "problem");
        header = 1;
      }
      if (!t || t->count == 0) {
        printf("%-22s (no variant passed)\n", key);
        continue;
      }
      if (f == KT_FAMILY_MATMUL) {
        const kt_tune_result *seed = kt_tune_result_ok(all[i], nfam[f], "matmul_bs16_pad0");
        const kt_tune_result *win = kt_tune_result_ok(all[i], nfam[f], t->ranked[0]->name);
        double rate = win ? win->m.rate : 0, srate = seed ? seed->m.rate : 0;
        printf("%-22s %-33s %8.3f  %8.0f   %8.0f           %6.2fx\n", key, t->ranked[0]->name, t->best_ms, rate, srate,
               srate > 0 ? rate / srate : 0);
      } else {
        /* GB/s of the winner and of the best Guide-layout (blocked) cluster
         * kernel, averaged over the distributions. */
        double wr = 0, sr = 0;
        int wn = 0;
        for (int d = i; d < np && probs[d].family == p->family && probs[d].nbins == p->nbins; ++d) {
          const kt_tune_result *w = kt_tune_result_ok(all[d], nfam[f], t->ranked[0]->name);
          if (w)
            wr += w->m.rate, ++wn;
          double best = 0;
          for (int j = 0; j < nfam[f]; ++j)
            if (strstr(all[d][j].variant, "_blocked_") && !strcmp(all[d][j].status, "ok") && all[d][j].m.rate > best)
              best = all[d][j].m.rate;
          sr += best;
        }
        printf("%-26s %-33s %8.3f  %8.0f  %8.0f\n", key, t->ranked[0]->name, t->best_ms, wn ? wr / wn : 0,
               wn ? sr / wn : 0);
      }
    }
  }
  free(tuned);
  for (int i = 0; i < np; ++i)
    free(all[i]);
  free(all);
  free(fam[0]);
  free(fam[1]);
  kt_db_close(db);
  return failed_db ? 1 : 0;
}
