/* SPDX-License-Identifier: MIT */
/* runtime/db.c: the SQLite tuning database.
 *
 * One file holds every measurement ever taken (with its status) and, per
 * (device, generator version, family, problem), a ranking whose first row
 * is the winner.  Keys carry the device fingerprint, the generator version
 * and each variant's source hash, so results from another GPU or from a
 * since-regenerated variant set are never dispatched.
 *
 * Safety rules: a file is checked before anything is written to it (a
 * foreign, newer, non-SQLite or damaged file is refused untouched, with
 * its -wal and -shm); writers use WAL, a busy timeout and BEGIN IMMEDIATE,
 * so concurrent tuners serialise instead of losing rows.
 *
 * Readers must not need write access: a WAL file can only be read by
 * someone who may create its -shm beside it.  So the last writer to close
 * returns the file to a rollback journal, which plain read-only opens can
 * read, and a reader that still finds a WAL file it cannot join reads it
 * without locks (see open_checked).
 *
 * The file's text form, for moving results between files (ktune export and
 * import), is at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "kt_internal.h"
#include "registry.h"

#define BUSY_MS 30000 /* how long a writer waits for another's lock */

/* Which of a key's measurements is the newest: the latest measured, and of
 * those recorded in one second the last recorded.  Not the id alone: an
 * import adds old measurements after newer ones. */
#define NEWEST_FIRST "measured_at DESC, id DESC"

struct kt_db {
  sqlite3 *h;
  int mode;
};

static const char *SCHEMA =
    "CREATE TABLE IF NOT EXISTS devices ("
    "  fingerprint TEXT PRIMARY KEY, name TEXT NOT NULL, cc INTEGER NOT NULL, sm_count INTEGER NOT NULL,"
    "  mem_bytes INTEGER NOT NULL, driver_version INTEGER, runtime_version INTEGER,"
    "  last_seen TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));"
    "CREATE TABLE IF NOT EXISTS measurements ("
    "  id INTEGER PRIMARY KEY, device TEXT NOT NULL, generator_version TEXT NOT NULL,"
    "  family TEXT NOT NULL, problem TEXT NOT NULL, dist TEXT NOT NULL DEFAULT '',"
    "  m INTEGER, n INTEGER, k INTEGER, nbins INTEGER, nsamples INTEGER,"
    "  variant TEXT NOT NULL, source_hash TEXT NOT NULL,"
    "  status TEXT NOT NULL CHECK (status IN ('ok','wrong','launch_failed','timed_out','skipped')),"
    "  reason TEXT NOT NULL DEFAULT '', time_ms REAL, rate REAL, max_err REAL, reps INTEGER,"
    "  measured_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')));"
    "CREATE INDEX IF NOT EXISTS measurements_by_problem"
    "  ON measurements (device, generator_version, family, problem);"
    "CREATE TABLE IF NOT EXISTS winners ("
    "  device TEXT NOT NULL, generator_version TEXT NOT NULL, family TEXT NOT NULL, problem TEXT NOT NULL,"
    "  rank INTEGER NOT NULL, m INTEGER, n INTEGER, k INTEGER, nbins INTEGER, nsamples INTEGER,"
    "  variant TEXT NOT NULL, source_hash TEXT NOT NULL, time_ms REAL NOT NULL, rate REAL,"
    "  updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),"
    "  PRIMARY KEY (device, generator_version, family, problem, rank));";

static int fail(char *err, size_t len, int code, const char *what, sqlite3 *h)
{
  snprintf(err, len, "%s%s%s", what, h ? ": " : "", h ? sqlite3_errmsg(h) : "");
  return code;
}

static int pragma_int(sqlite3 *h, const char *sql, long long *out)
{
  sqlite3_stmt *st;
  int rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);
  if (rc != SQLITE_OK)
    return rc;
  rc = sqlite3_step(st);
  *out = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
  sqlite3_finalize(st);
  return rc;
}

/* Classify an opened file without writing to it: 0 = empty (new), 1 = ours
 * and current, or a KT_ERR_* code. */
static int inspect(sqlite3 *h, char *err, size_t len)
{
  long long app = 0, ver = 0, tables = 0;
  int rc = pragma_int(h, "PRAGMA application_id", &app);
  if (rc == SQLITE_NOTADB)
    return fail(err, len, KT_ERR_DB_FOREIGN, "not a SQLite database", h);
  if (rc == SQLITE_CORRUPT) /* a SQLite header, pages that do not read: cut short, or overwritten */
    return fail(err, len, KT_ERR_DB_DAMAGED, "a SQLite database whose pages do not read", h);
  if (rc != SQLITE_OK)
    return fail(err, len, KT_ERR_DB_OPEN, "cannot read the database", h);
  if (pragma_int(h, "PRAGMA user_version", &ver) != SQLITE_OK ||
      pragma_int(h, "SELECT count(*) FROM sqlite_master", &tables) != SQLITE_OK)
    return fail(err, len, KT_ERR_DB_OPEN, "cannot read the database", h);
  if (app == 0 && ver == 0 && tables == 0)
    return 0;
  if (app != KT_DB_APPLICATION_ID) {
    snprintf(err, len, "an SQLite database of another application (application_id %lld, %lld tables)", app, tables);
    return KT_ERR_DB_FOREIGN;
  }
  if (ver > KT_DB_SCHEMA_VERSION) {
    snprintf(err, len, "schema version %lld is newer than this ktune's %d", ver, KT_DB_SCHEMA_VERSION);
    return KT_ERR_DB_VERSION;
  }
  if (ver < 1) {
    snprintf(err, len, "ktune database without a schema version");
    return KT_ERR_DB_FOREIGN;
  }
  /* Ours with a table gone (dropped by hand or by another program): every
   * read of it would fail as "no such table", as if the file could not be
   * read at all. */
  static const char *const TABLES[] = {"devices", "measurements", "winners"};
  for (int i = 0; i < 3; ++i) {
    char sql[128];
    long long n = 0;
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '%s'", TABLES[i]);
    if (pragma_int(h, sql, &n) != SQLITE_OK)
      return fail(err, len, KT_ERR_DB_OPEN, "cannot read the database", h);
    if (n == 0) {
      snprintf(err, len, "a ktune database without its %s table", TABLES[i]);
      return KT_ERR_DB_DAMAGED;
    }
  }
  return 1;
}

/* A damaged file may read as ours and still break on a write.  `full`:
 * SQLite's integrity_check, which also finds rows missing from an index
 * (quick_check does not), before a write and for a tool that says whether
 * a file is sound (KT_DB_CHECK); otherwise the cheaper quick_check (the
 * pages and b-trees), for the read at every kt_open: on the 16 MB shipped
 * system.db it takes 23 ms against integrity_check's 68, and a row
 * missing from an index can only hide a ranking from dispatch, which then
 * runs a default variant.  1 when the file passes; otherwise err says
 * what was found. */
static int check_ok(sqlite3 *h, int full, const char *path, char *err, size_t len)
{
  sqlite3_stmt *st = NULL;
  const char *sql = full ? "PRAGMA integrity_check(1)" : "PRAGMA quick_check(1)";
  int ok = sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK;
  const char *got = NULL;
  if (ok && sqlite3_step(st) == SQLITE_ROW)
    got = (const char *)sqlite3_column_text(st, 0);
  ok = got && strcmp(got, "ok") == 0;
  if (!ok)
    snprintf(err, len,
             "'%s' is damaged (%s) and was left as it is; move it aside (mv '%s' '%s.damaged') and "
             "tune again, or import an export into a new file",
             path, got ? got : sqlite3_errmsg(h), path, path);
  sqlite3_finalize(st);
  return ok;
}

/* Switching a new file to WAL takes a write lock inside a statement that
 * already holds a read lock; SQLite answers SQLITE_BUSY at once rather than
 * call the busy handler (waiting could deadlock), so when two tuners create
 * one file the loser retries here, for as long as the busy timeout. */
static int set_wal(sqlite3 *h, char **msg)
{
  int rc = SQLITE_BUSY;
  for (int ms = 0; ms < BUSY_MS && rc == SQLITE_BUSY; ms += 10) {
    sqlite3_free(*msg);
    *msg = NULL;
    rc = sqlite3_exec(h, "PRAGMA journal_mode=WAL", NULL, NULL, msg);
    if (rc == SQLITE_BUSY)
      sqlite3_sleep(10);
  }
  return rc;
}

/* path as a URI for sqlite3_open_v2 with the query `q`: '%', '?' and '#'
 * escaped.  0 if it does not fit. */
static int file_uri(const char *path, const char *q, char *buf, size_t len)
{
  size_t n = (size_t)snprintf(buf, len, "file:");
  for (const char *p = path; *p; ++p) {
    if (n + 4 >= len)
      return 0;
    if (*p == '%' || *p == '?' || *p == '#')
      n += (size_t)snprintf(buf + n, len - n, "%%%02X", (unsigned char)*p);
    else
      buf[n++] = *p;
  }
  buf[n] = 0;
  return (size_t)snprintf(buf + n, len - n, "?%s", q) < len - n;
}

/* The size of path's companion `suffix` ("-wal", "-shm"), or -1 when there
 * is none. */
