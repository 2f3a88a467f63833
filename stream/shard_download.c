/* A whole shard object into a cache entry or a private temporary file (shard_download_internal.h).
 */
#include "common/env_internal.h"
#include "stream/shard_download_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/al_status.h"

typedef struct download {
  const char *url;
  uint64_t size;
  stream_cache_fetch_fn fetch;
  void *ctx;
} download;

static int write_all(int fd, const uint8_t *p, size_t n, uint64_t at, const download *d,
                     const char *name) {
  size_t put = 0;
  while (put < n) {
    ssize_t k = pwrite(fd, p + put, n - put, (off_t)(at + put));
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == ENOSPC || errno == EDQUOT))
      return al_set_error(AL_EIO,
                          "%s: download of the compressed shard (%" PRIu64
                          " bytes) to %s: no space left on the device (it needs the whole "
                          "object)",
                          d->url, d->size, name);
    if (k <= 0)
      return al_set_error(AL_EIO, "%s: download of the compressed shard to %s: write: %s", d->url,
                          name, k < 0 ? strerror(errno) : "wrote nothing");
    put += (size_t)k;
  }
  return AL_OK;
}

/* The object in order into fd, one chunk at a time (stream_cache_fill_fn). */
static int fill(void *ctx, int fd, const char *name) {
  const download *d = ctx;
  uint64_t cap = d->size < STREAM_DOWNLOAD_CHUNK ? d->size : STREAM_DOWNLOAD_CHUNK;
  uint8_t *buf = malloc(cap ? (size_t)cap : 1);
  if (!buf) return al_set_error(AL_ENOMEM, "%s: download buffer of %" PRIu64 " bytes", d->url, cap);
  int rc = AL_OK;
  for (uint64_t off = 0; rc == AL_OK && off < d->size; off += cap) {
    uint64_t n = d->size - off < cap ? d->size - off : cap;
    rc = d->fetch(d->ctx, off, n, buf);
    if (rc != AL_OK)
      rc = al_error_prefix(rc, "download of the compressed shard at byte %" PRIu64 " of %" PRIu64,
                           off, d->size);
    else
      rc = write_all(fd, buf, (size_t)n, off, d, name);
  }
  free(buf);
  return rc;
}

/* An unnamed file in $TMPDIR holding the object. */
static int private_file(download *d, int *fd) {
  const char *dir = env_text("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  char name[4200];
  snprintf(name, sizeof name, "%s/adaptiveload-shard-XXXXXX", dir);
  int w = mkstemp(name);
  if (w < 0)
    return al_set_error(AL_EIO, "%s: download of the compressed shard: temporary file %s: %s",
                        d->url, name, strerror(errno));
  unlink(name); /* the space returns when w is closed, also when the process dies */
  int rc = fill(d, w, name);
  if (rc != AL_OK) {
    close(w);
    return rc;
  }
  *fd = w;
  return AL_OK;
}

int stream_shard_download(const stream_cache *cache, int lock_fd, const char *url, const char *etag,
                          uint64_t size, stream_cache_fetch_fn fetch, void *ctx, int *fd, int *hit,
                          uint64_t *evicted) {
  *fd = -1;
  *hit = 0;
  download d = {url, size, fetch, ctx};
  if (!cache || size > stream_cache_limit(cache)) return private_file(&d, fd);
  return stream_cache_get_object(cache, lock_fd, url, etag, size, fill, &d, fd, hit, evicted);
}
