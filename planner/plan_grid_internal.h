/* plan_grid_internal.h - planning with the samples' latent grids: plan.c provides it,
 * manifest/plan_index.c (//manifest:plan_index, al_plan_build_index) calls it.
 * Planner-private otherwise. */
#ifndef AL_PLAN_GRID_INTERNAL_H
#define AL_PLAN_GRID_INTERNAL_H

#include "planner/al_buckets.h"
#include "cost/al_cost.h"
#include "planner/al_plan.h"

/* al_plan_build with the samples' latent grids: grid[i] for index position i, or all-zero when
 * unknown; `grid` NULL = none known (al_plan_build). A sample with a grid gets a bucket whose
 * latent grid fits inside it (al_bucket_assign_grid). */
int plan_build_grid(al_plan **out, const al_plan_input *in, const al_latent_grid *grid,
                    const al_cost_model *cost, const al_plan_options *opts);

#endif /* AL_PLAN_GRID_INTERNAL_H */
