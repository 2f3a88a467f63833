/* run_mix.c - a mixture of sources planned as one run (al_run.h, "mixtures").
 *
 * The sources' inputs are concatenated (source i holds positions [off_i, off_i + n_i)) and
 * classified as one input, so every source shares the options' one bucket table. A stratum is
 * (source, bucket): the part of each of the bucket's classes that lies in the source's range
 * (class lists are in position order, so each part is a contiguous piece of the list).
 *
 * Progress: source i's progress f_i(s) at the end of step s is a count of passes in units of
 * 2^-48, piecewise linear in s: a segment is a stretch of steps with one set of active sources
 * and constant rates R_i (passes a step). At a rate set, with weights w_i normalised over the
 * active sources and u(b) a sample's unit (tokens, 1 or predicted ms), source i's pass of Q_i
 * units and P_i tokens, a step of T tokens holds U units in all, U = T / sum_i w_i P_i / Q_i,
 * source i's share w_i U of them: R_i = w_i U / Q_i. A stop source's progress is capped at one
 * pass, the until source's at its passes; a segment ends where one of them reaches its cap
 * (rounded up to a step), or at the run's length.
 *
 * Draws: by progress F, stratum (i, b) of n samples has given, in pass q = floor(F), all of
 * passes 0..q-1 and run_cum(n, frac(F), phi_iqb) of pass q, where pass q visits the stratum in
 * the keyed order perm_iqb; so every pass draws each of its samples exactly once whatever the
 * windows, and a window's draws depend on the arithmetic alone. Source 0's pass 0 is keyed as a
 * run's one input is, so a one-source mixture's first pass is that run's draw order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "planner/al_run.h"
#include "planner/plan_internal.h"
#include "planner/run_draw_internal.h"
#include "planner/run_internal.h"

#define MIX_DEFAULT_T_SHARE 0.85
#define MIX_MAX_T_SHARE 0.97
#define F_INF UINT64_MAX

typedef struct mix_source {
  char name[AL_RUN_NAME_MAX + 1];
  uint64_t off, n; /* its positions in the concatenated input */
  double weight;   /* as given */
  al_exhaust exhaust;
  uint64_t index_fingerprint;
  uint64_t pass_samples, pass_tokens;
  double pass_units;
  uint64_t cap;    /* progress cap: one pass (stop), the until passes, or F_INF */
  uint32_t passes; /* passes the run reaches */
  uint32_t stop_step;
  uint64_t draw_base;
  uint64_t drawn, drawn_tokens;
  double drawn_ms;
} mix_source;

/* A piece of a class list: the part of one class in one source's range. */
typedef struct mix_piece {
  const uint32_t *list;
  uint64_t n, cum; /* cum: the stratum's samples before it */
} mix_piece;

struct run_mix {
  al_mix_by by;
  uint32_t n_src;
  mix_source *src;
  size_t nb;
  mix_piece *piece;
  uint64_t *strat_first; /* n_src x nb + 1: stratum (i, b) = i nb + b owns these pieces */
  uint64_t *strat_n;     /* its samples */
  uint32_t steps_opt, until, until_passes;
  /* Segments: seg_start[k] its first step; seg_f0 / seg_rate [k n_src + i]. */
  uint32_t n_seg;
  uint32_t *seg_start;
  uint64_t *seg_f0, *seg_rate;
  double *weight_n; /* the weights normalised over all sources */
  uint64_t input_samples, draw_ids;
  /* Stages: stage k holds from step stage_from[k] (stage 0 from step 0) with weights
   * stage_w[k n_src + i], normalised over all sources (stage 0: weight_n, unless a stage from
   * step 0 replaced them); seg_stage[k] is segment k's stage. */
  uint32_t n_stage;
  uint32_t *stage_from;
  double *stage_w;
  uint32_t *stage_ramp; /* as given: stage k's weights ramp in over this many steps (0: none);
                           expanded into stages of a window each once the window is known */
  uint32_t *seg_stage;
  int staged; /* stages were given */
  /* A changed schedule (al_run_mix.continues): the run continued, borrowed; its segments before
   * step cont_step (a window boundary of it) are this run's, its first n_cont sources this run's
   * first. NULL: a run of its own from step 0. */
  const al_run *cont;
  uint32_t cont_step, n_cont;
  uint64_t cont_fingerprint;
};

void run_mix_free(run_mix *m) {
  if (!m) return;
  free(m->src);
  free(m->piece);
  free(m->strat_first);
  free(m->strat_n);
  free(m->seg_start);
  free(m->seg_f0);
  free(m->seg_rate);
  free(m->weight_n);
  free(m->stage_from);
  free(m->stage_w);
  free(m->stage_ramp);
  free(m->seg_stage);
  free(m);
}

/* ---- progress ---- */

static uint64_t f_at(const run_mix *m, uint32_t i, uint64_t s) {
  uint32_t k = 0;
  while (k + 1 < m->n_seg && m->seg_start[k + 1] <= s) k++;
  uint64_t f0 = m->seg_f0[(size_t)k * m->n_src + i], rate = m->seg_rate[(size_t)k * m->n_src + i];
  uint64_t d = s - m->seg_start[k];
  uint64_t cap = m->src[i].cap;
  if (rate && d > (cap - f0) / rate) return cap;
  return f0 + d * rate;
}

void run_mix_segment(const al_run *r, uint32_t step, uint32_t *a, uint32_t *b) {
  const run_mix *m = r->mix;
  uint32_t k = 0;
  while (k + 1 < m->n_seg && m->seg_start[k + 1] <= step) k++;
  *a = m->seg_start[k];
  *b = k + 1 < m->n_seg ? m->seg_start[k + 1] : r->steps;
}

static uint64_t source_progress(const al_run *r, uint32_t i, uint64_t s) {
  return f_at(r->mix, i, s > r->steps ? r->steps : s);
}

/* Sample j of stratum st. */
static uint32_t stratum_sample(const run_mix *m, size_t st, uint64_t j) {
  uint64_t lo = m->strat_first[st], hi = m->strat_first[st + 1];
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (m->piece[mid].cum <= j)
      lo = mid;
    else
      hi = mid;
  }
  return m->piece[lo].list[j - m->piece[lo].cum];
}

/* The stretch [lo, hi) of pass q that progress [F0, F1) covers, as fractions of a pass. */
static int pass_stretch(uint64_t F0, uint64_t F1, uint64_t q, uint64_t *lo, uint64_t *hi) {
  uint64_t a = q << RUN_F_BITS, b = (q + 1) << RUN_F_BITS;
  if (F1 <= a || F0 >= b) return 0;
  *lo = F0 > a ? F0 - a : 0;
  *hi = F1 < b ? F1 - a : RUN_F_ONE;
  return *hi > *lo;
}

/* What stratum (i, b) of n samples gives over progress [F0, F1): pass by pass, its keyed order
 * and dither; each draw passed to `visit` (NULL: only counted). */
typedef void (*draw_visit)(void *ctx, uint32_t bucket, uint64_t id);

static uint64_t stratum_draws(const al_run *r, uint32_t i, size_t b, uint64_t F0, uint64_t F1,
                              draw_visit visit, void *ctx) {
  const run_mix *m = r->mix;
  const al_plan *t = r->tmpl;
  size_t st = (size_t)i * m->nb + b;
  uint64_t n = m->strat_n[st], got = 0;
  if (!n || F1 <= F0) return 0;
  const mix_source *src = &m->src[i];
  for (uint64_t q = F0 >> RUN_F_BITS; q <= (F1 - 1) >> RUN_F_BITS; q++) {
    uint64_t lo, hi;
    if (!pass_stretch(F0, F1, q, &lo, &hi)) continue;
    uint64_t phi = run_dither(run_key(t->seed, t->epoch, i, (uint32_t)q, b, RUN_KEY_DITHER));
    uint64_t j0 = run_cum(n, lo, phi), j1 = run_cum(n, hi, phi);
    got += j1 - j0;
    if (!visit || j1 == j0) continue;
    run_perm perm;
    run_perm_init(&perm, n, run_key(t->seed, t->epoch, i, (uint32_t)q, b, RUN_KEY_PERM));
    for (uint64_t j = j0; j < j1; j++) {
      uint64_t pos = stratum_sample(m, st, run_perm_at(&perm, j));
      visit(ctx, (uint32_t)b, src->draw_base + q * src->n + (pos - src->off));
    }
  }
  return got;
}

typedef struct draw_buf {
  uint64_t *items;
  size_t n;
} draw_buf;

