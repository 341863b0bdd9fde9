/* SPDX-License-Identifier: MIT */
/* tuner/hist.h: the tuner's histogram family (hist.c, kt_tune_hist_), as
 * the tuner's worker, the GPU tests and the benchmarks use it.
 *
 * Correctness criterion: every count exact, against a CPU count with the
 * library's clamping, on inputs with samples outside [0, nbins).
 */
#ifndef KT_TUNE_HIST_H
#define KT_TUNE_HIST_H

#include "measure.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The distributions kt_tune_hist_samples knows, NULL-terminated, and
 * whether dist is one of them. */
extern const char *const kt_tune_hist_dists[];
int kt_tune_hist_dist_known(const char *dist);

/* Samples for a histogram of nbins, by dist:
 *   uniform  over the bins
 *   skewed   80% in 1% of the bins
 *   sorted   uniform, then sorted (kt_tune_hist_sort): long runs of one bin
 *   normal   around nbins / 2 with deviation nbins / 50
 *   onebin   every sample in bin nbins / 3
 *   halfout  half the samples outside [0, nbins), half uniform
 * Except onebin, about 3 in 1024 samples lie outside [0, nbins), below or
 * above (one of the three at INT_MIN or INT_MAX), to exercise clamping;
 * sorted keeps them as the ends of the range. */
void kt_tune_hist_samples(int *out, size_t n, long long nbins, const char *dist, kt_rng *r);
/* Sort s[0..n) by bin (clamped; below the range as -1, above as nbins), in
 * O(n + nbins).  0, or -1 out of host memory (s untouched). */
int kt_tune_hist_sort(int *s, size_t n, long long nbins);
/* Exact CPU histogram with the library's clamping. */
void kt_tune_hist_reference(const int *samples, size_t n, long long nbins, unsigned *bins);

/* Does v split the bins over a thread-block cluster in the Programming
 * Guide's layout, contiguous ranges per block (layout=blocked)?  The tune
 * summary's baseline column; found by that property rather than by name. */
int kt_tune_hist_guide_layout(const kt_variant *v);

/* Run v once on n fresh samples starting `offset` ints past a 256-byte
 * aligned allocation (offset 1..3 makes the pointer misaligned for int4),
 * and compare every count with the CPU's (kt_check.worst: wrong bins). */
void kt_tune_hist_check(const kt_variant *v, const kt_device_info *dev, long long nbins, size_t n, int offset,
                        const char *dist, uint64_t seed, kt_check *out);

/* The same with buffers kept from one check to the next (a tune checks
 * every variant of a problem three times; at 16M bins, allocating, first
 * touching and copying back pageable buffers of the bins took most of a
 * variant's time).  Zero it before the first use; each check grows what
 * it lacks; kt_tune_hist_buffers_free releases it all. */
typedef struct kt_tune_hist_buffers {
  size_t n;        /* samples s and ds hold (each n + 4 ints) */
  long long nbins; /* bins ref, got and dbins hold */
  int *s, *ds;     /* host and device samples */
  unsigned *ref;   /* the CPU's counts */
  unsigned *got;   /* the variant's, copied back (pinned) */
  unsigned *dbins; /* the variant's, on the device */
} kt_tune_hist_buffers;
void kt_tune_hist_check_with(kt_tune_hist_buffers *b, const kt_variant *v, const kt_device_info *dev, long long nbins,
                             size_t n, int offset, const char *dist, uint64_t seed, kt_check *out);
void kt_tune_hist_buffers_free(kt_tune_hist_buffers *b);

#ifdef __cplusplus
}
#endif

#endif
