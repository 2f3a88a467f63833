/* run.c - a chunked plan (al_run.h): the pass's arithmetic, and one window planned on its own.
 *
 * Memory: opened from arrays or an index, the run builds its index map in memory (run_map.c: 4
 * bytes an input position, its class lists); opened from a map file, the lists are the file's,
 * read-only and shared in the page cache, and the run holds per class and per bucket only. Planning
 * a window holds that window's samples and batches; a plan of steps holds their micro-batches, and
 * a plan of the full pass 1 byte an input position (the key table it is saved with). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "common/struct_abi_internal.h"
#include "planner/al_run.h"
#include "planner/plan_internal.h"
#include "planner/rng_internal.h"
#include "planner/run_draw_internal.h"
#include "planner/run_internal.h"

/* Default T: the T whose windows are expected to fill this share of their rank-slots; a given T
 * may fill at most RUN_MAX_T_SHARE (the draws of a window vary by a sample per bucket). */
#define RUN_DEFAULT_T_SHARE 0.85
#define RUN_MAX_T_SHARE 0.97

/* Sample j (< bucket_n[b]) of bucket b: its class by a search of the bucket's few classes. */
static uint32_t bucket_sample(const al_run *r, size_t b, uint64_t j) {
  uint64_t lo = r->cls_first[b], hi = r->cls_first[b + 1];
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (r->cls_cum[mid] <= j)
      lo = mid;
    else
      hi = mid;
  }
  return r->cls[lo].list[j - r->cls_cum[lo]];
}

/* Progress at the end of step s: every step takes 1 / steps of the pass (steps = round(P / T),
 * so each holds P / steps tokens, within half a step's worth of T over the pass). */
static uint64_t progress(const al_run *r, uint64_t s) {
  if (s >= r->steps) return RUN_F_ONE;
  return run_mul_div(s, RUN_F_ONE, r->steps);
}

/* The stretch of steps windows tile: the pass, or the mixture's segment holding `step` (rates
 * change only at a segment's start, so no window spans two rate sets). */
static void tiled_span(const al_run *r, uint32_t step, uint32_t *a, uint32_t *b) {
  if (r->mix) {
    run_mix_segment(r, step, a, b);
  } else {
    *a = 0;
    *b = r->steps;
  }
}

/* Windows: [a + i window, a + (i + 1) window) of their span [a, b), but the last, which takes
 * the tail when less than two windows are left (so no window is short of `window` steps unless
 * the span is). */
static uint32_t window_start(const al_run *r, uint32_t step) {
  uint32_t a, b, win = r->tmpl->window;
  tiled_span(r, step, &a, &b);
  uint32_t n = (b - a) / win;
  uint32_t last = n > 1 ? (n - 1) * win : 0;
  uint32_t s0 = (step - a) / win * win;
  return a + (s0 > last ? last : s0);
}

static uint32_t window_end(const al_run *r, uint32_t s0) {
  uint32_t a, b, win = r->tmpl->window;
  tiled_span(r, s0, &a, &b);
  return b - s0 < 2 * win ? b : s0 + win;
}

int run_index_classes(al_run *r) {
  const al_plan *p = r->tmpl;
  size_t nb = p->n_buckets;
  r->bucket_n = calloc(nb ? nb : 1, sizeof *r->bucket_n);
  r->perm = calloc(nb ? nb : 1, sizeof *r->perm);
  r->phi = calloc(nb ? nb : 1, sizeof *r->phi);
  r->cls_cum = calloc(r->n_cls ? r->n_cls : 1, sizeof *r->cls_cum);
  if (!r->bucket_n || !r->perm || !r->phi || !r->cls_cum)
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t b = 0; b < nb; b++) {
    for (uint64_t c = r->cls_first[b]; c < r->cls_first[b + 1]; c++) {
      r->cls_cum[c] = r->bucket_n[b];
      r->bucket_n[b] += r->cls[c].n;
    }
    uint64_t nk = r->bucket_n[b];
    run_perm_init(&r->perm[b], nk, run_key(p->seed, p->epoch, 0, 0, b, RUN_KEY_PERM));
    r->phi[b] = run_dither(run_key(p->seed, p->epoch, 0, 0, b, RUN_KEY_DITHER));
    r->pass_tokens += nk * p->buckets[b].tokens;
    r->pass_samples += nk;
  }
  return AL_OK;
}

/* Rank-slots a step of T tokens is expected to take: the pass cut into round(P / T) steps, a
 * window of L = min(window, steps) of them draws n_b L / steps samples of bucket b, in capacity
 * batches with its partial batch counted whole (a batch of degree d takes d), over L steps.
 * Non-decreasing in T. */
static double step_slots(const al_run *r, uint64_t T) {
  const al_plan *p = r->tmpl;
  double steps = floor((double)r->pass_tokens / (double)T + 0.5);
  if (steps < 1) steps = 1;
  double L = steps < p->window ? steps : p->window, slots = 0;
  for (size_t b = 0; b < p->n_buckets; b++) {
    const plan_bucket *k = &p->buckets[b];
    if (k->samples)
      slots += ceil((double)k->samples * L / steps / k->batch_size) *
               (k->sp_degree ? k->sp_degree : 1);
  }
  return slots / L;
}

/* The largest T whose steps are expected to take at most `share` of their W x K rank-slots
 * (bisection over the monotone step_slots). */
