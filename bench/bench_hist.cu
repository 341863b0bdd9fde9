/* SPDX-License-Identifier: MIT */
/* bench/bench_hist.cu: ktune's histogram against CUB and global atomics over
 * a grid of distributions and bin counts, with the device's read bandwidth
 * as the roofline.
 *
 *   make build/bench_hist
 *   ./build/bench_hist --db tuning-db/ktune.db --out bench/results [--quick]
 *
 * The grid: n = 2^28 int32 samples (--quick: 2^24) for every distribution of
 * kt_tune_hist_samples (uniform, skewed 80/1, sorted, normal with deviation
 * nbins / 50, all in one bin, half outside [0, nbins); tuner/hist.h) and
 * every bin count of kBins; then one extra row, uniform at n = 2^20.  The
 * samples are made on the host (in parallel) and copied to the GPU once per
 * cell.  Methods, each timed with its zeroing of the bins:
 *   ktune   kt_histogram through a context on --db: the dispatched winner
 *   CUB     cub::DeviceHistogram::HistogramEven, levels 0..nbins
 *   global  one global atomicAdd per sample (grid-stride), after a memset
 * ktune's and global's counts must equal the CPU count exactly, in every
 * cell.  CUB drops samples outside [lower, upper) where ktune and global
 * clamp them into the first and last bin, so CUB is checked against the
 * count less the out-of-range samples.
 *
 * GB/s is input bytes (4 n) over the median time.  Writes OUT/hist.csv (one
 * row per cell), OUT/hist_heat.csv and OUT/hist.gp (a heat map of ktune /
 * max(CUB, global)) and, with gnuplot on PATH, OUT/hist.png.  Ends with the
 * targets of issue 12, each with the cell that limits it.
 */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <cub/device/device_histogram.cuh>
#include <cuda_runtime.h>

#include "bench_common.h"
#include "hist.h"

static const long long kBins[] = {1, 3, 256, 1000, 4096, 65536, 100000, 262144, 1 << 20, 1 << 22, 1 << 24};
enum { NBINS = sizeof kBins / sizeof kBins[0] };
/* CUB privatises huge bin counts in global memory, per block: past this
 * much temporary storage it is not run (the cell says so). */
static const size_t kCubMaxTemp = 8ull << 30;

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

/* ---- the inputs, on the host's cores ------------------------------------ */

static unsigned host_threads(void)
{
  const unsigned t = std::thread::hardware_concurrency();
  return t < 1 ? 1 : t > 16 ? 16 : t;
}

/* Samples of dist: chunks made in parallel, each from its own generator
 * (sorted: uniform chunks, then one counting sort of the whole). */
static void make_samples(int *s, size_t n, long long nbins, const char *dist, uint64_t seed)
{
  const bool sorted = strcmp(dist, "sorted") == 0;
  const unsigned T = host_threads();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < T; ++t)
    pool.emplace_back([=] {
      const size_t lo = n * t / T, hi = n * (t + 1) / T;
      kt_rng r = {seed ^ (0x9e3779b97f4a7c15ull * (t + 1))};
      kt_tune_hist_samples(s + lo, hi - lo, nbins, sorted ? "uniform" : dist, &r);
    });
  for (std::thread &th : pool)
    th.join();
  if (sorted && kt_tune_hist_sort(s, n, nbins) != 0) {
    fprintf(stderr, "out of host memory sorting the samples\n");
    exit(1);
  }
}

/* The exact CPU count, with the library's clamping, in parallel: one
 * partial count per thread, then summed by ranges of bins.  *below and
 * *above: the samples outside [0, nbins). */
