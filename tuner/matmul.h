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
 * it fails; C's padding holds a sentinel that must survive.
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

/* After timing a tuned problem: 48 outputs of C (M x N, ldc = N, on the
 * device), drawn from r, against the double-precision products of hA and
 * hB as stored (op 0 = N, 1 = T, with lda and ldb), within
 * kt_tune_gemm_bound(type) (KT_F32: the FP32 bound).  0, raising *worst
 * to the worst |err| / bound; or -1 with the first wrong element in why. */
int kt_tune_matmul_sample(const float *dC, int M, int N, int K, const float *hA, long long lda, int op_a,
                          const float *hB, long long ldb, int op_b, int type, kt_rng *r, double *worst, char *why,
                          size_t whylen);

/* The shapes of a file (`--matmul @FILE`, make tune SHAPES=FILE): one
 * MxNxK a line, blank lines and '#' comments (to the end of a line)
 * skipped.  How many (at most max), or -1 with "FILE:LINE: ..." in err;
 * a file without shapes is an error too. */
int kt_tune_matmul_shapes_file(const char *path, kt_problem *out, int max, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
