/* SPDX-License-Identifier: MIT */
/* tests/test_misses.c: the problems a context served without a tuned entry
 * of their own (runtime/misses.c, and kt_close in runtime/context.c), on
 * described devices: no GPU.
 *
 *   make build/tests/test_misses && build/tests/test_misses --jobs=1
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kt_test.h"

static void setup(void)
{
  kt_test_mkdir();
  unsetenv("KTUNE_MISSES"); /* make test turns them off for the other tests */
  unsetenv("KTUNE_DB");
}

static void teardown(void)
{
  char dir[PATH_MAX];
  chmod(kt_test_path(dir, sizeof dir, "ro"), 0755);
  kt_test_rmdir();
}

TestSuite(misses, .init = setup, .fini = teardown);

/* fdopen as the library calls it: libc's, unless a test asks the next one
 * that opens for writing to fail, as it does when out of memory. */
static int fail_next_fdopen_w;

FILE *fdopen(int fd, const char *mode)
{
  if (mode[0] == 'w' && fail_next_fdopen_w) {
    fail_next_fdopen_w = 0;
    errno = ENOMEM;
    return NULL;
  }
  FILE *(*libc)(int, const char *) = (FILE * (*)(int, const char *)) dlsym(RTLD_NEXT, "fdopen");
  return libc(fd, mode);
}

/* fsync as the library calls it: libc's, but the first fsync of a misses
 * file's temporary copy (written whole, not yet in place) runs the test's
 * between_write_and_rename first: what another process may do then. */
static void (*between_write_and_rename)(void);

int fsync(int fd)
{
  char link[64], name[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t len = readlink(link, name, sizeof name - 1);
  if (between_write_and_rename && len > 0) {
    name[len] = 0;
    if (strstr(name, ".misses.tmp")) {
      void (*f)(void) = between_write_and_rename;
      between_write_and_rename = NULL;
      f();
    }
  }
  int (*libc)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  return libc(fd);
}

/* Fake device addresses: never dereferenced, only their alignment matters. */
#define A16 ((const float *)0x10000)
#define BINS ((const uint32_t *)0x40000)
#define SAMPLES ((const int32_t *)0x50000)

typedef struct log_capture {
  int count[4];
  char last[4][512];
  int misses[4]; /* of count: those about misses */
} log_capture;

static void capture(int level, const char *message, void *user)
{
  log_capture *c = user;
  c->count[level]++;
  c->misses[level] += strstr(message, "misses") != NULL;
  snprintf(c->last[level], sizeof c->last[level], "%s", message);
}

/* A database with matmul 1024x1024x1024 and hist nbins=256 n=1000 tuned
 * for dev. */
static void tuned_db(const char *path, const kt_device_info *dev)
{
  const kt_variant *mm = kt_test_need_on(dev, kt_test_is_matmul, 0, "a matmul variant");
  const kt_variant *h = kt_test_need_on(dev, kt_test_is_hist_smem, 0, "a hist variant");
  kt_measurement m = kt_test_measure(mm, kt_test_matmul_problem(1024, 1024, 1024), "ok", 1.0);
  cr_assert_gt(kt_test_tune(path, dev, &m, 1, m.problem), 0);
  m = kt_test_measure(h, kt_test_hist_problem(256, 1000, ""), "ok", 1.0);
  cr_assert_gt(kt_test_tune(path, dev, &m, 1, m.problem), 0);
}

/* A context on db, its messages up to level into log (NULL: none). */
/* db (of the test's folder) gets a folder where its misses file, path,
 * would go. */
static void folder_in_misses_place(char *db, size_t len, char *path, size_t plen)
{
  kt_test_path(db, len, "user.db");
  kt_misses_path(db, path, plen);
  cr_assert_eq(mkdir(path, 0755), 0);
}

static kt_context *open_db_logged(const kt_device_info *dev, const char *db, log_capture *log, int level)
{
  kt_options o = kt_default_options();
  o.db_path = db;
  o.system_db_path = "";
  o.log_level = level;
  if (log) {
    memset(log, 0, sizeof *log);
    o.log = capture;
    o.log_user = log;
  }
  kt_context *ctx = NULL;
  cr_assert_eq(kt_open_described(&ctx, dev, &o), KT_OK);
  return ctx;
}

static kt_context *open_db(const kt_device_info *dev, const char *db, log_capture *log)
{
  return open_db_logged(dev, db, log, KT_LOG_WARN);
}

static void matmul(kt_context *ctx, long long M, long long N, long long K)
{
  kt_choice c;
  cr_assert_eq(kt_matmul_choice(ctx, M, N, K, A16, K, A16, N, A16, N, &c), KT_OK);
}

static void hist(kt_context *ctx, long long nbins, unsigned long long n)
{
  kt_choice c;
  cr_assert_eq(kt_histogram_choice(ctx, SAMPLES, n, BINS, nbins, &c), KT_OK);
}

/* The count of problem p among the context's misses; 0 when absent. */
static long long count_of(const kt_context *ctx, kt_problem p)
{
  kt_problem got[KT_MISSES_SLOTS];
  long long counts[KT_MISSES_SLOTS];
  const int n = kt_misses_get(kt_context_misses(ctx), got, counts, KT_MISSES_SLOTS);
  for (int i = 0; i < n; ++i)
    if (got[i].family == p.family && memcmp(got[i].dim, p.dim, sizeof p.dim) == 0)
      return counts[i];
  return 0;
}

static int nmisses(const kt_context *ctx)
{
  kt_problem got[KT_MISSES_SLOTS];
  long long counts[KT_MISSES_SLOTS];
  return kt_misses_get(kt_context_misses(ctx), got, counts, KT_MISSES_SLOTS);
}

/* The misses file beside db, read back; the count of a line, 0 if absent. */
static long long file_count(const char *db, const char *fingerprint, const char *family, const char *key)
{
  char path[PATH_MAX + 8];
  kt_misses_path(db, path, sizeof path);
  kt_misses_entry *e = NULL;
  int n = 0;
  char err[PATH_MAX + 200];
  cr_assert_eq(kt_misses_read(path, &e, &n, err, sizeof err), KT_OK, "%s", err);
  long long c = 0;
  for (int i = 0; i < n; ++i)
    if (!strcmp(e[i].fingerprint, fingerprint) && !strcmp(kt_family_name(e[i].problem.family), family) &&
        !strcmp(e[i].key, key))
      c = e[i].count;
  free(e);
  return c;
}

Test(misses, only_problems_without_their_own_tuned_entry_are_remembered_once_each_and_counted)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "user.db");
  tuned_db(db, &dev);
  kt_context *ctx = open_db(&dev, db, NULL);
  matmul(ctx, 1024, 1024, 1024); /* tuned */
  hist(ctx, 256, 1000);          /* tuned */
  cr_expect_eq(nmisses(ctx), 0, "a tuned problem was remembered");
  matmul(ctx, 100, 200, 300);
  matmul(ctx, 100, 200, 300);
  matmul(ctx, 100, 200, 301);
  hist(ctx, 256, 999); /* the same bins, other n: not the tuned problem */
  hist(ctx, 4096, 0);  /* no samples: the bins are only zeroed, nothing to tune */
  cr_expect_eq(nmisses(ctx), 3);
  cr_expect_eq(count_of(ctx, kt_test_matmul_problem(100, 200, 300)), 2);
  cr_expect_eq(count_of(ctx, kt_test_matmul_problem(100, 200, 301)), 1);
  cr_expect_eq(count_of(ctx, kt_test_hist_problem(256, 999, "")), 1);
  kt_close(ctx);
}

