/*
 * One shard: walk the tar with libarchive, group members into samples by key,
 * read KEY.json (or KEY.json.lz4) and skip every other member's data.
 *
 * Offsets: after archive_read_next_header the tar reader has consumed the
 * header blocks (ustar header, pax 'x' / GNU 'L' extensions) and nothing of
 * the data, so archive_filter_bytes(a, 0) is the data offset in the
 * uncompressed stream; archive_read_header_position is where the first header
 * block of the member began. For plain tar, the uncompressed stream is the file.
 *
 * Skipping: the skip callback seeks (lseek) over data that lies beyond the
 * read buffer, so payloads of uncompressed shards are not read. Compressed
 * shards must be decompressed through.
 */
#include "loader/scan_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "common/atomic_file_internal.h"
#include "common/grow_internal.h"
#include "loader/lz4_member_internal.h"
#include "loader/tensor_header_internal.h"

#define WHY_CAP 512
#define PROGRESS_EVERY 256

typedef struct pmember {
  uint32_t ext; /* id in the shard's extension table */
  uint64_t hdr, off, size;
  int typed; /* th holds the member's parsed .npy / .safetensors header */
  theader th;
} pmember;

/* The sample being collected: consecutive members with one key. */
typedef struct pending {
  char *key;
  size_t key_len, key_cap;
  pmember *m;
  size_t n, cap;
  int json; /* member index of KEY.json / KEY.json.lz4, -1 if none */
  int bad;  /* rejected already decided */
  char why[WHY_CAP];
  size_t bad_member;   /* member the reason is about */
  char over_name[512]; /* name of the member whose extension did not fit (EXT_OVER) */
  meta_record meta;
  int have_meta;
} pending;

#define EXT_OVER UINT32_MAX /* pmember.ext of a member whose extension did not fit */

struct source;

typedef struct scanner {
  const char *path;
  struct source *src;  /* the read callbacks' state while walking */
  uint64_t max_member; /* cap on a member's stored bytes */
  const meta_fields *fields;
  struct archive *a;
  scan_result *res;
  al_index *idx;
  pending p;
  char *buf; /* metadata member bytes */
  size_t buf_cap;
  char *dec; /* decoded LZ4 member */
  size_t dec_cap;
  LZ4F_dctx *dctx; /* created for the first KEY.json.lz4 or typed .lz4 member */
  uint8_t *hbuf;   /* a typed member's first (decoded) bytes */
  size_t hbuf_cap;
  uint8_t *lzin;  /* a typed .lz4 member's stored bytes, a block at a time */
  size_t lz_hint; /* LZ4F's hint while decoding a typed .lz4 member: 0 once the frame ended */
  uint32_t vae_t, vae_s;
  uint32_t json_id, jsonlz4_id;
  uint64_t file_size;
  int seekable;
  scan_progress *progress;
  uint64_t unreported;
  char namebuf[4096];
} scanner;

enum { CODEC_NONE = 0, CODEC_GZIP = 1, CODEC_LZ4 = 2, CODEC_OTHER = 3 };

typedef struct source {
  int fd;
  unsigned char *bufs[2]; /* handed out in turn: the previous one stays readable */
  int cur_buf;
  uint64_t off[2]; /* tar-stream offset of each buffer's first byte */
  size_t len[2];
  uint64_t pos;         /* tar-stream offset after the last byte handed out */
  size_t min, max, cur; /* read size: cur grows from min to max, back to min after a skip */
  uint64_t bytes_read;
  int codec;
  /* Decoding (CODEC_GZIP, CODEC_LZ4). */
  unsigned char *in;
  size_t in_len, in_pos;
  int in_eof;
  z_stream z;
  int z_init, z_member_done; /* between gzip members */
  LZ4F_dctx *lz;
  size_t lz_hint; /* 0: between LZ4 frames */
  /* CODEC_OTHER (zstd, bzip2, xz, legacy LZ4): libarchive's filters, raw format, give the tar
   * stream, so that its header blocks can be checked as for gzip and LZ4 shards. */
  struct archive *raw;
  int started;   /* some compressed input consumed */
  int failed;    /* 1: checksum/data error (the shard's data cannot be trusted), 2: truncated */
  int fail_next; /* the error comes with the next call (bytes decoded before it go first) */
  char why[WHY_CAP];
} source;

static const char *filter_name(int code) {
  switch (code) {
    case ARCHIVE_FILTER_NONE: return "none";
    case ARCHIVE_FILTER_GZIP: return "gzip";
    case ARCHIVE_FILTER_BZIP2: return "bzip2";
    case ARCHIVE_FILTER_COMPRESS: return "compress";
    case ARCHIVE_FILTER_LZMA: return "lzma";
    case ARCHIVE_FILTER_XZ: return "xz";
    case ARCHIVE_FILTER_LZIP: return "lzip";
    case ARCHIVE_FILTER_LZ4: return "lz4";
    case ARCHIVE_FILTER_ZSTD: return "zstd";
    default: return "other";
  }
}

static int reject(scanner *s, const char *member, uint64_t offset, const char *key,
                  const char *why) {
  return al_index_add_rejected(s->idx, 0, member, offset, key, why);
}

/* Member name of pending member i: key + "." + ext. */
static const char *member_name(scanner *s, size_t i) {
  if (s->p.m[i].ext == EXT_OVER) return s->p.over_name;
  snprintf(s->namebuf, sizeof s->namebuf, "%.*s.%s", (int)s->p.key_len, s->p.key,
           strtab_get(&s->idx->exts, s->p.m[i].ext));
  return s->namebuf;
}

static void mark_bad(scanner *s, size_t member, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void mark_bad(scanner *s, size_t member, const char *fmt, ...) {
  if (s->p.bad) return; /* the first reason is the one reported */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->p.why, sizeof s->p.why, fmt, ap);
  va_end(ap);
  s->p.bad = 1;
  s->p.bad_member = member;
}

static void report(scanner *s, uint64_t samples) {
  if (!s->progress) return;
  s->unreported += samples;
  if (s->unreported >= PROGRESS_EVERY) {
    atomic_fetch_add(&s->progress->samples, s->unreported);
    s->unreported = 0;
  }
}

static int raw_block(scanner *s, uint64_t off, unsigned char out[512]);
static int octal_field_ok(const unsigned char *f, size_t n);

/* A KEY.json with a duration or an fps but no frame-count field the index knows may be a
 * video whose frame field has another name: kept, and listed as a warning. */
static int frames_warning(scanner *s, size_t sample, const char *key) {
  const pending *p = &s->p;
  const meta_record *m = &p->meta;
  if (m->frames_from == META_FRAMES_FIELD || !(m->fps > 0 || m->has_duration)) return AL_OK;
  char why[WHY_CAP];
  if (m->frames_from == META_FRAMES_DURATION)
    snprintf(why, sizeof why,
             "no frame-count field ('%s', num_frames, nframes, nb_frames, frame_count, length): "
             "indexed as %u frames from %s x %s (map the field with --fields frames=NAME)",
             s->fields->frames, m->frames, s->fields->duration, s->fields->fps);
  else
    snprintf(why, sizeof why,
             "no frame-count field ('%s', num_frames, nframes, nb_frames, frame_count, length) "
             "although it has %s %g: indexed as an image (1 frame; map the field with --fields "
             "frames=NAME)",
             s->fields->frames, s->fields->fps, (double)m->fps);
  return index_add_warning(s->idx, sample, 0, member_name(s, (size_t)p->json), p->m[p->json].hdr,
                           key, why);
}

