/* KEY.json metadata: jansson parse, field aliases, range checks. See meta_internal.h. */
#include "loader/meta_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t meta_tokens(uint32_t width, uint32_t height, uint32_t frames) {
  uint64_t tp = frames ? 1 + (uint64_t)(frames - 1) / 4 : 0;
  return tp * (height / 16) * (width / 16);
}

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    default: return "a number";
  }
}

/* First present, non-null field among `names` (NULL-terminated). */
static json_t *field(json_t *obj, const char *const *names, const char **which) {
  for (; *names; names++) {
    json_t *v = json_object_get(obj, *names);
    if (v && !json_is_null(v)) {
      *which = *names;
      return v;
    }
  }
  return NULL;
}

/* Whether s[0..n) is a JSON number (RFC 8259 section 6), the whole of it: what a numeric
 * string must hold. */
static int is_json_number(const char *s, size_t n) {
  size_t i = 0;
  if (i < n && s[i] == '-') i++;
  if (i < n && s[i] == '0') {
    i++;
  } else {
    size_t d = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == d) return 0;
  }
  if (i < n && s[i] == '.') {
    size_t d = ++i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == d) return 0;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t d = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == d) return 0;
  }
  return i == n;
}

/* A string holding a JSON number ("81", "29.97"): 0 and *out (finite), else -1. */
static int string_number(const json_t *v, double *out) {
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  if (!is_json_number(s, n)) return -1;
  double d = strtod(s, NULL);
  if (!isfinite(d)) return -1;
  *out = d;
  return 0;
}

/* A string holding a ratio "A/B" of decimal digits with B > 0 ("30000/1001", as ffprobe
 * writes frame rates), or "0/0" (ffmpeg's unknown rate, as ffprobe writes avg_frame_rate of
 * a still image): 0 and *out (0 for "0/0": the rate unknown, as a number 0 says), else -1. */
static int string_ratio(const json_t *v, double *out) {
  const char *s = json_string_value(v);
  size_t n = json_string_length(v), slash = 0;
  while (slash < n && s[slash] >= '0' && s[slash] <= '9') slash++;
  if (slash == 0 || slash == n || s[slash] != '/' || slash + 1 == n) return -1;
  for (size_t i = slash + 1; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return -1;
  double a = strtod(s, NULL), b = strtod(s + slash + 1, NULL);
  if (a == 0 && b == 0) {
    *out = 0;
    return AL_OK;
  }
  if (!(b > 0) || !isfinite(a) || !isfinite(b)) return -1;
  *out = a / b;
  return 0;
}

/* The refused string, quoted, at most 40 bytes, bytes outside printable ASCII as '?'. */
static void quote(const json_t *v, char *out, size_t cap) {
  const char *s = json_string_value(v);
  size_t n = json_string_length(v), k = 0;
  out[k++] = '"';
  for (size_t i = 0; i < n && i < 40 && k + 5 < cap; i++)
    out[k++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  if (n > 40 && k + 5 < cap) k += (size_t)snprintf(out + k, cap - k, "...");
  out[k++] = '"';
  out[k] = '\0';
}

/* A positive integer field in [1, max]; integral reals (832.0) are accepted, and so is a string
 * holding a JSON number ("81", as ffprobe writes nb_frames), the whole string. */
static int get_count(json_t *v, const char *name, uint32_t max, uint32_t *out) {
  double d;
  if (json_is_string(v)) {
    char q[64];
    quote(v, q, sizeof q);
    if (string_number(v, &d)) {
      return al_set_error(AL_EFORMAT,
                          "%s must be a number or a string holding one, got the string %s", name,
                          q);
    }
    if (!(d == floor(d))) {
      return al_set_error(AL_EFORMAT, "%s must be a whole number (got the string %s)", name, q);
    }
    if (d < 1) {
      return al_set_error(AL_EFORMAT, "%s must be >= 1 (got the string %s)", name, q);
    }
    if (d > max) {
      return al_set_error(AL_EFORMAT, "%s %s exceeds the limit %u", name, q, max);
    }
    *out = (uint32_t)d;
    return AL_OK;
  }
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < 1) {
      return al_set_error(AL_EFORMAT, "%s must be >= 1 (got %lld)", name, (long long)i);
    }
    if ((unsigned long long)i > max) {
      return al_set_error(AL_EFORMAT, "%s %lld exceeds the limit %u", name, (long long)i, max);
    }
    *out = (uint32_t)i;
    return AL_OK;
  }
  if (!json_is_real(v)) {
    return al_set_error(AL_EFORMAT, "%s must be a number, got %s", name, type_name(v));
  }
  d = json_real_value(v);
  if (!(d == floor(d))) {
    return al_set_error(AL_EFORMAT, "%s must be a whole number (got %g)", name, d);
  }
  if (d < 1) {
    return al_set_error(AL_EFORMAT, "%s must be >= 1 (got %g)", name, d);
  }
  if (d > max) {
    return al_set_error(AL_EFORMAT, "%s %g exceeds the limit %u", name, d, max);
  }
  *out = (uint32_t)d;
  return AL_OK;
}

