/* SPDX-License-Identifier: MIT */
/* bench/bench_hist_limits.cu: what bounds a histogram past the shared memory
 * (issue 12), measured rather than guessed.
 *
 *   make build/bench_hist_limits && ./build/bench_hist_limits
 *
 * Inputs are made on the GPU (a hash of the index: uniform, or a narrow
 * normal of deviation nbins / 50 from four uniform 16-bit numbers), and
 * every histogram below is compared, bin for bin, with plain global atomics
 * on the same samples.  Times: medians of CUDA events with the L2 flushed
 * before each run (kt_measure_time_fn).  Sections:
 *   rates      plain global atomics (one atomicAdd per sample, after a
 *              memset), kernel and memset apart: the L2's atomic rate;
 *   small n    n = 2^20: where a call's time goes (memset, kernel, the gap
 *              between them), ktune's global variants, and a prototype with
 *              the clearing folded into the kernel behind a grid barrier;
 *   l2fit      16M bins: the probe-planned passes of hist_global_*_l1
 *              against one pass and plain atomics, uniform, normal, one bin;
 *   partition  a prototype of the multi-pass alternative to atomics past the
 *              shared memory: count the samples per bucket of W bins, scatter
 *              each as a 16-bit offset into its bucket's region (ranked in a
 *              tile with one shared atomic per sample), then count each
 *              region in shared memory (16-byte loads).  Its phases are timed
 *              apart.  It needs 2 n bytes of workspace.
 *
 * Two runs on an H100 (2026-11-23), n = 2^28:
 *   - plain atomics: 79.5 G atomics/s from 256K to 4M bins (318 GB/s of
 *     int32; ktune's global kernel, int4 loads, about 345), 22 at 16M (L2
 *     misses).  A kernel that adds one global atomic per sample stays near
 *     there: 1.5x needs fewer global atomics than samples.
 *   - n = 2^20: a memset costs 3.5-8.5 us alone against a 20 us call; the
 *     clearing folded into the kernel behind a grid barrier made 1.02-1.06x
 *     memset + plain atomics from 64K to 4M bins (now in hist_global).
 *   - 16M bins, l2fit probed and shared evenly: uniform 293 GB/s, normal
 *     331 (plain 318; 279 with the passes by nbins), one bin 469.
 *   - partition, phases in ms at 1M / 4M uniform: count 0.365 / 0.369 (read
 *     bandwidth); scatter 1.31 / 1.33 ranked by one shared atomic a sample,
 *     but 2.55 / 3.23 ranked by __match_any_sync warp aggregation (slower:
 *     not kept); per-bucket count 0.78 / 0.81 with 2-byte loads, 0.23 / 0.23
 *     with 16-byte loads (kept).  The kept phases add to 1.91 / 1.93 ms:
 *     1.78x / 1.74x plain atomics; normal (sigma nbins / 50) 1.74x / 1.63x.
 *     A tile whose samples all fall in one bucket (sorted input) ranks on
 *     one shared counter: it wants a whole-warp test first (not built).
 *
 *   part       the library's partition kernel (templates/hist_part.cu.tpl,
 *              hist_part_*) through its launcher, workspace from the
 *              device's pool, against memset + plain atomics and ktune's
 *              global kernel, on five distributions; and once with the
 *              default pool (which hands the workspace back at every sync).
 *              KT_BENCH_SECTIONS=part runs it alone.
 *
 * H100 (2026-11-23), part, n = 2^28, GB/s (x plain atomics), hist_part_t1024_u2:
 *              1M            4M            16M
 *   uniform    565 (1.78x)   541 (1.70x)   487 (5.52x)
 *   sorted    2291 (9.00x)  2198 (8.41x)  1968 (5.45x)
 *   normal     503 (1.76x)   555 (1.72x)   552 (1.74x)
 *   onebin    2326 (427x)   2314 (425x)   2203 (413x)
 *   halfout    632 (30.4x)   606 (29.2x)   545 (66.7x)
 *   The pipeline holds in one piece (four launches a piece of 2^27
 *   samples; the bucket prefix sums are done in each block).  Sorted and
 *   one-bin input made 511-570 until count learned to add runs straight to
 *   the output (a warp's part of a tile whose adds would be at most a
 *   quarter of its samples): ktune's global kernel, which had led there
 *   (hist_global_t512_a1_m2_l1_u2: 2768 at 1M sorted, 732 at 16M), now
 *   leads only at 1M and 4M sorted (2768, 2532), by 15-20%, and loses 1.6x
 *   on uniform.  With the default pool instead of the device's, which maps
 *   the 512 MB workspace afresh after every sync, it lost 10-45% (uniform
 *   1M 454, sorted 1M 1188).  u4 lost 5-12% everywhere, t512_u2 was within
 *   2% (before the direct adds).
 */
