/* SPDX-License-Identifier: MIT */
/* tuner/workers.c: run measurements in worker processes (kt_workers_).
 *
 * A kernel that faults poisons the CUDA context of its whole process, and
 * one that hangs never returns, so the tuner never measures in its own
 * process.  It starts a worker (`ktune __worker FAMILY KEY DIST SEED DEVICE
 * NAME...`, worker.c) for a list of variants and reads its lines as they
 * come:
 *   START name                  the variant now in flight (its deadline starts)
 *   RESULT name status ...      its result
 * If the worker dies or passes the deadline, the variant in flight is
 * recorded as launch_failed or timed_out, the worker is killed and reaped,
 * and a fresh one goes on with the rest.
 *
 * On a host with several GPUs, kt_workers_run_spread gives each GPU its
 * share of the variants and runs the shares at once, one thread (and so
 * one worker at a time) per GPU; each share is a kt_workers_run of its own,
 * so a crash or a hang still costs one variant.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kt_internal.h"
#include "tuner.h"

static double now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* out[i] is final: tell the caller, who may record it at once. */
static void finished(const kt_workers_opts *o, const char *key, const kt_tune_result *r)
{
  if (o->event)
    o->event(o->user, key, NULL, o->device, r);
}

/* vs[from..n) get no measurement, for one reason. */
static void skip_rest(const kt_problem *p, const char *key, const kt_variant **vs, int from, int n,
                      const kt_workers_opts *o, kt_tune_result *out, const char *why)
{
  for (int i = from; i < n; ++i) {
    kt_tune_result_set(&out[i], p, vs[i], "skipped", why);
    finished(o, key, &out[i]);
  }
}

void kt_workers_run(const kt_problem *p, const char *key, const kt_variant **vs, int n, const kt_workers_opts *o,
                    kt_tune_result *out)
{
  const kt_family_ops *ops = kt_family_get(p->family);
  if (!ops) {
    skip_rest(p, key, vs, 0, n, o, out, "no such family");
    return;
  }
  int next = 0; /* first variant not yet reported */
  while (next < n) {
    /* Close-on-exec: a worker that another thread starts meanwhile must
     * not hold this pipe open, or this one's end would go unseen. */
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) != 0) {
      skip_rest(p, key, vs, next, n, o, out, strerror(errno));
      return;
    }
    char problem[96], seed[32], device[16];
    ops->key(p, problem, sizeof problem);
    snprintf(seed, sizeof seed, "%llu", o->seed + (unsigned long long)next * 7919u);
    snprintf(device, sizeof device, "%d", o->device);
    const char **argv = calloc((size_t)n + 9, sizeof *argv);
    int k = 0;
    argv[k++] = "ktune";
    argv[k++] = "__worker";
    argv[k++] = ops->name;
    argv[k++] = problem;
    argv[k++] = p->dist[0] ? p->dist : "-";
    argv[k++] = seed;
    argv[k++] = device;
    for (int i = next; i < n; ++i)
      argv[k++] = vs[i]->name;
    argv[k] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
      const char *why = strerror(errno);
      free(argv);
      close(fd[0]);
      close(fd[1]);
      skip_rest(p, key, vs, next, n, o, out, why);
      return;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans if the tuner dies */
      if (getppid() == 1)               /* ... even if it died before prctl */
        _exit(127);
      dup2(fd[1], STDOUT_FILENO);
      close(fd[0]);
      close(fd[1]);
      execv(o->exe ? o->exe : "/proc/self/exe", (char *const *)argv);
      _exit(127);
    }
    free(argv);
    close(fd[1]);
    const int first = next;
    FILE *in = fdopen(fd[0], "r");
    /* Unbuffered: poll() watches the descriptor, so no line may wait in a
     * stdio buffer where poll cannot see it. */
    setvbuf(in, NULL, _IONBF, 0);
    int inflight = -1;
    double deadline = now_s() + o->timeout_s;
    char line[1024];
    size_t len = 0;
    int timed_out = 0;
    for (;;) {
      struct pollfd pf = {fd[0], POLLIN, 0};
      int wait_ms = (int)((deadline - now_s()) * 1000);
      if (wait_ms < 0)
        wait_ms = 0;
      int pr = poll(&pf, 1, wait_ms);
      if (pr == 0) {
        timed_out = 1;
        break;
      }
      if (pr < 0 && errno == EINTR)
        continue;
      int ch = fgetc(in);
      if (ch == EOF)
        break;
      /* Read a whole line (the worker flushes after each). */
      len = 0;
      while (ch != EOF && ch != '\n' && len + 1 < sizeof line) {
        line[len++] = (char)ch;
        ch = fgetc(in);
      }
      line[len] = 0;
      if (strncmp(line, "START ", 6) == 0) {
        inflight = next;
        deadline = now_s() + o->timeout_s;
        if (o->event)
          o->event(o->user, key, line + 6, o->device, NULL);
      } else if (strncmp(line, "RESULT ", 7) == 0 && next < n) {
        char name[96], status[16];
        double ms, rate, err;
        int reps, used = 0;
        if (sscanf(line + 7, "%95s %15s %lf %lf %lf %d %n", name, status, &ms, &rate, &err, &reps, &used) >= 6 &&
            strcmp(name, vs[next]->name) == 0) {
          const char *reason = line + 7 + used;
          kt_tune_result_set(&out[next], p, vs[next], status, strcmp(reason, "-") == 0 ? "" : reason);
          out[next].m.time_ms = ms;
          out[next].m.rate = rate;
          out[next].m.max_err = err;
          out[next].m.reps = reps;
          finished(o, key, &out[next]);
          ++next;
          inflight = -1;
        }
      }
    }
    int status = 0;
    if (timed_out)
      kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fclose(in);
    if (next >= n)
      break;
    /* The worker ended early: the variant in flight (or, if it never got
     * that far, the next one) is recorded with the reason. */
    char why[160];
    if (timed_out)
      snprintf(why, sizeof why, "no result within %.0f s: worker killed", o->timeout_s);
    else if (WIFSIGNALED(status))
      snprintf(why, sizeof why, "worker killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
      snprintf(why, sizeof why, "worker exited with status %d", WEXITSTATUS(status));
    /* A worker that reported its last variant (a CUDA error ends it after
     * the report) owes nothing: go on in a fresh one.  Only a worker that
     * made no progress at all is charged with the next variant. */
    if (inflight < 0 && !timed_out && WIFEXITED(status) && WEXITSTATUS(status) != 2 && next > first)
      continue;
    if (inflight < 0 && !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 2) {
      /* The worker could not even set up: nothing more to learn here. */
      skip_rest(p, key, vs, next, n, o, out, why);
      break;
    }
    kt_tune_result_set(&out[next], p, vs[next], timed_out ? "timed_out" : "launch_failed", why);
    finished(o, key, &out[next]);
    ++next;
  }
}

