/* SPDX-License-Identifier: MIT */
/* tuner/measure.c: checking and timing helpers for any family (see measure.h). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "measure.h"

int kt_measure_cuda_failed(kt_check *out, cudaError_t e, const char *where)
{
  if (e == cudaSuccess)
    return 0;
  out->ok = 0;
  out->launch_failed = 1;
  snprintf(out->reason, sizeof out->reason, "%s: %s", where, cudaGetErrorString(e));
  cudaGetLastError();
  return 1;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double kt_measure_median(double *x, int n)
{
  if (n <= 0)
    return NAN;
  qsort(x, (size_t)n, sizeof *x, cmp_double);
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Consecutive runs of a Hopper kernel (a TMA kernel of ours or cuBLAS's)
 * in one timing can come out alternately slow and fast: on an H100, BF16
 * 64x64 split K at 512^3 ran 7.7, 7.0, 7.7, 7.0, ... us in one timing and
 * 7.0 throughout the next, the same launches in the same order.  Which
 * timings alternate follows the launches before them (one extra launch of
 * an empty kernel between two timings swaps which do; an extra memset
 * does not; two warm-up launches instead of one do not end it), not the
 * kernel's work; the FP32 kernels, which use no TMA, did not alternate.
 * The median of all runs then lands on the slow value in one timing and on
 * the fast one in the next, up to 0.7 us (10%) apart at a few microseconds,
 * so the tuner's ranking of two such variants, or the bench's ratio to
 * cuBLAS, would follow the launch count.  The even runs' median and the
 * odd runs' are each the fast or the slow value: the lower is the time
 * every timing reaches (bench/reference/gemm_tiles/README.md, session 57).
 * Where runs do not alternate it is the median of one half or the other,
 * each as good an estimate as the whole's, the lower about a fifth of the
 * runs' standard deviation below it.  Under PARITY_MIN_RUNS runs (long
 * kernels, where 0.7 us does not matter) the halves are too small to
 * trust: the median of all. */
#define PARITY_MIN_RUNS 10

double kt_measure_typical(const double *t, int n, double *scratch)
{
  if (n < PARITY_MIN_RUNS) {
    memcpy(scratch, t, sizeof *t * (size_t)(n > 0 ? n : 0));
    return kt_measure_median(scratch, n);
  }
  int half[2] = {0, 0};
  for (int i = 0; i < n; ++i)
    scratch[(i & 1) * ((n + 1) / 2) + half[i & 1]++] = t[i];
  const double even = kt_measure_median(scratch, half[0]);
  const double odd = kt_measure_median(scratch + (n + 1) / 2, half[1]);
  return even < odd ? even : odd;
}

/* The tuner's repetitions for a candidate (kt_measure_candidate): at least
 * CANDIDATE_REPS, up to CANDIDATE_MAX_REPS within CANDIDATE_BUDGET_MS.  Its
 * first timed run decides what more it needs: one over 3x the best so far
 * cannot win, and at LONG_RUN_MS or more five runs cost more than they
 * tell, so either stops at FEW_REPS (the median of three still sets one
 * slow run aside).  On an H100, 8192^3 timed with three runs a variant
 * ranked the same winner and runner-up as with five, on another host, the
 * times within 0.8%; tuning it took 16 s instead of 28. */
#define CANDIDATE_REPS 5
#define CANDIDATE_MAX_REPS 50
#define CANDIDATE_BUDGET_MS 60.0
#define LONG_RUN_MS 10.0
#define FEW_REPS 3

/* A warm-up, then timed runs of fn, each after an untimed write of
 * flush_bytes to flush; until max_reps, or min_reps and budget_ms spent.
 * best_ms >= 0: a candidate's timing, min_reps and budget_ms revised after
 * the first run (above); best_ms < 0: as given. */
