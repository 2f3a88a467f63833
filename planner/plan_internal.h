/* plan_internal.h - layout of al_plan, shared by plan.c, schedule.c and
 * manifest_write.c (planner-private).
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

/* Per-key status codes (KeyChunk.status). 1..4 are al_reject_reason. */
#define AL_KEY_PLANNED 0u
#define AL_KEY_DROPPED 16u
#define AL_KEY_CONSUMED 17u /* re-plan: scheduled before first_step by the old plan */

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
  double step_ms; /* recorded only: 0 since issue 14 */
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

/* Shuffles `items` (n planned samples as bucket << 32 | index position, in
 * ascending position order) with the plan's (seed, epoch, stream) and
 * schedules them: fills mb, micro, slot, steps and marks dropped samples in
 * status. */
int plan_schedule(al_plan *p, uint64_t *items, size_t n, uint64_t stream);

/* Keeps steps >= k only (k - first_step of them are removed). */
int plan_trim(al_plan *p, uint32_t k);

/* Recomputes samples, padded, tokens, imbalance, bubble, seconds and the
 * per-step token / sample / micro-batch-count figures. */
void plan_stats(al_plan *p);

/* Predicted cost of n samples of bucket b. */
double plan_micro_cost(const al_plan *p, uint32_t bucket, uint32_t n);

const char *plan_limit_name(int limited_by);

/* Mean and population CV of n values given their sum and sum of squares
 * (0, 0 when n = 0; CV 0 when the mean is 0). */
void plan_mean_cv(double sum, double sq, size_t n, double *mean, double *cv);

/* al_plan_build with the samples' latent grids (issue 15): grid[i] for index position i, or
 * all-zero when unknown; `grid` NULL = none known (al_plan_build). A sample with a grid gets a
 * bucket whose latent grid fits inside it (al_bucket_assign_grid). */
int plan_build_grid(al_plan **out, const al_plan_input *in, const al_latent_grid *grid,
                    const al_cost_model *cost, const al_plan_options *opts);

#endif /* AL_PLAN_INTERNAL_H */