static uint64_t tokens_at_share(const al_run *r, double share) {
  const al_plan *p = r->tmpl;
  double room = share * p->world * p->micro_per_step;
  uint64_t lo = 0, hi = (uint64_t)p->world * p->micro_per_step * plan_mem_cap(p) + 1;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (step_slots(r, mid) <= room)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

int run_check_step_tokens(const al_plan *p, uint64_t t) {
  for (size_t b = 0; b < p->n_buckets; b++)
    if (p->buckets[b].samples && p->buckets[b].tokens > t)
      return al_set_error(AL_ERANGE,
                          "step-tokens %llu is below one sample of bucket %ux%u x %u frames (%llu "
                          "tokens): raise --step-tokens",
                          (unsigned long long)t, p->buckets[b].width, p->buckets[b].height,
                          p->buckets[b].frames, (unsigned long long)p->buckets[b].tokens);
  return AL_OK;
}

/* T: the given one if its windows fit RUN_MAX_T_SHARE of their rank-slots, else refused; by
 * default the T whose windows fill RUN_DEFAULT_T_SHARE of them. The capacity reported is the T
 * that fills them all. */
static int resolve_tokens(al_run *r, uint64_t t_opt) {
  al_plan *p = r->tmpl;
  r->capacity = tokens_at_share(r, 1.0);
  uint64_t most = tokens_at_share(r, RUN_MAX_T_SHARE);
  uint64_t t = t_opt ? t_opt : tokens_at_share(r, RUN_DEFAULT_T_SHARE);
  if (!most)
    return al_set_error(AL_ERANGE,
                        "a window of %u steps has %u x %u x %u rank-slots, fewer than this "
                        "corpus's buckets need for one batch each: raise --window or "
                        "--micro-per-step",
                        p->window, p->world, p->micro_per_step, p->window);
  if (t > most)
    return al_set_error(AL_ERANGE,
                        "step-tokens %llu: at most %llu tokens a step fit %u x %u micro-batches of "
                        "this corpus (%.0f %% of the rank-slots of a window of %u steps): lower "
                        "--step-tokens or raise --micro-per-step",
                        (unsigned long long)t, (unsigned long long)most, p->world,
                        p->micro_per_step, RUN_MAX_T_SHARE * 100, p->window);
  int rc = run_check_step_tokens(p, t);
  if (rc) return rc;
  if (!t) t = 1;
  uint64_t steps = (r->pass_tokens + t / 2) / t;
  if (steps > UINT32_MAX) return al_set_error(AL_ERANGE, "plan: more than 2^32 - 1 steps");
  r->steps = steps ? (uint32_t)steps : 1;
  /* What every step holds: the pass's tokens over its steps. */
  p->step_tokens = (r->pass_tokens + r->steps - 1) / r->steps;
  return AL_OK;
}

/* The default window: AL_PLAN_DEFAULT_WINDOW steps, or more where the corpus's buckets would
 * otherwise make partial batches (one per bucket a window) more than a tenth of a window's
 * W x K x window rank-slots (small W x K, many buckets). A multiple of the default. */
static uint32_t default_window(const al_plan *p) {
  uint64_t used = 0, per = (uint64_t)p->world * p->micro_per_step, w = AL_PLAN_DEFAULT_WINDOW;
  for (size_t b = 0; b < p->n_buckets; b++) used += p->buckets[b].samples != 0;
  uint64_t need = (10 * used + per - 1) / per;
  if (need > w)
    w = (need + AL_PLAN_DEFAULT_WINDOW - 1) / AL_PLAN_DEFAULT_WINDOW * AL_PLAN_DEFAULT_WINDOW;
  return w > (1u << 20) ? 1u << 20 : (uint32_t)w;
}

int run_check_options(const al_plan_options *o) {
  for (size_t i = 0; i < o->n_sp_degrees; i++)
    if (o->sp_degrees && o->sp_degrees[i] > 1)
      return al_set_error(AL_EINVAL,
                          "sp-degrees: a chunked plan does not plan sequence parallelism yet (use "
                          "the epoch planner)");
  if (o->last_step == AL_LAST_DROP)
    return al_set_error(AL_EINVAL,
                        "last-step drop: a chunked plan trains every sample of the pass (its last "
                        "step holds the rest)");
  return AL_OK;
}

int run_finish(al_run *r, const al_plan_options *o) {
  if (r->mix) return run_mix_finish(r, o);
  if (!o->window) r->tmpl->window = default_window(r->tmpl);
  return resolve_tokens(r, o->step_tokens);
}

int run_open_grid(al_run **out, const al_plan_input *in, const al_latent_grid *grid,
                  const uint8_t *excl, const al_cost_model *cost, const al_plan_options *o) {
  run_map *m = NULL;
  int rc = run_check_options(o);
  if (!rc) rc = run_map_build(&m, in, grid, excl);
  return rc ? rc : run_open_classes(out, m, cost, o);
}

int al_run_open(al_run **out, const al_plan_input *in, const al_cost_model *cost,
                const al_plan_options *opts) {
  if (!out || !in || !cost || !opts) return al_set_error(AL_EINVAL, "al_run_open: NULL argument");
  *out = NULL;
  al_plan_options o;
  al_plan_input i;
  al_cost_model c;
  int rc = struct_in(&o, sizeof o, AL_PLAN_OPTIONS_V1, opts, "al_run_open", "al_plan_options");
  if (!rc) rc = struct_in(&i, sizeof i, AL_PLAN_INPUT_V1, in, "al_run_open", "al_plan_input");
  if (!rc) rc = struct_in(&c, sizeof c, AL_COST_MODEL_V1, cost, "al_run_open", "al_cost_model");
  if (!rc && o.n_require_members)
    rc = al_set_error(AL_EINVAL, "al_run_open: require_members needs the index");
  return rc ? rc : run_open_grid(out, &i, NULL, NULL, &c, &o);
}

void al_run_free(al_run *r) {
  if (!r) return;
  al_plan_free(r->tmpl);
  free(r->cls);
  free(r->cls_first);
  free(r->cls_cum);
  free(r->bucket_n);
  free(r->rejected);
  run_map_close(r->map);
  free(r->perm);
  free(r->phi);
  run_mix_free(r->mix);
  free(r);
}

/* The run's identity (al_run_info.fingerprint): a splitmix-style hash of the template's
 * configuration, buckets and cost model, the pass's figures, the input's fingerprint, seed and
 * epoch. The world_ref is the reference the run was opened at (part of the configuration); the
 * world steps are laid out at is not in it. */
void run_fp_add(uint64_t *h, uint64_t v) {
  v += UINT64_C(0x9e3779b97f4a7c15);
  v = (v ^ (v >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  v = (v ^ (v >> 27)) * UINT64_C(0x94d049bb133111eb);
  *h = ((*h ^ v ^ (v >> 31)) * UINT64_C(0x9e3779b97f4a7c15));
  *h = (*h << 27) | (*h >> 37);
}

static uint64_t fp_double(double x) {
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  return x == 0 ? 0 : u; /* -0.0 as 0.0 */
}

static uint64_t run_fingerprint(const al_run *r) {
  const al_plan *p = r->tmpl;
  const al_cost_model *c = &p->cost;
  uint64_t h = UINT64_C(0x616c72756e667031); /* "alrunfp1" */
  uint64_t v[] = {(uint64_t)p->policy,
                  p->world,
                  p->micro_per_step,
                  p->window,
                  p->step_tokens,
                  p->mem_tokens,
                  fp_double(p->comp_ms),
                  (uint64_t)p->last_step,
                  p->geom.vae_stride_t,
                  p->geom.vae_stride_s,
                  p->geom.patch_t,
                  p->geom.patch_h,
                  p->geom.patch_w,
                  (uint64_t)p->sync,
                  p->n_sp_degrees,
                  p->fingerprint,
                  p->index_samples,
                  p->seed,
                  p->epoch,
                  r->steps,
                  r->pass_tokens,
                  r->pass_samples,
                  (uint64_t)c->fit.family,
                  fp_double(c->fit.params[0]),
                  fp_double(c->fit.params[1]),
                  fp_double(c->fit.params[2]),
                  fp_double(c->fit.per_sample_ms),
                  fp_double(c->fit.floor_ms),
                  fp_double(c->fit.sharpness),
                  (uint64_t)c->has_mem,
                  fp_double(c->mem_m0),
                  fp_double(c->mem_m1),
                  fp_double(c->sp_a2a_bytes_per_token),
                  fp_double(c->sp_link_gbps),
                  c->n_sp_fits,
                  p->n_buckets};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) run_fp_add(&h, v[i]);
  for (uint32_t i = 0; i < p->n_sp_degrees && i < AL_PLAN_MAX_SP_DEGREES; i++)
    run_fp_add(&h, p->sp_degrees[i]);
  for (size_t b = 0; b < p->n_buckets; b++) {
    const plan_bucket *k = &p->buckets[b];
    run_fp_add(&h, ((uint64_t)k->width << 32) | k->height);
    run_fp_add(&h, ((uint64_t)k->frames << 32) | k->batch_size);
    run_fp_add(&h, k->tokens);
    run_fp_add(&h, k->samples);
    run_fp_add(&h, fp_double(k->batch_cost_ms));
    run_fp_add(&h, k->sp_degree);
  }
  if (r->mix) return run_mix_fingerprint(r, h);
  return h ? h : 1;
}

int al_run_get_info(const al_run *r, al_run_info *out) {
  if (!r || !out) return al_set_error(AL_EINVAL, "al_run_get_info: NULL argument");
  size_t n;
  int rc = struct_out_size(out, sizeof *out, AL_RUN_INFO_V1, "al_run_get_info", "al_run_info", &n);
  if (rc) return rc;
  al_run_info i = {0};
  i.steps = r->steps;
  i.window = r->tmpl->window;
  i.world_ref = r->tmpl->world;
  i.micro_ref = r->tmpl->micro_per_step;
  i.step_tokens = r->tmpl->step_tokens;
  i.pass_tokens = r->pass_tokens;
  i.pass_samples = r->pass_samples;
  i.capacity = r->capacity;
  i.index_samples = r->tmpl->index_samples;
  i.index_fingerprint = r->tmpl->fingerprint;
  i.fingerprint = run_fingerprint(r);
  i.seed = r->tmpl->seed;
  i.epoch = r->tmpl->epoch;
  i.sources = 1;
  i.draw_ids = r->tmpl->index_samples;
  if (r->mix) run_mix_info(r, &i);
  struct_out(out, &i, n);
  return AL_OK;
}

/* ---- one window ---- */

/* A window being planned: its own plan (the run's configuration at the asked world, the
 * window's samples and micro-batches) and, per micro-batch, the step it goes to. */
typedef struct window_plan {
  al_plan p;
  uint32_t *step_of;
  size_t cap_step_of;
  uint32_t s0, n_steps;
  uint64_t *quota;  /* n_steps + 1 cumulative token targets */
  uint64_t *tokens; /* per step: tokens placed */
  uint32_t *slots;  /* per step: micro-batches placed */
  double *load;     /* per step: predicted cost placed */
} window_plan;

static void window_free(window_plan *w) {
  free(w->p.mb);
  free(w->p.micro);
  free(w->p.slot);
  free(w->step_of);
  free(w->quota);
  free(w->tokens);
  free(w->slots);
  free(w->load);
}

/* The window's draw: every bucket's stretch [f(s0), f(s1)) of its keyed order, shuffled. */
static int draw_window(const al_run *r, window_plan *w, uint64_t **items_out, size_t *n_out) {
  const al_plan *t = r->tmpl;
  uint64_t *items = NULL;
  size_t n = 0;
  if (r->mix) {
    int rc = run_mix_draw(r, w->s0, w->s0 + w->n_steps, &items, &n);
    if (rc) return rc;
  } else {
    uint64_t f0 = progress(r, w->s0), f1 = progress(r, (uint64_t)w->s0 + w->n_steps);
    for (size_t b = 0; b < t->n_buckets; b++) {
      uint64_t nk = r->bucket_n[b];
      n += run_cum(nk, f1, r->phi[b]) - run_cum(nk, f0, r->phi[b]);
    }
    items = malloc((n ? n : 1) * sizeof *items);
    if (!items)
      return al_set_error(AL_ENOMEM, "plan: out of memory for a window of %zu samples", n);
    size_t x = 0;
    for (size_t b = 0; b < t->n_buckets; b++) {
      uint64_t nk = r->bucket_n[b];
      uint64_t j1 = run_cum(nk, f1, r->phi[b]);
      for (uint64_t j = run_cum(nk, f0, r->phi[b]); j < j1; j++)
        items[x++] = (uint64_t)b << 32 | bucket_sample(r, b, run_perm_at(&r->perm[b], j));
    }
  }
  plan_rng rng;
  plan_rng_seed(&rng, t->seed, t->epoch, (uint64_t)w->s0 << 32);
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)plan_rng_below(&rng, i);
    uint64_t v = items[i - 1];
    items[i - 1] = items[j];
    items[j] = v;
  }
  *items_out = items;
  *n_out = n;
  return AL_OK;
}

