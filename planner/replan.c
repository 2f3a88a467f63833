/* Elastic re-plan (al_plan_replan): the samples an old manifest schedules from a step on,
 * planned again for another world size. The old plan is read through the public manifest
 * accessors (al_manifest.h) only; the new plan's buckets keep the old batch sizes. */
#include <stdlib.h>

#include "planner/plan_internal.h"

/* The re-plan's configuration from the old plan's: everything but the world size, the first
 * step and K (which keeps the step's batch count W x K about the same). */
static int take_config(al_plan *p, const al_manifest *old, const al_manifest_info *oi,
                       const char *name, uint32_t at_step, uint32_t world) {
  al_policy pol = AL_POLICY_ADAPTIVE;
  al_last_step ls = AL_LAST_PAD;
  int rc;
  if ((rc = al_policy_parse(oi->policy, &pol)) || (rc = al_last_step_parse(oi->last_step, &ls))) {
    al_error_prefix(rc, "%s", name);
    return rc;
  }
  p->policy = pol;
  p->world = world;
  p->seed = oi->seed;
  p->epoch = oi->epoch;
  p->mem_tokens = oi->mem_tokens;
  p->comp_ms = oi->comp_budget_ms;
  p->window = oi->window ? oi->window : AL_PLAN_DEFAULT_WINDOW;
  /* Keep the step's batch count (W x K) and tokens about the same. */
  uint64_t k_old = oi->micro_per_step ? oi->micro_per_step : 1;
  uint64_t k = (k_old * oi->world + world / 2) / world;
  p->micro_per_step = k ? (uint32_t)(k < (1u << 20) ? k : (1u << 20)) : 1;
  p->step_tokens = oi->step_tokens ? oi->step_tokens : k_old * oi->world * oi->mem_tokens;
  /* The batches keep the old sizes, so the micro-batch target stays too. */
  p->micro_tokens = oi->micro_tokens ? oi->micro_tokens : oi->mem_tokens;
  p->last_step = ls;
  al_manifest_geometry(old, &p->geom);
  p->fingerprint = oi->index_fingerprint;
  p->index_samples = oi->index_samples;
  p->first_step = at_step;
  al_manifest_cost(old, &p->cost);
  return AL_OK;
}

/* The old plan's buckets with their batch sizes and limits; sample counts start at 0. */
static int take_buckets(al_plan *p, const al_manifest *old, size_t n_buckets) {
  p->n_buckets = n_buckets;
  p->buckets = calloc(n_buckets ? n_buckets : 1, sizeof *p->buckets);
  if (!p->buckets) return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i < n_buckets; i++) {
    al_bucket_info ob;
    al_manifest_bucket(old, i, &ob);
    plan_bucket *b = &p->buckets[i];
    b->width = ob.width, b->height = ob.height, b->frames = ob.frames;
    b->tokens = ob.tokens;
    b->batch_size = ob.batch_size ? ob.batch_size : 1;
    b->limited_by = plan_limit_parse(ob.limited_by);
  }
  plan_bucket_costs(p);
  return AL_OK;
}

/* Every position starts as the old key table says, its scheduled samples as consumed (those
 * the re-plan schedules are marked planned again); rejections are counted as the old plan's. */
static void take_statuses(al_plan *p, const al_manifest *old) {
  for (uint64_t i = 0; i < p->index_samples; i++) {
    uint8_t s = (uint8_t)al_manifest_key_status(old, i);
    p->status[i] = s == AL_KEY_PLANNED ? AL_KEY_CONSUMED : s;
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
        al_micro_ref m;
        al_manifest_micro(old, s, r, x, &m);
        rc = take_micro(p, &m, bucket_of, name, count);
      }
    }
  return rc;
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

int al_plan_replan(al_plan **out, const al_manifest *old, uint32_t at_step, uint32_t world) {
  if (!out || !old) return al_set_error(AL_EINVAL, "al_plan_replan: NULL argument");
  *out = NULL;
  const char *name = al_manifest_path(old) ? al_manifest_path(old) : "manifest";
  al_manifest_info oi;
  al_manifest_get_info(old, &oi);
  if (!world || world > (1u << 20))
    return al_set_error(AL_EINVAL, "world size %u out of range (1..1048576)", world);
  if (at_step < oi.first_step || at_step - oi.first_step > oi.steps)
    return oi.steps ? al_set_error(AL_ERANGE,
                                   "%s: holds steps %u..%u (a re-plan starts at %u..%u); cannot "
                                   "re-plan from step %u",
                                   name, oi.first_step, oi.first_step + oi.steps - 1, oi.first_step,
                                   oi.first_step + oi.steps, at_step)
                    : al_set_error(AL_ERANGE,
                                   "%s: holds no steps (a re-plan starts at %u); cannot re-plan "
                                   "from step %u",
                                   name, oi.first_step, at_step);
  /* A loaded manifest's key table holds index_samples entries (al_manifest_load checks). */
  if (oi.index_samples > UINT32_MAX)
    return al_set_error(AL_EFORMAT, "%s: key table has %llu entries for an index of %llu samples",
                        name, (unsigned long long)oi.index_samples,
                        (unsigned long long)oi.index_samples);
  al_plan *p = plan_alloc();
  if (!p) return al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t n = (size_t)oi.index_samples, count = 0;
  uint32_t *bucket_of = NULL;
  int rc = take_config(p, old, &oi, name, at_step, world);
  if (!rc) rc = take_buckets(p, old, oi.buckets);
  if (!rc) {
    p->status = malloc(n ? n : 1);
    bucket_of = malloc((n ? n : 1) * sizeof *bucket_of);
    if (!p->status || !bucket_of) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  if (!rc) {
    take_statuses(p, old);
    rc = take_samples(p, old, &oi, at_step, name, bucket_of, &count);
  }
  if (!rc) rc = schedule_samples(p, bucket_of, count, at_step, world);
  free(bucket_of);
  if (rc) {
    al_plan_free(p);
    return rc;
  }
  plan_stats(p);
  *out = p;
  return AL_OK;
}
