@ -- SPDX-License-Identifier: MIT
@ -- templates/hist_smem.cu.tpl: the histogram family's shared-memory kernel.
@ -- bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the output is overwritten.  The space
@ -- (templates/hist.space.lua) sets the values used below; templates/hist_common.cuh holds what they share.
#include "kt_launch.h"
#include "hist_common.cuh"

constexpr int THREADS = $(threads);
constexpr int IPT = $(ipt); // int4 loads in flight per thread per loop step
constexpr int COUNTER_BITS = $(counter_bits); // bits per shared-memory counter
constexpr int REP = $(rep); // copies of the bins per block
constexpr int MERGE = $(merge); // 1: runs of equal bins add once (count4, hist_common.cuh)

/*
 * Shared-memory privatisation: each block counts into its own copy of all
 * nbins bins in shared memory (REP copies, warp w using copy w % REP, to
 * spread collisions on hot bins), then adds its non-zero counts to the
 * output.
 * The grid is persistent, sized to fill the GPU once, so each block clears
 * and flushes its bins once for many samples.
 */

// Add inc to counter *c, the same way for every lane.
@ if cw == 16 then
static __device__ __forceinline__ void bump(unsigned int *words, int bin, unsigned int inc, unsigned int *bins)
@ else
static __device__ __forceinline__ void bump(unsigned int *c, int bin, unsigned int inc)
@ end
{
@ if agg == 1 then
  // Warp aggregation: lanes holding the same bin elect the lowest lane,
  // which adds for all of them.  The peers share one inc: 1, or a lane
  // alone (merge 2's whole-warp add); agg is never paired with merge 1.
  const unsigned peers = __match_any_sync(__activemask(), bin);
  if ((threadIdx.x & 31) == __ffs(peers) - 1)
@   if cw == 16 then
    add16(words, bin, inc * __popc(peers), &bins[bin]);
@   else
    atomicAdd(c, inc * __popc(peers));
@   end
@ elseif cw == 16 then
  add16(words, bin, inc, &bins[bin]);
@ else
  atomicAdd(c, inc);
@ end
}

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
        int per_block)
{
@ if cw == 16 then
  extern __shared__ unsigned int sbins[]; // [REP][words]: 16-bit counters, two per word
  const int words = (nbins + 1) / 2;
  for (int i = threadIdx.x; i < REP * words; i += THREADS)
    sbins[i] = 0;
  __syncthreads();
  unsigned int *const mine = sbins + (threadIdx.x / 32 % REP) * words;
  auto add = [&](int b, unsigned int inc) { bump(mine, b, inc, bins); };
@ else
  extern __shared__ unsigned int sbins[]; // [REP][nbins]
  for (int i = threadIdx.x; i < REP * nbins; i += THREADS)
    sbins[i] = 0;
  __syncthreads();
  unsigned int *const mine = sbins + (threadIdx.x / 32 % REP) * nbins;
  auto add = [&](int b, unsigned int inc) { bump(&mine[b], b, inc); };
@ end

  count_samples<THREADS, IPT, MERGE, KT_LOAD_STREAM>(samples, n, 1, nbins, add);

  __syncthreads();
  for (int b = threadIdx.x; b < nbins; b += THREADS) {
    unsigned int c = 0;
#pragma unroll
    for (int r = 0; r < REP; ++r)
@ if cw == 16 then
      c += get16(sbins + r * words, b);
@ else
      c += sbins[r * nbins + b];
@ end
    if (c)
      atomicAdd(&bins[b], c);
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

  // Shared memory: kt_hist_smem_bytes (runtime/kt_variant.h), the formula
  // the runtime also uses to decide whether a variant fits the device.
  const int per_block = a->nbins;
  const size_t smem = (size_t)kt_hist_smem_bytes(a->nbins, 1, REP, COUNTER_BITS);
  if (smem > (size_t)a->smem_optin)
    return (int)cudaErrorInvalidValue;

  // Blocks per SM allowed by threads and registers, asked once per device
  // (with the opt-in to the device's most shared memory), then by shared
  // memory.
  static kt_launch_once once;
  int per_sm = 1;
  err = kt_launch_prepare(&once, (const void *)$(name), (size_t)a->smem_optin, 0, THREADS, &per_sm);
  if (err != cudaSuccess)
    return (int)err;
  const long long blocks = hist_grid_blocks(a, per_sm, smem, THREADS, IPT);

  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, per_block);
}
