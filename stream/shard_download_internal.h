/*
 * shard_download_internal.h - a whole shard object on local disk, for a shard at a URL that
 * cannot be read by byte ranges (a compressed tar: tar.gz, tar.zst, tar.lz4, tar.bz2, tar.xz;
 * a ranged GET cannot seek into a compressed stream). Internal to //stream.
 *
 * The object is fetched in order, in ranges of STREAM_DOWNLOAD_CHUNK bytes (each one GET
 * with If-Match, through the caller's fetch function), and written:
 *   with a cache folder, when the object fits within its byte limit: as one entry of the
 *   folder (stream_cache_get_object: atomic rename, OFD lock so two processes never download
 *   it at once, the byte limit, keyed by URL, ETag and size), found there by later streams;
 *   otherwise: to a private temporary file in $TMPDIR (/tmp when unset), removed from the
 *   folder as soon as it is created, so its disk space returns when the descriptor is closed
 *   (the stream's end), or when the process dies. The disk there must hold the object.
 * The caller checks the bytes against the index (size, content fingerprint).
 *
 * Errors name the URL: a failed request (the fetch function's message), a full disk or
 * another write error (naming the file written).
 */
#ifndef AL_SHARD_DOWNLOAD_INTERNAL_H
#define AL_SHARD_DOWNLOAD_INTERNAL_H

#include <stdint.h>

#include "stream/cache_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define STREAM_DOWNLOAD_CHUNK ((uint64_t)8 << 20)

/* Object (url, etag, size) onto local disk: *fd is a descriptor of its bytes (use pread; close
 * it when done). cache NULL: the private temporary file. *hit: found in the cache folder (no
 * request sent). *evicted adds the bytes the store's eviction removed. */
int stream_shard_download(const stream_cache *cache, int lock_fd, const char *url, const char *etag,
                          uint64_t size, stream_cache_fetch_fn fetch, void *ctx, int *fd, int *hit,
                          uint64_t *evicted);

#ifdef __cplusplus
}
#endif

#endif /* AL_SHARD_DOWNLOAD_INTERNAL_H */
