/* SPDX-License-Identifier: MIT */
/* tuner/hist.c: what the tuner knows about the histogram family
 * (kt_tune_hist_): its inputs, exact CPU reference and check (hist.h), its
 * default tuning problems and how `--hist`, `--hist-n` and `--dists` list
 * them, its check and timing in a worker, and its rows of the tune summary
 * (its kt_tune_family entry, at the end). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "hist.h"
#include "tuner.h"

const char *const kt_tune_hist_dists[] = {"uniform", "skewed", "sorted", "normal", "onebin", "halfout", NULL};

int kt_tune_hist_dist_known(const char *dist)
{
  for (int i = 0; kt_tune_hist_dists[i]; ++i)
    if (dist && strcmp(dist, kt_tune_hist_dists[i]) == 0)
      return 1;
  return 0;
}

/* A normal sample of mean 0 and deviation 1, nearly: the sum of four
 * uniform 16-bit numbers (Irwin-Hall), scaled.  Cheap, for 2^28 samples. */
static double normalish(uint64_t x)
{
  double sum = 0;
  for (int i = 0; i < 4; ++i, x >>= 16)
    sum += (double)(x & 0xffff) / 65536.0;
  return (sum - 2.0) * 1.7320508075688772; /* variance 4/12 -> 1 */
}

/* ---- inputs and their exact count ---------------------------------------- */

/* A tuning problem's 2^28 samples took seconds on one core to make, sort
 * and count, per problem: a fifth of make tune.  Inputs of PARALLEL_N or
 * more samples are made and counted in chunks on up to KT_MEASURE_MAX_THREADS
 * threads (kt_measure_run_all); smaller ones (the checks, the tests) stay
 * on the caller's. */
#define PARALLEL_N ((size_t)1 << 22)
#define MAX_THREADS KT_MEASURE_MAX_THREADS
#define MAX_PARTIAL_BYTES ((size_t)1 << 30) /* the per-thread counts of count_bins, at most */
#define RUN_CHUNK ((size_t)1 << 20)         /* samples kt_tune_hist_sort writes per chunk */

static int threads_for(size_t n)
{
  if (n < PARALLEL_N)
    return 1;
  long t = kt_measure_cpus();
  if ((size_t)t > n / (PARALLEL_N / 4))
    t = (long)(n / (PARALLEL_N / 4));
  return t < 1 ? 1 : (int)t;
}

static void fill(int *out, size_t n, long long nbins, const char *dist, kt_rng *r);

typedef struct fill_job {
  int *out;
  size_t n;
  long long nbins;
  const char *dist;
  uint64_t seed;
} fill_job;

static void *fill_body(void *p)
{
  fill_job *j = p;
  kt_rng r = {j->seed};
  fill(j->out, j->n, j->nbins, j->dist, &r);
  return NULL;
}

void kt_tune_hist_samples(int *out, size_t n, long long nbins, const char *dist, kt_rng *r)
{
  const int t = threads_for(n);
  if (t == 1)
    fill(out, n, nbins, dist, r);
  else { /* chunk i from a stream of its own, seeded from r */
    fill_job jobs[MAX_THREADS];
    for (int i = 0; i < t; ++i) {
      const size_t lo = n / t * i, hi = i == t - 1 ? n : n / t * (i + 1);
      jobs[i] = (fill_job){out + lo, hi - lo, nbins, dist, kt_rng_next(r)};
    }
    kt_measure_run_all(fill_body, jobs, sizeof jobs[0], t);
  }
  if (dist && strcmp(dist, "sorted") == 0)
    kt_tune_hist_sort(out, n, nbins);
}

