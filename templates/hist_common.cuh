/* SPDX-License-Identifier: MIT */
/* templates/hist_common.cuh: what the histogram kernels share.
 *
 * Included by every generated histogram .cu (templates/hist_*.cu.tpl), which
 * nvcc finds through -Itemplates.  It is no template: nothing here depends on
 * a variant's parameters, which come in as template arguments.  ktgen hashes
 * it into the header of each .cu that includes it, so an edit here
 * invalidates what was tuned with the old code.
 */
#ifndef KT_HIST_COMMON_CUH
#define KT_HIST_COMMON_CUH

#include <stdint.h>
#include "kt_variant.h"

static __device__ __forceinline__ int clamp_bin(int s, int nbins)
{
  // Out-of-range samples count in the end bins, as in the Guide's kernel.
  return min(max(s, 0), nbins - 1);
}

/*
 * 16-bit counters, two to a 32-bit word of shared memory: counter j is the
 * low (j even) or high (j odd) half of word j / 2.  Each holds 15 bits; bit
 * 15 is a guard.  The add that carries a counter into its guard bit is the
 * only one that sees the old value below 0x8000 and the new at or above it:
 * that thread takes the 0x8000 back out and adds it to the output bin.  The
 * carry therefore never reaches the neighbouring counter, as long as fewer
 * than 0x8000 adds to one counter fall between that thread's two atomics
 * (they are back to back; a warp is never held off that long).
 */
static __device__ __forceinline__ void add16(unsigned int *words, int j, unsigned int inc, unsigned int *out_bin)
{
  const unsigned int shift = (j & 1) * 16;
  const unsigned int old = (atomicAdd(&words[j >> 1], inc << shift) >> shift) & 0xffffu;
  if (old < 0x8000u && old + inc >= 0x8000u) {
    atomicSub(&words[j >> 1], 0x8000u << shift);
    atomicAdd(out_bin, 0x8000u);
  }
}

static __device__ __forceinline__ unsigned int get16(const unsigned int *words, int j)
{
  return (words[j >> 1] >> ((j & 1) * 16)) & 0xffffu;
}

/* count(s) for this thread's share of the n samples, in a grid-stride loop
 * of THREADS threads per block.  The loop runs over groups of `group`
 * consecutive blocks, which all read the same samples (the band kernel's
 * groups; 1 for the other kernels, where each block reads its own). */
template <int THREADS, int IPT, typename Count>
static __device__ __forceinline__ void count_samples(const int *__restrict__ samples, unsigned long long n,
                                                     unsigned int group, Count count)
{
  /* The samples are read as int4 from the first 16-byte boundary on.  The
   * (at most 3) samples before it and after the last whole int4 are read
   * one by one, so any n and any 4-byte-aligned pointer work. */
  const unsigned long long head = min((unsigned long long)(((16 - ((uintptr_t)samples & 15)) & 15) / 4), n);
  const int4 *const body = reinterpret_cast<const int4 *>(samples + head);
  const unsigned long long nvec = (n - head) / 4;
  const unsigned long long tail = head + nvec * 4;
  const unsigned long long stride = (unsigned long long)(gridDim.x / group) * THREADS;
  const unsigned long long gtid = (unsigned long long)(blockIdx.x / group) * THREADS + threadIdx.x;

  unsigned long long i = gtid;
  // IPT independent loads are issued before the first is used.
  for (; i + (IPT - 1) * stride < nvec; i += IPT * stride) {
    int4 x[IPT];
#pragma unroll
    for (int u = 0; u < IPT; ++u)
      x[u] = __ldcs(body + i + u * stride);
#pragma unroll
    for (int u = 0; u < IPT; ++u) {
      count(x[u].x); count(x[u].y); count(x[u].z); count(x[u].w);
    }
  }
  for (; i < nvec; i += stride) {
    const int4 x = __ldcs(body + i);
    count(x.x); count(x.y); count(x.z); count(x.w);
  }
  if (gtid < head)
    count(samples[gtid]);
  if (gtid < n - tail)
    count(samples[tail + gtid]);
}

/* Blocks of a persistent grid that fills the GPU once: per_sm blocks on
 * each SM (as threads and registers allow), fewer when `smem` bytes of
 * shared memory per block, with the 1 KB per block that the system
 * reserves, allow fewer; and no more than the n samples need, at
 * 4 * IPT * THREADS a block. */
static inline long long hist_grid_blocks(const kt_hist_args *a, int per_sm, size_t smem, int threads, int ipt)
{
  if (smem > 0) {
    const int by_smem = (int)((size_t)a->smem_per_sm / (smem + 1024));
    per_sm = by_smem < per_sm ? by_smem : per_sm;
    if (per_sm < 1)
      per_sm = 1;
  }
  long long blocks = (long long)a->sm_count * per_sm;
  const long long needed = (long long)((a->n + 4ull * ipt * threads - 1) / (4ull * ipt * threads));
  if (needed < blocks)
    blocks = needed;
  return blocks;
}

#endif
