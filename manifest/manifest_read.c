/* Loading a manifest into flat arrays and the al_manifest.h accessors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "common/env_internal.h"
#include "common/grow_internal.h"
#include "planner/al_plan.h"
#include "cost/cost_msg_internal.h"
#include "manifest/manifest_internal.h"
#include "planner/key_status_internal.h"
#include "planner/stats_internal.h"
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"

void al_manifest_free(al_manifest *m) {
  if (!m) return;
  free(m->path);
  free(m->buckets);
  free(m->sources);
  free(m->stage_from);
  free(m->stage_w);
  free(m->stepv);
  free(m->slot);
  free(m->micro);
  free(m->samples);
  free(m->tokens);
  free(m->pads);
  free(m->key_off);
  free(m->key_blob);
  free(m->key_status);
  free(m->key_pos);
  free(m);
}

static const char *limit_static(const char *s) {
  if (!strcmp(s, "compute")) return "compute";
  if (!strcmp(s, "one")) return "one";
  return "memory";
}

/* A mixture's stages: ascending from step 0, one finite weight >= 0 per source each. */
static int read_stages(al_manifest *m, const Adaptiveload__PlanConfig *c, const char *where) {
  if (!c->n_stages) return AL_OK;
  if (c->n_stages > AL_RUN_MAX_STAGES)
    return al_set_error(AL_EFORMAT, "%s: %zu stages, at most %d", where, c->n_stages,
                        AL_RUN_MAX_STAGES);
  size_t ns = c->n_sources;
  m->stage_from = calloc(c->n_stages, sizeof *m->stage_from);
  m->stage_w = calloc(c->n_stages * ns, sizeof *m->stage_w);
  if (!m->stage_from || !m->stage_w) return al_set_error(AL_ENOMEM, "manifest: out of memory");
  for (size_t k = 0; k < c->n_stages; k++) {
    const Adaptiveload__Stage *g = c->stages[k];
    if (g->n_weights != ns)
      return al_set_error(AL_EFORMAT, "%s: stage %zu has %zu weights for %zu sources", where, k,
                          g->n_weights, ns);
    if (k ? g->from_step <= m->stage_from[k - 1] : g->from_step != 0)
      return al_set_error(AL_EFORMAT, "%s: stage %zu starts at step %u, %s", where, k, g->from_step,
                          k ? "not after the stage before it" : "not 0");
    m->stage_from[k] = g->from_step;
    for (size_t i = 0; i < ns; i++) {
      if (!(g->weights[i] >= 0) || !isfinite(g->weights[i]))
        return al_set_error(AL_EFORMAT, "%s: stage %zu: weight %zu is %g", where, k, i,
                            g->weights[i]);
      m->stage_w[k * ns + i] = g->weights[i];
    }
  }
  m->n_stages = (uint32_t)c->n_stages;
  return AL_OK;
}

/* A mixture's sources: names, exhaust policies and draw bases that number the key table's
 * passes one after another (draw_base_i = sum over the sources before i of passes x samples). */
static int read_sources(al_manifest *m, const Adaptiveload__PlanConfig *c, const char *where) {
  if (!c->n_sources) return AL_OK;
  if (c->n_sources > AL_RUN_MAX_SOURCES)
    return al_set_error(AL_EFORMAT, "%s: %zu sources, at most %d", where, c->n_sources,
                        AL_RUN_MAX_SOURCES);
  const char *by = c->mix_by ? c->mix_by : "";
  if (strcmp(by, "tokens") && strcmp(by, "samples") && strcmp(by, "compute"))
    return al_set_error(AL_EFORMAT, "%s: mix_by '%s' is none of tokens, samples, compute", where,
                        by);
  snprintf(m->mix_by, sizeof m->mix_by, "%s", by);
  m->sources = calloc(c->n_sources, sizeof *m->sources);
  if (!m->sources) return al_set_error(AL_ENOMEM, "manifest: out of memory");
  uint64_t base = 0;
  for (size_t i = 0; i < c->n_sources; i++) {
    const Adaptiveload__Source *x = c->sources[i];
    al_run_source_info *o = &m->sources[i];
    size_t len = x->name ? strlen(x->name) : 0;
    if (!len || len > AL_RUN_NAME_MAX)
      return al_set_error(AL_EFORMAT, "%s: source %zu has a name of %zu bytes (1..%d)", where, i,
                          len, AL_RUN_NAME_MAX);
    int stop = x->on_exhaust && !strcmp(x->on_exhaust, "stop");
    if (!stop && (!x->on_exhaust || strcmp(x->on_exhaust, "repeat")))
      return al_set_error(AL_EFORMAT, "%s: source '%s': on_exhaust '%s' is neither repeat nor stop",
                          where, x->name, x->on_exhaust ? x->on_exhaust : "");
    if (x->draw_base != base)
      return al_set_error(AL_EFORMAT,
                          "%s: source '%s' numbers its draws from %llu, not %llu (after the "
                          "sources before it)",
                          where, x->name, (unsigned long long)x->draw_base,
                          (unsigned long long)base);
    if (x->samples && x->passes > (UINT64_MAX - base) / x->samples)
      return al_set_error(AL_EFORMAT, "%s: source '%s': %u passes of %llu samples overflow", where,
                          x->name, x->passes, (unsigned long long)x->samples);
    base += (uint64_t)x->passes * x->samples;
    o->struct_size = sizeof *o;
    memcpy(o->name, x->name, len + 1);
    o->weight = x->weight;
    o->on_exhaust = stop ? AL_EXHAUST_STOP : AL_EXHAUST_REPEAT;
    o->passes = x->passes;
    o->samples = x->samples;
    o->draw_base = x->draw_base;
    o->index_fingerprint = x->index_fingerprint;
    o->pass_samples = x->pass_samples;
    o->drawn = x->drawn;
    o->drawn_tokens = x->drawn_tokens;
    o->drawn_ms = x->drawn_ms;
    o->stop_step = x->stop_step;
  }
  if (base != c->index_samples)
    return al_set_error(AL_EFORMAT, "%s: the sources number %llu draws; the key table has %llu",
                        where, (unsigned long long)base, (unsigned long long)c->index_samples);
  m->n_sources = (uint32_t)c->n_sources;
  return read_stages(m, c, where);
}

