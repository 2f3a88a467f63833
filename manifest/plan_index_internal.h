/* plan_index_internal.h - the planner's input from a loaded index (plan_index.c), for the
 * mixtures' loader (mixture.c), which plans several indexes as one run. Internal to manifest/. */
#ifndef AL_PLAN_INDEX_INTERNAL_H
#define AL_PLAN_INDEX_INTERNAL_H

#include <stdint.h>

#include "loader/al_index.h"
#include "planner/al_plan.h"

/* The planner's input from an index: shapes (the samples lacking a required member as
 * zero-sized shapes, which no bucket takes), latent grids (NULL when the index has none) and the
 * lacking samples (*excl, NULL when none is required). The caller frees *shape, *grid and *excl,
 * also on an error. */
int plan_index_input(const al_index *idx, const al_plan_options *opts, al_plan_input *in,
                     uint32_t **shape_out, al_latent_grid **grid_out, uint8_t **excl);

#endif /* AL_PLAN_INDEX_INTERNAL_H */
