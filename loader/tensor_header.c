/* Headers of typed payload members (.npy, .safetensors). See tensor_header_internal.h. */
#include "loader/tensor_header_internal.h"

#include <jansson.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/al_status.h"

static const struct {
  const char *name;
  size_t size;
  const char *st; /* safetensors spelling */
} dtypes[THEADER_DTYPE_COUNT] = {
    [THEADER_NONE] = {"none", 0, NULL},    [THEADER_BOOL] = {"bool", 1, "BOOL"},
    [THEADER_U8] = {"uint8", 1, "U8"},     [THEADER_I8] = {"int8", 1, "I8"},
    [THEADER_I16] = {"int16", 2, "I16"},   [THEADER_U16] = {"uint16", 2, "U16"},
    [THEADER_I32] = {"int32", 4, "I32"},   [THEADER_U32] = {"uint32", 4, "U32"},
    [THEADER_I64] = {"int64", 8, "I64"},   [THEADER_U64] = {"uint64", 8, "U64"},
    [THEADER_F16] = {"float16", 2, "F16"}, [THEADER_BF16] = {"bfloat16", 2, "BF16"},
    [THEADER_F32] = {"float32", 4, "F32"}, [THEADER_F64] = {"float64", 8, "F64"},
};

const char *theader_dtype_name(theader_dtype d) {
  if ((unsigned)d >= THEADER_DTYPE_COUNT) return "?";
  return dtypes[d].name;
}

size_t theader_dtype_size(theader_dtype d) {
  if ((unsigned)d >= THEADER_DTYPE_COUNT) return 0;
  return dtypes[d].size;
}

int theader_dtype_from_name(const char *name, theader_dtype *out) {
  if (!name || !out) return al_set_error(AL_EINVAL, "theader_dtype_from_name: NULL argument");
  for (int d = THEADER_NONE + 1; d < THEADER_DTYPE_COUNT; d++) {
    if (strcmp(name, dtypes[d].name) == 0) {
      *out = (theader_dtype)d;
      return AL_OK;
    }
  }
  return al_set_error(AL_EFORMAT, "unknown dtype name '%.64s'", name);
}

static int ends_with(const char *s, size_t n, const char *suf) {
  size_t k = strlen(suf);
  return n >= k && memcmp(s + n - k, suf, k) == 0 && (n == k || s[n - k - 1] == '.');
}

theader_kind theader_kind_of(const char *ext) {
  if (!ext) return THEADER_KIND_NONE;
  size_t n = strlen(ext);
  if (n > 4 && memcmp(ext + n - 4, ".lz4", 4) == 0) n -= 4;
  if (ends_with(ext, n, "npy")) return THEADER_KIND_NPY;
  if (ends_with(ext, n, "safetensors")) return THEADER_KIND_SAFETENSORS;
  return THEADER_KIND_NONE;
}

/* product(shape) x elem into *bytes; -1 on overflow. */
static int shape_bytes(const theader *h, uint64_t *bytes) {
  uint64_t n = theader_dtype_size(h->dtype);
  int zero = 0;
  for (uint32_t i = 0; i < h->ndim; i++) {
    if (h->shape[i] == 0) zero = 1;
  }
  if (zero) {
    *bytes = 0;
    return 0;
  }
  for (uint32_t i = 0; i < h->ndim; i++) {
    if (n > UINT64_MAX / h->shape[i]) return -1;
    n *= h->shape[i];
  }
  *bytes = n;
  return 0;
}

/* ---- .npy ---------------------------------------------------------------------------- */

typedef struct npy_cur {
  const char *s; /* the dict text */
  size_t n, i;   /* its length, position */
  size_t base;   /* member byte of s[0] */
} npy_cur;

static int npy_err(const npy_cur *c, const char *what) {
  return al_set_error(AL_EFORMAT, "npy header: byte %zu: %s", c->base + c->i, what);
}

