/* A scheduled plan's steps held inside a range of real tokens per step (plan_keep_step_range):
 * what the re-plan does after its schedule so that every step keeps the old plan's global batch,
 * not only the mean over the steps.
 *
 * The schedule chooses which micro-batches share a step by predicted cost, not by tokens. With
 * more micro-batches a step than the old plan had (W' K' > W K) the batch sizes shrink while a
 * clip longer than the new micro-batch target stays one sample, so a step of the costliest
 * batches can hold several times the old steps' tokens (eight 61,200-token clips: 489,600
 * against T = 262,144) and a step of the cheapest ones far fewer. Here units of the schedule (a
 * micro-batch, or a sequence-parallel group: its d entries at one micro-batch index on d aligned
 * ranks) are exchanged between steps until every step holds between lo and hi real tokens. An
 * exchange keeps every rank's K micro-batches, every micro-batch (its samples, bucket, cost,
 * hence the memory and compute limits), every group's degree and alignment, and the plan's
 * total and step count (so the mean). Padding never moves.
 *
 * A step out of range is mended by moves, each with one other step of its window:
 *   - a block: above the range, the step's units from the most tokens down for the other
 *     step's of the same degree from the fewest up, pair by pair (below it the reverse), the
 *     first k pairs for up to BLOCK_SIZES sizes from the fewest that reach the range to all
 *     that fit (going past the range can level a step: at K = 2 a step of 2 W costly clips holds
 *     one a rank once W of them have left);
 *   - a single exchange of one of the step's units (the one with the most tokens above the
 *     range, the fewest below, and the one with the most (fewest) tokens per predicted
 *     millisecond) for the other step's unit nearest it in cost among those that move the step
 *     at least half that unit's tokens (below: as many) or all the way; with sequence
 *     parallelism, of aligned spans of d ranks (span_at), so a group of degree 4 can leave for
 *     four micro-batches of degree 1.
 * A move must bring the step toward the range without passing it and leave the other step in
 * range or nearer to it, so no move takes a step out of range or one out of range further out,
 * and the search ends. The move taken adds the least predicted time per token of progress (both
 * steps, judged as the schedule would lay them out: range_model), then makes the most progress,
 * then exchanges the nearest costs, the fewest units, with the nearest step. Windows are the
 * plan's `window` steps (a sample moves at most that far from where the shuffle put it, and a
 * search costs a window); steps still out of range are tried again over all steps. The steps
 * moves changed are then laid out again as the schedule lays out a step (ranks levelled, or
 * slots filled by cost), so the balance judged is the one the manifest holds.
 *
 * Why the predicted time can grow: a step's tokens over W' ranks are T / W' a rank on average,
 * and a clip above that share makes its rank the slowest of any step that holds the old step's
 * tokens; a step of such clips alone was level but held more than T. Holding the range costs
 * balance there (planner/README.md §6 has the figures). */
#include <stdlib.h>
#include <string.h>

#include "planner/plan_internal.h"

/* How a step's predicted time is judged while units move, and what is laid out again. */
typedef enum range_model {
  MODEL_MAX,   /* K = 1: the costliest group, wherever the groups stand */
  MODEL_BINS,  /* adaptive, the step model, K > 1, no SP: ranks levelled again (schedule.c);
                * judged as sorted_time() deals them */
  MODEL_SLOTS, /* adaptive, the micro model, K > 1, no SP: slots filled again by cost
                * (sp_schedule.c); judged by the sum of every W-th costliest, from the first */
  MODEL_FIXED  /* otherwise: entries stay where they stand; judged as laid out */
} range_model;

typedef struct ranger {
  al_plan *p;
  uint64_t lo, hi;
  size_t per;         /* entries per step: W K */
  uint32_t W, K;      /* ranks; micro-batches per rank per step */
  range_model model;  /* how steps are judged */
  int sp;             /* a degree above 1 is allowed: single exchanges are of spans */
  uint32_t win_steps; /* steps per window */
  uint32_t n_win;     /* windows (the last takes the tail, as the schedule's do) */
  uint64_t *tok;      /* per step: its real tokens */
  double *time;       /* per step: its judged time */
  uint32_t *top;      /* MAX: per step, its two costliest leader entries (2 each) */
  uint32_t *sorted;   /* BINS, SLOTS: per step, its entries by cost, descending (W K each) */
  uint8_t *touched;   /* per step: a move changed it */
  uint32_t *at;       /* per entry: the unit a leader entry holds; UINT32_MAX otherwise */
  uint32_t *loc;      /* per unit: its leader entry */
  uint32_t *su;       /* per step, from s W K: its units by degree, tokens, cost (cmp_in_step) */
  uint32_t *su_n;     /* per step: its units */
  uint32_t *pair_g, *pair_h;            /* a move's exchanges (scratch, W K each) */
  uint64_t *sent;                       /* block_pairs: tokens moved after each pair (W K) */
  uint32_t *out_x;                      /* est_after: the entries leaving (scratch, W K) */
  double *in_c, *buf_a, *buf_b, *merge; /* est_after: costs coming in, buffers (W K each) */
  uint8_t *mark;                        /* est_after: entries of a step leaving (W K) */
  size_t n_units;
} ranger;

