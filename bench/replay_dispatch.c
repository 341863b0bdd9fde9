/* SPDX-License-Identifier: MIT */
/* bench/replay_dispatch.c: what matmul dispatch would reach on a measured
 * suite, without a GPU.
 *
 *   make build/replay_dispatch
 *   ./build/ktune import --db /tmp/h200.db tuning-db/shipped/nvidia-h200.json
 *   ./build/replay_dispatch --db /tmp/h200.db --device 'NVIDIA H200|sm_90|132 SMs|143155 MiB' \
 *       SUITE.csv [SUITE.csv ...]
 *
 * Each SUITE.csv is a `bench_matmul_random` table (matmul_random.csv, or
 * a copy under bench/reference/matmul_random/), with its every-variant
 * times beside it in SUITE_variants.csv.  For every shape the tool asks
 * kt_matmul_choice, on a context described as the database's device (the
 * fingerprint as `ktune export` writes it), which variant it would launch
 * for that call's leading dimensions and pointer offset, and looks up that
 * variant's measured time there.  dispatch / oracle is the fastest
 * variant's time over the chosen one's, both from the same sweep, so a
 * change to the selection rule can be judged on every suite measured so
 * far in a second, and on the GPU only at the end.  Prints each suite's
 * geometric mean, 10th percentile and minimum, the worst shapes, and a
 * last line over all suites.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"
#include "registry.h"

#define MAX_SHAPES 512
#define WORST 5

typedef struct shape {
  char name[64];
  long long m, n, k, lda, ldb, ldc;
  int offset;
  char kind[16];
  double oracle_ms;
} shape;

static int usage(void)
{
  fprintf(stderr, "usage: replay_dispatch --db DB --device 'NAME|sm_CC|N SMs|M MiB' [--verbose] SUITE.csv ...\n");
  return 2;
}

/* The fields of one CSV line, split in place at commas (no quoting: the
 * bench writes none). */
static int split(char *line, char **f, int max)
{
  int n = 0;
  line[strcspn(line, "\r\n")] = '\0';
  for (char *p = line; n < max;) {
    f[n++] = p;
    char *c = strchr(p, ',');
    if (!c)
      break;
    *c = '\0';
    p = c + 1;
  }
  return n;
}

/* Index of a header's column, or -1. */
static int column(char **h, int n, const char *name)
{
  for (int i = 0; i < n; ++i)
    if (strcmp(h[i], name) == 0)
      return i;
  return -1;
}

static int read_suite(const char *path, shape *s, int max)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "replay_dispatch: %s: %s\n", path, strerror(errno));
    return -1;
  }
  char line[4096], *h[64], *x[64];
  char head[4096];
  if (!fgets(head, sizeof head, f)) {
    fclose(f);
    return 0;
  }
  const int nh = split(head, h, 64);
  const int c[8] = {column(h, nh, "m"),   column(h, nh, "n"),   column(h, nh, "k"),      column(h, nh, "lda"),
                    column(h, nh, "ldb"), column(h, nh, "ldc"), column(h, nh, "offset"), column(h, nh, "kind")};
  for (int i = 0; i < 8; ++i)
    if (c[i] < 0) {
      fprintf(stderr, "replay_dispatch: %s: not a bench_matmul_random table\n", path);
      fclose(f);
      return -1;
    }
  int n = 0;
  while (n < max && fgets(line, sizeof line, f)) {
    const int nx = split(line, x, 64);
    if (nx < nh)
      continue;
    shape *p = &s[n++];
    p->m = atoll(x[c[0]]), p->n = atoll(x[c[1]]), p->k = atoll(x[c[2]]);
    p->lda = atoll(x[c[3]]), p->ldb = atoll(x[c[4]]), p->ldc = atoll(x[c[5]]);
    p->offset = atoi(x[c[6]]);
    snprintf(p->kind, sizeof p->kind, "%s", x[c[7]]);
    snprintf(p->name, sizeof p->name, "%lldx%lldx%lld", p->m, p->n, p->k);
    p->oracle_ms = INFINITY;
  }
  fclose(f);
  return n;
}

