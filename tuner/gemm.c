/* SPDX-License-Identifier: MIT */
/* tuner/gemm.c: what the tuner knows about the gemm family (tensor-core
 * matmul, kt_tune_gemm_): its check against a double-precision reference
 * from the rounded inputs (gemm.h), its default tuning shapes, its inputs,
 * check and timing in a worker, and its rows of the tune summary (its
 * kt_tune_family entry, at the end). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gemm.h"
#include "matmul.h"
#include "tuner.h"

/* ---- inputs -------------------------------------------------------------- */

float kt_tune_gemm_round(float x, int type)
{
  if (type == KT_F32 || isnan(x))
    return x;
  uint32_t u;
  memcpy(&u, &x, 4);
  if (type == KT_TF32) /* to nearest, ties away: cvt.rna.tf32.f32 */
    u = (u + 0x1000u) & ~0x1fffu;
  else if (type == KT_BF16) /* to nearest, ties to even */
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  else { /* F16: values are drawn representable (kt_tune_gemm_value) */
    return x;
  }
  memcpy(&x, &u, 4);
  return x;
}

float kt_tune_gemm_value(kt_rng *r, int type)
{
  /* Multiples of 2^-8 in (-1, 1) are exact in every type, so one draw
   * serves all; TF32 and F32 get full FP32 values, which TF32 must round. */
  if (type == KT_BF16 || type == KT_F16)
    return (float)((int)(kt_rng_next(r) % 511) - 255) * 0x1p-8f;
  return kt_rng_float(r);
}

/* The 16 bits of x (exactly representable in the type) as stored. */
static uint16_t bits16(float x, int type)
{
  uint32_t u;
  memcpy(&u, &x, 4);
  if (type == KT_BF16)
    return (uint16_t)(u >> 16);
  /* F16 of a normal float with <= 11 significant bits and |x| >= 2^-14, or 0
   * (NaN for padding). */
  if (isnan(x))
    return 0x7e00;
  if (x == 0.0f)
    return (uint16_t)((u >> 16) & 0x8000u);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const int e = (int)((u >> 23) & 0xff) - 127 + 15;
  return (uint16_t)(sign | (uint32_t)e << 10 | ((u >> 13) & 0x3ffu));
}

typedef struct convert_job {
  uint16_t *h;
  const float *src;
  int type;
} convert_job;

static void convert(size_t lo, size_t hi, size_t c, void *p)
{
  (void)c;
  const convert_job *j = p;
  for (size_t i = lo; i < hi; ++i)
    j->h[i] = bits16(j->src[i], j->type);
}

/* Copy n floats to the device as `type` stores them (16-bit types
 * converted here, on threads). */
static cudaError_t upload(void *dst, const float *src, size_t n, int type)
{
  if (type == KT_F32 || type == KT_TF32)
    return cudaMemcpy(dst, src, n * 4, cudaMemcpyHostToDevice);
  uint16_t *h = malloc(n * 2 + 2);
  if (!h)
    return cudaErrorMemoryAllocation;
  convert_job j = {h, src, type};
  kt_measure_chunks(n, (size_t)1 << 20, convert, &j);
  const cudaError_t e = cudaMemcpy(dst, h, n * 2, cudaMemcpyHostToDevice);
  free(h);
  return e;
}

int kt_tune_gemm_variant_type(const kt_variant *v)
{
  const char *t = kt_variant_param(v, "type");
  for (int i = 0; t && i < 4; ++i)
    if (strcmp(t, kt_gemm_type_name(i)) == 0)
      return i;
  return KT_BF16; /* the fallback serves all types; it is timed on BF16 */
}

/* ---- the check ------------------------------------------------------------ */