static void draw_push(void *ctx, uint32_t bucket, uint64_t id) {
  draw_buf *d = ctx;
  d->items[d->n++] = (uint64_t)bucket << 32 | id;
}

int run_mix_draw(const al_run *r, uint32_t s0, uint32_t s1, uint64_t **items, size_t *n_out) {
  const run_mix *m = r->mix;
  size_t n = 0;
  for (uint32_t i = 0; i < m->n_src; i++) {
    uint64_t F0 = source_progress(r, i, s0), F1 = source_progress(r, i, s1);
    for (size_t b = 0; b < m->nb; b++) n += stratum_draws(r, i, b, F0, F1, NULL, NULL);
  }
  draw_buf d = {malloc((n ? n : 1) * sizeof *d.items), 0};
  if (!d.items)
    return al_set_error(AL_ENOMEM, "plan: out of memory for a window of %zu samples", n);
  for (uint32_t i = 0; i < m->n_src; i++) {
    uint64_t F0 = source_progress(r, i, s0), F1 = source_progress(r, i, s1);
    for (size_t b = 0; b < m->nb; b++) stratum_draws(r, i, b, F0, F1, draw_push, &d);
  }
  *items = d.items;
  *n_out = d.n;
  return AL_OK;
}

uint64_t run_mix_expected_tokens(const al_run *r, uint64_t s) {
  const run_mix *m = r->mix;
  uint64_t t = 0;
  for (uint32_t i = 0; i < m->n_src; i++)
    t += (uint64_t)(((unsigned __int128)m->src[i].pass_tokens * source_progress(r, i, s)) >>
                    RUN_F_BITS);
  return t;
}

/* ---- the strata ---- */