static uint32_t deg_at(const al_plan *p, size_t x) {
  return p->micro[x].sp_degree > 1 ? p->micro[x].sp_degree : 1;
}

static uint64_t tok_at(const al_plan *p, size_t x) {
  const plan_micro *m = &p->micro[x];
  return m->padded ? 0 : (uint64_t)m->n * p->buckets[m->bucket].tokens;
}

static double cost_at(const ranger *r, size_t x) { return r->p->micro[x].cost; }
static uint32_t step_of(const ranger *r, size_t x) { return (uint32_t)(x / r->per); }

static uint32_t window_of(const ranger *r, uint32_t s) {
  uint32_t w = s / r->win_steps;
  return w < r->n_win ? w : r->n_win - 1;
}

static int in_range(const ranger *r, uint32_t s) {
  return r->tok[s] >= r->lo && r->tok[s] <= r->hi;
}

static int cmp_desc(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x < y) - (x > y);
}

/* a[0..n) descending: Shell sort (Ciura's gaps) up to a few thousand values, which is most
 * moves' few exchanged units many times over without qsort's calls; qsort above. */
static void sort_desc(double *a, size_t n) {
  static const size_t gaps[] = {701, 301, 132, 57, 23, 10, 4, 1};
  if (n > 4096) {
    qsort(a, n, sizeof *a, cmp_desc);
    return;
  }
  for (size_t g = 0; g < sizeof gaps / sizeof *gaps; g++)
    for (size_t i = gaps[g]; i < n; i++) {
      double v = a[i];
      size_t j = i;
      for (; j >= gaps[g] && a[j - gaps[g]] < v; j -= gaps[g]) a[j] = a[j - gaps[g]];
      a[j] = v;
    }
}

/* Entries by cost, descending, then entry. */
static int cmp_entry_desc(const void *a, const void *b, void *ctx) {
  const al_plan *p = ctx;
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  double cx = p->micro[x].cost, cy = p->micro[y].cost;
  if (cx != cy) return cx < cy ? 1 : -1;
  return (x > y) - (x < y);
}

/* The judged time of a step whose W K entry costs are c, descending. SLOTS: filled by cost,
 * slot k's slowest is c[k W]. BINS: W ranks of exactly K micro-batches each, dealt as the
 * schedule's rounds deal them to level the ranks (round 0 gives rank b the b-th costliest, each
 * later round the next W cheapest to the fullest ranks, here a snake over the sorted costs);
 * the slowest rank's sum (for K = 2 the least any pairing can reach). */
static double sorted_time(const ranger *r, const double *c) {
  size_t W = r->W, K = r->K;
  double t = 0;
  if (r->model == MODEL_SLOTS) {
    for (size_t i = 0; i < r->per; i += W) t += c[i];
    return t;
  }
  for (size_t b = 0; b < W; b++) {
    double sum = 0;
    for (size_t j = 0; j < K; j++) sum += c[j * W + (j % 2 ? W - 1 - b : b)];
    if (sum > t) t = sum;
  }
  return t;
}

/* Step s's caches and judged time, from its entries. */
static void judge_step(ranger *r, uint32_t s) {
  const plan_micro *mi = r->p->micro + (size_t)s * r->per;
  uint32_t W = r->W, K = r->K;
  size_t base = (size_t)s * r->per;
  if (r->model == MODEL_MAX) {
    uint32_t t1 = UINT32_MAX, t2 = UINT32_MAX;
    for (size_t i = 0; i < r->per; i++) {
      if (mi[i].sp_rank) continue; /* a group counts once, at its leader */
      if (t1 == UINT32_MAX || mi[i].cost > mi[t1 - base].cost)
        t2 = t1, t1 = (uint32_t)(base + i);
      else if (t2 == UINT32_MAX || mi[i].cost > mi[t2 - base].cost)
        t2 = (uint32_t)(base + i);
    }
    r->top[2 * s] = t1, r->top[2 * s + 1] = t2;
    r->time[s] = t1 == UINT32_MAX ? 0 : mi[t1 - base].cost;
    return;
  }
  if (r->model == MODEL_BINS || r->model == MODEL_SLOTS) {
    uint32_t *x = r->sorted + base;
    for (size_t i = 0; i < r->per; i++) x[i] = (uint32_t)(base + i);
    qsort_r(x, r->per, sizeof *x, cmp_entry_desc, r->p);
    for (size_t i = 0; i < r->per; i++) r->merge[i] = r->p->micro[x[i]].cost;
    r->time[s] = sorted_time(r, r->merge);
    return;
  }
  /* FIXED: as laid out, under the plan's sync model. */
  double t = 0;
  if (r->p->sync == AL_SYNC_MICRO) {
    for (uint32_t k = 0; k < K; k++) {
      double mx = 0;
      for (uint32_t w = 0; w < W; w++)
        if (mi[(size_t)w * K + k].cost > mx) mx = mi[(size_t)w * K + k].cost;
      t += mx;
    }
  } else {
    for (uint32_t w = 0; w < W; w++) {
      double sum = 0;
      for (uint32_t k = 0; k < K; k++) sum += mi[(size_t)w * K + k].cost;
      if (sum > t) t = sum;
    }
  }
  r->time[s] = t;
}