int kt_tune_gemm_reference(const kt_tune_gemm_case *cs, const float *A, long long lda, const float *B, long long ldb,
                           double *ref, double *mag)
{
  const int type = cs->type, M = cs->M, N = cs->N, K = cs->K;
  /* op(A) (M x K) and op(B) (K x N), rounded to the type, row-major: then
   * a row of sums at a time (kt_tune_matmul_reference, rows over threads),
   * B along its rows, each sum in k order, as an element-at-a-time loop
   * over the stored operands adds them.  That loop, which rounded both inputs of
   * every product and read one operand across its rows, took 69 ms of a
   * variant's four checks, this 15 (one core of the build machine). */
  float *a = malloc(sizeof(float) * (size_t)M * (size_t)K), *b = malloc(sizeof(float) * (size_t)K * (size_t)N);
  if (!a || !b) {
    free(a);
    free(b);
    return -1;
  }
  for (int i = 0; i < M; ++i)
    for (int k = 0; k < K; ++k)
      a[(size_t)i * K + k] = kt_tune_gemm_round(A[cs->op_a ? (long long)k * lda + i : (long long)i * lda + k], type);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < N; ++j)
      b[(size_t)k * N + j] = kt_tune_gemm_round(B[cs->op_b ? (long long)j * ldb + k : (long long)k * ldb + j], type);
  kt_tune_matmul_reference(a, K, b, N, M, N, K, ref, mag);
  free(a);
  free(b);
  return 0;
}

/* Element i of a case's C (entries sc apart, rows ldc apart, M x N each)
 * is padding: past N in its row, or past M rows in its entry. */
static int c_padding(size_t i, long long sc, long long ldc, int M, int N)
{
  const long long w = (long long)(i % (size_t)sc);
  return w / ldc >= M || w % ldc >= N;
}

/* The padding's own bits: a NaN whose payload no arithmetic makes. */
#define C_GUARD_BITS 0x7fc5c0deu

/* What runs a case's arguments once: a variant's launcher, or
 * kt_matmul_ex.  Nonzero, with out's reason said, where it failed. */
typedef struct gemm_runner {
  int (*run)(const void *self, const kt_gemm_args *a, kt_check *out);
  const void *self;
} gemm_runner;

static int run_variant(const void *self, const kt_gemm_args *a, kt_check *out)
{
  const kt_variant *v = self;
  return kt_measure_cuda_failed(out, (cudaError_t)v->launch(a, 0), "launch");
}

/* Run the case's arguments through runner once on fresh random inputs, on the
 * current device (sm_count SMs, scratch from pool), and check every element
 * of every batch entry. */
