/* SPDX-License-Identifier: MIT */
/* runtime/family.c: the table of kernel families.
 *
 * Everything the shared modules know about a family comes through its
 * entry here (kt_family_ops, kt_internal.h); the entries live in the
 * family's own file (matmul.c, hist.c, gemm.c).  Adding a family is one line in
 * kt_families[] and one value in kt_family (kt_variant.h).
 */
#include <stdio.h>
#include <string.h>

#include "kt_internal.h"

const kt_family_ops *const kt_families[] = {
    [KT_FAMILY_MATMUL] = &kt_matmul_ops,
    [KT_FAMILY_HIST] = &kt_hist_ops,
    [KT_FAMILY_GEMM] = &kt_gemm_ops,
};
const int kt_family_count = (int)(sizeof kt_families / sizeof kt_families[0]);

const kt_family_ops *kt_family_get(kt_family f)
{
  return (int)f >= 0 && (int)f < kt_family_count ? kt_families[f] : NULL;
}

const kt_family_ops *kt_family_find(const char *name)
{
  if (!name)
    return NULL;
  for (int i = 0; i < kt_family_count; ++i)
    if (strcmp(name, kt_families[i]->name) == 0 || strcmp(name, kt_families[i]->long_name) == 0)
      return kt_families[i];
  return NULL;
}

const char *kt_family_name(kt_family f)
{
  const kt_family_ops *ops = kt_family_get(f);
  return ops ? ops->name : "?";
}

void kt_problem_key(const kt_problem *p, int with_dist, char *buf, size_t len)
{
  const kt_family_ops *ops = kt_family_get(p->family);
  if (!ops) {
    snprintf(buf, len, "?");
    return;
  }
  ops->key(p, buf, len);
  const size_t n = strlen(buf);
  if (with_dist && p->dist[0] && n < len)
    snprintf(buf + n, len - n, " dist=%s", p->dist);
}