static int take_header(al_manifest *m, const Adaptiveload__ManifestHeader *h, const char *where) {
  const Adaptiveload__PlanConfig *c = h->config;
  if (!c) return al_set_error(AL_EFORMAT, "%s: ManifestHeader has no config", where);
  if (!h->cost) return al_set_error(AL_EFORMAT, "%s: ManifestHeader has no cost model", where);
  if (!c->world) return al_set_error(AL_EFORMAT, "%s: world size 0", where);
  al_policy pol;
  if (al_policy_parse(c->policy, &pol))
    return al_set_error(AL_EFORMAT, "%s: unknown policy '%s'", where, c->policy);
  snprintf(m->policy, sizeof m->policy, "%s", c->policy);
  snprintf(m->last_step, sizeof m->last_step, "%s", !strcmp(c->last_step, "drop") ? "drop" : "pad");
  int rc = cost_from_msg(h->cost, &m->cost, where);
  if (rc) return rc;
  snprintf(m->cost_family, sizeof m->cost_family, "%s", al_cost_family_name(m->cost.fit.family));
  m->world = c->world;
  if (c->only_rank > c->world)
    return al_set_error(AL_EFORMAT, "%s: only_rank %u (rank %u) of world %u", where, c->only_rank,
                        c->only_rank - 1, c->world);
  m->ranks = c->only_rank ? 1 : c->world;
  m->rank0 = c->only_rank ? c->only_rank - 1 : 0;
  m->first_step = c->first_step;
  al_latent_geom g = {c->vae_stride_t, c->vae_stride_s, c->patch_t, c->patch_h, c->patch_w};
  m->geom = al_latent_geom_resolve(&g);
  al_manifest_info *in = &m->info;
  in->policy = m->policy;
  in->world = c->world;
  in->seed = c->seed;
  in->epoch = c->epoch;
  in->first_step = c->first_step;
  in->index_fingerprint = c->index_fingerprint;
  in->last_step = m->last_step;
  in->mem_tokens = c->mem_tokens;
  in->comp_budget_ms = c->comp_budget_ms;
  in->step_cost_ms = c->step_cost_ms;
  in->window = c->window;
  in->index_samples = c->index_samples;
  in->cost_family = m->cost_family;
  in->micro_per_step = c->micro_per_step;
  in->step_tokens = c->step_tokens;
  in->micro_tokens = c->micro_tokens;
  in->only_rank = c->only_rank;
  in->own_keys = c->own_keys;
  al_sync sy = AL_SYNC_STEP;
  if (c->sync && c->sync[0] && (al_sync_parse(c->sync, &sy) || sy == AL_SYNC_AUTO))
    return al_set_error(AL_EFORMAT, "%s: unknown sync model '%s' (step or micro)", where, c->sync);
  in->sync = al_sync_name(sy);
  if (c->n_sp_degrees > AL_PLAN_MAX_SP_DEGREES)
    return al_set_error(AL_EFORMAT, "%s: %zu sequence-parallel degrees, at most %u", where,
                        c->n_sp_degrees, AL_PLAN_MAX_SP_DEGREES);
  in->n_sp_degrees = c->n_sp_degrees ? (uint32_t)c->n_sp_degrees : 1;
  in->sp_degrees[0] = 1;
  for (size_t i = 0; i < c->n_sp_degrees; i++) {
    uint32_t d = c->sp_degrees[i];
    if (!d || (d & (d - 1)) || d > 1024 || c->world % d)
      return al_set_error(AL_EFORMAT,
                          "%s: sequence-parallel degree %u is not a power of two in 1..1024 "
                          "dividing the world size %u",
                          where, d, c->world);
    in->sp_degrees[i] = d;
  }
  in->sp_max_degree = 1;
  rc = read_sources(m, c, where);
  if (rc) return rc;
  m->n_buckets = h->n_buckets;
  m->buckets = calloc(h->n_buckets ? h->n_buckets : 1, sizeof *m->buckets);
  if (!m->buckets) return al_set_error(AL_ENOMEM, "manifest: out of memory");
  for (size_t i = 0; i < h->n_buckets; i++) {
    const Adaptiveload__Bucket *b = h->buckets[i];
    if (b->id != i) return al_set_error(AL_EFORMAT, "%s: bucket %zu has id %u", where, i, b->id);
    if (!b->tokens) return al_set_error(AL_EFORMAT, "%s: bucket %zu has 0 tokens", where, i);
    al_bucket_info *o = &m->buckets[i];
    o->id = b->id;
    o->width = b->width;
    o->height = b->height;
    o->frames = b->frames;
    o->tokens = b->tokens;
    o->batch_size = b->batch_size;
    o->batch_cost_ms = b->batch_cost_ms;
    o->samples = b->samples;
    o->limited_by = limit_static(b->limited_by);
    o->sp_degree = b->sp_degree ? b->sp_degree : 1;
  }
  in->buckets = m->n_buckets;
  return AL_OK;
}