/* Step s's judged time were the leader entries out_x[0..n) to hold groups of costs in_c[0..n)
 * instead (MAX, BINS, SLOTS). */
static double est_after(ranger *r, uint32_t s, size_t n) {
  size_t base = (size_t)s * r->per;
  double in_max = 0;
  for (size_t i = 0; i < n; i++) {
    r->mark[r->out_x[i] - base] = 1;
    if (r->in_c[i] > in_max) in_max = r->in_c[i];
  }
  double t;
  if (r->model != MODEL_MAX) {
    /* The step's costs less those leaving (marked), merged with those coming in. */
    size_t na = 0, m = 0;
    const uint32_t *x = r->sorted + base;
    for (size_t i = 0; i < r->per; i++)
      if (!r->mark[x[i] - base]) r->buf_a[na++] = cost_at(r, x[i]);
    memcpy(r->buf_b, r->in_c, n * sizeof *r->buf_b);
    sort_desc(r->buf_b, n);
    for (size_t i = 0, j = 0; i < na || j < n;)
      r->merge[m++] = j >= n || (i < na && r->buf_a[i] >= r->buf_b[j]) ? r->buf_a[i++]
                                                                       : r->buf_b[j++];
    t = sorted_time(r, r->merge);
  } else {
    uint32_t t1 = r->top[2 * s], t2 = r->top[2 * s + 1];
    double rest = 0;
    if (t1 != UINT32_MAX && !r->mark[t1 - base])
      rest = cost_at(r, t1);
    else if (t2 != UINT32_MAX && !r->mark[t2 - base])
      rest = cost_at(r, t2);
    else if (t2 != UINT32_MAX) /* both costliest leave: the rest by hand */
      for (size_t i = 0; i < r->per; i++)
        if (!r->mark[i] && !r->p->micro[base + i].sp_rank && cost_at(r, base + i) > rest)
          rest = cost_at(r, base + i);
    t = rest > in_max ? rest : in_max;
  }
  for (size_t i = 0; i < n; i++) r->mark[r->out_x[i] - base] = 0;
  return t;
}

/* A step's units by degree, tokens, cost, then unit number (ascending). */
static int cmp_in_step(const void *a, const void *b, void *ctx) {
  const ranger *r = ctx;
  uint32_t u = *(const uint32_t *)a, v = *(const uint32_t *)b;
  size_t x = r->loc[u], y = r->loc[v];
  uint32_t du = deg_at(r->p, x), dv = deg_at(r->p, y);
  if (du != dv) return du < dv ? -1 : 1;
  uint64_t tu = tok_at(r->p, x), tv = tok_at(r->p, y);
  if (tu != tv) return tu < tv ? -1 : 1;
  double cu = cost_at(r, x), cv = cost_at(r, y);
  if (cu != cv) return cu < cv ? -1 : 1;
  return (u > v) - (u < v);
}

/* Step s's units into its segment of su, sorted. */
static void sort_step(ranger *r, uint32_t s) {
  uint32_t *u = r->su + (size_t)s * r->per, q = 0;
  for (size_t x = (size_t)s * r->per; x < (size_t)(s + 1) * r->per; x++)
    if (r->at[x] != UINT32_MAX) u[q++] = r->at[x];
  r->su_n[s] = q;
  qsort_r(u, q, sizeof *u, cmp_in_step, r);
}

/* Exchanges the contents of the leader entries of units g and h (one degree d): the d entries
 * of each group, rank by rank at their micro-batch index. Caches are the caller's. */
static void swap_units(ranger *r, uint32_t g, uint32_t h) {
  al_plan *p = r->p;
  size_t xg = r->loc[g], xh = r->loc[h], K = r->K;
  uint32_t d = deg_at(p, xg), sg = step_of(r, xg), sh = step_of(r, xh);
  uint64_t tg = tok_at(p, xg), th = tok_at(p, xh);
  for (uint32_t i = 0; i < d; i++) {
    plan_micro t = p->micro[xg + i * K];
    p->micro[xg + i * K] = p->micro[xh + i * K];
    p->micro[xh + i * K] = t;
  }
  r->at[xg] = h, r->at[xh] = g;
  r->loc[g] = (uint32_t)xh, r->loc[h] = (uint32_t)xg;
  r->tok[sg] = r->tok[sg] - tg + th;
  r->tok[sh] = r->tok[sh] - th + tg;
}

