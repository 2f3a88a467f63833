/* Writing a plan as a manifest: ManifestHeader, KeyChunk*, ManifestChunk*,
 * ManifestSummary (proto/adaptiveload.proto). No timestamps, no host names:
 * the same plan gives the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "planner/cost_internal.h"
#include "planner/plan_internal.h"
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"

#define KEYS_PER_CHUNK 65536u
#define STEPS_PER_CHUNK 1024u
#define SAMPLES_PER_CHUNK (1u << 18) /* keeps a chunk record a few MB at most */

#define PRODUCER "adaptiveload 0.1.0 planner"

static int write_header(pbio_writer *w, const al_plan *p) {
  Adaptiveload__PlanConfig cfg;
  adaptiveload__plan_config__init(&cfg);
  cfg.policy = (char *)al_policy_name(p->policy);
  cfg.world = p->world;
  cfg.seed = p->seed;
  cfg.epoch = p->epoch;
  cfg.mem_tokens = p->mem_tokens;
  cfg.comp_budget_ms = p->comp_ms;
  cfg.window = p->window;
  cfg.last_step = (char *)al_last_step_name(p->last_step);
  cfg.first_step = p->first_step;
  cfg.index_fingerprint = p->fingerprint;
  cfg.vae_stride_t = p->geom.vae_stride_t;
  cfg.vae_stride_s = p->geom.vae_stride_s;
  cfg.patch_t = p->geom.patch_t;
  cfg.patch_h = p->geom.patch_h;
  cfg.patch_w = p->geom.patch_w;
  cfg.index_samples = p->index_samples;
  cfg.step_cost_ms = p->step_ms;
  cfg.micro_per_step = p->micro_per_step;
  cfg.step_tokens = p->step_tokens;
  cfg.micro_tokens = p->micro_tokens;

  Adaptiveload__CostModel cost;
  double cp[3], ca[3];
  cost_to_msg(&p->cost, &cost, cp, ca);

  Adaptiveload__Bucket *bk = calloc(p->n_buckets ? p->n_buckets : 1, sizeof *bk);
  Adaptiveload__Bucket **bp = calloc(p->n_buckets ? p->n_buckets : 1, sizeof *bp);
  if (!bk || !bp) {
    free(bk);
    free(bp);
    return al_set_error(AL_ENOMEM, "manifest: out of memory");
  }
  for (size_t i = 0; i < p->n_buckets; i++) {
    const plan_bucket *b = &p->buckets[i];
    adaptiveload__bucket__init(&bk[i]);
    bk[i].id = (uint32_t)i;
    bk[i].width = b->width;
    bk[i].height = b->height;
    bk[i].frames = b->frames;
    bk[i].tokens = b->tokens;
    bk[i].batch_size = b->batch_size;
    bk[i].batch_cost_ms = b->batch_cost_ms;
    bk[i].samples = b->samples;
    bk[i].limited_by = (char *)plan_limit_name(b->limited_by);
    bp[i] = &bk[i];
  }
  Adaptiveload__ManifestHeader h;
  adaptiveload__manifest_header__init(&h);
  h.producer = PRODUCER;
  h.config = &cfg;
  h.cost = &cost;
  h.n_buckets = p->n_buckets;
  h.buckets = bp;
  int rc = pbio_write_msg(w, AL_REC_MANIFEST_HEADER, &h.base);
  free(bk);
  free(bp);
  return rc;
}

static int write_keys(pbio_writer *w, const al_plan *p, al_key_fn key, void *ctx) {
  char **keys = malloc(KEYS_PER_CHUNK * sizeof *keys);
  uint32_t *st = malloc(KEYS_PER_CHUNK * sizeof *st);
  int rc = (keys && st) ? AL_OK : al_set_error(AL_ENOMEM, "manifest: out of memory");
  for (uint64_t first = 0; first < p->index_samples && !rc; first += KEYS_PER_CHUNK) {
    uint64_t n = p->index_samples - first;
    if (n > KEYS_PER_CHUNK) n = KEYS_PER_CHUNK;
    for (uint64_t i = 0; i < n; i++) {
      const char *k = key ? key(ctx, first + i) : "";
      keys[i] = (char *)(k ? k : "");
      st[i] = p->status[first + i];
    }
    Adaptiveload__KeyChunk kc;
    adaptiveload__key_chunk__init(&kc);
    kc.first = first;
    kc.n_keys = (size_t)n;
    kc.keys = keys;
    kc.n_status = (size_t)n;
    kc.status = st;
    rc = pbio_write_msg(w, AL_REC_KEY_CHUNK, &kc.base);
  }
  free(keys);
  free(st);
  return rc;
}

