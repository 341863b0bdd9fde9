/* SPDX-License-Identifier: MIT */
/* runtime/misses.c: the problems a context served without a tuned entry of
 * their own ("misses"), remembered while it is open and kept beside the
 * user database when it closes, for `ktune tune` to tune (kt_misses_).
 *
 * In memory: a fixed table of KT_MISSES_SLOTS problems per context, open
 * addressing over KT_MISSES_PROBES slots; a problem that finds no room is
 * dropped (and counted), so memory is bounded whatever the calls.
 *
 * On disk: <user database>.misses, text: the line KT_MISSES_HEADER, a
 * comment line that names the fields, then one miss a line,
 *   fingerprint <TAB> family <TAB> key <TAB> count
 * key as the family's key() writes it ("1000x1000x3" or "nbins=300
 * n=1000").  A close merges its misses into the file (counts added), keeps
 * the KT_MISSES_FILE_MAX most counted lines and replaces the file whole
 * (a temporary file renamed over it, given the old file's mode): a reader
 * never sees half a file.
 *
 * Merges one at a time: a merge (a close's, or a tune's forget) reads the
 * file under its lock (flock, on the file itself: never on the database,
 * whose SQLite locks a close of ours would drop) and holds the lock until
 * its new file is in place; one that awaited the lock while the file was
 * replaced starts again on the new file.  So processes closing at once
 * lose none of one another's counts.  A merge waits at most MERGE_WAIT_MS
 * in all (a lock held by a process stopped mid-merge) and then fails,
 * rather than hang a close.  The new file replaces only the file read: it
 * is swapped in (renameat2's RENAME_EXCHANGE) and the file it displaced
 * compared with the one read (device, inode, size, write time); another,
 * put there by something that takes no lock, is swapped back and left as
 * it is (the merge starts again, and finds it no file of ktune's).  What
 * is left to chance: where the file system cannot exchange names or
 * refuse to replace one (renameat2's flags), a file put there by such a
 * writer between the comparison and the plain rename that follows it, and
 * two first files made at once (each looked for none), one of which
 * replaces the other; where it has no flock (NFS on a file this user may
 * not write), merges at once, as before the lock.  Lines that do not read
 * (another version's, a family this build lacks) are dropped when the
 * file is next written.
 *
 * The path is the user's to use, so only a file of ours is ever replaced
 * or removed: a regular file (not a link: the link would be replaced by a
 * file, or another file written through it) whose first line is the
 * header.  Anything else there is left as it is, and the caller is told.
 * An empty file is not ours either: ktune never leaves one (it removes the
 * file rather than empty it, and a rename shows no half-written file), so
 * someone else made it (touch, or a shell's `>` before its first write),
 * and replacing it would race their writer or break their inode (links,
 * owner).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kt_internal.h"

#define MISSES_SUFFIX ".misses" /* after the database's path */
#define KT_MISSES_PROBES 16 /* slots a problem may take, from its hash on */

typedef struct slot {
  uint64_t key; /* the problem's hash, never 0; 0 = empty.  Written last, with release */
  long long count;
  kt_problem problem; /* written once, before key */
} slot;

struct kt_misses {
  pthread_mutex_t lock; /* taken only to claim an empty slot */
  long long dropped;    /* problems that found no room */
  slot slot[KT_MISSES_SLOTS];
};

kt_misses *kt_misses_new(void)
{
  kt_misses *m = calloc(1, sizeof *m);
  if (m)
    pthread_mutex_init(&m->lock, NULL);
  return m;
}

void kt_misses_free(kt_misses *m)
{
  if (!m)
    return;
  pthread_mutex_destroy(&m->lock);
  free(m);
}

/* Do p and q name the same problem (family and sizes; not the distribution)? */
static int same(const kt_problem *p, const kt_problem *q)
{
  if (p->family != q->family)
    return 0;
  const kt_family_ops *ops = kt_family_get(p->family);
  const int nd = ops ? ops->ndims : KT_MAX_DIMS;
  for (int d = 0; d < nd; ++d)
    if (p->dim[d] != q->dim[d])
      return 0;
  return 1;
}