#include <algorithm>
#include <cooperative_groups.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kt_internal.h"

namespace cg = cooperative_groups;

/* ---- inputs ---------------------------------------------------------------- */

static __device__ __forceinline__ uint64_t mix(uint64_t x)
{
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

/* dist 0 uniform (1/512 below and above the range), 1 normal (sigma nbins / 50), 2 one bin, 3 sorted
 * (uniform over the bins, in order, the first and last 1/1024 out of range), 4 half out of range (the
 * rest uniform). */
__global__ void make_input(int *s, size_t n, int nbins, int dist, uint64_t seed)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t x = mix(i * 0x9e3779b97f4a7c15ull + seed), y = mix(x);
    long long v;
    if (dist == 2)
      v = nbins / 3;
    else if (dist == 3)
      v = i < n / 1024 ? -1 : i >= n - n / 1024 ? nbins : (long long)((unsigned __int128)i * nbins / n);
    else if (dist == 4 && (x & 1) == 0)
      v = (x & 2) ? -1 - (long long)(y % 1000) : nbins + (long long)(y % 1000);
    else if ((x & 1023) == 0)
      v = -1 - (long long)(y % 1000);
    else if ((x & 1023) == 1)
      v = nbins + (long long)(y % 1000);
    else if (dist == 1) {
      double sum = 0;
      for (int k = 0; k < 4; ++k)
        sum += (double)((y >> (16 * k)) & 0xffff) / 65536.0;
      v = (long long)((double)nbins / 2 + (double)nbins / 50 * (sum - 2.0) * 1.7320508075688772);
    } else
      v = (long long)((x >> 10) % (uint64_t)nbins);
    s[i] = (int)v;
  }
}

/* ---- plain atomics, and a prototype that clears in the kernel -------------- */

__global__ void plain_atomics(const int *samples, size_t n, unsigned *bins, int nbins)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const int s = samples[i];
    atomicAdd(&bins[s < 0 ? 0 : s >= nbins ? nbins - 1 : s], 1u);
  }
}

/* int4 loads, one atomic per sample; CLEAR: zero the bins first, all
 * blocks, then a grid barrier (a cooperative launch keeps every block
 * resident). n a multiple of 4. */
template <int THREADS, bool CLEAR>
__global__ void __launch_bounds__(THREADS) proto_atomics(const int4 *s, size_t nvec, unsigned *bins, int nbins)
{
  const size_t stride = (size_t)gridDim.x * THREADS, gtid = blockIdx.x * (size_t)THREADS + threadIdx.x;
  if (CLEAR) {
    for (size_t b = gtid; b < (size_t)nbins; b += stride)
      bins[b] = 0;
    cg::this_grid().sync();
  }
  for (size_t i = gtid; i < nvec; i += stride) {
    const int4 x = __ldcs(s + i);
    atomicAdd(&bins[min(max(x.x, 0), nbins - 1)], 1u);
    atomicAdd(&bins[min(max(x.y, 0), nbins - 1)], 1u);
    atomicAdd(&bins[min(max(x.z, 0), nbins - 1)], 1u);
    atomicAdd(&bins[min(max(x.w, 0), nbins - 1)], 1u);
  }
}

/* ---- the partition prototype -------------------------------------------- */

constexpr int PT = 1024;      // threads per block in every partition kernel
constexpr int PV = 2;         // int4 per thread per scatter tile
constexpr int MAXB = 512;     // most buckets (static shared memory: 48 KB in all)
constexpr int TILE = PT * PV * 4;

static __device__ __forceinline__ int clampb(int s, int nbins) { return min(max(s, 0), nbins - 1); }

