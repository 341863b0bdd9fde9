@ -- SPDX-License-Identifier: MIT
@ -- templates/hist_global.cu.tpl: the histogram family's global-atomics kernel.
@ -- bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the output is overwritten.  The space
@ -- (templates/hist.space.lua) sets the values used below; templates/hist_common.cuh holds what they share.
#include "kt_launch.h"
#include "hist_common.cuh"
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

constexpr int THREADS = $(threads);
constexpr int IPT = $(ipt); // int4 loads in flight per thread per loop step
constexpr int MERGE = $(merge); // 1: runs of equal bins add once (count4, hist_common.cuh)
constexpr int L2FIT = $(l2fit); // 1: one pass per range of the touched bins that fits half the L2

/*
 * Global atomics: every sample is an atomicAdd on the output.  Needs no
 * shared memory, so it serves any nbins; its speed depends on how many
 * samples collide on one bin (the L2 serialises those).  The end bins,
 * where every out-of-range sample lands, are counted in registers instead
 * and added once per warp at the end: half the samples out of range would
 * otherwise hammer two addresses.
 *
 * The kernel clears the output itself: every block zeroes its share, then
 * the grid waits at a barrier (a cooperative launch, so every block is
 * resident) before the first add.  A memset before the kernel costs a
 * launch and the gap between the two: at n = 2^20 on an H100 the barrier
 * measured 2-6% faster from 64K to 4M bins (bench/bench_hist_limits.cu),
 * where the time is 20 us.
@ if l2fit == 1 then
 *
 * When the bins outgrow the L2, each atomic would miss it and cost a read
 * and a write of DRAM.  So the launcher runs up to `passes` passes, each over
 * a range of bins whose counters fit half the L2 (`fit` bins): every pass
 * clears its range [lo, hi), reads all the samples and adds those in it,
 * while its counters stay in L2.  (Clearing every range up front would
 * leave all but the last out of L2: at n = 2^20 and 16M bins, where the
 * clear costs more than the adds, that ran no faster than a memset and
 * plain atomics.)  What fits depends on the bins the samples touch, not on nbins:
 * samples concentrated in a few percent of the bins (a narrow normal) touch
 * few enough for one pass, and further passes would only read the input
 * again.  So every block plans the passes alike (plan_passes) from a probe of
 * the input, and the blocks of a pass with an empty range return at once.
@ end
 */

@ if l2fit == 1 then
/*
 * The plan: the bins are cut into at most PROBE_SUPER super-bins of w bins
 * each; a super-bin is touched when one of PROBES samples, evenly spaced
 * over the input, lands in it.  Pass k takes super-bins in order while the
 * touched ones among them number fewer than fit / w per pass, so the
 * untouched ones ride along at no cost in L2 (their few samples, if any,
 * miss it).  Every super-bin falls in exactly one pass (the last takes what
 * is left), so each sample is counted once whatever the probe saw: the probe
 * decides speed, never counts.  Every block reads the same samples and
 * computes the same plan.  With fewer samples than bins the probe is skipped
 * (every super-bin counts as touched, the ranges of the static split): the
 * bins they can touch are bounded by n, and the probe's cost is not small
 * against so short a pass.
 */
constexpr int PROBE_SUPER = 1024; // super-bins
constexpr int PROBES = 16384;     // probed samples