static long long side_size(const char *path, const char *suffix)
{
  char side[4096 + 8];
  struct stat sb;
  if ((size_t)snprintf(side, sizeof side, "%s%s", path, suffix) >= sizeof side || stat(side, &sb) != 0)
    return -1;
  return (long long)sb.st_size;
}

/* Open name (as a URI with the query q, if any) without classifying it.
 * Until kt_db_open knows the file is ours, closing it must not checkpoint
 * a WAL into it: that writes the file and deletes its -wal. */
static int open_handle(const char *path, const char *name, int flags, const char *q, sqlite3 **out, int *why, char *err,
                       size_t errlen)
{
  char uri[4096 + 64];
  if (q) {
    if (!file_uri(name, q, uri, sizeof uri)) {
      snprintf(err, errlen, "cannot open '%s': path too long", path);
      return KT_ERR_DB_OPEN;
    }
    name = uri;
    flags |= SQLITE_OPEN_URI;
  }
  sqlite3 *h = NULL;
  int rc = sqlite3_open_v2(name, &h, flags | SQLITE_OPEN_FULLMUTEX, NULL);
  if (rc != SQLITE_OK) {
    *why = h ? sqlite3_extended_errcode(h) : rc;
    snprintf(err, errlen, "cannot open '%s': %s", path, h ? sqlite3_errmsg(h) : sqlite3_errstr(rc));
    sqlite3_close(h);
    return KT_ERR_DB_OPEN;
  }
  sqlite3_db_config(h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
  sqlite3_busy_timeout(h, BUSY_MS);
  *out = h;
  return KT_OK;
}

/* Classify in one read transaction: inspect() reads three values, which
 * must be one snapshot, or a schema that another tuner commits between the
 * reads looks like a foreign database (tables, no application_id).  Then,
 * unless check is -1, check_ok as for that mode.  Returns inspect's state
 * (0 new, 1 ours) with *h still open, or a KT_ERR_* with *h closed and NULL
 * and *why SQLite's extended code. */
static int classify(const char *path, sqlite3 **h, int check, int *why, char *err, size_t errlen)
{
  sqlite3_exec(*h, "BEGIN", NULL, NULL, NULL);
  int state = inspect(*h, err, errlen);
  *why = state == KT_ERR_DB_OPEN ? sqlite3_extended_errcode(*h) : SQLITE_OK;
  if (state == 1 && check >= 0 && !check_ok(*h, check, path, err, errlen))
    state = KT_ERR_DB_DAMAGED;
  sqlite3_exec(*h, "COMMIT", NULL, NULL, NULL);
  if (state != 0 && state != 1) {
    sqlite3_close(*h);
    *h = NULL;
  }
  return state;
}

/* Whether the file's header says WAL (bytes 18 and 19, the write and read
 * versions: 2): a connection that opens it makes a -shm beside it, and a
 * -wal where there is none. */
static int header_says_wal(const char *path)
{
  unsigned char b[20];
  FILE *f = fopen(path, "rb");
  const int wal = f && fread(b, 1, sizeof b, f) == sizeof b && (b[18] == 2 || b[19] == 2);
  if (f)
    fclose(f);
  return wal;
}

/* SQLite opens a file it may not write read-only, without a word (set_wal
 * is then a no-op on a WAL file, and BEGIN IMMEDIATE succeeds): a writer
 * learns it here, before its first write fails.  KT_OK, or *h closed. */
static int writable(const char *path, sqlite3 **h, char *err, size_t errlen)
{
  if (sqlite3_db_readonly(*h, "main") != 1)
    return KT_OK;
  sqlite3_close(*h);
  *h = NULL;
  snprintf(err, errlen, "cannot write '%s': no write access to it", path);
  return KT_ERR_DB_WRITE;
}

/* Read the file's last committed state without taking a lock or creating
 * or changing any file: beside a WAL, through SQLite's "unix-none" VFS in
 * exclusive locking mode, which builds the WAL's index in memory instead of
 * in a -shm file; without one, immutable (the file alone is the database).
 * Without locks this is safe only while no connection writes the file, so
 * it is used where none can: beside a -wal without a -shm, which every
 * connection that writes a WAL keeps open. */
static int open_unlocked(const char *path, const char *name, int with_wal, sqlite3 **h, int check, int *why, char *err,
                         size_t errlen)
{
  const char *q = with_wal ? "vfs=unix-none" : "immutable=1";
  int rc = open_handle(path, name, SQLITE_OPEN_READONLY, q, h, why, err, errlen);
  if (rc == KT_OK && with_wal && sqlite3_exec(*h, "PRAGMA locking_mode=EXCLUSIVE", NULL, NULL, NULL) != SQLITE_OK) {
    rc = fail(err, errlen, KT_ERR_DB_OPEN, "cannot read the database", *h);
    sqlite3_close(*h);
    *h = NULL;
  }
  return rc == KT_OK ? classify(path, h, check, why, err, errlen) : rc;
}

/* Open and classify.  Returns inspect's state (0 new, 1 ours) with *out
 * open (read-write for KT_DB_WRITE), or a KT_ERR_* with *out NULL.  A file
 * that is refused must be left as it was, -wal and -shm included, so
 * nothing that could write to it opens it before it is known to be ours:
 *
 *  1. A verdict from the file as it lies, without locks (open_unlocked):
 *     another program's file, or a newer ktune's, is refused here.  Where
 *     a -shm says that some connection may be writing, from the main file
 *     alone: what refuses a file (its application_id, a newer schema)
 *     never changes in it once written.
 *  2. A read-only connection, which can neither checkpoint a WAL nor roll
 *     back a journal, classifies the live file and checks it.  A writer
 *     reopens it read-write only when it is ours or empty, or when only a
 *     writer can read it (a missing file, an interrupted write to roll
 *     back, a WAL whose -shm a reader may not create).
 *  3. A reader that could not read a WAL file, because it may not create
 *     or map the -shm beside it (no write access to the file or its
 *     folder), reads it without locks instead.  No connection can be
 *     writing it then, or there would be a -shm.  A -wal that cannot be
 *     read so is refused: reading the file around it would give results
 *     that a killed tuner had already replaced. */
static int open_checked(const char *path, int mode, int check, sqlite3 **out, char *err, size_t errlen)
{
  *out = NULL;
  /* A file, whatever its name: SQLite takes ":memory:" and (with URIs
   * on, as distributions build it) "file:..." for other things, where
   * an import would vanish on close.  "./" keeps them file names. */
  char plain[4096 + 8];
  const char *name = path;
  if (strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0) {
    if ((size_t)snprintf(plain, sizeof plain, "./%s", path) >= sizeof plain) {
      snprintf(err, errlen, "cannot open '%s': path too long", path);
      return KT_ERR_DB_OPEN;
    }
    name = plain;
  }
  const long long wal = side_size(path, "-wal"), shm = side_size(path, "-shm");
  sqlite3 *h = NULL;
  int why = SQLITE_OK;
  /* A WAL file that no connection holds (no -shm) would get a -shm, and a
   * -wal, from the read-only connection below, which cannot remove them:
   * so its check runs here too, and a damaged one is refused untouched. */
  const int early = shm < 0 && (wal >= 0 || header_says_wal(path));
  int state = open_unlocked(path, name, wal >= 0 && shm < 0, &h, early ? check : -1, &why, err, errlen);
  sqlite3_close(h);
  h = NULL;
  /* Read without locks, a file that a writer began to use meanwhile (its
   * -shm made, its -wal grown) may have read torn: not damage, and the
   * live read below decides.  What refuses a file otherwise (its
   * application_id, a newer schema) no writer of ours changes. */
  if (state == KT_ERR_DB_DAMAGED && (side_size(path, "-shm") >= 0 || side_size(path, "-wal") != wal))
    state = KT_OK;
  if (state == KT_ERR_DB_FOREIGN || state == KT_ERR_DB_VERSION || (early && state == KT_ERR_DB_DAMAGED))
    return state;
  err[0] = 0; /* what the lock-free read could not read, the live file may */
  state = open_handle(path, name, SQLITE_OPEN_READONLY, NULL, &h, &why, err, errlen);
  if (state == KT_OK)
    state = classify(path, &h, check, &why, err, errlen);
  const int no_shm =
      ((why & 0xff) == SQLITE_READONLY && why != SQLITE_READONLY_ROLLBACK) || (why & 0xff) == SQLITE_CANTOPEN;
  if (mode == KT_DB_WRITE && (state == 0 || state == 1)) {
    sqlite3_close(h);
    h = NULL;
    if (open_handle(path, name, SQLITE_OPEN_READWRITE, NULL, &h, &why, err, errlen) != KT_OK)
      return KT_ERR_DB_OPEN;
    const int w = writable(path, &h, err, errlen);
    if (w != KT_OK)
      return w;
  } else if (mode == KT_DB_WRITE && (no_shm || why == SQLITE_READONLY_ROLLBACK)) {
    state = open_handle(path, name, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL, &h, &why, err, errlen);
    if (state == KT_OK && (state = writable(path, &h, err, errlen)) != KT_OK)
      why = SQLITE_OK; /* the message is writable's */
    if (state == KT_OK)
      state = classify(path, &h, check, &why, err, errlen);
  } else if (mode == KT_DB_READ && no_shm && faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) == 0) {
    state = wal > 0 && shm >= 0 ? KT_ERR_DB_OPEN : open_unlocked(path, name, wal > 0, &h, check, &why, err, errlen);
    if (state == KT_ERR_DB_OPEN && wal > 0)
      snprintf(err, errlen,
               "'%s-wal' holds writes not yet copied into the file, which this reader cannot read (nor use "
               "'%s-shm'); read without them, the results would be stale until a writer opens the file (the "
               "next ktune tune of it does)",
               path, path);
  }
  if (state == 0 || state == 1) {
    err[0] = 0; /* a failed read-only open's words, where a writer then made the file */
    *out = h;
    return state;
  }
  /* A write that another program left unfinished, or holds still, is
   * no damage, and the file must not be read around it. */
  if (why == SQLITE_READONLY_ROLLBACK)
    snprintf(err, errlen,
             "an interrupted write left '%s-journal' beside it, which only a writer may roll back "
             "(the next ktune tune of this file does)",
             path);
  else if ((why & 0xff) == SQLITE_BUSY || (why & 0xff) == SQLITE_LOCKED)
    snprintf(err, errlen, "'%s' stayed locked by another connection for %d s", path, BUSY_MS / 1000);
  return state;
}

