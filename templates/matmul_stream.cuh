/* SPDX-License-Identifier: MIT */
// templates/matmul_stream.cuh: loads of the operand that a memory-bound
// matmul kernel streams, each value read once: B in the vector-times-matrix
// and few-row kernels, A in the matrix-times-vector and few-column kernels.
// Their variants with stream = 1 include it in place of kt_launch.h (which
// it includes) and read that operand with ld_stream / ld_stream4; those
// with stream = 0 are the kernels as they were before the parameter
// (templates/matmul.space.lua).
#ifndef MATMUL_STREAM_CUH
#define MATMUL_STREAM_CUH

#include "kt_launch.h"

/*
 * Read-only, through the non-coherent path as __ldg is, but not allocated in
 * L1 (L1::no_allocate), with L2 asked to fetch 256 bytes around each miss
 * (L2::256B).  A value read once has no use for L1.  On an H100 with L2
 * full of dirty lines (as after the benches' flush, or a kernel that wrote
 * more than L2 holds), a 64 MB float4 read ran in 28 us this way against
 * 32.5 with __ldg, and a vector times a 4096 x 4096 matrix in 33 us against
 * 37.5-39; with L2::256B alone, 33 and 38 (a probe; what it did to the
 * kernels is in bench/reference/matmul_random/README.md, runs 27 and 29).
 * Valid only for memory that no thread writes while the kernel runs, as
 * for __ldg.
 */
static __device__ __forceinline__ float ld_stream(const float *p)
{
  float v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}

static __device__ __forceinline__ float4 ld_stream4(const float4 *p)
{
  float4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "l"(p));
  return v;
}

#endif
