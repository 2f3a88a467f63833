/* The levelling swaps of the K > 1 schedule (schedule.c deals a window's batches to its
 * (step, rank) bins, K each; these swaps level what the dealing rounds left). Each swap
 * trades one batch of a bin for one of another bin:
 *   1. the fullest and the emptiest bin trade the pair that brings their sums closest, while
 *      that narrows their gap;
 *   2. when no such pair exists, the fullest bin trades with whichever other bin gives the
 *      lowest new maximum of the two (below the fullest's sum), or else the emptiest with
 *      whichever gives the highest new minimum.
 * Stops when neither finds a swap, after LEVEL_SWAPS swaps, or after LEVEL_WIDE_SWAPS of
 * step 2, per window. Step 1 alone stalls where only a third bin can take the fullest bin's
 * batch; step 2 reaches that bin: on the e2e corpus at W = 8, K = 4 the predicted step-time CV
 * is 2.28 % with step 1 alone and 1.15 % with both. The cap bounds step 2's cost where a pass
 * is long: for the 10M-sample plan at W = 64, K = 4 (4,096 bins a window) step 2 costs about
 * 10 % more CPU time (BENCHMARKS.md, planner). Ties go to the lower index: deterministic.
 *
 * Two searches find the same swaps. PAIRS tries every pair of the two bins' batches: K x K
 * per pair of bins, which is cheapest for small K but took most of a plan's time at large K
 * (K = 65,536 on one rank: 14 s for 500 samples, all but 1 % of it in step 1's pairs).
 * SORTED keeps each bin's batches sorted by (cost, slot). What a swap is judged by (the gap
 * left, or the new maximum or minimum of the two bins) is, for a batch of cost ci, monotone
 * on each side of one crossing as the partner's cost grows, in floating point too (every
 * operation involved rounds monotonically): a binary search finds the crossing, the best
 * value is at one of its two sides, and the partners that reach it form one run of the
 * sorted order, whose smallest slot is the first element of one of its equal-cost runs. A
 * bin's batches of equal cost have the same best partner, so one search per distinct cost
 * (its smallest slot first) finds the PAIRS answer: the lowest slot i, then the lowest slot j
 * among the pairs reaching the best value. NaN breaks the monotonicity, so non-finite costs
 * use PAIRS (AUTO). */
#include "planner/bin_level_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"

#define LEVEL_SWAPS 512
#define LEVEL_WIDE_SWAPS 64

/* What a search maximises or minimises: step 1's gap left (GAP), step 2 from the fullest bin
 * (HI: the new maximum, minimised) or from the emptiest (LO: the new minimum, maximised). */
typedef enum fit_kind { FIT_GAP, FIT_HI, FIT_LO } fit_kind;

/* One bin's batch in the sorted search: its cost and slot (0..K-1 in member order). */
typedef struct level_ent {
  double c;
  uint32_t s;
} level_ent;

typedef struct level_state {
  plan_bins *g;
  level_ent *e; /* SORTED: bin b's batches at [b K, b K + K), by (cost, slot) */
} level_state;

static double slot_cost(const plan_bins *g, size_t b, uint32_t s) {
  return g->cost[g->member[b * g->K + s]];
}

/* PAIRS, step 1: the pair of hi and lo that leaves the smallest gap below `gap`. */
static int pairs_gap(const plan_bins *g, size_t hi, size_t lo, double gap, uint32_t *oi,
                     uint32_t *oj) {
  double best = gap;
  int found = 0;
  for (uint32_t i = 0; i < g->K; i++) {
    double ci = slot_cost(g, hi, i);
    for (uint32_t j = 0; j < g->K; j++) {
      double d = ci - slot_cost(g, lo, j);
      double after = fabs(gap - 2 * d);
      if (d > 0 && after < best) best = after, *oi = i, *oj = j, found = 1;
    }
  }
  return found;
}

/* PAIRS, step 2: the best trade of bin `ext` (the fullest when hi, else the emptiest) with
 * any other bin; 0 when none improves on ext's sum. */