static uint64_t hash(const kt_problem *p)
{
  const kt_family_ops *ops = kt_family_get(p->family);
  const int nd = ops ? ops->ndims : KT_MAX_DIMS;
  uint64_t h = (1469598103934665603ull ^ (uint64_t)p->family) * 1099511628211ull;
  for (int d = 0; d < nd; ++d)
    h = (h ^ (uint64_t)p->dim[d]) * 1099511628211ull;
  /* FNV over whole words mixes poorly into the bits that pick the slot:
   * a finalizer (MurmurHash3's) spreads every input bit over them. */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h | 1;
}

/* A problem seen before costs a hash, a few loads and an atomic add; only
 * the first sight of a problem takes the lock, to claim its slot.  A slot's
 * problem is written before its key is published (release), and a reader
 * that sees the key (acquire) sees the problem; keys never change once set. */
void kt_misses_note(kt_misses *m, const kt_tuned *nearest, const kt_problem *p)
{
  if (!m || (nearest && same(&nearest->problem, p)))
    return;
  const uint64_t h = hash(p);
  const unsigned start = (unsigned)(h >> 32) % KT_MISSES_SLOTS;
  for (int i = 0; i < KT_MISSES_PROBES; ++i) {
    slot *s = &m->slot[(start + (unsigned)i) % KT_MISSES_SLOTS];
    const uint64_t k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
    if (k == 0)
      break;
    if (k == h && same(&s->problem, p)) {
      __atomic_add_fetch(&s->count, 1, __ATOMIC_RELAXED);
      return;
    }
  }
  pthread_mutex_lock(&m->lock);
  slot *free_slot = NULL;
  for (int i = 0; i < KT_MISSES_PROBES; ++i) {
    slot *s = &m->slot[(start + (unsigned)i) % KT_MISSES_SLOTS];
    const uint64_t k = __atomic_load_n(&s->key, __ATOMIC_ACQUIRE);
    if (k == 0) {
      free_slot = s;
      break;
    }
    if (k == h && same(&s->problem, p)) { /* another thread claimed it meanwhile */
      __atomic_add_fetch(&s->count, 1, __ATOMIC_RELAXED);
      pthread_mutex_unlock(&m->lock);
      return;
    }
  }
  if (free_slot) {
    free_slot->problem = *p;
    free_slot->problem.dist[0] = 0;
    __atomic_store_n(&free_slot->count, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&free_slot->key, h, __ATOMIC_RELEASE);
  } else
    ++m->dropped;
  pthread_mutex_unlock(&m->lock);
}

int kt_misses_get(const kt_misses *m, kt_problem *out, long long *counts, int max)
{
  int n = 0;
  for (int i = 0; m && i < KT_MISSES_SLOTS && n < max; ++i)
    if (__atomic_load_n(&m->slot[i].key, __ATOMIC_ACQUIRE)) {
      out[n] = m->slot[i].problem;
      counts[n++] = __atomic_load_n(&m->slot[i].count, __ATOMIC_RELAXED);
    }
  return n;
}

int kt_misses_path(const char *db, char *buf, size_t len)
{
  return db && *db && snprintf(buf, len, "%s" MISSES_SUFFIX, db) < (int)len ? KT_OK : KT_ERR_BAD_OPTION;
}

/* ---- the file ------------------------------------------------------------ */

/* One line into e: 1, or 0 when it does not read. */
static int read_line(char *line, kt_misses_entry *e)
{
  line[strcspn(line, "\r\n")] = 0;
  if (line[0] == '#' || line[0] == 0)
    return 0;
  char *f[4];
  int n = 0;
  for (char *p = line; n < 4; ++n) {
    f[n] = p;
    char *tab = strchr(p, '\t');
    if (!tab) {
      ++n;
      break;
    }
    *tab = 0;
    p = tab + 1;
  }
  if (n != 4 || strchr(f[3], '\t'))
    return 0;
  const kt_family_ops *ops = kt_family_find(f[1]);
  char *end;
  errno = 0;
  const long long count = strtoll(f[3], &end, 10);
  if (!ops || errno || end == f[3] || *end || count <= 0 || ops->parse(f[2], &e->problem) != KT_OK ||
      snprintf(e->fingerprint, sizeof e->fingerprint, "%s", f[0]) >= (int)sizeof e->fingerprint)
    return 0;
  e->problem.family = ops->id;
  e->problem.dist[0] = 0;
  kt_problem_key(&e->problem, 0, e->key, sizeof e->key);
  e->count = count;
  return 1;
}

