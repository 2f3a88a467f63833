/* Typed members: header parse, then the array data (cropped for the latent) into the batch. */
#include "stream/typed_member_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A header is read in pieces of at least this much (most .npy headers take 128 bytes). */
#define TYPED_HEADER_FIRST 4096
/* Bytes read at once when cropping: spans of several planes (1 MiB read faster than 64 and
 * 256 KiB, as fast as 2-4 MiB: BENCHMARKS.md, stream). */
#define TYPED_SPAN ((size_t)1 << 20)

static int where(int rc, const char *path, const stream_source_job *job) {
  return al_error_prefix(rc, "%s: key '%s' member '%s' at byte %" PRIu64, path ? path : "?",
                         job->key ? job->key : "?", job->member, job->offset);
}

/* Parses the header of a member read whole (mem, len) or through its shard's object (obj). */
static int parse_header(stream_reader *r, const stream_source_job *job, theader_kind kind,
                        const char *path, storage_obj *obj, const uint8_t *mem, size_t len,
                        theader *h) {
  uint64_t size = obj ? job->size : len;
  size_t have = obj ? (size < TYPED_HEADER_FIRST ? (size_t)size : TYPED_HEADER_FIRST) : len;
  stream_growbuf *sc = stream_reader_scratch(r);
  for (int round = 0;; round++) {
    const uint8_t *buf = mem;
    if (obj) {
      int rc = stream_growbuf_reserve(sc, have ? have : 1, 0);
      if (rc == AL_OK) rc = stream_reader_pread(obj, path, job, sc->p, have, job->offset);
      if (rc != AL_OK) return rc;
      buf = sc->p;
    }
    size_t need = 0;
    /* safetensors: the member must hold one tensor (name NULL). */
    int rc = theader_parse(kind, buf, have, size, NULL, h, &need);
    if (rc == AL_OK) break;
    if (obj && round < 4 && need > have && need <= size && need <= THEADER_MAX_HEADER_BYTES) {
      have = need;
      continue;
    }
    if (rc != AL_ERANGE) return where(rc, path, job);
    return where(al_set_error(AL_EFORMAT, "header needs %zu bytes, the member holds %" PRIu64, need,
                              size),
                 path, job);
  }
  size_t isz = theader_dtype_size(h->dtype);
  uint64_t elems = 1;
  int overflow = h->ndim > THEADER_MAX_DIMS || isz == 0;
  for (uint32_t d = 0; !overflow && d < h->ndim; d++) {
    if (h->shape[d] && elems > UINT64_MAX / h->shape[d]) overflow = 1;
    elems *= h->shape[d];
  }
  if (overflow || (elems && isz > UINT64_MAX / elems) || elems * isz != h->data_bytes ||
      h->data_offset > size || h->data_bytes > size - h->data_offset)
    return where(al_set_error(AL_EFORMAT,
                              "header describes %" PRIu64 " data bytes at %" PRIu64
                              " (dtype %s, %" PRIu32 " dims), the member holds %" PRIu64,
                              h->data_bytes, h->data_offset, theader_dtype_name(h->dtype), h->ndim,
                              size),
                 path, job);
  return AL_OK;
}

/* The header read must say what the index recorded when it read the same header: a header
 * rewritten in place (the shard's size and member headers unchanged) is a changed shard. */
static int check_recorded(const stream_source_job *job, const char *path, const theader *h) {
  if (!job->has_type) return AL_OK;
  int rc = theader_check_recorded(h, job->type.dtype, job->type.ndim, job->type.shape);
  if (rc == AL_OK) return AL_OK;
  return al_error_prefix(rc,
                         "%s: shard changed since indexing: key '%s' member '%s' at byte %" PRIu64,
                         path ? path : "?", job->key ? job->key : "?", job->member, job->offset);
}

/* The data of a header-parsed member, and how to crop it. */
typedef struct crop {
  stream_reader *r;
  const stream_source_job *job;
  const char *path;
  storage_obj *obj;   /* read from here at `base`, or NULL: the member is in memory at `src` */
  uint64_t base;      /* file offset of the data */
  const uint8_t *src; /* the data in memory */
  uint64_t T, H, W;   /* the member's grid (C is the loop's) */
  uint64_t Tb, hb, wb, y0, x0;
  uint64_t t0, tn; /* the crop's frames delivered: [t0, t0 + tn) of [0, Tb) */
  size_t isz, row_src, row_dst, plane_src, band;
} crop;