/* The latent member (the first typed member whose extension starts with "latent") is the
 * truth for the sample's grid: checked against KEY.json under the VAE strides, or, when the
 * JSON has no width and height, giving them. */
static void latent_check(scanner *s) {
  pending *p = &s->p;
  meta_record *m = &p->meta;
  size_t li = p->n;
  for (size_t i = 0; i < p->n; i++) {
    if (p->m[i].typed && p->m[i].ext != EXT_OVER &&
        strncmp(strtab_get(&s->idx->exts, p->m[i].ext), "latent", 6) == 0) {
      li = i;
      break;
    }
  }
  if (li == p->n) {
    if (m->no_dims)
      mark_bad(s, (size_t)p->json,
               "missing field '%s' (and no typed latent member, KEY.latent*.npy or "
               ".safetensors, to take the grid from)",
               s->fields->width);
    return;
  }
  const theader *h = &p->m[li].th;
  uint64_t T, H, W;
  if (h->ndim == 4) {
    T = h->shape[1], H = h->shape[2], W = h->shape[3];
  } else if (h->ndim == 3) {
    T = 1, H = h->shape[1], W = h->shape[2];
  } else {
    mark_bad(s, li, "latent member has %u dimensions; expected (C, T, H, W) or (C, H, W)", h->ndim);
    return;
  }
  char grid[96];
  snprintf(grid, sizeof grid, "[%llu, %llu, %llu, %llu]", (unsigned long long)h->shape[0],
           (unsigned long long)T, (unsigned long long)H, (unsigned long long)W);
  if (h->shape[0] == 0 || T == 0 || H == 0 || W == 0) {
    mark_bad(s, li, "latent grid %s has an empty dimension", grid);
    return;
  }
  uint32_t st = s->vae_t, ss = s->vae_s;
  if (m->no_dims) {
    /* Only the JSON's missing sides come from the grid; its frames field (if any) is
     * checked like any other. */
    if (W > AL_META_MAX_SIDE / ss || H > AL_META_MAX_SIDE / ss ||
        T - 1 > (AL_META_MAX_FRAMES - 1) / st) {
      mark_bad(s, li, "latent grid %s is beyond the limits (%u pixels a side, %u frames)", grid,
               AL_META_MAX_SIDE, AL_META_MAX_FRAMES);
      return;
    }
    m->width = (uint32_t)(W * ss);
    m->height = (uint32_t)(H * ss);
    if (m->frames_from != META_FRAMES_FIELD) {
      m->frames = (uint32_t)((T - 1) * st + 1);
      m->frames_from = META_FRAMES_FIELD; /* known: no warning */
    }
    m->no_dims = 0;
    if (meta_tokens(m->width, m->height, m->frames) > UINT32_MAX) {
      mark_bad(s, li, "latent grid %s is over 2^32-1 tokens", grid);
      return;
    }
  }
  uint64_t jt = 1 + (uint64_t)(m->frames - 1) / st, jh = m->height / ss, jw = m->width / ss;
  if (jt != T || jh != H || jw != W)
    mark_bad(s, li,
             "latent grid %s (T, H, W = %llu, %llu, %llu) does not match the metadata: %ux%u x %u "
             "frames gives T, H, W = %llu, %llu, %llu under VAE stride %u (time), %u (space)",
             grid, (unsigned long long)T, (unsigned long long)H, (unsigned long long)W, m->width,
             m->height, m->frames, (unsigned long long)jt, (unsigned long long)jh,
             (unsigned long long)jw, st, ss);
}

/* Ends the pending sample: adds it to the index or rejects it. */
static int flush_pending(scanner *s) {
  pending *p = &s->p;
  if (!p->n) return AL_OK;
  int rc = AL_OK;
  char key[4096];
  snprintf(key, sizeof key, "%.*s", (int)p->key_len, p->key);
  if (!p->bad && p->json < 0)
    mark_bad(s, 0, "no metadata member (%s.json or %s.json.lz4)", key, key);
  if (!p->bad && !p->have_meta) mark_bad(s, (size_t)p->json, "metadata not read");
  if (!p->bad) latent_check(s);
  if (p->bad) {
    rc = reject(s, member_name(s, p->bad_member), p->m[p->bad_member].hdr, key, p->why);
  } else {
    index_member_rec recs[64];
    index_member_rec *r = p->n <= 64 ? recs : malloc(p->n * sizeof *r);
    if (!r) return al_set_error(AL_ENOMEM, "out of memory");
    for (size_t i = 0; i < p->n; i++) {
      const char *ext = strtab_get(&s->idx->exts, p->m[i].ext);
      size_t el = strlen(ext);
      int lz4 = el >= 4 && !strcmp(ext + el - 4, ".lz4");
      r[i].off_ext = p->m[i].off << 16 | (lz4 ? AL_MEMBER_LZ4 : 0) | p->m[i].ext;
      r[i].size = p->m[i].size;
    }
    size_t n = s->idx->n_samples;
    rc = grow_array((void **)&s->res->first_hdr, &s->res->first_hdr_cap, n + 1,
                    sizeof *s->res->first_hdr, "the shard's header offsets");
    if (!rc)
      rc = index_add_sample_rec(s->idx, p->key, p->key_len, 0, p->meta.width, p->meta.height,
                                p->meta.frames, p->meta.fps, r, p->n);
    for (size_t i = 0; i < p->n && !rc; i++)
      if (p->m[i].typed) rc = index_add_member_type(s->idx, (uint32_t)i, &p->m[i].th);
    if (!rc) rc = frames_warning(s, n, key);
    if (!rc) s->res->first_hdr[n] = p->m[0].hdr;
    if (r != recs) free(r);
  }
  p->n = 0;
  p->key_len = 0;
  p->json = -1;
  p->bad = 0;
  p->have_meta = 0;
  report(s, 1);
  return rc;
}

static int start_pending(scanner *s, const char *key, size_t len) {
  pending *p = &s->p;
  int rc = grow_array((void **)&p->key, &p->key_cap, len + 1, 1, "a sample key");
  if (rc) return rc;
  memcpy(p->key, key, len);
  p->key[len] = '\0';
  p->key_len = len;
  return AL_OK;
}