static uint64_t lower_bound(const uint32_t *a, uint64_t n, uint64_t v) {
  uint64_t lo = 0, hi = n;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (a[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int build_strata(al_run *r) {
  run_mix *m = r->mix;
  const al_plan *p = r->tmpl;
  m->nb = p->n_buckets;
  size_t ns = (size_t)m->n_src * m->nb;
  m->strat_first = calloc(ns + 1, sizeof *m->strat_first);
  m->strat_n = calloc(ns ? ns : 1, sizeof *m->strat_n);
  m->piece = calloc(r->n_cls * m->n_src + 1, sizeof *m->piece);
  if (!m->strat_first || !m->strat_n || !m->piece)
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t np = 0;
  for (uint32_t i = 0; i < m->n_src; i++) {
    mix_source *s = &m->src[i];
    for (size_t b = 0; b < m->nb; b++) {
      size_t st = (size_t)i * m->nb + b;
      m->strat_first[st] = np;
      for (uint64_t c = r->cls_first[b]; c < r->cls_first[b + 1]; c++) {
        const run_class *k = &r->cls[c];
        uint64_t lo = lower_bound(k->list, k->n, s->off);
        uint64_t hi = lower_bound(k->list, k->n, s->off + s->n);
        if (hi == lo) continue;
        m->piece[np++] = (mix_piece){k->list + lo, hi - lo, m->strat_n[st]};
        m->strat_n[st] += hi - lo;
      }
      s->pass_samples += m->strat_n[st];
      s->pass_tokens += m->strat_n[st] * p->buckets[b].tokens;
    }
  }
  m->strat_first[ns] = np;
  return AL_OK;
}

/* A sample's unit in bucket b: what the weights apportion. */
static double unit_of(const al_run *r, size_t b) {
  const plan_bucket *k = &r->tmpl->buckets[b];
  switch (r->mix->by) {
    case AL_MIX_SAMPLES: return 1.0;
    case AL_MIX_COMPUTE: return k->batch_size ? k->batch_cost_ms / k->batch_size : 0;
    default: return (double)k->tokens;
  }
}

static void source_units(al_run *r) {
  run_mix *m = r->mix;
  for (uint32_t i = 0; i < m->n_src; i++) {
    double q = 0;
    for (size_t b = 0; b < m->nb; b++)
      q += (double)m->strat_n[(size_t)i * m->nb + b] * unit_of(r, b);
    m->src[i].pass_units = q;
  }
}

/* Stage k's weights. */
static const double *stage_weights(const run_mix *m, uint32_t k) {
  return m->stage_w + (size_t)k * m->n_src;
}

/* Rates (passes a step, 2^-48 units) of the active sources at T tokens a step under weights w
 * (a source of weight 0 draws nothing). */
static int rates_at(const al_run *r, const uint8_t *active, uint64_t T, const double *w,
                    uint64_t *rate) {
  const run_mix *m = r->mix;
  double wsum = 0, tok_per_unit = 0;
  for (uint32_t i = 0; i < m->n_src; i++)
    if (active[i]) wsum += w[i];
  for (uint32_t i = 0; i < m->n_src; i++)
    if (active[i] && w[i] > 0)
      tok_per_unit += w[i] / wsum * (double)m->src[i].pass_tokens / m->src[i].pass_units;
  double U = (double)T / tok_per_unit;
  for (uint32_t i = 0; i < m->n_src; i++) {
    rate[i] = 0;
    if (!active[i] || !(w[i] > 0)) continue;
    double x = ldexp(w[i] / wsum * U / m->src[i].pass_units, RUN_F_BITS);
    if (!(x >= 1) || x > ldexp(1.0, 62))
      return al_set_error(AL_ERANGE,
                          "mixture: source '%s' would give %.3g passes a step at %llu tokens a "
                          "step (its weight or its pass is out of range)",
                          m->src[i].name, ldexp(x, -RUN_F_BITS), (unsigned long long)T);
    rate[i] = (uint64_t)llround(x);
  }
  return AL_OK;
}

/* Rank-slots a step takes at T with the sources of `active` (NULL: all): stratum (i, b) draws
 * n r_i L samples a window of L steps (r_i its passes a step, w_i T / (Q_i sum_j w_j P_j / Q_j)
 * over the active j, weights normalised over them), in capacity batches with its partial batch
 * whole. Non-decreasing in T. */
static double mix_step_slots(const al_run *r, uint64_t T, const uint8_t *active, const double *w,
                             double L) {
  const run_mix *m = r->mix;
  const al_plan *p = r->tmpl;
  double tok_per_unit = 0, wsum = 0;
  for (uint32_t i = 0; i < m->n_src; i++)
    if (!active || active[i]) wsum += w[i];
  for (uint32_t i = 0; i < m->n_src; i++)
    if ((!active || active[i]) && w[i] > 0)
      tok_per_unit += w[i] / wsum * (double)m->src[i].pass_tokens / m->src[i].pass_units;
  double slots = 0;
  for (uint32_t i = 0; i < m->n_src; i++) {
    if ((active && !active[i]) || !(w[i] > 0)) continue;
    double ri = w[i] / wsum * (double)T / tok_per_unit / m->src[i].pass_units;
    for (size_t b = 0; b < m->nb; b++) {
      const plan_bucket *k = &p->buckets[b];
      uint64_t n = m->strat_n[(size_t)i * m->nb + b];
      if (n) slots += ceil((double)n * ri * L / k->batch_size) * (k->sp_degree ? k->sp_degree : 1);
    }
  }
  return slots / L;
}

static uint64_t mix_tokens_at_share(const al_run *r, double share, const uint8_t *active,
                                    const double *w) {
  double L = r->tmpl->window;
  const al_plan *p = r->tmpl;
  double room = share * p->world * p->micro_per_step;
  uint64_t lo = 0, hi = (uint64_t)p->world * p->micro_per_step * plan_mem_cap(p) + 1;
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (mix_step_slots(r, mid, active, w, L) <= room)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* The largest T whose steps take at most `share` of their rank-slots in every segment: the
 * sources' relative speeds do not depend on T, so stop sources (and the until source) leave in
 * the order of their pass's units over their weight, and each set of sources left is checked. */
static uint64_t mix_tokens_every_set(const al_run *r, double share, const double *w,
                                     uint8_t *active) {
  const run_mix *m = r->mix;
  for (uint32_t i = 0; i < m->n_src; i++) active[i] = w[i] > 0;
  uint64_t t = mix_tokens_at_share(r, share, active, w);
  for (;;) {
    uint32_t next = UINT32_MAX, left = 0;
    for (uint32_t i = 0; i < m->n_src; i++) {
      if (!active[i]) continue;
      left++;
      if (m->src[i].cap == F_INF) continue;
      double key = m->src[i].pass_units * ldexp((double)m->src[i].cap, -RUN_F_BITS) / w[i];
      double best = next == UINT32_MAX ? 0
                                       : m->src[next].pass_units *
                                             ldexp((double)m->src[next].cap, -RUN_F_BITS) / w[next];
      if (next == UINT32_MAX || key < best) next = i;
    }
    if (next == UINT32_MAX || left < 2 || (m->until && next == m->until - 1)) break;
    active[next] = 0;
    uint64_t ts = mix_tokens_at_share(r, share, active, w);
    if (ts < t) t = ts;
  }
  return t;
}

static int resolve_mix_tokens(al_run *r, uint64_t t_opt) {
  al_plan *p = r->tmpl;
  uint8_t *active = malloc(r->mix->n_src);
  if (!active) return al_set_error(AL_ENOMEM, "plan: out of memory");
  const run_mix *m = r->mix;
  r->capacity = mix_tokens_at_share(r, 1.0, NULL, m->weight_n);
  /* Every stage's weights: the least T that fits them all. */
  uint64_t most = UINT64_MAX, t = t_opt;
  for (uint32_t k = 0; k < m->n_stage; k++) {
    uint64_t a = mix_tokens_every_set(r, MIX_MAX_T_SHARE, stage_weights(m, k), active);
    if (a < most) most = a;
    if (!t_opt) {
      uint64_t d = mix_tokens_every_set(r, MIX_DEFAULT_T_SHARE, stage_weights(m, k), active);
      if (!k || d < t) t = d;
    }
  }
  free(active);
  if (!most)
    return al_set_error(AL_ERANGE,
                        "mixture: a window of %u steps has %u x %u rank-slots a step, fewer than "
                        "the sources' buckets need for one batch each: raise --window or "
                        "--micro-per-step",
                        p->window, p->world, p->micro_per_step);
  if (t > most)
    return al_set_error(AL_ERANGE,
                        "step-tokens %llu: at most %llu tokens a step fit %u x %u micro-batches of "
                        "this mixture (%.0f %% of the rank-slots of a window of %u steps, with "
                        "every set of sources it runs with): lower --step-tokens or raise "
                        "--micro-per-step",
                        (unsigned long long)t, (unsigned long long)most, p->world,
                        p->micro_per_step, MIX_MAX_T_SHARE * 100, p->window);
  int rc = run_check_step_tokens(p, t);
  if (rc) return rc;
  p->step_tokens = t ? t : 1;
  return AL_OK;
}

/* ---- segments and length ---- */

static uint64_t steps_to(uint64_t from, uint64_t to, uint64_t rate) {
  return to <= from ? 0 : (to - from + rate - 1) / rate;
}

static int push_segment(run_mix *m, uint32_t start, uint32_t stage, const uint64_t *f,
                        const uint64_t *rate) {
  size_t k = m->n_seg, ns = m->n_src;
  uint32_t *st = realloc(m->seg_start, (k + 1) * sizeof *st);
  if (st) m->seg_start = st;
  uint32_t *sg = st ? realloc(m->seg_stage, (k + 1) * sizeof *sg) : NULL;
  if (sg) m->seg_stage = sg;
  uint64_t *f0 = sg ? realloc(m->seg_f0, (k + 1) * ns * sizeof *f0) : NULL;
  if (f0) m->seg_f0 = f0;
  uint64_t *rt = f0 ? realloc(m->seg_rate, (k + 1) * ns * sizeof *rt) : NULL;
  if (!rt) return al_set_error(AL_ENOMEM, "plan: out of memory");
  m->seg_rate = rt;
  m->seg_start[k] = start;
  m->seg_stage[k] = stage;
  memcpy(m->seg_f0 + k * ns, f, ns * sizeof *f);
  memcpy(m->seg_rate + k * ns, rate, ns * sizeof *rate);
  m->n_seg++;
  return AL_OK;
}

/* A changed schedule's steps before it takes effect: the continued run's segments up to
 * cont_step (its sources' rates, 0 for the sources added), then every source's progress there
 * (f) and whether it still draws (active; a source that left keeps the step it left at). */
static int copy_prefix(al_run *r, uint8_t *active, uint64_t *f) {
  run_mix *m = r->mix;
  const run_mix *o = m->cont->mix;
  size_t ns = m->n_src, no = o->n_src;
  uint64_t *f0 = calloc(ns, sizeof *f0), *rate = calloc(ns, sizeof *rate);
  int rc = f0 && rate ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory");
  for (uint32_t k = 0; !rc && k < o->n_seg && o->seg_start[k] < m->cont_step; k++) {
    memcpy(f0, o->seg_f0 + (size_t)k * no, no * sizeof *f0);
    memcpy(rate, o->seg_rate + (size_t)k * no, no * sizeof *rate);
    rc = push_segment(m, o->seg_start[k], 0, f0, rate);
  }
  for (size_t i = 0; !rc && i < ns; i++) {
    f[i] = i < no ? source_progress(m->cont, (uint32_t)i, m->cont_step) : 0;
    if (m->src[i].cap != F_INF && f[i] >= m->src[i].cap) {
      active[i] = 0;
      m->src[i].stop_step = o->src[i].stop_step;
    }
  }
  free(f0);
  free(rate);
  return rc;
}

/* The segments from step 0 to the run's end: rates over the active sources under the stage's
 * weights; a segment ends at the first cap reached (a stop source's pass, the until source's
 * passes), the next stage or the length. A stage's sources of weight 0 draw nothing in it and
 * go on with their pass where they stood in the next stage that weighs them. */
static int plan_segments(al_run *r, uint64_t T) {
  run_mix *m = r->mix;
  size_t ns = m->n_src;
  uint8_t *active = malloc(ns);
  uint64_t *f = calloc(ns, sizeof *f), *rate = calloc(ns, sizeof *rate);
  int rc = active && f && rate ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i < ns && !rc; i++) {
    active[i] = 1;
    m->src[i].stop_step = 0;
  }
  uint64_t s = 0;
  if (!rc && m->cont) {
    rc = copy_prefix(r, active, f);
    s = m->cont_step;
  }
  uint32_t u = m->until ? m->until - 1 : UINT32_MAX, stage = 0;
  if (!rc && m->cont && (m->steps_opt && m->steps_opt <= s))
    rc = al_set_error(AL_EINVAL,
                      "mixture: the changed schedule ends at step %u, before it takes effect at "
                      "step %llu",
                      m->steps_opt, (unsigned long long)s);
  if (!rc && u != UINT32_MAX && f[u] >= m->src[u].cap)
    rc = al_set_error(AL_EINVAL,
                      "mixture: source '%s' has given its %u passes (until) before the change "
                      "takes effect at step %llu",
                      m->src[u].name, m->until_passes, (unsigned long long)s);
  while (!rc) {
    while (stage + 1 < m->n_stage && m->stage_from[stage + 1] <= s) stage++;
    const double *w = stage_weights(m, stage);
    int drawing = 0;
    for (size_t i = 0; i < ns; i++) drawing |= active[i] && w[i] > 0;
    if (!drawing) {
      rc = al_set_error(AL_EINVAL,
                        "mixture: stage %u (from step %u) gives weight 0 to every source still "
                        "drawing",
                        stage, m->stage_from[stage]);
      break;
    }
    rc = rates_at(r, active, T, w, rate);
    if (rc) break;
    uint64_t end = m->steps_opt ? m->steps_opt : UINT64_MAX;
    if (stage + 1 < m->n_stage && m->stage_from[stage + 1] < end) end = m->stage_from[stage + 1];
    for (size_t i = 0; i < ns; i++)
      if (active[i] && rate[i] && m->src[i].cap != F_INF) {
        uint64_t k = s + steps_to(f[i], m->src[i].cap, rate[i]);
        if (k < end) end = k;
      }
    if (end == UINT64_MAX) {
      rc = al_set_error(AL_EINVAL,
                        "mixture: the run never ends (every source left repeats): give its steps "
                        "or the source whose passes end it (until)");
      break;
    }
    if (end > UINT32_MAX) {
      rc = al_set_error(AL_ERANGE, "mixture: the run would take %llu steps, above 2^32 - 1",
                        (unsigned long long)end);
      break;
    }
    if (end == s) break; /* nothing left to draw */
    rc = push_segment(m, (uint32_t)s, stage, f, rate);
    if (rc) break;
    int left = 0;
    for (size_t i = 0; i < ns; i++) {
      if (!active[i]) continue;
      uint64_t c = m->src[i].cap, d = end - s;
      f[i] = rate[i] && d > (c - f[i]) / rate[i] ? c : f[i] + d * rate[i];
      if (c != F_INF && f[i] >= c) {
        active[i] = 0;
        m->src[i].stop_step = (uint32_t)end;
      }
      left += active[i];
    }
    s = end;
    if (s == m->steps_opt || (u != UINT32_MAX && f[u] >= m->src[u].cap) || !left) break;
  }
  if (!rc && !m->n_seg) rc = al_set_error(AL_EINVAL, "mixture: the run has no step");
  if (!rc) {
    r->steps = (uint32_t)s;
    for (size_t i = 0; i < ns; i++)
      if (!m->src[i].stop_step || m->src[i].stop_step > r->steps) m->src[i].stop_step = r->steps;
  }
  free(active);
  free(f);
  free(rate);
  return rc;
}

/* The largest share of its rank-slots a segment's steps are expected to fill (its sources, its
 * rates at T, windows of at most its length). */
static double segments_fill(const al_run *r) {
  const run_mix *m = r->mix;
  const al_plan *p = r->tmpl;
  uint8_t active[AL_RUN_MAX_SOURCES];
  double worst = 0;
  for (uint32_t k = 0; k < m->n_seg; k++) {
    uint32_t a = m->seg_start[k], b = k + 1 < m->n_seg ? m->seg_start[k + 1] : r->steps;
    if (m->cont && a < m->cont_step) continue; /* the continued run's, checked with it */
    for (uint32_t i = 0; i < m->n_src; i++) active[i] = m->seg_rate[(size_t)k * m->n_src + i] != 0;
    double L = b - a < p->window ? b - a : p->window;
    double f = mix_step_slots(r, p->step_tokens, active, stage_weights(m, m->seg_stage[k]), L) /
               ((double)p->world * p->micro_per_step);
    if (f > worst) worst = f;
  }
  return worst;
}

/* The source holding concatenated position pos, from the source *i of the position before (the
 * rejected classes' lists ascend within a class), moved to it. */
static const mix_source *source_at(const run_mix *m, uint64_t pos, uint32_t *i) {
  while (*i > 0 && pos < m->src[*i].off) (*i)--;
  while (*i + 1 < m->n_src && pos >= m->src[*i].off + m->src[*i].n) (*i)++;
  return &m->src[*i];
}

/* Passes reached, draw ids, what the run draws of every source and bucket, and the template's
 * counts in draw ids (bucket samples, rejected per pass). */
static int number_draws(al_run *r) {
  run_mix *m = r->mix;
  al_plan *p = r->tmpl;
  uint64_t base = 0;
  for (uint32_t i = 0; i < m->n_src; i++) {
    mix_source *s = &m->src[i];
    uint64_t F = source_progress(r, i, r->steps);
    if (F > UINT64_MAX - RUN_F_ONE)
      return al_set_error(AL_ERANGE, "mixture: source '%s' would repeat 2^16 times or more",
                          s->name);
    s->passes = (uint32_t)((F + RUN_F_ONE - 1) >> RUN_F_BITS);
    s->draw_base = base;
    base += (uint64_t)s->passes * s->n;
    if (base > UINT32_MAX)
      return al_set_error(AL_ERANGE,
                          "mixture: the run draws %llu sample numbers (each source's samples once "
                          "a pass) by source '%s', above 2^32 - 1: shorten the run",
                          (unsigned long long)base, s->name);
  }
  m->draw_ids = base;
  for (size_t b = 0; b < p->n_buckets; b++) p->buckets[b].samples = 0;
  for (uint32_t i = 0; i < m->n_src; i++) {
    mix_source *s = &m->src[i];
    uint64_t F = source_progress(r, i, r->steps);
    s->drawn = s->drawn_tokens = 0;
    s->drawn_ms = 0;
    for (size_t b = 0; b < m->nb; b++) {
      uint64_t d = stratum_draws(r, i, b, 0, F, NULL, NULL);
      p->buckets[b].samples += d;
      s->drawn += d;
      s->drawn_tokens += d * p->buckets[b].tokens;
      if (p->buckets[b].batch_size)
        s->drawn_ms += (double)d * p->buckets[b].batch_cost_ms / p->buckets[b].batch_size;
    }
  }
  memset(p->rejected, 0, sizeof p->rejected);
  for (int k = 0; k < AL_REJECT_COUNT; k++) p->first_rejected[k] = UINT64_MAX;
  uint32_t i = 0;
  for (size_t c = 0; c < r->n_rejected; c++) {
    const run_class *k = &r->rejected[c];
    for (uint64_t x = 0; x < k->n; x++) {
      uint64_t pos = k->list[x];
      const mix_source *s = source_at(m, pos, &i);
      uint32_t reason = k->reason;
      if (reason == AL_KEY_NO_MEMBER || !s->passes) continue;
      p->rejected[reason] += s->passes;
      p->rejected[AL_REJECT_NONE] += s->passes;
      uint64_t id = s->draw_base + (pos - s->off);
      if (id < p->first_rejected[reason]) p->first_rejected[reason] = id;
    }
  }
  p->index_samples = m->draw_ids;
  return AL_OK;
}

void run_mix_fill_status(const al_run *r, uint8_t *status) {
  const run_mix *m = r->mix;
  memset(status, AL_KEY_UNDRAWN, m->draw_ids);
  uint32_t i = 0;
  for (size_t c = 0; c < r->n_rejected; c++) {
    const run_class *k = &r->rejected[c];
    for (uint64_t x = 0; x < k->n; x++) {
      uint64_t pos = k->list[x];
      const mix_source *s = source_at(m, pos, &i);
      for (uint64_t q = 0; q < s->passes; q++)
        status[s->draw_base + q * s->n + (pos - s->off)] = (uint8_t)k->reason;
    }
  }
}

/* The default window (as a run's: AL_PLAN_DEFAULT_WINDOW, more where the strata's partial
 * batches would take more than a tenth of a window's rank-slots). */
static uint32_t mix_default_window(const al_run *r) {
  const al_plan *p = r->tmpl;
  const run_mix *m = r->mix;
  uint64_t used = 0, per = (uint64_t)p->world * p->micro_per_step, w = AL_PLAN_DEFAULT_WINDOW;
  for (size_t st = 0; st < (size_t)m->n_src * m->nb; st++) used += m->strat_n[st] != 0;
  uint64_t need = (10 * used + per - 1) / per;
  if (need > w)
    w = (need + AL_PLAN_DEFAULT_WINDOW - 1) / AL_PLAN_DEFAULT_WINDOW * AL_PLAN_DEFAULT_WINDOW;
  return w > (1u << 20) ? 1u << 20 : (uint32_t)w;
}

/* Ramps into stages: a stage whose weights ramp in over N steps becomes one stage every window
 * of [from, from + N), each at the weights of its middle step (linear between the weights in
 * effect before it, the sources' own for a first stage from step 0, and its own), then its own
 * from from + N; the run's windows each draw by one set of weights. Stages past the run's
 * steps (a ramp longer than what is left) are cut. */
typedef struct stage_list {
  size_t n, cap, ns;
  uint32_t *from;
  double *w;
} stage_list;

/* Appends a stage from step `at` with weights a + (b - a) t (b NULL: a). */
static int stage_push(stage_list *l, uint32_t at, const double *a, const double *b, double t) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    uint32_t *f = realloc(l->from, cap * sizeof *f);
    if (f) l->from = f;
    double *w = f ? realloc(l->w, cap * l->ns * sizeof *w) : NULL;
    if (!w) return al_set_error(AL_ENOMEM, "plan: out of memory");
    l->w = w;
    l->cap = cap;
  }
  l->from[l->n] = at;
  for (size_t i = 0; i < l->ns; i++) l->w[l->n * l->ns + i] = b ? a[i] + (b[i] - a[i]) * t : a[i];
  l->n++;
  return AL_OK;
}

static int expand_ramps(al_run *r) {
  run_mix *m = r->mix;
  uint32_t L = r->tmpl->window ? r->tmpl->window : 1;
  int any = 0, rc = AL_OK;
  for (uint32_t k = 0; k < m->n_stage; k++) any |= m->stage_ramp[k] != 0;
  if (!any) return AL_OK;
  stage_list l = {0, 0, m->n_src, NULL, NULL};
  uint64_t end = m->steps_opt ? m->steps_opt : UINT64_MAX;
  for (uint32_t k = 0; k < m->n_stage && !rc; k++) {
    const double *to = stage_weights(m, k), *prev = k ? stage_weights(m, k - 1) : m->weight_n;
    uint64_t f = m->stage_from[k], N = m->stage_ramp[k];
    for (uint64_t a = 0; a < N && f + a < end && !rc; a += L) {
      uint64_t b = a + L < N ? a + L : N;
      rc = stage_push(&l, (uint32_t)(f + a), prev, to, ((double)a + (double)b) / 2 / (double)N);
    }
    if (!rc && f + N < end && f + N <= UINT32_MAX)
      rc = stage_push(&l, (uint32_t)(f + N), to, NULL, 0);
  }
  if (!rc && l.n > AL_RUN_MAX_STAGES)
    rc = al_set_error(AL_ERANGE, "mixture: its ramps make %zu stages of %u steps, at most %d", l.n,
                      L, AL_RUN_MAX_STAGES);
  uint32_t *ramp = rc ? NULL : calloc(l.n, sizeof *ramp);
  if (!rc && !ramp) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  if (rc) {
    free(l.from);
    free(l.w);
    return rc;
  }
  free(m->stage_from);
  free(m->stage_w);
  free(m->stage_ramp);
  m->stage_from = l.from;
  m->stage_w = l.w;
  m->stage_ramp = ramp;
  m->n_stage = (uint32_t)l.n;
  return AL_OK;
}

/* T (the options', or the default share of the rank-slots), then the segments at it. A segment
 * shorter than a window draws its partial batches over fewer steps: T is lowered (by default)
 * or refused (given) until every segment's steps fit their rank-slots. */
static int resolve_length(al_run *r, const al_plan_options *o) {
  run_mix *m = r->mix;
  int rc = resolve_mix_tokens(r, o->step_tokens);
  if (!rc) rc = plan_segments(r, r->tmpl->step_tokens);
  for (int round = 0; round < 8 && !rc; round++) {
    double worst = segments_fill(r);
    double limit = o->step_tokens ? MIX_MAX_T_SHARE : MIX_DEFAULT_T_SHARE;
    if (worst <= limit + 1e-9) break;
    if (o->step_tokens) {
      rc = al_set_error(AL_ERANGE,
                        "step-tokens %llu: a stretch of this mixture's steps with fewer sources "
                        "would fill %.0f %% of its rank-slots (at most %.0f %%): lower "
                        "--step-tokens or raise --micro-per-step",
                        (unsigned long long)o->step_tokens, worst * 100, MIX_MAX_T_SHARE * 100);
      break;
    }
    r->tmpl->step_tokens = (uint64_t)((double)r->tmpl->step_tokens * limit / worst);
    if (!r->tmpl->step_tokens) r->tmpl->step_tokens = 1;
    m->n_seg = 0;
    rc = plan_segments(r, r->tmpl->step_tokens);
  }
  return rc;
}

/* The template of a changed schedule against the continued run's: the same buckets (tokens,
 * batch sizes), W_ref, K_ref, seed and epoch; its T and window are taken. */
static int check_continued_template(al_run *r, const al_plan_options *o) {
  const al_plan *a = r->mix->cont->tmpl;
  al_plan *b = r->tmpl;
  const char *what = a->world != b->world                                 ? "reference world"
                     : a->micro_per_step != b->micro_per_step             ? "micro-batches per step"
                     : a->seed != b->seed                                 ? "seed"
                     : a->epoch != b->epoch                               ? "epoch"
                     : o->window && o->window != a->window                ? "window"
                     : o->step_tokens && o->step_tokens != a->step_tokens ? "step tokens"
                     : a->n_buckets != b->n_buckets                       ? "bucket table"
                                                                          : NULL;
  for (size_t k = 0; !what && k < a->n_buckets; k++)
    if (a->buckets[k].tokens != b->buckets[k].tokens ||
        a->buckets[k].batch_size != b->buckets[k].batch_size)
      what = "bucket table";
  if (what)
    return al_set_error(AL_EINVAL,
                        "mixture: the changed schedule's %s differs from the run's: a change of "
                        "schedule keeps the run's options",
                        what);
  b->window = a->window;
  b->step_tokens = a->step_tokens;
  r->capacity = r->mix->cont->capacity;
  return AL_OK;
}

int run_mix_finish(al_run *r, const al_plan_options *o) {
  run_mix *m = r->mix;
  int rc = build_strata(r);
  if (rc) return rc;
  for (uint32_t i = 0; i < m->n_src; i++)
    if (!m->src[i].pass_samples)
      return al_set_error(AL_EINVAL,
                          "mixture: source '%s': none of its %llu samples fits a bucket of the "
                          "plan's table",
                          m->src[i].name, (unsigned long long)m->src[i].n);
  source_units(r);
  for (uint32_t i = 0; i < m->n_src; i++)
    if (!(m->src[i].pass_units > 0))
      return al_set_error(AL_EINVAL, "mixture: source '%s' has no predicted compute",
                          m->src[i].name);
  if (!o->window) r->tmpl->window = mix_default_window(r);
  for (uint32_t i = 0; i < m->n_src; i++) {
    mix_source *s = &m->src[i];
    s->cap = s->exhaust == AL_EXHAUST_STOP ? RUN_F_ONE : F_INF;
    if (m->until == i + 1) {
      uint64_t c = (uint64_t)(m->until_passes ? m->until_passes : 1) << RUN_F_BITS;
      if (c < s->cap) s->cap = c;
    }
  }
  if (m->cont) {
    rc = check_continued_template(r, o);
    if (!rc) rc = expand_ramps(r);
    if (!rc) rc = plan_segments(r, r->tmpl->step_tokens);
    double worst = rc ? 0 : segments_fill(r);
    if (!rc && worst > MIX_MAX_T_SHARE + 1e-9)
      rc = al_set_error(AL_ERANGE,
                        "mixture: at the run's %llu tokens a step the changed schedule would fill "
                        "%.0f %% of its rank-slots (at most %.0f %%)",
                        (unsigned long long)r->tmpl->step_tokens, worst * 100,
                        MIX_MAX_T_SHARE * 100);
  } else {
    rc = expand_ramps(r);
    if (!rc) rc = resolve_length(r, o);
  }
  if (!rc) rc = number_draws(r);
  r->pass_tokens = r->pass_samples = 0;
  for (uint32_t i = 0; i < m->n_src && !rc; i++) {
    r->pass_tokens += m->src[i].drawn_tokens;
    r->pass_samples += m->src[i].drawn;
  }
  return rc;
}

uint64_t run_mix_fingerprint(const al_run *r, uint64_t h) {
  const run_mix *m = r->mix;
  run_fp_add(&h, UINT64_C(0x6d69787475726531)); /* "mixture1" */
  run_fp_add(&h, (uint64_t)m->by);
  run_fp_add(&h, m->n_src);
  run_fp_add(&h, m->steps_opt);
  run_fp_add(&h, m->until);
  run_fp_add(&h, m->until_passes);
  for (uint32_t i = 0; i < m->n_src; i++) {
    const mix_source *s = &m->src[i];
    uint64_t w;
    memcpy(&w, &s->weight, sizeof w);
    run_fp_add(&h, s->n);
    run_fp_add(&h, w);
    run_fp_add(&h, (uint64_t)s->exhaust);
    run_fp_add(&h, s->index_fingerprint);
    for (const char *c = s->name; *c; c++) run_fp_add(&h, (unsigned char)*c);
  }
  if (m->cont) { /* a changed schedule: the run it continues and where */
    run_fp_add(&h, m->cont_fingerprint);
    run_fp_add(&h, m->cont_step);
  }
  /* The stages (none given: the fingerprint of a mixture without stages). */
  for (uint32_t k = 0; m->staged && k < m->n_stage; k++) {
    run_fp_add(&h, m->stage_from[k]);
    for (uint32_t i = 0; i < m->n_src; i++) {
      uint64_t w;
      memcpy(&w, &m->stage_w[(size_t)k * m->n_src + i], sizeof w);
      run_fp_add(&h, w);
    }
  }
  return h ? h : 1;
}

static void source_info(const run_mix *m, uint32_t i, al_run_source_info *o) {
  const mix_source *s = &m->src[i];
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  memcpy(o->name, s->name, sizeof o->name);
  o->weight = m->weight_n[i];
  o->on_exhaust = s->exhaust;
  o->passes = s->passes;
  o->samples = s->n;
  o->pass_samples = s->pass_samples;
  o->pass_tokens = s->pass_tokens;
  o->draw_base = s->draw_base;
  o->drawn = s->drawn;
  o->drawn_tokens = s->drawn_tokens;
  o->drawn_ms = s->drawn_ms;
  o->index_fingerprint = s->index_fingerprint;
  o->stop_step = s->stop_step;
}

static uint32_t source_of_id(const run_mix *m, uint64_t id) {
  uint32_t lo = 0, hi = m->n_src;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (m->src[mid].draw_base <= id)
      lo = mid;
    else
      hi = mid;
  }
  /* Sources that reach no pass own no ids: the last source whose range holds id. */
  while (lo > 0 && (uint64_t)m->src[lo].passes * m->src[lo].n == 0) lo--;
  return lo;
}

