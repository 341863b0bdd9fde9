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
 * variant's measured time there (--clusters gives the context the SMs
 * that clusters fill on the GPU that measured the suites, which the
 * bench's second "device:" line prints; the model prices clustered
 * variants by them).  dispatch / oracle is the fastest
 * variant's time over the chosen one's, both from the same sweep (where
 * the choice is what the bench's kt_matmul ran, the lower of its sweep
 * time and its time as ktune), so a
 * change to the selection rule can be judged on every suite measured so
 * far in a second, and on the GPU only at the end.  Prints each suite's
 * geometric mean, 10th percentile and minimum, the worst shapes, and a
 * last line over all suites.  A call whose chosen variant the sweep never
 * timed (a variant added since) cannot be judged: it is counted and named,
 * and the exit status is 1, as for a suite that cannot be read.
 *
 * A SUITE.csv may also be a bench_gemm sweep (gemm_sweep.csv, or a copy
 * under bench/reference/gemm_random/): every variant's time on each drawn
 * tensor-core call.  Then kt_matmul_ex_choice picks, for the call as
 * bench_gemm laid it out, and dispatch / oracle is the fastest sweep time
 * over the pick's.
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
  char dispatched[128]; /* what the bench's kt_matmul ran, and its time there */
  double ktune_ms;
} shape;

static int usage(void)
{
  fprintf(stderr, "usage: replay_dispatch --db DB --device 'NAME|sm_CC|N SMs|M MiB' [--clusters A,B,C,D] [--verbose]\n"
                  "                       [--race N] SUITE.csv ...\n"
                  "  --clusters A,B,C,D  the SMs that clusters of 2, 4, 8 and 16 blocks fill (the bench's device line\n"
                  "            says; without it, every SM, as where the driver does not say)\n"
                  "  --race N  also: the fastest of the N candidates that on-line tuning would race, by the sweep\n");
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
  const int dc = column(h, nh, "dispatched"), kc = column(h, nh, "ktune_ms"); /* optional */
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
    snprintf(p->dispatched, sizeof p->dispatched, "%s", dc >= 0 ? x[dc] : "");
    p->ktune_ms = kc >= 0 ? atof(x[kc]) : NAN;
  }
  fclose(f);
  return n;
}

/* Room for one more row of `size` bytes at the end of *rows (n of them,
 * room for *cap, doubled from `first` as needed): the new row, n counting
 * it; NULL after a message where memory runs out, the rows then freed. */
static void *next_row(void **rows, int *n, int *cap, size_t size, int first)
{
  if (*n == *cap) {
    const int c = *cap ? 2 * *cap : first;
    void *p = realloc(*rows, size * (size_t)c);
    if (!p) {
      fprintf(stderr, "replay_dispatch: out of memory\n");
      free(*rows);
      *rows = NULL;
      *n = *cap = 0;
      return NULL;
    }
    *rows = p, *cap = c;
  }
  return (char *)*rows + size * (size_t)(*n)++;
}

/* Opens the table at path, reads its header into line (len bytes, split
 * into h, at most maxh fields: *nh) and finds the columns named names[0..n)
 * (their indices in c).  NULL after a message where the file cannot be
 * read or lacks one of them (`what` names the table it should be). */
static FILE *open_table(const char *path, const char *what, char *line, int len, char **h, int maxh, int *nh,
                        const char *const *names, int n, int *c)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "replay_dispatch: %s: %s\n", path, strerror(errno));
    return NULL;
  }
  *nh = fgets(line, len, f) ? split(line, h, maxh) : 0;
  for (int i = 0; i < n; ++i)
    if ((c[i] = column(h, *nh, names[i])) < 0) {
      fprintf(stderr, "replay_dispatch: %s: not a %s (no column %s)\n", path, what, names[i]);
      fclose(f);
      return NULL;
    }
  return f;
}

/* A suite's every-variant table, in memory: shape and kind name a call
 * (one shape drawn twice with the same kind but other leading dimensions
 * would share its rows; no measured suite has one). */
typedef struct timing {
  char shape[64], kind[16], variant[96];
  double ms;
} timing;

/* Reads path into *out (n rows), columns found by the header; -1 after a
 * message. */