/* A slice's KeyChunk: one index position per key, ascending over the table, within the index;
 * no status (every listed sample is the steps'). */
static int take_key_positions(al_manifest *m, const Adaptiveload__KeyChunk *k, const char *where,
                              size_t *cap_pos) {
  if (!m->info.own_keys)
    return k->n_positions ? al_set_error(AL_EFORMAT,
                                         "%s: KeyChunk lists positions in a whole plan's key "
                                         "table (only a slice's, PlanConfig.own_keys, has them)",
                                         where)
                          : AL_OK;
  if (k->n_positions != k->n_keys || k->n_status)
    return al_set_error(AL_EFORMAT,
                        "%s: a slice's KeyChunk has %zu keys, %zu positions and %zu status entries "
                        "(one position a key, no status)",
                        where, k->n_keys, k->n_positions, k->n_status);
  int rc = grow_array((void **)&m->key_pos, cap_pos, m->n_keys + k->n_keys, sizeof *m->key_pos,
                      "manifest keys");
  for (size_t i = 0; i < k->n_keys && !rc; i++) {
    uint64_t x = k->positions[i];
    if (x >= m->info.index_samples || (m->n_keys + i && x <= m->key_pos[m->n_keys + i - 1]))
      return al_set_error(AL_EFORMAT, "%s: key %zu names index position %llu (%s)", where, i,
                          (unsigned long long)x,
                          x >= m->info.index_samples
                              ? "beyond the index"
                              : "not above the one before: positions ascend");
    m->key_pos[m->n_keys + i] = x;
  }
  return rc;
}

static int take_keys(al_manifest *m, const Adaptiveload__KeyChunk *k, const char *where,
                     size_t *cap_off, size_t *cap_st, size_t *cap_pos) {
  if (k->first != m->n_keys)
    return al_set_error(AL_EFORMAT, "%s: KeyChunk starts at %llu, expected %llu", where,
                        (unsigned long long)k->first, (unsigned long long)m->n_keys);
  if (k->n_status && k->n_status != k->n_keys)
    return al_set_error(AL_EFORMAT, "%s: KeyChunk has %zu keys and %zu status entries", where,
                        k->n_keys, k->n_status);
  size_t n = k->n_keys;
  int rc = take_key_positions(m, k, where, cap_pos);
  if (!rc)
    rc = grow_array((void **)&m->key_off, cap_off, m->n_keys + n + 1, sizeof *m->key_off,
                    "manifest keys");
  if (!rc) rc = grow_array((void **)&m->key_status, cap_st, m->n_keys + n, 1, "manifest keys");
  if (rc) return rc;
  if (!m->n_keys) m->key_off[0] = 0;
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(k->keys[i]) + 1;
    if ((rc = grow_array((void **)&m->key_blob, &m->blob_cap, m->blob_len + len, 1,
                         "manifest keys")))
      return rc;
    memcpy(m->key_blob + m->blob_len, k->keys[i], len);
    m->blob_len += len;
    m->key_off[m->n_keys + i + 1] = m->blob_len;
    uint32_t st = k->n_status ? k->status[i] : 0;
    if (st > 255) return al_set_error(AL_EFORMAT, "%s: key %zu has status %u", where, i, st);
    m->key_status[m->n_keys + i] = (uint8_t)st;
  }
  m->n_keys += n;
  return AL_OK;
}

/* Micro-batch x of rank r in step `step`: its samples, tokens and padding positions appended
 * to the manifest's arrays, each checked. */
/* A follower of a sequence-parallel group: no samples of its own; the same micro-batch of rank
 * r - sp_rank (read already) is its leader, whose samples it shares. */