static int time_runs(kt_measure_fn fn, void *ctx, void *flush, size_t flush_bytes, int min_reps, int max_reps,
                     double budget_ms, double best_ms, double *median_ms, int *reps)
{
  cudaEvent_t start, stop;
  cudaError_t e;
  /* each run's time, then room for kt_measure_typical's work */
  double *t = malloc(sizeof(double) * 2 * (size_t)(max_reps > 0 ? max_reps : 1));
  if (!t)
    return (int)cudaErrorMemoryAllocation;
  if ((e = cudaEventCreate(&start)) != cudaSuccess || (e = cudaEventCreate(&stop)) != cudaSuccess) {
    free(t);
    return (int)e;
  }
  /* Warm-up: module load and first-touch costs stay out of the numbers. */
  if ((e = (cudaError_t)fn(ctx)) != cudaSuccess || (e = cudaDeviceSynchronize()) != cudaSuccess)
    goto out;
  double total = 0;
  int n = 0;
  while (n < max_reps && (n < min_reps || total < budget_ms)) {
    if (flush && flush_bytes)
      cudaMemsetAsync(flush, n & 0xff, flush_bytes, 0);
    cudaEventRecord(start, 0);
    if ((e = (cudaError_t)fn(ctx)) != cudaSuccess)
      goto out;
    cudaEventRecord(stop, 0);
    if ((e = cudaEventSynchronize(stop)) != cudaSuccess)
      goto out;
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    t[n++] = ms;
    total += ms;
    if (n == 1 && best_ms >= 0 && ((best_ms < INFINITY && ms > 3 * best_ms) || ms >= LONG_RUN_MS)) {
      min_reps = FEW_REPS < max_reps ? FEW_REPS : max_reps;
      budget_ms = 0;
    }
  }
  *reps = n;
  *median_ms = kt_measure_typical(t, n, t + n);
  e = cudaGetLastError();
out:
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  free(t);
  return (int)e;
}

int kt_measure_time_fn(kt_measure_fn fn, void *ctx, void *flush, size_t flush_bytes, int min_reps, int max_reps,
                       double budget_ms, double *median_ms, int *reps)
{
  return time_runs(fn, ctx, flush, flush_bytes, min_reps, max_reps, budget_ms, -1.0, median_ms, reps);
}

typedef struct variant_call {
  const kt_variant *v;
  const void *args;
} variant_call;

static int call_variant(void *p)
{
  const variant_call *c = p;
  return c->v->launch(c->args, 0);
}

int kt_measure_time(const kt_variant *v, const void *args, void *flush, size_t flush_bytes, int min_reps, int max_reps,
                    double budget_ms, double *median_ms, int *reps)
{
  variant_call c = {v, args};
  return kt_measure_time_fn(call_variant, &c, flush, flush_bytes, min_reps, max_reps, budget_ms, median_ms, reps);
}

int kt_measure_candidate(const kt_variant *v, const void *args, void *flush, size_t flush_bytes, double best_ms,
                         double *median_ms, int *reps)
{
  variant_call c = {v, args};
  return time_runs(call_variant, &c, flush, flush_bytes, CANDIDATE_REPS, CANDIDATE_MAX_REPS, CANDIDATE_BUDGET_MS,
                   best_ms >= 0 ? best_ms : INFINITY, median_ms, reps);
}

size_t kt_measure_flush_bytes(const kt_device_info *dev)
{
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev->ordinal);
  return (size_t)(l2 > 0 ? l2 : 64 << 20) * 2;
}

int kt_measure_cpus(void)
{
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1 : cpus > KT_MEASURE_MAX_THREADS ? KT_MEASURE_MAX_THREADS : (int)cpus;
}

/* The threads of kt_measure_run_all, started on first use and kept:
 * starting fifteen threads for each check's reference took about as long
 * as the reference on them.  A batch is jobs [0, t); the caller runs job 0
 * and any no thread has taken; next is the next job to take, running
 * those taken by the threads and not yet done.  One batch at a time (user
 * held by its caller); a caller that finds the pool busy (another thread's
 * batch: the histogram bench makes its samples on threads of its own)
 * starts threads of its own, as before.  A forked child has none of the
 * parent's threads: reset, it starts its own. */
static struct {
  pthread_mutex_t user, lock;
  pthread_cond_t go, done;
  int threads;
  void *(*body)(void *);
  char *jobs;
  size_t job_size;
  int t, next, running;
} pool;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void pool_reset(void)
{
  pthread_mutex_init(&pool.user, NULL);
  pthread_mutex_init(&pool.lock, NULL);
  pthread_cond_init(&pool.go, NULL);
  pthread_cond_init(&pool.done, NULL);
  pool.threads = 0, pool.t = 0, pool.next = 0, pool.running = 0;
}

static void pool_init(void)
{
  pool_reset();
  pthread_atfork(NULL, NULL, pool_reset);
}

static void *pool_thread(void *unused)
{
  (void)unused;
  pthread_mutex_lock(&pool.lock);
  for (;;) {
    while (pool.next >= pool.t)
      pthread_cond_wait(&pool.go, &pool.lock);
    void *job = pool.jobs + (size_t)pool.next++ * pool.job_size;
    ++pool.running;
    pthread_mutex_unlock(&pool.lock);
    pool.body(job);
    pthread_mutex_lock(&pool.lock);
    if (--pool.running == 0 && pool.next >= pool.t)
      pthread_cond_signal(&pool.done);
  }
  return NULL;
}

