/* Elastic re-plan (al_plan_replan_opts): the samples an old manifest schedules from a step on,
 * planned again for another world size, keeping the old global batch (tokens per step) unless a
 * new one is asked for. The old plan is read through the public manifest accessors
 * (al_manifest.h) only. */
#include <math.h>
#include <stdlib.h>

#include "common/struct_abi_internal.h"
#include "manifest/al_manifest.h"
#include "planner/plan_internal.h"

/* What the re-plan keeps of the old plan's steps: from at_step on, `steps` steps holding
 * `tokens` real tokens; the range of real tokens per step over all its steps; the old
 * micro-batch target and M_comp the batch sizes came from. */
typedef struct replan_ref {
  uint32_t steps;
  uint64_t tokens;
  uint64_t lo, hi;       /* the fewest and the most real tokens one old step holds */
  uint64_t micro_tokens; /* old m (calibrated), the scale's 1 */
  double comp_ms;
} replan_ref;

/* The old plan's range of real tokens per step, over every step it holds (from the step totals
 * that loading checked against the steps). */
static void old_step_range(const al_manifest *old, const al_manifest_info *oi, replan_ref *ref) {
  ref->lo = UINT64_MAX, ref->hi = 0;
  for (uint32_t s = oi->first_step; s - oi->first_step < oi->steps; s++) {
    al_step_info st = AL_STEP_INFO_INIT;
    if (al_manifest_step(old, s, &st)) continue;
    if (st.tokens < ref->lo) ref->lo = st.tokens;
    if (st.tokens > ref->hi) ref->hi = st.tokens;
  }
  if (ref->lo > ref->hi) ref->lo = 0, ref->hi = UINT64_MAX;
}

/* The old plan's T: its recorded step_tokens, else K W M_mem (saturated: the manifest's
 * numbers are not the planner's own, a crafted one can hold any). */
static uint64_t old_step_tokens(const al_manifest_info *oi, uint64_t k_old) {
  if (oi->step_tokens) return oi->step_tokens;
  uint64_t t = k_old;
  const uint64_t f[2] = {oi->world, oi->mem_tokens};
  for (int i = 0; i < 2; i++) t = f[i] && t > UINT64_MAX / f[i] ? UINT64_MAX : t * f[i];
  return t;
}

/* K2 and T for the new world (al_replan_options), by al_plan_build's resolver: keeping T,
 * K2 = ceil(K_old W_old / W2), so that the micro-batches never need more tokens than the old
 * ones; with a new T, the fewest K2 that holds it. */
static int resolve_step(al_plan *p, const al_manifest_info *oi, const al_replan_options *o) {
  uint64_t W = p->world, k_old = oi->micro_per_step ? oi->micro_per_step : 1;
  uint64_t k_keep = (k_old * oi->world + W - 1) / W;
  int rc = plan_resolve_step(W, p->mem_tokens, 1, o->micro_per_step, o->step_tokens, k_keep,
                             old_step_tokens(oi, k_old), &p->micro_per_step, &p->step_tokens);
  if (rc) return rc;
  p->micro_tokens = oi->micro_tokens ? oi->micro_tokens : oi->mem_tokens;
  return AL_OK;
}

/* The re-plan's configuration from the old plan's: everything but the world size, the first
 * step and the step (K, T, the micro-batch target). */