static int take_follower(al_manifest *m, const Adaptiveload__MicroBatch *mb, const char *where,
                         uint32_t step, uint32_t r, size_t x) {
  uint32_t W = m->ranks;
  if (m->info.only_rank)
    return al_set_error(AL_EFORMAT,
                        "%s: step %u rank %u micro %zu: sp_rank %u in a rank's slice (its leader's "
                        "rank is not in it)",
                        where, step, r, x, mb->sp_rank);
  if (mb->n_samples || mb->n_tokens || mb->n_padded)
    return al_set_error(AL_EFORMAT,
                        "%s: step %u rank %u micro %zu: sp_rank %u lists samples (only its group's "
                        "sp_rank 0 does)",
                        where, step, r, x, mb->sp_rank);
  if (mb->sp_rank > r || mb->sp_rank >= (mb->sp_degree ? mb->sp_degree : 1))
    return al_set_error(AL_EFORMAT,
                        "%s: step %u rank %u micro %zu: sp_rank %u of a group of degree %u has no "
                        "leader (rank %lld)",
                        where, step, r, x, mb->sp_rank, mb->sp_degree,
                        (long long)r - (long long)mb->sp_rank);
  size_t ls = (size_t)m->steps * W + (r - mb->sp_rank);
  uint64_t lead_n = m->slot[ls + 1] - m->slot[ls];
  if (x >= lead_n)
    return al_set_error(AL_EFORMAT,
                        "%s: step %u rank %u micro %zu: its leader, rank %u, has %llu micro-batches",
                        where, step, r, x, r - mb->sp_rank, (unsigned long long)lead_n);
  const manifest_micro *l = &m->micro[m->slot[ls] + x];
  if (l->sp_rank || l->sp_degree != mb->sp_degree || l->bucket != mb->bucket ||
      l->cost != mb->cost_ms)
    return al_set_error(AL_EFORMAT,
                        "%s: step %u rank %u micro %zu: sp_rank %u of degree %u, bucket %u, cost %g "
                        "ms; rank %u there has sp_rank %u, degree %u, bucket %u, cost %g ms (a "
                        "group's ranks run one micro-batch)",
                        where, step, r, x, mb->sp_rank, mb->sp_degree, mb->bucket, mb->cost_ms,
                        r - mb->sp_rank, l->sp_rank, l->sp_degree, l->bucket, l->cost);
  manifest_micro *o = &m->micro[m->n_micro++];
  *o = *l;
  o->sp_rank = mb->sp_rank;
  return AL_OK;
}

static int take_micro(al_manifest *m, const Adaptiveload__MicroBatch *mb, const char *where,
                      uint32_t step, uint32_t r, size_t x) {
  int rc;
  if (mb->bucket >= m->n_buckets)
    return al_set_error(AL_EFORMAT, "%s: step %u rank %u micro %zu: bucket %u of %zu", where, step,
                        r, x, mb->bucket, m->n_buckets);
  if (mb->sp_rank) return take_follower(m, mb, where, step, r, x);
  if (!mb->n_samples)
    return al_set_error(AL_EFORMAT, "%s: step %u rank %u micro %zu is empty", where, step, r, x);
  if (mb->n_tokens && mb->n_tokens != mb->n_samples)
    return al_set_error(AL_EFORMAT, "%s: step %u rank %u micro %zu: %zu samples, %zu tokens", where,
                        step, r, x, mb->n_samples, mb->n_tokens);
  size_t ns = m->n_samples;
  rc = grow_array((void **)&m->samples, &m->cap_samples, ns + mb->n_samples, sizeof *m->samples,
                  "manifest samples");
  if (!rc)
    rc = grow_array((void **)&m->tokens, &m->cap_tokens, ns + mb->n_samples, sizeof *m->tokens,
                    "manifest samples");
  if (rc) return rc;
  for (size_t k = 0; k < mb->n_samples; k++) {
    if (mb->samples[k] >= m->info.index_samples)
      return al_set_error(AL_EFORMAT,
                          "%s: step %u rank %u micro %zu: sample %llu beyond the index (%llu)",
                          where, step, r, x, (unsigned long long)mb->samples[k],
                          (unsigned long long)m->info.index_samples);
    m->samples[ns + k] = mb->samples[k];
    m->tokens[ns + k] = mb->n_tokens ? mb->tokens[k] : m->buckets[mb->bucket].tokens;
  }
  manifest_micro *o = &m->micro[m->n_micro++];
  o->first = ns;
  o->n = (uint32_t)mb->n_samples;
  o->bucket = mb->bucket;
  o->cost = mb->cost_ms;
  o->sp_degree = mb->sp_degree ? mb->sp_degree : 1;
  o->sp_rank = 0;
  o->pad_first = m->n_pads;
  o->n_pad = (uint32_t)mb->n_padded;
  if ((rc = grow_array((void **)&m->pads, &m->cap_pads, m->n_pads + mb->n_padded, sizeof *m->pads,
                       "manifest padding")))
    return rc;
  for (size_t k = 0; k < mb->n_padded; k++) {
    if (mb->padded[k] >= mb->n_samples)
      return al_set_error(AL_EFORMAT, "%s: step %u rank %u micro %zu: padded position %u of %zu",
                          where, step, r, x, mb->padded[k], mb->n_samples);
    m->pads[m->n_pads++] = mb->padded[k];
  }
  m->n_samples += mb->n_samples;
  return AL_OK;
}