/* The judged time the exchanges g[i] <-> h[i] (i < n) between steps s and s2 add. */
static double added_time(ranger *r, uint32_t s, uint32_t s2, const uint32_t *g, const uint32_t *h,
                         size_t n) {
  double before = r->time[s] + r->time[s2];
  if (r->model == MODEL_FIXED) { /* as laid out: make them, judge, undo */
    for (size_t i = 0; i < n; i++) swap_units(r, g[i], h[i]);
    judge_step(r, s), judge_step(r, s2);
    double after = r->time[s] + r->time[s2];
    for (size_t i = n; i-- > 0;) swap_units(r, g[i], h[i]);
    judge_step(r, s), judge_step(r, s2);
    return after - before;
  }
  for (size_t i = 0; i < n; i++) r->out_x[i] = r->loc[g[i]], r->in_c[i] = cost_at(r, r->loc[h[i]]);
  double t = est_after(r, s, n);
  for (size_t i = 0; i < n; i++) r->out_x[i] = r->loc[h[i]], r->in_c[i] = cost_at(r, r->loc[g[i]]);
  return t + est_after(r, s2, n) - before;
}

/* A move: n exchanges with step s2 bringing the step `go` tokens toward the range at `rate`
 * added judged time per token; `near`: the cost distance of a single exchange (0 for a block). */
typedef struct move {
  size_t n;
  uint32_t s2;
  int block;
  uint32_t g, h; /* a single exchange's units; with span, s's and s2's first entries */
  uint32_t span; /* nonzero: an exchange of the aligned spans of `span` ranks at g and h */
  uint64_t go;
  double rate, near;
} move;

static uint32_t distance(uint32_t a, uint32_t b) { return a > b ? a - b : b - a; }

/* Whether m (with step s) is better than best: the lower rate, then the more progress, then
 * the nearer cost, then the fewer exchanges, then the nearer step, then the lower step, a block
 * before a single. */
static int better(const move *m, const move *best, uint32_t s) {
  if (!best->n) return 1;
  if (m->rate != best->rate) return m->rate < best->rate;
  if (m->go != best->go) return m->go > best->go;
  if (m->near != best->near) return m->near < best->near;
  if (m->n != best->n) return m->n < best->n;
  uint32_t d = distance(s, m->s2), bd = distance(s, best->s2);
  if (d != bd) return d < bd;
  if (m->s2 != best->s2) return m->s2 < best->s2;
  return m->block > best->block;
}

/* How far step s is from the range, and whether it is above it. */
static uint64_t gap_of(const ranger *r, uint32_t s, int *over) {
  *over = r->tok[s] > r->hi;
  return *over ? r->tok[s] - r->hi : r->tok[s] < r->lo ? r->lo - r->tok[s] : 0;
}

/* The tokens a unit of tg tokens of step s exchanged for one of th tokens of step s2 moves s
 * toward the range, `sent` tokens having moved already in the same move (0: not allowed): s
 * must not pass the range, and s2 must stay in range or move toward it. */
static uint64_t progress(const ranger *r, uint32_t s, uint64_t tg, uint32_t s2, uint64_t th,
                         uint64_t sent) {
  uint64_t t = r->tok[s], t2 = r->tok[s2];
  if (t > r->hi) {
    uint64_t delta = tg > th ? tg - th : 0;
    if (!delta || sent + delta > t - r->lo || t2 + sent + delta > r->hi) return 0;
    return delta;
  }
  uint64_t delta = th > tg ? th - tg : 0;
  if (!delta || sent + delta > r->hi - t || t2 < r->lo + sent + delta) return 0;
  return delta;
}

/* Step s2's units of degree d, in su: [*a, *b). */
static void degree_run(const ranger *r, uint32_t s2, uint32_t d, size_t *a, size_t *b) {
  size_t i = (size_t)s2 * r->per, e = i + r->su_n[s2];
  while (i < e && deg_at(r->p, r->loc[r->su[i]]) < d) i++;
  size_t j = i;
  while (j < e && deg_at(r->p, r->loc[r->su[j]]) == d) j++;
  *a = i, *b = j;
}

/* The block move's exchanges between steps s and s2, degree by degree: above the range s's
 * units from the most tokens down with s2's from the fewest up (below it the reverse), each
 * pair taken while it brings s toward the range within progress()'s rules (so on into the
 * range, while both steps stay in it). The pairs into pair_g / pair_h, the tokens moved after
 * the first k pairs into sent[k - 1]; returns the pair count. */