static int take_config(al_plan *p, const al_manifest *old, const al_manifest_info *oi,
                       const char *name, uint32_t at_step, const al_replan_options *o) {
  al_policy pol = AL_POLICY_ADAPTIVE;
  al_last_step ls = AL_LAST_PAD;
  int rc;
  if ((rc = al_policy_parse(oi->policy, &pol)) || (rc = al_last_step_parse(oi->last_step, &ls))) {
    al_error_prefix(rc, "%s", name);
    return rc;
  }
  p->policy = pol;
  p->world = o->world;
  p->seed = oi->seed;
  p->epoch = oi->epoch;
  p->mem_tokens = oi->mem_tokens;
  p->comp_ms = oi->comp_budget_ms;
  p->window = oi->window ? oi->window : AL_PLAN_DEFAULT_WINDOW;
  p->last_step = ls;
  al_manifest_geometry(old, &p->geom);
  p->fingerprint = oi->index_fingerprint;
  p->index_samples = oi->index_samples;
  p->first_step = at_step;
  p->cost.struct_size = sizeof p->cost;
  al_manifest_cost(old, &p->cost);
  /* Each sample keeps its bucket and its bucket's degree rule: the same degrees, which must
   * divide the new world. */
  if ((rc = al_plan_check_sp_degrees(NULL, oi->sp_degrees, oi->n_sp_degrees, o->world))) {
    al_error_prefix(rc, "%s: cannot re-plan for world %u", name, o->world);
    return rc;
  }
  al_sync sy = AL_SYNC_STEP;
  if (oi->sync) al_sync_parse(oi->sync, &sy);
  plan_take_sp(p, oi->sp_degrees, oi->n_sp_degrees, sy);
  return resolve_step(p, oi, o);
}

/* The old plan's buckets with their batch sizes and limits; sample counts start at 0. */
static int take_buckets(al_plan *p, const al_manifest *old, size_t n_buckets) {
  p->n_buckets = n_buckets;
  p->buckets = calloc(n_buckets ? n_buckets : 1, sizeof *p->buckets);
  if (!p->buckets) return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i < n_buckets; i++) {
    al_bucket_info ob = AL_BUCKET_INFO_INIT;
    al_manifest_bucket(old, i, &ob);
    plan_bucket *b = &p->buckets[i];
    b->width = ob.width, b->height = ob.height, b->frames = ob.frames;
    b->tokens = ob.tokens;
    b->batch_size = ob.batch_size ? ob.batch_size : 1;
    b->limited_by = plan_limit_parse(ob.limited_by);
  }
  plan_bucket_degrees(p);
  plan_bucket_costs(p);
  return AL_OK;
}

/* Every position starts as the old key table says, its scheduled samples as consumed (those
 * the re-plan schedules are marked planned again); rejections and drops are counted as the old
 * plan's, so that the summary and the key table agree. */
static void take_statuses(al_plan *p, const al_manifest *old) {
  for (uint64_t i = 0; i < p->index_samples; i++) {
    uint8_t s = (uint8_t)al_manifest_key_status(old, i);
    p->status[i] = s == AL_KEY_PLANNED ? AL_KEY_CONSUMED : s;
    if (s == AL_KEY_DROPPED) p->dropped++;
    if (s >= 1 && s < AL_REJECT_COUNT) {
      if (!p->rejected[s]) p->first_rejected[s] = i;
      p->rejected[s]++;
      p->rejected[AL_REJECT_NONE]++;
    }
  }
}

/* One old micro-batch's real samples (padding excluded) into bucket_of, marked planned. */
static int take_micro(al_plan *p, const al_micro_ref *m, uint32_t *bucket_of, const char *name,
                      size_t *count) {
  for (uint32_t k = 0; k < m->n_samples; k++) {
    int pad = 0;
    for (uint32_t q = 0; q < m->n_padded; q++) pad |= m->padded[q] == k;
    if (pad) continue;
    uint64_t s = m->samples[k];
    if (bucket_of[s] != UINT32_MAX)
      return al_set_error(AL_EFORMAT, "%s: sample %llu is scheduled twice", name,
                          (unsigned long long)s);
    bucket_of[s] = m->bucket;
    p->status[s] = AL_KEY_PLANNED;
    p->buckets[m->bucket].samples++;
    (*count)++;
  }
  return AL_OK;
}

