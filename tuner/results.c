/* SPDX-License-Identifier: MIT */
/* tuner/results.c: `ktune show`, `ktune export` and `ktune import`: reading
 * tuning databases, and moving results between them as text
 * (kt_results_cli_).
 *
 *   ktune show [--db PATH] [--device FINGERPRINT | --all] [--json]
 *   ktune export [--db PATH] [--device FINGERPRINT | --all] [--json]
 *   ktune import FILE... [--db PATH]
 *
 * None of them needs a GPU.  With one, a command that names no device
 * means this GPU; without one, show shows every device and export asks
 * which.  The database work (the JSON text form included) is db.c's; this
 * file reads arguments, opens files and prints.  The conventions are the
 * CLI's (cli.c): --help on stdout and exit 0, bad arguments exit 2 with a
 * message (kt_cli_usage_error), checked before any GPU or file is touched.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kt_internal.h"
#include "registry.h"
#include "tuner.h"

/* The options the three commands share; each takes the ones its usage names. */
typedef struct args {
  const char *db;
  const char *device; /* --device FINGERPRINT */
  int all;            /* --all */
  int json;
  int help;
  const char *files[256]; /* import's FILEs */
  int nfiles;
} args;

/* argv[2]... into a: 0, or 2 (bad arguments) after a message on stderr.
 * `takes_files`: free arguments are files (import), else an error.  A
 * --help anywhere wins over the other arguments. */
static int parse(int argc, char **argv, int takes_files, args *a)
{
  memset(a, 0, sizeof *a);
  const int max_files = (int)(sizeof a->files / sizeof a->files[0]);
  for (int i = 2; i < argc; ++i)
    if (kt_cli_is_help(argv[i])) {
      a->help = 1;
      return 0;
    }
  for (int i = 2; i < argc; ++i) {
    const char *s = argv[i], *v = i + 1 < argc && argv[i + 1][0] ? argv[i + 1] : NULL;
    const char **value = !strcmp(s, "--db") ? &a->db : !strcmp(s, "--device") && !takes_files ? &a->device : NULL;
    if (!strcmp(s, "--json") && !takes_files)
      a->json = 1;
    else if (!strcmp(s, "--all") && !takes_files)
      a->all = 1;
    else if (value && v) {
      *value = v;
      ++i;
    } else if (value) {
      return kt_cli_usage_error(argv[1], "%s needs a %s", s, value == &a->db ? "path" : "fingerprint");
    } else if (s[0] == '-') {
      return kt_cli_usage_error(argv[1], "unknown option '%s'", s);
    } else if (!takes_files) {
      return kt_cli_usage_error(argv[1], "unknown argument '%s'", s);
    } else if (a->nfiles == max_files) {
      return kt_cli_usage_error(argv[1], "too many files (%d at most), at '%s'", max_files, s);
    } else {
      a->files[a->nfiles++] = s;
    }
  }
  if (a->all && a->device)
    return kt_cli_usage_error(argv[1], "--device and --all exclude each other");
  return 0;
}

/* The user database, unless --db names a file: 0, or 2 with a message. */
static int db_path(const char *cmd, const args *a, char *buf, size_t len)
{
  if (a->db)
    return snprintf(buf, len, "%s", a->db) < (int)len ? 0 : kt_cli_usage_error(cmd, "--db: the path is too long");
  if (kt_results_user_path(buf, len) == KT_OK)
    return 0;
  return kt_cli_usage_error(cmd, "no home folder for the user database: set KTUNE_DB or pass --db");
}

/* This GPU, if there is one: 1 with dev filled, else 0. */
static int present_gpu(kt_device_info *dev)
{
  char err[256];
  return kt_device_query(-1, dev, err, sizeof err) == KT_OK;
}

/* The user database's default path, for help texts. */
static const char *default_db(void)
{
  static char path[1024];
  if (kt_results_user_path(path, sizeof path) != KT_OK)
    snprintf(path, sizeof path, "(none: no home folder; set KTUNE_DB)");
  return path;
}

/* ---- show ----------------------------------------------------------------- */

static void show_usage(void)
{
  printf("usage: ktune show [--db PATH] [--device FINGERPRINT | --all] [--json]\n"
         "\n"
         "Per device in a tuning database: its measurements (current, and stale: from other sources or\n"
         "generator versions, never dispatched), its ranked problems and their winners.  No GPU needed.\n"
         "\n"
         "  --db PATH       that file; default: the user database ($KTUNE_DB, else\n"
         "                  %s), then the system layer (the shipped results)\n"
         "  --device FP     that device only (a fingerprint, as show --all prints them; none of\n"
         "                  its rows in any file shown: exit 1); default: this GPU, or without a\n"
         "                  GPU every device\n"
         "  --all           every device; default: off\n"
         "  --json          one JSON object instead of the text: generator_version, and files:\n"
         "                  [{layer, path, status, devices: [{fingerprint, name, measurements, current,\n"
         "                  stale, ranked_problems, winners: [{family, problem, variant, time_ms}]}]}]\n"
         "  -h, --help      print this help and exit\n",
         default_db());
}