/* Samples per bucket of w bins. */
__global__ void __launch_bounds__(PT) part_count(const int4 *s, size_t nvec, int nbins, int w, int nb,
                                                 unsigned long long *count)
{
  __shared__ unsigned c[MAXB];
  for (int i = threadIdx.x; i < nb; i += PT)
    c[i] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * (size_t)PT + threadIdx.x; i < nvec; i += (size_t)gridDim.x * PT) {
    const int4 x = __ldcg(s + i);
    atomicAdd(&c[clampb(x.x, nbins) / w], 1u);
    atomicAdd(&c[clampb(x.y, nbins) / w], 1u);
    atomicAdd(&c[clampb(x.z, nbins) / w], 1u);
    atomicAdd(&c[clampb(x.w, nbins) / w], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < nb; i += PT)
    if (c[i])
      atomicAdd(&count[i], (unsigned long long)c[i]);
}

/* cursor[b] = start[b] = sum of count[< b]; one block. */
__global__ void part_scan(const unsigned long long *count, int nb, unsigned long long *cursor, unsigned long long *start)
{
  if (threadIdx.x == 0) {
    unsigned long long run = 0;
    for (int b = 0; b < nb; ++b) {
      cursor[b] = start[b] = run;
      run += count[b];
    }
    start[nb] = run;
  }
}

/* Each tile of TILE samples: rank them by bucket in shared memory, reserve
 * each bucket's share of its region with one global atomic, write them out
 * as 16-bit offsets within the bucket, runs of one bucket together. */
__global__ void __launch_bounds__(PT) part_scatter(const int4 *s, size_t nvec, int nbins, int w, int nb,
                                                   unsigned long long *cursor, uint16_t *out)
{
  __shared__ unsigned cnt[MAXB], first[MAXB];
  __shared__ unsigned long long base[MAXB];
  __shared__ uint16_t stage[TILE], stage_b[TILE];
  __shared__ unsigned wsum[32];
  for (size_t t0 = (size_t)blockIdx.x * PT * PV; t0 < nvec; t0 += (size_t)gridDim.x * PT * PV) {
    for (int i = threadIdx.x; i < nb; i += PT)
      cnt[i] = 0;
    __syncthreads();
    int bin[PV * 4];
    unsigned rank[PV * 4];
#pragma unroll
    for (int v = 0; v < PV; ++v) {
      const size_t i = t0 + (size_t)v * PT + threadIdx.x;
      int4 x = i < nvec ? __ldcs(s + i) : make_int4(-2, -2, -2, -2);
      bin[4 * v + 0] = x.x, bin[4 * v + 1] = x.y, bin[4 * v + 2] = x.z, bin[4 * v + 3] = x.w;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (i < nvec) {
          bin[4 * v + k] = clampb(bin[4 * v + k], nbins);
          rank[4 * v + k] = atomicAdd(&cnt[bin[4 * v + k] / w], 1u);
        } else
          bin[4 * v + k] = -1;
    }
    __syncthreads();
    // Exclusive scan of cnt[0..nb) (nb <= 1024: one entry a thread).
    {
      const int b = threadIdx.x;
      const unsigned c = b < nb ? cnt[b] : 0;
      unsigned incl = c;
      for (int d = 1; d < 32; d *= 2) {
        const unsigned y = __shfl_up_sync(0xffffffffu, incl, d);
        if ((b & 31) >= d)
          incl += y;
      }
      if ((b & 31) == 31)
        wsum[b >> 5] = incl;
      __syncthreads();
      if (b < 32) {
        unsigned ws = wsum[b], wi = ws;
        for (int d = 1; d < 32; d *= 2) {
          const unsigned y = __shfl_up_sync(0xffffffffu, wi, d);
          if (b >= d)
            wi += y;
        }
        wsum[b] = wi - ws;
      }
      __syncthreads();
      if (b < nb) {
        first[b] = wsum[b >> 5] + incl - c;
        if (c)
          base[b] = atomicAdd(&cursor[b], (unsigned long long)c);
      }
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < PV * 4; ++k)
      if (bin[k] >= 0) {
        const int b = bin[k] / w;
        const unsigned p = first[b] + rank[k];
        stage[p] = (uint16_t)(bin[k] - b * w);
        stage_b[p] = (uint16_t)b;
      }
    __syncthreads();
    const size_t valid = min((size_t)TILE, (nvec - t0) * 4);
    for (int p = threadIdx.x; p < (int)valid; p += PT) {
      const int b = stage_b[p];
      out[base[b] + (p - first[b])] = stage[p];
    }
    __syncthreads();
  }
}

/* Block x counts the partitioned samples [x * per, (x + 1) * per) in shared
 * memory, bucket by bucket (start[] gives the buckets' regions), flushing
 * its counts with atomics whenever its range leaves a bucket. */