/* An empty file opened to read (touched, or left by a tuner that stopped
 * before its schema) holds nothing tuned: the schema's tables, empty, in
 * the connection's TEMP schema, which the file never sees, answer every
 * read as a new database's would. */
static int temp_schema(sqlite3 *h, char *err, size_t errlen)
{
  char sql[4096], *msg = NULL;
  size_t n = 0;
  for (const char *p = SCHEMA; *p && n + 8 < sizeof sql;)
    if (strncmp(p, "CREATE TABLE", 12) == 0) {
      n += (size_t)snprintf(sql + n, sizeof sql - n, "CREATE TEMP TABLE");
      p += 12;
    } else {
      sql[n++] = *p++;
    }
  sql[n] = 0;
  if (sqlite3_exec(h, sql, NULL, NULL, &msg) == SQLITE_OK)
    return KT_OK;
  snprintf(err, errlen, "an empty file: %s", msg ? msg : "?");
  sqlite3_free(msg);
  return KT_ERR_DB_OPEN;
}

void kt_db_folder(const char *path, char *dir, size_t len)
{
  snprintf(dir, len, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, len, ".");
  else
    *(slash == dir ? slash + 1 : slash) = 0;
}

int kt_db_open(kt_db **out, const char *path, int mode, char *err, size_t errlen)
{
  *out = NULL;
  if (!path || !*path)
    return fail(err, errlen, KT_ERR_BAD_OPTION, "no database path", NULL);
  const int full_check = mode != KT_DB_READ;
  mode = mode == KT_DB_WRITE ? KT_DB_WRITE : KT_DB_READ; /* KT_DB_CHECK reads */
  struct stat sb;
  const int there = stat(path, &sb) == 0;
  if (mode == KT_DB_READ && !there && errno == ENOENT) {
    snprintf(err, errlen, "no such file");
    return KT_ERR_DB_MISSING;
  }
  if (there && S_ISDIR(sb.st_mode)) { /* SQLite would say "disk I/O error" */
    snprintf(err, errlen, "'%s' is a folder, not a database file", path);
    return KT_ERR_DB_OPEN;
  }
  /* A writer creates the file, and its journal beside it, in its folder;
   * SQLite would say "unable to open database file" or "attempt to write
   * a readonly database" where it cannot. */
  char dir[4096];
  kt_db_folder(path, dir, sizeof dir);
  if (mode == KT_DB_WRITE && !there) {
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
      snprintf(err, errlen, "no folder '%s' to create '%s' in", dir, path);
      return KT_ERR_DB_OPEN;
    }
    if (faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) != 0) {
      snprintf(err, errlen, "cannot create '%s': no write access to its folder '%s'", path, dir);
      return KT_ERR_DB_OPEN;
    }
  }
  sqlite3 *h = NULL;
  int state = open_checked(path, mode, full_check, &h, err, errlen);
  if (state < 0 || state > 1)
    return state;
  if (mode == KT_DB_READ && state == 0 && temp_schema(h, err, errlen) != KT_OK) {
    sqlite3_close(h);
    return KT_ERR_DB_OPEN;
  }
  if (mode == KT_DB_WRITE) {
    char *msg = NULL;
    /* Only now, with the file known to be ours or empty, write to it. */
    if (set_wal(h, &msg) != SQLITE_OK || sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK) {
      if (faccessat(AT_FDCWD, dir, W_OK, AT_EACCESS) != 0)
        snprintf(err, errlen, "cannot write '%s': no write access to its folder '%s', where a writer keeps its journal",
                 path, dir);
      else
        snprintf(err, errlen, "cannot write '%s': %s", path, msg ? msg : sqlite3_errmsg(h));
      sqlite3_free(msg);
      sqlite3_close(h);
      return KT_ERR_DB_WRITE;
    }
    /* Another tuner may have created the schema since inspect(): look again
     * inside the write lock. */
    state = inspect(h, err, errlen);
    if (state == 0) {
      char sql[128];
      snprintf(sql, sizeof sql, "PRAGMA application_id=%d; PRAGMA user_version=%d;", KT_DB_APPLICATION_ID,
               KT_DB_SCHEMA_VERSION);
      if (sqlite3_exec(h, SCHEMA, NULL, NULL, &msg) != SQLITE_OK || sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK)
        state = KT_ERR_DB_WRITE;
    }
    if (state < 0 || state > 1 || sqlite3_exec(h, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
      if (state == 0 || state == 1)
        state = KT_ERR_DB_WRITE;
      if (state == KT_ERR_DB_WRITE)
        snprintf(err, errlen, "cannot create the schema: %s", msg ? msg : sqlite3_errmsg(h));
      sqlite3_free(msg);
      sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
      sqlite3_close(h);
      return state;
    }
    /* Ours: its last writer checkpoints it on close again (open_handle). */
    sqlite3_db_config(h, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 0, (int *)NULL);
  }
  kt_db *db = calloc(1, sizeof *db);
  if (!db) {
    sqlite3_close(h);
    return KT_ERR_NO_MEMORY;
  }
  db->h = h;
  db->mode = mode;
  *out = db;
  return KT_OK;
}

void kt_db_close(kt_db *db)
{
  if (!db)
    return;
  /* The last writer returns the file to a rollback journal, so readers
   * need no write access (see the top).  While another connection holds
   * the file this fails harmlessly and the file stays in WAL. */
  if (db->mode == KT_DB_WRITE)
    sqlite3_exec(db->h, "PRAGMA journal_mode=DELETE", NULL, NULL, NULL);
  sqlite3_close(db->h);
  free(db);
}

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
  sqlite3_bind_text(st, i, s ? s : "", -1, SQLITE_TRANSIENT);
}

/* The key of a ranking, as parameters 1-4: device, generator, family, problem. */
static void bind_key(sqlite3_stmt *st, const char *device_fp, const char *gen_version, const char *family,
                     const char *problem)
{
  bind_text(st, 1, device_fp);
  bind_text(st, 2, gen_version);
  bind_text(st, 3, family);
  bind_text(st, 4, problem);
}

/* The problem's sizes are stored in these columns, which each family names
 * in its dims (kt_family_ops); a column the family does not use is NULL. */
static const char *const SIZE_COLUMNS[] = {"m", "n", "k", "nbins", "nsamples"};
#define NSIZE_COLUMNS 5

/* Which of p's dims column c holds, or -1. */
static int dim_of_column(const kt_family_ops *ops, int c)
{
  for (int d = 0; ops && d < ops->ndims; ++d)
    if (strcmp(ops->dims[d], SIZE_COLUMNS[c]) == 0)
      return d;
  return -1;
}

static void bind_problem(sqlite3_stmt *st, int first, const kt_problem *p)
{
  const kt_family_ops *ops = kt_family_get(p->family);
  for (int c = 0; c < NSIZE_COLUMNS; ++c) {
    const int d = dim_of_column(ops, c);
    if (d < 0)
      sqlite3_bind_null(st, first + c);
    else
      sqlite3_bind_int64(st, first + c, p->dim[d]);
  }
}

static void read_problem(sqlite3_stmt *st, int first, const kt_family_ops *ops, kt_problem *p)
{
  memset(p, 0, sizeof *p);
  p->family = ops->id;
  for (int c = 0; c < NSIZE_COLUMNS; ++c) {
    const int d = dim_of_column(ops, c);
    if (d >= 0)
      p->dim[d] = sqlite3_column_int64(st, first + c);
  }
}

static int exec(kt_db *db, const char *sql, char *err, size_t len)
{
  char *msg = NULL;
  if (sqlite3_exec(db->h, sql, NULL, NULL, &msg) == SQLITE_OK)
    return KT_OK;
  snprintf(err, len, "%s: %s", sql, msg ? msg : "?");
  sqlite3_free(msg);
  return KT_ERR_DB_WRITE;
}

