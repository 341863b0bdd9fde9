@ -- SPDX-License-Identifier: MIT
@ -- templates/hist_part.cu.tpl: the histogram family's partition kernel.
@ -- bins[clamp(s, 0, nbins - 1)] += 1 for every sample; the output is overwritten.  The space
@ -- (templates/hist.space.lua) sets the values used below; templates/hist_common.cuh holds what they share.
#include "kt_launch.h"
#include "hist_common.cuh"

constexpr int THREADS = $(threads); // threads per block of the count and scatter kernels
constexpr int TILE_V = $(ipt);      // int4 each thread loads and ranks per scatter tile
constexpr int TILE = THREADS * TILE_V * 4; // samples per scatter tile
constexpr int HT = 1024;            // threads per block of the per-bucket count
constexpr int MAXB = KT_HIST_PART_MAX_BUCKETS;
constexpr unsigned FULL = 0xffffffffu;

/*
 * Partition: past one block's shared memory every other kernel adds one
 * global atomic per sample, and the L2 does about 80 G of those a second
 * (H100).  Here no sample costs a global atomic.  The bins are cut into nb
 * buckets of w bins (kt_hist_part_width: as many 32-bit counters as one
 * block's shared memory holds), and three kernels run per piece of the
 * input (kt_hist_part_* in runtime/kt_variant.h):
 *   count    samples per bucket, in shared memory (read bandwidth); runs
 *            of equal bins add to the output instead (see below);
 *   scatter  each tile of TILE samples is ranked by bucket in shared memory,
 *            reserves its share of each bucket's region of the workspace
 *            with one global atomic per bucket, and writes each sample there
 *            as its 16-bit offset in the bucket;
 *   hist     each block counts a slice of one bucket's region into shared
 *            counters (16-byte loads, 8 samples each) and writes them out.
 * The workspace holds 2 bytes a sample, from the runtime's pool.
 *
 * The end bins, where every out-of-range sample lands, never enter the
 * partition: the scatter counts them in registers and adds them once per
 * warp (half the samples out of range would otherwise rank on two shared
 * counters).  So do the at most 6 samples before the first and after the
 * last whole int4.  Both add to the output directly, after the launcher's
 * memset cleared it.
 */

/* Exclusive prefix sum of in[0..nb) into out[0..nb) (they may alias: every
 * read comes after the first barrier and before the second, every write
 * after the third), by a block of T threads, MAXB / T entries each; returns
 * the total.  wsum: 33 words.  Every thread of the block calls it. */
template <int T>
static __device__ unsigned scan_excl(const unsigned *in, unsigned *out, int nb, unsigned *wsum)
{
  constexpr int PER = (MAXB + T - 1) / T;
  const int base = threadIdx.x * PER, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); // in[] is complete, and the last call's readers of wsum are done
  unsigned v[PER], sum = 0;
#pragma unroll
  for (int k = 0; k < PER; ++k) {
    v[k] = base + k < nb ? in[base + k] : 0u;
    sum += v[k];
  }
  unsigned incl = sum;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const unsigned y = __shfl_up_sync(FULL, incl, d);
    if (lane >= d)
      incl += y;
  }
  if (lane == 31)
    wsum[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const unsigned ws = lane < T / 32 ? wsum[lane] : 0u;
    unsigned wi = ws;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const unsigned y = __shfl_up_sync(FULL, wi, d);
      if (lane >= d)
        wi += y;
    }
    wsum[lane] = wi - ws;
    if (lane == 31)
      wsum[32] = wi;
  }
  __syncthreads();
  unsigned run = wsum[warp] + incl - sum;
#pragma unroll
  for (int k = 0; k < PER; ++k)
    if (base + k < nb) {
      out[base + k] = run;
      run += v[k];
    }
  __syncthreads();
  return wsum[32];
}

/* b / w for 0 <= b < 2^26 and 1024 <= w <= 65536 (the bucket of bin b),
 * without the integer divide's dozens of instructions: a float estimate
 * (off by less than one) corrected by one either way.  inv_w = 1.0f / w.
 * In count and scatter it took uniform input from 487 to 541 GB/s at 4M
 * bins on an H100. */
static __device__ __forceinline__ int bucket_of(int b, int w, float inv_w)
{
  int q = __float2int_rz(__int2float_rz(b) * inv_w);
  const int r = b - q * w;
  return q + (r >= w) - (r < 0);
}

