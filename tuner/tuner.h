/* SPDX-License-Identifier: MIT */
/* tuner/tuner.h: the ktune CLI's commands, the tuner's families, its results
 * and its worker runner.
 *
 * Modules, one prefix each: main.c (the table of commands, and list and
 * explain), cli.c (kt_cli_: what the commands share), tune.c (kt_tune_:
 * `ktune tune`), worker.c (kt_worker_: `ktune __worker`), workers.c
 * (kt_workers_: running workers), result.c (kt_tune_result_), family.c
 * (kt_tune_family_: the table), results.c (kt_results_cli_: `ktune show`,
 * `export`, `import`), and one file per family: matmul.c (kt_tune_matmul_),
 * hist.c (kt_tune_hist_), gemm.c (kt_tune_gemm_).  measure.h has what checking and timing need
 * whatever the family.
 */
#ifndef KT_TUNER_H
#define KT_TUNER_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kt_internal.h"

/* ---- cli.c: what the commands share ------------------------------------ */

/* Every command: `--help` prints its usage on stdout and exits 0; `--json`,
 * where it is offered, prints one JSON document on stdout instead of
 * tables; a usage error exits 2 (KT_CLI_USAGE) with a message on stderr,
 * found before any GPU is touched; anything else that fails exits 1. */
#define KT_CLI_USAGE 2

/* Does argument a ask for help (-h, --help)? */
int kt_cli_is_help(const char *a);

/* A usage error of `ktune cmd`: the message on stderr, then where the
 * usage is; returns KT_CLI_USAGE. */
int kt_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The current device, if this build's kernels run on it: 0, or 1 after
 * saying why not on stderr (no GPU or driver; an unsupported GPU). */
int kt_cli_device(const char *cmd, kt_device_info *dev);

/* Can the database at path be read?  0, or 1 after saying why not on
 * stderr (missing, unreadable, another program's, newer, damaged). */
int kt_cli_check_db(const char *cmd, const char *path);

/* kt_open on the user database db (NULL: the default) with the library's
 * warnings on stderr: 0, or 1 after saying why not. */
int kt_cli_open(const char *cmd, const char *db, kt_context **ctx);

/* Read s, a whole decimal integer in lo..hi, into *out: 0, else -1. */
int kt_cli_integer(const char *s, long long lo, long long hi, long long *out);

/* JSON: s as a string (NULL as null); x as a number, null when not finite. */
void kt_cli_json_string(FILE *f, const char *s);
void kt_cli_json_number(FILE *f, double x);

/* ---- result.c ----------------------------------------------------------- */

/* One variant's outcome on one problem; m's strings point into the struct
 * once kt_tune_result_link has run (after any copy). */
typedef struct kt_tune_result {
  kt_measurement m;
  char variant[96], hash[24], status[16], reason[256];
} kt_tune_result;

/* A fresh result of v on p with this status and reason; numbers zero. */
void kt_tune_result_set(kt_tune_result *r, const kt_problem *p, const kt_variant *v, const char *status,
                        const char *reason);
/* Point r->m's strings at r's own buffers. */
void kt_tune_result_link(kt_tune_result *r);
/* The result of variant in rs[0..n) if it is ok, else NULL. */
const kt_tune_result *kt_tune_result_ok(const kt_tune_result *rs, int n, const char *variant);

/* ---- family.c: the tuner's families ------------------------------------- */

#define KT_TUNE_MAX_OPTIONS 4  /* options of `ktune tune` per family */
#define KT_TUNE_MAX_FAMILIES 8 /* entries of kt_tune_families */
#define KT_TUNE_HISTORY 3      /* measurements kept per key when a tune ends (kt_db_prune) */

/* An option of `ktune tune` that belongs to a family, e.g. --hist-n N. */
typedef struct kt_tune_option {
  const char *name;     /* "--hist-n" */
  const char *arg;      /* "N": what the usage line shows */
  const char *fallback; /* the value when the option is not given */
  const char *help;     /* what it means, one line for --help */
} kt_tune_option;

/* One problem (with its distribution) measured: a result per variant. */
typedef struct kt_tune_run {
  kt_problem problem;
  const kt_tune_result *results;
  int n;
} kt_tune_run;

/* What the tuner's shared modules (tune.c, worker.c, workers.c) know about
 * a family: they loop over kt_tune_families[] and call these, and never ask
 * which family they hold.  Each family's file defines its entry. */
