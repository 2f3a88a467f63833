/*
 * remote_shard_internal.h - a remote shard as the index's scan reads it (internal to
 * //loader): one storage_http_object with a byte cache in front of it, so that the tar walk
 * (libarchive, through shard_source.c) reads the headers and metadata members of a plain tar
 * from a few coalesced ranged GETs instead of the whole object.
 *
 * Plain tar (remote_shard_plan): the member list comes from storage_tar_scan over the cache
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
 * Compressed shards (remote_shard_stream): read through in order, in ranged GETs of 8 MiB
 * (one buffer, no cache).
 *
 * One remote_shard is used by one thread. Errors name the URL (never credentials): functions
 * returning int give 0 or -1 with a message in err (err_cap bytes).
 */
#ifndef AL_REMOTE_SHARD_INTERNAL_H
#define AL_REMOTE_SHARD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "storage/client_internal.h"

typedef struct remote_shard remote_shard;

/* One HEAD: size and ETag pinned (storage_http_open). */
int remote_shard_open(storage_client *c, const char *url, remote_shard **out, char *err,
                      size_t err_cap);
void remote_shard_close(remote_shard *rs);
uint64_t remote_shard_size(const remote_shard *rs);
const char *remote_shard_etag(const remote_shard *rs);
/* Requests sent and body bytes received so far (retries included). */
storage_counts remote_shard_stats(const remote_shard *rs);

/* Plain tar: lists the members and fetches what the walk reads (above). window 0: 16 KiB;
 * gap 0: 4 KiB. A listing that fails (not a tar, damaged) is not an error here: the walk
 * then reads on demand and reports the damage as for a local shard. -1 only when a request
 * fails (unreachable, 403, changed object). */
int remote_shard_plan(remote_shard *rs, size_t window, size_t gap, char *err, size_t err_cap);

/* Compressed: reads go through one 8 MiB buffer, refilled in order. */
void remote_shard_stream(remote_shard *rs);

/* Exactly len bytes at off (from the cache, else one GET that is then cached). */
int remote_shard_pread(remote_shard *rs, uint64_t off, void *buf, size_t len, char *err,
                       size_t err_cap);

/* Up to cap bytes at off: what the cache holds contiguously from off, else a GET of up to cap
 * bytes (up to the next cached byte; 8 MiB at a time for a streamed shard). 0 at the end of
 * the object, -1 on a failed request. */
ssize_t remote_shard_read(remote_shard *rs, uint64_t off, void *buf, size_t cap, char *err,
                          size_t err_cap);

#endif /* AL_REMOTE_SHARD_INTERNAL_H */