static int read_times(const char *path, timing **out, int *n)
{
  *out = NULL;
  *n = 0;
  static const char *const names[] = {"shape", "kind", "variant", "ms"};
  char line[1024], *h[16], *x[16];
  int nh, c[4];
  FILE *f = open_table(path, "bench_matmul_random variants table", line, sizeof line, h, 16, &nh, names, 4, c);
  if (!f)
    return -1;
  int cap = 0;
  while (fgets(line, sizeof line, f)) {
    if (split(line, x, 16) < nh)
      continue;
    timing *t = next_row((void **)out, n, &cap, sizeof *t, 4096);
    if (!t) {
      fclose(f);
      return -1;
    }
    snprintf(t->shape, sizeof t->shape, "%s", x[c[0]]);
    snprintf(t->kind, sizeof t->kind, "%s", x[c[1]]);
    snprintf(t->variant, sizeof t->variant, "%s", x[c[2]]);
    t->ms = atof(x[c[3]]);
  }
  fclose(f);
  return 0;
}

/* Whether row t timed call `at`. */
static int times_call(const timing *t, const shape *at)
{
  return strcmp(t->shape, at->name) == 0 && strcmp(t->kind, at->kind) == 0;
}

/* The time of variant at call `at`, or NAN. */
static double time_of(const timing *t, int n, const shape *at, const char *variant)
{
  for (int i = 0; i < n; ++i)
    if (times_call(&t[i], at) && strcmp(t[i].variant, variant) == 0)
      return t[i].ms;
  return NAN;
}