/* The measured time of variant at call `at` (its shape and kind: a suite
 * may draw one shape twice, with other leading dimensions), or NAN; with
 * variant NULL, each call's oracle instead. */
static double lookup(const char *path, shape *s, int ns, const shape *at, const char *variant)
{
  FILE *f = fopen(path, "r");
  if (!f)
    return NAN;
  char line[1024], *x[8];
  double found = NAN;
  if (!fgets(line, sizeof line, f)) {
    fclose(f);
    return NAN;
  }
  while (fgets(line, sizeof line, f)) {
    if (split(line, x, 8) < 4)
      continue;
    const double ms = atof(x[3]);
    if (!variant) {
      for (int i = 0; i < ns; ++i)
        if (strcmp(s[i].name, x[0]) == 0 && strcmp(s[i].kind, x[1]) == 0 && ms < s[i].oracle_ms)
          s[i].oracle_ms = ms;
    } else if (strcmp(x[0], at->name) == 0 && strcmp(x[1], at->kind) == 0 && strcmp(x[2], variant) == 0) {
      found = ms;
      break;
    }
  }
  fclose(f);
  return found;
}

static int by_value(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Geometric mean, 10th percentile (as bench_matmul_random: linear between
 * ranks) and minimum of r[0..n). */
static void summary(double *r, int n, double *gm, double *p10, double *mn)
{
  double s = 0;
  for (int i = 0; i < n; ++i)
    s += log(r[i]);
  qsort(r, (size_t)n, sizeof *r, by_value);
  const double pos = 0.1 * (n - 1);
  const int lo = (int)pos;
  *gm = n ? exp(s / n) : NAN;
  *p10 = n ? r[lo] + (pos - lo) * (r[lo + 1 < n ? lo + 1 : lo] - r[lo]) : NAN;
  *mn = n ? r[0] : NAN;
}

static int parse_device(const char *s, kt_device_info *d)
{
  char name[256];
  int cc, sms;
  unsigned long long mib;
  const char *bar = strchr(s, '|');
  if (!bar || (size_t)(bar - s) >= sizeof name)
    return -1;
  memcpy(name, s, (size_t)(bar - s));
  name[bar - s] = '\0';
  if (sscanf(bar, "|sm_%d|%d SMs|%llu MiB", &cc, &sms, &mib) != 3)
    return -1;
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "%s", name);
  d->cc = cc;
  d->sm_count = sms;
  d->smem_per_sm = 233472; /* sm_90; the runtime's checks only compare against these */
  d->smem_optin = 232448;
  d->max_threads_per_sm = 2048;
  d->cluster_launch = cc >= 90;
  d->mem_bytes = mib << 20;
  kt_device_fingerprint(d);
  return strcmp(d->fingerprint, s) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
  const char *db = NULL, *dev_s = NULL;
  int verbose = 0, first = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
      db = argv[++i];
    else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
      dev_s = argv[++i];
    else if (strcmp(argv[i], "--verbose") == 0)
      verbose = 1;
    else if (argv[i][0] == '-')
      return usage();
    else {
      first = i;
      break;
    }
  }
  if (!db || !dev_s || !first)
    return usage();
  kt_device_info dev;
  if (parse_device(dev_s, &dev) != 0) {
    fprintf(stderr, "replay_dispatch: --device '%s' is not a fingerprint (NAME|sm_CC|N SMs|M MiB)\n", dev_s);
    return 2;
  }
  setenv("KTUNE_MISSES", "off", 1);
  kt_options o = kt_default_options();
  o.db_path = db;
  o.system_db_path = "";
  kt_context *ctx = NULL;
  int rc = kt_open_described(&ctx, &dev, &o);
  if (rc != KT_OK) {
    fprintf(stderr, "replay_dispatch: %s\n", kt_strerror(rc));
    return 1;
  }
  static shape s[MAX_SHAPES];
  static double all[64 * MAX_SHAPES];
  int nall = 0, bad = 0;
  double mean_of_means = 0;
  int suites = 0;
  for (int a = first; a < argc; ++a) {
    const int ns = read_suite(argv[a], s, MAX_SHAPES);
    if (ns < 0) {
      bad = 1;
      continue;
    }
    char vpath[4096];
    const size_t len = strlen(argv[a]);
    if (len < 4 || strcmp(argv[a] + len - 4, ".csv") != 0 ||
        snprintf(vpath, sizeof vpath, "%.*s_variants.csv", (int)(len - 4), argv[a]) >= (int)sizeof vpath) {
      fprintf(stderr, "replay_dispatch: %s: expected NAME.csv beside NAME_variants.csv\n", argv[a]);
      bad = 1;
      continue;
    }
    lookup(vpath, s, ns, NULL, NULL);
    double r[MAX_SHAPES];
    int idx[MAX_SHAPES], n = 0, unmeasured = 0;
    for (int i = 0; i < ns; ++i) {
      /* Pointers that are never dereferenced, 256-byte aligned plus the
       * call's offset, as the bench allocated them. */
      const float *A = (const float *)(uintptr_t)0x10000000 + s[i].offset;
      const float *B = (const float *)(uintptr_t)0x20000000 + s[i].offset;
      const float *C = (const float *)(uintptr_t)0x30000000 + s[i].offset;
      kt_choice ch;
      memset(&ch, 0, sizeof ch);
      if (kt_matmul_choice(ctx, s[i].m, s[i].n, s[i].k, A, s[i].lda, B, s[i].ldb, C, s[i].ldc, &ch) != KT_OK ||
          !isfinite(s[i].oracle_ms)) {
        ++unmeasured;
        continue;
      }
      const double ms = lookup(vpath, s, ns, &s[i], ch.variant);
      if (!(ms > 0)) {
        ++unmeasured;
        if (verbose)
          printf("  %-20s %-8s %s: not measured there\n", s[i].name, s[i].kind, ch.variant);
        continue;
      }
      r[n] = fmin(1.0, s[i].oracle_ms / ms);
      idx[n++] = i;
      if (verbose)
        printf("  %-20s %-8s %.3f %s (measured %.4f ms, the oracle %.4f): %s\n", s[i].name, s[i].kind,
               s[i].oracle_ms / ms, ch.variant, ms, s[i].oracle_ms, ch.reason);
    }
    /* The worst few, before summary() sorts r. */
    int order[MAX_SHAPES];
    for (int i = 0; i < n; ++i)
      order[i] = i;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        if (r[order[j]] < r[order[i]]) {
          const int t = order[i];
          order[i] = order[j], order[j] = t;
        }
    char worst[512] = "";
    for (int i = 0, w = 0; i < n && i < WORST && w >= 0 && w < (int)sizeof worst; ++i)
      w +=
          snprintf(worst + w, sizeof worst - (size_t)w, "%s%s %.2f", i ? ", " : "", s[idx[order[i]]].name, r[order[i]]);
    for (int i = 0; i < n && nall < (int)(sizeof all / sizeof all[0]); ++i)
      all[nall++] = r[i];
    double gm, p10, mn;
    summary(r, n, &gm, &p10, &mn);
    printf("%-60s %3d shapes  dispatch/oracle %.4f / %.3f / %.3f  worst: %s%s\n", argv[a], n, gm, p10, mn, worst,
           unmeasured ? "  (some unmeasured)" : "");
    if (n) {
      mean_of_means += gm;
      ++suites;
    }
  }
  double gm, p10, mn;
  summary(all, nall, &gm, &p10, &mn);
  printf("all %d suites, %d shapes: dispatch/oracle %.4f / %.3f / %.3f; mean of the suites' geometric means %.4f\n",
         suites, nall, gm, p10, mn, suites ? mean_of_means / suites : NAN);
  kt_close(ctx);
  return bad;
}
