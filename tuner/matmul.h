/* SPDX-License-Identifier: MIT */
/* tuner/matmul.h: the tuner's matmul family (matmul.c, kt_tune_matmul_),
 * as the tuner's worker, the GPU tests and the benchmarks use it.
 *
 * Correctness criterion, used everywhere a matmul variant is checked: every
 * element within the componentwise bound
 *     |c - ref| <= (K + 2) * 2^-24 * (|alpha| * sum_k |a_ik * b_kj| + |beta * c0_ij|)
 * where ref is computed in double on the host.  This is the classical
 * worst-case bound for any order of fp32 summation (gamma_K), so it grows
 * linearly with K; wrong indexing misses it by orders of magnitude.
 * Padding beyond each row (lda > K ...) holds NaN, so a kernel that reads
 * it fails; C's padding holds a sentinel that must survive.  So do the 64
 * floats past the end of each matrix: NaN after A and B, NaN after C that
 * must come back untouched.
 */
#ifndef KT_TUNE_MATMUL_H
#define KT_TUNE_MATMUL_H

#include "measure.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The bound above, the one place it is computed: for an element of a
 * K-deep product, with sum_abs_products = sum_k |a_ik * b_kj| and beta_c0 =
 * beta * c0_ij.  Plus 1e-30, so that an exact result against a zero bound
 * is error 0 rather than 0/0.  A result passes when |c - ref| / bound <= 1. */
double kt_tune_matmul_bound(int K, double alpha, double sum_abs_products, double beta_c0);

/* The same bound for the gemm family's input types (kt_dtype): KT_F32 is
 * the bound above; the others allow for tensor cores that truncate their
 * FP32 sums (2^-23 per step) and, for KT_TF32, inputs truncated to TF32
 * where the reference rounds them (2^-9 per product).  ref is computed in
 * double from the inputs rounded to the type (to nearest, ties away). */
double kt_tune_gemm_bound(int type, int K, double alpha, double sum_abs_products, double beta_c0);

/* Row i of the check's reference, from a = A's row i (K floats) and B (K
 * rows of ldb floats): ref[j] = the sum over k of a[k] B[k][j] in double,
 * mag[j] = the sum of their magnitudes, for j < N; each sum adds its
 * products in k order, so bit for bit what an element-at-a-time loop
 * gives. */
void kt_tune_matmul_reference_row(const float *a, const float *B, long long ldb, int N, int K, double *ref,
                                  double *mag);

/* All M rows of the reference (ref and mag M x N, row i as
 * kt_tune_matmul_reference_row gives it from A's row i, lda floats after
 * row i - 1), the rows split over up to kt_measure_cpus() threads where
 * the product is large enough to pay for them: the same sums, sooner (a
 * check's reference took 1.4 ms on one core of the 2-core build machine). */
void kt_tune_matmul_reference(const float *A, long long lda, const float *B, long long ldb, int M, int N, int K,
                              double *ref, double *mag);

/* The seed kernel, the tune summary's and the bench's baseline: the CUDA
 * Programming Guide's shared-memory tiled kernel with BLOCK_SIZE 16 and
 * unpadded rows (algo "tiled", bs=16, pad=0), found by those properties
 * rather than by its name.  NULL when this build lacks it. */
const kt_variant *kt_tune_matmul_seed(void);

/* Run v once on a fresh random problem of this shape, on the current
 * device, and check it as above (kt_check.worst: the worst |err| / bound).
 * lda/ldb/ldc >= K/N/N.  A, B and C lie one float past a 16-byte boundary
 * for variants of alignment 1, and for float4 variants given an ldb that
 * is not a multiple of 4 (which then stage B and store C unaligned);
 * otherwise on the boundary. */
void kt_tune_matmul_check(const kt_variant *v, const kt_device_info *dev, int M, int N, int K, long long lda,
                          long long ldb, long long ldc, float alpha, float beta, uint64_t seed, kt_check *out);
/* The same with A, B and C `shift` floats (0 or 1) past a 16-byte
 * boundary, whatever the variant: shift 0 with ldb a multiple of 4 takes
 * the paths that kernels of any alignment keep for aligned rows (the
 * few-column kernel's float4 reads of B). */
void kt_tune_matmul_check_at(const kt_variant *v, const kt_device_info *dev, int M, int N, int K, long long lda,
                             long long ldb, long long ldc, float alpha, float beta, int shift, uint64_t seed,
                             kt_check *out);

/* The same in buffers kept from check to check (a worker checks hundreds
 * of variants; allocating and freeing device memory for each check took
 * more time than the check): each grows to the largest check it has
 * served.  Start from {0}; kt_tune_matmul_buffers_free releases them. */
typedef struct kt_tune_matmul_buffers {
  size_t na, nb, nc, nmn; /* elements each of A, B, C0 and C hold (with dA, dB, dC); of ref and mag */
  float *A, *B, *C0, *C;  /* host inputs, C0 the C given, C the C got back */
  double *ref, *mag;      /* kt_tune_matmul_reference's M x N */
  float *dA, *dB, *dC;    /* device */
} kt_tune_matmul_buffers;
void kt_tune_matmul_check_with(kt_tune_matmul_buffers *b, const kt_variant *v, const kt_device_info *dev, int M, int N,
                               int K, long long lda, long long ldb, long long ldc, float alpha, float beta, int shift,
                               uint64_t seed, kt_check *out);
void kt_tune_matmul_buffers_free(kt_tune_matmul_buffers *b);

/* After timing a tuned problem: KT_TUNE_MATMUL_SAMPLES outputs of C (M x
 * N, ldc = N, on the device), drawn from r, against the double-precision
 * products of hA and hB as stored (op 0 = N, 1 = T, with lda and ldb),
 * within kt_tune_gemm_bound(type) (KT_F32: the FP32 bound).  staging:
 * KT_TUNE_MATMUL_SAMPLES pinned floats to copy them into, or NULL (then
 * each copy waits for the last).  0, raising *worst to the worst |err| /
 * bound; or -1 with the first wrong element in why, -2 with the CUDA
 * error that the copies met (the context may be poisoned). */
#define KT_TUNE_MATMUL_SAMPLES 48
int kt_tune_matmul_sample(const float *dC, int M, int N, int K, const float *hA, long long lda, int op_a,
                          const float *hB, long long ldb, int op_b, int type, float *staging, kt_rng *r, double *worst,
                          char *why, size_t whylen);

/* The end of a matmul or gemm measurement: r's status from sampled (what
 * kt_tune_matmul_sample returned, why its reason): "ok" with the time ms
 * over reps runs, the rate of an M x N x K product and the worst error;
 * else "wrong" or, for -2, "launch_failed", with an infinite error. */
struct kt_tune_result; /* tuner.h */
void kt_tune_matmul_record(struct kt_tune_result *r, const kt_problem *p, const kt_variant *v, int sampled,
                           const char *why, double ms, int reps, double worst, int M, int N, int K);

/* The shapes of a file (`--matmul @FILE`, make tune SHAPES=FILE): one
 * MxNxK a line, blank lines and '#' comments (to the end of a line)
 * skipped.  How many (at most max), or -1 with "FILE:LINE: ..." in err;
 * a file without shapes is an error too. */
int kt_tune_matmul_shapes_file(const char *path, kt_problem *out, int max, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