/* The samples as int4 from the first 16-byte boundary on: `head` (at most
 * 3) samples before, nvec int4, and the rest (at most 3) after. */
struct body_t {
  unsigned long long head, nvec, tail;
};
static __device__ __forceinline__ body_t body_of(const int *samples, unsigned long long n)
{
  body_t b;
  b.head = min((unsigned long long)(((16 - ((uintptr_t)samples & 15)) & 15) / 4), n);
  b.nvec = (n - b.head) / 4;
  b.tail = b.head + b.nvec * 4;
  return b;
}

/* ---- count: samples per bucket, or runs straight to the output ------------- */

/*
 * Count and scatter walk the input in the same tiles (TILE samples, thread
 * t's int4s at tile * THREADS * TILE_V + v * THREADS + t), and each warp of
 * count decides for its own part of a tile (32 * TILE_V int4s), with no
 * barrier.  It prices its direct adds: one per run of equal bins in a lane's
 * int4, where an int4 of one bin extends the run of the lane before it.
 * Where those adds are at most a DIRECT_SHARE-th of its samples (sorted
 * input, long runs, one hot bin: what makes a global kernel fast) the warp
 * adds them to the output here, lanes of one bin together
 * (__match_any_sync), and marks its part direct; the scatter's warp skips
 * it, and its samples never reach the partition.  Otherwise it counts its
 * samples per bucket.  So an input sorted in places takes the cheap path
 * exactly there, and no sample is counted twice or lost whatever the warps
 * decided.  On an H100 at 1M to 16M bins this took sorted and one-bin input
 * from about 550 GB/s to 2100-2450 (bench_hist_limits, part).
 */
constexpr unsigned DIRECT_SHARE = 4;
constexpr int WARPS = THREADS / 32;

extern "C" __global__ void __launch_bounds__(THREADS)
$(name)_count(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
              int w, int nb, unsigned int *__restrict__ count, unsigned char *__restrict__ direct)
{
  __shared__ unsigned c[MAXB];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const float inv_w = 1.0f / (float)w;
  for (int i = threadIdx.x; i < nb; i += THREADS)
    c[i] = 0;
  __syncthreads();
  // A direct add waits in (held_bin, held) while the next is for the same
  // bin: one hot bin then costs one atomic a thread, not one a warp a tile.
  int held_bin = 0;
  unsigned held = 0;
  auto hold = [&](int b, unsigned inc) {
    if (b != held_bin) {
      if (held)
        atomicAdd(&bins[held_bin], held);
      held_bin = b, held = 0;
    }
    held += inc;
  };
  const body_t bd = body_of(samples, n);
  const int4 *body = reinterpret_cast<const int4 *>(samples + bd.head);
  const unsigned long long per_tile = (unsigned long long)THREADS * TILE_V;
  const unsigned long long tiles = (bd.nvec + per_tile - 1) / per_tile;
  for (unsigned long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int b[TILE_V][4];
    bool same[TILE_V], in[TILE_V];
#pragma unroll
    for (int v = 0; v < TILE_V; ++v) {
      const unsigned long long i = tile * per_tile + (unsigned long long)v * THREADS + threadIdx.x;
      in[v] = i < bd.nvec;
      const int4 x = in[v] ? __ldcs(body + i) : make_int4(0, 0, 0, 0);
      b[v][0] = clamp_bin(x.x, nbins), b[v][1] = clamp_bin(x.y, nbins);
      b[v][2] = clamp_bin(x.z, nbins), b[v][3] = clamp_bin(x.w, nbins);
    }
    unsigned adds = 0, mine = 0; // the lane's direct adds and samples
#pragma unroll
    for (int v = 0; v < TILE_V; ++v) {
      same[v] = in[v] && b[v][0] == b[v][1] && b[v][1] == b[v][2] && b[v][2] == b[v][3];
      const int before = __shfl_up_sync(FULL, same[v] ? b[v][0] : -1, 1); // -1: no bin
      if (same[v])
        adds += lane == 0 || before != b[v][0];
      else if (in[v])
        adds += 1u + (b[v][0] != b[v][1]) + (b[v][1] != b[v][2]) + (b[v][2] != b[v][3]);
      mine += in[v] ? 4u : 0u;
    }
    adds = __reduce_add_sync(FULL, adds);
    mine = __reduce_add_sync(FULL, mine);
    const bool go = mine > 0 && adds * DIRECT_SHARE <= mine;
    if (lane == 0)
      direct[tile * WARPS + warp] = go;
    if (!go) { // each run of one bucket in an int4 adds once; the end bins (-1) stay out of the partition
#pragma unroll
      for (int v = 0; v < TILE_V; ++v)
        if (in[v]) {
          int cur = -1;
          unsigned run = 0;
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const int bk = b[v][k] != 0 && b[v][k] != nbins - 1 ? bucket_of(b[v][k], w, inv_w) : -1;
            if (bk == cur) {
              ++run;
            } else {
              if (cur >= 0)
                atomicAdd(&c[cur], run);
              cur = bk, run = 1;
            }
          }
          if (cur >= 0)
            atomicAdd(&c[cur], run);
        }
      continue;
    }
#pragma unroll
    for (int v = 0; v < TILE_V; ++v) {
      // Lanes whose int4 is one bin add together; the rest (keys below 0,
      // one a lane) add their own runs.
      const unsigned peers = __match_any_sync(FULL, same[v] ? b[v][0] : -1 - lane);
      if (same[v]) {
        if (lane == __ffs(peers) - 1)
          hold(b[v][0], 4u * __popc(peers));
      } else if (in[v]) {
        int cur = b[v][0];
        unsigned run = 1;
#pragma unroll
        for (int k = 1; k < 4; ++k)
          if (b[v][k] == cur) {
            ++run;
          } else {
            hold(cur, run);
            cur = b[v][k], run = 1;
          }
        hold(cur, run);
      }
    }
  }
  if (held)
    atomicAdd(&bins[held_bin], held);
  __syncthreads();
  for (int j = threadIdx.x; j < nb; j += THREADS)
    if (c[j])
      atomicAdd(&count[j], c[j]);
}