/* n samples of dist into out, one after another from r (unsorted). */
static void fill(int *out, size_t n, long long nbins, const char *dist, kt_rng *r)
{
  const int skewed = dist && strcmp(dist, "skewed") == 0;
  const int normal = dist && strcmp(dist, "normal") == 0;
  const int halfout = dist && strcmp(dist, "halfout") == 0;
  const long long hot = nbins / 100 > 0 ? nbins / 100 : 1;
  const long long spread = nbins / hot; /* hot bins are spread over the range */
  if (dist && strcmp(dist, "onebin") == 0) {
    for (size_t i = 0; i < n; ++i)
      out[i] = (int)(nbins / 3);
    return;
  }
  const double sigma = (double)nbins / 50;
  /* Samples above the range run from nbins up to 999 past it, or to
   * INT_MAX where that is nearer (nbins <= INT_MAX: one at least). */
  const uint64_t above = (uint64_t)(INT_MAX - nbins + 1 < 1000 ? INT_MAX - nbins + 1 : 1000);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = kt_rng_next(r);
    const unsigned sel = (unsigned)(x & 1023);
    const uint64_t y = x >> 10;
    long long s;
    if (sel == 2)
      s = y & 1 ? INT_MIN : INT_MAX; /* the ends of int, where an index past them would wrap */
    else if (halfout && sel < 512)
      s = sel & 1 ? -1 - (long long)(y % 1000) : nbins + (long long)(y % above);
    else if (sel == 0)
      s = -1 - (long long)(y % 1000); /* below the range: counts in bin 0 */
    else if (sel == 1)
      s = nbins + (long long)(y % above); /* above: counts in bin nbins - 1 */
    else if (skewed && (y % 10) < 8)
      s = (long long)((y / 10) % hot) * spread;
    else if (normal) {
      const double z = (double)nbins / 2 + sigma * normalish(kt_rng_next(r));
      s = (long long)(z < -1e9 ? -1e9 : z > 1e9 ? 1e9 : z);
    } else
      s = (long long)((y / 10) % (uint64_t)nbins);
    out[i] = (int)s;
  }
}

typedef struct count_job {
  const int *s;
  size_t n;
  long long nbins;
  unsigned *bins; /* zeroed */
  size_t below, above;
} count_job;

static void *count_body(void *p)
{
  count_job *j = p;
  for (size_t i = 0; i < j->n; ++i) {
    const int s = j->s[i];
    if (s < 0)
      ++j->below;
    else if (s >= j->nbins)
      ++j->above;
    else
      ++j->bins[s];
  }
  return NULL;
}

/* The threads' counts added into the first's, a range of bins at a time
 * on threads of their own (16 threads' counts of 16M bins are 2^28
 * additions). */
#define MERGE_CHUNK ((size_t)1 << 16)
typedef struct merge_ctx {
  count_job *jobs;
  int t;
} merge_ctx;

static void merge_chunk(size_t lo, size_t hi, size_t c, void *p)
{
  (void)c;
  const merge_ctx *m = p;
  unsigned *to = m->jobs[0].bins;
  for (int i = 1; i < m->t; ++i) {
    const unsigned *from = m->jobs[i].bins;
    for (size_t b = lo; b < hi; ++b)
      to[b] += from[b];
  }
}

/* bins[b] = the samples in bin b (n < 2^32), *below and *above those
 * outside [0, nbins); each thread past the first counts into bins of its
 * own, added up at the end.  Where those cannot be had, fewer threads
 * count (at least this one): it never fails. */
static void count_bins(const int *s, size_t n, long long nbins, unsigned *bins, size_t *below, size_t *above)
{
  int t = threads_for(n);
  while (t > 1 && (size_t)(t - 1) * (size_t)nbins * sizeof(unsigned) > MAX_PARTIAL_BYTES)
    --t;
  count_job jobs[MAX_THREADS];
  memset(bins, 0, sizeof(unsigned) * (size_t)nbins);
  jobs[0].bins = bins;
  for (int i = 1; i < t; ++i)
    if (!(jobs[i].bins = calloc((size_t)nbins, sizeof(unsigned))))
      t = i;
  for (int i = 0; i < t; ++i) {
    const size_t lo = n / t * i, hi = i == t - 1 ? n : n / t * (i + 1);
    jobs[i] = (count_job){s + lo, hi - lo, nbins, jobs[i].bins, 0, 0};
  }
  kt_measure_run_all(count_body, jobs, sizeof jobs[0], t);
  merge_ctx m = {jobs, t};
  if (t > 1)
    kt_measure_chunks((size_t)nbins, MERGE_CHUNK, merge_chunk, &m);
  *below = jobs[0].below, *above = jobs[0].above;
  for (int i = 1; i < t; ++i) {
    *below += jobs[i].below, *above += jobs[i].above;
    free(jobs[i].bins);
  }
}