/* One device of a file, as text or as a JSON object. */
static void show_device(const args *a, kt_db *db, const kt_db_device *d, const char *note, int first)
{
  kt_tuned *t = NULL;
  int n = 0;
  char err[512];
  if (kt_db_load(db, d->fingerprint, kt_registry_generator_version, &t, &n, err, sizeof err) != KT_OK)
    n = 0;
  if (a->json) {
    printf("%s\n    {\"fingerprint\": ", first ? "" : ",");
    kt_cli_json_string(stdout, d->fingerprint);
    printf(", \"name\": ");
    kt_cli_json_string(stdout, d->name);
    printf(", \"cc\": %d, \"sm_count\": %d, \"mem_bytes\": %llu, \"measurements\": %lld, \"current\": %lld, "
           "\"stale\": %lld, \"ranked_problems\": %d,",
           d->cc, d->sm_count, d->mem_bytes, d->measurements, d->current, d->stale, n);
    if (note) {
      printf(" \"note\": ");
      kt_cli_json_string(stdout, note);
      printf(",");
    }
    printf("\n     \"winners\": [");
    for (int i = 0; i < n; ++i) {
      printf("%s\n      {\"family\": \"%s\", \"problem\": ", i ? "," : "", kt_family_name(t[i].problem.family));
      kt_cli_json_string(stdout, t[i].key);
      printf(", \"variant\": ");
      kt_cli_json_string(stdout, t[i].ranked[0]->name);
      printf(", \"time_ms\": %.6g}", t[i].best_ms);
    }
    printf("]}");
  } else {
    printf("  %s%s%s\n", d->fingerprint, note ? "  " : "", note ? note : "");
    printf("    %lld measurements: %lld current, %lld stale (other sources or generator: never dispatched); "
           "%d ranked problems\n",
           d->measurements, d->current, d->stale, n);
    for (int i = 0; i < n; ++i) {
      printf("    %-7s %-26s %9.3f ms  ", kt_family_name(t[i].problem.family), t[i].key, t[i].best_ms);
      for (int j = 0; j < t[i].count && j < 3; ++j)
        printf("%s%s", j ? ", " : "", t[i].ranked[j]->name);
      printf("%s\n", t[i].count > 3 ? ", ..." : "");
    }
  }
  free(t);
}

/* One file, the layer "user", "system" or "file" (--db): 0 when it was
 * read or is a missing default layer, else 1; *shown_out counts the devices
 * whose rows it showed. */
static int show_file(const args *a, const char *layer, const char *path, int missing_ok, const kt_device_info *gpu,
                     int first, int *shown_out)
{
  kt_db *db = NULL;
  char err[1024] = "";
  /* The full check: show is where a user asks whether a file is sound. */
  int rc = path ? kt_db_open(&db, path, KT_DB_CHECK, err, sizeof err) : KT_ERR_DB_MISSING;
  const char *status = rc == KT_OK ? "ok" : rc == KT_ERR_DB_MISSING ? "missing" : kt_strerror(rc);
  kt_db_device *d = NULL;
  int nd = 0;
  if (rc == KT_OK && (rc = kt_db_devices(db, kt_registry_generator_version, &d, &nd, err, sizeof err)) != KT_OK)
    status = kt_strerror(rc);
  if (a->json) {
    printf("%s\n  {\"layer\": \"%s\", \"path\": ", first ? "" : ",", layer);
    kt_cli_json_string(stdout, path ? path : "");
    printf(", \"status\": ");
    kt_cli_json_string(stdout, status);
    if (rc != KT_OK && err[0]) {
      printf(", \"error\": ");
      kt_cli_json_string(stdout, err);
    }
    printf(", \"devices\": [");
  } else if (rc == KT_OK) {
    printf("%s%sdatabase %s\n", strcmp(layer, "file") ? layer : "", strcmp(layer, "file") ? " " : "", path);
  } else if (rc == KT_ERR_DB_MISSING && missing_ok) {
    printf("%s database %s: none\n", layer, path ? path : "(none)");
  } else {
    fprintf(stderr, "ktune show: %s: %s: %s\n", path, kt_strerror(rc), err);
  }
  /* Which devices: --device, --all, else this GPU's (or, failing its own
   * rows, those of the same chip that serve it), else all. */
  char same[sizeof d->fingerprint] = "";
  const char *want = a->device ? a->device : !a->all && gpu ? gpu->fingerprint : NULL;
  if (rc == KT_OK && want && gpu && !a->device) {
    int exact = 0;
    for (int i = 0; i < nd; ++i)
      exact |= strcmp(d[i].fingerprint, want) == 0;
    char chip[sizeof gpu->fingerprint];
    kt_device_chip(gpu, chip, sizeof chip);
    if (!exact && kt_db_same_chip(db, chip, kt_registry_generator_version, same, sizeof same) == KT_OK)
      want = same;
  }
  int shown = 0;
  for (int i = 0; rc == KT_OK && i < nd; ++i)
    if (!want || strcmp(d[i].fingerprint, want) == 0)
      show_device(a, db, &d[i], want == same ? "(same chip: serves this GPU)" : NULL, shown++ == 0);
  if (rc == KT_OK && shown == 0 && !a->json)
    printf("  no rows for %s\n", want ? want : "any device");
  *shown_out += shown;
  if (a->json)
    printf("]}");
  free(d);
  kt_db_close(db);
  return rc == KT_OK || (rc == KT_ERR_DB_MISSING && missing_ok) ? 0 : 1;
}