/* ---- scatter: each sample to its bucket's region (the variant's own name) ---- */

/*
 * A tile: thread t ranks the 4 * TILE_V samples of its int4s among the
 * tile's samples of the same bucket with a shared atomic on the bucket's
 * counter (the old value is its rank).  When a whole warp's samples fall in
 * one bucket (sorted input, one hot bin, a bucket's worth of runs), 32 such
 * atomics on one counter would serialise, so the first lane adds 32 once
 * and each lane takes its rank from it.  Then the tile's buckets are laid
 * out in order in the staging area (a prefix sum of the counters), each
 * bucket reserves its place in its region with one global atomic on its
 * cursor, and the staged samples go out in order: the samples of one bucket
 * are adjacent, so the 2-byte stores coalesce.
 */
extern "C" __global__ void __launch_bounds__(THREADS)
$(name)(const int *__restrict__ samples, unsigned long long n, unsigned int *__restrict__ bins, int nbins,
                int w, int nb, const unsigned int *__restrict__ count, unsigned int *__restrict__ cursor,
                unsigned short *__restrict__ part, const unsigned char *__restrict__ direct)
{
  __shared__ unsigned start[MAXB]; // each bucket's region: the buckets before it
  __shared__ unsigned cnt[MAXB];   // the tile's samples of each bucket, then where they start in the stage
  __shared__ unsigned base[MAXB];  // region index of the stage's index 0, for each bucket's samples
  __shared__ unsigned wsum[33];
  extern __shared__ unsigned short stage[]; // [2 * TILE]: offsets, then bucket numbers
  unsigned short *const stage_b = stage + TILE;
  const int lane = threadIdx.x & 31;
  const float inv_w = 1.0f / (float)w;

  for (int b = threadIdx.x; b < nb; b += THREADS)
    start[b] = count[b];
  scan_excl<THREADS>(start, start, nb, wsum);

  const body_t bd = body_of(samples, n);
  const int4 *body = reinterpret_cast<const int4 *>(samples + bd.head);
  unsigned first = 0, last = 0; // this thread's samples in bins 0 and nbins - 1
  const unsigned long long tiles = (bd.nvec + (unsigned long long)THREADS * TILE_V - 1) / ((unsigned long long)THREADS * TILE_V);
  // A warp whose part of a tile count added to the output (direct) loads
  // nothing of it.  (Reading the flag a tile ahead, so that the loads never
  // wait on it, took 15 more registers: at 32 it spilled and ran 2-4%
  // slower on an H100, above 32 one block an SM ran 15% slower.)
  const int warp = threadIdx.x >> 5;
  for (unsigned long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const bool skip = direct[tile * WARPS + warp];
    if (__syncthreads_and(skip)) // a tile of runs (sorted input) all added
      continue;
    for (int b = threadIdx.x; b < nb; b += THREADS)
      cnt[b] = 0;
    __syncthreads();
    int key[TILE_V * 4]; // bucket << 16 | offset in the bucket; -1: none
    unsigned rank[TILE_V * 4];
#pragma unroll
    for (int v = 0; v < TILE_V; ++v) {
      const unsigned long long i = tile * THREADS * TILE_V + (unsigned long long)v * THREADS + threadIdx.x;
      const bool in = !skip && i < bd.nvec;
      const int4 x = in ? __ldcs(body + i) : make_int4(0, 0, 0, 0);
      const int s[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int b = clamp_bin(s[k], nbins);
        int bk = -1, kk = -1;
        if (in) {
          if (b == 0)
            ++first;
          else if (b == nbins - 1)
            ++last;
          else {
            bk = bucket_of(b, w, inv_w);
            kk = bk << 16 | (b - bk * w);
          }
        }
        // Every lane gets here (the loop bounds are the block's): the whole-warp test.
        const int lead = __shfl_sync(FULL, bk, 0);
        unsigned r = 0;
        if (__all_sync(FULL, bk == lead)) {
          if (lead >= 0) {
            unsigned r0 = 0;
            if (lane == 0)
              r0 = atomicAdd(&cnt[lead], 32u);
            r = __shfl_sync(FULL, r0, 0) + lane;
          }
        } else if (bk >= 0)
          r = atomicAdd(&cnt[bk], 1u);
        key[4 * v + k] = kk;
        rank[4 * v + k] = r;
      }
    }
    // cnt[] turns into where each bucket's samples start in the stage.
    const unsigned total = scan_excl<THREADS>(cnt, base, nb, wsum);
    for (int b = threadIdx.x; b < nb; b += THREADS) { // each entry read and written by one thread
      const unsigned c = cnt[b], pos = base[b];
      cnt[b] = pos;
      if (c) // wraps below 0 while pos > the region's index: the sum with p below does not
        base[b] = start[b] + atomicAdd(&cursor[b], c) - pos;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE_V * 4; ++k)
      if (key[k] >= 0) {
        const int bk = key[k] >> 16;
        const unsigned p = cnt[bk] + rank[k];
        stage[p] = (unsigned short)(key[k] & 0xffff);
        stage_b[p] = (unsigned short)bk;
      }
    __syncthreads();
    for (unsigned p = threadIdx.x; p < total; p += THREADS)
      part[base[stage_b[p]] + p] = stage[p];
    // The next tile writes cnt and the stage only after two barriers.
  }

  // The samples before the first int4 and after the last, straight to the output.
  if (blockIdx.x == 0)
    for (int h = 0; h < 2; ++h) { // h = 0: the head, 1: the tail
      if (threadIdx.x >= (h ? n - bd.tail : bd.head))
        continue;
      const int b = clamp_bin(samples[(h ? bd.tail : 0) + threadIdx.x], nbins);
      if (b == 0)
        ++first;
      else if (b == nbins - 1)
        ++last;
      else
        atomicAdd(&bins[b], 1u);
    }
  first = __reduce_add_sync(FULL, first);
  last = __reduce_add_sync(FULL, last);
  if (lane == 0) {
    if (first)
      atomicAdd(&bins[0], first);
    if (last)
      atomicAdd(&bins[nbins - 1], last);
  }
}