static void cpu_count(const int *s, size_t n, long long nbins, std::vector<unsigned> &ref,
                      std::vector<unsigned> &partial, unsigned long long *below, unsigned long long *above)
{
  const unsigned T = host_threads();
  partial.assign((size_t)T * nbins, 0u);
  std::vector<unsigned long long> lows(T), highs(T);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < T; ++t)
    pool.emplace_back([&, t] {
      const size_t lo = n * t / T, hi = n * (t + 1) / T;
      unsigned *p = partial.data() + (size_t)t * nbins;
      unsigned long long l = 0, h = 0;
      for (size_t i = lo; i < hi; ++i) {
        const int x = s[i];
        l += x < 0;
        h += x >= nbins;
        p[x < 0 ? 0 : x >= nbins ? nbins - 1 : x]++;
      }
      lows[t] = l, highs[t] = h;
    });
  for (std::thread &th : pool)
    th.join();
  pool.clear();
  for (unsigned t = 0; t < T; ++t)
    pool.emplace_back([&, t] {
      const long long lo = nbins * t / T, hi = nbins * (t + 1) / T;
      for (long long b = lo; b < hi; ++b) {
        unsigned c = 0;
        for (unsigned k = 0; k < T; ++k)
          c += partial[(size_t)k * nbins + b];
        ref[b] = c;
      }
    });
  for (std::thread &th : pool)
    th.join();
  *below = *above = 0;
  for (unsigned t = 0; t < T; ++t)
    *below += lows[t], *above += highs[t];
}

/* ---- checks ----------------------------------------------------------- */

/* Copy nbins counts back and compare; "" when exact. */
static std::string check_bins(const unsigned *d_bins, const std::vector<unsigned> &want, long long nbins,
                              std::vector<unsigned> &got)
{
  BENCH_CUDA(cudaMemcpy(got.data(), d_bins, (size_t)nbins * sizeof(unsigned), cudaMemcpyDeviceToHost));
  long long bad = 0, first = -1;
  for (long long b = 0; b < nbins; ++b)
    if (got[b] != want[b]) {
      if (first < 0)
        first = b;
      ++bad;
    }
  if (!bad)
    return "";
  char buf[256];
  snprintf(buf, sizeof buf, "%lld wrong bins (first at bin %lld: %u, want %u)", bad, first, got[first], want[first]);
  return buf;
}

/* ---- one cell ------------------------------------------------------------- */

struct cell {
  std::string row; /* the distribution, and n when it is not the grid's */
  long long nbins = 0;
  unsigned long long n = 0;
  double kt = NAN, cub = NAN, gl = NAN, read = NAN;
  bool ok = false;
  std::string variant;

  double best_peer() const { return std::isnan(cub) ? gl : std::isnan(gl) ? cub : std::max(cub, gl); }
  double over_peer() const { return kt / best_peer(); }
  double over_read() const { return kt / read; }
  const char *winner() const
  {
    const double p = best_peer();
    if (!(kt >= p))
      return std::isnan(cub) || gl >= cub ? "global" : "CUB";
    return "ktune";
  }
};

static double gbps(unsigned long long n, double ms)
{
  return 4.0 * (double)n / (ms * 1e-3) / 1e9;
}

/* ---- the plot ---------------------------------------------------------- */

/* A heat map: one row per distribution, one column per bin count, colour
 * log2(ktune / best peer), the ratio written in each cell. */
