/* Writing a plan as a manifest: ManifestHeader, KeyChunk*, ManifestChunk*,
 * ManifestSummary (proto/adaptiveload.proto). No timestamps, no host names:
 * the same plan gives the same bytes. The plan is read through al_plan_get_info,
 * al_plan_rejected and plan_view_internal.h, never its layout. */
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "common/struct_abi_internal.h"
#include "cost/cost_msg_internal.h"
#include "common/al_version.h"
#include "manifest/al_manifest.h"
#include "planner/plan_view_internal.h"
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"

#define KEYS_PER_CHUNK 65536u
#define STEPS_PER_CHUNK 1024u
#define SAMPLES_PER_CHUNK (1u << 18) /* keeps a chunk record a few MB at most */

#define PRODUCER "adaptiveload " AL_VERSION_STRING " planner"

/* What the chunks read of the plan: its info, its (step, rank) slots and every bucket's
 * tokens per sample. */
typedef struct plan_src {
  const al_plan *p;
  const al_manifest_info *in;
  const uint64_t *slot;
  uint64_t *tokens;   /* per bucket */
  int sp;             /* a slot schedule: micro-batches carry their group */
  uint32_t only_rank; /* R + 1: only rank R's RankWork is written; 0: every rank's */
} plan_src;

/* The plan's configuration (PlanConfig) from its info and geometry. */
static void config_msg(Adaptiveload__PlanConfig *cfg, const al_manifest_info *in,
                       const al_latent_geom *g) {
  adaptiveload__plan_config__init(cfg);
  cfg->policy = (char *)in->policy;
  cfg->world = in->world;
  cfg->seed = in->seed;
  cfg->epoch = in->epoch;
  cfg->mem_tokens = in->mem_tokens;
  cfg->comp_budget_ms = in->comp_budget_ms;
  cfg->window = in->window;
  cfg->last_step = (char *)in->last_step;
  cfg->first_step = in->first_step;
  cfg->index_fingerprint = in->index_fingerprint;
  cfg->vae_stride_t = g->vae_stride_t;
  cfg->vae_stride_s = g->vae_stride_s;
  cfg->patch_t = g->patch_t;
  cfg->patch_h = g->patch_h;
  cfg->patch_w = g->patch_w;
  cfg->index_samples = in->index_samples;
  cfg->step_cost_ms = in->step_cost_ms;
  cfg->micro_per_step = in->micro_per_step;
  cfg->step_tokens = in->step_tokens;
  cfg->micro_tokens = in->micro_tokens;
}

