/* SPDX-License-Identifier: MIT */
/* runtime/context.c: contexts (kt_open, kt_close) and what the family
 * modules' API functions share: the open-context check, the device pointer
 * check, the tuned problems of a family, and launching.
 *
 * A context is immutable once kt_open returns (device facts and the tuned
 * winners, loaded once), so calls on one context from several threads need
 * no lock beyond the check that the context is open.  (A family's decision
 * cache inside it is written with atomics, and any torn entry is checked;
 * the misses table (misses.c) and on-line tuning's races (online.c) take
 * care of themselves.)
 *
 * kt_close keeps the context's misses beside the user database (misses.c
 * has the format), and nowhere else: not without a user database path, not
 * where that is the system database, not into a folder that does not exist
 * (the library makes no folders), not with KTUNE_MISSES=off.  Any failure there is logged and
 * dropped: closing never fails.  Where they go is fixed at kt_open: a
 * relative database path names a file of the folder current then, as it
 * did for the database.  A folder this user cannot write (a shared or
 * read-only database's) is said at info level only: no close there could
 * keep them, nor a tune write the database.  Other failures warn once a
 * process, then at info level too: an application that opens and closes
 * contexts by the thousand must not fill its log with one fact.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "kt_internal.h"

struct kt_context {
  kt_device_info dev;
  int described;                                      /* no real device behind it (tests, tools) */
  kt_results results;                                 /* tuned problems, by family, from the layers */
  int first[KT_MAX_FAMILIES], count[KT_MAX_FAMILIES]; /* each family's slice of tuned */
  void *state[KT_MAX_FAMILIES];                       /* each family's build() */
  kt_log_fn log;
  void *log_user;
  int log_level;
  char device_line[320];
  FILE *log_stream;      /* $KTUNE_LOG without a callback: stderr */
  uintptr_t checked[64]; /* pointers already found to be device memory */
  void *pool;            /* scratch pool of the device (kt_device_pool) */
  kt_misses *misses;     /* problems served without their own tuned entry; NULL: none kept */
  char user_db[PATH_MAX + 1024]; /* the user database's path made absolute at open; "": none */
  kt_race *race;         /* on-line tuning (online.c); NULL only when out of memory */
};

/* Open contexts.  A call on a pointer not in this set (NULL, closed, or
 * never opened) gets KT_ERR_BAD_CONTEXT instead of touching freed memory. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static kt_context **live;
static int nlive, caplive;

static int live_add(kt_context *c)
{
  pthread_mutex_lock(&live_lock);
  int rc = KT_OK;
  if (nlive == caplive) {
    int cap = caplive ? 2 * caplive : 8;
    kt_context **nl = realloc(live, (size_t)cap * sizeof *nl);
    if (!nl)
      rc = KT_ERR_NO_MEMORY;
    else {
      live = nl;
      caplive = cap;
    }
  }
  if (rc == KT_OK)
    live[nlive++] = c;
  pthread_mutex_unlock(&live_lock);
  return rc;
}

static int live_remove(kt_context *c)
{
  int found = 0;
  pthread_mutex_lock(&live_lock);
  for (int i = 0; i < nlive; ++i)
    if (live[i] == c) {
      live[i] = live[--nlive];
      found = 1;
      break;
    }
  if (nlive == 0) {
    free(live);
    live = NULL;
    caplive = 0;
  }
  pthread_mutex_unlock(&live_lock);
  return found;
}

int kt_context_check(const kt_context *c)
{
  if (!c)
    return KT_ERR_BAD_CONTEXT;
  int found = 0;
  pthread_mutex_lock(&live_lock);
  for (int i = 0; i < nlive && !found; ++i)
    found = live[i] == c;
  pthread_mutex_unlock(&live_lock);
  return found ? KT_OK : KT_ERR_BAD_CONTEXT;
}

__attribute__((format(printf, 3, 4))) static void logf_(void *ctx, int level, const char *fmt, ...)
{
  const kt_context *c = ctx;
  if ((!c->log && !c->log_stream) || level > c->log_level)
    return;
  char buf[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (c->log)
    c->log(level, buf, c->log_user);
  else
    fprintf(c->log_stream, "%s\n", buf);
}

/* $KTUNE_LOG: the level of messages sent to stderr when no callback is set
 * (the names in any case); -1 when unset or empty.  Any other value asked
 * for a log and would get silence: said once a process on stderr. */