Test(misses, with_nothing_tuned_every_problem_is_a_miss_of_every_family)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX];
  kt_context *ctx = open_db(&dev, kt_test_path(db, sizeof db, "none.db"), NULL);
  matmul(ctx, 64, 64, 64);
  hist(ctx, 4096, 1 << 20);
  kt_matmul_desc x = {0};
  x.M = 128, x.N = 64, x.K = 32, x.type = KT_BF16, x.op_a = KT_OP_N, x.op_b = KT_OP_T;
  x.A = A16, x.B = A16, x.C = (float *)A16, x.lda = 32, x.ldb = 32, x.ldc = 64, x.batch = 1, x.alpha = 1;
  kt_choice c;
  const int rc = kt_matmul_ex_choice(ctx, &x, &c);
  cr_expect_eq(nmisses(ctx), 2 + (rc == KT_OK), "gemm choice: %s", kt_strerror(rc));
  kt_close(ctx);
  if (rc == KT_OK) {
    kt_problem p = kt_test_matmul_problem(128, 64, 32);
    p.family = KT_FAMILY_GEMM;
    p.dim[3] = kt_gemm_layout(KT_BF16, 0, 1);
    char key[96];
    kt_problem_key(&p, 0, key, sizeof key);
    cr_expect_eq(file_count(db, dev.fingerprint, "gemm", key), 1, "%s", key);
  }
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "64x64x64"), 1);
  cr_expect_eq(file_count(db, dev.fingerprint, "hist", "nbins=4096 n=1048576"), 1);
}

Test(misses, survive_a_close_and_open_and_add_up_in_the_file)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "user.db");
  tuned_db(db, &dev);
  kt_context *ctx = open_db(&dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  matmul(ctx, 100, 200, 300);
  matmul(ctx, 1024, 1024, 1024);
  kt_close(ctx);
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), 2);
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "1024x1024x1024"), 0);
  /* Another device's misses in the same file stay apart (one of this build's targets: a GPU
   * build may hold sm_90 variants alone). */
  kt_device_info other = kt_test_device("Other GPU", 90, 1);
  ctx = open_db(&other, db, NULL);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  ctx = open_db(&dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  hist(ctx, 300, 5000);
  kt_close(ctx);
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), 3);
  cr_expect_eq(file_count(db, dev.fingerprint, "hist", "nbins=300 n=5000"), 1);
  cr_expect_eq(file_count(db, other.fingerprint, "matmul", "100x200x300"), 1);
  /* A context that served only tuned problems leaves the file alone. */
  char path[PATH_MAX + 8];
  kt_misses_path(db, path, sizeof path);
  size_t before, after;
  free(kt_test_slurp(path, &before));
  ctx = open_db(&dev, db, NULL);
  matmul(ctx, 1024, 1024, 1024);
  kt_close(ctx);
  free(kt_test_slurp(path, &after));
  cr_expect_eq(before, after);
}