/* The old plan's samples from step at_step on: bucket_of[position] (UINT32_MAX: none). */
static int take_samples(al_plan *p, const al_manifest *old, const al_manifest_info *oi,
                        uint32_t at_step, const char *name, uint32_t *bucket_of, size_t *count) {
  for (uint64_t i = 0; i < p->index_samples; i++) bucket_of[i] = UINT32_MAX;
  *count = 0;
  int rc = AL_OK;
  for (uint32_t s = at_step; s < oi->first_step + oi->steps && !rc; s++)
    for (uint32_t r = 0; r < oi->world && !rc; r++) {
      uint32_t n = 0;
      al_manifest_micro_count(old, s, r, &n);
      for (uint32_t x = 0; x < n && !rc; x++) {
        al_micro_ref m = AL_MICRO_REF_INIT;
        al_manifest_micro(old, s, r, x, &m);
        if (m.sp_rank) continue; /* a follower: its group's leader lists the samples */
        rc = take_micro(p, &m, bucket_of, name, count);
      }
    }
  return rc;
}

/* Rank-slots the re-plan's samples take with the buckets' batch sizes as they are: a batch of
 * degree d takes d (the batch count without SP). */
static uint64_t batch_count(const al_plan *p) {
  uint64_t n = 0;
  for (size_t i = 0; i < p->n_buckets; i++) {
    uint64_t d = p->buckets[i].sp_degree > 1 ? p->buckets[i].sp_degree : 1;
    n += (p->buckets[i].samples + p->buckets[i].batch_size - 1) / p->buckets[i].batch_size * d;
  }
  return n;
}

/* Sizes the buckets for micro-batch target m, M_comp scaled by m / m_old; their batch count. */
static uint64_t size_at(al_plan *p, const replan_ref *ref, uint64_t m) {
  p->micro_tokens = m;
  p->comp_ms = ref->comp_ms * (double)m / (double)ref->micro_tokens;
  plan_size_buckets(p);
  return batch_count(p);
}

/* Keeping the global batch: batch sizes whose batches fill the old plan's ref->steps steps of
 * W2 x K2 micro-batches (adaptive splits, or padding, then fill the last one). The old sizes
 * when they do; else the smallest target m <= M_mem whose batches fit those steps (the batch
 * count falls as m grows), so batches are as many as the steps hold. */
static void size_keeping_steps(al_plan *p, const replan_ref *ref) {
  uint64_t per = (uint64_t)p->world * p->micro_per_step;
  uint64_t want = ref->steps > UINT64_MAX / per ? UINT64_MAX : ref->steps * per;
  uint64_t have = batch_count(p);
  if (!have || (have <= want && have + per > want)) return;
  uint64_t lo = 1, hi = p->mem_tokens;
  if (size_at(p, ref, hi) <= want)
    while (lo < hi) { /* the smallest m in [lo, hi] whose count fits */
      uint64_t mid = lo + (hi - lo) / 2;
      if (size_at(p, ref, mid) <= want)
        hi = mid;
      else
        lo = mid + 1;
    }
  size_at(p, ref, hi);
}

/* A new global batch T2: micro-batches aim at T2 / (W2 K2), M_comp scaled along, calibrated as
 * al_plan_build calibrates them. */
static void size_for_new_step(al_plan *p, const replan_ref *ref, const al_manifest_info *oi) {
  uint64_t k_old = oi->micro_per_step ? oi->micro_per_step : 1;
  uint64_t t_old = old_step_tokens(oi, k_old);
  double m_old = (double)t_old / (double)(k_old * oi->world);
  uint64_t m = p->step_tokens / ((uint64_t)p->world * p->micro_per_step);
  p->micro_tokens = m ? m : 1;
  p->comp_ms = ref->comp_ms * (double)p->micro_tokens / (m_old > 0 ? m_old : 1);
  plan_size_buckets(p);
}

