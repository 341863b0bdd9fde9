/* SPDX-License-Identifier: MIT */
/* tuner/worker.c: measure variants in a process of their own (kt_worker_).
 *
 *   ktune __worker DEVICE
 *
 * DEVICE is the CUDA ordinal of the GPU to measure on.  The worker sets up
 * its CUDA context on it first (a third of a second on an H100), then reads
 * its job from stdin, one item a line:
 *   FAMILY   the family's name
 *   KEY      the problem as the family's key() writes it ("4096x4096x4096",
 *            "nbins=65536 n=268435456"), read back with its parse()
 *   DIST     the input distribution, "-" for none
 *   SEED     the inputs' seed
 *   NAME...  the variants, one a line, to the end of the input
 * so the tuner can start a worker before it knows the job, and the context
 * is ready when the job comes (workers.c).  No job at all (end of input
 * before FAMILY) is no error: exit 0.  A kernel that faults poisons the
 * CUDA context of its whole process, so the tuner measures in a worker and
 * reads its results line by line:
 *   START name
 *   RESULT name status time_ms rate max_err reps reason...
 * After any CUDA error (a launch_failed result) the worker stops (exit 3);
 * the tuner records the variant in flight and goes on in a fresh worker.
 * Exit 2: the worker could not start (arguments, device, job, inputs).
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

/* The next line of f without its newline, in *line (getline's buffer):
 * 0, or -1 at the end of the input. */
static int next_line(FILE *f, char **line, size_t *cap)
{
  ssize_t n = getline(line, cap, f);
  if (n < 0)
    return -1;
  if (n > 0 && (*line)[n - 1] == '\n')
    (*line)[n - 1] = 0;
  return 0;
}

int kt_worker_main(int argc, char **argv)
{
  char *end = NULL;
  const long ordinal = argc == 2 ? strtol(argv[1], &end, 10) : -1;
  if (argc != 2 || !end || *end || ordinal < 0 || ordinal > 1024) {
    fprintf(stderr, "usage: ktune __worker DEVICE (the job on stdin: FAMILY, KEY, DIST, SEED, NAME..., a line each)\n");
    return 2;
  }
  kt_device_info dev;
  char err[256];
  if (kt_device_query((int)ordinal, &dev, err, sizeof err) != KT_OK) {
    fprintf(stderr, "worker: %s\n", err);
    return 2;
  }
  /* Everything from here on (inputs, launches, timing) is on that GPU; the
   * context is made now, before the job comes. */
  cudaError_t e = cudaSetDevice(dev.ordinal);
  if (e == cudaSuccess)
    e = cudaFree(NULL);
  if (e != cudaSuccess) {
    fprintf(stderr, "worker: cudaSetDevice(%d): %s\n", dev.ordinal, cudaGetErrorString(e));
    return 2;
  }
  /* The whole job at once, before any work: the tuner may not read this
   * worker's results until it has written all of it. */
  char *job[4] = {NULL}, **names = NULL, *line = NULL;
  size_t cap[4] = {0}, line_cap = 0;
  int got = 0, nnames = 0, room = 0, rc = 0;
  const kt_tune_family *tf = NULL;
  const kt_family_ops *ops = NULL;
  kt_problem p;
  void *inputs = NULL;
  while (got < 4 && next_line(stdin, &job[got], &cap[got]) == 0)
    ++got;
  while (next_line(stdin, &line, &line_cap) == 0) {
    if (!*line)
      continue;
    if (nnames == room) {
      char **more = realloc(names, sizeof *names * (size_t)(room ? 2 * room : 256));
      if (more)
        names = more, room = room ? 2 * room : 256;
    }
    if (nnames == room || !(names[nnames] = strdup(line))) {
      fprintf(stderr, "worker: out of memory for the job\n");
      rc = 2;
      goto out;
    }
    ++nnames;
  }
  tf = got == 4 ? kt_tune_family_find(job[0]) : NULL;
  ops = tf ? kt_family_get(tf->id) : NULL;
  if (got == 0) /* a worker started ahead that got no job */
    goto out;
  rc = 2;
  if (!ops || ops->parse(job[1], &p) != 0 || strlen(job[2]) >= sizeof p.dist) {
    fprintf(stderr, "worker: bad job: family '%s', problem '%s', distribution '%s'\n", got > 0 ? job[0] : "",
            got > 1 ? job[1] : "", got > 2 ? job[2] : "");
    goto out;
  }
  p.family = ops->id;
  snprintf(p.dist, sizeof p.dist, "%s", strcmp(job[2], "-") ? job[2] : "");
  const uint64_t seed = strtoull(job[3], NULL, 10);
  if (!(inputs = tf->setup(&dev, &p, seed, err, sizeof err))) {
    fprintf(stderr, "worker: %s\n", err);
    goto out;
  }
  rc = 0;
  double best = INFINITY;
  for (int i = 0; i < nnames; ++i) {
    const char *name = names[i];
    const kt_variant *v = kt_registry_find(name, &dev);
    printf("START %s\n", name);
    fflush(stdout);
    kt_tune_result r;
    if (!v || v->family != p.family) {
      char why[128];
      snprintf(why, sizeof why, "not a %s variant of this build", ops->long_name);
      result(name, "skipped", 0, 0, 0, 0, why);
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
    if (strcmp(r.status, "launch_failed") == 0) {
      rc = 3; /* the CUDA context may be poisoned */
      break;
    }
    if (strcmp(r.status, "ok") == 0 && r.m.time_ms < best)
      best = r.m.time_ms;
  }
out:
  if (inputs && rc != 3)
    tf->teardown(inputs);
  for (int i = 0; i < 4; ++i)
    free(job[i]);
  for (int i = 0; i < nnames; ++i)
    free(names[i]);
  free(names);
  free(line);
  return rc;
}
