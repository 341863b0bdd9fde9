/* SPDX-License-Identifier: MIT */
/* tuner/workers.c: run measurements in worker processes (kt_workers_).
 *
 * A kernel that faults poisons the CUDA context of its whole process, and
 * one that hangs never returns, so the tuner never measures in its own
 * process.  It starts a worker (`ktune __worker DEVICE`, worker.c), gives
 * it a job on its stdin (the family, the problem, the distribution, the
 * seed and the variants) and reads its lines as they come:
 *   START name                  the variant now in flight (its deadline starts)
 *   RESULT name status ...      its result
 * If the worker dies or passes the deadline, the variant in flight is
 * recorded as launch_failed or timed_out, the worker is killed and reaped,
 * and a fresh one goes on with the rest.
 *
 * A worker spends a third of a second making its CUDA context before it
 * can measure (on an H100), once per problem: a tenth of a tune of the
 * default problems.  So with spares (kt_workers_spares), the first worker
 * of each problem is one started while the problem before was measured,
 * its context ready; taking it starts the next.  A spare waits on its
 * stdin and does nothing on the GPU until it has a job.
 *
 * On a host with several GPUs, kt_workers_run_spread gives each GPU its
 * share of the variants and runs the shares at once, one thread (and so
 * one worker at a time) per GPU; each share is a kt_workers_run of its own,
 * so a crash or a hang still costs one variant.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kt_internal.h"
#include "tuner.h"

/* Milliseconds from now to deadline, for poll: 0 once it has passed, and
 * at most INT_MAX (24.8 days), so that a --timeout of 1e9 or inf waits
 * that long rather than wrapping to a negative wait, which times out at
 * once. */
static int ms_until(double deadline)
{
  const double ms = (deadline - kt_now_s()) * 1000;
  return ms <= 0 ? 0 : ms >= INT_MAX ? INT_MAX : (int)ms;
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

/* A worker process: its pid, the end of its stdout the tuner reads and the
 * end of its stdin the tuner writes (-1 once closed). */
typedef struct proc {
  pid_t pid;
  int out, in;
} proc;

/* Start `exe __worker DEVICE` (exe NULL: this program) into w: 0, or -1
 * with errno.  Its stdin is a socket, so that writing to a worker that has
 * died is an error (EPIPE) rather than SIGPIPE. */
static int spawn(const char *exe, int device, proc *w)
{
  /* Close-on-exec: a worker that another thread starts meanwhile must not
   * hold these open, or this one's end would go unseen. */
  int out[2], in[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return -1;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
    const int e = errno;
    close(out[0]), close(out[1]);
    errno = e;
    return -1;
  }
  char dev[16];
  snprintf(dev, sizeof dev, "%d", device);
  char *const argv[] = {"ktune", "__worker", dev, NULL};
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(out[0]), close(out[1]), close(in[0]), close(in[1]);
    errno = e;
    return -1;
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans if the tuner dies */
    if (getppid() == 1)               /* ... even if it died before prctl */
      _exit(127);
    dup2(out[1], STDOUT_FILENO);
    dup2(in[1], STDIN_FILENO);
    execv(exe ? exe : "/proc/self/exe", argv);
    _exit(127);
  }
  close(out[1]);
  close(in[1]);
  *w = (proc){pid, out[0], in[0]};
  return 0;
}

/* Write all of buf to a worker's stdin within timeout_s: 0, or -1 (it has
 * gone, or read nothing for that long: a worker reads its job once its
 * CUDA context is made, and a job longer than the socket's buffer waits
 * for that). */
static int send_all(int fd, const char *buf, size_t len, double timeout_s)
{
  const double deadline = kt_now_s() + timeout_s;
  while (len > 0) {
    const ssize_t k = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      buf += k, len -= (size_t)k;
      continue;
    }
    if (k < 0 && errno == EINTR)
      continue;
    if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
      return -1;
    struct pollfd pf = {fd, POLLOUT, 0};
    const int wait_ms = ms_until(deadline);
    if (wait_ms <= 0 || (poll(&pf, 1, wait_ms) < 0 && errno != EINTR))
      return -1;
  }
  return 0;
}

/* Give w its job, vs[from..n) of p, and close its stdin: 0, or -1 when w
 * cannot take it (gone, or out of memory here). */
static int send_job(proc *w, const kt_problem *p, const kt_variant **vs, int from, int n, const kt_workers_opts *o)
{
  const kt_family_ops *ops = kt_family_get(p->family);
  size_t len = 256;
  for (int i = from; i < n; ++i)
    len += strlen(vs[i]->name) + 1;
  char *buf = malloc(len), problem[96];
  int rc = -1;
  if (buf) {
    ops->key(p, problem, sizeof problem);
    size_t k = (size_t)snprintf(buf, len, "%s\n%s\n%s\n%llu\n", ops->name, problem, p->dist[0] ? p->dist : "-",
                                o->seed + (unsigned long long)from * 7919u);
    for (int i = from; i < n && k < len; ++i)
      k += (size_t)snprintf(buf + k, len - k, "%s\n", vs[i]->name);
    rc = k < len ? send_all(w->in, buf, k, o->timeout_s) : -1;
  }
  free(buf);
  close(w->in);
  w->in = -1;
  return rc;
}

