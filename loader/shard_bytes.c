/* A shard's bytes through storage, with a byte cache in front of a URL; see
 * shard_bytes_internal.h. */
#include "loader/shard_bytes_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "loader/tensor_header_internal.h"
#include "storage/tar_member_internal.h"

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

struct shard_bytes {
  storage_obj *o;
  storage_stat st; /* as opened */
  int cached;      /* the backend's reads are requests: through the segments below */
  seg *segs;       /* sorted by offset, neither overlapping nor touching */
  size_t n, cap;
  int stream;
  int fetch_rc; /* the status of a request of the listing's walk that failed, else AL_OK */
  seg chunk;    /* streamed shards: the one buffer */
};

int shard_bytes_open(storage_client *c, const char *path, shard_bytes **out) {
  *out = NULL;
  shard_bytes *sb = calloc(1, sizeof *sb);
  if (!sb) return al_set_error(AL_ENOMEM, "%s: out of memory", path);
  int rc = storage_open(c, path, &sb->o);
  if (rc == AL_OK) rc = storage_get_stat(sb->o, &sb->st);
  if (rc != AL_OK) {
    shard_bytes_close(sb);
    return rc;
  }
  sb->cached = storage_is_remote(sb->o);
  *out = sb;
  return AL_OK;
}

void shard_bytes_close(shard_bytes *sb) {
  if (!sb) return;
  for (size_t i = 0; i < sb->n; i++) free(sb->segs[i].data);
  free(sb->segs);
  free(sb->chunk.data);
  storage_close(sb->o);
  free(sb);
}

const storage_stat *shard_bytes_stat(const shard_bytes *sb) { return &sb->st; }
const char *shard_bytes_noun(const shard_bytes *sb) { return sb->o->ops->noun; }
storage_counts shard_bytes_counts(const shard_bytes *sb) { return storage_stats(sb->o); }
void shard_bytes_stream(shard_bytes *sb) { sb->stream = sb->cached; }