static void check_case(gemm_runner runner, int sm_count, void *pool, const kt_tune_gemm_case *cs, uint64_t seed,
                       kt_check *out)
{
  memset(out, 0, sizeof *out);
  kt_rng r = {seed};
  const int type = cs->type, M = cs->M, N = cs->N, K = cs->K, nb = cs->batch;
  const int es = kt_gemm_elem_bytes(type);
  static const char *const shared_name[4] = {"", ", A shared", ", B shared", ", A and B shared"};
  /* Stored shapes, padded leading dimensions, batch strides with a gap
   * (0 for a shared operand, whose one matrix serves every entry). */
  const long long ar = cs->op_a ? K : M, ac = cs->op_a ? M : K, br = cs->op_b ? N : K, bc = cs->op_b ? K : N;
  const long long lda = ac + cs->pad, ldb = bc + cs->pad, ldc = N + 3;
  const long long one_a = ar * lda + 8, one_b = br * ldb + 8, sc = (long long)M * ldc + 4;
  const long long sa = cs->shared & 1 ? 0 : one_a, sb = cs->shared & 2 ? 0 : one_b;
  const size_t na = (size_t)(one_a * (sa ? nb : 1)), nbb = (size_t)(one_b * (sb ? nb : 1)), nc = (size_t)(sc * nb);
  float *A = malloc(na * 4), *B = malloc(nbb * 4), *C0 = malloc(nc * 4), *C = malloc(nc * 4);
  double *ref = malloc(sizeof(double) * (size_t)M * (size_t)N), *mag = malloc(sizeof(double) * (size_t)M * (size_t)N);
  void *dA = NULL, *dB = NULL;
  float *dC = NULL;
  if (!A || !B || !C0 || !C || !ref || !mag) {
    snprintf(out->reason, sizeof out->reason, "out of host memory");
    goto done;
  }
  /* NaN in every padding element: a kernel that reads one fails. */
  for (size_t i = 0; i < na; ++i)
    A[i] = (long long)(i % one_a) < ar * lda && (long long)(i % one_a) % lda < ac ? kt_tune_gemm_value(&r, type) : NAN;
  for (size_t i = 0; i < nbb; ++i)
    B[i] = (long long)(i % one_b) < br * ldb && (long long)(i % one_b) % ldb < bc ? kt_tune_gemm_value(&r, type) : NAN;
  /* C's padding (3 floats a row, 4 after each entry) holds a NaN of its
   * own, which the call must leave as it is. */
  const uint32_t guard = C_GUARD_BITS;
  for (size_t i = 0; i < nc; ++i) {
    C0[i] = cs->beta != 0.0f ? kt_rng_float(&r) : NAN;
    if (c_padding(i, sc, ldc, M, N))
      memcpy(&C0[i], &guard, sizeof guard);
  }
  if (kt_measure_cuda_failed(out, cudaMalloc(&dA, na * es), "cudaMalloc") ||
      kt_measure_cuda_failed(out, cudaMalloc(&dB, nbb * es), "cudaMalloc") ||
      kt_measure_cuda_failed(out, cudaMalloc((void **)&dC, nc * 4), "cudaMalloc") ||
      kt_measure_cuda_failed(out, upload(dA, A, na, type), "upload") ||
      kt_measure_cuda_failed(out, upload(dB, B, nbb, type), "upload") ||
      kt_measure_cuda_failed(out, cudaMemcpy(dC, C0, nc * 4, cudaMemcpyHostToDevice), "cudaMemcpy"))
    goto done;
  kt_gemm_args a = {type, cs->op_a, cs->op_b, M,   N,   K,  nb, cs->alpha, cs->beta, dA,
                    dB,   dC,       lda,      ldb, ldc, sa, sb, sc,        sm_count, pool};
  if (runner.run(runner.self, &a, out) || kt_measure_cuda_failed(out, cudaDeviceSynchronize(), "kernel") ||
      kt_measure_cuda_failed(out, cudaMemcpy(C, dC, nc * 4, cudaMemcpyDeviceToHost), "cudaMemcpy"))
    goto done;
  out->ok = 1;
  for (size_t i = 0; i < nc && out->ok; ++i)
    if (c_padding(i, sc, ldc, M, N) && memcmp(&C[i], &C0[i], sizeof C[i]) != 0) {
      out->ok = 0;
      out->worst = INFINITY;
      snprintf(out->reason, sizeof out->reason,
               "%s C[%lld](%lld, %lld), padding past %dx%d, was written (%g) at %dx%dx%d op %c%c batch %d%s",
               kt_gemm_type_name(type), (long long)(i / sc), (long long)(i % sc / ldc), (long long)(i % sc % ldc), M, N,
               C[i], M, N, K, "NT"[cs->op_a], "NT"[cs->op_b], nb, shared_name[cs->shared & 3]);
    }
  for (int b = 0; b < nb && out->ok; ++b) {
    if (kt_tune_gemm_reference(cs, A + b * sa, lda, B + b * sb, ldb, ref, mag) != 0) {
      out->ok = 0;
      snprintf(out->reason, sizeof out->reason, "out of host memory");
      break;
    }
    for (int i = 0; i < M && out->ok; ++i)
      for (int j = 0; j < N; ++j) {
        const double c0 = cs->beta != 0.0f ? C0[b * sc + (long long)i * ldc + j] : 0.0;
        const double want = cs->alpha * ref[(size_t)i * N + j] + cs->beta * c0;
        const double got = C[b * sc + (long long)i * ldc + j];
        const double e =
            fabs(got - want) / kt_tune_gemm_bound(type, K, cs->alpha, mag[(size_t)i * N + j], cs->beta * c0);
        if (!(e <= 1.0)) {
          out->ok = 0;
          out->worst = isnan(e) ? INFINITY : e;
          snprintf(out->reason, sizeof out->reason,
                   "%s C[%d](%d, %d) = %g, expected %g (error %.3g x the bound) at %dx%dx%d op %c%c batch %d%s",
                   kt_gemm_type_name(type), b, i, j, got, want, e, M, N, K, "NT"[cs->op_a], "NT"[cs->op_b], nb,
                   shared_name[cs->shared & 3]);
          break;
        }
        if (e > out->worst)
          out->worst = e;
      }
  }
done:
  cudaFree(dA);
  cudaFree(dB);
  cudaFree(dC);
  free(A);
  free(B);
  free(C0);
  free(C);
  free(ref);
  free(mag);
}

