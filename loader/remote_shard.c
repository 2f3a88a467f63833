/* A remote shard with a byte cache in front of it; see remote_shard_internal.h. */
#include "loader/remote_shard_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "storage/tar_member_internal.h"
#include "loader/tensor_header_internal.h"

#define WINDOW_DEFAULT (16u << 10)
#define WINDOW_MAX (1u << 20) /* the listing's windows grow to this over dense members */
#define GAP_DEFAULT (4u << 10)
#define STREAM_CHUNK (8u << 20)
#define META_MAX (16u << 20) /* KEY.json is capped at 16 MiB by the scan */
#define TYPED_HEAD 256u
#define TYPED_HEAD_LZ4 (4u << 10)

typedef struct seg {
  uint64_t off;
  size_t len;
  unsigned char *data;
} seg;

struct remote_shard {
  storage_http_object *o;
  seg *segs; /* sorted by offset, neither overlapping nor touching */
  size_t n, cap;
  int stream;
  int fetch_failed; /* a request of the listing's walk failed */
  seg chunk;        /* streamed shards: the one buffer */
};

/* -1 with the message of the storage call that failed (al_last_error) copied into err: this
 * file's callers (scan.c, shard_source.c, shard_check.c) still take char-buffer messages. */
static int failed(char *err, size_t err_cap) {
  snprintf(err, err_cap, "%s", al_last_error());
  return -1;
}

int remote_shard_open(storage_client *c, const char *url, remote_shard **out, char *err,
                      size_t err_cap) {
  *out = NULL;
  remote_shard *rs = calloc(1, sizeof *rs);
  if (!rs) return snprintf(err, err_cap, "remote shard: out of memory"), -1;
  if (storage_http_open(c, url, &rs->o) != AL_OK) {
    free(rs);
    return failed(err, err_cap);
  }
  *out = rs;
  return 0;
}

void remote_shard_close(remote_shard *rs) {
  if (!rs) return;
  for (size_t i = 0; i < rs->n; i++) free(rs->segs[i].data);
  free(rs->segs);
  free(rs->chunk.data);
  storage_http_close(rs->o);
  free(rs);
}

uint64_t remote_shard_size(const remote_shard *rs) { return storage_http_size(rs->o); }
const char *remote_shard_etag(const remote_shard *rs) { return storage_http_etag(rs->o); }
storage_counts remote_shard_stats(const remote_shard *rs) { return storage_http_stats(rs->o); }
void remote_shard_stream(remote_shard *rs) { rs->stream = 1; }

