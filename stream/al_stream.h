/*
 * al_stream.h - one rank's packed micro-batches, read ahead by threads into a
 * bounded pool of (pinned) buffers and optionally copied to a CUDA device.
 *
 * A stream walks the micro-batches that a manifest (manifest/al_manifest.h)
 * assigns to one rank, in order: step by step, micro-batch by micro-batch.
 * Reader threads pread each sample's payload member (default: the index's typed latent,
 * al_index_default_member, else "KEY.latent")
 * from its tar shard at the offset the index (loader/al_index.h) recorded,
 * decode LZ4 frames (members stored as KEY.ext.lz4), and pack the samples of a
 * micro-batch into one contiguous buffer:
 *
 *   data: | sample 0 | pad | sample 1 | pad | ... | sample n-1 | pad | cu_seqlens |
 *
 * Several members per sample (options.members, e.g. latent.npy, t5.npy, txt): each sample's
 * members follow one another, each at an aligned offset, and batch->members[j] gives member
 * j's dtype, per-sample shapes, offsets and sizes. Typed members (.npy, .safetensors, also as
 * .lz4) arrive without their header: the array data, C order. A sample's latent member (the
 * index's record: its first typed member named by al_member_is_latent, loader/al_members.h,
 * e.g. latent.npy or latent_hr.npy) is cropped while packing to its bucket's latent grid (T_b, h_b,
 * w_b) = (1 + (F_b - 1) / vae_stride_t, H_b / vae_stride_s, W_b / vae_stride_s): channels
 * whole, latent frames [0, T_b), rows and columns centred at (n - n_b) / 2 (integer division),
 * so the delivered tokens are the ones cu_seqlens and the step totals count. A latent whose
 * grid is smaller than its bucket's in any dimension fails its sample (AL_ERANGE) naming the
 * key and both grids. Untyped members (raw bytes) are delivered as stored. The grid uses the
 * planner's default geometry (Wan 2.1: strides 4, 8, patch 1x2x2), checked against every
 * bucket's token count in the manifest: a manifest planned with another geometry (the
 * manifest API does not expose it) streams untyped members as before, and typed latents
 * fail naming the bucket whose grid does not match.
 *
 * Every sample starts at a multiple of 64 bytes (options.align); the bytes of
 * padding are zero, so a batch is byte-identical from run to run. offsets[i]
 * is the start of sample i, offsets[n] the end of the payload (== data_bytes).
 * A copy of cu_seqlens (int32, n+1, in tokens) follows the payload at an
 * aligned offset, so one host-to-device copy moves both.
 *
 * Shards that are not seekable (tar.gz, tar.zst, ... as recorded in the
 * index) are read sequentially through libarchive instead: each sample costs
 * a scan of its shard from the start (or from the previous member read by the
 * same thread), which is orders of magnitude slower than pread. Use plain tar
 * shards (members may be individually LZ4-compressed) for training. Such a
 * shard at a URL is first downloaded whole, once per stream, into the cache
 * folder (cache_dir) as one entry, or without one into an unlinked file in
 * $TMPDIR that needs the disk space until the stream closes
 * (stream/README.md, "Remote shards").
 *
 * Memory: the pool holds at most `prefetch` buffers; readers block when all
 * are in use (filled and waiting, or held by the caller), so memory is bounded
 * by prefetch * (largest micro-batch) on the host (and the same on the device
 * with device_copy). Buffers are pinned (cudaHostAlloc) when a CUDA device is
 * present, plain 4 KiB-aligned memory otherwise. CUDA is optional at run time:
 * when cudaGetDeviceCount fails the stream runs host-only.
 *
 * Shard identity. Each shard is checked once, when first opened: its size
 * must be the one indexed; then, when the index recorded a content
 * fingerprint for it (al_shard_info.content_fp), the fingerprint is computed
 * again and must match: for a plain tar a hash of the 512-byte header block
 * before every indexed member's data, for a compressed shard of its first and
 * last 64 KiB (al_index_shard_verify). mtime is not looked at, so cp, rsync
 * and node-local copies stream; mtime_ns is compared only for a shard the
 * index has no fingerprint for (an index written before fingerprints, or a
 * shard that could not be read again at the end of its build).
 *
 * Errors. A sample whose payload cannot be read (member missing from the
 * index, shard changed since indexing, short read, LZ4 decode failure,
 * libarchive failure) is an error of the batch holding it; the message names
 * the shard, the key, the member and the byte offset. options.on_error
 * decides what happens:
 *   AL_STREAM_FAIL (default): al_stream_next() returns the error for that
 *     batch; the stream stops there (later calls return the same error) and
 *     its state still points at that batch, so a resume re-reads it.
 *   AL_STREAM_SKIP_SAMPLE: the batch is delivered without the bad samples;
 *     batch->skipped_keys / skipped_reasons list them and the stream's
 *     `skipped` counter (stats and state) adds them up. A batch may then hold
 *     no sample at all: it is still delivered, so every rank runs the same
 *     number of steps. step_samples and step_tokens stay the planned totals;
 *     skipped_real_samples and skipped_real_tokens say what the skip took from
 *     them (the step's delivered total needs their sum over all ranks).
 * Nothing is skipped silently.
 *
 * Ranks. rank < 0 means the RANK environment variable (torchrun); the world
 * is WORLD_SIZE when set. The manifest's world must equal it. Every rank
 * reads the same manifest file and its own rows: there is no coordination
 * service and no communication, so multi-node training works unchanged.
 *
 * Ownership: the stream borrows the index and the manifest; both must outlive
 * it. Batches returned by al_stream_next() belong to the stream: they stay
 * valid until released (al_stream_release*) or the stream is closed, and at
 * most `prefetch` batches can be held at once.
 *
 * Thread safety: one consumer thread calls next/release/state/stats (calls
 * from several threads must be serialised by the caller). close must not race
 * with any other call. The reader threads are internal.
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_stream_options,
 * al_stream_state and al_stream_stats (and al_stream_batch, whose struct_size the library sets: it
 * owns the batch) start with `size_t struct_size`, the caller's sizeof, set in one line with the
 * struct's AL_*_INIT macro. The library reads and writes only the bytes that fit in it (fields past
 * it read as zero, are not written), so a caller built against an older header keeps working. A
 * struct the library fills must carry its size; an options struct it reads takes 0 as this header's
 * struct (so `= {0}` keeps
 * working). A size below the struct's AL_*_V1 (its first sized version) or above
 * the library's is AL_EINVAL naming the function, the struct and both sizes. al_stream_member, an
 * element of al_stream_batch.members, keeps a fixed layout that never grows (no size).
 */