/* A real field: a number, a string holding one, or with `ratio` also "A/B" (frame rates). */
static int get_real(json_t *v, const char *name, int ratio, double *out) {
  if (json_is_string(v)) {
    if (!string_number(v, out) || (ratio && !string_ratio(v, out))) return AL_OK;
    char q[64];
    quote(v, q, sizeof q);
    return al_set_error(AL_EFORMAT,
                        "%s must be a number, a string holding one%s, got the string %s", name,
                        ratio ? " or a ratio \"A/B\" (B > 0)" : "", q);
  }
  if (!json_is_number(v)) {
    return al_set_error(AL_EFORMAT, "%s must be a number, got %s", name, type_name(v));
  }
  *out = json_number_value(v);
  return AL_OK;
}

static int parse_obj(json_t *root, const meta_fields *f, meta_record *out) {
  const char *which = NULL;
  int rc;
  const char *wnames[] = {f->width, NULL};
  const char *hnames[] = {f->height, NULL};
  const char *fnames[] = {f->frames,   "frames",      "num_frames", "nframes",
                          "nb_frames", "frame_count", "length",     NULL};
  const char *rnames[] = {f->fps, "fps", "frame_rate", "r_frame_rate", "avg_frame_rate", NULL};
  const char *dnames[] = {f->duration, NULL};
  if (!json_is_object(root)) {
    return al_set_error(AL_EFORMAT, "metadata must be a JSON object, got %s", type_name(root));
  }
  json_t *w = field(root, wnames, &which);
  json_t *h = field(root, hnames, &which);
  if (!w && !h && f->dims_optional) {
    out->no_dims = 1;
  } else if (!w || !h) {
    return al_set_error(AL_EFORMAT, "missing field '%s'", !w ? f->width : f->height);
  } else {
    if ((rc = get_count(w, f->width, AL_META_MAX_SIDE, &out->width))) return rc;
    if ((rc = get_count(h, f->height, AL_META_MAX_SIDE, &out->height))) return rc;
  }

  double fps = 0;
  json_t *r = field(root, rnames, &which);
  if (r) {
    if ((rc = get_real(r, which, 1, &fps))) return rc;
    if (!isfinite(fps) || fps < 0 || fps > AL_META_MAX_FPS) {
      return al_set_error(AL_EFORMAT, "%s %g is outside [0, %g]", which, fps, AL_META_MAX_FPS);
    }
  }
  out->fps = (float)fps;
  out->has_fps = r != NULL;

  const char *dwhich = NULL;
  json_t *d = field(root, dnames, &dwhich);
  out->has_duration = d != NULL;
  json_t *fr = field(root, fnames, &which);
  if (fr) {
    if ((rc = get_count(fr, which, AL_META_MAX_FRAMES, &out->frames))) return rc;
  } else {
    which = dwhich;
    if (!d) {
      out->frames = 1; /* an image */
      out->frames_from = META_FRAMES_IMAGE;
    } else {
      out->frames_from = META_FRAMES_DURATION;
      double dur;
      if ((rc = get_real(d, which, 0, &dur))) return rc;
      if (!isfinite(dur) || dur <= 0) {
        return al_set_error(AL_EFORMAT, "%s must be > 0 (got %g)", which, dur);
      }
      if (fps <= 0) {
        return al_set_error(AL_EFORMAT, "%s given without %s: frame count unknown", which, f->fps);
      }
      double frames = floor(dur * fps + 0.5);
      if (frames < 1) frames = 1;
      if (frames > AL_META_MAX_FRAMES) {
        return al_set_error(AL_EFORMAT, "%s %g s at %g fps is %.0f frames, beyond the limit %u",
                            which, dur, fps, frames, AL_META_MAX_FRAMES);
      }
      out->frames = (uint32_t)frames;
    }
  }
  uint64_t tokens = meta_tokens(out->width, out->height, out->frames);
  if (!out->no_dims && tokens > UINT32_MAX) {
    return al_set_error(AL_EFORMAT, "%ux%u x %u frames is %llu tokens, beyond 2^32-1", out->width,
                        out->height, out->frames, (unsigned long long)tokens);
  }
  return AL_OK;
}

int meta_parse(const char *buf, size_t len, const meta_fields *f, meta_record *out) {
  json_error_t err;
  memset(out, 0, sizeof *out);
  /* RFC 8259 has no place for a raw NUL; jansson stops reading at one inside a value. */
  const char *nul = memchr(buf, '\0', len);
  if (nul) {
    return al_set_error(AL_EFORMAT,
                        "broken JSON: NUL byte at byte %zu of the metadata (RFC 8259 allows none)",
                        (size_t)(nul - buf));
  }
  json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    return al_set_error(AL_EFORMAT, "broken JSON: line %d col %d: %s", err.line, err.column,
                        err.text);
  }
  int rc = parse_obj(root, f, out);
  json_decref(root);
  return rc;
}
