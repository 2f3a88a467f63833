/*
 * cache_internal.h - a folder of fetched byte ranges shared by the streams (processes, ranks)
 * of one node, with a byte limit. Internal to //stream.
 *
 * An entry is one range of one remote object, named by a 64-bit hash of (URL, ETag, size,
 * offset, length): a changed object (another ETag or size) never matches an old entry.
 *   No reader sees a half-written entry: it is written to a temporary name (pid and thread in
 *   it), fsync'd, then renamed into place.
 *   No two processes (or threads) fetch the same entry at once: the fetcher holds an open file
 *   description lock (F_OFD_SETLKW) on the entry's byte (its hash modulo 2^40) of the folder's
 *   file "locks" while it checks, fetches and stores; a second fetcher of the entry waits on
 *   that lock, then finds the entry stored. OFD locks are released by the kernel when a
 *   process dies, so a crash leaves no stale lock (at most a temporary file, removed by the
 *   next eviction scan).
 *   The byte limit holds across processes: after storing an entry, the storer takes the
 *   folder's lock (byte 0 of "locks", exclusive), sums the entry files in the folder and
 *   removes them in mtime order until the sum is within the limit. An entry a reader has
 *   consumed (`consume`: read into a batch) gets mtime 1 s after the epoch, so it goes first:
 *   in one epoch a member is read once, so what was read is what is needed latest (never),
 *   and entries fetched ahead and not yet read (mtime: when stored) stay; among those the
 *   earliest stored go first. Every process evicts under that one lock, so the sum the folder holds
 *   exceeds the limit at most by the entries being written at that moment (one per fetching
 *   thread) until their storer's scan.
 * Thread safety: a stream_cache is read-only after stream_cache_open; each thread passes its
 * own lock descriptor (stream_cache_lock_fd).
 */
#ifndef AL_CACHE_INTERNAL_H
#define AL_CACHE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stream_cache stream_cache;

/* Creates the folder when missing. */
int stream_cache_open(stream_cache **out, const char *dir, uint64_t limit_bytes);
void stream_cache_close(stream_cache *c);

/* A descriptor of the folder's lock file for one thread (close it when done). */
int stream_cache_lock_fd(const stream_cache *c, int *fd);

/* Fetches [off, off + len) of the object (url, etag, size) into dst, calling fetch only when
 * the folder does not hold the entry; *hit says which. *evicted adds the bytes the store's
 * eviction removed. */
typedef int (*stream_cache_fetch_fn)(void *ctx, uint64_t off, uint64_t len, void *dst);
int stream_cache_get(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                     uint64_t size, uint64_t off, uint64_t len, void *dst,
                     stream_cache_fetch_fn fetch, void *ctx, int consume, int *hit,
                     uint64_t *evicted);

uint64_t stream_cache_limit(const stream_cache *c);

/* A whole object (url, etag, size) as one entry file (a shard that cannot be read by ranges):
 * *fd is a read-only descriptor of the entry, from the folder when it holds it (*hit = 1),
 * else after fill(ctx, fd, name) wrote the object to a temporary file of the folder (under
 * the entry's lock, so two processes never download it at once; fsync'd and renamed into
 * place, then the byte limit enforced as for ranges). Only for objects within the limit.
 * The descriptor stays valid when a later eviction removes the entry (the disk space then
 * returns when it is closed). */
typedef int (*stream_cache_fill_fn)(void *ctx, int fd, const char *name);
int stream_cache_get_object(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                            uint64_t size, stream_cache_fill_fn fill, void *ctx, int *fd, int *hit,
                            uint64_t *evicted);

#ifdef __cplusplus
}
#endif

#endif /* AL_CACHE_INTERNAL_H */
