/* The cache folder of fetched ranges: entries, their locks, the byte limit (cache_internal.h). */
#include "stream/cache_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/al_status.h"
#include "common/atomic_file_internal.h"

#define ENTRY_PREFIX "e-"
#define TMP_PREFIX "t-"
#define LOCK_NAME "locks"
/* Names a thread tries for its temporary file before it gives up (cache_internal.h). */
#define TMP_ATTEMPTS 64

struct stream_cache {
  char *dir; /* for messages */
  int dfd;   /* the folder: every name in it is opened relative to this, never through a link */
  uint64_t limit;
};

int stream_cache_open(stream_cache **out, const char *dir, uint64_t limit_bytes) {
  *out = NULL;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return al_set_error(AL_EIO, "cache folder %s: mkdir: %s", dir, strerror(errno));
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    int e = errno;
    return al_set_error(AL_EIO, "cache folder %s: %s", dir,
                        e == ENOTDIR ? "not a folder" : strerror(e));
  }
  stream_cache *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = strdup(dir))) {
    free(c);
    close(dfd);
    return al_set_error(AL_ENOMEM, "cache folder %s", dir);
  }
  c->dfd = dfd;
  c->limit = limit_bytes;
  *out = c;
  return AL_OK;
}

void stream_cache_close(stream_cache *c) {
  if (!c) return;
  close(c->dfd);
  free(c->dir);
  free(c);
}

/* The refusal of a name of the folder that is not a regular file, or is one with other names. */
static int refuse(const stream_cache *c, const char *name, const struct stat *sb) {
  if (S_ISREG(sb->st_mode))
    return al_set_error(AL_EINVAL,
                        "cache folder: %s/%s has %ju hard links (a file with a name outside the "
                        "folder, maybe): refusing to write it (remove it)",
                        c->dir, name, (uintmax_t)sb->st_nlink);
  return al_set_error(AL_EINVAL,
                      "cache folder: %s/%s is %s, not a regular file: refusing to use it (remove "
                      "it)",
                      c->dir, name, afile_kind_name(sb->st_mode));
}

int stream_cache_lock_fd(const stream_cache *c, int *fd) {
  /* O_NOFOLLOW: a link at the name fails (ELOOP) instead of opening, or creating, its target;
   * O_NONBLOCK: a FIFO there does not block the open. */
  *fd = openat(c->dfd, LOCK_NAME, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
               0666);
  if (*fd < 0) {
    int e = errno;
    struct stat sb;
    if (e == ELOOP && fstatat(c->dfd, LOCK_NAME, &sb, AT_SYMLINK_NOFOLLOW) == 0)
      return refuse(c, LOCK_NAME, &sb);
    return al_set_error(AL_EIO, "cache folder: %s/" LOCK_NAME ": %s", c->dir, strerror(e));
  }
  struct stat sb;
  int rc = AL_OK;
  if (fstat(*fd, &sb) != 0)
    rc = al_set_error(AL_EIO, "cache folder: %s/" LOCK_NAME ": %s", c->dir, strerror(errno));
  else if (!S_ISREG(sb.st_mode) || sb.st_nlink > 1)
    rc = refuse(c, LOCK_NAME, &sb);
  int fl = rc == AL_OK ? fcntl(*fd, F_GETFL) : -1;
  if (fl >= 0) (void)fcntl(*fd, F_SETFL, fl & ~O_NONBLOCK);
  if (rc != AL_OK) {
    close(*fd);
    *fd = -1;
  }
  return rc;
}

/* An OFD lock on one byte of the lock file: exclusive, waiting (lock 1) or released (0). */
static int lock_byte(int fd, uint64_t at, int lock) {
  struct flock fl = {.l_type = lock ? F_WRLCK : F_UNLCK,
                     .l_whence = SEEK_SET,
                     .l_start = (off_t)at,
                     .l_len = 1};
  while (fcntl(fd, lock ? F_OFD_SETLKW : F_OFD_SETLK, &fl) != 0) {
    if (errno == EINTR) continue;
    return al_set_error(AL_EIO, "cache lock: %s", strerror(errno));
  }
  return AL_OK;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
  return h;
}

static uint64_t entry_hash(const char *url, const char *etag, uint64_t size, uint64_t off,
                           uint64_t len) {
  uint64_t h = 14695981039346656037ull;
  h = fnv(h, url, strlen(url) + 1);
  h = fnv(h, etag, strlen(etag) + 1);
  h = fnv(h, &size, sizeof size);
  h = fnv(h, &off, sizeof off);
  return fnv(h, &len, sizeof len);
}