static int write_header(pbio_writer *w, const al_plan *p, const al_manifest_info *in,
                        const plan_src *src, int own_keys) {
  Adaptiveload__PlanConfig cfg;
  config_msg(&cfg, in, plan_view_geometry(p));
  /* Absent (0) for a whole plan: its header is today's, byte for byte. */
  cfg.own_keys = own_keys != 0;
  cfg.only_rank = src->only_rank;
  /* Degrees and the sync model only for a slot schedule: a plan without them is today's, byte
   * for byte (the reader takes absent fields as {1} and step). */
  uint32_t degrees[AL_PLAN_MAX_SP_DEGREES];
  int sp = plan_view_sp(p);
  if (sp) {
    for (uint32_t i = 0; i < in->n_sp_degrees; i++) degrees[i] = in->sp_degrees[i];
    cfg.n_sp_degrees = in->n_sp_degrees;
    cfg.sp_degrees = degrees;
    cfg.sync = (char *)in->sync;
  }

  /* A mixture's sources: absent for a plan of one index (its header is today's, byte for
   * byte). */
  uint32_t ns = plan_view_source_count(p);
  Adaptiveload__Source *sv = ns ? calloc(ns, sizeof *sv) : NULL;
  Adaptiveload__Source **sp_ = ns ? calloc(ns, sizeof *sp_) : NULL;
  if (ns && (!sv || !sp_)) {
    free(sv), free(sp_);
    return al_set_error(AL_ENOMEM, "manifest: out of memory");
  }
  static const char *const by_names[] = {"tokens", "samples", "compute"};
  for (uint32_t i = 0; i < ns; i++) {
    const al_run_source_info *si = plan_view_source(p, i);
    adaptiveload__source__init(&sv[i]);
    sv[i].name = (char *)si->name;
    sv[i].weight = si->weight;
    sv[i].on_exhaust = si->on_exhaust == AL_EXHAUST_STOP ? "stop" : "repeat";
    sv[i].passes = si->passes;
    sv[i].samples = si->samples;
    sv[i].draw_base = si->draw_base;
    sv[i].index_fingerprint = si->index_fingerprint;
    sv[i].pass_samples = si->pass_samples;
    sv[i].drawn = si->drawn;
    sv[i].drawn_tokens = si->drawn_tokens;
    sv[i].drawn_ms = si->drawn_ms;
    sv[i].stop_step = si->stop_step;
    sp_[i] = &sv[i];
  }
  if (ns) {
    cfg.n_sources = ns;
    cfg.sources = sp_;
    uint32_t by = plan_view_mix_by(p);
    cfg.mix_by = (char *)(by < 3 ? by_names[by] : "tokens");
  }
  /* Its stages, when its schedule gives any. */
  uint32_t nst = ns ? plan_view_stage_count(p) : 0;
  Adaptiveload__Stage *gv = nst ? calloc(nst, sizeof *gv) : NULL;
  Adaptiveload__Stage **gp = nst ? calloc(nst, sizeof *gp) : NULL;
  if (nst && (!gv || !gp)) {
    free(sv), free(sp_), free(gv), free(gp);
    return al_set_error(AL_ENOMEM, "manifest: out of memory");
  }
  for (uint32_t k = 0; k < nst; k++) {
    adaptiveload__stage__init(&gv[k]);
    gv[k].from_step = plan_view_stage_from(p, k);
    gv[k].n_weights = ns;
    gv[k].weights = (double *)plan_view_stage_weights(p, k);
    gp[k] = &gv[k];
  }
  cfg.n_stages = nst;
  cfg.stages = gp;

  Adaptiveload__CostModel cost;
  cost_msg_buf cb;
  cost_to_msg(plan_view_cost(p), &cost, &cb);

  size_t nb = in->buckets;
  Adaptiveload__Bucket *bk = calloc(nb ? nb : 1, sizeof *bk);
  Adaptiveload__Bucket **bp = calloc(nb ? nb : 1, sizeof *bp);
  if (!bk || !bp) {
    free(bk);
    free(bp);
    free(sv);
    free(sp_);
    free(gv);
    free(gp);
    return al_set_error(AL_ENOMEM, "manifest: out of memory");
  }
  for (size_t i = 0; i < nb; i++) {
    al_bucket_info b = AL_BUCKET_INFO_INIT;
    plan_view_bucket(p, i, &b);
    adaptiveload__bucket__init(&bk[i]);
    bk[i].id = b.id;
    bk[i].width = b.width;
    bk[i].height = b.height;
    bk[i].frames = b.frames;
    bk[i].tokens = b.tokens;
    bk[i].batch_size = b.batch_size;
    bk[i].batch_cost_ms = b.batch_cost_ms;
    bk[i].samples = b.samples;
    bk[i].limited_by = (char *)b.limited_by;
    if (sp) bk[i].sp_degree = b.sp_degree;
    bp[i] = &bk[i];
  }
  Adaptiveload__ManifestHeader h;
  adaptiveload__manifest_header__init(&h);
  h.producer = PRODUCER;
  h.config = &cfg;
  h.cost = &cost;
  h.n_buckets = nb;
  h.buckets = bp;
  int rc = pbio_write_msg(w, AL_REC_MANIFEST_HEADER, &h.base);
  free(bk);
  free(bp);
  free(sv);
  free(sp_);
  free(gv);
  free(gp);
  return rc;
}