/* Reads the current member's data (at most AL_META_MAX_BYTES). */
static int read_data(scanner *s, uint64_t size, size_t *got, char *why) {
  if (size > AL_META_MAX_BYTES) {
    snprintf(why, WHY_CAP, "metadata member of %llu bytes exceeds the %u-byte limit",
             (unsigned long long)size, AL_META_MAX_BYTES);
    return 1;
  }
  int rc = grow_array((void **)&s->buf, &s->buf_cap, (size_t)size + 1, 1, "a metadata member");
  if (rc) return rc;
  size_t n = 0;
  while (n < size) {
    la_ssize_t k = archive_read_data(s->a, s->buf + n, (size_t)size - n);
    if (k < 0) {
      snprintf(why, WHY_CAP, "reading data: %s", archive_error_string(s->a));
      return -1; /* the archive is unusable now */
    }
    if (k == 0) break;
    n += (size_t)k;
  }
  if (n != size) {
    snprintf(why, WHY_CAP, "data ends after %zu of %llu bytes (truncated shard)", n,
             (unsigned long long)size);
    return -1;
  }
  *got = n;
  return 0;
}

/* Decoded KEY.json.lz4 bytes go to s->dec (realloc keeps all of it). */
static int dec_reserve(void *ctx, size_t need, size_t keep, uint8_t **out, size_t *cap) {
  scanner *s = ctx;
  (void)keep;
  int rc = grow_array((void **)&s->dec, &s->dec_cap, need, 1, "decoded metadata");
  *out = (uint8_t *)s->dec;
  *cap = s->dec_cap;
  return rc;
}

/* Decodes the LZ4 frame in s->buf[0..n) into s->dec. Returns 0 with *out and
 * *out_len set, 1 with the reason in `why`, or a negative status. */
static int lz4_decode(scanner *s, size_t n, const char **out, size_t *out_len, char *why) {
  if (!s->dctx && LZ4F_isError(LZ4F_createDecompressionContext(&s->dctx, LZ4F_VERSION))) {
    s->dctx = NULL;
    return al_set_error(AL_ENOMEM, "out of memory (LZ4 context)");
  }
  lz4_member_src src = {.size = n, .data = (const uint8_t *)s->buf};
  lz4_member_dst dst = {.reserve = dec_reserve,
                        .ctx = s,
                        .first = 65536,
                        .limit = AL_META_MAX_BYTES};
  lz4_member_result res;
  int rc = lz4_member_decode(s->dctx, &src, &dst, &res);
  if (rc) return rc;
  switch (res.fault) {
    case LZ4_MEMBER_OK:
      *out = s->dec;
      *out_len = res.len;
      return 0;
    case LZ4_MEMBER_BAD_HEADER:
    case LZ4_MEMBER_CORRUPT:
      snprintf(why, WHY_CAP, "bad LZ4 frame at member byte %llu: %s", (unsigned long long)res.at,
               res.lz4_error);
      break;
    case LZ4_MEMBER_TOO_LARGE:
      snprintf(why, WHY_CAP, "decoded metadata exceeds the %u-byte limit", AL_META_MAX_BYTES);
      break;
    case LZ4_MEMBER_TRUNCATED:
      snprintf(why, WHY_CAP, "LZ4 frame truncated after %zu bytes", n);
      break;
    case LZ4_MEMBER_TRAILING:
      snprintf(why, WHY_CAP, "%llu bytes after the end of the LZ4 frame",
               (unsigned long long)(n - res.at));
      break;
    case LZ4_MEMBER_SIZE_MISMATCH:
      snprintf(why, WHY_CAP, "LZ4 content size mismatch: decoded %zu bytes, header says %llu",
               res.len, res.content);
      break;
  }
  return 1;
}

/* Reads up to `want` bytes of the current member's data into s->hbuf, after the `*have`
 * already there. Returns 0, 1 when the archive became unusable (sample marked), or a
 * negative status. */
static int read_more(scanner *s, size_t mi, size_t want, size_t *have) {
  int rc = grow_array((void **)&s->hbuf, &s->hbuf_cap, want, 1, "a typed member's header");
  if (rc) return rc;
  while (*have < want) {
    la_ssize_t k = archive_read_data(s->a, s->hbuf + *have, want - *have);
    if (k < 0) {
      mark_bad(s, mi, "reading data: %s", archive_error_string(s->a));
      return 1;
    }
    if (k == 0) {
      mark_bad(s, mi, "data ends after %zu bytes (truncated shard)", *have);
      return 1;
    }
    *have += (size_t)k;
  }
  return 0;
}

/* The first read of a typed member: an .npy header is 64 or 128 bytes, a one-tensor
 * safetensors header about as much; the parser asks for more when it needs it. */
#define TYPED_FIRST_READ 256

static int typed_parse(scanner *s, size_t mi, theader_kind kind, size_t have, uint64_t size,
                       size_t *need) {
  theader th;
  int rc = theader_parse(kind, s->hbuf, have, size, NULL, &th, need);
  if (rc == AL_OK) {
    s->p.m[mi].typed = 1;
    s->p.m[mi].th = th;
  } else if (rc != AL_ERANGE) {
    mark_bad(s, mi, "%s", al_last_error());
    al_clear_error();
  }
  return rc;
}

/* A typed member stored as is: reads its header only (the data is skipped by the next
 * header read). Returns AL_OK, 1 when the archive became unusable, or a negative status. */
static int typed_header(scanner *s, size_t mi, theader_kind kind, uint64_t size) {
  size_t have = 0, need = size < TYPED_FIRST_READ ? (size_t)size : TYPED_FIRST_READ;
  for (;;) {
    int rc = read_more(s, mi, need, &have);
    if (rc) return rc;
    if (typed_parse(s, mi, kind, have, size, &need) != AL_ERANGE) return AL_OK;
  }
}

#define LZ4_IN_BLOCK (64u << 10)

/* A typed KEY.ext.lz4 member (one LZ4 frame): decodes only as far as the header when the
 * frame header gives the content size; otherwise decodes the whole frame to learn its size
 * (keeping the first THEADER_MAX_HEADER_BYTES). Returns as typed_header. */
