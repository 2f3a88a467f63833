/* storage/file_ops.c - the "file" backend (storage_internal.h): a local file opened as inputs
 * are (afile_open_input: a regular file only), its size and mtime from fstat, read by pread. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file_internal.h"
#include "storage/storage_internal.h"

typedef struct file_obj {
  storage_obj base;
  int fd;
  uint64_t size;
  int64_t mtime_ns;
  char *path;
} file_obj;

static void file_close(storage_obj *o) {
  file_obj *f = (file_obj *)o;
  if (f->fd >= 0) close(f->fd);
  free(f->path);
  free(f);
}

static int file_open(storage_client *client, const char *path, storage_obj **out) {
  (void)client;
  file_obj *f = calloc(1, sizeof *f);
  if (!f || !(f->path = strdup(path))) {
    free(f);
    return al_set_error(AL_ENOMEM, "%s: out of memory", path);
  }
  f->base.ops = &storage_file_ops;
  struct stat st;
  int rc = afile_open_input(path, "shard", &f->fd);
  if (rc == AL_OK && fstat(f->fd, &st) != 0)
    rc = al_set_error(AL_EIO, "%s: fstat: %s", path, strerror(errno));
  if (rc != AL_OK) {
    file_close(&f->base);
    return rc;
  }
  f->size = (uint64_t)st.st_size;
  f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  *out = &f->base;
  return AL_OK;
}

static int file_stat(const storage_obj *o, storage_stat *out) {
  const file_obj *f = (const file_obj *)o;
  out->size = f->size;
  out->etag = "";
  out->mtime_ns = f->mtime_ns;
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
    .open = file_open,
    .stat = file_stat,
    .read = file_read,
    .list = file_list,
    .stats = file_stats,
    .close = file_close,
};