static int pairs_wide(const plan_bins *g, size_t ext, int hi, size_t *ob, uint32_t *oi,
                      uint32_t *oj) {
  double le = g->load[ext], best = le;
  int found = 0;
  for (size_t b = 0; b < g->nb; b++) {
    if (b == ext) continue;
    double lb = g->load[b];
    if (hi ? lb >= le : lb <= le) continue;
    for (uint32_t i = 0; i < g->K; i++) {
      double ci = slot_cost(g, ext, i);
      for (uint32_t j = 0; j < g->K; j++) {
        double d = ci - slot_cost(g, b, j); /* what ext gives away, net */
        if (hi ? d <= 0 : d >= 0) continue;
        /* hi: the new maximum of the two must fall below le; lo: the new
         * minimum must rise above it. */
        double e = le - d, o = lb + d, worst = hi ? fmax(e, o) : fmin(e, o);
        if (hi ? worst < best : worst > best) best = worst, *ob = b, *oi = i, *oj = j, found = 1;
      }
    }
  }
  return found;
}

/* A partner search: the partner bin's sorted batches, the cost ci of the batch it trades
 * away, and the sums involved (GAP: a = the gap; HI/LO: a = ext's sum, b = the partner's). */
typedef struct cand {
  const level_ent *e;
  double ci, a, b;
} cand;

/* The same expressions as PAIRS, so the same values. */
static double gap_after(const cand *q, size_t r) {
  double d = q->ci - q->e[r].c;
  return q->a - 2 * d;
}
static double ext_after(const cand *q, size_t r) {
  double d = q->ci - q->e[r].c;
  return q->a - d;
}
static double other_after(const cand *q, size_t r) {
  double d = q->ci - q->e[r].c;
  return q->b + d;
}

/* Predicates, false then true as r grows (the partner's cost grows): gap_after, ext_after
 * grow and other_after falls. */
static int p_gap_nonneg(const cand *q, size_t r, double t) { return (void)t, gap_after(q, r) >= 0; }
static int p_gap_abs_le(const cand *q, size_t r, double t) { return fabs(gap_after(q, r)) <= t; }
static int p_gap_gt(const cand *q, size_t r, double t) { return gap_after(q, r) > t; }
static int p_ext_ge_other(const cand *q, size_t r, double t) {
  return (void)t, ext_after(q, r) >= other_after(q, r);
}
static int p_ext_gt_other(const cand *q, size_t r, double t) {
  return (void)t, ext_after(q, r) > other_after(q, r);
}
static int p_other_le(const cand *q, size_t r, double t) { return other_after(q, r) <= t; }
static int p_other_lt(const cand *q, size_t r, double t) { return other_after(q, r) < t; }
static int p_ext_gt(const cand *q, size_t r, double t) { return ext_after(q, r) > t; }
static int p_ext_ge(const cand *q, size_t r, double t) { return ext_after(q, r) >= t; }

typedef int (*cand_pred)(const cand *q, size_t r, double t);