static int typed_lz4_run(scanner *s, size_t mi, theader_kind kind, uint64_t size) {
  if (!s->dctx && LZ4F_isError(LZ4F_createDecompressionContext(&s->dctx, LZ4F_VERSION))) {
    s->dctx = NULL;
    return al_set_error(AL_ENOMEM, "out of memory (LZ4 context)");
  }
  if (!s->lzin && !(s->lzin = malloc(LZ4_IN_BLOCK)))
    return al_set_error(AL_ENOMEM, "out of memory (LZ4 input)");
  int rc = grow_array((void **)&s->hbuf, &s->hbuf_cap, TYPED_FIRST_READ, 1,
                      "a typed member's header");
  if (rc) return rc;
  LZ4F_resetDecompressionContext(s->dctx);
  s->lz_hint = 1;       /* LZ4F: 0 once the frame is complete */
  uint64_t left = size; /* stored bytes not yet read */
  size_t in_len = 0, in_pos = 0;
  uint64_t total = 0;    /* decoded bytes */
  size_t have = 0;       /* decoded bytes kept in s->hbuf */
  uint64_t content = 0;  /* the frame header's content size, 0 = not given */
  int header = 0;        /* frame header read */
  uint64_t consumed = 0; /* stored bytes given to LZ4F */
  size_t want = TYPED_FIRST_READ;
  uint8_t discard[4096];
  for (;;) {
    /* Decode until `want` bytes are kept (content size known) or the frame ends. */
    while (s->lz_hint != 0 && (content == 0 || have < want)) {
      if (in_pos == in_len) {
        if (left == 0) {
          mark_bad(s, mi, "LZ4 frame truncated after %llu bytes", (unsigned long long)size);
          return AL_OK;
        }
        size_t n = left < LZ4_IN_BLOCK ? (size_t)left : LZ4_IN_BLOCK;
        size_t got = 0;
        while (got < n) {
          la_ssize_t k = archive_read_data(s->a, s->lzin + got, n - got);
          if (k < 0) {
            mark_bad(s, mi, "reading data: %s", archive_error_string(s->a));
            return 1;
          }
          if (k == 0) {
            mark_bad(s, mi, "data ends after %llu bytes (truncated shard)",
                     (unsigned long long)(size - left + got));
            return 1;
          }
          got += (size_t)k;
        }
        left -= n;
        in_len = n;
        in_pos = 0;
      }
      if (!header) {
        /* LZ4F_getFrameInfo wants the whole frame header: it is at most 19 bytes, the
         * first block read holds it unless the member is that short. */
        LZ4F_frameInfo_t info;
        size_t hn = in_len - in_pos;
        size_t e = LZ4F_getFrameInfo(s->dctx, &info, s->lzin + in_pos, &hn);
        if (LZ4F_isError(e)) {
          mark_bad(s, mi, "bad LZ4 frame at member byte 0: %s", LZ4F_getErrorName(e));
          return AL_OK;
        }
        in_pos += hn;
        consumed += hn;
        s->lz_hint = e;
        header = 1;
        content = info.contentSize;
        if (content > 0 && want > content) want = (size_t)content;
        continue;
      }
      size_t cap_keep = content ? want : THEADER_MAX_HEADER_BYTES;
      uint8_t *dst;
      size_t dn, sn = in_len - in_pos;
      if (have < cap_keep) {
        rc = grow_array((void **)&s->hbuf, &s->hbuf_cap, cap_keep, 1, "a typed member's header");
        if (rc) return rc;
        dst = s->hbuf + have;
        dn = cap_keep - have;
      } else {
        dst = discard;
        dn = sizeof discard;
      }
      size_t h = LZ4F_decompress(s->dctx, dst, &dn, s->lzin + in_pos, &sn, NULL);
      if (LZ4F_isError(h)) {
        mark_bad(s, mi, "bad LZ4 frame at member byte %llu: %s", (unsigned long long)consumed,
                 LZ4F_getErrorName(h));
        return AL_OK;
      }
      in_pos += sn;
      consumed += sn;
      total += dn;
      if (dst != discard) have += dn;
      s->lz_hint = h;
      if (content && total > content) {
        mark_bad(s, mi, "LZ4 content size mismatch: decodes past the %llu bytes its header says",
                 (unsigned long long)content);
        return AL_OK;
      }
    }
    if (s->lz_hint == 0) { /* the whole frame is decoded */
      if (content && total != content) {
        mark_bad(s, mi, "LZ4 content size mismatch: decoded %llu bytes, header says %llu",
                 (unsigned long long)total, (unsigned long long)content);
        return AL_OK;
      }
      if (consumed != size) {
        mark_bad(s, mi, "%llu bytes after the end of the LZ4 frame",
                 (unsigned long long)(size - consumed));
        return AL_OK;
      }
      content = total;
    }
    size_t need = 0;
    if (typed_parse(s, mi, kind, have, content, &need) != AL_ERANGE) return AL_OK;
    if (s->lz_hint == 0 || need <= have) { /* cannot happen: the parser had all it could get */
      mark_bad(s, mi, "typed header needs %zu bytes, %zu decoded", need, have);
      return AL_OK;
    }
    want = need;
  }
}

/* LZ4F_resetDecompressionContext leaves the remaining-size count of a frame abandoned before
 * its end (lz4 1.9: a later frame without a content size then fails "frameSize_wrong"), so
 * a context left mid-frame is freed and made anew when next needed. */
static int typed_header_lz4(scanner *s, size_t mi, theader_kind kind, uint64_t size) {
  int rc = typed_lz4_run(s, mi, kind, size);
  if (s->lz_hint != 0 && s->dctx) {
    LZ4F_freeDecompressionContext(s->dctx);
    s->dctx = NULL;
  }
  return rc;
}

/* Handles one regular member. Returns AL_OK, a negative status (out of memory),
 * or 1 when the archive became unusable (fatal read error, already recorded). */
