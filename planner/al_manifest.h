/*
 * al_manifest.h - reading a manifest: the per-step, per-rank schedule of
 * micro-batches that `adaptiveload plan` writes (planner/al_plan.h builds it).
 *
 * A manifest is a pure function of (index, cost model, config, seed, epoch,
 * world size). Every rank loads the same file and reads its own rows; no
 * communication is needed. Steps are numbered from 0 within the epoch; a
 * re-planned manifest (elastic resume) starts at info.first_step.
 *
 * Sample references are positions in the index's sample list (al_index.h).
 *
 * Ownership: the caller owns the al_manifest (al_manifest_free). Pointers in
 * returned structs point into it and stay valid until it is freed.
 * Thread safety: a loaded manifest is immutable; concurrent readers are fine.
 * Errors: al_status codes, message in al_last_error() (file and record named).
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_manifest_info, al_bucket_info,
 * al_micro_ref and al_step_info start with `size_t struct_size`, the caller's sizeof, set in one
 * line with the struct's AL_*_INIT macro. The library reads and writes only the bytes that fit in
 * it (fields past it read as zero, are not written), so a caller built against an older header
 * keeps working. A struct the library fills must carry its size; an options struct it reads takes 0
 * as this header's struct (so `= {0}` keeps
 * working). A size below the struct's AL_*_V1 (its first sized version) or above
 * the library's is AL_EINVAL naming the function, the struct and both sizes.
 */
#ifndef AL_MANIFEST_H
#define AL_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"
#include "planner/al_buckets.h"
#include "cost/al_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_manifest al_manifest;

/* The most sequence-parallel degrees a plan may allow: the powers of two 1..1024. */
#define AL_PLAN_MAX_SP_DEGREES 11u

typedef struct al_manifest_info {
  size_t struct_size; /* sizeof(al_manifest_info), set by the caller: AL_MANIFEST_INFO_INIT */
  const char *policy; /* "adaptive" | "equal-token" */
  uint32_t world;
  uint64_t seed;
  uint32_t epoch;
  uint32_t first_step; /* first step held (0 unless re-planned) */
  uint32_t steps;      /* steps held */
  uint64_t samples;    /* real samples planned */
  uint64_t dropped;
  uint64_t padded;
  uint64_t tokens;
  uint64_t index_fingerprint;
  size_t buckets;
  double imbalance_cv;
  double bubble;
  double predicted_seconds;
  double predicted_tokens_per_s;
  /* The rest of the plan's configuration. */
  const char *last_step;   /* "pad" | "drop" */
  uint64_t mem_tokens;     /* M_mem */
  double comp_budget_ms;   /* M_comp */
  double step_cost_ms;     /* adaptive per-rank step target */
  uint32_t window;         /* adaptive balancing window, in steps */
  uint64_t index_samples;  /* samples in the index planned from */
  uint64_t rejected;       /* samples fitting no bucket */
  uint64_t micro_batches;  /* micro-batches held, padding included */
  const char *cost_family; /* "power" | "poly2" */
  /* The global batch and what the steps hold. */
  uint32_t micro_per_step; /* K: micro-batches of every rank in every step (checked on
                              load); 0 = a manifest that records no K (not checked) */
  uint64_t step_tokens;    /* T: target tokens per step over all ranks */
  uint64_t micro_tokens;   /* T / (W x K): the per-micro-batch token target */
  uint32_t unequal_steps;  /* steps whose ranks hold different micro-batch counts */
  double step_tokens_mean; /* real tokens per step over all ranks: mean and population CV */
  double step_tokens_cv;
  double step_samples_mean; /* real samples per step over all ranks: mean and CV */
  double step_samples_cv;
  double step_time_cv; /* predicted step time (the slowest rank's cost) over steps: population CV */
  /* Added at the end: sequence parallelism and the sync model. */
  const char *sync;      /* "step" | "micro": the model bubble and predicted_seconds follow */
  uint32_t n_sp_degrees; /* the allowed degrees ({1} for a plan without SP) */
  uint32_t sp_degrees[AL_PLAN_MAX_SP_DEGREES];
  uint32_t sp_max_degree; /* the largest degree a micro-batch of this plan runs at */
  double bubble_step;  /* 1 - sum of rank costs / (W x sum over steps of the slowest rank's sum) */
  double bubble_micro; /* 1 - sum of rank costs / (W x sum over steps and slots of the slowest) */
} al_manifest_info;
#define AL_MANIFEST_INFO_INIT AL_STRUCT_INIT(al_manifest_info)
#define AL_MANIFEST_INFO_V1 offsetof(al_manifest_info, sync)

typedef struct al_bucket_info {
  size_t struct_size; /* sizeof(al_bucket_info), set by the caller: AL_BUCKET_INFO_INIT */
  uint32_t id;
  uint32_t width, height, frames;
  uint64_t tokens; /* per sample */
  uint32_t batch_size;
  double batch_cost_ms;
  uint64_t samples;
  const char *limited_by; /* "memory" | "compute" | "one" */
  uint32_t sp_degree;     /* added at the end: the degree its micro-batches run at (1 without SP) */
} al_bucket_info;
#define AL_BUCKET_INFO_INIT AL_STRUCT_INIT(al_bucket_info)
#define AL_BUCKET_INFO_V1 offsetof(al_bucket_info, sp_degree)

