/* SPDX-License-Identifier: MIT */
/* tests/test_workers.c: the tuner's worker runner (tuner/workers.c) against
 * fake workers, shell scripts that speak the worker protocol and then
 * crash, hang, fail or exit early.  No GPU is needed: the point is that
 * every variant gets exactly one result, the right one, and that no worker
 * process is left behind. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
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

/* Reads a worker's job as worker.c does (stdin: family, problem key,
 * distribution and seed, then a variant a line; no job: exit 0), into
 * $family $key $dist $seed and $names, and logs it to starts.log as one
 * line, "__worker FAMILY KEY DIST SEED DEVICE NAME...", to count the
 * workers that got a job and see what each got; its pid to jobs.log. */
#define READ_JOB                                                               \
  "read -r family || exit 0\n"                                                 \
  "read -r key; read -r dist; read -r seed\n"                                  \
  "names=''\n"                                                                 \
  "while read -r name; do names=\"$names $name\"; done\n"                      \
  "echo \"$1 $family $key $dist $seed $2$names\" >> \"$LOG_DIR/starts.log\"\n" \
  "echo \"$$\" >> \"$LOG_DIR/jobs.log\"\n"

/* A fake worker (`__worker DEVICE`, the job on stdin).  For each name it
 * prints START, then acts on it: a name listed in $CRASH kills the worker
 * with SIGSEGV, in $HANG sleeps forever, in $FAILEXIT reports
 * launch_failed and exits 3 (as worker.c does after a CUDA error); any
 * other name is reported ok, after $PAUSE seconds if set.  $SETUP_FAIL
 * exits 2 once it has its job.  A worker logs its pid to ready.log as it
 * starts, before it reads its job. */
static const char *SCRIPT = "#!/bin/sh\n"
                            "echo \"$$\" >> \"$LOG_DIR/ready.log\"\n" READ_JOB "[ -n \"$SETUP_FAIL\" ] && exit 2\n"
                            "for name in $names; do\n"
                            "  echo \"START $name\"\n"
                            "  case \" $CRASH \" in *\" $name \"*) kill -SEGV $$ ;; esac\n"
                            "  case \" $HANG \" in *\" $name \"*) exec sleep 1000 ;; esac\n"
                            "  case \" $FAILEXIT \" in *\" $name \"*) echo \"RESULT $name launch_failed 0 0 0 0 "
                            "illegal address\"; exit 3 ;; esac\n"
                            "  [ -n \"$PAUSE\" ] && sleep \"$PAUSE\"\n"
                            "  echo \"RESULT $name ok 1.5 100 0.25 7 -\"\n"
                            "done\n";

typedef struct run {
  const kt_variant *vs[NV];
  kt_tune_result out[NV];
  int events_done;
  int event_device[NV];     /* per variant, the GPU its result was reported on */
  char event_status[NV][16]; /* and the status reported */
  char exe[PATH_MAX];
} run;

static void count_event(void *user, const char *key, const char *variant, int device, const kt_tune_result *done)
{
  (void)key, (void)variant;
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* spread: a thread per GPU */
  run *r = user;
  if (!done)
    return;
  pthread_mutex_lock(&lock);
  ++r->events_done;
  /* The result reported is final: what out[] gets in the end, measured on
   * the GPU named. */
  for (int i = 0; i < NV; ++i)
    if (strcmp(done->variant, r->vs[i]->name) == 0) {
      r->event_device[i] = device;
      snprintf(r->event_status[i], sizeof r->event_status[i], "%s", done->status);
    }
  pthread_mutex_unlock(&lock);
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
  unsetenv("CRASH"), unsetenv("HANG"), unsetenv("FAILEXIT"), unsetenv("SETUP_FAIL"), unsetenv("PAUSE");
}

static void go(run *r, double timeout_s)
{
  kt_problem p = kt_test_matmul_problem(64, 64, 64);
  kt_workers_opts o = {r->exe, timeout_s, 42, count_event, r, 0, NULL};
  kt_workers_run(&p, "64x64x64", r->vs, NV, &o, r->out);
  /* No child may outlive the runner. */
  errno = 0;
  cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a worker process was left behind");
  cr_assert_eq(errno, ECHILD);
}

/* Line i (from 0) of a log of numbers, or -1. */
static long log_line(const char *name, int i)
{
  char path[PATH_MAX];
  size_t len;
  char *text = (char *)kt_test_slurp(kt_test_path(path, sizeof path, name), &len);
  long v = -1;
  char *at = text;
  for (int k = 0; at && at < text + len; ++k) {
    if (k == i) {
      v = strtol(at, NULL, 10);
      break;
    }
    at = memchr(at, '\n', (size_t)(text + len - at));
    at = at ? at + 1 : NULL;
  }
  free(text);
  return v;
}

