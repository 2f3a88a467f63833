/*
 * shard_bytes_internal.h - a shard's bytes as the index's scan and the checker read them
 * (internal to //loader): one storage_obj (storage/storage_internal.h, any backend), and, when
 * the backend's reads are requests to a server (storage_is_remote), a byte cache in front of
 * it, so that the tar walk (libarchive, through shard_source.c) reads the headers and metadata
 * members of a plain tar from a few coalesced ranged GETs instead of the whole object. A local
 * file is read straight through (pread): the calls below that only fill the cache do nothing
 * for it.
 *
 * Plain tar (shard_bytes_plan): the member list comes from storage_tar_scan over the cache
 * (windows of `window` bytes from each header: neighbouring small members in one GET; over
 * dense members the windows double, up to 1 MiB, as local reads do), then
 * the byte ranges the walk will read are fetched where the windows did not bring them: every
 * member's header blocks (pax and GNU extensions included), the data of KEY.json and
 * KEY.json.lz4, the first bytes of typed members (.npy, .safetensors; 256 bytes, 4 KiB for
 * their .lz4 forms) and the end-of-archive blocks; ranges closer than `gap` bytes go in one
 * GET. What the walk then reads beyond the cache (a longer typed header, a damaged tar the
 * listing stopped at) is fetched when asked for, so the walk sees the same bytes as a local
 * one: the same samples, offsets and rejections.
 *
 * Compressed shards (shard_bytes_stream): read through in order, in ranged GETs of 8 MiB
 * (one buffer, no cache).
 *
 * One shard_bytes is used by one thread. Errors: functions returning int give an al_status
 * and record the message (common/al_status.h), naming the path or the URL (never
 * credentials).
 */
#ifndef AL_SHARD_BYTES_INTERNAL_H
#define AL_SHARD_BYTES_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "storage/storage_internal.h"

typedef struct shard_bytes shard_bytes;

/* Opens path (storage_open: a file, or one HEAD that pins a URL's size and ETag). */
int shard_bytes_open(storage_client *c, const char *path, shard_bytes **out);
void shard_bytes_close(shard_bytes *sb);
/* Size, identity (a URL's ETag, a file's mtime) as opened. */
const storage_stat *shard_bytes_stat(const shard_bytes *sb);
/* What messages call the object: "file", "object" (its backend's noun). */
const char *shard_bytes_noun(const shard_bytes *sb);
/* Requests sent and body bytes received so far (retries included; zero for a file). */
storage_counts shard_bytes_counts(const shard_bytes *sb);

/* [off, off + len) into the cache (one GET of what it lacks); nothing for a file. */
int shard_bytes_prefetch(shard_bytes *sb, uint64_t off, size_t len);

/* Plain tar: lists the members and fetches what the walk reads (above); nothing for a file.
 * window 0: 16 KiB; gap 0: 4 KiB. A listing that fails (not a tar, damaged) is not an error
 * here: the walk then reads on demand and reports the damage as for a local shard. An error
 * only when a request fails (unreachable, 403, changed object). */
int shard_bytes_plan(shard_bytes *sb, size_t window, size_t gap);

/* Compressed: reads go through one 8 MiB buffer, refilled in order (a URL; a file is read
 * straight through anyway). */
void shard_bytes_stream(shard_bytes *sb);

/* Exactly len bytes at off (a file's, or from the cache, else one GET that is then cached).
 * AL_ERANGE "... lie past its end" when [off, off + len) is not inside the object. */
int shard_bytes_pread(shard_bytes *sb, uint64_t off, void *buf, size_t len);

/* Up to cap bytes at off into buf, *got of them (0 at the end of the object): a file's pread;
 * what the cache holds contiguously from off, else a GET of up to cap bytes (up to the next
 * cached byte; 8 MiB at a time for a streamed shard). */
int shard_bytes_read(shard_bytes *sb, uint64_t off, void *buf, size_t cap, size_t *got);

/* index_read_at_fn (index_internal.h) over a shard_bytes (ctx): shard_bytes_pread. */
int shard_bytes_read_at(void *ctx, void *buf, size_t n, uint64_t off, const char *path);

#endif /* AL_SHARD_BYTES_INTERNAL_H */
