/* run_internal.h - opening a chunked run (al_run.h) with what only an index knows: the samples'
 * latent grids (NULL: none) and the required members (options already checked and copied).
 * plan_index.c calls it for al_run_open_index; al_run_open for plain arrays. */
#ifndef AL_RUN_INTERNAL_H
#define AL_RUN_INTERNAL_H

#include "planner/al_run.h"

int run_open_grid(al_run **out, const al_plan_input *in, const al_latent_grid *grid,
                  const al_cost_model *cost, const al_plan_options *o);

/* The run's template plan: its key statuses may be relabelled (plan_mark_no_member) before the
 * first al_run_plan_steps, never after. */
al_plan *run_template(al_run *r);

#endif /* AL_RUN_INTERNAL_H */