/* The which-th (from 0) pid in ready.log that is not in jobs.log (a
 * worker still waiting for its job), or -1. */
static long waiting_worker(int which)
{
  for (int i = 0; log_line("ready.log", i) > 0; ++i) {
    int had_job = 0;
    for (int j = 0; log_line("jobs.log", j) > 0; ++j)
      had_job |= log_line("jobs.log", j) == log_line("ready.log", i);
    if (!had_job && which-- == 0)
      return log_line("ready.log", i);
  }
  return -1;
}

static void no_child_left(void)
{
  errno = 0;
  cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a worker process was left behind");
  cr_assert_eq(errno, ECHILD);
}

static int workers_started(void)
{
  return kt_test_lines("starts.log");
}

static void expect(const run *r, int i, const char *status)
{
  cr_expect_str_eq(r->event_status[i], status, "%s: reported %s", r->vs[i]->name, r->event_status[i]);
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

/* A limit past what poll's int of milliseconds holds (1e9 s, or inf for
 * "none") is a long wait, not a negative one: no variant times out. */
Test(workers, a_timeout_too_long_for_poll_is_a_long_wait)
{
  const double limits[] = {1e9, INFINITY};
  for (int l = 0; l < 2; ++l) {
    run r;
    prepare(&r);
    go(&r, limits[l]);
    for (int i = 0; i < NV; ++i)
      expect(&r, i, "ok");
  }
}

/* The worker is told its GPU, then (on its stdin) the family and the
 * problem by the family's name and key, "-" for no distribution, the seed
 * and the variants by name. */
Test(workers, a_worker_gets_the_family_the_problem_key_and_the_names)
{
  run r;
  prepare(&r);
  go(&r, 10);
  char path[PATH_MAX], want[1024];
  kt_test_path(path, sizeof path, "starts.log");
  size_t len;
  char *text = (char *)kt_test_slurp(path, &len);
  int n = snprintf(want, sizeof want, "__worker matmul 64x64x64 - 42 0");
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

/* ---- spares: the next problem's worker started ahead ------------------------ */

/* A run's fake workers, each variant taking $PAUSE seconds (NULL: none),
 * and spares of them. */
static kt_workers_spares *spares_of(run *r, const char *pause)
{
  prepare(r);
  if (pause)
    setenv("PAUSE", pause, 1);
  kt_workers_spares *spares = kt_workers_spares_new(r->exe);
  cr_assert_not_null(spares);
  return spares;
}

static void go_spares(run *r, kt_workers_spares *spares, double timeout_s)
{
  kt_problem p = kt_test_matmul_problem(64, 64, 64);
  kt_workers_opts o = {r->exe, timeout_s, 42, count_event, r, 0, spares};
  memset(r->out, 0, sizeof r->out);
  r->events_done = 0;
  kt_workers_run(&p, "64x64x64", r->vs, NV, &o, r->out);
}

/* The first problem's worker starts a spare as it takes its job; the
 * second problem's worker is that spare, started (and ready) while the
 * first was measured; freeing the spares leaves no process behind. */
Test(workers, the_next_problems_worker_is_the_spare_started_during_this_one)
{
  run r;
  kt_workers_spares *spares = spares_of(&r, "0.1");
  go_spares(&r, spares, 10);
  for (int i = 0; i < NV; ++i)
    expect(&r, i, "ok");
  cr_expect_eq(kt_test_lines("ready.log"), 2, "the worker and the spare started during its problem");
  const long spare = waiting_worker(0);
  go_spares(&r, spares, 10);
  for (int i = 0; i < NV; ++i)
    expect(&r, i, "ok");
  cr_expect_eq(workers_started(), 2);
  cr_expect_eq(log_line("jobs.log", 1), spare, "the second problem ran in %ld, not in the spare %ld",
               log_line("jobs.log", 1), spare);
  kt_workers_spares_free(spares);
  no_child_left();
}

/* A crash with spares costs the variant in flight only; the rest of that
 * problem goes on in a worker started then, and the spare waits for the
 * next problem. */
Test(workers, a_crash_with_spares_costs_the_variant_in_flight_only)
{
  run r;
  kt_workers_spares *spares = spares_of(&r, NULL);
  setenv("CRASH", r.vs[2]->name, 1);
  go_spares(&r, spares, 10);
  for (int i = 0; i < NV; ++i)
    expect(&r, i, i == 2 ? "launch_failed" : "ok");
  cr_expect_eq(workers_started(), 2);
  cr_expect_eq(r.events_done, NV);
  cr_expect_neq(log_line("jobs.log", 1), waiting_worker(0), "the rest of the problem went to the spare");
  kt_workers_spares_free(spares);
  no_child_left();
}

/* A spare that has gone before its job (here killed and reaped) is
 * replaced by a new worker: no variant is charged with it. */
Test(workers, a_spare_that_has_gone_is_replaced_and_charges_nothing)
{
  run r;
  kt_workers_spares *spares = spares_of(&r, NULL);
  go_spares(&r, spares, 10);
  for (int i = 0; i < 50 && kt_test_lines("ready.log") < 2; ++i)
    usleep(20000);
  const long spare = waiting_worker(0);
  cr_assert_gt(spare, 0, "no spare started");
  cr_assert_eq(kill((pid_t)spare, SIGKILL), 0);
  cr_assert_eq(waitpid((pid_t)spare, NULL, 0), (pid_t)spare);
  go_spares(&r, spares, 10);
  for (int i = 0; i < NV; ++i)
    expect(&r, i, "ok");
  cr_expect_eq(workers_started(), 2);
  cr_expect_neq(log_line("jobs.log", 1), spare);
  kt_workers_spares_free(spares);
  no_child_left();
}

/* ---- several GPUs ---------------------------------------------------------- */

/* The worker processes started for each GPU, and the variants each was given. */
static void starts_by_gpu(char names[2][1024], int workers[2])
{
  char path[PATH_MAX];
  size_t len;
  char *text = (char *)kt_test_slurp(kt_test_path(path, sizeof path, "starts.log"), &len);
  text = realloc(text, len + 1);
  text[len] = 0;
  names[0][0] = names[1][0] = 0;
  workers[0] = workers[1] = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    /* "__worker matmul 64x64x64 - SEED DEVICE NAME..." */
    char *at = line;
    for (int field = 0; field < 5 && at; ++field)
      at = strchr(at, ' ') ? strchr(at, ' ') + 1 : NULL;
    cr_assert_not_null(at, "%s", line);
    const int gpu = atoi(at);
    cr_assert(gpu == 0 || gpu == 1, "%s", line);
    ++workers[gpu];
    strncat(names[gpu], strchr(at, ' '), 1023 - strlen(names[gpu]));
  }
  free(text);
}

static void go_spread(run *r, const int *devices, double timeout_s)
{
  kt_problem p = kt_test_matmul_problem(64, 64, 64);
  kt_workers_opts o = {r->exe, timeout_s, 42, count_event, r, 7 /* ignored */, NULL};
  kt_workers_run_spread(&p, "64x64x64", r->vs, devices, NV, &o, r->out);
  errno = 0;
  cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a worker process was left behind");
  cr_assert_eq(errno, ECHILD);
}

Test(workers, work_split_over_two_gpus_runs_on_both_and_every_result_comes_back)
{
  run r;
  prepare(&r);
  const int devices[NV] = {0, 1, 0, 1, 0};
  go_spread(&r, devices, 10);
  for (int i = 0; i < NV; ++i) {
    expect(&r, i, "ok");
    cr_expect_float_eq(r.out[i].m.time_ms, 1.5, 1e-9);
    cr_expect_eq(r.event_device[i], devices[i], "%s reported on GPU %d", r.vs[i]->name, r.event_device[i]);
  }
  cr_expect_eq(r.events_done, NV);
  char names[2][1024], want[2][1024] = {"", ""};
  int workers[2];
  starts_by_gpu(names, workers);
  cr_expect(workers[0] == 1 && workers[1] == 1, "one worker per GPU: %d, %d", workers[0], workers[1]);
  for (int i = 0; i < NV; ++i)
    snprintf(want[devices[i]] + strlen(want[devices[i]]), sizeof want[0] - strlen(want[devices[i]]), " %s",
             r.vs[i]->name);
  cr_expect_str_eq(names[0], want[0]);
  cr_expect_str_eq(names[1], want[1]);
}

/* Both GPUs measure at once: each worker holds its variant until the other
 * GPU's worker has started one too. */
Test(workers, the_gpus_measure_at_the_same_time)
{
  run r;
  prepare(&r);
  static const char *BOTH =
      "#!/bin/sh\n" READ_JOB "dev=$2\n"
      "touch \"$LOG_DIR/gpu$dev\"\n"
      "for i in $(seq 100); do [ -e \"$LOG_DIR/gpu0\" ] && [ -e \"$LOG_DIR/gpu1\" ] && break;"
      " sleep 0.05; done\n"
      "for name in $names; do\n"
      "  echo \"START $name\"\n"
      "  if [ -e \"$LOG_DIR/gpu0\" ] && [ -e \"$LOG_DIR/gpu1\" ]; then"
      " echo \"RESULT $name ok 1 1 0 1 -\"; else echo \"RESULT $name skipped 0 0 0 0 alone\"; fi\n"
      "done\n";
  kt_test_write_file(r.exe, BOTH);
  const int devices[NV] = {1, 0, 1, 0, 1};
  go_spread(&r, devices, 20);
  for (int i = 0; i < NV; ++i)
    expect(&r, i, "ok");
}

Test(workers, a_crash_on_one_gpu_costs_that_variant_only)
{
  run r;
  prepare(&r);
  const int devices[NV] = {0, 1, 0, 1, 0};
  char hang[256];
  setenv("CRASH", r.vs[1]->name, 1);
  snprintf(hang, sizeof hang, "%s", r.vs[2]->name);
  setenv("HANG", hang, 1);
  go_spread(&r, devices, 1);
  for (int i = 0; i < NV; ++i) {
    expect(&r, i, i == 1 ? "launch_failed" : i == 2 ? "timed_out" : "ok");
    cr_expect_eq(r.event_device[i], devices[i], "%s reported on GPU %d", r.vs[i]->name, r.event_device[i]);
  }
  cr_expect_eq(r.events_done, NV);
  char names[2][1024];
  int workers[2];
  starts_by_gpu(names, workers);
  cr_expect(workers[0] == 2 && workers[1] == 2, "a fresh worker on each GPU after its failure: %d, %d", workers[0],
            workers[1]);
}

/* A problem of no family this build knows starts no worker: every variant
 * is skipped with the reason, reported on the GPU it was given. */
Test(workers, a_spread_problem_of_no_known_family_is_skipped_on_each_gpu)
{
  run r;
  prepare(&r);
  kt_problem p = kt_test_matmul_problem(64, 64, 64);
  p.family = (kt_family)99;
  const int devices[NV] = {1, 0, 1, 0, 1};
  kt_workers_opts o = {r.exe, 10, 42, count_event, &r, 0, NULL};
  kt_workers_run_spread(&p, "64x64x64", r.vs, devices, NV, &o, r.out);
  for (int i = 0; i < NV; ++i) {
    expect(&r, i, "skipped");
    cr_expect_str_eq(r.out[i].reason, "no such family");
    cr_expect_eq(r.event_device[i], devices[i], "%s reported on GPU %d", r.vs[i]->name, r.event_device[i]);
  }
  cr_expect_eq(r.events_done, NV);
  char path[PATH_MAX];
  cr_expect_neq(access(kt_test_path(path, sizeof path, "starts.log"), F_OK), 0, "a worker was started");
}

/* Spread over two GPUs with spares: each GPU's first worker of the next
 * problem is the spare started for that GPU during this one (taken on the
 * caller's thread, so it outlives the thread of the share that started
 * it); freeing the spares leaves no process behind. */
Test(workers, spread_with_spares_gives_each_gpu_its_own_spare)
{
  run r;
  kt_workers_spares *spares = spares_of(&r, "0.1");
  kt_problem p = kt_test_matmul_problem(64, 64, 64);
  kt_workers_opts o = {r.exe, 10, 42, count_event, &r, 7 /* ignored */, spares};
  const int devices[NV] = {1, 0, 1, 0, 1};
  kt_workers_run_spread(&p, "64x64x64", r.vs, devices, NV, &o, r.out);
  for (int i = 0; i < NV; ++i)
    expect(&r, i, "ok");
  const long waiting[2] = {waiting_worker(0), waiting_worker(1)};
  cr_assert(waiting[0] > 0 && waiting[1] > 0, "two spares, one a GPU, wait after the first problem");
  kt_workers_run_spread(&p, "64x64x64", r.vs, devices, NV, &o, r.out);
  for (int i = 0; i < NV; ++i)
    expect(&r, i, "ok");
  const long third = log_line("jobs.log", 2), fourth = log_line("jobs.log", 3);
  cr_expect((third == waiting[0] && fourth == waiting[1]) || (third == waiting[1] && fourth == waiting[0]),
            "the second problem ran in %ld and %ld, not the spares %ld and %ld", third, fourth, waiting[0], waiting[1]);
  kt_workers_spares_free(spares);
  no_child_left();
}