/* The sorted samples from position lo to hi: start[b] is where bin b's run
 * begins (start[nbins] where the samples above the range do), the samples
 * below it before start[0]. */
typedef struct runs_ctx {
  int *s;
  const unsigned *start;
  long long nbins;
} runs_ctx;

static void write_runs(size_t lo, size_t hi, size_t c, void *p)
{
  (void)c;
  const runs_ctx *w = p;
  const long long nb = w->nbins;
  size_t i = lo;
  for (; i < hi && i < w->start[0]; ++i)
    w->s[i] = -1;
  long long b0 = 0, b1 = nb; /* the first bin whose run ends past i */
  while (b0 < b1) {
    const long long mid = b0 + (b1 - b0) / 2;
    if (w->start[mid + 1] > i)
      b1 = mid;
    else
      b0 = mid + 1;
  }
  for (long long b = b0; i < hi && b < nb; ++b)
    for (const size_t end = w->start[b + 1] < hi ? w->start[b + 1] : hi; i < end; ++i)
      w->s[i] = (int)b;
  for (; i < hi; ++i)
    w->s[i] = (int)(nb < INT_MAX ? nb : INT_MAX);
}

int kt_tune_hist_sort(int *s, size_t n, long long nbins)
{
  /* A counting sort by bin: the samples below the range (as -1), then each
   * bin's (as its index), then those above (as nbins): the same counts.
   * The runs are written on threads, each from its place in the output. */
  unsigned *start = malloc(sizeof *start * ((size_t)nbins + 1));
  size_t below, above;
  if (!start || n > UINT_MAX) {
    free(start);
    return -1;
  }
  count_bins(s, n, nbins, start, &below, &above);
  unsigned at = (unsigned)below;
  for (long long b = 0; b < nbins; ++b) {
    const unsigned c = start[b];
    start[b] = at;
    at += c;
  }
  start[nbins] = at;
  runs_ctx w = {s, start, nbins};
  kt_measure_chunks(n, RUN_CHUNK, write_runs, &w);
  free(start);
  return 0;
}

void kt_tune_hist_reference(const int *samples, size_t n, long long nbins, unsigned *bins)
{
  size_t below, above;
  count_bins(samples, n, nbins, bins, &below, &above);
  bins[0] += (unsigned)below; /* out of range: clamped to the end bins */
  bins[nbins - 1] += (unsigned)above;
}

void kt_tune_hist_buffers_free(kt_tune_hist_buffers *b)
{
  free(b->s);
  cudaFree(b->ds);
  free(b->ref);
  cudaFreeHost(b->got);
  cudaFree(b->dbins);
  memset(b, 0, sizeof *b);
}

/* Bins where got differs from ref, and the first of them in *first (-1
 * for none); memcmp first, the count only where something differs. */
static long long wrong_bins(const unsigned *got, const unsigned *ref, long long nbins, long long *first)
{
  long long wrong = 0;
  *first = -1;
  if (memcmp(got, ref, sizeof(unsigned) * (size_t)nbins) != 0)
    for (long long i = 0; i < nbins; ++i)
      if (got[i] != ref[i]) {
        if (*first < 0)
          *first = i;
        wrong++;
      }
  return wrong;
}

/* Bins past nbins that a check fills and reads back: a variant that
 * writes one fails. */
#define BIN_GUARD 64

/* Make b hold at least n samples and nbins bins (and BIN_GUARD more): 0,
 * -1 out of host memory, else the CUDA error; b is released on failure. */
