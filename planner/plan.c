/* Planning an epoch (al_plan_build): options, buckets and the samples' bucket assignment, batch
 * sizes (batch_size.c), the schedule (schedule.c) and the start step (resume); summary figures
 * (plan_info.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "common/grow_internal.h"
#include "planner/plan_grid_internal.h"
#include "planner/plan_internal.h"

al_plan *plan_alloc(void) {
  al_plan *p = calloc(1, sizeof *p);
  if (p)
    for (int r = 0; r < AL_REJECT_COUNT; r++) p->first_rejected[r] = UINT64_MAX;
  return p;
}

void al_plan_free(al_plan *p) {
  if (!p) return;
  free(p->buckets);
  free(p->status);
  free(p->mb);
  free(p->micro);
  free(p->slot);
  free(p->sources);
  free(p->stage_from);
  free(p->stage_w);
  free(p);
}

static int check_cost(const al_cost_model *c) {
  if (c->fit.family != AL_COST_POWER && c->fit.family != AL_COST_POLY2 &&
      c->fit.family != AL_COST_FLOOR)
    return al_set_error(AL_EINVAL, "cost model has no fitted family");
  if (!(al_cost_per_sample(c, 1024) > 0))
    return al_set_error(AL_EINVAL,
                        "cost model predicts a per-sample cost <= 0 at S = 1024 (params %g, %g, %g)",
                        c->fit.params[0], c->fit.params[1], c->fit.params[2]);
  return AL_OK;
}

/* What al_plan_build refuses before planning: no samples, too many, no shapes, the world size,
 * M_mem and M_comp past their limits, the cost model, a nonzero step_cost_ms. */
static int check_input(const al_plan_input *in, const al_cost_model *cost,
                       const al_plan_options *o) {
  int rc;
  if (!in->n) return al_set_error(AL_EINVAL, "the index has no samples: nothing to plan");
  if (in->n > UINT32_MAX)
    return al_set_error(AL_ERANGE, "%zu samples: the planner handles at most 2^32 - 1", in->n);
  if (!in->width || !in->height || !in->frames)
    return al_set_error(AL_EINVAL, "al_plan_build: NULL shape arrays");
  if (!o->world || o->world > (1u << 20))
    return al_set_error(AL_EINVAL, "world size %u out of range (1..1048576)", o->world);
  if (o->mem_tokens > AL_PLAN_MAX_MEM_TOKENS)
    return al_set_error(AL_ERANGE,
                        "mem-tokens %llu is above the maximum %u (2^32 - 1) tokens per micro-batch, "
                        "which keeps every token count of a plan within 64 bits",
                        (unsigned long long)o->mem_tokens, AL_PLAN_MAX_MEM_TOKENS);
  if (!isfinite(o->comp_budget_ms) || o->comp_budget_ms < 0)
    return al_set_error(AL_ERANGE, "comp-ms %g is not a finite number >= 0 (0: the default)",
                        o->comp_budget_ms);
  if ((rc = check_cost(cost))) return rc;
  if (o->step_cost_ms != 0)
    return al_set_error(AL_EINVAL,
                        "step_cost_ms (--step-ms) was removed: every step now holds micro_per_step "
                        "(--micro-per-step) micro-batches per rank and about step_tokens "
                        "(--step-tokens) tokens");
  if (o->sync != AL_SYNC_AUTO && o->sync != AL_SYNC_STEP && o->sync != AL_SYNC_MICRO)
    return al_set_error(AL_EINVAL, "sync %d is not a sync model (auto 0, step 1, micro 2)",
                        (int)o->sync);
  return al_plan_check_sp_degrees(NULL, o->sp_degrees, o->n_sp_degrees, o->world);
}

int al_plan_check_sp_degrees(const char *name, const uint32_t *d, size_t n, uint32_t world) {
  if (!name) name = "sp-degrees";
  if (n && !d) return al_set_error(AL_EINVAL, "%s: %zu degrees but a NULL array", name, n);
  if (n > AL_PLAN_MAX_SP_DEGREES)
    return al_set_error(AL_ERANGE, "%s: %zu degrees, at most %u (the powers of two 1..1024)", name,
                        n, AL_PLAN_MAX_SP_DEGREES);
  for (size_t i = 0; i < n; i++) {
    if (!d[i] || (d[i] & (d[i] - 1)) || d[i] > 1024)
      return al_set_error(AL_EINVAL, "%s: %u is not a power of two in 1..1024", name, d[i]);
    if (world && world % d[i])
      return al_set_error(AL_EINVAL,
                          "%s: %u does not divide the world size %u (a group of degree d is d "
                          "aligned ranks)",
                          name, d[i], world);
    for (size_t j = 0; j < i; j++)
      if (d[j] == d[i]) return al_set_error(AL_EINVAL, "%s: %u is listed twice", name, d[i]);
  }
  return AL_OK;
}

