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
 * low (j even) or high (j odd) half of word j / 2.  A counter carries into
 * the output every 0x1000 counts: the add whose range (old, old + inc]
 * crosses a multiple of 0x1000 (one add, since inc < 0x1000) takes that
 * 0x1000 back out and adds it to the output bin.  So a counter rests below
 * 0x1000, and it reaches the neighbouring counter only if more than 0xefff
 * counts land on it between one carrier's two atomics: they are back to
 * back, and no SM holds that many adds in flight (64 warps, a few adds of at
 * most 128 each).  Heavy repetition costs one global atomic per 4096 counts.
 */
static __device__ __forceinline__ void add16(unsigned int *words, int j, unsigned int inc, unsigned int *out_bin)
{
  const unsigned int shift = (j & 1) * 16;
  const unsigned int old = (atomicAdd(&words[j >> 1], inc << shift) >> shift) & 0xffffu;
  if ((old & 0xfffu) + inc >= 0x1000u) {
    atomicSub(&words[j >> 1], 0x1000u << shift);
    atomicAdd(out_bin, 0x1000u);
  }
}

static __device__ __forceinline__ unsigned int get16(const unsigned int *words, int j)
{
  return (words[j >> 1] >> ((j & 1) * 16)) & 0xffffu;
}

/* How count_samples reads the samples.  Most kernels read each sample once,
 * so streaming loads (evict first) keep the L2 for the bins; the band
 * kernel's blocks read each sample once per band, and want the later reads
 * to hit the L2 the first one filled. */
enum { KT_LOAD_STREAM = 0, KT_LOAD_L2 = 1 };

template <int LOAD> static __device__ __forceinline__ int4 load4(const int4 *p)
{
  return LOAD == KT_LOAD_L2 ? __ldcg(p) : __ldcs(p);
}
template <int LOAD> static __device__ __forceinline__ int load1(const int *p)
{
  return LOAD == KT_LOAD_L2 ? __ldcg(p) : __ldcs(p);
}

/*
 * Runs of equal bins (sorted or piecewise-constant input, one hot bin) make
 * every lane of a warp add to one counter.  In shared memory, atomics whose
 * old value is not needed cost the same on one address as on many (H100),
 * but a 16-bit counter's add needs the old value (add16), and such atomics
 * on one address serialise, 32 deep; in global memory the L2 serialises
 * atomics on one address whatever they return.  MERGE:
 *   0  every sample adds 1;
 *   1  when all the active lanes of the warp hold one bin in all four
 *      samples of their int4, the lowest lane adds them all (4 x lanes)
 *      alone; otherwise each thread adds each run of equal bins among its
 *      four samples once;
 *   2  the same warp test, otherwise every sample adds 1, all lanes
 *      together (so that a kernel's warp aggregation, agg, sees them).
 * The warp test costs a few compares, a shuffle and a vote per four
 * samples.  Every lane that enters calls __shfl_sync and __all_sync with the
 * mask of lanes active here, which all take the same path to them.
 */
template <int MERGE, typename Add>
static __device__ __forceinline__ void count4(const int4 x, int nbins, Add &add)
{
  const int b0 = clamp_bin(x.x, nbins), b1 = clamp_bin(x.y, nbins), b2 = clamp_bin(x.z, nbins),
            b3 = clamp_bin(x.w, nbins);
  if (!MERGE) {
    add(b0, 1u); add(b1, 1u); add(b2, 1u); add(b3, 1u);
    return;
  }
  const bool same = b0 == b1 && b1 == b2 && b2 == b3;
  const unsigned lanes = __activemask();
  const int lead = __ffs(lanes) - 1;
  const int lead_bin = __shfl_sync(lanes, b0, lead);
  if (__all_sync(lanes, same && b0 == lead_bin)) {
    if ((int)(threadIdx.x & 31) == lead)
      add(b0, 4u * __popc(lanes));
    return;
  }
  if (MERGE == 2) {
    add(b0, 1u); add(b1, 1u); add(b2, 1u); add(b3, 1u);
    return;
  }
  // The runs of this thread's four samples, one add each.
  int cur = b0;
  unsigned run = 1;
#define KT_HIST_RUN(b)      \
  if ((b) == cur) {         \
    ++run;                  \
  } else {                  \
    add(cur, run);          \
    cur = (b);              \
    run = 1;                \
  }
  KT_HIST_RUN(b1) KT_HIST_RUN(b2) KT_HIST_RUN(b3)
#undef KT_HIST_RUN
  add(cur, run);
}

/* add(bin, count) for this thread's share of the n samples, bins clamped
 * into [0, nbins), in a grid-stride loop of THREADS threads per block.
 * The loop runs over groups of `group` consecutive blocks, which all read
 * the same samples (the band kernel's groups; 1 for the other kernels, where
 * each block reads its own).  MERGE: see count4. */
template <int THREADS, int IPT, int MERGE, int LOAD, typename Add>
static __device__ __forceinline__ void count_samples(const int *__restrict__ samples, unsigned long long n,
                                                     unsigned int group, int nbins, Add add)
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
      x[u] = load4<LOAD>(body + i + u * stride);
#pragma unroll
    for (int u = 0; u < IPT; ++u)
      count4<MERGE>(x[u], nbins, add);
  }
  for (; i < nvec; i += stride)
    count4<MERGE>(load4<LOAD>(body + i), nbins, add);
  if (gtid < head)
    add(clamp_bin(load1<LOAD>(samples + gtid), nbins), 1u);
  if (gtid < n - tail)
    add(clamp_bin(load1<LOAD>(samples + tail + gtid), nbins), 1u);
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