static int env_log_level(void)
{
  static const char *const names[] = {"error", "warn", "info", "debug"};
  static int told;
  const char *e = getenv("KTUNE_LOG");
  if (!e || !*e)
    return -1;
  for (int i = 0; i < 4; ++i)
    if (strcasecmp(e, names[i]) == 0)
      return i;
  if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
    fprintf(stderr, "ktune: KTUNE_LOG=%.40s is not error, warn, info or debug: no log\n", e);
  return -1;
}

kt_options kt_default_options(void)
{
  kt_options o;
  memset(&o, 0, sizeof o);
  o.device = -1;
  o.log_level = KT_LOG_WARN;
  o.system_db_path = NULL;
  return o;
}

/* Before there is a context: to the callback, else to stderr if $KTUNE_LOG
 * asks for errors at least. */
__attribute__((format(printf, 2, 3))) static void open_error(const kt_options *opts, const char *fmt, ...)
{
  char m[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  if (opts && opts->log)
    opts->log(KT_LOG_ERROR, m, opts->log_user);
  else if (env_log_level() >= KT_LOG_ERROR)
    fprintf(stderr, "%s\n", m);
}

static void release_states(kt_context *c)
{
  for (int f = 0; f < kt_family_count && f < KT_MAX_FAMILIES; ++f)
    if (c->state[f] && kt_families[f]->release)
      kt_families[f]->release(c->state[f]);
}

/* The user database's path as the folder current now names it, for
 * kt_close to keep the misses beside (see the top); "" when there is no
 * current folder to name it by. */
static void absolute_user_db(kt_context *c)
{
  const char *db = c->results.layer[0].path;
  char cwd[PATH_MAX];
  if (!db[0] || db[0] == '/')
    snprintf(c->user_db, sizeof c->user_db, "%s", db);
  else if (getcwd(cwd, sizeof cwd))
    snprintf(c->user_db, sizeof c->user_db, "%s/%s", cwd, db);
  else
    logf_(c, KT_LOG_DEBUG, "ktune: misses will not be kept: no current folder to find %s in (%s)", db, strerror(errno));
}

/* Shared by kt_open and kt_open_described: everything after the device. */
static int finish_open(kt_context **out, const kt_device_info *dev, int described, const kt_options *opts)
{
  kt_options o = opts ? *opts : kt_default_options();
  if (o.log_level < KT_LOG_ERROR || o.log_level > KT_LOG_DEBUG)
    return KT_ERR_BAD_OPTION;
  kt_context *c = calloc(1, sizeof *c);
  if (!c)
    return KT_ERR_NO_MEMORY;
  c->dev = *dev;
  c->described = described;
  c->log = o.log;
  c->log_user = o.log_user;
  c->log_level = o.log_level;
  if (!c->log && env_log_level() >= 0) {
    c->log_stream = stderr;
    c->log_level = env_log_level();
  }
  snprintf(c->device_line, sizeof c->device_line, "%s, sm_%d, %d SMs", dev->name, dev->cc, dev->sm_count);

  int rc = kt_results_load(&c->results, dev, o.db_path, o.system_db_path, logf_, c);
  for (int i = c->results.ntuned - 1; rc == KT_OK && i >= 0; --i) {
    const int f = (int)c->results.tuned[i].problem.family;
    if (f >= 0 && f < KT_MAX_FAMILIES) {
      c->first[f] = i;
      c->count[f]++;
    }
  }
  for (int f = 0; rc == KT_OK && f < kt_family_count && f < KT_MAX_FAMILIES; ++f)
    if (kt_families[f]->build)
      c->state[f] = kt_families[f]->build(c->results.tuned + c->first[f], c->count[f], &c->dev);
  const char *keep = getenv("KTUNE_MISSES");
  if (rc == KT_OK && !(keep && strcmp(keep, "off") == 0))
    c->misses = kt_misses_new();
  if (rc == KT_OK && c->misses)
    absolute_user_db(c);
  int online = 0;
  if (kt_race_parse(getenv("KTUNE_ONLINE"), &online) != KT_OK)
    logf_(c, KT_LOG_WARN, "ktune: KTUNE_ONLINE=%s is not off, on or 2..%d: on-line tuning stays off",
          getenv("KTUNE_ONLINE"), KT_RACE_MAX);
  if (rc == KT_OK)
    c->race = kt_race_new(NULL, online);
  if (rc != KT_OK || (rc = live_add(c)) != KT_OK) {
    kt_race_free(c->race);
    kt_misses_free(c->misses);
    release_states(c);
    free(c->results.tuned);
    free(c);
    return rc;
  }
  *out = c;
  return KT_OK;
}

int kt_open(kt_context **out, const kt_options *opts)
{
  if (!out)
    return KT_ERR_NULL_POINTER;
  *out = NULL;
  if (opts && opts->device < -1) {
    open_error(opts, "ktune: device %d: give a CUDA device ordinal, or -1 for the current device", opts->device);
    return KT_ERR_BAD_DEVICE;
  }
  /* Options are checked before CUDA is touched: a bad one initialises no
   * device (finish_open checks it again for kt_open_described). */
  if (opts && (opts->log_level < KT_LOG_ERROR || opts->log_level > KT_LOG_DEBUG))
    return KT_ERR_BAD_OPTION;
  kt_device_info dev;
  char err[256];
  int rc = kt_device_query(opts ? opts->device : -1, &dev, err, sizeof err);
  if (rc != KT_OK) {
    open_error(opts, "ktune: %s", err);
    return rc;
  }
  if ((rc = kt_device_supported(&dev, err, sizeof err)) != KT_OK) {
    open_error(opts, "ktune: %s", err);
    return rc;
  }
  kt_device_clusters(&dev); /* for matmul's cost model */
  rc = finish_open(out, &dev, 0, opts);
  if (rc == KT_OK)
    (*out)->pool = kt_device_pool(dev.ordinal);
  return rc;
}

int kt_open_described(kt_context **out, const kt_device_info *dev, const kt_options *opts)
{
  if (!out || !dev)
    return KT_ERR_NULL_POINTER;
  *out = NULL;
  return finish_open(out, dev, 1, opts);
}

/* Whether kt_close has warned of misses it could not keep (see the top). */
static int misses_warned;

/* Whether two paths name one file: the same text, or (both there) the
 * same file under two names (a link, another spelling). */
static int same_file(const char *a, const char *b)
{
  struct stat x, y;
  return strcmp(a, b) == 0 ||
         (a[0] && b[0] && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino);
}

/* See the top: where misses are kept, and that nothing here fails. */
static void save_misses(const kt_context *c)
{
  const kt_results_layer *user = &c->results.layer[0], *sys = &c->results.layer[1];
  char path[PATH_MAX + 1040], dir[PATH_MAX + 1040], err[PATH_MAX + 1400];
  if (!c->misses || !c->user_db[0] || same_file(user->path, sys->path) ||
      kt_misses_path(c->user_db, path, sizeof path) != KT_OK)
    return;
  /* Beside a tuning database, or where one will be made; never beside a
   * file refused as one (another program's, a folder, a newer schema...). */
  if (user->status != KT_OK && user->status != KT_ERR_DB_MISSING) {
    logf_((void *)c, KT_LOG_DEBUG, "ktune: misses not kept: %s is no tuning database (%s)", user->path,
          kt_strerror(user->status));
    return;
  }
  kt_db_folder(c->user_db, dir, sizeof dir);
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    logf_((void *)c, KT_LOG_DEBUG, "ktune: misses not kept: no folder %s", dir);
    return;
  }
  if (faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) != 0) {
    logf_((void *)c, KT_LOG_INFO,
          "ktune: misses not kept: folder %s is read-only for this user (%s), and so is the database in it", dir,
          strerror(errno));
    return;
  }
  err[0] = 0;
  const int rc = kt_misses_save(c->misses, c->dev.fingerprint, path, err, sizeof err);
  if (rc != KT_OK) {
    const int first = !__atomic_exchange_n(&misses_warned, 1, __ATOMIC_RELAXED);
    logf_((void *)c, first ? KT_LOG_WARN : KT_LOG_INFO, "ktune: misses not kept: %s%s", err[0] ? err : kt_strerror(rc),
          first ? " (warned once a process; later ones at info level)" : "");
  }
}