typedef struct al_micro_ref {
  size_t struct_size; /* sizeof(al_micro_ref), set by the caller: AL_MICRO_REF_INIT */
  uint32_t step;      /* absolute step in the epoch */
  uint32_t rank;
  uint32_t micro; /* 0 .. n_micro-1 within (step, rank) */
  uint32_t n_micro;
  uint32_t bucket;
  size_t n_samples;
  const uint64_t *samples; /* index positions */
  const uint64_t *tokens;  /* per sample */
  size_t n_padded;
  const uint32_t *padded; /* positions in samples[] that are padding repeats; NULL when none */
  double cost_ms;         /* predicted */
  uint64_t step_samples;  /* totals over all ranks of this step, for loss normalisation */
  uint64_t step_tokens;   /* (each sample counted once, however many ranks process it) */
  /* Added at the end: the sequence-parallel group this rank runs this micro-batch in, ranks
   * [rank - sp_rank, rank - sp_rank + sp_degree). Every rank of the group gets the group's
   * samples, tokens, padding and cost (the file stores them once, at sp_rank 0); 1 and 0
   * without SP. */
  uint32_t sp_degree;
  uint32_t sp_rank;
} al_micro_ref;
#define AL_MICRO_REF_INIT AL_STRUCT_INIT(al_micro_ref)
#define AL_MICRO_REF_V1 offsetof(al_micro_ref, sp_degree)

/* Loads and checks a manifest: container checksums, then that it is a plan (every sample
 * scheduled in its key table exactly once in its steps, padding repeating a scheduled one,
 * micro-batches within their bucket's batch size and M_mem, step totals and summary what the
 * steps hold, every rank the same micro-batch count K in every step). AL_EFORMAT names the
 * step, rank, micro-batch and sample of the first violation. A file whose decoded content
 * passes ADAPTIVELOAD_MAX_MANIFEST_BYTES (decimal bytes; default
 * AL_MANIFEST_MAX_BYTES_DEFAULT, about 30x what a 10M-sample plan takes) is refused with
 * AL_ERANGE before it is decoded further. */
#define AL_MANIFEST_MAX_BYTES_DEFAULT (8ull << 30)
AL_API int al_manifest_load(al_manifest **out, const char *path);
AL_API void al_manifest_free(al_manifest *m);

/* The path the manifest was loaded from, as given to al_manifest_load (for messages that name
 * the file); NULL when m is NULL. Valid until the manifest is freed. */
AL_API const char *al_manifest_path(const al_manifest *m);

AL_API int al_manifest_get_info(const al_manifest *m, al_manifest_info *out);
AL_API int al_manifest_bucket(const al_manifest *m, size_t i, al_bucket_info *out);

/* Number of micro-batches of `rank` in absolute step `step`. */
AL_API int al_manifest_micro_count(const al_manifest *m, uint32_t step, uint32_t rank, uint32_t *n);
AL_API int al_manifest_micro(const al_manifest *m, uint32_t step, uint32_t rank, uint32_t micro,
                             al_micro_ref *out);

/* Key of index position `sample` as recorded in the manifest; NULL if absent. */
AL_API const char *al_manifest_key(const al_manifest *m, uint64_t sample);

/* Totals of one step (what al_micro_ref repeats per micro-batch) and its
 * per-rank predicted cost spread. */
typedef struct al_step_info {
  size_t struct_size; /* sizeof(al_step_info), set by the caller: AL_STEP_INFO_INIT */
  uint32_t step;
  uint64_t samples; /* real samples over all ranks */
  uint64_t tokens;
  double max_cost_ms; /* slowest rank */
  double mean_cost_ms;
} al_step_info;
#define AL_STEP_INFO_INIT AL_STRUCT_INIT(al_step_info)
#define AL_STEP_INFO_V1 sizeof(al_step_info)
AL_API int al_manifest_step(const al_manifest *m, uint32_t step, al_step_info *out);

/* Predicted cost (ms) of `rank` in `step`: the sum of its micro-batches. */
AL_API int al_manifest_rank_cost(const al_manifest *m, uint32_t step, uint32_t rank,
                                 double *cost_ms);

/* What the plan did with index position `sample` (KeyChunk.status): 0
 * scheduled, 1..4 rejected (al_reject_reason in planner/al_buckets.h), 16
 * dropped by the last-step policy, 17 consumed before first_step (re-plan),
 * 18 left out for lacking a required member (al_plan_options.require_members);
 * -1 when the position is out of range. */
AL_API int al_manifest_key_status(const al_manifest *m, uint64_t sample);

/* Key of index position i, as an al_key_fn (planner/al_plan.h) over a loaded
 * manifest: what al_plan_save needs to write a re-planned manifest's key table. */
AL_API const char *al_manifest_key_fn(void *manifest, uint64_t i);

/* The latent geometry (VAE strides, patch) a manifest was planned with, defaults filled in:
 * what a bucket's latent grid and tokens are under (the stream crops typed latents to it). */
AL_API int al_manifest_geometry(const al_manifest *m, al_latent_geom *out);

/* The cost model a manifest was planned with. */
AL_API int al_manifest_cost(const al_manifest *m, al_cost_model *out);
/* Samples of a manifest rejected for reason r (AL_REJECT_NONE: total). */
AL_API uint64_t al_manifest_rejected(const al_manifest *m, al_reject_reason r);

#ifdef __cplusplus
}
#endif

#endif /* AL_MANIFEST_H */