/* One chunk's messages and arrays, kept from chunk to chunk (grown, never shrunk): fresh
 * multi-MB blocks for every chunk were mmap'd, faulted in and unmapped each time (issue 14). */
typedef struct chunk_buf {
  Adaptiveload__Step *steps;
  Adaptiveload__Step **step_p;
  Adaptiveload__RankWork *rw;
  Adaptiveload__RankWork **rw_p;
  Adaptiveload__MicroBatch *mb;
  Adaptiveload__MicroBatch **mb_p;
  uint64_t *samples, *tokens;
  uint32_t *pads;
  size_t cap_steps, cap_rw, cap_mb, cap_samples, cap_pads;
} chunk_buf;

static void chunk_free(chunk_buf *c) {
  free(c->steps), free(c->step_p), free(c->rw), free(c->rw_p);
  free(c->mb), free(c->mb_p), free(c->samples), free(c->tokens), free(c->pads);
}

/* Grows an array and, when `ptrs` is not NULL, its parallel array of pointers to `need`. */
static int chunk_grow(void **arr, void **ptrs, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return AL_OK;
  size_t n;
  int rc = grow_capacity(*cap, need, elem, "a manifest chunk", &n);
  if (!rc) rc = grow_resize(arr, n, elem, "a manifest chunk");
  if (!rc && ptrs) rc = grow_resize(ptrs, n, sizeof(void *), "a manifest chunk");
  if (!rc) *cap = n;
  return rc;
}

/* Room for ns steps, nr rank entries, nm micro-batches, nsamp samples and npad pads. */
static int chunk_reserve(chunk_buf *c, size_t ns, size_t nr, size_t nm, size_t nsamp, size_t npad) {
  int rc = chunk_grow((void **)&c->steps, (void **)&c->step_p, &c->cap_steps, ns, sizeof *c->steps);
  if (!rc) rc = chunk_grow((void **)&c->rw, (void **)&c->rw_p, &c->cap_rw, nr, sizeof *c->rw);
  if (!rc) rc = chunk_grow((void **)&c->mb, (void **)&c->mb_p, &c->cap_mb, nm, sizeof *c->mb);
  if (!rc) rc = chunk_grow((void **)&c->pads, NULL, &c->cap_pads, npad, sizeof *c->pads);
  if (!rc && nsamp > c->cap_samples) {
    size_t cap = c->cap_samples;
    rc = chunk_grow((void **)&c->samples, NULL, &cap, nsamp, sizeof *c->samples);
    cap = c->cap_samples;
    if (!rc) rc = chunk_grow((void **)&c->tokens, NULL, &cap, nsamp, sizeof *c->tokens);
    if (!rc) c->cap_samples = cap;
  }
  return rc;
}