/* What a merge read: no file, or the file's identity (see the top): its
 * device and inode, and its size and time of last write, which tell a
 * file that took a removed one's inode number.  Not the change time: a
 * rename sets it. */
typedef struct file_id {
  int exists;
  struct stat sb;
} file_id;

static int same_inode(const struct stat *a, const struct stat *b)
{
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int same_file_as(const struct stat *sb, const file_id *id)
{
  const struct stat *r = &id->sb;
  return id->exists && S_ISREG(sb->st_mode) && same_inode(sb, r) && sb->st_size == r->st_size &&
         sb->st_mtim.tv_sec == r->st_mtim.tv_sec && sb->st_mtim.tv_nsec == r->st_mtim.tv_nsec;
}

#define CHANGED (-2)      /* the file is not the one read, or no longer at path: merge again (no KT_ code) */
#define MERGE_WAIT_MS 2000 /* the longest a merge waits on others: their locks, their replacements */

/* fd's lock (fd is the file sb at path), taken before deadline (ms, kt_now_s's
 * clock): 0; 0 with *none where the file system has no flock (NFS on a
 * descriptor open for reading only, ENOLCK): the merge goes on without;
 * CHANGED once path no longer names the file (the merge that held the
 * lock replaced it); -1 with errno (EWOULDBLOCK: the deadline passed). */
static int lock_before(int fd, const struct stat *sb, const char *path, double deadline, int *none)
{
  *none = 0;
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
      return 0;
    if (errno == EBADF || errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS) {
      *none = 1;
      return 0;
    }
    if (errno != EWOULDBLOCK && errno != EINTR)
      return -1;
    struct stat now;
    if (lstat(path, &now) != 0 || !same_inode(&now, sb))
      return CHANGED;
    if (kt_now_s() * 1e3 >= deadline) {
      errno = EWOULDBLOCK;
      return -1;
    }
    const struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

/* kt_misses_read, and what it read into *id.  lock_fd (not NULL): the file
 * is read under its lock, taken before deadline, which *lock_fd holds on
 * return (-1: no file, or no lock on this file system; close it when
 * done); CHANGED where it was replaced while the lock was awaited. */
static int read_misses(const char *path, kt_misses_entry **out, int *n, file_id *id, int *lock_fd, double deadline,
                       char *err, size_t errlen)
{
  *out = NULL;
  *n = 0;
  id->exists = 0;
  if (lock_fd)
    *lock_fd = -1;
  /* No link followed, and no FIFO's open left waiting for a writer: what
   * is there must first show itself a file of ours (see the top).  To be
   * locked, open for writing where it may be (NFS locks only such). */
  const int flags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  int fd = lock_fd ? open(path, O_RDWR | flags) : -1;
  if (fd < 0)
    fd = open(path, O_RDONLY | flags);
  struct stat sb;
  if (fd < 0 && errno == ENOENT)
    return KT_OK;
  if (fd < 0 && errno == ELOOP && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
    snprintf(err, errlen, "%s is a link, and misses are never written through one; it is left as it is", path);
    return KT_ERR_DB_FOREIGN;
  }
  if (fd < 0 || fstat(fd, &sb) != 0) {
    snprintf(err, errlen, "reading %s: %s", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    return KT_ERR_DB_OPEN;
  }
  if (!S_ISREG(sb.st_mode)) {
    snprintf(err, errlen, "%s is not a regular file; it is left as it is", path);
    close(fd);
    return KT_ERR_DB_FOREIGN;
  }
  int lock_failed = 0; /* an errno: the file is read unlocked, to tell the message */
  if (lock_fd) {
    /* Locked, and still the file at path: one that another merge replaced
     * while this one waited is not read. */
    int none;
    const int got = lock_before(fd, &sb, path, deadline, &none);
    if (got == CHANGED) {
      close(fd);
      return CHANGED;
    }
    struct stat now;
    if (got != 0)
      lock_failed = errno;
    else if (lstat(path, &now) != 0 || !same_inode(&now, &sb)) {
      close(fd);
      return CHANGED;
    } else if (fstat(fd, &sb) != 0) { /* as it is now that nobody else writes it */
      snprintf(err, errlen, "reading %s: %s", path, strerror(errno));
      close(fd);
      return KT_ERR_DB_OPEN;
    }
    if (got == 0 && !none)
      *lock_fd = fd;
  }
  id->exists = 1;
  id->sb = sb;
  /* The lock stays with *lock_fd: its own descriptor, never inherited. */
  const int rfd = lock_fd && *lock_fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : fd;
  FILE *f = rfd >= 0 ? fdopen(rfd, "r") : NULL;
  kt_misses_entry *e = f ? malloc(sizeof *e * (KT_MISSES_FILE_MAX + 1)) : NULL;
  if (!e) {
    const int rc = f ? KT_ERR_NO_MEMORY : KT_ERR_DB_OPEN;
    snprintf(err, errlen, "reading %s: %s", path, strerror(errno));
    if (f)
      fclose(f);
    else if (rfd >= 0)
      close(rfd);
    if (lock_fd && *lock_fd >= 0)
      close(*lock_fd), *lock_fd = -1;
    return rc;
  }
  char line[1024];
  const size_t hlen = strlen(KT_MISSES_HEADER);
  if (!fgets(line, sizeof line, f) || strncmp(line, KT_MISSES_HEADER, hlen) != 0 ||
      line[hlen + strspn(line + hlen, "\r\n")] != 0) {
    const int bad = ferror(f);
    if (bad)
      snprintf(err, errlen, "reading %s: %s", path, strerror(errno));
    else
      snprintf(err, errlen, "%s is not ktune's misses file (%s); it is left as it is", path,
               sb.st_size == 0 ? "it is empty" : "its first line is not ktune's header");
    fclose(f);
    free(e);
    if (lock_fd && *lock_fd >= 0)
      close(*lock_fd), *lock_fd = -1;
    return bad ? KT_ERR_DB_OPEN : KT_ERR_DB_FOREIGN;
  }
  if (lock_failed) { /* ktune's file, and no lock on it: say which */
    snprintf(err, errlen, "locking %s: %s", path,
             lock_failed == EWOULDBLOCK ? "another process has held it too long" : strerror(lock_failed));
    fclose(f);
    free(e);
    return KT_ERR_DB_WRITE;
  }
  while (*n < KT_MISSES_FILE_MAX && fgets(line, sizeof line, f))
    *n += read_line(line, &e[*n]);
  fclose(f);
  *out = e;
  return KT_OK;
}

int kt_misses_read(const char *path, kt_misses_entry **out, int *n, char *err, size_t errlen)
{
  file_id id;
  return read_misses(path, out, n, &id, NULL, 0, err, errlen);
}

static int most_counted(const void *a, const void *b)
{
  const kt_misses_entry *x = a, *y = b;
  if (x->count != y->count)
    return x->count < y->count ? 1 : -1;
  const int c = strcmp(x->fingerprint, y->fingerprint);
  return c ? c : strcmp(x->key, y->key);
}

/* The read and write bits of the tuning database whose misses file is
 * path (path less MISSES_SUFFIX, kt_misses_path's inverse: the tuner has
 * only the misses file's path) into *mode; 0 where there is no such
 * regular file. */
static int database_mode(const char *path, mode_t *mode)
{
  const size_t len = strlen(path), sl = strlen(MISSES_SUFFIX);
  char db[PATH_MAX + 1];
  struct stat sb;
  if (len <= sl || len - sl >= sizeof db || strcmp(path + len - sl, MISSES_SUFFIX) != 0)
    return 0;
  memcpy(db, path, len - sl);
  db[len - sl] = 0;
  if (stat(db, &sb) != 0 || !S_ISREG(sb.st_mode))
    return 0;
  *mode = sb.st_mode & 0666;
  return 1;
}

/* tmp (a whole file of ours) in path's place, where path is still what was
 * read (*was; NULL: whatever is there): 0, CHANGED, or -1 with errno.
 * ours: tmp's own identity.  *stranded: a swap could not be undone, and
 * tmp holds another file (what was at path, or what took its place). */
static int put_in_place(const char *tmp, const char *path, const file_id *was, const struct stat *ours, int *stranded)
{
  struct stat sb;
  *stranded = 0;
  if (!was)
    return rename(tmp, path) == 0 ? 0 : -1;
  if (!was->exists) {
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
      return 0;
    if (errno == EEXIST)
      return CHANGED;
    if (errno != EINVAL && errno != ENOSYS)
      return -1;
    if (lstat(path, &sb) == 0) /* no RENAME_NOREPLACE here: look, then rename */
      return CHANGED;
    return errno == ENOENT && rename(tmp, path) == 0 ? 0 : -1;
  }
  if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0) {
    if (lstat(tmp, &sb) == 0 && same_file_as(&sb, was)) {
      unlink(tmp); /* the file read, replaced */
      return 0;
    }
    /* Put back, where ours is still at path: a merge that found ours
     * there meanwhile and replaced it has its file at path. */
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_EXCHANGE) == 0 && lstat(tmp, &sb) == 0 &&
        same_inode(&sb, ours))
      return CHANGED;
    *stranded = 1;
    return -1;
  }
  if (errno == ENOENT) /* gone meanwhile */
    return CHANGED;
  if (errno != EINVAL && errno != ENOSYS)
    return -1;
  if (lstat(path, &sb) != 0) /* no RENAME_EXCHANGE here: look, then rename */
    return errno == ENOENT ? CHANGED : -1;
  return !same_file_as(&sb, was) ? CHANGED : rename(tmp, path) == 0 ? 0 : -1;
}

