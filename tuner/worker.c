/* SPDX-License-Identifier: MIT */
/* tuner/worker.c: measure variants in a process of their own (kt_worker_).
 *
 *   ktune __worker FAMILY KEY DIST SEED DEVICE NAME...
 *
 * KEY is the problem as its family's key() writes it ("4096x4096x4096",
 * "nbins=65536 n=268435456"), read back with its parse(); DIST is the
 * input distribution, "-" for none; DEVICE is the CUDA ordinal of the GPU
 * to measure on.  A kernel that faults poisons the CUDA context of its
 * whole process, so the tuner measures in a worker and reads its results
 * line by line:
 *   START name
 *   RESULT name status time_ms rate max_err reps reason...
 * After any CUDA error (a launch_failed result) the worker stops (exit 3);
 * the tuner records the variant in flight and goes on in a fresh worker.
 * Exit 2: the worker could not start (arguments, device, inputs).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "tuner.h"

static void result(const char *name, const char *status, double ms, double rate, double err, int reps,
                   const char *reason)
{
  char clean[256];
  snprintf(clean, sizeof clean, "%s", reason && *reason ? reason : "-");
  for (char *p = clean; *p; ++p)
    if (*p == '\n')
      *p = ' ';
  printf("RESULT %s %s %.6g %.6g %.6g %d %s\n", name, status, ms, rate, err, reps, clean);
  fflush(stdout);
}

static void report(const kt_tune_result *r)
{
  result(r->variant, r->status, r->m.time_ms, r->m.rate, r->m.max_err, r->m.reps, r->reason);
}

static uint64_t name_seed(uint64_t seed, const char *name)
{
  uint64_t h = 1469598103934665603ull ^ seed;
  for (; *name; ++name)
    h = (h ^ (unsigned char)*name) * 1099511628211ull;
  return h;
}

int kt_worker_main(int argc, char **argv)
{
  const kt_tune_family *tf = argc >= 6 ? kt_tune_family_find(argv[1]) : NULL;
  const kt_family_ops *ops = tf ? kt_family_get(tf->id) : NULL;
  kt_problem p;
  if (!ops || ops->parse(argv[2], &p) != 0 || strlen(argv[3]) >= sizeof p.dist) {
    fprintf(stderr, "usage: ktune __worker FAMILY KEY DIST SEED DEVICE NAME...\n");
    return 2;
  }
  p.family = ops->id;
  snprintf(p.dist, sizeof p.dist, "%s", strcmp(argv[3], "-") ? argv[3] : "");
  const uint64_t seed = strtoull(argv[4], NULL, 10);
  kt_device_info dev;
  char err[256];
  if (kt_device_query(atoi(argv[5]), &dev, err, sizeof err) != KT_OK) {
    fprintf(stderr, "worker: %s\n", err);
    return 2;
  }
  /* Everything from here on (inputs, launches, timing) is on that GPU. */
  cudaError_t e = cudaSetDevice(dev.ordinal);
  if (e != cudaSuccess) {
    fprintf(stderr, "worker: cudaSetDevice(%d): %s\n", dev.ordinal, cudaGetErrorString(e));
    return 2;
  }
  void *inputs = tf->setup(&dev, &p, seed, err, sizeof err);
  if (!inputs) {
    fprintf(stderr, "worker: %s\n", err);
    return 2;
  }
  double best = INFINITY;
  for (int i = 6; i < argc; ++i) {
    const kt_variant *v = kt_registry_find(argv[i], &dev);
    printf("START %s\n", argv[i]);
    fflush(stdout);
    kt_tune_result r;
    if (!v || v->family != p.family) {
      char why[128];
      snprintf(why, sizeof why, "not a %s variant of this build", ops->long_name);
      result(argv[i], "skipped", 0, 0, 0, 0, why);
      continue;
    }
    if (!ops->fits(v, &dev, &p)) {
      char why[256];
      tf->unfit(v, &dev, &p, why, sizeof why);
      kt_tune_result_set(&r, &p, v, "skipped", why);
      report(&r);
      continue;
    }
    tf->measure(inputs, v, name_seed(seed, v->name), best, &r);
    report(&r);
    if (strcmp(r.status, "launch_failed") == 0)
      return 3; /* the CUDA context may be poisoned */
    if (strcmp(r.status, "ok") == 0 && r.m.time_ms < best)
      best = r.m.time_ms;
  }
  tf->teardown(inputs);
  return 0;
}