__global__ void __launch_bounds__(PT) part_hist(const uint16_t *in, unsigned long long total, size_t per, int nbins,
                                                int w, int nb, const unsigned long long *start, unsigned *bins)
{
  extern __shared__ unsigned sb[]; // [w]
  const unsigned long long r0 = (unsigned long long)blockIdx.x * per, r1 = min(r0 + per, total);
  if (r0 >= r1)
    return;
  int cur = 0;
  while (start[cur + 1] <= r0)
    ++cur;
  for (int i = threadIdx.x; i < w; i += PT)
    sb[i] = 0;
  __syncthreads();
  unsigned long long p = r0;
  while (p < r1) {
    const unsigned long long e = min(r1, start[cur + 1]);
    // 16-byte loads of 8 offsets from the first 8-aligned index on.
    const unsigned long long a0 = min(e, (p + 7) & ~7ull), a1 = max(a0, e & ~7ull);
    for (unsigned long long i = p + threadIdx.x; i < a0; i += PT)
      atomicAdd(&sb[in[i]], 1u);
    const uint4 *vin = reinterpret_cast<const uint4 *>(in + a0);
    const unsigned long long nv = (a1 - a0) / 8;
    for (unsigned long long j = threadIdx.x; j < nv; j += PT) {
      const uint4 x = __ldcs(vin + j);
      atomicAdd(&sb[x.x & 0xffff], 1u), atomicAdd(&sb[x.x >> 16], 1u);
      atomicAdd(&sb[x.y & 0xffff], 1u), atomicAdd(&sb[x.y >> 16], 1u);
      atomicAdd(&sb[x.z & 0xffff], 1u), atomicAdd(&sb[x.z >> 16], 1u);
      atomicAdd(&sb[x.w & 0xffff], 1u), atomicAdd(&sb[x.w >> 16], 1u);
    }
    for (unsigned long long i = a1 + threadIdx.x; i < e; i += PT)
      atomicAdd(&sb[in[i]], 1u);
    __syncthreads();
    const int lo = cur * w;
    for (int j = threadIdx.x; j < w && lo + j < nbins; j += PT) {
      const unsigned c = sb[j];
      if (c) {
        atomicAdd(&bins[lo + j], c);
        sb[j] = 0;
      }
    }
    __syncthreads();
    p = e;
    ++cur;
  }
}

/* ---- helpers ------------------------------------------------------------- */

static bench_flush g_flush;
static const bench_reps kReps = {5, 30, 100.0};

template <class F> static double time_ms(F f)
{
  const bench_time_result t = bench_time(f, g_flush, kReps);
  if (!t.ok) {
    fprintf(stderr, "timing failed: %s\n", t.err.c_str());
    return NAN;
  }
  return t.ms;
}

