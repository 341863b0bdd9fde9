/* tuner/tuner.h: the ktune CLI's commands and its worker runner. */
#ifndef KT_TUNER_H
#define KT_TUNER_H

#include "kt_internal.h"

int kt_tune_main(int argc, char **argv);   /* ktune tune ... */
int kt_worker_main(int argc, char **argv); /* ktune __worker ... */

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

/* ---- workers.c --------------------------------------------------------- */

typedef struct kt_workers_opts {
  const char *exe;         /* worker program; NULL = this program (/proc/self/exe) */
  double timeout_s;        /* per variant, from its START line */
  unsigned long long seed; /* inputs' seed, passed to the worker */
  /* Called with the variant now in flight (finished 0), and once per
   * recorded result (variant NULL, finished 1).  May be NULL. */
  void (*event)(void *user, const char *key, const char *variant, int finished);
  void *user;
} kt_workers_opts;

/* Measure vs[0..n) on problem p (key names it in events) in worker
 * processes; out[i] gets vs[i]'s result, always, whatever the workers do.
 * Leaves no child process behind. */
void kt_workers_run(const kt_problem *p, const char *key, const kt_variant **vs, int n, const kt_workers_opts *o,
                    kt_tune_result *out);

#endif
