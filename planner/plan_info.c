/* What a built plan tells: its summary figures (plan_stats), the public accessors of al_plan.h
 * and the read-only view the manifest writer takes (plan_view_internal.h). */
#include <string.h>

#include "common/struct_abi_internal.h"
#include "planner/plan_internal.h"
#include "planner/plan_view_internal.h"
#include "planner/stats_internal.h"

/* The micro model's time of the plan: over steps and slots k, the slowest rank's k-th
 * micro-batch (ranks with fewer micro-batches count 0 there). */
static double plan_micro_time(const al_plan *p) {
  uint32_t W = p->world;
  double total = 0;
  for (uint32_t s = 0; s < p->steps; s++) {
    uint64_t kmax = 0;
    for (uint32_t r = 0; r < W; r++) {
      uint64_t n = p->slot[(size_t)s * W + r + 1] - p->slot[(size_t)s * W + r];
      if (n > kmax) kmax = n;
    }
    for (uint64_t k = 0; k < kmax; k++) {
      double mx = 0;
      for (uint32_t r = 0; r < W; r++) {
        uint64_t a = p->slot[(size_t)s * W + r], b = p->slot[(size_t)s * W + r + 1];
        if (a + k < b && p->micro[a + k].cost > mx) mx = p->micro[a + k].cost;
      }
      total += mx;
    }
  }
  return total;
}

void plan_stats(al_plan *p) {
  uint32_t W = p->world;
  p->samples = p->padded = p->tokens = 0;
  for (size_t i = 0; i < p->n_micro; i++) {
    const plan_micro *m = &p->micro[i];
    if (m->sp_rank) continue; /* a follower: its leader counts the group's samples */
    if (m->padded)
      p->padded += m->n;
    else
      p->samples += m->n, p->tokens += (uint64_t)m->n * p->buckets[m->bucket].tokens;
  }
  double cv_sum = 0, mean_sum = 0, max_sum = 0, max_sq = 0;
  double tok_sum = 0, tok_sq = 0, smp_sum = 0, smp_sq = 0;
  p->unequal_steps = 0;
  for (uint32_t s = 0; s < p->steps; s++) {
    double sum = 0, sq = 0, mx = 0, st_tok = 0, st_smp = 0;
    uint64_t n0 = p->slot[(size_t)s * W + 1] - p->slot[(size_t)s * W];
    int unequal = 0;
    for (uint32_t r = 0; r < W; r++) {
      double c = 0;
      uint64_t a = p->slot[(size_t)s * W + r], b = p->slot[(size_t)s * W + r + 1];
      unequal |= b - a != n0;
      for (uint64_t x = a; x < b; x++) {
        const plan_micro *m = &p->micro[x];
        c += m->cost;
        if (!m->padded && !m->sp_rank)
          st_smp += m->n, st_tok += (double)m->n * p->buckets[m->bucket].tokens;
      }
      sum += c, sq += c * c;
      if (c > mx) mx = c;
    }
    p->unequal_steps += unequal;
    double mean, cv;
    plan_mean_cv(sum, sq, W, &mean, &cv);
    cv_sum += cv;
    mean_sum += mean;
    max_sum += mx;
    max_sq += mx * mx;
    tok_sum += st_tok, tok_sq += st_tok * st_tok;
    smp_sum += st_smp, smp_sq += st_smp * st_smp;
  }
  p->imbalance_cv = p->steps ? cv_sum / p->steps : 0;
  double micro_sum = plan_micro_time(p);
  p->bubble_step = max_sum > 0 ? 1.0 - mean_sum / max_sum : 0;
  p->bubble_micro = micro_sum > 0 ? 1.0 - mean_sum / micro_sum : 0;
  p->bubble = p->sync == AL_SYNC_MICRO ? p->bubble_micro : p->bubble_step;
  p->seconds = (p->sync == AL_SYNC_MICRO ? micro_sum : max_sum) / 1000.0;
  p->sp_max_used = 1;
  for (size_t i = 0; i < p->n_micro; i++)
    if (p->micro[i].sp_degree > p->sp_max_used) p->sp_max_used = p->micro[i].sp_degree;
  plan_mean_cv(tok_sum, tok_sq, p->steps, &p->step_tokens_mean, &p->step_tokens_cv);
  plan_mean_cv(smp_sum, smp_sq, p->steps, &p->step_samples_mean, &p->step_samples_cv);
  double step_mean;
  plan_mean_cv(max_sum, max_sq, p->steps, &step_mean, &p->step_time_cv);
}

