/*
 * al_mixture.h - a mixture as a file: several indexes, each a named, weighted source, planned as
 * one run (planner/al_run.h, "mixtures"). What `adaptiveload plan --mixture MIX.json` and
 * Python's adaptiveload.plan_mixture() read.
 *
 * MIX.json (JSON; every field name below, nothing else; unknown fields are refused by name):
 *
 *   {"by": "tokens" | "samples" | "compute",          default "tokens"
 *    "steps": N,                                       the run's length (optional)
 *    "until": "NAME" | {"source": "NAME", "passes": k}, or the end of a source's k-th pass
 *    "sources": [{"name": "web", "index": "web.alidx", "weight": 0.5,
 *                 "on_exhaust": "repeat" | "stop"}, ...],   default "repeat"
 *       a source may give "map": its index map (plan --save-map), planned from instead of its
 *       index (mapped, no index loaded: what a mixture of 10^8 samples plans within bounded
 *       memory; the same run as from the indexes; the manifest then has no keys); every
 *       source a map or none; "index" stays what the stream reads
 *    "stages": [{"from_step": 5000, "weights": {"web": 0.6, "hq": 0},
 *                "ramp_steps": 2000}, ...]}   optional
 *
 * Index paths are relative to the file's folder (al_mixture_load) or to base_dir
 * (al_mixture_parse). Stages (al_run_stage): from each stage's from_step on (ascending; a stage
 * from step 0 replaces the sources' weights), its weights, each >= 0 (0 pauses a source); a name
 * a stage lacks keeps the weight it had before the stage. With ramp_steps N the weights move
 * linearly to the stage's over [from_step, from_step + N) (al_run_stage.ramp_steps: a stage of
 * a window each; the next stage starts at or after from_step + N). A stage that would change
 * buckets, mem_tokens, micro_per_step or step_tokens is refused (AL_EINVAL, naming the stage
 * and the field): not planned yet.
 * With neither steps nor until, every source must be a stop source and the run ends when the
 * last has given its pass.
 *
 * Ownership: the caller owns an al_mixture (al_mixture_free), which owns the indexes and the run
 * it opens. Thread safety: one thread at a time per al_mixture. Errors: al_status codes;
 * al_last_error() names the file, the field and the source.
 */
#ifndef AL_MIXTURE_H
#define AL_MIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"
#include "manifest/al_manifest.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_mixture al_mixture;

/* Parses a mixture from JSON text. `what` names it in messages (a path, or "mixture"). */
AL_API int al_mixture_parse(al_mixture **out, const char *json, const char *base_dir,
                            const char *what);

/* Reads and parses MIX.json. */
AL_API int al_mixture_load(al_mixture **out, const char *path);

AL_API void al_mixture_free(al_mixture *mx);

/* Sources, and source i's name and index path (NULL past the sources). */
AL_API size_t al_mixture_source_count(const al_mixture *mx);
AL_API const char *al_mixture_source_name(const al_mixture *mx, size_t i);
AL_API const char *al_mixture_source_index(const al_mixture *mx, size_t i);

/* Source i's index as the open run loaded it (owned by mx, valid until al_mixture_free or the
 * next open): what a stream of the run may read instead of loading it again. NULL past the
 * sources, before a run is open, and for a source planned from its map. */
AL_API const al_index *al_mixture_index(const al_mixture *mx, size_t i);

/* Whether manifest m (at manifest_path, for messages) is a plan of this mixture: the same
 * sources, by name and in order. AL_OK, else AL_EINVAL naming the first difference. What each
 * source's index holds is checked where it is read (al_stream_open_mixture). */
AL_API int al_mixture_check_manifest(const al_mixture *mx, const al_manifest *m,
                                     const char *manifest_path);

/* Loads every source's index and opens the mixture's run with these options (world and
 * micro_per_step the reference W and K, as al_run_open's); the run stays the mixture's
 * (*run borrowed, valid until al_mixture_free or the next open). Errors name the source. */
AL_API int al_mixture_open_run(al_mixture *mx, const al_cost_model *cost,
                               const al_plan_options *opts, const al_run **run);

/* A changed schedule: mx continues `old` (borrowed: it must outlive mx's open runs) from step
 * at_step, as al_run_mix.continues says (planner/al_run.h): al_mixture_open_run opens old's run
 * first, with the same options (old may itself continue another), then mx's from the first of
 * its window boundaries at or after at_step (al_run_continued_at of the open run). old NULL: mx
 * plans a run of its own. */
AL_API int al_mixture_continue(al_mixture *mx, al_mixture *old, uint32_t at_step);

/* al_mixture_open_run with the cost model from cost_path (NULL: the default model) and the
 * bucket table from buckets_path (NULL: the options'): what Python's chunked Planner opens. */
AL_API int al_mixture_open_run_paths(al_mixture *mx, const char *cost_path,
                                     const char *buckets_path, const al_plan_options *opts,
                                     const al_run **run);

/* The key of sample number id of the open run's plans (al_key_fn: its source's index key);
 * "" when out of range or no run is open. */
AL_API const char *al_mixture_key(void *mx, uint64_t id);

/* Writes plan p of the open run as a manifest (al_plan_save_opts with the sources' keys). */
AL_API int al_mixture_save(al_mixture *mx, const al_plan *p, const char *path,
                           const al_plan_save_options *so);

/* The whole path in one call, as al_run_index_write_rank is for one index (what Python
 * calls): the cost model from cost_path (NULL: the default model), the bucket table from
 * buckets_path (NULL: the options'), the run opened, its steps [first, end) (end 0: to the run's
 * end) laid out at `world` (0: opts->world), rank only_rank - 1's work alone when only_rank is
 * nonzero, written to out_path. */
AL_API int al_mixture_write(al_mixture *mx, const char *cost_path, const char *buckets_path,
                            const al_plan_options *opts, uint32_t world, uint32_t first,
                            uint32_t end, uint32_t only_rank, const char *out_path);

#ifdef __cplusplus
}
#endif

#endif /* AL_MIXTURE_H */
