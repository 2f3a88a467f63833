/*
 * al_manifest.h - a plan as a file: writing a manifest (al_plan_save), loading and
 * reading one, and re-planning from one (al_plan_replan_opts). A manifest is the per-step,
 * per-rank schedule of micro-batches that `adaptiveload plan` writes (planner/al_plan.h
 * builds the plan; its records, al_manifest_info, al_bucket_info, al_micro_ref and
 * al_step_info, are defined there).
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
 * al_micro_ref and al_step_info (planner/al_plan.h) start with `size_t struct_size`, the caller's
 * sizeof, set in one line with the struct's AL_*_INIT macro. The library reads and writes only the
 * bytes that fit in it (fields past it read as zero, are not written), so a caller built against an
 * older header keeps working. A struct the library fills must carry its size; an options struct it
 * reads takes 0 as this header's struct (so `= {0}` keeps working). A size below the struct's
 * AL_*_V1 (its first sized version) or above the library's is AL_EINVAL naming the function, the
 * struct and both sizes.
 */
#ifndef AL_MANIFEST_H
#define AL_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"
#include "cost/al_cost.h"
#include "planner/al_buckets.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_manifest al_manifest;

/* Writes the manifest. `key` (may be NULL: keys are then "") gives the key
 * of each index position; al_manifest_key_fn (al_manifest.h) adapts a loaded
 * manifest. */
AL_API int al_plan_save(const al_plan *p, const char *path, al_key_fn key, void *key_ctx);

/* How al_plan_save_opts writes a plan; zero means al_plan_save's whole manifest. */
typedef struct al_plan_save_options {
  size_t struct_size; /* sizeof(al_plan_save_options) (AL_PLAN_SAVE_OPTIONS_INIT); 0 = this
                         header's struct */
  uint32_t only_rank; /* R + 1: only rank R's work in every step (PlanConfig.only_rank), each
                         step with the totals of all ranks, and a key table of R's samples
                         alone; 0: every rank's */
} al_plan_save_options;
#define AL_PLAN_SAVE_OPTIONS_INIT AL_STRUCT_INIT(al_plan_save_options)
#define AL_PLAN_SAVE_OPTIONS_V1 sizeof(al_plan_save_options)

/* al_plan_save with options. A slice of a chunked run (al_run_plan_steps of fewer than all
 * steps: it has no key table of the pass) and a rank's work are written with their own key
 * table (PlanConfig.own_keys): the positions their micro-batches list, padding included, with
 * their keys; none when `key` is NULL (a plan from an index map). A whole plan's bytes are
 * al_plan_save's. AL_ERANGE for a rank outside the world; AL_EINVAL for a rank's work of a plan
 * with sequence-parallel groups above degree 1 (not written yet). */
AL_API int al_plan_save_opts(const al_plan *p, const char *path, al_key_fn key, void *key_ctx,
                             const al_plan_save_options *o);

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

/* Totals of one step (al_step_info: what al_micro_ref repeats per micro-batch) and its
 * per-rank predicted cost spread. */
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

/* A mixture's manifest (plan --mixture): its sources, in the mixture's order (0 for a plan of
 * one index); source i as the run reported it (al_run_source_info: name, weight, passes, draw
 * base: its samples are numbered draw_base + pass x samples + position); and what the weights
 * apportion ("tokens", "samples" or "compute"; "" for one index). al_manifest_source: AL_ERANGE
 * past the sources. */
AL_API uint32_t al_manifest_source_count(const al_manifest *m);
/* A mixture's stages (0 when its weights never change): stage k holds from step *from_step with
 * weights[i] for source i (room for al_manifest_source_count, normalised over all sources).
 * AL_ERANGE past the stages or for too little room; any out-pointer may be NULL. */
AL_API uint32_t al_manifest_stage_count(const al_manifest *m);
AL_API int al_manifest_stage(const al_manifest *m, uint32_t k, uint32_t *from_step, double *weights,
                             size_t n_weights);
AL_API int al_manifest_source(const al_manifest *m, uint32_t i, al_run_source_info *out);
AL_API const char *al_manifest_mix_by(const al_manifest *m);

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

/* The most a re-plan that keeps the global batch may move the mean tokens per step. */
#define AL_REPLAN_TOKEN_TOLERANCE 0.01

/* Elastic resume: re-plans the samples that `old` schedules at steps >= at_step (padding
 * excluded) for o->world ranks. Steps are numbered from at_step (info.first_step = at_step);
 * buckets (each sample keeps its bucket), cost model, policy, seed, epoch, M_mem, window,
 * last-step policy and geometry come from `old`.
 *
 * The global batch (step_tokens 0): the re-plan keeps T (recorded as old's step_tokens) and
 * the number of steps old holds from at_step on, so its steps hold on average exactly the
 * tokens old's steps from at_step on hold. Where W2 x K2 = W_old x K_old the old batch sizes
 * are kept when they fill those steps; otherwise every bucket's batch size is re-derived (B =
 * max(1, min(floor(m / S), floor(r M_comp / c(S)))), M_comp scaled by the same r = m / m_old)
 * with the smallest micro-batch target m <= M_mem whose batches fit the steps. Where the mean
 * tokens per step would still move by more than AL_REPLAN_TOKEN_TOLERANCE (too few samples
 * left for W2 x K2 micro-batches a step, or too many batches even at M_mem) it refuses
 * (AL_ERANGE, saying what each figure is): pass step_tokens, or another micro_per_step. Each
 * step, too, holds between the fewest and the most real tokens of old's steps (so never above
 * T where old's steps are not): micro-batches (sequence-parallel groups, aligned spans of
 * ranks) are exchanged between steps until they do, or it refuses (AL_ERANGE naming the range
 * and the first step outside it).
 * With step_tokens set, micro-batches aim at T2 / (W2 x K2) (M_comp scaled along) as in
 * al_plan_build; T2 / (W2 x K2) > M_mem is refused (AL_ERANGE).
 *
 * The old steps < at_step plus the new plan hold every sample of the old plan exactly once;
 * samples old dropped or rejected stay so (counted in the summary). `old` must hold step at_step
 * (old first_step <= at_step <= old first_step + steps). The old plan is read through the
 * al_manifest.h accessors only; errors name it by al_manifest_path. */
AL_API int al_plan_replan_opts(al_plan **out, const al_manifest *old, uint32_t at_step,
                               const al_replan_options *o);

/* al_plan_replan_opts with only the world size set (the global batch kept). */
AL_API int al_plan_replan(al_plan **out, const al_manifest *old, uint32_t at_step, uint32_t world);

/* al_plan_replan_opts, then al_plan_save to `path` with old's keys: the re-planned manifest in
 * one call (what Python's Planner.resume uses). */
AL_API int al_plan_replan_write(const al_manifest *old, uint32_t at_step,
                                const al_replan_options *o, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* AL_MANIFEST_H */