void kt_close(kt_context *c)
{
  if (!c || !live_remove(c))
    return;
  save_misses(c);
  kt_race_free(c->race);
  kt_misses_free(c->misses);
  release_states(c);
  free(c->results.tuned);
  free(c);
}

int kt_online(kt_context *c, int candidates)
{
  int rc = kt_context_check(c);
  if (rc != KT_OK)
    return rc;
  if (candidates < 0 || candidates > KT_RACE_MAX || candidates == 1)
    return KT_ERR_BAD_OPTION;
  return c->race ? kt_race_set(c->race, candidates) : KT_ERR_NO_MEMORY;
}

const char *kt_device_name(const kt_context *c)
{
  return kt_context_check(c) == KT_OK ? c->device_line : "(no context)";
}

int kt_tuned_count(const kt_context *c)
{
  return kt_context_check(c) == KT_OK ? c->results.ntuned : 0;
}

/* Is p device memory (or managed memory) usable on the context's device?
 *
 * Asking the driver costs a few hundred nanoseconds per pointer, more than
 * the whole rest of a call, and applications pass the same buffers again and
 * again.  So pointers that passed are remembered in a small direct-mapped
 * table (relaxed atomics: a lost update only costs another query).  A host
 * pointer never passes, so it is never remembered and is always refused.
 * The cost: a device buffer freed after a call passed it stays in the table,
 * so a later use-after-free of it is not refused here but fails in the
 * kernel, as it would in any CUDA library. */