int kt_db_prune(kt_db *db, int keep, char *err, size_t errlen)
{
  if (db->mode != KT_DB_WRITE)
    return fail(err, errlen, KT_ERR_DB_WRITE, "database opened read-only", NULL);
  if (keep < 1)
    return fail(err, errlen, KT_ERR_BAD_OPTION, "keep at least one measurement", NULL);
  char sql[640];
  snprintf(sql, sizeof sql,
           "DELETE FROM measurements WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY"
           " device, generator_version, family, problem, dist, variant, source_hash ORDER BY " NEWEST_FIRST ") AS age"
           " FROM measurements) WHERE age > %d)",
           keep);
  int rc = exec(db, "BEGIN IMMEDIATE", err, errlen);
  if (rc == KT_OK)
    rc = exec(db, sql, err, errlen);
  if (rc == KT_OK)
    rc = exec(db, "COMMIT", err, errlen);
  else
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

/* A number of a measurement, NULL unless `has` it and it is finite: JSON,
 * which the export writes, has no infinity, and a wrong result's error is
 * one (kt_db_recorded reads NULL back as that). */
static void bind_real(sqlite3_stmt *st, int i, int has, double x)
{
  if (has && isfinite(x))
    sqlite3_bind_double(st, i, x);
  else
    sqlite3_bind_null(st, i);
}

int kt_db_record(kt_db *db, const kt_device_info *dev, const char *gen_version, const kt_measurement *m, int n,
                 char *err, size_t errlen)
{
  if (db->mode != KT_DB_WRITE)
    return fail(err, errlen, KT_ERR_DB_WRITE, "database opened read-only", NULL);
  int rc = exec(db, "BEGIN IMMEDIATE", err, errlen);
  if (rc)
    return rc;
  sqlite3_stmt *dst = NULL, *mst = NULL;
  const char *dsql = "INSERT INTO devices (fingerprint, name, cc, sm_count, mem_bytes, driver_version,"
                     " runtime_version) VALUES (?,?,?,?,?,?,?) ON CONFLICT (fingerprint) DO UPDATE SET"
                     " driver_version = excluded.driver_version, runtime_version = excluded.runtime_version,"
                     " last_seen = strftime('%Y-%m-%dT%H:%M:%SZ','now')";
  const char *msql = "INSERT INTO measurements (device, generator_version, family, problem, dist, m, n, k, nbins,"
                     " nsamples, variant, source_hash, status, reason, time_ms, rate, max_err, reps)"
                     " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
  if (sqlite3_prepare_v2(db->h, dsql, -1, &dst, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db->h, msql, -1, &mst, NULL) != SQLITE_OK) {
    rc = fail(err, errlen, KT_ERR_DB_WRITE, "prepare", db->h);
    goto out;
  }
  bind_text(dst, 1, dev->fingerprint);
  bind_text(dst, 2, dev->name);
  sqlite3_bind_int(dst, 3, dev->cc);
  sqlite3_bind_int(dst, 4, dev->sm_count);
  sqlite3_bind_int64(dst, 5, (sqlite3_int64)dev->mem_bytes);
  sqlite3_bind_int(dst, 6, dev->driver_version);
  sqlite3_bind_int(dst, 7, dev->runtime_version);
  if (sqlite3_step(dst) != SQLITE_DONE) {
    rc = fail(err, errlen, KT_ERR_DB_WRITE, "recording the device", db->h);
    goto out;
  }
  for (int i = 0; i < n; ++i) {
    char key[96];
    kt_problem_key(&m[i].problem, 0, key, sizeof key);
    sqlite3_reset(mst);
    bind_text(mst, 1, dev->fingerprint);
    bind_text(mst, 2, gen_version);
    bind_text(mst, 3, kt_family_name(m[i].problem.family));
    bind_text(mst, 4, key);
    bind_text(mst, 5, m[i].problem.dist);
    bind_problem(mst, 6, &m[i].problem);
    bind_text(mst, 11, m[i].variant);
    bind_text(mst, 12, m[i].source_hash);
    bind_text(mst, 13, m[i].status);
    bind_text(mst, 14, m[i].reason);
    int ok = strcmp(m[i].status, "ok") == 0;
    bind_real(mst, 15, ok, m[i].time_ms);
    bind_real(mst, 16, ok, m[i].rate);
    bind_real(mst, 17, 1, m[i].max_err);
    sqlite3_bind_int(mst, 18, m[i].reps);
    if (sqlite3_step(mst) != SQLITE_DONE) {
      rc = fail(err, errlen, KT_ERR_DB_WRITE, "recording a measurement", db->h);
      goto out;
    }
  }
out:
  sqlite3_finalize(dst);
  sqlite3_finalize(mst);
  if (rc == KT_OK)
    rc = exec(db, "COMMIT", err, errlen);
  if (rc != KT_OK)
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

/* Per variant, while ranking one problem. */
typedef struct cand {
  const kt_variant *v;
  double log_sum; /* sum over distributions of log(time) */
  int ndist;      /* distributions with an ok time */
  int wrong;      /* ever measured wrong with this source */
  double rate_sum;
  char dist_seen[4][16];
} cand;

static int cmp_cand(const void *a, const void *b)
{
  const cand *x = a, *y = b;
  double dx = x->log_sum / x->ndist, dy = y->log_sum / y->ndist;
  if (dx != dy)
    return dx < dy ? -1 : 1;
  return strcmp(x->v->name, y->v->name);
}

/* kt_db_rank inside a write transaction that the caller holds (kt_db_rank
 * and kt_db_import): the number ranked, or a negative KT_ERR_*. */
static int rank_locked(kt_db *db, const char *device_fp, const char *gen_version, const kt_problem *p, char *err,
                       size_t errlen)
{
  char key[96];
  kt_problem_key(p, 0, key, sizeof key);
  const char *fam = kt_family_name(p->family);
  int rc;
  cand *c = calloc((size_t)kt_registry_count, sizeof *c);
  char dists[4][16];
  int ndists = 0, nc = 0;
  sqlite3_stmt *st = NULL;
  if (!c) {
    rc = KT_ERR_NO_MEMORY;
    goto out;
  }
  /* Newest first, so each (variant, distribution) takes its latest ok time. */
  const char *q = "SELECT variant, source_hash, dist, status, time_ms, rate FROM measurements"
                  " WHERE device=? AND generator_version=? AND family=? AND problem=? ORDER BY " NEWEST_FIRST;
  if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK) {
    rc = fail(err, errlen, KT_ERR_DB_WRITE, "prepare", db->h);
    goto out;
  }
  bind_key(st, device_fp, gen_version, fam, key);
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    const char *hash = (const char *)sqlite3_column_text(st, 1);
    const char *dist = (const char *)sqlite3_column_text(st, 2);
    const char *status = (const char *)sqlite3_column_text(st, 3);
    const kt_variant *v = kt_registry_find_source(name, hash);
    if (!v)
      continue; /* from a variant set that has since been regenerated */
    /* Distributions count only from current rows: a stale one would leave
     * every current variant short of a distribution, and nothing ranked. */
    int d;
    for (d = 0; d < ndists && strcmp(dists[d], dist) != 0; ++d)
      ;
    if (d == ndists && ndists < 4)
      snprintf(dists[ndists++], sizeof dists[0], "%s", dist);
    cand *x = NULL;
    for (int i = 0; i < nc; ++i)
      if (c[i].v == v)
        x = &c[i];
    if (!x) {
      x = &c[nc++];
      x->v = v;
    }
    if (strcmp(status, "wrong") == 0)
      x->wrong = 1;
    if (strcmp(status, "ok") != 0)
      continue;
    int seen = 0;
    for (int i = 0; i < x->ndist && i < 4; ++i)
      seen |= strcmp(x->dist_seen[i], dist) == 0;
    if (seen || x->ndist >= 4)
      continue;
    const double ms = sqlite3_column_double(st, 4); /* 0 when NULL */
    if (!kt_time_ranks(ms))
      continue; /* no time to rank by (hand-edited): log() would rank it first, or last */
    snprintf(x->dist_seen[x->ndist++], sizeof x->dist_seen[0], "%s", dist);
    x->log_sum += log(ms);
    x->rate_sum += sqlite3_column_double(st, 5);
  }
  if (step != SQLITE_DONE) {
    rc = fail(err, errlen, KT_ERR_DB_WRITE, "reading measurements", db->h);
    goto out;
  }
  sqlite3_finalize(st);
  st = NULL;
  /* Keep variants that were ok on every distribution and never wrong. */
  int kept = 0;
  for (int i = 0; i < nc; ++i)
    if (!c[i].wrong && c[i].ndist == ndists && ndists > 0)
      c[kept++] = c[i];
  qsort(c, (size_t)kept, sizeof *c, cmp_cand);

  if (sqlite3_prepare_v2(db->h, "DELETE FROM winners WHERE device=? AND generator_version=? AND family=? AND problem=?",
                         -1, &st, NULL) != SQLITE_OK) {
    rc = fail(err, errlen, KT_ERR_DB_WRITE, "prepare", db->h);
    goto out;
  }
  bind_key(st, device_fp, gen_version, fam, key);
  if (sqlite3_step(st) != SQLITE_DONE) {
    rc = fail(err, errlen, KT_ERR_DB_WRITE, "clearing the old ranking", db->h);
    goto out;
  }
  sqlite3_finalize(st);
  st = NULL;
  const char *ins = "INSERT INTO winners (device, generator_version, family, problem, rank, m, n, k, nbins,"
                    " nsamples, variant, source_hash, time_ms, rate) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)";
  if (sqlite3_prepare_v2(db->h, ins, -1, &st, NULL) != SQLITE_OK) {
    rc = fail(err, errlen, KT_ERR_DB_WRITE, "prepare", db->h);
    goto out;
  }
  const int nrank = kept; /* the whole ranking: dispatch walks it for a variant that serves */
  for (int i = 0; i < nrank; ++i) {
    sqlite3_reset(st);
    bind_key(st, device_fp, gen_version, fam, key);
    sqlite3_bind_int(st, 5, i + 1);
    bind_problem(st, 6, p);
    bind_text(st, 11, c[i].v->name);
    bind_text(st, 12, c[i].v->source_hash);
    sqlite3_bind_double(st, 13, exp(c[i].log_sum / c[i].ndist));
    sqlite3_bind_double(st, 14, c[i].rate_sum / c[i].ndist);
    if (sqlite3_step(st) != SQLITE_DONE) {
      rc = fail(err, errlen, KT_ERR_DB_WRITE, "recording the ranking", db->h);
      goto out;
    }
  }
  rc = KT_OK;
  kept = nrank;
  nc = kept;
out:
  sqlite3_finalize(st);
  free(c);
  return rc == KT_OK ? nc : -rc;
}