typedef struct kt_tune_family {
  kt_family id; /* the runtime's family: kt_family_get(id) gives its key, parse and fits */

  /* ---- `ktune tune` ---- */
  /* Its options, up to a NULL name; the first is its problem list. */
  kt_tune_option options[KT_TUNE_MAX_OPTIONS + 1];
  /* The problems to tune, from the options' values (values[i] for
   * options[i]); the distributions of one problem come one after another.
   * Returns how many (at most max), or -1 with a message in err. */
  int (*problems)(const char *const *values, kt_problem *out, int max, char *err, size_t errlen);
  /* The summary table: its header, then a row per problem from the
   * problem's runs (one per distribution, in the order problems() gave
   * them) and its ranking t (t->count > 0); key is the problem's key. */
  void (*report_header)(const char *const *values);
  void (*report_row)(const char *key, const kt_tune_run *runs, int nruns, const kt_tuned *t);

  /* ---- `ktune __worker` ---- */
  /* Make problem p's inputs on dev from seed; NULL, with a message in err,
   * when they cannot be made. */
  void *(*setup)(const kt_device_info *dev, const kt_problem *p, uint64_t seed, char *err, size_t errlen);
  /* Why v cannot serve p on dev (its fits() said no), for the result. */
  void (*unfit)(const kt_variant *v, const kt_device_info *dev, const kt_problem *p, char *buf, size_t len);
  /* Check v on fresh inputs drawn from seed, then time it on the problem
   * (best_ms: the fastest so far, INFINITY for none) and fill r.  A CUDA
   * error leaves the status launch_failed, and the worker then ends. */
  void (*measure)(void *inputs, const kt_variant *v, uint64_t seed, double best_ms, kt_tune_result *r);
  void (*teardown)(void *inputs);

  /* ---- `ktune explain` ---- */
  const char *explain_args; /* the sizes it takes after the family's name: "M N K" */
  /* Read those sizes (args[0..nargs)) into *p: 0, or -1 with a message in err. */
  int (*explain_problem)(char *const *args, int nargs, kt_problem *p, char *err, size_t errlen);
  /* What kt_<family>_choice says of a call on p, with aligned stand-in pointers. */
  int (*explain)(kt_context *ctx, const kt_problem *p, kt_choice *out);
} kt_tune_family;

extern const kt_tune_family kt_tune_matmul; /* matmul.c */
extern const kt_tune_family kt_tune_hist;   /* hist.c */
extern const kt_tune_family kt_tune_gemm;   /* gemm.c */

extern const kt_tune_family *const kt_tune_families[];
extern const int kt_tune_family_count;
/* The tuner's entry for a runtime family; NULL when it has none. */
const kt_tune_family *kt_tune_family_get(kt_family id);
/* By name or long name, as kt_family_find takes them; NULL when none matches. */
const kt_tune_family *kt_tune_family_find(const char *name);

/* The next item of a comma-separated list into buf: 1, or 0 at the end of
 * the list (an empty list has no items), or -1 when the item does not fit
 * buf.  *list moves past the item and its comma. */
static inline int kt_tune_family_item(const char **list, char *buf, size_t len)
{
  if (!*list)
    return 0;
  const char *end = strchr(*list, ',');
  const size_t n = end ? (size_t)(end - *list) : strlen(*list);
  if (!end && n == 0)
    return 0;
  if (n >= len)
    return -1;
  memcpy(buf, *list, n);
  buf[n] = 0;
  /* After a comma comes one more item, an empty one where nothing follows
   * (the caller refuses it, as it does the one between two commas): a
   * trailing comma is a mistake, not the end of the list. */
  *list = !end ? NULL : end[1] ? end + 1 : n ? end : NULL;
  return 1;
}

/* ---- tune.c ------------------------------------------------------------- */

int kt_tune_main(int argc, char **argv); /* ktune tune ... */

#define KT_TUNE_MAX_GPUS 64 /* GPUs one tune spreads over */

typedef struct kt_tune_opts {
  int help; /* --help: print the usage, tune nothing */
  int json; /* --json: the summary as JSON on stdout */
  const char *db;
  int on[KT_TUNE_MAX_FAMILIES]; /* tune kt_tune_families[f]? */
  const char *values[KT_TUNE_MAX_FAMILIES][KT_TUNE_MAX_OPTIONS];
  const char *variants; /* comma-separated globs, or NULL for all */
  double timeout_s;
  unsigned long long seed;
  const char *gpus; /* --gpus: "all" or ordinals "0,1"; NULL = all */
  int fresh;        /* --fresh: measure again what the database holds */
  int misses;       /* --misses: only the problems recorded as misses (o->db's misses file) */
} kt_tune_opts;

