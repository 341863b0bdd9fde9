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
 * A 32 x 32 tile goes through shared memory so that both the reads and the
 * writes are coalesced whichever way the source runs; the extra column
 * keeps a transposed read of the tile off a single bank.
 */
template <typename T>
static __global__ void __launch_bounds__(256) gemm_pack(const T *__restrict__ src, long long ld, long long stride, int kmajor,
                                                 int rows, int K, int kp, int tf32, T *__restrict__ out)
{
  __shared__ T tile[32][33];
  const long long b = blockIdx.z;
  src += b * stride;
  out += b * (long long)rows * kp;
  const int r0 = blockIdx.y * 32, k0 = blockIdx.x * 32;
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5; // 32 x 8 threads
  for (int i = ty; i < 32; i += 8) {
    // kmajor: tile[r][k] = src[r][k]; else tile[k][r] = src[k][r].
    const int r = kmajor ? r0 + i : r0 + tx, k = kmajor ? k0 + tx : k0 + i;
    T x = T(0.0f);
    if (r < rows && k < K)
      x = src[kmajor ? (long long)r * ld + k : (long long)k * ld + r];
    if (kmajor)
      tile[i][tx] = x;
    else
      tile[tx][i] = x;
  }
  __syncthreads();
  for (int i = ty; i < 32; i += 8) {
    const int r = r0 + i, k = k0 + tx;
    if (r < rows && k < kp) {
      T x = tile[i][tx];
      if constexpr (sizeof(T) == 4) {
        if (tf32) {
          unsigned u;
          asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"((float)x));
          x = __uint_as_float(u);
        }
      }
      out[(long long)r * kp + k] = x;
    }
  }
}

// Launch gemm_pack over `batch` operands of rows x K into out (rows x kp each).
static inline cudaError_t gemm_pack_launch(const void *src, long long ld, long long stride, int kmajor, int rows,
                                           int K, int kp, int batch, int type, void *out, cudaStream_t stream)
{
  const dim3 grid((unsigned)((kp + 31) / 32), (unsigned)((rows + 31) / 32), (unsigned)batch);
  if (gemm_elem_bytes(type) == 2)
    gemm_pack<unsigned short><<<grid, 256, 0, stream>>>((const unsigned short *)src, ld, stride, kmajor, rows, K, kp,
                                                         0, (unsigned short *)out);
  else
    gemm_pack<float><<<grid, 256, 0, stream>>>((const float *)src, ld, stride, kmajor, rows, K, kp,
                                               type == KT_GEMM_TF32, (float *)out);
  return cudaGetLastError();
}

#endif