static void npy_ws(npy_cur *c) {
  while (c->i < c->n &&
         (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
    c->i++;
}

static int npy_eat(npy_cur *c, char ch) {
  npy_ws(c);
  if (c->i < c->n && c->s[c->i] == ch) {
    c->i++;
    return 1;
  }
  return 0;
}

/* A Python string literal ('...' or "...", no escapes) into buf (NUL-terminated). */
static int npy_string(npy_cur *c, char *buf, size_t cap) {
  npy_ws(c);
  if (c->i >= c->n || (c->s[c->i] != '\'' && c->s[c->i] != '"'))
    return npy_err(c, "expected a quoted string");
  char q = c->s[c->i++];
  size_t start = c->i;
  while (c->i < c->n && c->s[c->i] != q) {
    if (c->s[c->i] == '\\') return npy_err(c, "escapes in strings are not supported");
    c->i++;
  }
  if (c->i >= c->n) return npy_err(c, "unterminated string");
  size_t len = c->i - start;
  c->i++;
  if (len >= cap) {
    c->i = start;
    return npy_err(c, "string too long");
  }
  memcpy(buf, c->s + start, len);
  buf[len] = '\0';
  return AL_OK;
}

static int npy_word(npy_cur *c, const char *w) {
  size_t k = strlen(w);
  npy_ws(c);
  if (c->n - c->i >= k && memcmp(c->s + c->i, w, k) == 0) {
    c->i += k;
    return 1;
  }
  return 0;
}

static int npy_descr(npy_cur *c, const char *d, theader_dtype *out) {
  static const struct {
    const char *code;
    theader_dtype t;
  } codes[] = {{"b1", THEADER_BOOL}, {"u1", THEADER_U8},  {"i1", THEADER_I8},  {"i2", THEADER_I16},
               {"u2", THEADER_U16},  {"i4", THEADER_I32}, {"u4", THEADER_U32}, {"i8", THEADER_I64},
               {"u8", THEADER_U64},  {"f2", THEADER_F16}, {"f4", THEADER_F32}, {"f8", THEADER_F64}};
  char msg[200];
  if (strlen(d) == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '>' || d[0] == '=')) {
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++) {
      if (strcmp(d + 1, codes[k].code) != 0) continue;
      size_t sz = dtypes[codes[k].t].size;
      if (sz == 1 ? (d[0] == '<' || d[0] == '|') : d[0] == '<') {
        *out = codes[k].t;
        return AL_OK;
      }
      if (sz > 1 && d[0] == '>') {
        snprintf(msg, sizeof msg, "big-endian dtype '%s' is not supported (little-endian only)", d);
      } else {
        snprintf(msg, sizeof msg, "dtype '%s': byte order '%c' is not supported", d, d[0]);
      }
      return npy_err(c, msg);
    }
  }
  if (strcmp(d, "<V2") == 0 || strcmp(d, "|V2") == 0) {
    snprintf(msg, sizeof msg,
             "dtype '%s' (a 2-byte void: how ml_dtypes' bfloat16 is saved, indistinguishable "
             "from other voids) is not supported: save bfloat16 as safetensors BF16",
             d);
    return npy_err(c, msg);
  }
  snprintf(msg, sizeof msg, "unknown dtype '%.40s'", d);
  return npy_err(c, msg);
}

static int npy_shape(npy_cur *c, theader *h) {
  if (!npy_eat(c, '(')) return npy_err(c, "shape must be a tuple");
  h->ndim = 0;
  for (;;) {
    npy_ws(c);
    if (npy_eat(c, ')')) return AL_OK;
    if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9')
      return npy_err(c, "shape entries must be non-negative integers");
    if (h->ndim == THEADER_MAX_DIMS) return npy_err(c, "more than 8 dimensions");
    uint64_t v = 0;
    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') {
      unsigned dig = (unsigned)(c->s[c->i] - '0');
      if (v > (UINT64_MAX - dig) / 10) return npy_err(c, "shape entry overflows 64 bits");
      v = v * 10 + dig;
      c->i++;
    }
    if (c->i < c->n && (c->s[c->i] == 'L' || c->s[c->i] == 'l')) c->i++; /* Python 2 long */
    h->shape[h->ndim++] = v;
    if (npy_eat(c, ',')) continue;
    if (npy_eat(c, ')')) {
      if (h->ndim == 1) return npy_err(c, "a 1-tuple needs a trailing comma");
      return AL_OK;
    }
    return npy_err(c, "expected ',' or ')' in shape");
  }
}

