/* SPDX-License-Identifier: MIT */
/* tuner/main.c: the ktune command line: its table of commands, and the
 * small commands (list, explain); show, export and import are results.c's.
 *
 *   ktune tune [OPTIONS]              check and time every variant on this GPU (make tune)
 *   ktune list [FAMILY]               the variants in this build, with parameters
 *   ktune show [--db PATH] [...]      what a tuning database holds, per device (results.c)
 *   ktune export [...]                a device's results as JSON text (results.c)
 *   ktune import FILE... [--db PATH]  merge exports into a database (results.c)
 *   ktune explain FAMILY SIZE...      which variant a call would use, and why
 *
 * Every command takes --help; list, show, explain and tune take --json
 * (tuner.h, cli.c: the conventions).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kt_internal.h"
#include "registry.h"
#include "tuner.h"

/* ---- ktune list ---------------------------------------------------------- */

/* "matmul, hist (histogram)": the families, for help texts. */
static const char *family_names(void)
{
  static char buf[256];
  size_t n = 0;
  buf[0] = 0;
  for (int f = 0; f < kt_family_count && n < sizeof buf; ++f) {
    const kt_family_ops *ops = kt_families[f];
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", f ? ", " : "", ops->name);
    if (strcmp(ops->long_name, ops->name) && n < sizeof buf)
      n += (size_t)snprintf(buf + n, sizeof buf - n, " (%s)", ops->long_name);
  }
  return buf;
}

/* The name of the build target of compute capability cc. */
static const char *target_name(int cc)
{
  for (int i = 0; i < kt_registry_target_count; ++i)
    if (kt_registry_targets[i].cc == cc)
      return kt_registry_targets[i].name;
  return "?";
}

/* Variants, each counted once whatever its targets. */
static int variant_count(void)
{
  int n = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    int j = 0;
    while (j < i && strcmp(kt_registry[j].name, kt_registry[i].name) != 0)
      ++j;
    n += j == i;
  }
  return n;
}

static void list_usage(void)
{
  printf("usage: ktune list [--json] [FAMILY]\n"
         "\n"
         "The kernel variants in this build, with their parameters.\n"
         "\n"
         "  FAMILY      only this family's variants: %s; default: every family's\n"
         "  --json      one JSON object instead of the table: generator, target (the build's\n"
         "              targets), and variants: [{name, family, algo, target, threads, cluster, smem,\n"
         "              min_cc, params: {KEY: VALUE}}]\n"
         "One row per variant and target: a variant built for several targets (ARCHS) has a row\n"
         "for each, and one that only a newer target keeps (sm_90's clusters) has only its own.\n"
         "  -h, --help  print this help and exit\n",
         family_names());
}

static int list(int argc, char **argv)
{
  const char *family = NULL;
  int json = 0;
  for (int i = 2; i < argc; ++i) {
    if (kt_cli_is_help(argv[i])) {
      list_usage();
      return 0;
    }
    if (!strcmp(argv[i], "--json"))
      json = 1;
    else if (argv[i][0] == '-')
      return kt_cli_usage_error("list", "unknown option '%s'", argv[i]);
    else if (family)
      return kt_cli_usage_error("list", "one family at most ('%s', then '%s')", family, argv[i]);
    else
      family = argv[i];
  }
  const kt_family_ops *only = family ? kt_family_find(family) : NULL;
  if (family && !only)
    return kt_cli_usage_error("list", "unknown family '%s'", family);
  if (json) {
    printf("{\"generator\": ");
    kt_cli_json_string(stdout, kt_registry_generator_version);
    printf(", \"target\": ");
    kt_cli_json_string(stdout, kt_registry_target);
    printf(", \"variants\": [");
  }
  int n = 0;
  for (int i = 0; i < kt_registry_count; ++i) {
    const kt_variant *v = &kt_registry[i];
    if (only && v->family != only->id)
      continue;
    if (!json) {
      printf("%-36s %-6s %-6s %-6s threads %4d cluster %2d smem %6d", v->name, kt_family_name(v->family), v->algo,
             target_name(v->target), v->threads, v->cluster, v->smem_static + v->smem_dynamic);
      for (int p = 0; p < v->nparams; ++p)
        printf(" %s=%s", v->params[p].key, v->params[p].value);
      printf("\n");
      continue;
    }
    printf("%s\n  {\"name\": ", n++ ? "," : "");
    kt_cli_json_string(stdout, v->name);
    printf(", \"family\": ");
    kt_cli_json_string(stdout, kt_family_name(v->family));
    printf(", \"algo\": ");
    kt_cli_json_string(stdout, v->algo);
    printf(", \"target\": ");
    kt_cli_json_string(stdout, target_name(v->target));
    printf(", \"threads\": %d, \"cluster\": %d, \"smem\": %d, \"min_cc\": %d, \"params\": {", v->threads, v->cluster,
           v->smem_static + v->smem_dynamic, v->min_cc);
    for (int p = 0; p < v->nparams; ++p) {
      printf("%s", p ? ", " : "");
      kt_cli_json_string(stdout, v->params[p].key);
      printf(": ");
      kt_cli_json_string(stdout, v->params[p].value);
    }
    printf("}}");
  }
  if (json)
    printf("\n]}\n");
  return 0;
}

