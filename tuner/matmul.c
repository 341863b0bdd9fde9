/* SPDX-License-Identifier: MIT */
/* tuner/matmul.c: what the tuner knows about the matmul family
 * (kt_tune_matmul_): its check against a double-precision reference
 * (matmul.h), its default tuning shapes and how `--matmul` lists them, its
 * inputs, check and timing in a worker, and its rows of the tune summary
 * (its kt_tune_family entry, at the end). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "matmul.h"
#include "registry.h"
#include "tuner.h"

double kt_tune_matmul_bound(int K, double alpha, double sum_abs_products, double beta_c0)
{
  return (K + 2.0) * 0x1p-24 * (fabs(alpha) * sum_abs_products + fabs(beta_c0)) + 1e-30;
}

double kt_tune_gemm_bound(int type, int K, double alpha, double sum_abs_products, double beta_c0)
{
  /* Tensor cores may truncate their FP32 sums rather than round them
   * (2^-23), and TF32 read in place is truncated where the reference rounds
   * (each input within 2^-10, so each product within 2^-9); the 16-bit
   * types reach the reference unchanged and their products are exact. */
  if (type == KT_F32)
    return kt_tune_matmul_bound(K, alpha, sum_abs_products, beta_c0);
  const double u_in = type == KT_TF32 ? 0x1p-9 : 0.0;
  return (u_in + (K + 2.0) * 0x1p-23) * fabs(alpha) * sum_abs_products + (K + 2.0) * 0x1p-23 * fabs(beta_c0) + 1e-30;
}

const kt_variant *kt_tune_matmul_seed(void)
{
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    const char *bs = kt_variant_param(v, "bs"), *pad = kt_variant_param(v, "pad");
    if (v->family == KT_FAMILY_MATMUL && strcmp(v->algo, "tiled") == 0 && bs && strcmp(bs, "16") == 0 && pad &&
        strcmp(pad, "0") == 0)
      return v;
  }
  return NULL;
}

/* B is read along its rows, into a row of sums at a time (independent, so
 * the compiler vectorises the loop over j: the Makefile asks it to), and
 * each sum still adds its products in k order.  The element-at-a-time loop
 * it replaces read B down its columns with one dependent add after another:
 * 3.8 ms a check on average over 200 shapes drawn as the checks draw them,
 * 1.4 ms now, same sums (one core of a 2-core AMD EPYC build machine); a
 * variant has two checks. */
void kt_tune_matmul_reference_row(const float *a, const float *B, long long ldb, int N, int K, double *restrict ref,
                                  double *restrict mag)
{
  for (int j = 0; j < N; ++j)
    ref[j] = 0.0, mag[j] = 0.0;
  for (int k = 0; k < K; ++k) {
    const double x = a[k];
    const float *restrict b = B + (size_t)k * ldb;
    for (int j = 0; j < N; ++j) {
      const double p = x * b[j];
      ref[j] += p;
      mag[j] += fabs(p);
    }
  }
}

/* Products a thread of kt_tune_matmul_reference takes at least: 0.1 ms of
 * them on a core of the H100 hosts (0.5 to 0.8 ns a product).  A check's
 * reference averages 4.6 million products: 2.5 to 3.8 ms on one core of
 * those hosts. */
#define REF_PRODUCTS_PER_THREAD (1 << 17)

typedef struct ref_job {
  const float *A, *B;
  long long lda, ldb;
  int N, K, i0, i1; /* rows i0..i1 */
  double *ref, *mag;
} ref_job;

static void *ref_rows(void *p)
{
  const ref_job *j = p;
  for (int i = j->i0; i < j->i1; ++i)
    kt_tune_matmul_reference_row(j->A + (size_t)i * j->lda, j->B, j->ldb, j->N, j->K, j->ref + (size_t)i * j->N,
                                 j->mag + (size_t)i * j->N);
  return NULL;
}

void kt_tune_matmul_reference(const float *A, long long lda, const float *B, long long ldb, int M, int N, int K,
                              double *ref, double *mag)
{
  const double products = (double)M * N * K;
  int t = kt_measure_cpus();
  if (t > products / REF_PRODUCTS_PER_THREAD)
    t = (int)(products / REF_PRODUCTS_PER_THREAD);
  if (t > M)
    t = M;
  if (t < 1)
    t = 1;
  ref_job jobs[KT_MEASURE_MAX_THREADS];
  for (int i = 0; i < t; ++i)
    jobs[i] = (ref_job){A, B, lda, ldb, N, K, (int)((long long)M * i / t), (int)((long long)M * (i + 1) / t), ref, mag};
  kt_measure_run_all(ref_rows, jobs, sizeof jobs[0], t);
}