/* The limit counts the whole header: the preamble (magic, version, length field) and the dict. */
static int npy_too_long(size_t pre, uint64_t dict) {
  return al_set_error(AL_EFORMAT,
                      "npy header: byte 8: header of %llu bytes (%zu-byte preamble + %llu-byte "
                      "dict) exceeds the limit of %u bytes",
                      (unsigned long long)(pre + dict), pre, (unsigned long long)dict,
                      THEADER_MAX_HEADER_BYTES);
}

/* The magic, the format version and the header length: *pre (bytes before the dict) and
 * *hlen (the dict's). AL_OK; AL_ERANGE with *need when more bytes must be read; AL_EFORMAT. */
static int npy_preamble(const uint8_t *b, size_t have, uint64_t member_size, size_t *pre,
                        size_t *hlen, size_t *need) {
  static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (have < 10) {
    if (member_size < 10)
      return al_set_error(AL_EFORMAT, "npy header: byte 0: member of %llu bytes is too short",
                          (unsigned long long)member_size);
    *need = 10;
    return AL_ERANGE;
  }
  if (memcmp(b, magic, 6) != 0)
    return al_set_error(AL_EFORMAT, "npy header: byte 0: bad magic (not \\x93NUMPY)");
  if (b[6] == 1 && b[7] == 0) {
    *pre = 10;
    *hlen = (size_t)b[8] | (size_t)b[9] << 8;
  } else if ((b[6] == 2 || b[6] == 3) && b[7] == 0) {
    *pre = 12;
    if (have < 12) {
      if (member_size < 12)
        return al_set_error(AL_EFORMAT, "npy header: byte 8: member ends inside the header");
      *need = 12;
      return AL_ERANGE;
    }
    uint64_t l = (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
                 (uint64_t)b[11] << 24;
    if (12 + l > THEADER_MAX_HEADER_BYTES) return npy_too_long(12, l);
    *hlen = (size_t)l;
  } else {
    return al_set_error(AL_EFORMAT, "npy header: byte 6: unsupported format version %u.%u", b[6],
                        b[7]);
  }
  if (*pre + *hlen > THEADER_MAX_HEADER_BYTES) return npy_too_long(*pre, *hlen);
  if (*pre + *hlen > member_size)
    return al_set_error(AL_EFORMAT,
                        "npy header: byte 8: header length %zu runs past the member's end "
                        "(%llu bytes)",
                        *hlen, (unsigned long long)member_size);
  if (have < *pre + *hlen) {
    *need = *pre + *hlen;
    return AL_ERANGE;
  }
  return AL_OK;
}

/* The keys the dict must hold, each once. */
enum { NPY_DESCR = 1, NPY_FORTRAN = 2, NPY_SHAPE = 4 };

/* The value of dict key `key` (read at c->s[key_at]); `seen` gathers the keys. */
static int npy_value(npy_cur *c, const char *key, size_t key_at, int *seen, theader *out) {
  static const char *const names[3] = {"descr", "fortran_order", "shape"};
  int which = 0;
  for (int k = 0; k < 3 && !which; k++)
    if (strcmp(key, names[k]) == 0) which = 1 << k;
  if (!which) {
    char msg[80];
    c->i = key_at;
    snprintf(msg, sizeof msg, "unexpected key '%s'", key);
    return npy_err(c, msg);
  }
  if (*seen & which) {
    char msg[80];
    c->i = key_at;
    snprintf(msg, sizeof msg, "repeated key '%s'", key);
    return npy_err(c, msg);
  }
  *seen |= which;
  int rc;
  if (which == NPY_DESCR) {
    char d[48];
    npy_ws(c);
    if (c->i < c->n && c->s[c->i] == '[') return npy_err(c, "structured dtypes are not supported");
    size_t at = c->i;
    if ((rc = npy_string(c, d, sizeof d)) != AL_OK) return rc;
    size_t after = c->i;
    c->i = at;
    if ((rc = npy_descr(c, d, &out->dtype)) != AL_OK) return rc;
    c->i = after;
  } else if (which == NPY_FORTRAN) {
    size_t at = (npy_ws(c), c->i);
    if (npy_word(c, "True")) {
      c->i = at;
      return npy_err(c, "Fortran-order arrays are not supported (save C order)");
    }
    if (!npy_word(c, "False")) return npy_err(c, "fortran_order must be True or False");
  } else if ((rc = npy_shape(c, out)) != AL_OK) {
    return rc;
  }
  return AL_OK;
}

/* The header dict: no NUL byte, a newline at its end, '{' key: value, ... '}'. The keys
 * found in *seen. */
static int npy_dict(npy_cur *c, int *seen, theader *out) {
  for (size_t k = 0; k < c->n; k++) {
    if (c->s[k] == '\0') {
      c->i = k;
      return npy_err(c, "NUL byte in header");
    }
  }
  if (c->n == 0 || c->s[c->n - 1] != '\n') {
    c->i = c->n ? c->n - 1 : 0;
    return npy_err(c, "header does not end with a newline");
  }
  if (!npy_eat(c, '{')) return npy_err(c, "expected '{'");
  for (;;) {
    char key[32];
    int rc;
    if (npy_eat(c, '}')) break;
    size_t key_at = c->i;
    if ((rc = npy_string(c, key, sizeof key)) != AL_OK) return rc;
    if (!npy_eat(c, ':')) return npy_err(c, "expected ':'");
    if ((rc = npy_value(c, key, key_at, seen, out)) != AL_OK) return rc;
    if (npy_eat(c, ',')) continue;
    if (npy_eat(c, '}')) break;
    return npy_err(c, "expected ',' or '}'");
  }
  npy_ws(c);
  if (c->i != c->n) return npy_err(c, "bytes after the dict");
  return AL_OK;
}

static int npy_parse(const uint8_t *b, size_t have, uint64_t member_size, theader *out,
                     size_t *need) {
  size_t pre = 0, hlen = 0;
  int rc = npy_preamble(b, have, member_size, &pre, &hlen, need);
  if (rc != AL_OK) return rc;
  npy_cur c = {0};
  c.s = (const char *)b + pre;
  c.n = hlen;
  c.base = pre;
  int seen = 0;
  if ((rc = npy_dict(&c, &seen, out)) != AL_OK) return rc;
  if (seen != (NPY_DESCR | NPY_FORTRAN | NPY_SHAPE))
    return al_set_error(AL_EFORMAT, "npy header: byte %zu: missing key '%s'", pre,
                        !(seen & NPY_DESCR)     ? "descr"
                        : !(seen & NPY_FORTRAN) ? "fortran_order"
                                                : "shape");
  out->data_offset = pre + hlen;
  if (shape_bytes(out, &out->data_bytes) != 0)
    return al_set_error(AL_EFORMAT, "npy header: byte %zu: shape product overflows 64 bits", pre);
  if (out->data_bytes != member_size - out->data_offset)
    return al_set_error(AL_EFORMAT,
                        "npy header: byte %llu: shape and dtype give %llu data bytes, the member "
                        "holds %llu after its header",
                        (unsigned long long)out->data_offset, (unsigned long long)out->data_bytes,
                        (unsigned long long)(member_size - out->data_offset));
  return AL_OK;
}

/* ---- safetensors ----------------------------------------------------------------------- */

static int st_u64(json_t *v, uint64_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
  *out = (uint64_t)json_integer_value(v);
  return 0;
}

/* One tensor entry into *h (shape, dtype) and its [begin, end) offsets. */
static int st_entry(const char *name, json_t *t, theader *h, uint64_t *begin, uint64_t *end) {
  json_t *dt = json_object_get(t, "dtype"), *sh = json_object_get(t, "shape"),
         *off = json_object_get(t, "data_offsets");
  if (!json_is_object(t))
    return al_set_error(AL_EFORMAT, "safetensors header: byte 8: tensor '%.64s' is not an object",
                        name);
  if (!json_is_string(dt))
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 8: tensor '%.64s': dtype is not a string", name);
  h->dtype = THEADER_NONE;
  for (int d = THEADER_NONE + 1; d < THEADER_DTYPE_COUNT; d++) {
    if (strcmp(json_string_value(dt), dtypes[d].st) == 0) h->dtype = (theader_dtype)d;
  }
  if (h->dtype == THEADER_NONE)
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 8: tensor '%.64s': unsupported dtype '%.32s'",
                        name, json_string_value(dt));
  if (!json_is_array(sh))
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 8: tensor '%.64s': shape is not an array", name);
  if (json_array_size(sh) > THEADER_MAX_DIMS)
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 8: tensor '%.64s': %zu dimensions (max 8)", name,
                        json_array_size(sh));
  h->ndim = (uint32_t)json_array_size(sh);
  for (uint32_t i = 0; i < h->ndim; i++) {
    if (st_u64(json_array_get(sh, i), &h->shape[i]) != 0)
      return al_set_error(AL_EFORMAT,
                          "safetensors header: byte 8: tensor '%.64s': shape entries must be "
                          "non-negative integers",
                          name);
  }
  if (!json_is_array(off) || json_array_size(off) != 2 ||
      st_u64(json_array_get(off, 0), begin) != 0 || st_u64(json_array_get(off, 1), end) != 0 ||
      *end < *begin)
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 8: tensor '%.64s': data_offsets must be [begin, end] "
                        "with 0 <= begin <= end",
                        name);
  if (shape_bytes(h, &h->data_bytes) != 0)
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 8: tensor '%.64s': shape product overflows 64 bits",
                        name);
  if (h->data_bytes != *end - *begin)
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 8: tensor '%.64s': shape and dtype give %llu bytes, "
                        "data_offsets %llu",
                        name, (unsigned long long)h->data_bytes,
                        (unsigned long long)(*end - *begin));
  return AL_OK;
}