/* path removed, where it is still what was read (as put_in_place). */
static int remove_in_place(const char *tmp, const char *path, const file_id *was, int *stranded)
{
  struct stat sb;
  *stranded = 0;
  if (!was)
    return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
  if (!was->exists)
    return lstat(path, &sb) == 0 ? CHANGED : 0;
  int moved = renameat2(AT_FDCWD, path, AT_FDCWD, tmp, RENAME_NOREPLACE) == 0;
  if (!moved && errno == EEXIST && unlink(tmp) == 0) /* left by a process of our pid that died */
    moved = renameat2(AT_FDCWD, path, AT_FDCWD, tmp, RENAME_NOREPLACE) == 0;
  if (moved) {
    if (lstat(tmp, &sb) == 0 && same_file_as(&sb, was))
      return unlink(tmp) == 0 ? 0 : -1;
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
      return CHANGED;
    *stranded = 1;
    return -1;
  }
  if (errno == ENOENT)
    return 0; /* removed meanwhile: as asked */
  if (errno != EINVAL && errno != ENOSYS)
    return -1;
  if (lstat(path, &sb) != 0)
    return errno == ENOENT ? 0 : -1;
  return !same_file_as(&sb, was) ? CHANGED : unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* The temporary file's name: the process's and a count of its writes, so
 * that two threads closing contexts at once never share one. */
static int temp_name(const char *path, char *tmp, size_t len)
{
  static unsigned writes;
  const unsigned w = __atomic_fetch_add(&writes, 1, __ATOMIC_RELAXED);
  return snprintf(tmp, len, "%s.tmp%ld.%u", path, (long)getpid(), w) < (int)len;
}

/* kt_misses_write, replacing or removing only the file that was read
 * (was; NULL: whatever regular file is there): KT_OK, CHANGED, or an error. */
static int write_misses(const char *path, kt_misses_entry *e, int n, const file_id *was, char *err, size_t errlen)
{
  char tmp[PATH_MAX + 1100];
  int stranded = 0, put;
  if (!temp_name(path, tmp, sizeof tmp)) {
    snprintf(err, errlen, "%s: path too long", path);
    return KT_ERR_DB_WRITE;
  }
  if (n == 0) { /* nothing left: no file */
    if ((put = remove_in_place(tmp, path, was, &stranded)) == -1) {
      if (stranded)
        snprintf(err, errlen,
                 "removing %s: another file was put there meanwhile, and could not be put back: it is %s now", path,
                 tmp);
      else
        snprintf(err, errlen, "removing %s: %s", path, strerror(errno));
      return KT_ERR_DB_WRITE;
    }
    return put;
  }
  qsort(e, (size_t)n, sizeof *e, most_counted);
  if (n > KT_MISSES_FILE_MAX)
    n = KT_MISSES_FILE_MAX;
  /* The new file keeps the old one's mode (a private file stays private);
   * a first file takes the database's beside it (a private database's
   * misses are private too), read and write bits only.  Private until it
   * has it. */
  struct stat old; /* what the merge read, if it did (put_in_place makes sure it is what is replaced) */
  const int had = was ? was->exists : lstat(path, &old) == 0;
  if (was && had)
    old = was->sb;
  if (had && !S_ISREG(old.st_mode)) {
    snprintf(err, errlen, "%s is not a regular file; it is left as it is", path);
    return KT_ERR_DB_FOREIGN;
  }
  mode_t want = had ? old.st_mode & 07777 : 0;
  const int follow = had || database_mode(path, &want); /* a mode to take */
  const mode_t mode = follow ? 0600 : 0644; /* nothing to follow: 0644 less the umask */
  /* A file of our own: never through a link, never one that is there. */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) /* left by a process of our pid that died */
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) {
    snprintf(err, errlen, "writing %s: %s", tmp, strerror(errno));
    return KT_ERR_DB_WRITE;
  }
  /* From here on, every failure removes tmp: it is ours, and nobody else's
   * to clean up. */
  FILE *f = follow && fchmod(fd, want) != 0 ? NULL : fdopen(fd, "w");
  if (!f) {
    snprintf(err, errlen, "writing %s: %s", tmp, strerror(errno));
    close(fd);
    unlink(tmp);
    return KT_ERR_DB_WRITE;
  }
  fprintf(f, "%s\n# fingerprint\tfamily\tkey\tcount\n", KT_MISSES_HEADER);
  for (int i = 0; i < n; ++i)
    fprintf(f, "%s\t%s\t%s\t%lld\n", e[i].fingerprint, kt_family_name(e[i].problem.family), e[i].key, e[i].count);
  /* On disk before the rename: a crash after it must not leave an empty
   * file in its place, which is not ours to replace (see the top). */
  struct stat ours;
  const int bad = ferror(f) || fflush(f) != 0 || fsync(fileno(f)) != 0 || fstat(fileno(f), &ours) != 0;
  if (fclose(f) != 0 || bad || (put = put_in_place(tmp, path, was, &ours, &stranded)) == -1) {
    if (stranded)
      snprintf(err, errlen, "writing %s: another file was put there meanwhile, and could not be put back: it is %s now",
               path, tmp);
    else
      snprintf(err, errlen, "writing %s: %s", path, strerror(errno ? errno : EIO));
    if (!stranded)
      unlink(tmp);
    return KT_ERR_DB_WRITE;
  }
  if (put == CHANGED)
    unlink(tmp);
  return put;
}