int run_mix_order_steps(const al_run *r, const al_plan *p, const uint32_t *step_of, uint32_t n,
                        uint32_t *to) {
  const run_mix *m = r->mix;
  size_t ns = m->n_src;
  double *u = calloc((size_t)n * ns, sizeof *u), *total = calloc(ns, sizeof *total),
         *cum = calloc(ns, sizeof *cum);
  uint8_t *used = calloc(n, 1);
  if (!u || !total || !cum || !used) {
    free(u), free(total), free(cum), free(used);
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  for (size_t x = 0; x < p->n_micro; x++) {
    const plan_micro *mi = &p->micro[x];
    if (mi->padded) continue;
    double unit = unit_of(r, mi->bucket);
    for (uint32_t k = 0; k < mi->n; k++) {
      uint32_t i = source_of_id(m, p->mb[mi->first + k]);
      u[(size_t)step_of[x] * ns + i] += unit;
      total[i] += unit;
    }
  }
  for (uint32_t pos = 0; pos < n; pos++) {
    uint32_t best = UINT32_MAX;
    double best_d = 0;
    for (uint32_t s = 0; s < n; s++) {
      if (used[s]) continue;
      double d = 0;
      for (size_t i = 0; i < ns; i++) {
        double e = cum[i] + u[(size_t)s * ns + i] - total[i] * (pos + 1) / n;
        d += e * e;
      }
      if (best == UINT32_MAX || d < best_d) best = s, best_d = d;
    }
    used[best] = 1;
    to[best] = pos;
    for (size_t i = 0; i < ns; i++) cum[i] += u[(size_t)best * ns + i];
  }
  free(u), free(total), free(cum), free(used);
  return AL_OK;
}

void run_mix_info(const al_run *r, al_run_info *i) {
  i->index_samples = r->mix->input_samples;
  i->sources = r->mix->n_src;
  i->draw_ids = r->mix->draw_ids;
}

int run_mix_plan_sources(const al_run *r, al_plan *p) {
  const run_mix *m = r->mix;
  p->sources = calloc(m->n_src, sizeof *p->sources);
  if (!p->sources) return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (uint32_t i = 0; i < m->n_src; i++) source_info(m, i, &p->sources[i]);
  p->n_sources = m->n_src;
  p->mix_by = (uint32_t)m->by;
  if (m->staged) {
    p->stage_from = malloc(m->n_stage * sizeof *p->stage_from);
    p->stage_w = malloc((size_t)m->n_stage * m->n_src * sizeof *p->stage_w);
    if (!p->stage_from || !p->stage_w) return al_set_error(AL_ENOMEM, "plan: out of memory");
    memcpy(p->stage_from, m->stage_from, m->n_stage * sizeof *p->stage_from);
    memcpy(p->stage_w, m->stage_w, (size_t)m->n_stage * m->n_src * sizeof *p->stage_w);
    p->n_stages = m->n_stage;
  }
  return AL_OK;
}

/* ---- public ---- */

int al_run_source_get(const al_run *r, uint32_t i, al_run_source_info *out) {
  if (!r || !out) return al_set_error(AL_EINVAL, "al_run_source_get: NULL argument");
  size_t n;
  int rc = struct_out_size(out, sizeof *out, AL_RUN_SOURCE_INFO_V1, "al_run_source_get",
                           "al_run_source_info", &n);
  if (rc) return rc;
  al_run_source_info o;
  if (!r->mix) {
    if (i) return al_set_error(AL_ERANGE, "source %u: a run of one input has source 0 only", i);
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.name[0] = '0';
    o.weight = 1;
    o.on_exhaust = AL_EXHAUST_STOP;
    o.passes = 1;
    o.samples = r->tmpl->index_samples;
    o.pass_samples = o.drawn = r->pass_samples;
    o.pass_tokens = o.drawn_tokens = r->pass_tokens;
    for (size_t b = 0; b < r->tmpl->n_buckets; b++) {
      const plan_bucket *k = &r->tmpl->buckets[b];
      if (k->batch_size) o.drawn_ms += (double)r->bucket_n[b] * k->batch_cost_ms / k->batch_size;
    }
    o.index_fingerprint = r->tmpl->fingerprint;
    o.stop_step = r->steps;
  } else {
    if (i >= r->mix->n_src)
      return al_set_error(AL_ERANGE, "source %u: the mixture has %u sources", i, r->mix->n_src);
    source_info(r->mix, i, &o);
  }
  struct_out(out, &o, n);
  return AL_OK;
}

uint32_t al_run_continued_at(const al_run *r) {
  return r && r->mix && r->mix->cont ? r->mix->cont_step : 0;
}

uint32_t al_run_stage_count(const al_run *r) {
  return r && r->mix && r->mix->staged ? r->mix->n_stage : 0;
}

int al_run_stage_get(const al_run *r, uint32_t k, uint32_t *from_step, double *weights,
                     size_t n_weights) {
  if (!r) return al_set_error(AL_EINVAL, "al_run_stage_get: NULL run");
  uint32_t n = al_run_stage_count(r);
  if (k >= n) return al_set_error(AL_ERANGE, "stage %u: the run has %u stages", k, n);
  const run_mix *m = r->mix;
  if (weights && n_weights < m->n_src)
    return al_set_error(AL_ERANGE, "al_run_stage_get: room for %zu weights, the mixture has %u",
                        n_weights, m->n_src);
  if (from_step) *from_step = m->stage_from[k];
  if (weights) memcpy(weights, stage_weights(m, k), m->n_src * sizeof *weights);
  return AL_OK;
}

int al_run_draw_where(const al_run *r, uint64_t id, uint32_t *source, uint32_t *pass,
                      uint64_t *position) {
  if (!r) return al_set_error(AL_EINVAL, "al_run_draw_where: NULL argument");
  uint32_t i = 0;
  uint64_t q = 0, j = id;
  if (!r->mix) {
    if (id >= r->tmpl->index_samples)
      return al_set_error(AL_ERANGE, "sample number %llu: the run numbers %llu",
                          (unsigned long long)id, (unsigned long long)r->tmpl->index_samples);
  } else {
    const run_mix *m = r->mix;
    if (id >= m->draw_ids)
      return al_set_error(AL_ERANGE, "sample number %llu: the mixture numbers %llu draws",
                          (unsigned long long)id, (unsigned long long)m->draw_ids);
    i = source_of_id(m, id);
    q = (id - m->src[i].draw_base) / m->src[i].n;
    j = (id - m->src[i].draw_base) % m->src[i].n;
  }
  if (source) *source = i;
  if (pass) *pass = (uint32_t)q;
  if (position) *position = j;
  return AL_OK;
}

int al_run_source_progress(const al_run *r, uint32_t i, uint32_t s, uint64_t *progress) {
  if (!r || !progress) return al_set_error(AL_EINVAL, "al_run_source_progress: NULL argument");
  if (s > r->steps) return al_set_error(AL_ERANGE, "step %u: the run has %u steps", s, r->steps);
  if (!r->mix) {
    if (i) return al_set_error(AL_ERANGE, "source %u: a run of one input has source 0 only", i);
    *progress = s >= r->steps ? RUN_F_ONE : run_mul_div(s, RUN_F_ONE, r->steps);
    return AL_OK;
  }
  if (i >= r->mix->n_src)
    return al_set_error(AL_ERANGE, "source %u: the mixture has %u sources", i, r->mix->n_src);
  *progress = source_progress(r, i, s);
  return AL_OK;
}

/* ---- opening ---- */

static int name_ok(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (!n || n > AL_RUN_NAME_MAX) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '.'))
      return 0;
  }
  return 1;
}

