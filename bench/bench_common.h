/* SPDX-License-Identifier: MIT */
/* bench/bench_common.h: what bench_matmul and bench_hist share.
 *
 * Benchmarks are tools, so unlike the library they may print and exit: the
 * BENCH_CUDA / BENCH_KT macros stop the process with file:line on the first
 * failed call.  Header-only; C++17.
 *
 *   --db PATH   tuning database for the ktune context (default: $KTUNE_DB,
 *               else the library's built-in path)
 *   --out DIR   where the .csv, .gp and .png files go (default bench/results)
 *   --quick     a short run, for smoke tests
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "ktune.h"
#include "kt_variant.h"

#include "measure.h"

/* ---- fail-fast checks ------------------------------------------------- */

#define BENCH_CUDA(call) bench_cuda_check((call), #call, __FILE__, __LINE__)
#define BENCH_KT(call) bench_kt_check((call), #call, __FILE__, __LINE__)

static inline void bench_cuda_check(cudaError_t e, const char *what, const char *file, int line)
{
  if (e != cudaSuccess) {
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
    exit(1);
  }
}

static inline void bench_kt_check(int rc, const char *what, const char *file, int line)
{
  if (rc != KT_OK) {
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, kt_strerror(rc));
    exit(1);
  }
}

/* ---- arguments -------------------------------------------------------- */

struct bench_options {
  const char *db = nullptr; /* nullptr: the library's default */
  std::string out = "bench/results";
  bool quick = false;
  unsigned long long seed = 0;  /* --seed: the bench's random suite; 0 = its default */
  bool vectors = false;         /* --vectors: the bench's vector-like suite, where it has one */
  int rows_lo = 0, rows_hi = 0; /* --rows LO:HI: M drawn over LO..HI only (0: the suite's own range) */
  int cols_lo = 0, cols_hi = 0; /* --cols LO:HI: N likewise */
  bool online = false;          /* --online: also time kt_matmul with on-line tuning (where the bench can) */
};

static inline void bench_usage(FILE *f, const char *prog, const char *about)
{
  fprintf(f,
          "usage: %s [--db PATH] [--out DIR] [--quick] [--seed N] [--vectors] [--rows LO:HI] [--cols LO:HI]\n"
          "          [--online]\n"
          "%s\n"
          "  --db PATH   tuning database (default: $KTUNE_DB, else the library's default)\n"
          "  --out DIR   directory for the CSV and the plot (default: bench/results)\n"
          "  --quick     a short run\n"
          "  --seed N    seed of a generated suite (where the bench has one)\n"
          "  --vectors   the generated suite of products with M or N from 1 to 16 (where the bench has one)\n"
          "  --rows LO:HI  a generated suite's M drawn log-uniform over LO..HI alone (where the bench has one)\n"
          "  --cols LO:HI  the same for N\n"
          "  --online    also kt_matmul with on-line tuning (kt_online), its race run to the end first\n"
          "              (where the bench has a generated suite)\n",
          prog, about);
}

