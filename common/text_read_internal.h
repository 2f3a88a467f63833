/*
 * text_read_internal.h - text inputs read whole (shape benchmarks and traces, cost/; bucket
 * tables, planner/): the file into memory, then JSON or a line format depending on the first
 * byte (internal to the modules).
 */
#ifndef AL_TEXT_READ_INTERNAL_H
#define AL_TEXT_READ_INTERNAL_H

#include <stddef.h>

#include <jansson.h>

/* Nonzero when the first non-blank byte of the text is '{': the JSON form. */
int text_is_json(const char *text, size_t len);

/* Parses JSON text into *root (json_decref it). A syntax error is AL_EFORMAT
 * "NAME: line L column C: broken JSON: ...". */
int text_json_parse(const char *text, size_t len, const char *name, json_t **root);

/* The number at key k1 of object `o` (or at k2 when k1 is absent; k2 may be NULL): 0 with
 * *out set, 1 when absent, -1 when not a number. */
int text_json_num(json_t *o, const char *k1, const char *k2, double *out);

/* Reads the file at `path` into a malloc'd *buf (*len bytes; free it). A file
 * of max_bytes or more is AL_ERANGE "PATH: WHAT larger than N MiB"; open and
 * read errors are AL_EIO naming the path and errno. */
int text_read_file(const char *path, size_t max_bytes, const char *what, char **buf, size_t *len);

#endif /* AL_TEXT_READ_INTERNAL_H */