/* ---- options of explain --------------------------------------------------- */

/* The user database's default path, for help texts. */
static const char *default_db(void)
{
  static char path[1024];
  if (kt_results_user_path(path, sizeof path) != KT_OK)
    snprintf(path, sizeof path, "(none: no home folder; set KTUNE_DB)");
  return path;
}

/* explain's options --db and --json, at argv[*i]: 1 when it was one
 * (*i moves past its value), 0 when it was not, -1 after a usage error. */
static int explain_option(const char *cmd, int argc, char **argv, int *i, const char **db, int *json)
{
  if (!strcmp(argv[*i], "--json")) {
    *json = 1;
    return 1;
  }
  if (strcmp(argv[*i], "--db"))
    return 0;
  if (*i + 1 >= argc || !argv[*i + 1][0]) {
    kt_cli_usage_error(cmd, "--db needs a path");
    return -1;
  }
  *db = argv[++*i];
  return 1;
}

/* ---- ktune explain ------------------------------------------------------- */

static void explain_usage(void)
{
  printf("usage: ktune explain [--db PATH] [--json] FAMILY SIZE...\n"
         "\n"
         "Which variant a call of that size would use on this GPU, why, and from which database.\n"
         "\n");
  for (int f = 0; f < kt_tune_family_count; ++f) {
    const kt_family_ops *ops = kt_family_get(kt_tune_families[f]->id);
    printf("  ktune explain %s%s%s %s\n", ops->name, strcmp(ops->long_name, ops->name) ? "|" : "",
           strcmp(ops->long_name, ops->name) ? ops->long_name : "", kt_tune_families[f]->explain_args);
  }
  printf("\n"
         "  --db PATH   the user database; default: $KTUNE_DB, else %s\n"
         "              (a PATH that cannot be read is an error; a missing default is not)\n"
         "  --json      one JSON object: family, problem, variant, tuned, matched, reason, source, device\n"
         "  -h, --help  print this help and exit\n",
         default_db());
}

static int explain(int argc, char **argv)
{
  const char *db = NULL;
  int json = 0;
  char *args[8];
  int nargs = 0;
  for (int i = 2; i < argc; ++i) {
    if (kt_cli_is_help(argv[i])) {
      explain_usage();
      return 0;
    }
    const int r = explain_option("explain", argc, argv, &i, &db, &json);
    if (r < 0)
      return KT_CLI_USAGE;
    if (r == 1)
      continue;
    if (argv[i][0] == '-' && argv[i][1] && !isdigit((unsigned char)argv[i][1])) /* -1: a size, refused below */
      return kt_cli_usage_error("explain", "unknown option '%s'", argv[i]);
    if (nargs == (int)(sizeof args / sizeof args[0]))
      return kt_cli_usage_error("explain", "too many arguments");
    args[nargs++] = argv[i];
  }
  if (nargs == 0)
    return kt_cli_usage_error("explain", "a family and its sizes are needed");
  const kt_tune_family *tf = kt_tune_family_find(args[0]);
  if (!tf)
    return kt_cli_usage_error("explain", "unknown family '%s'", args[0]);
  kt_problem p;
  char err[256] = "";
  if (tf->explain_problem(args + 1, nargs - 1, &p, err, sizeof err) != 0)
    return kt_cli_usage_error("explain", "%s", err);
  if (db && kt_cli_check_db("explain", db) != 0)
    return 1;

  kt_context *ctx;
  if (kt_cli_open("explain", db, &ctx) != 0)
    return 1;
  kt_choice c;
  int rc = tf->explain(ctx, &p, &c);
  char key[96];
  kt_problem_key(&p, 0, key, sizeof key);
  if (rc != KT_OK)
    fprintf(stderr, "ktune explain: %s %s: %s\n", kt_family_name(p.family), key, kt_strerror(rc));
  else if (json) {
    printf("{\"family\": ");
    kt_cli_json_string(stdout, kt_family_name(p.family));
    printf(", \"problem\": ");
    kt_cli_json_string(stdout, key);
    printf(", \"variant\": ");
    kt_cli_json_string(stdout, c.variant);
    printf(", \"tuned\": %s, \"matched\": ", c.tuned ? "true" : "false");
    kt_cli_json_string(stdout, c.matched[0] ? c.matched : NULL);
    printf(", \"reason\": ");
    kt_cli_json_string(stdout, c.reason);
    printf(", \"source\": ");
    kt_cli_json_string(stdout, c.source[0] ? c.source : NULL);
    printf(", \"device\": ");
    kt_cli_json_string(stdout, kt_device_name(ctx));
    printf("}\n");
  } else {
    printf("%s\n  %s\n  source: %s\n", c.variant, c.reason, c.source[0] ? c.source : "none (untuned: the default)");
  }
  kt_close(ctx);
  /* Sizes the library refuses are bad arguments too. */
  return rc == KT_OK ? 0 : rc == KT_ERR_BAD_SIZE || rc == KT_ERR_OVERFLOW || rc == KT_ERR_BAD_LD ? KT_CLI_USAGE : 1;
}