static inline bench_options bench_parse_args(int argc, char **argv, const char *about)
{
  bench_options o;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--db") && i + 1 < argc)
      o.db = argv[++i];
    else if (!strcmp(a, "--out") && i + 1 < argc)
      o.out = argv[++i];
    else if (!strcmp(a, "--quick"))
      o.quick = true;
    else if (!strcmp(a, "--seed") && i + 1 < argc) {
      const char *v = argv[++i];
      char *end = nullptr;
      errno = 0;
      o.seed = strtoull(v, &end, 0);
      if (errno || end == v || *end || v[0] == '-' || o.seed == 0) { /* 0 is "the default" */
        fprintf(stderr, "%s: --seed wants a number from 1 to 2^64 - 1, not '%s'\n", argv[0], v);
        exit(2);
      }
    }
    else if (!strcmp(a, "--vectors"))
      o.vectors = true;
    else if (!strcmp(a, "--online"))
      o.online = true;
    else if ((!strcmp(a, "--rows") || !strcmp(a, "--cols")) && i + 1 < argc) {
      const char *v = argv[++i];
      int *lo = a[2] == 'r' ? &o.rows_lo : &o.cols_lo, *hi = a[2] == 'r' ? &o.rows_hi : &o.cols_hi;
      char end = 0;
      long long l = 0, h = 0;
      if (sscanf(v, "%lld:%lld%c", &l, &h, &end) != 2 || l < 1 || h < l || h > 16384) {
        fprintf(stderr, "%s: %s wants LO:HI with 1 <= LO <= HI <= 16384, not '%s'\n", argv[0], a, v);
        exit(2);
      }
      *lo = (int)l, *hi = (int)h;
    }
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      bench_usage(stdout, argv[0], about);
      exit(0);
    } else {
      fprintf(stderr, "%s: unknown or incomplete argument '%s'\n", argv[0], a);
      bench_usage(stderr, argv[0], about);
      exit(2);
    }
  }
  return o;
}

/* mkdir -p */
static inline void bench_mkdirs(const std::string &dir)
{
  std::string path;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!path.empty() && mkdir(path.c_str(), 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "mkdir %s: %s\n", path.c_str(), strerror(errno));
        exit(1);
      }
    }
    if (i < dir.size())
      path += dir[i];
  }
}

/* ---- the device ------------------------------------------------------- */

struct bench_device {
  kt_device_info info;
  int l2_bytes;
  std::string line; /* one line for people and plot titles */
};

static inline bench_device bench_device_open(void)
{
  bench_device d;
  char err[256] = "";
  int rc = kt_device_query(-1, &d.info, err, sizeof err);
  if (rc != KT_OK) {
    fprintf(stderr, "no usable GPU: %s (%s)\n", kt_strerror(rc), err);
    exit(1);
  }
  BENCH_CUDA(cudaDeviceGetAttribute(&d.l2_bytes, cudaDevAttrL2CacheSize, d.info.ordinal));
  char buf[1024];
  snprintf(buf, sizeof buf, "%s, sm_%d, %d SMs, %d MiB L2, driver %d.%d, runtime %d.%d", d.info.name, d.info.cc,
           d.info.sm_count, d.l2_bytes >> 20, d.info.driver_version / 1000, d.info.driver_version % 1000 / 10,
           d.info.runtime_version / 1000, d.info.runtime_version % 1000 / 10);
  d.line = buf;
  /* Where clusters go (matmul's cost model; replay_dispatch --clusters) */
  kt_device_clusters(&d.info);
  const int *c = d.info.cluster_sms;
  if (d.info.cluster_launch)
    printf("device: %s\ndevice: clusters of 2, 4, 8, 16 blocks fill %d, %d, %d, %d SMs (replay_dispatch --clusters "
           "%d,%d,%d,%d)\n",
           buf, c[0], c[1], c[2], c[3], c[0], c[1], c[2], c[3]);
  else
    printf("device: %s\n", buf);
  return d;
}

static inline void bench_log(int level, const char *message, void *)
{
  fprintf(stderr, "[ktune %s] %s\n", level == KT_LOG_ERROR ? "error" : level == KT_LOG_WARN ? "warn" : "info", message);
}

/* A ktune context on the current device with the given database; warnings
 * (a missing database, say) go to stderr. */
static inline kt_context *bench_open_ktune(const bench_options &o)
{
  kt_options opts = kt_default_options();
  opts.db_path = o.db;
  opts.log = bench_log;
  opts.log_level = KT_LOG_WARN;
  kt_context *ctx = nullptr;
  BENCH_KT(kt_open(&ctx, &opts));
  kt_context_keep_no_misses(ctx); /* the bench's shapes must stay out of the tuning set */
  BENCH_KT(kt_online(ctx, 0));    /* dispatch as it is by default, whatever $KTUNE_ONLINE says */
  printf("ktune: database %s, %d tuned problems for this device\n",
         o.db ? o.db : (getenv("KTUNE_DB") ? getenv("KTUNE_DB") : "(library default)"), kt_tuned_count(ctx));
  return ctx;
}