static int member(scanner *s, struct archive_entry *e, const char *name, uint64_t hdr) {
  uint64_t off = (uint64_t)archive_filter_bytes(s->a, 0);
  uint64_t size = archive_entry_size_is_set(e) ? (uint64_t)archive_entry_size(e) : 0;
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  const char *dot = strchr(base, '.');
  char why[WHY_CAP];
  if (!*base || base[0] == '.' || !dot || !dot[1]) {
    /* Not part of any sample; recorded so that nothing vanishes. */
    int rc = flush_pending(s);
    if (!rc)
      rc = reject(s, name, hdr, "",
                  !*base           ? "member name has no file name"
                  : base[0] == '.' ? "hidden member (name starts with '.'), not a sample"
                                   : "member name has no extension (KEY.ext), not a sample");
    return rc;
  }
  size_t key_len = (size_t)(dot - name);
  const char *ext = dot + 1;
  size_t ext_len = strlen(ext);
  pending *p = &s->p;
  int rc = AL_OK;
  if (p->n && (p->key_len != key_len || memcmp(p->key, name, key_len) != 0)) rc = flush_pending(s);
  if (!rc && p->n == 0) rc = start_pending(s, name, key_len);
  if (rc) return rc;
  uint32_t ext_id;
  rc = strtab_intern(&s->idx->exts, ext, strlen(ext), AL_EXT_MAX, &ext_id);
  int over = rc == AL_ERANGE; /* more distinct extensions than an index numbers */
  if (over) {
    al_clear_error();
    ext_id = EXT_OVER;
    snprintf(p->over_name, sizeof p->over_name, "%s", name);
  } else if (rc) {
    return rc;
  }
  for (size_t i = 0; i < p->n && !over; i++)
    if (p->m[i].ext == ext_id) {
      mark_bad(s, p->n, "extension '%s' repeated within sample (first at byte %llu)", ext,
               (unsigned long long)p->m[i].hdr);
      break;
    }
  rc = grow_array((void **)&p->m, &p->cap, p->n + 1, sizeof *p->m, "a sample's members");
  if (rc) return rc;
  size_t mi = p->n++;
  p->m[mi].ext = ext_id;
  p->m[mi].hdr = hdr;
  p->m[mi].off = off;
  p->m[mi].size = size;
  p->m[mi].typed = 0;
  if (size > s->max_member)
    mark_bad(s, mi, "member of %llu bytes exceeds the %llu-byte cap (max_member_bytes)",
             (unsigned long long)size, (unsigned long long)s->max_member);
  if (key_len > AL_INDEX_KEY_MAX)
    mark_bad(s, mi, "key of %zu bytes exceeds the %u-byte limit (AL_INDEX_KEY_MAX)", key_len,
             AL_INDEX_KEY_MAX);
  if (ext_len > AL_INDEX_EXT_MAX)
    mark_bad(s, mi, "extension of %zu bytes exceeds the %u-byte limit (AL_INDEX_EXT_MAX)", ext_len,
             AL_INDEX_EXT_MAX);
  if (over)
    mark_bad(s, mi,
             "extension '%s' does not fit: a shard holds at most %u distinct extensions (this "
             "sample is rejected, the shard's other samples are indexed)",
             ext, AL_EXT_MAX);
  unsigned char blk[512];
  if (off >= 512 && archive_entry_sparse_count(e) == 0 && raw_block(s, off - 512, blk) &&
      !octal_field_ok(blk + 124, 12)) {
    char shown[64];
    size_t k = 0;
    for (int i = 0; i < 12 && k + 5 < sizeof shown; i++)
      k += (size_t)snprintf(shown + k, sizeof shown - k,
                            blk[124 + i] >= 0x20 && blk[124 + i] < 0x7f ? "%c" : "\\x%02x",
                            blk[124 + i]);
    mark_bad(s, mi,
             "size field of the ustar header is not an octal number ('%s'): libarchive reads it "
             "as %llu, GNU tar refuses the header",
             shown, (unsigned long long)size);
  }
  if (p->n > AL_MEMBERS_MAX) mark_bad(s, mi, "more than %u members", AL_MEMBERS_MAX);
  if (off > AL_OFFSET_MAX) mark_bad(s, mi, "data offset %llu beyond 2^48", (unsigned long long)off);
  if (archive_entry_sparse_count(e) > 0)
    mark_bad(s, mi, "sparse member: data offsets would be wrong");
  if (s->seekable && off + size > s->file_size)
    mark_bad(s, mi,
             "member data (%llu bytes at byte %llu) extends past the end of the file (%llu bytes): truncated shard",
             (unsigned long long)size, (unsigned long long)off, (unsigned long long)s->file_size);

  int is_meta = ext_id == s->json_id || ext_id == s->jsonlz4_id;
  if (!is_meta) {
    theader_kind kind = over ? THEADER_KIND_NONE : theader_kind_of(ext);
    if (kind == THEADER_KIND_NONE || p->bad) return AL_OK; /* skipped by the next header read */
    int lz4 = ext_len > 4 && !strcmp(ext + ext_len - 4, ".lz4");
    return lz4 ? typed_header_lz4(s, mi, kind, size) : typed_header(s, mi, kind, size);
  }
  if (p->bad) return AL_OK;
  if (p->json >= 0) {
    mark_bad(s, mi, "both %.*s.json and %.*s.json.lz4", (int)key_len, name, (int)key_len, name);
    return AL_OK;
  }
  p->json = (int)mi;
  size_t n = 0;
  rc = read_data(s, size, &n, why);
  if (rc == -1) {
    mark_bad(s, mi, "%s", why);
    return 1;
  }
  if (rc < 0) return rc; /* out of memory */
  if (rc == 1) {
    mark_bad(s, mi, "%s", why);
    return AL_OK;
  }
  const char *json = s->buf;
  size_t json_len = n;
  if (ext_id == s->jsonlz4_id) {
    rc = lz4_decode(s, n, &json, &json_len, why);
    if (rc < 0) return rc;
    if (rc) {
      mark_bad(s, mi, "%s", why);
      return AL_OK;
    }
  }
  if (meta_parse(json, json_len, s->fields, &p->meta, why, sizeof why) != 0) {
    mark_bad(s, mi, "%s", why);
    return AL_OK;
  }
  p->have_meta = 1;
  return AL_OK;
}

static const char *entry_kind(mode_t t) {
  switch (t) {
    case AE_IFLNK: return "symbolic link";
    case AE_IFCHR: return "character device";
    case AE_IFBLK: return "block device";
    case AE_IFIFO: return "fifo";
    case AE_IFSOCK: return "socket";
    default: return "special file";
  }
}

static int walk(scanner *s) {
  struct archive_entry *e;
  uint64_t damaged_at = 0, damaged_blocks = 0;
  uint64_t
      next_hdr = 0; /* where the next header should start: after the last member's padded data */
  int first = 1;
  for (;;) {
    int ar = archive_read_next_header(s->a, &e);
    /* After a fatal error libarchive's header position is meaningless. */
    uint64_t hdr = ar == ARCHIVE_FATAL ? next_hdr : (uint64_t)archive_read_header_position(s->a);
    if (ar == ARCHIVE_RETRY) {
      /* Bad header checksum: libarchive moves one block on and tries again. */
      if (!damaged_blocks) damaged_at = hdr;
      damaged_blocks++;
      continue;
    }
    if (damaged_blocks) {
      char why[WHY_CAP];
      snprintf(why, sizeof why,
               "damaged tar header (%s); skipped %llu bytes to the next valid header",
               archive_error_string(s->a) ? archive_error_string(s->a) : "bad checksum",
               (unsigned long long)(hdr - damaged_at));
      int rc = reject(s, "", damaged_at, "", why);
      if (rc) return rc;
      damaged_blocks = 0;
    }
    if (ar == ARCHIVE_EOF) {
      /* libarchive accepts a tar that ends right after a member ("some writers omit the
       * block of nulls"): for us it is the one sign of a shard cut at a member boundary. */
      uint64_t end = (uint64_t)archive_filter_bytes(s->a, 0);
      if (!first && end < next_hdr + 1024) {
        char why[WHY_CAP];
        snprintf(why, sizeof why,
                 "no end-of-archive marker (two zero blocks) after the last member%s: the shard "
                 "may have been cut at a member boundary, so its last sample is rejected",
                 end > next_hdr ? ", only one zero block" : "");
        if (s->p.n) {
          mark_bad(s, s->p.n - 1, "%s", why);
          int rc = flush_pending(s);
          if (rc) return rc;
        }
        return reject(s, "", end, "", why);
      }
      return flush_pending(s);
    }
    if (ar == ARCHIVE_FATAL || ar < ARCHIVE_WARN) {
      char why[WHY_CAP];
      snprintf(why, sizeof why, "%s%s",
               first ? "not a readable tar archive: " : "archive error, rest of shard unreadable: ",
               archive_error_string(s->a) ? archive_error_string(s->a) : "unknown error");
      if (first) {
        s->res->readable = 0;
        return reject(s, "", hdr, "", why);
      }
      if (s->p.n) {
        /* The sample in progress may have lost members: reject it with the reason. */
        mark_bad(s, s->p.n - 1, "%s", why);
        int rc = flush_pending(s);
        if (rc) return rc;
      }
      return reject(s, "", hdr, "", why);
    }
    if (first) {
      first = 0;
      int code = archive_filter_code(s->a, 0);
      const char *cname = filter_name(code);
      if (s->src->codec == CODEC_GZIP) cname = "gzip";
      if (s->src->codec == CODEC_LZ4) cname = "lz4";
      if (s->src->codec == CODEC_OTHER) cname = filter_name(archive_filter_code(s->src->raw, 0));
      s->seekable = code == ARCHIVE_FILTER_NONE && s->src->codec == CODEC_NONE;
      index_shard_rec *sh = &s->idx->shards[0];
      sh->compression = index_compression_name(cname);
      sh->seekable = s->seekable;
    }
    int64_t sz = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
    next_hdr = (uint64_t)archive_filter_bytes(s->a, 0) +
               ((uint64_t)(sz > 0 ? sz : 0) + 511) / 512 * 512;
    const char *name = archive_entry_pathname(e);
    mode_t type = archive_entry_filetype(e);
    if (type == AE_IFDIR) continue; /* directories carry no sample data */
    if (!name) {
      int rc = flush_pending(s);
      if (!rc) rc = reject(s, "", hdr, "", "member without a readable name");
      if (rc) return rc;
      continue;
    }
    if (type != AE_IFREG || archive_entry_hardlink(e)) {
      char why[WHY_CAP];
      snprintf(why, sizeof why, "%s, not a regular file: skipped",
               archive_entry_hardlink(e) ? "hard link" : entry_kind(type));
      int rc = reject(s, name, hdr, "", why);
      if (rc) return rc;
      continue;
    }
    int rc = member(s, e, name, hdr);
    if (rc == 1) {
      /* Data could not be read: the archive cannot go on. */
      rc = flush_pending(s);
      if (!rc)
        rc = reject(s, "", (uint64_t)archive_filter_bytes(s->a, 0), "",
                    "shard ends here: archive unreadable after a data error");
      return rc;
    }
    if (rc) return rc;
  }
}

