/*
 * member_reader_internal.h - reading one sample's payload member into a growable buffer:
 * a ranged read at the indexed offset for plain tar shards, libarchive's sequential
 * reader for compressed (not seekable) shards, LZ4 frame decoding for
 * KEY.ext.lz4 members. Internal to //stream. Every byte comes through storage
 * (storage/storage_internal.h), whose table says how a shard is read.
 *
 * A shard table opens each shard once (lazily) and checks it against the index. A shard
 * whose backend reads a file (storage_ops.remote 0) is opened once, shared by all readers (a
 * file's object reads with pread: no per-thread position): its size must be the one
 * indexed, then its content fingerprint (stream_source.verify: loader/shard_fp.c hashes the
 * header block of every indexed member of a plain tar, the first and last 64 KiB of a
 * compressed shard) must match the one recorded; only when the index recorded none is
 * mtime_ns compared. A shard whose backend is a server's (a URL: every read a request) is
 * pinned by a HEAD instead and read per reader thread through the cache folder
 * (stream/remote_fetch_internal.h); a compressed one is downloaded whole at its first read
 * (stream/shard_download_internal.h), checked like a local shard (size, fingerprint; no
 * mtime) and read with libarchive from the download. A stream_reader holds one reader
 * thread's scratch state and must not be shared between threads.
 *
 * Errors name the shard path, the key, the member and the byte offset.
 */
#ifndef AL_MEMBER_READER_INTERNAL_H
#define AL_MEMBER_READER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "stream/engine_internal.h"
#include "storage/storage_internal.h"
#include "stream/remote_fetch_internal.h"

/* A host buffer that grows on demand; contents up to `keep` survive growth. */
typedef struct stream_growbuf {
  uint8_t *p;
  size_t cap;
  int pinned;
} stream_growbuf;

int stream_growbuf_reserve(stream_growbuf *b, size_t need, size_t keep);
void stream_growbuf_free(stream_growbuf *b);

typedef struct stream_shard_table stream_shard_table;

int stream_shard_table_new(stream_shard_table **out, const stream_source *src);
void stream_shard_table_free(stream_shard_table *t);

/* The cache folder and its byte limit for shards at URLs (stream/remote_fetch_internal.h);
 * call before the first read. dir NULL: no cache. */
int stream_shard_table_set_cache(stream_shard_table *t, const char *dir, uint64_t bytes);
/* The storage settings of shards at URLs, resolved (al_storage_resolve), and a note appended to
 * the message of a failed pin ("" for none); copied. Call before the first read. AL_OK or
 * AL_ENOMEM. */
int stream_shard_table_set_storage(stream_shard_table *t, const al_storage_options *storage,
                                   const char *note);

/* Makes every remote fetch of the table fail at once ("cancelled"), now and later, so that
 * closing a stream does not wait for readers retrying against a server that is down.
 * Thread-safe; NULL is ignored. */
void stream_shard_table_cancel(stream_shard_table *t);

/* What the remote shards cost so far: 1 with *out filled when some shard is a URL, else 0. */
int stream_shard_table_remote_counts(stream_shard_table *t, stream_remote_counts *out);

typedef struct stream_reader stream_reader;

int stream_reader_new(stream_reader **out, stream_shard_table *t, size_t block);

/* The cap on one payload member's stored bytes and on what an LZ4 member decodes to:
 * ADAPTIVELOAD_MAX_MEMBER_BYTES when set to a positive number, else
 * AL_STREAM_MAX_MEMBER_DEFAULT (al_stream.h). Over it, the read fails (AL_ERANGE)
 * naming shard, key, member and byte offset, before the memory is allocated. */
uint64_t stream_max_member_bytes(void);
void stream_reader_free(stream_reader *r);

/* Reads the payload of `job` into b->p + off (growing b, keeping its first
 * `off` bytes); *len is the payload size (decoded size for LZ4 members). */
int stream_reader_read(stream_reader *r, const stream_source_job *job, stream_growbuf *b,
                       size_t off, size_t *len);

/* Whether shard `id` is read through stream_remote (its backend is a server's: a URL), without
 * opening it. */
int stream_shard_table_is_remote(stream_shard_table *t, uint32_t id);

/* Stores members of one remote shard in the cache folder ahead of the readers, with one ranged
 * GET over those it lacks (jobs: ascending offsets, of jobs[0]'s shard, read at jobs[0].step;
 * at most STREAM_CACHE_MAX_RUN; others are left out); a compressed shard is downloaded whole.
 * Nothing for local shards or without a cache. What the prefetcher calls. */
int stream_reader_warm(stream_reader *r, const stream_source_job *jobs, size_t n);

/* Sets this reader's cap (0 = stream_max_member_bytes()). */
void stream_reader_set_max_member(stream_reader *r, uint64_t max_member);
uint64_t stream_reader_max_member(const stream_reader *r);

/* The reader's own scratch buffer (plain memory; contents are the caller's between calls). */
stream_growbuf *stream_reader_scratch(stream_reader *r);

/* For a plain member (not LZ4) of a seekable local shard: checks the shard (as
 * stream_reader_read does), the member's bounds and the cap, and gives the shard's object
 * (*obj, shared: any thread may read it) and path. *obj = NULL (AL_OK) when the member must be
 * read whole instead (stream_reader_read): LZ4 members, libarchive shards, shards at URLs. */
int stream_reader_direct(stream_reader *r, const stream_source_job *job, storage_obj **obj,
                         const char **path);

/* Exactly n bytes at shard offset `at` of member `job` (stream_reader_direct's obj); errors
 * name shard, key, member and offset. */
int stream_reader_pread(storage_obj *obj, const char *path, const stream_source_job *job, void *dst,
                        size_t n, uint64_t at);

#endif /* AL_MEMBER_READER_INTERNAL_H */