static int check_sources(const al_run_source *src, size_t n, const al_run_mix *mix,
                         al_run_source *s) {
  for (size_t i = 0; i < n; i++) {
    char what[64];
    snprintf(what, sizeof what, "al_run_source[%zu]", i);
    int rc = struct_in(&s[i], sizeof s[i], AL_RUN_SOURCE_V1, &src[i], "al_run_open_mixture", what);
    if (rc) return rc;
    if (!name_ok(s[i].name))
      return al_set_error(AL_EINVAL,
                          "mixture: source %zu: name '%s' must be 1..%d characters of "
                          "[A-Za-z0-9_.-]",
                          i, s[i].name ? s[i].name : "(null)", AL_RUN_NAME_MAX);
    for (size_t k = 0; k < i; k++)
      if (!strcmp(s[k].name, s[i].name))
        return al_set_error(AL_EINVAL,
                            "mixture: source name '%s' is given twice (sources %zu and %zu)",
                            s[i].name, k, i);
    if (!(s[i].weight > 0) || !isfinite(s[i].weight))
      return al_set_error(AL_EINVAL,
                          "mixture: source '%s': weight %g must be a finite number above 0",
                          s[i].name, s[i].weight);
    if (s[i].on_exhaust != AL_EXHAUST_REPEAT && s[i].on_exhaust != AL_EXHAUST_STOP)
      return al_set_error(AL_EINVAL,
                          "mixture: source '%s': on_exhaust %d is neither repeat (0) nor stop (1)",
                          s[i].name, (int)s[i].on_exhaust);
    if (!s[i].input == !s[i].map)
      return al_set_error(AL_EINVAL, "mixture: source '%s' needs an input or a map (one of them)",
                          s[i].name);
    if (i && !s[i].map != !s[0].map)
      return al_set_error(AL_EINVAL,
                          "mixture: source '%s' %s a map and source '%s' %s: every source or none",
                          s[i].name, s[i].map ? "has" : "lacks", s[0].name,
                          s[0].map ? "has" : "lacks");
  }
  if (mix->by != AL_MIX_TOKENS && mix->by != AL_MIX_SAMPLES && mix->by != AL_MIX_COMPUTE)
    return al_set_error(AL_EINVAL, "mixture: by %d is none of tokens (0), samples (1), compute (2)",
                        (int)mix->by);
  if (mix->until > n)
    return al_set_error(AL_EINVAL, "mixture: until %u names no source (there are %zu)", mix->until,
                        n);
  if (mix->until && mix->until_passes > 1 && s[mix->until - 1].on_exhaust == AL_EXHAUST_STOP)
    return al_set_error(AL_EINVAL,
                        "mixture: until '%s' for %u passes: a stop source gives one pass",
                        s[mix->until - 1].name, mix->until_passes);
  return AL_OK;
}