/* The member's data as is. */
static int copy_whole(const crop *k, const theader *h, stream_growbuf *b, size_t off,
                      stream_typed_out *out) {
  int rc = stream_growbuf_reserve(b, off + (size_t)h->data_bytes, off);
  if (rc != AL_OK) return rc;
  if (k->src)
    memcpy(b->p + off, k->src, (size_t)h->data_bytes);
  else if (h->data_bytes && (rc = stream_reader_pread(k->obj, k->path, k->job, b->p + off,
                                                      (size_t)h->data_bytes, k->base)) != AL_OK)
    return rc;
  out->bytes = (size_t)h->data_bytes;
  return AL_OK;
}

/* The crop's geometry from the header (C, T, H, W or C, H, W) and the bucket's grid; an
 * error naming both grids when the member is smaller. The delivered shape into *out. */
static int crop_plan(crop *k, const theader *h, const uint32_t *grid, uint64_t *C,
                     stream_typed_out *out) {
  if (h->ndim == 4) {
    *C = h->shape[0], k->T = h->shape[1], k->H = h->shape[2], k->W = h->shape[3];
  } else if (h->ndim == 3) {
    *C = h->shape[0], k->T = 1, k->H = h->shape[1], k->W = h->shape[2];
  } else {
    return where(al_set_error(AL_EFORMAT,
                              "latent of %" PRIu32
                              " dimensions: expected (C, T, H, W) or (C, H, W) to crop to the "
                              "bucket's grid %" PRIu32 "x%" PRIu32 "x%" PRIu32,
                              h->ndim, grid[0], grid[1], grid[2]),
                 k->path, k->job);
  }
  k->Tb = grid[0], k->hb = grid[1], k->wb = grid[2];
  if (k->T < k->Tb || k->H < k->hb || k->W < k->wb)
    return where(al_set_error(AL_ERANGE,
                              "latent grid %" PRIu64 "x%" PRIu64 "x%" PRIu64
                              " (frames x rows x columns) is smaller than its bucket's grid "
                              "%" PRIu64 "x%" PRIu64 "x%" PRIu64 ": cannot crop",
                              k->T, k->H, k->W, k->Tb, k->hb, k->wb),
                 k->path, k->job);
  if (h->ndim == 4) {
    out->shape[1] = k->Tb, out->shape[2] = k->hb, out->shape[3] = k->wb;
  } else {
    out->shape[1] = k->hb, out->shape[2] = k->wb;
  }
  k->isz = theader_dtype_size(h->dtype);
  k->y0 = (k->H - k->hb) / 2, k->x0 = (k->W - k->wb) / 2;
  k->row_src = (size_t)(k->W * k->isz), k->row_dst = (size_t)(k->wb * k->isz);
  k->plane_src = (size_t)k->H * k->row_src, k->band = (size_t)k->hb * k->row_src;
  return AL_OK;
}

/* Planes [t, t + kk) of the band starting at data offset `at`: one pread of the span from
 * the first kept row of the first plane to the last kept row of the last into the scratch
 * (the rows between bands come along), then the kept parts out of it. */
static int crop_span(const crop *k, uint64_t at, uint64_t kk, uint8_t **dst) {
  size_t span = (size_t)(kk - 1) * k->plane_src + k->band;
  stream_growbuf *sc = stream_reader_scratch(k->r);
  int rc = stream_growbuf_reserve(sc, span ? span : 1, 0);
  if (rc != AL_OK) return rc;
  if (span &&
      (rc = stream_reader_pread(k->obj, k->path, k->job, sc->p, span, k->base + at)) != AL_OK)
    return rc;
  for (uint64_t q = 0; q < kk; q++) {
    const uint8_t *p = sc->p + q * k->plane_src + k->x0 * k->isz;
    if (k->wb == k->W) {
      memcpy(*dst, p, k->band);
      *dst += k->band;
      continue;
    }
    for (uint64_t y = 0; y < k->hb; y++, p += k->row_src, *dst += k->row_dst)
      memcpy(*dst, p, k->row_dst);
  }
  return AL_OK;
}

