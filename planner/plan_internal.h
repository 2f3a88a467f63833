/* plan_internal.h - layout of al_plan, shared by the files that build a plan: plan.c (a new
 * plan), batch_size.c, schedule.c, sp_schedule.c, step_range.c and plan_info.c (summary and
 * accessors), and the elastic re-plan (manifest/replan.c, which builds a plan from a loaded
 * manifest). Planner-private otherwise: the manifest writer and the reports read a plan through
 * plan_view_internal.h.
 *
 * Memory: per index position one status byte and (while planning) one u32
 * bucket id; per planned sample one u32 in `mb`; per micro-batch one
 * plan_micro; per (step, rank) one u64 offset. Nothing is malloc'd per sample. */
#ifndef AL_PLAN_INTERNAL_H
#define AL_PLAN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/al_buckets.h"
#include "cost/al_cost.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"
#include "planner/key_status_internal.h"
#include "planner/rng_internal.h"

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
  int limited_by;     /* AL_LIMIT_* */
  uint32_t sp_degree; /* the degree its micro-batches run at (plan_bucket_degrees) */
} plan_bucket;

typedef struct plan_micro {
  uint64_t first; /* first sample in al_plan.mb */
  uint32_t n;
  uint32_t bucket;
  uint32_t seq;    /* position in the batch sequence (keeps shuffled order) */
  uint32_t padded; /* nonzero: every sample is a padding repeat */
  double cost;     /* predicted ms: one rank's share (al_cost_predict_sp) */
  /* The sequence-parallel group: sp_degree ranks run it, each holding an entry; the one at
   * sp_rank 0 (the leader) counts its samples, the others repeat first, n, bucket and cost.
   * 1 and 0 without SP. */
  uint32_t sp_degree;
  uint32_t sp_rank;
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
  /* Sequence parallelism: the allowed degrees (ascending; {1} without SP), the sync model
   * (resolved: step or micro) and whether the schedule is the slot one (sp_schedule.c): a
   * degree above 1 allowed or the micro model asked for. */
  uint32_t sp_degrees[AL_PLAN_MAX_SP_DEGREES];
  uint32_t n_sp_degrees;
  al_sync sync;
  int sp_sched;
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
  double bubble_step, bubble_micro; /* under each sync model (bubble is the plan's own) */
  uint32_t sp_max_used;             /* the largest degree a micro-batch runs at */
  uint32_t unequal_steps;
  double step_tokens_mean, step_tokens_cv, step_samples_mean, step_samples_cv, step_time_cv;
  /* A mixture's plan (al_run_open_mixture): its sources, what their weights apportion
   * (al_mix_by) and, per sample number, which source drew it (mb values are draw ids:
   * sources[i].draw_base + pass x samples + position). None (0, NULL) otherwise. */
  al_run_source_info *sources;
  uint32_t n_sources;
  uint32_t mix_by;
  /* Its stages when the mixture gives any (else 0, NULL): stage k from step stage_from[k],
   * weights stage_w[k n_sources + i], normalised over all sources. */
  uint32_t n_stages;
  uint32_t *stage_from;
  double *stage_w;
};

/* A zeroed plan with no first rejected sample (UINT64_MAX for every reason); NULL when out of
 * memory (plan.c). */
al_plan *plan_alloc(void);

/* Shuffles `items` (n planned samples as bucket << 32 | index position, in
 * ascending position order) with the plan's (seed, epoch, stream) and
 * schedules them: fills mb, micro, slot, steps and marks dropped samples in
 * status (schedule.c). */
int plan_schedule(al_plan *p, uint64_t *items, size_t n, uint64_t stream);

/* Walks items (bucket << 32 | position, in the order given) with one open batch per bucket; a
 * batch that reaches its bucket's batch size joins p->micro (its samples appended to p->mb);
 * leftovers follow in bucket order (schedule.c). AL_OK, AL_ENOMEM or plan_push_micro's
 * AL_ERANGE. */
int plan_form_batches(al_plan *p, const uint64_t *items, size_t n);

/* Slot schedule (sp_schedule.c): the batches in micro[0..n_micro) (each of its bucket's degree,
 * one entry each) as steps of K slots, each slot a set of aligned groups covering the W ranks;
 * every group of degree d gets d entries (sp_rank 0..d-1). Fills micro, slot and steps. */
int plan_schedule_slots(al_plan *p, plan_rng *rng);

/* Lays out step `step` of a scheduled plan again from its own W x K entries, as the schedule
 * lays out a window of one step: its micro-batches dealt to ranks K each and levelled (the step
 * model, schedule.c), or filled into K slots by cost (the micro model, sp_schedule.c; every
 * entry of degree 1). The step keeps its micro-batches; ranks and rank orders come from rng.
 * AL_OK or AL_ENOMEM. */