/* The fastest time at call `at` (the oracle), or INFINITY. */
static double oracle_of(const timing *t, int n, const shape *at)
{
  double best = INFINITY;
  for (int i = 0; i < n; ++i)
    if (times_call(&t[i], at) && t[i].ms > 0 && t[i].ms < best)
      best = t[i].ms;
  return best;
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

/* ---- tensor-core suites (bench_gemm's gemm_sweep.csv) ------------------- */

/* Whether path's header is a bench_gemm sweep table: every variant's time
 * on every drawn call (call, type, ops, m, n, k, batch, lda, ldb, variant,
 * ms, dispatched). */
static int is_gemm_sweep(const char *path)
{
  FILE *f = fopen(path, "r");
  char head[1024], *h[32];
  const int nh = f && fgets(head, sizeof head, f) ? split(head, h, 32) : 0;
  if (f)
    fclose(f);
  return column(h, nh, "call") >= 0 && column(h, nh, "variant") >= 0 && column(h, nh, "batch") >= 0;
}

/* One row of a sweep table. */
typedef struct gemm_row {
  int call, batch;
  kt_dtype type;
  kt_op op_a, op_b;
  long long m, n, k, lda, ldb;
  char variant[96];
  double ms;
} gemm_row;

static int read_gemm_sweep(const char *path, gemm_row **out, int *n)
{
  *out = NULL;
  *n = 0;
  static const char *const names[] = {"call", "type", "ops", "m", "n", "k", "batch", "lda", "ldb", "variant", "ms"};
  char line[1024], *h[32], *x[32];
  int nh, c[11];
  FILE *f = open_table(path, "bench_gemm sweep table", line, sizeof line, h, 32, &nh, names, 11, c);
  if (!f)
    return -1;
  int cap = 0;
  while (fgets(line, sizeof line, f)) {
    if (split(line, x, 32) < nh)
      continue;
    gemm_row *r = next_row((void **)out, n, &cap, sizeof *r, 1024);
    if (!r) {
      fclose(f);
      return -1;
    }
    const char *ty = x[c[1]], *ops = x[c[2]];
    r->call = atoi(x[c[0]]);
    r->type = strcmp(ty, "tf32") == 0 ? KT_TF32 : strcmp(ty, "bf16") == 0 ? KT_BF16 : strcmp(ty, "f16") == 0 ? KT_F16 : KT_F32;
    r->op_a = ops[0] == 't' ? KT_OP_T : KT_OP_N;
    r->op_b = ops[0] && ops[1] == 't' ? KT_OP_T : KT_OP_N;
    r->m = atoll(x[c[3]]), r->n = atoll(x[c[4]]), r->k = atoll(x[c[5]]);
    r->batch = atoi(x[c[6]]);
    r->lda = atoll(x[c[7]]), r->ldb = atoll(x[c[8]]);
    snprintf(r->variant, sizeof r->variant, "%s", x[c[9]]);
    r->ms = atof(x[c[10]]); /* "nan" where the variant failed */
  }
  fclose(f);
  return 0;
}

/* Replays kt_matmul_ex's choice over a sweep table: per call, the chosen
 * variant's sweep time against the fastest's.  r[] gets each judged call's
 * ratio (n of them); returns the calls not judged (chosen variant not
 * timed), or -1 where the table cannot be read. */
static int replay_gemm(kt_context *ctx, const char *path, int verbose, double *r, int *n, int max)
{
  gemm_row *t = NULL;
  int nt = 0, unmeasured = 0;
  *n = 0;
  if (read_gemm_sweep(path, &t, &nt) != 0)
    return -1;
  for (int i = 0; i < nt && *n < max;) {
    int j = i;
    while (j < nt && t[j].call == t[i].call)
      ++j;
    const gemm_row *x = &t[i];
    /* As bench_gemm laid the call out: natural strides between entries,
     * 256-byte aligned pointers (never dereferenced). */
    kt_matmul_desc d;
    memset(&d, 0, sizeof d);
    d.type = x->type, d.op_a = x->op_a, d.op_b = x->op_b;
    d.M = x->m, d.N = x->n, d.K = x->k, d.batch = x->batch, d.alpha = 1.0f, d.beta = 0.0f;
    d.A = (const void *)(uintptr_t)0x10000000, d.lda = x->lda, d.stride_a = (x->op_a ? x->k : x->m) * x->lda;
    d.B = (const void *)(uintptr_t)0x20000000, d.ldb = x->ldb, d.stride_b = (x->op_b ? x->n : x->k) * x->ldb;
    d.C = (float *)(uintptr_t)0x30000000, d.ldc = x->n, d.stride_c = x->m * x->n;
    kt_choice ch;
    memset(&ch, 0, sizeof ch);
    const int chose = kt_matmul_ex_choice(ctx, &d, &ch);
    double best = INFINITY, ms = NAN;
    const char *best_name = "";
    for (int k = i; k < j; ++k) {
      if (t[k].ms > 0 && t[k].ms < best)
        best = t[k].ms, best_name = t[k].variant;
      if (chose == KT_OK && strcmp(t[k].variant, ch.variant) == 0)
        ms = t[k].ms;
    }
    char name[96];
    snprintf(name, sizeof name, "%s %c%c %lldx%lldx%lld x%d", kt_gemm_type_name((int)x->type), "nt"[x->op_a],
             "nt"[x->op_b], x->m, x->n, x->k, x->batch);
    if (!(ms > 0) || !isfinite(best)) {
      ++unmeasured;
      printf("  %-34s %s: not measured in %s\n", name, chose == KT_OK ? ch.variant : kt_strerror(chose), path);
    } else {
      r[(*n)++] = fmin(1.0, best / ms);
      if (verbose)
        printf("  %-34s ld %lld,%lld %.3f %s (%.4f ms; the oracle %s %.4f): %s\n", name, x->lda, x->ldb, best / ms,
               ch.variant, ms, best_name, best, ch.reason);
    }
    i = j;
  }
  free(t);
  return unmeasured;
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
  /* Shared memory per SM and per block (opt-in) of the chips ktune has
   * measured suites on: what kt_variant_runs_on compares variants with;
   * and their limits on resident blocks (kt_resident_blocks). */
  if (cc == 90)
    d->smem_per_sm = 233472, d->smem_optin = 232448;
  else if (cc == 80)
    d->smem_per_sm = 167936, d->smem_optin = 166912;
  else
    return -1;
  d->max_threads_per_sm = 2048;
  d->max_blocks_per_sm = 32;
  d->regs_per_sm = 65536;
  d->smem_reserved = 1024;
  d->cluster_launch = cc >= 90;
  d->mem_bytes = mib << 20;
  kt_device_fingerprint(d);
  return strcmp(d->fingerprint, s) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
  const char *db = NULL, *dev_s = NULL, *clusters = NULL;
  const char **files = calloc((size_t)argc, sizeof *files);
  int verbose = 0, nfiles = 0, race = 0;
  if (!files)
    return 1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
      db = argv[++i];
    else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
      dev_s = argv[++i];
    else if (strcmp(argv[i], "--clusters") == 0 && i + 1 < argc)
      clusters = argv[++i];
    else if (strcmp(argv[i], "--verbose") == 0)
      verbose = 1;
    else if (strcmp(argv[i], "--race") == 0 && i + 1 < argc) {
      race = atoi(argv[++i]);
      if (race < 1 || race > KT_RACE_MAX)
        return usage();
    } else if (argv[i][0] == '-')
      return usage();
    else
      files[nfiles++] = argv[i];
  }
  if (!db || !dev_s || !nfiles)
    return usage();
  kt_device_info dev;
  if (parse_device(dev_s, &dev) != 0) {
    fprintf(stderr, "replay_dispatch: --device '%s' is not a fingerprint (NAME|sm_CC|N SMs|M MiB) of sm_80 or sm_90\n",
            dev_s);
    return 2;
  }
  if (clusters) {
    int *c = dev.cluster_sms, n = 0;
    if (sscanf(clusters, "%d,%d,%d,%d%n", &c[0], &c[1], &c[2], &c[3], &n) != 4 || clusters[n] != '\0') {
      fprintf(stderr, "replay_dispatch: --clusters '%s' is not four SM counts A,B,C,D\n", clusters);
      return 2;
    }
    for (int i = 0; i < KT_CLUSTER_SIZES; ++i)
      if (c[i] < 0 || c[i] > dev.sm_count) {
        fprintf(stderr, "replay_dispatch: --clusters: %d SMs for clusters of %d, of %d\n", c[i], 2 << i, dev.sm_count);
        return 2;
      }
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
  static double all[64 * MAX_SHAPES], all_race[64 * MAX_SHAPES];
  int nall = 0, bad = 0, suites = 0;
  double mean_of_means = 0, race_mean_of_means = 0;
  for (int a = 0; a < nfiles; ++a) {
    const char *path = files[a];
    if (is_gemm_sweep(path)) {
      double r[MAX_SHAPES];
      int n = 0;
      const int unmeasured = replay_gemm(ctx, path, verbose, r, &n, MAX_SHAPES);
      if (unmeasured != 0)
        bad = 1;
      for (int i = 0; i < n && nall < (int)(sizeof all / sizeof all[0]); ++i)
        all_race[nall] = r[i], all[nall++] = r[i];
      double gm, p10, mn;
      summary(r, n, &gm, &p10, &mn);
      printf("%-60s %3d calls   dispatch/oracle %.4f / %.3f / %.3f", path, n, gm, p10, mn);
      if (unmeasured > 0)
        printf("  (%d not measured)", unmeasured);
      printf("\n");
      if (n) {
        mean_of_means += gm;
        race_mean_of_means += gm;
        ++suites;
      }
      continue;
    }
    const int ns = read_suite(path, s, MAX_SHAPES);
    if (ns < 0) {
      bad = 1;
      continue;
    }
    if (ns == MAX_SHAPES)
      fprintf(stderr, "replay_dispatch: %s: only its first %d calls are read\n", path, MAX_SHAPES);
    char vpath[4096];
    const size_t len = strlen(path);
    timing *t = NULL;
    int nt = 0;
    if (len < 4 || strcmp(path + len - 4, ".csv") != 0 ||
        snprintf(vpath, sizeof vpath, "%.*s_variants.csv", (int)(len - 4), path) >= (int)sizeof vpath) {
      fprintf(stderr, "replay_dispatch: %s: expected NAME.csv beside NAME_variants.csv\n", path);
      bad = 1;
      continue;
    }
    if (read_times(vpath, &t, &nt) != 0) {
      bad = 1;
      continue;
    }
    double r[MAX_SHAPES], rr[MAX_SHAPES];
    int idx[MAX_SHAPES], n = 0, unmeasured = 0;
    for (int i = 0; i < ns; ++i) {
      /* Pointers that are never dereferenced, 256-byte aligned plus the
       * call's offset, as the bench allocated them. */
      const float *A = (const float *)(uintptr_t)0x10000000 + s[i].offset;
      const float *B = (const float *)(uintptr_t)0x20000000 + s[i].offset;
      const float *C = (const float *)(uintptr_t)0x30000000 + s[i].offset;
      kt_choice ch;
      memset(&ch, 0, sizeof ch);
      const int chose = kt_matmul_choice(ctx, s[i].m, s[i].n, s[i].k, A, s[i].lda, B, s[i].ldb, C, s[i].ldc, &ch);
      const double best = oracle_of(t, nt, &s[i]);
      double ms = chose == KT_OK ? time_of(t, nt, &s[i], ch.variant) : NAN;
      /* The variant the bench's own kt_matmul ran was timed twice: in the
       * sweep, a median of a few runs, and as ktune, a median of many.  A
       * transient can inflate the few (an H100 sweep once put a 4 us
       * kernel at 19 us, three runs in a row, while ktune ran it at 4):
       * the lower stands. */
      if (ms > 0 && s[i].ktune_ms > 0 && strcmp(ch.variant, s[i].dispatched) == 0)
        ms = fmin(ms, s[i].ktune_ms);
      if (!(ms > 0) || !isfinite(best)) {
        ++unmeasured;
        printf("  %-20s %-8s %s: not measured in %s\n", s[i].name, s[i].kind,
               chose == KT_OK ? ch.variant : kt_strerror(chose), vpath);
        continue;
      }
      /* --race: the fastest, by the sweep, of the candidates that on-line
       * tuning would race (the dispatched variant where the model does
       * not decide the call). */
      double race_ms = ms;
      int cand[KT_RACE_MAX];
      const int nc =
          race ? kt_matmul_race_candidates(ctx, s[i].m, s[i].n, s[i].k, B, s[i].ldb, C, s[i].ldc, race, cand) : 0;
      for (int j = 0; j < nc; ++j) {
        const double x = time_of(t, nt, &s[i], kt_registry[cand[j]].name);
        if (x > 0 && x < race_ms)
          race_ms = x;
      }
      rr[n] = fmin(1.0, best / race_ms);
      r[n] = fmin(1.0, best / ms);
      idx[n++] = i;
      if (verbose)
        printf("  %-20s %-8s %.3f %s (measured %.4f ms, the oracle %.4f): %s\n", s[i].name, s[i].kind, best / ms,
               ch.variant, ms, best, ch.reason);
    }
    free(t);
    bad |= unmeasured > 0;
    /* The worst few, before summary() sorts r. */
    int order[MAX_SHAPES];
    for (int i = 0; i < n; ++i)
      order[i] = i;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        if (r[order[j]] < r[order[i]]) {
          const int x = order[i];
          order[i] = order[j], order[j] = x;
        }
    char worst[512] = "";
    for (int i = 0, w = 0; i < n && i < WORST && w >= 0 && w < (int)sizeof worst; ++i)
      w +=
          snprintf(worst + w, sizeof worst - (size_t)w, "%s%s %.2f", i ? ", " : "", s[idx[order[i]]].name, r[order[i]]);
    for (int i = 0; i < n; ++i)
      if (nall < (int)(sizeof all / sizeof all[0]))
        all_race[nall] = rr[i], all[nall++] = r[i];
      else if (i == 0)
        fprintf(stderr, "replay_dispatch: the last line counts the first %d calls only\n", nall);
    double gm, p10, mn;
    summary(r, n, &gm, &p10, &mn);
    printf("%-60s %3d shapes  dispatch/oracle %.4f / %.3f / %.3f  worst: %s", path, n, gm, p10, mn, worst);
    if (unmeasured)
      printf("  (%d not measured)", unmeasured);
    printf("\n");
    if (n) {
      mean_of_means += gm;
      ++suites;
    }
    if (race && n) {
      double rg, rp, rm;
      summary(rr, n, &rg, &rp, &rm);
      printf("%-60s %3d shapes  race of %d/oracle %.4f / %.3f / %.3f\n", path, n, race, rg, rp, rm);
      race_mean_of_means += rg;
    }
  }
  double gm, p10, mn;
  summary(all, nall, &gm, &p10, &mn);
  if (race) {
    double rg, rp, rm;
    summary(all_race, nall, &rg, &rp, &rm);
    printf("all %d suites, %d shapes: race of %d/oracle %.4f / %.3f / %.3f; mean of the suites' geometric means %.4f\n",
           suites, nall, race, rg, rp, rm, suites ? race_mean_of_means / suites : NAN);
  }
  printf("all %d suites, %d shapes: dispatch/oracle %.4f / %.3f / %.3f; mean of the suites' geometric means %.4f\n",
         suites, nall, gm, p10, mn, suites ? mean_of_means / suites : NAN);
  kt_close(ctx);
  free(files);
  return bad;
}