void kt_tune_gemm_check(const kt_variant *v, const kt_device_info *dev, const kt_tune_gemm_case *cs, uint64_t seed,
                        kt_check *out)
{
  check_case((gemm_runner){run_variant, v}, dev->sm_count, kt_device_pool(dev->ordinal), cs, seed, out);
}

static int run_call(const void *self, const kt_gemm_args *a, kt_check *out)
{
  const kt_matmul_desc d = {.type = (kt_dtype)a->type,
                            .op_a = (kt_op)a->op_a,
                            .op_b = (kt_op)a->op_b,
                            .M = a->M,
                            .N = a->N,
                            .K = a->K,
                            .batch = a->batch,
                            .alpha = a->alpha,
                            .beta = a->beta,
                            .A = a->A,
                            .lda = a->lda,
                            .stride_a = a->stride_a,
                            .B = a->B,
                            .ldb = a->ldb,
                            .stride_b = a->stride_b,
                            .C = a->C,
                            .ldc = a->ldc,
                            .stride_c = a->stride_c};
  const int rc = kt_matmul_ex((kt_context *)self, &d, NULL);
  if (rc != KT_OK)
    snprintf(out->reason, sizeof out->reason, "kt_matmul_ex: %s", kt_strerror(rc));
  return rc != KT_OK;
}

void kt_tune_gemm_check_call(kt_context *ctx, const kt_tune_gemm_case *cs, uint64_t seed, kt_check *out)
{
  const kt_device_info *d = kt_context_device(ctx);
  check_case((gemm_runner){run_call, ctx}, d->sm_count, kt_context_pool(ctx), cs, seed, out);
}

/* ---- `ktune tune`: problems and the summary ------------------------------ */

/* A small default set, to keep `make tune` short (on an H100: 26 s with
 * two variants per type and 21 problems, 38 s with five and 21; three and
 * 15, as now, about 27 s): the squares where the targets are set and one
 * small one (where 64- and 128-row tiles win), in the layouts people call
 * most: BF16's N, N and N, T (T, N and T, T ran within 1% of N, N with the
 * same winners), N, N of FP16, and TF32's two (N, N repacks B; N, T reads
 * both in place).  Dispatch takes an untuned layout from its type's tuned
 * ones. */
#define DEFAULT_SHAPES "1024x1024x1024,4096x4096x4096,8192x8192x8192"
#define DEFAULT_LAYOUTS "bf16:nn,bf16:nt,f16:nn,tf32:nn,tf32:nt"

/* "bf16:nt" into a layout (kt_gemm_layout), or -1. */
static long long parse_layout(const char *s)
{
  for (int t = 0; t < 4; ++t) {
    const char *name = kt_gemm_type_name(t);
    const size_t n = strlen(name);
    if (strncmp(s, name, n) == 0 && s[n] == ':' && (s[n + 1] == 'n' || s[n + 1] == 't') &&
        (s[n + 2] == 'n' || s[n + 2] == 't') && s[n + 3] == '\0')
      return kt_gemm_layout(t, s[n + 1] == 't', s[n + 2] == 't');
  }
  return -1;
}