/* ---- the commands -------------------------------------------------------- */

static int worker(int argc, char **argv)
{
  return kt_worker_main(argc - 1, argv + 1);
}

/* Each command gets main's argc and argv (argv[1] is its name) and
 * handles its own options, --help among them. */
static const struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary; /* for ktune --help; NULL: not listed */
} commands[] = {
    {"tune", kt_tune_main, "check and time every variant on this GPU; record the winners"},
    {"list", list, "the kernel variants in this build, with their parameters"},
    {"show", kt_results_cli_show, "what a tuning database holds, per device: measurements, winners"},
    {"export", kt_results_cli_export, "a device's results as JSON text, for import elsewhere or shipping"},
    {"import", kt_results_cli_import, "merge exports into a tuning database, all files or none"},
    {"explain", explain, "which variant a call would use on this GPU, and why"},
    {"__worker", worker, NULL}, /* measures for tune, in a process of its own */
};

static void usage(FILE *f)
{
  fprintf(f, "usage: ktune [-h | --help] [--version] COMMAND [ARGS]\n"
             "\n"
             "Autotuned CUDA kernels: tune them on this GPU, and see what each call will use.\n"
             "\n"
             "Commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    if (commands[i].summary)
      fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\n"
             "Options:\n"
             "  -h, --help  print this help and exit\n"
             "  --version   print ktune's version and exit\n"
             "\n"
             "'ktune COMMAND --help' describes a command and its options.\n"
             "Exit status: 0 success, 1 failure (no GPU, a database that cannot be read...), 2 bad arguments.\n"
             "Environment: KTUNE_DB (the user database), KTUNE_SYSTEM_DB (the shipped results; \"\" for none),\n"
             "KTUNE_LOG=error|warn|info|debug (the library's messages on stderr).\n");
}

static int run(int argc, char **argv)
{
  if (argc < 2) {
    usage(stderr);
    return KT_CLI_USAGE;
  }
  if (kt_cli_is_help(argv[1])) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    if (argc > 2) {
      fprintf(stderr, "ktune: --version takes no arguments ('%s')\n", argv[2]);
      return KT_CLI_USAGE;
    }
    printf("ktune %s\nkernels for %s (each GPU runs those of the newest target it can), generator %s, %d variants\n",
           kt_version(), kt_registry_target, kt_registry_generator_version, variant_count());
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    if (!strcmp(argv[1], commands[i].name))
      return commands[i].run(argc, argv);
  fprintf(stderr, "ktune: unknown %s '%s'\nRun 'ktune --help' for the commands.\n",
          argv[1][0] == '-' ? "option" : "command", argv[1]);
  return KT_CLI_USAGE;
}

/* A command whose output could not all be written (a full disk, a closed
 * pipe's reader) fails, so that a script never takes a cut listing for a
 * whole one. */
int main(int argc, char **argv)
{
  int rc = run(argc, argv);
  errno = 0;
  if ((fflush(stdout) != 0 || ferror(stdout)) && rc == 0) {
    fprintf(stderr, "ktune: writing the output: %s\n", strerror(errno ? errno : EIO));
    rc = 1;
  }
  return rc;
}
