/* runtime/matmul.c: the matmul family in the runtime: kt_matmul and
 * kt_matmul_choice, their argument checks, which variants can serve a call,
 * the problem key and the selection rule.
 *
 * Selection: the nearest tuned problem, by the least
 *   (ln M - ln Mt)^2 + (ln N - ln Nt)^2 + (ln K - ln Kt)^2,
 * so shapes are compared by ratios (1000^3 is nearest 1024^3, a tall-skinny
 * call nearest the tall-skinny problem); within it, the fastest ranked
 * variant that can serve the call (a float4 winner cannot serve a
 * misaligned call), else the defaults.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"

/* Largest M, N or K: INT_MAX less room for a tile's overshoot. */
#define KT_MAX_DIM (INT_MAX - 1024)

/* ---- the family's entry ------------------------------------------------ */

static void matmul_key(const kt_problem *p, char *buf, size_t len)
{
  snprintf(buf, len, "%lldx%lldx%lld", p->m, p->n, p->k);
}

static int matmul_parse(const char *s, kt_problem *out)
{
  long long m, n, k;
  int used = 0;
  if (!s || sscanf(s, "%lldx%lldx%lld%n", &m, &n, &k, &used) != 3 || s[used] != '\0' || m <= 0 || n <= 0 || k <= 0 ||
      m > KT_MAX_DIM || n > KT_MAX_DIM || k > KT_MAX_DIM)
    return KT_ERR_BAD_OPTION;
  memset(out, 0, sizeof *out);
  out->family = KT_FAMILY_MATMUL;
  out->m = m;
  out->n = n;
  out->k = k;
  return KT_OK;
}

static int matmul_fits(const kt_variant *v, const kt_device_info *d, const kt_problem *p)
{
  (void)p; /* any M, N, K: edges are predicated */
  return v->family == KT_FAMILY_MATMUL && kt_variant_runs_on(v, d);
}

static double ln_pos(long long x)
{
  return log((double)(x > 0 ? x : 1));
}

static void matmul_prepare(kt_tuned *t)
{
  for (int i = 0; i < 3; ++i)
    t->log_shape[i] = ln_pos(t->problem.dim[i]);
}

const kt_family_ops kt_matmul_ops = {
    .id = KT_FAMILY_MATMUL,
    .name = "matmul",
    .long_name = "matmul",
    .ndims = 3,
    .dims = {"m", "n", "k"},
    .key = matmul_key,
    .parse = matmul_parse,
    .fits = matmul_fits,
    .prepare = matmul_prepare,
};

/* ---- which variants serve a call ---------------------------------------- */

static int aligned(const void *p, int floats)
{
  return ((uintptr_t)p % ((uintptr_t)floats * 4u)) == 0;
}

int kt_matmul_serves(const kt_variant *v, const kt_device_info *d, const void *A, long long lda, const void *B,
                     long long ldb, const void *C, long long ldc)
{
  if (v->family != KT_FAMILY_MATMUL || !kt_variant_runs_on(v, d))
    return 0;
  const int a = v->align;
  if (a > 1 && (lda % a || ldb % a || ldc % a || !aligned(A, a) || !aligned(B, a) || !aligned(C, a)))
    return 0;
  return 1;
}

/* The call as the dispatcher's serves() callback sees it. */
typedef struct matmul_call {
  const void *A, *B, *C;
  long long lda, ldb, ldc;
} matmul_call;

static int serves_call(const kt_variant *v, const kt_device_info *d, const void *call)
{
  const matmul_call *m = call;
  return kt_matmul_serves(v, d, m->A, m->lda, m->B, m->ldb, m->C, m->ldc);
}

/* ---- the selection rule ------------------------------------------------- */

static double sq(double x)
{
  return x * x;
}

/* Runs on every call: a handful of tuned problems, three logarithms for
 * the call itself, the rest precomputed at load (matmul_prepare). */
const kt_tuned *kt_matmul_nearest(const kt_tuned *t, int n, long long M, long long N, long long K)
{
  const kt_tuned *best = NULL;
  double bd = INFINITY;
  const double lm = ln_pos(M), ln = ln_pos(N), lk = ln_pos(K);
  for (int i = 0; i < n; ++i) {
    if (t[i].problem.family != KT_FAMILY_MATMUL)
      continue;
    const double d = sq(lm - t[i].log_shape[0]) + sq(ln - t[i].log_shape[1]) + sq(lk - t[i].log_shape[2]);
    if (d < bd) {
      bd = d;
      best = &t[i];
    }
  }
  return best;
}

static const kt_variant *choose(const kt_context *c, long long M, long long N, long long K, const matmul_call *call,
                                kt_choice *out)
{
  int nt = 0;
  const kt_tuned *tuned = kt_context_tuned(c, KT_FAMILY_MATMUL, &nt);
  const kt_tuned *t = kt_matmul_nearest(tuned, nt, M, N, K);
  return kt_dispatch_choose(kt_context_device(c), KT_FAMILY_MATMUL, t, serves_call, call, out);
}

/* ---- the API ------------------------------------------------------------ */

/* Elements spanned by rows x cols with row stride ld fit in a byte count. */
static int span_ok(long long rows, long long cols, long long ld)
{
  long long e;
  if (__builtin_mul_overflow(rows - 1, ld, &e) || __builtin_add_overflow(e, cols, &e))
    return 0;
  return e <= (LLONG_MAX / 4);
}

static int check(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
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

int kt_matmul_choice(kt_context *c, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                     int64_t ldb, const float *C, int64_t ldc, kt_choice *out)
{
  int rc = kt_context_check(c);
  if (rc == KT_OK && !out)
    rc = KT_ERR_NULL_POINTER;
  if (rc == KT_OK)
    rc = check(M, N, K, A, lda, B, ldb, C, ldc);
  if (rc != KT_OK)
    return rc;
  const matmul_call call = {A, B, C, lda, ldb, ldc};
  return choose(c, M, N, K, &call, out) ? KT_OK : KT_ERR_NO_VARIANT;
}

int kt_matmul(kt_context *c, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *B,
              int64_t ldb, float beta, float *C, int64_t ldc, kt_stream stream)
{
  int rc = kt_context_check(c);
  if (rc == KT_OK)
    rc = check(M, N, K, A, lda, B, ldb, C, ldc);
  if (rc != KT_OK)
    return rc;
  if (!kt_context_device_pointer(c, A) || !kt_context_device_pointer(c, B) || !kt_context_device_pointer(c, C))
    return KT_ERR_NOT_DEVICE_POINTER;
  const matmul_call call = {A, B, C, lda, ldb, ldc};
  const kt_variant *v = choose(c, M, N, K, &call, NULL);
  if (!v)
    return KT_ERR_NO_VARIANT;
  const kt_device_info *d = kt_context_device(c);
  kt_matmul_args a = {(int)M, (int)N, (int)K, alpha, beta, A, B, C, lda, ldb, ldc, d->sm_count, kt_context_pool(c)};
  return kt_context_launch(c, v, &a, stream);
}