int kt_db_rank(kt_db *db, const char *device_fp, const char *gen_version, const kt_problem *p, char *err, size_t errlen)
{
  if (db->mode != KT_DB_WRITE)
    return -fail(err, errlen, KT_ERR_DB_WRITE, "database opened read-only", NULL);
  int rc = exec(db, "BEGIN IMMEDIATE", err, errlen);
  if (rc)
    return -rc;
  int n = rank_locked(db, device_fp, gen_version, p, err, errlen);
  if (n >= 0 && (rc = exec(db, "COMMIT", err, errlen)) != KT_OK)
    n = -rc;
  if (n < 0)
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
  return n;
}

/* Does key read as a problem of ops (into *p) whose sizes are the size
 * columns of st's row, integers from column `first` on (as read_problem)? */
static int key_has_sizes(sqlite3_stmt *st, int first, const kt_family_ops *ops, const char *key, kt_problem *p)
{
  if (!key || ops->parse(key, p) != KT_OK)
    return 0;
  kt_problem cols;
  read_problem(st, first, ops, &cols);
  for (int c = 0; c < NSIZE_COLUMNS; ++c) {
    const int d = dim_of_column(ops, c);
    if (d >= 0 && (sqlite3_column_type(st, first + c) != SQLITE_INTEGER || cols.dim[d] != p->dim[d]))
      return 0;
  }
  return 1;
}

/* A winners row's problem, from its key, which must agree with its size
 * columns (from the third column of st on), and its time, which must be a
 * time: KT_OK, or KT_ERR_DB_DAMAGED with what is wrong in err.  SQLite's
 * own checks pass a file whose rows were edited by hand or by another
 * program; dispatch must not divide by a size of 0. */
static int row_problem(sqlite3_stmt *st, const kt_family_ops *ops, const char *key, double ms, kt_problem *p, char *err,
                       size_t errlen)
{
  if (key_has_sizes(st, 2, ops, key, p) && kt_time_ranks(ms))
    return KT_OK;
  snprintf(err, errlen, "a %s winner (problem \"%s\", %g ms) whose sizes or time are not those of its problem",
           ops->name, key ? key : "NULL", ms);
  return KT_ERR_DB_DAMAGED;
}

int kt_db_load(kt_db *db, const char *device_fp, const char *gen_version, kt_tuned **out, int *count, char *err,
               size_t errlen)
{
  *out = NULL;
  *count = 0;
  sqlite3_stmt *st = NULL;
  const char *q = "SELECT family, problem, m, n, k, nbins, nsamples, variant, source_hash, time_ms FROM winners"
                  " WHERE device=? AND generator_version=? ORDER BY family, problem, rank";
  if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, KT_ERR_DB_OPEN, "reading winners", db->h);
  bind_text(st, 1, device_fp);
  bind_text(st, 2, gen_version);
  kt_tuned *t = NULL;
  int n = 0, cap = 0, step, bad = KT_OK;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    const char *fam = (const char *)sqlite3_column_text(st, 0);
    const char *key = (const char *)sqlite3_column_text(st, 1);
    const char *name = (const char *)sqlite3_column_text(st, 7), *hash = (const char *)sqlite3_column_text(st, 8);
    const kt_variant *v = name && hash ? kt_registry_find_source(name, hash) : NULL;
    if (!v)
      continue; /* regenerated since: never dispatch it */
    const kt_family_ops *ops = fam ? kt_family_find(fam) : NULL;
    if (!ops || v->family != ops->id)
      continue; /* a family this build does not have */
    kt_problem p;
    if ((bad = row_problem(st, ops, key, sqlite3_column_double(st, 9), &p, err, errlen)) != KT_OK)
      break;
    const kt_family f = ops->id;
    if (n == 0 || t[n - 1].problem.family != f || strcmp(t[n - 1].key, key) != 0) {
      if (n == cap) {
        cap = cap ? 2 * cap : 16;
        kt_tuned *nt = realloc(t, (size_t)cap * sizeof *t);
        if (!nt) {
          free(t);
          sqlite3_finalize(st);
          return KT_ERR_NO_MEMORY;
        }
        t = nt;
      }
      kt_tuned *x = &t[n++];
      memset(x, 0, sizeof *x);
      x->problem = p;
      snprintf(x->key, sizeof x->key, "%s", key);
      x->best_ms = sqlite3_column_double(st, 9);
    }
    /* Keep the fastest, leaving room at the end for the fastest of any
     * alignment class not yet held, so that a misaligned call still finds
     * its tuned best. */
    kt_tuned *x = &t[n - 1];
    int new_class = 1;
    for (int i = 0; i < x->count; ++i)
      new_class &= x->ranked[i]->align != v->align;
    if (x->count < KT_MAX_RANKED - 8 || (x->count < KT_MAX_RANKED && new_class)) {
      x->ms[x->count] = sqlite3_column_double(st, 9);
      x->ranked[x->count++] = v;
    }
  }
  int rc = bad != KT_OK          ? bad
           : step == SQLITE_DONE ? KT_OK
                                 : fail(err, errlen, KT_ERR_DB_OPEN, "reading winners", db->h);
  sqlite3_finalize(st);
  for (int i = 0; i < n; ++i)
    kt_dispatch_prepare(&t[i]);
  if (rc != KT_OK) {
    free(t);
    return rc;
  }
  *out = t;
  *count = n;
  return KT_OK;
}

int kt_db_same_chip(kt_db *db, const char *chip, const char *gen_version, char *out, size_t len)
{
  sqlite3_stmt *st = NULL;
  const char *q = "SELECT d.fingerprint FROM devices d WHERE substr(d.fingerprint, 1, length(?1)) = ?1"
                  " AND EXISTS (SELECT 1 FROM winners w WHERE w.device = d.fingerprint AND w.generator_version = ?2)"
                  " ORDER BY d.last_seen DESC, d.fingerprint LIMIT 1";
  if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
    return KT_ERR_DB_OPEN;
  bind_text(st, 1, chip);
  bind_text(st, 2, gen_version);
  int rc = KT_ERR_DB_MISSING;
  if (sqlite3_step(st) == SQLITE_ROW) {
    snprintf(out, len, "%s", (const char *)sqlite3_column_text(st, 0));
    rc = KT_OK;
  }
  sqlite3_finalize(st);
  return rc;
}

int kt_db_recorded(kt_db *db, const char *device_fp, const char *gen_version, const kt_problem *p, kt_db_each each,
                   void *user, char *err, size_t errlen)
{
  char key[96];
  kt_problem_key(p, 0, key, sizeof key);
  sqlite3_stmt *st = NULL;
  const char *q = "SELECT variant, source_hash, status, reason, time_ms, rate, max_err, reps FROM (SELECT *,"
                  " row_number() OVER (PARTITION BY variant, source_hash ORDER BY " NEWEST_FIRST ") AS age"
                  " FROM measurements WHERE device=? AND generator_version=? AND family=? AND problem=? AND dist=?)"
                  " WHERE age = 1 ORDER BY variant, source_hash";
  if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, KT_ERR_DB_OPEN, "reading measurements", db->h);
  bind_key(st, device_fp, gen_version, kt_family_name(p->family), key);
  bind_text(st, 5, p->dist);
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    kt_measurement m;
    memset(&m, 0, sizeof m);
    m.problem = *p;
    m.variant = (const char *)sqlite3_column_text(st, 0);
    m.source_hash = (const char *)sqlite3_column_text(st, 1);
    m.status = (const char *)sqlite3_column_text(st, 2);
    m.reason = (const char *)sqlite3_column_text(st, 3);
    /* NULL: no time (a result that is not ok; by hand, an ok one) or not
     * finite when recorded (bind_real): NaN, never a time of 0. */
    m.time_ms = sqlite3_column_type(st, 4) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 4);
    m.rate = sqlite3_column_type(st, 5) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 5);
    /* NULL: not finite when recorded (bind_real), a wrong result's error. */
    m.max_err = sqlite3_column_type(st, 6) == SQLITE_NULL ? INFINITY : sqlite3_column_double(st, 6);
    m.reps = sqlite3_column_int(st, 7);
    each(user, &m);
  }
  int rc = step == SQLITE_DONE ? KT_OK : fail(err, errlen, KT_ERR_DB_OPEN, "reading measurements", db->h);
  sqlite3_finalize(st);
  return rc;
}