/* Keeping the global batch: the re-plan's mean tokens per step against the old steps'. */
static int check_step_tokens(const al_plan *p, const replan_ref *ref, const char *name,
                             uint32_t at_step) {
  if (!ref->steps || !ref->tokens) return AL_OK;
  double was = (double)ref->tokens / ref->steps, now = p->steps ? p->step_tokens_mean : 0;
  if (fabs(now - was) <= AL_REPLAN_TOKEN_TOLERANCE * was) return AL_OK;
  return al_set_error(AL_ERANGE,
                      "%s: its steps %u..%u hold %.0f tokens per step on average; at world %u "
                      "with %u micro-batches per rank per step these samples fill %u steps of "
                      "%.0f tokens (%+.1f%%, more than %.0f%% off): give step_tokens "
                      "(--step-tokens T) to plan another global batch, or another micro_per_step "
                      "(--micro-per-step)",
                      name, at_step, at_step + ref->steps - 1, was, p->world, p->micro_per_step,
                      p->steps, now, 100 * (now / was - 1), 100 * AL_REPLAN_TOKEN_TOLERANCE);
}

/* Keeping the global batch: every step inside the old plan's range of tokens per step. The
 * schedule groups micro-batches by cost; where that puts too many long one-sample batches (or
 * too many small ones) into one step, units are exchanged between steps (step_range.c). */
static int keep_step_range(al_plan *p, const replan_ref *ref, const char *name, uint32_t at_step) {
  uint32_t out = 0, first = 0;
  /* The layout's own random stream: ~(at_step << 32 | world) is no schedule's stream (a world
   * is at most 2^20). */
  uint64_t stream = ~(((uint64_t)at_step << 32) | p->world);
  int rc = plan_keep_step_range(p, ref->lo, ref->hi, stream, &out, &first);
  if (rc || !out) return rc;
  uint64_t t = 0;
  uint32_t W = p->world, K = p->micro_per_step;
  for (size_t x = (size_t)first * W * K; x < (size_t)(first + 1) * W * K; x++) {
    const plan_micro *m = &p->micro[x];
    if (!m->padded && !m->sp_rank) t += (uint64_t)m->n * p->buckets[m->bucket].tokens;
  }
  return al_set_error(AL_ERANGE,
                      "%s: its steps hold %llu..%llu tokens each; at world %u with %u "
                      "micro-batches per rank per step, %u of the re-planned steps stay outside "
                      "that range whatever micro-batches the steps exchange (the first, step %u, "
                      "holds %llu): give step_tokens (--step-tokens T) to plan another global "
                      "batch, or another micro_per_step (--micro-per-step)",
                      name, (unsigned long long)ref->lo, (unsigned long long)ref->hi, W, K, out,
                      at_step + first, (unsigned long long)t);
}

/* Schedules the count samples of bucket_of with the re-plan's own random stream: a re-plan for
 * (at_step, world) must not replay the first plan's shuffle, and must be reproducible. */
static int schedule_samples(al_plan *p, const uint32_t *bucket_of, size_t count, uint32_t at_step,
                            uint32_t world) {
  uint64_t *items = malloc((count ? count : 1) * sizeof *items);
  if (!items) return al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t k = 0;
  for (size_t i = 0; i < p->index_samples; i++)
    if (bucket_of[i] != UINT32_MAX) items[k++] = (uint64_t)bucket_of[i] << 32 | i;
  int rc = plan_schedule(p, items, count, ((uint64_t)at_step << 32) | world);
  free(items);
  return rc;
}

/* What al_plan_replan_opts refuses before reading the old plan's steps. */
static int check_args(const al_manifest_info *oi, const char *name, uint32_t at_step,
                      const al_replan_options *o) {
  if (!o->world || o->world > (1u << 20))
    return al_set_error(AL_EINVAL, "world size %u out of range (1..1048576)", o->world);
  if (at_step < oi->first_step || at_step - oi->first_step > oi->steps)
    return oi->steps ? al_set_error(AL_ERANGE,
                                    "%s: holds steps %u..%u (a re-plan starts at %u..%u); cannot "
                                    "re-plan from step %u",
                                    name, oi->first_step, oi->first_step + oi->steps - 1,
                                    oi->first_step, oi->first_step + oi->steps, at_step)
                     : al_set_error(AL_ERANGE,
                                    "%s: holds no steps (a re-plan starts at %u); cannot re-plan "
                                    "from step %u",
                                    name, oi->first_step, at_step);
  /* A loaded manifest's key table holds index_samples entries (al_manifest_load checks). */
  if (oi->index_samples > UINT32_MAX)
    return al_set_error(AL_EFORMAT, "%s: key table has %llu entries for an index of %llu samples",
                        name, (unsigned long long)oi->index_samples,
                        (unsigned long long)oi->index_samples);
  return AL_OK;
}