static uint64_t micro_tokens_of(const al_plan *p, const plan_micro *m) {
  return m->padded ? 0 : (uint64_t)m->n * p->buckets[m->bucket].tokens;
}

/* Where the quotas are measured: the pass's progress, or a mixture's expected tokens. */
static uint64_t quota_at(const al_run *r, uint64_t s) {
  return r->mix ? run_mix_expected_tokens(r, s) : progress(r, s);
}

/* Cumulative token targets: the window's drawn tokens spread over its steps as the pass's
 * progress (a mixture: its expected tokens) spreads them (exact for the window, within a token
 * per step). */
static void set_quotas(const al_run *r, window_plan *w) {
  uint64_t total = 0;
  for (size_t i = 0; i < w->p.n_micro; i++) total += micro_tokens_of(&w->p, &w->p.micro[i]);
  uint64_t f0 = quota_at(r, w->s0), span = quota_at(r, (uint64_t)w->s0 + w->n_steps) - f0;
  for (uint32_t i = 0; i <= w->n_steps; i++)
    w->quota[i] = span ? run_mul_div(total, quota_at(r, (uint64_t)w->s0 + i) - f0, span) : 0;
  w->quota[w->n_steps] = total;
}

static void place(window_plan *w, size_t x, uint32_t s) {
  w->step_of[x] = s;
  w->tokens[s] += micro_tokens_of(&w->p, &w->p.micro[x]);
  w->slots[s]++;
  w->load[s] += w->p.micro[x].cost;
}

