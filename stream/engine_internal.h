/*
 * engine_internal.h - the stream engine below al_stream.h, independent of the
 * index and manifest file formats.
 *
 * The engine reads a *rank plan* (the ordered micro-batches of one rank, each
 * a list of sample references) through a *source* that turns a sample
 * reference into a read job (shard, byte offset, size, LZ4 or not, key,
 * shape). al_stream_open() builds both from an al_index and an al_manifest;
 * tests and tools can build them by hand (tiny tar files, no index file).
 *
 * Not a public API: the layout may change with the engine.
 */
#ifndef AL_ENGINE_INTERNAL_H
#define AL_ENGINE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "stream/al_stream.h"

struct storage_obj; /* storage/storage_internal.h: an open shard, of any backend */

#ifdef __cplusplus
extern "C" {
#endif

/* One micro-batch of the rank plan; its samples are plan->samples[first, first+n). */
typedef struct stream_plan_batch {
  uint32_t step, micro, n_micro, bucket;
  uint64_t step_samples, step_tokens;
  size_t first, n;
  /* The bucket's latent grid (latent frames T_b, rows h_b, columns w_b) a typed latent
   * member is cropped to. Zeros: none (a hand-made plan): the latent is delivered whole,
   * unless the plan's grid_error says why the grid is unknown (then a typed latent fails). */
  uint32_t grid[3];
  uint32_t sp_degree, sp_rank; /* this rank's sequence-parallel group (al_micro_ref); 0 = 1 */
  /* The bucket's pixel shape (width, height, frames): what the "pixels" member decodes a raw
   * video or image member to (decode/al_decode.h). Zeros: unknown (a hand-made plan). */
  uint32_t pixels[3];
} stream_plan_batch;

typedef struct stream_plan_sample {
  uint64_t sample; /* index position (passed to the source) */
  uint64_t tokens;
  uint8_t padded;
  uint8_t lacks; /* 1: the source lacks a requested member of it (found at open: al_stream_open
                    checks the rank's samples against the index); such samples are skipped */
} stream_plan_sample;

typedef struct stream_rank_plan {
  uint32_t rank, world, epoch, first_step;
  uint64_t seed, index_fingerprint;
  uint64_t manifest_fingerprint; /* al_stream_manifest_fingerprint; 0 for a hand-made plan */
  size_t n_batches, n_samples;
  stream_plan_batch *batches;  /* malloc'd */
  stream_plan_sample *samples; /* malloc'd */
  char *grid_error;            /* malloc'd or NULL: why the batches carry no latent grid */
  /* The patch (p_t, p_h, p_w) of the plan's geometry: a token shard (options.sp_shard)
   * delivers the latent patchified with it. Zeros (a hand-made plan): 1x2x2. */
  uint32_t patch[3];
  /* A run's plan (al_stream_open_run): no batches here, a feed plans them chunk by chunk
   * (plan_feed_internal.h). Every step holds fed_micro (K) micro-batches of the rank, so
   * position p is (step p / K, micro p % K) over n_batches = steps x K, and the stream reads
   * from position fed_start (its start step x K) on. 0 for a manifest's or a hand-made plan. */
  uint32_t fed_micro;
  uint64_t fed_start;
} stream_rank_plan;

/* The manifest's info, checking that it plans `rank` (AL_EINVAL otherwise). */
int stream_manifest_rank(const al_manifest *m, uint32_t rank, al_manifest_info *info);

/* The latent grid (T_b, h_b, w_b) of manifest bucket `bucket` under the plan's geometry, checked
 * against the bucket's token count: T_b/p_t x h_b/p_h x w_b/p_w must be the tokens the manifest
 * records (al_tokens). AL_EFORMAT with a message otherwise. */
int stream_bucket_grid(const al_manifest *m, uint32_t bucket, uint32_t grid[3]);

/* The same for a bucket `b` (its id, shape and tokens) under geometry `geom`; `origin` names
 * where the bucket's tokens were recorded ("manifest", "plan") in the message. */
int stream_grid_of(const al_bucket_info *b, const al_latent_geom *geom, const char *origin,
                   uint32_t grid[3]);

/* The sequence-parallel group of (step, rank, micro k), `ref`: a power-of-two degree whose
 * aligned group [rank - sp_rank, rank - sp_rank + d) lies in the world of `world` ranks; for a
 * follower (sp_rank > 0) the micro-batch must be its group's, `lead` (slot k of the group's
 * first rank): the same degree at sp_rank 0, bucket, samples in order, tokens and padding.
 * AL_EFORMAT naming step, micro, the ranks and what differs otherwise. */
int stream_group_check(uint32_t world, uint32_t step, uint32_t rank, uint32_t k,
                       const al_micro_ref *ref, const al_micro_ref *lead);

/* Builds the plan of `rank` from a manifest; checks every micro-batch's group
 * (stream_group_check). */
int stream_rank_plan_from_manifest(stream_rank_plan *out, const al_manifest *m, uint32_t rank);
void stream_rank_plan_free(stream_rank_plan *p);

typedef struct stream_source_shard {
  const char *path;
  uint64_t size;    /* bytes when indexed; checked with fstat */
  int64_t mtime_ns; /* when indexed; 0 = unknown (not checked); checked only without verify */
  int seekable;     /* 0: read sequentially through libarchive */
  const char *etag; /* a URL shard's ETag when indexed from that server; NULL / "": not checked */
} stream_source_shard;

typedef struct stream_source_job {
  const char *key;
  uint32_t step; /* set by the caller, not the source: the plan step the read is for (the
                    cache folder's eviction order) */
  uint32_t shard;
  /* member name in the tar: KEY.ext[.lz4], as long as the index allows (loader/al_index.h) */
  char member[AL_INDEX_KEY_MAX + 1 + AL_INDEX_EXT_MAX + 5];
  uint64_t offset; /* data offset (file offset when seekable) */
  uint64_t size;   /* stored bytes */
  int lz4;         /* stored as an LZ4 frame */
  uint32_t width, height, frames;
  /* Set by the source: 1 when this member is the sample's latent (the index's record,
   * al_index_latent_grid: a typed member named by al_member_is_latent), cropped to the bucket's
   * grid; 0 otherwise (delivered whole). */
  int latent;
  /* 1 when the source recorded the member's dtype and shape (`type`, from its header at
   * indexing): the header the stream reads must say the same (else "shard changed"). */
  int has_type;
  al_member_type type;
  /* Set by the source: which of its inputs holds the sample (a mixture's source, in the
   * manifest's order; 0 for one index). Delivered as al_stream_batch.sources. */
  uint32_t source;
} stream_source_job;

/* Read-only callbacks; called from several reader threads at once. */
typedef struct stream_source {
  void *ctx;
  size_t n_shards;
  int (*shard)(void *ctx, uint32_t id, stream_source_shard *out);
  /* Fills `job` for `sample`; a missing payload member is an error whose
   * message names the key (job->key must still be set when known). */
  int (*job)(void *ctx, uint64_t sample, const char *ext, stream_source_job *job);
  /* Shard identity (may be NULL): AL_OK when `obj` (storage/storage_internal.h: a local file,
   * or a download of a compressed shard at a URL) holds the shard that was indexed,
   * AL_ENOTFOUND when the source has no fingerprint for it (then size and mtime are
   * checked), an error naming the shard otherwise. Called once per shard, by one thread. */
  int (*verify)(void *ctx, uint32_t id, struct storage_obj *obj);
  /* The index (may be NULL): what its shards at URLs were built with, the readers' defaults. */
  const al_index *index;
  /* May be NULL. When set, the stream owns ctx from the open call on, whether the open succeeds
   * or fails: the open's failure or al_stream_close calls release(ctx) once. */
  void (*release)(void *ctx);
} stream_source;

/* Opens a stream over a plan (ownership of *plan moves to the stream, which
 * zeroes it) and a source (must outlive the stream). rank/world/fingerprint
 * checks are the caller's; options->resume is checked against the plan. */
int stream_open_source(al_stream **out, const stream_source *src, stream_rank_plan *plan,
                       const al_stream_options *opts);

struct stream_feed; /* stream/plan_feed_internal.h */

/* Opens a stream over a run's plan (plan->fed_micro set, no batches) whose batches come from
 * `feed` (not begun yet): the stream takes both (the feed is freed with the stream, or here on
 * an error), begins the feed at its first position and waits for the first chunk (its planning
 * error fails the open). */
int stream_open_fed(al_stream **out, const stream_source *src, stream_rank_plan *plan,
                    struct stream_feed *feed, const al_stream_options *opts);

/* The stream's feed (NULL for a manifest's stream): its counts for tests and benchmarks. */
struct stream_feed *stream_get_feed(const al_stream *s);

/* The source over an al_index (ctx = the index). */
void stream_index_source(const al_index *idx, stream_source *out);

/* The source over a mixture's indexes (stream/mixture_source.c): idx[i] is source i of the
 * manifest's sources (its draw base, passes and samples in src[i]); a draw id d of source i reads
 * position (d - draw_base_i) mod samples_i of idx[i], and shard j of idx[i] is shard
 * shard_base_i + j of the source. The indexes must outlive the stream; the source's own table is
 * released with it (out->release). */
int stream_mixture_source(const al_index *const *idx, const al_run_source_info *src, size_t n,
                          stream_source *out);

/* idx is the index source s was planned from: its fingerprint and sample count (AL_EINVAL /
 * AL_EFORMAT naming the source; `origin`, "manifest" or "run", says where s was read). */
int stream_check_source_index(const al_index *idx, const al_run_source_info *s, const char *origin);

#ifdef __cplusplus
}
#endif

#endif /* AL_ENGINE_INTERNAL_H */
