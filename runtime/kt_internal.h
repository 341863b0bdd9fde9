/* SPDX-License-Identifier: MIT */
/* runtime/kt_internal.h: what the runtime's modules share; not installed.
 *
 * Modules, one prefix each: device.c (kt_device_), family.c (kt_family_,
 * the table of families), dispatch.c (kt_dispatch_, with the registry
 * look-ups), db.c (kt_db_), context.c (kt_open/kt_close and kt_context_),
 * misses.c (kt_misses_, the problems served untuned), resident.c
 * (kt_resident_, blocks an SM holds), status.c; and one
 * module per family holding its API functions and
 * everything else the runtime knows of it: matmul.c (kt_matmul_), hist.c
 * (kt_hist_, kt_histogram), gemm.c (kt_gemm_, kt_matmul_ex).
 * The tests link libktune.a and use these too; so does the ktune CLI,
 * from build/libktune_internal.a, its kernels and registry coming from
 * libktune.so (see the Makefile).
 */
#ifndef KT_INTERNAL_H
#define KT_INTERNAL_H

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "ktune.h"
#include "kt_variant.h"

#define KT_INTERNAL __attribute__((visibility("hidden")))

#ifdef __cplusplus
extern "C" {
#endif

/* Seconds on the monotonic clock, for deadlines and elapsed times. */
static inline double kt_now_s(void)
{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- device.c ---------------------------------------------------------- */

#define KT_CLUSTER_SIZES 4 /* cluster sizes 2, 4, 8, 16 whose placement kt_device_info holds */

typedef struct kt_device_info {
  int ordinal;
  char name[256];
  int cc; /* compute capability x 10 */
  int sm_count;
  int smem_per_sm; /* bytes */
  int smem_optin;  /* most shared memory one block may opt in to */
  int max_threads_per_sm;
  int max_blocks_per_sm;
  int regs_per_sm;    /* 32-bit registers */
  int smem_reserved;  /* bytes of shared memory the system keeps per block */
  int cluster_launch; /* 1 when thread-block clusters are supported */
  /* SMs that clusters of 2, 4, 8 and 16 blocks ([0] to [3]) fill at one
   * block an SM: a cluster's blocks share a GPC, and a GPC whose SMs are
   * not a multiple of the size leaves the rest idle (an H100 SXM: 132,
   * 120, 120, 112 of its 132).  0 where unknown (kt_device_clusters fills
   * them; kt_cluster_sms reads them). */
  int cluster_sms[KT_CLUSTER_SIZES];
  unsigned long long mem_bytes;
  int driver_version, runtime_version;
  char fingerprint[384]; /* the database's device key */
} kt_device_info;

/* Query a device (-1 = the current one).  KT_ERR_NO_DEVICE without a GPU or
 * driver; err gets the CUDA message. */
KT_INTERNAL int kt_device_query(int ordinal, kt_device_info *out, char *err, size_t errlen);

/* KT_OK when this build's kernels run on d, else KT_ERR_UNSUPPORTED_DEVICE
 * with the device and the build's target in err. */
KT_INTERNAL int kt_device_supported(const kt_device_info *d, char *err, size_t errlen);

/* The build target whose kernels d runs: the newest of kt_registry_targets
 * that it can run (see kt_target); its cc, or 0 when it can run none. */
KT_INTERNAL int kt_device_target(const kt_device_info *d);

/* Fill d->cluster_sms by asking the driver how many clusters of each size
 * it places at once (cudaOccupancyMaxActiveClusters, a kernel of the
 * runtime's own at one block an SM), on device d->ordinal, whose primary
 * context it initialises; the caller's current device is kept.  Left 0
 * where clusters are not supported or the driver does not say. */
KT_INTERNAL void kt_device_clusters(kt_device_info *d);

/* SMs over which clusters of `cluster` blocks spread (d->cluster_sms, at
 * most the SM count); the SM count for 1, or where that is unknown. */
KT_INTERNAL int kt_cluster_sms(const kt_device_info *d, int cluster);

/* Fill d->fingerprint from name, compute capability, SM count and memory. */
KT_INTERNAL void kt_device_fingerprint(kt_device_info *d);

/* The chip part of the fingerprint (all but the memory size): the prefix
 * that devices of the same chip share, ending in '|'. */
KT_INTERNAL void kt_device_chip(const kt_device_info *d, char *buf, size_t len);

/* The process's scratch pool on a device (a cudaMemPool_t), made on first
 * use; NULL if it cannot be made (kernels then use the default pool). */
KT_INTERNAL void *kt_device_pool(int ordinal);

/* ---- resident.c: blocks an SM holds ------------------------------------ */

/* What ptxas gave a variant's kernel for one target (build/kernel_regs.c,
 * which generator/kernel_regs.lua writes from the build's reports):
 * registers a thread and static shared memory a block.  Sorted by name,
 * then target; kt_kernel_regs_count entries (a build without reports has
 * none).  Exported from libktune.so for the CLI, as the registry is. */
typedef struct kt_kernel_regs_entry {
  const char *name;
  int target; /* 90 for sm_90 and sm_90a */
  int regs, smem;
} kt_kernel_regs_entry;
extern const kt_kernel_regs_entry kt_kernel_regs[];
extern const int kt_kernel_regs_count;

/* Blocks of v that one SM of d holds at once: by its threads, shared
 * memory and registers as compiled, under d's limits (the occupancy
 * calculator's rule), where this build has ptxas's count for v; else the
 * space's estimate, v->blocks_per_sm (0 when that is unknown too). */
KT_INTERNAL int kt_resident_blocks(const kt_variant *v, const kt_device_info *d);

/* ---- problems ---------------------------------------------------------- */

/* A problem is a family and up to KT_MAX_DIMS sizes, which the family names
 * (kt_family_ops.dims); the unions give them their family's names. */
#define KT_MAX_DIMS 4
/* The largest M, N or K that kt_matmul and kt_matmul_ex take, and that the
 * tuner tunes: the kernels index in int, with room past the last tile. */
#define KT_MATMUL_MAX_DIM (INT_MAX - 1024)
typedef struct kt_problem {
  kt_family family;
  union {
    long long dim[KT_MAX_DIMS];
    struct {
      long long m, n, k; /* matmul */
    };
    struct {
      long long nbins, nsamples; /* hist */
    };
  };
  char dist[16]; /* input distribution of a measurement; "" for rankings */
} kt_problem;

/* "4096x4096x4096" or "nbins=65536 n=268435456"; with_dist adds " dist=skewed". */
KT_INTERNAL void kt_problem_key(const kt_problem *p, int with_dist, char *buf, size_t len);

/* ---- families (family.c: the table; matmul.c, hist.c: the entries) ------ */

struct kt_tuned;

/* What the shared modules (context, dispatch, database, tuner) know about a
 * family: they loop over kt_families[] and call these, and never ask which
 * family they hold. */
typedef struct kt_family_ops {
  kt_family id;
  const char *name;              /* registry, database and CLI name: "matmul", "hist" */
  const char *long_name;         /* also accepted where a family is named: "histogram" */
  int ndims;                     /* sizes in kt_problem.dim */
  const char *dims[KT_MAX_DIMS]; /* their database columns, in dim order; a dim that names
                                  * no size column (gemm's "layout") lives in the key alone,
                                  * and prepare() takes it back from there */
  /* The problem's key, without the distribution: "4096x4096x4096". */
  void (*key)(const kt_problem *p, char *buf, size_t len);
  /* Parse a key as key() writes it, or the short form the CLI takes
   * ("4096x4096x4096"; "65536" or "65536:268435456"); 0 on success. */
  int (*parse)(const char *s, kt_problem *out);
  /* May v serve problem p on d?  Size limits only (shared memory for the
   * bins, ...); the call's pointers are checked by the API functions. */
  int (*fits)(const kt_variant *v, const kt_device_info *d, const kt_problem *p);
  /* Precompute what the family's selection rule needs of a tuned problem. */
  void (*prepare)(struct kt_tuned *t);
  /* Optional: state the selection rule builds once from all of the
   * family's tuned problems on a device (kt_open), and frees (kt_close). */
  void *(*build)(const struct kt_tuned *t, int n, const kt_device_info *d);
  void (*release)(void *state);
} kt_family_ops;

KT_INTERNAL extern const kt_family_ops *const kt_families[]; /* indexed by kt_family */
KT_INTERNAL extern const int kt_family_count;
/* The family's operations; NULL for an unknown family. */
KT_INTERNAL const kt_family_ops *kt_family_get(kt_family f);
/* By name or long name ("hist", "histogram"); NULL when none matches. */
KT_INTERNAL const kt_family_ops *kt_family_find(const char *name);
/* The family's name; "?" for an unknown family. */
KT_INTERNAL const char *kt_family_name(kt_family f);

#define KT_MAX_FAMILIES 8 /* room in per-family arrays; kt_family_count <= this */

/* ---- registry look-ups (dispatch.c) ------------------------------------ */

/* The entry of this name for the target that d runs (kt_device_target); with
 * d NULL, the first of any target (for what all a name's entries share: its
 * family, algorithm, parameters, launcher).  NULL when there is none. */
KT_INTERNAL const kt_variant *kt_registry_find(const char *name, const kt_device_info *d);
/* The entry of this name and source hash (unique: a hash is per target);
 * what a database row was measured with, if this build has it.  A GPU's
 * rows name its own target's entries, unless they were measured with
 * another build's targets (an sm_80-only build on an H100): those rank, but
 * kt_variant_runs_on keeps them from being dispatched. */
KT_INTERNAL const kt_variant *kt_registry_find_source(const char *name, const char *source_hash);

/* May v run on d at all (its target is d's, compute capability, clusters,
 * threads, its fixed shared memory)?  What a particular call needs is its
 * family's question. */
KT_INTERNAL int kt_variant_runs_on(const kt_variant *v, const kt_device_info *d);

/* The value of v's parameter key, or NULL when v has none: how the
 * runtime, the tuner and the tests read a variant's properties rather
 * than its name. */
KT_INTERNAL const char *kt_variant_param(const kt_variant *v, const char *key);
/* The same, as an integer (atoi), or dflt when v has none. */
KT_INTERNAL int kt_variant_param_int(const kt_variant *v, const char *key, int dflt);

/* ---- db.c --------------------------------------------------------------- */

#define KT_DB_SCHEMA_VERSION 1
#define KT_DB_APPLICATION_ID 0x6b74756e /* 'ktun' */

typedef struct kt_db kt_db;

/* KT_DB_CHECK reads, after the full integrity check that a write runs
 * (KT_DB_READ runs the quicker one): for tools that say whether a file is
 * sound, as ktune show does. */
enum kt_db_mode { KT_DB_READ = 0, KT_DB_WRITE = 1, KT_DB_CHECK = 2 };

/* Open (KT_DB_WRITE: create if missing) and check the file: a non-SQLite,
 * foreign, newer-schema or damaged (see kt_db_mode) file is refused with
 * KT_ERR_DB_* and never written, nor its -wal; KT_DB_READ of a missing
 * file is KT_ERR_DB_MISSING.  Reading needs no write access to the file or
 * its folder.  err gets a one-line reason. */
KT_INTERNAL int kt_db_open(kt_db **db, const char *path, int mode, char *err, size_t errlen);
/* The folder that holds path (where a writer keeps its journal, and the
 * misses file goes): what comes before its last '/', else ".". */
KT_INTERNAL void kt_db_folder(const char *path, char *dir, size_t len);
KT_INTERNAL void kt_db_close(kt_db *db);

typedef struct kt_measurement {
  kt_problem problem;
  const char *variant;
  const char *source_hash;
  const char *status; /* ok | wrong | launch_failed | timed_out | skipped */
  const char *reason; /* "" when ok */
  double time_ms;     /* median, when ok */
  double rate;        /* GFLOP/s (matmul) or GB/s (hist), when ok */
  double max_err;     /* matmul: worst error / bound; hist: wrong bins */
  int reps;
} kt_measurement;

/* Whether ms is a time that a result can be ranked or chosen by: positive
 * and finite (not a NULL read back as 0 or NaN, a hand edit, a failed
 * timer). */
static inline int kt_time_ranks(double ms)
{
  return ms > 0 && isfinite(ms);
}

/* Delete all but the newest `keep` measurements of each (device, generator,
 * problem, distribution, variant, source hash): rankings use the newest
 * only, the rest is history.  The tuner calls it when a tune ends. */
KT_INTERNAL int kt_db_prune(kt_db *db, int keep, char *err, size_t errlen);

/* Record the device and n measurements in one transaction. */
KT_INTERNAL int kt_db_record(kt_db *db, const kt_device_info *dev, const char *gen_version, const kt_measurement *m,
                             int n, char *err, size_t errlen);

/* Recompute the ranking (winner first) of problem p for this device and
 * generator from every ok measurement whose variant and source hash are in
 * this build's registry.  Problems rank by the geometric mean of the time
 * over their input distributions (one, "", for a family without them),
 * counting only variants measured ok on all of them.  Returns the number ranked, or a negative KT_ERR_*. */
KT_INTERNAL int kt_db_rank(kt_db *db, const char *device_fp, const char *gen_version, const kt_problem *p, char *err,
                           size_t errlen);

/* Variants a tuned problem keeps in memory: every one a family builds.
 * Matmul's cost model calibrates each variant on the problems that keep it,
 * so a cap below the space's size keeps a variant only where it ranks high
 * and its calibration only on problems it is good at: at 64 of 241, on
 * problems far from those, it was predicted up to twice too fast
 * (bench/reference/matmul_random/README.md, run 35). */
#define KT_MAX_RANKED 512

/* The two arrays come last, so that the head and the first `count`
 * entries of each are all a copy needs (gemm's rerank). */
typedef struct kt_tuned {
  int layer;          /* results.c: which layer it came from */
  const char *source; /* results.c: that layer's description, for choices */
  kt_problem problem;
  char key[96];
  double best_ms;
  double log_shape[3]; /* ln(m, n, k) or ln(nbins, nsamples, -), for dispatch */
  int count;
  const kt_variant *ranked[KT_MAX_RANKED]; /* fastest first; only those in this build */
  double ms[KT_MAX_RANKED];                /* their times */
} kt_tuned;

/* Load the ranked winners for a device and generator version.  *out is
 * malloc'd (free it).  Fills log_shape for the dispatch functions. */
KT_INTERNAL int kt_db_load(kt_db *db, const char *device_fp, const char *gen_version, kt_tuned **out, int *count,
                           char *err, size_t errlen);

/* A device of the chip `chip` (kt_device_chip) with rankings for
 * gen_version, the most recently seen first: its fingerprint in out.
 * KT_ERR_DB_MISSING when there is none. */
KT_INTERNAL int kt_db_same_chip(kt_db *db, const char *chip, const char *gen_version, char *out, size_t len);

/* What has been recorded already: each() gets the newest measurement of
 * every (variant, source hash) of problem p in its distribution p->dist,
 * whatever its status, for this device and generator, variants in name
 * order.  m's strings last only during the call.  A tune measures the rest. */
typedef void (*kt_db_each)(void *user, const kt_measurement *m);
KT_INTERNAL int kt_db_recorded(kt_db *db, const char *device_fp, const char *gen_version, const kt_problem *p,
                               kt_db_each each, void *user, char *err, size_t errlen);

/* A device of the file, and its measurements as this build sees them. */
typedef struct kt_db_device {
  char fingerprint[384], name[256];
  int cc, sm_count;
  unsigned long long mem_bytes;
  long long measurements; /* all of them */
  long long current;      /* of gen_version, by a variant of this build with its source hash */
  long long stale;        /* the rest: kept, never ranked or dispatched */
} kt_db_device;

/* Every device in the file, by fingerprint.  *out is malloc'd (free it). */
KT_INTERNAL int kt_db_devices(kt_db *db, const char *gen_version, kt_db_device **out, int *count, char *err,
                              size_t errlen);

/* The text form (see db.c): one JSON object that names its format. */
#define KT_RESULTS_FORMAT "ktune-results"
#define KT_RESULTS_FORMAT_VERSION 1

/* Write the devices, measurements, rankings and this build's sources of one
 * device (device_fp), or of all (NULL), to out.  KT_ERR_DB_MISSING, with
 * nothing written, when the file has no such device. */
KT_INTERNAL int kt_db_export(kt_db *db, const char *device_fp, FILE *out, char *err, size_t errlen);

typedef struct kt_db_import_counts {
  int files, devices, measurements; /* added */
  int duplicates;                   /* measurements the database held already */
  int ranked;                       /* problems ranked again */
} kt_db_import_counts;

/* Merge n exports (docs[i], read from names[i]) into the database in one
 * transaction, then rank again every problem of this build's generator
 * that they measured.  All or nothing: a document that is not ours
 * (KT_ERR_DB_FOREIGN), of a newer format (KT_ERR_DB_VERSION) or not whole
 * (KT_ERR_DB_DAMAGED), or any failure to write, leaves the database as it
 * was; err names the file and the reason.  Measurements held already are
 * not added twice. */
/* kt_db_import's checks alone, without a database: a tool runs them
 * before it opens (and so creates) the file it imports into. */
KT_INTERNAL int kt_db_import_check(int n, const char *const *names, const char *const *docs, char *err, size_t errlen);
KT_INTERNAL int kt_db_import(kt_db *db, int n, const char *const *names, const char *const *docs,
                             kt_db_import_counts *c, char *err, size_t errlen);

/* ---- results.c: where results live, loaded in layers -------------------- */

#define KT_RESULTS_LAYERS 2 /* user, system */

typedef struct kt_results_layer {
  char name[8];      /* "user", "system" */
  char path[1024];   /* its file */
  char source[1200]; /* "user database PATH", as choices name it */
  int status;        /* KT_OK, or why it gave nothing */
  int same_chip;     /* its rows are another device's of the same chip */
} kt_results_layer;

typedef struct kt_results {
  kt_results_layer layer[KT_RESULTS_LAYERS];
  kt_tuned *tuned; /* malloc'd; by family; each problem from the first layer that has it */
  int ntuned;
} kt_results;

typedef void (*kt_results_log)(void *user, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The user database's path: $KTUNE_DB, else the user's data folder.
 * KT_ERR_BAD_OPTION when there is no home to put it in. */
KT_INTERNAL int kt_results_user_path(char *buf, size_t len);

/* mkdir -p the folders above path: the user database's, before a tool
 * first writes it.  The library itself never writes results. */
KT_INTERNAL void kt_results_make_parent_dirs(const char *path);

/* The system database's path (see results.c): option, else
 * $KTUNE_SYSTEM_DB, else the installed file, else system.db beside the
 * program or library.  KT_ERR_DB_MISSING when there is none (buf still
 * gets the installed path, for messages). */
KT_INTERNAL int kt_results_system_path(const char *option, char *buf, size_t len);

/* Load dev's tuned problems from both layers into *r (which must stay
 * where it is while its problems are used: they point into it).  Only
 * running out of memory fails; unreadable layers are logged and skipped. */
KT_INTERNAL int kt_results_load(kt_results *r, const kt_device_info *dev, const char *user_option,
                                const char *system_option, kt_results_log log, void *user);

/* ---- dispatch.c ------------------------------------------------------- */

/* Precompute what t's family's selection rule needs (its prepare()). */
KT_INTERNAL void kt_dispatch_prepare(kt_tuned *t);

/* May v serve this call on d?  `call` is the family module's own view of it. */
typedef int (*kt_serves_fn)(const kt_variant *v, const kt_device_info *d, const void *call);

/* The variant a call of family f gets: the fastest of t's ranking that
 * serves it, else the family's best default that serves it (t may be NULL:
 * nothing tuned).  out, when not NULL, gets the variant and why.  NULL when
 * no variant can serve the call. */
KT_INTERNAL const kt_variant *kt_dispatch_choose(const kt_device_info *d, kt_family f, const kt_tuned *t,
                                                 kt_serves_fn serves, const void *call, kt_choice *out);
/* *out for variant v chosen from tuned problem t (NULL: untuned), why as
 * its reason. */
KT_INTERNAL void kt_dispatch_fill_choice(kt_choice *out, const kt_variant *v, const kt_tuned *t, const char *why);

/* K = 0 or alpha = 0 (kt_matmul, kt_matmul_ex): C = beta C over the batch,
 * by the runtime's own kernel (runtime/kernels.cu); A and B are not read,
 * as in BLAS.  kt_empty_choice: what a *_choice call says where nothing is
 * multiplied (no_c: M or N is 0, so that nothing runs at all). */
KT_INTERNAL int kt_scale_c(const kt_context *c, int64_t M, int64_t N, float beta, float *C, int64_t ldc, int64_t batch,
                           int64_t stride_c, kt_stream stream);
KT_INTERNAL void kt_empty_choice(int no_c, kt_choice *out);

/* ---- misses.c: problems served without a tuned entry of their own ------- */

typedef struct kt_misses kt_misses;
#define KT_MISSES_SLOTS 256     /* distinct problems a context remembers */
#define KT_MISSES_FILE_MAX 1024 /* lines a misses file keeps, the most counted */

/* An empty table; NULL when out of memory (nothing is then remembered). */
KT_INTERNAL kt_misses *kt_misses_new(void);
KT_INTERNAL void kt_misses_free(kt_misses *m);
/* Count a call of problem p (its distribution ignored) unless nearest, the
 * tuned problem its family's rule chose (NULL: none), is p itself.  Family
 * modules call it on the path where a decision is made, never on a cache
 * hit.  Thread-safe; no lock once p has been seen; a problem that finds no
 * room is dropped.  m NULL: nothing. */
KT_INTERNAL void kt_misses_note(kt_misses *m, const kt_tuned *nearest, const kt_problem *p);
/* The problems noted and their counts (at most max): how many. */
KT_INTERNAL int kt_misses_get(const kt_misses *m, kt_problem *out, long long *counts, int max);

/* The misses file beside database db: "<db>.misses". */
KT_INTERNAL int kt_misses_path(const char *db, char *buf, size_t len);

typedef struct kt_misses_entry {
  char fingerprint[384]; /* the device's */
  kt_problem problem;
  char key[96];
  long long count;
} kt_misses_entry;

/* The first line of every misses file ktune has written: what shows a file
 * at the path to be ktune's, to replace (misses.c).  Never change it. */
#define KT_MISSES_HEADER "# ktune: problems served without a tuned entry of their own; `ktune tune --misses` tunes them"

/* Every line of the file that reads (with a family of this build); *out is
 * malloc'd (free it).  A missing file has none.  KT_ERR_DB_FOREIGN where
 * something not ktune's is at path (a link, not a regular file, no
 * header): to be left as it is.  err says why on any failure. */
KT_INTERNAL int kt_misses_read(const char *path, kt_misses_entry **out, int *n, char *err, size_t errlen);
/* Replace the file with e[0..n), the most counted first, at most
 * KT_MISSES_FILE_MAX (e is sorted in place), in the old file's mode; n ==
 * 0 removes it.  Only after kt_misses_read has found the file ktune's. */
KT_INTERNAL int kt_misses_write(const char *path, kt_misses_entry *e, int n, char *err, size_t errlen);
/* Merge m's problems, as misses of device fingerprint, into the file
 * (counts added), under the file's lock (misses.c).  Nothing is written
 * when m holds none. */
KT_INTERNAL int kt_misses_save(const kt_misses *m, const char *fingerprint, const char *path, char *err,
                               size_t errlen);
/* Remove device fingerprint's lines for problems p[0..n) (tuned now). */
KT_INTERNAL int kt_misses_forget(const char *path, const char *fingerprint, const kt_problem *p, int n, char *err,
                                 size_t errlen);

/* ---- online.c: on-line tuning (see there) ------------------------------ */

#define KT_RACE_MAX 8      /* most candidates raced for one shape */
#define KT_RACE_DEFAULT 4  /* KTUNE_ONLINE=on */
#define KT_RACE_SAMPLES 3  /* times taken of each candidate; the least counts */
#define KT_RACE_SLOTS 4    /* samples of one shape in flight at once */
#define KT_RACE_SHAPES 256 /* shapes one context races; three quarters are used */

typedef struct kt_race kt_race;
/* How a race times a call.  create: a pair of events (0 = made); query:
 * 1 when stop has completed (*ms = its time after start), 0 when not yet,
 * -1 when the sample is lost; destroy: the pair. */
typedef struct kt_race_timer {
  void *user;
  int (*create)(void *user, void **start, void **stop);
  int (*query)(void *user, void *start, void *stop, float *ms);
  void (*destroy)(void *user, void *start, void *stop);
} kt_race_timer;

enum { KT_RACE_OFF = 0, KT_RACE_UNKNOWN, KT_RACE_RACING, KT_RACE_DECIDED };

/* A call's pick: the variant (a kt_registry index) to run; where slot >= 0,
 * a sample to take: the events (kt_race_events) to record around it, before
 * the launch and after, then handed back with kt_race_end.  The rest
 * describes the race. */
typedef struct kt_race_pick {
  int variant, slot;
  void *start, *stop, *entry;
  int n, decided, samples; /* candidates; whether a winner is kept; samples taken */
  float ms;                /* the variant's least time so far (INFINITY: none) */
  double predicted;        /* the cost model's time for it */
  int first;               /* the model's own pick, and its time */
  double first_predicted;
} kt_race_pick;

/* A race table; timer NULL = CUDA events on the current device. */
KT_INTERNAL kt_race *kt_race_new(const kt_race_timer *timer, int candidates);
KT_INTERNAL void kt_race_free(kt_race *r);
/* Candidates raced per shape: 0 = off, else 2..KT_RACE_MAX (KT_ERR_BAD_OPTION else). */
KT_INTERNAL int kt_race_set(kt_race *r, int candidates);
KT_INTERNAL int kt_race_candidates(const kt_race *r);
/* $KTUNE_ONLINE's value: unset, "", "off" or "0" = 0; "on" = KT_RACE_DEFAULT; 2..KT_RACE_MAX. */
KT_INTERNAL int kt_race_parse(const char *s, int *candidates);
/* A call of key: KT_RACE_DECIDED or KT_RACE_RACING with *p filled,
 * KT_RACE_UNKNOWN (give its candidates to kt_race_add), or KT_RACE_OFF
 * (off, or the table is full).  Takes the samples that have completed. */
KT_INTERNAL int kt_race_begin(kt_race *r, uint64_t key, kt_race_pick *p);
/* The race of key as it stands, changing nothing (KT_RACE_UNKNOWN: none). */
KT_INTERNAL int kt_race_peek(kt_race *r, uint64_t key, kt_race_pick *p);
/* Start key's race over variant[0..n), the model's pick first, with their
 * predicted times; then as kt_race_begin. */
KT_INTERNAL int kt_race_add(kt_race *r, uint64_t key, int n, const int *variant, const double *predicted,
                            kt_race_pick *p);
/* The events of a timed pick's slot into p->start and p->stop, made
 * (timer create) if the slot has none yet, with the device to be timed
 * current; 0 when there are events. */
KT_INTERNAL int kt_race_events(kt_race *r, kt_race_pick *p);
/* After a timed pick's launch: recorded = both events recorded around a
 * launch that started (else the sample is lost). */
KT_INTERNAL void kt_race_end(kt_race *r, const kt_race_pick *p, int recorded);

/* ---- context.c -------------------------------------------------------- */

/* Open a context on a described device, for tests and tools that have no
 * GPU; calls that would launch fail.  Dispatch and argument checks work. */
KT_INTERNAL int kt_open_described(kt_context **ctx, const kt_device_info *dev, const kt_options *opts);

/* KT_OK when c is an open context, else KT_ERR_BAD_CONTEXT.  Thread-safe. */
KT_INTERNAL int kt_context_check(const kt_context *c);
KT_INTERNAL const kt_device_info *kt_context_device(const kt_context *c);
/* The device's scratch pool (kt_device_pool), NULL on a described device. */
KT_INTERNAL void *kt_context_pool(const kt_context *c);
/* The tuned problems of family f loaded for this context (*n of them). */
KT_INTERNAL const kt_tuned *kt_context_tuned(const kt_context *c, kt_family f, int *n);
/* What family f's build() made of them; NULL if it has none. */
KT_INTERNAL void *kt_context_state(const kt_context *c, kt_family f);
/* Is p memory of the context's device (or managed)?  Remembers pointers
 * that passed. */
KT_INTERNAL int kt_context_device_pointer(kt_context *c, const void *p);
/* A call of problem p was served by the rule's nearest tuned problem
 * (NULL: none): remembered as a miss unless that is p (kt_misses_note). */
KT_INTERNAL void kt_context_miss(const kt_context *c, const kt_tuned *nearest, const kt_problem *p);
/* The context's misses so far (NULL when it keeps none). */
KT_INTERNAL const kt_misses *kt_context_misses(const kt_context *c);
/* Keep no misses (tools that only ask, like ktune explain); before any
 * other thread uses c. */
KT_INTERNAL void kt_context_keep_no_misses(kt_context *c);
/* Launch v with its family's argument struct on the context's device. */
KT_INTERNAL int kt_context_launch(const kt_context *c, const kt_variant *v, const void *args, kt_stream stream);
/* fn(args, stream) on the context's device, as kt_context_launch runs a
 * variant's launcher (the runtime's own kernels: runtime/kernels.cu);
 * `what` names it in the log when it fails. */
KT_INTERNAL int kt_context_run(const kt_context *c, const char *what, kt_launch_fn fn, const void *args,
                               kt_stream stream);
/* The context's race table (NULL when on-line tuning is off). */
KT_INTERNAL kt_race *kt_context_race(const kt_context *c);
/* Whether a call on stream may be timed: not while it is being captured. */
KT_INTERNAL int kt_context_may_time(const kt_context *c, kt_stream stream);
/* kt_context_launch of a race's pick p: where p holds a slot, timed by its
 * events and handed back to the race whether or not it launched; else
 * untimed, as kt_context_launch. */
KT_INTERNAL int kt_context_launch_raced(const kt_context *c, const kt_variant *v, const void *args, kt_stream stream,
                                        kt_race_pick *p);

/* ---- matmul.c ----------------------------------------------------------- */

KT_INTERNAL extern const kt_family_ops kt_matmul_ops;

/* May v serve a call on d, reading this B in place (device, and B's
 * alignment for its vector width; A, lda, C and ldc never matter)? */
KT_INTERNAL int kt_matmul_serves(const kt_variant *v, const kt_device_info *d, const void *B, long long ldb);
/* Does v's launcher stage this B into an aligned copy first (a float4
 * variant given a B it cannot read in place)? */
KT_INTERNAL int kt_matmul_stages(const kt_variant *v, const void *B, long long ldb);
/* May v serve a call with this B on d at all, staging B where it must
 * (kt_matmul_stage_rows, runtime/kt_variant.h)? */
KT_INTERNAL int kt_matmul_serves_staged(const kt_variant *v, const kt_device_info *d, const void *B, long long ldb,
                                        long long N, long long K);
/* Whether v is built for an M x N x K product (runtime/matmul.c): the
 * few-row, few-column and short-K kernels serve one corner each. */
KT_INTERNAL int kt_matmul_serves_shape(const kt_variant *v, long long M, long long N, long long K);

/* The candidates (registry indices, the model's pick first) that on-line
 * tuning would race for a call with this B and C, n at most; their count,
 * 0 where the model does not decide the call.  Races nothing (tools). */
KT_INTERNAL int kt_matmul_race_candidates(const kt_context *c, long long M, long long N, long long K, const void *B,
                                          long long ldb, const void *C, long long ldc, int n, int *variant);

/* The tuned matmul problem nearest M x N x K: least sum of squared
 * log-ratios.  Entries of other families are passed over; NULL when none. */
KT_INTERNAL const kt_tuned *kt_matmul_nearest(const kt_tuned *t, int n, long long M, long long N, long long K);

/* ---- gemm.c ------------------------------------------------------------- */
KT_INTERNAL extern const kt_family_ops kt_gemm_ops;
/* "f32", "tf32", "bf16", "f16": the type's name in variant names; "?" else. */
KT_INTERNAL const char *kt_gemm_type_name(int type);
/* Bytes of one input element of a kt_dtype (BF16, FP16: 2; FP32, TF32: 4). */
static inline int kt_gemm_elem_bytes(int type)
{
  return type == KT_BF16 || type == KT_F16 ? 2 : 4;
}
/* May v serve a gemm call of this input type (kt_dtype) on d? */
KT_INTERNAL int kt_gemm_serves(const kt_variant *v, const kt_device_info *d, int type);
/* The largest tensor-core problem (M N K multiply-adds) on which the tuner
 * times the family's CUDA-core kernel beside the tensor-core ones (gemm.c,
 * the family's fits): 512^3.  FP32 problems time it at every size. */
#define KT_GEMM_SIMT_TC_MACS (1LL << 27)
/* A gemm problem's layout dim (dim[3]): the input type and op pair in one
 * number, type * 4 + op_a * 2 + op_b. */
static inline long long kt_gemm_layout(int type, int op_a, int op_b)
{
  return type * 4LL + op_a * 2 + op_b;
}
/* The tuned gemm problem for a call of this layout nearest M x N x K: of
 * the same layout if any is tuned, else of the same type, else any (least
 * sum of squared log-ratios within each). */
KT_INTERNAL const kt_tuned *kt_gemm_nearest(const kt_tuned *t, int n, long long M, long long N, long long K,
                                            long long layout);
/* ---- hist.c ------------------------------------------------------------- */

KT_INTERNAL extern const kt_family_ops kt_hist_ops;

/* Shared memory one block of v needs on d for nbins bins (kt_hist_smem_bytes). */
KT_INTERNAL long long kt_hist_smem(const kt_variant *v, const kt_device_info *d, long long nbins);

/* May v serve nbins bins on d (its bins fit d's shared memory)? */
KT_INTERNAL int kt_hist_serves(const kt_variant *v, const kt_device_info *d, long long nbins);

/* The most bins v serves on d (INT_MAX when any number); 0 if it cannot run there. */
KT_INTERNAL long long kt_hist_max_nbins(const kt_variant *v, const kt_device_info *d);

/* The tuned histogram problem nearest a call: least log-ratio of nbins, then of n, then the larger nbins. */
KT_INTERNAL const kt_tuned *kt_hist_nearest(const kt_tuned *t, int n, long long nbins, long long nsamples);
/* The same among the problems whose winner serves nbins on d, when any does (hist.c says why). */
KT_INTERNAL const kt_tuned *kt_hist_nearest_serving(const kt_tuned *t, int n, long long nbins, long long nsamples,
                                                    const kt_device_info *d);

#ifdef __cplusplus
}
#endif

#endif