/* The first segment that ends at or after off (touching counts), or rs->n. */
static size_t seg_find(const remote_shard *rs, uint64_t off) {
  size_t lo = 0, hi = rs->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (rs->segs[mid].off + rs->segs[mid].len < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Adds [off, off + len) (the bytes in data, taken over) to the cache, merged with the
 * segments it overlaps or touches. -1 when out of memory (data freed). */
static int cache_put(remote_shard *rs, uint64_t off, unsigned char *data, size_t len) {
  size_t a = seg_find(rs, off), b = a;
  uint64_t end = off + len;
  while (b < rs->n && rs->segs[b].off <= end) b++;
  if (a == b) { /* nothing to merge with: a new segment at a */
    if (rs->n == rs->cap) {
      size_t nc = rs->cap ? rs->cap * 2 : 16;
      seg *s = realloc(rs->segs, nc * sizeof *s);
      if (!s) return free(data), -1;
      rs->segs = s;
      rs->cap = nc;
    }
    memmove(rs->segs + a + 1, rs->segs + a, (rs->n - a) * sizeof *rs->segs);
    rs->segs[a] = (seg){off, len, data};
    rs->n++;
    return 0;
  }
  uint64_t lo = rs->segs[a].off < off ? rs->segs[a].off : off;
  uint64_t hi = rs->segs[b - 1].off + rs->segs[b - 1].len;
  if (hi < end) hi = end;
  unsigned char *m = malloc((size_t)(hi - lo));
  if (!m) return free(data), -1;
  for (size_t i = a; i < b; i++) {
    memcpy(m + (rs->segs[i].off - lo), rs->segs[i].data, rs->segs[i].len);
    free(rs->segs[i].data);
  }
  memcpy(m + (off - lo), data, len);
  free(data);
  rs->segs[a] = (seg){lo, (size_t)(hi - lo), m};
  memmove(rs->segs + a + 1, rs->segs + b, (rs->n - b) * sizeof *rs->segs);
  rs->n -= b - a - 1;
  return 0;
}

/* The cached segment holding off, or NULL. */
static const seg *cache_at(const remote_shard *rs, uint64_t off) {
  size_t i = seg_find(rs, off);
  if (i < rs->n && rs->segs[i].off <= off && off < rs->segs[i].off + rs->segs[i].len)
    return &rs->segs[i];
  return NULL;
}

/* One GET of [off, off + len) into the cache. */
static int fetch(remote_shard *rs, uint64_t off, size_t len, char *err, size_t err_cap) {
  unsigned char *d = malloc(len ? len : 1);
  if (!d) return snprintf(err, err_cap, "%s: out of memory", storage_http_url(rs->o)), -1;
  if (storage_http_read(rs->o, off, d, len) != AL_OK) return free(d), failed(err, err_cap);
  if (cache_put(rs, off, d, len) != 0)
    return snprintf(err, err_cap, "%s: out of memory", storage_http_url(rs->o)), -1;
  return 0;
}

int remote_shard_pread(remote_shard *rs, uint64_t off, void *buf, size_t len, char *err,
                       size_t err_cap) {
  uint64_t size = storage_http_size(rs->o);
  if (off > size || len > size - off) {
    snprintf(err, err_cap, "%s: bytes %" PRIu64 "..%" PRIu64 " lie past its end (%" PRIu64 ")",
             storage_http_url(rs->o), off, off + len, size);
    return -1;
  }
  if (len == 0) return 0;
  if (rs->stream)
    return storage_http_read(rs->o, off, buf, len) == AL_OK ? 0 : failed(err, err_cap);
  const seg *s = cache_at(rs, off);
  if (!s || off + len > s->off + s->len) {
    if (fetch(rs, off, len, err, err_cap) != 0) return -1;
    s = cache_at(rs, off);
  }
  memcpy(buf, s->data + (off - s->off), len);
  return 0;
}

ssize_t remote_shard_read(remote_shard *rs, uint64_t off, void *buf, size_t cap, char *err,
                          size_t err_cap) {
  uint64_t size = storage_http_size(rs->o);
  if (off >= size || cap == 0) return 0;
  const seg *s;
  if (rs->stream) {
    s = &rs->chunk;
    if (!(s->data && off >= s->off && off < s->off + s->len)) {
      size_t n = size - off < STREAM_CHUNK ? (size_t)(size - off) : STREAM_CHUNK;
      if (!rs->chunk.data && !(rs->chunk.data = malloc(STREAM_CHUNK)))
        return snprintf(err, err_cap, "%s: out of memory", storage_http_url(rs->o)), -1;
      rs->chunk.len = 0;
      if (storage_http_read(rs->o, off, rs->chunk.data, n) != AL_OK) return failed(err, err_cap);
      rs->chunk.off = off;
      rs->chunk.len = n;
    }
  } else {
    s = cache_at(rs, off);
    if (!s) {
      size_t next = seg_find(rs, off); /* may end right at off: then the one after it */
      while (next < rs->n && rs->segs[next].off <= off) next++;
      uint64_t lim = next < rs->n ? rs->segs[next].off : size;
      size_t n = lim - off < cap ? (size_t)(lim - off) : cap;
      if (fetch(rs, off, n, err, err_cap) != 0) return -1;
      s = cache_at(rs, off);
    }
  }
  size_t have = (size_t)(s->off + s->len - off);
  size_t n = have < cap ? have : cap;
  memcpy(buf, s->data + (off - s->off), n);
  return (ssize_t)n;
}

static int scan_fetch(void *ctx, uint64_t off, void *buf, size_t len) {
  remote_shard *rs = ctx;
  char err[1024];
  if (remote_shard_pread(rs, off, buf, len, err, sizeof err) == 0) return AL_OK;
  rs->fetch_failed = 1;
  return al_set_error(AL_EIO, "%s", err);
}

/* Bytes of a member's data the walk reads: all of KEY.json(.lz4), the head of a typed
 * member, nothing of other payloads. */
static uint64_t data_needed(const storage_tar_member *m) {
  if (m->type != '0' && m->type != '7') return 0;
  const char *base = strrchr(m->name, '/');
  base = base ? base + 1 : m->name;
  const char *ext = strchr(base, '.');
  if (!ext) return 0;
  ext++;
  uint64_t want = 0;
  if (!strcmp(ext, "json") || !strcmp(ext, "json.lz4")) {
    want = META_MAX;
  } else if (theader_kind_of(ext) != THEADER_KIND_NONE) {
    size_t n = strlen(ext);
    want = n > 4 && !strcmp(ext + n - 4, ".lz4") ? TYPED_HEAD_LZ4 : TYPED_HEAD;
  }
  return want < m->size ? want : m->size;
}

typedef struct span {
  uint64_t a, b;
} span;

/* Fetches [a, b) unless the cache holds all of it. */
static int ensure(remote_shard *rs, uint64_t a, uint64_t b, char *err, size_t err_cap) {
  const seg *s = cache_at(rs, a);
  if (s) a = s->off + s->len;
  if (b <= a) return 0;
  return fetch(rs, a, (size_t)(b - a), err, err_cap);
}

/* Keeps only the cached bytes inside spans (sorted, disjoint): the listing's windows also hold
 * payload bytes the walk never reads. -1 when out of memory (the cache then stays whole). */
static int cache_keep(remote_shard *rs, const span *sp, size_t nsp) {
  seg *out = NULL;
  size_t n = 0, cap = 0, j = 0;
  for (size_t i = 0; i < rs->n; i++) {
    const seg *g = &rs->segs[i];
    uint64_t gend = g->off + g->len;
    while (j < nsp && sp[j].b <= g->off) j++;
    for (size_t k = j; k < nsp && sp[k].a < gend; k++) {
      uint64_t a = sp[k].a > g->off ? sp[k].a : g->off, b = sp[k].b < gend ? sp[k].b : gend;
      if (b <= a) continue;
      if (n == cap) {
        size_t nc = cap ? cap * 2 : 64;
        seg *o = realloc(out, nc * sizeof *o);
        if (!o) goto oom;
        out = o;
        cap = nc;
      }
      unsigned char *d = malloc((size_t)(b - a));
      if (!d) goto oom;
      memcpy(d, g->data + (a - g->off), (size_t)(b - a));
      out[n++] = (seg){a, (size_t)(b - a), d};
    }
  }
  for (size_t i = 0; i < rs->n; i++) free(rs->segs[i].data);
  free(rs->segs);
  rs->segs = out;
  rs->n = n;
  rs->cap = cap;
  return 0;
oom:
  for (size_t i = 0; i < n; i++) free(out[i].data);
  free(out);
  return -1;
}

int remote_shard_plan(remote_shard *rs, size_t window, size_t gap, char *err, size_t err_cap) {
  uint64_t size = storage_http_size(rs->o);
  if (!window) window = WINDOW_DEFAULT;
  if (!gap) gap = GAP_DEFAULT;
  storage_tar_listing l;
  char why[1024];
  rs->fetch_failed = 0;
  if (storage_tar_scan_via(rs->o, window, WINDOW_MAX, scan_fetch, rs, &l) != AL_OK) {
    snprintf(why, sizeof why, "%s", al_last_error());
    /* A request that failed is an error; a listing that stopped at bad bytes is the walk's to
     * report (it reads on demand, as a local walk reads the file). */
    if (rs->fetch_failed && !strstr(why, "lie past its end")) {
      snprintf(err, err_cap, "%s", why);
      return -1;
    }
    return 0;
  }
  int rc = 0;
  span cur = {0, 0};
  span *keep = malloc((l.count + 1) * sizeof *keep);
  size_t nkeep = 0;
  if (!keep) {
    snprintf(err, err_cap, "%s: out of memory", storage_http_url(rs->o));
    rc = -1;
  }
  uint64_t entry = 0; /* where the entry (extension headers first) of the next member starts */
  for (size_t i = 0; i <= l.count && !rc; i++) {
    span want;
    if (i < l.count) {
      const storage_tar_member *m = &l.members[i];
      uint64_t body = (m->type == '0' || m->type == '7') ? m->size : 0;
      want.a = entry;
      want.b = m->data_off + data_needed(m);
      entry = m->data_off + (body + 511) / 512 * 512;
    } else { /* the end-of-archive blocks */
      want.a = entry;
      want.b = entry + 1024 < size ? entry + 1024 : size;
    }
    if (want.b > size) want.b = size;
    if (cur.b > cur.a && want.a <= cur.b + gap) {
      if (want.b > cur.b) cur.b = want.b;
      continue;
    }
    if (cur.b > cur.a) keep[nkeep++] = cur;
    rc = ensure(rs, cur.a, cur.b, err, err_cap);
    cur = want;
  }
  if (!rc && cur.b > cur.a) keep[nkeep++] = cur;
  if (!rc) rc = ensure(rs, cur.a, cur.b, err, err_cap);
  if (!rc) cache_keep(rs, keep, nkeep); /* out of memory: the cache stays whole, still right */
  free(keep);
  storage_tar_listing_free(&l);
  return rc;
}