/* The first r in [lo, hi) where pred holds (hi when none). */
static size_t first_true(const cand *q, size_t lo, size_t hi, cand_pred pred, double t) {
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (pred(q, mid, t))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* The first r in [lo, hi) whose cost is above c (e ascending by cost). */
static size_t cost_above(const level_ent *e, size_t lo, size_t hi, double c) {
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (e[mid].c > c)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* The first r in [lo, hi) whose cost is c or above. */
static size_t cost_at_least(const level_ent *e, size_t lo, size_t hi, double c) {
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (e[mid].c >= c)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* The smallest slot of e[L, R): the first slot of each equal-cost run. */
static uint32_t min_slot(const level_ent *e, size_t L, size_t R) {
  uint32_t s = UINT32_MAX;
  for (size_t r = L; r < R; r = cost_above(e, r, R, e[r].c))
    if (e[r].s < s) s = e[r].s;
  return s;
}

/* The figure of partner r: GAP the gap left, HI the new maximum, LO the new minimum. */
static double figure(const cand *q, fit_kind kind, size_t r) {
  if (kind == FIT_GAP) return fabs(gap_after(q, r));
  double e = ext_after(q, r), o = other_after(q, r);
  return kind == FIT_HI ? fmax(e, o) : fmin(e, o);
}

/* The best partner of a batch of cost q->ci among the K sorted batches of q->e: its figure in
 * *m and its smallest slot in *slot; 0 when no batch qualifies (GAP, HI: the partner must cost
 * less than ci; LO: more). The figure falls on [lo, q0) and rises on [q0, hi) (HI, GAP; LO the
 * other way round), so the best is at q0 - 1 or q0 and the partners reaching it are [L, R). */
static int best_partner(const cand *q, fit_kind kind, size_t K, double *m, uint32_t *slot) {
  static const cand_pred cross[] = {p_gap_nonneg, p_ext_ge_other, p_ext_gt_other};
  static const cand_pred left[] = {p_gap_abs_le, p_other_le, p_ext_ge};
  static const cand_pred right[] = {p_gap_gt, p_ext_gt, p_other_lt};
  size_t lo = 0, hi = K;
  if (kind == FIT_LO)
    lo = cost_above(q->e, 0, K, q->ci);
  else
    hi = cost_at_least(q->e, 0, K, q->ci);
  if (lo == hi) return 0;
  size_t q0 = first_true(q, lo, hi, cross[kind], 0);
  int has_l = q0 > lo, has_r = q0 < hi;
  double vl = has_l ? figure(q, kind, q0 - 1) : 0, vr = has_r ? figure(q, kind, q0) : 0;
  if (!has_l)
    *m = vr;
  else if (!has_r)
    *m = vl;
  else
    *m = kind == FIT_LO ? fmax(vl, vr) : fmin(vl, vr);
  size_t L = has_l && vl == *m ? first_true(q, lo, q0, left[kind], *m) : q0;
  size_t R = has_r && vr == *m ? first_true(q, q0, hi, right[kind], *m) : q0;
  *slot = min_slot(q->e, L, R);
  return 1;
}

/* SORTED: the best trade of bin ext with bin other (figures of `kind`, sums a and b as in
 * cand), if it beats *best: then *best, *oi (ext's slot) and *oj (other's) are set. */
static int sorted_search(const level_state *st, size_t ext, size_t other, fit_kind kind, double a,
                         double b, double *best, uint32_t *oi, uint32_t *oj) {
  size_t K = st->g->K;
  const level_ent *ee = st->e + ext * K;
  cand q = {st->e + other * K, 0, a, b};
  int found = 0;
  double bm = 0;
  uint32_t bi = 0, bj = 0;
  for (size_t r = 0; r < K; r = cost_above(ee, r, K, ee[r].c)) {
    double m;
    uint32_t sj, si = ee[r].s;
    q.ci = ee[r].c;
    if (!best_partner(&q, kind, K, &m, &sj)) continue;
    int better = !found || (kind == FIT_LO ? m > bm : m < bm) || (m == bm && si < bi);
    if (better) found = 1, bm = m, bi = si, bj = sj;
  }
  if (!found || !(kind == FIT_LO ? bm > *best : bm < *best)) return 0;
  *best = bm, *oi = bi, *oj = bj;
  return 1;
}

/* SORTED, step 2: as pairs_wide. */
static int sorted_wide(const level_state *st, size_t ext, int hi, size_t *ob, uint32_t *oi,
                       uint32_t *oj) {
  const plan_bins *g = st->g;
  double le = g->load[ext], best = le;
  int found = 0;
  for (size_t b = 0; b < g->nb; b++) {
    if (b == ext) continue;
    double lb = g->load[b];
    if (hi ? lb >= le : lb <= le) continue;
    if (sorted_search(st, ext, b, hi ? FIT_HI : FIT_LO, le, lb, &best, oi, oj)) *ob = b, found = 1;
  }
  return found;
}

static int ent_before(double c, uint32_t s, const level_ent *x) {
  return c < x->c || (c == x->c && s < x->s);
}

/* The first r in [0, K) whose entry is not before (c, s). */
static size_t ent_lower(const level_ent *e, size_t K, double c, uint32_t s) {
  size_t lo = 0, hi = K;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (ent_before(c, s, &e[mid]) || (e[mid].c == c && e[mid].s == s))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/* Slot s of a sorted bin now costs c_new instead of c_old: moves its entry into place. */
static void ent_replace(level_ent *e, size_t K, uint32_t s, double c_old, double c_new) {
  size_t p = ent_lower(e, K, c_old, s), q = ent_lower(e, K, c_new, s);
  level_ent v = {c_new, s};
  if (q > p) {
    memmove(e + p, e + p + 1, (q - 1 - p) * sizeof *e);
    e[q - 1] = v;
  } else {
    memmove(e + q + 1, e + q, (p - q) * sizeof *e);
    e[q] = v;
  }
}

static void swap_items(level_state *st, size_t a, uint32_t i, size_t b, uint32_t j) {
  plan_bins *g = st->g;
  size_t K = g->K;
  uint32_t xi = g->member[a * K + i], xj = g->member[b * K + j];
  double ci = g->cost[xi], cj = g->cost[xj], d = ci - cj;
  g->member[a * K + i] = xj, g->member[b * K + j] = xi;
  g->bin_of[xi] = (uint32_t)b, g->bin_of[xj] = (uint32_t)a;
  g->load[a] -= d, g->load[b] += d;
  if (st->e) {
    ent_replace(st->e + a * K, K, i, ci, cj);
    ent_replace(st->e + b * K, K, j, cj, ci);
  }
}

static int cmp_ent(const void *x, const void *y) {
  const level_ent *a = x, *b = y;
  if (a->c != b->c) return a->c < b->c ? -1 : 1;
  return (a->s > b->s) - (a->s < b->s);
}

/* SORTED's copies of the bins, each by (cost, slot); how == PAIRS (or AUTO at small K or
 * with a non-finite cost) leaves st->e NULL. */
static int level_start(level_state *st, plan_level_search how) {
  plan_bins *g = st->g;
  size_t K = g->K, m = g->nb * K;
  st->e = NULL;
  if (how == PLAN_LEVEL_PAIRS) return AL_OK;
  if (how == PLAN_LEVEL_AUTO) {
    /* Finite costs whose sum of magnitudes is far from overflowing: every sum and difference
     * a search or a swap forms is then finite too. */
    double total = 0;
    for (size_t x = 0; x < m; x++) total += fabs(g->cost[x]);
    if (K <= PLAN_LEVEL_PAIRS_MAX_K || !(total < 1e300)) return AL_OK;
  }
  st->e = malloc((m ? m : 1) * sizeof *st->e);
  if (!st->e) return al_set_error(AL_ENOMEM, "plan: out of memory levelling %zu bins", g->nb);
  for (size_t b = 0; b < g->nb; b++) {
    level_ent *e = st->e + b * K;
    for (uint32_t s = 0; s < K; s++) e[s].c = slot_cost(g, b, s), e[s].s = s;
    qsort(e, K, sizeof *e, cmp_ent);
  }
  return AL_OK;
}

/* One swap of step 1 or 2: 1 when made, 0 when none (or step 2's budget) is left. */
static int level_once(level_state *st, int *wide) {
  plan_bins *g = st->g;
  size_t hi = 0, lo = 0, ob = 0;
  for (size_t b = 1; b < g->nb; b++) {
    if (g->load[b] > g->load[hi]) hi = b;
    if (g->load[b] < g->load[lo]) lo = b;
  }
  double gap = g->load[hi] - g->load[lo], best = gap;
  uint32_t bi = 0, bj = 0;
  int found = st->e ? sorted_search(st, hi, lo, FIT_GAP, gap, 0, &best, &bi, &bj)
                    : pairs_gap(g, hi, lo, gap, &bi, &bj);
  if (found) {
    swap_items(st, hi, bi, lo, bj);
    return 1;
  }
  if (++*wide > LEVEL_WIDE_SWAPS) return 0;
  if (st->e ? sorted_wide(st, hi, 1, &ob, &bi, &bj) : pairs_wide(g, hi, 1, &ob, &bi, &bj)) {
    swap_items(st, hi, bi, ob, bj);
    return 1;
  }
  if (st->e ? sorted_wide(st, lo, 0, &ob, &bi, &bj) : pairs_wide(g, lo, 0, &ob, &bi, &bj)) {
    swap_items(st, lo, bi, ob, bj);
    return 1;
  }
  return 0;
}

int plan_level_bins(plan_bins *g, plan_level_search how) {
  size_t K = g->K, m = g->nb * K;
  /* Members of each bin: slots b K .. b K + K of member, in batch order. */
  memset(g->count, 0, g->nb * sizeof *g->count);
  for (size_t x = 0; x < m; x++) {
    uint32_t b = g->bin_of[x];
    g->member[(size_t)b * K + g->count[b]++] = (uint32_t)x;
  }
  level_state st = {g, NULL};
  int rc = level_start(&st, how);
  if (rc) return rc;
  int wide = 0;
  for (int it = 0; it < LEVEL_SWAPS && level_once(&st, &wide); it++) {
  }
  free(st.e);
  return AL_OK;
}