/* The step with the most token quota left among those holding fewer than `cap` batches (ties:
 * the least predicted cost, then the lower step); the last step when every one is full (the
 * caller refuses what then holds more than `cap`). */
static uint32_t most_quota_left(const window_plan *w, uint32_t cap) {
  uint32_t best = UINT32_MAX;
  int64_t best_left = 0;
  for (uint32_t s = 0; s < w->n_steps; s++) {
    if (w->slots[s] >= cap) continue;
    int64_t left = (int64_t)(w->quota[s + 1] - w->quota[s]) - (int64_t)w->tokens[s];
    if (best == UINT32_MAX || left > best_left || (left == best_left && w->load[s] < w->load[best]))
      best = s, best_left = left;
  }
  return best == UINT32_MAX ? w->n_steps - 1 : best; /* every step full: the caller refuses */
}

static void compose_lpt(window_plan *w, const uint32_t *order, size_t m, uint32_t cap) {
  for (size_t q = 0; q < m; q++) place(w, order[q], most_quota_left(w, cap));
}

/* A step the quotas left without a batch takes the batch of fewest tokens from the step holding
 * the most batches (every step must give every rank K micro-batches). */
static void give_empty_steps(window_plan *w) {
  for (uint32_t s = 0; s < w->n_steps; s++) {
    if (w->slots[s]) continue;
    uint32_t from = 0;
    for (uint32_t q = 1; q < w->n_steps; q++)
      if (w->slots[q] > w->slots[from]) from = q;
    if (w->slots[from] < 2) return; /* fewer batches than steps: fill_step refuses */
    size_t pick = SIZE_MAX;
    for (size_t i = 0; i < w->p.n_micro; i++)
      if (w->step_of[i] == from &&
          (pick == SIZE_MAX ||
           micro_tokens_of(&w->p, &w->p.micro[i]) < micro_tokens_of(&w->p, &w->p.micro[pick])))
        pick = i;
    w->tokens[from] -= micro_tokens_of(&w->p, &w->p.micro[pick]);
    w->slots[from]--;
    w->load[from] -= w->p.micro[pick].cost;
    place(w, pick, s);
  }
}

static int grow_step_of(window_plan *w) {
  return grow_array((void **)&w->step_of, &w->cap_step_of, w->p.n_micro + 1, sizeof *w->step_of,
                    "plan micro-batches");
}

static int cmp_split(const void *a, const void *b, void *ctx);
static int cmp_u32_asc(const void *a, const void *b);

/* The window's batches split in halves, in rounds (each splits the `need` best candidates: most
 * samples, later batches on ties) until there are `want`; then one-sample padding repeats of the
 * first batches' first samples. AL_ERANGE when the window already holds more than `want`. */