/* No misses can be kept beside a database the user cannot write (nor can
 * a tune write it): said at info level, not warned of at every close. */
Test(misses, a_read_only_folder_gets_no_file_says_so_at_info_level_and_the_close_succeeds)
{
  if (geteuid() == 0)
    cr_skip_test("root writes into read-only folders");
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char dir[PATH_MAX], db[PATH_MAX];
  kt_test_path(dir, sizeof dir, "ro");
  cr_assert_eq(mkdir(dir, 0755), 0);
  kt_test_path(db, sizeof db, "ro/user.db");
  tuned_db(db, &dev);
  cr_assert_eq(chmod(dir, 0555), 0);
  log_capture log;
  kt_context *ctx = open_db_logged(&dev, db, &log, KT_LOG_INFO);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  char path[PATH_MAX + 8];
  kt_misses_path(db, path, sizeof path);
  cr_expect(!kt_test_exists(path));
  cr_expect_eq(log.misses[KT_LOG_WARN], 0, "warned: %s", log.last[KT_LOG_WARN]);
  cr_expect_eq(log.misses[KT_LOG_INFO], 1, "not said at info level");
  cr_expect_not_null(strstr(log.last[KT_LOG_INFO], "misses not kept"), "%s", log.last[KT_LOG_INFO]);
  cr_expect_eq(kt_context_check(ctx), KT_ERR_BAD_CONTEXT, "the context is still open");
}

Test(misses, a_file_that_cannot_be_replaced_is_logged_and_the_close_succeeds)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8];
  folder_in_misses_place(db, sizeof db, path, sizeof path);
  tuned_db(db, &dev);
  log_capture log;
  kt_context *ctx = open_db(&dev, db, &log);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  struct stat sb;
  cr_expect(stat(path, &sb) == 0 && S_ISDIR(sb.st_mode));
  cr_expect_eq(log.count[KT_LOG_WARN], 1);
  cr_expect_not_null(strstr(log.last[KT_LOG_WARN], "misses not kept"), "%s", log.last[KT_LOG_WARN]);
  cr_expect_eq(kt_test_dir_entries(), 2, "a temporary file was left behind");
}

Test(misses, no_folder_is_made_and_the_system_database_is_never_written)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "no/such/folder/user.db");
  kt_context *ctx = open_db(&dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  cr_expect_eq(kt_test_dir_entries(), 0);

  kt_test_path(db, sizeof db, "system.db");
  tuned_db(db, &dev);
  kt_options o = kt_default_options();
  o.db_path = db;
  o.system_db_path = db;
  cr_assert_eq(kt_open_described(&ctx, &dev, &o), KT_OK);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  cr_expect_eq(kt_test_dir_entries(), 1, "a misses file beside the system database");

  /* The same file under another name: another spelling, a link. */
  char other[PATH_MAX], link[PATH_MAX];
  kt_test_path(other, sizeof other, "./system.db");
  kt_test_path(link, sizeof link, "link.db");
  cr_assert_eq(symlink(db, link), 0);
  const char *names[] = {other, link};
  for (int i = 0; i < 2; ++i) {
    o.db_path = names[i];
    cr_assert_eq(kt_open_described(&ctx, &dev, &o), KT_OK);
    matmul(ctx, 100, 200, 300);
    kt_close(ctx);
    cr_expect_eq(kt_test_dir_entries(), 2, "a misses file beside the system database, named %s", names[i]);
  }
}

/* A file refused as a tuning database (another program's, a folder, a
 * newer schema) gets no misses beside it, and a file of that name that is
 * there already is left as it is. */
Test(misses, a_refused_database_gets_no_misses_file)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8];
  kt_test_path(db, sizeof db, "notes.db");
  kt_test_sql(db, "CREATE TABLE notes (body TEXT)");
  log_capture log;
  kt_context *ctx = open_db(&dev, db, &log);
  cr_assert_eq(log.count[KT_LOG_WARN], 1, "the foreign file was not refused");
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  kt_misses_path(db, path, sizeof path);
  cr_expect(!kt_test_exists(path), "misses beside another program's database");

  kt_test_path(db, sizeof db, "folder.db");
  cr_assert_eq(mkdir(db, 0755), 0);
  kt_misses_path(db, path, sizeof path);
  kt_test_write_file(path, "mine, not ktune's\n");
  ctx = open_db(&dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  size_t len;
  char *text = (char *)kt_test_slurp(path, &len);
  cr_expect(len == 18 && memcmp(text, "mine, not ktune's\n", len) == 0, "the file beside a folder was replaced");
  free(text);
}

