/* SPDX-License-Identifier: MIT */
/* tuner/gemm.h: the tuner's gemm family (gemm.c, kt_tune_gemm_), as the
 * tuner's worker, the GPU tests and the benchmarks use it.
 *
 * Correctness criterion: every element within kt_tune_gemm_bound
 * (matmul.h, beside the FP32 bound) of a reference computed in double from
 * the inputs rounded to the call's type.  Padding holds NaN, batches have
 * gaps, and C is NaN where beta == 0 (it must not be read).
 */
#ifndef KT_TUNE_GEMM_H
#define KT_TUNE_GEMM_H

#include "measure.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x rounded to `type` (kt_dtype) as the reference takes it: TF32 to nearest
 * (ties away), BF16 to nearest even; F32 and F16 unchanged (F16 values are
 * drawn representable). */
float kt_tune_gemm_round(float x, int type);

/* A random input value for `type`: BF16 and F16 get multiples of 2^-8 in
 * (-1, 1), exact in every type; F32 and TF32 full FP32 values. */
float kt_tune_gemm_value(kt_rng *r, int type);

/* The input type a variant is measured with: its own, BF16 for the fallback. */
int kt_tune_gemm_variant_type(const kt_variant *v);

/* One checked call. */
typedef struct kt_tune_gemm_case {
  int type, op_a, op_b;
  int M, N, K, batch;
  int pad; /* elements of padding per row of A and B */
  float alpha, beta;
  int shared; /* batch stride 0, one operand for the whole batch: bit 0 A, bit 1 B */
} kt_tune_gemm_case;

static inline kt_tune_gemm_case kt_tune_gemm_case_of(int type, int op_a, int op_b, int M, int N, int K, int batch,
                                                     int pad, float alpha, float beta, int shared)
{
  const kt_tune_gemm_case c = {type, op_a, op_b, M, N, K, batch, pad, alpha, beta, shared};
  return c;
}

/* The reference of one batch entry of a case, from its stored A and B
 * (op and leading dimension as the case says): ref[i N + j] = the sum over
 * k of op(A)[i][k] op(B)[k][j] in double, both rounded to the case's type
 * (kt_tune_gemm_round), mag[i N + j] the sum of the products' magnitudes;
 * each sum adds its products in k order.  0, or -1 out of host memory. */
int kt_tune_gemm_reference(const kt_tune_gemm_case *cs, const float *A, long long lda, const float *B, long long ldb,
                           double *ref, double *mag);

/* Run v once on fresh random inputs of this case, on the current device,
 * and check every element of every batch entry (kt_check.worst: the worst
 * |err| / bound). */
void kt_tune_gemm_check(const kt_variant *v, const kt_device_info *dev, const kt_tune_gemm_case *cs, uint64_t seed,
                        kt_check *out);

/* The same check of kt_matmul_ex(ctx) (dispatch and whatever path it
 * takes: kt_matmul, a transpose into scratch, a variant), on ctx's device,
 * which must be current. */
void kt_tune_gemm_check_call(kt_context *ctx, const kt_tune_gemm_case *cs, uint64_t seed, kt_check *out);

#ifdef __cplusplus
}
#endif

#endif