static int buffers_fit(kt_tune_hist_buffers *b, size_t n, long long nbins)
{
  int e = 0;
  if (b->n < n) {
    free(b->s);
    cudaFree(b->ds);
    b->ds = NULL, b->n = 0;
    if (!(b->s = malloc(sizeof(int) * (n + 4))))
      e = -1;
    else if ((e = (int)cudaMalloc((void **)&b->ds, sizeof(int) * (n + 4))) == 0)
      b->n = n;
  }
  if (e == 0 && b->nbins < nbins) {
    free(b->ref);
    cudaFreeHost(b->got);
    cudaFree(b->dbins);
    b->got = NULL, b->dbins = NULL, b->nbins = 0;
    if (!(b->ref = malloc(sizeof(unsigned) * (size_t)nbins)))
      e = -1;
    else if ((e = (int)cudaMallocHost((void **)&b->got, sizeof(unsigned) * (size_t)(nbins + BIN_GUARD))) == 0 &&
             (e = (int)cudaMalloc((void **)&b->dbins, sizeof(unsigned) * (size_t)(nbins + BIN_GUARD))) == 0)
      b->nbins = nbins;
  }
  if (e != 0)
    kt_tune_hist_buffers_free(b);
  return e;
}

void kt_tune_hist_check_with(kt_tune_hist_buffers *b, const kt_variant *v, const kt_device_info *dev, long long nbins,
                             size_t n, int offset, const char *dist, uint64_t seed, kt_check *out)
{
  memset(out, 0, sizeof *out);
  kt_rng r = {seed};
  const int fit = buffers_fit(b, n, nbins);
  if (fit < 0) {
    snprintf(out->reason, sizeof out->reason, "out of host memory");
    return;
  }
  if (kt_measure_cuda_failed(out, (cudaError_t)fit, "cudaMalloc"))
    return;
  int *ds = b->ds;
  unsigned *ref = b->ref, *got = b->got, *dbins = b->dbins;
  kt_tune_hist_samples(b->s, n, nbins, dist, &r);
  kt_tune_hist_reference(b->s, n, nbins, ref);
  if (kt_measure_cuda_failed(out, cudaMemcpy(ds + offset, b->s, sizeof(int) * n, cudaMemcpyHostToDevice),
                             "cudaMemcpy") ||
      kt_measure_cuda_failed(out, cudaMemset(dbins, 0xab, sizeof(unsigned) * (size_t)(nbins + BIN_GUARD)),
                             "cudaMemset"))
    return;
  void *pool = kt_device_pool(dev->ordinal);
  kt_hist_args a = {ds + offset, n, dbins, (int)nbins, dev->sm_count, dev->smem_per_sm, dev->smem_optin, pool};
  if (kt_measure_cuda_failed(out, (cudaError_t)v->launch(&a, 0), "launch") ||
      kt_measure_cuda_failed(out, cudaDeviceSynchronize(), "kernel") ||
      kt_measure_cuda_failed(
          out, cudaMemcpy(got, dbins, sizeof(unsigned) * (size_t)(nbins + BIN_GUARD), cudaMemcpyDeviceToHost),
          "cudaMemcpy"))
    return;
  for (long long i = nbins; i < nbins + BIN_GUARD; ++i)
    if (got[i] != 0xababababu) {
      out->worst = 1;
      snprintf(out->reason, sizeof out->reason, "wrote %u past the %lld bins (bin %lld) n=%zu offset %d %s", got[i],
               nbins, i, n, offset, dist);
      return;
    }
  long long first = -1;
  const long long wrong = wrong_bins(got, ref, nbins, &first);
  out->worst = (double)wrong;
  out->ok = wrong == 0;
  if (!out->ok)
    snprintf(out->reason, sizeof out->reason, "%lld of %lld bins wrong (bin %lld: %u, expected %u) n=%zu offset %d %s",
             wrong, nbins, first, got[first], ref[first], n, offset, dist);
}

void kt_tune_hist_check(const kt_variant *v, const kt_device_info *dev, long long nbins, size_t n, int offset,
                        const char *dist, uint64_t seed, kt_check *out)
{
  kt_tune_hist_buffers b;
  memset(&b, 0, sizeof b);
  kt_tune_hist_check_with(&b, v, dev, nbins, n, offset, dist, seed, out);
  kt_tune_hist_buffers_free(&b);
}

int kt_tune_hist_guide_layout(const kt_variant *v)
{
  const char *layout = kt_variant_param(v, "layout");
  return v->family == KT_FAMILY_HIST && layout && strcmp(layout, "blocked") == 0;
}

/* ---- `ktune tune`: problems and the summary ------------------------------ */