#ifndef AL_STREAM_H
#define AL_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"
#include "loader/al_index.h"
#include "manifest/al_manifest.h"
#include "planner/al_run.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_stream al_stream;

enum { AL_STREAM_FAIL = 0, AL_STREAM_SKIP_SAMPLE = 1 };

#define AL_STREAM_STATE_VERSION 2u

/* Where a stream stands, to resume it after a restart. Plain data: store it
 * field by field (Python keeps it as a dict). `position` counts micro-batches
 * in the rank's whole sequence of the manifest (0 = the first micro-batch of
 * the manifest's first step for this rank).
 *
 * A state names the manifest it belongs to (manifest_fingerprint: a hash of the
 * schedule every rank reads, al_stream_manifest_fingerprint) and the (step, micro)
 * it stands at. A resume is refused (AL_ESTATE) unless rank, world, epoch, seed,
 * index fingerprint and manifest fingerprint are the stream's, the position is
 * within the rank's micro-batches and (next_step, next_micro) is the plan's
 * micro-batch at that position; a state at the end (position == the rank's
 * micro-batch count) must carry the end marker UINT32_MAX in both. So a state of
 * another manifest of the same index (a re-plan: `plan --resume-from`) is refused
 * at every position, including the end, instead of skipping or repeating batches.
 * Version 1 states (no manifest fingerprint) are refused with AL_EVERSION: they
 * cannot be told apart from a state of another plan. */
typedef struct al_stream_state {
  size_t struct_size; /* sizeof(al_stream_state) (AL_STREAM_STATE_INIT): required when filled;
                         as options.resume 0 = this header's struct */
  uint32_t version;   /* AL_STREAM_STATE_VERSION */
  uint32_t rank;
  uint32_t world;
  uint32_t epoch;
  uint64_t seed;
  uint64_t index_fingerprint;
  uint64_t position;   /* next micro-batch to deliver (rank sequence) */
  uint32_t stride;     /* this stream reads position, position+stride, ... */
  uint32_t next_step;  /* absolute (step, micro) of `position`; */
  uint32_t next_micro; /*   UINT32_MAX when the stream is finished */
  uint32_t reserved;
  uint64_t skipped;   /* samples skipped so far (AL_STREAM_SKIP_SAMPLE) */
  uint64_t delivered; /* batches delivered so far */
  /* Added in version 2: the manifest the state belongs to (al_stream_manifest_fingerprint;
   * 0 for a stream over a hand-made plan). */
  uint64_t manifest_fingerprint;
} al_stream_state;
#define AL_STREAM_STATE_INIT AL_STRUCT_INIT(al_stream_state)
#define AL_STREAM_STATE_V1 offsetof(al_stream_state, manifest_fingerprint)

/* Zero means default for every field. */
/* Default cap on one payload member's bytes, stored or decoded from an LZ4 frame (a
 * 4 MB frame can claim 1 GiB): 512 MiB, over ten times a 1080p 121-frame bf16 latent.
 * The environment variable ADAPTIVELOAD_MAX_MEMBER_BYTES (or `stream --max-member-bytes`)
 * sets another; a member over the cap fails its read (AL_ERANGE, or is skipped with
 * AL_STREAM_SKIP_SAMPLE) naming shard, key, member and offset. */
