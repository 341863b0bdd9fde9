/* SPDX-License-Identifier: MIT */
/* bench/bench_hist.cu: ktune's histogram against CUB, global atomics and the
 * seed kernel, with the device's read bandwidth as the roofline.
 *
 *   make build/bench_hist
 *   ./build/bench_hist --db tuning-db/ktune.db --out bench/results [--quick]
 *
 * n = 2^28 int32 samples (--quick: 2^24), for every bin count and input
 * distribution below.  The samples come from kt_tune_hist_samples on the
 * host (about 1 in 512 lies outside [0, nbins)) and are copied to the GPU
 * once per case.  Methods, each timed with its zeroing of the bins:
 *   ktune   kt_histogram through a context on --db: the dispatched winner
 *   CUB     cub::DeviceHistogram::HistogramEven, levels 0..nbins
 *   global  one global atomicAdd per sample (grid-stride), after a memset
 *   seed    the CUDA Programming Guide's clusterHist_kernel (distributed
 *           shared memory), for cluster sizes 1, 2, 4, 8, 16; the best is
 *           reported
 * ktune's counts must equal the CPU reference exactly.  CUB drops samples
 * outside [lower, upper) where ktune, global and the seed clamp them into
 * the first and last bin, so CUB is checked against the reference less the
 * out-of-range samples.
 *
 * GB/s is input bytes (4 n) over the median time.  Writes OUT/hist.csv,
 * OUT/hist.gp and, with gnuplot on PATH, OUT/hist.png.
 */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include <cooperative_groups.h>
#include <cub/device/device_histogram.cuh>
#include <cuda_runtime.h>

#include "bench_common.h"
#include "hist.h"

static const long long kBins[] = {256, 4096, 65536, 262144, 1048576};
static const char *const kDists[] = {"uniform", "skewed"};
static const int kClusters[] = {1, 2, 4, 8, 16};
static const int kSeedThreads = 256; /* the Guide leaves threads_per_block open */

/* ---- kernels ------------------------------------------------------------ */

/* Read every sample once with 16-byte loads and fold them into one value,
 * so the loads cannot be optimized away: the bandwidth a histogram, which
 * must read each sample once, is bounded by.  Four independent loads per
 * iteration keep enough bytes in flight. */
__global__ void read_all(const int4 *p, size_t n4, const int *tail, int ntail, unsigned *out)
{
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n4; i += 4 * stride) {
    const int4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
    acc ^= (unsigned)(a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w);
    acc ^= (unsigned)(c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w);
  }
  for (; i < n4; i += stride) {
    const int4 a = p[i];
    acc ^= (unsigned)(a.x ^ a.y ^ a.z ^ a.w);
  }
  if (blockIdx.x == 0 && threadIdx.x < ntail)
    acc ^= (unsigned)tail[threadIdx.x];
  for (int off = 16; off > 0; off >>= 1)
    acc ^= __shfl_down_sync(0xffffffffu, acc, off);
  if ((threadIdx.x & 31) == 0)
    atomicXor(out, acc);
}

/* The plain baseline: one global atomic per sample, clamped like ktune. */
__global__ void global_atomic_hist(const int *samples, size_t n, unsigned *bins, int nbins)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const int s = samples[i];
    atomicAdd(&bins[s < 0 ? 0 : s >= nbins ? nbins - 1 : s], 1u);
  }
}

/* The seed: the CUDA C++ Programming Guide's distributed-shared-memory
 * histogram ("Distributed Shared Memory"), as written there.  One thread per
 * sample; the cluster's blocks split the bins contiguously, each holding
 * bins_per_block of them in shared memory, and every thread adds its sample
 * to whichever block of its cluster owns the bin.  At the end each block
 * adds all of its bins to the global histogram, which must be zeroed first.
 * Clusters need sm_90; built for an older target the kernel is empty and
 * the benchmark does not run it. */
namespace cg = cooperative_groups;