void plan_take_sp(al_plan *p, const uint32_t *d, size_t n, al_sync sync) {
  uint32_t mask = 0;
  for (size_t i = 0; i < n; i++) mask |= d[i];
  if (!n) mask = 1;
  p->n_sp_degrees = 0;
  for (uint32_t x = 1; x && x <= 1024; x <<= 1)
    if (mask & x) p->sp_degrees[p->n_sp_degrees++] = x;
  uint32_t dmax = p->sp_degrees[p->n_sp_degrees - 1];
  /* The default is the micro model wherever ranks meet inside a step: K > 1 (FSDP gathers every
   * layer's parameters for every micro-batch) or a degree above 1 (all-to-alls in every layer).
   * K = 1 without SP: the two models are the same and the plan is the step model's. Callers
   * set K (p->micro_per_step) first. */
  p->sync = sync != AL_SYNC_AUTO                ? sync
            : dmax > 1 || p->micro_per_step > 1 ? AL_SYNC_MICRO
                                                : AL_SYNC_STEP;
  p->sp_sched = dmax > 1 || p->n_sp_degrees > 1 || p->sp_degrees[0] != 1 ||
                p->sync == AL_SYNC_MICRO;
}

/* ceil(a / b) for b > 0, without overflow. */
static uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* K and T (al_plan.h), for a new plan and a re-plan alike: an unset K is the fewest with
 * T / (W K) <= M_mem when T is set, else k_dflt; an unset T is t_dflt, or W K M_mem when that is
 * 0; m_fixed: M_mem is not the caller's to change (a re-plan keeps the old plan's), so the
 * messages do not suggest raising it. W <= 2^20, so W K fits in 64 bits; W M_mem and W K M_mem
 * saturate (a re-plan takes M_mem from a manifest, which may hold any number): past 2^64 they hold
 * any T. */
int plan_resolve_step(uint64_t W, uint64_t M, int m_fixed, uint64_t k_opt, uint64_t t_opt,
                      uint64_t k_dflt, uint64_t t_dflt, uint32_t *k_out, uint64_t *t_out) {
  const char *raise_m = m_fixed ? "" : " or raise --mem-tokens";
  uint64_t K = k_opt, T = t_opt, wm = M > UINT64_MAX / W ? UINT64_MAX : W * M;
  if (!K) K = T ? ceil_div(T, wm) : k_dflt;
  if (!K) K = 1;
  if (K > (1u << 20) && !k_opt)
    return al_set_error(AL_ERANGE,
                        "step-tokens %llu over %llu ranks of mem-tokens %llu needs micro-per-step "
                        "%llu, above its maximum 1048576: lower --step-tokens%s",
                        (unsigned long long)T, (unsigned long long)W, (unsigned long long)M,
                        (unsigned long long)K, raise_m);
  if (K > (1u << 20))
    return al_set_error(AL_ERANGE, "micro-per-step %llu out of range (1..1048576)",
                        (unsigned long long)K);
  if (W * K > AL_PLAN_MAX_STEP_MICRO)
    return al_set_error(AL_ERANGE,
                        "world %llu x micro-per-step %llu = %llu micro-batches per step, above the "
                        "planner's maximum %u (a step is one manifest record of at most 256 MiB)",
                        (unsigned long long)W, (unsigned long long)K, (unsigned long long)(W * K),
                        AL_PLAN_MAX_STEP_MICRO);
  if (!T) T = t_dflt ? t_dflt : wm > UINT64_MAX / K ? UINT64_MAX : wm * K;
  /* A T asked for must fit W K micro-batches of M_mem; a re-plan checks the T it keeps
   * against its steps (replan.c), with the old plan's numbers in the message. */
  if (t_opt && T / (W * K) > M && ceil_div(T, wm) > (1u << 20))
    return al_set_error(AL_ERANGE,
                        "step-tokens %llu over %llu ranks needs more than mem-tokens %llu per "
                        "micro-batch even at micro-per-step's maximum 1048576: lower --step-tokens%s",
                        (unsigned long long)T, (unsigned long long)W, (unsigned long long)M,
                        raise_m);
  if (t_opt && T / (W * K) > M)
    return al_set_error(AL_ERANGE,
                        "step-tokens %llu over %llu ranks x %llu micro-batches needs %llu tokens per "
                        "micro-batch, above mem-tokens %llu: raise --micro-per-step to %llu or more",
                        (unsigned long long)T, (unsigned long long)W, (unsigned long long)K,
                        (unsigned long long)(T / (W * K)), (unsigned long long)M,
                        (unsigned long long)ceil_div(T, wm));
  *k_out = (uint32_t)K;
  *t_out = T;
  return AL_OK;
}

