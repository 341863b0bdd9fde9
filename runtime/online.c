/* SPDX-License-Identifier: MIT */
/* runtime/online.c: on-line tuning, off unless asked for ($KTUNE_ONLINE or
 * kt_online).  A shape that no tuned problem matches is dispatched by the
 * cost model, whose pick is within a few percent of the best variant on
 * most shapes but not on all (bench/reference/matmul_random/README.md).
 * With on-line tuning, the first calls of such a shape race the model's
 * few best candidates instead: each call runs one of them, timed by a pair
 * of CUDA events on the caller's stream, and once every candidate has
 * KT_RACE_SAMPLES times, the one with the least wins and serves every later
 * call of that shape in this context.
 *
 * What keeps it safe:
 * - only variants dispatch would choose anyway: those the tuned database
 *   holds (each checked against a reference before it was ranked) that
 *   serve the call; every call's result is correct whichever runs;
 * - the times are read without waiting: a call looks at the events of
 *   earlier calls and takes those that have completed (cudaEventQuery);
 *   nothing here synchronises the stream;
 * - a call on a stream being captured into a graph is not timed;
 * - a sample that cannot be timed (no events, a failed record or query) is
 *   dropped, a candidate that loses two is dropped (and cannot win), and
 *   with none timed the model's pick wins; a candidate that fails to launch
 *   is replaced by the model's pick where beta is 0 (kt_matmul).
 * What it costs: two event records on each of the first candidates x
 * KT_RACE_SAMPLES calls of a shape, which run the candidates rather than
 * the model's pick; a table of KT_RACE_SHAPES shapes per context (when it
 * is full, further shapes are dispatched by the model alone).  A winner is
 * kept for the context only: `ktune tune --misses` tunes such shapes for
 * good.
 *
 * The logic is free of CUDA except through a kt_race_timer, so that tests
 * can run it with a timer of their own. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kt_internal.h"

typedef enum { SLOT_FREE = 0, SLOT_RESERVED, SLOT_FLYING } slot_state;

#define KT_RACE_USED (KT_RACE_SHAPES * 3 / 4) /* entries a table takes: its probes stay short */

typedef struct race_slot {
  int state; /* slot_state: a reserved slot's events are not recorded yet, and are never queried */
  int cand;
  void *start, *stop;
} race_slot;

typedef struct race_entry {
  uint64_t key;  /* 0 = empty */
  int n, winner; /* candidates; the winner's index once decided, else -1 */
  int variant[KT_RACE_MAX];
  double predicted[KT_RACE_MAX];
  float best[KT_RACE_MAX]; /* least time measured (ms); INFINITY if none */
  int got[KT_RACE_MAX], flying[KT_RACE_MAX], lost[KT_RACE_MAX];
  race_slot slot[KT_RACE_SLOTS];
} race_entry;

struct kt_race {
  pthread_mutex_t lock;
  int candidates; /* 0 = off; read with relaxed atomics */
  kt_race_timer timer;
  race_entry *e; /* KT_RACE_SHAPES of them, made at the first race */
  int used;
};

/* ---- the CUDA events timer ------------------------------------------- */

/* Making, querying and destroying events are calls that a graph capture in
 * cudaStreamCaptureModeGlobal forbids to every thread (the capture would be
 * invalidated): on-line tuning's own are made in relaxed mode, which they
 * are safe in (they touch no capturing stream). */
typedef struct capture_mode {
  enum cudaStreamCaptureMode was;
  int set;
} capture_mode;

static capture_mode relaxed(void)
{
  capture_mode m = {cudaStreamCaptureModeRelaxed, 1};
  if (cudaThreadExchangeStreamCaptureMode(&m.was) != cudaSuccess) {
    cudaGetLastError();
    m.set = 0; /* the thread's mode stays as it was */
  }
  return m;
}

static void restore(capture_mode m)
{
  if (m.set && cudaThreadExchangeStreamCaptureMode(&m.was) != cudaSuccess)
    cudaGetLastError();
}

static int cuda_create(void *user, void **start, void **stop)
{
  (void)user;
  const capture_mode m = relaxed();
  cudaEvent_t a = NULL, b = NULL;
  int rc = 0;
  if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess) {
    cudaGetLastError();
    if (a && cudaEventDestroy(a) != cudaSuccess)
      cudaGetLastError();
    rc = -1;
  } else
    *start = a, *stop = b;
  restore(m);
  return rc;
}

static int cuda_query(void *user, void *start, void *stop, float *ms)
{
  (void)user;
  const capture_mode m = relaxed();
  const cudaError_t e = cudaEventQuery((cudaEvent_t)stop);
  int rc = 1;
  if (e == cudaErrorNotReady)
    rc = 0;
  else if (e != cudaSuccess || cudaEventElapsedTime(ms, (cudaEvent_t)start, (cudaEvent_t)stop) != cudaSuccess) {
    cudaGetLastError();
    rc = -1;
  }
  restore(m);
  return rc;
}