#define AL_STREAM_MAX_MEMBER_DEFAULT (512ull << 20)
#define AL_STREAM_MAX_SAMPLE_DEFAULT (1ull << 30)

typedef struct al_stream_options {
  size_t struct_size; /* sizeof(al_stream_options) (AL_STREAM_OPTIONS_INIT); 0 = this header's
                         struct */
  int threads;        /* reader threads; 0 = min(4, online cores) */
  int prefetch;       /* buffers in the pool; 0 = 4 (at least 1) */
  const char *ext;    /* payload member extension; NULL = the index's typed latent
                         (al_index_default_member), else "latent"
                         (KEY.<ext>.lz4 is used when KEY.<ext> is absent) */
  int on_error;       /* AL_STREAM_FAIL or AL_STREAM_SKIP_SAMPLE */
  int world;          /* 0 = WORLD_SIZE from the environment, else the manifest's */
  uint64_t first;     /* first micro-batch of the rank sequence to read */
  uint32_t stride;    /* read first, first+stride, ...; 0 = 1 (DataLoader workers) */
  const al_stream_state *resume; /* non-NULL: continue where this state left off. With
                                    stride 0, exactly as the saved stream (its position
                                    and stride); with stride > 0, the state must have
                                    stride 1 (a rank-level state) and reading starts at
                                    state.position + first, every stride-th batch. */
  int pinned;                    /* 0 = pinned when a CUDA device is present,
                                    1 = require pinned, -1 = never */
  int device_copy;               /* 1 = also copy each batch to cuda_device */
  int cuda_device;               /* ordinal; < 0 = LOCAL_RANK from the environment (0 if unset) */
  size_t align;                  /* sample alignment in bytes, a power of two; 0 = 64 */
  size_t read_block;             /* LZ4 / libarchive read block; 0 = 1 MiB */
  /* Added at the end (the struct only grows there): several members per sample, and the
   * member cap. */
  const char *const *members; /* n_members member extensions to deliver, in this order, e.g.
                                 {"latent.npy", "t5.npy", "txt"}; NULL (or n_members 0) =
                                 the one member `ext`. Each falls back to KEY.<ext>.lz4. The
                                 member the index records as a sample's latent is cropped
                                 (see above); the others are delivered whole. A member no
                                 sample of the index holds fails the open (AL_ENOTFOUND,
                                 listing the index's members) whatever on_error; samples of
                                 the rank lacking one fail the open under AL_STREAM_FAIL
                                 (naming the first keys and shards) and are skipped, counted
                                 up front (stats.lacking), under AL_STREAM_SKIP_SAMPLE.
                                 The name AL_STREAM_MEMBER_PIXELS ("pixels") is no stored
                                 member: it is each sample's first raw video or image member
                                 (KEY.mp4, .mov, .m4v, .mkv, .webm, .jpg, .jpeg, .png, .webp)
                                 decoded to its bucket's (frames, height, width, 3) uint8
                                 (decode/al_decode.h: frames [0, F_b), aspect-kept scale and
                                 centre crop, rotation applied; one decoder thread per
                                 reader); a sample without one, or whose stream fails to
                                 decode, fails (or is skipped) with the located reason. */
  size_t n_members;
  uint64_t max_member_bytes; /* cap on one member's stored and decoded bytes; 0 =
                                ADAPTIVELOAD_MAX_MEMBER_BYTES when set, else
                                AL_STREAM_MAX_MEMBER_DEFAULT */
  /* Added at the end: the cap on what one sample delivers, its members together (after
   * the crop); over it the sample fails (or is skipped, AL_STREAM_SKIP_SAMPLE), naming the key
   * and the bytes. 0 = ADAPTIVELOAD_MAX_SAMPLE_BYTES when set, else
   * AL_STREAM_MAX_SAMPLE_DEFAULT. */
  uint64_t max_sample_bytes;
  /* Added at the end: the skip budget of AL_STREAM_SKIP_SAMPLE. When the samples skipped so far
   * exceed this fraction of the samples this stream reads (its batches, padding included), the
   * stream fails at the batch that crosses it (al_stream_next returns AL_EFORMAT naming the
   * count and the last reason; the state still points at that batch); samples found at open to
   * lack a requested member count up front, so such a stream fails at open. In (0, 1]; 0 =
   * AL_STREAM_MAX_SKIP_DEFAULT; 1 = no budget. A stream whose samples were all skipped fails
   * at its end (instead of AL_EOF) whatever the budget. */
  double max_skip_fraction;
  /* Added at the end: under sequence parallelism, 0 = every rank of a group gets the group's
   * whole micro-batch; 1 = only this rank's token shard (al_stream_batch.shard_token_*, and
   * "Token shards" below). Other values: AL_EINVAL. With 1, a requested member that is an
   * untyped latent (raw bytes named "latent...", as a synth corpus stores them) fails the
   * open (AL_EUNSUPPORTED): its tokens cannot be cut; a typed latent of a plan without a latent
   * grid fails its sample (AL_EUNSUPPORTED). */
  int sp_shard;
  /* Added at the end: shards at URLs (http://, https://, s3://: an index whose shard paths were
   * moved there, e.g. al_index_remap_root(idx, DIR, "http://host/dir")) are read with ranged
   * GETs; these keep what they fetch in a local folder shared by the node's ranks (created
   * when missing), within cache_bytes (0 = 1 GiB) over all processes using it. NULL = no
   * cache: every read is fetched. See stream/README.md, "Remote shards". */
  const char *cache_dir;
  uint64_t cache_bytes;
  /* With cache_dir and shards at URLs: threads (parallel requests) that fetch the members of
   * the coming micro-batches into the cache in plan order, ahead of the readers, holding at
   * most half of cache_bytes ahead of the consumer. 0 = 4, -1 = none. */
  int fetch_parallel;
  /* Added at the end: shards at URLs: the time in seconds one remote operation (a shard's
   * pin, one member read, one 8 MiB range of a download) may take as a whole, its retries
   * (backoff, Retry-After) and a slow answer's transfer included, before the read fails
   * naming the URL; 0 = ADAPTIVELOAD_REMOTE_TIMEOUT_S when set, else 60. Else in
   * [0.1, 86400] (AL_EINVAL). A member read must fit in it at the slowest bandwidth. */
  double remote_timeout_s;
  /* Added at the end: s3:// shards: the endpoint, region and addressing (loader/al_index.h,
   * al_storage_options). NULL / 0 = the environment's (AWS_ENDPOINT_URL, AWS_REGION), else what
   * the index recorded when it was built, else AWS's regional endpoint in us-east-1 (virtual-
   * hosted); an s3_addressing other than 0, 1, 2 is AL_EINVAL. A failed request's message then
   * names the endpoint used and, when the index was built with another, that one. */
  const char *s3_endpoint;
  const char *s3_region;
  int s3_addressing;
  /* Added at the end: a stream over a chunked run (al_stream_open_run): the windows its planning
   * thread keeps planned ahead of the one the stream reads, 0 = 2, else 1..64 (AL_EINVAL); at
   * most plan_ahead + 1 windows' rank rows exist at once. Ignored by al_stream_open. */
  int plan_ahead;
} al_stream_options;
#define AL_STREAM_OPTIONS_INIT AL_STRUCT_INIT(al_stream_options)
#define AL_STREAM_OPTIONS_V1 offsetof(al_stream_options, members)