static int take_chunk(al_manifest *m, const Adaptiveload__ManifestChunk *c, const char *where,
                      size_t *cap_steps, size_t *cap_slot) {
  uint32_t W = m->ranks;
  int rc = grow_array((void **)&m->stepv, cap_steps, (size_t)m->steps + c->n_steps,
                      sizeof *m->stepv, "manifest steps");
  if (!rc)
    rc = grow_array((void **)&m->slot, cap_slot, ((size_t)m->steps + c->n_steps) * W + 1,
                    sizeof *m->slot, "manifest steps");
  if (rc) return rc;
  for (size_t s = 0; s < c->n_steps; s++) {
    const Adaptiveload__Step *st = c->steps[s];
    /* Every loop over a manifest ends at first_step + steps: it must not wrap. */
    if ((uint64_t)m->first_step + m->steps >= UINT32_MAX)
      return al_set_error(AL_EFORMAT, "%s: step numbers past 2^32-2 (first step %u, %u steps)",
                          where, m->first_step, m->steps + 1);
    uint32_t want = m->first_step + m->steps;
    if (st->step != want)
      return al_set_error(AL_EFORMAT, "%s: step %u where step %u was expected", where, st->step,
                          want);
    if (st->n_ranks != W)
      return m->info.only_rank
                 ? al_set_error(AL_EFORMAT,
                                "%s: step %u has %zu rank entries; a slice of rank %u's work has 1",
                                where, st->step, st->n_ranks, m->rank0)
                 : al_set_error(AL_EFORMAT, "%s: step %u has %zu ranks, world is %u", where,
                                st->step, st->n_ranks, W);
    manifest_step *ms = &m->stepv[m->steps];
    ms->samples = st->samples;
    ms->tokens = st->tokens;
    ms->max_cost = st->max_cost_ms;
    ms->mean_cost = st->mean_cost_ms;
    for (uint32_t i = 0; i < W; i++) {
      const Adaptiveload__RankWork *rw = st->ranks[i];
      uint32_t r = m->rank0 + i;
      if (!rw->n_micro)
        return al_set_error(AL_EFORMAT,
                            "%s: step %u rank %u has no micro-batch (data-parallel training would hang)",
                            where, st->step, r);
      if (m->info.micro_per_step && rw->n_micro != m->info.micro_per_step)
        return al_set_error(AL_EFORMAT,
                            "%s: step %u rank %u has %zu micro-batches; the plan promises %u on "
                            "every rank (FSDP and sequence parallelism would desynchronise)",
                            where, st->step, r, rw->n_micro, m->info.micro_per_step);
      m->slot[(size_t)m->steps * W + i] = m->n_micro;
      if ((rc = grow_array((void **)&m->micro, &m->cap_micro, m->n_micro + rw->n_micro,
                           sizeof *m->micro, "manifest micro-batches")))
        return rc;
      for (size_t x = 0; x < rw->n_micro; x++)
        if ((rc = take_micro(m, rw->micro[x], where, st->step, r, x))) return rc;
    }
    m->steps++;
    m->slot[(size_t)m->steps * W] = m->n_micro;
  }
  return AL_OK;
}

static void take_summary(al_manifest *m, const Adaptiveload__ManifestSummary *s) {
  al_manifest_info *in = &m->info;
  in->samples = s->samples;
  in->dropped = s->dropped;
  in->padded = s->padded;
  in->tokens = s->tokens;
  in->imbalance_cv = s->imbalance_cv;
  in->bubble = s->bubble;
  /* Both bubbles are recomputed from the steps on load (step_figures): a file's figures are
   * what it says, the loaded ones what it holds. */
  in->predicted_seconds = s->predicted_seconds;
  in->predicted_tokens_per_s = s->predicted_tokens_per_s;
  in->rejected = s->rejected;
  m->rejected[0] = s->rejected;
  for (size_t i = 1; i < s->n_rejected_by_reason && i < AL_REJECT_COUNT; i++)
    m->rejected[i] = s->rejected_by_reason[i];
}

/* Per-step figures of al_manifest_info: micro-batch count equality, tokens and samples per
 * step, the spread of the predicted step time. */
