/* Deterministic ustar/pax writer; see tar_write_internal.h. */
#include "loader/tar_write_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic_file_internal.h"

#define BUF_CAP (1u << 20)

struct tarw {
  afile *af; /* the temporary file renamed over `path` by tarw_close */
  int fd;    /* its descriptor (written with write(2); the stdio stream stays empty) */
  char *path;
  int64_t mtime;
  unsigned char *buf;
  size_t len;
  uint64_t flushed;
  uint64_t remaining; /* data bytes the current member still expects */
  uint64_t pad;       /* zero bytes after the current member's data */
  int in_member;
};

static void tarw_free(tarw *w);

static void octal(char *dst, size_t width, uint64_t v) {
  /* width includes the terminating NUL; values too big for octal use base-256. */
  if (width >= 12 && v >= (UINT64_C(1) << 33)) {
    memset(dst, 0, width);
    dst[0] = (char)0x80;
    for (size_t i = width - 1; i > 0 && v; i--, v >>= 8) dst[i] = (char)(v & 0xFF);
    return;
  }
  dst[width - 1] = '\0';
  for (size_t i = width - 1; i > 0; i--, v >>= 3) dst[i - 1] = (char)('0' + (v & 7));
}

void tarw_header(unsigned char hdr[512], const char *name, uint64_t size, int64_t mtime,
                 char type) {
  char *h = (char *)hdr;
  memset(h, 0, 512);
  size_t n = strlen(name);
  memcpy(h, name, n > 100 ? 100 : n);
  octal(h + 100, 8, 0644);
  octal(h + 108, 8, 0);
  octal(h + 116, 8, 0);
  octal(h + 124, 12, size);
  octal(h + 136, 12, (uint64_t)(mtime < 0 ? 0 : mtime));
  memset(h + 148, ' ', 8);
  h[156] = type;
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  unsigned sum = 0;
  for (int i = 0; i < 512; i++) sum += hdr[i];
  octal(h + 148, 7, sum);
  h[155] = ' ';
}

static int flush(tarw *w) {
  size_t off = 0;
  while (off < w->len) {
    ssize_t k = write(w->fd, w->buf + off, w->len - off);
    if (k < 0) {
      if (errno == EINTR) continue;
      return al_set_error(AL_EIO, "%s: write failed: %s", w->path, strerror(errno));
    }
    off += (size_t)k;
  }
  w->flushed += w->len;
  w->len = 0;
  return AL_OK;
}

static int put(tarw *w, const void *data, size_t n) {
  const unsigned char *p = data;
  while (n) {
    if (w->len == BUF_CAP) {
      int rc = flush(w);
      if (rc) return rc;
    }
    size_t k = BUF_CAP - w->len < n ? BUF_CAP - w->len : n;
    if (p)
      memcpy(w->buf + w->len, p, k);
    else
      memset(w->buf + w->len, 0, k);
    w->len += k;
    if (p) p += k;
    n -= k;
  }
  return AL_OK;
}

int tarw_open(tarw **out, const char *path, int64_t mtime) {
  *out = NULL;
  tarw *w = calloc(1, sizeof *w);
  if (!w) return al_set_error(AL_ENOMEM, "out of memory");
  int rc = AL_OK;
  w->fd = -1;
  w->path = strdup(path);
  w->buf = malloc(BUF_CAP);
  w->mtime = mtime;
  if (!w->path || !w->buf) {
    rc = al_set_error(AL_ENOMEM, "out of memory");
    goto cleanup;
  }
  rc = afile_create(&w->af, path);
  if (rc) goto cleanup;
  w->fd = fileno(afile_stream(w->af));
  *out = w;
  return AL_OK;

cleanup:
  tarw_free(w);
  return rc;
}

/* A pax extended header carrying `path=name` for names ustar cannot hold. */
static int pax_path(tarw *w, const char *name) {
  size_t n = strlen(name);
  /* record: "<len> path=<name>\n", where <len> counts its own digits. */
  size_t body = 1 + 5 + n + 1; /* " path=" + name + "\n" */
  size_t len = body + 1;
  for (;;) {
    char tmp[32];
    size_t digits = (size_t)snprintf(tmp, sizeof tmp, "%zu", len);
    if (digits + body == len) break;
    len = digits + body;
  }
  char *rec = malloc(len + 1);
  if (!rec) return al_set_error(AL_ENOMEM, "out of memory");
  snprintf(rec, len + 1, "%zu path=%s\n", len, name);
  unsigned char hdr[512];
  tarw_header(hdr, "././@PaxHeader", len, w->mtime, 'x');
  int rc = put(w, hdr, 512);
  if (!rc) rc = put(w, rec, len);
  if (!rc && len % 512) rc = put(w, NULL, 512 - len % 512);
  free(rec);
  return rc;
}

int tarw_begin(tarw *w, const char *name, uint64_t size) {
  if (w->in_member) return al_set_error(AL_ESTATE, "%s: member not finished", w->path);
  int rc = AL_OK;
  if (strlen(name) > 100) rc = pax_path(w, name);
  if (rc) return rc;
  unsigned char hdr[512];
  tarw_header(hdr, name, size, w->mtime, '0');
  rc = put(w, hdr, 512);
  if (rc) return rc;
  w->in_member = 1;
  w->remaining = size;
  w->pad = size % 512 ? 512 - size % 512 : 0;
  return AL_OK;
}

int tarw_data(tarw *w, const void *data, size_t n) {
  if (!w->in_member || n > w->remaining)
    return al_set_error(AL_ESTATE, "%s: %zu data bytes beyond the declared member size", w->path,
                        n);
  w->remaining -= n;
  return put(w, data, n);
}

int tarw_end(tarw *w) {
  if (!w->in_member || w->remaining)
    return al_set_error(AL_ESTATE, "%s: member ended %llu bytes short", w->path,
                        (unsigned long long)w->remaining);
  w->in_member = 0;
  return put(w, NULL, w->pad);
}

int tarw_add(tarw *w, const char *name, const void *data, uint64_t size) {
  int rc = tarw_begin(w, name, size);
  if (!rc && size) rc = tarw_data(w, data, size);
  if (!rc) rc = tarw_end(w);
  return rc;
}

int tarw_raw(tarw *w, const void *data, size_t n) { return put(w, data, n); }

uint64_t tarw_offset(const tarw *w) { return w->flushed + w->len; }

static void tarw_free(tarw *w) {
  afile_abort(w->af); /* no-op once committed */
  free(w->buf);
  free(w->path);
  free(w);
}

int tarw_close_ex(tarw *w, int no_trailer) {
  int rc = w->in_member ? al_set_error(AL_ESTATE, "%s: closed inside a member", w->path) : AL_OK;
  if (!rc && !no_trailer) rc = put(w, NULL, 1024);
  if (!rc) rc = flush(w);
  afile *af = w->af;
  w->af = NULL;
  w->fd = -1;
  rc = afile_finish(af, rc); /* fsync, rename over the shard's path, fsync of the folder */
  tarw_free(w);
  return rc;
}

int tarw_close(tarw *w) { return tarw_close_ex(w, 0); }

void tarw_abort(tarw *w) {
  if (!w) return;
  tarw_free(w); /* removes the temporary file; `path` was never touched */
}