/* Counts add up to the largest a file holds, and stay there. */
Test(misses, a_count_saturates_rather_than_wraps)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8], text[1024];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, path, sizeof path);
  snprintf(text, sizeof text, "%s\n%s\tmatmul\t100x200x300\t%lld\n", KT_MISSES_HEADER, dev.fingerprint, LLONG_MAX);
  kt_test_write_file(path, text);
  kt_context *ctx = open_db(&dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), LLONG_MAX);
}

/* The file is written through a temporary file beside it; a link put where
 * that goes (in a folder others may write) is not followed. */
Test(misses, a_link_in_place_of_the_temporary_file_is_not_followed)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8], tmp[PATH_MAX + 40], target[PATH_MAX];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, path, sizeof path);
  kt_test_path(target, sizeof target, "precious");
  kt_test_write_file(target, "keep me\n");
  snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
  cr_assert_eq(symlink(target, tmp), 0);
  kt_context *ctx = open_db(&dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  size_t len;
  char *text = (char *)kt_test_slurp(target, &len);
  cr_expect(len == 8 && memcmp(text, "keep me\n", len) == 0, "the link's target was written");
  free(text);
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), 1);
}

/* The misses file's path may hold a file of the user's own: kt_close
 * replaces only a file ktune wrote (its first line the header), and says
 * so of anything else, which it leaves as it is. */
Test(misses, a_file_that_is_not_ktunes_is_left_as_it_is_and_a_warning_says_so)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char dir[PATH_MAX], db[PATH_MAX], path[PATH_MAX + 8];
  cr_assert_eq(mkdir(kt_test_path(dir, sizeof dir, "m"), 0755), 0);
  kt_test_path(db, sizeof db, "m/results"); /* no database: one would be made there */
  kt_misses_path(db, path, sizeof path);
  const char *notes[] = {"my notes\nimportant\n", "", "# fingerprint\tfamily\tkey\tcount\n"};
  for (int i = 0; i < 3; ++i) {
    kt_test_write_file(path, notes[i]);
    log_capture log;
    kt_context *ctx = open_db_logged(&dev, db, &log, KT_LOG_INFO);
    matmul(ctx, 100, 200, 300);
    kt_close(ctx);
    size_t len;
    char *text = (char *)kt_test_slurp(path, &len);
    cr_expect(len == strlen(notes[i]) && memcmp(text, notes[i], len) == 0, "the file was replaced: \"%.*s\"", (int)len,
              text);
    free(text);
    /* A warning the first time; after it, at info level (see below). */
    const int level = i == 0 ? KT_LOG_WARN : KT_LOG_INFO;
    cr_expect_eq(log.misses[level], 1, "not said for \"%s\"", notes[i]);
    cr_expect_not_null(strstr(log.last[level], "not ktune's"), "%s", log.last[level]);
  }
  cr_expect_eq(kt_test_dir_entries(), 1, "a temporary file was left behind");
}

/* A link where the misses file goes is the user's: it is neither replaced
 * by a file nor written through, even to a misses file of ktune's. */
Test(misses, a_link_in_place_of_the_file_is_left_as_it_is)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8], target[PATH_MAX], err[PATH_MAX + 200];
  kt_test_path(db, sizeof db, "x.db");
  kt_misses_path(db, path, sizeof path);
  kt_test_path(target, sizeof target, "elsewhere.misses");
  kt_misses_entry e = {.problem = kt_test_matmul_problem(1, 2, 3), .key = "1x2x3", .count = 7};
  snprintf(e.fingerprint, sizeof e.fingerprint, "%s", dev.fingerprint);
  cr_assert_eq(kt_misses_write(target, &e, 1, err, sizeof err), KT_OK, "%s", err);
  size_t before, after;
  char *old = (char *)kt_test_slurp(target, &before);
  cr_assert_eq(symlink(target, path), 0);
  log_capture log;
  kt_context *ctx = open_db(&dev, db, &log);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  struct stat sb;
  cr_expect(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode), "the link was replaced");
  char *now = (char *)kt_test_slurp(target, &after);
  cr_expect(before == after && memcmp(old, now, before) == 0, "the link's target was written");
  free(old), free(now);
  cr_expect_eq(log.misses[KT_LOG_WARN], 1);
  cr_expect_not_null(strstr(log.last[KT_LOG_WARN], "is a link"), "%s", log.last[KT_LOG_WARN]);
  cr_expect_eq(kt_test_dir_entries(), 2, "a temporary file was left behind");
}

/* A relative database path names a file of the folder current at kt_open
 * (the database was read from there): an application that changes folder
 * before it closes keeps its misses beside that database all the same. */