/* An entry's file name in the folder: ENTRY_PREFIX and its hash. */
static void entry_name(uint64_t h, char name[64]) {
  snprintf(name, 64, ENTRY_PREFIX "%016" PRIx64, h);
}

/* An entry's byte of the lock file: byte 0 is the folder's lock, entries lock 1 .. 2^40. */
static uint64_t entry_lock_at(uint64_t h) { return 1 + (h & ((1ull << 40) - 1)); }

/* The eviction order is the entries' mtime (seconds), lowest first (cache_internal.h): */
#define STEP_SPAN (1u << 29)   /* steps told apart; later ones count as the last */
#define UNREAD_BASE (1u << 30) /* above every consumed key, below today's clock */

static uint32_t clamp_step(uint32_t step) { return step < STEP_SPAN - 1 ? step : STEP_SPAN - 1; }

/* The key of an entry read into a batch at `step`: the oldest reads go first. */
static time_t consumed_key(uint32_t step) { return (time_t)(1 + clamp_step(step)); }

/* The key of an entry stored ahead of its read at `step`: the furthest read goes first. */
static time_t unread_key(uint32_t step) {
  return (time_t)UNREAD_BASE + (time_t)(STEP_SPAN - 1 - clamp_step(step));
}

static void set_key(int fd, time_t key) {
  struct timespec t[2] = {{key, 0}, {key, 0}};
  futimens(fd, t);
}

/* The entry `name` opened read-only when it is a regular file of exactly `len` bytes and no
 * other name (hard link): its descriptor (*sb its stat), else -1. A symbolic link at the name is
 * never followed (O_NOFOLLOW), a FIFO never blocks the open (O_NONBLOCK, cleared once the file is
 * known to be regular), and a link, FIFO, device, folder or a file with another name elsewhere
 * counts as absent: the store that follows renames a regular file over it (a folder makes that
 * rename fail, naming it). */