static void step_figures(al_manifest *m) {
  uint32_t W = m->ranks; /* a rank's slice: its figures are that rank's */
  double ts = 0, tq = 0, ss = 0, sq = 0, cs = 0, cq = 0;
  m->info.unequal_steps = 0;
  for (uint32_t s = 0; s < m->steps; s++) {
    const uint64_t *sl = m->slot + (size_t)s * W;
    int unequal = 0;
    for (uint32_t r = 1; r < W; r++) unequal |= sl[r + 1] - sl[r] != sl[1] - sl[0];
    m->info.unequal_steps += unequal;
    double t = (double)m->stepv[s].tokens, n = (double)m->stepv[s].samples;
    ts += t, tq += t * t, ss += n, sq += n * n;
    cs += m->stepv[s].max_cost, cq += m->stepv[s].max_cost * m->stepv[s].max_cost;
  }
  plan_mean_cv(ts, tq, m->steps, &m->info.step_tokens_mean, &m->info.step_tokens_cv);
  plan_mean_cv(ss, sq, m->steps, &m->info.step_samples_mean, &m->info.step_samples_cv);
  double mean;
  plan_mean_cv(cs, cq, m->steps, &mean, &m->info.step_time_cv);
  /* Both sync models' bubbles from the micro-batches' per-rank costs, and the largest degree. */
  double all = 0, t_step = 0, t_micro = 0;
  m->info.sp_max_degree = 1;
  for (size_t x = 0; x < m->n_micro; x++) {
    all += m->micro[x].cost;
    if (m->micro[x].sp_degree > m->info.sp_max_degree)
      m->info.sp_max_degree = m->micro[x].sp_degree;
  }
  for (uint32_t s = 0; s < m->steps; s++) {
    const uint64_t *sl = m->slot + (size_t)s * W;
    double mx = 0;
    uint64_t kmax = 0;
    for (uint32_t r = 0; r < W; r++) {
      double c = 0;
      for (uint64_t x = sl[r]; x < sl[r + 1]; x++) c += m->micro[x].cost;
      if (c > mx) mx = c;
      if (sl[r + 1] - sl[r] > kmax) kmax = sl[r + 1] - sl[r];
    }
    t_step += mx;
    for (uint64_t k = 0; k < kmax; k++) {
      double km = 0;
      for (uint32_t r = 0; r < W; r++)
        if (sl[r] + k < sl[r + 1] && m->micro[sl[r] + k].cost > km) km = m->micro[sl[r] + k].cost;
      t_micro += km;
    }
  }
  m->info.bubble_step = t_step > 0 ? 1.0 - all / ((double)W * t_step) : 0;
  m->info.bubble_micro = t_micro > 0 ? 1.0 - all / ((double)W * t_micro) : 0;
}

static uint64_t max_manifest_bytes(void) {
  return env_u64("ADAPTIVELOAD_MAX_MANIFEST_BYTES", AL_MANIFEST_MAX_BYTES_DEFAULT);
}

int al_manifest_load(al_manifest **out, const char *path) {
  if (!out || !path) return al_set_error(AL_EINVAL, "al_manifest_load: NULL argument");
  *out = NULL;
  al_manifest *m = calloc(1, sizeof *m);
  if (!m || !(m->path = strdup(path))) {
    free(m);
    return al_set_error(AL_ENOMEM, "manifest: out of memory");
  }
  pbio_reader *r = NULL;
  int rc = pbio_reader_open(&r, path, AL_KIND_MANIFEST);
  if (!rc) pbio_reader_set_limit(r, max_manifest_bytes(), "ADAPTIVELOAD_MAX_MANIFEST_BYTES");
  if (!rc) rc = pbio_reader_read_ahead(r);
  size_t cap_off = 0, cap_st = 0, cap_pos = 0, cap_steps = 0, cap_slot = 0;
  int have_header = 0, have_summary = 0;
  uint32_t summary_steps = 0;
  for (unsigned rec = 0; !rc; rec++) {
    uint32_t tag;
    ProtobufCMessage *msg = NULL;
    rc = pbio_read_any(r, &tag, &msg);
    if (rc == AL_EOF) {
      rc = AL_OK;
      break;
    }
    if (rc) break;
    char where[600];
    snprintf(where, sizeof where, "%s: record %u", path, rec);
    if (have_summary) {
      rc = al_set_error(AL_EFORMAT, "%s: record after ManifestSummary", where);
    } else if (!have_header && tag != AL_REC_MANIFEST_HEADER) {
      rc = al_set_error(AL_EFORMAT, "%s: expected ManifestHeader first, got record tag %u", where,
                        tag);
    } else if (tag == AL_REC_MANIFEST_HEADER) {
      if (have_header)
        rc = al_set_error(AL_EFORMAT, "%s: second ManifestHeader", where);
      else
        rc = take_header(m, (const Adaptiveload__ManifestHeader *)msg, where);
      have_header = 1;
      if (!rc && !cap_slot) {
        rc = grow_array((void **)&m->slot, &cap_slot, 1, sizeof *m->slot, "manifest steps");
        if (!rc) m->slot[0] = 0;
      }
    } else if (tag == AL_REC_KEY_CHUNK) {
      rc = take_keys(m, (const Adaptiveload__KeyChunk *)msg, where, &cap_off, &cap_st, &cap_pos);
    } else if (tag == AL_REC_MANIFEST_CHUNK) {
      rc = take_chunk(m, (const Adaptiveload__ManifestChunk *)msg, where, &cap_steps, &cap_slot);
    } else if (tag == AL_REC_MANIFEST_SUMMARY) {
      take_summary(m, (const Adaptiveload__ManifestSummary *)msg);
      summary_steps = ((const Adaptiveload__ManifestSummary *)msg)->steps;
      have_summary = 1;
    } else {
      rc = al_set_error(AL_EFORMAT, "%s: unexpected record tag %u in a manifest", where, tag);
    }
  }
  pbio_reader_close(r);
  if (!rc && !have_header) rc = al_set_error(AL_EFORMAT, "%s: no ManifestHeader", path);
  if (!rc && !have_summary)
    rc = al_set_error(AL_EFORMAT, "%s: no ManifestSummary (truncated?)", path);
  if (!rc && summary_steps != m->steps)
    rc = al_set_error(AL_EFORMAT, "%s: summary says %u steps, chunks hold %u", path, summary_steps,
                      m->steps);
  if (!rc && !m->info.own_keys && m->n_keys != m->info.index_samples)
    rc = al_set_error(AL_EFORMAT, "%s: %llu keys for an index of %llu samples", path,
                      (unsigned long long)m->n_keys, (unsigned long long)m->info.index_samples);
  if (!rc) rc = manifest_check(m);
  if (rc) {
    al_manifest_free(m);
    return rc;
  }
  m->info.steps = m->steps;
  m->info.micro_batches = m->n_micro;
  step_figures(m);
  *out = m;
  return AL_OK;
}