Test(misses, a_relative_database_path_is_resolved_when_the_context_opens)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char here[PATH_MAX], opened[PATH_MAX], closed[PATH_MAX], db[PATH_MAX];
  cr_assert_not_null(getcwd(here, sizeof here));
  cr_assert_eq(mkdir(kt_test_path(opened, sizeof opened, "opened"), 0755), 0);
  cr_assert_eq(mkdir(kt_test_path(closed, sizeof closed, "closed"), 0755), 0);
  cr_assert_eq(chdir(opened), 0);
  kt_context *ctx = open_db(&dev, "user.db", NULL);
  cr_assert_eq(chdir(closed), 0);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  cr_assert_eq(chdir(here), 0);
  cr_expect(!kt_test_exists(kt_test_path(db, sizeof db, "closed/user.db.misses")), "kept where the close ran");
  cr_expect_eq(file_count(kt_test_path(db, sizeof db, "opened/user.db"), dev.fingerprint, "matmul", "100x200x300"), 1);
}

/* One miss through a context on db, closed: the misses file at path has
 * mode want. */
static void expect_mode_after_a_miss(const kt_device_info *dev, const char *db, const char *path, mode_t want,
                                     const char *what)
{
  kt_context *ctx = open_db(dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0, "%s: no misses file", what);
  cr_expect_eq(sb.st_mode & 07777, want, "%s: mode %o, not %o", what, (unsigned)(sb.st_mode & 07777), (unsigned)want);
}

/* The file is replaced, not rewritten: the new one takes the old one's
 * mode, so a file made private stays private. */
Test(misses, a_rewrite_keeps_the_files_mode)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, path, sizeof path);
  umask(022);
  const mode_t modes[] = {0, 0600, 0640, 0664}; /* 0: no file yet */
  for (int i = 0; i < 4; ++i) {
    if (modes[i])
      cr_assert_eq(chmod(path, modes[i]), 0);
    /* a new file: the database's, 0644 here */
    expect_mode_after_a_miss(&dev, db, path, modes[i] ? modes[i] : 0644, modes[i] ? "a rewrite" : "a new file");
  }
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), 4);
}

/* A first misses file takes the database's read and write bits, whatever
 * the umask: a private database gets private misses (it got 0644 less the
 * umask, world-readable beside a 0600 database). */
Test(misses, a_first_file_takes_the_databases_mode)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  umask(022);
  const mode_t modes[] = {0600, 0640, 0660, 0644, 0700};
  for (int i = 0; i < 5; ++i) {
    char name[32], db[PATH_MAX], path[PATH_MAX + 8];
    snprintf(name, sizeof name, "user%d.db", i);
    kt_test_path(db, sizeof db, name);
    kt_misses_path(db, path, sizeof path);
    const int fd = open(db, O_WRONLY | O_CREAT | O_EXCL, 0600); /* empty: a database of none */
    cr_assert(fd >= 0 && close(fd) == 0);
    cr_assert_eq(chmod(db, modes[i]), 0);
    char what[64];
    snprintf(what, sizeof what, "beside a database of mode %o", (unsigned)modes[i]);
    expect_mode_after_a_miss(&dev, db, path, modes[i] & 0666, what);
  }
}

Test(misses, a_failed_write_leaves_no_temporary_file)
{
  char path[PATH_MAX], err[PATH_MAX + 200];
  kt_test_path(path, sizeof path, "x.db.misses");
  kt_misses_entry e = {
      .fingerprint = "GPU|sm_90", .problem = kt_test_matmul_problem(1, 2, 3), .key = "1x2x3", .count = 1};
  fail_next_fdopen_w = 1;
  cr_expect_eq(kt_misses_write(path, &e, 1, err, sizeof err), KT_ERR_DB_WRITE);
  cr_assert_eq(fail_next_fdopen_w, 0, "the write opened no file through fdopen");
  cr_expect_eq(kt_test_dir_entries(), 0, "a temporary file was left behind");
}

/* An application may open and close contexts by the thousand: a failure
 * to keep misses is warned of once, and said at info level after. */
Test(misses, a_failure_is_warned_of_once_a_process_and_said_at_info_level_after)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8];
  folder_in_misses_place(db, sizeof db, path, sizeof path);
  for (int i = 0; i < 3; ++i) {
    log_capture log;
    kt_context *ctx = open_db_logged(&dev, db, &log, KT_LOG_INFO);
    matmul(ctx, 100, 200, 300);
    kt_close(ctx);
    cr_expect_eq(log.misses[KT_LOG_WARN], i == 0, "close %d: %d warnings", i, log.misses[KT_LOG_WARN]);
    cr_expect_eq(log.misses[KT_LOG_INFO], i > 0, "close %d: %d at info level", i, log.misses[KT_LOG_INFO]);
    cr_expect_not_null(strstr(log.last[i == 0 ? KT_LOG_WARN : KT_LOG_INFO], "misses not kept"));
  }
}

/* In a child process: a context on db that misses 100x200x300 and a shape
 * of its own (1000 + id)x7x7, and closes when go (a pipe; NULL: at once)
 * reaches its end.  Exits 0 when all went well. */
