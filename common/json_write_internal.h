/*
 * json_write_internal.h - the one JSON string writer of the C code (cost model
 * and manifest reports, `adaptiveload stream --json`). Internal to the
 * modules, not exported.
 */
#ifndef AL_JSON_WRITE_INTERNAL_H
#define AL_JSON_WRITE_INTERNAL_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes `s` as a JSON string literal: quoted, with \" and \\ escaped and
 * control characters as \u00XX. NULL is written as "". */
void jsonw_string(FILE *out, const char *s);

#ifdef __cplusplus
}
#endif

#endif /* AL_JSON_WRITE_INTERNAL_H */