int kt_context_device_pointer(kt_context *c, const void *p)
{
  if (c->described)
    return 0;
  const uintptr_t u = (uintptr_t)p;
  /* Fibonacci hashing: cudaMalloc pointers share their low 21 bits. */
  uintptr_t *slot = &c->checked[(uint64_t)u * 0x9e3779b97f4a7c15ull >> 58];
  if (__atomic_load_n(slot, __ATOMIC_RELAXED) == u)
    return 1;
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  const int ok = a.type == cudaMemoryTypeManaged || (a.type == cudaMemoryTypeDevice && a.device == c->dev.ordinal);
  if (ok)
    __atomic_store_n(slot, u, __ATOMIC_RELAXED);
  return ok;
}

/* ---- launching ------------------------------------------------------- */

/* fn(args, stream) on the context's device (made current for the call and
 * restored after it), named `what` in the log if it fails; where p holds a
 * race's sample slot (online.c), timed by its events, made and recorded
 * with that device current, and handed back to the race either way (a
 * failed record, not sticky, only costs the sample). */
static int run(const kt_context *c, const char *what, kt_launch_fn fn, const void *args, kt_stream stream,
               kt_race_pick *p)
{
  const int timing = p && p->slot >= 0;
  int prev = -1;
  if (c->described || cudaGetDevice(&prev) != cudaSuccess ||
      (prev != c->dev.ordinal && cudaSetDevice(c->dev.ordinal) != cudaSuccess)) {
    if (!c->described)
      cudaGetLastError();
    if (timing)
      kt_race_end(c->race, p, 0);
    return c->described ? KT_ERR_NO_DEVICE : KT_ERR_CUDA;
  }
  int timed = 0;
  if (timing && kt_race_events(c->race, p) == 0) {
    timed = cudaEventRecord((cudaEvent_t)p->start, (cudaStream_t)stream) == cudaSuccess;
    if (!timed)
      cudaGetLastError();
  }
  const int e = fn(args, (cudaStream_t)stream);
  int rc = KT_OK;
  if (e != cudaSuccess) {
    cudaGetLastError();
    logf_((void *)c, KT_LOG_ERROR, "ktune: %s: %s", what, cudaGetErrorString((cudaError_t)e));
    /* A launcher's scratch (a repack, a split-K workspace) that the GPU's
     * memory cannot hold fails before that launcher launches anything:
     * the caller can free memory and call again, which a failed launch
     * does not say (a call of several launches may have run some). */
    rc = e == cudaErrorMemoryAllocation ? KT_ERR_DEVICE_MEMORY : KT_ERR_LAUNCH, timed = 0;
  } else if (timed && cudaEventRecord((cudaEvent_t)p->stop, (cudaStream_t)stream) != cudaSuccess) {
    cudaGetLastError();
    timed = 0;
  }
  if (timing)
    kt_race_end(c->race, p, timed);
  if (prev != c->dev.ordinal)
    cudaSetDevice(prev);
  return rc;
}