/* ---- hist: each bucket's region in shared memory ---------------------------- */

/*
 * Block x takes one slice of one bucket: a bucket of c samples is cut into
 * ceil(c / per) slices, so no block counts more than per samples, and the
 * slices number at most the grid's blocks (G + nb, G = n / per).  Blocks
 * past the last slice return.
 */
extern "C" __global__ void __launch_bounds__(HT)
$(name)_hist(const unsigned short *__restrict__ part, unsigned int *__restrict__ bins, int nbins, int w, int nb,
             const unsigned int *__restrict__ count, unsigned per)
{
  extern __shared__ unsigned sb[]; // [w]; first start[MAXB] and slice[MAXB] (w >= 2 * MAXB)
  unsigned *const start = sb, *const slice = sb + MAXB;
  __shared__ unsigned wsum[33];
  __shared__ int mine;
  for (int b = threadIdx.x; b < nb; b += HT) {
    const unsigned c = count[b];
    start[b] = c;
    slice[b] = (c + per - 1) / per;
  }
  if (threadIdx.x == 0)
    mine = -1;
  scan_excl<HT>(start, start, nb, wsum);
  const unsigned slices = scan_excl<HT>(slice, slice, nb, wsum);
  if (blockIdx.x >= slices)
    return; // the whole block
  for (int b = threadIdx.x; b < nb; b += HT) {
    const unsigned end = b + 1 < nb ? slice[b + 1] : slices;
    if (slice[b] <= blockIdx.x && blockIdx.x < end)
      mine = b;
  }
  __syncthreads();
  const int b = mine;
  const unsigned k = (b + 1 < nb ? slice[b + 1] : slices) - slice[b], j = blockIdx.x - slice[b];
  const unsigned long long c = count[b];
  const unsigned long long s0 = start[b] + c * j / k, s1 = start[b] + c * (j + 1) / k;
  __syncthreads(); // the tables are read: the counters take their place
  for (int q = threadIdx.x; q < w; q += HT)
    sb[q] = 0;
  __syncthreads();

  // 16-byte loads of 8 offsets from the first 8-aligned index on; a load of
  // 8 equal offsets (a run) adds once.
  const unsigned long long a0 = min(s1, (s0 + 7) & ~7ull), a1 = max(a0, s1 & ~7ull);
  for (unsigned long long i = s0 + threadIdx.x; i < a0; i += HT)
    atomicAdd(&sb[part[i]], 1u);
  const uint4 *vin = reinterpret_cast<const uint4 *>(part + a0);
  const unsigned long long nv = (a1 - a0) / 8;
  for (unsigned long long i = threadIdx.x; i < nv; i += HT) {
    const uint4 x = __ldcs(vin + i);
    if (x.x == x.y && x.y == x.z && x.z == x.w && (x.x >> 16) == (x.x & 0xffffu)) {
      atomicAdd(&sb[x.x & 0xffffu], 8u);
    } else {
      atomicAdd(&sb[x.x & 0xffffu], 1u), atomicAdd(&sb[x.x >> 16], 1u);
      atomicAdd(&sb[x.y & 0xffffu], 1u), atomicAdd(&sb[x.y >> 16], 1u);
      atomicAdd(&sb[x.z & 0xffffu], 1u), atomicAdd(&sb[x.z >> 16], 1u);
      atomicAdd(&sb[x.w & 0xffffu], 1u), atomicAdd(&sb[x.w >> 16], 1u);
    }
  }
  for (unsigned long long i = a1 + threadIdx.x; i < s1; i += HT)
    atomicAdd(&sb[part[i]], 1u);
  __syncthreads();
  // A bucket of one slice is this block's alone in this kernel: its bins
  // take a plain add (the memset, count's direct tiles and the scatter's
  // direct adds are there: earlier work).  The end bins' counters stay 0.
  const int lo = b * w;
  for (int q = threadIdx.x; q < w && lo + q < nbins; q += HT) {
    const unsigned v = sb[q];
    if (!v)
      continue;
    if (k == 1)
      bins[lo + q] += v;
    else
      atomicAdd(&bins[lo + q], v);
  }
}