static int problems(const char *const *values, kt_problem *out, int max, char *err, size_t errlen)
{
  long long layouts[64];
  int nl = 0, more;
  char item[64];
  const char *list = values[1];
  while ((more = kt_tune_family_item(&list, item, sizeof item)) != 0) {
    const long long l = more < 0 ? -1 : parse_layout(item);
    if (l < 0) {
      snprintf(err, errlen, "--gemm-layouts: bad layout '%s' (TYPE:OPS, TYPE f32, tf32, bf16 or f16, OPS nn, nt, tn or tt)",
               more < 0 ? "(too long)" : item);
      return -1;
    }
    if (nl == (int)(sizeof layouts / sizeof layouts[0])) {
      snprintf(err, errlen, "--gemm-layouts: too many layouts");
      return -1;
    }
    layouts[nl++] = l;
  }
  list = values[0];
  int n = 0;
  while ((more = kt_tune_family_item(&list, item, sizeof item)) != 0) {
    long long m, nn, k;
    int used = 0;
    if (more < 0 || sscanf(item, "%lldx%lldx%lld%n", &m, &nn, &k, &used) != 3 || item[used] != '\0' || m < 1 ||
        nn < 1 || k < 1 || m > KT_MATMUL_MAX_DIM || nn > KT_MATMUL_MAX_DIM || k > KT_MATMUL_MAX_DIM) {
      snprintf(err, errlen, "--gemm: bad shape '%s' (MxNxK, each 1..%d)", more < 0 ? "(too long)" : item,
               KT_MATMUL_MAX_DIM);
      return -1;
    }
    for (int i = 0; i < nl; ++i) {
      if (n == max) {
        snprintf(err, errlen, "--gemm: more than %d problems (shapes x layouts)", max);
        return -1;
      }
      memset(&out[n], 0, sizeof out[n]);
      out[n].family = KT_FAMILY_GEMM;
      out[n].m = m, out[n].n = nn, out[n].k = k, out[n].dim[3] = layouts[i];
      ++n;
    }
  }
  return n;
}

static void report_header(const char *const *values)
{
  (void)values;
  printf("\ngemm                       winner                                   time ms  TFLOP/s\n");
}

static void report_row(const char *key, const kt_tune_run *runs, int nruns, const kt_tuned *t)
{
  (void)nruns;
  const kt_tune_result *win = kt_tune_result_ok(runs[0].results, runs[0].n, t->ranked[0]->name);
  printf("%-26s %-40s %8.3f  %7.1f\n", key, t->ranked[0]->name, t->best_ms, win ? win->m.rate / 1e3 : 0);
}

/* ---- `ktune __worker`: check and time ------------------------------------- */

typedef struct inputs {
  kt_device_info dev;
  kt_problem p;
  int M, N, K, type, op_a, op_b;
  long long lda, ldb;
  float *hA, *hB;    /* the problem's values as stored (op_a, op_b); exact in every type */
  void *dA, *dB;     /* as the problem's type stores them */
  float *dC;
  void *flush;
  size_t flush_bytes;
  float *staging; /* the sample check's outputs, copied back (pinned) */
} inputs;

static void teardown(void *state)
{
  inputs *in = state;
  if (!in)
    return;
  cudaFree(in->dA);
  cudaFree(in->dB);
  cudaFree(in->dC);
  cudaFree(in->flush);
  cudaFreeHost(in->staging);
  free(in->hA);
  free(in->hB);
  free(in);
}

static float exact_value(kt_rng *r)
{
  return kt_tune_gemm_value(r, KT_BF16);
}

