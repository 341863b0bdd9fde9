/* SPDX-License-Identifier: MIT */
/* runtime/hist.c: the histogram family in the runtime: kt_histogram and
 * kt_histogram_choice, their argument checks, which variants can serve a
 * call (shared memory for the bins), the problem key and the selection
 * rule.
 *
 * Selection: the nearest tuned problem by the least |ln nbins - ln nbins_t|,
 * ties broken by |ln n - ln n_t| (the bin count decides where the bins can
 * live; n matters less), then by the larger nbins_t; within it, the fastest
 * ranked variant whose bins fit the device, else the defaults.  A problem
 * whose winner cannot hold the call's bins ranked variants for a regime the
 * call is not in (their shared memory overflows, or bands multiply), so when
 * some tuned problem's winner can, the nearest of those is taken instead.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"

/* ---- shared memory ------------------------------------------------------ */

long long kt_hist_smem(const kt_variant *v, const kt_device_info *d, long long nbins)
{
  long long s = (long long)v->smem_static + v->smem_dynamic;
  if (v->counter_bits == 0)
    return s;
  /* The partition: one bucket's bins; where it does not serve
   * (kt_hist_part_buckets), more than the device has. */
  if (v->banded == 2) {
    if (kt_hist_part_buckets(nbins, d->smem_optin) == 0)
      return s + d->smem_optin + 1;
    return s + kt_hist_part_width(d->smem_optin) * 4;
  }
  if (v->banded) { /* one band's bins; more bands than the kernel takes need more than the device has */
    const long long bands = kt_hist_bands(nbins, d->smem_optin, v->counter_bits);
    if (bands == 0)
      return s + d->smem_optin + 1;
    return s + kt_hist_smem_bytes((nbins + bands - 1) / bands, 1, 1, v->counter_bits);
  }
  return s + kt_hist_smem_bytes(nbins, v->cluster, v->copies, v->counter_bits);
}

int kt_hist_serves(const kt_variant *v, const kt_device_info *d, long long nbins)
{
  if (v->family != KT_FAMILY_HIST || !kt_variant_runs_on(v, d))
    return 0;
  return kt_hist_smem(v, d, nbins) <= d->smem_optin;
}