static int resolve_step(al_plan *p, const al_plan_options *o) {
  int rc = plan_resolve_step(p->world, p->mem_tokens, 0, o->micro_per_step, o->step_tokens, 1, 0,
                             &p->micro_per_step, &p->step_tokens);
  if (rc) return rc;
  uint64_t m = p->step_tokens / ((uint64_t)p->world * p->micro_per_step);
  p->micro_tokens = m ? m : 1;
  return AL_OK;
}

/* The plan's configuration from the options, defaults filled in. */
static int take_options(al_plan *p, const al_plan_input *in, const al_cost_model *cost,
                        const al_plan_options *o) {
  p->policy = o->policy;
  p->world = o->world;
  p->seed = o->seed;
  p->epoch = o->epoch;
  p->mem_tokens = o->mem_tokens ? o->mem_tokens : AL_PLAN_DEFAULT_MEM_TOKENS;
  p->window = o->window ? o->window : AL_PLAN_DEFAULT_WINDOW;
  p->last_step = o->last_step;
  p->geom = al_latent_geom_resolve(&o->geom);
  p->fingerprint = in->index_fingerprint;
  p->index_samples = in->n;
  p->cost = *cost;
  int rc = resolve_step(p, o);
  if (!rc) plan_take_sp(p, o->sp_degrees, o->n_sp_degrees, o->sync);
  return rc;
}

/* The default M_comp: the largest over the allowed degrees d of one rank's share c_d(S) of one
 * sample of the largest bucket within d x the micro-batch token target (M_mem by default), or
 * c(S) of the smallest bucket if none fits it. Without SP that is c(S) of the largest bucket
 * within the target; with degrees above 1, a micro-batch that fills a group's memory at its
 * degree is not cut by a budget priced at degree 1 (a long clip alone at degree 8 costs a rank
 * several times the fullest degree-1 micro-batch). */
static double default_comp_ms(const al_plan *p, uint64_t min_tok) {
  double best = 0;
  for (size_t k = 0; k < p->n_sp_degrees; k++) {
    uint32_t d = p->sp_degrees[k];
    uint64_t top = 0;
    for (size_t i = 0; i < p->n_buckets; i++) {
      uint64_t t = p->buckets[i].tokens;
      if (t <= (uint64_t)d * p->micro_tokens && t > top) top = t;
    }
    if (!top) continue;
    double c = d == 1 ? al_cost_per_sample(&p->cost, top) : al_cost_per_sample_sp(&p->cost, top, d);
    if (c > best) best = c;
  }
  return best > 0 ? best : al_cost_per_sample(&p->cost, min_tok);
}

/* The plan's buckets from table t (shapes and tokens), checked against M_mem, and M_comp
 * (default_comp_ms unless set). */