/* The 8-byte header length: *n. AL_OK; AL_ERANGE with *need when more bytes must be read;
 * AL_EFORMAT. */
static int st_preamble(const uint8_t *b, size_t have, uint64_t member_size, uint64_t *n,
                       size_t *need) {
  if (have < 8) {
    if (member_size < 8)
      return al_set_error(AL_EFORMAT,
                          "safetensors header: byte 0: member of %llu bytes is too short",
                          (unsigned long long)member_size);
    *need = 8;
    return AL_ERANGE;
  }
  *n = 0;
  for (int k = 7; k >= 0; k--) *n = *n << 8 | b[k];
  if (*n > THEADER_MAX_HEADER_BYTES - 8) /* the limit counts the 8-byte length too */
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 0: header of %llu bytes (8-byte length + "
                        "%llu-byte JSON) exceeds the limit of %u bytes",
                        *n > UINT64_MAX - 8 ? (unsigned long long)UINT64_MAX
                                            : (unsigned long long)(*n + 8),
                        (unsigned long long)*n, THEADER_MAX_HEADER_BYTES);
  if (8 + *n > member_size)
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 0: header length %llu runs past the member's "
                        "end (%llu bytes)",
                        (unsigned long long)*n, (unsigned long long)member_size);
  if (have < 8 + *n) {
    *need = (size_t)(8 + *n);
    return AL_ERANGE;
  }
  return AL_OK;
}