int kt_db_devices(kt_db *db, const char *gen_version, kt_db_device **out, int *count, char *err, size_t errlen)
{
  *out = NULL;
  *count = 0;
  sqlite3_stmt *st = NULL;
  kt_db_device *d = NULL;
  int n = 0, step = SQLITE_DONE;
  const char *q = "SELECT fingerprint, name, cc, sm_count, mem_bytes FROM devices ORDER BY fingerprint";
  if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, KT_ERR_DB_OPEN, "reading devices", db->h);
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    kt_db_device *nd = realloc(d, sizeof *d * (size_t)(n + 1));
    if (!nd) {
      step = SQLITE_NOMEM;
      break;
    }
    d = nd;
    kt_db_device *x = &d[n++];
    memset(x, 0, sizeof *x);
    snprintf(x->fingerprint, sizeof x->fingerprint, "%s", (const char *)sqlite3_column_text(st, 0));
    snprintf(x->name, sizeof x->name, "%s", (const char *)sqlite3_column_text(st, 1));
    x->cc = sqlite3_column_int(st, 2);
    x->sm_count = sqlite3_column_int(st, 3);
    x->mem_bytes = (unsigned long long)sqlite3_column_int64(st, 4);
  }
  sqlite3_finalize(st);
  st = NULL;
  /* Each device's rows, as this build sees them: current when the row's
   * generator, variant and source are this build's, else stale. */
  q = "SELECT device, generator_version, variant, source_hash, count(*) FROM measurements GROUP BY 1, 2, 3, 4";
  if (step == SQLITE_DONE && (step = sqlite3_prepare_v2(db->h, q, -1, &st, NULL)) == SQLITE_OK) {
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
      const char *fp = (const char *)sqlite3_column_text(st, 0);
      const kt_variant *v =
        kt_registry_find_source((const char *)sqlite3_column_text(st, 2), (const char *)sqlite3_column_text(st, 3));
      const int current = v && strcmp((const char *)sqlite3_column_text(st, 1), gen_version) == 0;
      const long long rows = sqlite3_column_int64(st, 4);
      for (int i = 0; i < n; ++i)
        if (strcmp(d[i].fingerprint, fp) == 0) {
          d[i].measurements += rows;
          *(current ? &d[i].current : &d[i].stale) += rows;
        }
    }
  }
  sqlite3_finalize(st);
  if (step != SQLITE_DONE) {
    free(d);
    return step == SQLITE_NOMEM ? KT_ERR_NO_MEMORY : fail(err, errlen, KT_ERR_DB_OPEN, "reading measurements", db->h);
  }
  *out = d;
  *count = n;
  return KT_OK;
}

/* ---- the text form: export and import ------------------------------------
 *
 * An export is one JSON object (KT_RESULTS_FORMAT): a header, then arrays of
 * devices, measurements, rankings and the exporting build's sources, one
 * element per line in a fixed order, with nothing that changes between two
 * exports of the same rows (no export time, no row ids, no last_seen), so
 * that exports diff well and a shipped file changes only where results do.
 * SQLite writes and reads the JSON (json_object, json_each), so strings
 * are quoted and unquoted by one well-tested parser.
 *
 * Within a key (device, generator, problem, distribution, variant, source)
 * the measurements keep their order, oldest first, and an import appends
 * them in that order, so "newest" (NEWEST_FIRST) means the same after a
 * round trip. */

/* The columns an export writes, as json_object arguments; an import reads
 * the same names back.  A number that is not finite (in a file recorded
 * before bind_real) is written null: SQLite would write Inf, which no JSON
 * parser, import's included, reads.  9e999 is SQLite's infinity; NaN is
 * never stored (SQLite binds it as NULL). */
#define DEVICE_JSON                                                                                               \
  "json_object('fingerprint', fingerprint, 'name', name, 'cc', cc, 'sm_count', sm_count, 'mem_bytes', mem_bytes," \
  " 'driver_version', driver_version, 'runtime_version', runtime_version)"
#define MEASUREMENT_JSON                                                                                        \
  "json_object('device', device, 'generator_version', generator_version, 'family', family, 'problem', problem," \
  " 'dist', dist, 'm', m, 'n', n, 'k', k, 'nbins', nbins, 'nsamples', nsamples, 'variant', variant,"            \
  " 'source_hash', source_hash, 'status', status, 'reason', reason,"                                            \
  " 'time_ms', CASE WHEN abs(time_ms) < 9e999 THEN time_ms END,"                                                \
  " 'rate', CASE WHEN abs(rate) < 9e999 THEN rate END,"                                                         \
  " 'max_err', CASE WHEN abs(max_err) < 9e999 THEN max_err END, 'reps', reps, 'measured_at', measured_at)"
#define RANKING_JSON                                                                                            \
  "json_object('device', device, 'generator_version', generator_version, 'family', family, 'problem', problem," \
  " 'rank', rank, 'variant', variant, 'source_hash', source_hash,"                                              \
  " 'time_ms', CASE WHEN abs(time_ms) < 9e999 THEN time_ms END,"                                                \
  " 'rate', CASE WHEN abs(rate) < 9e999 THEN rate END)"
#define SIZE_ORDER "m, n, k, nbins, nsamples"

/* Print the member `name`: an array of q's rows (one text column; ?1 bound
 * to device unless it is NULL), one per line.  SQLITE_OK or SQLite's error. */