static pid_t close_in_child(const kt_device_info *dev, const char *db, int id, const int *go)
{
  const pid_t pid = fork();
  if (pid != 0)
    return pid;
  kt_options o = kt_default_options();
  o.db_path = db;
  o.system_db_path = "";
  kt_context *ctx = NULL;
  kt_choice c;
  if (kt_open_described(&ctx, dev, &o) != KT_OK ||
      kt_matmul_choice(ctx, 100, 200, 300, A16, 300, A16, 200, A16, 200, &c) != KT_OK ||
      kt_matmul_choice(ctx, 1000 + id, 7, 7, A16, 7, A16, 7, A16, 7, &c) != KT_OK)
    _exit(1);
  char byte;
  if (go && (close(go[1]) != 0 || read(go[0], &byte, 1) != 0))
    _exit(2);
  kt_close(ctx);
  _exit(0);
}

static void wait_ok(pid_t pid)
{
  int st = 0;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a child failed (%d)", st);
}

/* Processes that close one after another add their counts up; processes
 * that close at once add them up too (they merge one at a time, under the
 * file's lock), and leave a whole file of ktune's and no temporary file. */
Test(misses, processes_closing_in_turn_add_up_and_at_once_leave_a_whole_file)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX];
  kt_test_path(db, sizeof db, "user.db");
  enum { TURNS = 4, AT_ONCE = 8 };
  for (int i = 0; i < TURNS; ++i)
    wait_ok(close_in_child(&dev, db, i, NULL));
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), TURNS);
  for (int i = 0; i < TURNS; ++i) {
    char key[32];
    snprintf(key, sizeof key, "%dx7x7", 1000 + i);
    cr_expect_eq(file_count(db, dev.fingerprint, "matmul", key), 1, "%s", key);
  }
  int go[2];
  cr_assert_eq(pipe(go), 0);
  pid_t pid[AT_ONCE];
  for (int i = 0; i < AT_ONCE; ++i)
    cr_assert_gt(pid[i] = close_in_child(&dev, db, TURNS + i, go), 0);
  close(go[0]);
  close(go[1]); /* every child's read returns now */
  for (int i = 0; i < AT_ONCE; ++i)
    wait_ok(pid[i]);
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), TURNS + AT_ONCE);
  for (int i = 0; i < TURNS + AT_ONCE; ++i) {
    char key[32];
    snprintf(key, sizeof key, "%dx7x7", 1000 + i);
    cr_expect_eq(file_count(db, dev.fingerprint, "matmul", key), 1, "%s", key);
  }
  cr_expect_eq(kt_test_dir_entries(), 1, "a temporary file was left behind");
}

/* What the tests below put in place of the misses file while a close
 * writes its own. */
static char replaced_path[PATH_MAX + 8];
static const char *replaced_text;

static void replace_misses_file(void)
{
  char other[PATH_MAX + 16];
  snprintf(other, sizeof other, "%s.other", replaced_path);
  kt_test_write_file(other, replaced_text);
  cr_assert_eq(rename(other, replaced_path), 0);
}

/* A file of someone else's put in place of ktune's while a close merges
 * into it is left as it is, and the close says so. */
Test(misses, a_file_put_in_place_while_misses_are_merged_is_left_as_it_is)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], first[1024];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, replaced_path, sizeof replaced_path);
  snprintf(first, sizeof first, "%s\n%s\tmatmul\t100x200x300\t3\n", KT_MISSES_HEADER, dev.fingerprint);
  kt_test_write_file(replaced_path, first);
  replaced_text = "my notes\n";
  log_capture log;
  kt_context *ctx = open_db_logged(&dev, db, &log, KT_LOG_INFO);
  matmul(ctx, 100, 200, 300);
  between_write_and_rename = replace_misses_file;
  kt_close(ctx);
  cr_assert_null(between_write_and_rename, "no merge wrote a file");
  size_t len;
  char *text = (char *)kt_test_slurp(replaced_path, &len);
  cr_expect(len == strlen(replaced_text) && memcmp(text, replaced_text, len) == 0, "the file was replaced: \"%.*s\"",
            (int)len, text);
  free(text);
  cr_expect_eq(log.misses[KT_LOG_WARN] + log.misses[KT_LOG_INFO], 1);
  cr_expect_not_null(strstr(log.last[log.misses[KT_LOG_WARN] ? KT_LOG_WARN : KT_LOG_INFO], "not ktune's"));
  cr_expect_eq(kt_test_dir_entries(), 1, "a temporary file was left behind");
}

/* A merge whose lock another holds (a process stopped mid-merge) gives
 * up after a while, rather than hang the close, and says so; the file is
 * left as it is. */
Test(misses, a_lock_held_too_long_fails_the_merge_and_the_close_goes_on, .timeout = 30)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8], first[1024];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, path, sizeof path);
  snprintf(first, sizeof first, "%s\n%s\tmatmul\t100x200x300\t3\n", KT_MISSES_HEADER, dev.fingerprint);
  kt_test_write_file(path, first);
  const int held = open(path, O_RDONLY | O_CLOEXEC);
  cr_assert_geq(held, 0);
  cr_assert_eq(flock(held, LOCK_EX), 0); /* another open of the file: its lock is another's */
  log_capture log;
  kt_context *ctx = open_db_logged(&dev, db, &log, KT_LOG_INFO);
  matmul(ctx, 100, 200, 300);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  kt_close(ctx);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  close(held);
  const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  cr_expect(s >= 1.5 && s < 20, "the close took %.2f s", s);
  cr_expect_eq(log.misses[KT_LOG_WARN] + log.misses[KT_LOG_INFO], 1);
  cr_expect_not_null(strstr(log.last[log.misses[KT_LOG_WARN] ? KT_LOG_WARN : KT_LOG_INFO], "held it too long"));
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), 3);
  cr_expect_eq(kt_test_dir_entries(), 1, "a temporary file was left behind");
}

