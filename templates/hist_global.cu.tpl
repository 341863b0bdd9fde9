@ -- SPDX-License-Identifier: MIT
@ -- templates/hist_global.cu.tpl: the histogram family's global-atomics kernel.
@ -- bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the output is overwritten.  The space
@ -- (templates/hist.space.lua) sets the values used below; templates/hist_common.cuh holds what they share.
#include "kt_launch.h"
#include "hist_common.cuh"

constexpr int THREADS = $(threads);
constexpr int IPT = $(ipt); // int4 loads in flight per thread per loop step
constexpr int MERGE = $(merge); // 1: runs of equal bins add once (count4, hist_common.cuh)
constexpr int L2FIT = $(l2fit); // 1: one pass per range of bins that fits half the L2

/*
 * Global atomics: every sample is an atomicAdd on the output.  Needs no
 * shared memory, so it serves any nbins; its speed depends on how many
 * samples collide on one bin (the L2 serialises those).  The end bins,
 * where every out-of-range sample lands, are counted in registers instead
 * and added once per warp at the end: half the samples out of range would
 * otherwise hammer two addresses.
@ if l2fit == 1 then
 *
 * When the bins outgrow the L2, each atomic would miss it and cost a read
 * and a write of DRAM.  So the launcher runs one pass per range of bins
 * that fits half the L2: every pass reads all the samples and adds those in
 * its range [lo, lo + span), whose counters stay in L2.
@ end
 */

// Add inc to counter *c, the same way for every lane.
static __device__ __forceinline__ void bump(unsigned int *c, int bin, unsigned int inc)
{
@ if agg == 1 then
  // Warp aggregation: lanes holding the same bin elect the lowest lane,
  // which adds for all of them.  The peers share one inc: 1, or a lane
  // alone (merge 2's whole-warp add); agg is never paired with merge 1.
  const unsigned peers = __match_any_sync(__activemask(), bin);
  if ((threadIdx.x & 31) == __ffs(peers) - 1)
    atomicAdd(c, inc * __popc(peers));
@ else
  atomicAdd(c, inc);
@ end
}

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
        int lo, int span)
{
  unsigned int first = 0, last = 0; // this thread's counts of bins 0 and nbins - 1
  auto add = [&](int b, unsigned int inc) {
@ if l2fit == 1 then
    if ((unsigned)(b - lo) >= (unsigned)span) // outside the pass's range (below it wraps to a large value)
      return;
@ end
    if (b == 0)
      first += inc;
    else if (b == nbins - 1)
      last += inc;
    else
      bump(&bins[b], b, inc);
  };
  count_samples<THREADS, IPT, MERGE, KT_LOAD_STREAM>(samples, n, 1, nbins, add);

  // Every thread of the block gets here: the whole warp sums its end bins.
  first = __reduce_add_sync(0xffffffffu, first);
  last = __reduce_add_sync(0xffffffffu, last);
  if ((threadIdx.x & 31) == 0) {
    if (first)
      atomicAdd(&bins[0], first);
    if (last)
      atomicAdd(&bins[nbins - 1], last);
  }
}

/* Launcher: clears the output, then starts a persistent grid that fills
 * the GPU once (fewer blocks when n is small). */
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_hist_args *a = (const kt_hist_args *)args;
  cudaError_t err = cudaMemsetAsync(a->bins, 0, (size_t)a->nbins * sizeof(unsigned int), stream);
  if (err != cudaSuccess || a->n == 0)
    return (int)err;

  // Blocks per SM allowed by threads and registers, asked once per device.
  static kt_launch_once once;
  int per_sm = 1;
  err = kt_launch_prepare(&once, (const void *)$(name), 0, 0, THREADS, &per_sm);
  if (err != cudaSuccess)
    return (int)err;
  const long long blocks = hist_grid_blocks(a, per_sm, 0, THREADS, IPT);

  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(THREADS);
  cfg.stream = stream;
@ if l2fit == 1 then
  // Passes over ranges of bins of at most half the L2 each.
  int dev = 0, l2 = 0;
  err = cudaGetDevice(&dev);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
  if (err != cudaSuccess)
    return (int)err;
  const long long fit = l2 / 2 / (long long)sizeof(unsigned int) > 0 ? l2 / 2 / (long long)sizeof(unsigned int) : 1;
  const long long passes = (a->nbins + fit - 1) / fit;
  const int span = (int)((a->nbins + passes - 1) / passes);
  for (long long lo = 0; lo < a->nbins; lo += span) {
    err = cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, (int)lo, span);
    if (err != cudaSuccess)
      return (int)err;
  }
  return (int)cudaSuccess;
@ else
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, 0, a->nbins);
@ end
}
