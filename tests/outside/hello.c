/* SPDX-License-Identifier: MIT */
/* tests/outside/hello.c: a program from outside ktune's tree, built against
 * an installed ktune with only what pkg-config says, plus the CUDA runtime
 * for its own device memory (tests/install_test.sh builds and runs it).
 *
 * Prints the library's version, opens a context (without a GPU it says why
 * and exits 1), multiplies a 2x3 by a 3x2 matrix and checks the product. */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <ktune.h>

#define CHECK_CUDA(x)                                                 \
  do {                                                                \
    cudaError_t e_ = (x);                                             \
    if (e_ != cudaSuccess) {                                          \
      fprintf(stderr, "hello: %s: %s\n", #x, cudaGetErrorString(e_)); \
      return 1;                                                       \
    }                                                                 \
  } while (0)

int main(void)
{
  printf("libktune %s\n", kt_version());
  if (strcmp(kt_version(), KT_VERSION_STRING) != 0) {
    fprintf(stderr, "hello: ktune.h is %s but libktune is %s\n", KT_VERSION_STRING, kt_version());
    return 1;
  }
  kt_context *ctx;
  int rc = kt_open(&ctx, NULL);
  if (rc != KT_OK) {
    fprintf(stderr, "hello: %s\n", kt_strerror(rc));
    return 1;
  }
  printf("device: %s\n", kt_device_name(ctx));

  const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {7, 8, 9, 10, 11, 12}; /* 2x3, 3x2, row-major */
  const float want[4] = {58, 64, 139, 154};
  float C[4] = {0}, *dA, *dB, *dC;
  CHECK_CUDA(cudaMalloc((void **)&dA, sizeof A));
  CHECK_CUDA(cudaMalloc((void **)&dB, sizeof B));
  CHECK_CUDA(cudaMalloc((void **)&dC, sizeof C));
  CHECK_CUDA(cudaMemcpy(dA, A, sizeof A, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dB, B, sizeof B, cudaMemcpyHostToDevice));
  rc = kt_matmul(ctx, 2, 2, 3, 1.0f, dA, 3, dB, 2, 0.0f, dC, 2, NULL);
  if (rc != KT_OK) {
    fprintf(stderr, "hello: kt_matmul: %s\n", kt_strerror(rc));
    return 1;
  }
  CHECK_CUDA(cudaMemcpy(C, dC, sizeof C, cudaMemcpyDeviceToHost));
  int wrong = 0;
  for (int i = 0; i < 4; ++i)
    wrong += C[i] != want[i];
  printf("C = [%g %g; %g %g] %s\n", C[0], C[1], C[2], C[3], wrong ? "(WRONG)" : "(ok)");
  cudaFree(dA), cudaFree(dB), cudaFree(dC);
  kt_close(ctx);
  return wrong ? 1 : 0;
}