static void *setup(const kt_device_info *dev, const kt_problem *p, uint64_t seed, char *err, size_t errlen)
{
  inputs *in = calloc(1, sizeof *in);
  if (!in) {
    snprintf(err, errlen, "out of host memory");
    return NULL;
  }
  in->dev = *dev;
  in->p = *p;
  const int M = in->M = (int)p->m, N = in->N = (int)p->n, K = in->K = (int)p->k;
  const int type = in->type = (int)(p->dim[3] / 4);
  in->op_a = (int)(p->dim[3] >> 1) & 1, in->op_b = (int)p->dim[3] & 1;
  in->lda = in->op_a ? M : K, in->ldb = in->op_b ? K : N;
  kt_rng r = {seed};
  const size_t na = (size_t)M * K, nb = (size_t)K * N, es = (size_t)kt_gemm_elem_bytes(type);
  in->hA = malloc(na * 4);
  in->hB = malloc(nb * 4);
  in->flush_bytes = kt_measure_flush_bytes(dev);
  int bad = !in->hA || !in->hB || cudaMalloc((void **)&in->dC, (size_t)M * N * 4) ||
            cudaMalloc(&in->flush, in->flush_bytes) || cudaMalloc(&in->dA, na * es) || cudaMalloc(&in->dB, nb * es) ||
            cudaMallocHost((void **)&in->staging, sizeof(float) * KT_TUNE_MATMUL_SAMPLES);
  if (!bad) {
    /* Multiples of 2^-8: exact in every type, so the reference needs no rounding. */
    kt_measure_fill(in->hA, na, kt_rng_next(&r), exact_value);
    kt_measure_fill(in->hB, nb, kt_rng_next(&r), exact_value);
    bad = upload(in->dA, in->hA, na, type) || upload(in->dB, in->hB, nb, type);
  }
  if (bad) {
    snprintf(err, errlen, "cannot allocate the %dx%dx%d problem", M, N, K);
    teardown(in);
    return NULL;
  }
  return in;
}

static void unfit(const kt_variant *v, const kt_device_info *dev, const kt_problem *p, char *buf, size_t len)
{
  const char *type = kt_gemm_type_name((int)(p->dim[3] / 4));
  if (!kt_variant_runs_on(v, dev))
    snprintf(buf, len, "cannot run on this device");
  else if (strcmp(v->algo, "wgmma") == 0 && dev->cc != 90)
    snprintf(buf, len, "wgmma needs an sm_90 GPU");
  else if (strcmp(v->algo, "simt") != 0)
    snprintf(buf, len, "serves another input type than %s", type);
  else
    snprintf(buf, len, "the CUDA-core kernel is timed for %s only up to %lld multiply-adds", type,
             (long long)KT_GEMM_SIMT_TC_MACS);
}