__global__ void clusterHist_kernel(int *bins, const int nbins, const int bins_per_block, const int *__restrict__ input,
                                   size_t array_size)
{
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  extern __shared__ int smem[];
  int tid = cg::this_grid().thread_rank();

  // Cluster initialization, size and calculating local bin offsets.
  cg::cluster_group cluster = cg::this_cluster();
  unsigned int clusterBlockRank = cluster.block_rank();
  int cluster_size = cluster.dim_blocks().x;
  (void)clusterBlockRank;
  (void)cluster_size;

  for (int i = threadIdx.x; i < bins_per_block; i += blockDim.x) {
    smem[i] = 0; // Initialize shared memory histogram to zeros
  }

  // cluster synchronization ensures that shared memory is initialized to zero in
  // all thread blocks in the cluster. It also ensures that all thread blocks
  // have started executing and they exist concurrently.
  cluster.sync();

  for (int i = tid; i < array_size; i += blockDim.x * gridDim.x) {
    int ldata = input[i];

    // Find the right histogram bin.
    int binid = ldata;
    if (ldata < 0)
      binid = 0;
    else if (ldata >= nbins)
      binid = nbins - 1;

    // Find destination block rank and offset for computing
    // distributed shared memory histogram
    int dst_block_rank = (int)(binid / bins_per_block);
    int dst_offset = binid % bins_per_block;

    // Pointer to target block shared memory
    int *dst_smem = cluster.map_shared_rank(smem, dst_block_rank);

    // Perform atomic update of the histogram bin
    atomicAdd(dst_smem + dst_offset, 1);
  }

  // cluster synchronization is required to ensure all distributed shared
  // memory operations are completed and no thread block exits while
  // other thread blocks are still accessing distributed shared memory
  cluster.sync();

  // Perform global memory histogram, using the local distributed memory histogram
  int *lbins = bins + cluster.block_rank() * bins_per_block;
  for (int i = threadIdx.x; i < bins_per_block; i += blockDim.x) {
    atomicAdd(&lbins[i], smem[i]);
  }
#endif
}

/* The Guide's launch: cudaLaunchKernelEx with a cluster dimension and
 * bins_per_block ints of dynamic shared memory per block.  The Guide's grid
 * is array_size / threads_per_block; here it is rounded up (and up to a
 * whole number of clusters), which is the same for n = 2^28 or 2^24. */
static cudaLaunchConfig_t seed_config(size_t n, int nbins, int cluster_size, cudaLaunchAttribute *attr)
{
  size_t blocks = (n + kSeedThreads - 1) / kSeedThreads;
  blocks = (blocks + cluster_size - 1) / cluster_size * cluster_size;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3((unsigned)blocks);
  config.blockDim = dim3(kSeedThreads);
  config.dynamicSmemBytes = (size_t)(nbins / cluster_size) * sizeof(int);
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster_size;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  config.numAttrs = 1;
  config.attrs = attr;
  return config;
}

/* Why the seed cannot run with this cluster size, or "" when it can.
 * Sets the kernel's dynamic shared memory limit as a side effect. */
