/* SPDX-License-Identifier: MIT */
/* tuner/result.c: one variant's outcome on one problem (kt_tune_result), as
 * a worker reports it, the runner collects it and the database records it. */
#include <stdio.h>
#include <string.h>

#include "tuner.h"

void kt_tune_result_set(kt_tune_result *r, const kt_problem *p, const kt_variant *v, const char *status,
                        const char *reason)
{
  memset(r, 0, sizeof *r);
  r->m.problem = *p;
  snprintf(r->variant, sizeof r->variant, "%s", v->name);
  snprintf(r->hash, sizeof r->hash, "%s", v->source_hash);
  snprintf(r->status, sizeof r->status, "%s", status);
  snprintf(r->reason, sizeof r->reason, "%s", reason);
}

void kt_tune_result_link(kt_tune_result *r)
{
  r->m.variant = r->variant;
  r->m.source_hash = r->hash;
  r->m.status = r->status;
  r->m.reason = r->reason;
}

const kt_tune_result *kt_tune_result_ok(const kt_tune_result *rs, int n, const char *variant)
{
  for (int i = 0; i < n; ++i)
    if (strcmp(rs[i].variant, variant) == 0 && strcmp(rs[i].status, "ok") == 0)
      return &rs[i];
  return NULL;
}
