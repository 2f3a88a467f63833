/*
 * storage/tar_member.c - a plain tar's members from its header blocks: header, then the next
 * header after the member's padded data, fetched in coalesced windows of ranged reads (GETs for
 * a URL) through any storage_obj.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/tar_member_internal.h"

#include "storage/storage_internal.h"

#define TAR_BLOCK 512
#define TAR_EXT_MAX (1u << 20) /* a pax or GNU long-name extension larger than this is refused */

typedef struct window {
  storage_obj *o;
  const char *name; /* the object's, for messages */
  uint64_t size;
  storage_tar_fetch_fn fetch; /* NULL: storage_read */
  void *fetch_ctx;
  unsigned char *buf;
  size_t cap;
  uint64_t off;
  size_t len, batch;
  size_t base; /* batch as asked; the window doubles up to max while headers follow on */
  size_t max;
  uint64_t fetched, requests;
} window;

/* [off, off + len) of the object into *out, from the window or a new window fetched at off. */
static int win_get(window *w, uint64_t off, size_t len, const unsigned char **out) {
  if (off >= w->off && off - w->off <= w->len && len <= w->len - (off - w->off)) {
    *out = w->buf + (off - w->off);
    return AL_OK;
  }
  uint64_t size = w->size;
  if (off > size || len > size - off) {
    return al_set_error(AL_EFORMAT,
                        "%s: offset %" PRIu64 ": the tar ends inside a header (size %" PRIu64 ")",
                        w->name, off, size);
  }
  /* A header right after the window (metadata-only members, nothing skipped): the members are
   * dense here, so the next window is twice as large; after a skipped payload, back to base. */
  if (w->len && off >= w->off && off <= w->off + w->len + w->base) {
    if (w->batch < w->max) w->batch = w->batch * 2 < w->max ? w->batch * 2 : w->max;
  } else {
    w->batch = w->base;
  }
  size_t want = len > w->batch ? len : w->batch;
  if (want > size - off) want = (size_t)(size - off);
  if (want > w->cap) {
    unsigned char *b = realloc(w->buf, want);
    if (b == NULL) return al_set_error(AL_ENOMEM, "%s: out of memory", w->name);
    w->buf = b;
    w->cap = want;
  }
  w->len = 0;
  int rc = w->fetch ? w->fetch(w->fetch_ctx, off, w->buf, want)
                    : storage_read(w->o, off, w->buf, want);
  if (rc != AL_OK) return rc;
  w->off = off;
  w->len = want;
  w->fetched += want;
  w->requests++;
  *out = w->buf;
  return AL_OK;
}

/* A numeric header field: octal digits (leading spaces, ending at a space or NUL), or
 * base-256 when the high bit of its first byte is set. */
static int tar_number(const unsigned char *f, size_t n, uint64_t *v) {
  uint64_t r = 0;
  size_t i = 0;
  if (f[0] & 0x80) {
    if (f[0] != 0x80) return -1; /* negative or wider than 64 bits */
    for (i = 1; i < n; i++) {
      if (r >> 56) return -1;
      r = (r << 8) | f[i];
    }
    return *v = r, 0;
  }
  while (i < n && f[i] == ' ') i++;
  size_t digits = 0;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
    if (r >> 61) return -1;
    r = r * 8 + (uint64_t)(f[i] - '0');
  }
  if (i < n && f[i] != ' ' && f[i] != '\0') return -1;
  return digits ? (*v = r, 0) : -1;
}

static int zero_block(const unsigned char *h) {
  for (int i = 0; i < TAR_BLOCK; i++) {
    if (h[i]) return 0;
  }
  return 1;
}

static int checksum_ok(const unsigned char *h) {
  uint64_t want, sum = 0;
  if (tar_number(h + 148, 8, &want) != 0) return 0;
  for (int i = 0; i < TAR_BLOCK; i++) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum == want;
}

/* The ustar name: prefix "/" name when the header says ustar, else the name field. */
static char *ustar_name(const unsigned char *h) {
  char name[101], prefix[156], *out = NULL;
  memcpy(name, h, 100);
  name[100] = '\0';
  int ustar = memcmp(h + 257, "ustar", 5) == 0;
  memcpy(prefix, h + 345, 155);
  prefix[155] = '\0';
  if (ustar && prefix[0]) {
    if (asprintf(&out, "%s/%s", prefix, name) < 0) out = NULL;
  } else {
    out = strdup(name);
  }
  return out;
}

/* What extension headers say about the next member. */
typedef struct pending {
  char *name;
  uint64_t size;
  int have_size;
} pending;

/* pax records "LEN key=value\n": path and size. -1 on a malformed record. */
static int parse_pax(const unsigned char *d, size_t n, pending *p) {
  size_t i = 0;
  while (i < n && d[i] != '\0') {
    size_t len = 0, j = i;
    while (j < n && d[j] >= '0' && d[j] <= '9' && len < TAR_EXT_MAX)
      len = len * 10 + (d[j++] - '0');
    if (j >= n || d[j] != ' ' || len <= j - i + 1 || len > n - i || d[i + len - 1] != '\n')
      return -1;
    const char *kv = (const char *)d + j + 1, *end = (const char *)d + i + len - 1;
    const char *eq = memchr(kv, '=', (size_t)(end - kv));
    if (eq == NULL) return -1;
    size_t kl = (size_t)(eq - kv), vl = (size_t)(end - eq - 1);
    if (kl == 4 && memcmp(kv, "path", 4) == 0) {
      free(p->name);
      if ((p->name = strndup(eq + 1, vl)) == NULL) return -1;
    } else if (kl == 4 && memcmp(kv, "size", 4) == 0) {
      char num[24];
      char *q;
      if (vl == 0 || vl >= sizeof num) return -1;
      memcpy(num, eq + 1, vl);
      num[vl] = '\0';
      p->size = strtoull(num, &q, 10);
      if (*q != '\0' || num[0] < '0' || num[0] > '9') return -1;
      p->have_size = 1;
    }
    i += len;
  }
  return 0;
}