static int take_buckets(al_plan *p, const al_bucket_table *t, const al_plan_options *o) {
  int rc = al_bucket_table_check(t, &p->geom);
  p->n_buckets = al_bucket_table_count(t);
  p->buckets = calloc(p->n_buckets ? p->n_buckets : 1, sizeof *p->buckets);
  if (!rc && !p->buckets) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  uint64_t min_tok = UINT64_MAX;
  size_t min_b = 0;
  for (size_t i = 0; i < p->n_buckets && !rc; i++) {
    al_bucket_shape sh = AL_BUCKET_SHAPE_INIT;
    al_bucket_table_get(t, i, &sh);
    plan_bucket *b = &p->buckets[i];
    b->width = sh.width, b->height = sh.height, b->frames = sh.frames;
    b->tokens = al_tokens(&p->geom, sh.width, sh.height, sh.frames);
    if (!b->tokens)
      rc = al_set_error(AL_EINVAL, "bucket %ux%u x %u frames has no tokens", sh.width, sh.height,
                        sh.frames);
    if (b->tokens < min_tok) min_tok = b->tokens, min_b = i;
  }
  uint64_t cap = plan_mem_cap(p);
  if (!rc && cap < min_tok && p->sp_sched)
    rc = al_set_error(AL_ERANGE,
                      "mem-tokens %llu x the largest sp-degree %u is below the smallest bucket "
                      "(%ux%u x %u frames = %llu tokens): no sample can fit",
                      (unsigned long long)p->mem_tokens, p->sp_degrees[p->n_sp_degrees - 1],
                      p->buckets[min_b].width, p->buckets[min_b].height, p->buckets[min_b].frames,
                      (unsigned long long)min_tok);
  if (!rc && cap < min_tok)
    rc = al_set_error(AL_ERANGE,
                      "mem-tokens %llu is below the smallest bucket (%ux%u x %u frames = %llu tokens): no sample can fit",
                      (unsigned long long)p->mem_tokens, p->buckets[min_b].width,
                      p->buckets[min_b].height, p->buckets[min_b].frames,
                      (unsigned long long)min_tok);
  if (rc) return rc;
  p->comp_ms = o->comp_budget_ms > 0 ? o->comp_budget_ms : default_comp_ms(p, min_tok);
  return AL_OK;
}

/* Open-addressing map (width, height, frames) -> bucket or reason. It stops
 * growing at MEMO_CAP / 2 entries; further new shapes are assigned directly. */
#define MEMO_CAP (1u << 16)
typedef struct shape_memo {
  uint64_t *key; /* w | h << 21 | f << 42, +1 so 0 means empty; 0 when shapes exceed 21 bits */
  uint32_t *val; /* bucket, or UINT32_MAX - reason */
  size_t used;
} shape_memo;

static void memo_init(shape_memo *m) {
  m->key = calloc(MEMO_CAP, sizeof *m->key);
  m->val = malloc(MEMO_CAP * sizeof *m->val);
  m->used = 0;
  if (!m->key || !m->val) {
    free(m->key), free(m->val);
    m->key = NULL, m->val = NULL;
  }
}

static void memo_free(shape_memo *m) {
  free(m->key);
  free(m->val);
}

static al_reject_reason memo_assign(shape_memo *m, const al_bucket_table *t, const al_plan *p,
                                    uint32_t w, uint32_t h, uint32_t f, uint32_t *bucket) {
  uint64_t key = 0;
  size_t slot = 0;
  if (m->key && w < (1u << 21) && h < (1u << 21) && f < (1u << 21)) {
    key = ((uint64_t)w | (uint64_t)h << 21 | (uint64_t)f << 42) + 1;
    uint64_t hh = key * UINT64_C(0x9e3779b97f4a7c15);
    slot = (size_t)(hh >> 48) & (MEMO_CAP - 1);
    while (m->key[slot]) {
      if (m->key[slot] == key) {
        uint32_t v = m->val[slot];
        if (v < UINT32_MAX - AL_REJECT_COUNT) {
          *bucket = v;
          return AL_REJECT_NONE;
        }
        return (al_reject_reason)(UINT32_MAX - v);
      }
      slot = (slot + 1) & (MEMO_CAP - 1);
    }
  }
  al_reject_reason r = AL_REJECT_NONE;
  if (al_bucket_assign(t, &p->geom, plan_mem_cap(p), w, h, f, bucket, &r) == AL_OK)
    r = AL_REJECT_NONE;
  if (key && m->used < MEMO_CAP / 2) {
    m->key[slot] = key;
    m->val[slot] = r == AL_REJECT_NONE ? *bucket : UINT32_MAX - (uint32_t)r;
    m->used++;
  }
  return r;
}

