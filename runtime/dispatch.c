/* SPDX-License-Identifier: MIT */
/* runtime/dispatch.c: which variant serves a call, for any family.
 *
 * A family's module (matmul.c, hist.c) picks the tuned problem nearest the
 * call by its own rule and says which variants can serve the call;
 * kt_dispatch_choose then takes the fastest ranked variant of that problem
 * that can, and if none can (or nothing was tuned), the default of the
 * family with the best default_rank that can.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"
#include "registry.h"

const kt_variant *kt_registry_find(const char *name, const kt_device_info *d)
{
  if (!name)
    return NULL;
  const int target = d ? kt_device_target(d) : 0;
  for (int i = 0; i < kt_registry_count; ++i)
    if ((!d || kt_registry[i].target == target) && strcmp(kt_registry[i].name, name) == 0)
      return &kt_registry[i];
  return NULL;
}

const kt_variant *kt_registry_find_source(const char *name, const char *source_hash)
{
  if (!name || !source_hash)
    return NULL;
  for (int i = 0; i < kt_registry_count; ++i)
    if (strcmp(kt_registry[i].name, name) == 0 && strcmp(kt_registry[i].source_hash, source_hash) == 0)
      return &kt_registry[i];
  return NULL;
}

const char *kt_variant_param(const kt_variant *v, const char *key)
{
  for (int i = 0; i < v->nparams; ++i)
    if (strcmp(v->params[i].key, key) == 0)
      return v->params[i].value;
  return NULL;
}

int kt_variant_param_int(const kt_variant *v, const char *key, int dflt)
{
  const char *x = kt_variant_param(v, key);
  return x ? atoi(x) : dflt;
}

/* A fat build holds, for one variant, an entry per target: a GPU takes
 * those of its own target only, so that it never runs a variant that was
 * built for a newer target alone (the sm_90 cluster kernels on an sm_80
 * GPU), nor the older target's code and facts where its own are built. */
int kt_variant_runs_on(const kt_variant *v, const kt_device_info *d)
{
  if (v->target != kt_device_target(d))
    return 0;
  if (v->min_cc > d->cc || v->threads > 1024)
    return 0;
  if (v->cluster > 1 && !d->cluster_launch)
    return 0;
  if (v->cluster > 16)
    return 0;
  return (long long)v->smem_static + v->smem_dynamic <= d->smem_optin;
}

void kt_dispatch_prepare(kt_tuned *t)
{
  const kt_family_ops *ops = kt_family_get(t->problem.family);
  if (ops)
    ops->prepare(t);
}

void kt_dispatch_fill_choice(kt_choice *out, const kt_variant *v, const kt_tuned *t, const char *why)
{
  memset(out, 0, sizeof *out);
  snprintf(out->variant, sizeof out->variant, "%s", v->name);
  out->tuned = t != NULL;
  if (t) {
    snprintf(out->matched, sizeof out->matched, "%s", t->key);
    snprintf(out->source, sizeof out->source, "%s", t->source ? t->source : "");
  }
  snprintf(out->reason, sizeof out->reason, "%s", why);
}

static const kt_variant *default_variant(const kt_device_info *d, kt_family f, kt_serves_fn serves, const void *call)
{
  const kt_variant *best = NULL;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != f || v->default_rank == 0 || !serves(v, d, call))
      continue;
    if (!best || v->default_rank < best->default_rank)
      best = v;
  }
  return best;
}

const kt_variant *kt_dispatch_choose(const kt_device_info *d, kt_family f, const kt_tuned *t, kt_serves_fn serves,
                                     const void *call, kt_choice *out)
{
  char why[256];
  if (t) {
    for (int i = 0; i < t->count; ++i)
      if (serves(t->ranked[i], d, call)) {
        if (out) {
          snprintf(why, sizeof why, "tuned: rank %d at the nearest tuned problem %s%s", i + 1, t->key,
                   i ? " (faster ones cannot serve this call)" : "");
          kt_dispatch_fill_choice(out, t->ranked[i], t, why);
        }
        return t->ranked[i];
      }
  }
  const kt_variant *v = default_variant(d, f, serves, call);
  if (v && out) {
    snprintf(why, sizeof why, "default: %s",
             t ? "no tuned variant of the nearest problem can serve this call"
               : "no tuned problem for this device in the database");
    kt_dispatch_fill_choice(out, v, NULL, why);
  }
  return v;
}