const char *al_manifest_path(const al_manifest *m) { return m ? m->path : NULL; }

int al_manifest_get_info(const al_manifest *m, al_manifest_info *out) {
  if (!m || !out) return al_set_error(AL_EINVAL, "al_manifest_get_info: NULL argument");
  return struct_out_copy(out, &m->info, sizeof m->info, AL_MANIFEST_INFO_V1, "al_manifest_get_info",
                         "al_manifest_info");
}

int al_manifest_bucket(const al_manifest *m, size_t i, al_bucket_info *out) {
  if (!m || !out) return al_set_error(AL_EINVAL, "al_manifest_bucket: NULL argument");
  size_t n;
  int rc = struct_out_size(out, sizeof(al_bucket_info), AL_BUCKET_INFO_V1, "al_manifest_bucket",
                           "al_bucket_info", &n);
  if (rc) return rc;
  if (i >= m->n_buckets)
    return al_set_error(AL_ERANGE, "%s: bucket %zu of %zu", m->path, i, m->n_buckets);
  struct_out(out, &m->buckets[i], n);
  return AL_OK;
}

/* Checks that the manifest holds (step, rank); *slot is its index in slot[]. */
static int rank_slot(const al_manifest *m, uint32_t step, uint32_t rank, size_t *slot) {
  if (step < m->first_step || step - m->first_step >= m->steps)
    return m->steps ? al_set_error(AL_ERANGE, "%s: step %u not held (steps %u..%u)", m->path, step,
                                   m->first_step, m->first_step + m->steps - 1)
                    : al_set_error(AL_ERANGE, "%s: step %u not held (the manifest holds none)",
                                   m->path, step);
  if (rank >= m->world)
    return al_set_error(AL_ERANGE, "%s: rank %u of world %u", m->path, rank, m->world);
  if (m->info.only_rank && rank != m->rank0)
    return al_set_error(AL_EINVAL,
                        "%s: holds only rank %u's work (a slice written with --rank %u), not rank "
                        "%u's: plan rank %u's slice, or stream this one as rank %u",
                        m->path, m->rank0, m->rank0, rank, rank, m->rank0);
  *slot = (size_t)(step - m->first_step) * m->ranks + (rank - m->rank0);
  return AL_OK;
}

int al_manifest_micro_count(const al_manifest *m, uint32_t step, uint32_t rank, uint32_t *n) {
  if (!m || !n) return al_set_error(AL_EINVAL, "al_manifest_micro_count: NULL argument");
  size_t s;
  int rc = rank_slot(m, step, rank, &s);
  if (rc) return rc;
  *n = (uint32_t)(m->slot[s + 1] - m->slot[s]);
  return AL_OK;
}

int al_manifest_micro(const al_manifest *m, uint32_t step, uint32_t rank, uint32_t micro,
                      al_micro_ref *caller) {
  if (!m || !caller) return al_set_error(AL_EINVAL, "al_manifest_micro: NULL argument");
  size_t s, size;
  int rc = struct_out_size(caller, sizeof(al_micro_ref), AL_MICRO_REF_V1, "al_manifest_micro",
                           "al_micro_ref", &size);
  if (rc) return rc;
  rc = rank_slot(m, step, rank, &s);
  if (rc) return rc;
  uint32_t n = (uint32_t)(m->slot[s + 1] - m->slot[s]);
  if (micro >= n)
    return al_set_error(AL_ERANGE, "%s: step %u rank %u has %u micro-batches, not %u", m->path,
                        step, rank, n, micro + 1);
  const manifest_micro *x = &m->micro[m->slot[s] + micro];
  const manifest_step *st = &m->stepv[step - m->first_step];
  al_micro_ref ref = AL_MICRO_REF_INIT, *out = &ref;
  out->step = step;
  out->rank = rank;
  out->micro = micro;
  out->n_micro = n;
  out->bucket = x->bucket;
  out->n_samples = x->n;
  out->samples = m->samples + x->first;
  out->tokens = m->tokens + x->first;
  out->n_padded = x->n_pad;
  /* NULL without padding: a manifest with no padded micro-batch has no pads[] at all. */
  out->padded = x->n_pad ? m->pads + x->pad_first : NULL;
  out->cost_ms = x->cost;
  out->step_samples = st->samples;
  out->step_tokens = st->tokens;
  out->sp_degree = x->sp_degree;
  out->sp_rank = x->sp_rank;
  struct_out(caller, out, size);
  return AL_OK;
}