static int add_member(storage_tar_listing *l, size_t *cap, storage_tar_member m) {
  if (l->count == *cap) {
    size_t n = *cap ? *cap * 2 : 64;
    storage_tar_member *a = realloc(l->members, n * sizeof *a);
    if (a == NULL) return -1;
    l->members = a;
    *cap = n;
  }
  l->members[l->count++] = m;
  return 0;
}

/* An extension header's data (pax 'x', 'g'; GNU 'L') into p. */
static int take_extension(window *w, const unsigned char *h, uint64_t data, uint64_t sz,
                          pending *p) {
  const char *url = w->name;
  if (sz > TAR_EXT_MAX) {
    return al_set_error(AL_EFORMAT,
                        "%s: offset %" PRIu64 ": an extension header of %" PRIu64 " bytes", url,
                        data - TAR_BLOCK, sz);
  }
  char type = (char)h[156];
  const unsigned char *d;
  int rc = win_get(w, data, (size_t)sz, &d);
  if (rc != AL_OK) return rc;
  if (type == 'x' && parse_pax(d, (size_t)sz, p) != 0) {
    return al_set_error(AL_EFORMAT, "%s: offset %" PRIu64 ": a malformed pax header", url,
                        data - TAR_BLOCK);
  }
  if (type == 'L') {
    free(p->name);
    if ((p->name = strndup((const char *)d, (size_t)sz)) == NULL)
      return al_set_error(AL_ENOMEM, "%s: out of memory", url);
  }
  return AL_OK;
}

static uint64_t padded(uint64_t n) { return (n + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK; }

/* One header at *pos: a member added to l, or an extension taken into p; *pos moves to the
 * next header. AL_EOF at the end of the archive, AL_OK to go on, else the error. */
static int walk_one(window *w, uint64_t *pos, pending *p, storage_tar_listing *l, size_t *cap) {
  const char *url = w->name;
  uint64_t size = w->size, at = *pos, sz;
  if (at == size) return AL_EOF; /* no end-of-archive blocks: the object's end ends it */
  const unsigned char *h;
  int rc = win_get(w, at, TAR_BLOCK, &h);
  if (rc != AL_OK) return rc;
  if (zero_block(h)) return AL_EOF;
  if (!checksum_ok(h) || tar_number(h + 124, 12, &sz) != 0 || sz > UINT64_MAX - 2 * TAR_BLOCK) {
    return al_set_error(AL_EFORMAT, "%s: offset %" PRIu64 ": not a tar header (checksum or size)",
                        url, at);
  }
  char type = (char)h[156];
  uint64_t data = at + TAR_BLOCK;
  if (type == 'x' || type == 'g' || type == 'L') {
    if ((rc = take_extension(w, h, data, sz, p)) != AL_OK) return rc;
    *pos = data + padded(sz);
    return AL_OK;
  }
  storage_tar_member m = {0};
  m.name = p->name ? p->name : ustar_name(h);
  p->name = NULL;
  m.header_off = at;
  m.data_off = data;
  m.size = p->have_size ? p->size : sz;
  m.type = type ? type : '0';
  p->have_size = 0;
  /* Only regular files (and contiguous ones) have data in the archive. */
  uint64_t body = (m.type == '0' || m.type == '7') ? m.size : 0;
  if (m.name == NULL || add_member(l, cap, m) != 0) {
    free(m.name);
    return al_set_error(AL_ENOMEM, "%s: out of memory", url);
  }
  if (body > size - data) {
    return al_set_error(AL_EFORMAT,
                        "%s: offset %" PRIu64 ": member %s's %" PRIu64
                        " bytes run past the end (size %" PRIu64 ")",
                        url, at, m.name, body, size);
  }
  *pos = data + padded(body);
  return AL_OK;
}

int storage_tar_scan(storage_obj *o, size_t batch_bytes, storage_tar_listing *out) {
  return storage_tar_scan_via(o, batch_bytes, 0, NULL, NULL, out);
}

int storage_tar_scan_via(storage_obj *o, size_t batch_bytes, size_t batch_max,
                         storage_tar_fetch_fn fetch, void *fetch_ctx, storage_tar_listing *out) {
  memset(out, 0, sizeof *out);
  window w = {0};
  storage_stat st;
  int rc = storage_get_stat(o, &st);
  if (rc != AL_OK) return rc;
  w.o = o;
  w.name = storage_name(o);
  w.size = st.size;
  w.fetch = fetch;
  w.fetch_ctx = fetch_ctx;
  w.batch = batch_bytes ? batch_bytes : 64 * 1024;
  if (w.batch < TAR_BLOCK) w.batch = TAR_BLOCK;
  w.base = w.batch;
  w.max = batch_max > w.batch ? batch_max : w.batch;
  pending p = {0};
  size_t cap = 0;
  uint64_t pos = 0;
  while ((rc = walk_one(&w, &pos, &p, out, &cap)) == AL_OK) {
  }
  free(p.name);
  free(w.buf);
  out->fetched = w.fetched;
  out->requests = w.requests;
  if (rc < 0) storage_tar_listing_free(out);
  return rc < 0 ? rc : AL_OK;
}

void storage_tar_listing_free(storage_tar_listing *l) {
  for (size_t i = 0; i < l->count; i++) free(l->members[i].name);
  free(l->members);
  memset(l, 0, sizeof *l);
}