/* The tensors of the header object (header of n bytes): the one named `name` (NULL: the only
 * one) into *out; the data section must end where the member does. */
static int st_tensors(json_t *root, uint64_t n, uint64_t member_size, const char *name,
                      theader *out) {
  const char *key;
  json_t *val;
  const char *pick = NULL;
  size_t tensors = 0;
  uint64_t max_end = 0;
  theader h;
  uint64_t begin = 0, end = 0;
  int rc;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "__metadata__") == 0) continue;
    memset(&h, 0, sizeof h);
    if ((rc = st_entry(key, val, &h, &begin, &end)) != AL_OK) return rc;
    tensors++;
    if (end > max_end) max_end = end;
    if (name ? strcmp(key, name) == 0 : tensors == 1) {
      pick = key;
      *out = h;
      out->data_offset = 8 + n + begin;
    }
  }
  if (tensors == 0) return al_set_error(AL_EFORMAT, "safetensors header: byte 8: no tensor");
  if (!name && tensors > 1)
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte 8: %zu tensors; which one to take must be named",
                        tensors);
  if (!pick)
    return al_set_error(AL_ENOTFOUND,
                        "safetensors header: byte 8: no tensor named '%.64s' (%zu tensors)", name,
                        tensors);
  if (8 + n + max_end != member_size)
    return al_set_error(AL_EFORMAT,
                        "safetensors header: byte %llu: the data section is %llu bytes, the "
                        "member holds %llu after its header",
                        (unsigned long long)(8 + n), (unsigned long long)max_end,
                        (unsigned long long)(member_size - 8 - n));
  return AL_OK;
}