/* Kill and reap w. */
static void end_proc(proc *w)
{
  if (w->pid <= 0)
    return;
  kill(w->pid, SIGKILL);
  waitpid(w->pid, NULL, 0);
  if (w->in >= 0)
    close(w->in);
  close(w->out);
  w->pid = 0;
}

struct kt_workers_spares {
  const char *exe;
  proc w[KT_TUNE_MAX_GPUS]; /* pid 0: none */
};

kt_workers_spares *kt_workers_spares_new(const char *exe)
{
  kt_workers_spares *s = calloc(1, sizeof *s);
  if (s)
    s->exe = exe;
  return s;
}

void kt_workers_spares_free(kt_workers_spares *s)
{
  if (!s)
    return;
  for (int d = 0; d < KT_TUNE_MAX_GPUS; ++d)
    end_proc(&s->w[d]);
  free(s);
}

/* A worker for GPU device into w, with p's job from vs[from]: the spare
 * where there is one, else a new one; then a new spare for the next
 * taker, where it was taken or had not started.  0, or -1 with errno. */
static int start_worker(const kt_problem *p, const kt_variant **vs, int from, int n, const kt_workers_opts *o,
                        kt_workers_spares *spares, proc *w)
{
  const int d = o->device;
  proc *spare = spares && d >= 0 && d < KT_TUNE_MAX_GPUS ? &spares->w[d] : NULL;
  int sent = 0;
  if (spare && spare->pid > 0) {
    *w = *spare;
    spare->pid = 0;
    sent = send_job(w, p, vs, from, n, o) == 0;
    if (!sent)
      end_proc(w); /* the spare had gone: a new worker instead */
  }
  if (!sent) {
    if (spawn(o->exe, d, w) != 0)
      return -1;
    /* A worker that dies before reading its job shows as one that ended
     * early: its exit status below says why. */
    send_job(w, p, vs, from, n, o);
  }
  if (spare && spare->pid <= 0 && spawn(spares->exe, d, spare) != 0)
    spare->pid = 0;
  return 0;
}

/* kt_workers_run from its first worker, where given (pid > 0: started,
 * its job sent).  The spares are taken on the caller's thread, never on a
 * share's: a worker dies with the thread that started it
 * (PR_SET_PDEATHSIG), and a spare must outlive the share that started it. */
static void run_from(const kt_problem *p, const char *key, const kt_variant **vs, int n, const kt_workers_opts *o,
                     const proc *first_worker, kt_tune_result *out)
{
  int next = 0; /* first variant not yet reported */
  while (next < n) {
    proc w;
    if (next == 0 && first_worker && first_worker->pid > 0)
      w = *first_worker;
    else if (start_worker(p, vs, next, n, o, NULL, &w) != 0) {
      skip_rest(p, key, vs, next, n, o, out, strerror(errno));
      return;
    }
    const pid_t pid = w.pid;
    const int first = next;
    FILE *in = fdopen(w.out, "r");
    /* Unbuffered: poll() watches the descriptor, so no line may wait in a
     * stdio buffer where poll cannot see it. */
    setvbuf(in, NULL, _IONBF, 0);
    int inflight = -1;
    double deadline = kt_now_s() + o->timeout_s;
    char line[1024];
    size_t len = 0;
    int timed_out = 0;
    for (;;) {
      struct pollfd pf = {w.out, POLLIN, 0};
      int pr = poll(&pf, 1, ms_until(deadline));
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
        deadline = kt_now_s() + o->timeout_s;
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

void kt_workers_run(const kt_problem *p, const char *key, const kt_variant **vs, int n, const kt_workers_opts *o,
                    kt_tune_result *out)
{
  if (!kt_family_get(p->family)) {
    skip_rest(p, key, vs, 0, n, o, out, "no such family");
    return;
  }
  proc first = {0};
  if (o->spares && n > 0 && start_worker(p, vs, 0, n, o, o->spares, &first) != 0)
    first.pid = 0;
  run_from(p, key, vs, n, o, &first, out);
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
  proc first; /* its first worker, a spare taken on the caller's thread (pid 0: none) */
} share;

static void *run_share(void *arg)
{
  share *s = arg;
  run_from(s->p, s->key, s->vs, s->n, &s->o, &s->first, s->out);
  return NULL;
}

/* Every variant of a spread problem gets no measurement, for one reason,
 * reported as on its GPU. */
static void skip_spread(const kt_problem *p, const char *key, const kt_variant **vs, const int *devices, int n,
                        const kt_workers_opts *o, kt_tune_result *out, const char *why)
{
  for (int i = 0; i < n; ++i) {
    kt_tune_result_set(&out[i], p, vs[i], "skipped", why);
    if (o->event)
      o->event(o->user, key, NULL, devices[i], &out[i]);
  }
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
    skip_spread(p, key, vs, devices, n, o, out, "out of memory");
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
    *s = (share){p, key, *o, svs + used, sat + used, 0, sout + used, {0}};
    s->o.device = devices[i];
    for (int j = i; j < n; ++j)
      if (devices[j] == devices[i]) {
        s->vs[s->n] = vs[j];
        s->at[s->n++] = j;
      }
    used += s->n;
  }
  if (!kt_family_get(p->family)) {
    skip_spread(p, key, vs, devices, n, o, out, "no such family");
    goto done;
  }
  for (int g = 0; g < nsh && o->spares; ++g)
    if (start_worker(p, sh[g].vs, 0, sh[g].n, &sh[g].o, o->spares, &sh[g].first) != 0)
      sh[g].first.pid = 0;
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
