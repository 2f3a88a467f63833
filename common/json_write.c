/* JSON strings and numbers that are valid whatever the input; see json_write_internal.h. */
#include "common/json_write_internal.h"

#include <math.h>
#include <string.h>

size_t jsonw_utf8_len(const unsigned char *s, size_t n) {
  if (n == 0) return 0;
  unsigned c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte (RFC 3629 table) */
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0; /* no overlong forms */
    if (c == 0xED) hi = 0x9F; /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90; /* no overlong forms */
    if (c == 0xF4) hi = 0x8F; /* at most U+10FFFF */
  } else
    return 0; /* 0x80..0xC1 (continuation, overlong lead), 0xF5..0xFF */
  if (n < len) return 0;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return len;
}

void jsonw_string_n(FILE *out, const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', out);
  size_t i = 0;
  while (s && i < n) {
    unsigned char c = s[i];
    if (c == '"' || c == '\\') {
      fprintf(out, "\\%c", c);
      i++;
    } else if (c < 0x20) {
      fprintf(out, "\\u%04x", c);
      i++;
    } else if (c < 0x80) {
      fputc(c, out);
      i++;
    } else {
      size_t k = jsonw_utf8_len(s + i, n - i);
      if (k == 0) {
        fputs("\\ufffd", out);
        i++;
      } else {
        fwrite(s + i, 1, k, out);
        i += k;
      }
    }
  }
  fputc('"', out);
}

void jsonw_string(FILE *out, const char *s) { jsonw_string_n(out, s, s ? strlen(s) : 0); }

void jsonw_number(FILE *out, const char *fmt, double v) {
  if (!isfinite(v)) {
    fputs("null", out);
    return;
  }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  fprintf(out, fmt, v);
#pragma GCC diagnostic pop
}

void jsonw_field_number(FILE *out, const char *sep, const char *key, const char *fmt, double v) {
  fputs(sep, out);
  jsonw_string(out, key);
  fputs(": ", out);
  jsonw_number(out, fmt, v);
}