/* The concatenated input (shapes of every source in turn, one fingerprint over theirs). */
static int concat_inputs(const al_run_source *s, size_t n, const al_latent_grid *const *grids,
                         al_plan_input *in, uint32_t **shape, al_latent_grid **grid_out,
                         run_mix *m) {
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    al_plan_input one;
    char what[80];
    snprintf(what, sizeof what, "the input of source '%s'", s[i].name);
    int rc = struct_in(&one, sizeof one, AL_PLAN_INPUT_V1, s[i].input, "al_run_open_mixture", what);
    if (rc) return rc;
    if (one.n && (!one.width || !one.height || !one.frames))
      return al_set_error(AL_EINVAL, "mixture: source '%s': NULL shape arrays", s[i].name);
    m->src[i].off = total;
    m->src[i].n = one.n;
    m->src[i].index_fingerprint = one.index_fingerprint;
    total += one.n;
  }
  if (total > UINT32_MAX)
    return al_set_error(AL_ERANGE, "mixture: %llu samples in all, above 2^32 - 1",
                        (unsigned long long)total);
  uint32_t *sh = malloc((total ? 3 * total : 3) * sizeof *sh);
  if (!sh)
    return al_set_error(AL_ENOMEM, "plan: out of memory for %llu samples",
                        (unsigned long long)total);
  uint64_t fp = UINT64_C(0x6d69786964783031); /* "mixidx01" */
  for (size_t i = 0; i < n; i++) {
    const al_plan_input *one = s[i].input;
    uint64_t o = m->src[i].off;
    if (one->n) {
      memcpy(sh + o, one->width, one->n * sizeof *sh);
      memcpy(sh + total + o, one->height, one->n * sizeof *sh);
      memcpy(sh + 2 * total + o, one->frames, one->n * sizeof *sh);
    }
    run_fp_add(&fp, m->src[i].index_fingerprint);
    run_fp_add(&fp, one->n);
  }
  al_latent_grid *g = NULL;
  for (size_t i = 0; grids && i < n && !g; i++)
    if (grids[i] && !(g = calloc(total ? total : 1, sizeof *g))) {
      free(sh);
      return al_set_error(AL_ENOMEM, "plan: out of memory for %llu latent grids",
                          (unsigned long long)total);
    }
  for (size_t i = 0; g && i < n; i++)
    if (grids[i] && m->src[i].n) memcpy(g + m->src[i].off, grids[i], m->src[i].n * sizeof *g);
  al_plan_input c = {sizeof c, total, sh, sh + total, sh + 2 * total, fp ? fp : 1};
  *in = c;
  *shape = sh;
  *grid_out = g;
  m->input_samples = total;
  return AL_OK;
}

