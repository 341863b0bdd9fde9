// templates/gemm_common.cuh: what the gemm family's kernels share: element
// types and their conversion to the multiply's precision, and the repacking
// of an operand into K-major scratch for the kernels that need that layout.
//
// The gemm family computes C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b]
// (kt_gemm_args, runtime/kt_variant.h).  Row-major throughout: op(A) is
// M x K and op(B) is K x N; "K-major" below means K is the contiguous
// index, which is A with op N and B with op T.
#ifndef GEMM_COMMON_CUH
#define GEMM_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "kt_launch.h"

// The value of stored element i of an operand of type `type`, as the
// multiply sees it: TF32 is FP32 rounded to nearest (ties away) to 10
// mantissa bits, as cvt.rna.tf32 does; the 16-bit types widen exactly.
static __device__ __forceinline__ float gemm_load(const void *p, long long i, int type)
{
  if (type == KT_GEMM_BF16)
    return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
  if (type == KT_GEMM_F16)
    return __half2float(((const __half *)p)[i]);
  const float x = ((const float *)p)[i];
  if (type == KT_GEMM_TF32) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
  }
  return x;
}

static inline int gemm_elem_bytes(int type) { return type == KT_GEMM_BF16 || type == KT_GEMM_F16 ? 2 : 4; }

/*
 * Repack one operand into K-major scratch: out[b][r][k] for r < rows and
 * k < kp (k >= K reads as zero), from the operand as the caller passed it.
 * `kmajor` says whether the source is already rows x K with K contiguous
 * (then this is a copy that fixes alignment and leading dimension) or K x
 * rows (a transpose).  TF32 is rounded here (cvt.rna), so the kernel that
 * reads the scratch multiplies the rounded values.
 *
 * A 64 x 64 tile goes through shared memory so that both the reads and the
 * writes are coalesced whichever way the source runs; each of the 256
 * threads moves 16 elements, so that many loads are in flight (the repack
 * of a TF32 operand of op N runs at close to copy bandwidth); the extra
 * column keeps a transposed read of the tile off a single bank.
 */
constexpr int GEMM_PACK_TILE = 64;
template <typename T>
static __global__ void __launch_bounds__(256)
    gemm_pack(const T *__restrict__ src, long long ld, long long stride, int kmajor, int rows, int K, int kp, int tf32,
              T *__restrict__ out, int rbase)
{
  constexpr int TILE = GEMM_PACK_TILE;
  __shared__ T tile[TILE][TILE + 1];
  const long long b = blockIdx.z;
  src += b * stride;
  out += b * (long long)rows * kp;
  const int r0 = rbase + blockIdx.y * TILE, k0 = blockIdx.x * TILE; // rows from rbase: see gemm_pack_launch
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5; // 32 x 8 threads
  T x[TILE / 8][2];
#pragma unroll
  for (int i = 0; i < TILE / 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // Coalesced along the source's contiguous index: kmajor, (r, k) =
      // (r0 + 8i + ty, k0 + 32h + tx); else (k, r) = (k0 + 8i + ty, r0 + 32h + tx).
      const int u = 8 * i + ty, v = 32 * h + tx;
      const int r = r0 + (kmajor ? u : v), k = k0 + (kmajor ? v : u);
      x[i][h] = r < rows && k < K ? src[kmajor ? (long long)r * ld + k : (long long)k * ld + r] : T(0.0f);
    }
#pragma unroll
  for (int i = 0; i < TILE / 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int u = 8 * i + ty, v = 32 * h + tx;
      if (kmajor)
        tile[u][v] = x[i][h]; // tile[r][k]
      else
        tile[v][u] = x[i][h];
    }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < TILE / 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 8 * i + ty, k = k0 + 32 * h + tx;
      if (r < rows && k < kp) {
        T y = tile[8 * i + ty][32 * h + tx];
        if constexpr (sizeof(T) == 4) {
          if (tf32) {
            unsigned q;
            asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(q) : "f"((float)y));
            y = __uint_as_float(q);
          }
        }
        out[(long long)r * kp + k] = y;
      }
    }
}

// Launch gemm_pack over `batch` operands of rows x K into out (rows x kp
// each): gridDim.y and gridDim.z take at most 65535 tiles of rows and batch
// entries, so larger operands go in several launches, the rows' by rbase.
static inline cudaError_t gemm_pack_launch(const void *src, long long ld, long long stride, int kmajor, int rows,
                                           int K, int kp, int batch, int type, void *out, cudaStream_t stream)
{
  const int es = gemm_elem_bytes(type);
  const long long tiles_r = (rows + GEMM_PACK_TILE - 1) / GEMM_PACK_TILE;
  cudaError_t e = cudaSuccess;
  for (long long b0 = 0; b0 < batch && e == cudaSuccess; b0 += 65535)
    for (long long y0 = 0; y0 < tiles_r && e == cudaSuccess; y0 += 65535) {
      const dim3 grid((unsigned)((kp + GEMM_PACK_TILE - 1) / GEMM_PACK_TILE),
                      (unsigned)(tiles_r - y0 < 65535 ? tiles_r - y0 : 65535),
                      (unsigned)(batch - b0 < 65535 ? batch - b0 : 65535));
      const char *s = (const char *)src + (size_t)b0 * stride * es;
      char *o = (char *)out + (size_t)b0 * rows * kp * es;
      const int rbase = (int)(y0 * GEMM_PACK_TILE);
      if (es == 2)
        e = kt_launch_kernel(gemm_pack<unsigned short>, grid, dim3(256), 0, stream, (const unsigned short *)s, ld,
                             stride, kmajor, rows, K, kp, 0, (unsigned short *)o, rbase);
      else
        e = kt_launch_kernel(gemm_pack<float>, grid, dim3(256), 0, stream, (const float *)s, ld, stride, kmajor, rows,
                             K, kp, (int)(type == KT_GEMM_TF32), (float *)o, rbase);
    }
  return e;
}

#endif
