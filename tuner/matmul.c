/* tuner/matmul.c: what the tuner knows about the matmul family
 * (kt_tune_matmul_): its inputs, its check against a double-precision
 * reference, and its error bound (matmul.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "matmul.h"

void kt_tune_matmul_check(const kt_variant *v, const kt_device_info *dev, int M, int N, int K, long long lda,
                          long long ldb, long long ldc, float alpha, float beta, uint64_t seed, kt_check *out)
{
  memset(out, 0, sizeof *out);
  kt_rng r = {seed};
  const size_t na = (size_t)M * lda, nb = (size_t)K * ldb, nc = (size_t)M * ldc;
  float *A = malloc(na * 4), *B = malloc(nb * 4), *C0 = malloc(nc * 4), *C = malloc(nc * 4);
  float *dA = NULL, *dB = NULL, *dC = NULL;
  if (!A || !B || !C0 || !C) {
    snprintf(out->reason, sizeof out->reason, "out of host memory");
    goto done;
  }
  /* Padding beyond each row holds NaN: reading it would poison the result. */
  for (size_t i = 0; i < na; ++i)
    A[i] = (long long)(i % lda) < K ? kt_rng_float(&r) : NAN;
  for (size_t i = 0; i < nb; ++i)
    B[i] = (long long)(i % ldb) < N ? kt_rng_float(&r) : NAN;
  /* C: random where beta reads it; NaN where beta == 0 (it must not be read,
   * and any element left unwritten stays NaN); a sentinel in the padding. */
  for (size_t i = 0; i < nc; ++i)
    C0[i] = (long long)(i % ldc) < N ? (beta != 0.0f ? kt_rng_float(&r) : NAN) : 1234.5f;
  if (kt_measure_cuda_failed(out, cudaMalloc((void **)&dA, na * 4), "cudaMalloc") ||
      kt_measure_cuda_failed(out, cudaMalloc((void **)&dB, nb * 4), "cudaMalloc") ||
      kt_measure_cuda_failed(out, cudaMalloc((void **)&dC, nc * 4), "cudaMalloc") ||
      kt_measure_cuda_failed(out, cudaMemcpy(dA, A, na * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      kt_measure_cuda_failed(out, cudaMemcpy(dB, B, nb * 4, cudaMemcpyHostToDevice), "cudaMemcpy") ||
      kt_measure_cuda_failed(out, cudaMemcpy(dC, C0, nc * 4, cudaMemcpyHostToDevice), "cudaMemcpy"))
    goto done;
  kt_matmul_args a = {M, N, K, alpha, beta, dA, dB, dC, lda, ldb, ldc, dev->sm_count, kt_device_pool(dev->ordinal)};
  if (kt_measure_cuda_failed(out, (cudaError_t)v->launch(&a, 0), "launch") ||
      kt_measure_cuda_failed(out, cudaDeviceSynchronize(), "kernel") ||
      kt_measure_cuda_failed(out, cudaMemcpy(C, dC, nc * 4, cudaMemcpyDeviceToHost), "cudaMemcpy"))
    goto done;
  out->ok = 1;
  const double u = 0x1p-24;
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
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = (double)A[(size_t)i * lda + k] * B[(size_t)k * ldb + j];
        ref += p;
        mag += fabs(p);
      }
      const double c0 = beta != 0.0f ? C0[(size_t)i * ldc + j] : 0.0;
      ref = alpha * ref + beta * c0;
      const double bound = (K + 2) * u * (fabs(alpha) * mag + fabs(beta * c0)) + 1e-30;
      const double e = fabs((double)got - ref) / bound;
      if (!(e <= 1.0)) { /* also catches NaN */
        out->ok = 0;
        out->worst = isnan(e) ? INFINITY : e;
        snprintf(out->reason, sizeof out->reason,
                 "C(%d, %d) = %g, expected %g (error %.3g x the bound) at %dx%dx%d lda %lld ldb %lld ldc %lld "
                 "beta %g",
                 i, j, got, ref, e, M, N, K, lda, ldb, ldc, beta);
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
}