/* A changed schedule: the run continued must be a mixture whose sources lead this one's
 * (names, exhaust policies, inputs) with the same `by`; the step it takes effect at is the first
 * window boundary of that run at or after at_step (its end when at_step is at or past it). */
static int take_continued(run_mix *m, const al_run_mix *x) {
  const al_run *old = x->continues;
  const run_mix *o = old->mix;
  if (!o)
    return al_set_error(AL_EINVAL,
                        "mixture: the run continued is a run of one input, not a mixture's");
  if (o->by != m->by)
    return al_set_error(AL_EINVAL, "mixture: the changed schedule apportions by %d, the run by %d",
                        (int)m->by, (int)o->by);
  if (o->n_src > m->n_src)
    return al_set_error(AL_EINVAL,
                        "mixture: the run continued has %u sources, the changed schedule %u: keep "
                        "every source (weight 0 stops drawing it)",
                        o->n_src, m->n_src);
  for (uint32_t i = 0; i < o->n_src; i++) {
    const mix_source *a = &o->src[i], *b = &m->src[i];
    const char *what = strcmp(a->name, b->name)                       ? "name"
                       : a->exhaust != b->exhaust                     ? "on_exhaust"
                       : a->n != b->n                                 ? "sample count"
                       : a->index_fingerprint != b->index_fingerprint ? "index"
                                                                      : NULL;
    if (what)
      return al_set_error(AL_EINVAL,
                          "mixture: source %u of the changed schedule ('%s') differs from the "
                          "run's ('%s') in its %s: the run's sources come first, in its order",
                          i, b->name, a->name, what);
  }
  uint32_t E = old->steps, at = x->at_step;
  if (at < old->steps) {
    uint32_t a = 0, b = 0, L = old->tmpl->window ? old->tmpl->window : 1;
    run_mix_segment(old, at, &a, &b);
    uint64_t e = a + ((uint64_t)(at - a) + L - 1) / L * L;
    E = e < b ? (uint32_t)e : b;
  }
  al_run_info oi = AL_RUN_INFO_INIT;
  int rc = al_run_get_info(old, &oi);
  if (rc) return rc;
  m->cont = old;
  m->cont_step = E;
  m->n_cont = o->n_src;
  m->cont_fingerprint = oi.fingerprint;
  return AL_OK;
}

/* Every source's index map as one (run_map_concat): each source's positions after those of the
 * sources before it, its samples and index fingerprint from its map's header. The classes are
 * each map's, sorted as a map sorts them, so a source's strata hold the pieces a mixture of its
 * arrays would, in the same order: the same run. */
static int concat_maps(const al_run_source *s, size_t n, const al_plan_options *o, run_map **map,
                       run_mix *m) {
  if (o->n_require_members)
    return al_set_error(AL_EINVAL,
                        "mixture: require_members with index maps: a map records the members its "
                        "index was mapped with (plan --save-map --require-members)");
  const char **paths = malloc(n * sizeof *paths);
  uint64_t *cnt = malloc(n * sizeof *cnt), *fp = malloc(n * sizeof *fp);
  int rc = paths && cnt && fp ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; !rc && i < n; i++) paths[i] = s[i].map;
  if (!rc) rc = run_map_concat(map, paths, n, cnt, fp, UINT64_C(0x6d69786964783031));
  uint64_t total = 0;
  for (size_t i = 0; !rc && i < n; i++) {
    m->src[i].off = total;
    m->src[i].n = cnt[i];
    m->src[i].index_fingerprint = fp[i];
    total += cnt[i];
  }
  if (!rc) m->input_samples = total;
  free(paths), free(cnt), free(fp);
  return rc;
}

/* A one-source stop mixture with no length and no stages: the run of its input. */
static int is_plain(const al_run_source *s, size_t n, const al_run_mix *mix) {
  return n == 1 && s[0].on_exhaust == AL_EXHAUST_STOP && !mix->steps && !mix->until &&
         !mix->n_stages && !mix->continues;
}

