/* runtime/dispatch.c: which variant serves a call.
 *
 * "Nearest" tuned problem:
 *   matmul: least (ln M - ln Mt)^2 + (ln N - ln Nt)^2 + (ln K - ln Kt)^2;
 *           shapes are compared by ratios, so 1000^3 is nearest 1024^3 and a
 *           tall-skinny call is nearest the tall-skinny problem.
 *   hist:   least |ln nbins - ln nbins_t|, ties broken by |ln n - ln n_t|;
 *           the bin count decides where the bins can live, n matters less.
 * Within the nearest problem, the fastest ranked variant that can serve the
 * call wins (a float4 winner cannot serve a misaligned call; a shared-memory
 * winner cannot serve more bins than fit).  If none can, the call falls back
 * to the defaults.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kt_internal.h"
#include "registry.h"

const char *kt_family_name(kt_family f)
{
  return f == KT_FAMILY_MATMUL ? "matmul" : "hist";
}

const kt_variant *kt_registry_find(const char *name)
{
  if (!name)
    return NULL;
  for (int i = 0; i < kt_registry_count; ++i)
    if (strcmp(kt_registry[i].name, name) == 0)
      return &kt_registry[i];
  return NULL;
}

void kt_problem_key(const kt_problem *p, int with_dist, char *buf, size_t len)
{
  int n;
  if (p->family == KT_FAMILY_MATMUL)
    n = snprintf(buf, len, "%lldx%lldx%lld", p->m, p->n, p->k);
  else
    n = snprintf(buf, len, "nbins=%lld n=%lld", p->nbins, p->nsamples);
  if (with_dist && p->dist[0] && n > 0 && (size_t)n < len)
    snprintf(buf + n, len - (size_t)n, " dist=%s", p->dist);
}

long long kt_variant_smem(const kt_variant *v, long long nbins)
{
  long long s = (long long)v->smem_static + v->smem_dynamic;
  if (v->counter_bits > 0 && !v->banded)
    s += kt_hist_smem_bytes(nbins, v->cluster, v->copies, v->counter_bits);
  return s;
}

int kt_variant_runs_on(const kt_variant *v, const kt_device_info *d)
{
  if (v->min_cc > d->cc || v->threads > 1024)
    return 0;
  if (v->cluster > 1 && !d->cluster_launch)
    return 0;
  if (v->cluster > 16)
    return 0;
  return kt_variant_smem(v, 1) <= d->smem_optin;
}

static int aligned(const void *p, int floats)
{
  return ((uintptr_t)p % ((uintptr_t)floats * 4u)) == 0;
}

int kt_variant_serves_matmul(const kt_variant *v, const kt_device_info *d, const void *A, long long lda, const void *B,
                             long long ldb, const void *C, long long ldc)
{
  if (v->family != KT_FAMILY_MATMUL || !kt_variant_runs_on(v, d))
    return 0;
  int a = v->align;
  if (a > 1 && (lda % a || ldb % a || ldc % a || !aligned(A, a) || !aligned(B, a) || !aligned(C, a)))
    return 0;
  return 1;
}

int kt_variant_serves_hist(const kt_variant *v, const kt_device_info *d, long long nbins)
{
  if (v->family != KT_FAMILY_HIST || !kt_variant_runs_on(v, d))
    return 0;
  return kt_variant_smem(v, nbins) <= d->smem_optin;
}

static double sq(double x)
{
  return x * x;
}

static double ln_pos(long long x)
{
  return log((double)(x > 0 ? x : 1));
}

void kt_dispatch_prepare(kt_tuned *t)
{
  const kt_problem *p = &t->problem;
  if (p->family == KT_FAMILY_MATMUL) {
    t->log_shape[0] = ln_pos(p->m);
    t->log_shape[1] = ln_pos(p->n);
    t->log_shape[2] = ln_pos(p->k);
  } else {
    t->log_shape[0] = ln_pos(p->nbins);
    t->log_shape[1] = ln_pos(p->nsamples);
    t->log_shape[2] = 0;
  }
}

/* The searches below run on every call: a handful of tuned problems, three
 * logarithms for the call itself, the rest precomputed at load. */
const kt_tuned *kt_dispatch_nearest_matmul(const kt_tuned *t, int n, long long M, long long N, long long K)
{
  const kt_tuned *best = NULL;
  double bd = INFINITY;
  const double lm = ln_pos(M), ln = ln_pos(N), lk = ln_pos(K);
  for (int i = 0; i < n; ++i) {
    if (t[i].problem.family != KT_FAMILY_MATMUL)
      continue;
    const double d = sq(lm - t[i].log_shape[0]) + sq(ln - t[i].log_shape[1]) + sq(lk - t[i].log_shape[2]);
    if (d < bd) {
      bd = d;
      best = &t[i];
    }
  }
  return best;
}

const kt_tuned *kt_dispatch_nearest_hist(const kt_tuned *t, int n, long long nbins, long long nsamples)
{
  const kt_tuned *best = NULL;
  double bd = INFINITY, bn = INFINITY;
  const double lb = ln_pos(nbins), ls = ln_pos(nsamples);
  for (int i = 0; i < n; ++i) {
    if (t[i].problem.family != KT_FAMILY_HIST)
      continue;
    const double d = fabs(lb - t[i].log_shape[0]), dn = fabs(ls - t[i].log_shape[1]);
    if (d < bd || (d == bd && dn < bn)) {
      bd = d;
      bn = dn;
      best = &t[i];
    }
  }
  return best;
}
