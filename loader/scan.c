/*
 * One shard: walk the tar with libarchive, group members into samples by key,
 * read KEY.json (or KEY.json.lz4) and the headers of typed members, and skip
 * every other member's data. The bytes come through shard_source.c (plain
 * reads that seek over skipped data, or a decoded compressed stream).
 *
 * Offsets: after archive_read_next_header the tar reader has consumed the
 * header blocks (ustar header, pax 'x' / GNU 'L' extensions) and nothing of
 * the data, so archive_filter_bytes(a, 0) is the data offset in the
 * uncompressed stream; archive_read_header_position is where the first header
 * block of the member began. For plain tar, the uncompressed stream is the file.
 */
#include "loader/scan_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "decode/al_decode.h"
#include "loader/al_members.h"
#include "loader/hash_internal.h"
#include "loader/lz4_member_internal.h"
#include "loader/shard_source_internal.h"
#include "loader/tensor_header_internal.h"

#define WHY_CAP SHARD_SOURCE_WHY_CAP
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
  /* The first raw media member (KEY.mp4, KEY.jpg, ...; al_decode_kind_of): -1 if none. Probed
   * when the sample ends if KEY.json lacks what it gives and no latent is the sample's truth
   * (media_needed); a compressed shard's is read into the scanner's mbuf when its header is
   * read (media_len bytes; media_held). */
  int media;
  int media_held;
  size_t media_len;
  int media_ok;
  al_media_info media_info;
  char media_why[WHY_CAP];
} pending;

#define EXT_OVER UINT32_MAX /* pmember.ext of a member whose extension did not fit */

typedef struct scanner {
  const char *path;
  shard_source *src;   /* the tar stream while walking */
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
  uint8_t *lzin; /* a typed .lz4 member's stored bytes, a block at a time */
  uint8_t *mbuf; /* a raw media member of a compressed shard, read whole for its probe */
  size_t mbuf_cap;
  size_t lz_hint; /* LZ4F's hint while decoding a typed .lz4 member: 0 once the frame ended */
  uint32_t vae_t, vae_s;
  uint32_t json_id, jsonlz4_id;
  uint64_t file_size;
  int seekable;
  scan_progress *progress;
  uint64_t unreported;
  char namebuf[4096];
} scanner;

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

/* A KEY.json with a duration or an fps but no frame-count field the index knows may be a
 * video whose frame field has another name: kept, and listed as a warning. */