/* A misses file put in place, while a close merges, by a writer that
 * takes no lock (an older ktune, a copy put back by hand) is merged
 * again, not overwritten: both counts are kept.  So for a forget. */
Test(misses, a_misses_file_put_in_place_meanwhile_is_merged_again_not_overwritten)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], first[1024], theirs[1024], err[PATH_MAX + 200];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, replaced_path, sizeof replaced_path);
  snprintf(first, sizeof first, "%s\n%s\tmatmul\t100x200x300\t3\n", KT_MISSES_HEADER, dev.fingerprint);
  snprintf(theirs, sizeof theirs, "%s\n%s\tmatmul\t100x200x300\t5\n%s\tmatmul\t7x8x9\t2\n", KT_MISSES_HEADER,
           dev.fingerprint, dev.fingerprint);
  kt_test_write_file(replaced_path, first);
  replaced_text = theirs;
  kt_context *ctx = open_db(&dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  between_write_and_rename = replace_misses_file;
  kt_close(ctx);
  cr_assert_null(between_write_and_rename, "no merge wrote a file");
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), 6, "their 5 and this close's 1");
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "7x8x9"), 2);

  snprintf(first, sizeof first, "%s\n%s\tmatmul\t100x200x300\t3\n%s\tmatmul\t1x2x3\t1\n", KT_MISSES_HEADER,
           dev.fingerprint, dev.fingerprint);
  kt_test_write_file(replaced_path, first);
  kt_problem p = kt_test_matmul_problem(100, 200, 300);
  between_write_and_rename = replace_misses_file;
  cr_assert_eq(kt_misses_forget(replaced_path, dev.fingerprint, &p, 1, err, sizeof err), KT_OK, "%s", err);
  cr_assert_null(between_write_and_rename, "the forget wrote no file");
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), 0);
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "7x8x9"), 2, "their line was lost");
  cr_expect_eq(kt_test_dir_entries(), 1, "a temporary file was left behind");
}

Test(misses, ktune_misses_off_keeps_none)
{
  setenv("KTUNE_MISSES", "off", 1);
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX];
  kt_context *ctx = open_db(&dev, kt_test_path(db, sizeof db, "user.db"), NULL);
  matmul(ctx, 100, 200, 300);
  cr_expect_null(kt_context_misses(ctx));
  kt_close(ctx);
  cr_expect_eq(kt_test_dir_entries(), 0);
}

typedef struct noter {
  kt_misses *m;
  int id;
} noter;

enum { THREADS = 8, CALLS = 20000, SHARED = 5 };

static void *note_many(void *arg)
{
  const noter *t = arg;
  for (int i = 0; i < CALLS; ++i) {
    /* Shapes every thread calls, and one of its own. */
    const kt_problem p = i % 2 ? kt_test_matmul_problem(1 + i % SHARED, 7, 7) : kt_test_matmul_problem(100 + t->id, 7, 7);
    kt_misses_note(t->m, NULL, &p);
  }
  return NULL;
}

Test(misses, threads_sharing_a_context_lose_no_count)
{
  kt_misses *m = kt_misses_new();
  cr_assert_not_null(m);
  pthread_t th[THREADS];
  noter args[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    args[i] = (noter){m, i};
    cr_assert_eq(pthread_create(&th[i], NULL, note_many, &args[i]), 0);
  }
  for (int i = 0; i < THREADS; ++i)
    pthread_join(th[i], NULL);
  kt_problem got[KT_MISSES_SLOTS];
  long long counts[KT_MISSES_SLOTS], total = 0;
  const int n = kt_misses_get(m, got, counts, KT_MISSES_SLOTS);
  cr_expect_eq(n, SHARED + THREADS, "each problem once");
  for (int i = 0; i < n; ++i)
    total += counts[i];
  cr_expect_eq(total, (long long)THREADS * CALLS);
  kt_misses_free(m);
}

