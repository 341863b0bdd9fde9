@ -- templates/hist.cu.tpl: the histogram family.
@ -- bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the output is
@ -- overwritten.  The space (templates/hist.space.lua) sets `algo` and the
@ -- values used below.
#include "kt_launch.h"
#include <stdint.h>
@ if algo == "dsm" then
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
@ end

constexpr int THREADS = $(threads);
constexpr int IPT = $(ipt); // int4 loads in flight per thread per loop step
@ if algo ~= "global" then
constexpr int COUNTER_BITS = $(counter_bits); // bits per shared-memory counter
@ end
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
@ elseif algo == "band" then
/*
 * Bands: when the bins outgrow one block's shared memory, split them into
 * `bands` bands of per_block bins and give every band its own blocks.
 * Block x counts band x % bands, and the blocks of one group (x / bands)
 * walk the input together: each reads every sample and counts those in its
 * band.  The input is read once per band, but neighbouring blocks read the
 * same chunk at about the same time, so after the first the reads come from
 * L2, and every add stays in the block's own shared memory.
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

@ if algo ~= "global" and cw == 16 then
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

@ end
@ if algo == "global" or algo == "smem" then
// Add one to counter *c, the same way for every lane.
@   if algo == "smem" and cw == 16 then
static __device__ __forceinline__ void bump(unsigned int *words, int bin, unsigned int *bins)
@   else
static __device__ __forceinline__ void bump(unsigned int *c, int bin)
@   end
{
@   if agg == 1 then
  // Warp aggregation: lanes holding the same bin elect the lowest lane,
  // which adds for all of them.
  const unsigned peers = __match_any_sync(__activemask(), bin);
  if ((threadIdx.x & 31) == __ffs(peers) - 1)
@     if algo == "smem" and cw == 16 then
    add16(words, bin, __popc(peers), &bins[bin]);
@     else
    atomicAdd(c, __popc(peers));
@     end
@   elseif algo == "smem" and cw == 16 then
  add16(words, bin, 1u, &bins[bin]);
@   else
  atomicAdd(c, 1u);
@   end
}
@ end

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
        int per_block$(algo == "band" and ", int bands" or ""))
{
@ if algo == "smem" and cw == 16 then
  extern __shared__ unsigned int sbins[]; // [REP][words]: 16-bit counters, two per word
  const int words = (nbins + 1) / 2;
  for (int i = threadIdx.x; i < REP * words; i += THREADS)
    sbins[i] = 0;
  __syncthreads();
  unsigned int *const mine = sbins + (threadIdx.x / 32 % REP) * words;
  auto count = [&](int s) { bump(mine, clamp_bin(s, nbins), bins); };
@ elseif algo == "smem" then
  extern __shared__ unsigned int sbins[]; // [REP][nbins]
  for (int i = threadIdx.x; i < REP * nbins; i += THREADS)
    sbins[i] = 0;
  __syncthreads();
  unsigned int *const mine = sbins + (threadIdx.x / 32 % REP) * nbins;
  auto count = [&](int s) {
    const int b = clamp_bin(s, nbins);
    bump(&mine[b], b);
  };
@ elseif algo == "band" then
  // This block's band: bins [lo, lo + per_block).
  const int lo = (int)(blockIdx.x % bands) * per_block;
@   if cw == 16 then
  extern __shared__ unsigned int sbins[]; // [(per_block + 1) / 2]: 16-bit counters, two per word
  for (int i = threadIdx.x; i < (per_block + 1) / 2; i += THREADS)
    sbins[i] = 0;
@   else
  extern __shared__ unsigned int sbins[]; // [per_block]
  for (int i = threadIdx.x; i < per_block; i += THREADS)
    sbins[i] = 0;
@   end
  __syncthreads();
  auto count = [&](int s) {
    const int b = clamp_bin(s, nbins);
    const unsigned j = (unsigned)(b - lo); // below the band: wraps to a large value
    if (j < (unsigned)per_block)
@   if cw == 16 then
      add16(sbins, (int)j, 1u, &bins[b]);
@   else
      atomicAdd(&sbins[j], 1u);
@   end
  };
@ elseif algo == "dsm" then
@   if cw == 16 then
  extern __shared__ unsigned int sbins[]; // [(per_block + 1) / 2]: 16-bit counters, two per word
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < (per_block + 1) / 2; i += THREADS)
    sbins[i] = 0;
@   else
  extern __shared__ unsigned int sbins[]; // [per_block]
  cg::cluster_group cluster = cg::this_cluster();
  for (int i = threadIdx.x; i < per_block; i += THREADS)
    sbins[i] = 0;
@   end
  // Every block's bins must be clear before any block adds into them.
  cluster.sync();
  auto count = [&](int s) {
    const int b = clamp_bin(s, nbins);
@   if layout == "blocked" then
    const int owner = b / per_block, j = b - owner * per_block;
@   else
    const int owner = b & (CLUSTER - 1), j = b >> $(log2_cluster);
@   end
@   if cw == 16 then
    add16(cluster.map_shared_rank(sbins, owner), j, 1u, &bins[b]);
@   else
    atomicAdd(cluster.map_shared_rank(sbins, owner) + j, 1u);
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
@ if algo == "band" then
  // The grid-stride loop runs over groups: each group reads the whole input.
  const unsigned long long stride = (unsigned long long)(gridDim.x / bands) * THREADS;
  const unsigned long long gtid = (unsigned long long)(blockIdx.x / bands) * THREADS + threadIdx.x;
@ else
  const unsigned long long stride = (unsigned long long)gridDim.x * THREADS;
  const unsigned long long gtid = (unsigned long long)blockIdx.x * THREADS + threadIdx.x;
@ end

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
@   if cw == 16 then
      c += get16(sbins + r * words, b);
@   else
      c += sbins[r * nbins + b];
@   end
    if (c)
      atomicAdd(&bins[b], c);
  }
@ elseif algo == "band" then
  __syncthreads();
  for (int j = threadIdx.x; j < per_block && lo + j < nbins; j += THREADS) {
@   if cw == 16 then
    const unsigned int c = get16(sbins, j);
@   else
    const unsigned int c = sbins[j];
@   end
    if (c)
      atomicAdd(&bins[lo + j], c);
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
@   if cw == 16 then
    const unsigned int c = get16(sbins, j);
@   else
    const unsigned int c = sbins[j];
@   end
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

  // Shared memory: kt_hist_smem_bytes (runtime/kt_variant.h), the formula
  // the runtime also uses to decide whether a variant fits the device.
@ if algo == "smem" then
  const int per_block = a->nbins;
  const size_t smem = (size_t)kt_hist_smem_bytes(a->nbins, 1, REP, COUNTER_BITS);
@ elseif algo == "dsm" then
  const int per_block = (a->nbins + CLUSTER - 1) / CLUSTER;
  const size_t smem = (size_t)kt_hist_smem_bytes(a->nbins, CLUSTER, 1, COUNTER_BITS);
@ elseif algo == "band" then
  // As few bands as fit, then the bins spread evenly over them.  `fit` bins
  // fill smem_optin: 32 / COUNTER_BITS counters to each 4-byte word.
  const long long fit = (long long)(a->smem_optin / 4) * (32 / COUNTER_BITS);
  const int bands = (int)((a->nbins + fit - 1) / fit);
  const int per_block = (int)((a->nbins + bands - 1) / bands);
  const size_t smem = (size_t)kt_hist_smem_bytes(per_block, 1, 1, COUNTER_BITS);
@ else
  const int per_block = 0;
  const size_t smem = 0;
@ end
  if (smem > (size_t)a->smem_optin)
    return (int)cudaErrorInvalidValue;

  // Blocks per SM allowed by threads and registers, asked once per device
  // (with the opt-in to the device's most shared memory and, for clusters
  // over 8, to non-portable sizes), then by shared memory, with the 1 KB
  // per block that the system reserves.
  static kt_launch_once once;
  int per_sm = 1;
@ if algo == "global" then
  err = kt_launch_prepare(&once, (const void *)$(name), 0, 0, THREADS, &per_sm);
@ elseif algo == "dsm" then
  err = kt_launch_prepare(&once, (const void *)$(name), (size_t)a->smem_optin, CLUSTER > 8, THREADS, &per_sm);
@ else
  err = kt_launch_prepare(&once, (const void *)$(name), (size_t)a->smem_optin, 0, THREADS, &per_sm);
@ end
  if (err != cudaSuccess)
    return (int)err;
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
@ elseif algo == "band" then
  blocks = blocks < bands ? bands : blocks / bands * bands; // whole groups
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
  return (int)cudaLaunchKernelEx(&cfg, $(name), a->samples, a->n, a->bins, a->nbins, per_block$(algo == "band" and ", bands" or ""));
}