static size_t block_pairs(ranger *r, uint32_t s, uint32_t s2) {
  const al_plan *p = r->p;
  int over;
  uint64_t sent = 0;
  gap_of(r, s, &over);
  size_t n = 0, a = (size_t)s * r->per, b = a + r->su_n[s];
  for (size_t i = a; i < b;) {
    uint32_t d = deg_at(p, r->loc[r->su[i]]);
    size_t j = i, i2, j2;
    while (j < b && deg_at(p, r->loc[r->su[j]]) == d) j++;
    degree_run(r, s2, d, &i2, &j2);
    size_t hk = 0, nh = j2 - i2;
    for (size_t k = 0; k < j - i && hk < nh; k++) {
      uint32_t g = over ? r->su[j - 1 - k] : r->su[i + k];
      uint32_t h = over ? r->su[i2 + hk] : r->su[j2 - 1 - hk];
      uint64_t tg = tok_at(p, r->loc[g]), th = tok_at(p, r->loc[h]);
      if (over ? tg <= th : th <= tg) break; /* later pairs move less still */
      uint64_t delta = progress(r, s, tg, s2, th, sent);
      if (!delta) continue; /* too far: a smaller unit of s may fit */
      r->pair_g[n] = g, r->pair_h[n] = h, hk++;
      sent += delta;
      r->sent[n++] = sent;
    }
    i = j;
  }
  return n;
}

/* The single exchange of unit g of step s with the unit of step s2 (of g's degree, in su's
 * [i2, j2)) nearest g in cost among those that move s at least half g's tokens (below the
 * range: as many as g holds) or all the way. */
static void single_with(ranger *r, uint32_t s, uint32_t g, uint32_t s2, size_t i2, size_t j2,
                        move *best) {
  const al_plan *p = r->p;
  int over;
  uint64_t gap = gap_of(r, s, &over), tg = tok_at(p, r->loc[g]), go = 0;
  uint64_t half = over ? (tg + 1) / 2 : tg, need = gap < half ? gap : half;
  uint32_t h = UINT32_MAX;
  double cg = cost_at(r, r->loc[g]), near = 0;
  for (size_t q = i2; q < j2; q++) {
    uint64_t delta = progress(r, s, tg, s2, tok_at(p, r->loc[r->su[q]]), 0);
    double c = cost_at(r, r->loc[r->su[q]]), dc = c > cg ? c - cg : cg - c;
    if (delta >= need && (h == UINT32_MAX || dc < near)) h = r->su[q], go = delta, near = dc;
  }
  if (h == UINT32_MAX) return;
  move m = {1, s2, 0, g, h, 0, go < gap ? go : gap, 0, near};
  m.rate = added_time(r, s, s2, &g, &h, 1) / (double)m.go;
  if (better(&m, best, s)) *best = m;
}

/* Single exchanges of step s with step s2, per degree, of two units of s: the one with the
 * most tokens (the fewest below the range), and the one with the most tokens per predicted
 * millisecond (the fewest below): a unit of s that is cheap for its tokens leaves for one as
 * cheap with fewer, so the step sheds tokens and hardly any time (a long clip's rank-mate of
 * images, say). */
static void single_moves(ranger *r, uint32_t s, uint32_t s2, move *best) {
  const al_plan *p = r->p;
  int over;
  gap_of(r, s, &over);
  size_t a = (size_t)s * r->per, b = a + r->su_n[s];
  for (size_t i = a; i < b;) {
    uint32_t d = deg_at(p, r->loc[r->su[i]]);
    size_t j = i, i2, j2;
    while (j < b && deg_at(p, r->loc[r->su[j]]) == d) j++;
    degree_run(r, s2, d, &i2, &j2);
    uint32_t g = over ? r->su[j - 1] : r->su[i], dense = g;
    double best_ratio = 0;
    for (size_t q = i; q < j; q++) {
      size_t x = r->loc[r->su[q]];
      double c = cost_at(r, x), ratio = c > 0 ? (double)tok_at(p, x) / c : 0;
      if (q == i || (over ? ratio > best_ratio : ratio < best_ratio))
        best_ratio = ratio, dense = r->su[q];
    }
    single_with(r, s, g, s2, i2, j2, best);
    if (dense != g) single_with(r, s, dense, s2, i2, j2, best);
    i = j;
  }
}

/* Sequence parallelism: a span is d aligned ranks [a, a + d) at one micro-batch index k of a
 * step that no group crosses and no padding holds (one group of degree d, or groups of lower
 * degrees inside it). Two spans of d ranks exchange rank by rank and every group stays aligned
 * (its start stays a multiple of its degree, as a and d are), so a clip's group of degree 4 can
 * leave a step for four micro-batches of degree 1. Whether the span at entry x (rank a, index
 * k) is one, its tokens and its costliest group. */