/* The batch on threads started for it alone; a thread that cannot start
 * runs its job here. */
static void run_unpooled(void *(*body)(void *), void *jobs, size_t job_size, int t)
{
  pthread_t th[KT_MEASURE_MAX_THREADS];
  int started[KT_MEASURE_MAX_THREADS] = {0};
  for (int i = 1; i < t; ++i)
    started[i] = pthread_create(&th[i], NULL, body, (char *)jobs + i * job_size) == 0;
  body(jobs);
  for (int i = 1; i < t; ++i)
    if (started[i])
      pthread_join(th[i], NULL);
    else
      body((char *)jobs + i * job_size);
}

void kt_measure_run_all(void *(*body)(void *), void *jobs, size_t job_size, int t)
{
  if (t > KT_MEASURE_MAX_THREADS)
    t = KT_MEASURE_MAX_THREADS;
  if (t <= 1) {
    body(jobs);
    return;
  }
  pthread_once(&pool_once, pool_init);
  if (pthread_mutex_trylock(&pool.user) != 0) {
    run_unpooled(body, jobs, job_size, t);
    return;
  }
  pthread_mutex_lock(&pool.lock);
  while (pool.threads < t - 1) {
    pthread_t th;
    if (pthread_create(&th, NULL, pool_thread, NULL) != 0)
      break; /* fewer threads: this one takes what they cannot */
    pthread_detach(th);
    ++pool.threads;
  }
  pool.body = body, pool.jobs = jobs, pool.job_size = job_size;
  pool.t = t, pool.next = 1, pool.running = 0;
  pthread_cond_broadcast(&pool.go);
  pthread_mutex_unlock(&pool.lock);
  body(jobs);
  pthread_mutex_lock(&pool.lock);
  while (pool.next < pool.t) {
    void *job = pool.jobs + (size_t)pool.next++ * pool.job_size;
    pthread_mutex_unlock(&pool.lock);
    body(job);
    pthread_mutex_lock(&pool.lock);
  }
  while (pool.running > 0)
    pthread_cond_wait(&pool.done, &pool.lock);
  pool.t = 0, pool.next = 0;
  pthread_mutex_unlock(&pool.lock);
  pthread_mutex_unlock(&pool.user);
}

typedef struct chunk_job {
  void (*fn)(size_t lo, size_t hi, size_t c, void *ctx);
  void *ctx;
  size_t n, chunk, chunks;
  int first, stride;
} chunk_job;

static void *chunk_body(void *p)
{
  const chunk_job *j = p;
  for (size_t c = (size_t)j->first; c < j->chunks; c += (size_t)j->stride)
    j->fn(c * j->chunk, c * j->chunk + j->chunk < j->n ? c * j->chunk + j->chunk : j->n, c, j->ctx);
  return NULL;
}

void kt_measure_chunks(size_t n, size_t chunk, void (*fn)(size_t lo, size_t hi, size_t c, void *ctx), void *ctx)
{
  if (chunk < 1)
    chunk = 1;
  const size_t chunks = (n + chunk - 1) / chunk;
  int t = kt_measure_cpus();
  if ((size_t)t > chunks)
    t = (int)chunks;
  if (t < 1)
    t = 1;
  chunk_job jobs[KT_MEASURE_MAX_THREADS];
  for (int i = 0; i < t; ++i)
    jobs[i] = (chunk_job){fn, ctx, n, chunk, chunks, i, t};
  kt_measure_run_all(chunk_body, jobs, sizeof jobs[0], t);
}

/* Elements a chunk of kt_measure_fill draws from a stream of its own. */
#define FILL_CHUNK ((size_t)1 << 20)

typedef struct fill_ctx {
  float *x;
  uint64_t seed;
  float (*value)(kt_rng *r);
} fill_ctx;

static void fill_chunk(size_t lo, size_t hi, size_t c, void *p)
{
  const fill_ctx *f = p;
  kt_rng s = {f->seed + c}, r = {kt_rng_next(&s)};
  for (size_t i = lo; i < hi; ++i)
    f->x[i] = f->value(&r);
}

void kt_measure_fill(float *x, size_t n, uint64_t seed, float (*value)(kt_rng *r))
{
  fill_ctx f = {x, seed, value};
  kt_measure_chunks(n, FILL_CHUNK, fill_chunk, &f);
}