/* Sample i's bucket, or why none fits. */
static al_reject_reason assign_sample(const al_plan *p, shape_memo *memo, const al_bucket_table *t,
                                      const al_plan_input *in, const al_latent_grid *grid, size_t i,
                                      uint32_t *bucket) {
  const al_latent_grid *gi = grid && grid[i].t ? &grid[i] : NULL;
  if (gi &&
      (gi->t != 1 + (uint64_t)(in->frames[i] ? in->frames[i] - 1 : 0) / p->geom.vae_stride_t ||
       gi->h != in->height[i] / p->geom.vae_stride_s ||
       gi->w != in->width[i] / p->geom.vae_stride_s)) {
    /* A grid other than the one the shape gives under the plan's geometry (the index was
     * made with another VAE stride): the grid rule decides, without the memo. */
    al_reject_reason r;
    if (al_bucket_assign_grid(t, &p->geom, plan_mem_cap(p), in->width[i], in->height[i],
                              in->frames[i], gi, bucket, &r) == AL_OK)
      r = AL_REJECT_NONE;
    return r;
  }
  /* No grid, or the shape's own: the pixel rule keeps every bucket inside it. */
  return memo_assign(memo, t, p, in->width[i], in->height[i], in->frames[i], bucket);
}

/* Assigns every sample a bucket or a reject reason: items[] gets bucket << 32 | position of
 * each planned sample, in ascending positions; buckets count their samples. */
static void assign_samples(al_plan *p, const al_bucket_table *t, const al_plan_input *in,
                           const al_latent_grid *grid, uint64_t *items, size_t *planned) {
  /* Datasets come in few distinct shapes: memoise the assignment per shape. */
  shape_memo memo;
  memo_init(&memo);
  *planned = 0;
  for (size_t i = 0; i < in->n; i++) {
    uint32_t lb;
    al_reject_reason lr = assign_sample(p, &memo, t, in, grid, i, &lb);
    if (lr != AL_REJECT_NONE) {
      p->status[i] = (uint8_t)lr;
      if (!p->rejected[lr]) p->first_rejected[lr] = i;
      p->rejected[lr]++;
      p->rejected[AL_REJECT_NONE]++;
      continue;
    }
    items[(*planned)++] = (uint64_t)lb << 32 | i;
    p->buckets[lb].samples++;
  }
  memo_free(&memo);
}

/* Every used bucket's batch has a finite predicted cost (a cost model can overflow a double at
 * large S; the schedule sorts and sums these costs). */
static int check_batch_costs(const al_plan *p) {
  for (size_t i = 0; i < p->n_buckets; i++) {
    const plan_bucket *b = &p->buckets[i];
    if (b->samples && !isfinite(b->batch_cost_ms))
      return al_set_error(AL_ERANGE,
                          "the cost model predicts %g ms for a batch of %u samples of bucket %ux%u "
                          "x %u frames (%llu tokens): not a finite cost",
                          b->batch_cost_ms, b->batch_size, b->width, b->height, b->frames,
                          (unsigned long long)b->tokens);
  }
  return AL_OK;
}

static int no_sample_fits(const al_plan *p, size_t n) {
  return al_set_error(AL_ENOTFOUND,
                      "no sample fits any bucket: %zu rejected (%llu zero-sized, %llu too small, %llu too few frames, "
                      "%llu over mem-tokens %llu, %llu whose latent grid no bucket fits inside)",
                      n, (unsigned long long)p->rejected[AL_REJECT_BAD_SHAPE],
                      (unsigned long long)p->rejected[AL_REJECT_TOO_SMALL],
                      (unsigned long long)p->rejected[AL_REJECT_TOO_FEW_FRAMES],
                      (unsigned long long)p->rejected[AL_REJECT_OVER_MEMORY],
                      (unsigned long long)plan_mem_cap(p),
                      (unsigned long long)p->rejected[AL_REJECT_LATENT_GRID]);
}

int plan_prepare(al_plan *p, const al_plan_input *in, const al_latent_grid *grid,
                 const al_cost_model *cost, const al_plan_options *o, uint64_t **items_out,
                 size_t *n_items) {
  int rc = check_input(in, cost, o);
  if (!rc) rc = take_options(p, in, cost, o);
  if (rc) return rc;
  al_bucket_table *own = NULL;
  const al_bucket_table *t = o->buckets;
  if (!t) {
    if ((rc = al_bucket_table_default(&own))) return rc;
    t = own;
  }
  uint64_t *items = NULL;
  size_t planned = 0;
  rc = take_buckets(p, t, o);
  if (!rc) {
    items = grow_big_block(in->n, sizeof *items);
    p->status = calloc(in->n, 1);
    if (!items || !p->status)
      rc = al_set_error(AL_ENOMEM, "plan: out of memory for %zu samples", in->n);
  }
  if (!rc) {
    assign_samples(p, t, in, grid, items, &planned);
    plan_size_buckets(p);
    rc = planned ? check_batch_costs(p) : no_sample_fits(p, in->n);
  }
  al_bucket_table_free(own);
  if (rc) {
    free(items);
    return rc;
  }
  *items_out = items;
  *n_items = planned;
  return AL_OK;
}