static int span_at(const ranger *r, size_t x, uint32_t d, uint64_t *tok, double *cmax) {
  const al_plan *p = r->p;
  *tok = 0, *cmax = 0;
  for (uint32_t i = 0; i < d; i++) {
    const plan_micro *m = &p->micro[x + (size_t)i * r->K];
    /* the group starts at a + i - sp_rank: inside the span, and ends inside it */
    if (m->padded || m->sp_rank > i || i - m->sp_rank + deg_at(p, x + (size_t)i * r->K) > d)
      return 0;
    if (!m->sp_rank) *tok += tok_at(p, x + (size_t)i * r->K);
    if (m->cost > *cmax) *cmax = m->cost;
  }
  return 1;
}

/* Exchanges the spans of d ranks whose first entries are x and y. */
static void swap_spans(ranger *r, size_t x, size_t y, uint32_t d) {
  al_plan *p = r->p;
  uint32_t sx = step_of(r, x), sy = step_of(r, y);
  for (uint32_t i = 0; i < d; i++) {
    size_t e = x + (size_t)i * r->K, f = y + (size_t)i * r->K;
    uint64_t te = p->micro[e].sp_rank ? 0 : tok_at(p, e),
             tf = p->micro[f].sp_rank ? 0 : tok_at(p, f);
    plan_micro t = p->micro[e];
    p->micro[e] = p->micro[f], p->micro[f] = t;
    uint32_t u = r->at[e];
    r->at[e] = r->at[f], r->at[f] = u;
    if (r->at[e] != UINT32_MAX) r->loc[r->at[e]] = (uint32_t)e;
    if (r->at[f] != UINT32_MAX) r->loc[r->at[f]] = (uint32_t)f;
    r->tok[sx] = r->tok[sx] - te + tf;
    r->tok[sy] = r->tok[sy] - tf + te;
  }
}

/* Span exchanges of step s with step s2, per allowed degree d: s's span of d ranks with the
 * most tokens (the fewest below the range) and its densest in tokens per millisecond of its
 * costliest group, each for s2's span of d ranks nearest it in that cost among those that move
 * s at least half its tokens (below: as many as it holds) or all the way; judged as laid out. */
static void span_moves(ranger *r, uint32_t s, uint32_t s2, move *best) {
  const al_plan *p = r->p;
  uint32_t W = r->W, K = r->K;
  int over;
  uint64_t gap = gap_of(r, s, &over);
  for (uint32_t q = 0; q < p->n_sp_degrees; q++) {
    uint32_t d = p->sp_degrees[q];
    size_t cand[2] = {SIZE_MAX, SIZE_MAX};
    uint64_t ct[2] = {0, 0};
    double cc[2] = {0, 0}, best_ratio = 0;
    for (uint32_t k = 0; k < K; k++)
      for (uint32_t a = 0; a < W; a += d) {
        size_t x = ((size_t)s * W + a) * K + k;
        uint64_t t;
        double c;
        if (!span_at(r, x, d, &t, &c) || (over && !t)) continue;
        double ratio = c > 0 ? (double)t / c : 0;
        if (cand[0] == SIZE_MAX || (over ? t > ct[0] : t < ct[0]))
          cand[0] = x, ct[0] = t, cc[0] = c;
        if (cand[1] == SIZE_MAX || (over ? ratio > best_ratio : ratio < best_ratio))
          cand[1] = x, ct[1] = t, cc[1] = c, best_ratio = ratio;
      }
    for (int z = 0; z < 2; z++) {
      if (cand[z] == SIZE_MAX || (z && cand[1] == cand[0])) continue;
      uint64_t tg = ct[z], half = over ? (tg + 1) / 2 : tg, need = gap < half ? gap : half;
      size_t y = SIZE_MAX;
      uint64_t go = 0;
      double near = 0;
      for (uint32_t k = 0; k < K; k++)
        for (uint32_t a = 0; a < W; a += d) {
          size_t x2 = ((size_t)s2 * W + a) * K + k;
          uint64_t t;
          double c;
          if (!span_at(r, x2, d, &t, &c)) continue;
          uint64_t delta = progress(r, s, tg, s2, t, 0);
          double dc = c > cc[z] ? c - cc[z] : cc[z] - c;
          if (delta >= need && (y == SIZE_MAX || dc < near)) y = x2, go = delta, near = dc;
        }
      if (y == SIZE_MAX) continue;
      move m = {1, s2, 0, (uint32_t)cand[z], (uint32_t)y, d, go < gap ? go : gap, 0, near};
      double before = r->time[s] + r->time[s2];
      swap_spans(r, cand[z], y, d);
      judge_step(r, s), judge_step(r, s2);
      m.rate = (r->time[s] + r->time[s2] - before) / (double)m.go;
      swap_spans(r, cand[z], y, d);
      judge_step(r, s), judge_step(r, s2);
      if (better(&m, best, s)) *best = m;
    }
  }
}

