/*
 * prefetch_internal.h - fetching remote members into the cache folder ahead of the reader
 * threads, in plan order. Internal to //stream.
 *
 * The stream knows its sequence of micro-batches (the rank plan, first, stride), so it knows
 * every member it will read and when. With shards at URLs and a cache folder, a prefetcher
 * walks that sequence in order, batch by batch (a run's batches as its feed plans them: the
 * prefetcher waits for a window the feed has not planned yet, so it reads ahead into the
 * queued chunks and across their boundaries), skipping the batches the consumer already took:
 * each batch's remote members,
 * sorted by shard and offset, are cut into runs (members of one shard less than 64 KiB apart,
 * at most STREAM_CACHE_MAX_RUN members and 64 MiB), and `parallel` threads take the next run
 * in plan order (earliest deadline first) and store its members with ONE ranged GET
 * (stream_reader_warm; the bytes between members, tar headers and small members not asked for,
 * are fetched and dropped), while the members fetched ahead of the consumer hold at most half
 * the cache's byte limit (so what is fetched ahead is not evicted before it is read). Batches a
 * reader thread is filling are still fetched ahead when they fit, but not the samples its
 * reader has begun (`begun`: a member the reader read may already be evicted; an entry's lock
 * keeps the two from fetching one member at once); delivered batches are skipped. Local shards cost
 * nothing (no unit is fetched for them). A failed prefetch is dropped: the reader thread that
 * reaches the member reads it again and reports the error.
 */
#ifndef AL_PREFETCH_INTERNAL_H
#define AL_PREFETCH_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "stream/member_reader_internal.h"

typedef struct stream_prefetch stream_prefetch;

typedef struct stream_prefetch_args {
  const stream_source *src;
  /* The batch at a position of the rank sequence and its sample records (pb->first indexes
   * them), valid until done(ctx, pos); may block (a run's feed); an error: the batch is not
   * fetched ahead. */
  int (*batch)(void *ctx, uint64_t pos, const stream_plan_batch **pb,
               const stream_plan_sample **samples);
  void (*done)(void *ctx, uint64_t pos);
  void *ctx;
  stream_shard_table *shards;
  const char *const *members;
  size_t n_members;
  uint64_t first, stride, total;         /* the stream's batches: first + k * stride, k < total */
  const atomic_uint_fast64_t *delivered; /* batches the consumer took so far */
  const atomic_uint_fast32_t *begun;     /* per batch: samples its reader has begun (and
                                            fetches itself) */
  uint64_t ahead_bytes;                  /* most member bytes fetched ahead of the consumer */
  int parallel;                          /* threads (parallel requests) */
  size_t read_block;
} stream_prefetch_args;

/* Starts the threads; *out NULL (AL_OK) when there is nothing to do. */
int stream_prefetch_start(stream_prefetch **out, const stream_prefetch_args *a);
/* Stops and joins the threads; NULL is ignored. */
void stream_prefetch_stop(stream_prefetch *p);

#endif /* AL_PREFETCH_INTERNAL_H */