int kt_results_cli_show(int argc, char **argv)
{
  args a;
  int rc = parse(argc, argv, 0, &a);
  if (rc != 0)
    return rc;
  if (a.help) {
    show_usage();
    return 0;
  }
  char user[1024], sys[1024];
  /* No home folder is no usage error here: the system layer is still worth
   * showing, and show reads only (tune, which writes, stops there). */
  int have_user;
  if (a.db) {
    if (db_path("show", &a, user, sizeof user) != 0)
      return 2;
    have_user = 1;
  } else if (!(have_user = kt_results_user_path(user, sizeof user) == KT_OK))
    fprintf(stderr, "ktune show: no home folder for the user database (set KTUNE_DB or pass --db); the system "
                    "database alone follows\n");
  sys[0] = 0; /* the system layer's path, where it would be even when it is not there */
  if (!a.db)
    kt_results_system_path(NULL, sys, sizeof sys);
  kt_device_info gpu;
  const int has_gpu = !a.all && !a.device && present_gpu(&gpu);
  if (a.json)
    printf("{\"generator_version\": \"%s\", \"files\": [", kt_registry_generator_version);
  int shown = 0;
  rc = show_file(&a, a.db ? "file" : "user", have_user ? user : NULL, !a.db, has_gpu ? &gpu : NULL, 1, &shown);
  if (!a.db)
    rc |= show_file(&a, "system", sys[0] ? sys : NULL, 1, has_gpu ? &gpu : NULL, 0, &shown);
  if (a.json)
    printf("]}\n");
  /* A device named that no file read holds is a mistake (a typo, another
   * machine's name), as export says too: exit 1. */
  if (rc == 0 && a.device && shown == 0) {
    fprintf(stderr, "ktune show: no device '%s' in %s (ktune show --all lists them)\n", a.device,
            a.db ? "this file" : "these databases");
    rc = 1;
  }
  return rc;
}

/* ---- export --------------------------------------------------------------- */

static void export_usage(void)
{
  printf("usage: ktune export [--db PATH] [--device FINGERPRINT | --all] [--json]\n"
         "\n"
         "Write a device's results (devices, measurements, rankings, sources) to stdout as JSON, one\n"
         "row per line, in a stable order: for ktune import, and for shipping in tuning-db/shipped/.\n"
         "\n"
         "  --db PATH       read that file; default: the user database ($KTUNE_DB, else\n"
         "                  %s)\n"
         "  --device FP     that device; default: this GPU (ktune show --all lists them)\n"
         "  --all           every device in the file; default: off\n"
         "  --json          accepted: the output is always JSON\n"
         "  -h, --help      print this help and exit\n",
         default_db());
}

