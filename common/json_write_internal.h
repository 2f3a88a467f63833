/*
 * json_write_internal.h - the one JSON writer of the C code (cost model and
 * manifest reports, `inspect --json/--jsonl`, `adaptiveload stream --json`).
 * Internal to the modules, not exported.
 *
 * Whatever the bytes, the output is valid JSON (RFC 8259) in valid UTF-8:
 *  - strings: well-formed UTF-8 sequences (RFC 3629: shortest form, no
 *    surrogates, at most U+10FFFF) are copied; every byte that is not part of
 *    one is written as \ufffd (U+FFFD REPLACEMENT CHARACTER), one per byte, so
 *    the same input always gives the same output; '"' and '\' are escaped and
 *    control characters (< 0x20) written as \u00XX.
 *  - numbers: NaN and infinities have no JSON spelling and are written as null.
 */
#ifndef AL_JSON_WRITE_INTERNAL_H
#define AL_JSON_WRITE_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes `s` (NUL-terminated) as a JSON string literal. NULL is written as "". */
void jsonw_string(FILE *out, const char *s);

/* The same for `len` bytes (NUL bytes become \u0000). */
void jsonw_string_n(FILE *out, const char *s, size_t len);

/* Writes `v` with the printf format `fmt` (one double conversion such as "%.6g"
 * or "%.3f"), or null when `v` is NaN or infinite. */
void jsonw_number(FILE *out, const char *fmt, double v);

/* Writes `sep` (e.g. ", " or ""), then "key": and jsonw_number(fmt, v). */
void jsonw_field_number(FILE *out, const char *sep, const char *key, const char *fmt, double v);

/* Length of the well-formed UTF-8 sequence at s[0..n), 0 when s[0] starts none. */
size_t jsonw_utf8_len(const unsigned char *s, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* AL_JSON_WRITE_INTERNAL_H */