/* Block moves of step s with s2: the first k pairs of block_pairs, for k from the fewest that
 * bring s into range (all when none do) to all of them, at most BLOCK_SIZES sizes evenly
 * spaced (a block past the range can level a step: a step of 2 W costly clips at K = 2 holds
 * one a rank once the other W have left). */
#define BLOCK_SIZES 6
static void block_moves(ranger *r, uint32_t s, uint32_t s2, move *best) {
  int over;
  uint64_t gap = gap_of(r, s, &over);
  size_t n = block_pairs(r, s, s2), k0 = 0;
  if (!n) return;
  while (k0 + 1 < n && r->sent[k0] < gap) k0++;
  size_t span = n - 1 - k0, sizes = span + 1 < BLOCK_SIZES ? span + 1 : BLOCK_SIZES;
  for (size_t q = 0; q < sizes; q++) {
    size_t k = k0 + (sizes > 1 ? span * q / (sizes - 1) : 0) + 1;
    move m = {k, s2, 1, 0, 0, 0, r->sent[k - 1] < gap ? r->sent[k - 1] : gap, 0, 0};
    m.rate = added_time(r, s, s2, r->pair_g, r->pair_h, k) / (double)m.go;
    if (better(&m, best, s)) *best = m;
  }
}

/* The best move of step s with another step of its window (best->n 0: none). */
static void best_move(ranger *r, uint32_t s, move *best) {
  uint32_t w = window_of(r, s), first = w * r->win_steps;
  uint32_t last = w + 1 == r->n_win ? r->p->steps : first + r->win_steps;
  memset(best, 0, sizeof *best);
  for (uint32_t s2 = first; s2 < last; s2++) {
    if (s2 == s) continue;
    block_moves(r, s, s2, best);
    if (r->sp)
      span_moves(r, s, s2, best);
    else
      single_moves(r, s, s2, best);
  }
}

/* Moves for step s until it is in range or no move is left (each moves it at least a token;
 * at most twice its units plus 16 moves). */
static void mend_step(ranger *r, uint32_t s) {
  size_t cap = 2 * (size_t)r->su_n[s] + 16;
  for (size_t k = 0; k < cap && !in_range(r, s); k++) {
    move m;
    best_move(r, s, &m);
    if (!m.n) return;
    if (m.block) {
      block_pairs(r, s, m.s2);
      for (size_t i = 0; i < m.n; i++) swap_units(r, r->pair_g[i], r->pair_h[i]);
    } else if (m.span) {
      swap_spans(r, m.g, m.h, m.span);
    } else {
      swap_units(r, m.g, m.h);
    }
    r->touched[s] = r->touched[m.s2] = 1;
    judge_step(r, s), judge_step(r, m.s2);
    sort_step(r, s), sort_step(r, m.s2);
  }
}

/* Every step out of range, in order, with windows of win_steps steps (all steps at once when
 * win_steps >= steps). */
static void mend_all(ranger *r, uint32_t win_steps) {
  uint32_t steps = r->p->steps;
  r->win_steps = win_steps ? win_steps : 1;
  r->n_win = steps / r->win_steps ? steps / r->win_steps : 1;
  for (uint32_t s = 0; s < steps; s++)
    if (!in_range(r, s)) mend_step(r, s);
}

static int cmp_micro_seq(const void *a, const void *b, void *ctx) {
  (void)ctx;
  uint32_t x = ((const plan_micro *)a)->seq, y = ((const plan_micro *)b)->seq;
  return (x > y) - (x < y);
}

/* The steps moves changed, laid out again (BINS, SLOTS), or (FIXED, the step model without the
 * slot schedule) each rank's micro-batches back in sequence order. */
static int lay_out_again(ranger *r, uint64_t stream) {
  al_plan *p = r->p;
  plan_rng rng;
  plan_rng_seed(&rng, p->seed, p->epoch, stream);
  int rc = AL_OK;
  for (uint32_t s = 0; s < p->steps && !rc; s++) {
    if (!r->touched[s]) continue;
    if (r->model == MODEL_BINS)
      rc = plan_relayout_bins(p, s, &rng);
    else if (r->model == MODEL_SLOTS)
      rc = plan_relayout_slots(p, s, &rng);
    else if (r->model == MODEL_FIXED && !p->sp_sched && r->K > 1)
      for (uint32_t w = 0; w < r->W; w++)
        qsort_r(&p->micro[((size_t)s * r->W + w) * r->K], r->K, sizeof *p->micro, cmp_micro_seq,
                NULL);
  }
  return rc;
}