/* ---- the launcher ----------------------------------------------------------- */

/* Launcher: clears the output, takes the workspace from the pool, then per
 * piece of at most KT_HIST_PART_PIECE samples clears the bucket counters and
 * runs count, scatter and hist. */
extern "C" int kt_launch_$(name)(const void *args, cudaStream_t stream)
{
  const kt_hist_args *a = (const kt_hist_args *)args;
  const long long nb = kt_hist_part_buckets(a->nbins, a->smem_optin);
  if (nb == 0)
    return (int)cudaErrorInvalidValue;
  if (a->n == 0)
    return (int)cudaMemsetAsync(a->bins, 0, (size_t)a->nbins * sizeof(unsigned int), stream);
  const int w = (int)kt_hist_part_width(a->smem_optin);
  const size_t stage_bytes = 2 * TILE * sizeof(unsigned short), hist_bytes = (size_t)w * sizeof(unsigned int);

  // Blocks per SM by threads and registers, and the opt-ins, once per device.
  static kt_launch_once once_count, once_scatter, once_hist;
  int count_sm = 1, scatter_sm = 1, hist_sm = 1;
  cudaError_t err = kt_launch_prepare(&once_count, (const void *)$(name)_count, 0, 0, THREADS, &count_sm);
  if (err == cudaSuccess)
    err = kt_launch_prepare(&once_scatter, (const void *)$(name), stage_bytes, 0, THREADS, &scatter_sm);
  if (err == cudaSuccess)
    err = kt_launch_prepare(&once_hist, (const void *)$(name)_hist, hist_bytes, 0, HT, &hist_sm);
  if (err != cudaSuccess)
    return (int)err;
  // The scatter's static tables (4 KB a table) count against its share of the SM.
  const size_t scatter_smem = stage_bytes + 3 * MAXB * sizeof(unsigned) + 33 * sizeof(unsigned);
  const size_t hist_smem = hist_bytes + 34 * sizeof(unsigned);
  int by_smem = (int)((size_t)a->smem_per_sm / (hist_smem + 1024));
  if (by_smem < hist_sm)
    hist_sm = by_smem;
  if (hist_sm < 1)
    return (int)cudaErrorInvalidValue; // the runtime's width leaves room: not reached
  const long long hist_grid = (long long)a->sm_count * hist_sm;

  const unsigned long long piece = a->n < (unsigned long long)KT_HIST_PART_PIECE ? a->n : KT_HIST_PART_PIECE;
  const size_t tables = 2 * MAXB * sizeof(unsigned int);
  void *ws = NULL;
  const size_t part_bytes = (size_t)piece * sizeof(unsigned short) + 16;
  const size_t flag_bytes = ((size_t)(piece / 4 / ((unsigned long long)THREADS * TILE_V)) + 2) * WARPS; // a byte a warp a tile
  const size_t ws_bytes = tables + part_bytes + flag_bytes;
  err = cudaMemsetAsync(a->bins, 0, (size_t)a->nbins * sizeof(unsigned int), stream);
  if (err != cudaSuccess)
    return (int)err;
  err = a->pool ? cudaMallocFromPoolAsync(&ws, ws_bytes, (cudaMemPool_t)a->pool, stream)
                : cudaMallocAsync(&ws, ws_bytes, stream);
  if (err != cudaSuccess)
    return (int)err;
  unsigned int *count = (unsigned int *)ws, *cursor = count + MAXB;
  unsigned short *part = (unsigned short *)((char *)ws + tables); // 16-byte aligned: tables is 8 KB
  unsigned char *direct = (unsigned char *)ws + tables + part_bytes;

  for (unsigned long long off = 0; off < a->n && err == cudaSuccess; off += piece) {
    kt_hist_args p = *a;
    p.samples = a->samples + off;
    p.n = a->n - off < piece ? a->n - off : piece;
    err = cudaMemsetAsync(count, 0, tables, stream);
    if (err != cudaSuccess)
      break;
    err = kt_launch_kernel($(name)_count, dim3((unsigned)hist_grid_blocks(&p, count_sm, 0, THREADS, TILE_V)),
                           dim3(THREADS), 0, stream, p.samples, p.n, a->bins, a->nbins, w, (int)nb, count, direct);
    if (err == cudaSuccess)
      err = kt_launch_kernel($(name), dim3((unsigned)hist_grid_blocks(&p, scatter_sm, scatter_smem, THREADS, TILE_V)),
                             dim3(THREADS), stage_bytes, stream, p.samples, p.n, a->bins, a->nbins, w, (int)nb,
                             count, cursor, part, direct);
    const unsigned per = (unsigned)((p.n + hist_grid - 1) / hist_grid);
    if (err == cudaSuccess)
      err = kt_launch_kernel($(name)_hist, dim3((unsigned)(hist_grid + nb)), dim3(HT), hist_bytes, stream, part,
                             a->bins, a->nbins, w, (int)nb, count, per);
  }
  const cudaError_t f = cudaFreeAsync(ws, stream);
  return (int)(err != cudaSuccess ? err : f);
}