static std::vector<unsigned> fetch(const unsigned *d, int nbins)
{
  std::vector<unsigned> h((size_t)nbins);
  BENCH_CUDA(cudaMemcpy(h.data(), d, h.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
  return h;
}

static long long differ(const std::vector<unsigned> &a, const std::vector<unsigned> &b)
{
  long long bad = 0;
  for (size_t i = 0; i < a.size(); ++i)
    bad += a[i] != b[i];
  return bad;
}

static const char *kDist[] = {"uniform", "normal", "onebin", "sorted", "halfout"};

/* KT_BENCH_SECTIONS=rates,small,l2fit,partition,part picks sections (default: all). */
static bool section(const char *name)
{
  const char *env = getenv("KT_BENCH_SECTIONS");
  if (!env || !*env)
    return true;
  const std::string list = std::string(",") + env + ",", key = std::string(",") + name + ",";
  return list.find(key) != std::string::npos;
}

int main(int argc, char **argv)
{
  const bench_options o = bench_parse_args(argc, argv, "what bounds a histogram past the shared memory.");
  const bench_device d = bench_device_open();
  g_flush = bench_flush_alloc(d);
  const int sms = d.info.sm_count;
  printf("%s\n", d.line.c_str());
  const size_t nmax = o.quick ? 1ull << 24 : 1ull << 28;
  const int maxbins = 1 << 24;
  int *ds;
  unsigned *db, *dref;
  BENCH_CUDA(cudaMalloc(&ds, nmax * sizeof(int)));
  BENCH_CUDA(cudaMalloc(&db, (size_t)maxbins * sizeof(unsigned)));
  BENCH_CUDA(cudaMalloc(&dref, (size_t)maxbins * sizeof(unsigned)));
  const int plain_blocks = sms * (d.info.max_threads_per_sm / 256);
  int bad_total = 0;

  auto input = [&](size_t n, int nbins, int dist) {
    make_input<<<sms * 8, 256>>>(ds, n, nbins, dist, 0x1234567ull + (uint64_t)nbins * 31 + (uint64_t)dist);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaMemset(dref, 0, (size_t)nbins * sizeof(unsigned)));
    plain_atomics<<<plain_blocks, 256>>>(ds, n, dref, nbins);
    BENCH_CUDA(cudaDeviceSynchronize());
    return fetch(dref, nbins);
  };
  auto check = [&](const char *what, const std::vector<unsigned> &ref, int nbins) {
    const long long bad = differ(fetch(db, nbins), ref);
    if (bad) {
      printf("  WRONG: %s: %lld bins differ from plain atomics\n", what, bad);
      ++bad_total;
    }
  };
  auto plain = [&](size_t n, int nbins) {
    return [=]() -> int {
      cudaMemsetAsync(db, 0, (size_t)nbins * sizeof(unsigned), 0);
      plain_atomics<<<plain_blocks, 256>>>(ds, n, db, nbins);
      return (int)cudaGetLastError();
    };
  };
  auto variant = [&](const char *name, size_t n, int nbins, double *ms) {
    const kt_variant *v = kt_registry_find(name, &d.info);
    if (!v) {
      *ms = NAN;
      return false;
    }
    kt_hist_args a = {ds, n, db, nbins, d.info.sm_count, d.info.smem_per_sm, d.info.smem_optin, nullptr};
    auto f = [&]() -> int { return v->launch(&a, 0); };
    *ms = time_ms(f);
    return true;
  };

  /* ---- rates ---- */
  if (section("rates")) {
  printf("\n== rates: plain global atomics, n = %zu uniform (G atomics/s = samples / kernel time)\n", nmax);
  printf("%10s %10s %10s %10s %10s\n", "bins", "memset us", "kernel us", "GB/s all", "Gatom/s");
  for (int nbins : {65536, 262144, 1 << 20, 1 << 22, 1 << 24}) {
    input(nmax, nbins, 0);
    auto ms_set = [&]() -> int { return (int)cudaMemsetAsync(db, 0, (size_t)nbins * sizeof(unsigned), 0); };
    auto kern = [&]() -> int {
      plain_atomics<<<plain_blocks, 256>>>(ds, nmax, db, nbins);
      return (int)cudaGetLastError();
    };
    const double tm = time_ms(ms_set), tk = time_ms(kern), ta = time_ms(plain(nmax, nbins));
    printf("%10d %10.1f %10.1f %10.1f %10.1f\n", nbins, tm * 1e3, tk * 1e3, 4.0 * nmax / ta / 1e6, nmax / tk / 1e6);
  }
  }

  /* ---- small n ---- */
  const size_t ns = 1 << 20;
  if (section("small")) {
  printf("\n== small n: n = 2^20 uniform; microseconds per call (GB/s)\n");
  static const char *gvars[] = {"hist_global_t256_a0_m0_l0_u2", "hist_global_t256_a0_m1_l0_u2", "hist_global_t512_a0_m1_l0_u2",
                                "hist_global_t512_a1_m0_l0_u2", "hist_global_t256_a0_m1_l1_u2", "hist_global_t512_a0_m1_l1_u2"};
  for (int nbins : {65536, 262144, 1 << 20, 1 << 22}) {
    const std::vector<unsigned> ref = input(ns, nbins, 0);
    auto ms_set = [&]() -> int { return (int)cudaMemsetAsync(db, 0, (size_t)nbins * sizeof(unsigned), 0); };
    auto kern = [&]() -> int {
      plain_atomics<<<plain_blocks, 256>>>(ds, ns, db, nbins);
      return (int)cudaGetLastError();
    };
    const double tm = time_ms(ms_set), tk = time_ms(kern), ta = time_ms(plain(ns, nbins));
    printf("%d bins: memset %.1f, plain kernel %.1f, memset+plain %.1f (%.0f GB/s)\n", nbins, tm * 1e3, tk * 1e3,
           ta * 1e3, 4.0 * ns / ta / 1e6);
    for (const char *g : gvars) {
      double t;
      if (variant(g, ns, nbins, &t)) {
        printf("  %-32s %6.1f (%4.0f)\n", g, t * 1e3, 4.0 * ns / t / 1e6);
        check(g, ref, nbins);
      }
    }
    /* prototypes: threads x (full occupancy, one int4 a thread) x (memset, in-kernel clear) */
    auto proto = [&](auto kernel, int threads, bool clear, bool full, const char *label) {
      int per_sm = 0;
      BENCH_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
      long long blocks = (long long)sms * per_sm;
      if (!full)
        blocks = std::min(blocks, (long long)((ns / 4 + threads - 1) / threads));
      auto f = [&]() -> int {
        if (!clear)
          cudaMemsetAsync(db, 0, (size_t)nbins * sizeof(unsigned), 0);
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3((unsigned)blocks);
        cfg.blockDim = dim3(threads);
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeCooperative;
        at[0].val.cooperative = 1;
        cfg.attrs = at;
        cfg.numAttrs = clear ? 1 : 0;
        return (int)cudaLaunchKernelEx(&cfg, kernel, (const int4 *)ds, ns / 4, db, nbins);
      };
      const double t = time_ms(f);
      printf("  proto %-26s %6.1f (%4.0f)  %lld blocks\n", label, t * 1e3, 4.0 * ns / t / 1e6, blocks);
      check(label, ref, nbins);
    };
    proto(proto_atomics<256, false>, 256, false, true, "t256 full memset");
    proto(proto_atomics<512, false>, 512, false, true, "t512 full memset");
    proto(proto_atomics<1024, false>, 1024, false, true, "t1024 full memset");
    proto(proto_atomics<512, false>, 512, false, false, "t512 1/thread memset");
    proto(proto_atomics<256, true>, 256, true, true, "t256 full clear");
    proto(proto_atomics<512, true>, 512, true, true, "t512 full clear");
    proto(proto_atomics<1024, true>, 1024, true, true, "t1024 full clear");
    proto(proto_atomics<512, true>, 512, true, false, "t512 1/thread clear");
  }
  }

  /* ---- l2fit ---- */
  if (section("l2fit")) {
  printf("\n== l2fit: 16M bins, n = %zu; GB/s\n", nmax);
  static const char *lvars[] = {"hist_global_t512_a0_m1_l1_u2", "hist_global_t256_a0_m1_l1_u2",
                                "hist_global_t512_a1_m0_l1_u2", "hist_global_t512_a0_m1_l0_u2"};
  for (int dist = 0; dist < 3; ++dist) {
    const int nbins = 1 << 24;
    const std::vector<unsigned> ref = input(nmax, nbins, dist);
    printf("%-8s plain %.0f", kDist[dist], 4.0 * nmax / time_ms(plain(nmax, nbins)) / 1e6);
    for (const char *g : lvars) {
      double t;
      if (variant(g, nmax, nbins, &t)) {
        printf(" | %s %.0f", g + 12, 4.0 * nmax / t / 1e6);
        check(g, ref, nbins);
      }
    }
    printf("\n");
  }
  }

  /* ---- partition ---- */
  if (section("partition")) {
  printf("\n== partition prototype: n = %zu, W bins a bucket; ms per phase, GB/s of the whole, x plain\n", nmax);
  uint16_t *dpart;
  unsigned long long *dcount, *dcursor, *dstart;
  BENCH_CUDA(cudaMalloc(&dpart, nmax * sizeof(uint16_t)));
  BENCH_CUDA(cudaMalloc(&dcount, MAXB * sizeof(unsigned long long)));
  BENCH_CUDA(cudaMalloc(&dcursor, MAXB * sizeof(unsigned long long)));
  BENCH_CUDA(cudaMalloc(&dstart, (MAXB + 1) * sizeof(unsigned long long)));
  const int W = 53248; // 208 KB of 32-bit counters: one block an SM
  BENCH_CUDA(cudaFuncSetAttribute(part_hist, cudaFuncAttributeMaxDynamicSharedMemorySize, W * 4));
  for (int dist = 0; dist < 2; ++dist)
    for (int nbins : {1 << 20, 1 << 22, 1 << 24}) {
      const int nb = (nbins + W - 1) / W;
      if (nb > MAXB)
        continue;
      const std::vector<unsigned> ref = input(nmax, nbins, dist);
      const size_t nvec = nmax / 4;
      const int hist_blocks = sms;
      const size_t per = (nmax + hist_blocks - 1) / hist_blocks;
      auto c1 = [&]() -> int {
        cudaMemsetAsync(dcount, 0, nb * sizeof(unsigned long long), 0);
        part_count<<<sms * 2, PT>>>((const int4 *)ds, nvec, nbins, W, nb, dcount);
        part_scan<<<1, 32>>>(dcount, nb, dcursor, dstart);
        return (int)cudaGetLastError();
      };
      auto c2 = [&]() -> int {
        part_scan<<<1, 32>>>(dcount, nb, dcursor, dstart);
        part_scatter<<<sms * 2, PT>>>((const int4 *)ds, nvec, nbins, W, nb, dcursor, dpart);
        return (int)cudaGetLastError();
      };
      auto c3 = [&]() -> int {
        cudaMemsetAsync(db, 0, (size_t)nbins * sizeof(unsigned), 0);
        part_hist<<<hist_blocks, PT, W * 4>>>(dpart, nmax, per, nbins, W, nb, dstart, db);
        return (int)cudaGetLastError();
      };
      auto all = [&]() -> int {
        int e = c1();
        if (!e)
          e = c2();
        if (!e)
          e = c3();
        return e;
      };
      const double t1 = time_ms(c1), t2 = time_ms(c2), t3 = time_ms(c3), ta = time_ms(all);
      check("partition", ref, nbins);
      const double tp = time_ms(plain(nmax, nbins));
      printf("%-8s %9d bins, %4d buckets: count %.3f, scatter %.3f, hist %.3f; all %.3f ms = %.0f GB/s, %.2fx plain "
             "(%.0f GB/s)\n",
             kDist[dist], nbins, nb, t1, t2, t3, ta, 4.0 * nmax / ta / 1e6, tp / ta, 4.0 * nmax / tp / 1e6);
    }
  }

  /* ---- part: the library's partition kernel (hist_part_*) ---- */
  if (section("part")) {
    printf("\n== part: hist_part_* through its launcher (workspace from the device's pool), n = %zu; GB/s, "
           "x plain (memset + plain atomics)\n",
           nmax);
    static const char *pvars[] = {"hist_part_t1024_u2", "hist_part_t1024_u4", "hist_part_t512_u2", "hist_part_t512_u4",
                                  "hist_global_t512_a1_m2_l1_u2"};
    void *pool = kt_device_pool(d.info.ordinal);
    printf("%-8s %9s %7s", "dist", "bins", "plain");
    for (const char *g : pvars)
      printf(" %22s", g + 5);
    printf(" %14s\n", "t1024_u2 nopool");
    for (int dist : {0, 3, 1, 2, 4})
      for (int nbins : {1 << 20, 1 << 22, 1 << 24}) {
        const std::vector<unsigned> ref = input(nmax, nbins, dist);
        const double tp = time_ms(plain(nmax, nbins));
        printf("%-8s %9d %7.0f", kDist[dist], nbins, 4.0 * nmax / tp / 1e6);
        for (const char *g : pvars) {
          const kt_variant *v = kt_registry_find(g, &d.info);
          if (!v) {
            printf(" %22s", "-");
            continue;
          }
          kt_hist_args a = {ds, nmax, db, nbins, d.info.sm_count, d.info.smem_per_sm, d.info.smem_optin, pool};
          BENCH_CUDA(cudaMemset(db, 0xab, (size_t)nbins * sizeof(unsigned)));
          const double t = time_ms([&]() -> int { return v->launch(&a, 0); });
          check(g, ref, nbins);
          printf(" %14.0f (%4.2fx)", 4.0 * nmax / t / 1e6, tp / t);
        }
        {
          const kt_variant *v = kt_registry_find(pvars[0], &d.info);
          kt_hist_args a = {ds, nmax, db, nbins, d.info.sm_count, d.info.smem_per_sm, d.info.smem_optin, nullptr};
          const double t = v ? time_ms([&]() -> int { return v->launch(&a, 0); }) : NAN;
          printf(" %8.0f (%4.2fx)", 4.0 * nmax / t / 1e6, tp / t);
        }
        printf("\n");
        fflush(stdout);
      }
  }
  printf("\n%s\n", bad_total ? "SOME COUNTS WRONG" : "all counts equal plain atomics");
  return bad_total ? 1 : 0;
}
