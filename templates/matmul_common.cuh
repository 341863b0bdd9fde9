/* SPDX-License-Identifier: MIT */
// templates/matmul_common.cuh: what the matmul kernels share: staging B into
// an aligned copy for the kernels that read it 16 bytes at a time.
#ifndef MATMUL_COMMON_CUH
#define MATMUL_COMMON_CUH

#include "kt_launch.h"

/*
 * W[r][c] = B[r][c] for r < rows and c < N, and 0 for N <= c < ldw: a copy
 * of B whose rows start 16 bytes apart (ldw a multiple of 4, W from the
 * memory pool), so that a float4 kernel can read any B.  (The kernel
 * reads no column past N; the zeros only leave nothing undefined.)
 *
 * Lane t of a block takes columns c0 + t + 256 j, j < STAGE_UNROLL, of one
 * row, so each load and store of a warp is 128 consecutive bytes whatever
 * B's alignment, and every thread has STAGE_UNROLL loads in flight.  Blocks
 * stride over the rows.
 */
constexpr int STAGE_THREADS = 256, STAGE_UNROLL = 4, STAGE_COLS = STAGE_THREADS * STAGE_UNROLL;

static __global__ void __launch_bounds__(STAGE_THREADS)
matmul_stage_b(const float *__restrict__ B, long long ldb, int rows, int N, long long ldw, float *__restrict__ W)
{
  const long long c0 = (long long)blockIdx.x * STAGE_COLS + threadIdx.x;
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
    const float *src = B + r * ldb;
    float x[STAGE_UNROLL];
#pragma unroll
    for (int j = 0; j < STAGE_UNROLL; ++j) {
      const long long c = c0 + j * STAGE_THREADS;
      x[j] = c < N ? src[c] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < STAGE_UNROLL; ++j) {
      const long long c = c0 + j * STAGE_THREADS;
      if (c < ldw)
        W[r * ldw + c] = x[j];
    }
  }
}

// Stage rows x N of B (row stride ldb) into W (row stride ldw).
static inline cudaError_t matmul_stage_launch(const float *B, long long ldb, int rows, int N, long long ldw, float *W,
                                              int sm_count, cudaStream_t stream)
{
  const long long cols = (ldw + STAGE_COLS - 1) / STAGE_COLS;
  if (cols > 0x7fffffffLL)
    return cudaErrorInvalidConfiguration;
  // About 8 blocks of 256 threads per SM in all, each row a block or more.
  long long y = ((long long)(sm_count > 0 ? sm_count : 1) * 8 + cols - 1) / cols;
  y = y < rows ? y : rows;
  y = y < 65535 ? y : 65535;
  return kt_launch_kernel(matmul_stage_b, dim3((unsigned)cols, (unsigned)(y > 0 ? y : 1)), dim3(STAGE_THREADS), 0,
                          stream, B, ldb, rows, N, ldw, W);
}

#endif
