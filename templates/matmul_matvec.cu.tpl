@ -- SPDX-License-Identifier: MIT
@ -- templates/matmul_matvec.cu.tpl: the matmul family's matrix-times-vector kernel, C = alpha * A * B + beta * C
@ -- with N = 1.  Row-major fp32 with leading dimensions; any M, N, K, any 4-byte alignment.  The space
@ -- (templates/matmul.space.lua) sets the values used below.
#include "$(stream == 1 and 'matmul_stream.cuh' or 'kt_launch.h')"

/*
 * Matrix times a vector (N = 1): A, M x K, is read once and the time is
 * how fast it streams.  Unlike the few-column kernel (matmul_gemv), which
 * reads 4 bytes per lane so that any lda and any alignment serve, this one
 * reads A in 16-byte pieces: each row from its first 16-byte boundary
 * (the H elements before it, 0 to 3, and the at most 3 after its last
 * whole piece are read one at a time), so that rows of any lda and A at
 * any 4-byte offset all stream in float4 loads.
 *
 * The 8 warps of a block are WR = 8 / KW along rows, each owning TM rows,
 * times KW along K.  K is interleaved over the KW warps, not cut into
 * chunks: in step s the warps along K read pieces (s KW + q) 32 + lane,
 * so that together they sweep one contiguous run of KW x DEP x 512 bytes
 * of each row at a time.  With chunks (a K-th of the row per warp), the
 * best chunked form took 1% to 56% longer than the best interleaved one on
 * 11 of 12 shapes, 3% at the median (an H100, L2 flushed: the probe of
 * bench/reference/matmul_random/README.md, run 10).  Each
 * lane has DEP x TM pieces of A in flight before their multiply-adds; the
 * vector's four values for a piece come from L1 (B is K floats, ldb
 * apart, shared by every block).
 *
 * The sums are added in a fixed order: a warp's lanes in a butterfly, then
 * the KW warps of each row in order through shared memory.  No atomics:
 * the result is the same on every run.  Columns past the first are more
 * column blocks (gridDim.y), each reading all of A again: correct, but
 * the kernel is built for N = 1 and rows of 128 KW or more (a piece for
 * every lane of the warps along K; shorter rows leave warps idle), and
 * serves only those (kt_matmul_serves_shape).
 */
constexpr int TM = $(tm);                      // rows per warp
constexpr int THREADS = $(threads), WARPS = THREADS / 32;
constexpr int KW = $(kwarps), WR = WARPS / KW; // warps along K, along rows
constexpr int RB = WR * TM;                    // rows of C per block
constexpr int DEP = $(depth);                  // 16-byte pieces per lane and row in one step
constexpr int STEP = 32 * DEP * KW;            // pieces of a row the block's warps along K read in one step
static_assert(WARPS % KW == 0, "the warps along K divide the block");

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(int M, int N, int K, float alpha, const float *__restrict__ A, long long lda,
        const float *__restrict__ B, long long ldb, float beta, float *__restrict__ C, long long ldc)
{
  __shared__ float red[KW][RB]; // each warp along K's row sums
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wr = warp % WR, wq = warp / WR;
  const int r0 = (int)blockIdx.x * RB + wr * TM;

  // Row i: its start, its head (elements before its first 16-byte
  // boundary) and its whole 16-byte pieces after that.  Rows past M read
  // row M - 1 and are never stored.
  const float *row[TM];
  int head[TM], pieces[TM], most = 0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    row[i] = A + (size_t)(r0 + i < M ? r0 + i : M - 1) * lda;
    const int h = (int)((0u - (unsigned)((size_t)row[i] >> 2)) & 3u);
    head[i] = h < K ? h : K;
    pieces[i] = (K - head[i]) >> 2;
    most = max(most, pieces[i]);
  }

  for (int col = blockIdx.y; col < N; col += gridDim.y) {
    const float *x = B + col;
    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i)
      acc[i] = 0.0f;
#pragma unroll 1
    for (int p0 = 0; p0 < most; p0 += STEP) {
      float4 a[DEP][TM];
#pragma unroll
      for (int s = 0; s < DEP; ++s)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
          const int p = p0 + (s * KW + wq) * 32 + lane;
          a[s][i] = p < pieces[i] ? $(ld)((const float4 *)(row[i] + head[i]) + p) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
      for (int s = 0; s < DEP; ++s)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
          const int p = p0 + (s * KW + wq) * 32 + lane;
          if (p < pieces[i]) {
            const float *xp = x + (size_t)(head[i] + 4 * p) * ldb;
            acc[i] = fmaf(a[s][i].x, __ldg(xp), acc[i]);
            acc[i] = fmaf(a[s][i].y, __ldg(xp + ldb), acc[i]);
            acc[i] = fmaf(a[s][i].z, __ldg(xp + 2 * ldb), acc[i]);
            acc[i] = fmaf(a[s][i].w, __ldg(xp + 3 * ldb), acc[i]);
          }
        }
    }
    // The head and the tail (under 4 elements each), on the first warp along K.
    if (wq == 0) {
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const int tail = head[i] + 4 * pieces[i] + lane - 4;
        const int k = lane < 4 ? lane : tail;
        if ((lane < 4 && k < head[i]) || (lane >= 4 && lane < 8 && tail < K))
          acc[i] = fmaf(row[i][k], x[(size_t)k * ldb], acc[i]);
      }
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
      for (int o = 16; o > 0; o /= 2)
        acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
      if (lane == i % 32)
        red[wq][wr * TM + i] = acc[i];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < RB; e += THREADS) {
      float s = 0.0f;
#pragma unroll
      for (int q = 0; q < KW; ++q)
        s += red[q][e];
      const int r = (int)blockIdx.x * RB + e;
      if (r < M) {
        float *c = C + (size_t)r * ldc + col;
        // beta == 0 must not read C: it may hold NaN.
        *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
      }
    }
    __syncthreads(); // red is reused by the next column
  }
}

extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_matmul_args *a = (const kt_matmul_args *)args;
  const long long blocks = (a->M + RB - 1) / RB;
  if (blocks > 0x7fffffffLL)
    return (int)cudaErrorInvalidConfiguration;
  const dim3 grid((unsigned)blocks, (unsigned)(a->N < 65535 ? a->N : 65535));
  return (int)kt_launch_kernel($(name), grid, dim3(THREADS), 0, stream, a->M, a->N, a->K, a->alpha, a->A, a->lda,
                                a->B, a->ldb, a->beta, a->C, a->ldc);
}