/* The default tuning set: bin counts from 256 to 16M at n = 2^28, and five
 * from 64K up at n = 2^20 (where flushing per-block copies of many bins, or
 * clearing them, costs more than the samples: dispatch breaks ties in nbins
 * by n), each on uniform samples
 * and on sorted ones (runs of equal bins: what punishes a kernel whose lanes
 * collide on one counter).  Skewed input ranks like uniform on an H100
 * (bench/reference/README.md), so it is left out to keep make tune short. */
#define DEFAULT_BINS "256,4096,65536,262144,1048576,4194304,16777216,65536:1048576,262144:1048576,1048576:1048576,4194304:1048576,16777216:1048576"
#define DEFAULT_N "268435456"
#define DEFAULT_DISTS "uniform,sorted"
#define MAX_DISTS 8

/* values: --hist, --hist-n, --dists.  One problem per bin count (and n,
 * --hist-n unless the item gives it as NBINS:N) and distribution, the
 * distributions of a problem one after another. */
static int problems(const char *const *values, kt_problem *out, int max, char *err, size_t errlen)
{
  const kt_family_ops *ops = kt_family_get(KT_FAMILY_HIST);
  char *end;
  errno = 0;
  const long long hist_n = strtoll(values[1], &end, 10);
  if (errno || end == values[1] || *end || hist_n <= 0 || hist_n > 0xffffffffll) {
    snprintf(err, errlen, "--hist-n: bad sample count '%s' (1..4294967295)", values[1]);
    return -1;
  }
  char dists[MAX_DISTS][16], item[64];
  int ndists = 0, more;
  const char *list = values[2];
  while ((more = kt_tune_family_item(&list, item, sizeof item)) != 0) {
    if (more < 0 || !kt_tune_hist_dist_known(item)) {
      snprintf(err, errlen, "unknown distribution '%s' (uniform, skewed, sorted, normal, onebin, halfout)",
               more < 0 ? "(too long)" : item);
      return -1;
    }
    if (ndists == MAX_DISTS) {
      snprintf(err, errlen, "--dists: more than %d distributions", MAX_DISTS);
      return -1;
    }
    snprintf(dists[ndists++], sizeof dists[0], "%.15s", item);
  }
  int n = 0;
  list = values[0];
  while ((more = kt_tune_family_item(&list, item, sizeof item)) != 0) {
    kt_problem p;
    if (more < 0 || ops->parse(item, &p) != 0 || p.nbins <= 0 || p.nbins > INT_MAX) {
      snprintf(err, errlen, "--hist: bad problem '%s' (NBINS or NBINS:N, NBINS 1..%d, N 1..4294967295)",
               more < 0 ? "(too long)" : item, INT_MAX);
      return -1;
    }
    p.family = KT_FAMILY_HIST;
    if (!strchr(item, ':'))
      p.nsamples = hist_n;
    if (p.nsamples <= 0 || p.nsamples > 0xffffffffll) {
      snprintf(err, errlen, "--hist: bad sample count in '%s' (1..4294967295)", item);
      return -1;
    }
    for (int d = 0; d < ndists; ++d) {
      if (n == max) {
        snprintf(err, errlen, "--hist: more than %d problems", max);
        return -1;
      }
      out[n] = p;
      snprintf(out[n].dist, sizeof out[n].dist, "%.15s", dists[d]);
      ++n;
    }
  }
  return n;
}

static void report_header(const char *const *values)
{
  printf("\nhistogram (geomean over %s)\n%-26s winner                            time ms   GB/s      "
         "Guide-layout dsm GB/s (best)\n",
         values[2], "problem");
}

/* GB/s of the winner and of the best Guide-layout (blocked) cluster kernel,
 * averaged over the distributions. */