static int frames_warning(scanner *s, size_t sample, const char *key) {
  const pending *p = &s->p;
  const meta_record *m = &p->meta;
  if (m->frames_from == META_FRAMES_FIELD ||
      (m->frames_from != META_FRAMES_LATENT && !(m->fps > 0 || m->has_duration)))
    return AL_OK;
  char why[WHY_CAP];
  if (m->frames_from == META_FRAMES_LATENT) {
    char implied[96];
    if (m->json_from == META_FRAMES_DURATION)
      snprintf(implied, sizeof implied, "%u (%s x %s)", m->json_frames, s->fields->duration,
               s->fields->fps);
    else
      snprintf(implied, sizeof implied, "1 (an image)");
    snprintf(why, sizeof why,
             "no frame-count field ('%s', num_frames, nframes, nb_frames, frame_count, length): "
             "indexed as %u frames from the latent grid (T = %u, VAE time stride %u) where the "
             "JSON alone gives %s (map the field with --fields frames=NAME)",
             s->fields->frames, m->frames, 1 + (m->frames - 1) / s->vae_t, s->vae_t, implied);
  } else if (m->frames_from == META_FRAMES_DURATION)
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

/* A JSON without a frame-count field whose implied frames (1, or duration x fps) disagree with
 * the latent's T: the frames come from the grid, (T - 1) x stride + 1, and the sample is warned
 * about (frames_warning). */
static void latent_frames(scanner *s, size_t li, uint64_t T, const char *grid) {
  meta_record *m = &s->p.meta;
  uint32_t st = s->vae_t;
  if (T - 1 > (AL_META_MAX_FRAMES - 1) / st) {
    mark_bad(s, li, "latent grid %s is beyond the limit of %u frames", grid, AL_META_MAX_FRAMES);
    return;
  }
  uint32_t frames = (uint32_t)((T - 1) * st + 1);
  if (meta_tokens(m->width, m->height, frames) > UINT32_MAX) {
    mark_bad(s, li, "latent grid %s is over 2^32-1 tokens", grid);
    return;
  }
  m->json_from = m->frames_from;
  m->json_frames = m->frames;
  m->frames = frames;
  m->frames_from = META_FRAMES_LATENT;
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
        al_member_is_latent(strtab_get(&s->idx->exts, p->m[i].ext))) {
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
  if (m->frames_from != META_FRAMES_FIELD && 1 + (uint64_t)(m->frames - 1) / st != T)
    latent_frames(s, li, T, grid);
  if (s->p.bad) return;
  uint64_t jt = 1 + (uint64_t)(m->frames - 1) / st, jh = m->height / ss, jw = m->width / ss;
  if (jt != T || jh != H || jw != W)
    mark_bad(s, li,
             "latent grid %s (T, H, W = %llu, %llu, %llu) does not match the metadata: %ux%u x %u "
             "frames gives T, H, W = %llu, %llu, %llu under VAE stride %u (time), %u (space)",
             grid, (unsigned long long)T, (unsigned long long)H, (unsigned long long)W, m->width,
             m->height, m->frames, (unsigned long long)jt, (unsigned long long)jh,
             (unsigned long long)jw, st, ss);
}

/* The probe's reads of a member of a plain shard: ranged reads of the shard's bytes. */
typedef struct media_read {
  shard_bytes *sb;
  uint64_t off;
} media_read;

static int64_t media_read_at(void *ctx, uint64_t offset, void *buf, size_t n) {
  media_read *r = ctx;
  size_t got = 0;
  if (shard_bytes_read(r->sb, r->off + offset, buf, n, &got) != AL_OK) return -1;
  return (int64_t)got;
}

/* Whether the pending sample has a latent member (al_member_is_latent: typed, or raw bytes
 * named as one, as synth's KEY.latent). */
static int has_latent(scanner *s) {
  for (size_t i = 0; i < s->p.n; i++)
    if (s->p.m[i].ext != EXT_OVER && al_member_is_latent(strtab_get(&s->idx->exts, s->p.m[i].ext)))
      return 1;
  return 0;
}

/* Whether the pending sample's raw media member is to be probed: it has one and no latent, and
 * KEY.json is absent or lacks the size or the frame count (while members still come, a KEY.json
 * not read yet counts as absent). */
static int media_needed(scanner *s) {
  const pending *p = &s->p;
  if (p->media < 0 || has_latent(s)) return 0;
  if (p->json < 0) return 1;
  if (!p->have_meta) return 0; /* an unreadable KEY.json rejects the sample anyway */
  return p->meta.no_dims || p->meta.frames_from != META_FRAMES_FIELD;
}

/* Probes raw media member mi (al_decode_probe: its container header): by ranged reads of a
 * plain shard, from the bytes held of a compressed one. The result (or why it failed) goes to
 * the pending sample. AL_OK or AL_ENOMEM. */
static int media_probe(scanner *s, size_t mi) {
  pending *p = &s->p;
  p->media_ok = 0;
  p->media_why[0] = '\0';
  const char *ext = strtab_get(&s->idx->exts, p->m[mi].ext);
  char where[WHY_CAP];
  snprintf(where, sizeof where, "%s", member_name(s, mi));
  al_decode_input in = AL_DECODE_INPUT_INIT;
  in.size = p->m[mi].size;
  in.ext = ext;
  in.where = where;
  media_read r = {s->src->sb, p->m[mi].off};
  if (s->seekable) {
    in.read = media_read_at;
    in.read_ctx = &r;
  } else if (p->media_held) {
    in.data = s->mbuf;
    in.size = p->media_len;
  } else {
    snprintf(p->media_why, sizeof p->media_why,
             "%llu bytes in a compressed shard: above the %llu-byte member limit, not read to "
             "probe it",
             (unsigned long long)p->m[mi].size, (unsigned long long)s->max_member);
    return AL_OK;
  }
  p->media_info = (al_media_info)AL_MEDIA_INFO_INIT;
  int rc = al_decode_probe(&in, &p->media_info);
  if (rc == AL_ENOMEM) return rc;
  if (rc == AL_OK) {
    p->media_ok = 1;
  } else {
    /* The message names the member already: keep what follows it. */
    const char *msg = al_last_error();
    size_t wl = strlen(where);
    if (!strncmp(msg, where, wl) && !strncmp(msg + wl, ": ", 2)) msg += wl + 2;
    snprintf(p->media_why, sizeof p->media_why, "%s", msg);
    al_clear_error();
  }
  return AL_OK;
}

/* A compressed shard's raw media member, read whole while the archive is at it (its probe
 * comes when the sample ends). Returns as member(). */
static int media_hold(scanner *s, size_t mi, uint64_t size) {
  pending *p = &s->p;
  if (size > s->max_member) return AL_OK; /* media_probe says why */
  int rc = grow_array((void **)&s->mbuf, &s->mbuf_cap, (size_t)size + 1, 1, "a media member");
  if (rc) return rc;
  size_t n = 0;
  while (n < size) {
    la_ssize_t k = archive_read_data(s->a, s->mbuf + n, (size_t)size - n);
    if (k < 0) {
      mark_bad(s, mi, "reading data: %s", archive_error_string(s->a));
      return 1;
    }
    if (k == 0) break;
    n += (size_t)k;
  }
  if (n != size) {
    mark_bad(s, mi, "data ends after %zu of %llu bytes (truncated shard)", n,
             (unsigned long long)size);
    return 1;
  }
  p->media_held = 1;
  p->media_len = n;
  return AL_OK;
}

/* A sample with a raw media member: what its header says fills what KEY.json lacks (size,
 * frame count, fps; a sample without KEY.json takes all of them from it) and must agree with
 * what KEY.json gives; a member that cannot be decoded rejects the sample with the reason. */
static void media_meta(scanner *s, const char *key) {
  pending *p = &s->p;
  size_t mi = (size_t)p->media;
  const al_media_info *v = &p->media_info;
  meta_record *m = &p->meta;
  if (!p->media_ok) {
    mark_bad(s, mi, "cannot be decoded: %s", p->media_why);
    return;
  }
  if (!v->decodable) {
    mark_bad(s, mi, "cannot be decoded: codec %s: no decoder in this build", v->codec);
    return;
  }
  if (v->vfr) {
    mark_bad(s, mi,
             "cannot be decoded: variable frame rate (%u frames, %s, timestamps not "
             "evenly spaced)",
             v->frames, v->codec);
    return;
  }
  if (v->width > AL_META_MAX_SIDE || v->height > AL_META_MAX_SIDE ||
      v->frames > AL_META_MAX_FRAMES) {
    mark_bad(s, mi, "%ux%u x %u frames: beyond the limits (%u pixels a side, %u frames)", v->width,
             v->height, v->frames, AL_META_MAX_SIDE, AL_META_MAX_FRAMES);
    return;
  }
  if (p->json < 0) { /* no KEY.json: all from the header */
    memset(m, 0, sizeof *m);
    m->no_dims = 1;
    m->frames_from = META_FRAMES_IMAGE;
    p->have_meta = 1;
  }
  if (m->no_dims) {
    m->width = v->width;
    m->height = v->height;
    m->no_dims = 0;
  } else if (m->width != v->width || m->height != v->height) {
    if (v->rotation % 180 == 90 && m->width == v->coded_width && m->height == v->coded_height)
      mark_bad(s, mi,
               "%s.json gives %ux%u, the coded size of a stream displayed rotated by %u "
               "degrees as %ux%u (give the displayed size, or none)",
               key, m->width, m->height, v->rotation, v->width, v->height);
    else
      mark_bad(s, mi, "%s.json gives %ux%u, the stream's %s frames are %ux%u", key, m->width,
               m->height, v->codec, v->width, v->height);
    return;
  }
  if (m->frames_from != META_FRAMES_FIELD) {
    m->frames = v->frames;
    m->frames_from = META_FRAMES_FIELD; /* known from the stream: no warning */
  } else if (m->frames > v->frames) {
    mark_bad(s, mi, "%s.json gives %u frames, the stream holds %u", key, m->frames, v->frames);
    return;
  }
  if (!m->has_fps || !(m->fps > 0)) m->fps = (float)v->fps;
  if (meta_tokens(m->width, m->height, m->frames) > UINT32_MAX)
    mark_bad(s, mi, "%ux%u x %u frames: too many pixels", m->width, m->height, m->frames);
}

/* Ends the pending sample: adds it to the index or rejects it. */
static int flush_pending(scanner *s) {
  pending *p = &s->p;
  if (!p->n) return AL_OK;
  int rc = AL_OK;
  char key[4096];
  snprintf(key, sizeof key, "%.*s", (int)p->key_len, p->key);
  /* A raw media member is probed when it is to give what KEY.json lacks. */
  int probe = media_needed(s);
  if (!p->bad && p->json < 0 && !probe)
    mark_bad(s, 0, "no metadata member (%s.json or %s.json.lz4)", key, key);
  if (!p->bad && p->json >= 0 && !p->have_meta) mark_bad(s, (size_t)p->json, "metadata not read");
  if (!p->bad && probe) {
    rc = media_probe(s, (size_t)p->media);
    if (rc < 0) return rc;
    media_meta(s, key);
  }
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
    if (!rc && probe && p->media_ok)
      rc = index_add_member_codec(s->idx, (uint32_t)p->media, p->media_info.codec);
    if (!rc) rc = frames_warning(s, n, key);
    if (!rc) s->res->first_hdr[n] = p->m[0].hdr;
    if (r != recs) free(r);
  }
  p->n = 0;
  p->key_len = 0;
  p->json = -1;
  p->bad = 0;
  p->have_meta = 0;
  p->media = -1;
  p->media_held = 0;
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
#define RUN_STOP 2 /* the sample is marked bad: stop decoding; the archive goes on */

/* A typed KEY.ext.lz4 member being decoded: where its stored and decoded bytes stand. */
typedef struct lz4_run {
  uint64_t size;         /* stored bytes */
  uint64_t left;         /* stored bytes not yet read */
  size_t in_len, in_pos; /* s->lzin */
  uint64_t total;        /* decoded bytes */
  size_t have;           /* decoded bytes kept in s->hbuf */
  uint64_t content;      /* the frame header's content size, 0 = not given */
  int header;            /* frame header read */
  uint64_t consumed;     /* stored bytes given to LZ4F */
  size_t want;           /* decoded bytes the header parser wants kept */
} lz4_run;

/* The member's next stored block into s->lzin. AL_OK, RUN_STOP, or 1 when the archive
 * became unusable (sample marked). */
static int lz4_run_refill(scanner *s, size_t mi, lz4_run *r) {
  if (r->left == 0) {
    mark_bad(s, mi, "LZ4 frame truncated after %llu bytes", (unsigned long long)r->size);
    return RUN_STOP;
  }
  size_t n = r->left < LZ4_IN_BLOCK ? (size_t)r->left : LZ4_IN_BLOCK;
  size_t got = 0;
  while (got < n) {
    la_ssize_t k = archive_read_data(s->a, s->lzin + got, n - got);
    if (k < 0) {
      mark_bad(s, mi, "reading data: %s", archive_error_string(s->a));
      return 1;
    }
    if (k == 0) {
      mark_bad(s, mi, "data ends after %llu bytes (truncated shard)",
               (unsigned long long)(r->size - r->left + got));
      return 1;
    }
    got += (size_t)k;
  }
  r->left -= n;
  r->in_len = n;
  r->in_pos = 0;
  return AL_OK;
}

/* The frame header: LZ4F_getFrameInfo wants all of it; it is at most 19 bytes, the first
 * block read holds it unless the member is that short. AL_OK or RUN_STOP. */
static int lz4_run_frame_header(scanner *s, size_t mi, lz4_run *r) {
  LZ4F_frameInfo_t info;
  size_t hn = r->in_len - r->in_pos;
  size_t e = LZ4F_getFrameInfo(s->dctx, &info, s->lzin + r->in_pos, &hn);
  if (LZ4F_isError(e)) {
    mark_bad(s, mi, "bad LZ4 frame at member byte 0: %s", LZ4F_getErrorName(e));
    return RUN_STOP;
  }
  r->in_pos += hn;
  r->consumed += hn;
  s->lz_hint = e;
  r->header = 1;
  r->content = info.contentSize;
  if (r->content > 0 && r->want > r->content) r->want = (size_t)r->content;
  return AL_OK;
}

/* One LZ4F_decompress call: into s->hbuf while fewer than the bytes to keep are there, else
 * into a discarded buffer (decoded only to learn the frame's size). AL_OK, RUN_STOP or a
 * negative status. */
static int lz4_run_step(scanner *s, size_t mi, lz4_run *r) {
  uint8_t discard[4096];
  size_t cap_keep = r->content ? r->want : THEADER_MAX_HEADER_BYTES;
  uint8_t *dst;
  size_t dn, sn = r->in_len - r->in_pos;
  if (r->have < cap_keep) {
    int rc = grow_array((void **)&s->hbuf, &s->hbuf_cap, cap_keep, 1, "a typed member's header");
    if (rc) return rc;
    dst = s->hbuf + r->have;
    dn = cap_keep - r->have;
  } else {
    dst = discard;
    dn = sizeof discard;
  }
  size_t h = LZ4F_decompress(s->dctx, dst, &dn, s->lzin + r->in_pos, &sn, NULL);
  if (LZ4F_isError(h)) {
    mark_bad(s, mi, "bad LZ4 frame at member byte %llu: %s", (unsigned long long)r->consumed,
             LZ4F_getErrorName(h));
    return RUN_STOP;
  }
  r->in_pos += sn;
  r->consumed += sn;
  r->total += dn;
  if (dst != discard) r->have += dn;
  s->lz_hint = h;
  if (r->content && r->total > r->content) {
    mark_bad(s, mi, "LZ4 content size mismatch: decodes past the %llu bytes its header says",
             (unsigned long long)r->content);
    return RUN_STOP;
  }
  return AL_OK;
}

/* Decodes until `want` bytes are kept (content size known) or the frame ends; then, at the
 * frame's end, checks its sizes. AL_OK, RUN_STOP, 1 (archive unusable) or a negative status. */
static int lz4_run_decode(scanner *s, size_t mi, lz4_run *r) {
  while (s->lz_hint != 0 && (r->content == 0 || r->have < r->want)) {
    int rc = r->in_pos == r->in_len ? lz4_run_refill(s, mi, r) : AL_OK;
    if (!rc) rc = r->header ? lz4_run_step(s, mi, r) : lz4_run_frame_header(s, mi, r);
    if (rc) return rc;
  }
  if (s->lz_hint != 0) return AL_OK;
  /* The whole frame is decoded. */
  if (r->content && r->total != r->content) {
    mark_bad(s, mi, "LZ4 content size mismatch: decoded %llu bytes, header says %llu",
             (unsigned long long)r->total, (unsigned long long)r->content);
    return RUN_STOP;
  }
  if (r->consumed != r->size) {
    mark_bad(s, mi, "%llu bytes after the end of the LZ4 frame",
             (unsigned long long)(r->size - r->consumed));
    return RUN_STOP;
  }
  r->content = r->total;
  return AL_OK;
}

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
  s->lz_hint = 1; /* LZ4F: 0 once the frame is complete */
  lz4_run r = {.size = size, .left = size, .want = TYPED_FIRST_READ};
  for (;;) {
    rc = lz4_run_decode(s, mi, &r);
    if (rc) return rc == RUN_STOP ? AL_OK : rc;
    size_t need = 0;
    if (typed_parse(s, mi, kind, r.have, r.content, &need) != AL_ERANGE) return AL_OK;
    if (s->lz_hint == 0 || need <= r.have) { /* cannot happen: the parser had all it could get */
      mark_bad(s, mi, "typed header needs %zu bytes, %zu decoded", need, r.have);
      return AL_OK;
    }
    r.want = need;
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

/* A member that is part of no sample (no file name, hidden, no extension): recorded, so that
 * nothing vanishes. */
static int reject_loose(scanner *s, const char *name, const char *base, uint64_t hdr) {
  int rc = flush_pending(s);
  if (!rc)
    rc = reject(s, name, hdr, "",
                !*base           ? "member name has no file name"
                : base[0] == '.' ? "hidden member (name starts with '.'), not a sample"
                                 : "member name has no extension (KEY.ext), not a sample");
  return rc;
}

/* Appends member KEY.ext to the pending sample (ending the previous sample at a new key),
 * its extension interned (EXT_OVER past AL_EXT_MAX distinct ones); a repeated extension
 * marks the sample. Its position in *mi. */
static int add_member(scanner *s, const char *name, size_t key_len, const char *ext, uint64_t hdr,
                      uint64_t off, uint64_t size, size_t *mi) {
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
  *mi = p->n++;
  p->m[*mi].ext = ext_id;
  p->m[*mi].hdr = hdr;
  p->m[*mi].off = off;
  p->m[*mi].size = size;
  p->m[*mi].typed = 0;
  return AL_OK;
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

/* The ustar header's size field must be what GNU tar reads as a number: libarchive reads
 * garbage there as 0. */
static void check_size_field(scanner *s, struct archive_entry *e, size_t mi) {
  uint64_t off = s->p.m[mi].off;
  unsigned char blk[512];
  if (off < 512 || archive_entry_sparse_count(e) != 0 ||
      !shard_source_block(s->src, off - 512, blk) || octal_field_ok(blk + 124, 12))
    return;
  char shown[64];
  size_t k = 0;
  for (int i = 0; i < 12 && k + 5 < sizeof shown; i++)
    k += (size_t)snprintf(shown + k, sizeof shown - k,
                          blk[124 + i] >= 0x20 && blk[124 + i] < 0x7f ? "%c" : "\\x%02x",
                          blk[124 + i]);
  mark_bad(s, mi,
           "size field of the ustar header is not an octal number ('%s'): libarchive reads it "
           "as %llu, GNU tar refuses the header",
           shown, (unsigned long long)s->p.m[mi].size);
}

/* A GNU sparse header (typeflag 'S') stores the data segments of its map, not the file: with
 * an empty map libarchive reports no sparse entries and the stored bytes would pass for the
 * content (GNU tar and Python's tarfile give the real size's bytes). */
static void check_sparse_flag(scanner *s, struct archive_entry *e, size_t mi) {
  uint64_t off = s->p.m[mi].off;
  unsigned char blk[512];
  if (off < 512 || archive_entry_sparse_count(e) != 0 ||
      !shard_source_block(s->src, off - 512, blk) || blk[156] != 'S')
    return;
  mark_bad(s, mi,
           "GNU sparse member (typeflag 'S') without a sparse map: its stored bytes are "
           "not its content");
}

/* The limits and the header checks of member `mi` (key of key_len bytes, extension ext), in
 * the order their reasons are reported. */
static void check_member(scanner *s, struct archive_entry *e, size_t mi, size_t key_len,
                         const char *ext) {
  const pending *p = &s->p;
  uint64_t off = p->m[mi].off, size = p->m[mi].size;
  size_t ext_len = strlen(ext);
  if (size > s->max_member)
    mark_bad(s, mi, "member of %llu bytes exceeds the %llu-byte cap (max_member_bytes)",
             (unsigned long long)size, (unsigned long long)s->max_member);
  if (key_len > AL_INDEX_KEY_MAX)
    mark_bad(s, mi, "key of %zu bytes exceeds the %u-byte limit (AL_INDEX_KEY_MAX)", key_len,
             AL_INDEX_KEY_MAX);
  if (ext_len > AL_INDEX_EXT_MAX)
    mark_bad(s, mi, "extension of %zu bytes exceeds the %u-byte limit (AL_INDEX_EXT_MAX)", ext_len,
             AL_INDEX_EXT_MAX);
  if (p->m[mi].ext == EXT_OVER)
    mark_bad(s, mi,
             "extension '%s' does not fit: a shard holds at most %u distinct extensions (this "
             "sample is rejected, the shard's other samples are indexed)",
             ext, AL_EXT_MAX);
  check_size_field(s, e, mi);
  check_sparse_flag(s, e, mi);
  if (p->n > AL_MEMBERS_MAX) mark_bad(s, mi, "more than %u members", AL_MEMBERS_MAX);
  if (off > AL_OFFSET_MAX) mark_bad(s, mi, "data offset %llu beyond 2^48", (unsigned long long)off);
  if (archive_entry_sparse_count(e) > 0)
    mark_bad(s, mi, "sparse member: data offsets would be wrong");
  if (s->seekable && off + size > s->file_size)
    mark_bad(s, mi,
             "member data (%llu bytes at byte %llu) extends past the end of the file (%llu bytes): truncated shard",
             (unsigned long long)size, (unsigned long long)off, (unsigned long long)s->file_size);
}

/* Member `mi` is KEY.json or KEY.json.lz4: read (and decoded), parsed into the pending
 * sample's metadata. Returns as member(). */
static int read_meta(scanner *s, size_t mi, const char *name, size_t key_len) {
  pending *p = &s->p;
  char why[WHY_CAP];
  if (p->json >= 0) {
    mark_bad(s, mi, "both %.*s.json and %.*s.json.lz4", (int)key_len, name, (int)key_len, name);
    return AL_OK;
  }
  p->json = (int)mi;
  size_t n = 0;
  int rc = read_data(s, p->m[mi].size, &n, why);
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
  if (p->m[mi].ext == s->jsonlz4_id) {
    rc = lz4_decode(s, n, &json, &json_len, why);
    if (rc < 0) return rc;
    if (rc) {
      mark_bad(s, mi, "%s", why);
      return AL_OK;
    }
  }
  if (meta_parse(json, json_len, s->fields, &p->meta) != AL_OK) {
    mark_bad(s, mi, "%s", al_last_error());
    al_clear_error();
    return AL_OK;
  }
  p->have_meta = 1;
  return AL_OK;
}

/* Handles one regular member. Returns AL_OK, a negative status (out of memory),
 * or 1 when the archive became unusable (fatal read error, already recorded). */
static int member(scanner *s, struct archive_entry *e, const char *name, uint64_t hdr) {
  uint64_t off = (uint64_t)archive_filter_bytes(s->a, 0);
  uint64_t size = archive_entry_size_is_set(e) ? (uint64_t)archive_entry_size(e) : 0;
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  const char *dot = strchr(base, '.');
  if (!*base || base[0] == '.' || !dot || !dot[1]) return reject_loose(s, name, base, hdr);
  size_t key_len = (size_t)(dot - name);
  const char *ext = dot + 1;
  size_t mi;
  int rc = add_member(s, name, key_len, ext, hdr, off, size, &mi);
  if (rc) return rc;
  check_member(s, e, mi, key_len, ext);
  uint32_t ext_id = s->p.m[mi].ext;
  if (ext_id != s->json_id && ext_id != s->jsonlz4_id) {
    theader_kind kind = ext_id == EXT_OVER ? THEADER_KIND_NONE : theader_kind_of(ext);
    if (kind == THEADER_KIND_NONE && !s->p.bad && s->p.media < 0 &&
        al_decode_kind_of(ext) != AL_MEDIA_NONE) {
      s->p.media = (int)mi;
      if (!s->seekable && media_needed(s)) return media_hold(s, mi, size);
      return AL_OK;
    }
    if (kind == THEADER_KIND_NONE || s->p.bad) return AL_OK; /* skipped by the next header read */
    size_t ext_len = strlen(ext);
    int lz4 = ext_len > 4 && !strcmp(ext + ext_len - 4, ".lz4");
    return lz4 ? typed_header_lz4(s, mi, kind, size) : typed_header(s, mi, kind, size);
  }
  if (s->p.bad) return AL_OK;
  return read_meta(s, mi, name, key_len);
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

#define WALK_END 2 /* walk_entry: the shard ends here (recorded); the walk returns AL_OK */

/* The shard ends early (`why`): the sample in progress may have lost members, so it is
 * rejected with the reason; then the shard's entry at `at`. */
static int cut_short(scanner *s, uint64_t at, const char *why) {
  if (s->p.n) {
    mark_bad(s, s->p.n - 1, "%s", why);
    int rc = flush_pending(s);
    if (rc) return rc;
  }
  return reject(s, "", at, "", why);
}

/* The tar's end. `next_hdr`: where a header after the last member's data would start. */
static int walk_end(scanner *s, int first, uint64_t next_hdr) {
  /* libarchive accepts a tar that ends right after a member ("some writers omit the
   * block of nulls"): for us it is the one sign of a shard cut at a member boundary. */
  uint64_t end = (uint64_t)archive_filter_bytes(s->a, 0);
  if (first || end >= next_hdr + 1024) return flush_pending(s);
  char why[WHY_CAP];
  if (s->seekable && next_hdr > s->file_size) {
    /* The skip over the last member's data seeked past the end: libarchive's count is not a
     * file position. The data ran out at the file's end. */
    snprintf(why, sizeof why,
             "data ends at the end of the file (byte %llu) inside the last member, whose padded "
             "data runs to byte %llu: truncated shard, its last sample is rejected",
             (unsigned long long)s->file_size, (unsigned long long)next_hdr);
    return cut_short(s, s->file_size, why);
  }
  snprintf(why, sizeof why,
           "no end-of-archive marker (two zero blocks) after the last member%s: the shard "
           "may have been cut at a member boundary, so its last sample is rejected",
           end > next_hdr ? ", only one zero block" : "");
  return cut_short(s, end, why);
}

/* A stream position as a file offset: in a plain tar, libarchive counts bytes skipped with
 * lseek even past the end of a truncated file; the data there ran out at the file's end. */
static uint64_t file_pos(const scanner *s, uint64_t pos) {
  return s->seekable && pos > s->file_size ? s->file_size : pos;
}

/* libarchive gave up at header `hdr`: the first header (not a tar archive) or later. */
static int walk_fatal(scanner *s, int first, uint64_t hdr) {
  char why[WHY_CAP];
  snprintf(why, sizeof why, "%s%s",
           first ? "not a readable tar archive: " : "archive error, rest of shard unreadable: ",
           archive_error_string(s->a) ? archive_error_string(s->a) : "unknown error");
  if (first) {
    s->res->readable = 0;
    return reject(s, "", hdr, "", why);
  }
  return cut_short(s, file_pos(s, hdr), why);
}

/* Bad header checksums from `damaged_at` to the valid header at `hdr`. */
static int walk_damaged(scanner *s, uint64_t damaged_at, uint64_t hdr) {
  char why[WHY_CAP];
  snprintf(why, sizeof why, "damaged tar header (%s); skipped %llu bytes to the next valid header",
           archive_error_string(s->a) ? archive_error_string(s->a) : "bad checksum",
           (unsigned long long)(hdr - damaged_at));
  return reject(s, "", damaged_at, "", why);
}

/* One entry read at header `hdr`: directories pass, entries without a name or that are not
 * regular files are rejected, members go to member(). AL_OK, WALK_END or a negative status. */
static int walk_entry(scanner *s, struct archive_entry *e, uint64_t hdr) {
  const char *name = archive_entry_pathname(e);
  mode_t type = archive_entry_filetype(e);
  if (type == AE_IFDIR) return AL_OK; /* directories carry no sample data */
  if (!name) {
    int rc = flush_pending(s);
    if (!rc) rc = reject(s, "", hdr, "", "member without a readable name");
    return rc;
  }
  if (type != AE_IFREG || archive_entry_hardlink(e)) {
    char why[WHY_CAP];
    snprintf(why, sizeof why, "%s, not a regular file: skipped",
             archive_entry_hardlink(e) ? "hard link" : entry_kind(type));
    return reject(s, name, hdr, "", why);
  }
  int rc = member(s, e, name, hdr);
  if (rc != 1) return rc;
  /* Data could not be read: the archive cannot go on. */
  rc = flush_pending(s);
  if (!rc)
    rc = reject(s, "", file_pos(s, (uint64_t)archive_filter_bytes(s->a, 0)), "",
                "shard ends here: archive unreadable after a data error");
  return rc ? rc : WALK_END;
}

/* At the first header: the shard's compression, and whether its offsets are file offsets. */
static void first_header(scanner *s) {
  s->seekable = shard_source_seekable(s->src, s->a);
  index_shard_rec *sh = &s->idx->shards[0];
  sh->compression = index_compression_name(shard_source_compression(s->src, s->a));
  sh->seekable = s->seekable;
}

static int walk(scanner *s) {
  struct archive_entry *e;
  uint64_t damaged_at = 0, damaged_blocks = 0;
  uint64_t next_hdr = 0; /* where the next header should start: after the padded data */
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
      int rc = walk_damaged(s, damaged_at, hdr);
      if (rc) return rc;
      damaged_blocks = 0;
    }
    if (ar == ARCHIVE_EOF) return walk_end(s, first, next_hdr);
    if (ar == ARCHIVE_FATAL || ar < ARCHIVE_WARN) return walk_fatal(s, first, hdr);
    if (first) {
      first = 0;
      first_header(s);
    }
    int64_t sz = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
    next_hdr = (uint64_t)archive_filter_bytes(s->a, 0) +
               ((uint64_t)(sz > 0 ? sz : 0) + 511) / 512 * 512;
    int rc = walk_entry(s, e, hdr);
    if (rc) return rc == WALK_END ? AL_OK : rc;
  }
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

/* A storage message about `url` (a path or a URL) as a rejection reason: the name, which the
 * rejected entry names already, left out ("URL: HTTP 404" -> "HTTP 404"; "URL (ENDPOINT_URL): HTTP
 * 404" -> "HTTP 404 (ENDPOINT_URL)"). */
static void reason_of(const char *url, const char *msg, char *out, size_t cap) {
  size_t n = strlen(url);
  const char *close;
  if (!strncmp(msg, url, n) && !strncmp(msg + n, ": ", 2)) {
    snprintf(out, cap, "%s", msg + n + 2);
  } else if (!strncmp(msg, url, n) && !strncmp(msg + n, " (", 2) &&
             (close = strstr(msg + n, "): ")) != NULL) {
    snprintf(out, cap, "%s (%.*s)", close + 3, (int)(close - (msg + n + 2)), msg + n + 2);
  } else {
    snprintf(out, cap, "%s", msg);
  }
}

/* Walks the open shard. */
static int open_and_walk(scanner *s, shard_bytes *sb, size_t block_size) {
  shard_source src;
  int rc = shard_source_open(&src, sb, s->path, block_size);
  s->a = archive_read_new();
  s->src = &src;
  if (rc != AL_ENOMEM && !s->a)
    rc = al_set_error(AL_ENOMEM, "out of memory (libarchive, %zu-byte block)", src.max);
  if (rc == AL_ENOMEM) goto done;
  char why[WHY_CAP];
  if (rc != AL_OK) { /* not a stream libarchive reads, or a request that failed */
    s->res->readable = 0;
    reason_of(s->path, al_last_error(), why, sizeof why);
    al_clear_error();
    rc = reject(s, "", 0, "", why);
    goto done;
  }
  archive_read_support_filter_all(s->a);
  archive_read_support_format_tar(s->a);
  shard_source_attach(&src, s->a);
  s->res->readable = 1;
  if (archive_read_open1(s->a) != ARCHIVE_OK) {
    snprintf(why, WHY_CAP, "not a readable tar archive: %s", archive_error_string(s->a));
    s->res->readable = 0;
    rc = reject(s, "", 0, "", why);
  } else {
    rc = walk(s);
  }
  /* The checksums at the end of a compressed stream, past the tar's end. */
  if (!rc && shard_source_drain(&src) != AL_OK) {
    al_clear_error(); /* the reason is in src.why */
    if (s->res->readable) {
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
  s->res->bytes_read = src.bytes_read;
  shard_source_close(&src);
  return rc;
}

static int scan_finish(scanner *s, int rc);

/* A scanner of one shard (a local path or a URL) with an empty index of its own in out. */
static int scanner_start(scanner *s, const char *path, const meta_fields *fields,
                         uint64_t max_member, uint32_t vae_t, uint32_t vae_s,
                         scan_progress *progress, scan_result *out) {
  memset(out, 0, sizeof *out);
  memset(s, 0, sizeof *s);
  s->path = path;
  s->max_member = max_member;
  s->fields = fields;
  s->vae_t = vae_t;
  s->vae_s = vae_s;
  s->res = out;
  s->progress = progress;
  s->p.json = -1;
  s->p.media = -1;
  int rc = al_index_new(&out->idx);
  s->idx = out->idx;
  return rc;
}

/* The header block before each indexed member's data, hashed as shard_fp.c does (plain tar),
 * or the content fingerprint itself (compressed): what build.c folds into the shard's
 * content fingerprint once the merge has decided which samples stay. Read through sb (a URL's
 * from its cache: the walk fetched these blocks). */
static int scan_identity(scanner *s, shard_bytes *sb) {
  scan_result *r = s->res;
  const al_index *x = s->idx;
  index_shard_rec *sh = &s->idx->shards[0];
  if (!x->n_samples) return AL_OK;
  if (!sh->seekable) {
    uint64_t fp = 0;
    int rc = index_shard_content_fp_by(x, 0, shard_bytes_read_at, sb, &fp);
    if (rc == AL_ENOMEM) return rc;
    if (rc) al_clear_error(); /* unreadable a moment after the walk: none recorded */
    r->content_fp = rc ? 0 : fp;
    return AL_OK;
  }
  r->hdr_off = malloc((x->n_members ? x->n_members : 1) * sizeof *r->hdr_off);
  r->hdr_hash = malloc((x->n_members ? x->n_members : 1) * sizeof *r->hdr_hash);
  if (!r->hdr_off || !r->hdr_hash) return al_set_error(AL_ENOMEM, "out of memory");
  unsigned char blk[512];
  for (size_t i = 0; i < x->n_samples; i++) {
    const index_sample_rec *q = &x->samples[i];
    for (uint32_t m = 0; m < q->n_members; m++) {
      uint64_t off = x->members[q->member0 + m].off_ext >> 16;
      if (off < 512 || shard_bytes_pread(sb, off - 512, blk, sizeof blk) != AL_OK) {
        al_clear_error();
        r->n_hdr = 0; /* no fingerprint recorded */
        return AL_OK;
      }
      r->hdr_off[r->n_hdr] = off;
      r->hdr_hash[r->n_hdr++] = hash64(blk, sizeof blk, off);
    }
  }
  return AL_OK;
}

/* Opens the shard: first what its name is, where that is known without opening it (a file's
 * stat: a missing path or a directory is rejected without opening it), then its object. *sb
 * NULL, with the reason in why, when it cannot be read; *known the lookup's answer, pre
 * filled when AL_OK. */
static void scan_open(const char *path, storage_client *client, shard_bytes **sb, int *known,
                      storage_stat *pre, char *why) {
  *sb = NULL;
  why[0] = '\0';
  *known = storage_lookup(path, pre);
  if (*known == AL_OK && pre->type != STORAGE_OBJECT)
    snprintf(why, WHY_CAP, "is %s, not a regular file", pre->type_name);
  else if (*known != AL_OK && *known != AL_EUNSUPPORTED) /* AL_EUNSUPPORTED: a URL */
    reason_of(path, al_last_error(), why, WHY_CAP);
  else if (shard_bytes_open(client, path, sb) != AL_OK)
    reason_of(path, al_last_error(), why, WHY_CAP);
  al_clear_error();
}

int scan_shard(const char *path, storage_client *client, const meta_fields *fields,
               size_t block_size, uint64_t max_member, uint32_t vae_t, uint32_t vae_s,
               scan_progress *progress, scan_result *out) {
  scanner s;
  int rc = scanner_start(&s, path, fields, max_member, vae_t, vae_s, progress, out);
  if (rc) return rc;
  out->remote = storage_ops_for(path)->remote;
  shard_bytes *sb;
  storage_stat pre;
  int known;
  char why[WHY_CAP];
  scan_open(path, client, &sb, &known, &pre, why);
  /* The record: what the open found (a URL's size and ETag, a file's size and mtime), else
   * what the lookup did. */
  const storage_stat *st = sb ? shard_bytes_stat(sb) : known == AL_OK ? &pre : NULL;
  rc = index_add_shard_full(s.idx, path, st ? st->size : 0, st ? st->mtime_ns : 0, 0, "unknown",
                            NULL);
  if (!rc && sb && st->etag && !(s.idx->shards[0].etag = strdup(st->etag)))
    rc = al_set_error(AL_ENOMEM, "out of memory");
  if (!rc) rc = strtab_intern(&s.idx->exts, "json", 4, AL_EXT_MAX, &s.json_id);
  if (!rc) rc = strtab_intern(&s.idx->exts, "json.lz4", 8, AL_EXT_MAX, &s.jsonlz4_id);
  if (!rc && !sb) {
    rc = reject(&s, "", 0, "", why);
  } else if (!rc && st->size == 0) {
    snprintf(why, sizeof why, "empty %s (0 bytes): not a tar archive", shard_bytes_noun(sb));
    rc = reject(&s, "", 0, "", why);
  } else if (!rc) {
    s.file_size = st->size;
    rc = open_and_walk(&s, sb, block_size);
    if (!rc && out->readable) rc = scan_identity(&s, sb);
  }
  if (sb) {
    storage_counts c = shard_bytes_counts(sb);
    out->requests = c.requests;
    /* A server's: what its requests brought (the cache between makes the walk's reads no
     * measure of it). */
    if (out->remote) out->bytes_read = c.bytes + c.discarded;
    shard_bytes_close(sb);
  }
  return scan_finish(&s, rc);
}

/* What scan_shard does last: progress, the scanner's buffers. */
static int scan_finish(scanner *s, int rc) {
  scan_result *out = s->res;
  scan_progress *progress = s->progress;
  if (out->readable) out->bytes = s->file_size;
  if (progress) {
    atomic_fetch_add(&progress->samples, s->unreported);
    atomic_fetch_add(&progress->bytes, s->file_size);
  }
  free(s->p.key);
  free(s->p.m);
  free(s->buf);
  free(s->dec);
  free(s->hbuf);
  free(s->lzin);
  free(s->mbuf);
  if (s->dctx) LZ4F_freeDecompressionContext(s->dctx);
  return rc;
}

void scan_result_free(scan_result *r) {
  if (!r) return;
  al_index_free(r->idx);
  free(r->first_hdr);
  free(r->hdr_off);
  free(r->hdr_hash);
  memset(r, 0, sizeof *r);
}
