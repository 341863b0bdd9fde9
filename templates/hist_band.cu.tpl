@ -- SPDX-License-Identifier: MIT
@ -- templates/hist_band.cu.tpl: the histogram family's banded kernel.
@ -- bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the output is overwritten.  The space
@ -- (templates/hist.space.lua) sets the values used below; templates/hist_common.cuh holds what they share.
#include "kt_launch.h"
#include "hist_common.cuh"

constexpr int THREADS = $(threads);
constexpr int IPT = $(ipt); // int4 loads in flight per thread per loop step
constexpr int COUNTER_BITS = $(counter_bits); // bits per shared-memory counter
constexpr int MERGE = $(merge); // 1: runs of equal bins add once (count4, hist_common.cuh)

/*
 * Bands: when the bins outgrow one block's shared memory, split them into
 * `bands` bands of per_block bins and give every band its own blocks.
 * Block x counts band x % bands, and the blocks of one group (x / bands)
 * walk the input together: each reads every sample and counts those in its
 * band.  The input is read once per band, but neighbouring blocks read the
 * same chunk at about the same time, so after the first the reads come from
 * L2, and every add stays in the block's own shared memory.  So the loads
 * keep the samples in L2 (KT_LOAD_L2) rather than streaming them out.
 */
extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
        int per_block, int bands)
{
  // This block's band: bins [lo, lo + per_block).
  const int lo = (int)(blockIdx.x % bands) * per_block;
@ if cw == 16 then
  extern __shared__ unsigned int sbins[]; // [(per_block + 1) / 2]: 16-bit counters, two per word
  for (int i = threadIdx.x; i < (per_block + 1) / 2; i += THREADS)
    sbins[i] = 0;
@ else
  extern __shared__ unsigned int sbins[]; // [per_block]
  for (int i = threadIdx.x; i < per_block; i += THREADS)
    sbins[i] = 0;
@ end
  __syncthreads();
  auto add = [&](int b, unsigned int inc) {
    const unsigned j = (unsigned)(b - lo); // below the band: wraps to a large value
    if (j < (unsigned)per_block)
@ if cw == 16 then
      add16(sbins, (int)j, inc, &bins[b]);
@ else
      atomicAdd(&sbins[j], inc);
@ end
  };

  // The grid-stride loop runs over groups: each group reads the whole input.
  count_samples<THREADS, IPT, MERGE, KT_LOAD_L2>(samples, n, (unsigned)bands, nbins, add);

  __syncthreads();
  for (int j = threadIdx.x; j < per_block && lo + j < nbins; j += THREADS) {
@ if cw == 16 then
    const unsigned int c = get16(sbins, j);
@ else
    const unsigned int c = sbins[j];
@ end
    if (c)
      atomicAdd(&bins[lo + j], c);
  }
}

/* Launcher: clears the output, then starts a persistent grid that fills
 * the GPU once (fewer blocks when n is small), in whole groups of bands. */
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_hist_args *a = (const kt_hist_args *)args;
  cudaError_t err = cudaMemsetAsync(a->bins, 0, (size_t)a->nbins * sizeof(unsigned int), stream);
  if (err != cudaSuccess || a->n == 0)
    return (int)err;

  // As few bands as fit (kt_hist_bands, runtime/kt_variant.h: the formula
  // the runtime also uses), then the bins spread evenly over them.  The
  // shared memory of a band is kt_hist_smem_bytes, the runtime's formula too.
  const int bands = (int)kt_hist_bands(a->nbins, a->smem_optin, COUNTER_BITS);
  if (bands == 0)
    return (int)cudaErrorInvalidValue;
  const int per_block = (int)((a->nbins + bands - 1) / bands);
  const size_t smem = (size_t)kt_hist_smem_bytes(per_block, 1, 1, COUNTER_BITS);
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
  long long blocks = hist_grid_blocks(a, per_sm, smem, THREADS, IPT);
  blocks = blocks < bands ? bands : blocks / bands * bands; // whole groups

  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, per_block, bands);
}