void kt_tune_matmul_check(const kt_variant *v, const kt_device_info *dev, int M, int N, int K, long long lda,
                          long long ldb, long long ldc, float alpha, float beta, uint64_t seed, kt_check *out)
{
  /* A variant that serves any 4-byte aligned pointer, and a float4 variant
   * given rows it must stage, get A, B and C one float past cudaMalloc's
   * alignment. */
  kt_tune_matmul_check_at(v, dev, M, N, K, lda, ldb, ldc, alpha, beta, v->align == 1 || ldb % v->align != 0, seed,
                          out);
}

void kt_tune_matmul_check_at(const kt_variant *v, const kt_device_info *dev, int M, int N, int K, long long lda,
                             long long ldb, long long ldc, float alpha, float beta, int shift, uint64_t seed,
                             kt_check *out)
{
  kt_tune_matmul_buffers b = {0};
  kt_tune_matmul_check_with(&b, v, dev, M, N, K, lda, ldb, ldc, alpha, beta, shift, seed, out);
  kt_tune_matmul_buffers_free(&b);
}

void kt_tune_matmul_buffers_free(kt_tune_matmul_buffers *b)
{
  free(b->A);
  free(b->B);
  free(b->C0);
  free(b->C);
  free(b->ref);
  free(b->mag);
  cudaFree(b->dA);
  cudaFree(b->dB);
  cudaFree(b->dC);
  memset(b, 0, sizeof *b);
}

/* One host array (and its device twin, where dev) of at least need
 * elements (and one) of size bytes: 0, or -1 with out's reason set.  On
 * failure the capacity is 0, so the next call allocates again. */
static int grow(size_t need, size_t size, size_t *cap, void **host, void **host2, void **dev, kt_check *out)
{
  if (need < 1)
    need = 1;
  if (need <= *cap)
    return 0;
  *cap = 0;
  free(*host);
  *host = malloc(need * size);
  if (host2) {
    free(*host2);
    *host2 = malloc(need * size);
  }
  if (!*host || (host2 && !*host2)) {
    snprintf(out->reason, sizeof out->reason, "out of host memory");
    return -1;
  }
  if (dev) {
    cudaFree(*dev);
    *dev = NULL;
    if (kt_measure_cuda_failed(out, cudaMalloc(dev, need * size), "cudaMalloc"))
      return -1;
  }
  *cap = need;
  return 0;
}

/* rows x ld floats: in each row cols values from r (or `value` where r
 * is NULL), then `pad`. */
static void fill_rows(float *x, int rows, int cols, long long ld, kt_rng *r, float value, float pad)
{
  for (int i = 0; i < rows; ++i, x += ld) {
    for (int j = 0; j < cols; ++j)
      x[j] = r ? kt_rng_float(r) : value;
    for (long long j = cols; j < ld; ++j)
      x[j] = pad;
  }
}

/* Floats past the end of A, B and C that a check fills (kept buffers hold
 * an earlier, larger check's numbers there): NaN after A and B, so that a
 * kernel reading past either poisons its result; NaN after C, which must
 * come back untouched. */
#define TAIL 64