int kt_misses_write(const char *path, kt_misses_entry *e, int n, char *err, size_t errlen)
{
  return write_misses(path, e, n, NULL, err, errlen);
}

static int find(const kt_misses_entry *e, int n, const char *fingerprint, const kt_problem *p)
{
  for (int i = 0; i < n; ++i)
    if (same(&e[i].problem, p) && strcmp(e[i].fingerprint, fingerprint) == 0)
      return i;
  return -1;
}

/* An edit of the file's lines e[0..n) (room after them for as many as the
 * merge was told): their new count, or -1 where nothing is to be written. */
typedef int (*edit_fn)(kt_misses_entry *e, int n, void *arg);

/* The file's lines read under its lock, edited and written back (see the
 * top), started again where the file was replaced meanwhile.  what: the
 * edit, for the message where it never got through. */
static int merge(const char *path, int room, edit_fn edit, void *arg, const char *what, char *err, size_t errlen)
{
  const double deadline = kt_now_s() * 1e3 + MERGE_WAIT_MS;
  for (;;) {
    kt_misses_entry *e = NULL;
    file_id was;
    int n = 0, lock = -1, rc = read_misses(path, &e, &n, &was, &lock, deadline, err, errlen);
    if (rc == KT_OK && room > 0) {
      kt_misses_entry *all = realloc(e, sizeof *e * (size_t)(n + room));
      if (all)
        e = all;
      else
        rc = KT_ERR_NO_MEMORY, snprintf(err, errlen, "out of memory");
    }
    if (rc == KT_OK) {
      const int lines = edit(e, n, arg);
      if (lines >= 0)
        rc = write_misses(path, e, lines, &was, err, errlen);
    }
    free(e);
    if (lock >= 0)
      close(lock); /* the lock, let go once the new file is in place */
    if (rc != CHANGED)
      return rc;
    if (kt_now_s() * 1e3 >= deadline) {
      snprintf(err, errlen, "%s kept being replaced for %d s while %s; it is left as it is", path,
               MERGE_WAIT_MS / 1000, what);
      return KT_ERR_DB_WRITE;
    }
  }
}

