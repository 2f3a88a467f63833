/* Hand-written IndexChunk decoder (index_decode_internal.h). The rules follow protobuf-c
 * 1.4.1's protobuf_c_message_unpack (protobuf-c.c: parse_tag_and_wiretype, scan_varint,
 * scan_length_prefixed_data, parse_required_member, parse_packed_repeated_member). */
#include "loader/index_decode_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "common/grow_internal.h"

enum { WT_VARINT = 0, WT_64BIT = 1, WT_LEN = 2, WT_32BIT = 5 };

/* One field as protobuf-c scans it: `data` is where its payload starts (a length prefix
 * included), `len` the bytes from there (prefix included), `pref` the prefix's length. */
typedef struct field {
  uint32_t tag;
  unsigned wt;
  const uint8_t *data;
  size_t len, pref;
} field;

typedef struct cursor {
  const uint8_t *base; /* the record, for offsets */
  const uint8_t *p, *end;
  idec_error *err;
} cursor;

static int fail(cursor *c, const uint8_t *at, const char *what) {
  c->err->offset = (size_t)(at - c->base);
  c->err->what = what;
  return AL_EFORMAT;
}

/* The next field of [c->p, c->end); c->p moves past it. */
static int next_field(cursor *c, field *f) {
  const uint8_t *at = c->p;
  size_t rem = (size_t)(c->end - at);
  /* Tag and wire type (parse_tag_and_wiretype): at most 5 bytes, tag 0 refused. */
  if ((at[0] & 0xf8) == 0) return fail(c, at, "field number 0");
  unsigned max = rem > 5 ? 5 : (unsigned)rem;
  uint32_t tag = (at[0] & 0x7fu) >> 3;
  unsigned used = 0, shift = 4;
  f->wt = at[0] & 7u;
  if ((at[0] & 0x80) == 0) {
    used = 1;
  } else {
    for (unsigned i = 1; i < max; i++) {
      if (at[i] & 0x80) {
        tag |= (uint32_t)(at[i] & 0x7fu) << shift;
        shift += 7;
      } else {
        tag |= (uint32_t)at[i] << shift;
        used = i + 1;
        break;
      }
    }
    if (!used) return fail(c, at, "bad field tag");
  }
  f->tag = tag;
  at += used;
  rem -= used;
  f->data = at;
  f->pref = 0;
  switch (f->wt) {
    case WT_VARINT: {
      unsigned m = rem < 10 ? (unsigned)rem : 10, i;
      for (i = 0; i < m; i++)
        if ((at[i] & 0x80) == 0) break;
      if (i == m) return fail(c, at, "unterminated varint");
      f->len = i + 1;
      break;
    }
    case WT_64BIT:
      if (rem < 8) return fail(c, at, "truncated 64-bit field");
      f->len = 8;
      break;
    case WT_LEN: {
      unsigned hmax = rem < 5 ? (unsigned)rem : 5, i;
      size_t val = 0;
      unsigned sh = 0;
      for (i = 0; i < hmax; i++) {
        val |= ((size_t)at[i] & 0x7f) << sh;
        sh += 7;
        if ((at[i] & 0x80) == 0) break;
      }
      if (i == hmax) return fail(c, at, "bad length prefix");
      f->pref = i + 1;
      if (val > INT_MAX) return fail(c, at, "length prefix too large");
      if (f->pref + val > rem) return fail(c, at, "length past the end");
      f->len = f->pref + val;
      break;
    }
    case WT_32BIT:
      if (rem < 4) return fail(c, at, "truncated 32-bit field");
      f->len = 4;
      break;
    default: return fail(c, at, "unsupported wire type");
  }
  c->p = at + f->len;
  return AL_OK;
}

/* protobuf-c's parse_uint64 / parse_uint32 of a scanned varint of n (1-10) bytes: the value's
 * low 64 (32) bits. */
static uint64_t varint_value(const uint8_t *d, size_t n) {
  uint64_t v = 0;
  unsigned sh = 0;
  for (size_t i = 0; i < n; i++, sh += 7) v |= (uint64_t)(d[i] & 0x7f) << sh;
  return v;
}

static int get_u64(cursor *c, const field *f, uint64_t *out) {
  if (f->wt != WT_VARINT) return fail(c, f->data, "wrong wire type for an integer field");
  *out = varint_value(f->data, f->len);
  return AL_OK;
}

static int get_u32(cursor *c, const field *f, uint32_t *out) {
  uint64_t v;
  int rc = get_u64(c, f, &v);
  *out = (uint32_t)v;
  return rc;
}

/* protobuf-c's parse_boolean: any wire type; true when a byte (prefix included) has a low bit. */
static int get_bool(const field *f) {
  for (size_t i = 0; i < f->len; i++)
    if (f->data[i] & 0x7f) return 1;
  return 0;
}

/* A string as the C string protobuf-c makes would read: up to its first NUL. */
static int get_str(cursor *c, const field *f, const char **s, size_t *n) {
  if (f->wt != WT_LEN) return fail(c, f->data, "wrong wire type for a string field");
  *s = (const char *)f->data + f->pref;
  const void *nul = memchr(*s, 0, f->len - f->pref);
  *n = nul ? (size_t)((const char *)nul - *s) : f->len - f->pref;
  return AL_OK;
}