static void ranger_free(ranger *r) {
  free(r->tok), free(r->time), free(r->merge), free(r->top), free(r->sorted);
  free(r->touched), free(r->at), free(r->loc), free(r->su), free(r->su_n);
  free(r->pair_g), free(r->pair_h), free(r->sent), free(r->out_x), free(r->in_c), free(r->buf_a);
  free(r->buf_b), free(r->mark);
}

static range_model model_of(const al_plan *p) {
  if (p->micro_per_step == 1) return MODEL_MAX;
  if (p->policy != AL_POLICY_ADAPTIVE || p->sp_degrees[p->n_sp_degrees - 1] > 1) return MODEL_FIXED;
  if (!p->sp_sched) return MODEL_BINS;
  return p->sync == AL_SYNC_MICRO ? MODEL_SLOTS : MODEL_FIXED;
}

/* Allocates what the moves use. */
static int ranger_alloc(ranger *r) {
  size_t steps = r->p->steps, u = r->n_units ? r->n_units : 1, per = r->per;
  r->time = malloc(steps * sizeof *r->time);
  r->touched = calloc(steps, 1);
  r->loc = malloc(u * sizeof *r->loc);
  r->su = malloc(steps * per * sizeof *r->su);
  r->su_n = malloc(steps * sizeof *r->su_n);
  r->pair_g = malloc(per * sizeof *r->pair_g);
  r->pair_h = malloc(per * sizeof *r->pair_h);
  r->sent = malloc(per * sizeof *r->sent);
  r->out_x = malloc(per * sizeof *r->out_x);
  r->in_c = malloc(per * sizeof *r->in_c);
  r->buf_a = malloc(per * sizeof *r->buf_a);
  r->buf_b = malloc(per * sizeof *r->buf_b);
  r->merge = malloc(per * sizeof *r->merge);
  r->mark = calloc(per, 1);
  if (r->model == MODEL_MAX) {
    r->top = malloc(2 * steps * sizeof *r->top);
  } else if (r->model != MODEL_FIXED) {
    r->sorted = malloc(steps * per * sizeof *r->sorted);
  }
  int cache = r->model == MODEL_MAX     ? r->top != NULL
              : r->model != MODEL_FIXED ? r->sorted != NULL
                                        : 1;
  if (!r->time || !r->touched || !r->loc || !r->su || !r->su_n || !r->pair_g || !r->pair_h ||
      !r->sent || !r->out_x || !r->in_c || !r->buf_a || !r->buf_b || !r->merge || !r->mark ||
      !cache)
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  return AL_OK;
}

int plan_keep_step_range(al_plan *p, uint64_t lo, uint64_t hi, uint64_t stream,
                         uint32_t *out_of_range, uint32_t *first_out) {
  *out_of_range = 0;
  *first_out = UINT32_MAX;
  if (!p->steps) return AL_OK;
  ranger r;
  memset(&r, 0, sizeof r);
  r.p = p, r.lo = lo, r.hi = hi;
  r.W = p->world, r.K = p->micro_per_step;
  r.per = (size_t)r.W * r.K;
  r.model = model_of(p);
  r.sp = p->sp_degrees[p->n_sp_degrees - 1] > 1;
  size_t steps = p->steps, n = p->n_micro;
  r.tok = calloc(steps, sizeof *r.tok);
  r.at = malloc((n ? n : 1) * sizeof *r.at);
  int rc = r.tok && r.at ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory");
  /* Units: the leader entries (sp_rank 0) that are not padding. */
  for (size_t x = 0; x < n && !rc; x++) {
    r.at[x] = UINT32_MAX;
    if (!p->micro[x].sp_rank && !p->micro[x].padded) r.at[x] = (uint32_t)r.n_units++;
    r.tok[step_of(&r, x)] += p->micro[x].sp_rank ? 0 : tok_at(p, x);
  }
  int any = 0;
  for (uint32_t s = 0; s < steps && !rc; s++) any |= !in_range(&r, s);
  if (!rc && any) rc = ranger_alloc(&r);
  if (!rc && any) {
    for (size_t x = 0; x < n; x++)
      if (r.at[x] != UINT32_MAX) r.loc[r.at[x]] = (uint32_t)x;
    for (uint32_t s = 0; s < steps; s++) {
      judge_step(&r, s);
      sort_step(&r, s);
    }
    mend_all(&r, p->window ? p->window : AL_PLAN_DEFAULT_WINDOW);
    any = 0;
    for (uint32_t s = 0; s < steps; s++) any |= !in_range(&r, s);
    if (any && r.n_win > 1) mend_all(&r, p->steps); /* what the windows could not mend */
    rc = lay_out_again(&r, stream);
  }
  for (uint32_t s = 0; s < steps && !rc; s++)
    if (!in_range(&r, s)) {
      if (*first_out == UINT32_MAX) *first_out = s;
      (*out_of_range)++;
    }
  ranger_free(&r);
  return rc;
}