Test(misses, memory_and_the_file_are_bounded)
{
  kt_misses *m = kt_misses_new();
  for (int i = 1; i <= 4 * KT_MISSES_SLOTS; ++i) {
    const kt_problem p = kt_test_matmul_problem(i, i, i);
    kt_misses_note(m, NULL, &p);
  }
  kt_problem got[KT_MISSES_SLOTS];
  long long counts[KT_MISSES_SLOTS];
  const int n = kt_misses_get(m, got, counts, KT_MISSES_SLOTS);
  cr_expect_gt(n, KT_MISSES_SLOTS / 2);
  cr_expect_leq(n, KT_MISSES_SLOTS);
  kt_misses_free(m);

  /* A file of more lines than it keeps: the most counted stay. */
  const int many = KT_MISSES_FILE_MAX + 100;
  kt_misses_entry *e = calloc((size_t)many, sizeof *e);
  for (int i = 0; i < many; ++i) {
    snprintf(e[i].fingerprint, sizeof e[i].fingerprint, "GPU|sm_90");
    e[i].problem = kt_test_matmul_problem(i + 1, 1, 1);
    kt_problem_key(&e[i].problem, 0, e[i].key, sizeof e[i].key);
    e[i].count = i + 1;
  }
  char path[PATH_MAX], err[512];
  kt_test_path(path, sizeof path, "x.db.misses");
  cr_assert_eq(kt_misses_write(path, e, many, err, sizeof err), KT_OK, "%s", err);
  free(e);
  int back = 0;
  cr_assert_eq(kt_misses_read(path, &e, &back, err, sizeof err), KT_OK, "%s", err);
  cr_expect_eq(back, KT_MISSES_FILE_MAX);
  long long least = LLONG_MAX;
  for (int i = 0; i < back; ++i)
    least = e[i].count < least ? e[i].count : least;
  cr_expect_eq(least, 101, "the least counted lines were not the ones dropped");
  free(e);
}

Test(misses, lines_that_do_not_read_are_dropped_and_the_rest_merged)
{
  kt_device_info dev = kt_test_device("Test GPU", 90, 1);
  char db[PATH_MAX], path[PATH_MAX + 8], text[4096], err[PATH_MAX + 200];
  kt_test_path(db, sizeof db, "user.db");
  kt_misses_path(db, path, sizeof path);
  snprintf(text, sizeof text,
           "%s\n"
           "# a comment\n"
           "%s\tmatmul\t100x200x300\t4\n"
           "%s\tmatmul\t100x200\t4\n"     /* not a shape */
           "%s\tnosuch\t100x200x300\t4\n" /* no such family */
           "%s\tmatmul\t1x2x3\t-1\n"      /* a bad count */
           "only one field\n"
           "%s\thist\tnbins=300 n=5000\t2\n",
           KT_MISSES_HEADER, dev.fingerprint, dev.fingerprint, dev.fingerprint, dev.fingerprint, dev.fingerprint);
  kt_test_write_file(path, text);
  kt_misses_entry *e = NULL;
  int n = 0;
  cr_assert_eq(kt_misses_read(path, &e, &n, err, sizeof err), KT_OK, "%s", err);
  free(e);
  cr_expect_eq(n, 2);
  kt_context *ctx = open_db(&dev, db, NULL);
  matmul(ctx, 100, 200, 300);
  kt_close(ctx);
  cr_expect_eq(file_count(db, dev.fingerprint, "matmul", "100x200x300"), 5);
  cr_expect_eq(file_count(db, dev.fingerprint, "hist", "nbins=300 n=5000"), 2);
  size_t len;
  char *all = (char *)kt_test_slurp(path, &len);
  all = realloc(all, len + 1);
  all[len] = 0;
  cr_expect_null(strstr(all, "nosuch"), "%s", all);
  free(all);
}

Test(misses, forgetting_removes_only_that_devices_lines_of_those_problems)
{
  char path[PATH_MAX], err[512], text[1024];
  kt_test_path(path, sizeof path, "user.db.misses");
  snprintf(text, sizeof text,
           "%s\nA\tmatmul\t1x2x3\t4\nA\tmatmul\t4x5x6\t1\nB\tmatmul\t1x2x3\t2\nA\thist\tnbins=300 n=5000\t2\n",
           KT_MISSES_HEADER);
  kt_test_write_file(path, text);
  kt_problem p[2] = {kt_test_matmul_problem(1, 2, 3), kt_test_hist_problem(300, 5000, "uniform")};
  cr_assert_eq(kt_misses_forget(path, "A", p, 2, err, sizeof err), KT_OK, "%s", err);
  kt_misses_entry *e = NULL;
  int n = 0;
  cr_assert_eq(kt_misses_read(path, &e, &n, err, sizeof err), KT_OK, "%s", err);
  cr_assert_eq(n, 2);
  int a456 = 0, b123 = 0;
  for (int i = 0; i < n; ++i) {
    a456 += !strcmp(e[i].fingerprint, "A") && !strcmp(e[i].key, "4x5x6");
    b123 += !strcmp(e[i].fingerprint, "B") && !strcmp(e[i].key, "1x2x3");
  }
  free(e);
  cr_expect(a456 && b123);
  /* Forgetting the last lines removes the file. */
  kt_problem q[1] = {kt_test_matmul_problem(4, 5, 6)};
  cr_assert_eq(kt_misses_forget(path, "A", q, 1, err, sizeof err), KT_OK);
  q[0] = kt_test_matmul_problem(1, 2, 3);
  cr_assert_eq(kt_misses_forget(path, "B", q, 1, err, sizeof err), KT_OK);
  cr_expect(!kt_test_exists(path));
}