static void measure(void *state, const kt_variant *v, uint64_t seed, double best_ms, kt_tune_result *r)
{
  inputs *in = state;
  const kt_device_info *dev = &in->dev;
  const int M = in->M, N = in->N, K = in->K, type = in->type;
  /* Correctness first: odd shapes, every op pair, batches (the last with
   * A or B shared by its entries), padding. */
  kt_rng vr = {seed};
  kt_check c = {1, 0, 0, ""};
  double worst = 0;
  for (int t = 0; t < 4 && c.ok; ++t) {
    const int m = 65 + (int)(kt_rng_next(&vr) % 190), n = 65 + (int)(kt_rng_next(&vr) % 190),
              k = 33 + (int)(kt_rng_next(&vr) % 300), shared = t == 3 ? 1 + (int)(kt_rng_next(&vr) % 2) : 0;
    const kt_tune_gemm_case cs = kt_tune_gemm_case_of(type, t >> 1, t & 1, m, n, k, 1 + t % 2, t == 3 ? 0 : 8,
                                                      t ? 1.0f : 1.25f, t % 2 ? 0.0f : -0.75f, shared);
    kt_tune_gemm_check(v, dev, &cs, kt_rng_next(&vr), &c);
    if (c.worst > worst)
      worst = c.worst;
  }
  if (!c.ok) {
    kt_tune_result_set(r, &in->p, v, c.launch_failed ? "launch_failed" : "wrong", c.reason);
    r->m.max_err = c.worst;
    return;
  }
  /* Then the tuned problem, in its layout. */
  cudaMemset(in->dC, 0xff, (size_t)M * N * 4);
  kt_gemm_args args = {type,   in->op_a, in->op_b, M, N, K, 1,      1.0f, 0.0f, in->dA, in->dB,
                       in->dC, in->lda,  in->ldb,  N, 0, 0, 0,      dev->sm_count, kt_device_pool(dev->ordinal)};
  double ms = 0;
  int reps = 0;
  int e = kt_measure_candidate(v, &args, in->flush, in->flush_bytes, best_ms, &ms, &reps);
  if (e) {
    kt_tune_result_set(r, &in->p, v, "launch_failed", cudaGetErrorString((cudaError_t)e));
    return;
  }
  char why[256] = "";
  const int sampled = kt_tune_matmul_sample(in->dC, M, N, K, in->hA, in->lda, in->op_a, in->hB, in->ldb, in->op_b, type,
                                            in->staging, &vr, &worst, why, sizeof why);
  kt_tune_matmul_record(r, &in->p, v, sampled, why, ms, reps, worst, M, N, K);
}

/* ---- `ktune explain` -------------------------------------------------------- */

static int explain_problem(char *const *args, int nargs, kt_problem *p, char *err, size_t errlen)
{
  memset(p, 0, sizeof *p);
  p->family = KT_FAMILY_GEMM;
  p->dim[3] = kt_gemm_layout(KT_BF16, 0, 0);
  int ok = nargs == 3 || nargs == 4;
  for (int d = 0; d < 3 && ok; ++d)
    ok = kt_cli_integer(args[d], 1, KT_MATMUL_MAX_DIM, &p->dim[d]) == 0;
  if (ok && nargs == 4)
    ok = (p->dim[3] = parse_layout(args[3])) >= 0;
  if (!ok) {
    snprintf(err, errlen, "gemm takes M N K (each 1..%d) and optionally TYPE:OPS (default bf16:nn)", KT_MATMUL_MAX_DIM);
    return -1;
  }
  return 0;
}

static int explain(kt_context *ctx, const kt_problem *p, kt_choice *out)
{
  /* Aligned stand-in pointers: the choice looks at type, ops and shape. */
  const void *x = (const void *)(uintptr_t)0x100000;
  const int op_a = (int)(p->dim[3] >> 1) & 1, op_b = (int)p->dim[3] & 1;
  const kt_matmul_desc d = {.type = (kt_dtype)(p->dim[3] / 4), .op_a = (kt_op)op_a, .op_b = (kt_op)op_b,
                            .M = p->m, .N = p->n, .K = p->k, .batch = 1, .alpha = 1.0f, .A = x,
                            .lda = op_a ? p->m : p->k, .B = x, .ldb = op_b ? p->k : p->n, .C = (float *)x,
                            .ldc = p->n};
  return kt_matmul_ex_choice(ctx, &d, out);
}

const kt_tune_family kt_tune_gemm = {
    .id = KT_FAMILY_GEMM,
    .options = {{"--gemm", "MxNxK,...", DEFAULT_SHAPES, "the gemm (tensor-core matmul) shapes to tune"},
                {"--gemm-layouts", "TYPE:OPS,...", DEFAULT_LAYOUTS,
                 "their input types and op pairs (TYPE f32, tf32, bf16, f16; OPS nn, nt, tn, tt)"}},
    .problems = problems,
    .report_header = report_header,
    .report_row = report_row,
    .setup = setup,
    .unfit = unfit,
    .measure = measure,
    .teardown = teardown,
    .explain_args = "M N K [TYPE:OPS]",
    .explain_problem = explain_problem,
    .explain = explain,
};
