/* SPDX-License-Identifier: MIT */
/* tuner/cli.c: what the ktune commands share (kt_cli_): usage errors, the
 * device and database checks with a message for each cause, and JSON. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tuner.h"

int kt_cli_is_help(const char *a)
{
  return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0;
}

int kt_cli_usage_error(const char *cmd, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "ktune %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nRun 'ktune %s --help' for its usage.\n", cmd);
  return KT_CLI_USAGE;
}

int kt_cli_device(const char *cmd, kt_device_info *dev)
{
  char err[512];
  int rc = kt_device_query(-1, dev, err, sizeof err);
  if (rc == KT_OK)
    rc = kt_device_supported(dev, err, sizeof err);
  if (rc == KT_OK)
    return 0;
  fprintf(stderr, "ktune %s: %s (%s)\n", cmd, kt_strerror(rc), err);
  return 1;
}

int kt_cli_check_db(const char *cmd, const char *path)
{
  kt_db *db;
  char err[512] = "";
  int rc = kt_db_open(&db, path, KT_DB_READ, err, sizeof err);
  if (rc == KT_OK) {
    kt_db_close(db);
    return 0;
  }
  fprintf(stderr, "ktune %s: %s: %s (%s)\n", cmd, path, kt_strerror(rc), err);
  if (rc == KT_ERR_DB_MISSING)
    fprintf(stderr, "'ktune tune' makes one; 'ktune tune --help' says where.\n");
  return 1;
}

int kt_cli_integer(const char *s, long long lo, long long hi, long long *out)
{
  char *end;
  errno = 0;
  const long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

/* The library's messages while a command runs: warnings and errors. */
static void log_to_stderr(int level, const char *message, void *user)
{
  (void)level, (void)user;
  fprintf(stderr, "%s\n", message);
}

int kt_cli_open(const char *cmd, const char *db, kt_context **ctx)
{
  kt_options o = kt_default_options();
  o.db_path = db;
  if (!getenv("KTUNE_LOG")) /* else the library logs as KTUNE_LOG says */
    o.log = log_to_stderr;
  int rc = kt_open(ctx, &o);
  if (rc == KT_OK) {
    kt_context_keep_no_misses(*ctx); /* a tool's questions are no application's calls */
    return 0;
  }
  fprintf(stderr, "ktune %s: %s\n", cmd, kt_strerror(rc));
  return 1;
}

void kt_cli_json_string(FILE *f, const char *s)
{
  if (!s) {
    fputs("null", f);
    return;
  }
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; ++p) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

void kt_cli_json_number(FILE *f, double x)
{
  if (isfinite(x))
    fprintf(f, "%.9g", x);
  else
    fputs("null", f);
}
