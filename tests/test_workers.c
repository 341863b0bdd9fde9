/* SPDX-License-Identifier: MIT */
/* tests/test_workers.c: the tuner's worker runner (tuner/workers.c) against
 * fake workers, shell scripts that speak the worker protocol and then
 * crash, hang, fail or exit early.  No GPU is needed: the point is that
 * every variant gets exactly one result, the right one, and that no worker
 * process is left behind. */
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kt_test.h"
#include "tuner.h"

static void setup(void)
{
  kt_test_mkdir();
}

static void teardown(void)
{
  kt_test_rmdir();
}

TestSuite(workers, .init = setup, .fini = teardown, .timeout = 60);

#define NV 5

/* A fake worker: argv is "ktune __worker FAMILY KEY DIST SEED NAME...".  For
 * each name it prints START, then acts on it: a name listed in $CRASH
 * kills the worker with SIGSEGV, in $HANG sleeps forever, in $FAILEXIT
 * reports launch_failed and exits 3 (as worker.c does after a CUDA
 * error); any other name is reported ok.  $SETUP_FAIL exits 2 at once.
 * Every start is appended to starts.log, to count the workers. */
static const char *SCRIPT = "#!/bin/sh\n"
                            "echo \"$*\" >> \"$LOG_DIR/starts.log\"\n"
                            "[ -n \"$SETUP_FAIL\" ] && exit 2\n"
                            "shift 5\n"
                            "for name in \"$@\"; do\n"
                            "  echo \"START $name\"\n"
                            "  case \" $CRASH \" in *\" $name \"*) kill -SEGV $$ ;; esac\n"
                            "  case \" $HANG \" in *\" $name \"*) exec sleep 1000 ;; esac\n"
                            "  case \" $FAILEXIT \" in *\" $name \"*) echo \"RESULT $name launch_failed 0 0 0 0 "
                            "illegal address\"; exit 3 ;; esac\n"
                            "  echo \"RESULT $name ok 1.5 100 0.25 7 -\"\n"
                            "done\n";

typedef struct run {
  const kt_variant *vs[NV];
  kt_tune_result out[NV];
  int events_done;
  char exe[PATH_MAX];
} run;

static void count_event(void *user, const char *key, const char *variant, int finished)
{
  (void)key, (void)variant;
  if (finished)
    ++((run *)user)->events_done;
}

static void prepare(run *r)
{
  memset(r, 0, sizeof *r);
  for (int i = 0; i < NV; ++i)
    r->vs[i] = kt_test_need(kt_test_is_matmul, i, "a matmul variant");
  kt_test_path(r->exe, sizeof r->exe, "fake-worker.sh");
  kt_test_write_file(r->exe, SCRIPT);
  cr_assert_eq(chmod(r->exe, 0755), 0);
  setenv("LOG_DIR", kt_test_dir, 1);
  unsetenv("CRASH"), unsetenv("HANG"), unsetenv("FAILEXIT"), unsetenv("SETUP_FAIL");
}

static void go(run *r, double timeout_s)
{
  kt_problem p = kt_test_matmul_problem(64, 64, 64);
  kt_workers_opts o = {r->exe, timeout_s, 42, count_event, r};
  kt_workers_run(&p, "64x64x64", r->vs, NV, &o, r->out);
  /* No child may outlive the runner. */
  errno = 0;
  cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a worker process was left behind");
  cr_assert_eq(errno, ECHILD);
}

static int workers_started(void)
{
  char path[PATH_MAX];
  kt_test_path(path, sizeof path, "starts.log");
  if (!kt_test_exists(path))
    return 0;
  size_t len;
  unsigned char *text = kt_test_slurp(path, &len);
  int n = 0;
  for (size_t i = 0; i < len; ++i)
    n += text[i] == '\n';
  free(text);
  return n;
}

static void expect(const run *r, int i, const char *status)
{
  cr_expect_str_eq(r->out[i].status, status, "%s: %s (%s), want %s", r->vs[i]->name, r->out[i].status, r->out[i].reason,
                   status);
  cr_expect_str_eq(r->out[i].variant, r->vs[i]->name);
  cr_expect_str_eq(r->out[i].hash, r->vs[i]->source_hash);
}