static int st_parse(const uint8_t *b, size_t have, uint64_t member_size, const char *name,
                    theader *out, size_t *need) {
  uint64_t n = 0;
  int rc = st_preamble(b, have, member_size, &n, need);
  if (rc != AL_OK) return rc;
  if (n == 0 || b[8] != '{')
    return al_set_error(AL_EFORMAT, "safetensors header: byte 8: the header must be a JSON object");
  json_error_t jerr;
  json_t *root = json_loadb((const char *)b + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return al_set_error(AL_EFORMAT, "safetensors header: byte %lld: broken JSON: %s",
                        (long long)(8 + (jerr.position > 0 ? jerr.position : 0)), jerr.text);
  if (!json_is_object(root))
    rc = al_set_error(AL_EFORMAT, "safetensors header: byte 8: the header must be a JSON object");
  else
    rc = st_tensors(root, n, member_size, name, out);
  json_decref(root);
  return rc;
}

int theader_parse(theader_kind kind, const void *buf, size_t have, uint64_t member_size,
                  const char *name, theader *out, size_t *need) {
  int rc;
  if (!out || !need || (!buf && have > 0))
    return al_set_error(AL_EINVAL, "theader_parse: NULL argument");
  memset(out, 0, sizeof *out);
  if (have > member_size) have = (size_t)member_size;
  switch (kind) {
    case THEADER_KIND_NPY: rc = npy_parse(buf, have, member_size, out, need); break;
    case THEADER_KIND_SAFETENSORS: rc = st_parse(buf, have, member_size, name, out, need); break;
    default: return al_set_error(AL_EINVAL, "theader_parse: no header kind");
  }
  if (rc != AL_OK) memset(out, 0, sizeof *out);
  return rc;
}

/* dtype and shape as "float16 (16, 5, 42, 42)". */
static void describe(char *buf, size_t cap, const char *dtype, uint32_t ndim,
                     const uint64_t *shape) {
  size_t at = (size_t)snprintf(buf, cap, "%s (", dtype);
  for (uint32_t d = 0; d < ndim && at < cap; d++)
    at += (size_t)snprintf(buf + at, cap - at, "%s%" PRIu64, d ? ", " : "", shape[d]);
  if (at < cap) snprintf(buf + at, cap - at, ")");
}

int theader_check_recorded(const theader *h, const char *dtype, uint32_t ndim,
                           const uint64_t *shape) {
  if (ndim > THEADER_MAX_DIMS) ndim = THEADER_MAX_DIMS;
  int same = h->ndim == ndim && !strcmp(theader_dtype_name(h->dtype), dtype);
  for (uint32_t d = 0; same && d < h->ndim; d++) same = h->shape[d] == shape[d];
  if (same) return AL_OK;
  char read[256], rec[256];
  describe(read, sizeof read, theader_dtype_name(h->dtype), h->ndim, h->shape);
  describe(rec, sizeof rec, dtype, ndim, shape);
  return al_set_error(AL_EFORMAT, "its header says %s, the index recorded %s", read, rec);
}