/* One GPU's share of a problem's variants. */
typedef struct share {
  const kt_problem *p;
  const char *key;
  kt_workers_opts o; /* with the GPU in o.device */
  const kt_variant **vs;
  int *at; /* where each result goes in the caller's out[] */
  int n;
  kt_tune_result *out;
} share;

static void *run_share(void *arg)
{
  share *s = arg;
  kt_workers_run(s->p, s->key, s->vs, s->n, &s->o, s->out);
  return NULL;
}

void kt_workers_run_spread(const kt_problem *p, const char *key, const kt_variant **vs, const int *devices, int n,
                           const kt_workers_opts *o, kt_tune_result *out)
{
  share *sh = calloc((size_t)n + 1, sizeof *sh);
  const kt_variant **svs = calloc((size_t)n + 1, sizeof *svs);
  int *sat = calloc((size_t)n + 1, sizeof *sat);
  kt_tune_result *sout = calloc((size_t)n + 1, sizeof *sout);
  pthread_t *tid = calloc((size_t)n + 1, sizeof *tid);
  int *started = calloc((size_t)n + 1, sizeof *started);
  if (!sh || !svs || !sat || !sout || !tid || !started) {
    for (int i = 0; i < n; ++i) {
      kt_tune_result_set(&out[i], p, vs[i], "skipped", "out of memory");
      if (o->event)
        o->event(o->user, key, NULL, devices[i], &out[i]);
    }
    goto done;
  }
  /* The shares, in the order their GPUs first appear; each takes a slice
   * of svs, sat and sout. */
  int nsh = 0, used = 0;
  for (int i = 0; i < n; ++i) {
    int g = 0;
    while (g < nsh && sh[g].o.device != devices[i])
      ++g;
    if (g < nsh)
      continue;
    share *s = &sh[nsh++];
    *s = (share){p, key, *o, svs + used, sat + used, 0, sout + used};
    s->o.device = devices[i];
    for (int j = i; j < n; ++j)
      if (devices[j] == devices[i]) {
        s->vs[s->n] = vs[j];
        s->at[s->n++] = j;
      }
    used += s->n;
  }
  /* One thread per GPU; the last share (or one no thread could take) runs
   * on this thread. */
  for (int g = 0; g + 1 < nsh; ++g)
    started[g] = pthread_create(&tid[g], NULL, run_share, &sh[g]) == 0;
  for (int g = 0; g < nsh; ++g)
    if (!started[g])
      run_share(&sh[g]);
  for (int g = 0; g < nsh; ++g) {
    if (started[g])
      pthread_join(tid[g], NULL);
    for (int j = 0; j < sh[g].n; ++j)
      out[sh[g].at[j]] = sh[g].out[j];
  }
done:
  free(sh), free(svs), free(sat), free(sout), free(tid), free(started);
}
