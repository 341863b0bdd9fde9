/* SPDX-License-Identifier: MIT */
/* examples/example.c: link libktune and call both families through dispatch.
 *
 *   make && ./build/example
 *
 * Multiplies two random matrices and histograms random samples on the GPU,
 * checks both results on the CPU, and prints which variant served each call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "ktune.h"

#define CHECK_CUDA(x)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

static float frand(unsigned *s)
{
  *s = *s * 1664525u + 1013904223u;
  return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

int main(void)
{
  kt_context *ctx;
  int rc = kt_open(&ctx, NULL);
  if (rc != KT_OK) {
    fprintf(stderr, "kt_open: %s\n", kt_strerror(rc));
    return rc == KT_ERR_NO_DEVICE ? 77 : 1;
  }
  printf("device: %s, %d tuned problems\n", kt_device_name(ctx), kt_tuned_count(ctx));

  /* matmul: C = A * B with M, N, K that are not tile multiples. */
  const int M = 1000, N = 777, K = 515;
  float *hA = malloc(sizeof(float) * M * K), *hB = malloc(sizeof(float) * K * N), *hC = malloc(sizeof(float) * M * N);
  unsigned seed = 12345;
  for (int i = 0; i < M * K; ++i)
    hA[i] = frand(&seed);
  for (int i = 0; i < K * N; ++i)
    hB[i] = frand(&seed);
  float *dA, *dB, *dC;
  CHECK_CUDA(cudaMalloc((void **)&dA, sizeof(float) * M * K));
  CHECK_CUDA(cudaMalloc((void **)&dB, sizeof(float) * K * N));
  CHECK_CUDA(cudaMalloc((void **)&dC, sizeof(float) * M * N));
  CHECK_CUDA(cudaMemcpy(dA, hA, sizeof(float) * M * K, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dB, hB, sizeof(float) * K * N, cudaMemcpyHostToDevice));
  kt_choice why;
  kt_matmul_choice(ctx, M, N, K, dA, K, dB, N, dC, N, &why);
  printf("matmul %dx%dx%d -> %s (%s)\n", M, N, K, why.variant, why.reason);
  rc = kt_matmul(ctx, M, N, K, 1.0f, dA, K, dB, N, 0.0f, dC, N, NULL);
  if (rc != KT_OK) {
    fprintf(stderr, "kt_matmul: %s\n", kt_strerror(rc));
    return 1;
  }
  CHECK_CUDA(cudaMemcpy(hC, dC, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int i = 0; i < M; i += 37)
    for (int j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int k = 0; k < K; ++k) {
        ref += (double)hA[i * K + k] * hB[k * N + j];
        mag += fabs((double)hA[i * K + k] * hB[k * N + j]);
      }
      double e = fabs(hC[i * N + j] - ref) / ((K + 2) * 0x1p-24 * mag + 1e-30);
      worst = e > worst ? e : worst;
    }
  printf("matmul: worst error %.3f of the bound %s\n", worst, worst <= 1 ? "(ok)" : "(WRONG)");

  /* histogram: 4096 bins, samples partly out of range (clamped to the end bins). */
  const int nbins = 4096;
  const size_t n = 10000019;
  int *hs = malloc(sizeof(int) * n);
  unsigned *hbins = malloc(sizeof(unsigned) * nbins), *ref = calloc(nbins, sizeof(unsigned));
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    hs[i] = (int)(seed % (nbins + 200)) - 100;
    ref[hs[i] < 0 ? 0 : hs[i] >= nbins ? nbins - 1 : hs[i]]++;
  }
  int *ds;
  unsigned *dbins;
  CHECK_CUDA(cudaMalloc((void **)&ds, sizeof(int) * n));
  CHECK_CUDA(cudaMalloc((void **)&dbins, sizeof(unsigned) * nbins));
  CHECK_CUDA(cudaMemcpy(ds, hs, sizeof(int) * n, cudaMemcpyHostToDevice));
  kt_histogram_choice(ctx, ds, n, dbins, nbins, &why);
  printf("histogram nbins=%d n=%zu -> %s (%s)\n", nbins, n, why.variant, why.reason);
  rc = kt_histogram(ctx, ds, n, dbins, nbins, NULL);
  if (rc != KT_OK) {
    fprintf(stderr, "kt_histogram: %s\n", kt_strerror(rc));
    return 1;
  }
  CHECK_CUDA(cudaMemcpy(hbins, dbins, sizeof(unsigned) * nbins, cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int b = 0; b < nbins; ++b)
    wrong += hbins[b] != ref[b];
  printf("histogram: %d wrong bins %s\n", wrong, wrong ? "(WRONG)" : "(ok)");

  cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(ds), cudaFree(dbins);
  free(hA), free(hB), free(hC), free(hs), free(hbins), free(ref);
  kt_close(ctx);
  return worst <= 1 && wrong == 0 ? 0 : 1;
}