static void report_row(const char *key, const kt_tune_run *runs, int nruns, const kt_tuned *t)
{
  double wr = 0, sr = 0;
  int wn = 0;
  for (int d = 0; d < nruns; ++d) {
    const kt_tune_run *run = &runs[d];
    const kt_tune_result *w = kt_tune_result_ok(run->results, run->n, t->ranked[0]->name);
    if (w)
      wr += w->m.rate, ++wn;
    double best = 0;
    for (int j = 0; j < run->n; ++j) {
      const kt_tune_result *x = &run->results[j];
      const kt_variant *v = kt_registry_find(x->variant, NULL);
      if (v && kt_tune_hist_guide_layout(v) && !strcmp(x->status, "ok") && x->m.rate > best)
        best = x->m.rate;
    }
    sr += best;
  }
  printf("%-26s %-33s %8.3f  %8.0f  %8.0f\n", key, t->ranked[0]->name, t->best_ms, wn ? wr / wn : 0, wn ? sr / wn : 0);
}

/* ---- `ktune __worker`: check and time ------------------------------------- */

typedef struct inputs {
  kt_device_info dev;
  kt_problem p;
  long long nbins;
  size_t n;
  int *ds;       /* the problem's samples */
  unsigned *ref; /* their exact counts */
  unsigned *got; /* a variant's counts, copied back */
  unsigned *dbins;
  void *flush;
  size_t flush_bytes;
  kt_tune_hist_buffers check; /* the checks' buffers, kept from variant to variant */
} inputs;

static void teardown(void *state)
{
  inputs *in = state;
  if (!in)
    return;
  cudaFree(in->ds);
  cudaFree(in->dbins);
  cudaFree(in->flush);
  free(in->ref);
  cudaFreeHost(in->got);
  kt_tune_hist_buffers_free(&in->check);
  free(in);
}

static void *setup(const kt_device_info *dev, const kt_problem *p, uint64_t seed, char *err, size_t errlen)
{
  inputs *in = calloc(1, sizeof *in);
  if (!in) {
    snprintf(err, errlen, "out of host memory");
    return NULL;
  }
  in->dev = *dev;
  in->p = *p;
  const long long nbins = in->nbins = p->nbins;
  const size_t n = in->n = (size_t)p->nsamples;
  kt_rng r = {seed};
  int *hs = malloc(sizeof(int) * (n ? n : 1));
  in->ref = malloc(sizeof(unsigned) * (size_t)nbins);
  in->flush_bytes = kt_measure_flush_bytes(dev);
  if (!hs || !in->ref || cudaMallocHost((void **)&in->got, sizeof(unsigned) * (size_t)nbins) ||
      cudaMalloc((void **)&in->ds, sizeof(int) * (n ? n : 1)) ||
      cudaMalloc((void **)&in->dbins, sizeof(unsigned) * (size_t)nbins) || cudaMalloc(&in->flush, in->flush_bytes)) {
    snprintf(err, errlen, "cannot allocate the histogram problem");
    free(hs);
    teardown(in);
    return NULL;
  }
  kt_tune_hist_samples(hs, n, nbins, p->dist, &r);
  kt_tune_hist_reference(hs, n, nbins, in->ref);
  cudaMemcpy(in->ds, hs, sizeof(int) * n, cudaMemcpyHostToDevice);
  free(hs);
  return in;
}

/* fits() said no: either v cannot run here at all, or the partition does
 * not serve this many bins, or its shared-memory counters for them exceed
 * what a block may have. */
static void unfit(const kt_variant *v, const kt_device_info *dev, const kt_problem *p, char *buf, size_t len)
{
  if (!kt_variant_runs_on(v, dev))
    snprintf(buf, len, "cannot run on this device");
  else if (v->banded == 2)
    snprintf(buf, len, "partitions %lld to %lld bins here (kt_hist_part_buckets), not %lld",
             kt_hist_part_width(dev->smem_optin) + 1, kt_hist_max_nbins(v, dev), p->nbins);
  else
    snprintf(buf, len,
             "cannot serve %lld bins here: its counters need %lld B of shared memory per block, the device "
             "allows %d",
             p->nbins, kt_hist_smem_bytes(p->nbins, v->cluster, v->copies, v->counter_bits), dev->smem_optin);
}