/* The samples, their batch sizes and the schedule of a configured re-plan p. */
static int replan_steps(al_plan *p, const al_manifest *old, const al_manifest_info *oi,
                        const char *name, uint32_t at_step, const al_replan_options *o) {
  size_t n = (size_t)oi->index_samples, count = 0;
  p->status = malloc(n ? n : 1);
  uint32_t *bucket_of = malloc((n ? n : 1) * sizeof *bucket_of);
  int rc = p->status && bucket_of ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory");
  if (!rc) {
    take_statuses(p, old);
    rc = take_samples(p, old, oi, at_step, name, bucket_of, &count);
  }
  replan_ref ref = {oi->first_step + oi->steps - at_step, 0, 0, 0, p->micro_tokens, p->comp_ms};
  for (size_t i = 0; i < p->n_buckets; i++)
    ref.tokens += p->buckets[i].samples * p->buckets[i].tokens;
  old_step_range(old, oi, &ref);
  if (!rc && o->step_tokens)
    size_for_new_step(p, &ref, oi);
  else if (!rc)
    size_keeping_steps(p, &ref);
  if (!rc) rc = schedule_samples(p, bucket_of, count, at_step, o->world);
  free(bucket_of);
  if (rc || o->step_tokens) {
    if (!rc) plan_stats(p);
    return rc;
  }
  /* The mean first (what the step count and batch sizes decide), then each step's range. */
  plan_stats(p);
  rc = check_step_tokens(p, &ref, name, at_step);
  if (!rc) rc = keep_step_range(p, &ref, name, at_step);
  if (!rc) plan_stats(p);
  return rc;
}

int al_plan_replan_opts(al_plan **out, const al_manifest *old, uint32_t at_step,
                        const al_replan_options *opts) {
  if (!out || !old || !opts) return al_set_error(AL_EINVAL, "al_plan_replan: NULL argument");
  *out = NULL;
  al_replan_options local;
  int rc = struct_in(&local, sizeof local, AL_REPLAN_OPTIONS_V1, opts, "al_plan_replan",
                     "al_replan_options");
  if (rc) return rc;
  const al_replan_options *o = &local;
  const char *name = al_manifest_path(old) ? al_manifest_path(old) : "manifest";
  al_manifest_info oi = AL_MANIFEST_INFO_INIT;
  al_manifest_get_info(old, &oi);
  rc = check_args(&oi, name, at_step, o);
  if (rc) return rc;
  al_plan *p = plan_alloc();
  if (!p) return al_set_error(AL_ENOMEM, "plan: out of memory");
  rc = take_config(p, old, &oi, name, at_step, o);
  if (!rc) rc = take_buckets(p, old, oi.buckets);
  if (!rc) rc = replan_steps(p, old, &oi, name, at_step, o);
  if (rc) {
    al_plan_free(p);
    return rc;
  }
  *out = p;
  return AL_OK;
}

int al_plan_replan(al_plan **out, const al_manifest *old, uint32_t at_step, uint32_t world) {
  al_replan_options o = {sizeof(al_replan_options), world, 0, 0};
  return al_plan_replan_opts(out, old, at_step, &o);
}

int al_plan_replan_write(const al_manifest *old, uint32_t at_step, const al_replan_options *o,
                         const char *path) {
  if (!path) return al_set_error(AL_EINVAL, "al_plan_replan_write: NULL path");
  al_plan *p = NULL;
  int rc = al_plan_replan_opts(&p, old, at_step, o);
  if (!rc) rc = al_plan_save(p, path, al_manifest_key_fn, (void *)old);
  al_plan_free(p);
  return rc;
}