int al_plan_get_info(const al_plan *p, al_manifest_info *caller) {
  if (!p || !caller) return al_set_error(AL_EINVAL, "al_plan_get_info: NULL argument");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_manifest_info), AL_MANIFEST_INFO_V1,
                           "al_plan_get_info", "al_manifest_info", &n);
  if (rc) return rc;
  al_manifest_info info = AL_MANIFEST_INFO_INIT, *o = &info;
  o->policy = al_policy_name(p->policy);
  o->world = p->world;
  o->seed = p->seed;
  o->epoch = p->epoch;
  o->first_step = p->first_step;
  o->steps = p->steps;
  o->samples = p->samples;
  o->dropped = p->dropped;
  o->padded = p->padded;
  o->tokens = p->tokens;
  o->index_fingerprint = p->fingerprint;
  o->buckets = p->n_buckets;
  o->imbalance_cv = p->imbalance_cv;
  o->bubble = p->bubble;
  o->predicted_seconds = p->seconds;
  o->predicted_tokens_per_s = p->seconds > 0 ? (double)p->tokens / p->seconds : 0;
  o->last_step = al_last_step_name(p->last_step);
  o->mem_tokens = p->mem_tokens;
  o->comp_budget_ms = p->comp_ms;
  o->step_cost_ms = p->step_ms;
  o->window = p->window;
  o->index_samples = p->index_samples;
  o->rejected = p->rejected[AL_REJECT_NONE];
  o->micro_batches = p->n_micro;
  o->cost_family = al_cost_family_name(p->cost.fit.family);
  o->micro_per_step = p->micro_per_step;
  o->step_tokens = p->step_tokens;
  o->micro_tokens = p->micro_tokens;
  o->unequal_steps = p->unequal_steps;
  o->step_tokens_mean = p->step_tokens_mean;
  o->step_tokens_cv = p->step_tokens_cv;
  o->step_samples_mean = p->step_samples_mean;
  o->step_samples_cv = p->step_samples_cv;
  o->step_time_cv = p->step_time_cv;
  o->sync = al_sync_name(p->sync);
  o->n_sp_degrees = p->n_sp_degrees;
  for (uint32_t i = 0; i < p->n_sp_degrees; i++) o->sp_degrees[i] = p->sp_degrees[i];
  o->sp_max_degree = p->sp_max_used ? p->sp_max_used : 1;
  o->bubble_step = p->bubble_step;
  o->bubble_micro = p->bubble_micro;
  struct_out(caller, o, n);
  return AL_OK;
}

uint64_t al_plan_rejected(const al_plan *p, al_reject_reason r) {
  return p && (unsigned)r < AL_REJECT_COUNT ? p->rejected[r] : 0;
}

size_t al_plan_buckets_used(const al_plan *p) {
  size_t n = 0;
  for (size_t i = 0; p && i < p->n_buckets; i++) n += p->buckets[i].samples != 0;
  return n;
}

uint64_t al_plan_first_rejected(const al_plan *p, al_reject_reason r) {
  return p && (unsigned)r < AL_REJECT_COUNT ? p->first_rejected[r] : UINT64_MAX;
}

const al_latent_geom *plan_view_geometry(const al_plan *p) { return &p->geom; }

const al_cost_model *plan_view_cost(const al_plan *p) { return &p->cost; }

void plan_view_bucket(const al_plan *p, size_t i, al_bucket_info *out) {
  const plan_bucket *b = &p->buckets[i];
  out->id = (uint32_t)i;
  out->width = b->width;
  out->height = b->height;
  out->frames = b->frames;
  out->tokens = b->tokens;
  out->batch_size = b->batch_size;
  out->batch_cost_ms = b->batch_cost_ms;
  out->samples = b->samples;
  out->limited_by = plan_limit_name(b->limited_by);
  out->sp_degree = b->sp_degree ? b->sp_degree : 1;
}

const uint8_t *plan_view_key_status(const al_plan *p) { return p->status; }

const uint64_t *plan_view_slots(const al_plan *p) { return p->slot; }

uint32_t plan_view_source_count(const al_plan *p) { return p->n_sources; }

const al_run_source_info *plan_view_source(const al_plan *p, uint32_t i) {
  return i < p->n_sources ? &p->sources[i] : NULL;
}

uint32_t plan_view_mix_by(const al_plan *p) { return p->mix_by; }

uint32_t plan_view_stage_count(const al_plan *p) { return p->n_stages; }

uint32_t plan_view_stage_from(const al_plan *p, uint32_t k) {
  return k < p->n_stages ? p->stage_from[k] : 0;
}

const double *plan_view_stage_weights(const al_plan *p, uint32_t k) {
  return k < p->n_stages ? p->stage_w + (size_t)k * p->n_sources : NULL;
}

void plan_view_micro(const al_plan *p, uint64_t x, plan_micro_view *out) {
  const plan_micro *m = &p->micro[x];
  out->bucket = m->bucket;
  out->n = m->n;
  out->padded = m->padded;
  out->cost_ms = m->cost;
  out->samples = p->mb + m->first;
  out->sp_degree = m->sp_degree ? m->sp_degree : 1;
  out->sp_rank = m->sp_rank;
}

int plan_view_sp(const al_plan *p) { return p->sp_sched; }

void plan_view_degree_counts(const al_plan *p, uint64_t groups[AL_PLAN_MAX_SP_DEGREES],
                             uint64_t tokens[AL_PLAN_MAX_SP_DEGREES]) {
  memset(groups, 0, AL_PLAN_MAX_SP_DEGREES * sizeof *groups);
  memset(tokens, 0, AL_PLAN_MAX_SP_DEGREES * sizeof *tokens);
  for (size_t i = 0; i < p->n_micro; i++) {
    const plan_micro *m = &p->micro[i];
    if (m->sp_rank) continue;
    uint32_t d = m->sp_degree ? m->sp_degree : 1;
    for (uint32_t t = 0; t < p->n_sp_degrees; t++)
      if (p->sp_degrees[t] == d) {
        groups[t]++;
        if (!m->padded) tokens[t] += (uint64_t)m->n * p->buckets[m->bucket].tokens;
      }
  }
}