static std::string seed_fit(const bench_device &d, size_t n, int nbins, int cluster_size)
{
  if (!d.info.cluster_launch || d.info.cc < 90)
    return "needs clusters (sm_90)";
  if (nbins % cluster_size)
    return "bins do not split evenly";
  const long long smem = (long long)(nbins / cluster_size) * (long long)sizeof(int);
  if (smem > d.info.smem_optin)
    return "does not fit";
  BENCH_CUDA(
      cudaFuncSetAttribute((const void *)clusterHist_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  cudaLaunchAttribute attr[1];
  cudaLaunchConfig_t config = seed_config(n, nbins, cluster_size, attr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, (const void *)clusterHist_kernel, &config) != cudaSuccess ||
      clusters == 0) {
    cudaGetLastError();
    return "does not fit"; /* the cluster's blocks cannot be resident together */
  }
  return "";
}

/* ---- checks ----------------------------------------------------------- */

/* Bins where got differs from want; the first one is described in why. */
static long long mismatches(const unsigned *got, const unsigned *want, long long nbins, std::string *why)
{
  long long bad = 0;
  for (long long b = 0; b < nbins; ++b)
    if (got[b] != want[b]) {
      if (!bad) {
        char buf[160];
        snprintf(buf, sizeof buf, "first at bin %lld: %u, want %u", b, got[b], want[b]);
        *why = buf;
      }
      ++bad;
    }
  return bad;
}

/* Copy nbins counts back and compare; "" when exact. */
static std::string check_bins(const unsigned *d_bins, const std::vector<unsigned> &want, long long nbins,
                              std::vector<unsigned> &got)
{
  BENCH_CUDA(cudaMemcpy(got.data(), d_bins, (size_t)nbins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  std::string why;
  const long long bad = mismatches(got.data(), want.data(), nbins, &why);
  if (!bad)
    return "";
  char buf[256];
  snprintf(buf, sizeof buf, "%lld wrong bins (%s)", bad, why.c_str());
  return buf;
}

/* ---- the plot ---------------------------------------------------------- */

static void plot(const bench_options &o, const bench_device &d, unsigned long long n)
{
  std::string s = bench_gnuplot_preamble("hist", 1500, 600);
  char buf[256];
  snprintf(buf, sizeof buf, "set multiplot layout 1,2 title \"int32 histogram, n = 2^%d, %s\"\n",
           (int)std::log2((double)n), bench_gnuplot_escape(d.line).c_str());
  s += buf;
  s += "set logscale x 2\n"
       "set logscale y 10\n"
       "set xlabel \"bins\"\n"
       "set ylabel \"GB/s of input read (higher is better)\"\n"
       "set grid xtics ytics mxtics mytics\n"
       "set key below horizontal height 1.5\n";
  s += "set xtics (";
  for (size_t i = 0; i < std::size(kBins); ++i) {
    snprintf(buf, sizeof buf, "%s\"%lld\" %lld", i ? ", " : "", kBins[i], kBins[i]);
    s += buf;
  }
  s += ")\n";
  s += "set xrange [" + std::to_string(kBins[0] / 2) + ":" + std::to_string(kBins[std::size(kBins) - 1] * 2) + "]\n";
  /* Columns: 1 dist, 2 nbins, 4 ktune, 5 CUB, 6 global, 7 seed, 9 read. */
  for (const char *dist : kDists) {
    const std::string sel = std::string("(strcol(1) eq \"") + dist + "\" ? column(%d) : NaN)";
    auto col = [&](int c) {
      snprintf(buf, sizeof buf, sel.c_str(), c);
      return std::string(buf);
    };
    s += std::string("set title \"") + dist + "\"\n";
    s += "plot \"hist.csv\" skip 1 using 2:" + col(9) +
         " with lines dt 2 lw 2 lc rgb \"#666666\" title \"read bandwidth\", \\\n";
    s += "     \"\" skip 1 using 2:" + col(4) + " with linespoints lw 2 pt 7 lc rgb \"#1b9e77\" title \"ktune\", \\\n";
    s += "     \"\" skip 1 using 2:" + col(5) +
         " with linespoints pt 5 lc rgb \"#7570b3\" title \"CUB (drops out-of-range)\", \\\n";
    s += "     \"\" skip 1 using 2:" + col(6) +
         " with linespoints pt 9 lc rgb \"#e7298a\" title \"global atomics\", \\\n";
    s += "     \"\" skip 1 using 2:" + col(7) +
         " with linespoints pt 11 lc rgb \"#d95f02\" title \"seed (best cluster)\"\n";
  }
  s += "unset multiplot\n";
  bench_plot(o.out, "hist", s);
}

/* ---- main ---------------------------------------------------------------- */

static double gbps(unsigned long long n, double ms)
{
  return 4.0 * (double)n / (ms * 1e-3) / 1e9;
}

int main(int argc, char **argv)
{
  const bench_options o = bench_parse_args(argc, argv, "ktune histogram against CUB, global atomics and the seed.");
  bench_mkdirs(o.out);
  const bench_device d = bench_device_open();
  kt_context *ctx = bench_open_ktune(o);
  const bench_flush flush = bench_flush_alloc(d);
  const bench_reps reps = o.quick ? bench_reps{3, 10, 100.0} : bench_reps{5, 30, 500.0};
  /* The seed can take seconds a run at many bins: fewer repetitions. */
  const bench_reps seed_reps = o.quick ? bench_reps{2, 5, 100.0} : bench_reps{3, 20, 300.0};
  const unsigned long long n = o.quick ? 1ull << 24 : 1ull << 28;
  const long long max_bins = *std::max_element(std::begin(kBins), std::end(kBins));

  int *h_samples;
  BENCH_CUDA(cudaMallocHost(&h_samples, n * sizeof(int)));
  int *d_samples;
  unsigned *d_bins, *d_word;
  BENCH_CUDA(cudaMalloc(&d_samples, n * sizeof(int)));
  BENCH_CUDA(cudaMalloc(&d_bins, (size_t)max_bins * sizeof(unsigned)));
  BENCH_CUDA(cudaMalloc(&d_word, sizeof(unsigned)));
  std::vector<unsigned> ref(max_bins), got(max_bins), ref_cub(max_bins);

  /* Per-launch geometry of the baselines: enough resident threads to fill
   * every SM once. */
  const int blocks_full = d.info.sm_count * std::max(1, d.info.max_threads_per_sm / 256);
  BENCH_CUDA(cudaFuncSetAttribute((const void *)clusterHist_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));

  /* ---- the roofline ---- */
  BENCH_CUDA(cudaMemset(d_samples, 0x5a, n * sizeof(int)));
  auto run_read = [&]() -> int {
    read_all<<<blocks_full, 256>>>((const int4 *)d_samples, n / 4, d_samples + n / 4 * 4, (int)(n % 4), d_word);
    return (int)cudaGetLastError();
  };
  const bench_time_result t_read = bench_time(run_read, flush, reps);
  if (!t_read.ok) {
    fprintf(stderr, "read bandwidth kernel: %s\n", t_read.err.c_str());
    return 1;
  }
  const double read_gbps = gbps(n, t_read.ms);
  printf("read bandwidth: %.1f GB/s (%llu MiB read with int4 loads, median of %d runs): the roofline\n", read_gbps,
         n * 4 >> 20, t_read.reps);
  printf("n = %llu samples (2^%d), about 1 in 512 outside [0, nbins)\n", n, (int)std::log2((double)n));
  printf("CUB drops samples outside [0, nbins); ktune, global atomics and the seed clamp them into the first\n"
         "and last bins. CUB's counts are checked against the reference less those samples.\n");
  printf("seed: clusterHist_kernel, %d threads a block, one thread per sample, cluster sizes 1..16; \"does not\n"
         "fit\" when nbins/cluster*4 B exceeds %d B of shared memory or the cluster cannot be resident\n",
         kSeedThreads, d.info.smem_optin);
  printf("ktune/read: ktune's GB/s over the read bandwidth; ktune/best bl: over max(CUB, global atomics)\n");
  printf("timing: median after a warm-up, CUDA events, %zu MiB L2 flush before each run; each method's time\n"
         "includes zeroing its bins\n\n",
         flush.bytes >> 20);

  printf("%-8s %8s %8s %8s %8s %8s %-6s %7s %7s %-7s %s\n", "dist", "bins", "ktune", "CUB", "global", "seed", "seed",
         "ktune/", "ktune/", "status", "ktune dispatched to");
  printf("%-8s %8s %8s %8s %8s %8s %-6s %7s %7s\n", "", "", "GB/s", "GB/s", "GB/s", "GB/s", "best c", "read",
         "best bl");

  bench_csv csv(o.out + "/hist.csv",
                "dist,nbins,n,ktune_gbps,cub_gbps,global_gbps,seed_gbps,seed_cluster,read_gbps,ktune_over_read,"
                "ktune_over_best_baseline,seed_c1_gbps,seed_c2_gbps,seed_c4_gbps,seed_c8_gbps,seed_c16_gbps,"
                "variant,tuned,status,notes");

  void *d_temp = nullptr;
  size_t temp_bytes = 0;
  kt_rng rng = {0x6b74756e68697374ull};
  std::vector<double> ratios;
  int failed = 0;

  for (const char *dist : kDists) {
    for (long long nbins : kBins) {
      const int nb = (int)nbins;
      kt_tune_hist_samples(h_samples, n, nbins, dist, &rng);
      kt_tune_hist_reference(h_samples, n, nbins, ref.data());
      unsigned long long below = 0, above = 0;
      for (unsigned long long i = 0; i < n; ++i) {
        below += h_samples[i] < 0;
        above += h_samples[i] >= nbins;
      }
      std::copy(ref.begin(), ref.begin() + nbins, ref_cub.begin());
      ref_cub[0] -= (unsigned)below;
      ref_cub[nbins - 1] -= (unsigned)above;
      BENCH_CUDA(cudaMemcpy(d_samples, h_samples, n * sizeof(int), cudaMemcpyHostToDevice));

      std::vector<std::string> notes;

      /* (a) ktune */
      kt_choice choice = {};
      int rc = kt_histogram_choice(ctx, d_samples, n, d_bins, nbins, &choice);
      if (rc != KT_OK)
        snprintf(choice.variant, sizeof choice.variant, "(%s)", kt_strerror(rc));
      auto run_ktune = [&]() -> int {
        int r = kt_histogram(ctx, d_samples, n, d_bins, nbins, 0);
        return r == KT_OK ? 0 : bench_fail("kt_histogram: %s", kt_strerror(r));
      };
      const bench_time_result t_kt = bench_time(run_ktune, flush, reps);
      std::string kt_wrong = t_kt.ok ? check_bins(d_bins, ref, nbins, got) : t_kt.err;
      const bool ok = t_kt.ok && kt_wrong.empty();

      /* (b) CUB, temporary storage sized and allocated outside the timing */
      size_t need = 0;
      BENCH_CUDA(cub::DeviceHistogram::HistogramEven(nullptr, need, d_samples, d_bins, nb + 1, 0, nb, (int)n));
      if (need > temp_bytes) {
        cudaFree(d_temp);
        BENCH_CUDA(cudaMalloc(&d_temp, need));
        temp_bytes = need;
      }
      auto run_cub = [&]() -> int {
        size_t bytes = temp_bytes;
        return (int)cub::DeviceHistogram::HistogramEven(d_temp, bytes, d_samples, d_bins, nb + 1, 0, nb, (int)n);
      };
      const bench_time_result t_cub = bench_time(run_cub, flush, reps);
      if (!t_cub.ok)
        notes.push_back("CUB failed: " + t_cub.err);
      else if (std::string w = check_bins(d_bins, ref_cub, nbins, got); !w.empty())
        notes.push_back("CUB counts: " + w);

      /* (c) global atomics */
      auto run_global = [&]() -> int {
        cudaError_t e = cudaMemsetAsync(d_bins, 0, (size_t)nbins * sizeof(unsigned), 0);
        if (e != cudaSuccess)
          return (int)e;
        global_atomic_hist<<<blocks_full, 256>>>(d_samples, n, d_bins, nb);
        return (int)cudaGetLastError();
      };
      const bench_time_result t_gl = bench_time(run_global, flush, reps);
      if (!t_gl.ok)
        notes.push_back("global atomics failed: " + t_gl.err);
      else if (std::string w = check_bins(d_bins, ref, nbins, got); !w.empty())
        notes.push_back("global atomics counts: " + w);

      /* (d) the seed, every cluster size that fits */
      double seed_by_c[std::size(kClusters)];
      double seed_best = NAN;
      int seed_best_c = 0;
      std::string seed_why;
      for (size_t ci = 0; ci < std::size(kClusters); ++ci) {
        const int c = kClusters[ci];
        seed_by_c[ci] = NAN;
        const std::string why = seed_fit(d, n, nb, c);
        if (!why.empty()) {
          seed_why = why;
          continue;
        }
        auto run_seed = [&]() -> int {
          cudaError_t e = cudaMemsetAsync(d_bins, 0, (size_t)nbins * sizeof(unsigned), 0);
          if (e != cudaSuccess)
            return (int)e;
          cudaLaunchAttribute attr[1];
          cudaLaunchConfig_t config = seed_config(n, nb, c, attr);
          return (int)cudaLaunchKernelEx(&config, clusterHist_kernel, (int *)d_bins, nb, nb / c, (const int *)d_samples,
                                         (size_t)n);
        };
        const bench_time_result t_sd = bench_time(run_seed, flush, seed_reps);
        if (!t_sd.ok) {
          notes.push_back("seed c" + std::to_string(c) + " failed: " + t_sd.err);
          continue;
        }
        if (std::string w = check_bins(d_bins, ref, nbins, got); !w.empty()) {
          notes.push_back("seed c" + std::to_string(c) + " counts: " + w);
          continue;
        }
        seed_by_c[ci] = gbps(n, t_sd.ms);
        if (!(seed_by_c[ci] <= seed_best)) {
          seed_best = seed_by_c[ci];
          seed_best_c = c;
        }
      }

      const double g_kt = t_kt.ok ? gbps(n, t_kt.ms) : NAN;
      const double g_cub = t_cub.ok ? gbps(n, t_cub.ms) : NAN;
      const double g_gl = t_gl.ok ? gbps(n, t_gl.ms) : NAN;
      const double best_baseline = std::isnan(g_cub) ? g_gl : std::isnan(g_gl) ? g_cub : std::max(g_cub, g_gl);
      const double over_read = g_kt / read_gbps, over_base = g_kt / best_baseline;
      if (ok && !std::isnan(over_base))
        ratios.push_back(over_base);
      if (!ok)
        ++failed;

      char seed_col[32], seed_c[16];
      if (seed_best_c) {
        snprintf(seed_col, sizeof seed_col, "%8.1f", seed_best);
        snprintf(seed_c, sizeof seed_c, "c=%d", seed_best_c);
      } else {
        snprintf(seed_col, sizeof seed_col, "%8s", "-");
        snprintf(seed_c, sizeof seed_c, "%s", seed_why == "does not fit" ? "nofit" : "-");
      }
      std::string via = choice.variant;
      via += choice.tuned ? std::string(" (tuned at ") + choice.matched + ")" : std::string(" (untuned default)");
      printf("%-8s %8lld %8.1f %8.1f %8.1f %s %-6s %7.3f %7.3f %-7s %s\n", dist, nbins, g_kt, g_cub, g_gl, seed_col,
             seed_c, over_read, over_base, ok ? "ok" : "FAILED", via.c_str());
      std::string by_c = "  seed by cluster size:";
      for (size_t ci = 0; ci < std::size(kClusters); ++ci) {
        char b[48];
        if (std::isnan(seed_by_c[ci]))
          snprintf(b, sizeof b, "  c%d -", kClusters[ci]);
        else
          snprintf(b, sizeof b, "  c%d %.1f", kClusters[ci], seed_by_c[ci]);
        by_c += b;
      }
      if (!seed_best_c && !seed_why.empty())
        by_c += "  (" + seed_why + " for every cluster size)";
      printf("%s GB/s\n", by_c.c_str());
      if (!ok)
        printf("  ktune FAILED: %s\n", kt_wrong.c_str());
      for (const std::string &note : notes)
        printf("  note: %s\n", note.c_str());
      fflush(stdout);

      std::string note_field;
      for (const std::string &note : notes)
        note_field += (note_field.empty() ? "" : "; ") + note;
      if (!ok)
        note_field = "ktune: " + kt_wrong + (note_field.empty() ? "" : "; " + note_field);
      std::replace(note_field.begin(), note_field.end(), ',', ';');
      csv.row("%s,%lld,%llu,%.3f,%.3f,%.3f,%.3f,%d,%.3f,%.4f,%.4f,%.3f,%.3f,%.3f,%.3f,%.3f,%s,%d,%s,%s", dist, nbins, n,
              g_kt, g_cub, g_gl, seed_best, seed_best_c, read_gbps, over_read, over_base, seed_by_c[0], seed_by_c[1],
              seed_by_c[2], seed_by_c[3], seed_by_c[4], choice.variant, choice.tuned, ok ? "ok" : "FAILED",
              note_field.c_str());
    }
  }

  printf("\ngeometric mean of ktune / max(CUB, global atomics) over %zu cases: %.3f", ratios.size(),
         bench_geomean(ratios));
  if (failed)
    printf("  (%d FAILED case%s left out)", failed, failed > 1 ? "s" : "");
  printf("\ncsv: %s/hist.csv\n", o.out.c_str());
  plot(o, d, n);

  cudaFree(d_temp);
  cudaFree(d_word);
  cudaFree(d_bins);
  cudaFree(d_samples);
  cudaFreeHost(h_samples);
  cudaFree(flush.p);
  kt_close(ctx);
  return failed ? 1 : 0;
}
