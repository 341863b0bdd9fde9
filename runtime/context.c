/* runtime/context.c: the public API (ktune.h): contexts, argument checks,
 * dispatch and launch.
 *
 * A context is immutable once kt_open returns (device facts and the tuned
 * winners, loaded once), so calls on one context from several threads need
 * no lock beyond the check that the context is open.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kt_internal.h"
#include "registry.h"

/* Largest M, N or K: INT_MAX less room for a tile's overshoot. */
#define KT_MAX_DIM (INT_MAX - 1024)

#ifndef KT_DEFAULT_DB
#define KT_DEFAULT_DB "tuning-db/ktune.db"
#endif

struct kt_context {
  kt_device_info dev;
  int described; /* no real device behind it (tests, tools) */
  kt_tuned *tuned;
  int ntuned;
  kt_log_fn log;
  void *log_user;
  int log_level;
  char device_line[320];
  uintptr_t checked[64]; /* pointers already found to be device memory */
  void *pool;            /* scratch pool of the device (kt_device_pool) */
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

static int live_check(const kt_context *c)
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

__attribute__((format(printf, 3, 4))) static void logf_(const kt_context *c, int level, const char *fmt, ...)
{
  if (!c->log || level > c->log_level)
    return;
  char buf[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  c->log(level, buf, c->log_user);
}

kt_options kt_default_options(void)
{
  kt_options o;
  memset(&o, 0, sizeof o);
  o.device = -1;
  o.log_level = KT_LOG_WARN;
  return o;
}

static int target_cc(void)
{
  int cc = 0;
  sscanf(kt_registry_target, "sm_%d", &cc);
  return cc;
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
  snprintf(c->device_line, sizeof c->device_line, "%s, sm_%d, %d SMs", dev->name, dev->cc, dev->sm_count);

  const char *path = o.db_path;
  if (!path)
    path = getenv("KTUNE_DB");
  if (!path || !*path)
    path = KT_DEFAULT_DB;
  kt_db *db = NULL;
  char err[512] = "";
  int rc = kt_db_open(&db, path, KT_DB_READ, err, sizeof err);
  if (rc == KT_OK)
    rc = kt_db_load(db, dev->fingerprint, kt_registry_generator_version, &c->tuned, &c->ntuned, err, sizeof err);
  kt_db_close(db);
  if (rc != KT_OK)
    logf_(c, KT_LOG_WARN, "ktune: tuning database %s: %s (%s); using the default variants", path, kt_strerror(rc), err);
  else
    logf_(c, KT_LOG_INFO, "ktune: %d tuned problems for %s from %s", c->ntuned, dev->fingerprint, path);
  if ((rc = live_add(c)) != KT_OK) {
    free(c->tuned);
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
  kt_device_info dev;
  char err[256];
  int rc = kt_device_query(opts ? opts->device : -1, &dev, err, sizeof err);
  if (rc != KT_OK) {
    if (opts && opts->log)
      opts->log(KT_LOG_ERROR, err, opts->log_user);
    return rc;
  }
  if (dev.cc < target_cc()) {
    if (opts && opts->log) {
      char m[320];
      snprintf(m, sizeof m, "ktune: built for %s, device is sm_%d: run make tune on this GPU", kt_registry_target,
               dev.cc);
      opts->log(KT_LOG_ERROR, m, opts->log_user);
    }
    return KT_ERR_UNSUPPORTED_DEVICE;
  }
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

void kt_close(kt_context *c)
{
  if (!c || !live_remove(c))
    return;
  free(c->tuned);
  free(c);
}

const char *kt_device_name(const kt_context *c)
{
  return live_check(c) == KT_OK ? c->device_line : "(no context)";
}

int kt_tuned_count(const kt_context *c)
{
  return live_check(c) == KT_OK ? c->ntuned : 0;
}

/* ---- argument checks ------------------------------------------------- */

/* Elements spanned by rows x cols with row stride ld, as bytes; 0 on overflow. */
static int span_ok(long long rows, long long cols, long long ld)
{
  long long e;
  if (__builtin_mul_overflow(rows - 1, ld, &e) || __builtin_add_overflow(e, cols, &e))
    return 0;
  return e <= (LLONG_MAX / 4);
}

static int check_matmul(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
                        const float *C, int64_t ldc)
{
  if (!A || !B || !C)
    return KT_ERR_NULL_POINTER;
  if (M <= 0 || N <= 0 || K <= 0)
    return KT_ERR_BAD_SIZE;
  if (lda < K || ldb < N || ldc < N)
    return KT_ERR_BAD_LD;
  /* The kernels index rows with 64 bits but step through M, N and K in
   * 32-bit ints that may run a tile (at most 256) past the end: larger
   * sizes are refused, never computed wrongly. */
  if (M > KT_MAX_DIM || N > KT_MAX_DIM || K > KT_MAX_DIM || !span_ok(M, K, lda) || !span_ok(K, N, ldb) ||
      !span_ok(M, N, ldc))
    return KT_ERR_OVERFLOW;
  if (((uintptr_t)A | (uintptr_t)B | (uintptr_t)C) & 3u)
    return KT_ERR_MISALIGNED;
  return KT_OK;
}

static int check_hist(const int32_t *samples, uint64_t n, const uint32_t *bins, int64_t nbins)
{
  if (!bins || (!samples && n > 0))
    return KT_ERR_NULL_POINTER;
  if (nbins <= 0)
    return KT_ERR_BAD_SIZE;
  /* Counts are uint32: more samples could wrap a bin. */
  if (nbins > INT_MAX || n > UINT32_MAX)
    return KT_ERR_OVERFLOW;
  if (((uintptr_t)samples | (uintptr_t)bins) & 3u)
    return KT_ERR_MISALIGNED;
  return KT_OK;
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
static int device_pointer(kt_context *c, const void *p)
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

/* ---- choosing -------------------------------------------------------- */

static void fill_choice(kt_choice *out, const kt_variant *v, const kt_tuned *t, const char *why)
{
  if (!out)
    return;
  memset(out, 0, sizeof *out);
  snprintf(out->variant, sizeof out->variant, "%s", v->name);
  out->tuned = t != NULL;
  if (t)
    snprintf(out->matched, sizeof out->matched, "%s", t->key);
  snprintf(out->reason, sizeof out->reason, "%s", why);
}

static const kt_variant *default_variant(const kt_context *c, kt_family f,
                                         int (*serves)(const kt_variant *, const void *), const void *call)
{
  const kt_variant *best = NULL;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (v->family != f || v->default_rank == 0 || !serves(v, call))
      continue;
    if (!best || v->default_rank < best->default_rank)
      best = v;
  }
  (void)c;
  return best;
}

typedef struct matmul_call {
  const kt_context *c;
  const void *A, *B, *C;
  long long lda, ldb, ldc;
} matmul_call;

static int serves_matmul(const kt_variant *v, const void *call)
{
  const matmul_call *m = call;
  return kt_variant_serves_matmul(v, &m->c->dev, m->A, m->lda, m->B, m->ldb, m->C, m->ldc);
}

typedef struct hist_call {
  const kt_context *c;
  long long nbins;
} hist_call;

static int serves_hist(const kt_variant *v, const void *call)
{
  const hist_call *h = call;
  return kt_variant_serves_hist(v, &h->c->dev, h->nbins);
}

static const kt_variant *choose(const kt_context *c, kt_family f, const kt_tuned *t,
                                int (*serves)(const kt_variant *, const void *), const void *call, kt_choice *out)
{
  char why[256];
  if (t) {
    for (int i = 0; i < t->count; ++i)
      if (serves(t->ranked[i], call)) {
        if (out) {
          snprintf(why, sizeof why, "tuned: rank %d at the nearest tuned problem %s%s", i + 1, t->key,
                   i ? " (faster ones cannot serve this call)" : "");
          fill_choice(out, t->ranked[i], t, why);
        }
        return t->ranked[i];
      }
  }
  const kt_variant *v = default_variant(c, f, serves, call);
  if (v && out) {
    snprintf(why, sizeof why, "default: %s",
             t ? "no tuned variant of the nearest problem can serve this call"
               : "no tuned problem for this device in the database");
    fill_choice(out, v, NULL, why);
  }
  return v;
}

static const kt_variant *choose_matmul(const kt_context *c, long long M, long long N, long long K, const void *A,
                                       long long lda, const void *B, long long ldb, const void *C, long long ldc,
                                       kt_choice *out)
{
  matmul_call call = {c, A, B, C, lda, ldb, ldc};
  const kt_tuned *t = kt_dispatch_nearest_matmul(c->tuned, c->ntuned, M, N, K);
  return choose(c, KT_FAMILY_MATMUL, t, serves_matmul, &call, out);
}

static const kt_variant *choose_hist(const kt_context *c, long long nbins, unsigned long long n, kt_choice *out)
{
  hist_call call = {c, nbins};
  const kt_tuned *t = kt_dispatch_nearest_hist(c->tuned, c->ntuned, nbins, (long long)n);
  return choose(c, KT_FAMILY_HIST, t, serves_hist, &call, out);
}

/* ---- launching ------------------------------------------------------- */

static int launch(const kt_context *c, const kt_variant *v, const void *args, kt_stream stream)
{
  if (c->described)
    return KT_ERR_NO_DEVICE;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) {
    cudaGetLastError();
    return KT_ERR_CUDA;
  }
  if (prev != c->dev.ordinal && cudaSetDevice(c->dev.ordinal) != cudaSuccess) {
    cudaGetLastError();
    return KT_ERR_CUDA;
  }
  int e = v->launch(args, (cudaStream_t)stream);
  if (prev != c->dev.ordinal)
    cudaSetDevice(prev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    logf_(c, KT_LOG_ERROR, "ktune: %s: %s", v->name, cudaGetErrorString((cudaError_t)e));
    return KT_ERR_LAUNCH;
  }
  return KT_OK;
}

int kt_matmul_choice(kt_context *c, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                     int64_t ldb, const float *C, int64_t ldc, kt_choice *out)
{
  int rc = live_check(c);
  if (rc == KT_OK && !out)
    rc = KT_ERR_NULL_POINTER;
  if (rc == KT_OK)
    rc = check_matmul(M, N, K, A, lda, B, ldb, C, ldc);
  if (rc != KT_OK)
    return rc;
  return choose_matmul(c, M, N, K, A, lda, B, ldb, C, ldc, out) ? KT_OK : KT_ERR_NO_VARIANT;
}

int kt_histogram_choice(kt_context *c, const int32_t *samples, uint64_t n, const uint32_t *bins, int64_t nbins,
                        kt_choice *out)
{
  int rc = live_check(c);
  if (rc == KT_OK && !out)
    rc = KT_ERR_NULL_POINTER;
  if (rc == KT_OK)
    rc = check_hist(samples, n, bins, nbins);
  if (rc != KT_OK)
    return rc;
  return choose_hist(c, nbins, n, out) ? KT_OK : KT_ERR_NO_VARIANT;
}

int kt_matmul(kt_context *c, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
              int64_t ldb, float beta, float *C, int64_t ldc, kt_stream stream)
{
  int rc = live_check(c);
  if (rc == KT_OK)
    rc = check_matmul(M, N, K, A, lda, B, ldb, C, ldc);
  if (rc != KT_OK)
    return rc;
  if (!device_pointer(c, A) || !device_pointer(c, B) || !device_pointer(c, C))
    return KT_ERR_NOT_DEVICE_POINTER;
  const kt_variant *v = choose_matmul(c, M, N, K, A, lda, B, ldb, C, ldc, NULL);
  if (!v)
    return KT_ERR_NO_VARIANT;
  kt_matmul_args a = {(int)M, (int)N, (int)K, alpha, beta, A, B, C, lda, ldb, ldc, c->dev.sm_count, c->pool};
  return launch(c, v, &a, stream);
}

int kt_histogram(kt_context *c, const int32_t *samples, uint64_t n, uint32_t *bins, int64_t nbins, kt_stream stream)
{
  int rc = live_check(c);
  if (rc == KT_OK)
    rc = check_hist(samples, n, bins, nbins);
  if (rc != KT_OK)
    return rc;
  if ((n > 0 && !device_pointer(c, samples)) || !device_pointer(c, bins))
    return KT_ERR_NOT_DEVICE_POINTER;
  const kt_variant *v = choose_hist(c, nbins, n, NULL);
  if (!v)
    return KT_ERR_NO_VARIANT;
  kt_hist_args a = {(const int *)samples, n, bins, (int)nbins, c->dev.sm_count, c->dev.smem_per_sm, c->dev.smem_optin};
  return launch(c, v, &a, stream);
}