/* Read `ktune tune`'s arguments (argv[2]...) into o: 0, or 2 after a
 * message on stderr (an unknown option, a missing value, a family or
 * a --variants pattern that names nothing in this build). */
int kt_tune_parse_args(int argc, char **argv, kt_tune_opts *o);

/* The GPUs a tune uses, by their index in gpus[0..n) (which are the
 * visible GPUs, gpus[i].ordinal == i): `list` is --gpus, "all" or NULL for
 * every GPU of the chip (kt_device_chip) of GPU `current`, or ordinals
 * ("0,2"), which must be of one chip.  Fills chosen[] (room for n) and
 * returns how many, or -1 with a message in err. */
int kt_tune_select_gpus(const char *list, const kt_device_info *gpus, int n, int current, int *chosen, char *err,
                        size_t errlen);

/* The tune itself, once the GPUs are known and the database (o->db) is
 * open: the problems are each family's list, and where that list is the
 * default, the misses recorded for these GPUs beside the database
 * (runtime/misses.c), which are then removed from there; with o->misses,
 * the misses alone.  Measure what db does not hold already (everything with o->fresh)
 * on gpus[0..n) with workers running `worker` (NULL: this program), record,
 * rank and print the tables (o->json: one JSON object).  0, or 1 when the
 * database could not be written.  Tests pass described GPUs and a fake
 * worker. */
int kt_tune_gpus(const kt_tune_opts *o, const kt_device_info *gpus, int n, kt_db *db, const char *worker);

/* Is the variant named name selected by globs, comma-separated shell
 * patterns (fnmatch(3)) that each match whole names?  An exact name is a
 * pattern too.  NULL selects all. */
int kt_tune_selected(const char *globs, const char *name);

/* ---- results.c: reading databases, and moving results as text ----------- */

/* ktune show / export / import; argc and argv as main's (argv[1] is the
 * command).  0, 1 on failure, 2 for bad arguments; --help prints the usage
 * on stdout. */
int kt_results_cli_show(int argc, char **argv);
int kt_results_cli_export(int argc, char **argv);
int kt_results_cli_import(int argc, char **argv);

/* ---- worker.c ----------------------------------------------------------- */

int kt_worker_main(int argc, char **argv); /* ktune __worker ... */

/* ---- workers.c --------------------------------------------------------- */

/* Workers started ahead, one per GPU, their CUDA context made while the
 * problem before is measured; each waits for a job and does nothing on
 * the GPU until it has one.  The first worker of a problem is the spare
 * (taking it starts the next); later ones, after a crash, start then.
 * kt_workers_spares_free ends those left.  exe: the worker program (NULL:
 * this program), which must be the kt_workers_opts.exe it serves. */
typedef struct kt_workers_spares kt_workers_spares;
kt_workers_spares *kt_workers_spares_new(const char *exe);
void kt_workers_spares_free(kt_workers_spares *s);

typedef struct kt_workers_opts {
  const char *exe;         /* worker program; NULL = this program (/proc/self/exe) */
  double timeout_s;        /* per variant, from its START line */
  unsigned long long seed; /* inputs' seed, passed to the worker */
  /* Called with the variant now in flight (done NULL), and once per
   * result as soon as it is final (variant NULL, done the result), on the
   * GPU `device` measured on; so a caller can record each result as it
   * comes, and a kill loses at most the one in flight.  May be NULL. */
  void (*event)(void *user, const char *key, const char *variant, int device, const kt_tune_result *done);
  void *user;
  int device;                /* the CUDA ordinal the worker measures on */
  kt_workers_spares *spares; /* NULL: each worker starts when it is needed */
} kt_workers_opts;

/* Measure vs[0..n) on problem p (key names it in events) in worker
 * processes; out[i] gets vs[i]'s result, always, whatever the workers do.
 * Leaves no child process behind. */
void kt_workers_run(const kt_problem *p, const char *key, const kt_variant **vs, int n, const kt_workers_opts *o,
                    kt_tune_result *out);

/* kt_workers_run over several GPUs at once: vs[i] is measured on GPU
 * devices[i] (o->device is ignored), each GPU's variants one after another
 * in their order here, the GPUs side by side.  out[i] gets vs[i]'s result,
 * always; o->event may be called from several threads at once. */
void kt_workers_run_spread(const kt_problem *p, const char *key, const kt_variant **vs, const int *devices, int n,
                           const kt_workers_opts *o, kt_tune_result *out);

#endif
