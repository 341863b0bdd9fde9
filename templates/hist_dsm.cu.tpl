@ -- SPDX-License-Identifier: MIT
@ -- templates/hist_dsm.cu.tpl: the histogram family's distributed-shared-memory
@ -- (cluster) kernel.  bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the
@ -- output is overwritten.  The space (templates/hist.space.lua) sets the values
@ -- used below; templates/hist_common.cuh holds what the histogram kernels share.
#include "kt_launch.h"
#include "hist_common.cuh"
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

constexpr int THREADS = $(threads);
constexpr int IPT = $(ipt); // int4 loads in flight per thread per loop step
constexpr int COUNTER_BITS = $(counter_bits); // bits per shared-memory counter
constexpr int CLUSTER = $(cluster);

/*
 * Distributed shared memory, after the Programming Guide's
 * clusterHist_kernel: the CLUSTER blocks of a cluster split the bins
 * between their shared memories, so together they hold CLUSTER times as
 * many bins as one block could.  A sample's bin may live in another
 * block: the add goes to that block's shared memory through
 * cluster.map_shared_rank.  Unlike the Guide's kernel the grid is
 * persistent: each cluster clears and flushes its bins once for many
 * samples, instead of once per THREADS samples.
 *
@ if layout == "blocked" then
 * Layout "blocked" (the Guide's): block r holds bins [r * per_block,
 * (r + 1) * per_block).
@ else
 * Layout "cyclic": block b % CLUSTER holds bin b, at index b / CLUSTER;
 * a shift and a mask replace the Guide's division.
@ end
 */
extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
        int per_block)
{
@ if cw == 16 then
  extern __shared__ unsigned int sbins[]; // [(per_block + 1) / 2]: 16-bit counters, two per word
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < (per_block + 1) / 2; i += THREADS)
    sbins[i] = 0;
@ else
  extern __shared__ unsigned int sbins[]; // [per_block]
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < per_block; i += THREADS)
    sbins[i] = 0;
@ end
  // Every block's bins must be clear before any block adds into them.
  cluster.sync();
  auto add = [&](int b, unsigned int inc) {
@ if layout == "blocked" then
    const int owner = b / per_block, j = b - owner * per_block;
@ else
    const int owner = b & (CLUSTER - 1), j = b >> $(log2_cluster);
@ end
@ if cw == 16 then
    add16(cluster.map_shared_rank(sbins, owner), j, inc, &bins[b]);
@ else
    atomicAdd(cluster.map_shared_rank(sbins, owner) + j, inc);
@ end
  };

  count_samples<THREADS, IPT, 0, KT_LOAD_STREAM>(samples, n, 1, nbins, add);

  // All remote adds must land before any block flushes (or exits, which
  // would free shared memory that others still write).
  cluster.sync();
  const int rank = (int)cluster.block_rank();
  for (int j = threadIdx.x; j < per_block; j += THREADS) {
@ if layout == "blocked" then
    const int b = rank * per_block + j;
@ else
    const int b = j * CLUSTER + rank;
@ end
@ if cw == 16 then
    const unsigned int c = get16(sbins, j);
@ else
    const unsigned int c = sbins[j];
@ end
    if (c && b < nbins)
      atomicAdd(&bins[b], c);
  }
}

/* Launcher: clears the output, then starts a persistent grid that fills
 * the GPU once (fewer blocks when n is small), in whole clusters. */
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_hist_args *a = (const kt_hist_args *)args;
  cudaError_t err = cudaMemsetAsync(a->bins, 0, (size_t)a->nbins * sizeof(unsigned int), stream);
  if (err != cudaSuccess || a->n == 0)
    return (int)err;

  // Shared memory: kt_hist_smem_bytes (runtime/kt_variant.h), the formula
  // the runtime also uses to decide whether a variant fits the device.
  const int per_block = (a->nbins + CLUSTER - 1) / CLUSTER;
  const size_t smem = (size_t)kt_hist_smem_bytes(a->nbins, CLUSTER, 1, COUNTER_BITS);
  if (smem > (size_t)a->smem_optin)
    return (int)cudaErrorInvalidValue;

  // Blocks per SM allowed by threads and registers, asked once per device
  // (with the opt-in to the device's most shared memory and, for clusters
  // over 8, to non-portable sizes), then by shared memory.
  static kt_launch_once once;
  int per_sm = 1;
  err = kt_launch_prepare(&once, (const void *)$(name), (size_t)a->smem_optin, CLUSTER > 8, THREADS, &per_sm);
  if (err != cudaSuccess)
    return (int)err;
  long long blocks = hist_grid_blocks(a, per_sm, smem, THREADS, IPT);
  blocks = (blocks + CLUSTER - 1) / CLUSTER * CLUSTER;

  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CLUSTER;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, per_block);
}
