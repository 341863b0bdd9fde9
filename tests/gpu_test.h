/* SPDX-License-Identifier: MIT */
/* tests/gpu_test.h: what the GPU tests share.  Without a GPU (CI), every GPU
 * test is skipped with a visible message rather than passed silently. */
#ifndef KT_GPU_TEST_H
#define KT_GPU_TEST_H

#include <criterion/criterion.h>
#include <cuda_runtime_api.h>

#include "kt_internal.h"
#include "measure.h"
#include "registry.h"

static kt_device_info gpu;

/* Criterion init hook: skip the test when no GPU is present. */
static inline void gpu_or_skip(void)
{
  char err[256];
  if (kt_device_query(-1, &gpu, err, sizeof err) != KT_OK)
    cr_skip_test("no GPU (%s): GPU test skipped", err);
}

/* The first untuned default of `family` that runs on this GPU and that
 * `also` (unless NULL) accepts, or NULL. */
static inline const kt_variant *gpu_default_variant(kt_family family, int (*also)(const kt_variant *))
{
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family == family && v->default_rank > 0 && kt_variant_runs_on(v, &gpu) && (!also || also(v)))
      return v;
  }
  return NULL;
}

#define CUDA_OK(x) cr_assert_eq((x), cudaSuccess, "%s: %s", #x, cudaGetErrorString(cudaGetLastError()))

#endif
