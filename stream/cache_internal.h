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
 *   The byte limit holds across processes: the folder's running total (in the lock file's first
 *   16 bytes) is updated under the folder's lock (byte 0 of "locks", exclusive) by every store;
 *   when it would pass the limit, the storer sums the entry files in the folder and removes
 *   them in key order down to 15/16 of the limit (so the next sixteenth of the limit is stored
 *   without a scan; a scan per store made an epoch quadratic in its entries). Every process
 *   evicts under that one lock, so the folder exceeds the limit at most by the entries being
 *   written at that moment (one per fetching thread).
 *   The key order follows the plan (evict what is read again latest, as far as the plan shows):
 *   an entry's key is its mtime in seconds. An entry stored or touched ahead of its read at
 *   step s (the prefetcher: not yet read) has key 2^30 + (2^29 - 1 - s): the furthest read goes
 *   first, and a touch only raises a key. An entry read into a batch at step s (`consume`) has
 *   key 1 + s: in one epoch a rank reads a member once, so a read entry is needed again latest
 *   (by another rank of its SP group, reading it in the same step, or in a later epoch, whose
 *   prefetcher raises it again); read entries go before every unread one, the oldest reads
 *   first, so the entries of the step being read stay while older reads can go. Keys of read
 *   entries and unread ones stay below 2^31 (any file system's time range); a whole object
 *   (stream_cache_get_object) in use has the current time, the highest key.
 *   Nothing outside the folder is written or touched, whatever was planted in it (another user
 *   sharing the folder, a hostile setup): the folder is opened once, by stream_cache_open (its
 *   own path is the caller's and may be a link), and every name in it is opened relative to
 *   that descriptor with O_NOFOLLOW, so a link at a name is never followed and a later swap of
 *   the folder's path does not move the cache. Temporary files are created O_CREAT|O_EXCL with
 *   names "t-PID-TID-N": a name that exists (a link, a leftover, a namesake thread of another
 *   pid namespace) is left alone and N + 1 tried, up to 64 names, then the store fails naming
 *   the last one. Entries are made by rename, which replaces whatever is at the name rather
 *   than writing through it. An entry that is a link, a FIFO or device, or a regular file with
 *   other names (a hard link) reads as absent and the next store replaces it; a folder there
 *   fails the store, naming it. "locks" that is a link, not a regular file, or has other names
 *   is refused, naming it (remove it). Keys are set through the descriptor of the file itself
 *   (futimens), never through a name. The eviction scan reads the folder through its
 *   descriptor, never follows a link, and removes links at entry and temporary names.
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

/* Creates the folder when missing and opens it (the descriptor every name is opened from). */
int stream_cache_open(stream_cache **out, const char *dir, uint64_t limit_bytes);
void stream_cache_close(stream_cache *c);

/* A descriptor of the folder's lock file for one thread (close it when done); AL_EINVAL naming
 * it when "locks" is a link, not a regular file or a file with other names. */
int stream_cache_lock_fd(const stream_cache *c, int *fd);

/* Fetches [off, off + len) of the object (url, etag, size) into dst, calling fetch only when
 * the folder does not hold the entry; *hit says which. *evicted adds the bytes the store's
 * eviction removed. */
typedef int (*stream_cache_fetch_fn)(void *ctx, uint64_t off, uint64_t len, void *dst);
int stream_cache_get(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                     uint64_t size, uint64_t off, uint64_t len, void *dst,
                     stream_cache_fetch_fn fetch, void *ctx, int consume, uint32_t step, int *hit,
                     uint64_t *evicted);

/* A run of ranges of one object that the prefetcher stores with one request: spans in ascending
 * offset order, not overlapping, within the object. Those the folder holds get the key of a read
 * at `step` (unless they have a sooner one) and are not fetched; the others are fetched with ONE
 * fetch over [first missing offset, last missing end) (the bytes between them too: the caller
 * keeps gaps small) under the entry locks of all of them (taken in ascending order, so two runs
 * sharing entries cannot deadlock), each stored as its own entry. counted(ctx, n) is told the n
 * spans fetched once the fetch succeeded and before any of them is stored, so whoever finds one
 * stored finds it counted. Spans larger than the limit are skipped (their reader fetches them). */
typedef void (*stream_cache_count_fn)(void *ctx, size_t n);
typedef struct stream_cache_span {
  uint64_t off, len;
} stream_cache_span;
#define STREAM_CACHE_MAX_RUN 32
int stream_cache_warm_run(const stream_cache *c, int lock_fd, const char *url, const char *etag,
                          uint64_t size, const stream_cache_span *spans, size_t n, uint32_t step,
                          stream_cache_fetch_fn fetch, stream_cache_count_fn counted, void *ctx,
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