static int plan_trim(al_plan *p, uint32_t k) {
  if (k < p->first_step || k - p->first_step > p->steps)
    return p->steps ? al_set_error(AL_ERANGE,
                                   "start step %u is past the plan's steps %u..%u (a plan may "
                                   "start at %u..%u, its end included)",
                                   k, p->first_step, p->first_step + p->steps - 1, p->first_step,
                                   p->first_step + p->steps)
                    : al_set_error(AL_ERANGE, "start step %u: the plan has no steps (from step %u)",
                                   k, p->first_step);
  size_t cut = (size_t)(k - p->first_step) * p->world;
  if (!cut) return AL_OK;
  uint64_t base = p->slot[cut];
  /* The steps cut off were consumed: the key table says so, so that loading checks that
   * every sample still marked scheduled is in the manifest (manifest_check.c). */
  for (uint64_t x = 0; x < base; x++)
    if (!p->micro[x].padded)
      for (uint32_t k2 = 0; k2 < p->micro[x].n; k2++)
        p->status[p->mb[p->micro[x].first + k2]] = AL_KEY_CONSUMED;
  size_t nslot = (size_t)(p->steps - (k - p->first_step)) * p->world;
  for (size_t i = 0; i <= nslot; i++) p->slot[i] = p->slot[cut + i] - base;
  memmove(p->micro, p->micro + base, (p->n_micro - base) * sizeof *p->micro);
  p->n_micro -= base;
  p->steps -= k - p->first_step;
  p->first_step = k;
  return AL_OK;
}

int al_plan_build(al_plan **out, const al_plan_input *in, const al_cost_model *cost,
                  const al_plan_options *opts) {
  al_plan_options local;
  const al_plan_options *o = NULL;
  if (opts) {
    int rc = struct_in(&local, sizeof local, AL_PLAN_OPTIONS_V1, opts, "al_plan_build",
                       "al_plan_options");
    if (rc) {
      if (out) *out = NULL;
      return rc;
    }
    o = &local;
  }
  /* Which samples hold a member is in an index, which this call has not: an option it cannot
   * honour is refused rather than ignored. */
  if (o && o->n_require_members) {
    if (out) *out = NULL;
    return al_set_error(AL_EINVAL,
                        "al_plan_build: require_members needs the index "
                        "(al_plan_build_index or al_plan_index_write)");
  }
  return plan_build_grid(out, in, NULL, cost, o);
}

int plan_build_grid(al_plan **out, const al_plan_input *input, const al_latent_grid *grid,
                    const al_cost_model *cost, const al_plan_options *opts) {
  if (!out || !input || !cost || !opts)
    return al_set_error(AL_EINVAL, "al_plan_build: NULL argument");
  *out = NULL;
  al_plan_options local;
  al_plan_input in_local;
  al_cost_model cost_local;
  int src = struct_in(&local, sizeof local, AL_PLAN_OPTIONS_V1, opts, "al_plan_build",
                      "al_plan_options");
  if (!src)
    src = struct_in(&in_local, sizeof in_local, AL_PLAN_INPUT_V1, input, "al_plan_build",
                    "al_plan_input");
  if (!src)
    src = struct_in(&cost_local, sizeof cost_local, AL_COST_MODEL_V1, cost, "al_plan_build",
                    "al_cost_model");
  if (src) return src;
  const al_plan_options *o = &local;
  const al_plan_input *in = &in_local;
  al_plan *p = plan_alloc();
  if (!p) return al_set_error(AL_ENOMEM, "plan: out of memory");
  uint64_t *items = NULL;
  size_t n = 0;
  int rc = plan_prepare(p, in, grid, &cost_local, o, &items, &n);
  if (!rc) rc = plan_schedule(p, items, n, 0);
  free(items);
  if (!rc && o->start_step) rc = plan_trim(p, o->start_step);
  if (rc) {
    al_plan_free(p);
    return rc;
  }
  plan_stats(p);
  *out = p;
  return AL_OK;
}