/*
 * Our own read callbacks instead of archive_read_open_filename: the same
 * read-a-block / lseek-to-skip behaviour, plus a count of the bytes really
 * read, which is how the benchmark shows that payloads are skipped.
 *
 * gzip and LZ4-frame shards are decoded here (zlib, LZ4F) rather than by
 * libarchive's filters, which verify neither the gzip CRC32 nor the LZ4
 * content checksum: libarchive then reads a plain tar stream, and a checksum
 * mismatch fails the shard. Either way the callback knows which bytes of the
 * (uncompressed) tar stream its last two buffers hold, so the scanner can look
 * at a member's raw ustar header (its size field: libarchive reads garbage as 0).
 */

#define IN_CAP (1u << 20)

static uint64_t in_consumed(const source *src) {
  return src->bytes_read - (uint64_t)(src->in_len - src->in_pos);
}

/* Refills the compressed input; returns -1 on a read error (src->why set). */
static int dec_refill(source *src) {
  if (src->in_pos < src->in_len || src->in_eof) return 0;
  for (;;) {
    ssize_t n = read(src->fd, src->in, IN_CAP);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      snprintf(src->why, WHY_CAP, "read failed: %s", strerror(errno));
      return -1;
    }
    src->bytes_read += (uint64_t)n;
    src->in_len = (size_t)n;
    src->in_pos = 0;
    if (n == 0) src->in_eof = 1;
    return 0;
  }
}

/* Decodes up to `cap` bytes into `out`. Returns the count (0 at the clean end of
 * the compressed stream) or -1 with src->failed and src->why set. */
static ssize_t dec_read(source *src, unsigned char *out, size_t cap) {
  if (src->fail_next) return -1;
  size_t made = 0;
  if (src->codec == CODEC_OTHER) {
    while (made < cap) {
      la_ssize_t n = archive_read_data(src->raw, out + made, cap - made);
      if (n == 0) break;
      if (n < 0) {
        const char *m = archive_error_string(src->raw);
        snprintf(src->why, WHY_CAP, "%s stream: %s", archive_filter_name(src->raw, 0),
                 m ? m : "corrupt data");
        src->failed = m && (strstr(m, "runcat") || strstr(m, "premature")) ? 2 : 1;
        if (made == 0) return -1;
        src->fail_next = 1;
        break;
      }
      made += (size_t)n;
    }
    la_int64_t in = archive_filter_bytes(src->raw, -1);
    if (in > 0) src->bytes_read = (uint64_t)in;
    return (ssize_t)made;
  }
#define DEC_FAIL(kind)        \
  do {                        \
    src->failed = (kind);     \
    if (made == 0) return -1; \
    src->fail_next = 1;       \
    return (ssize_t)made;     \
  } while (0)
  while (made < cap) {
    if (dec_refill(src) < 0) DEC_FAIL(2);
    size_t avail = src->in_len - src->in_pos;
    int between = src->codec == CODEC_GZIP ? (!src->started || src->z_member_done)
                                           : (!src->started || src->lz_hint == 0);
    if (avail == 0) {
      if (between) break; /* clean end */
      snprintf(src->why, WHY_CAP, "%s stream truncated at compressed byte %llu",
               src->codec == CODEC_GZIP ? "gzip" : "LZ4", (unsigned long long)src->bytes_read);
      DEC_FAIL(2);
    }
    src->started = 1;
    if (src->codec == CODEC_GZIP) {
      if (src->z_member_done) {
        if (src->in[src->in_pos] != 0x1f) {
          snprintf(src->why, WHY_CAP,
                   "bytes after the end of the gzip stream at compressed byte %llu",
                   (unsigned long long)in_consumed(src));
          DEC_FAIL(1);
        }
        inflateReset(&src->z);
        src->z_member_done = 0;
      }
      src->z.next_in = src->in + src->in_pos;
      src->z.avail_in = (uInt)avail;
      src->z.next_out = out + made;
      src->z.avail_out = (uInt)(cap - made);
      int zr = inflate(&src->z, Z_NO_FLUSH);
      src->in_pos = src->in_len - src->z.avail_in;
      made = cap - src->z.avail_out;
      if (zr == Z_STREAM_END) {
        src->z_member_done = 1; /* CRC32 and length verified by zlib */
      } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
        const char *m = src->z.msg ? src->z.msg : "corrupt data";
        snprintf(src->why, WHY_CAP, "gzip %s at compressed byte %llu",
                 strstr(m, "data check")     ? "CRC32 checksum mismatch"
                 : strstr(m, "length check") ? "length check mismatch"
                                             : m,
                 (unsigned long long)in_consumed(src));
        DEC_FAIL(1);
      }
    } else {
      size_t dst = cap - made, srcn = avail;
      size_t r = LZ4F_decompress(src->lz, out + made, &dst, src->in + src->in_pos, &srcn, NULL);
      src->in_pos += srcn;
      made += dst;
      if (LZ4F_isError(r)) {
        const char *m = LZ4F_getErrorName(r);
        snprintf(src->why, WHY_CAP, "LZ4 %s at compressed byte %llu",
                 strstr(m, "hecksum") ? "checksum mismatch" : m,
                 (unsigned long long)in_consumed(src));
        DEC_FAIL(1);
      }
      src->lz_hint = r;
    }
  }