long long kt_hist_max_nbins(const kt_variant *v, const kt_device_info *d)
{
  if (v->family != KT_FAMILY_HIST || !kt_variant_runs_on(v, d))
    return 0;
  if (v->counter_bits == 0)
    return INT_MAX;
  if (v->banded == 2) /* serves from one bucket's bins up to this, not below */
    return kt_hist_part_width(d->smem_optin) * KT_HIST_PART_MAX_BUCKETS;
  /* The formula is monotonic in nbins: bisect for the last that fits. */
  long long lo = 0, hi = INT_MAX;
  while (lo < hi) {
    const long long mid = lo + (hi - lo + 1) / 2;
    if (kt_hist_smem(v, d, mid) <= d->smem_optin)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* ---- the family's entry ------------------------------------------------ */

static void hist_key(const kt_problem *p, char *buf, size_t len)
{
  snprintf(buf, len, "nbins=%lld n=%lld", p->nbins, p->nsamples);
}

/* "nbins=B n=N" (the key), "B:N", or "B" (n left 0: the caller's default). */
static int hist_parse(const char *s, kt_problem *out)
{
  long long b = 0, n = 0;
  int used = 0;
  if (!s)
    return KT_ERR_BAD_OPTION;
  if (!((sscanf(s, "nbins=%lld n=%lld%n", &b, &n, &used) == 2 && s[used] == '\0') ||
        (sscanf(s, "%lld:%lld%n", &b, &n, &used) == 2 && s[used] == '\0') ||
        (sscanf(s, "%lld%n", &b, &used) == 1 && s[used] == '\0' && (n = 0, 1))))
    return KT_ERR_BAD_OPTION;
  if (b <= 0 || b > INT_MAX || n < 0 || n > (long long)UINT32_MAX)
    return KT_ERR_BAD_OPTION;
  memset(out, 0, sizeof *out);
  out->family = KT_FAMILY_HIST;
  out->nbins = b;
  out->nsamples = n;
  return KT_OK;
}

static int hist_fits(const kt_variant *v, const kt_device_info *d, const kt_problem *p)
{
  return kt_hist_serves(v, d, p->nbins);
}

static double ln_pos(long long x)
{
  return log((double)(x > 0 ? x : 1));
}

static void hist_prepare(kt_tuned *t)
{
  t->log_shape[0] = ln_pos(t->problem.nbins);
  t->log_shape[1] = ln_pos(t->problem.nsamples);
  t->log_shape[2] = 0;
}

const kt_family_ops kt_hist_ops = {
    .id = KT_FAMILY_HIST,
    .name = "hist",
    .long_name = "histogram",
    .ndims = 2,
    .dims = {"nbins", "nsamples"},
    .key = hist_key,
    .parse = hist_parse,
    .fits = hist_fits,
    .prepare = hist_prepare,
};

/* ---- the selection rule ------------------------------------------------- */

/* The nearest of the n tuned problems t to (nbins, nsamples); with a device
 * d, among those whose winner serves nbins there when any does. */
static const kt_tuned *nearest(const kt_tuned *t, int n, long long nbins, long long nsamples, const kt_device_info *d)
{
  const kt_tuned *best = NULL;
  double bd = INFINITY, bn = INFINITY;
  const double lb = ln_pos(nbins), ls = ln_pos(nsamples);
  for (int i = 0; i < n; ++i) {
    if (t[i].problem.family != KT_FAMILY_HIST)
      continue;
    if (d && (t[i].count < 1 || !kt_hist_serves(t[i].ranked[0], d, nbins)))
      continue;
    const double dd = fabs(lb - t[i].log_shape[0]), dn = fabs(ls - t[i].log_shape[1]);
    if (dd < bd || (dd == bd && (dn < bn || (dn == bn && best && t[i].problem.nbins > best->problem.nbins)))) {
      bd = dd;
      bn = dn;
      best = &t[i];
    }
  }
  return best;
}

const kt_tuned *kt_hist_nearest(const kt_tuned *t, int n, long long nbins, long long nsamples)
{
  return nearest(t, n, nbins, nsamples, NULL);
}

const kt_tuned *kt_hist_nearest_serving(const kt_tuned *t, int n, long long nbins, long long nsamples,
                                        const kt_device_info *d)
{
  const kt_tuned *best = nearest(t, n, nbins, nsamples, d);
  return best ? best : nearest(t, n, nbins, nsamples, NULL);
}

static int serves_call(const kt_variant *v, const kt_device_info *d, const void *call)
{
  return kt_hist_serves(v, d, *(const long long *)call);
}

static const kt_variant *choose(const kt_context *c, long long nbins, unsigned long long n, kt_choice *out)
{
  int nt = 0;
  const kt_tuned *tuned = kt_context_tuned(c, KT_FAMILY_HIST, &nt);
  const kt_tuned *t = kt_hist_nearest_serving(tuned, nt, nbins, (long long)n, kt_context_device(c));
  kt_problem p;
  memset(&p, 0, sizeof p);
  p.family = KT_FAMILY_HIST;
  p.nbins = nbins, p.nsamples = (long long)n;
  /* A miss unless t is this very problem; zero samples only zero the
   * bins, so they are nothing to tune. */
  if (n > 0)
    kt_context_miss(c, t, &p);
  return kt_dispatch_choose(kt_context_device(c), KT_FAMILY_HIST, t, serves_call, &nbins, out);
}

/* ---- the API ------------------------------------------------------------ */

static int check(const int32_t *samples, uint64_t n, const uint32_t *bins, int64_t nbins)
{
  if (!bins || (!samples && n > 0))
    return KT_ERR_NULL_POINTER;
  if (nbins <= 0)
    return KT_ERR_BAD_SIZE;
  /* Counts are uint32: more samples could wrap a bin. */
  if (nbins > INT_MAX || n > UINT32_MAX)
    return KT_ERR_OVERFLOW;
  if (((uintptr_t)samples | (uintptr_t)bins) & 3u)
    return KT_ERR_MISALIGNED;
  return KT_OK;
}

int kt_histogram_choice(kt_context *c, const int32_t *samples, uint64_t n, const uint32_t *bins, int64_t nbins,
                        kt_choice *out)
{
  int rc = kt_context_check(c);
  if (out)
    memset(out, 0, sizeof *out); /* empty strings where the call is refused */
  else if (rc == KT_OK)
    rc = KT_ERR_NULL_POINTER;
  if (rc == KT_OK)
    rc = check(samples, n, bins, nbins);
  if (rc != KT_OK)
    return rc;
  return choose(c, nbins, n, out) ? KT_OK : KT_ERR_NO_VARIANT;
}

int kt_histogram(kt_context *c, const int32_t *samples, uint64_t n, uint32_t *bins, int64_t nbins, kt_stream stream)
{
  int rc = kt_context_check(c);
  if (rc == KT_OK)
    rc = check(samples, n, bins, nbins);
  if (rc != KT_OK)
    return rc;
  if ((n > 0 && !kt_context_device_pointer(c, samples)) || !kt_context_device_pointer(c, bins))
    return KT_ERR_NOT_DEVICE_POINTER;
  const kt_variant *v = choose(c, nbins, n, NULL);
  if (!v)
    return KT_ERR_NO_VARIANT;
  const kt_device_info *d = kt_context_device(c);
  kt_hist_args a = {(const int *)samples, n, bins, (int)nbins, d->sm_count, d->smem_per_sm, d->smem_optin,
                    kt_context_pool(c)};
  return kt_context_launch(c, v, &a, stream);
}