/* Token shards (sp_shard 1). A micro-batch of a group of degree d is the packed sequence of
 * its samples, N planned tokens (padding repeats included, samples in plan order, each
 * sample's tokens in its patch order). Rank j of the group (batch.sp_rank) holds tokens
 * [shard_token_begin, shard_token_end) = [floor(j N / d), floor((j + 1) N / d)): the d shards
 * tile [0, N) exactly, in rank order, and differ by at most one token. The batch then holds
 * the samples with tokens in the shard (n; keys, samples, padded, ... of those), each as the
 * piece in the shard: cu_seqlens delimits the pieces, token_first / sample_tokens place each
 * in its sample (a sample cut by a boundary is a partial sequence on both ranks).
 *   The latent member (the one the index records as the sample's latent, typed) is delivered
 * patchified, token-major: piece i is a (count_i, C x p_t x p_h x p_w) array of the latent's
 * dtype (members[j].ndim 2, shape (count_i, C p_t p_h p_w)), tokens in (t, y, x) order of
 * the patch grid of the cropped latent, features in (c, dt, dy, dx) order (Wan 2.1's patch
 * embedding order, Python's adaptiveload.latents.patchify), patch = batch.patch. So the
 * rows of the d shards, concatenated in rank order, are the patchified packed latent of the
 * whole micro-batch, byte for byte. Only the latent frames a shard's tokens lie in are read
 * from a plain tar member (about 1/d of a video's latent; an image's (C, H, W) latent and
 * LZ4 / libarchive members are read whole and sliced).
 *   Other members (text embeddings, captions) are delivered whole for every sample with
 * tokens in the shard. With degree 1 the shard is the whole batch, still patchified.
 *   Skips keep their meaning: a failed sample is left out of every shard holding it (the
 * shard range stays the planned one); skipped_real_tokens counts the shard's tokens of it and
 * skipped_real_samples counts it on the rank holding its first token, so each sample and
 * token is counted once over the group. Without sp_shard every rank of the group gets the
 * whole micro-batch and only the group's first rank (sp_rank 0) reports its skips in
 * skipped_real_*, for the same reason. tokens and planned_tokens are this rank's (the
 * shard's); step_samples and step_tokens the step's as always. */