void kt_tune_matmul_check_with(kt_tune_matmul_buffers *b, const kt_variant *v, const kt_device_info *dev, int M, int N,
                               int K, long long lda, long long ldb, long long ldc, float alpha, float beta, int shift,
                               uint64_t seed, kt_check *out)
{
  memset(out, 0, sizeof *out);
  kt_rng r = {seed};
  const size_t na = (size_t)M * lda, nb = (size_t)K * ldb, nc = (size_t)M * ldc;
  const size_t off = shift ? 1 : 0;
  if (grow(na + off + TAIL, 4, &b->na, (void **)&b->A, NULL, (void **)&b->dA, out) ||
      grow(nb + off + TAIL, 4, &b->nb, (void **)&b->B, NULL, (void **)&b->dB, out) ||
      grow(nc + off + TAIL, 4, &b->nc, (void **)&b->C0, (void **)&b->C, (void **)&b->dC, out) ||
      grow((size_t)M * N, sizeof(double), &b->nmn, (void **)&b->ref, (void **)&b->mag, NULL, out))
    return;
  float *A = b->A, *B = b->B, *C0 = b->C0, *C = b->C, *dA = b->dA, *dB = b->dB, *dC = b->dC;
  /* Padding beyond each row holds NaN: reading it would poison the result.
   * (Row by row: a division per element to find its column took a fifth
   * of a check.) */
  fill_rows(A, M, K, lda, &r, NAN, NAN);
  fill_rows(B, K, N, ldb, &r, NAN, NAN);
  /* C: random where beta reads it; NaN where beta == 0 (it must not be read,
   * and any element left unwritten stays NaN); a sentinel in the padding. */
  fill_rows(C0, M, N, ldc, beta != 0.0f ? &r : NULL, NAN, 1234.5f);
  if (kt_measure_cuda_failed(out, cudaMemcpy(dA + off, A, na * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      kt_measure_cuda_failed(out, cudaMemcpy(dB + off, B, nb * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      kt_measure_cuda_failed(out, cudaMemcpy(dC + off, C0, nc * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      kt_measure_cuda_failed(out, cudaMemset(dA + off + na, 0xff, TAIL * 4), "cudaMemset") ||
      kt_measure_cuda_failed(out, cudaMemset(dB + off + nb, 0xff, TAIL * 4), "cudaMemset") ||
      kt_measure_cuda_failed(out, cudaMemset(dC + off + nc, 0xff, TAIL * 4), "cudaMemset"))
    return;
  kt_matmul_args a = {
      M, N, K, alpha, beta, dA + off, dB + off, dC + off, lda, ldb, ldc, dev->sm_count, kt_device_pool(dev->ordinal)};
  if (kt_measure_cuda_failed(out, (cudaError_t)v->launch(&a, 0), "launch"))
    return;
  /* The reference while the kernel runs. */
  double *ref = b->ref, *mag = b->mag;
  kt_tune_matmul_reference(A, lda, B, ldb, M, N, K, ref, mag);
  if (kt_measure_cuda_failed(out, cudaDeviceSynchronize(), "kernel") ||
      kt_measure_cuda_failed(out, cudaMemcpy(C, dC + off, (nc + TAIL) * 4, cudaMemcpyDeviceToHost), "cudaMemcpy"))
    return;
  for (size_t i = nc; i < nc + TAIL; ++i) {
    uint32_t bits;
    memcpy(&bits, &C[i], sizeof bits);
    if (bits != 0xffffffffu) {
      snprintf(out->reason, sizeof out->reason, "wrote past the end of C (float %zu after it) at %dx%dx%d ldc %lld",
               i - nc, M, N, K, ldc);
      return;
    }
  }
  out->ok = 1;
  for (int i = 0; i < M && out->ok; ++i) {
    for (int j = 0; j < (int)ldc; ++j) {
      const float got = C[(size_t)i * ldc + j];
      if (j >= N) {
        if (got != 1234.5f) {
          out->ok = 0;
          snprintf(out->reason, sizeof out->reason, "wrote C's padding at (%d, %d)", i, j);
          break;
        }
        continue;
      }
      const double c0 = beta != 0.0f ? C0[(size_t)i * ldc + j] : 0.0;
      const double want = alpha * ref[(size_t)i * N + j] + beta * c0;
      const double bound = kt_tune_matmul_bound(K, alpha, mag[(size_t)i * N + j], beta * c0);
      const double e = fabs((double)got - want) / bound;
      if (!(e <= 1.0)) { /* also catches NaN */
        out->ok = 0;
        out->worst = isnan(e) ? INFINITY : e;
        snprintf(out->reason, sizeof out->reason,
                 "C(%d, %d) = %g, expected %g (error %.3g x the bound) at %dx%dx%d lda %lld ldb %lld ldc %lld "
                 "beta %g",
                 i, j, got, want, e, M, N, K, lda, ldb, ldc, beta);
        break;
      }
      if (e > out->worst)
        out->worst = e;
    }
  }
}

/* ---- `ktune tune`: problems and the summary ------------------------------ */

/* The default tuning set.  Shapes from 512 to 8192 (squares, flat, tall,
 * thin-K and long-K), where the kernels were tuned by hand; then every
 * point of the grid {16, 256, 4096}^3 (the log-cube of sizes users call,
 * at its corners, edge middles and centre), so that any call has tuned
 * shapes near it, tiny and skinny ones included: dispatch calibrates each
 * variant on the tuned shapes nearest a call (runtime/matmul.c).  Then
 * one size of 4 with the others from {256, 4096}: two in three calls drawn
 * log-uniformly over 1..16384 have a size under 16, where the grid ends.
 * Then two short-K shapes with N odd (ldb = ldc = N: only the variants that
 * serve any alignment are timed there), so that dispatch calibrates the
 * 4-byte-copy warp tiles against the short-K kernel on unaligned rows,
 * where the former lose more than on aligned ones.  Then four matrix
 * times vector products (N = 1), bound by reading A: a short and a long
 * row, each over few and many rows.  The matrix-times-vector kernel serves
 * no other default shape (nor 4096x1x256, whose rows are under 1024), so
 * nothing else calibrates it.  The same for a vector times a matrix (M =
 * 1), bound by reading B and served by its own kernel only there: few and
 * many columns, each over a short and a long K (32 columns, as narrow as
 * a lane per column gets, over the longest).  Last, three products of a
 * few rows and a few columns over a long K (8x8x4096, 1x8x16384,
 * 8x1x16384): the grid's nearest point, 16x16x4096, runs the few-column
 * kernel's 8-block clusters at twice the time they take on 6 or fewer
 * rows (16.8 us there, 8.4 at 6x9x15718, H100), so calibrated there alone
 * the model priced them 1.7 to 2.4 times too slow and sent such calls to
 * split-K warp tiles at 0.60 to 0.77 of the best (bench/reference/
 * matmul_random/README.md, run 11).  And three vector products over a
 * short K (16x1x16, 256x1x16, 1x256x16): the matrix-times-vector and
 * vector-times-matrix shapes above all have K >= 256, and a call drawn
 * log-uniformly has K under 32 one time in three.  Picked one at a time
 * from 46 candidate shapes by replaying dispatch (bench/replay_dispatch.c)
 * over four seeds' suites measured on an H200, they lifted it on three
 * other seeds' from 0.972 to 0.976 of the best, and on eleven H100 suites
 * from 0.9715 to 0.9764 (bench/reference/matmul_random/README.md, run 13). */
#define DEFAULT_SHAPES                                                                                   \
  "512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4096x4096x256,128x8192x8192," \
  "8192x128x8192,16384x16384x64,1000x1000x1000,4000x4000x4000,64x64x65536,"                              \
  "16x16x16,16x16x256,16x16x4096,16x256x16,16x256x256,16x256x4096,16x4096x16,16x4096x256,"               \
  "16x4096x4096,256x16x16,256x16x256,256x16x4096,256x256x16,256x256x256,256x256x4096,256x4096x16,"       \
  "256x4096x256,256x4096x4096,4096x16x16,4096x16x256,4096x16x4096,4096x256x16,4096x256x256,"             \
  "4096x256x4096,4096x4096x16,"                                                                          \
  "4x256x256,4x256x4096,4x4096x256,4x4096x4096,256x4x256,256x4x4096,4096x4x256,4096x4x4096,256x256x4,"   \
  "256x4096x4,4096x256x4,4096x4096x4,"                                                                   \
  "2048x2047x8,2048x8191x64,"                                                                            \
  "256x1x4096,4096x1x256,4096x1x4096,1024x1x16384,"                                                      \
  "1x256x4096,1x4096x256,1x4096x4096,1x32x16384,"                                                        \
  "8x8x4096,1x8x16384,8x1x16384,"                                                                        \
  "16x1x16,256x1x16,1x256x16"

/* One shape (item, as the CLI writes it) into out[*n]: 0, or -1 with a
 * message in err that names where it came from (`where`). */
static int add_shape(const char *where, const char *item, kt_problem *out, int *n, int max, char *err, size_t errlen)
{
  kt_problem p;
  /* The family's parse holds the sizes to 1..KT_MATMUL_MAX_DIM. */
  if (kt_family_get(KT_FAMILY_MATMUL)->parse(item, &p) != 0) {
    /* A file of anything may come through @FILE: its bytes are not sent
     * to the terminal as they are. */
    char shown[64];
    size_t i = 0;
    for (; item[i] && i + 1 < sizeof shown; ++i)
      shown[i] = item[i] >= 0x20 && item[i] < 0x7f ? item[i] : '?';
    shown[i] = '\0';
    snprintf(err, errlen, "%s: bad shape '%s' (MxNxK, each 1..%d)", where, shown, KT_MATMUL_MAX_DIM);
    return -1;
  }
  if (*n == max) {
    snprintf(err, errlen, "%s: more than %d shapes", where, max);
    return -1;
  }
  p.family = KT_FAMILY_MATMUL;
  p.dist[0] = 0;
  out[(*n)++] = p;
  return 0;
}

int kt_tune_matmul_shapes_file(const char *path, kt_problem *out, int max, char *err, size_t errlen)
{
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "--matmul @%s: %s", path, strerror(errno));
    return -1;
  }
  char line[256], where[1100];
  int n = 0, lineno = 0, rc = 0;
  while (rc == 0 && fgets(line, sizeof line, f)) {
    ++lineno;
    snprintf(where, sizeof where, "%s:%d", path, lineno);
    if (!strchr(line, '\n') && !feof(f)) {
      snprintf(err, errlen, "%s: line too long", where);
      rc = -1;
      break;
    }
    line[strcspn(line, "#\r\n")] = 0; /* a comment runs to the end of its line */
    char *item = line + strspn(line, " \t");
    size_t len = strlen(item);
    while (len > 0 && (item[len - 1] == ' ' || item[len - 1] == '\t'))
      item[--len] = 0;
    if (len > 0)
      rc = add_shape(where, item, out, &n, max, err, errlen);
  }
  fclose(f);
  if (rc == 0 && n == 0) {
    snprintf(err, errlen, "--matmul @%s: no shapes in the file", path);
    rc = -1;
  }
  return rc == 0 ? n : -1;
}

/* values: --matmul, shapes or @FILE.  One problem per shape; matmul has no
 * distributions. */
static int problems(const char *const *values, kt_problem *out, int max, char *err, size_t errlen)
{
  const char *list = values[0];
  if (list && list[0] == '@')
    return kt_tune_matmul_shapes_file(list + 1, out, max, err, errlen);
  char item[64];
  int n = 0, more;
  while ((more = kt_tune_family_item(&list, item, sizeof item)) != 0)
    if (add_shape("--matmul", more < 0 ? "(too long)" : item, out, &n, max, err, errlen) != 0)
      return -1;
  return n;
}

static void report_header(const char *const *values)
{
  (void)values;
  printf(
      "\nmatmul                 winner                            time ms   GFLOP/s   seed bs16 GFLOP/s  speed-up\n");
}

/* The winner's GFLOP/s beside the seed kernel's on the same problem. */
static void report_row(const char *key, const kt_tune_run *runs, int nruns, const kt_tuned *t)
{
  (void)nruns; /* one: no distributions */
  const kt_variant *sv = kt_tune_matmul_seed();
  const kt_tune_result *seed = sv ? kt_tune_result_ok(runs[0].results, runs[0].n, sv->name) : NULL;
  const kt_tune_result *win = kt_tune_result_ok(runs[0].results, runs[0].n, t->ranked[0]->name);
  double rate = win ? win->m.rate : 0, srate = seed ? seed->m.rate : 0;
  printf("%-22s %-33s %8.3f  %8.0f   %8.0f           %6.2fx\n", key, t->ranked[0]->name, t->best_ms, rate, srate,
         srate > 0 ? rate / srate : 0);
}

/* ---- `ktune __worker`: check and time ------------------------------------- */

typedef struct inputs {
  kt_device_info dev;
  kt_problem p;
  int M, N, K;
  float *hA, *hB; /* the problem's A and B, on the host for the sample check */
  float *dA, *dB, *dC;
  void *flush;
  size_t flush_bytes;
  float *staging;               /* the sample check's outputs, copied back (pinned) */
  kt_tune_matmul_buffers check; /* the checks' buffers, kept from variant to variant */
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
  kt_tune_matmul_buffers_free(&in->check);
  free(in->hA);
  free(in->hB);
  free(in);
}

static float uniform(kt_rng *r)
{
  return kt_rng_float(r);
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
  kt_rng r = {seed};
  const size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
  in->hA = malloc(na * 4);
  in->hB = malloc(nb * 4);
  in->flush_bytes = kt_measure_flush_bytes(dev);
  if (!in->hA || !in->hB || cudaMalloc((void **)&in->dA, na * 4) || cudaMalloc((void **)&in->dB, nb * 4) ||
      cudaMalloc((void **)&in->dC, nc * 4) || cudaMalloc(&in->flush, in->flush_bytes) ||
      cudaMallocHost((void **)&in->staging, sizeof(float) * KT_TUNE_MATMUL_SAMPLES)) {
    snprintf(err, errlen, "cannot allocate the %dx%dx%d problem", M, N, K);
    teardown(in);
    return NULL;
  }
  kt_measure_fill(in->hA, na, kt_rng_next(&r), uniform);
  kt_measure_fill(in->hB, nb, kt_rng_next(&r), uniform);
  cudaMemcpy(in->dA, in->hA, na * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(in->dB, in->hB, nb * 4, cudaMemcpyHostToDevice);
  return in;
}

static void unfit(const kt_variant *v, const kt_device_info *dev, const kt_problem *p, char *buf, size_t len)
{
  (void)v, (void)dev, (void)p;
  snprintf(buf, len, "cannot run on this device");
}

static void measure(void *state, const kt_variant *v, uint64_t seed, double best_ms, kt_tune_result *r)
{
  inputs *in = state;
  const kt_device_info *dev = &in->dev;
  const int M = in->M, N = in->N, K = in->K;
  /* ldb = ldc = N at the tuned size; lda = K may be anything.  A variant
   * that cannot serve those rows is not timed, nor checked here. */
  if (N % v->align != 0) {
    kt_tune_result_set(r, &in->p, v, "skipped", "leading dimensions of this problem are not aligned for it");
    return;
  }
  /* Correctness first, on fresh shapes that are not tile multiples, with
   * padded leading dimensions, lda never a multiple of 4 (every variant
   * serves any lda).  The first check gives ldb and ldc in multiples of 4
   * and pointers on the 16-byte boundary, the paths of aligned rows (a
   * float4 variant's in-place reads, the few-column kernel's float4 reads
   * of B); the second gives odd ones and pointers off the boundary, so that
   * a float4 variant's launcher stages B and its epilogue stores C
   * unaligned, as dispatch may ask of it, and every other kernel reads
   * through its unaligned paths. */
  kt_rng vr = {seed};
  kt_check c = {1, 0, 0, ""};
  double worst = 0;
  for (int t = 0; t < 2 && c.ok; ++t) {
    const int m = 65 + (int)(kt_rng_next(&vr) % 190), n = 65 + (int)(kt_rng_next(&vr) % 190),
              k = 33 + (int)(kt_rng_next(&vr) % 300);
    const long long lda = (k + 3) / 4 * 4 + 1, ldb = t ? ((n + 1) % 4 ? n + 1 : n + 2) : (n + 4) / 4 * 4,
                    ldc = t ? n + 2 : (n + 8) / 4 * 4;
    kt_tune_matmul_check_with(&in->check, v, dev, m, n, k, lda, ldb, ldc, t ? 1.0f : 1.25f, t ? 0.0f : -0.75f, t,
                              kt_rng_next(&vr), &c);
    if (c.worst > worst)
      worst = c.worst;
  }
  if (!c.ok) {
    kt_tune_result_set(r, &in->p, v, c.launch_failed ? "launch_failed" : "wrong", c.reason);
    r->m.max_err = c.worst;
    return;
  }
  /* Then the tuned size: time it, and check a sample of its outputs. */
  cudaMemset(in->dC, 0xff, (size_t)M * N * 4); /* NaN: an unwritten output shows */
  kt_matmul_args args = {
      M, N, K, 1.0f, 0.0f, in->dA, in->dB, in->dC, K, N, N, dev->sm_count, kt_device_pool(dev->ordinal)};
  double ms = 0;
  int reps = 0;
  int e = kt_measure_candidate(v, &args, in->flush, in->flush_bytes, best_ms, &ms, &reps);
  if (e) {
    kt_tune_result_set(r, &in->p, v, "launch_failed", cudaGetErrorString((cudaError_t)e));
    return;
  }
  char why[256] = "";
  const int sampled = kt_tune_matmul_sample(in->dC, M, N, K, in->hA, K, 0, in->hB, N, 0, KT_F32, in->staging, &vr,
                                            &worst, why, sizeof why);
  kt_tune_matmul_record(r, &in->p, v, sampled, why, ms, reps, worst, M, N, K);
}

void kt_tune_matmul_record(struct kt_tune_result *r, const kt_problem *p, const kt_variant *v, int sampled,
                           const char *why, double ms, int reps, double worst, int M, int N, int K)
{
  if (sampled) {
    kt_tune_result_set(r, p, v, sampled == -2 ? "launch_failed" : "wrong", why);
    r->m.max_err = INFINITY;
    return;
  }
  kt_tune_result_set(r, p, v, "ok", "");
  r->m.time_ms = ms;
  r->m.rate = 2.0 * M * N * (double)K / (ms * 1e6);
  r->m.max_err = worst;
  r->m.reps = reps;
}

int kt_tune_matmul_sample(const float *dC, int M, int N, int K, const float *hA, long long lda, int op_a,
                          const float *hB, long long ldb, int op_b, int type, float *staging, kt_rng *r, double *worst,
                          char *why, size_t whylen)
{
  /* The outputs' places first, and their copies queued one after another
   * (into pinned staging they need not wait for each other), then checked. */
  int i0[KT_TUNE_MATMUL_SAMPLES], j0[KT_TUNE_MATMUL_SAMPLES];
  float local[KT_TUNE_MATMUL_SAMPLES], *got = staging ? staging : local;
  for (int s = 0; s < KT_TUNE_MATMUL_SAMPLES; ++s) {
    i0[s] = (int)(kt_rng_next(r) % (uint64_t)M), j0[s] = (int)(kt_rng_next(r) % (uint64_t)N);
    cudaMemcpyAsync(&got[s], dC + (size_t)i0[s] * N + j0[s], 4, cudaMemcpyDeviceToHost, 0);
  }
  const cudaError_t e = cudaStreamSynchronize(0);
  if (e != cudaSuccess) {
    snprintf(why, whylen, "copying C back: %s", cudaGetErrorString(e));
    return -2;
  }
  for (int s = 0; s < KT_TUNE_MATMUL_SAMPLES; ++s) {
    double ref = 0, mag = 0;
    for (int k = 0; k < K; ++k) {
      const double x = hA[op_a ? (size_t)k * lda + i0[s] : (size_t)i0[s] * lda + k];
      const double y = hB[op_b ? (size_t)j0[s] * ldb + k : (size_t)k * ldb + j0[s]];
      ref += x * y;
      mag += fabs(x * y);
    }
    const double err = fabs(got[s] - ref) / kt_tune_gemm_bound(type, K, 1.0, mag, 0.0);
    if (!(err <= 1.0)) {
      snprintf(why, whylen, "at %dx%dx%d: C(%d, %d) = %g, expected %g", M, N, K, i0[s], j0[s], got[s], ref);
      return -1;
    }
    if (err > *worst)
      *worst = err;
  }
  return 0;
}

/* ---- `ktune explain` -------------------------------------------------------- */

static int explain_problem(char *const *args, int nargs, kt_problem *p, char *err, size_t errlen)
{
  memset(p, 0, sizeof *p);
  p->family = KT_FAMILY_MATMUL;
  for (int d = 0; d < 3 && nargs == 3; ++d)
    if (kt_cli_integer(args[d], 1, KT_MATMUL_MAX_DIM, &p->dim[d]) != 0)
      nargs = -1;
  if (nargs != 3) {
    snprintf(err, errlen, "matmul takes M N K, each 1..%d", KT_MATMUL_MAX_DIM);
    return -1;
  }
  return 0;
}

static int explain(kt_context *ctx, const kt_problem *p, kt_choice *out)
{
  /* Aligned stand-in pointers: the choice looks only at their alignment. */
  const float *x = (const float *)(uintptr_t)0x100000;
  return kt_matmul_choice(ctx, p->m, p->n, p->k, x, p->k, x, p->n, x, p->n, out);
}

const kt_tune_family kt_tune_matmul = {
    .id = KT_FAMILY_MATMUL,
    .options = {{"--matmul", "MxNxK,...|@FILE", DEFAULT_SHAPES,
                 "the matmul shapes to tune, at most 256; @FILE: from a file, one MxNxK a line,\n"
                 "                           # comments (make tune SHAPES=FILE)"}},
    .problems = problems,
    .report_header = report_header,
    .report_row = report_row,
    .setup = setup,
    .unfit = unfit,
    .measure = measure,
    .teardown = teardown,
    .explain_args = "M N K",
    .explain_problem = explain_problem,
    .explain = explain,
};