int plan_relayout_bins(al_plan *p, uint32_t step, plan_rng *rng);
int plan_relayout_slots(al_plan *p, uint32_t step, plan_rng *rng);

/* plan.c: everything before the schedule of a new plan: the options checked and taken, the
 * buckets, every sample's bucket or reject reason (p->status, p->rejected, buckets[].samples) and
 * the batch sizes for T / (W K); *items_out (caller frees) the n_items planned samples as
 * bucket << 32 | position in ascending positions. */
int plan_prepare(al_plan *p, const al_plan_input *in, const al_latent_grid *grid,
                 const al_cost_model *cost, const al_plan_options *o, uint64_t **items_out,
                 size_t *n_items);

/* plan.c: the sp-degrees (checked by al_plan_check_sp_degrees) taken into p (sorted;
 * {1} for none) with the sync model resolved (auto: micro when K > 1 or a degree above 1 is
 * allowed; p->micro_per_step set first). */
void plan_take_sp(al_plan *p, const uint32_t *d, size_t n, al_sync sync);

/* The most tokens one sample may have: d_max x M_mem (frame choice and rejection reason 4). */
static inline uint64_t plan_mem_cap(const al_plan *p) {
  return p->mem_tokens * p->sp_degrees[p->n_sp_degrees - 1];
}

/* batch_size.c: batch sizes (dual constraint) and predicted costs. */

/* Every bucket's degree: the smallest allowed d with tokens <= d x M_mem, else the largest. */
void plan_bucket_degrees(al_plan *p);

/* Sizes every bucket for the epoch's sample counts (buckets[].samples): lowers micro_tokens to
 * the target whose batches average at most micro_tokens tokens, then sets every bucket's
 * batch_size, limited_by and batch_cost_ms. */
void plan_size_buckets(al_plan *p);

/* Sets every bucket's batch_cost_ms: the predicted cost of a batch of batch_size samples. */
void plan_bucket_costs(al_plan *p);

/* Predicted cost of n samples of bucket b. */
double plan_micro_cost(const al_plan *p, uint32_t bucket, uint32_t n);

/* Appends the micro-batch of samples mb[first, first + n) of bucket b to p->micro: its place in
 * the batch sequence, its predicted cost and its bucket's degree. AL_ERANGE past 2^32 - 1
 * micro-batches (they are numbered in 32 bits), AL_ENOMEM. */
int plan_push_micro(al_plan *p, uint64_t first, uint32_t n, uint32_t bucket, uint32_t padded);

/* Splits micro-batch i (n >= 2 samples) in two: its first ceil(n / 2) samples stay at i with
 * their cost updated, the rest are appended through plan_push_micro (which may move p->micro).
 * Errors as plan_push_micro's. */
int plan_split_micro(al_plan *p, size_t i);

/* qsort_r comparator of micro-batch indices (ctx: the plan_micro array): by predicted cost,
 * descending, then bucket, then sequence. No globals, so plans may be built on several threads
 * at once. */
int plan_cmp_micro_cost(const void *a, const void *b, void *ctx);

/* step_range.c: a scheduled plan's steps held inside [lo, hi] real tokens each, by exchanging
 * units (a micro-batch, or a sequence-parallel group's entries) of one degree between steps;
 * padding never moves. Every rank keeps its K micro-batches, every micro-batch its samples, and
 * the plan its total and step count; the steps changed are laid out again as the schedule lays
 * out a step (with the plan's seed, epoch and `stream`). On return out_of_range counts the
 * steps still outside (first_out: the first of them, UINT32_MAX for none). AL_OK or
 * AL_ENOMEM. */
int plan_keep_step_range(al_plan *p, uint64_t lo, uint64_t hi, uint64_t stream,
                         uint32_t *out_of_range, uint32_t *first_out);

/* AL_LIMIT_* as the manifest names it, and back (an unknown name is AL_LIMIT_MEMORY). */
const char *plan_limit_name(int limited_by);
int plan_limit_parse(const char *name);

/* Recomputes samples, padded, tokens, imbalance, bubble, seconds and the
 * per-step token / sample / micro-batch-count figures (plan_info.c). */
void plan_stats(al_plan *p);

/* K and T of a plan or a re-plan (plan.c): k_opt and t_opt as asked (0: unset); k_dflt the K
 * when neither is set, t_dflt the T when T is unset (0: W K M); m_fixed when M cannot be
 * changed by the caller. Checks every limit of al_plan.h and names the options; AL_ERANGE when
 * one is broken. */
int plan_resolve_step(uint64_t W, uint64_t M, int m_fixed, uint64_t k_opt, uint64_t t_opt,
                      uint64_t k_dflt, uint64_t t_dflt, uint32_t *k_out, uint64_t *t_out);

#endif /* AL_PLAN_INTERNAL_H */