static void cuda_destroy(void *user, void *start, void *stop)
{
  (void)user;
  const capture_mode m = relaxed();
  if (start && cudaEventDestroy((cudaEvent_t)start) != cudaSuccess)
    cudaGetLastError();
  if (stop && cudaEventDestroy((cudaEvent_t)stop) != cudaSuccess)
    cudaGetLastError();
  restore(m);
}

/* ---- the table ------------------------------------------------------- */

kt_race *kt_race_new(const kt_race_timer *timer, int candidates)
{
  kt_race *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  if (pthread_mutex_init(&r->lock, NULL) != 0) {
    free(r);
    return NULL;
  }
  if (timer)
    r->timer = *timer;
  else
    r->timer = (kt_race_timer){NULL, cuda_create, cuda_query, cuda_destroy};
  kt_race_set(r, candidates);
  return r;
}

static void drop_events(kt_race *r, race_entry *e)
{
  for (int s = 0; s < KT_RACE_SLOTS; ++s)
    if (e->slot[s].start || e->slot[s].stop) {
      r->timer.destroy(r->timer.user, e->slot[s].start, e->slot[s].stop);
      e->slot[s].start = e->slot[s].stop = NULL;
    }
}

void kt_race_free(kt_race *r)
{
  if (!r)
    return;
  for (int i = 0; r->e && i < KT_RACE_SHAPES; ++i)
    drop_events(r, &r->e[i]);
  free(r->e);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

int kt_race_set(kt_race *r, int candidates)
{
  if (candidates < 0 || candidates > KT_RACE_MAX)
    return KT_ERR_BAD_OPTION;
  __atomic_store_n(&r->candidates, candidates, __ATOMIC_RELAXED);
  return KT_OK;
}

int kt_race_candidates(const kt_race *r)
{
  const int n = r ? __atomic_load_n(&r->candidates, __ATOMIC_RELAXED) : 0;
  return n >= 2 ? n : 0; /* one candidate is no race */
}

int kt_race_parse(const char *s, int *candidates)
{
  if (!s || !*s || strcmp(s, "off") == 0 || strcmp(s, "0") == 0) {
    *candidates = 0;
    return KT_OK;
  }
  if (strcmp(s, "on") == 0) {
    *candidates = KT_RACE_DEFAULT;
    return KT_OK;
  }
  char *end = NULL;
  const long n = *s >= '0' && *s <= '9' ? strtol(s, &end, 10) : -1;
  if (n < 2 || n > KT_RACE_MAX || *end)
    return KT_ERR_BAD_OPTION;
  *candidates = (int)n;
  return KT_OK;
}

/* Open addressing on the key: its entry, or the empty one it would take,
 * or NULL where the table is full. */
static race_entry *find(kt_race *r, uint64_t key)
{
  if (!r->e)
    return NULL;
  for (int i = 0; i < KT_RACE_SHAPES; ++i) {
    race_entry *e = &r->e[(key + (uint64_t)i) % KT_RACE_SHAPES];
    if (e->key == key || e->key == 0)
      return e;
  }
  return NULL;
}

/* Takes the samples that have completed; decides once every candidate has
 * its samples or has lost two, and no slot is in use. */
static void harvest(kt_race *r, race_entry *e)
{
  for (int s = 0; s < KT_RACE_SLOTS; ++s) {
    race_slot *sl = &e->slot[s];
    if (sl->state != SLOT_FLYING)
      continue;
    float ms = 0;
    const int q = r->timer.query(r->timer.user, sl->start, sl->stop, &ms);
    if (q == 0)
      continue;
    const int c = sl->cand;
    e->flying[c]--;
    if (q > 0 && kt_time_ranks(ms)) {
      e->got[c]++;
      if (ms < e->best[c])
        e->best[c] = ms;
    } else
      e->lost[c]++;
    sl->state = SLOT_FREE;
  }
  for (int c = 0; c < e->n; ++c)
    if (e->got[c] < KT_RACE_SAMPLES && e->lost[c] < 2)
      return;
  for (int s = 0; s < KT_RACE_SLOTS; ++s)
    if (e->slot[s].state != SLOT_FREE)
      return;
  /* The least time of a candidate not dropped; none timed: the model's pick. */
  int w = 0;
  for (int c = 1; c < e->n; ++c)
    if (e->lost[c] < 2 && (e->lost[w] >= 2 || e->best[c] < e->best[w]))
      w = c;
  e->winner = e->lost[w] < 2 && e->best[w] < INFINITY ? w : 0;
  drop_events(r, e);
}

static void report(const race_entry *e, kt_race_pick *p)
{
  memset(p, 0, sizeof *p);
  p->slot = -1;
  p->n = e->n;
  p->decided = e->winner >= 0;
  const int c = p->decided ? e->winner : 0;
  p->variant = e->variant[c];
  p->ms = e->best[c];
  p->predicted = e->predicted[c];
  p->first = e->variant[0];
  p->first_predicted = e->predicted[0];
  for (int i = 0; i < e->n; ++i)
    p->samples += e->got[i];
}

/* The call's pick from a live entry: the candidate with the fewest samples
 * taken or in flight, while it still needs some, timed in a free slot;
 * else (all that is needed is in flight, or no slot or events) the fastest
 * so far, untimed. */
static void pick(race_entry *e, kt_race_pick *p)
{
  report(e, p);
  if (e->winner >= 0)
    return;
  int c = -1;
  for (int i = 0; i < e->n; ++i)
    if (e->lost[i] < 2 && e->got[i] + e->flying[i] < KT_RACE_SAMPLES &&
        (c < 0 || e->got[i] + e->flying[i] < e->got[c] + e->flying[c]))
      c = i;
  int s = 0;
  while (s < KT_RACE_SLOTS && e->slot[s].state != SLOT_FREE)
    ++s;
  if (c < 0 || s == KT_RACE_SLOTS) {
    int f = 0;
    for (int i = 1; i < e->n; ++i)
      if (e->best[i] < e->best[f])
        f = i;
    p->variant = e->variant[f];
    return;
  }
  e->slot[s].state = SLOT_RESERVED;
  e->slot[s].cand = c;
  e->flying[c]++;
  p->variant = e->variant[c];
  p->slot = s;
  p->entry = e;
}

/* A call joins e's race: its samples taken, its pick made; the state. */
static int join(kt_race *r, race_entry *e, kt_race_pick *p)
{
  harvest(r, e);
  pick(e, p);
  return e->winner >= 0 ? KT_RACE_DECIDED : KT_RACE_RACING;
}

int kt_race_begin(kt_race *r, uint64_t key, kt_race_pick *p)
{
  if (!kt_race_candidates(r))
    return KT_RACE_OFF;
  pthread_mutex_lock(&r->lock);
  race_entry *e = find(r, key);
  int st;
  if (!r->e || (e && e->key == 0))
    st = r->used < KT_RACE_USED ? KT_RACE_UNKNOWN : KT_RACE_OFF; /* full: no new race */
  else
    st = e ? join(r, e, p) : KT_RACE_OFF;
  pthread_mutex_unlock(&r->lock);
  return st;
}

int kt_race_peek(kt_race *r, uint64_t key, kt_race_pick *p)
{
  if (!r)
    return KT_RACE_OFF;
  pthread_mutex_lock(&r->lock);
  race_entry *e = find(r, key);
  int st = KT_RACE_UNKNOWN;
  if (e && e->key == key) {
    report(e, p);
    st = e->winner >= 0 ? KT_RACE_DECIDED : KT_RACE_RACING;
  }
  pthread_mutex_unlock(&r->lock);
  return st;
}

int kt_race_add(kt_race *r, uint64_t key, int n, const int *variant, const double *predicted, kt_race_pick *p)
{
  if (!kt_race_candidates(r) || n < 1 || key == 0)
    return KT_RACE_OFF;
  if (n > KT_RACE_MAX)
    n = KT_RACE_MAX;
  pthread_mutex_lock(&r->lock);
  if (!r->e)
    r->e = calloc(KT_RACE_SHAPES, sizeof *r->e);
  race_entry *e = find(r, key);
  int st = KT_RACE_OFF;
  if (e && e->key == 0 && r->used < KT_RACE_USED) {
    memset(e, 0, sizeof *e);
    e->key = key;
    e->n = n;
    e->winner = n == 1 ? 0 : -1;
    for (int c = 0; c < n; ++c) {
      e->variant[c] = variant[c];
      e->predicted[c] = predicted[c];
      e->best[c] = INFINITY;
    }
    r->used++;
  }
  if (e && e->key == key) /* ours, or another thread's of the same shape */
    st = join(r, e, p);
  pthread_mutex_unlock(&r->lock);
  return st;
}

int kt_race_events(kt_race *r, kt_race_pick *p)
{
  if (!r || !p->entry || p->slot < 0)
    return -1;
  pthread_mutex_lock(&r->lock);
  race_slot *sl = &((race_entry *)p->entry)->slot[p->slot];
  if (!sl->start && r->timer.create(r->timer.user, &sl->start, &sl->stop) != 0)
    sl->start = sl->stop = NULL;
  p->start = sl->start, p->stop = sl->stop;
  pthread_mutex_unlock(&r->lock);
  return p->start ? 0 : -1;
}

void kt_race_end(kt_race *r, const kt_race_pick *p, int recorded)
{
  if (!r || !p->entry || p->slot < 0)
    return;
  pthread_mutex_lock(&r->lock);
  race_entry *e = p->entry;
  race_slot *sl = &e->slot[p->slot];
  if (recorded)
    sl->state = SLOT_FLYING;
  else { /* the launch or an event record failed: a lost sample */
    e->flying[sl->cand]--;
    e->lost[sl->cand]++;
    sl->state = SLOT_FREE;
  }
  pthread_mutex_unlock(&r->lock);
}