static int entry_open(const stream_cache *c, const char *name, uint64_t len, struct stat *sb) {
  int fd = openat(c->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode) || sb->st_nlink > 1 ||
      (uint64_t)sb->st_size != len) {
    close(fd);
    return -1;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

/* Reads the whole entry (exactly len bytes) into dst: 1, 0 when absent or of another size. Its
 * key becomes `key` (0: unchanged). */
static int entry_load(const stream_cache *c, const char *name, uint64_t len, void *dst,
                      time_t key) {
  struct stat sb;
  int fd = entry_open(c, name, len, &sb);
  if (fd < 0) return 0;
  int ok = 1;
  uint64_t got = 0;
  while (ok && got < len) {
    ssize_t n = pread(fd, (char *)dst + got, (size_t)(len - got), (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      ok = 0;
    else
      got += (uint64_t)n;
  }
  if (ok && key) set_key(fd, key);
  close(fd);
  return ok;
}

/* Whether the entry is stored whole (its size is len); if so its key becomes `key` unless the
 * entry already says it is needed sooner (a higher key), without reading it. */
static int entry_touch(const stream_cache *c, const char *name, uint64_t len, time_t key) {
  struct stat sb;
  int fd = entry_open(c, name, len, &sb);
  if (fd < 0) return 0;
  if (sb.st_mtim.tv_sec < key) set_key(fd, key);
  close(fd);
  return 1;
}

/* Creates this thread's temporary file in the folder: TMP_PREFIX, pid, thread id, attempt
 * (the pid first: evict() removes those of dead processes). O_CREAT|O_EXCL|O_NOFOLLOW: a name
 * that exists, whatever it is (a link, a stale file, a namesake thread of another pid
 * namespace writing), is left alone and the next attempt's name tried. *fd and tmp, else an
 * error naming the last name tried. */
static int tmp_create(const stream_cache *c, int flags, char tmp[80], int *fd) {
  int e = 0;
  for (int attempt = 0; attempt < TMP_ATTEMPTS; attempt++) {
    snprintf(tmp, 80, TMP_PREFIX "%ld-%ld-%d", (long)getpid(), (long)syscall(SYS_gettid), attempt);
    *fd = openat(c->dfd, tmp, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (*fd >= 0) return AL_OK;
    e = errno;
    if (e != EEXIST) break;
  }
  return al_set_error(AL_EIO, "cache folder: temporary file %s/%s: %s%s", c->dir, tmp, strerror(e),
                      e == EEXIST ? " (and every other name this thread may use)" : "");
}

/* Renames temporary `tmp` over entry `name`: a link, FIFO or file there is replaced, never
 * written through; a folder there fails, naming it. */
static int tmp_commit(const stream_cache *c, const char *tmp, const char *name) {
  if (renameat(c->dfd, tmp, c->dfd, name) == 0) return AL_OK;
  int e = errno;
  struct stat sb;
  if (fstatat(c->dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode))
    return refuse(c, name, &sb);
  return al_set_error(AL_EIO, "cache folder: rename %s/%s to %s: %s", c->dir, tmp, name,
                      strerror(e));
}

static int entry_store(const stream_cache *c, const char *name, const void *src, uint64_t len,
                       time_t key) {
  char tmp[80];
  int fd;
  int rc = tmp_create(c, O_WRONLY, tmp, &fd);
  if (rc != AL_OK) return rc;
  uint64_t put = 0;
  while (put < len) {
    ssize_t n = write(fd, (const char *)src + put, (size_t)(len - put));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      rc = al_set_error(AL_EIO, "cache folder: write %s/%s: %s", c->dir, tmp,
                        n < 0 ? strerror(errno) : "wrote nothing");
      break;
    }
    put += (uint64_t)n;
  }
  if (rc == AL_OK) set_key(fd, key); /* our own new file */
  if (rc == AL_OK && fsync(fd) != 0)
    rc = al_set_error(AL_EIO, "cache folder: fsync %s/%s: %s", c->dir, tmp, strerror(errno));
  close(fd);
  if (rc == AL_OK) rc = tmp_commit(c, tmp, name);
  if (rc != AL_OK) unlinkat(c->dfd, tmp, 0);
  return rc;
}

typedef struct entry_stat {
  char name[64];
  uint64_t bytes;
  struct timespec mtime;
} entry_stat;

static int older(const void *a, const void *b) {
  const entry_stat *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* The folder's running byte total, kept in the first 16 bytes of its lock file ("ALCT" and a
 * little-endian 64-bit sum) and read and written under the folder's lock: a store adds its
 * bytes to it and scans the folder only when the sum would pass the limit. */
static int tally_read(int fd, uint64_t *total) {
  unsigned char b[16];
  if (pread(fd, b, sizeof b, 0) != (ssize_t)sizeof b || memcmp(b, "ALCT", 4)) return 0;
  *total = 0;
  for (int i = 0; i < 8; i++) *total |= (uint64_t)b[8 + i] << (8 * i);
  return 1;
}

static void tally_write(int fd, uint64_t total) {
  unsigned char b[16] = {'A', 'L', 'C', 'T'};
  for (int i = 0; i < 8; i++) b[8 + i] = (unsigned char)(total >> (8 * i));
  if (pwrite(fd, b, sizeof b, 0) != (ssize_t)sizeof b) {
    /* An unwritten tally reads as unknown, and the next store scans. */
  }
}

/* Sums the folder's entries into *es / *n (and *total, temporary files of live processes
 * included); removes temporary files of dead processes and symbolic links at entry and
 * temporary names (the cache makes none; removing one never touches its target). Other
 * files that are not regular are left out. */
static void scan(const stream_cache *c, entry_stat **es_out, size_t *n_out, uint64_t *total) {
  /* The folder opened at stream_cache_open, through a descriptor of its own (readdir moves the
   * offset of the one it reads). */
  int dfd = openat(c->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
  if (!d && dfd >= 0) close(dfd);
  entry_stat *es = NULL;
  size_t n = 0, cap = 0;
  *total = 0;
  struct dirent *de;
  while (d && (de = readdir(d))) {
    int is_tmp = !strncmp(de->d_name, TMP_PREFIX, 2);
    if (strncmp(de->d_name, ENTRY_PREFIX, 2) && !is_tmp) continue;
    struct stat sb;
    if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISLNK(sb.st_mode)) {
      unlinkat(dirfd(d), de->d_name, 0);
      continue;
    }
    if (!S_ISREG(sb.st_mode)) continue;
    if (is_tmp) {
      long pid = strtol(de->d_name + 2, NULL, 10);
      if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        unlinkat(dirfd(d), de->d_name, 0);
      else
        *total += (uint64_t)sb.st_size; /* being written: counts */
      continue;
    }
    if (n == cap) {
      size_t nc = cap ? 2 * cap : 64;
      entry_stat *ne = realloc(es, nc * sizeof *ne);
      if (!ne) break;
      es = ne;
      cap = nc;
    }
    if (strlen(de->d_name) >= sizeof es[n].name) continue;
    memcpy(es[n].name, de->d_name, strlen(de->d_name) + 1);
    es[n].bytes = (uint64_t)sb.st_size;
    es[n].mtime = sb.st_mtim;
    *total += es[n].bytes;
    n++;
  }
  if (d) closedir(d);
  *es_out = es;
  *n_out = n;
}

/* After a store of `added` bytes, under the folder's lock: when the running total passes the
 * limit, the folder is scanned and entries are removed in key order (cache_internal.h), never
 * `keep` (the entry just stored; NULL: none), down to 15/16 of the limit, so the next stores
 * of a sixteenth of the limit need no scan. */
static int evict(const stream_cache *c, int lock_fd, const char *keep, uint64_t added,
                 uint64_t *evicted) {
  int rc = lock_byte(lock_fd, 0, 1);
  if (rc != AL_OK) return rc;
  uint64_t total = 0;
  if (tally_read(lock_fd, &total) && total + added <= c->limit) {
    tally_write(lock_fd, total + added);
    return lock_byte(lock_fd, 0, 0);
  }
  entry_stat *es = NULL;
  size_t n = 0;
  scan(c, &es, &n, &total);
  uint64_t low = c->limit - c->limit / 16;
  if (total > c->limit && n) {
    qsort(es, n, sizeof *es, older);
    for (size_t i = 0; i < n && total > low; i++) {
      if (keep && !strcmp(es[i].name, keep)) continue;
      if (unlinkat(c->dfd, es[i].name, 0) == 0) {
        total -= es[i].bytes;
        *evicted += es[i].bytes;
      }
    }
  }
  free(es);
  tally_write(lock_fd, total);
  return lock_byte(lock_fd, 0, 0);
}

int stream_cache_get(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                     uint64_t size, uint64_t off, uint64_t len, void *dst,
                     stream_cache_fetch_fn fetch, void *ctx, int consume, uint32_t step, int *hit,
                     uint64_t *evicted) {
  time_t key = consume ? consumed_key(step) : unread_key(step);
  *hit = 0;
  uint64_t h = entry_hash(url, etag, size, off, len);
  char name[64];
  entry_name(h, name);
  if (entry_load(c, name, len, dst, key)) {
    *hit = 1;
    return AL_OK;
  }
  uint64_t at = entry_lock_at(h);
  int rc = lock_byte(lock_fd, at, 1);
  if (rc != AL_OK) return rc;
  if (entry_load(c, name, len, dst, key)) { /* another fetcher stored it while we waited */
    *hit = 1;
    return lock_byte(lock_fd, at, 0);
  }
  rc = fetch(ctx, off, len, dst);
  /* An entry larger than the whole cache is delivered but not kept. */
  if (rc == AL_OK && len <= c->limit) rc = entry_store(c, name, dst, len, key);
  int urc = lock_byte(lock_fd, at, 0);
  if (rc == AL_OK && len <= c->limit) rc = evict(c, lock_fd, name, len, evicted);
  return rc != AL_OK ? rc : urc;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int stream_cache_warm_run(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                          uint64_t size, const stream_cache_span *spans, size_t n, uint32_t step,
                          stream_cache_fetch_fn fetch, stream_cache_count_fn counted, void *ctx,
                          uint64_t *evicted) {
  if (n == 0 || n > STREAM_CACHE_MAX_RUN)
    return n ? al_set_error(AL_EINVAL, "cache: a run of %zu ranges", n) : AL_OK;
  time_t key = unread_key(step);
  char name[STREAM_CACHE_MAX_RUN][64];
  uint64_t at[STREAM_CACHE_MAX_RUN];
  int missing[STREAM_CACHE_MAX_RUN];
  size_t n_missing = 0, n_at = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t h = entry_hash(url, etag, size, spans[i].off, spans[i].len);
    entry_name(h, name[i]);
    missing[i] = spans[i].len <= c->limit && !entry_touch(c, name[i], spans[i].len, key);
    if (missing[i]) at[n_at++] = entry_lock_at(h);
    n_missing += (size_t)missing[i];
  }
  if (!n_missing) return AL_OK;
  /* Every lock of the run, in ascending order: two runs that share entries cannot each hold one
   * the other waits for. */
  qsort(at, n_at, sizeof *at, cmp_u64);
  size_t held = 0;
  int rc = AL_OK;
  for (size_t i = 0; i < n_at && rc == AL_OK; i++)
    if (i == 0 || at[i] != at[i - 1]) {
      rc = lock_byte(lock_fd, at[i], 1);
      if (rc == AL_OK) held = i + 1;
    }
  size_t lo = SIZE_MAX, hi = 0;
  for (size_t i = 0; rc == AL_OK && i < n; i++) {
    if (missing[i] && entry_touch(c, name[i], spans[i].len, key))
      missing[i] = 0; /* stored meanwhile */
    if (!missing[i]) continue;
    if (lo == SIZE_MAX) lo = i;
    hi = i;
  }
  uint64_t stored = 0;
  if (rc == AL_OK && lo != SIZE_MAX) {
    uint64_t from = spans[lo].off, to = spans[hi].off + spans[hi].len;
    unsigned char *buf = malloc(to - from ? (size_t)(to - from) : 1);
    if (!buf) rc = al_set_error(AL_ENOMEM, "cache: a run of %" PRIu64 " bytes", to - from);
    if (rc == AL_OK) rc = fetch(ctx, from, to - from, buf);
    size_t n_fetched = 0;
    for (size_t i = lo; i <= hi; i++) n_fetched += (size_t)missing[i];
    if (rc == AL_OK) counted(ctx, n_fetched);
    for (size_t i = lo; rc == AL_OK && i <= hi; i++) {
      if (!missing[i]) continue;
      rc = entry_store(c, name[i], buf + (spans[i].off - from), spans[i].len, key);
      if (rc == AL_OK) stored += spans[i].len;
    }
    free(buf);
  }
  for (size_t i = 0; i < held; i++)
    if (i == 0 || at[i] != at[i - 1]) {
      int urc = lock_byte(lock_fd, at[i], 0);
      if (rc == AL_OK) rc = urc;
    }
  if (rc == AL_OK && stored) rc = evict(c, lock_fd, NULL, stored, evicted);
  return rc;
}

uint64_t stream_cache_limit(const stream_cache *c) { return c->limit; }

/* The entry file `name` when it holds exactly `size` bytes (entry_open): its descriptor, else
 * -1. */
static int object_open(const stream_cache *c, const char *name, uint64_t size) {
  struct stat sb;
  int fd = entry_open(c, name, size, &sb);
  if (fd >= 0) futimens(fd, NULL); /* in use: the last to go (the file itself, never a link) */
  return fd;
}

int stream_cache_get_object(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                            uint64_t size, stream_cache_fill_fn fill, void *ctx, int *fd, int *hit,
                            uint64_t *evicted) {
  *hit = 0;
  /* Offset UINT64_MAX: no range of the object has that key. */
  uint64_t h = entry_hash(url, etag, size, UINT64_MAX, size);
  char name[64], tmp[80];
  entry_name(h, name);
  if ((*fd = object_open(c, name, size)) >= 0) {
    *hit = 1;
    return AL_OK;
  }
  uint64_t at = entry_lock_at(h);
  int rc = lock_byte(lock_fd, at, 1);
  if (rc != AL_OK) return rc;
  if ((*fd = object_open(c, name, size)) >= 0) { /* another process stored it while we waited */
    *hit = 1;
    return lock_byte(lock_fd, at, 0);
  }
  int w = -1;
  rc = tmp_create(c, O_RDWR, tmp, &w);
  if (rc == AL_OK) {
    char shown[4200]; /* the temporary file's path, for fill's messages */
    snprintf(shown, sizeof shown, "%s/%s", c->dir, tmp);
    rc = fill(ctx, w, shown);
    if (rc == AL_OK && fsync(w) != 0)
      rc = al_set_error(AL_EIO, "cache folder: fsync %s/%s: %s", c->dir, tmp, strerror(errno));
    if (rc == AL_OK) rc = tmp_commit(c, tmp, name);
    if (rc != AL_OK) {
      close(w);
      unlinkat(c->dfd, tmp, 0);
      w = -1;
    }
  }
  int urc = lock_byte(lock_fd, at, 0);
  if (rc == AL_OK) rc = evict(c, lock_fd, name, size, evicted);
  if (rc == AL_OK) rc = urc;
  if (rc != AL_OK && w >= 0) close(w);
  *fd = rc == AL_OK ? w : -1;
  return rc;
}