/* ---- timing ------------------------------------------------------------ */

static inline double bench_now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Twice the L2, written before every timed repetition so that no run finds
 * its inputs already in cache from the previous one. */
struct bench_flush {
  void *p = nullptr;
  size_t bytes = 0;
};

static inline bench_flush bench_flush_alloc(const bench_device &d)
{
  bench_flush f;
  f.bytes = 2 * (size_t)d.l2_bytes;
  BENCH_CUDA(cudaMalloc(&f.p, f.bytes));
  return f;
}

struct bench_reps {
  int min_reps, max_reps;
  double budget_ms;
};

struct bench_time_result {
  bool ok = false;
  double ms = NAN; /* the runs' typical time: kt_measure_typical */
  int reps = 0;
  std::string err; /* why not ok */
};

/* A timed callable returns 0 on success.  On failure it returns nonzero and
 * may leave a message here; otherwise the code is read as a cudaError_t. */
static std::string bench_call_error;

static inline int bench_fail(const char *fmt, ...)
{
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  bench_call_error = buf;
  return -1;
}

template <class F> static int bench_thunk(void *f)
{
  return (*static_cast<F *>(f))();
}

/* What bench_time reports, for the benches' headers. */
static const char bench_statistic[] = "median (from 10 runs, the lower of the even and the odd runs' medians)";

/* Time of f() on the default stream (kt_measure_time_fn: a warm-up call,
 * then CUDA-event-timed repetitions, each after an untimed L2 flush; their
 * median, or the faster parity's median where a Hopper kernel's runs
 * alternate: kt_measure_typical). */
template <class F> static bench_time_result bench_time(F &f, const bench_flush &fl, const bench_reps &r)
{
  bench_time_result t;
  bench_call_error.clear();
  int rc = kt_measure_time_fn(bench_thunk<F>, &f, fl.p, fl.bytes, r.min_reps, r.max_reps, r.budget_ms, &t.ms, &t.reps);
  if (rc == 0) {
    t.ok = true;
    return t;
  }
  t.ms = NAN;
  t.err = !bench_call_error.empty() ? bench_call_error : cudaGetErrorString((cudaError_t)rc);
  /* Clear a non-sticky error so the next method can run; a sticky one
   * (an illegal address) makes the next BENCH_CUDA stop the run. */
  cudaGetLastError();
  cudaDeviceSynchronize();
  return t;
}

/* The matmul suite, MxNxK, shared by the FP32 and the tensor-core benches:
 * square powers of two, flat and skinny shapes (small K, small M, small N,
 * huge K) and sizes that are no multiple of any tile.  --quick runs the
 * short list. */
struct bench_shape {
  int m, n, k;
};
static const bench_shape bench_suite[] = {
    {512, 512, 512},    {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096},
    {8192, 8192, 8192}, {4096, 4096, 256},  {128, 8192, 8192},  {8192, 128, 8192},
    {16384, 16384, 64}, {1000, 1000, 1000}, {4000, 4000, 4000}, {64, 64, 65536},
};
static const bench_shape bench_quick_suite[] = {{1024, 1024, 1024}, {4096, 4096, 256}, {1000, 1000, 1000}};

static inline double bench_geomean(const std::vector<double> &x)
{
  if (x.empty())
    return NAN;
  double s = 0;
  for (double v : x)
    s += log(v);
  return exp(s / (double)x.size());
}

/* A draw from r, log-uniform over [lo, hi]: shapes for seeded suites. */
static inline long long log_uniform(kt_rng *r, double lo, double hi)
{
  const double u = (double)(kt_rng_next(r) >> 11) * 0x1p-53;
  return (long long)floor(exp(log(lo) + u * (log(hi + 1) - log(lo))));
}

/* ---- output files ------------------------------------------------------- */

