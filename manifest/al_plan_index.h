/*
 * al_plan_index.h - planning straight from a loaded index (loader/al_index.h):
 * what `adaptiveload plan` and Python's adaptiveload.plan() both call, so the
 * two write byte-identical manifests for the same inputs.
 *
 * A library of its own (//manifest:plan_index) above //manifest and //loader:
 * the planner core (al_plan.h) takes plain shape arrays and the manifest
 * format (al_manifest.h) reads no index, so neither depends on the loader.
 *
 * Ownership: as al_plan.h; the index is only read, and the plan keeps no
 * pointer into it. Thread safety: as al_plan_build (no global state).
 * Errors: al_status codes; al_last_error() names the file where one applies.
 */
#ifndef AL_PLAN_INDEX_H
#define AL_PLAN_INDEX_H

#include "common/al_api.h"
#include "common/al_status.h"
#include "loader/al_index.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"

#ifdef __cplusplus
extern "C" {
#endif

/* al_plan_build over the index's samples (width, height, frames per index
 * position) with the index's fingerprint. */
AL_API int al_plan_build_index(al_plan **out, const al_index *idx, const al_cost_model *cost,
                               const al_plan_options *opts);

/* al_key_fn (al_plan.h) over an al_index: the key of index position i ("" when
 * out of range); pass the index as the context of al_plan_save. */
/* A chunked run (planner/al_run.h) of the index, with its latent grids and required members as
 * al_plan_build_index takes them. Errors as al_run_open's and al_plan_build_index's. */
AL_API int al_run_open_index(al_run **out, const al_index *idx, const al_cost_model *cost,
                             const al_plan_options *opts);

/* A chunked run of the index opened with opts (world and micro_per_step the reference W and
 * K), its steps [first, end) planned at `world` ranks (0: opts->world; end 0: the pass's last
 * step) and saved to out_path with the index's keys, as `adaptiveload plan --planner chunked
 * [--steps A:B]` writes them. cost_path / buckets_path NULL: the embedded cost model, the
 * default bucket table. */
AL_API int al_run_index_write(const al_index *idx, const char *cost_path, const char *buckets_path,
                              const al_plan_options *opts, uint32_t world, uint32_t first,
                              uint32_t end, const char *out_path);

/* For callers without the C structs (Python's ctypes): al_run_open_index with the cost model
 * loaded from cost_path (NULL = the embedded default) and the bucket table from buckets_path
 * (NULL = opts->buckets, or the default), as al_run_index_write opens its run. The caller owns
 * *out (al_run_free). */
AL_API int al_run_index_open(al_run **out, const al_index *idx, const char *cost_path,
                             const char *buckets_path, const al_plan_options *opts);
/* al_run_index_write writing only rank R's work when only_rank is R + 1 (al_plan_save_opts,
 * al_manifest.h; `plan --steps A:B --rank R`); 0: every rank's. */
AL_API int al_run_index_write_rank(const al_index *idx, const char *cost_path,
                                   const char *buckets_path, const al_plan_options *opts,
                                   uint32_t world, uint32_t first, uint32_t end, uint32_t only_rank,
                                   const char *out_path);

/* Writes the index map of the index (planner/al_run.h: its samples' shapes and latent grids as
 * classes with their position lists) to path, for al_run_open_map and `plan --map`. */
AL_API int al_run_map_write_index(const al_index *idx, const char *path);

AL_API const char *al_plan_index_key(void *index, uint64_t i);

/* For callers without the C structs (Python's ctypes): loads the cost model
 * from cost_path (NULL = the embedded default) and the bucket table from
 * buckets_path (NULL = opts->buckets, or the default), plans with
 * al_plan_build_index and saves the manifest to out_path with the index's
 * keys. `opts` is used as given apart from its bucket table. */
AL_API int al_plan_index_write(const al_index *idx, const char *cost_path, const char *buckets_path,
                               const al_plan_options *opts, const char *out_path);

#ifdef __cplusplus
}
#endif

#endif /* AL_PLAN_INDEX_H */
