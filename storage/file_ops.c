/* storage/file_ops.c - the "file" backend (storage_internal.h): a local file opened as inputs
 * are (afile_open_input: a regular file only), its size and mtime from fstat, read by pread;
 * what a path names from stat(2); the tar shards of a directory. Its canonical names are
 * file_path.c's. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file_internal.h"
#include "common/grow_internal.h"
#include "storage/storage_internal.h"

typedef struct file_obj {
  storage_obj base;
  int fd;
  uint64_t size;
  int64_t mtime_ns;
  char *path;
} file_obj;

static int64_t mtime_of(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static int type_of(unsigned mode) {
  return S_ISREG(mode) ? STORAGE_OBJECT : S_ISDIR(mode) ? STORAGE_CONTAINER : STORAGE_OTHER;
}

static int file_lookup(const char *path, storage_stat *out) {
  struct stat st;
  memset(out, 0, sizeof *out);
  if (stat(path, &st) != 0) {
    int e = errno;
    return al_set_error(e == ENOENT ? AL_ENOTFOUND : AL_EIO, "%s: cannot open: %s", path,
                        strerror(e));
  }
  out->size = (uint64_t)st.st_size;
  out->mtime_ns = mtime_of(&st);
  out->type = type_of(st.st_mode);
  out->type_name = afile_kind_name(st.st_mode);
  return AL_OK;
}

static void file_close(storage_obj *o) {
  file_obj *f = (file_obj *)o;
  if (f->fd >= 0) close(f->fd);
  free(f->path);
  free(f);
}

/* An object over the open descriptor fd (owned from here on: closed on failure too). */
static int file_over(int fd, const char *path, storage_obj **out) {
  *out = NULL;
  file_obj *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    free(f);
    if (fd >= 0) close(fd);
    return al_set_error(AL_ENOMEM, "%s: out of memory", path);
  }
  f->base.ops = &storage_file_ops;
  f->base.name = f->path;
  f->fd = fd;
  struct stat st;
  if (fstat(f->fd, &st) != 0) {
    int rc = al_set_error(AL_EIO, "%s: fstat: %s", path, strerror(errno));
    file_close(&f->base);
    return rc;
  }
  f->size = (uint64_t)st.st_size;
  f->mtime_ns = mtime_of(&st);
  *out = &f->base;
  return AL_OK;
}

static int file_open(storage_client *client, const char *path, storage_obj **out) {
  (void)client;
  *out = NULL;
  int fd = -1;
  int rc = afile_open_input(path, "shard", &fd);
  return rc == AL_OK ? file_over(fd, path, out) : rc;
}

int storage_file_adopt(int fd, const char *name, storage_obj **out) {
  return file_over(fd, name, out);
}

static int file_stat(const storage_obj *o, storage_stat *out) {
  const file_obj *f = (const file_obj *)o;
  out->size = f->size;
  out->etag = NULL;
  out->mtime_ns = f->mtime_ns;
  out->type = STORAGE_OBJECT;
  out->type_name = "a regular file";
  return AL_OK;
}

static int file_read(storage_obj *o, uint64_t off, void *buf, size_t len) {
  file_obj *f = (file_obj *)o;
  size_t got = 0;
  while (got < len) {
    ssize_t r = pread(f->fd, (char *)buf + got, len - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return al_set_error(AL_EIO, "%s: read of %zu bytes at byte %" PRIu64 ": %s", f->path, len,
                          off, r < 0 ? strerror(errno) : "the file ends first");
    got += (size_t)r;
  }
  return AL_OK;
}

static int file_read_some(storage_obj *o, uint64_t off, void *buf, size_t cap, size_t *got) {
  file_obj *f = (file_obj *)o;
  *got = 0;
  for (;;) {
    ssize_t r = pread(f->fd, buf, cap, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return al_set_error(AL_EIO, "%s: read at byte %" PRIu64 ": %s", f->path, off,
                          strerror(errno));
    *got = (size_t)r;
    return AL_OK;
  }
}

static int cmp_entry(const void *a, const void *b) {
  return strcmp(((const storage_entry *)a)->url, ((const storage_entry *)b)->url);
}

/* The regular files of directory dir (not recursive) whose names hold ".tar", not starting
 * with '.', sorted bytewise. */
static int file_list_shards(storage_client *client, const char *dir, storage_listing *out) {
  (void)client;
  out->entries = NULL;
  out->count = 0;
  DIR *d = opendir(dir);
  if (!d) return al_set_error(AL_EIO, "%s: cannot list directory: %s", dir, strerror(errno));
  size_t dlen = strlen(dir), cap = 0;
  while (dlen > 1 && dir[dlen - 1] == '/') dlen--;
  struct dirent *e;
  int rc = AL_OK;
  while (!rc && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || !strstr(e->d_name, ".tar")) continue;
    size_t nl = strlen(e->d_name);
    char *p = malloc(dlen + nl + 2);
    if (!p) {
      rc = al_set_error(AL_ENOMEM, "out of memory");
      break;
    }
    memcpy(p, dir, dlen);
    p[dlen] = '/';
    memcpy(p + dlen + 1, e->d_name, nl + 1);
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
      free(p);
      continue;
    }
    rc = grow_array((void **)&out->entries, &cap, out->count + 1, sizeof *out->entries,
                    "the shard list");
    if (rc) {
      free(p);
      break;
    }
    out->entries[out->count++] = (storage_entry){.url = p, .size = (uint64_t)st.st_size};
  }
  closedir(d);
  if (!rc && out->count == 0)
    rc = al_set_error(AL_ENOTFOUND, "%s: no *.tar* files in directory", dir);
  if (rc) {
    storage_listing_free(out);
    return rc;
  }
  qsort(out->entries, out->count, sizeof *out->entries, cmp_entry);
  return AL_OK;
}

/* A local path is no listing prefix: storage_s3_list refuses it, naming it, as it refuses an
 * http(s):// URL. */
static int file_list(storage_client *client, const char *prefix, storage_listing *out,
                     storage_counts *st) {
  return storage_s3_list(client, prefix, out, st);
}

static storage_counts file_stats(const storage_obj *o) {
  (void)o;
  storage_counts s = {0};
  return s;
}

const storage_ops storage_file_ops = {
    .name = "file",
    .noun = "file",
    .remote = 0,
    .canonical = storage_file_canonical,
    .lookup = file_lookup,
    .open = file_open,
    .stat = file_stat,
    .read = file_read,
    .read_some = file_read_some,
    .is_prefix = NULL,
    .list_shards = file_list_shards,
    .list = file_list,
    .stats = file_stats,
    .close = file_close,
};
