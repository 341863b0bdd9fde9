@ -- SPDX-License-Identifier: MIT
@ -- templates/hist_global.cu.tpl: the histogram family's global-atomics kernel.
@ -- bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the output is overwritten.  The space
@ -- (templates/hist.space.lua) sets the values used below; templates/hist_common.cuh holds what they share.
#include "kt_launch.h"
#include "hist_common.cuh"

constexpr int THREADS = $(threads);
constexpr int IPT = $(ipt); // int4 loads in flight per thread per loop step

/*
 * Global atomics: every sample is an atomicAdd on the output.  Needs no
 * shared memory, so it serves any nbins; its speed depends on how many
 * samples collide on one bin (the L2 serialises those).
 */

// Add one to counter *c, the same way for every lane.
static __device__ __forceinline__ void bump(unsigned int *c, int bin)
{
@ if agg == 1 then
  // Warp aggregation: lanes holding the same bin elect the lowest lane,
  // which adds for all of them.
  const unsigned peers = __match_any_sync(__activemask(), bin);
  if ((threadIdx.x & 31) == __ffs(peers) - 1)
    atomicAdd(c, __popc(peers));
@ else
  atomicAdd(c, 1u);
@ end
}

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
        int per_block)
{
  auto count = [&](int s) {
    const int b = clamp_bin(s, nbins);
    bump(&bins[b], b);
  };
  count_samples<THREADS, IPT>(samples, n, 1, count);
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
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, 0);
}
