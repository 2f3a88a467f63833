/* Typed members: header parse, then the array data (cropped for the latent) into the batch. */
#include "stream/typed_member_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* A header is read in pieces of at least this much (most .npy headers take 128 bytes). */
#define TYPED_HEADER_FIRST 4096
/* Bytes read at once when cropping: spans of several planes (1 MiB read faster than 64 and
 * 256 KiB, as fast as 2-4 MiB: BENCHMARKS.md, stream, issue 15). */
#define TYPED_SPAN ((size_t)1 << 20)

static int where(int rc, const char *path, const stream_source_job *job) {
  return al_error_prefix(rc, "%s: key '%s' member '%s' at byte %" PRIu64, path ? path : "?",
                         job->key ? job->key : "?", job->member, job->offset);
}

/* Parses the header of a member read whole (mem, len) or through fd (pread). */
static int parse_header(stream_reader *r, const stream_source_job *job, theader_kind kind,
                        const char *path, int fd, const uint8_t *mem, size_t len, theader *h) {
  uint64_t size = fd >= 0 ? job->size : len;
  size_t have = fd >= 0 ? (size < TYPED_HEADER_FIRST ? (size_t)size : TYPED_HEADER_FIRST) : len;
  stream_growbuf *sc = stream_reader_scratch(r);
  for (int round = 0;; round++) {
    const uint8_t *buf = mem;
    if (fd >= 0) {
      int rc = stream_growbuf_reserve(sc, have ? have : 1, 0);
      if (rc == AL_OK) rc = stream_reader_pread(fd, path, job, sc->p, have, job->offset);
      if (rc != AL_OK) return rc;
      buf = sc->p;
    }
    size_t need = 0;
    /* safetensors: the member must hold one tensor (name NULL). */
    int rc = theader_parse(kind, buf, have, size, NULL, h, &need);
    if (rc == AL_OK) break;
    if (fd >= 0 && round < 4 && need > have && need <= size && need <= THEADER_MAX_HEADER_BYTES) {
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

int stream_typed_read(stream_reader *r, const stream_source_job *job, theader_kind kind,
                      const uint32_t *grid, stream_growbuf *b, size_t off, stream_typed_out *out) {
  memset(out, 0, sizeof *out);
  int fd = -1;
  const char *path = NULL;
  int rc = stream_reader_direct(r, job, &fd, &path);
  if (rc != AL_OK) return rc;
  const uint8_t *mem = NULL;
  size_t len = 0;
  if (fd < 0) {
    /* LZ4 or libarchive: the member whole into the scratch (the cap applies there). */
    rc = stream_reader_read(r, job, stream_reader_scratch(r), 0, &len);
    if (rc != AL_OK) return rc;
    mem = stream_reader_scratch(r)->p;
  }
  theader h;
  rc = parse_header(r, job, kind, path, fd, mem, len, &h);
  if (rc != AL_OK) return rc;
  size_t isz = theader_dtype_size(h.dtype);
  out->dtype = h.dtype;
  out->ndim = h.ndim;
  memcpy(out->shape, h.shape, sizeof h.shape);
  const uint64_t base = fd >= 0 ? job->offset + h.data_offset : 0; /* file offset of the data */
  const uint8_t *src = mem ? mem + h.data_offset : NULL;

  if (!grid) {
    if ((rc = stream_growbuf_reserve(b, off + (size_t)h.data_bytes, off)) != AL_OK) return rc;
    if (src)
      memcpy(b->p + off, src, (size_t)h.data_bytes);
    else if (h.data_bytes && (rc = stream_reader_pread(fd, path, job, b->p + off,
                                                       (size_t)h.data_bytes, base)) != AL_OK)
      return rc;
    out->bytes = (size_t)h.data_bytes;
    return AL_OK;
  }

  uint64_t C, T, H, W;
  if (h.ndim == 4) {
    C = h.shape[0], T = h.shape[1], H = h.shape[2], W = h.shape[3];
  } else if (h.ndim == 3) {
    C = h.shape[0], T = 1, H = h.shape[1], W = h.shape[2];
  } else {
    return where(al_set_error(AL_EFORMAT,
                              "latent of %" PRIu32
                              " dimensions: expected (C, T, H, W) or (C, H, W) to crop to the "
                              "bucket's grid %" PRIu32 "x%" PRIu32 "x%" PRIu32,
                              h.ndim, grid[0], grid[1], grid[2]),
                 path, job);
  }
  const uint64_t Tb = grid[0], hb = grid[1], wb = grid[2];
  if (T < Tb || H < hb || W < wb)
    return where(al_set_error(AL_ERANGE,
                              "latent grid %" PRIu64 "x%" PRIu64 "x%" PRIu64
                              " (frames x rows x columns) is smaller than its bucket's grid "
                              "%" PRIu64 "x%" PRIu64 "x%" PRIu64 ": cannot crop",
                              T, H, W, Tb, hb, wb),
                 path, job);
  if (h.ndim == 4) {
    out->shape[1] = Tb, out->shape[2] = hb, out->shape[3] = wb;
  } else {
    out->shape[1] = hb, out->shape[2] = wb;
  }
  const uint64_t y0 = (H - hb) / 2, x0 = (W - wb) / 2;
  const size_t row_src = (size_t)(W * isz), row_dst = (size_t)(wb * isz);
  const size_t plane_src = (size_t)H * row_src, band = (size_t)hb * row_src;
  const size_t bytes = (size_t)(C * Tb * hb) * row_dst; /* <= data_bytes: fits */
  if ((rc = stream_growbuf_reserve(b, off + bytes, off)) != AL_OK) return rc;
  uint8_t *dst = b->p + off;
  for (uint64_t c = 0; c < C; c++) {
    if (!src && hb == H && wb == W) { /* whole planes: the first Tb frames of channel c at once */
      size_t n = (size_t)Tb * plane_src;
      if (n && (rc = stream_reader_pread(fd, path, job, dst, n, base + c * T * plane_src)) != AL_OK)
        return rc;
      dst += n;
      continue;
    }
    /* Planes read k at a time: one pread of the span from the first kept row of plane t to the
     * last kept row of plane t + k - 1 (the rows between bands come along) into the scratch,
     * when the rows outside the band are at most a quarter of a plane; else band by band. */
    uint64_t k = 1;
    if (!src && plane_src && (plane_src - band) * 4 <= plane_src && band <= TYPED_SPAN)
      k = 1 + (TYPED_SPAN - band) / plane_src;
    for (uint64_t t = 0; t < Tb; t += k) {
      uint64_t kk = Tb - t < k ? Tb - t : k;
      uint64_t at = (c * T + t) * plane_src + y0 * row_src; /* first kept row, from the data */
      if (src) {
        const uint8_t *p = src + at + x0 * isz;
        for (uint64_t y = 0; y < hb; y++, p += row_src, dst += row_dst) memcpy(dst, p, row_dst);
      } else if (wb == W && kk == 1) {
        if (band && (rc = stream_reader_pread(fd, path, job, dst, band, base + at)) != AL_OK)
          return rc;
        dst += band;
      } else {
        size_t span = (size_t)(kk - 1) * plane_src + band;
        stream_growbuf *sc = stream_reader_scratch(r);
        if ((rc = stream_growbuf_reserve(sc, span ? span : 1, 0)) != AL_OK) return rc;
        if (span && (rc = stream_reader_pread(fd, path, job, sc->p, span, base + at)) != AL_OK)
          return rc;
        for (uint64_t q = 0; q < kk; q++) {
          const uint8_t *p = sc->p + q * plane_src + x0 * isz;
          if (wb == W) {
            memcpy(dst, p, band);
            dst += band;
            continue;
          }
          for (uint64_t y = 0; y < hb; y++, p += row_src, dst += row_dst) memcpy(dst, p, row_dst);
        }
      }
    }
  }
  out->bytes = bytes;
  return AL_OK;
}