/* The first segment that ends at or after off (touching counts), or sb->n. */
static size_t seg_find(const shard_bytes *sb, uint64_t off) {
  size_t lo = 0, hi = sb->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (sb->segs[mid].off + sb->segs[mid].len < off)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Adds [off, off + len) (the bytes in data, taken over) to the cache, merged with the
 * segments it overlaps or touches. -1 when out of memory (data freed). */
static int cache_put(shard_bytes *sb, uint64_t off, unsigned char *data, size_t len) {
  size_t a = seg_find(sb, off), b = a;
  uint64_t end = off + len;
  while (b < sb->n && sb->segs[b].off <= end) b++;
  if (a == b) { /* nothing to merge with: a new segment at a */
    if (sb->n == sb->cap) {
      size_t nc = sb->cap ? sb->cap * 2 : 16;
      seg *s = realloc(sb->segs, nc * sizeof *s);
      if (!s) return free(data), -1;
      sb->segs = s;
      sb->cap = nc;
    }
    memmove(sb->segs + a + 1, sb->segs + a, (sb->n - a) * sizeof *sb->segs);
    sb->segs[a] = (seg){off, len, data};
    sb->n++;
    return 0;
  }
  uint64_t lo = sb->segs[a].off < off ? sb->segs[a].off : off;
  uint64_t hi = sb->segs[b - 1].off + sb->segs[b - 1].len;
  if (hi < end) hi = end;
  unsigned char *m = malloc((size_t)(hi - lo));
  if (!m) return free(data), -1;
  for (size_t i = a; i < b; i++) {
    memcpy(m + (sb->segs[i].off - lo), sb->segs[i].data, sb->segs[i].len);
    free(sb->segs[i].data);
  }
  memcpy(m + (off - lo), data, len);
  free(data);
  sb->segs[a] = (seg){lo, (size_t)(hi - lo), m};
  memmove(sb->segs + a + 1, sb->segs + b, (sb->n - b) * sizeof *sb->segs);
  sb->n -= b - a - 1;
  return 0;
}

/* The cached segment holding off, or NULL. */
static const seg *cache_at(const shard_bytes *sb, uint64_t off) {
  size_t i = seg_find(sb, off);
  if (i < sb->n && sb->segs[i].off <= off && off < sb->segs[i].off + sb->segs[i].len)
    return &sb->segs[i];
  return NULL;
}

static int out_of_memory(const shard_bytes *sb) {
  return al_set_error(AL_ENOMEM, "%s: out of memory", storage_name(sb->o));
}

/* One GET of [off, off + len) into the cache. */
static int fetch(shard_bytes *sb, uint64_t off, size_t len) {
  unsigned char *d = malloc(len ? len : 1);
  if (!d) return out_of_memory(sb);
  int rc = storage_read(sb->o, off, d, len);
  if (rc != AL_OK) return free(d), rc;
  if (cache_put(sb, off, d, len) != 0) return out_of_memory(sb);
  return AL_OK;
}

int shard_bytes_pread(shard_bytes *sb, uint64_t off, void *buf, size_t len) {
  uint64_t size = sb->st.size;
  if (off > size || len > size - off)
    return al_set_error(AL_ERANGE,
                        "%s: bytes %" PRIu64 "..%" PRIu64 " lie past its end (%" PRIu64 ")",
                        storage_name(sb->o), off, off + len, size);
  if (len == 0) return AL_OK;
  if (!sb->cached || sb->stream) return storage_read(sb->o, off, buf, len);
  const seg *s = cache_at(sb, off);
  if (!s || off + len > s->off + s->len) {
    int rc = fetch(sb, off, len);
    if (rc != AL_OK) return rc;
    s = cache_at(sb, off);
  }
  memcpy(buf, s->data + (off - s->off), len);
  return AL_OK;
}

int shard_bytes_read(shard_bytes *sb, uint64_t off, void *buf, size_t cap, size_t *got) {
  *got = 0;
  if (!sb->cached) return storage_read_some(sb->o, off, buf, cap, got);
  uint64_t size = sb->st.size;
  if (off >= size || cap == 0) return AL_OK;
  const seg *s;
  if (sb->stream) {
    s = &sb->chunk;
    if (!(s->data && off >= s->off && off < s->off + s->len)) {
      size_t n = size - off < STREAM_CHUNK ? (size_t)(size - off) : STREAM_CHUNK;
      if (!sb->chunk.data && !(sb->chunk.data = malloc(STREAM_CHUNK))) return out_of_memory(sb);
      sb->chunk.len = 0;
      int rc = storage_read(sb->o, off, sb->chunk.data, n);
      if (rc != AL_OK) return rc;
      sb->chunk.off = off;
      sb->chunk.len = n;
    }
  } else {
    s = cache_at(sb, off);
    if (!s) {
      size_t next = seg_find(sb, off); /* may end right at off: then the one after it */
      while (next < sb->n && sb->segs[next].off <= off) next++;
      uint64_t lim = next < sb->n ? sb->segs[next].off : size;
      size_t n = lim - off < cap ? (size_t)(lim - off) : cap;
      int rc = fetch(sb, off, n);
      if (rc != AL_OK) return rc;
      s = cache_at(sb, off);
    }
  }
  size_t have = (size_t)(s->off + s->len - off);
  *got = have < cap ? have : cap;
  memcpy(buf, s->data + (off - s->off), *got);
  return AL_OK;
}

int shard_bytes_read_at(void *ctx, void *buf, size_t n, uint64_t off, const char *path) {
  (void)path;
  return shard_bytes_pread(ctx, off, buf, n);
}

static int scan_fetch(void *ctx, uint64_t off, void *buf, size_t len) {
  shard_bytes *sb = ctx;
  int rc = shard_bytes_pread(sb, off, buf, len);
  if (rc != AL_OK) sb->fetch_rc = rc;
  return rc;
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
static int ensure(shard_bytes *sb, uint64_t a, uint64_t b) {
  const seg *s = cache_at(sb, a);
  if (s) a = s->off + s->len;
  if (b <= a) return AL_OK;
  return fetch(sb, a, (size_t)(b - a));
}

int shard_bytes_prefetch(shard_bytes *sb, uint64_t off, size_t len) {
  if (!sb->cached) return AL_OK;
  if (off > sb->st.size || len > sb->st.size - off)
    return al_set_error(AL_ERANGE,
                        "%s: bytes %" PRIu64 "..%" PRIu64 " lie past its end (%" PRIu64 ")",
                        storage_name(sb->o), off, off + len, sb->st.size);
  return ensure(sb, off, off + len);
}

/* Keeps only the cached bytes inside spans (sorted, disjoint): the listing's windows also hold
 * payload bytes the walk never reads. -1 when out of memory (the cache then stays whole). */
static int cache_keep(shard_bytes *sb, const span *sp, size_t nsp) {
  seg *out = NULL;
  size_t n = 0, cap = 0, j = 0;
  for (size_t i = 0; i < sb->n; i++) {
    const seg *g = &sb->segs[i];
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
  for (size_t i = 0; i < sb->n; i++) free(sb->segs[i].data);
  free(sb->segs);
  sb->segs = out;
  sb->n = n;
  sb->cap = cap;
  return 0;
oom:
  for (size_t i = 0; i < n; i++) free(out[i].data);
  free(out);
  return -1;
}

int shard_bytes_plan(shard_bytes *sb, size_t window, size_t gap) {
  if (!sb->cached) return AL_OK;
  uint64_t size = sb->st.size;
  if (!window) window = WINDOW_DEFAULT;
  if (!gap) gap = GAP_DEFAULT;
  storage_tar_listing l;
  sb->fetch_rc = AL_OK;
  int rc = storage_tar_scan_via(sb->o, window, WINDOW_MAX, scan_fetch, sb, &l);
  if (rc != AL_OK) {
    /* A request that failed is an error; a listing that stopped at bad bytes is the walk's to
     * report (it reads on demand, as a local walk reads the file). */
    if (sb->fetch_rc != AL_OK && sb->fetch_rc != AL_ERANGE) return rc;
    al_clear_error();
    return AL_OK;
  }
  span cur = {0, 0};
  span *keep = malloc((l.count + 1) * sizeof *keep);
  size_t nkeep = 0;
  if (!keep) rc = out_of_memory(sb);
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
    rc = ensure(sb, cur.a, cur.b);
    cur = want;
  }
  if (!rc && cur.b > cur.a) keep[nkeep++] = cur;
  if (!rc) rc = ensure(sb, cur.a, cur.b);
  if (!rc) cache_keep(sb, keep, nkeep); /* out of memory: the cache stays whole, still right */
  free(keep);
  storage_tar_listing_free(&l);
  return rc;
}