static __device__ void plan_passes(const int *__restrict__ samples, unsigned long long n, int nbins, int pass,
                                   int passes, long long fit, int *lo, int *hi)
{
  __shared__ int touched[PROBE_SUPER]; // 1 when touched, then the touched super-bins before it
  __shared__ int all;                  // touched super-bins in all
  __shared__ int first, end;           // this pass's super-bins [first, end)
  const int w = (int)(((long long)nbins + PROBE_SUPER - 1) / PROBE_SUPER);
  const int supers = (int)(((long long)nbins + w - 1) / w);
  const int probe = (unsigned long long)nbins <= n;
  for (int s = threadIdx.x; s < PROBE_SUPER; s += THREADS)
    touched[s] = probe ? 0 : s < supers;
  if (threadIdx.x == 0)
    first = supers, end = supers;
  __syncthreads();
  if (probe) {
#pragma unroll 4
    for (int j = threadIdx.x; j < PROBES; j += THREADS)
      touched[clamp_bin(samples[n * (unsigned long long)j / PROBES], nbins) / w] = 1;
    __syncthreads();
  }
  // Exclusive prefix sum of the flags by warp 0, 32 super-bins a lane.
  if (threadIdx.x < 32) {
    const int base = threadIdx.x * (PROBE_SUPER / 32);
    int sum = 0;
    for (int s = 0; s < PROBE_SUPER / 32; ++s)
      sum += touched[base + s];
    int incl = sum;
    for (int d = 1; d < 32; d *= 2) {
      const int y = __shfl_up_sync(0xffffffffu, incl, d);
      if ((int)threadIdx.x >= d)
        incl += y;
    }
    int run = incl - sum;
    for (int s = 0; s < PROBE_SUPER / 32; ++s) {
      const int t = touched[base + s];
      touched[base + s] = run;
      run += t;
    }
    if (threadIdx.x == 31)
      all = run;
  }
  __syncthreads();
  // Super-bin s goes to pass min(touched before s / per_pass, passes - 1),
  // which never falls as s grows: the passes' ranges are contiguous.  The
  // touched ones are shared evenly among as few passes as hold them at most
  // fit / w each: on an H100 two full passes and the rest made 273 GB/s at
  // 16M uniform bins, where even thirds (the split by nbins) had made 300.
  const long long most = fit / w > 0 ? fit / w : 1, needed = (all + most - 1) / most;
  const long long per_pass = needed > 1 ? (all + needed - 1) / needed : most;
  for (int s = threadIdx.x; s < supers; s += THREADS) {
    const long long p = touched[s] / per_pass;
    const int ps = p < passes - 1 ? (int)p : passes - 1;
    if (ps >= pass)
      atomicMin(&first, s);
    if (ps > pass)
      atomicMin(&end, s);
  }
  __syncthreads();
  *lo = (int)min((long long)first * w, (long long)nbins);
  *hi = (int)min((long long)end * w, (long long)nbins);
}
@ end

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
        int pass, int passes, long long fit)
{
  int lo = 0, hi = nbins;
@ if l2fit == 1 then
  if (passes > 1) {
    plan_passes(samples, n, nbins, pass, passes, fit, &lo, &hi);
    if (lo >= hi) // an empty pass: every block of it sees the same plan
      return;
  }
@ end
  { // the pass clears its bins (cooperative launch: see above), which then stay in L2 for its adds
    const unsigned long long stride = (unsigned long long)gridDim.x * THREADS;
    for (unsigned long long b = lo + (unsigned long long)blockIdx.x * THREADS + threadIdx.x; b < (unsigned long long)hi;
         b += stride)
      bins[b] = 0;
    cg::this_grid().sync();
  }
  unsigned int first = 0, last = 0; // this thread's counts of bins 0 and nbins - 1
  auto add = [&](int b, unsigned int inc) {
@ if l2fit == 1 then
    if ((unsigned)(b - lo) >= (unsigned)(hi - lo)) // outside the pass's range (below it wraps to a large value)
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

/* Launcher: starts a persistent grid that fills the GPU once (fewer blocks
 * when n is small: one int4 a thread), each pass of which clears its bins. */
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_hist_args *a = (const kt_hist_args *)args;
  if (a->n == 0)
    return (int)cudaMemsetAsync(a->bins, 0, (size_t)a->nbins * sizeof(unsigned int), stream);

  // Blocks per SM allowed by threads and registers, asked once per device;
  // a cooperative launch may not have more.
  static kt_launch_once once;
  int per_sm = 1;
  cudaError_t err = kt_launch_prepare(&once, (const void *)$(name), 0, 0, THREADS, &per_sm);
  if (err != cudaSuccess)
    return (int)err;
  // Blocks by the samples, but enough that each thread clears at most 64
  // bins: a few samples into many bins would leave the clear to one block.
  long long blocks = hist_grid_blocks(a, per_sm, 0, THREADS, 1);
  const long long clear = ((long long)a->nbins + 64LL * THREADS - 1) / (64LL * THREADS),
                  most = (long long)a->sm_count * per_sm;
  if (blocks < (clear < most ? clear : most))
    blocks = clear < most ? clear : most;

  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(THREADS);
  cfg.stream = stream;
  cudaLaunchAttribute coop[1];
  coop[0].id = cudaLaunchAttributeCooperative;
  coop[0].val.cooperative = 1;
  cfg.attrs = coop;
  cfg.numAttrs = 1;
@ if l2fit == 1 then
  // Up to as many passes as nbins would need at half the L2 each; the
  // kernel's plan (plan_passes) may leave the later ones empty.  At most
  // KT_HIST_MAX_BANDS of them, as for the band kernel: past that, reading
  // every sample once a pass costs more than its atomics missing the L2
  // would, so the passes then take more than half the L2 each.
  int dev = 0, l2 = 0;
  err = cudaGetDevice(&dev);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
  if (err != cudaSuccess)
    return (int)err;
  long long fit = l2 / 2 / (long long)sizeof(unsigned int) > 0 ? l2 / 2 / (long long)sizeof(unsigned int) : 1;
  if ((a->nbins + fit - 1) / fit > KT_HIST_MAX_BANDS)
    fit = (a->nbins + KT_HIST_MAX_BANDS - 1) / KT_HIST_MAX_BANDS;
  const int passes = (int)((a->nbins + fit - 1) / fit);
  for (int pass = 0; pass < passes; ++pass) {
    err = cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, pass, passes, fit);
    if (err != cudaSuccess)
      return (int)err;
  }
  return (int)cudaSuccess;
@ else
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, 0, 1, (long long)a->nbins);
@ end
}