static void shape_push(idec_member *m, uint64_t v) {
  if (m->n_shape < THEADER_MAX_DIMS) m->shape[m->n_shape] = v;
  m->n_shape++;
}

/* Member.shape: packed (wire type 2) or one plain varint. */
static int get_shape(cursor *c, const field *f, idec_member *m) {
  if (f->wt == WT_VARINT) {
    shape_push(m, varint_value(f->data, f->len));
    return AL_OK;
  }
  if (f->wt != WT_LEN) return fail(c, f->data, "wrong wire type for a repeated integer field");
  const uint8_t *at = f->data + f->pref, *end = f->data + f->len;
  while (at < end) {
    size_t rem = (size_t)(end - at), m10 = rem < 10 ? rem : 10, i;
    for (i = 0; i < m10; i++)
      if ((at[i] & 0x80) == 0) break;
    if (i == m10) return fail(c, at, "bad packed varint");
    shape_push(m, varint_value(at, i + 1));
    at += i + 1;
  }
  return AL_OK;
}

static int decode_member(cursor *outer, const field *mf, idec_member *m) {
  memset(m, 0, sizeof *m);
  m->ext = m->dtype = m->codec = "";
  if (mf->wt != WT_LEN) return fail(outer, mf->data, "wrong wire type for a message field");
  cursor c = {outer->base, mf->data + mf->pref, mf->data + mf->len, outer->err};
  while (c.p < c.end) {
    field f;
    int rc = next_field(&c, &f);
    if (rc) return rc;
    switch (f.tag) {
      case 1: rc = get_str(&c, &f, &m->ext, &m->ext_len); break;
      case 2: rc = get_u64(&c, &f, &m->offset); break;
      case 3: rc = get_u64(&c, &f, &m->size); break;
      case 4: m->lz4 = get_bool(&f); break;
      case 5: rc = get_str(&c, &f, &m->dtype, &m->dtype_len); break;
      case 6: rc = get_shape(&c, &f, m); break;
      case 7: rc = get_u64(&c, &f, &m->data_offset); break;
      case 8: rc = get_str(&c, &f, &m->codec, &m->codec_len); break;
      default: break; /* unknown field: skipped */
    }
    if (rc) return rc;
  }
  return AL_OK;
}

static int decode_sample(cursor *outer, const field *sf, idec_scratch *scr, idec_sample *s) {
  memset(s, 0, sizeof *s);
  s->key = "";
  if (sf->wt != WT_LEN) return fail(outer, sf->data, "wrong wire type for a message field");
  cursor c = {outer->base, sf->data + sf->pref, sf->data + sf->len, outer->err};
  idec_member spill;
  while (c.p < c.end) {
    field f;
    int rc = next_field(&c, &f);
    if (rc) return rc;
    switch (f.tag) {
      case 1: rc = get_str(&c, &f, &s->key, &s->key_len); break;
      case 2: rc = get_u32(&c, &f, &s->shard); break;
      case 3: {
        idec_member *m = &spill;
        if (s->n_members < IDEC_MEMBERS_KEPT) {
          if (s->n_members >= scr->cap) {
            rc = grow_array((void **)&scr->mem, &scr->cap, s->n_members + 1, sizeof *scr->mem,
                            "a sample's members");
            if (rc) return rc;
          }
          m = &scr->mem[s->n_members];
        }
        rc = decode_member(&c, &f, m);
        s->n_members++;
        break;
      }
      case 4: rc = get_u32(&c, &f, &s->width); break;
      case 5: rc = get_u32(&c, &f, &s->height); break;
      case 6: rc = get_u32(&c, &f, &s->frames); break;
      case 7:
        if (f.wt != WT_32BIT) return fail(&c, f.data, "wrong wire type for a float field");
        memcpy(&s->fps, f.data, sizeof s->fps);
        break;
      default: break;
    }
    if (rc) return rc;
  }
  s->members = scr->mem;
  return AL_OK;
}

void idec_scratch_free(idec_scratch *s) {
  free(s->mem);
  s->mem = NULL;
  s->cap = 0;
}

int idec_index_chunk(const uint8_t *buf, size_t len, idec_scratch *scratch, idec_sample_fn fn,
                     void *ctx, idec_error *err) {
  cursor c = {buf, buf, buf + len, err};
  /* The top level whole first, as protobuf-c scans it before parsing any field. */
  int other = 0;
  while (c.p < c.end) {
    field f;
    int rc = next_field(&c, &f);
    if (rc) return rc;
    if (f.tag == 1 || f.tag == 3 || f.tag == 4) other = 1;
    if (f.tag == 2 && f.wt != WT_LEN)
      return fail(&c, f.data, "wrong wire type for a message field");
  }
  if (other) return IDEC_OTHER;
  c.p = buf;
  while (c.p < c.end) {
    field f;
    int rc = next_field(&c, &f);
    if (rc) return rc;
    if (f.tag != 2) continue;
    idec_sample s;
    if ((rc = decode_sample(&c, &f, scratch, &s))) return rc;
    if ((rc = fn(ctx, &s))) return rc;
  }
  return AL_OK;
}