/* 1%: a stream skipping more is reading the wrong member or a damaged corpus, not a stray bad
 * sample; stop and say so rather than train on a silently different data mix. */
#define AL_STREAM_MAX_SKIP_DEFAULT 0.01

#define AL_STREAM_MAX_DIMS 8
/* The member name of decoded pixels (al_stream_options.members): no stored member, see there. */
#define AL_STREAM_MEMBER_PIXELS "pixels"
#define AL_STREAM_MAX_MEMBERS 16

/* One member of every sample of a batch (al_stream_batch.members[j]). Typed members
 * (.npy and .safetensors, possibly .lz4) are delivered without their header: the array
 * data in C order; untyped members (raw bytes: KEY.latent of `synth`, KEY.txt, ...) as
 * stored, with dtype "uint8" and shape (bytes). Sample i of member j lies at
 * data + offsets[i] (a multiple of options.align), sizes[i] bytes. */
typedef struct al_stream_member {
  const char *name;        /* the requested extension ("latent.npy") */
  const char *dtype;       /* numpy name: "bfloat16", "float32", ...; "uint8" when untyped */
  size_t itemsize;         /* bytes per element (1 when untyped) */
  int typed;               /* 1: .npy/.safetensors header parsed, or "pixels" (decoded,
                              uint8 (T, H, W, 3)); 0: raw bytes */
  int cropped;             /* 1: this is the latent member, cropped to the bucket grid */
  const uint32_t *ndim;    /* n: dimensions of sample i */
  const uint64_t *shapes;  /* n x AL_STREAM_MAX_DIMS: sample i's shape, ndim[i] used */
  const uint64_t *offsets; /* n: byte offset of sample i in data */
  const uint64_t *sizes;   /* n: bytes of sample i (the product of its shape x itemsize) */
} al_stream_member;

/* One packed micro-batch. All pointers stay valid until the batch is released. */
typedef struct al_stream_batch {
  size_t struct_size; /* sizeof(al_stream_batch) of the library (it owns the batch): fields at
                         offsets >= struct_size are not there */
  uint64_t position;  /* in the rank sequence (see al_stream_state) */
  uint32_t step;      /* absolute step in the epoch */
  uint32_t micro;     /* 0 .. n_micro-1 within (step, rank) */
  uint32_t n_micro;
  int last_in_step; /* micro == n_micro-1: time for the optimizer step */
  uint32_t bucket;
  uint32_t reserved;
  uint64_t step_samples; /* planned totals over all ranks of this step */
  uint64_t step_tokens;
  uint64_t tokens; /* tokens of the samples packed here */

  size_t n;                  /* samples packed */
  const char *const *keys;   /* n */
  const uint64_t *samples;   /* n index positions */
  const uint32_t *shapes;    /* n x 3: width, height, frames */
  const uint8_t *padded;     /* n flags: 1 = a padding repeat (mask its loss) */
  const int32_t *cu_seqlens; /* n+1, tokens */
  const uint64_t *offsets;   /* n+1, bytes; offsets[i] % align == 0 */
  const uint64_t *sizes;     /* n, payload bytes of each sample */

  void *data;               /* host buffer (pinned when `pinned`) */
  size_t data_bytes;        /* payload bytes, == offsets[n] */
  size_t cu_seqlens_offset; /* byte offset of the cu_seqlens copy in data */
  size_t copy_bytes;        /* bytes copied to the device (payload + cu_seqlens) */
  int pinned;

  void *device_data; /* device copy of data, NULL without device_copy */
  void *ready_event; /* cudaEvent_t recorded after the copy; wait on it
                        with cudaStreamWaitEvent or al_stream_batch_wait */

  size_t n_skipped; /* samples left out (AL_STREAM_SKIP_SAMPLE) */
  const char *const *skipped_keys;
  const char *const *skipped_reasons;

  /* Added at the end (the struct only grows there). Samples are laid out sample-major:
   * sample i's members follow each other, each at an aligned offset, then sample i+1.
   * members[0] is the first requested member, and offsets/sizes above describe it too
   * (offsets[i] is the start of sample i, offsets[n] the end of the payload of all
   * members). */
  size_t n_members;
  const al_stream_member *members; /* n_members */
  uint32_t grid[3];                /* the bucket's latent grid (frames, rows, columns) the latent is
                                      cropped to; zeros when the plan carries none */
  uint32_t reserved2;
  /* Added at the end: what the skipped samples (AL_STREAM_SKIP_SAMPLE) took away from
   * the step's planned totals. step_samples and step_tokens count real samples only, so
   * these count the skipped samples that are not padding repeats. The step's delivered
   * totals are step_tokens (step_samples) minus these summed over the step's micro-batches
   * on all ranks (stream/README.md, "Loss normalisation after a skip"). */
  uint64_t skipped_real_samples;
  uint64_t skipped_real_tokens;
  uint64_t planned_tokens; /* tokens the plan put in this micro-batch, padding included
                              (== tokens when nothing was skipped) */
  /* Added at the end: the sequence-parallel group this rank runs the micro-batch in, ranks
   * [sp_group_first, sp_group_first + sp_degree), this rank being number sp_rank (1, 0 and the
   * rank itself without SP). With options.sp_shard the batch holds only this rank's slice
   * [shard_token_begin, shard_token_end) of the group's packed sequence (sp_sharded 1);
   * otherwise the whole micro-batch, [0, tokens). */
  uint32_t sp_degree;
  uint32_t sp_rank;
  uint32_t sp_group_first;
  uint32_t sp_sharded;
  uint64_t shard_token_begin;
  uint64_t shard_token_end;
  /* Added at the end: the piece of its own token sequence each sample holds here, for RoPE
   * positions and the group's attention. Sample i holds tokens [token_first[i], token_first[i]
   * + cu_seqlens[i+1] - cu_seqlens[i]) of its sample_tokens[i]; without sp_shard (or a sample
   * inside the shard) token_first[i] is 0 and the piece is the whole sample. */
  const uint64_t *token_first;   /* n */
  const uint64_t *sample_tokens; /* n */
  uint32_t patch[3]; /* sp_sharded: (p_t, p_h, p_w) the latent member is patchified with (the
                        plan's geometry); zeros otherwise */
  uint32_t reserved3;
  uint64_t group_tokens; /* N: the planned tokens of the group's whole micro-batch (padding
                            included), what the shard ranges split; == planned_tokens when
                            not sharded */
  /* Added at the end: what delivering this batch cost the consumer, for per-step statistics.
   * stall_seconds is the time the al_stream_next call that returned this batch waited for the
   * readers (0 when the batch was ready). For shards at URLs, fetched_bytes, requests,
   * cache_hits and cache_misses are the growth of the stream-wide counters of al_stream_stats
   * (bytes_fetched, requests, cache_hits, cache_misses) between the previous delivery (or the
   * open) and this one. The readers and the prefetcher work ahead of the consumer, so these
   * are what was received while this batch was the next one to deliver, not the bytes of this
   * batch's own members. Summed over the batches delivered so far they equal the stats'
   * counters as they stood at the last delivery; fetches after it (by the prefetcher, for
   * batches not yet delivered) go to the next batch. All four are 0 for local shards. */
  double stall_seconds;
  uint64_t fetched_bytes;
  uint64_t requests;
  uint64_t cache_hits;
  uint64_t cache_misses;
  /* Added at the end: the source each sample was read from, an index into the manifest's sources
   * (al_manifest_source: its name) for a mixture's stream (al_stream_open_mixture); all 0 for a
   * stream of one index. With `samples` (draw ids: al_manifest_source's draw_base, passes and
   * samples place each in its source's pass), what a trainer logs loss per source by. */
  const uint32_t *sources; /* n */
} al_stream_batch;

