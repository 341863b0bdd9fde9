/* SPDX-License-Identifier: MIT */
/* runtime/transpose.cu: the runtime's own kernels (runtime/kt_transpose.h).
 * kt_matmul_ex serves KT_F32 with an op T by transposing that operand into
 * scratch and calling kt_matmul, whose tuned kernels read both operands
 * op N (runtime/gemm.c). */
#include "kt_transpose.h"

namespace
{

constexpr int TILE = 32, ROWS = 8, THREADS = TILE * ROWS; // a block moves a 32 x 32 tile, 8 rows of threads at a time

/*
 * The tile goes through shared memory so that both the reads (along a row
 * of src) and the writes (along a row of dst) are 128 consecutive bytes a
 * warp; the extra column keeps the transposed reads of the tile free of
 * bank conflicts.  Blocks stride over the tiles, so any size takes one
 * grid.  Rows of src from `rows` to `rows_w` are read as zeros: they are
 * the padding that dst's rows get.
 */
__global__ void __launch_bounds__(THREADS)
    transpose(const float *__restrict__ src, long long lds, long long rows, long long rows_w, long long cols,
              float *__restrict__ dst, long long ldd, long long tiles_c, long long tiles)
{
  __shared__ float t[TILE][TILE + 1];
  for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const long long r0 = tile / tiles_c * TILE, c0 = tile % tiles_c * TILE;
    for (int i = threadIdx.y; i < TILE; i += ROWS) {
      const long long r = r0 + i, c = c0 + threadIdx.x;
      t[i][threadIdx.x] = r < rows && c < cols ? src[r * lds + c] : 0.0f;
    }
    __syncthreads(); // the tile is whole before any thread reads it across
    for (int i = threadIdx.y; i < TILE; i += ROWS) {
      const long long c = c0 + i, r = r0 + threadIdx.x;
      if (c < cols && r < rows_w)
        dst[c * ldd + r] = t[threadIdx.x][i];
    }
    __syncthreads(); // and read before the next tile overwrites it
  }
}

} // namespace

extern "C" int kt_transpose_f32(const void *args, cudaStream_t stream)
{
  const kt_transpose_args *a = (const kt_transpose_args *)args;
  if (a->rows <= 0 || a->cols <= 0)
    return (int)cudaSuccess;
  const long long padded = (a->rows + 3) / 4 * 4, rows_w = padded < a->ldd ? padded : a->ldd;
  const long long tiles_c = (a->cols + TILE - 1) / TILE, tiles = (rows_w + TILE - 1) / TILE * tiles_c;
  // Enough blocks to fill the GPU several times over; each loops if there are more tiles.
  long long blocks = (long long)(a->sm_count > 0 ? a->sm_count : 1) * 16;
  blocks = blocks < tiles ? blocks : tiles;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(TILE, ROWS);
  cfg.stream = stream;
  return (int)cudaLaunchKernelEx(&cfg, transpose, a->src, a->lds, a->rows, rows_w, a->cols, a->dst, a->ldd, tiles_c,
                                 tiles);
}

extern "C" int kt_scratch_alloc(const void *args, cudaStream_t stream)
{
  const kt_scratch_args *a = (const kt_scratch_args *)args;
  *a->ptr = nullptr;
  const cudaError_t e = a->pool ? cudaMallocFromPoolAsync(a->ptr, a->bytes, (cudaMemPool_t)a->pool, stream)
                                : cudaMallocAsync(a->ptr, a->bytes, stream);
  *a->status = (int)e;
  if (e != cudaSuccess) {
    *a->ptr = nullptr;
    cudaGetLastError(); // the failure is reported through *status, not left pending
  }
  return (int)cudaSuccess;
}

extern "C" int kt_scratch_free(const void *args, cudaStream_t stream)
{
  const kt_scratch_args *a = (const kt_scratch_args *)args;
  return (int)cudaFreeAsync(*a->ptr, stream);
}
