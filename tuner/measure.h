/* SPDX-License-Identifier: MIT */
/* tuner/measure.h: what checking and timing a variant need whatever its
 * family, shared by the tuner's worker, the GPU tests and the benchmarks
 * (kt_measure_ prefix; the kt_rng_ generator is inline here).  Each
 * family's inputs, reference and correctness criterion are in its own
 * header: matmul.h, hist.h.
 *
 * Inputs are fresh pseudo-random numbers from a caller-given seed; never
 * all zero.
 */
#ifndef KT_MEASURE_H
#define KT_MEASURE_H

#include <stddef.h>
#include <stdint.h>

#include "kt_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kt_rng {
  uint64_t s;
} kt_rng;

/* splitmix64 */
static inline uint64_t kt_rng_next(kt_rng *r)
{
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static inline float kt_rng_float(kt_rng *r)
{
  return (float)(kt_rng_next(r) >> 40) * 0x1p-23f - 1.0f;
}

/* The outcome of running a variant once and checking its output. */
typedef struct kt_check {
  int ok;            /* 1 when correct */
  int launch_failed; /* 1 when the launch or the kernel failed (CUDA error) */
  double worst;      /* the family's measure of the worst error (0 = exact) */
  char reason[256];  /* why not ok */
} kt_check;

/* When e is a CUDA error: out is a launch failure "where: message", the
 * error is cleared, and 1 is returned; else 0. */
int kt_measure_cuda_failed(kt_check *out, cudaError_t e, const char *where);

/* Time launches of v with args: warm-up, then repetitions each preceded by
 * an (untimed) write of flush_bytes to flush (to evict L2), timed with CUDA
 * events; stops after max_reps or once the total passes budget_ms (at least
 * min_reps).  Returns the CUDA error (0 on success); *reps and in
 * *median_ms the runs' kt_measure_typical (their median, or the faster
 * parity's where there are 10 or more). */
int kt_measure_time(const kt_variant *v, const void *args, void *flush, size_t flush_bytes, int min_reps, int max_reps,
                    double budget_ms, double *median_ms, int *reps);

/* Same for any callable (baselines in benchmarks). */
typedef int (*kt_measure_fn)(void *ctx);
int kt_measure_time_fn(kt_measure_fn fn, void *ctx, void *flush, size_t flush_bytes, int min_reps, int max_reps,
                       double budget_ms, double *median_ms, int *reps);

/* The tuner's timing of a candidate: a warm-up, then the typical time
 * (kt_measure_typical) of at least 5 runs, up to 50 within 60 ms.  Where
 * the first run is over 3x best_ms (the fastest so far on this problem;
 * INFINITY for none: the variant cannot win) or takes 10 ms or more (a
 * long run varies little), the median of 3.  Returns the CUDA error, 0 on success. */
int kt_measure_candidate(const kt_variant *v, const void *args, void *flush, size_t flush_bytes, double best_ms,
                         double *median_ms, int *reps);

/* Bytes to write between timed runs to evict the L2 of dev: twice its size. */
size_t kt_measure_flush_bytes(const kt_device_info *dev);

double kt_measure_median(double *x, int n); /* sorts x */

/* A timing's time from its runs' times t[0..n) in the order run: the
 * median, or where there are 10 runs or more, the lower of the even runs'
 * median and the odd runs' (a Hopper kernel's runs may alternate slow and
 * fast: measure.c).  scratch holds n doubles; t is left as it is. */
double kt_measure_typical(const double *t, int n, double *scratch);

/* CPU work of the checks and inputs, split over threads: */
#define KT_MEASURE_MAX_THREADS 16
/* the host's online CPUs, 1..KT_MEASURE_MAX_THREADS; */
int kt_measure_cpus(void);
/* body(jobs + i * job_size) for i < t (at most KT_MEASURE_MAX_THREADS), on
 * up to t - 1 threads kept from call to call and on this one, which runs
 * what no thread takes (it never fails, whatever threads can start).
 * Callers on several threads at once are served, the kept threads taking
 * one batch at a time (the others get threads of their own). */
void kt_measure_run_all(void *(*body)(void *), void *jobs, size_t job_size, int t);
/* fn(lo, hi, c, ctx) for each chunk c = [lo, hi) of [0, n) (chunk
 * elements each, the last shorter), the chunks spread over up to
 * kt_measure_cpus() threads. */
void kt_measure_chunks(size_t n, size_t chunk, void (*fn)(size_t lo, size_t hi, size_t c, void *ctx), void *ctx);
/* x[i] = value(r) for i < n, each chunk of 2^20 elements drawn from a
 * stream of its own seeded from seed and its index, on threads: the same
 * numbers whatever the threads.  For a tuned problem's inputs (2^27 of
 * them at 8192^3 took half a second on one core). */
void kt_measure_fill(float *x, size_t n, uint64_t seed, float (*value)(kt_rng *r));

#ifdef __cplusplus
}
#endif

#endif
