/*
 * plan_feed_internal.h - one rank's micro-batches of a chunked run (planner/al_run.h), planned
 * window by window by a thread ahead of the stream, in bounded memory. Internal to //stream.
 *
 * A run fixes by arithmetic what every step holds, and every rank holds exactly K = ceil(K_ref
 * W_ref / W) micro-batches of every step, so the rank sequence of a run is known without
 * planning it: position p is (step p / K, micro p % K), over steps [0, steps). The feed plans
 * the windows that hold them (al_run_plan_steps of one window [s0, s1) at a time, windows as
 * al_run.h cuts them: `window` steps, the last taking the tail when less than two windows are
 * left), keeps only this rank's micro-batches and the step totals of each as a *chunk* (the
 * stream_plan_batch / stream_plan_sample records a manifest's rank plan holds), checks the
 * chunk's samples against the index (members, as al_stream_open checks a manifest's) and
 * queues it.
 *
 * Memory: at most `ahead` + 1 chunks exist at once (the one the consumer is in, and `ahead`
 * planned or being planned ahead of it); the thread waits while that many are alive, and a
 * chunk is freed when the consumer has taken every batch of it (stream_feed_release). A
 * window's plan (al_plan of its steps at every rank, and its key table of one byte an index
 * position) exists only while the thread extracts its chunk.
 *
 * Errors: a window that fails to plan (or to extract, or whose samples lack a member under
 * AL_STREAM_FAIL) becomes a chunk that holds the error, prefixed with the window's steps; the
 * thread stops there, and the reader (or prefetcher) asking for a batch of it gets the error.
 *
 * Thread safety: stream_feed_batch and stream_feed_release may be called from any thread at
 * once (readers, the prefetcher, the consumer); start and stop from one.
 */
#ifndef AL_PLAN_FEED_INTERNAL_H
#define AL_PLAN_FEED_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/al_run.h"
#include "stream/engine_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct stream_feed stream_feed;

typedef struct stream_feed_args {
  const al_run *run;   /* borrowed: must outlive the feed */
  const al_index *idx; /* borrowed: the members each chunk's samples are checked for; NULL:
                          no check (dev/bench_feed.c, a map of a corpus without shards) */
  uint32_t rank, world;
  int ahead;                  /* chunks planned ahead of the consumer's; 0 = 2 */
  int on_error;               /* AL_STREAM_FAIL: a sample lacking a member fails its chunk */
  const char *const *members; /* copied */
  size_t n_members;
  /* Added: a mixture's run, whose samples are draw ids: each chunk is checked source by source
   * against indexes[i] (borrowed) with sources[i] (copied); n_sources 0: a run of idx. */
  const al_index *const *indexes;
  const al_run_source_info *sources;
  size_t n_sources;
} stream_feed_args;

/* The feed's figures (tests and benchmarks). */
typedef struct stream_feed_counts {
  int alive;        /* chunks that exist now (queued, in use, being planned) */
  int max_alive;    /* the most that existed at once */
  uint64_t planned; /* windows planned so far */
  uint32_t micro;   /* K at this world */
} stream_feed_counts;

/* Checks the run against the world (1..2^20, rank below it) and makes the feed; no thread
 * yet. K (micro-batches of the rank per step at this world) and the run's info into *micro and
 * *info. */
int stream_feed_new(stream_feed **out, const stream_feed_args *a, uint32_t *micro,
                    al_run_info *info);

/* Starts the thread planning from the window that holds position `from` of the rank sequence
 * (past the end: no thread, nothing to plan). */
int stream_feed_begin(stream_feed *f, uint64_t from);

/* The batch at position `pos` (at or past the one begun from), pinned: blocks until its window
 * is planned. *pb, *samples (the records its `first` indexes) and *grid_error (why the chunk's
 * batches carry no latent grid; NULL when they do) stay valid until stream_feed_unpin(f, pos).
 * A planning error: its status and message (naming the window's steps). AL_ESTATE once the
 * feed is cancelled; AL_ENOTFOUND when pos's chunk was already freed (a prefetcher that fell
 * behind the consumer). */
int stream_feed_batch(stream_feed *f, uint64_t pos, const stream_plan_batch **pb,
                      const stream_plan_sample **samples, const char **grid_error);

/* The whole chunk holding `pos`, pinned as stream_feed_batch pins it. */
typedef struct stream_feed_chunk {
  uint64_t first, end;              /* its positions [first, end) */
  const stream_plan_batch *batches; /* end - first, position order */
  const stream_plan_sample *samples;
  const char *grid_error;
  uint32_t patch[3]; /* the plan's patch (p_t, p_h, p_w) */
} stream_feed_chunk;
int stream_feed_chunk_of(stream_feed *f, uint64_t pos, stream_feed_chunk *out);

/* Drops the pin of stream_feed_batch / stream_feed_chunk_of on pos's chunk. */
void stream_feed_unpin(stream_feed *f, uint64_t pos);

/* The consumer has taken every batch below `pos`: the chunks that end there are freed (once
 * unpinned), and the thread plans on. */
void stream_feed_release(stream_feed *f, uint64_t pos);

/* Wakes every waiter with AL_ESTATE and stops the thread after the window it is planning (so
 * threads blocked in stream_feed_batch can be joined). */
void stream_feed_cancel(stream_feed *f);

/* Cancels, joins the thread and frees everything. NULL is ignored. */
void stream_feed_free(stream_feed *f);

void stream_feed_get_counts(stream_feed *f, stream_feed_counts *out);

#ifdef __cplusplus
}
#endif

#endif /* AL_PLAN_FEED_INTERNAL_H */