static void plot(const bench_options &o, const bench_device &d, const std::vector<std::string> &rows)
{
  std::string s = bench_gnuplot_preamble("hist", 1400, 160 + 60 * (int)rows.size());
  char buf[512];
  snprintf(buf, sizeof buf, "set title \"int32 histogram: ktune / max(CUB, global atomics), %s\"\n",
           bench_gnuplot_escape(d.line).c_str());
  s += buf;
  s += "set xlabel \"bins\"\n"
       "unset key\n"
       "set cbrange [-2:4]\n"
       "set cblabel \"log2(ktune / best peer)\"\n"
       "set palette defined (-2 \"#b2182b\", 0 \"#f7f7f7\", 4 \"#1b7837\")\n";
  s += "set xtics (";
  for (int i = 0; i < NBINS; ++i) {
    snprintf(buf, sizeof buf, "%s\"%lld\" %d", i ? ", " : "", kBins[i], i);
    s += buf;
  }
  s += ")\nset ytics (";
  for (size_t i = 0; i < rows.size(); ++i) {
    snprintf(buf, sizeof buf, "%s\"%s\" %zu", i ? ", " : "", bench_gnuplot_escape(rows[i]).c_str(), i);
    s += buf;
  }
  s += ")\n";
  snprintf(buf, sizeof buf, "set xrange [-0.5:%d.5]\nset yrange [%zu.5:-0.5]\n", NBINS - 1, rows.size() - 1);
  s += buf;
  /* hist_heat.csv columns: 1 column index, 2 row index, 3 ratio. */
  s += "plot \"hist_heat.csv\" skip 1 using 1:2:(log($3)/log(2)) with image, \\\n"
       "     \"\" skip 1 using 1:2:(sprintf(\"%.2f\", $3)) with labels\n";
  bench_plot(o.out, "hist", s);
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv)
{
  const bench_options o = bench_parse_args(argc, argv, "ktune histogram against CUB and global atomics.");
  bench_mkdirs(o.out);
  const bench_device d = bench_device_open();
  kt_context *ctx = bench_open_ktune(o);
  const bench_flush flush = bench_flush_alloc(d);
  const bench_reps reps = o.quick ? bench_reps{2, 5, 30.0} : bench_reps{3, 10, 60.0};
  const unsigned long long n_grid = o.quick ? 1ull << 24 : 1ull << 28, n_extra = 1ull << 20;
  const long long max_bins = kBins[NBINS - 1];

  int *h_samples;
  BENCH_CUDA(cudaMallocHost(&h_samples, n_grid * sizeof(int)));
  int *d_samples;
  unsigned *d_bins, *d_word;
  BENCH_CUDA(cudaMalloc(&d_samples, n_grid * sizeof(int)));
  BENCH_CUDA(cudaMalloc(&d_bins, (size_t)max_bins * sizeof(unsigned)));
  BENCH_CUDA(cudaMalloc(&d_word, sizeof(unsigned)));
  std::vector<unsigned> ref(max_bins), got(max_bins), ref_cub(max_bins), partial;

  /* The baselines' geometry: enough resident threads to fill every SM once. */
  const int blocks_full = d.info.sm_count * std::max(1, d.info.max_threads_per_sm / 256);

  /* ---- the roofline, per n ---- */
  BENCH_CUDA(cudaMemset(d_samples, 0x5a, n_grid * sizeof(int)));
  auto read_gbps = [&](unsigned long long n) {
    auto run_read = [&]() -> int {
      read_all<<<blocks_full, 256>>>((const int4 *)d_samples, n / 4, d_samples + n / 4 * 4, (int)(n % 4), d_word);
      return (int)cudaGetLastError();
    };
    const bench_time_result t = bench_time(run_read, flush, bench_reps{5, 30, 200.0});
    if (!t.ok) {
      fprintf(stderr, "read bandwidth kernel: %s\n", t.err.c_str());
      exit(1);
    }
    return gbps(n, t.ms);
  };
  const double read_grid = read_gbps(n_grid), read_extra = read_gbps(n_extra);
  printf("read bandwidth: %.1f GB/s at n = 2^%d, %.1f GB/s at n = 2^20 (int4 loads, L2 flushed): the roofline\n",
         read_grid, (int)std::log2((double)n_grid), read_extra);
  printf("CUB drops samples outside [0, nbins); ktune and global atomics clamp them into the first and last\n"
         "bins. CUB's counts are checked against the CPU count less those samples.\n");
  printf("timing: %s after a warm-up, CUDA events, %zu MiB L2 flush before each run;\n"
         "each method's time includes zeroing its bins.  x/read: ktune over the read bandwidth; x/peer: ktune over\n"
         "max(CUB, global)\n\n",
         bench_statistic, flush.bytes >> 20);
  printf("%-16s %9s %8s %8s %8s %6s %7s %-7s %s\n", "dist", "bins", "ktune", "CUB", "global", "x/read", "x/peer",
         "status", "ktune dispatched to");

  bench_csv csv(o.out + "/hist.csv", "dist,nbins,n,ktune_gbps,cub_gbps,global_gbps,read_gbps,ktune_over_read,"
                                     "ktune_over_best_peer,ktune_over_global,winner,variant,tuned,status,notes");

  std::vector<std::string> rows;
  for (int i = 0; kt_tune_hist_dists[i]; ++i)
    rows.push_back(kt_tune_hist_dists[i]);
  rows.push_back("uniform n=2^20");

  void *d_temp = nullptr;
  size_t temp_bytes = 0;
  std::vector<cell> cells;
  int failed = 0;
  uint64_t seed = 0x6b74756e68697374ull;

  for (size_t r = 0; r < rows.size(); ++r) {
    const bool extra = r + 1 == rows.size();
    const char *dist = extra ? "uniform" : rows[r].c_str();
    const unsigned long long n = extra ? n_extra : n_grid;
    for (long long nbins : kBins) {
      const int nb = (int)nbins;
      cell c;
      c.row = rows[r];
      c.nbins = nbins;
      c.n = n;
      c.read = extra ? read_extra : read_grid;
      make_samples(h_samples, n, nbins, dist, seed += 0x9e3779b97f4a7c15ull);
      unsigned long long below = 0, above = 0;
      cpu_count(h_samples, n, nbins, ref, partial, &below, &above);
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
        int e = kt_histogram(ctx, d_samples, n, d_bins, nbins, 0);
        return e == KT_OK ? 0 : bench_fail("kt_histogram: %s", kt_strerror(e));
      };
      const bench_time_result t_kt = bench_time(run_ktune, flush, reps);
      const std::string kt_wrong = t_kt.ok ? check_bins(d_bins, ref, nbins, got) : t_kt.err;
      c.ok = t_kt.ok && kt_wrong.empty();
      c.kt = t_kt.ok ? gbps(n, t_kt.ms) : NAN;
      c.variant = choice.variant;

      /* (b) CUB, temporary storage sized and allocated outside the timing */
      size_t need = 0;
      BENCH_CUDA(cub::DeviceHistogram::HistogramEven(nullptr, need, d_samples, d_bins, nb + 1, 0, nb, (int)n));
      if (need > kCubMaxTemp) {
        char b[128];
        snprintf(b, sizeof b, "CUB not run: it asks for %.1f GiB of temporary storage", need / 1073741824.0);
        notes.push_back(b);
      } else {
        if (need > temp_bytes) {
          cudaFree(d_temp);
          d_temp = nullptr;
          temp_bytes = 0;
          if (cudaMalloc(&d_temp, need) == cudaSuccess)
            temp_bytes = need;
          else
            cudaGetLastError();
        }
        if (need > temp_bytes) {
          notes.push_back("CUB not run: cannot allocate its temporary storage");
        } else {
          auto run_cub = [&]() -> int {
            size_t bytes = temp_bytes;
            return (int)cub::DeviceHistogram::HistogramEven(d_temp, bytes, d_samples, d_bins, nb + 1, 0, nb, (int)n);
          };
          const bench_time_result t_cub = bench_time(run_cub, flush, reps);
          if (!t_cub.ok)
            notes.push_back("CUB failed: " + t_cub.err);
          else if (std::string w = check_bins(d_bins, ref_cub, nbins, got); !w.empty())
            notes.push_back("CUB counts: " + w);
          else
            c.cub = gbps(n, t_cub.ms);
        }
      }

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
      else
        c.gl = gbps(n, t_gl.ms);

      if (!c.ok)
        ++failed;
      std::string via = c.variant;
      via += choice.tuned ? std::string(" (tuned at ") + choice.matched + ")" : std::string(" (untuned default)");
      printf("%-16s %9lld %8.1f %8.1f %8.1f %6.3f %7.2f %-7s %s\n", c.row.c_str(), nbins, c.kt, c.cub, c.gl,
             c.over_read(), c.over_peer(), c.ok ? "ok" : "FAILED", via.c_str());
      if (!c.ok)
        printf("  ktune FAILED: %s\n", kt_wrong.c_str());
      for (const std::string &note : notes)
        printf("  note: %s\n", note.c_str());
      fflush(stdout);

      std::string note_field;
      for (const std::string &note : notes)
        note_field += (note_field.empty() ? "" : "; ") + note;
      if (!c.ok)
        note_field = "ktune: " + kt_wrong + (note_field.empty() ? "" : "; " + note_field);
      std::replace(note_field.begin(), note_field.end(), ',', ';');
      csv.row("%s,%lld,%llu,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%s,%s,%d,%s,%s", c.row.c_str(), nbins, n, c.kt, c.cub,
              c.gl, c.read, c.over_read(), c.over_peer(), c.kt / c.gl, c.winner(), c.variant.c_str(), choice.tuned,
              c.ok ? "ok" : "FAILED", note_field.c_str());
      cells.push_back(c);
    }
  }

  /* ---- the grid of ratios, and the targets ---- */
  {
    bench_csv heat(o.out + "/hist_heat.csv", "column,row,ktune_over_best_peer");
    printf("\nktune / max(CUB, global atomics)  (* = ktune loses; row: winner of most cells, least ratio)\n%-16s",
           "dist \\ bins");
    for (long long b : kBins)
      printf(" %8lld", b);
    printf("\n");
    for (size_t r = 0; r < rows.size(); ++r) {
      printf("%-16s", rows[r].c_str());
      double least = INFINITY;
      int wins = 0;
      for (int i = 0; i < NBINS; ++i) {
        const cell &c = cells[r * NBINS + i];
        printf(" %7.2f%s", c.over_peer(), c.over_peer() >= 1.0 ? " " : "*");
        least = std::min(least, c.over_peer());
        wins += c.over_peer() >= 1.0;
        heat.row("%d,%zu,%.4f", i, r, c.over_peer());
      }
      printf("  ktune wins %d/%d, least %.2f\n", wins, NBINS, least);
    }
  }
  const cell *worst_peer = nullptr, *worst_read = nullptr, *worst_global = nullptr;
  int miss_peer = 0, miss_read = 0, miss_global = 0;
  std::vector<double> ratios;
  for (const cell &c : cells) {
    if (!c.ok)
      continue;
    ratios.push_back(c.over_peer());
    if (!(c.over_peer() >= 1.0))
      ++miss_peer;
    if (!worst_peer || c.over_peer() < worst_peer->over_peer())
      worst_peer = &c;
    if (c.n == n_grid && c.nbins <= 65536) {
      if (!(c.over_read() >= 0.85))
        ++miss_read;
      if (!worst_read || c.over_read() < worst_read->over_read())
        worst_read = &c;
    }
    if (c.n == n_grid && c.nbins >= 1 << 20) {
      if (!(c.kt / c.gl >= 1.5))
        ++miss_global;
      if (!worst_global || c.kt / c.gl < worst_global->kt / worst_global->gl)
        worst_global = &c;
    }
  }
  printf("\ngeometric mean of ktune / max(CUB, global atomics) over %zu cells: %.3f\n", ratios.size(),
         bench_geomean(ratios));
  printf("targets (issue 12):\n");
  if (worst_peer)
    printf("  every cell >= 1.0x max(CUB, global):      %s, %d cells below; least %.2f at %s, %lld bins (%s)\n",
           miss_peer ? "MISSED" : "held", miss_peer, worst_peer->over_peer(), worst_peer->row.c_str(),
           worst_peer->nbins, worst_peer->variant.c_str());
  if (worst_read)
    printf("  up to 65536 bins >= 0.85 of read bw:      %s, %d cells below; least %.3f at %s, %lld bins (%s)\n",
           miss_read ? "MISSED" : "held", miss_read, worst_read->over_read(), worst_read->row.c_str(),
           worst_read->nbins, worst_read->variant.c_str());
  if (worst_global)
    printf("  1M bins and up >= 1.5x global atomics:    %s, %d cells below; least %.2f at %s, %lld bins (%s)\n",
           miss_global ? "MISSED" : "held", miss_global, worst_global->kt / worst_global->gl,
           worst_global->row.c_str(), worst_global->nbins, worst_global->variant.c_str());
  if (failed)
    printf("  %d cell%s FAILED (wrong counts or errors)\n", failed, failed > 1 ? "s" : "");
  printf("csv: %s/hist.csv\n", o.out.c_str());
  plot(o, d, rows);

  cudaFree(d_temp);
  cudaFree(d_word);
  cudaFree(d_bins);
  cudaFree(d_samples);
  cudaFreeHost(h_samples);
  cudaFree(flush.p);
  kt_close(ctx);
  return failed ? 1 : 0;
}