/* The stages: stage 0 the sources' weights (or a stage from step 0's), then each stage given,
 * ascending, its weights normalised over all sources. */
static int take_stages(run_mix *m, const al_run_mix *x) {
  size_t ns = m->n_src, given = x->n_stages;
  if (given > AL_RUN_MAX_STAGES)
    return al_set_error(AL_ERANGE, "mixture: %zu stages, at most %d", given, AL_RUN_MAX_STAGES);
  if (given && !x->stages)
    return al_set_error(AL_EINVAL, "mixture: n_stages %zu, stages NULL", given);
  al_run_stage *st = calloc(given ? given : 1, sizeof *st);
  if (!st) return al_set_error(AL_ENOMEM, "plan: out of memory");
  int rc = AL_OK;
  for (size_t k = 0; k < given && !rc; k++) {
    char what[40];
    snprintf(what, sizeof what, "al_run_stage[%zu]", k);
    rc = struct_in(&st[k], sizeof st[k], AL_RUN_STAGE_V1, &x->stages[k], "al_run_open_mixture",
                   what);
    if (!rc && !st[k].weights)
      rc = al_set_error(AL_EINVAL, "mixture: stage %zu (from step %u) has no weights", k,
                        st[k].from_step);
    if (!rc && k &&
        (uint64_t)st[k].from_step <
            (uint64_t)st[k - 1].from_step + (st[k - 1].ramp_steps ? st[k - 1].ramp_steps : 1))
      rc = al_set_error(AL_EINVAL,
                        "mixture: stage %zu starts at step %u, not after stage %zu's step %u%s", k,
                        st[k].from_step, k - 1, st[k - 1].from_step,
                        st[k - 1].ramp_steps ? " and its ramp" : "");
    if (!rc && x->steps && st[k].from_step >= x->steps)
      rc = al_set_error(AL_EINVAL, "mixture: stage %zu starts at step %u, past the run's %u steps",
                        k, st[k].from_step, x->steps);
    double sum = 0;
    for (size_t i = 0; i < ns && !rc; i++) {
      double w = st[k].weights[i];
      if (!(w >= 0) || !isfinite(w))
        rc = al_set_error(AL_EINVAL,
                          "mixture: stage %zu (from step %u): source '%s': weight %g must be a "
                          "finite number, 0 or more",
                          k, st[k].from_step, m->src[i].name, w);
      sum += w;
    }
    if (!rc && !(sum > 0))
      rc = al_set_error(AL_EINVAL, "mixture: stage %zu (from step %u) weighs every source 0", k,
                        st[k].from_step);
  }
  size_t n = 1 + given - (given && st[0].from_step == 0);
  m->stage_from = rc ? NULL : calloc(n, sizeof *m->stage_from);
  m->stage_w = rc ? NULL : calloc(n * ns, sizeof *m->stage_w);
  m->stage_ramp = rc ? NULL : calloc(n, sizeof *m->stage_ramp);
  if (!rc && (!m->stage_from || !m->stage_w || !m->stage_ramp))
    rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  if (!rc) {
    memcpy(m->stage_w, m->weight_n, ns * sizeof *m->stage_w);
    size_t k0 = n - given; /* 0: the first stage given is from step 0 and replaces stage 0 */
    for (size_t g = 0; g < given; g++) {
      double sum = 0;
      for (size_t i = 0; i < ns; i++) sum += st[g].weights[i];
      m->stage_from[k0 + g] = st[g].from_step;
      m->stage_ramp[k0 + g] = st[g].ramp_steps;
      for (size_t i = 0; i < ns; i++) m->stage_w[(k0 + g) * ns + i] = st[g].weights[i] / sum;
    }
    m->n_stage = (uint32_t)n;
    m->staged = given > 0;
    /* A stage from step 0 (without a ramp from the sources' weights) is the weights the
     * sources report. */
    if (given && st[0].from_step == 0 && !st[0].ramp_steps)
      memcpy(m->weight_n, m->stage_w, ns * sizeof *m->weight_n);
  }
  free(st);
  return rc;
}

int al_run_open_mixture(al_run **out, const al_run_source *src, size_t n, const al_run_mix *mix,
                        const al_cost_model *cost, const al_plan_options *opts) {
  return run_open_mixture_grid(out, src, n, mix, NULL, NULL, cost, opts);
}

int run_open_mixture_grid(al_run **out, const al_run_source *src, size_t n, const al_run_mix *mix,
                          const al_latent_grid *const *grids, const uint8_t *const *excls,
                          const al_cost_model *cost, const al_plan_options *opts) {
  if (!out || !src || !mix || !cost || !opts)
    return al_set_error(AL_EINVAL, "al_run_open_mixture: NULL argument");
  *out = NULL;
  if (!n || n > AL_RUN_MAX_SOURCES)
    return al_set_error(AL_ERANGE, "mixture: %zu sources (1..%d)", n, AL_RUN_MAX_SOURCES);
  al_run_mix x;
  al_plan_options o;
  al_cost_model c;
  int rc = struct_in(&x, sizeof x, AL_RUN_MIX_V1, mix, "al_run_open_mixture", "al_run_mix");
  if (!rc)
    rc = struct_in(&o, sizeof o, AL_PLAN_OPTIONS_V1, opts, "al_run_open_mixture",
                   "al_plan_options");
  if (!rc)
    rc = struct_in(&c, sizeof c, AL_COST_MODEL_V1, cost, "al_run_open_mixture", "al_cost_model");
  if (!rc && o.n_require_members && !excls)
    rc = al_set_error(AL_EINVAL, "al_run_open_mixture: require_members needs the indexes");
  al_run_source *s = rc ? NULL : calloc(n, sizeof *s);
  if (!rc && !s) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  if (!rc) rc = check_sources(src, n, &x, s);
  if (!rc && is_plain(s, n, &x) && s[0].map) {
    rc = al_run_open_map(out, s[0].map, &c, &o);
    free(s);
    return rc;
  }
  if (!rc && is_plain(s, n, &x)) {
    al_plan_input one;
    rc = struct_in(&one, sizeof one, AL_PLAN_INPUT_V1, s[0].input, "al_run_open_mixture",
                   "al_plan_input");
    if (!rc)
      rc = run_open_grid(out, &one, grids ? grids[0] : NULL, excls ? excls[0] : NULL, &c, &o);
    free(s);
    return rc;
  }
  run_mix *m = rc ? NULL : calloc(1, sizeof *m);
  if (!rc && m) {
    m->src = calloc(n, sizeof *m->src);
    m->weight_n = calloc(n, sizeof *m->weight_n);
  }
  if (!rc && (!m || !m->src || !m->weight_n)) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  al_plan_input in;
  run_map *map = NULL;
  uint32_t *shape = NULL;
  al_latent_grid *grid = NULL;
  if (!rc) {
    m->n_src = (uint32_t)n;
    m->by = x.by;
    m->steps_opt = x.steps;
    m->until = x.until;
    m->until_passes = x.until_passes ? x.until_passes : 1;
    double wsum = 0;
    for (size_t i = 0; i < n; i++) wsum += s[i].weight;
    for (size_t i = 0; i < n; i++) {
      snprintf(m->src[i].name, sizeof m->src[i].name, "%s", s[i].name);
      m->src[i].weight = s[i].weight;
      m->src[i].exhaust = s[i].on_exhaust;
      m->weight_n[i] = s[i].weight / wsum;
    }
    rc = take_stages(m, &x);
    if (!rc && s[0].map) rc = concat_maps(s, n, &o, &map, m);
    if (!rc && !s[0].map) rc = concat_inputs(s, n, grids, &in, &shape, &grid, m);
    if (!rc && x.continues) rc = take_continued(m, &x);
  }
  free(s);
  if (map) { /* the sources' maps, concatenated */
    if (rc) {
      run_map_close(map);
      run_mix_free(m);
      return rc;
    }
    return run_open_classes_mix(out, map, m, &c, &o);
  }
  uint8_t *excl = NULL; /* the sources' lacking positions, concatenated */
  for (size_t i = 0; !rc && excls && i < n && !excl; i++)
    if (excls[i] && !(excl = calloc(in.n ? in.n : 1, 1)))
      rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; !rc && excl && i < n; i++)
    if (excls[i] && m->src[i].n) memcpy(excl + m->src[i].off, excls[i], m->src[i].n);
  if (!rc) rc = run_check_options(&o);
  if (!rc) rc = run_map_build(&map, &in, grid, excl);
  free(excl);
  free(shape);
  free(grid);
  if (rc) {
    run_mix_free(m);
    return rc;
  }
  return run_open_classes_mix(out, map, m, &c, &o);
}