static int split_window(window_plan *w, size_t want) {
  al_plan *p = &w->p;
  if (p->n_micro > want)
    return al_set_error(AL_ERANGE,
                        "steps %u..%u draw %zu batches, above their %zu micro-batches (W x K "
                        "each): the step tokens %llu do not fit (lower --step-tokens or raise "
                        "--micro-per-step)",
                        w->s0, w->s0 + w->n_steps - 1, p->n_micro, want,
                        (unsigned long long)p->step_tokens);
  uint32_t *idx = malloc((want ? want : 1) * sizeof *idx);
  if (!idx) return al_set_error(AL_ENOMEM, "plan: out of memory");
  int rc = AL_OK;
  while (!rc && p->n_micro < want) {
    size_t n = p->n_micro, need = want - n, split = 0;
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    qsort_r(idx, n, sizeof *idx, cmp_split, p->micro);
    while (split < need && split < n && p->micro[idx[split]].n >= 2) split++;
    if (!split) break;
    qsort(idx, split, sizeof *idx, cmp_u32_asc);
    for (size_t q = 0; q < split && !rc; q++) rc = plan_split_micro(p, idx[q]);
  }
  for (size_t q = 0; !rc && p->n_micro < want; q++) {
    plan_micro like = p->micro[q];
    rc = grow_array((void **)&p->mb, &p->cap_mb, p->n_mb + 1, sizeof *p->mb, "plan samples");
    if (!rc) {
      p->mb[p->n_mb++] = p->mb[like.first];
      rc = plan_push_micro(p, p->n_mb - 1, 1, like.bucket, 1);
    }
  }
  free(idx);
  if (!rc)
    rc = grow_array((void **)&w->step_of, &w->cap_step_of, p->n_micro + 1, sizeof *w->step_of,
                    "plan micro-batches");
  return rc;
}

/* Moves micro-batch x to step s (bookkeeping of both steps). */
static void move_to(window_plan *w, size_t x, uint32_t s) {
  uint32_t from = w->step_of[x];
  w->tokens[from] -= micro_tokens_of(&w->p, &w->p.micro[x]);
  w->load[from] -= w->p.micro[x].cost;
  w->tokens[s] += micro_tokens_of(&w->p, &w->p.micro[x]);
  w->load[s] += w->p.micro[x].cost;
  w->step_of[x] = s;
}

/* The tokens of group g (micro-batches order[g W .. (g + 1) W)). */
static int64_t group_tokens(const window_plan *w, const uint32_t *order, size_t g, uint32_t W) {
  int64_t t = 0;
  for (size_t q = g * W; q < (g + 1) * W; q++)
    t += (int64_t)micro_tokens_of(&w->p, &w->p.micro[order[q]]);
  return t;
}

/* Steps hold their token quota closer: groups are swapped between steps wherever that lowers
 * the two steps' squared deviation from their quotas. A group is one level slot of W_ref
 * neighbours by cost, so which step holds it changes no slot's balance, only the steps' tokens;
 * passes over every pair of steps repeat until none improves (at most 8). */
static void level_step_tokens(window_plan *w, const uint32_t *order, uint32_t *group_step,
                              size_t n_groups, uint32_t W) {
  int64_t *gt = malloc((n_groups ? n_groups : 1) * sizeof *gt);
  int64_t *dev = malloc((w->n_steps ? w->n_steps : 1) * sizeof *dev);
  if (!gt || !dev) { /* an optimisation: without memory the greedy placement stands */
    free(gt), free(dev);
    return;
  }
  for (size_t g = 0; g < n_groups; g++) gt[g] = group_tokens(w, order, g, W);
  for (uint32_t s = 0; s < w->n_steps; s++)
    dev[s] = (int64_t)w->tokens[s] - (int64_t)(w->quota[s + 1] - w->quota[s]);
  for (int pass = 0; pass < 8; pass++) {
    int moved = 0;
    for (size_t a = 0; a < n_groups; a++)
      for (size_t b = a + 1; b < n_groups; b++) {
        uint32_t sa = group_step[a], sb = group_step[b];
        if (sa == sb || gt[a] == gt[b]) continue;
        int64_t d = gt[b] - gt[a]; /* what step sa gains, sb loses, by the swap */
        double before = (double)dev[sa] * dev[sa] + (double)dev[sb] * dev[sb];
        double after = (double)(dev[sa] + d) * (dev[sa] + d) +
                       (double)(dev[sb] - d) * (dev[sb] - d);
        if (after >= before) continue;
        for (size_t q = a * W; q < (a + 1) * W; q++) move_to(w, order[q], sb);
        for (size_t q = b * W; q < (b + 1) * W; q++) move_to(w, order[q], sa);
        group_step[a] = sb, group_step[b] = sa;
        dev[sa] += d, dev[sb] -= d;
        moved = 1;
      }
    if (!moved) break;
  }
  free(gt);
  free(dev);
}

/* Adaptive: the window's batches made exactly steps x W_ref x K_ref (split_window), sorted by
 * predicted cost and cut into groups of W_ref neighbours (one level slot of a step); each group,
 * costliest first, goes to the step with the most token quota left among those holding fewer
 * than K_ref groups (ties: the least predicted cost). So every slot's ranks carry about the same
 * cost, as in the epoch planner's windows, and at K_ref > 1 a step pairs costly groups of few
 * tokens with cheap groups of many, which holds its tokens near T. */
