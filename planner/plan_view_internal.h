/* plan_view_internal.h - a built plan, read-only, as the manifest writer reads it.
 *
 * plan_info.c provides these over al_plan's layout (plan_internal.h); manifest/manifest_write.c
 * reads a plan only through them and al_plan_get_info / al_plan_rejected (al_plan.h), so the
 * writer does not depend on the layout and the plan's files never call the writer. Used by
 * manifest/ (manifest_write.c, manifest_report.c, fidelity.c); not exported.
 * Pointers point into the plan and stay valid until it is freed. */
#ifndef AL_PLAN_VIEW_INTERNAL_H
#define AL_PLAN_VIEW_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/al_buckets.h"
#include "cost/al_cost.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"

/* One micro-batch of the schedule. */
typedef struct plan_micro_view {
  uint32_t bucket;
  uint32_t n;              /* samples */
  uint32_t padded;         /* nonzero: every sample is a padding repeat */
  double cost_ms;          /* predicted */
  const uint32_t *samples; /* n index positions */
  uint32_t sp_degree;      /* its group's degree (1 without SP) */
  uint32_t sp_rank;        /* this rank's place in it; 0 is the leader, which lists samples */
} plan_micro_view;

/* The latent geometry (defaults filled in) and the cost model the plan was made with. */
const al_latent_geom *plan_view_geometry(const al_plan *p);
const al_cost_model *plan_view_cost(const al_plan *p);

/* Bucket i (< al_manifest_info.buckets) as the manifest lists it: id i, shape, tokens, batch
 * size and its predicted cost, samples of the epoch, the limit that bound the batch size. */
void plan_view_bucket(const al_plan *p, size_t i, al_bucket_info *out);

/* Per index position (al_manifest_info.index_samples of them): its key status
 * (key_status_internal.h). */
const uint8_t *plan_view_key_status(const al_plan *p);

/* steps x world + 1 offsets into the micro-batches, (step, rank) order: entry s W + r is the
 * first micro-batch of rank r in step first_step + s, entry s W + r + 1 the end of it. */
const uint64_t *plan_view_slots(const al_plan *p);

/* Nonzero when the plan is a slot schedule (SP degrees or the micro sync model): the manifest
 * then records its degrees, sync model, groups and both bubbles. */
int plan_view_sp(const al_plan *p);

/* Per allowed degree (al_manifest_info.sp_degrees order): the groups (micro-batches counted
 * once, padding included) and the real tokens they hold. */
void plan_view_degree_counts(const al_plan *p, uint64_t groups[AL_PLAN_MAX_SP_DEGREES],
                             uint64_t tokens[AL_PLAN_MAX_SP_DEGREES]);

/* A mixture's sources (0 for a plan of one input), source i, and what the weights apportion
 * (al_mix_by). */
uint32_t plan_view_source_count(const al_plan *p);
const al_run_source_info *plan_view_source(const al_plan *p, uint32_t i);
uint32_t plan_view_mix_by(const al_plan *p);
/* A mixture's stages (0 when its weights never change); stage k's first step and weights (one
 * per source). */
uint32_t plan_view_stage_count(const al_plan *p);
uint32_t plan_view_stage_from(const al_plan *p, uint32_t k);
const double *plan_view_stage_weights(const al_plan *p, uint32_t k);

/* Micro-batch x (< al_manifest_info.micro_batches). */
void plan_view_micro(const al_plan *p, uint64_t x, plan_micro_view *out);

#endif /* AL_PLAN_VIEW_INTERNAL_H */
