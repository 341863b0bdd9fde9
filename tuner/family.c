/* SPDX-License-Identifier: MIT */
/* tuner/family.c: the table of the tuner's families (kt_tune_family_).
 * Each entry is defined in its family's file; a runtime family without an
 * entry here cannot be tuned. */
#include "tuner.h"

const kt_tune_family *const kt_tune_families[] = {&kt_tune_matmul, &kt_tune_hist, &kt_tune_gemm};
const int kt_tune_family_count = (int)(sizeof kt_tune_families / sizeof kt_tune_families[0]);

_Static_assert(sizeof kt_tune_families / sizeof kt_tune_families[0] <= KT_TUNE_MAX_FAMILIES,
               "raise KT_TUNE_MAX_FAMILIES in tuner.h");

const kt_tune_family *kt_tune_family_get(kt_family id)
{
  for (int i = 0; i < kt_tune_family_count; ++i)
    if (kt_tune_families[i]->id == id)
      return kt_tune_families[i];
  return NULL;
}

const kt_tune_family *kt_tune_family_find(const char *name)
{
  const kt_family_ops *ops = name ? kt_family_find(name) : NULL;
  return ops ? kt_tune_family_get(ops->id) : NULL;
}