/* A CSV file with a header line; rows are printf-formatted.  Fields must
 * not contain commas.  NaN prints as "nan", which gnuplot skips. */
class bench_csv
{
public:
  bench_csv(const std::string &path, const char *header) : path_(path)
  {
    f_ = fopen(path.c_str(), "w");
    if (!f_) {
      fprintf(stderr, "%s: %s\n", path.c_str(), strerror(errno));
      exit(1);
    }
    fprintf(f_, "%s\n", header);
  }
  ~bench_csv()
  {
    if (fclose(f_) != 0)
      fprintf(stderr, "%s: write failed: %s\n", path_.c_str(), strerror(errno));
  }
  bench_csv(const bench_csv &) = delete;
  bench_csv &operator=(const bench_csv &) = delete;

  __attribute__((format(printf, 2, 3))) void row(const char *fmt, ...)
  {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f_, fmt, ap);
    va_end(ap);
    fputc('\n', f_);
    fflush(f_); /* a run that dies later still leaves its rows */
  }

private:
  FILE *f_;
  std::string path_;
};

static inline bool bench_on_path(const char *prog)
{
  const char *path = getenv("PATH");
  if (!path)
    return false;
  std::string p(path);
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos)
      end = p.size();
    std::string dir = end > start ? p.substr(start, end - start) : ".";
    if (access((dir + "/" + prog).c_str(), X_OK) == 0)
      return true;
    start = end + 1;
  }
  return false;
}

/* 'text' quoted for sh. */
static inline std::string bench_shell_quote(const std::string &text)
{
  std::string q = "'";
  for (char c : text)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/* Text for a gnuplot string in double quotes (plot titles). */
static inline std::string bench_gnuplot_escape(const std::string &text)
{
  std::string q;
  for (char c : text) {
    if (c == '"' || c == '\\')
      q += '\\';
    q += c;
  }
  return q;
}

/* The lines every plot script starts with: a PNG terminal (pngcairo when
 * this gnuplot has it) of the given size, writing <name>.png. */
static inline std::string bench_gnuplot_preamble(const std::string &name, int width, int height)
{
  char buf[512];
  snprintf(buf, sizeof buf,
           "# regenerate: cd to this directory, then gnuplot %s.gp\n"
           "if (strstrt(GPVAL_TERMINALS, \"pngcairo\") > 0) {\n"
           "  set terminal pngcairo size %d,%d font \"sans,10\" noenhanced\n"
           "} else {\n"
           "  set terminal png size %d,%d noenhanced\n"
           "}\n"
           "set output \"%s.png\"\n"
           "set datafile separator \",\"\n",
           name.c_str(), width, height, width, height, name.c_str());
  return buf;
}

/* Write DIR/NAME.gp and, when gnuplot is on PATH, run it in DIR to draw
 * DIR/NAME.png.  The script names its files relative to DIR, so it can be
 * run again by hand. */
static inline void bench_plot(const std::string &dir, const std::string &name, const std::string &script)
{
  const std::string gp = dir + "/" + name + ".gp";
  FILE *f = fopen(gp.c_str(), "w");
  if (!f) {
    fprintf(stderr, "%s: %s\n", gp.c_str(), strerror(errno));
    return;
  }
  fputs(script.c_str(), f);
  fclose(f);
  if (!bench_on_path("gnuplot")) {
    printf("plot: skipped %s/%s.png: gnuplot is not on PATH (the script is %s)\n", dir.c_str(), name.c_str(),
           gp.c_str());
    return;
  }
  const std::string cmd = "cd " + bench_shell_quote(dir) + " && gnuplot " + bench_shell_quote(name + ".gp");
  int rc = system(cmd.c_str());
  if (rc == 0)
    printf("plot: %s/%s.png\n", dir.c_str(), name.c_str());
  else
    printf("plot: gnuplot failed on %s (exit status %d); no plot\n", gp.c_str(), WIFEXITED(rc) ? WEXITSTATUS(rc) : rc);
}

#endif