/* Steps [s0, s1) of the plan as one ManifestChunk, built in `c`. */
static int write_chunk(pbio_writer *w, const al_plan *p, uint32_t s0, uint32_t s1, chunk_buf *c_) {
  uint32_t W = p->world;
  size_t ns = s1 - s0, nr = ns * W;
  uint64_t m0 = p->slot[(size_t)s0 * W], m1 = p->slot[(size_t)s1 * W];
  size_t nm = (size_t)(m1 - m0), nsamp = 0, npad = 0;
  for (uint64_t x = m0; x < m1; x++) {
    nsamp += p->micro[x].n;
    if (p->micro[x].padded) npad += p->micro[x].n;
  }
  int rc0 = chunk_reserve(c_, ns ? ns : 1, nr ? nr : 1, nm ? nm : 1, nsamp ? nsamp : 1,
                          npad ? npad : 1);
  if (rc0) return rc0;
  chunk_buf c = *c_;
  size_t js = 0, jp = 0;
  for (size_t s = 0; s < ns; s++) {
    Adaptiveload__Step *st = &c.steps[s];
    adaptiveload__step__init(st);
    st->step = p->first_step + s0 + (uint32_t)s;
    st->n_ranks = W;
    st->ranks = c.rw_p + s * W;
    double sum = 0, mx = 0;
    for (uint32_t r = 0; r < W; r++) {
      size_t slot = (size_t)(s0 + s) * W + r;
      Adaptiveload__RankWork *rw = &c.rw[s * W + r];
      adaptiveload__rank_work__init(rw);
      uint64_t a = p->slot[slot], b = p->slot[slot + 1];
      rw->n_micro = (size_t)(b - a);
      rw->micro = c.mb_p + (a - m0);
      double rcost = 0;
      for (uint64_t x = a; x < b; x++) {
        const plan_micro *pm = &p->micro[x];
        Adaptiveload__MicroBatch *mb = &c.mb[x - m0];
        adaptiveload__micro_batch__init(mb);
        mb->bucket = pm->bucket;
        mb->n_samples = pm->n;
        mb->samples = c.samples + js;
        mb->n_tokens = pm->n;
        mb->tokens = c.tokens + js;
        mb->cost_ms = pm->cost;
        for (uint32_t k = 0; k < pm->n; k++) {
          c.samples[js + k] = p->mb[pm->first + k];
          c.tokens[js + k] = p->buckets[pm->bucket].tokens;
        }
        js += pm->n;
        if (pm->padded) {
          mb->n_padded = pm->n;
          mb->padded = c.pads + jp;
          for (uint32_t k = 0; k < pm->n; k++) c.pads[jp++] = k;
        } else {
          st->samples += pm->n;
          st->tokens += (uint64_t)pm->n * p->buckets[pm->bucket].tokens;
        }
        c.mb_p[x - m0] = mb;
        rcost += pm->cost;
      }
      rw->cost_ms = rcost;
      sum += rcost;
      if (rcost > mx) mx = rcost;
      c.rw_p[s * W + r] = rw;
    }
    st->max_cost_ms = mx;
    st->mean_cost_ms = sum / W;
    c.step_p[s] = st;
  }
  Adaptiveload__ManifestChunk mc;
  adaptiveload__manifest_chunk__init(&mc);
  mc.n_steps = ns;
  mc.steps = c.step_p;
  return pbio_write_msg(w, AL_REC_MANIFEST_CHUNK, &mc.base);
}

int al_plan_save(const al_plan *p, const char *path, al_key_fn key, void *ctx) {
  if (!p || !path) return al_set_error(AL_EINVAL, "al_plan_save: NULL argument");
  pbio_writer *w = NULL;
  int rc = pbio_writer_open(&w, path, AL_KIND_MANIFEST);
  if (rc) return rc;
  rc = write_header(w, p);
  if (!rc) rc = write_keys(w, p, key, ctx);
  uint32_t W = p->world;
  chunk_buf cb;
  memset(&cb, 0, sizeof cb);
  for (uint32_t s0 = 0; s0 < p->steps && !rc;) {
    uint32_t s1 = s0;
    uint64_t samples = 0;
    /* At least one step per chunk, then up to the step and sample caps. */
    while (s1 < p->steps && s1 - s0 < STEPS_PER_CHUNK &&
           (s1 == s0 || samples < SAMPLES_PER_CHUNK)) {
      for (uint64_t x = p->slot[(size_t)s1 * W]; x < p->slot[(size_t)(s1 + 1) * W]; x++)
        samples += p->micro[x].n;
      s1++;
    }
    rc = write_chunk(w, p, s0, s1, &cb);
    s0 = s1;
  }
  chunk_free(&cb);
  if (!rc) {
    Adaptiveload__ManifestSummary sm;
    adaptiveload__manifest_summary__init(&sm);
    sm.steps = p->steps;
    sm.samples = p->samples;
    sm.dropped = p->dropped;
    sm.padded = p->padded;
    sm.tokens = p->tokens;
    sm.imbalance_cv = p->imbalance_cv;
    sm.bubble = p->bubble;
    sm.predicted_seconds = p->seconds;
    sm.predicted_tokens_per_s = p->seconds > 0 ? (double)p->tokens / p->seconds : 0;
    sm.rejected = p->rejected[AL_REJECT_NONE];
    uint64_t rej[AL_REJECT_COUNT];
    memcpy(rej, p->rejected, sizeof rej);
    rej[0] = 0;
    sm.n_rejected_by_reason = AL_REJECT_COUNT;
    sm.rejected_by_reason = rej;
    rc = pbio_write_msg(w, AL_REC_MANIFEST_SUMMARY, &sm.base);
  }
  if (rc) al_error_prefix(rc, "%s", path);
  return pbio_writer_finish(w, rc);
}