typedef struct al_stream_stats {
  size_t struct_size; /* sizeof(al_stream_stats), set by the caller: AL_STREAM_STATS_INIT */
  uint64_t batches;   /* delivered by al_stream_next */
  uint64_t samples;
  uint64_t bytes; /* payload bytes delivered */
  uint64_t skipped;
  uint64_t total_batches; /* micro-batches this stream will deliver in all */
  double stall_seconds;   /* time al_stream_next spent waiting for readers (the sum of the
                             batches' stall_seconds, plus the wait of a call that failed) */
  double read_seconds;    /* reader thread time spent filling buffers */
  int buffers;            /* pool size (prefetch) */
  int buffers_allocated;  /* buffers that hold memory now */
  int max_in_use;         /* most buffers filling, ready or held at once */
  uint64_t host_bytes;    /* host memory held by the pool */
  uint64_t device_bytes;
  int pinned; /* buffers are pinned */
  int device_copy;
  int threads;
  /* Added at the end: samples of this stream's batches that lack a requested member, found at
   * open (AL_STREAM_SKIP_SAMPLE: they are skipped as they come, and counted in `skipped`). */
  uint64_t lacking;
  /* Added at the end: shards at URLs (all 0 when every shard is local). */
  uint64_t bytes_fetched; /* body bytes received from servers */
  uint64_t requests;      /* HTTP requests sent (HEAD and ranged GETs, retries included) */
  uint64_t cache_hits;    /* member reads (or whole compressed shards) served by the cache folder */
  uint64_t cache_misses;  /* members (or whole compressed shards) fetched from a server (by
                             readers or fetched ahead) */
  uint64_t evicted_bytes; /* bytes this stream removed from the cache folder (its limit) */
} al_stream_stats;
#define AL_STREAM_STATS_INIT AL_STRUCT_INIT(al_stream_stats)
#define AL_STREAM_STATS_V1 offsetof(al_stream_stats, lacking)

