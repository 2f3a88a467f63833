/* plan_internal.h - layout of al_plan, shared by the files that build a plan: plan.c (a new
 * plan), replan.c (an elastic re-plan), batch_size.c, schedule.c and plan_info.c (summary and
 * accessors). Planner-private: the manifest writer reads a plan through plan_view_internal.h.
 *
 * Memory: per index position one status byte and (while planning) one u32
 * bucket id; per planned sample one u32 in `mb`; per micro-batch one
 * plan_micro; per (step, rank) one u64 offset. Nothing is malloc'd per sample. */
#ifndef AL_PLAN_INTERNAL_H
#define AL_PLAN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/al_buckets.h"
#include "planner/al_cost.h"
#include "planner/al_plan.h"
#include "planner/key_status_internal.h"

/* Which limit bound a bucket's batch size (Bucket.limited_by: "memory", "compute", "one"). */
#define AL_LIMIT_MEMORY 0
#define AL_LIMIT_COMPUTE 1
#define AL_LIMIT_ONE 2

typedef struct plan_bucket {
  uint32_t width, height, frames;
  uint64_t tokens;
  uint32_t batch_size;
  double batch_cost_ms;
  uint64_t samples;
  int limited_by; /* AL_LIMIT_* */
} plan_bucket;

typedef struct plan_micro {
  uint64_t first; /* first sample in al_plan.mb */
  uint32_t n;
  uint32_t bucket;
  uint32_t seq;    /* position in the batch sequence (keeps shuffled order) */
  uint32_t padded; /* nonzero: every sample is a padding repeat */
  double cost;     /* predicted ms */
} plan_micro;

struct al_plan {
  /* config */
  al_policy policy;
  uint32_t world;
  uint64_t seed;
  uint32_t epoch;
  uint64_t mem_tokens;
  double comp_ms;
  double step_ms; /* PlanConfig.step_cost_ms: always 0 (al_plan_build refuses any other) */
  uint32_t window;
  uint32_t micro_per_step; /* K */
  uint64_t step_tokens;    /* T */
  uint64_t micro_tokens;   /* T / (W K), the memory term of B */
  al_last_step last_step;
  al_latent_geom geom;
  uint64_t fingerprint;
  uint64_t index_samples;
  uint32_t first_step;
  al_cost_model cost;
  plan_bucket *buckets;
  size_t n_buckets;
  /* per index position */
  uint8_t *status;
  uint64_t rejected[AL_REJECT_COUNT];
  uint64_t first_rejected[AL_REJECT_COUNT];
  /* schedule */
  uint32_t *mb;
  size_t n_mb, cap_mb;
  plan_micro *micro;
  size_t n_micro, cap_micro;
  uint64_t *slot; /* steps * world + 1 offsets into micro, (step, rank) order */
  uint32_t steps;
  /* summary */
  uint64_t samples, dropped, padded, tokens;
  double imbalance_cv, bubble, seconds;
  uint32_t unequal_steps;
  double step_tokens_mean, step_tokens_cv, step_samples_mean, step_samples_cv, step_time_cv;
};

/* A zeroed plan with no first rejected sample (UINT64_MAX for every reason); NULL when out of
 * memory (plan.c). */
al_plan *plan_alloc(void);

/* Shuffles `items` (n planned samples as bucket << 32 | index position, in
 * ascending position order) with the plan's (seed, epoch, stream) and
 * schedules them: fills mb, micro, slot, steps and marks dropped samples in
 * status (schedule.c). */
int plan_schedule(al_plan *p, uint64_t *items, size_t n, uint64_t stream);

/* batch_size.c: batch sizes (dual constraint) and predicted costs. */

/* Sizes every bucket for the epoch's sample counts (buckets[].samples): lowers micro_tokens to
 * the target whose batches average at most micro_tokens tokens, then sets every bucket's
 * batch_size, limited_by and batch_cost_ms. */
void plan_size_buckets(al_plan *p);

/* Sets every bucket's batch_cost_ms: the predicted cost of a batch of batch_size samples. */
void plan_bucket_costs(al_plan *p);

/* Predicted cost of n samples of bucket b. */
double plan_micro_cost(const al_plan *p, uint32_t bucket, uint32_t n);

/* AL_LIMIT_* as the manifest names it, and back (an unknown name is AL_LIMIT_MEMORY). */
const char *plan_limit_name(int limited_by);
int plan_limit_parse(const char *name);

/* Recomputes samples, padded, tokens, imbalance, bubble, seconds and the
 * per-step token / sample / micro-batch-count figures (plan_info.c). */
void plan_stats(al_plan *p);

#endif /* AL_PLAN_INTERNAL_H */
