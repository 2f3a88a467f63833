/*
 * shard_fp_internal.h - a shard's content fingerprint (shard_fp.c: its identity without mtime),
 * computed and checked through a reader of the caller's (internal to //loader; the stream's
 * index source checks its shards with it, stream/index_source.c).
 *
 * Plain tar: the 512-byte header blocks right before each indexed member's data (one read
 * each); compressed: the first and last 64 KiB of the shard.
 */
#ifndef AL_SHARD_FP_INTERNAL_H
#define AL_SHARD_FP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/al_index.h"

/* Exactly n bytes at off into buf, or a status with the error recorded (a file's pread, a URL's
 * cache: loader/shard_bytes_internal.h's shard_bytes_read_at; any storage object:
 * storage/storage_internal.h's storage_read_at). path: the shard's, for messages. */
typedef int (*index_read_at_fn)(void *ctx, void *buf, size_t n, uint64_t off, const char *path);

/* The content fingerprint of shard `shard` (al_shard_info.content_fp) from the bytes read_at
 * gives: AL_OK, AL_EFORMAT (a member without a header before it) or the read's error. */
int index_shard_content_fp_by(const al_index *idx, uint32_t shard, index_read_at_fn read_at,
                              void *ctx, uint64_t *out);

/* The content fingerprint of shard `shard` read through read_at and compared with the recorded
 * one: AL_OK, AL_ENOTFOUND (none recorded), AL_EFORMAT "PATH: shard changed since indexing: ..."
 * or the read's error (al_index_shard_verify for a descriptor; the checker, shard_check.c; the
 * stream's index source). */
int index_shard_fp_check(const al_index *idx, uint32_t shard, index_read_at_fn read_at, void *ctx);

#endif /* AL_SHARD_FP_INTERNAL_H */
