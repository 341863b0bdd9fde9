@ -- templates/hist.cu.tpl: the histogram family.
@ -- bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the output is
@ -- overwritten.  The space (templates/hist.space.lua) sets `algo` and the
@ -- values used below.
#include "kt_variant.h"
#include <stdint.h>
@ if algo == "dsm" then
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
@ end
#if KT_ABI_VERSION != 1
#error "this file was generated for kt_variant.h ABI 1: run make generate"
#endif

constexpr int THREADS = $(threads);
constexpr int IPT = $(ipt); // int4 loads in flight per thread per loop step
@ if algo == "smem" then
constexpr int REP = $(rep); // copies of the bins per block
@ elseif algo == "dsm" then
constexpr int CLUSTER = $(cluster);
@ end

@ if algo == "global" then
/*
 * Global atomics: every sample is an atomicAdd on the output.  Needs no
 * shared memory, so it serves any nbins; its speed depends on how many
 * samples collide on one bin (the L2 serialises those).
 */
@ elseif algo == "smem" then
/*
 * Shared-memory privatisation: each block counts into its own copy of all
 * nbins bins in shared memory (REP copies, warp w using copy w % REP, to
 * spread collisions on hot bins), then adds its non-zero counts to the
 * output.  The grid is persistent, sized to fill the GPU once, so each
 * block clears and flushes its bins once for many samples.
 */
@ else
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
@   if layout == "blocked" then
 * Layout "blocked" (the Guide's): block r holds bins [r * per_block,
 * (r + 1) * per_block).
@   else
 * Layout "cyclic": block b % CLUSTER holds bin b, at index b / CLUSTER;
 * a shift and a mask replace the Guide's division.
@   end
 */
@ end

static __device__ __forceinline__ int clamp_bin(int s, int nbins)
{
  // Out-of-range samples count in the end bins, as in the Guide's kernel.
  return min(max(s, 0), nbins - 1);
}

@ if algo == "global" or algo == "smem" then
// Add one to counter *c, the same way for every lane.
static __device__ __forceinline__ void bump(unsigned int *c, int bin)
{
@   if agg == 1 then
  // Warp aggregation: lanes holding the same bin elect the lowest lane,
  // which adds for all of them.
  const unsigned peers = __match_any_sync(__activemask(), bin);
  if ((threadIdx.x & 31) == __ffs(peers) - 1)
    atomicAdd(c, __popc(peers));
@   else
  atomicAdd(c, 1u);
@   end
}
@ end

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
        int per_block)
{
@ if algo == "smem" then
  extern __shared__ unsigned int sbins[]; // [REP][nbins]
  for (int i = threadIdx.x; i < REP * nbins; i += THREADS)
    sbins[i] = 0;
  __syncthreads();
  unsigned int *const mine = sbins + (threadIdx.x / 32 % REP) * nbins;
  auto count = [&](int s) {
    const int b = clamp_bin(s, nbins);
    bump(&mine[b], b);
  };
@ elseif algo == "dsm" then
  extern __shared__ unsigned int sbins[]; // [per_block]
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < per_block; i += THREADS)
    sbins[i] = 0;
  // Every block's bins must be clear before any block adds into them.
  cluster.sync();
  auto count = [&](int s) {
    const int b = clamp_bin(s, nbins);
@   if layout == "blocked" then
    const int owner = b / per_block;
    atomicAdd(cluster.map_shared_rank(sbins, owner) + (b - owner * per_block), 1u);
@   else
    atomicAdd(cluster.map_shared_rank(sbins, b & (CLUSTER - 1)) + (b >> $(log2_cluster)), 1u);
@   end
  };
@ else
  auto count = [&](int s) {
    const int b = clamp_bin(s, nbins);
    bump(&bins[b], b);
  };