/* Channel c's kept frames, rows and columns to *dst. */
static int crop_channel(const crop *k, uint64_t c, uint8_t **dst) {
  int rc;
  if (!k->src && k->hb == k->H && k->wb == k->W) { /* whole planes: the kept frames at once */
    size_t n = (size_t)k->tn * k->plane_src;
    if (n && (rc = stream_reader_pread(k->obj, k->path, k->job, *dst, n,
                                       k->base + (c * k->T + k->t0) * k->plane_src)) != AL_OK)
      return rc;
    *dst += n;
    return AL_OK;
  }
  /* Planes read kk at a time when the rows outside the band are at most a quarter of a
   * plane; else band by band. */
  uint64_t kmax = 1;
  if (!k->src && k->plane_src && (k->plane_src - k->band) * 4 <= k->plane_src &&
      k->band <= TYPED_SPAN)
    kmax = 1 + (TYPED_SPAN - k->band) / k->plane_src;
  for (uint64_t t = k->t0; t < k->t0 + k->tn; t += kmax) {
    uint64_t kk = k->t0 + k->tn - t < kmax ? k->t0 + k->tn - t : kmax;
    uint64_t at = (c * k->T + t) * k->plane_src + k->y0 * k->row_src; /* first kept row */
    if (k->src) {
      const uint8_t *p = k->src + at + k->x0 * k->isz;
      for (uint64_t y = 0; y < k->hb; y++, p += k->row_src, *dst += k->row_dst)
        memcpy(*dst, p, k->row_dst);
    } else if (k->wb == k->W && kk == 1) {
      if (k->band &&
          (rc = stream_reader_pread(k->obj, k->path, k->job, *dst, k->band, k->base + at)) != AL_OK)
        return rc;
      *dst += k->band;
    } else if ((rc = crop_span(k, at, kk, dst)) != AL_OK) {
      return rc;
    }
  }
  return AL_OK;
}

int stream_typed_read(stream_reader *r, const stream_source_job *job, theader_kind kind,
                      const uint32_t *grid, stream_growbuf *b, size_t off, stream_typed_out *out) {
  return stream_typed_read_frames(r, job, kind, grid, 0, grid ? grid[0] : 0, b, off, out);
}

int stream_typed_read_frames(stream_reader *r, const stream_source_job *job, theader_kind kind,
                             const uint32_t *grid, uint32_t t0, uint32_t tn, stream_growbuf *b,
                             size_t off, stream_typed_out *out) {
  memset(out, 0, sizeof *out);
  crop k;
  memset(&k, 0, sizeof k);
  k.r = r;
  k.job = job;
  int rc = stream_reader_direct(r, job, &k.obj, &k.path);
  if (rc != AL_OK) return rc;
  const uint8_t *mem = NULL;
  size_t len = 0;
  if (!k.obj) {
    /* LZ4 or libarchive: the member whole into the scratch (the cap applies there). */
    rc = stream_reader_read(r, job, stream_reader_scratch(r), 0, &len);
    if (rc != AL_OK) return rc;
    mem = stream_reader_scratch(r)->p;
  }
  theader h;
  rc = parse_header(r, job, kind, k.path, k.obj, mem, len, &h);
  if (rc == AL_OK) rc = check_recorded(job, k.path, &h);
  if (rc != AL_OK) return rc;
  out->dtype = h.dtype;
  out->ndim = h.ndim;
  memcpy(out->shape, h.shape, sizeof h.shape);
  k.base = k.obj ? job->offset + h.data_offset : 0;
  k.src = mem ? mem + h.data_offset : NULL;
  if (!grid) return copy_whole(&k, &h, b, off, out);
  uint64_t C = 0;
  if ((rc = crop_plan(&k, &h, grid, &C, out)) != AL_OK) return rc;
  if (!tn || t0 > k.Tb || tn > k.Tb - t0)
    return where(al_set_error(AL_EINVAL,
                              "frames [%" PRIu32 ", %" PRIu32 ") of a crop of %" PRIu64 " frames",
                              t0, t0 + tn, k.Tb),
                 k.path, job);
  k.t0 = t0, k.tn = tn;
  const size_t bytes = (size_t)(C * k.tn * k.hb) * k.row_dst; /* <= data_bytes: fits */
  if ((rc = stream_growbuf_reserve(b, off + bytes, off)) != AL_OK) return rc;
  uint8_t *dst = b->p + off;
  for (uint64_t c = 0; c < C; c++)
    if ((rc = crop_channel(&k, c, &dst)) != AL_OK) return rc;
  out->bytes = bytes;
  return AL_OK;
}
