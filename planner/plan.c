/* Planning an epoch: buckets, batch sizes (dual constraint), the schedule,
 * resume (start_step) and elastic re-plans; summary figures. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "planner/manifest_internal.h"
#include "planner/plan_internal.h"

const char *al_policy_name(al_policy p) {
  return p == AL_POLICY_EQUAL_TOKEN           ? "equal-token"
         : p == AL_POLICY_ADAPTIVE_UNBALANCED ? "adaptive-unbalanced"
                                              : "adaptive";
}

int al_policy_parse(const char *s, al_policy *out) {
  if (!strcmp(s, "adaptive"))
    *out = AL_POLICY_ADAPTIVE;
  else if (!strcmp(s, "equal-token"))
    *out = AL_POLICY_EQUAL_TOKEN;
  else if (!strcmp(s, "adaptive-unbalanced"))
    *out = AL_POLICY_ADAPTIVE_UNBALANCED;
  else
    return al_set_error(AL_EINVAL,
                        "unknown policy '%s' (adaptive, equal-token or adaptive-unbalanced)", s);
  return AL_OK;
}

const char *al_last_step_name(al_last_step l) { return l == AL_LAST_DROP ? "drop" : "pad"; }

int al_last_step_parse(const char *s, al_last_step *out) {
  if (!strcmp(s, "pad"))
    *out = AL_LAST_PAD;
  else if (!strcmp(s, "drop"))
    *out = AL_LAST_DROP;
  else
    return al_set_error(AL_EINVAL, "unknown last-step policy '%s' (pad or drop)", s);
  return AL_OK;
}

const char *plan_limit_name(int l) {
  return l == AL_LIMIT_COMPUTE ? "compute" : l == AL_LIMIT_ONE ? "one" : "memory";
}

double plan_micro_cost(const al_plan *p, uint32_t bucket, uint32_t n) {
  return p->cost.fit.params[0] +
         (double)n * al_cost_per_sample(&p->cost, p->buckets[bucket].tokens);
}

void al_plan_free(al_plan *p) {
  if (!p) return;
  free(p->buckets);
  free(p->status);
  free(p->mb);
  free(p->micro);
  free(p->slot);
  free(p);
}

/* B = max(1, min(floor(m / S), floor(M_comp / c(S)))) with m the micro-batch
 * token target (T / (W K), = M_mem by default); equal-token drops the compute
 * term. */
static void size_bucket(const al_plan *p, plan_bucket *b, uint64_t m) {
  uint64_t bm = m / b->tokens;
  double c = al_cost_per_sample(&p->cost, b->tokens);
  /* The relative epsilon keeps c(S*) / c(S*) == 1 from flooring to 0. */
  double bc = c > 0 ? floor(p->comp_ms / c * (1.0 + 1e-9)) : 1e18;
  uint64_t bcomp = bc > 1e18 ? (uint64_t)1e18 : (uint64_t)bc;
  uint64_t B;
  if (p->policy == AL_POLICY_EQUAL_TOKEN) {
    B = bm;
    b->limited_by = bm ? AL_LIMIT_MEMORY : AL_LIMIT_ONE;
  } else {
    B = bm < bcomp ? bm : bcomp;
    b->limited_by = !B ? AL_LIMIT_ONE : bcomp < bm ? AL_LIMIT_COMPUTE : AL_LIMIT_MEMORY;
  }
  if (B < 1) B = 1;
  if (B > UINT32_MAX) B = UINT32_MAX;
  b->batch_size = (uint32_t)B;
}

/* Batches the epoch's samples make when micro-batches aim at m tokens. */
static uint64_t batches_at(const al_plan *p, uint64_t m) {
  uint64_t n = 0;
  for (size_t i = 0; i < p->n_buckets; i++) {
    if (!p->buckets[i].samples) continue;
    plan_bucket b = p->buckets[i];
    size_bucket(p, &b, m);
    n += (b.samples + b.batch_size - 1) / b.batch_size;
  }
  return n;
}

/* The global batch: a step holds W K micro-batches, so the mean tokens per
 * step is W K times the mean tokens per batch. Samples longer than the target
 * m = T / (W K) make one-sample batches above it (a sample is never split), so
 * the target the batch sizes use is the largest m' <= m whose batches average
 * at most m tokens: the other batches make up for the long ones, and the mean
 * tokens per step stays at or below T. With the defaults (m = M_mem) m' = m. */
