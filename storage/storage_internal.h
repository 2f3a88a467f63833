/*
 * storage/storage_internal.h - bytes at a path or a URL behind one interface (internal to
 * //storage; the index and the stream use it): what kind of place a shard path names, and a
 * table of operations per kind (open, stat, ranged read, list, close), as libarchive puts its
 * formats behind a table of function pointers. A local file, an http(s):// object and an s3://
 * object are opened alike by storage_open, which picks the backend by storage_url_kind, the
 * one classifier of paths and URLs.
 *
 * Errors: every function returning int gives an al_status and records the message
 * (common/al_status.h), naming the path or the URL (a URL's user:password@ as ***@).
 */
#ifndef AL_STORAGE_STORAGE_INTERNAL_H
#define AL_STORAGE_STORAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_status.h"

/* The kinds of place, the values of loader/al_index.h's AL_SHARD_*. */
enum { STORAGE_LOCAL = 0, STORAGE_HTTP = 1, STORAGE_S3 = 2 };

/* STORAGE_HTTP (http://, https://), STORAGE_S3 (s3://) or STORAGE_LOCAL (anything else: a
 * path), from the scheme alone, in any case (HTTP:// is http://). */
int storage_url_kind(const char *path_or_url);

#endif /* AL_STORAGE_STORAGE_INTERNAL_H */