static int write_array(kt_db *db, FILE *out, const char *name, const char *q, const char *device)
{
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db->h, q, -1, &st, NULL);
  if (rc != SQLITE_OK)
    return rc;
  if (device)
    bind_text(st, 1, device);
  fprintf(out, "\"%s\":[", name);
  int i = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW)
    fprintf(out, "%s\n%s", i++ ? "," : "", (const char *)sqlite3_column_text(st, 0));
  fprintf(out, "\n],\n");
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int kt_db_export(kt_db *db, const char *device_fp, FILE *out, char *err, size_t errlen)
{
  sqlite3_stmt *st = NULL;
  /* The header, and whether the device is there at all (before anything is written). */
  const char *hq = "SELECT json_object('format', ?1, 'format_version', ?2, 'generator_version', ?3),"
                   " ?4 IS NULL OR EXISTS (SELECT 1 FROM devices WHERE fingerprint = ?4)";
  if (sqlite3_prepare_v2(db->h, hq, -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, KT_ERR_DB_OPEN, "export", db->h);
  bind_text(st, 1, KT_RESULTS_FORMAT);
  sqlite3_bind_int(st, 2, KT_RESULTS_FORMAT_VERSION);
  bind_text(st, 3, kt_registry_generator_version);
  if (device_fp)
    bind_text(st, 4, device_fp);
  if (sqlite3_step(st) != SQLITE_ROW) {
    int rc = fail(err, errlen, KT_ERR_DB_OPEN, "export", db->h);
    sqlite3_finalize(st);
    return rc;
  }
  if (!sqlite3_column_int(st, 1)) {
    sqlite3_finalize(st);
    snprintf(err, errlen, "no device '%s' in this file (ktune show --all lists them)", device_fp);
    return KT_ERR_DB_MISSING;
  }
  const char *head = (const char *)sqlite3_column_text(st, 0);
  fprintf(out, "%.*s,\n", (int)strlen(head) - 1, head); /* the object stays open for the arrays */
  sqlite3_finalize(st);

  const char *where = device_fp ? " WHERE device = ?1" : "";
  char q[1024];
  int rc;
  snprintf(q, sizeof q, "SELECT " DEVICE_JSON " FROM devices%s ORDER BY fingerprint",
           device_fp ? " WHERE fingerprint = ?1" : "");
  rc = write_array(db, out, "devices", q, device_fp);
  if (rc == SQLITE_OK) {
    snprintf(q, sizeof q,
             "SELECT " MEASUREMENT_JSON " FROM measurements%s ORDER BY device, generator_version, family, " SIZE_ORDER
             ", dist, variant, source_hash, measured_at, id",
             where);
    rc = write_array(db, out, "measurements", q, device_fp);
  }
  if (rc == SQLITE_OK) {
    snprintf(q, sizeof q,
             "SELECT " RANKING_JSON " FROM winners%s ORDER BY device, generator_version, family, " SIZE_ORDER ", rank",
             where);
    rc = write_array(db, out, "rankings", q, device_fp);
  }
  if (rc == SQLITE_OK) {
    /* The sources of this build, for the variants the file names, so that a
     * reader can tell which of its rows this build would rank. */
    sqlite3_stmt *obj = NULL;
    snprintf(q, sizeof q, "SELECT DISTINCT variant FROM measurements%s ORDER BY variant", where);
    rc = sqlite3_prepare_v2(db->h, q, -1, &st, NULL);
    if (rc == SQLITE_OK)
      rc = sqlite3_prepare_v2(db->h, "SELECT json_object('variant', ?1, 'source_hash', ?2)", -1, &obj, NULL);
    if (rc == SQLITE_OK) {
      if (device_fp)
        bind_text(st, 1, device_fp);
      fprintf(out, "\"sources\":[");
      int i = 0;
      while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        /* One per target the variant is built for: each has its source. */
        const char *name = (const char *)sqlite3_column_text(st, 0);
        for (int k = 0; k < kt_registry_count; ++k) {
          const kt_variant *v = &kt_registry[k];
          if (strcmp(v->name, name) != 0)
            continue;
          sqlite3_reset(obj);
          bind_text(obj, 1, v->name);
          bind_text(obj, 2, v->source_hash);
          if (sqlite3_step(obj) == SQLITE_ROW)
            fprintf(out, "%s\n%s", i++ ? "," : "", (const char *)sqlite3_column_text(obj, 0));
        }
      }
      fprintf(out, "\n]}\n");
      rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    sqlite3_finalize(obj);
  }
  if (rc != SQLITE_OK)
    return fail(err, errlen, KT_ERR_DB_OPEN, "export", db->h);
  if (fflush(out) != 0 || ferror(out)) {
    snprintf(err, errlen, "writing the export: %s", strerror(errno));
    return KT_ERR_DB_WRITE;
  }
  return KT_OK;
}

/* What an import requires of each element: its members and the JSON types
 * each may have (json_type()'s names, as an SQL list).  Members that are
 * not listed are ignored, so a later ktune may add some. */
typedef struct member {
  const char *name, *types;
} member;

#define NUMBER "'integer','real'"
static const member DEVICE_MEMBERS[] = {{"fingerprint", "'text'"},
                                        {"name", "'text'"},
                                        {"cc", "'integer'"},
                                        {"sm_count", "'integer'"},
                                        {"mem_bytes", "'integer'"},
                                        {"driver_version", "'integer','null'"},
                                        {"runtime_version", "'integer','null'"},
                                        {NULL, NULL}};
static const member MEASUREMENT_MEMBERS[] = {{"device", "'text'"},
                                             {"generator_version", "'text'"},
                                             {"family", "'text'"},
                                             {"problem", "'text'"},
                                             {"dist", "'text'"},
                                             {"m", "'integer','null'"},
                                             {"n", "'integer','null'"},
                                             {"k", "'integer','null'"},
                                             {"nbins", "'integer','null'"},
                                             {"nsamples", "'integer','null'"},
                                             {"variant", "'text'"},
                                             {"source_hash", "'text'"},
                                             {"status", "'text'"},
                                             {"reason", "'text'"},
                                             {"time_ms", NUMBER ",'null'"},
                                             {"rate", NUMBER ",'null'"},
                                             {"max_err", NUMBER ",'null'"},
                                             {"reps", "'integer','null'"},
                                             {"measured_at", "'text'"},
                                             {NULL, NULL}};

/* "SELECT key, why FROM json_each(?1, '$.<array>') ...": the first element
 * of the array that lacks a member or has one of the wrong type, with why;
 * `extra` adds checks of values ("WHEN cond THEN 'why'"). */
static void check_query(char *buf, size_t len, const char *array, const member *ms, const char *extra)
{
  size_t n = (size_t)snprintf(buf, len,
                              "SELECT key, why FROM (SELECT key, CASE WHEN json_type(value) IS NOT 'object'"
                              " THEN 'not an object'");
  for (const member *m = ms; m->name && n < len; ++m)
    n += (size_t)snprintf(buf + n, len - n,
                          " WHEN coalesce(json_type(value, '$.%s'), 'missing') NOT IN (%s)"
                          " THEN '%s: missing or of the wrong type'",
                          m->name, m->types, m->name);
  if (n < len)
    snprintf(buf + n, len - n, "%s END AS why FROM json_each(?1, '$.%s')) WHERE why IS NOT NULL ORDER BY key LIMIT 1",
             extra, array);
}

/* "SELECT json_extract(value, '$.a'), ... FROM json_each(?1, '$.<array>')". */
static void extract_query(char *buf, size_t len, const char *array, const member *ms)
{
  size_t n = (size_t)snprintf(buf, len, "SELECT ");
  for (const member *m = ms; m->name && n < len; ++m)
    n += (size_t)snprintf(buf + n, len - n, "%sjson_extract(value, '$.%s')", m == ms ? "" : ", ", m->name);
  if (n < len)
    snprintf(buf + n, len - n, " FROM json_each(?1, '$.%s') ORDER BY key", array);
}

/* Run a query on the document (?1) that gives at most one row; *row gets
 * the row's first two columns as text ("" when NULL).  1 when there was a
 * row, 0 when none, -1 on an SQLite error. */
static int doc_row(kt_db *db, const char *q, const char *doc, char *a, size_t alen, char *b, size_t blen)
{
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_text(st, 1, doc, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const char *x = (const char *)sqlite3_column_text(st, 0), *y = (const char *)sqlite3_column_text(st, 1);
    snprintf(a, alen, "%s", x ? x : "");
    if (b)
      snprintf(b, blen, "%s", y ? y : "");
  }
  sqlite3_finalize(st);
  return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* Each measurement of this build's generator and of a family it has must
 * name a problem that the family reads, with the sizes that its key says
 * (a row the ranking would refuse, or that would hold other sizes than its
 * key): KT_OK or KT_ERR_DB_DAMAGED naming the first that does not. */
static int import_problems(kt_db *db, const char *name, const char *doc, char *err, size_t errlen)
{
  sqlite3_stmt *st = NULL;
  const char *q = "SELECT key, json_extract(value, '$.family'), json_extract(value, '$.problem'),"
                  " json_extract(value, '$.m'), json_extract(value, '$.n'), json_extract(value, '$.k'),"
                  " json_extract(value, '$.nbins'), json_extract(value, '$.nsamples')"
                  " FROM json_each(?1, '$.measurements') WHERE json_extract(value, '$.generator_version') = ?2";
  if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, KT_ERR_DB_OPEN, "import", db->h);
  sqlite3_bind_text(st, 1, doc, -1, SQLITE_STATIC);
  bind_text(st, 2, kt_registry_generator_version);
  int rc = KT_OK, step;
  while (rc == KT_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    const kt_family_ops *ops = kt_family_find((const char *)sqlite3_column_text(st, 1));
    const char *key = (const char *)sqlite3_column_text(st, 2);
    if (!ops)
      continue; /* a family this build does not have: kept, never ranked */
    kt_problem p;
    if (!key_has_sizes(st, 3, ops, key, &p)) {
      snprintf(err, errlen, "%s: damaged: measurements[%lld]: '%s' is not a %s problem, or not the sizes given", name,
               sqlite3_column_int64(st, 0), key ? key : "", ops->name);
      rc = KT_ERR_DB_DAMAGED;
    }
  }
  if (rc == KT_OK && step != SQLITE_DONE)
    rc = fail(err, errlen, KT_ERR_DB_OPEN, "import", db->h);
  sqlite3_finalize(st);
  return rc;
}

/* Refuse, before anything of it is written, a document that is not ours,
 * is newer, or is not whole: KT_OK or KT_ERR_DB_* with err saying why. */
static int import_check(kt_db *db, const char *name, const char *doc, char *err, size_t errlen)
{
  char a[256], b[256], q[4096];
  const char *head = "SELECT json_valid(?1), json_type(?1) = 'object' AND json_extract(?1, '$.format') IS ?2";
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db->h, head, -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, KT_ERR_DB_OPEN, "import", db->h);
  sqlite3_bind_text(st, 1, doc, -1, SQLITE_STATIC);
  bind_text(st, 2, KT_RESULTS_FORMAT);
  int valid = 0, ours = 0;
  if (sqlite3_step(st) == SQLITE_ROW) {
    valid = sqlite3_column_int(st, 0);
    ours = sqlite3_column_int(st, 1);
  }
  sqlite3_finalize(st);
  if (!valid) {
    /* Ours but cut short or edited, or something else altogether. */
    if (strstr(doc, "\"" KT_RESULTS_FORMAT "\"")) {
      snprintf(err, errlen, "%s: damaged: not valid JSON (cut short or edited?)", name);
      return KT_ERR_DB_DAMAGED;
    }
    snprintf(err, errlen, "%s: not a ktune results file (not JSON)", name);
    return KT_ERR_DB_FOREIGN;
  }
  if (!ours) {
    snprintf(err, errlen, "%s: not a ktune results file (no \"format\": \"" KT_RESULTS_FORMAT "\")", name);
    return KT_ERR_DB_FOREIGN;
  }
  if (doc_row(db, "SELECT json_type(?1, '$.format_version'), json_extract(?1, '$.format_version')", doc, a, sizeof a, b,
              sizeof b) != 1 ||
      strcmp(a, "integer") != 0 || atoll(b) < 1) {
    snprintf(err, errlen, "%s: damaged: no format_version", name);
    return KT_ERR_DB_DAMAGED;
  }
  if (atoll(b) > KT_RESULTS_FORMAT_VERSION) {
    snprintf(err, errlen, "%s: format version %s is newer than this ktune's %d", name, b, KT_RESULTS_FORMAT_VERSION);
    return KT_ERR_DB_VERSION;
  }
  if (doc_row(db,
              "SELECT CASE WHEN json_type(?1, '$.devices') IS NOT 'array' THEN 'devices'"
              " WHEN json_type(?1, '$.measurements') IS NOT 'array' THEN 'measurements'"
              " WHEN coalesce(json_type(?1, '$.rankings'), 'array') != 'array' THEN 'rankings' END",
              doc, a, sizeof a, NULL, 0) != 1) {
    return fail(err, errlen, KT_ERR_DB_OPEN, "import", db->h);
  }
  if (a[0]) {
    snprintf(err, errlen, "%s: damaged: \"%s\" is missing or not an array", name, a);
    return KT_ERR_DB_DAMAGED;
  }
  static const char *const arrays[] = {"devices", "measurements"};
  const member *const members[] = {DEVICE_MEMBERS, MEASUREMENT_MEMBERS};
  /* A measurement's values must make sense to the ranking as well, and
   * be numbers an export can write (1e999 reads as infinite). */
  const char *const extra[] = {"",
                               " WHEN json_extract(value, '$.status') NOT IN"
                               " ('ok','wrong','launch_failed','timed_out','skipped') THEN 'status: unknown'"
                               " WHEN json_extract(value, '$.time_ms') IN (9e999, -9e999) THEN 'time_ms: not finite'"
                               " WHEN json_extract(value, '$.rate') IN (9e999, -9e999) THEN 'rate: not finite'"
                               " WHEN json_extract(value, '$.max_err') IN (9e999, -9e999) THEN 'max_err: not finite'"
                               " WHEN json_extract(value, '$.status') = 'ok' AND"
                               " NOT coalesce(json_extract(value, '$.time_ms') > 0, 0)"
                               " THEN 'ok without a positive time_ms'"
                               " WHEN json_extract(value, '$.device') NOT IN (SELECT json_extract(d.value,"
                               " '$.fingerprint') FROM json_each(?1, '$.devices') d) THEN 'device: not in devices'"};
  for (int i = 0; i < 2; ++i) {
    check_query(q, sizeof q, arrays[i], members[i], extra[i]);
    int r = doc_row(db, q, doc, a, sizeof a, b, sizeof b);
    if (r < 0)
      return fail(err, errlen, KT_ERR_DB_OPEN, "import", db->h);
    if (r == 1) {
      snprintf(err, errlen, "%s: damaged: %s[%s]: %s", name, arrays[i], a, b);
      return KT_ERR_DB_DAMAGED;
    }
  }
  return import_problems(db, name, doc, err, errlen);
}