static uint64_t calibrate_micro_tokens(const al_plan *p, uint64_t m) {
  double total = 0;
  for (size_t i = 0; i < p->n_buckets; i++)
    total += (double)p->buckets[i].samples * (double)p->buckets[i].tokens;
  if (total <= (double)m * (double)batches_at(p, m)) return m;
  uint64_t lo = 1, hi = m; /* the answer is in [lo, hi), if lo qualifies */
  if (total > (double)m * (double)batches_at(p, lo)) return m; /* unreachable: keep m */
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (total <= (double)m * (double)batches_at(p, mid))
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

static void finish_buckets(al_plan *p) {
  for (size_t i = 0; i < p->n_buckets; i++) {
    plan_bucket *b = &p->buckets[i];
    b->batch_cost_ms = plan_micro_cost(p, (uint32_t)i, b->batch_size);
  }
}

int plan_trim(al_plan *p, uint32_t k) {
  if (k < p->first_step || k - p->first_step > p->steps)
    return al_set_error(AL_ERANGE, "start step %u is outside the plan's steps %u..%u", k,
                        p->first_step, p->first_step + p->steps);
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

void plan_mean_cv(double sum, double sq, size_t n, double *mean, double *cv) {
  *mean = n ? sum / (double)n : 0;
  double var = n ? sq / (double)n - *mean * *mean : 0;
  if (var < 0) var = 0;
  *cv = *mean > 0 ? sqrt(var) / *mean : 0;
}

void plan_stats(al_plan *p) {
  uint32_t W = p->world;
  p->samples = p->padded = p->tokens = 0;
  for (size_t i = 0; i < p->n_micro; i++) {
    const plan_micro *m = &p->micro[i];
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
        if (!m->padded) st_smp += m->n, st_tok += (double)m->n * p->buckets[m->bucket].tokens;
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
  p->bubble = max_sum > 0 ? 1.0 - mean_sum / max_sum : 0;
  p->seconds = max_sum / 1000.0;
  plan_mean_cv(tok_sum, tok_sq, p->steps, &p->step_tokens_mean, &p->step_tokens_cv);
  plan_mean_cv(smp_sum, smp_sq, p->steps, &p->step_samples_mean, &p->step_samples_cv);
  double step_mean;
  plan_mean_cv(max_sum, max_sq, p->steps, &step_mean, &p->step_time_cv);
}

int al_plan_get_info(const al_plan *p, al_manifest_info *o) {
  if (!p || !o) return al_set_error(AL_EINVAL, "al_plan_get_info: NULL argument");
  memset(o, 0, sizeof *o);
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

/* K and T from the options (al_plan.h): K = 1 and T = W K M_mem unless set;
 * only T set: the fewest K with T / (W K) <= M_mem. */
static int resolve_step(al_plan *p, const al_plan_options *o) {
  uint64_t W = p->world, M = p->mem_tokens;
  uint64_t K = o->micro_per_step, T = o->step_tokens;
  if (!K) K = T ? (T + W * M - 1) / (W * M) : 1;
  if (!K) K = 1;
  if (K > (1u << 20))
    return al_set_error(AL_ERANGE, "micro-per-step %llu out of range (1..1048576)",
                        (unsigned long long)K);
  if (!T) T = W * K * M;
  if (T / (W * K) > M)
    return al_set_error(AL_ERANGE,
                        "step-tokens %llu over %llu ranks x %llu micro-batches needs %llu tokens per "
                        "micro-batch, above mem-tokens %llu: raise --micro-per-step to %llu or more",
                        (unsigned long long)T, (unsigned long long)W, (unsigned long long)K,
                        (unsigned long long)(T / (W * K)), (unsigned long long)M,
                        (unsigned long long)((T + W * M - 1) / (W * M)));
  p->micro_per_step = (uint32_t)K;
  p->step_tokens = T;
  p->micro_tokens = T / (W * K) ? T / (W * K) : 1;
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
  if (al_bucket_assign(t, &p->geom, p->mem_tokens, w, h, f, bucket, &r) == AL_OK)
    r = AL_REJECT_NONE;
  if (key && m->used < MEMO_CAP / 2) {
    m->key[slot] = key;
    m->val[slot] = r == AL_REJECT_NONE ? *bucket : UINT32_MAX - (uint32_t)r;
    m->used++;
  }
  return r;
}

static al_plan *plan_alloc(void) {
  al_plan *p = calloc(1, sizeof *p);
  if (p)
    for (int r = 0; r < AL_REJECT_COUNT; r++) p->first_rejected[r] = UINT64_MAX;
  return p;
}

static int check_cost(const al_cost_model *c) {
  if (c->fit.family != AL_COST_POWER && c->fit.family != AL_COST_POLY2)
    return al_set_error(AL_EINVAL, "cost model has no fitted family");
  if (!(al_cost_per_sample(c, 1024) > 0))
    return al_set_error(AL_EINVAL,
                        "cost model predicts a per-sample cost <= 0 at S = 1024 (params %g, %g, %g)",
                        c->fit.params[0], c->fit.params[1], c->fit.params[2]);
  return AL_OK;
}

static int build(al_plan *p, const al_plan_input *in, const al_latent_grid *grid,
                 const al_cost_model *cost, const al_plan_options *o, uint64_t **items_out,
                 size_t *n_items) {
  int rc;
  if (!in->n) return al_set_error(AL_EINVAL, "the index has no samples: nothing to plan");
  if (in->n > UINT32_MAX)
    return al_set_error(AL_ERANGE, "%zu samples: the planner handles at most 2^32 - 1", in->n);
  if (!in->width || !in->height || !in->frames)
    return al_set_error(AL_EINVAL, "al_plan_build: NULL shape arrays");
  if (!o->world || o->world > (1u << 20))
    return al_set_error(AL_EINVAL, "world size %u out of range (1..1048576)", o->world);
  if ((rc = check_cost(cost))) return rc;
  if (o->step_cost_ms != 0)
    return al_set_error(AL_EINVAL,
                        "step_cost_ms (--step-ms) was removed: every step now holds micro_per_step "
                        "(--micro-per-step) micro-batches per rank and about step_tokens "
                        "(--step-tokens) tokens");
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
  if ((rc = resolve_step(p, o))) return rc;

  al_bucket_table *own = NULL;
  uint64_t *items = NULL;
  const al_bucket_table *t = o->buckets;
  if (!t) {
    if ((rc = al_bucket_table_default(&own))) return rc;
    t = own;
  }
  rc = al_bucket_table_check(t, &p->geom);
  p->n_buckets = al_bucket_table_count(t);
  p->buckets = calloc(p->n_buckets ? p->n_buckets : 1, sizeof *p->buckets);
  if (!rc && !p->buckets) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  uint64_t min_tok = UINT64_MAX, max_fit = 0, max_micro = 0;
  size_t min_b = 0;
  for (size_t i = 0; i < p->n_buckets && !rc; i++) {
    al_bucket_shape sh;
    al_bucket_table_get(t, i, &sh);
    plan_bucket *b = &p->buckets[i];
    b->width = sh.width, b->height = sh.height, b->frames = sh.frames;
    b->tokens = al_tokens(&p->geom, sh.width, sh.height, sh.frames);
    if (!b->tokens)
      rc = al_set_error(AL_EINVAL, "bucket %ux%u x %u frames has no tokens", sh.width, sh.height,
                        sh.frames);
    if (b->tokens < min_tok) min_tok = b->tokens, min_b = i;
    if (b->tokens <= p->mem_tokens && b->tokens > max_fit) max_fit = b->tokens;
    if (b->tokens <= p->micro_tokens && b->tokens > max_micro) max_micro = b->tokens;
  }
  if (!rc && p->mem_tokens < min_tok)
    rc = al_set_error(AL_ERANGE,
                      "mem-tokens %llu is below the smallest bucket (%ux%u x %u frames = %llu tokens): no sample can fit",
                      (unsigned long long)p->mem_tokens, p->buckets[min_b].width,
                      p->buckets[min_b].height, p->buckets[min_b].frames,
                      (unsigned long long)min_tok);
  if (rc) goto cleanup;
  /* Default M_comp: c(S) of the largest bucket within the micro-batch token
   * target (M_mem by default), or of the smallest bucket if none fits it. */
  if (!max_micro) max_micro = min_tok;
  p->comp_ms = o->comp_budget_ms > 0 ? o->comp_budget_ms : al_cost_per_sample(&p->cost, max_micro);

  /* bucket << 32 | position of each planned sample, ascending positions. */
  items = grow_big_block(in->n, sizeof *items);
  p->status = calloc(in->n, 1);
  if (!items || !p->status) {
    rc = al_set_error(AL_ENOMEM, "plan: out of memory for %zu samples", in->n);
    goto cleanup;
  }
  /* Datasets come in few distinct shapes: memoise the assignment per shape. */
  shape_memo memo;
  memo_init(&memo);
  size_t planned = 0;
  for (size_t i = 0; i < in->n; i++) {
    uint32_t lb;
    al_reject_reason lr;
    const al_latent_grid *gi = grid && grid[i].t ? &grid[i] : NULL;
    if (gi &&
        (gi->t != 1 + (uint64_t)(in->frames[i] ? in->frames[i] - 1 : 0) / p->geom.vae_stride_t ||
         gi->h != in->height[i] / p->geom.vae_stride_s ||
         gi->w != in->width[i] / p->geom.vae_stride_s)) {
      /* A grid other than the one the shape gives under the plan's geometry (the index was
       * made with another VAE stride): the grid rule decides, without the memo. */
      if (al_bucket_assign_grid(t, &p->geom, p->mem_tokens, in->width[i], in->height[i],
                                in->frames[i], gi, &lb, &lr) == AL_OK)
        lr = AL_REJECT_NONE;
    } else {
      /* No grid, or the shape's own: the pixel rule keeps every bucket inside it. */
      lr = memo_assign(&memo, t, p, in->width[i], in->height[i], in->frames[i], &lb);
    }
    if (lr != AL_REJECT_NONE) {
      p->status[i] = (uint8_t)lr;
      if (!p->rejected[lr]) p->first_rejected[lr] = i;
      p->rejected[lr]++;
      p->rejected[AL_REJECT_NONE]++;
      continue;
    }
    items[planned++] = (uint64_t)lb << 32 | i;
    p->buckets[lb].samples++;
  }
  memo_free(&memo);
  p->micro_tokens = calibrate_micro_tokens(p, p->micro_tokens);
  for (size_t i = 0; i < p->n_buckets; i++) size_bucket(p, &p->buckets[i], p->micro_tokens);
  finish_buckets(p);
  if (!planned) {
    rc = al_set_error(AL_ENOTFOUND,
                      "no sample fits any bucket: %zu rejected (%llu zero-sized, %llu too small, %llu too few frames, "
                      "%llu over mem-tokens %llu, %llu whose latent grid no bucket fits inside)",
                      in->n, (unsigned long long)p->rejected[AL_REJECT_BAD_SHAPE],
                      (unsigned long long)p->rejected[AL_REJECT_TOO_SMALL],
                      (unsigned long long)p->rejected[AL_REJECT_TOO_FEW_FRAMES],
                      (unsigned long long)p->rejected[AL_REJECT_OVER_MEMORY],
                      (unsigned long long)p->mem_tokens,
                      (unsigned long long)p->rejected[AL_REJECT_LATENT_GRID]);
    goto cleanup;
  }
  *items_out = items;
  *n_items = planned;
  items = NULL;

cleanup:
  free(items);
  al_bucket_table_free(own);
  return rc;
}

int al_plan_build(al_plan **out, const al_plan_input *in, const al_cost_model *cost,
                  const al_plan_options *o) {
  return plan_build_grid(out, in, NULL, cost, o);
}

int plan_build_grid(al_plan **out, const al_plan_input *in, const al_latent_grid *grid,
                    const al_cost_model *cost, const al_plan_options *o) {
  if (!out || !in || !cost || !o) return al_set_error(AL_EINVAL, "al_plan_build: NULL argument");
  *out = NULL;
  al_plan *p = plan_alloc();
  if (!p) return al_set_error(AL_ENOMEM, "plan: out of memory");
  uint64_t *items = NULL;
  size_t n = 0;
  int rc = build(p, in, grid, cost, o, &items, &n);
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

int al_plan_replan(al_plan **out, const al_manifest *old, uint32_t at_step, uint32_t world) {
  if (!out || !old) return al_set_error(AL_EINVAL, "al_plan_replan: NULL argument");
  *out = NULL;
  const char *name = old->path ? old->path : "manifest";
  if (!world || world > (1u << 20))
    return al_set_error(AL_EINVAL, "world size %u out of range (1..1048576)", world);
  if (at_step < old->first_step || at_step - old->first_step > old->steps)
    return al_set_error(AL_ERANGE, "%s: holds steps %u..%u; cannot re-plan from step %u", name,
                        old->first_step, old->first_step + old->steps, at_step);
  if (old->n_keys != old->info.index_samples || old->info.index_samples > UINT32_MAX)
    return al_set_error(AL_EFORMAT, "%s: key table has %llu entries for an index of %llu samples",
                        name, (unsigned long long)old->n_keys,
                        (unsigned long long)old->info.index_samples);
  al_plan *p = plan_alloc();
  if (!p) return al_set_error(AL_ENOMEM, "plan: out of memory");
  int rc = AL_OK;
  uint32_t *bucket_of = NULL;
  uint64_t *items = NULL;
  al_policy pol = AL_POLICY_ADAPTIVE;
  al_last_step ls = AL_LAST_PAD;
  if ((rc = al_policy_parse(old->policy, &pol)) || (rc = al_last_step_parse(old->last_step, &ls))) {
    al_error_prefix(rc, "%s", name);
    goto cleanup;
  }
  p->policy = pol;
  p->world = world;
  p->seed = old->info.seed;
  p->epoch = old->info.epoch;
  p->mem_tokens = old->info.mem_tokens;
  p->comp_ms = old->info.comp_budget_ms;
  p->window = old->info.window ? old->info.window : AL_PLAN_DEFAULT_WINDOW;
  {
    /* Keep the step's batch count (W x K) and tokens about the same. */
    uint64_t k_old = old->info.micro_per_step ? old->info.micro_per_step : 1;
    uint64_t k = (k_old * old->world + world / 2) / world;
    p->micro_per_step = k ? (uint32_t)(k < (1u << 20) ? k : (1u << 20)) : 1;
    p->step_tokens = old->info.step_tokens ? old->info.step_tokens
                                           : k_old * old->world * old->info.mem_tokens;
    /* The batches keep the old sizes, so the micro-batch target stays too. */
    p->micro_tokens = old->info.micro_tokens ? old->info.micro_tokens : old->info.mem_tokens;
  }
  p->last_step = ls;
  p->geom = old->geom;
  p->fingerprint = old->info.index_fingerprint;
  p->index_samples = old->info.index_samples;
  p->first_step = at_step;
  p->cost = old->cost;
  p->n_buckets = old->n_buckets;
  size_t n = (size_t)p->index_samples;
  p->buckets = calloc(p->n_buckets ? p->n_buckets : 1, sizeof *p->buckets);
  p->status = malloc(n ? n : 1);
  bucket_of = malloc((n ? n : 1) * sizeof *bucket_of);
  if (!p->buckets || !p->status || !bucket_of) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i < p->n_buckets && !rc; i++) {
    const al_bucket_info *ob = &old->buckets[i];
    plan_bucket *b = &p->buckets[i];
    b->width = ob->width, b->height = ob->height, b->frames = ob->frames;
    b->tokens = ob->tokens;
    b->batch_size = ob->batch_size ? ob->batch_size : 1;
    b->limited_by = !strcmp(ob->limited_by, "compute") ? AL_LIMIT_COMPUTE
                    : !strcmp(ob->limited_by, "one")   ? AL_LIMIT_ONE
                                                       : AL_LIMIT_MEMORY;
  }
  if (!rc) {
    finish_buckets(p);
    for (size_t i = 0; i < n; i++) {
      uint8_t s = old->key_status[i];
      bucket_of[i] = UINT32_MAX;
      p->status[i] = s == AL_KEY_PLANNED ? AL_KEY_CONSUMED : s;
      if (s >= 1 && s < AL_REJECT_COUNT) {
        if (!p->rejected[s]) p->first_rejected[s] = i;
        p->rejected[s]++;
        p->rejected[AL_REJECT_NONE]++;
      }
    }
    /* The old plan's samples from step at_step on, padding excluded. */
    uint64_t m0 = old->slot[(size_t)(at_step - old->first_step) * old->world];
    size_t count = 0;
    for (uint64_t x = m0; x < old->n_micro && !rc; x++) {
      const manifest_micro *m = &old->micro[x];
      for (uint32_t k = 0; k < m->n; k++) {
        int pad = 0;
        for (uint32_t q = 0; q < m->n_pad; q++) pad |= old->pads[m->pad_first + q] == k;
        if (pad) continue;
        uint64_t s = old->samples[m->first + k];
        if (bucket_of[s] != UINT32_MAX) {
          rc = al_set_error(AL_EFORMAT, "%s: sample %llu is scheduled twice", name,
                            (unsigned long long)s);
          break;
        }
        bucket_of[s] = m->bucket;
        p->status[s] = AL_KEY_PLANNED;
        p->buckets[m->bucket].samples++;
        count++;
      }
    }
    if (!rc) {
      items = malloc((count ? count : 1) * sizeof *items);
      if (!items) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
      size_t k = 0;
      for (size_t i = 0; i < n && items; i++)
        if (bucket_of[i] != UINT32_MAX) items[k++] = (uint64_t)bucket_of[i] << 32 | i;
      /* Its own random stream: a re-plan for (at_step, world) must not replay
       * the first plan's shuffle, and must be reproducible. */
      if (!rc) rc = plan_schedule(p, items, count, ((uint64_t)at_step << 32) | world);
    }
  }
  if (!rc) {
    plan_stats(p);
    *out = p;
    p = NULL;
  }

cleanup:
  free(items);
  free(bucket_of);
  al_plan_free(p);
  return rc;
}