const char *al_manifest_key(const al_manifest *m, uint64_t sample) {
  if (!m) return NULL;
  if (m->info.own_keys) {
    int64_t e = manifest_key_entry(m, sample);
    return e < 0 ? NULL : m->key_blob + m->key_off[e];
  }
  if (sample >= m->n_keys) return NULL;
  return m->key_blob + m->key_off[sample];
}

const char *al_manifest_key_fn(void *ctx, uint64_t i) {
  return al_manifest_key((const al_manifest *)ctx, i);
}

int al_manifest_key_status(const al_manifest *m, uint64_t sample) {
  if (!m) return -1;
  if (m->info.own_keys) /* a slice: its own samples planned here, the rest elsewhere */
  {
    if (sample >= m->info.index_samples) return -1;
    return manifest_key_entry(m, sample) >= 0 ? (int)AL_KEY_PLANNED : (int)AL_KEY_ELSEWHERE;
  }
  if (sample >= m->n_keys) return -1;
  return m->key_status[sample];
}

int al_manifest_step(const al_manifest *m, uint32_t step, al_step_info *caller) {
  if (!m || !caller) return al_set_error(AL_EINVAL, "al_manifest_step: NULL argument");
  size_t s, n;
  int rc = struct_out_size(caller, sizeof(al_step_info), AL_STEP_INFO_V1, "al_manifest_step",
                           "al_step_info", &n);
  if (rc) return rc;
  rc = rank_slot(m, step, m->rank0, &s);
  if (rc) return rc;
  const manifest_step *st = &m->stepv[step - m->first_step];
  al_step_info info = AL_STEP_INFO_INIT, *out = &info;
  out->step = step;
  out->samples = st->samples;
  out->tokens = st->tokens;
  out->max_cost_ms = st->max_cost;
  out->mean_cost_ms = st->mean_cost;
  struct_out(caller, out, n);
  return AL_OK;
}

int al_manifest_rank_cost(const al_manifest *m, uint32_t step, uint32_t rank, double *cost) {
  if (!m || !cost) return al_set_error(AL_EINVAL, "al_manifest_rank_cost: NULL argument");
  size_t s;
  int rc = rank_slot(m, step, rank, &s);
  if (rc) return rc;
  double c = 0;
  for (uint64_t x = m->slot[s]; x < m->slot[s + 1]; x++) c += m->micro[x].cost;
  *cost = c;
  return AL_OK;
}

int al_manifest_geometry(const al_manifest *m, al_latent_geom *out) {
  if (!m || !out) return al_set_error(AL_EINVAL, "al_manifest_geometry: NULL argument");
  *out = m->geom;
  return AL_OK;
}

int al_manifest_cost(const al_manifest *m, al_cost_model *out) {
  if (!m || !out) return al_set_error(AL_EINVAL, "al_manifest_cost: NULL argument");
  return struct_out_copy(out, &m->cost, sizeof m->cost, AL_COST_MODEL_V1, "al_manifest_cost",
                         "al_cost_model");
}

uint64_t al_manifest_rejected(const al_manifest *m, al_reject_reason r) {
  return m && (unsigned)r < AL_REJECT_COUNT ? m->rejected[r] : 0;
}

uint32_t al_manifest_source_count(const al_manifest *m) { return m ? m->n_sources : 0; }

int al_manifest_source(const al_manifest *m, uint32_t i, al_run_source_info *out) {
  if (!m || !out) return al_set_error(AL_EINVAL, "al_manifest_source: NULL argument");
  size_t n;
  int rc = struct_out_size(out, sizeof *out, AL_RUN_SOURCE_INFO_V1, "al_manifest_source",
                           "al_run_source_info", &n);
  if (rc) return rc;
  if (i >= m->n_sources)
    return al_set_error(AL_ERANGE, "%s: source %u: the manifest has %u sources", m->path, i,
                        m->n_sources);
  struct_out(out, &m->sources[i], n);
  return AL_OK;
}

const char *al_manifest_mix_by(const al_manifest *m) { return m ? m->mix_by : ""; }

uint32_t al_manifest_stage_count(const al_manifest *m) { return m ? m->n_stages : 0; }

int al_manifest_stage(const al_manifest *m, uint32_t k, uint32_t *from_step, double *weights,
                      size_t n_weights) {
  if (!m) return al_set_error(AL_EINVAL, "al_manifest_stage: NULL manifest");
  if (k >= m->n_stages)
    return al_set_error(AL_ERANGE, "stage %u: the manifest has %u stages", k, m->n_stages);
  if (weights && n_weights < m->n_sources)
    return al_set_error(AL_ERANGE, "al_manifest_stage: room for %zu weights, the mixture has %u",
                        n_weights, m->n_sources);
  if (from_step) *from_step = m->stage_from[k];
  if (weights)
    memcpy(weights, m->stage_w + (size_t)k * m->n_sources, m->n_sources * sizeof *weights);
  return AL_OK;
}