Test(workers, every_variant_gets_its_result_from_one_worker)
{
  run r;
  prepare(&r);
  go(&r, 10);
  for (int i = 0; i < NV; ++i) {
    expect(&r, i, "ok");
    cr_expect_float_eq(r.out[i].m.time_ms, 1.5, 1e-9);
    cr_expect_eq(r.out[i].m.reps, 7);
    cr_expect_str_eq(r.out[i].reason, "");
  }
  cr_expect_eq(workers_started(), 1);
  cr_expect_eq(r.events_done, NV);
}

/* The worker is told the family and the problem by the family's name and
 * key, "-" for no distribution, and the variants by name. */
Test(workers, a_worker_gets_the_family_the_problem_key_and_the_names)
{
  run r;
  prepare(&r);
  go(&r, 10);
  char path[PATH_MAX], want[1024];
  kt_test_path(path, sizeof path, "starts.log");
  size_t len;
  char *text = (char *)kt_test_slurp(path, &len);
  int n = snprintf(want, sizeof want, "__worker matmul 64x64x64 - 42");
  for (int i = 0; i < NV; ++i)
    n += snprintf(want + n, sizeof want - (size_t)n, " %s", r.vs[i]->name);
  snprintf(want + n, sizeof want - (size_t)n, "\n");
  cr_expect(len == strlen(want) && memcmp(text, want, len) == 0, "worker arguments: %.*s, want %s", (int)len, text,
            want);
  free(text);
}

Test(workers, a_crash_costs_the_variant_in_flight_only)
{
  run r;
  prepare(&r);
  setenv("CRASH", r.vs[1]->name, 1);
  go(&r, 10);
  expect(&r, 0, "ok");
  expect(&r, 1, "launch_failed");
  cr_expect(strstr(r.out[1].reason, "signal 11") != NULL, "reason: %s", r.out[1].reason);
  for (int i = 2; i < NV; ++i)
    expect(&r, i, "ok");
  cr_expect_eq(workers_started(), 2);
  cr_expect_eq(r.events_done, NV);
}

Test(workers, a_hang_is_killed_at_the_deadline_and_the_tune_goes_on)
{
  run r;
  prepare(&r);
  setenv("HANG", r.vs[3]->name, 1);
  go(&r, 1);
  for (int i = 0; i < NV; ++i)
    expect(&r, i, i == 3 ? "timed_out" : "ok");
  cr_expect_eq(workers_started(), 2);
}

/* The worker reports its own CUDA failure, then exits: the next variant
 * never ran and must not be charged with it. */
Test(workers, a_worker_that_reports_and_exits_costs_nothing_more)
{
  run r;
  prepare(&r);
  setenv("FAILEXIT", r.vs[0]->name, 1);
  go(&r, 10);
  expect(&r, 0, "launch_failed");
  cr_expect(strstr(r.out[0].reason, "illegal address") != NULL, "reason: %s", r.out[0].reason);
  for (int i = 1; i < NV; ++i)
    expect(&r, i, "ok");
  cr_expect_eq(workers_started(), 2);
}

Test(workers, a_worker_that_cannot_set_up_skips_the_rest_with_the_reason)
{
  run r;
  prepare(&r);
  setenv("SETUP_FAIL", "1", 1);
  go(&r, 10);
  for (int i = 0; i < NV; ++i) {
    expect(&r, i, "skipped");
    cr_expect(strstr(r.out[i].reason, "status 2") != NULL, "reason: %s", r.out[i].reason);
  }
  cr_expect_eq(workers_started(), 1);
}

Test(workers, crashes_and_hangs_in_a_row_each_cost_one_variant)
{
  run r;
  prepare(&r);
  char crash[256];
  snprintf(crash, sizeof crash, "%s %s", r.vs[0]->name, r.vs[2]->name);
  setenv("CRASH", crash, 1);
  setenv("HANG", r.vs[1]->name, 1);
  go(&r, 1);
  expect(&r, 0, "launch_failed");
  expect(&r, 1, "timed_out");
  expect(&r, 2, "launch_failed");
  expect(&r, 3, "ok");
  expect(&r, 4, "ok");
  cr_expect_eq(workers_started(), 4);
  cr_expect_eq(r.events_done, NV);
}