typedef struct save_arg {
  const char *fingerprint;
  const kt_problem *p;
  const long long *c;
  int np;
} save_arg;

static int add_counts(kt_misses_entry *e, int n, void *arg)
{
  const save_arg *a = arg;
  for (int i = 0; i < a->np; ++i) {
    const int j = find(e, n, a->fingerprint, &a->p[i]);
    if (j >= 0) {
      e[j].count = a->c[i] > LLONG_MAX - e[j].count ? LLONG_MAX : e[j].count + a->c[i];
      continue;
    }
    memset(&e[n], 0, sizeof e[n]);
    snprintf(e[n].fingerprint, sizeof e[n].fingerprint, "%s", a->fingerprint);
    e[n].problem = a->p[i];
    kt_problem_key(&a->p[i], 0, e[n].key, sizeof e[n].key);
    e[n++].count = a->c[i];
  }
  return n;
}

int kt_misses_save(const kt_misses *m, const char *fingerprint, const char *path, char *err, size_t errlen)
{
  kt_problem *p = malloc(sizeof *p * KT_MISSES_SLOTS);
  long long *c = malloc(sizeof *c * KT_MISSES_SLOTS);
  int rc = p && c ? KT_OK : KT_ERR_NO_MEMORY;
  err[0] = 0;
  if (rc != KT_OK)
    snprintf(err, errlen, "out of memory");
  const int np = rc == KT_OK ? kt_misses_get(m, p, c, KT_MISSES_SLOTS) : 0;
  if (np > 0) { /* none: the file stays as it is */
    save_arg a = {fingerprint, p, c, np};
    rc = merge(path, np + 1, add_counts, &a, "these misses were merged into it", err, errlen);
  }
  free(p), free(c);
  return rc;
}

typedef struct forget_arg {
  const char *fingerprint;
  const kt_problem *p;
  int np;
} forget_arg;

static int take_out(kt_misses_entry *e, int n, void *arg)
{
  const forget_arg *a = arg;
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    int hit = 0;
    for (int k = 0; k < a->np && !hit; ++k)
      hit = same(&e[i].problem, &a->p[k]) && strcmp(e[i].fingerprint, a->fingerprint) == 0;
    if (!hit)
      e[kept++] = e[i];
  }
  return kept < n ? kept : -1; /* nothing taken out: nothing to write */
}

int kt_misses_forget(const char *path, const char *fingerprint, const kt_problem *p, int np, char *err, size_t errlen)
{
  forget_arg a = {fingerprint, p, np};
  return merge(path, 0, take_out, &a, "those lines were taken out", err, errlen);
}