/* Copy each element of `array` into the table with `insert`, binding the
 * members in order; adds the rows written to *added and the rest to *same. */
static int import_rows(kt_db *db, const char *doc, const char *array, const member *ms, const char *insert, int *added,
                       int *same)
{
  char q[2048];
  extract_query(q, sizeof q, array, ms);
  sqlite3_stmt *rd = NULL, *wr = NULL;
  int rc = sqlite3_prepare_v2(db->h, q, -1, &rd, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db->h, insert, -1, &wr, NULL);
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(rd, 1, doc, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(rd)) == SQLITE_ROW) {
      sqlite3_reset(wr);
      for (int c = 0; c < sqlite3_column_count(rd); ++c)
        sqlite3_bind_value(wr, c + 1, sqlite3_column_value(rd, c));
      if ((rc = sqlite3_step(wr)) != SQLITE_DONE)
        break;
      *(sqlite3_changes(db->h) ? added : same) += 1;
    }
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  sqlite3_finalize(rd);
  sqlite3_finalize(wr);
  return rc;
}

/* A measurement that the database already holds (the same key, time of
 * measurement, status and values, the numbers as an export writes them) is
 * not added again: importing a file twice, or one's own export, adds nothing. */
static const char *const INSERT_MEASUREMENT =
    "INSERT INTO measurements (device, generator_version, family, problem, dist, m, n, k, nbins, nsamples, variant,"
    " source_hash, status, reason, time_ms, rate, max_err, reps, measured_at)"
    " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19"
    " WHERE NOT EXISTS (SELECT 1 FROM measurements WHERE device = ?1 AND generator_version = ?2 AND family = ?3"
    " AND problem = ?4 AND dist = ?5 AND variant = ?11 AND source_hash = ?12 AND measured_at = ?19"
    " AND status = ?13 AND reason = ?14 AND reps IS ?18"
    " AND json_quote(CASE WHEN abs(time_ms) < 9e999 THEN time_ms END) = json_quote(CAST(?15 AS REAL))"
    " AND json_quote(CASE WHEN abs(rate) < 9e999 THEN rate END) = json_quote(CAST(?16 AS REAL))"
    " AND json_quote(CASE WHEN abs(max_err) < 9e999 THEN max_err END) = json_quote(CAST(?17 AS REAL)))";

/* Rank again every problem of this build's generator that the document
 * has measurements of. */
static int import_rank(kt_db *db, const char *name, const char *doc, int *ranked, char *err, size_t errlen)
{
  sqlite3_stmt *st = NULL;
  const char *q = "SELECT DISTINCT json_extract(value, '$.device'), json_extract(value, '$.family'),"
                  " json_extract(value, '$.problem') FROM json_each(?1, '$.measurements')"
                  " WHERE json_extract(value, '$.generator_version') = ?2";
  if (sqlite3_prepare_v2(db->h, q, -1, &st, NULL) != SQLITE_OK)
    return fail(err, errlen, KT_ERR_DB_WRITE, "import", db->h);
  sqlite3_bind_text(st, 1, doc, -1, SQLITE_STATIC);
  bind_text(st, 2, kt_registry_generator_version);
  int rc = KT_OK, step;
  while (rc == KT_OK && (step = sqlite3_step(st)) == SQLITE_ROW) {
    const kt_family_ops *ops = kt_family_find((const char *)sqlite3_column_text(st, 1));
    const char *key = (const char *)sqlite3_column_text(st, 2);
    kt_problem p;
    if (!ops)
      continue; /* a family this build does not have: kept, never ranked */
    if (ops->parse(key, &p) != KT_OK) {
      snprintf(err, errlen, "%s: damaged: '%s' is not a %s problem", name, key, ops->name);
      rc = KT_ERR_DB_DAMAGED;
      break;
    }
    p.family = ops->id;
    int n = rank_locked(db, (const char *)sqlite3_column_text(st, 0), kt_registry_generator_version, &p, err, errlen);
    if (n < 0)
      rc = -n;
    else
      ++*ranked;
  }
  if (rc == KT_OK && step != SQLITE_DONE)
    rc = fail(err, errlen, KT_ERR_DB_WRITE, "import", db->h);
  sqlite3_finalize(st);
  return rc;
}

int kt_db_import_check(int n, const char *const *names, const char *const *docs, char *err, size_t errlen)
{
  kt_db mem = {NULL, KT_DB_READ};
  if (sqlite3_open(":memory:", &mem.h) != SQLITE_OK) {
    sqlite3_close(mem.h);
    return fail(err, errlen, KT_ERR_NO_MEMORY, "no memory for SQLite", NULL);
  }
  int rc = KT_OK;
  for (int i = 0; i < n && rc == KT_OK; ++i)
    rc = import_check(&mem, names[i], docs[i], err, errlen);
  sqlite3_close(mem.h);
  return rc;
}

int kt_db_import(kt_db *db, int n, const char *const *names, const char *const *docs, kt_db_import_counts *c, char *err,
                 size_t errlen)
{
  memset(c, 0, sizeof *c);
  if (db->mode != KT_DB_WRITE)
    return fail(err, errlen, KT_ERR_DB_WRITE, "database opened read-only", NULL);
  /* Every file is checked before anything is written, and everything is
   * written in one transaction: any error leaves the database as it was. */
  for (int i = 0; i < n; ++i) {
    int rc = import_check(db, names[i], docs[i], err, errlen);
    if (rc != KT_OK)
      return rc;
  }
  int rc = exec(db, "BEGIN IMMEDIATE", err, errlen);
  if (rc != KT_OK)
    return rc;
  for (int i = 0; i < n && rc == KT_OK; ++i) {
    int ignored = 0;
    if (import_rows(db, docs[i], "devices", DEVICE_MEMBERS,
                    "INSERT INTO devices (fingerprint, name, cc, sm_count, mem_bytes, driver_version, runtime_version)"
                    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (fingerprint) DO NOTHING",
                    &c->devices, &ignored) != SQLITE_OK ||
        import_rows(db, docs[i], "measurements", MEASUREMENT_MEMBERS, INSERT_MEASUREMENT, &c->measurements,
                    &c->duplicates) != SQLITE_OK) {
      snprintf(err, errlen, "%s: %s", names[i], sqlite3_errmsg(db->h));
      rc = KT_ERR_DB_WRITE;
      break;
    }
    rc = import_rank(db, names[i], docs[i], &c->ranked, err, errlen);
    c->files += rc == KT_OK;
  }
  if (rc == KT_OK)
    rc = exec(db, "COMMIT", err, errlen);
  if (rc != KT_OK) {
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    memset(c, 0, sizeof *c);
  }
  return rc;
}