/* Opens the stream of `rank` (< 0: from RANK). Checks that the manifest was
 * planned from this index (fingerprints), that the worlds agree, and, with
 * options->resume, that the state belongs to this rank, world, epoch, index and
 * manifest and stands at a micro-batch of it (see al_stream_state). Starts the
 * reader threads. */
AL_API int al_stream_open(al_stream **out, const al_index *idx, const al_manifest *m, int rank,
                          const al_stream_options *opts);

/* Opens the stream of `rank` over a mixture's manifest (plan --mixture, manifest/al_mixture.h):
 * indexes[i] is the index of the manifest's source i (al_manifest_source, in that order), n the
 * manifest's source count. The manifest's samples are draw ids; draw d of source i is position
 * (d - draw_base_i) mod samples_i of indexes[i], read as al_stream_open reads an index position,
 * and batch->sources names its source. Checks, before any read: n is the manifest's source count
 * and each index is its source's (index fingerprint and sample count; AL_EINVAL naming the
 * source), the key table agrees with every source's keys, and the requested members against each
 * source's index as al_stream_open checks them. Otherwise al_stream_open: rank, world, options,
 * resume states (the manifest's fingerprint names them), ownership (the stream borrows the
 * indexes and the manifest), thread safety. Shards at URLs take the storage settings the first
 * source's index recorded unless the options or the environment set them. A manifest of one
 * index (no sources) is refused: open it with al_stream_open. */
AL_API int al_stream_open_mixture(al_stream **out, const al_index *const *indexes, size_t n,
                                  const al_manifest *m, int rank, const al_stream_options *opts);

/* al_stream_open_run over a mixture's run (al_run_open_mixture, al_mixture_open_run):
 * indexes[i] is the index of the run's source i (al_run_source_get, in that order), n the run's
 * sources; each is checked against its source (index fingerprint, samples; AL_EINVAL /
 * AL_EFORMAT naming the source), each window's draws are read from their sources' indexes
 * (batch->sources names the source of each sample) and checked against the requested members
 * source by source. Otherwise al_stream_open_run: windows planned by the stream's thread,
 * bounded memory, states, ownership (the indexes and the run are borrowed). */
AL_API int al_stream_open_run_mixture(al_stream **out, const al_index *const *indexes, size_t n,
                                      const al_run *run, int rank, int world, uint32_t start_step,
                                      const al_stream_options *opts);

/* Opens the stream of `rank` over a chunked run (planner/al_run.h) instead of a manifest: the
 * micro-batches al_run_plan_steps(run, world, 0, steps) would give the rank, planned window by
 * window by a thread of the stream while it reads (docs/DESIGN.md, 6.13), so that what the
 * stream holds of the plan is bounded by options.plan_ahead + 1 windows of this rank's rows,
 * whatever the corpus (a manifest's stream holds the rank's rows of the whole epoch).
 *   The rank sequence of a run: every rank holds K = ceil(K_ref W_ref / world) micro-batches of
 * every step (al_run_info), so position p is (step p / K, micro p % K) over steps [0, steps),
 * from step 0 whatever start_step; the stream reads from its first micro-batch of start_step on
 * (options.first and stride count from there; options.resume, when given, says where instead,
 * at or after start_step). Batches are those of the manifest of al_run_plan_steps(run, world,
 * 0, steps) saved and streamed: the same samples, order, (step, micro), step totals and tokens;
 * only `position` counts from step 0.
 *   Checks: the run was opened from this index (al_run_info.index_fingerprint and sample count,
 * AL_EINVAL / AL_EFORMAT as al_stream_open's), world (<= 0: WORLD_SIZE, else 1; when both are
 * given they must agree) and rank (< 0: RANK; 0 when unset and the world is 1) as al_stream_open
 * resolves them, start_step <= steps (AL_ERANGE; = steps: a stream at its end), and each
 * window's samples against the requested members as al_stream_open checks a manifest's (a
 * sample lacking one fails its window under AL_STREAM_FAIL). The first window is planned before
 * this returns, so its errors fail the open; a later window's planning error is the error of
 * the first batch of it (naming the window's steps), after which the stream stops as after a
 * failed batch.
 *   State: al_stream_state.manifest_fingerprint carries the run's fingerprint
 * (al_run_info.fingerprint, which does not depend on the world), with (step, micro) and the
 * position as above, so a state resumes a stream over the same run at the same world, from any
 * start step at or before it, and is refused for a manifest's stream (and a manifest's state
 * for a run's). The skip budget (max_skip_fraction) counts the samples of the windows delivered
 * so far instead of the epoch's.
 *   Ownership: the stream borrows the index and the run; both must outlive it. Thread safety as
 * al_stream_open's (the planning thread is internal; al_run_plan_steps is reentrant, so several
 * streams may share one run). Closing mid-epoch stops the planning thread after the window it
 * is planning, if any. */
AL_API int al_stream_open_run(al_stream **out, const al_index *idx, const al_run *run, int rank,
                              int world, uint32_t start_step, const al_stream_options *opts);

