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

#define ENTRY_PREFIX "e-"
#define TMP_PREFIX "t-"

struct stream_cache {
  char *dir;
  uint64_t limit;
};

int stream_cache_open(stream_cache **out, const char *dir, uint64_t limit_bytes) {
  *out = NULL;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return al_set_error(AL_EIO, "cache folder %s: mkdir: %s", dir, strerror(errno));
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return al_set_error(AL_EIO, "cache folder %s: not a folder", dir);
  stream_cache *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = strdup(dir))) {
    free(c);
    return al_set_error(AL_ENOMEM, "cache folder %s", dir);
  }
  c->limit = limit_bytes;
  *out = c;
  return AL_OK;
}

void stream_cache_close(stream_cache *c) {
  if (!c) return;
  free(c->dir);
  free(c);
}

int stream_cache_lock_fd(const stream_cache *c, int *fd) {
  char p[4096];
  snprintf(p, sizeof p, "%s/locks", c->dir);
  *fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (*fd < 0) return al_set_error(AL_EIO, "cache folder: %s: %s", p, strerror(errno));
  return AL_OK;
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

/* Reads the whole entry (exactly len bytes) into dst: 1, 0 when absent or of another size. */
static int entry_load(const char *path, uint64_t len, void *dst, int consume) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat sb;
  int ok = fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == len;
  uint64_t got = 0;
  while (ok && got < len) {
    ssize_t n = pread(fd, (char *)dst + got, (size_t)(len - got), (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      ok = 0;
    else
      got += (uint64_t)n;
  }
  if (ok && consume) { /* read: the first to go when room is needed */
    struct timespec t[2] = {{1, 0}, {1, 0}};
    futimens(fd, t);
  }
  close(fd);
  return ok;
}

/* This thread's temporary file name in the folder (the pid first: evict() removes those of
 * dead processes). */
static void tmp_name(const stream_cache *c, char *tmp, size_t cap) {
  snprintf(tmp, cap, "%s/" TMP_PREFIX "%ld-%ld", c->dir, (long)getpid(), (long)syscall(SYS_gettid));
}

static int entry_store(const stream_cache *c, const char *path, const void *src, uint64_t len,
                       int consume) {
  char tmp[4200];
  tmp_name(c, tmp, sizeof tmp);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return al_set_error(AL_EIO, "cache: %s: %s", tmp, strerror(errno));
  uint64_t put = 0;
  int rc = AL_OK;
  while (put < len) {
    ssize_t n = write(fd, (const char *)src + put, (size_t)(len - put));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      rc = al_set_error(AL_EIO, "cache: write %s: %s", tmp, strerror(errno));
      break;
    }
    put += (uint64_t)n;
  }
  struct timespec old[2] = {{1, 0}, {1, 0}};
  if (rc == AL_OK && consume) futimens(fd, old);
  if (rc == AL_OK && fsync(fd) != 0)
    rc = al_set_error(AL_EIO, "cache: fsync %s: %s", tmp, strerror(errno));
  close(fd);
  if (rc == AL_OK && rename(tmp, path) != 0)
    rc = al_set_error(AL_EIO, "cache: rename %s: %s", tmp, strerror(errno));
  if (rc != AL_OK) unlink(tmp);
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

/* Under the folder's lock: the entries' sum within the limit, least recently used out first
 * (never `keep`, the entry just stored). Temporary files of dead processes are removed. */
static int evict(const stream_cache *c, int lock_fd, const char *keep, uint64_t *evicted) {
  int rc = lock_byte(lock_fd, 0, 1);
  if (rc != AL_OK) return rc;
  DIR *d = opendir(c->dir);
  entry_stat *es = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  struct dirent *de;
  while (d && (de = readdir(d))) {
    int is_tmp = !strncmp(de->d_name, TMP_PREFIX, 2);
    if (strncmp(de->d_name, ENTRY_PREFIX, 2) && !is_tmp) continue;
    struct stat sb;
    if (fstatat(dirfd(d), de->d_name, &sb, 0) != 0) continue;
    if (is_tmp) {
      long pid = strtol(de->d_name + 2, NULL, 10);
      if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        unlinkat(dirfd(d), de->d_name, 0);
      else
        total += (uint64_t)sb.st_size; /* being written: counts */
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
    total += es[n].bytes;
    n++;
  }
  if (d) closedir(d);
  if (total > c->limit && n) {
    qsort(es, n, sizeof *es, older);
    for (size_t i = 0; i < n && total > c->limit; i++) {
      if (!strcmp(es[i].name, keep)) continue;
      char p[4200];
      snprintf(p, sizeof p, "%s/%s", c->dir, es[i].name);
      if (unlink(p) == 0) {
        total -= es[i].bytes;
        *evicted += es[i].bytes;
      }
    }
  }
  free(es);
  return lock_byte(lock_fd, 0, 0);
}

int stream_cache_get(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                     uint64_t size, uint64_t off, uint64_t len, void *dst,
                     stream_cache_fetch_fn fetch, void *ctx, int consume, int *hit,
                     uint64_t *evicted) {
  *hit = 0;
  uint64_t h = entry_hash(url, etag, size, off, len);
  char name[64], path[4200];
  snprintf(name, sizeof name, ENTRY_PREFIX "%016" PRIx64, h);
  snprintf(path, sizeof path, "%s/%s", c->dir, name);
  if (entry_load(path, len, dst, consume)) {
    *hit = 1;
    return AL_OK;
  }
  /* Byte 0 is the folder's lock: entries lock bytes 1 .. 2^40. */
  uint64_t at = 1 + (h & ((1ull << 40) - 1));
  int rc = lock_byte(lock_fd, at, 1);
  if (rc != AL_OK) return rc;
  if (entry_load(path, len, dst, consume)) { /* another fetcher stored it while we waited */
    *hit = 1;
    return lock_byte(lock_fd, at, 0);
  }
  rc = fetch(ctx, off, len, dst);
  /* An entry larger than the whole cache is delivered but not kept. */
  if (rc == AL_OK && len <= c->limit) rc = entry_store(c, path, dst, len, consume);
  int urc = lock_byte(lock_fd, at, 0);
  if (rc == AL_OK && len <= c->limit) rc = evict(c, lock_fd, name, evicted);
  return rc != AL_OK ? rc : urc;
}

uint64_t stream_cache_limit(const stream_cache *c) { return c->limit; }

/* The entry file at `path` when it holds exactly `size` bytes: its descriptor, else -1. */
static int object_open(const char *path, uint64_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd >= 0 && (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != size)) {
    close(fd);
    fd = -1;
  }
  if (fd >= 0) futimens(fd, NULL); /* in use: the last to go */
  return fd;
}

int stream_cache_get_object(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                            uint64_t size, stream_cache_fill_fn fill, void *ctx, int *fd, int *hit,
                            uint64_t *evicted) {
  *hit = 0;
  /* Offset UINT64_MAX: no range of the object has that key. */
  uint64_t h = entry_hash(url, etag, size, UINT64_MAX, size);
  char name[64], path[4200], tmp[4200];
  snprintf(name, sizeof name, ENTRY_PREFIX "%016" PRIx64, h);
  snprintf(path, sizeof path, "%s/%s", c->dir, name);
  if ((*fd = object_open(path, size)) >= 0) {
    *hit = 1;
    return AL_OK;
  }
  uint64_t at = 1 + (h & ((1ull << 40) - 1));
  int rc = lock_byte(lock_fd, at, 1);
  if (rc != AL_OK) return rc;
  if ((*fd = object_open(path, size)) >= 0) { /* another process stored it while we waited */
    *hit = 1;
    return lock_byte(lock_fd, at, 0);
  }
  tmp_name(c, tmp, sizeof tmp);
  int w = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (w < 0) rc = al_set_error(AL_EIO, "cache: %s: %s", tmp, strerror(errno));
  if (rc == AL_OK) rc = fill(ctx, w, tmp);
  if (rc == AL_OK && fsync(w) != 0)
    rc = al_set_error(AL_EIO, "cache: fsync %s: %s", tmp, strerror(errno));
  if (rc == AL_OK && rename(tmp, path) != 0)
    rc = al_set_error(AL_EIO, "cache: rename %s: %s", tmp, strerror(errno));
  if (rc != AL_OK) {
    if (w >= 0) close(w);
    unlink(tmp);
    w = -1;
  }
  int urc = lock_byte(lock_fd, at, 0);
  if (rc == AL_OK) rc = evict(c, lock_fd, name, evicted);
  if (rc == AL_OK) rc = urc;
  if (rc != AL_OK && w >= 0) close(w);
  *fd = rc == AL_OK ? w : -1;
  return rc;
}
