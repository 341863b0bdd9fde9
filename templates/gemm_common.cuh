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
 * Repack operands into K-major scratch: out[b][r][k] for r < rows and
 * k < kp (k >= K reads as zero), from an operand as the caller passed it.
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
 *
 * One launch repacks one operand or two (a multiply's A and B, which share
 * K): the grid is flat, one block a tile, the first operand's tiles then
 * the second's, K tiles fastest, then rows, then batch entries.  Two
 * launches in turn cost the second's launch and the first's tail; one grid
 * as tall as the taller operand, the other's blocks past its rows idle,
 * cost more where the two differ much (session 64); a flat grid of the
 * tiles that exist costs neither.
 */
constexpr int GEMM_PACK_TILE = 64;

// One operand to repack: `batch` entries of `rows` rows, `stride` elements
// apart in src and rows x kp apart in out.
struct gemm_pack_op {
  const void *src;
  long long ld, stride;
  int kmajor, rows, batch;
  void *out;
};

template <typename T> struct gemm_pack_part {
  const T *src;
  long long ld, stride, tiles; /* tiles: K tiles x row tiles x batch */
  int kmajor, rows;
  T *out;
};

template <typename T>
static __global__ void __launch_bounds__(256)
    gemm_pack(gemm_pack_part<T> p0, gemm_pack_part<T> p1, int K, int kp, int tf32, long long base)
{
  constexpr int TILE = GEMM_PACK_TILE;
  __shared__ T tile[TILE][TILE + 1];
  long long t = base + blockIdx.x;
  const bool first = t < p0.tiles;
  t -= first ? 0 : p0.tiles;
  const T *src = first ? p0.src : p1.src;
  T *out = first ? p0.out : p1.out;
  const long long ld = first ? p0.ld : p1.ld, stride = first ? p0.stride : p1.stride;
  const int kmajor = first ? p0.kmajor : p1.kmajor, rows = first ? p0.rows : p1.rows;
  const long long ktiles = (kp + TILE - 1) / TILE, rtiles = (rows + TILE - 1) / TILE;
  const long long b = t / (ktiles * rtiles), rt = t / ktiles % rtiles;
  src += b * stride;
  out += b * (long long)rows * kp;
  const int r0 = (int)(rt * TILE), k0 = (int)(t % ktiles * TILE);
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

template <typename T> static inline gemm_pack_part<T> gemm_pack_part_of(const gemm_pack_op *o, int kp)
{
  gemm_pack_part<T> p = {};
  if (o && o->rows > 0 && o->batch > 0) {
    const long long ktiles = (kp + GEMM_PACK_TILE - 1) / GEMM_PACK_TILE;
    p.src = (const T *)o->src, p.out = (T *)o->out, p.ld = o->ld, p.stride = o->stride;
    p.kmajor = o->kmajor, p.rows = o->rows;
    p.tiles = ktiles * ((o->rows + GEMM_PACK_TILE - 1) / GEMM_PACK_TILE) * o->batch;
  }
  return p;
}

// Repack `a` and, where not NULL, `b` (of the same K and kp) in one launch,
// or in several where the tiles outnumber a grid's 2^31 - 1 blocks.
template <typename T>
static inline cudaError_t gemm_pack_launch_t(const gemm_pack_op *a, const gemm_pack_op *b, int K, int kp, int tf32,
                                             cudaStream_t stream)
{
  const gemm_pack_part<T> p0 = gemm_pack_part_of<T>(a, kp), p1 = gemm_pack_part_of<T>(b, kp);
  const long long total = p0.tiles + p1.tiles, most = 0x7fffffffLL;
  cudaError_t e = cudaSuccess;
  for (long long base = 0; base < total && e == cudaSuccess; base += most)
    e = kt_launch_kernel(gemm_pack<T>, dim3((unsigned)(total - base < most ? total - base : most)), dim3(256), 0,
                         stream, p0, p1, K, kp, tf32, base);
  return e;
}

static inline cudaError_t gemm_pack_launch(const gemm_pack_op *a, const gemm_pack_op *b, int K, int kp, int type,
                                           cudaStream_t stream)
{
  if (gemm_elem_bytes(type) == 2)
    return gemm_pack_launch_t<unsigned short>(a, b, K, kp, 0, stream);
  return gemm_pack_launch_t<float>(a, b, K, kp, (int)(type == KT_GEMM_TF32), stream);
}

#endif
