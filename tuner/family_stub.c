/* tuner/family_stub.c: TEMPORARY, replaced by runtime/family.c (issue 10).
 *
 * A minimal kt_families table with the interface that runtime/kt_internal.h
 * declares, so that the tuner compiles and its tests run before the
 * runtime's family modules land.  Drop this file (its one commit) at the
 * merge; nothing else in tuner/ depends on anything here beyond the
 * declared interface.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"

static void stub_matmul_key(const kt_problem *p, char *buf, size_t len)
{
  snprintf(buf, len, "%lldx%lldx%lld", p->m, p->n, p->k);
}

static int stub_matmul_parse(const char *s, kt_problem *out)
{
  memset(out, 0, sizeof *out);
  out->family = KT_FAMILY_MATMUL;
  int used = 0;
  if (sscanf(s, "%lldx%lldx%lld%n", &out->m, &out->n, &out->k, &used) != 3 || s[used])
    return -1;
  return out->m > 0 && out->n > 0 && out->k > 0 ? 0 : -1;
}

static int stub_matmul_fits(const kt_variant *v, const kt_device_info *d, const kt_problem *p)
{
  return v->family == p->family && kt_variant_runs_on(v, d);
}

static void stub_hist_key(const kt_problem *p, char *buf, size_t len)
{
  snprintf(buf, len, "nbins=%lld n=%lld", p->nbins, p->nsamples);
}

static int stub_hist_parse(const char *s, kt_problem *out)
{
  memset(out, 0, sizeof *out);
  out->family = KT_FAMILY_HIST;
  int used = 0;
  if (sscanf(s, "nbins=%lld n=%lld%n", &out->nbins, &out->nsamples, &used) == 2 && !s[used])
    return out->nbins > 0 && out->nsamples >= 0 ? 0 : -1;
  used = 0;
  if (sscanf(s, "%lld:%lld%n", &out->nbins, &out->nsamples, &used) == 2 && !s[used])
    return out->nbins > 0 && out->nsamples >= 0 ? 0 : -1;
  used = 0;
  out->nsamples = 0;
  if (sscanf(s, "%lld%n", &out->nbins, &used) == 1 && !s[used])
    return out->nbins > 0 ? 0 : -1;
  return -1;
}

static int stub_hist_fits(const kt_variant *v, const kt_device_info *d, const kt_problem *p)
{
  return v->family == p->family && kt_variant_serves_hist(v, d, p->nbins);
}

static const kt_family_ops stub_matmul = {KT_FAMILY_MATMUL, "matmul",          "matmul",         3,   {"m", "n", "k"},
                                          stub_matmul_key,  stub_matmul_parse, stub_matmul_fits, NULL};
static const kt_family_ops stub_hist = {KT_FAMILY_HIST, "hist",          "histogram",    2,   {"nbins", "nsamples"},
                                        stub_hist_key,  stub_hist_parse, stub_hist_fits, NULL};

const kt_family_ops *const kt_families[] = {&stub_matmul, &stub_hist};
const int kt_family_count = 2;

const kt_family_ops *kt_family_get(kt_family f)
{
  return (int)f >= 0 && (int)f < kt_family_count ? kt_families[f] : NULL;
}

const kt_family_ops *kt_family_find(const char *name)
{
  for (int i = 0; name && i < kt_family_count; ++i)
    if (!strcmp(name, kt_families[i]->name) || !strcmp(name, kt_families[i]->long_name))
      return kt_families[i];
  return NULL;
}