static int write_keys(pbio_writer *w, const al_plan *p, uint64_t n_keys, al_key_fn key, void *ctx) {
  const uint8_t *status = plan_view_key_status(p);
  char **keys = malloc(KEYS_PER_CHUNK * sizeof *keys);
  uint32_t *st = malloc(KEYS_PER_CHUNK * sizeof *st);
  int rc = (keys && st) ? AL_OK : al_set_error(AL_ENOMEM, "manifest: out of memory");
  for (uint64_t first = 0; first < n_keys && !rc; first += KEYS_PER_CHUNK) {
    uint64_t n = n_keys - first;
    if (n > KEYS_PER_CHUNK) n = KEYS_PER_CHUNK;
    for (uint64_t i = 0; i < n; i++) {
      const char *k = key ? key(ctx, first + i) : "";
      keys[i] = (char *)(k ? k : "");
      st[i] = status[first + i];
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

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* A slice's key table: the distinct positions its written micro-batches list (padding included,
 * so every position the stream reads is named), ascending, with their keys; none without a key
 * function (a plan from an index map). Held: 8 bytes a listed sample. */
static int write_own_keys(pbio_writer *w, const plan_src *src, al_key_fn key, void *ctx) {
  if (!key) return AL_OK;
  const al_manifest_info *in = src->in;
  uint32_t W = in->world;
  uint64_t m1 = src->slot[(size_t)in->steps * W], n = 0, cap = 0;
  for (uint64_t x = 0; x < m1; x++) {
    plan_micro_view pm;
    plan_view_micro(src->p, x, &pm);
    cap += pm.n;
  }
  uint64_t *pos = malloc((cap ? cap : 1) * sizeof *pos);
  char **keys = malloc(KEYS_PER_CHUNK * sizeof *keys);
  int rc = pos && keys ? AL_OK : al_set_error(AL_ENOMEM, "manifest: out of memory");
  for (uint32_t s = 0; s < in->steps && !rc; s++)
    for (uint32_t r = 0; r < W; r++) {
      if (src->only_rank && r != src->only_rank - 1) continue;
      size_t sl = (size_t)s * W + r;
      for (uint64_t x = src->slot[sl]; x < src->slot[sl + 1]; x++) {
        plan_micro_view pm;
        plan_view_micro(src->p, x, &pm);
        if (pm.sp_rank) continue;
        for (uint32_t k = 0; k < pm.n; k++) pos[n++] = pm.samples[k];
      }
    }
  if (!rc) qsort(pos, n, sizeof *pos, cmp_u64);
  uint64_t u = 0;
  for (uint64_t i = 0; i < n && !rc; i++)
    if (!u || pos[u - 1] != pos[i]) pos[u++] = pos[i];
  for (uint64_t first = 0; first < u && !rc; first += KEYS_PER_CHUNK) {
    uint64_t m = u - first < KEYS_PER_CHUNK ? u - first : KEYS_PER_CHUNK;
    for (uint64_t i = 0; i < m; i++) {
      const char *k = key(ctx, pos[first + i]);
      keys[i] = (char *)(k ? k : "");
    }
    Adaptiveload__KeyChunk kc;
    adaptiveload__key_chunk__init(&kc);
    kc.first = first;
    kc.n_keys = (size_t)m;
    kc.keys = keys;
    kc.n_positions = (size_t)m;
    kc.positions = pos + first;
    rc = pbio_write_msg(w, AL_REC_KEY_CHUNK, &kc.base);
  }
  free(pos);
  free(keys);
  return rc;
}

/* One chunk's messages and arrays, kept from chunk to chunk (grown, never shrunk): fresh
 * multi-MB blocks for every chunk would be mmap'd, faulted in and unmapped each time. */
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

/* Micro-batches [a, b) of one rank as `rw`: their MicroBatch messages at x - m0 in `c`, their
 * samples and padding positions from *js and *jp on; the real samples and tokens count in `st`. */
static void rank_msg(const plan_src *src, uint64_t a, uint64_t b, uint64_t m0, chunk_buf *c,
                     size_t *js, size_t *jp, Adaptiveload__RankWork *rw, Adaptiveload__Step *st) {
  adaptiveload__rank_work__init(rw);
  rw->n_micro = (size_t)(b - a);
  rw->micro = c->mb_p + (a - m0);
  double rcost = 0;
  for (uint64_t x = a; x < b; x++) {
    plan_micro_view pm;
    plan_view_micro(src->p, x, &pm);
    uint64_t tokens = src->tokens[pm.bucket];
    Adaptiveload__MicroBatch *mb = &c->mb[x - m0];
    adaptiveload__micro_batch__init(mb);
    mb->bucket = pm.bucket;
    mb->cost_ms = pm.cost_ms;
    c->mb_p[x - m0] = mb;
    rcost += pm.cost_ms;
    if (src->sp) mb->sp_degree = pm.sp_degree, mb->sp_rank = pm.sp_rank;
    if (pm.sp_rank) continue; /* a follower: its group's leader lists the samples */
    mb->n_samples = pm.n;
    mb->samples = c->samples + *js;
    mb->n_tokens = pm.n;
    mb->tokens = c->tokens + *js;
    for (uint32_t k = 0; k < pm.n; k++) {
      c->samples[*js + k] = pm.samples[k];
      c->tokens[*js + k] = tokens;
    }
    *js += pm.n;
    if (pm.padded) {
      mb->n_padded = pm.n;
      mb->padded = c->pads + *jp;
      for (uint32_t k = 0; k < pm.n; k++) c->pads[(*jp)++] = k;
    } else {
      st->samples += pm.n;
      st->tokens += (uint64_t)pm.n * tokens;
    }
  }
  rw->cost_ms = rcost;
}

/* Micro-batches [a, b) of a rank not written (a rank's slice): their cost, and their real samples
 * and tokens counted in `st`. */
static double rank_totals(const plan_src *src, uint64_t a, uint64_t b, Adaptiveload__Step *st) {
  double cost = 0;
  for (uint64_t x = a; x < b; x++) {
    plan_micro_view pm;
    plan_view_micro(src->p, x, &pm);
    cost += pm.cost_ms;
    if (pm.sp_rank || pm.padded) continue;
    st->samples += pm.n;
    st->tokens += (uint64_t)pm.n * src->tokens[pm.bucket];
  }
  return cost;
}

/* Steps [s0, s1) of the plan as one ManifestChunk, built in `c`. */
static int write_chunk(pbio_writer *w, const plan_src *src, uint32_t s0, uint32_t s1,
                       chunk_buf *c) {
  uint32_t W = src->in->world;
  size_t ns = s1 - s0, nr = ns * W;
  uint64_t m0 = src->slot[(size_t)s0 * W], m1 = src->slot[(size_t)s1 * W];
  size_t nm = (size_t)(m1 - m0), nsamp = 0, npad = 0;
  for (uint64_t x = m0; x < m1; x++) {
    plan_micro_view pm;
    plan_view_micro(src->p, x, &pm);
    if (pm.sp_rank) continue;
    nsamp += pm.n;
    if (pm.padded) npad += pm.n;
  }
  int rc = chunk_reserve(c, ns ? ns : 1, nr ? nr : 1, nm ? nm : 1, nsamp ? nsamp : 1,
                         npad ? npad : 1);
  if (rc) return rc;
  size_t js = 0, jp = 0;
  for (size_t s = 0; s < ns; s++) {
    Adaptiveload__Step *st = &c->steps[s];
    adaptiveload__step__init(st);
    st->step = src->in->first_step + s0 + (uint32_t)s;
    st->n_ranks = W;
    st->ranks = c->rw_p + s * W;
    double sum = 0, mx = 0;
    for (uint32_t r = 0; r < W; r++) {
      size_t slot = (size_t)(s0 + s) * W + r;
      Adaptiveload__RankWork *rw = &c->rw[s * W + r];
      double cost;
      if (src->only_rank && r != src->only_rank - 1) {
        cost = rank_totals(src, src->slot[slot], src->slot[slot + 1], st);
      } else {
        rank_msg(src, src->slot[slot], src->slot[slot + 1], m0, c, &js, &jp, rw, st);
        cost = rw->cost_ms;
      }
      sum += cost;
      if (cost > mx) mx = cost;
      c->rw_p[s * W + r] = rw;
    }
    if (src->only_rank) { /* one RankWork: rank R's; the totals above are all ranks' */
      st->n_ranks = 1;
      st->ranks = c->rw_p + s * W + (src->only_rank - 1);
    }
    st->max_cost_ms = mx;
    st->mean_cost_ms = sum / W;
    c->step_p[s] = st;
  }
  Adaptiveload__ManifestChunk mc;
  adaptiveload__manifest_chunk__init(&mc);
  mc.n_steps = ns;
  mc.steps = c->step_p;
  return pbio_write_msg(w, AL_REC_MANIFEST_CHUNK, &mc.base);
}

/* The end of the chunk that starts at step s0: at least one step, then up to the step and
 * sample caps. */
static uint32_t chunk_end(const plan_src *src, uint32_t s0) {
  uint32_t W = src->in->world, s1 = s0;
  uint64_t samples = 0;
  while (s1 < src->in->steps && s1 - s0 < STEPS_PER_CHUNK &&
         (s1 == s0 || samples < SAMPLES_PER_CHUNK)) {
    for (uint64_t x = src->slot[(size_t)s1 * W]; x < src->slot[(size_t)(s1 + 1) * W]; x++) {
      plan_micro_view pm;
      plan_view_micro(src->p, x, &pm);
      if (!pm.sp_rank) samples += pm.n;
    }
    s1++;
  }
  return s1;
}

static int write_steps(pbio_writer *w, const plan_src *src) {
  chunk_buf cb;
  memset(&cb, 0, sizeof cb);
  int rc = AL_OK;
  for (uint32_t s0 = 0; s0 < src->in->steps && !rc;) {
    uint32_t s1 = chunk_end(src, s0);
    rc = write_chunk(w, src, s0, s1, &cb);
    s0 = s1;
  }
  chunk_free(&cb);
  return rc;
}

static int write_summary(pbio_writer *w, const al_plan *p, const al_manifest_info *in) {
  Adaptiveload__ManifestSummary sm;
  adaptiveload__manifest_summary__init(&sm);
  sm.steps = in->steps;
  sm.samples = in->samples;
  sm.dropped = in->dropped;
  sm.padded = in->padded;
  sm.tokens = in->tokens;
  sm.imbalance_cv = in->imbalance_cv;
  sm.bubble = in->bubble;
  sm.predicted_seconds = in->predicted_seconds;
  sm.predicted_tokens_per_s = in->predicted_tokens_per_s;
  sm.rejected = in->rejected;
  uint64_t rej[AL_REJECT_COUNT];
  rej[0] = 0;
  for (int r = 1; r < AL_REJECT_COUNT; r++) rej[r] = al_plan_rejected(p, (al_reject_reason)r);
  sm.n_rejected_by_reason = AL_REJECT_COUNT;
  sm.rejected_by_reason = rej;
  if (plan_view_sp(p)) sm.bubble_step = in->bubble_step, sm.bubble_micro = in->bubble_micro;
  return pbio_write_msg(w, AL_REC_MANIFEST_SUMMARY, &sm.base);
}

int al_plan_save(const al_plan *p, const char *path, al_key_fn key, void *ctx) {
  return al_plan_save_opts(p, path, key, ctx, NULL);
}

int al_plan_save_opts(const al_plan *p, const char *path, al_key_fn key, void *ctx,
                      const al_plan_save_options *opts) {
  if (!p || !path) return al_set_error(AL_EINVAL, "al_plan_save_opts: NULL argument");
  al_plan_save_options o;
  int rc = struct_in(&o, sizeof o, AL_PLAN_SAVE_OPTIONS_V1, opts, "al_plan_save_opts",
                     "al_plan_save_options");
  if (rc) return rc;
  al_manifest_info in = AL_MANIFEST_INFO_INIT;
  al_plan_get_info(p, &in);
  if (o.only_rank > in.world)
    return al_set_error(AL_ERANGE, "%s: rank %u of a plan of world %u", path, o.only_rank - 1,
                        in.world);
  if (o.only_rank && in.sp_max_degree > 1)
    return al_set_error(AL_EINVAL,
                        "%s: a rank's slice of a plan with sequence-parallel groups (degree %u) is "
                        "not written: write every rank's work",
                        path, in.sp_max_degree);
  /* A slice of a run (no key table of the pass) or a rank's work lists its own samples' keys. */
  int own_keys = !plan_view_key_status(p) || o.only_rank;
  pbio_writer *w = NULL;
  rc = pbio_writer_open(&w, path, AL_KIND_MANIFEST);
  if (rc) return rc;
  plan_src src = {p,
                  &in,
                  plan_view_slots(p),
                  malloc((in.buckets ? in.buckets : 1) * sizeof(uint64_t)),
                  plan_view_sp(p),
                  o.only_rank};
  if (!src.tokens) rc = al_set_error(AL_ENOMEM, "manifest: out of memory");
  for (size_t i = 0; i < in.buckets && !rc; i++) {
    al_bucket_info b = AL_BUCKET_INFO_INIT;
    plan_view_bucket(p, i, &b);
    src.tokens[i] = b.tokens;
  }
  if (!rc) rc = write_header(w, p, &in, &src, own_keys);
  if (!rc)
    rc = own_keys ? write_own_keys(w, &src, key, ctx)
                  : write_keys(w, p, in.index_samples, key, ctx);
  if (!rc) rc = write_steps(w, &src);
  if (!rc) rc = write_summary(w, p, &in);
  free(src.tokens);
  if (rc) al_error_prefix(rc, "%s", path);
  return pbio_writer_finish(w, rc);
}