/* Next micro-batch, in order. AL_EOF at the end. Blocks while readers fill it.
 * AL_ESTATE when every buffer is held by the caller (release one first). */
AL_API int al_stream_next(al_stream *s, const al_stream_batch **out);

/* Gives the batch's buffers back to the pool. With device_copy, the device
 * buffer is reused by a later copy at once: use al_stream_release_after when
 * kernels reading it may still be queued. */
AL_API int al_stream_release(al_stream *s, const al_stream_batch *b);
/* Like al_stream_release, but the next copy into this batch's device buffer
 * waits (on the GPU, not the host) for the work queued so far on
 * `cuda_stream` (a cudaStream_t; NULL = the legacy default stream). */
AL_API int al_stream_release_after(al_stream *s, const al_stream_batch *b, void *cuda_stream);

/* Makes `cuda_stream` (cudaStream_t, NULL = default stream) wait on the GPU
 * for the batch's device copy. AL_OK without device copy. */
AL_API int al_stream_batch_wait(const al_stream_batch *b, void *cuda_stream);

/* Blocks the calling host thread until the batch's device copy is done.
 * AL_OK at once without device copy. */
AL_API int al_stream_batch_sync(const al_stream_batch *b);

/* State to resume after the batches delivered so far (whether or not they
 * were released). */
AL_API int al_stream_get_state(const al_stream *s, al_stream_state *out);
AL_API int al_stream_get_stats(const al_stream *s, al_stream_stats *out);

/* The rank-level state (stride 1) that starts at `position` of the rank
 * sequence: al_stream_state_at(s, b->position + 1, &st) resumes right after
 * batch b, whatever this stream's first and stride were (DataLoader workers
 * deliver in rank order, so the training loop knows the last batch it used). */
AL_API int al_stream_state_at(const al_stream *s, uint64_t position, al_stream_state *out);

/* Stops the readers (mid-epoch is fine), joins them and frees everything,
 * including batches still held. NULL is ignored. */
AL_API void al_stream_close(al_stream *s);

/* The manifest's fingerprint: a 64-bit hash of the schedule every rank reads (world,
 * seed, epoch, first step, index fingerprint and sample count, the buckets, and every
 * micro-batch of every rank: bucket, samples, tokens, padding, step totals). Two manifests
 * that deliver the same batches to every rank have the same fingerprint; a re-plan
 * (`plan --resume-from`) or another plan of the same index has another. Never 0. What
 * al_stream_state.manifest_fingerprint and Python's state dicts carry. */
AL_API int al_stream_manifest_fingerprint(const al_manifest *m, uint64_t *out);

/* Number of micro-batches of `rank` in the manifest (the rank sequence). */
AL_API int al_stream_rank_batches(const al_manifest *m, uint32_t rank, uint64_t *n);

/* Reads the payload of one sample (member `ext`; NULL = the sample's typed latent
 * member, al_index_latent_grid, else "latent"; with the
 * same .lz4 fallback and shard checks as the stream) into a malloc'd buffer
 * (*out, free with al_stream_free; *size bytes). Used by map-style datasets
 * (Python's IndexDataset). Thread-safe; opens the shard on each call. */
AL_API int al_stream_read_sample(const al_index *idx, uint64_t sample, const char *ext, void **out,
                                 size_t *size);
AL_API void al_stream_free(void *p);

/* sizeof of the struct an al_stream_struct id (below) names; 0 for any other
 * value. Bindings (Python ctypes) check their struct mirrors against it. */
AL_API size_t al_stream_struct_size(int which);

/* Whether a CUDA device can be used (cudaGetDeviceCount succeeded, > 0). */
AL_API int al_stream_cuda_available(void);

/* Ids of al_stream_struct_size (declared above). */
typedef enum al_stream_struct {
  AL_STREAM_STRUCT_OPTIONS = 0, /* al_stream_options */
  AL_STREAM_STRUCT_STATE = 1,   /* al_stream_state */
  AL_STREAM_STRUCT_BATCH = 2,   /* al_stream_batch */
  AL_STREAM_STRUCT_STATS = 3,   /* al_stream_stats */
  AL_STREAM_STRUCT_MEMBER = 4   /* al_stream_member */
} al_stream_struct;

/* The value of the integer constant `name` of the stream's public headers (al_stream.h,
 * al_schedule.h: "AL_STREAM_STATE_VERSION" -> 2, the on_error modes, the caps, the struct ids;
 * AL_STREAM_MAX_SKIP_DEFAULT, a fraction, is not in it): AL_OK with *value set; AL_ENOTFOUND
 * (message naming it) for a name they do not define; AL_EINVAL for NULL. As al_status_constant
 * (common/al_status.h): bindings read constants here instead of copying them. Thread-safe. */
AL_API int al_stream_constant(const char *name, int64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* AL_STREAM_H */