static int launch(const kt_context *c, const kt_variant *v, const void *args, kt_stream stream, kt_race_pick *p)
{
  return run(c, v->name, v->launch, args, stream, p);
}

int kt_context_launch(const kt_context *c, const kt_variant *v, const void *args, kt_stream stream)
{
  return launch(c, v, args, stream, NULL);
}

int kt_context_run(const kt_context *c, const char *what, kt_launch_fn fn, const void *args, kt_stream stream)
{
  return run(c, what, fn, args, stream, NULL);
}

kt_race *kt_context_race(const kt_context *c)
{
  return kt_race_candidates(c->race) ? c->race : NULL;
}

int kt_context_may_time(const kt_context *c, kt_stream stream)
{
  if (c->described)
    return 0;
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  /* An error here (the legacy stream while another captures globally) is
   * the launch's to report; it is not left behind as the last error. */
  if (cudaStreamIsCapturing((cudaStream_t)stream, &st) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return st == cudaStreamCaptureStatusNone;
}

int kt_context_launch_raced(const kt_context *c, const kt_variant *v, const void *args, kt_stream stream,
                            kt_race_pick *p)
{
  return launch(c, v, args, stream, p);
}

const kt_device_info *kt_context_device(const kt_context *c)
{
  return &c->dev;
}

void *kt_context_pool(const kt_context *c)
{
  return c->pool;
}

const kt_tuned *kt_context_tuned(const kt_context *c, kt_family f, int *n)
{
  if ((int)f < 0 || (int)f >= KT_MAX_FAMILIES || c->count[f] == 0) {
    *n = 0;
    return NULL;
  }
  *n = c->count[f];
  return c->results.tuned + c->first[f];
}

void kt_context_miss(const kt_context *c, const kt_tuned *nearest, const kt_problem *p)
{
  kt_misses_note(c->misses, nearest, p);
}

const kt_misses *kt_context_misses(const kt_context *c)
{
  return c->misses;
}

void kt_context_keep_no_misses(kt_context *c)
{
  kt_misses_free(c->misses);
  c->misses = NULL;
}

void *kt_context_state(const kt_context *c, kt_family f)
{
  return (int)f >= 0 && (int)f < KT_MAX_FAMILIES ? c->state[f] : NULL;
}