#undef DEC_FAIL
  return (ssize_t)made;
}

static la_ssize_t src_read(struct archive *a, void *cd, const void **out) {
  source *src = cd;
  src->cur_buf ^= 1;
  unsigned char *buf = src->bufs[src->cur_buf];
  ssize_t n;
  if (src->codec != CODEC_NONE) {
    n = dec_read(src, buf, src->cur);
    if (n < 0) {
      archive_set_error(a, EIO, "%s", src->why);
      return -1;
    }
  } else {
    for (;;) {
      n = read(src->fd, buf, src->cur);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        archive_set_error(a, errno, "read failed: %s", strerror(errno));
        return -1;
      }
      break;
    }
    src->bytes_read += (uint64_t)n;
  }
  src->off[src->cur_buf] = src->pos;
  src->len[src->cur_buf] = (size_t)n;
  src->pos += (uint64_t)n;
  if (src->cur < src->max) src->cur = src->cur * 2 < src->max ? src->cur * 2 : src->max;
  *out = buf;
  return n;
}

/* libarchive asks to skip `request` bytes past what it has buffered. */
static la_int64_t src_skip(struct archive *a, void *cd, la_int64_t request) {
  source *src = cd;
  (void)a;
  if (src->codec != CODEC_NONE) return 0; /* decoded or filtered: libarchive reads instead */
  off_t before = lseek(src->fd, 0, SEEK_CUR);
  if (before < 0 || lseek(src->fd, (off_t)request, SEEK_CUR) < 0)
    return 0; /* libarchive reads instead */
  src->pos += (uint64_t)request;
  src->cur = src->min;
  return request;
}

static la_int64_t src_seek(struct archive *a, void *cd, la_int64_t offset, int whence) {
  source *src = cd;
  if (src->codec != CODEC_NONE) {
    archive_set_error(a, ESPIPE, "compressed shard: no seeking");
    return ARCHIVE_FATAL;
  }
  off_t r = lseek(src->fd, (off_t)offset, whence);
  if (r < 0) {
    archive_set_error(a, errno, "seek failed: %s", strerror(errno));
    return ARCHIVE_FATAL;
  }
  src->pos = (uint64_t)r;
  return r;
}

/* The 512 bytes of the tar stream at `off`, from the last two buffers (or, for a
 * plain tar, the file). Returns 0 when they cannot be had (zstd, xz, ...). */
static int raw_block(scanner *s, uint64_t off, unsigned char out[512]) {
  source *src = s->src;
  size_t got = 0;
  while (got < 512) {
    uint64_t want = off + got;
    int found = 0;
    for (int b = 0; b < 2 && !found; b++) {
      if (!src->bufs[b]) continue;
      if (want >= src->off[b] && want < src->off[b] + src->len[b]) {
        size_t at = (size_t)(want - src->off[b]);
        size_t k = src->len[b] - at < 512 - got ? src->len[b] - at : 512 - got;
        memcpy(out + got, src->bufs[b] + at, k);
        got += k;
        found = 1;
      }
    }
    if (!found) break;
  }
  if (got == 512) return 1;
  if (src->codec != CODEC_NONE) return 0;
  return pread(src->fd, out, 512, (off_t)off) == 512;
}

/* GNU tar's rule for a numeric field: optional leading spaces, octal digits, then
 * only spaces or NULs; or base-256 (first byte 0x80 or 0xff). */
static int octal_field_ok(const unsigned char *f, size_t n) {
  if (f[0] == 0x80 || f[0] == 0xff) return 1;
  size_t i = 0;
  while (i < n && f[i] == ' ') i++;
  size_t d = i;
  while (i < n && f[i] >= '0' && f[i] <= '7') i++;
  if (i == d) return 0;
  while (i < n && (f[i] == ' ' || f[i] == '\0')) i++;
  return i == n;
}

/*
 * Read sizes. In a plain tar, what is read past a header before the next skip
 * can seek is wasted, so reads start small after every skip (16 KiB: a header,
 * a KEY.json and the next header fit) and double while the data keeps being
 * consumed, up to 1 MiB: a latent corpus reads ~1% of its bytes, a
 * metadata-only one streams in large reads. A compressed shard is decompressed
 * through anyway, so it reads 4 MiB at a time. A block size set by the caller
 * fixes the read size.
 */
#define READ_MIN (16u << 10)
#define READ_MAX_PLAIN (1u << 20)
#define READ_COMPRESSED (4u << 20)

static int detect_codec(int fd) {
  unsigned char m[6] = {0};
  ssize_t n = pread(fd, m, sizeof m, 0);
  if (n < 4) return CODEC_NONE;
  static const unsigned char gz[] = {0x1f, 0x8b}, lz4[] = {0x04, 0x22, 0x4d, 0x18},
                             zst[] = {0x28, 0xb5, 0x2f, 0xfd}, bz2[] = {'B', 'Z', 'h'},
                             xz[] = {0xfd, '7', 'z', 'X', 'Z', 0x00},
                             lz4legacy[] = {0x02, 0x21, 0x4c, 0x18};
  if (!memcmp(m, gz, 2)) return CODEC_GZIP;
  if (!memcmp(m, lz4, 4)) return CODEC_LZ4;
  if (!memcmp(m, zst, 4) || !memcmp(m, bz2, 3) || (n >= 6 && !memcmp(m, xz, 6)) ||
      !memcmp(m, lz4legacy, 4))
    return CODEC_OTHER;
  return CODEC_NONE;
}

/* Every sample of the shard becomes a rejected entry (its data failed a checksum). */
static int reject_all_samples(scanner *s, const char *why) {
  al_index *x = s->idx;
  char reason[WHY_CAP + 64];
  snprintf(reason, sizeof reason, "shard failed its integrity check (%s)", why);
  for (size_t i = 0; i < x->n_samples; i++) {
    const index_sample_rec *r = &x->samples[i];
    const char *key = x->keys + r->key;
    char name[4096];
    snprintf(name, sizeof name, "%s.%s", key,
             r->n_members
                 ? strtab_get(&x->exts, (uint32_t)(x->members[r->member0].off_ext & 0x7FFFu))
                 : "");
    int rc = reject(s, name, s->res->first_hdr[i], key, reason);
    if (rc) return rc;
  }
  index_drop_samples(x);
  return AL_OK;
}

