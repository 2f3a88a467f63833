/* One LZ4 frame stored as a tar member; see lz4_member_internal.h. */
#include "loader/lz4_member_internal.h"

#include <string.h>

#include "common/al_status.h"

typedef struct decoder {
  LZ4F_dctx *dctx;
  const lz4_member_src *src;
  const lz4_member_dst *dst;
  lz4_member_result *res;
  uint64_t got; /* member bytes obtained from the source */
  uint64_t pos; /* member bytes consumed by LZ4F */
  size_t hint;  /* LZ4F's hint; 0 once the frame is complete */
  uint8_t *out;
  size_t cap, len;
} decoder;

static int fault(decoder *d, lz4_member_fault f, uint64_t at, size_t lz4_code) {
  d->res->fault = f;
  d->res->at = at;
  d->res->lz4_error = lz4_code ? LZ4F_getErrorName(lz4_code) : NULL;
  return AL_OK;
}

/* The member's next bytes in *p: their count, 0 at its end, or a negative status. */
static long long next_bytes(decoder *d, const uint8_t **p) {
  const lz4_member_src *src = d->src;
  if (d->got >= src->size) return 0;
  if (src->data) {
    *p = src->data;
    d->got = src->size;
    return (long long)src->size;
  }
  uint64_t want = src->size - d->got;
  long long n = src->read(src->ctx, src->scratch, want < src->block ? (size_t)want : src->block);
  if (n > 0) d->got += (uint64_t)n;
  *p = src->scratch;
  return n;
}

/* Room for more output: doubles what was decoded (at least `first` more), up
 * to one byte past the limit, which is how an oversized frame is caught. */
static int make_room(decoder *d) {
  const lz4_member_dst *dst = d->dst;
  size_t step = d->len > dst->first ? d->len : dst->first;
  size_t need = dst->limit + 1 - d->len > step ? d->len + step : dst->limit + 1;
  return dst->reserve(dst->ctx, need, d->len, &d->out, &d->cap);
}

/* Decodes n input bytes (or fewer: it stops at the end of the frame). */
static int decode(decoder *d, const uint8_t *p, size_t n) {
  size_t i = 0;
  while (d->hint != 0 && !d->res->fault) {
    if (d->len == d->cap) {
      int rc = make_room(d);
      if (rc != AL_OK) return rc;
    }
    size_t dn = d->cap - d->len, sn = n - i;
    size_t h = LZ4F_decompress(d->dctx, d->out + d->len, &dn, n ? p + i : NULL, &sn, NULL);
    if (LZ4F_isError(h)) return fault(d, LZ4_MEMBER_CORRUPT, d->pos, h);
    i += sn;
    d->pos += sn;
    d->len += dn;
    d->hint = h;
    if (d->len > d->dst->limit) return fault(d, LZ4_MEMBER_TOO_LARGE, d->pos, 0);
    if (sn == 0 && dn == 0) break; /* LZ4F wants more input */
  }
  return AL_OK;
}

/* A member that ends before its frame header does: LZ4F takes up to
 * LZ4F_HEADER_SIZE_MIN bytes without looking at them, then knows the size. */
static int header_truncated(const uint8_t *h, size_t n) {
  if (n >= LZ4F_HEADER_SIZE_MAX) return 0;
  if (n < LZ4F_HEADER_SIZE_MIN) return 1;
  size_t want = LZ4F_headerSize(h, n);
  return !LZ4F_isError(want) && n < want;
}

int lz4_member_decode(LZ4F_dctx *dctx, const lz4_member_src *src, const lz4_member_dst *dst,
                      lz4_member_result *res) {
  memset(res, 0, sizeof *res);
  LZ4F_resetDecompressionContext(dctx);
  decoder d = {.dctx = dctx, .src = src, .dst = dst, .res = res};
  /* The header whole (LZ4F_HEADER_SIZE_MAX bytes, or the member), whatever the
   * read size: LZ4F_getFrameInfo does not take it in pieces. */
  uint8_t hdr[LZ4F_HEADER_SIZE_MAX];
  size_t hlen = 0;
  const uint8_t *p = NULL;
  size_t n = 0, at = 0;
  while (hlen < sizeof hdr) {
    if (at == n) {
      long long k = next_bytes(&d, &p);
      if (k < 0) return (int)k;
      if (k == 0) break;
      n = (size_t)k;
      at = 0;
    }
    size_t c = sizeof hdr - hlen < n - at ? sizeof hdr - hlen : n - at;
    memcpy(hdr + hlen, p + at, c);
    hlen += c;
    at += c;
  }
  LZ4F_frameInfo_t info;
  size_t hn = hlen;
  size_t e = LZ4F_getFrameInfo(dctx, &info, hdr, &hn);
  if (LZ4F_isError(e)) {
    if (header_truncated(hdr, hlen)) return fault(&d, LZ4_MEMBER_TRUNCATED, d.got, 0);
    return fault(&d, LZ4_MEMBER_BAD_HEADER, 0, e);
  }
  d.pos = hn;
  d.hint = e;
  res->content = info.contentSize;
  if (res->content > dst->limit) return fault(&d, LZ4_MEMBER_TOO_LARGE, 0, 0);
  /* The header may carry the decoded size: reserve it at once. */
  int rc = dst->reserve(dst->ctx, res->content ? (size_t)res->content : dst->first, 0, &d.out,
                        &d.cap);
  if (rc == AL_OK) rc = decode(&d, hdr + hn, hlen - hn);
  if (rc == AL_OK && at < n) rc = decode(&d, p + at, n - at);
  while (rc == AL_OK && d.hint != 0 && !res->fault) {
    long long k = next_bytes(&d, &p);
    if (k < 0) return (int)k;
    if (k == 0) {
      rc = decode(&d, NULL, 0); /* output LZ4F still holds */
      break;
    }
    rc = decode(&d, p, (size_t)k);
  }
  if (rc != AL_OK || res->fault) return rc;
  res->len = d.len;
  if (d.hint != 0) return fault(&d, LZ4_MEMBER_TRUNCATED, d.got, 0);
  if (d.pos != src->size) return fault(&d, LZ4_MEMBER_TRAILING, d.pos, 0);
  if (res->content && d.len != res->content) return fault(&d, LZ4_MEMBER_SIZE_MISMATCH, 0, 0);
  return AL_OK;
}