int kt_results_cli_export(int argc, char **argv)
{
  args a;
  int rc = parse(argc, argv, 0, &a);
  if (rc != 0)
    return rc;
  if (a.help) {
    export_usage();
    return 0;
  }
  char path[1024], err[1024];
  if (db_path("export", &a, path, sizeof path) != 0)
    return 2;
  kt_device_info gpu;
  const char *device = a.all ? NULL : a.device;
  if (!a.all && !a.device) {
    if (!present_gpu(&gpu))
      return kt_cli_usage_error("export", "no GPU here: name a device with --device FINGERPRINT or take all with "
                                          "--all (ktune show --all lists them)");
    device = gpu.fingerprint;
  }
  kt_db *db = NULL;
  /* The full check: a file that import would call damaged is not exported as sound. */
  if ((rc = kt_db_open(&db, path, KT_DB_CHECK, err, sizeof err)) != KT_OK) {
    fprintf(stderr, "ktune export: %s: %s: %s\n", path, kt_strerror(rc), err);
    return 1;
  }
  /* Into memory first: stdout gets the whole text or nothing. */
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  rc = mem ? kt_db_export(db, device, mem, err, sizeof err) : KT_ERR_NO_MEMORY;
  if (mem)
    fclose(mem);
  kt_db_close(db);
  if (rc != KT_OK) {
    fprintf(stderr, "ktune export: %s: %s\n", path, rc == KT_ERR_NO_MEMORY ? kt_strerror(rc) : err);
    free(text);
    return 1;
  }
  rc = fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : 1;
  if (rc)
    fprintf(stderr, "ktune export: writing: %s\n", strerror(errno));
  free(text);
  return rc;
}

/* ---- import --------------------------------------------------------------- */

static void import_usage(void)
{
  printf("usage: ktune import FILE... [--db PATH]\n"
         "\n"
         "Merge exports (ktune export) into a tuning database, all files or none, and rank their\n"
         "problems again.  Measurements it holds already are not added twice.  A file that is not a\n"
         "ktune export, is of a newer format or is damaged is refused, and nothing is written.\n"
         "\n"
         "  FILE...         the exports to merge, one at least\n"
         "  --db PATH       that file, made when missing; default: the user database ($KTUNE_DB,\n"
         "                  else %s)\n"
         "  -h, --help      print this help and exit\n",
         default_db());
}

/* The whole file, NUL-terminated; NULL with a message in err. */
static char *read_text(const char *path, char *err, size_t errlen)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) { /* fopen opens a folder; reading it fails */
    fclose(f);
    snprintf(err, errlen, "%s: is a folder, not an export", path);
    return NULL;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (n + 1 >= cap) {
      char *nb = realloc(buf, cap = cap ? 2 * cap : 65536);
      if (!nb) {
        free(buf);
        fclose(f);
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
      }
      buf = nb;
    }
    got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
  } while (got > 0);
  const int bad = ferror(f);
  fclose(f);
  if (bad) {
    snprintf(err, errlen, "%s: read error", path);
    free(buf);
    return NULL;
  }
  buf[n] = 0;
  return buf;
}

int kt_results_cli_import(int argc, char **argv)
{
  args a;
  int rc = parse(argc, argv, 1, &a);
  if (rc != 0)
    return rc;
  if (a.help) {
    import_usage();
    return 0;
  }
  if (a.nfiles == 0)
    return kt_cli_usage_error("import", "no FILE to import");
  char path[1024], err[1024];
  if (db_path("import", &a, path, sizeof path) != 0)
    return 2;
  char *docs[sizeof a.files / sizeof a.files[0]] = {NULL};
  for (int i = 0; i < a.nfiles && rc == 0; ++i)
    if (!(docs[i] = read_text(a.files[i], err, sizeof err)))
      rc = 1;
  /* Check the files before the database is opened, which would create it. */
  if (rc == 0 && (rc = kt_db_import_check(a.nfiles, a.files, (const char *const *)docs, err, sizeof err)) != KT_OK)
    rc = 1;
  kt_db *db = NULL;
  if (rc == 0) {
    if (!a.db)
      kt_results_make_parent_dirs(path);
    int orc = kt_db_open(&db, path, KT_DB_WRITE, err, sizeof err);
    if (orc != KT_OK) {
      fprintf(stderr, "ktune import: %s: %s: %s\nThe file was not modified.\n", path, kt_strerror(orc), err);
      rc = 1;
      err[0] = 0;
    }
  }
  kt_db_import_counts c;
  if (rc == 0 && kt_db_import(db, a.nfiles, a.files, (const char *const *)docs, &c, err, sizeof err) != KT_OK)
    rc = 1;
  kt_db_close(db);
  for (int i = 0; i < a.nfiles; ++i)
    free(docs[i]);
  if (rc != 0) {
    if (err[0])
      fprintf(stderr, "ktune import: %s\nNothing was imported.\n", err);
    return rc;
  }
  printf("ktune import: %d file%s into %s: %d measurements added (%d held already), %d devices added, "
         "%d problems ranked\n",
         c.files, c.files == 1 ? "" : "s", path, c.measurements, c.duplicates, c.devices, c.ranked);
  return 0;
}