static int open_and_walk(scanner *s, int fd, size_t block_size, char *why) {
  source src;
  memset(&src, 0, sizeof src);
  src.fd = fd;
  src.codec = detect_codec(fd);
  if (block_size) {
    src.min = src.max = block_size;
  } else if (src.codec != CODEC_NONE) {
    src.min = src.max = READ_COMPRESSED;
  } else {
    src.min = READ_MIN;
    src.max = READ_MAX_PLAIN;
  }
  src.cur = src.min;
  src.bufs[0] = malloc(src.max);
  src.bufs[1] = malloc(src.max);
  int dec_ok = 1, raw_bad = 0;
  if (src.codec == CODEC_GZIP) {
    src.in = malloc(IN_CAP);
    dec_ok = inflateInit2(&src.z, 15 + 16) == Z_OK;
    src.z_init = dec_ok;
  } else if (src.codec == CODEC_LZ4) {
    src.in = malloc(IN_CAP);
    dec_ok = !LZ4F_isError(LZ4F_createDecompressionContext(&src.lz, LZ4F_VERSION));
    if (!dec_ok) src.lz = NULL;
  } else if (src.codec == CODEC_OTHER) {
    struct archive_entry *re = NULL;
    dec_ok = (src.raw = archive_read_new()) != NULL;
    if (dec_ok) {
      archive_read_support_filter_all(src.raw);
      archive_read_support_format_raw(src.raw);
      if (archive_read_open_fd(src.raw, fd, IN_CAP) != ARCHIVE_OK ||
          archive_read_next_header(src.raw, &re) != ARCHIVE_OK) {
        snprintf(why, WHY_CAP, "not a readable compressed stream: %s",
                 archive_error_string(src.raw) ? archive_error_string(src.raw) : "unknown");
        raw_bad = 1;
      }
    }
  }
  s->a = archive_read_new();
  s->src = &src;
  int rc;
  if (!s->a || !src.bufs[0] || !src.bufs[1] || !dec_ok ||
      ((src.codec == CODEC_GZIP || src.codec == CODEC_LZ4) && !src.in)) {
    rc = al_set_error(AL_ENOMEM, "out of memory (libarchive, %zu-byte block)", src.max);
    goto done;
  }
  if (raw_bad) {
    s->res->readable = 0;
    rc = reject(s, "", 0, "", why);
    goto done;
  }
  archive_read_support_filter_all(s->a);
  archive_read_support_format_tar(s->a);
  archive_read_set_callback_data(s->a, &src);
  archive_read_set_read_callback(s->a, src_read);
  archive_read_set_skip_callback(s->a, src_skip);
  archive_read_set_seek_callback(s->a, src_seek);
  s->res->readable = 1;
  if (archive_read_open1(s->a) != ARCHIVE_OK) {
    snprintf(why, WHY_CAP, "not a readable tar archive: %s", archive_error_string(s->a));
    s->res->readable = 0;
    rc = reject(s, "", 0, "", why);
  } else {
    rc = walk(s);
  }
  /* The tar reader stops after the end-of-archive blocks: decode the rest, so that
   * the gzip CRC32 / LZ4 content checksum at the very end is checked too. */
  if (!rc && !src.failed && src.codec != CODEC_NONE) {
    ssize_t n;
    while ((n = dec_read(&src, src.bufs[0], src.max)) > 0) {
    }
    if (n < 0 && s->res->readable) {
      char w2[WHY_CAP + 64];
      snprintf(w2, sizeof w2, "after the tar end-of-archive marker: %s", src.why);
      rc = reject(s, "", src.pos, "", w2);
    }
  }
  if (!rc && src.failed == 1 && s->idx->n_samples) rc = reject_all_samples(s, src.why);
done:
  archive_read_free(s->a);
  s->a = NULL;
  s->src = NULL;
  if (src.z_init) inflateEnd(&src.z);
  if (src.lz) LZ4F_freeDecompressionContext(src.lz);
  if (src.raw) archive_read_free(src.raw);
  free(src.in);
  free(src.bufs[0]);
  free(src.bufs[1]);
  s->res->bytes_read = src.bytes_read;
  return rc;
}

int scan_shard(const char *path, const meta_fields *fields, size_t block_size, uint64_t max_member,
               uint32_t vae_t, uint32_t vae_s, scan_progress *progress, scan_result *out) {
  memset(out, 0, sizeof *out);
  scanner s;
  memset(&s, 0, sizeof s);
  s.path = path;
  s.max_member = max_member;
  s.fields = fields;
  s.vae_t = vae_t;
  s.vae_s = vae_s;
  s.res = out;
  s.progress = progress;
  s.p.json = -1;
  int rc = al_index_new(&out->idx);
  if (rc) return rc;
  s.idx = out->idx;
  /* stat first (never blocks), then open only a regular file, through afile_open_input
   * (O_NONBLOCK + fstat): a FIFO, device or directory given as a shard is rejected at
   * once instead of blocking in open. */
  struct stat st;
  int have_st = stat(path, &st) == 0;
  int stat_errno = errno;
  int fd = -1;
  char open_why[WHY_CAP] = "";
  if (have_st && S_ISREG(st.st_mode)) {
    if (afile_open_input(path, "shard", &fd) != AL_OK) {
      const char *m = al_last_error();
      size_t pl = strlen(path);
      if (!strncmp(m, path, pl) && m[pl] == ':') m += pl + 2;
      snprintf(open_why, sizeof open_why, "%s", m);
      al_clear_error();
    } else if (fstat(fd, &st) != 0) {
      have_st = 0;
      stat_errno = errno;
    }
  }
  rc = index_add_shard_full(s.idx, path, have_st ? (uint64_t)st.st_size : 0,
                            have_st ? (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec
                                    : 0,
                            0, "unknown", NULL);
  if (!rc) rc = strtab_intern(&s.idx->exts, "json", 4, AL_EXT_MAX, &s.json_id);
  if (!rc) rc = strtab_intern(&s.idx->exts, "json.lz4", 8, AL_EXT_MAX, &s.jsonlz4_id);
  char why[WHY_CAP];
  if (!rc && !have_st) {
    snprintf(why, sizeof why, "cannot open: %s", strerror(stat_errno));
    rc = reject(&s, "", 0, "", why);
  } else if (!rc && !S_ISREG(st.st_mode)) {
    snprintf(why, sizeof why, "is %s, not a regular file", afile_kind_name(st.st_mode));
    rc = reject(&s, "", 0, "", why);
  } else if (!rc && fd < 0) {
    rc = reject(&s, "", 0, "", open_why);
  } else if (!rc && st.st_size == 0) {
    rc = reject(&s, "", 0, "", "empty file (0 bytes): not a tar archive");
  } else if (!rc) {
    s.file_size = (uint64_t)st.st_size;
    rc = open_and_walk(&s, fd, block_size, why);
  }
  if (fd >= 0) close(fd);
  if (out->readable) out->bytes = s.file_size;
  if (progress) {
    atomic_fetch_add(&progress->samples, s.unreported);
    atomic_fetch_add(&progress->bytes, s.file_size);
  }
  free(s.p.key);
  free(s.p.m);
  free(s.buf);
  free(s.dec);
  free(s.hbuf);
  free(s.lzin);
  if (s.dctx) LZ4F_freeDecompressionContext(s.dctx);
  return rc;
}

void scan_result_free(scan_result *r) {
  if (!r) return;
  al_index_free(r->idx);
  free(r->first_hdr);
  memset(r, 0, sizeof *r);
}
