/* SPDX-License-Identifier: MIT */
/* tuner/main.c: the ktune command line.
 *
 *   ktune tune [...]              benchmark every variant on this GPU (make tune)
 *   ktune list [FAMILY]           the variants in this build, with parameters
 *                                 (FAMILY: matmul, hist or histogram)
 *   ktune show [--db PATH]        the tuned winners for this GPU
 *   ktune explain matmul M N K    which variant a call would use, and why
 *   ktune explain hist NBINS [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kt_internal.h"
#include "registry.h"
#include "tuner.h"

/* The variants of one family (by name or long name), or of all. */
static int list(const char *family)
{
  const kt_family_ops *only = family ? kt_family_find(family) : NULL;
  if (family && !only) {
    fprintf(stderr, "ktune list: unknown family '%s'\n", family);
    return 2;
  }
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (only && v->family != only->id)
      continue;
    printf("%-36s %-6s %-6s threads %4d cluster %2d smem %6d", v->name, kt_family_name(v->family), v->algo, v->threads,
           v->cluster, v->smem_static + v->smem_dynamic);
    for (int p = 0; p < v->nparams; ++p)
      printf(" %s=%s", v->params[p].key, v->params[p].value);
    printf("\n");
  }
  return 0;
}

static const char *db_arg(int argc, char **argv)
{
  for (int i = 2; i + 1 < argc; ++i)
    if (!strcmp(argv[i], "--db"))
      return argv[i + 1];
  return NULL;
}

static int open_ctx(kt_context **ctx, int argc, char **argv)
{
  kt_options o = kt_default_options();
  o.db_path = db_arg(argc, argv);
  int rc = kt_open(ctx, &o);
  if (rc != KT_OK)
    fprintf(stderr, "ktune: %s\n", kt_strerror(rc));
  return rc;
}

static int show(int argc, char **argv)
{
  kt_device_info dev;
  char err[512];
  int rc = kt_device_query(-1, &dev, err, sizeof err);
  if (rc != KT_OK) {
    fprintf(stderr, "ktune: %s (%s)\n", kt_strerror(rc), err);
    return 1;
  }
  const char *path = db_arg(argc, argv);
  char user_db[1024];
  if (!path && kt_results_user_path(user_db, sizeof user_db) == KT_OK)
    path = user_db;
  if (!path) {
    fprintf(stderr, "ktune: no home folder for the user database: set KTUNE_DB or pass --db\n");
    return 1;
  }
  kt_db *db;
  if ((rc = kt_db_open(&db, path, KT_DB_READ, err, sizeof err)) != KT_OK) {
    fprintf(stderr, "ktune: %s: %s: %s\n", path, kt_strerror(rc), err);
    return 1;
  }
  kt_tuned *t;
  int n;
  rc = kt_db_load(db, dev.fingerprint, kt_registry_generator_version, &t, &n, err, sizeof err);
  kt_db_close(db);
  if (rc != KT_OK) {
    fprintf(stderr, "ktune: %s\n", err);
    return 1;
  }
  printf("%s: %d tuned problems in %s\n", dev.fingerprint, n, path);
  for (int i = 0; i < n; ++i) {
    printf("%-7s %-26s %8.3f ms ", kt_family_name(t[i].problem.family), t[i].key, t[i].best_ms);
    for (int j = 0; j < t[i].count && j < 3; ++j)
      printf("%s%s", j ? ", " : "", t[i].ranked[j]->name);
    printf("%s\n", t[i].count > 3 ? ", ..." : "");
  }
  free(t);
  return 0;
}

static int explain(int argc, char **argv)
{
  if (argc < 4)
    return 2;
  kt_context *ctx;
  if (open_ctx(&ctx, argc, argv) != KT_OK)
    return 1;
  kt_choice c;
  int rc;
  /* Aligned stand-in pointers: the choice looks only at their alignment. */
  const float *p = (const float *)(uintptr_t)0x100000;
  if (!strcmp(argv[2], "matmul") && argc >= 6) {
    long long M = atoll(argv[3]), N = atoll(argv[4]), K = atoll(argv[5]);
    rc = kt_matmul_choice(ctx, M, N, K, p, K, p, N, p, N, &c);
  } else if (!strcmp(argv[2], "hist")) {
    long long nbins = atoll(argv[3]), n = argc >= 5 && argv[4][0] != '-' ? atoll(argv[4]) : 1ll << 28;
    rc = kt_histogram_choice(ctx, (const int32_t *)p, (uint64_t)n, (const uint32_t *)p, nbins, &c);
  } else {
    kt_close(ctx);
    return 2;
  }
  if (rc == KT_OK)
    printf("%s\n  %s\n", c.variant, c.reason);
  else
    fprintf(stderr, "ktune: %s\n", kt_strerror(rc));
  kt_close(ctx);
  return rc == KT_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
  const char *cmd = argc > 1 ? argv[1] : "";
  int rc = 2;
  if (!strcmp(cmd, "tune"))
    return kt_tune_main(argc, argv);
  if (!strcmp(cmd, "__worker"))
    return kt_worker_main(argc - 1, argv + 1);
  if (!strcmp(cmd, "list"))
    return list(argc > 2 ? argv[2] : NULL);
  if (!strcmp(cmd, "show"))
    return show(argc, argv);
  if (!strcmp(cmd, "explain"))
    rc = explain(argc, argv);
  if (rc == 2)
    fprintf(stderr, "usage: ktune tune [options] | list [matmul|hist|histogram] | show [--db PATH] |\n"
                    "       explain matmul M N K [--db PATH] | explain hist NBINS [N] [--db PATH]\n"
                    "Run 'ktune tune --help' for the tuner's options.\n");
  return rc;
}
