/*
 * bucket_fit_internal.h - a bucket table fitted to a corpus's own latent grids
 * (`adaptiveload buckets --fit`).
 *
 * The fit keeps the most native latent tokens (the measure of fidelity_internal.h) with at
 * most `max_sizes` (W, H) sizes. Candidates are the corpus's distinct native grids (a typed
 * latent's H x W, else its pixels' H/s x W/s), floored to whole patches, as pixel sizes
 * (grid x s); frame counts are the corpus's distinct latent frame counts T as 1 + (T-1) * st
 * and, for a grid whose whole length exceeds M_mem, the longest latent length M_mem allows
 * at that grid (the 64 holding the most tokens when there are more, the fewest always kept).
 * Greedy: starting empty, each round tries every unpicked candidate in every aspect group
 * picked so far and in a group of its own (named by its reduced ratio W:H), and keeps the
 * move whose table keeps the most tokens when every sample is assigned exactly as the planner
 * assigns it (al_bucket_assign_grid under `geom` and `mem_tokens`: nearest group ratio, then
 * the largest size inside the sample), until max_sizes sizes or no move adds tokens. Ties go
 * to the candidate holding more tokens (then the larger, then the wider) and the group
 * picked first: the output depends only on the index's samples.
 *
 * Internal to //planner:bucket_fit (used by cli/cmd_buckets.c); not exported.
 * Ownership: *out is the caller's (al_bucket_table_free). Thread safety: reads its
 * arguments only. Errors: al_status codes, message in al_last_error().
 */
#ifndef AL_BUCKET_FIT_INTERNAL_H
#define AL_BUCKET_FIT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/al_status.h"
#include "loader/al_index.h"
#include "planner/al_buckets.h"

#define BUCKET_FIT_MAX_SIZES 64   /* a table's aspect groups are at most 64 */
#define BUCKET_FIT_CANDIDATES 512 /* candidate sizes tried: those holding the most tokens */

typedef struct bucket_fit_options {
  size_t max_sizes;    /* 1..BUCKET_FIT_MAX_SIZES; 0 = 16 */
  uint64_t mem_tokens; /* M_mem; 0 = AL_PLAN_DEFAULT_MEM_TOKENS */
  al_latent_geom geom; /* zero fields = Wan 2.1 defaults */
  FILE *progress;      /* one line per round, or NULL */
} bucket_fit_options;

typedef struct bucket_fit_result {
  uint64_t native_tokens, kept_tokens;      /* over every sample of the index */
  size_t sizes, frames, candidates, shapes; /* chosen; tried; distinct sample shapes */
} bucket_fit_result;

int bucket_fit(al_bucket_table **out, bucket_fit_result *res, const al_index *idx,
               const bucket_fit_options *o);

#endif /* AL_BUCKET_FIT_INTERNAL_H */