static int compose_groups(const al_run *r, window_plan *w) {
  const al_plan *t = r->tmpl;
  uint32_t W = t->world, K = t->micro_per_step;
  int rc = split_window(w, (size_t)w->n_steps * W * K);
  if (rc) return rc;
  size_t m = w->p.n_micro, n_groups = (size_t)w->n_steps * K;
  uint32_t *order = malloc((m ? m : 1) * sizeof *order);
  uint32_t *groups_in = calloc(w->n_steps, sizeof *groups_in);
  if (!order || !groups_in) {
    free(order), free(groups_in);
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  for (size_t i = 0; i < m; i++) order[i] = (uint32_t)i;
  qsort_r(order, m, sizeof *order, plan_cmp_micro_cost, w->p.micro);
  uint32_t *group_step = malloc((n_groups ? n_groups : 1) * sizeof *group_step);
  if (!group_step) {
    free(order), free(groups_in);
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  for (size_t g = 0; g < n_groups; g++) {
    uint32_t best = UINT32_MAX;
    int64_t best_left = 0;
    for (uint32_t s = 0; s < w->n_steps; s++) {
      if (groups_in[s] >= K) continue;
      int64_t left = (int64_t)(w->quota[s + 1] - w->quota[s]) - (int64_t)w->tokens[s];
      if (best == UINT32_MAX || left > best_left ||
          (left == best_left && w->load[s] < w->load[best]))
        best = s, best_left = left;
    }
    groups_in[best]++;
    group_step[g] = best;
    for (size_t q = g * W; q < (g + 1) * W; q++) place(w, order[q], best);
  }
  if (K > 1) level_step_tokens(w, order, group_step, n_groups, W);
  free(group_step);
  free(order);
  free(groups_in);
  return AL_OK;
}

/* Every step holds a micro-batch of samples: one of padding only would train nothing (and is no
 * manifest's step). Padding repeats, the cheapest batches, can fill a step's groups when a window
 * draws few batches for its slots; such a step trades one of them for the real batch of fewest
 * tokens of the step holding the most. AL_ERANGE when the window draws fewer real batches than
 * it has steps. */
static int give_every_step_samples(window_plan *w) {
  uint32_t *real = calloc(w->n_steps, sizeof *real);
  if (!real) return al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t total = 0;
  for (size_t i = 0; i < w->p.n_micro; i++)
    if (!w->p.micro[i].padded) real[w->step_of[i]]++, total++;
  int rc = AL_OK;
  if (total < w->n_steps)
    rc = al_set_error(AL_ERANGE,
                      "steps %u..%u draw %zu micro-batches of samples for %u steps: every step "
                      "needs one (raise --step-tokens, or lower --micro-per-step or the window)",
                      w->s0, w->s0 + w->n_steps - 1, total, w->n_steps);
  for (uint32_t s = 0; s < w->n_steps && !rc; s++) {
    if (real[s]) continue;
    uint32_t from = 0;
    for (uint32_t q = 1; q < w->n_steps; q++)
      if (real[q] > real[from]) from = q;
    size_t give = SIZE_MAX, take = SIZE_MAX;
    for (size_t i = 0; i < w->p.n_micro; i++) {
      const plan_micro *mi = &w->p.micro[i];
      if (w->step_of[i] == from && !mi->padded &&
          (give == SIZE_MAX ||
           micro_tokens_of(&w->p, mi) < micro_tokens_of(&w->p, &w->p.micro[give])))
        give = i;
      if (w->step_of[i] == s && take == SIZE_MAX) take = i;
    }
    if (give == SIZE_MAX || take == SIZE_MAX) break; /* cannot happen: total >= steps */
    move_to(w, give, s);
    move_to(w, take, from);
    real[s]++, real[from]--;
  }
  free(real);
  return rc;
}

/* Every batch of the window into one of its steps, at most W_ref x K_ref a step. */
static int compose(const al_run *r, window_plan *w) {
  const al_plan *t = r->tmpl;
  if (t->policy == AL_POLICY_ADAPTIVE) {
    int rc = compose_groups(r, w);
    return rc ? rc : give_every_step_samples(w);
  }
  size_t m = w->p.n_micro;
  uint32_t cap = t->world * t->micro_per_step;
  uint32_t *order = malloc((m ? m : 1) * sizeof *order);
  if (!order) return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i < m; i++) order[i] = (uint32_t)i;
  /* The baselines: each batch, in batch order, to the step with the most quota left. */
  compose_lpt(w, order, m, cap);
  free(order);
  give_empty_steps(w);
  for (uint32_t s = 0; s < w->n_steps; s++)
    if (w->slots[s] > cap)
      return al_set_error(AL_ERANGE,
                          "step %u holds %u batches, above W x K = %u: the step tokens %llu do not "
                          "fit this window's batches (lower --step-tokens or raise "
                          "--micro-per-step)",
                          w->s0 + s, w->slots[s], cap, (unsigned long long)t->step_tokens);
  return AL_OK;
}

static int cmp_u32_asc(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Split candidates first: most samples, then later batches (the epoch planner's order). */
static int cmp_split(const void *a, const void *b, void *ctx) {
  const plan_micro *mi = ctx;
  const plan_micro *x = &mi[*(const uint32_t *)a], *y = &mi[*(const uint32_t *)b];
  if (x->n != y->n) return x->n > y->n ? -1 : 1;
  return (x->seq < y->seq) - (x->seq > y->seq);
}

/* Step s's batches split in halves, in rounds (each round splits the `need` best candidates)
 * until it holds `per` of them; padding (one-sample repeats of its first batch's first sample)
 * when only one-sample batches are left. */
static int fill_step(window_plan *w, uint32_t s, uint32_t per) {
  al_plan *p = &w->p;
  uint32_t *mine = malloc((size_t)per * sizeof *mine);
  if (!mine) return al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t n = 0;
  for (size_t i = 0; i < p->n_micro && n < per; i++)
    if (w->step_of[i] == s) mine[n++] = (uint32_t)i;
  int rc = n ? AL_OK : al_set_error(AL_ERANGE, "plan: step %u drew no sample", w->s0 + s);
  while (!rc && n < per) {
    qsort_r(mine, n, sizeof *mine, cmp_split, p->micro);
    size_t need = per - n, split = 0;
    while (split < need && split < n && p->micro[mine[split]].n >= 2) split++;
    if (!split) break;
    for (size_t q = 0; q < split && !rc; q++) {
      rc = grow_step_of(w);
      if (!rc) rc = plan_split_micro(p, mine[q]);
      if (!rc) {
        w->step_of[p->n_micro - 1] = s;
        mine[n++] = (uint32_t)(p->n_micro - 1);
      }
    }
  }
  uint64_t like = n ? p->micro[mine[0]].first : 0;
  uint32_t bucket = n ? p->micro[mine[0]].bucket : 0;
  uint32_t sample = n ? p->mb[like] : 0;
  while (!rc && n < per) {
    rc = grow_step_of(w);
    if (!rc)
      rc = grow_array((void **)&p->mb, &p->cap_mb, p->n_mb + 1, sizeof *p->mb, "plan samples");
    if (!rc) {
      p->mb[p->n_mb++] = sample;
      rc = plan_push_micro(p, p->n_mb - 1, 1, bucket, 1);
    }
    if (!rc) {
      w->step_of[p->n_micro - 1] = s;
      n++;
    }
  }
  w->slots[s] = (uint32_t)n;
  free(mine);
  return rc;
}

/* The window's micro-batches regrouped step-major (steps in window order; the step's
 * batches in batch order) with slots of K; then each step laid out as the epoch planner lays out
 * a one-step window. */
static int lay_out(const al_run *r, window_plan *w) {
  al_plan *p = &w->p;
  size_t per = (size_t)p->world * p->micro_per_step, n = (size_t)w->n_steps * per;
  plan_micro *out = grow_big_block(n ? n : 1, sizeof *out);
  uint64_t *slot = grow_big_block((size_t)w->n_steps * p->world + 1, sizeof *slot);
  size_t *at = calloc(w->n_steps ? w->n_steps : 1, sizeof *at);
  if (!out || !slot || !at) {
    free(out), free(slot), free(at);
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  for (size_t i = 0; i < p->n_micro; i++) {
    uint32_t s = w->step_of[i];
    out[(size_t)s * per + at[s]++] = p->micro[i];
  }
  free(at);
  for (size_t i = 0; i <= (size_t)w->n_steps * p->world; i++)
    slot[i] = (uint64_t)i * p->micro_per_step;
  free(p->micro);
  p->micro = out;
  p->n_micro = p->cap_micro = n;
  p->slot = slot;
  p->steps = w->n_steps;
  plan_rng rng;
  plan_rng_seed(&rng, r->tmpl->seed, r->tmpl->epoch, ~((uint64_t)w->s0 << 32));
  int rc = AL_OK;
  for (uint32_t s = 0; s < w->n_steps && !rc; s++)
    rc = p->sync == AL_SYNC_MICRO ? plan_relayout_slots(p, s, &rng)
                                  : plan_relayout_bins(p, s, &rng);
  return rc;
}

/* K = 1 with the adaptive policy: steps of neighbours by cost are composed in cost order, so
 * their order inside the window is shuffled (the heavy steps are not always first). A mixture's
 * steps are put in the order that keeps every source's running share of the window nearest its
 * weight (run_mix_order_steps): composition fills steps by cost, the sources differ in cost, so
 * a step may hold more of one source than another; ordered so, any stretch of steps holds each
 * source's share within a step's spread. */
static int shuffle_steps(const al_run *r, window_plan *w) {
  const al_plan *t = r->tmpl;
  int cost_order = t->policy == AL_POLICY_ADAPTIVE && t->micro_per_step == 1;
  if ((!cost_order && !r->mix) || w->n_steps < 2) return AL_OK;
  uint32_t *to = malloc(w->n_steps * sizeof *to);
  if (!to) return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (uint32_t s = 0; s < w->n_steps; s++) to[s] = s;
  if (r->mix) {
    int rc = run_mix_order_steps(r, &w->p, w->step_of, w->n_steps, to);
    if (rc) {
      free(to);
      return rc;
    }
  } else {
    plan_rng rng;
    plan_rng_seed(&rng, t->seed, t->epoch, ((uint64_t)w->s0 << 32) | 1);
    plan_shuffle_u32(&rng, to, w->n_steps);
  }
  for (size_t i = 0; i < w->p.n_micro; i++) w->step_of[i] = to[w->step_of[i]];
  free(to);
  return AL_OK;
}

/* Plans the window of steps [s0, s0 + n_steps) at `world`, into w. */
static int plan_window(const al_run *r, uint32_t world, uint32_t s0, uint32_t n_steps,
                       window_plan *w) {
  const al_plan *t = r->tmpl;
  memset(w, 0, sizeof *w);
  w->p = *t;
  w->p.mb = NULL, w->p.micro = NULL, w->p.slot = NULL, w->p.status = NULL;
  w->p.n_mb = w->p.cap_mb = w->p.n_micro = w->p.cap_micro = 0;
  w->p.world = world;
  uint64_t k = ((uint64_t)t->micro_per_step * t->world + world - 1) / world;
  w->p.micro_per_step = (uint32_t)k;
  w->s0 = s0, w->n_steps = n_steps;
  w->quota = calloc(n_steps + 1, sizeof *w->quota);
  w->tokens = calloc(n_steps, sizeof *w->tokens);
  w->slots = calloc(n_steps, sizeof *w->slots);
  w->load = calloc(n_steps, sizeof *w->load);
  if (!w->quota || !w->tokens || !w->slots || !w->load)
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  uint64_t *items = NULL;
  size_t n = 0;
  int rc = draw_window(r, w, &items, &n);
  if (!rc) rc = plan_form_batches(&w->p, items, n);
  free(items);
  if (!rc)
    rc = grow_array((void **)&w->step_of, &w->cap_step_of, w->p.n_micro + 1, sizeof *w->step_of,
                    "plan micro-batches");
  if (rc) return rc;
  set_quotas(r, w);
  rc = compose(r, w);
  if (!rc) rc = shuffle_steps(r, w);
  for (uint32_t s = 0; s < n_steps && !rc; s++) rc = fill_step(w, s, world * w->p.micro_per_step);
  if (!rc) rc = lay_out(r, w);
  return rc;
}

/* ---- steps [first, end) ---- */

/* Appends steps [a, b) of the window (local numbers) to out: micro-batches, their samples
 * (re-based) and slots. */
static int append_steps(al_plan *out, const window_plan *w, uint32_t a, uint32_t b) {
  const al_plan *p = &w->p;
  size_t W = p->world;
  uint64_t m0 = p->slot[(size_t)a * W], m1 = p->slot[(size_t)b * W];
  size_t samples = 0;
  for (uint64_t x = m0; x < m1; x++) samples += p->micro[x].n;
  int rc = grow_array((void **)&out->micro, &out->cap_micro, out->n_micro + (m1 - m0),
                      sizeof *out->micro, "plan micro-batches");
  if (!rc)
    rc = grow_array((void **)&out->mb, &out->cap_mb, out->n_mb + samples, sizeof *out->mb,
                    "plan samples");
  if (rc) return rc;
  uint64_t base = out->n_micro;
  for (uint64_t x = m0; x < m1; x++) {
    plan_micro m = p->micro[x];
    memcpy(out->mb + out->n_mb, p->mb + m.first, (size_t)m.n * sizeof *out->mb);
    m.first = out->n_mb;
    out->n_mb += m.n;
    m.seq = (uint32_t)out->n_micro;
    out->micro[out->n_micro++] = m;
  }
  for (size_t i = (size_t)a * W + 1; i <= (size_t)b * W; i++)
    out->slot[(size_t)out->steps * W + (i - (size_t)a * W)] = base + (p->slot[i] - m0);
  out->steps += b - a;
  return AL_OK;
}

/* The output plan: the run's configuration at `world`, no steps yet. */
static int start_output(const al_run *r, uint32_t world, uint32_t first, uint32_t end,
                        al_plan **out) {
  const al_plan *t = r->tmpl;
  al_plan *p = plan_alloc();
  if (!p) return al_set_error(AL_ENOMEM, "plan: out of memory");
  uint8_t *status = NULL;
  plan_bucket *buckets = malloc((t->n_buckets ? t->n_buckets : 1) * sizeof *buckets);
  int full = first == 0 && end == r->steps;
  /* Only a full pass has the pass's key table; a slice lists its own samples when saved. */
  if (full) status = malloc(t->index_samples ? t->index_samples : 1);
  p->slot = grow_big_block((size_t)(end - first) * world + 1, sizeof *p->slot);
  if (!buckets || !p->slot || (full && !status)) {
    free(buckets), free(status);
    al_plan_free(p);
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  uint64_t *slot = p->slot;
  *p = *t;
  p->buckets = memcpy(buckets, t->buckets, t->n_buckets * sizeof *buckets);
  /* A full pass's key table: from a map, the rejected classes' samples by their reasons. */
  if (!full) {
    p->status = NULL;
  } else if (r->mix) {
    p->status = status;
    run_mix_fill_status(r, status);
  } else if (t->status) {
    p->status = memcpy(status, t->status, t->index_samples);
  } else {
    p->status = memset(status, AL_KEY_PLANNED, t->index_samples);
    for (size_t c = 0; c < r->n_rejected; c++)
      for (uint64_t k = 0; k < r->rejected[c].n; k++)
        status[r->rejected[c].list[k]] = (uint8_t)r->rejected[c].reason;
  }
  p->mb = NULL, p->micro = NULL, p->n_mb = p->cap_mb = p->n_micro = p->cap_micro = 0;
  p->slot = slot;
  p->slot[0] = 0;
  p->steps = 0;
  p->world = world;
  p->micro_per_step = (uint32_t)(((uint64_t)t->micro_per_step * t->world + world - 1) / world);
  p->micro_tokens = p->mem_tokens; /* the memory term of the capacity batch sizes */
  p->first_step = first;
  if (r->mix) {
    int rc = run_mix_plan_sources(r, p);
    if (rc) {
      al_plan_free(p);
      return rc;
    }
  }
  *out = p;
  return AL_OK;
}

int al_run_plan_steps(const al_run *r, uint32_t world, uint32_t first, uint32_t end,
                      al_plan **out) {
  if (!r || !out) return al_set_error(AL_EINVAL, "al_run_plan_steps: NULL argument");
  *out = NULL;
  if (world < 1 || world > (1u << 20))
    return al_set_error(AL_ERANGE, "world %u: must be 1..%u", world, 1u << 20);
  uint64_t k = ((uint64_t)r->tmpl->micro_per_step * r->tmpl->world + world - 1) / world;
  if (k * world > AL_PLAN_MAX_STEP_MICRO)
    return al_set_error(AL_ERANGE,
                        "world %u x micro-per-step %llu = %llu micro-batches per step, above the "
                        "planner's maximum %u",
                        world, (unsigned long long)k, (unsigned long long)(k * world),
                        AL_PLAN_MAX_STEP_MICRO);
  if (first >= end || end > r->steps)
    return al_set_error(AL_ERANGE,
                        "steps %u:%u: a run of %u steps plans [A, B) with 0 <= A < B <= %u", first,
                        end, r->steps, r->steps);
  al_plan *p = NULL;
  int rc = start_output(r, world, first, end, &p);
  for (uint32_t s0 = window_start(r, first); s0 < end && !rc; s0 = window_end(r, s0)) {
    uint32_t n = window_end(r, s0) - s0;
    window_plan w;
    rc = plan_window(r, world, s0, n, &w);
    uint32_t a = first > s0 ? first - s0 : 0, b = end - s0 < n ? end - s0 : n;
    if (!rc) rc = append_steps(p, &w, a, b);
    window_free(&w);
  }
  if (rc) {
    al_plan_free(p);
    return rc;
  }
  for (size_t x = 0; x < p->n_micro && p->status; x++)
    if (!p->micro[x].padded)
      for (uint32_t k = 0; k < p->micro[x].n; k++)
        p->status[p->mb[p->micro[x].first + k]] = AL_KEY_PLANNED;
  plan_stats(p);
  *out = p;
  return AL_OK;
}