static void measure(void *state, const kt_variant *v, uint64_t seed, double best_ms, kt_tune_result *r)
{
  inputs *in = state;
  const kt_device_info *dev = &in->dev;
  const long long nbins = in->nbins;
  const size_t n = in->n;
  /* Correctness first: fresh samples (some out of range), starts 4 and 8
   * bytes off 16 and an aligned one (a vector load of 8 bytes, or a head
   * peeled by 16-byte steps, fails only at one of them), and a tiny n
   * that is all head and tail. */
  kt_rng vr = {seed};
  kt_check c = {1, 0, 0, ""};
  const size_t sizes[4] = {100003 + kt_rng_next(&vr) % 1000, 65536 + kt_rng_next(&vr) % 64, 7,
                           33331 + kt_rng_next(&vr) % 1000};
  const int offsets[4] = {1, 0, 3, 2};
  for (int t = 0; t < 4 && c.ok; ++t)
    kt_tune_hist_check_with(&in->check, v, dev, nbins, sizes[t], offsets[t], in->p.dist, kt_rng_next(&vr), &c);
  if (!c.ok) {
    kt_tune_result_set(r, &in->p, v, c.launch_failed ? "launch_failed" : "wrong", c.reason);
    r->m.max_err = c.worst;
    return;
  }
  void *pool = kt_device_pool(dev->ordinal);
  kt_hist_args args = {in->ds, n, in->dbins, (int)nbins, dev->sm_count, dev->smem_per_sm, dev->smem_optin, pool};
  double ms = 0;
  int reps = 0;
  int e = kt_measure_candidate(v, &args, in->flush, in->flush_bytes, best_ms, &ms, &reps);
  if (!e)
    e = cudaMemcpy(in->got, in->dbins, sizeof(unsigned) * (size_t)nbins, cudaMemcpyDeviceToHost);
  if (e) {
    kt_tune_result_set(r, &in->p, v, "launch_failed", cudaGetErrorString((cudaError_t)e));
    return;
  }
  long long first;
  const long long wrong = wrong_bins(in->got, in->ref, nbins, &first);
  if (wrong) {
    char why[128];
    snprintf(why, sizeof why, "%lld bins wrong on the tuning input", wrong);
    kt_tune_result_set(r, &in->p, v, "wrong", why);
    r->m.max_err = (double)wrong;
    return;
  }
  kt_tune_result_set(r, &in->p, v, "ok", "");
  r->m.time_ms = ms;
  r->m.rate = 4.0 * (double)n / (ms * 1e6);
  r->m.reps = reps;
}

/* ---- `ktune explain` -------------------------------------------------------- */

static int explain_problem(char *const *args, int nargs, kt_problem *p, char *err, size_t errlen)
{
  memset(p, 0, sizeof *p);
  p->family = KT_FAMILY_HIST;
  p->nsamples = atoll(DEFAULT_N);
  if (nargs < 1 || nargs > 2 || kt_cli_integer(args[0], 1, INT_MAX, &p->nbins) != 0 ||
      (nargs == 2 && kt_cli_integer(args[1], 0, 0xffffffffll, &p->nsamples) != 0)) {
    snprintf(err, errlen, "hist takes NBINS (1..%d) and optionally N (0..4294967295, default %s)", INT_MAX, DEFAULT_N);
    return -1;
  }
  return 0;
}

static int explain(kt_context *ctx, const kt_problem *p, kt_choice *out)
{
  /* Aligned stand-in pointers: the choice looks only at their alignment. */
  const void *x = (const void *)(uintptr_t)0x100000;
  return kt_histogram_choice(ctx, x, (uint64_t)p->nsamples, x, p->nbins, out);
}

const kt_tune_family kt_tune_hist = {
    .id = KT_FAMILY_HIST,
    .options = {{"--hist", "NBINS[:N],...", DEFAULT_BINS,
                 "the bin counts to tune, each with N samples (else --hist-n)"},
                {"--hist-n", "N", DEFAULT_N, "the samples of a --hist bin count that gives no N"},
                {"--dists", "LIST", DEFAULT_DISTS,
                 "the sample distributions (uniform, skewed, sorted, normal, onebin, halfout); rankings use "
                 "the geomean over them"}},
    .problems = problems,
    .report_header = report_header,
    .report_row = report_row,
    .setup = setup,
    .unfit = unfit,
    .measure = measure,
    .teardown = teardown,
    .explain_args = "NBINS [N]",
    .explain_problem = explain_problem,
    .explain = explain,
};