@ end

  /* The samples are read as int4 from the first 16-byte boundary on.  The
   * (at most 3) samples before it and after the last whole int4 are read
   * one by one, so any n and any 4-byte-aligned pointer work. */
  const unsigned long long head = min((unsigned long long)(((16 - ((uintptr_t)samples & 15)) & 15) / 4), n);
  const int4 *const body = reinterpret_cast<const int4 *>(samples + head);
  const unsigned long long nvec = (n - head) / 4;
  const unsigned long long tail = head + nvec * 4;
  const unsigned long long stride = (unsigned long long)gridDim.x * THREADS;
  const unsigned long long gtid = (unsigned long long)blockIdx.x * THREADS + threadIdx.x;

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

@ if algo == "smem" then
  __syncthreads();
  for (int b = threadIdx.x; b < nbins; b += THREADS) {
    unsigned int c = 0;
#pragma unroll
    for (int r = 0; r < REP; ++r)
      c += sbins[r * nbins + b];
    if (c)
      atomicAdd(&bins[b], c);
  }
@ elseif algo == "dsm" then
  // All remote adds must land before any block flushes (or exits, which
  // would free shared memory that others still write).
  cluster.sync();
  const int rank = (int)cluster.block_rank();
  for (int j = threadIdx.x; j < per_block; j += THREADS) {
@   if layout == "blocked" then
    const int b = rank * per_block + j;
@   else
    const int b = j * CLUSTER + rank;
@   end
    const unsigned int c = sbins[j];
    if (c && b < nbins)
      atomicAdd(&bins[b], c);
  }
@ end
}

/* Launcher: clears the output, then starts a persistent grid that fills
 * the GPU once (fewer blocks when n is small). */
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_hist_args *a = (const kt_hist_args *)args;
  cudaError_t err = cudaMemsetAsync(a->bins, 0, (size_t)a->nbins * sizeof(unsigned int), stream);
  if (err != cudaSuccess || a->n == 0)
    return (int)err;

@ if algo == "smem" then
  const int per_block = a->nbins;
  const size_t smem = (size_t)REP * a->nbins * sizeof(unsigned int);
@ elseif algo == "dsm" then
  const int per_block = (a->nbins + CLUSTER - 1) / CLUSTER;
  const size_t smem = (size_t)per_block * sizeof(unsigned int);
@ else
  const int per_block = 0;
  const size_t smem = 0;
@ end
  if (smem > (size_t)a->smem_optin)
    return (int)cudaErrorInvalidValue;

  // Blocks per SM allowed by threads and registers, asked once per process
  // (the answer depends only on this kernel), then by shared memory, with
  // the 1 KB per block that the system reserves.
  static int occupancy = 0;
  int per_sm = __atomic_load_n(&occupancy, __ATOMIC_RELAXED);
  if (per_sm == 0) {
@ if algo == "dsm" and cluster > 8 then
    err = cudaFuncSetAttribute($(name), cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err != cudaSuccess)
      return (int)err;
@ end
@ if algo ~= "global" then
    err = cudaFuncSetAttribute($(name), cudaFuncAttributeMaxDynamicSharedMemorySize, a->smem_optin);
    if (err != cudaSuccess)
      return (int)err;
@ end
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, $(name), THREADS, 0);
    if (err != cudaSuccess)
      return (int)err;
    if (per_sm < 1)
      per_sm = 1;
    __atomic_store_n(&occupancy, per_sm, __ATOMIC_RELAXED);
  }
  if (smem > 0) {
    const int by_smem = (int)((size_t)a->smem_per_sm / (smem + 1024));
    per_sm = by_smem < per_sm ? by_smem : per_sm;
    if (per_sm < 1)
      per_sm = 1;
  }
  long long blocks = (long long)a->sm_count * per_sm;
  const long long needed = (long long)((a->n + 4ull * IPT * THREADS - 1) / (4ull * IPT * THREADS));
  if (needed < blocks)
    blocks = needed;
@ if algo == "dsm" then
  blocks = (blocks + CLUSTER - 1) / CLUSTER * CLUSTER;
@ end

  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)blocks);
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
@ if algo == "dsm" then
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = CLUSTER;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
@ end
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, per_block);
}
