/*
 * remote_fetch_internal.h - members of shards that live on an HTTP(S) server or in S3
 * (a shard path that is a URL, e.g. after `stream --root DIR=http://host/dir`), read with
 * ranged GETs through //storage, optionally through a local cache folder
 * (stream/cache_internal.h). Internal to //stream.
 *
 * A stream_remote is shared by the reader threads of one stream: it holds the libcurl
 * client (thread-safe), the cache and the counters (atomic). Each shard is pinned once, at
 * its first use, by a HEAD request: its size must be the one indexed (else "object changed",
 * naming the URL), and its ETag is kept so every later ranged GET sends If-Match (the remote
 * layer refuses different bytes). A stream_remote_reader belongs to one reader thread: it
 * holds that thread's open objects (one connection each), opened lazily per shard.
 *
 * A member of a plain (seekable) tar shard is one ranged GET of its bytes [offset, offset +
 * size) (LZ4 members are decoded after the fetch). A compressed shard (tar.gz, tar.zst, ...)
 * cannot be read by ranges: stream_remote_download brings the whole object onto local disk
 * once (stream/shard_download_internal.h), then it is read as a local compressed shard.
 *
 * Faults: the remote layer retries (backoff, Retry-After) within its total timeout
 * (ADAPTIVELOAD_REMOTE_TIMEOUT_S seconds, default 60), which bounds each pin and each read as
 * a whole, a server trickling its answer included; then the read fails naming the URL, which
 * the stream reports for the sample (or skips and counts it under AL_STREAM_SKIP_SAMPLE).
 * With a cache folder, entries are named by the object (storage_url_identity_len) when the
 * server gives an ETag, so a presigned URL signed again finds them.
 */
#ifndef AL_REMOTE_FETCH_INTERNAL_H
#define AL_REMOTE_FETCH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/al_index.h"
#include "stream/cache_internal.h"

typedef struct stream_remote stream_remote;
typedef struct stream_remote_reader stream_remote_reader;

/* cache_dir NULL or "": no cache (every read is fetched). cache_bytes 0 = 1 GiB. storage: the
 * resolved settings (al_storage_resolve: endpoint, region, addressing, the budget of one
 * operation; 0 or NULL = the remote layer's defaults). */
int stream_remote_new(stream_remote **out, size_t n_shards, const char *cache_dir,
                      uint64_t cache_bytes, const al_storage_options *storage);
void stream_remote_free(stream_remote *r);
/* Every read and pin of r fails at once from now on, those in flight included (the remote
 * layer's storage_client_cancel). Thread-safe. */
void stream_remote_cancel(stream_remote *r);

/* Pins shard `id` at `url` (HEAD): its size must be `size`, and its ETag `etag` unless that is
 * NULL or "" (an index of a local copy, or a moved one). Called once per shard under the
 * shard table's lock. Errors name the URL. */
int stream_remote_pin(stream_remote *r, uint32_t id, const char *url, uint64_t size,
                      const char *etag);

int stream_remote_reader_new(stream_remote_reader **out, stream_remote *r);
void stream_remote_reader_free(stream_remote_reader *rr);

/* Exactly len bytes of pinned shard `id` at byte `off` into dst, for a batch of plan step
 * `step` (the cache's eviction key, cache_internal.h): from the cache when it holds them, else
 * one ranged GET (then stored in the cache). What the reader threads call; the prefetcher
 * stores ahead with stream_remote_warm_run. */
int stream_remote_read(stream_remote_reader *rr, uint32_t id, uint64_t off, uint64_t len, void *dst,
                       uint32_t step);

/* The prefetcher's request: members (spans, ascending, of pinned shard `id`) of the read at plan
 * step `step` stored in the cache with one ranged GET over those the cache lacks
 * (stream_cache_warm_run); each fetched member counts as a cache miss. AL_OK without a cache. */
int stream_remote_warm_run(stream_remote_reader *rr, uint32_t id, const stream_cache_span *spans,
                           size_t n, uint32_t step);

/* The whole of pinned shard `id` on local disk (stream/shard_download_internal.h): an entry of
 * the cache folder, else a private temporary file; *fd is its descriptor (pread only; the
 * caller closes it). The ranged GETs of the download go through this reader's object of the
 * shard (If-Match the pinned ETag) and count in bytes_fetched and requests; the download
 * counts as one cache miss, an entry found in the folder as one cache hit. */
int stream_remote_download(stream_remote_reader *rr, uint32_t id, int *fd);

typedef struct stream_remote_counts {
  uint64_t bytes_fetched; /* body bytes received from servers */
  uint64_t requests;      /* HTTP requests sent (HEADs, retries included) */
  uint64_t cache_hits;    /* member reads of the readers (or whole compressed shards) served by
                             the cache folder */
  uint64_t cache_misses;  /* members (or whole compressed shards) fetched from a server (by
                             readers or the prefetcher) */
  uint64_t evicted_bytes; /* bytes this stream removed from the cache folder */
} stream_remote_counts;

void stream_remote_get_counts(const stream_remote *r, stream_remote_counts *out);

#endif /* AL_REMOTE_FETCH_INTERNAL_H */
