/* The slot schedule: steps of K micro-batch slots, each slot a set of aligned sequence-parallel
 * groups covering the W ranks (docs/DESIGN.md, "Sequence parallelism"). What al_plan_build and
 * the re-plan use when a degree above 1 is allowed or the micro sync model is asked for.
 *
 * A batch of degree d takes d rank-slots ("units"). The batches' units are first made a
 * multiple of W x K (adaptive splits degree-1 batches in halves as the step schedule does; then
 * padding at, or dropping of, the smallest degree used). Adaptive cuts the sequence into windows
 * of about `window` steps, each a multiple of W x K units, and fills each window's slots by walking
 * its batches by per-rank cost, descending: a batch goes into the current slot when it fits and
 * waits otherwise (it opens a later slot first). With every degree a power of two dividing W and
 * the window's units a multiple of W, no slot is left with a hole: were r > 0 ranks left with
 * every remaining batch of a degree above r, every remaining degree would be a multiple of
 * q = 2^(floor(log2 r) + 1), which divides W, while the remaining units are r modulo W.
 * Cost order makes each slot's groups alike in cost (the micro model's step time is the sum of
 * the slots' slowest groups). The window's slots are then dealt to its steps, the costliest
 * first, each to the step with the smallest sum so far of its slots' slowest groups, so that the
 * steps are level too. Under the step model (ranks meet once per step) the groups of one degree
 * in a slot then go to the aligned places whose ranks carry the least so far in that step, which
 * levels each rank's sum over the step. Inside a slot the groups are laid out by degree,
 * descending, consecutively (aligned, as powers of two in descending order always are); groups of
 * one degree take their places in random order (the micro model) and the window's steps come in
 * random order, from the plan's seeded stream. Equal-token and adaptive-unbalanced fill the
 * slots in sequence order and take K of them a step, in order. */
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "planner/plan_internal.h"

static uint32_t deg(const plan_micro *m) { return m->sp_degree > 1 ? m->sp_degree : 1; }

static uint64_t units_of(const al_plan *p) {
  uint64_t u = 0;
  for (size_t i = 0; i < p->n_micro; i++) u += deg(&p->micro[i]);
  return u;
}

/* Split candidates: most samples first, later batches first on ties (as schedule.c). */
static int cmp_split(const void *a, const void *b, void *ctx) {
  const plan_micro *mi = ctx;
  const plan_micro *x = &mi[*(const uint32_t *)a], *y = &mi[*(const uint32_t *)b];
  if (x->n != y->n) return x->n > y->n ? -1 : 1;
  return (x->seq < y->seq) - (x->seq > y->seq);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Adaptive: splits degree-1 batches in halves (the most samples first) until the units are a
 * multiple of `per` or nothing splits. */
static int split_units(al_plan *p, uint64_t per) {
  uint64_t need = (per - units_of(p) % per) % per;
  uint32_t *cand = NULL;
  int rc = AL_OK;
  while (need && !rc) {
    free(cand);
    cand = malloc((p->n_micro ? p->n_micro : 1) * sizeof *cand);
    if (!cand) return al_set_error(AL_ENOMEM, "plan: out of memory");
    size_t h = 0;
    for (size_t i = 0; i < p->n_micro; i++)
      if (deg(&p->micro[i]) == 1 && p->micro[i].n >= 2) cand[h++] = (uint32_t)i;
    if (!h) break;
    qsort_r(cand, h, sizeof *cand, cmp_split, p->micro);
    if (h > need) h = (size_t)need;
    qsort(cand, h, sizeof *cand, cmp_u32);
    for (size_t q = 0; q < h && !rc; q++) rc = plan_split_micro(p, cand[q]);
    need -= h;
  }
  free(cand);
  return rc;
}

/* The rest of the units up to a multiple of `per`: padding (one-sample repeats of the last
 * batches of the smallest degree used) or, dropping, the last batches of that degree. */
static int pad_or_drop_units(al_plan *p, uint64_t per) {
  uint64_t rem = units_of(p) % per;
  if (!rem) return AL_OK;
  uint32_t dpad = UINT32_MAX;
  for (size_t i = 0; i < p->n_micro; i++)
    if (deg(&p->micro[i]) < dpad) dpad = deg(&p->micro[i]);
  /* Every degree used is a multiple of dpad and dpad divides W: rem and per - rem are too. */
  size_t have = 0;
  for (size_t i = p->n_micro; i-- > 0;) have += deg(&p->micro[i]) == dpad;
  if (p->last_step == AL_LAST_DROP && have >= rem / dpad) {
    uint64_t left = rem / dpad;
    for (size_t i = p->n_micro; i-- > 0 && left;)
      if (deg(&p->micro[i]) == dpad) {
        plan_micro *m = &p->micro[i];
        for (uint32_t k = 0; k < m->n; k++) p->status[p->mb[m->first + k]] = AL_KEY_DROPPED;
        p->dropped += m->n;
        m->n = 0; /* removed below */
        left--;
      }
    size_t w = 0;
    for (size_t i = 0; i < p->n_micro; i++)
      if (p->micro[i].n) p->micro[w++] = p->micro[i];
    p->n_micro = w;
    return AL_OK;
  }
  uint64_t add = (per - rem) / dpad;
  /* The last min(add, have) batches of degree dpad, cycled. */
  size_t nl = have < add ? have : (size_t)add;
  uint32_t *like = malloc((nl ? nl : 1) * sizeof *like);
  if (!like) return al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t k = nl;
  for (size_t i = p->n_micro; i-- > 0 && k;)
    if (deg(&p->micro[i]) == dpad) like[--k] = (uint32_t)i;
  int rc = AL_OK;
  for (uint64_t q = 0; q < add && !rc; q++) {
    const plan_micro *l = &p->micro[like[q % nl]];
    uint32_t s = p->mb[l->first], b = l->bucket;
    rc = grow_array((void **)&p->mb, &p->cap_mb, p->n_mb + 1, sizeof *p->mb, "plan samples");
    if (!rc) {
      p->mb[p->n_mb++] = s;
      rc = plan_push_micro(p, p->n_mb - 1, 1, b, 1);
    }
  }
  free(like);
  return rc;
}

/* What a window's filling and dealing use, sized for the whole plan once. */
typedef struct slotter {
  const al_plan *p;
  uint32_t *items;    /* the window's batches in walking order */
  uint32_t *placed;   /* the slots' batches, slot after slot */
  uint64_t *slot_at;  /* per slot: its first entry in placed (n_slots + 1) */
  double *slot_max;   /* per slot: its slowest group's cost */
  uint32_t *slot_lo;  /* per slot: the lowest sequence number among its batches */
  uint32_t *slot_ord; /* slots by slot_max, descending */
  uint32_t *step_of;  /* per slot: its step in the window */
  uint32_t *in_step;  /* per step: its K slots */
  uint32_t *n_in;     /* per step: slots dealt so far */
  double *step_sum;   /* per step: the sum of its slots' slowest groups */
  uint32_t *perm;     /* the window's step order */
  double *load;       /* per rank: its sum so far in the step being laid out */
  uint32_t *blocks;   /* one slot's places of one degree (scratch) */
  uint32_t *group;    /* one slot's batches by degree (scratch) */
  size_t heads[AL_PLAN_MAX_SP_DEGREES], ends[AL_PLAN_MAX_SP_DEGREES];
  uint32_t *queue; /* the window's batches grouped by degree, walking order inside */
} slotter;

static void slotter_free(slotter *s) {
  free(s->items), free(s->placed), free(s->slot_at), free(s->slot_max), free(s->slot_lo),
      free(s->slot_ord);
  free(s->step_of), free(s->in_step), free(s->n_in), free(s->step_sum), free(s->perm);
  free(s->load), free(s->blocks), free(s->group), free(s->queue);
}

static int slotter_init(slotter *s, const al_plan *p, size_t n, size_t slots) {
  memset(s, 0, sizeof *s);
  s->p = p;
  size_t N = n ? n : 1, S = slots ? slots : 1, W = p->world;
  s->items = malloc(N * sizeof *s->items);
  s->queue = malloc(N * sizeof *s->queue);
  s->placed = malloc(N * sizeof *s->placed);
  s->slot_at = malloc((S + 1) * sizeof *s->slot_at);
  s->slot_max = malloc(S * sizeof *s->slot_max);
  s->slot_ord = malloc(S * sizeof *s->slot_ord);
  s->slot_lo = malloc(S * sizeof *s->slot_lo);
  s->step_of = malloc(S * sizeof *s->step_of);
  s->in_step = malloc(S * sizeof *s->in_step);
  s->n_in = malloc(S * sizeof *s->n_in);
  s->step_sum = malloc(S * sizeof *s->step_sum);
  s->perm = malloc(S * sizeof *s->perm);
  s->load = malloc(W * sizeof *s->load);
  s->blocks = malloc(W * sizeof *s->blocks);
  s->group = malloc(W * sizeof *s->group);
  if (!s->items || !s->queue || !s->placed || !s->slot_at || !s->slot_max || !s->slot_ord ||
      !s->slot_lo || !s->step_of || !s->in_step || !s->n_in || !s->step_sum || !s->perm ||
      !s->load || !s->blocks || !s->group)
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  return AL_OK;
}

static uint32_t degree_index(const al_plan *p, uint32_t d) {
  for (uint32_t t = 0; t < p->n_sp_degrees; t++)
    if (p->sp_degrees[t] == d) return t;
  return 0;
}

/* Fills the window's slots from items[0..m) (walking order): each slot takes, while ranks are
 * left, the first waiting batch that fits. Returns the slot count in *n_slots. */
static int fill_slots(slotter *s, size_t m, size_t *n_slots) {
  const al_plan *p = s->p;
  uint32_t nd = p->n_sp_degrees, W = p->world;
  size_t cnt[AL_PLAN_MAX_SP_DEGREES] = {0};
  for (size_t x = 0; x < m; x++) cnt[degree_index(p, deg(&p->micro[s->items[x]]))]++;
  size_t off = 0;
  for (uint32_t t = 0; t < nd; t++) s->heads[t] = off, off += cnt[t], s->ends[t] = s->heads[t];
  /* queue keeps each degree's batches in walking order; pos[] is their place in it. */
  for (size_t x = 0; x < m; x++) {
    uint32_t t = degree_index(p, deg(&p->micro[s->items[x]]));
    s->queue[s->ends[t]++] = (uint32_t)x;
  }
  size_t placed = 0, slots = 0;
  while (placed < m) {
    s->slot_at[slots] = placed;
    uint32_t left = W, lo = UINT32_MAX;
    double mx = 0;
    while (left) {
      uint32_t best = UINT32_MAX, bt = 0;
      for (uint32_t t = 0; t < nd && p->sp_degrees[t] <= left; t++)
        if (s->heads[t] < s->ends[t] && s->queue[s->heads[t]] < best)
          best = s->queue[s->heads[t]], bt = t;
      if (best == UINT32_MAX)
        return al_set_error(AL_EINVAL,
                            "plan: internal error: slot %zu of a window left with %u ranks free",
                            slots, left);
      s->heads[bt]++;
      uint32_t it = s->items[best];
      s->placed[placed++] = it;
      left -= p->sp_degrees[bt];
      if (p->micro[it].cost > mx) mx = p->micro[it].cost;
      if (p->micro[it].seq < lo) lo = p->micro[it].seq;
    }
    s->slot_lo[slots] = lo;
    s->slot_max[slots++] = mx;
  }
  s->slot_at[slots] = placed;
  *n_slots = slots;
  return AL_OK;
}

static int cmp_slot_desc(const void *a, const void *b, void *ctx) {
  const double *mx = ctx;
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  if (mx[x] != mx[y]) return mx[x] < mx[y] ? 1 : -1;
  return (x > y) - (x < y);
}

/* Adaptive: the slots, costliest first, each to the step (with fewer than K) whose slots' sum
 * of slowest groups is smallest so far (ties: the lower step). Others: K in order. */
static void deal_slots(slotter *s, size_t n_slots, size_t steps, int balance) {
  uint32_t K = s->p->micro_per_step;
  for (size_t t = 0; t < steps; t++) s->n_in[t] = 0, s->step_sum[t] = 0;
  for (size_t q = 0; q < n_slots; q++) s->slot_ord[q] = (uint32_t)q;
  if (balance) qsort_r(s->slot_ord, n_slots, sizeof *s->slot_ord, cmp_slot_desc, s->slot_max);
  for (size_t q = 0; q < n_slots; q++) {
    uint32_t sl = s->slot_ord[q];
    size_t best = q / K;
    if (balance) {
      best = SIZE_MAX;
      for (size_t t = 0; t < steps; t++)
        if (s->n_in[t] < K && (best == SIZE_MAX || s->step_sum[t] < s->step_sum[best])) best = t;
    }
    s->in_step[best * K + s->n_in[best]++] = sl;
    s->step_sum[best] += s->slot_max[sl];
    s->step_of[sl] = (uint32_t)best;
  }
}

/* A step's slots run in the order of their batches' places in the sequence. */
static int cmp_slot_seq(const void *a, const void *b, void *ctx) {
  const uint32_t *lo = ctx;
  uint32_t x = lo[*(const uint32_t *)a], y = lo[*(const uint32_t *)b];
  return (x > y) - (x < y);
}

/* A slot's batches by degree, descending, then cost, descending (stable by place). */
static int cmp_group(const void *a, const void *b, void *ctx) {
  const plan_micro *mi = ctx;
  const plan_micro *x = &mi[*(const uint32_t *)a], *y = &mi[*(const uint32_t *)b];
  if (deg(x) != deg(y)) return deg(x) < deg(y) ? 1 : -1;
  if (x->cost != y->cost) return x->cost < y->cost ? 1 : -1;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The highest load among ranks [g, g + d). */
static double block_load(const double *load, uint32_t g, uint32_t d) {
  double mx = load[g];
  for (uint32_t q = 1; q < d; q++)
    if (load[g + q] > mx) mx = load[g + q];
  return mx;
}

/* Lays out slot `sl` as micro-batch k of step `step` (global, from 0) into out: its groups by
 * degree descending at consecutive aligned places; groups of one degree take their places in
 * random order, or, under the step model, the costliest the least loaded place. */
static void lay_out_slot(slotter *s, plan_rng *rng, uint32_t sl, size_t step, uint32_t k,
                         plan_micro *out) {
  const al_plan *p = s->p;
  uint32_t W = p->world, K = p->micro_per_step;
  uint64_t a = s->slot_at[sl], b = s->slot_at[sl + 1];
  uint32_t ng = (uint32_t)(b - a);
  memcpy(s->group, s->placed + a, ng * sizeof *s->group);
  qsort_r(s->group, ng, sizeof *s->group, cmp_group, p->micro);
  uint32_t pos = 0;
  for (uint32_t i = 0; i < ng;) {
    uint32_t d = deg(&p->micro[s->group[i]]), j = i;
    while (j < ng && deg(&p->micro[s->group[j]]) == d) j++;
    uint32_t nb = j - i;
    for (uint32_t q = 0; q < nb; q++) s->blocks[q] = pos + q * d;
    plan_shuffle_u32(rng, s->blocks, nb);
    if (p->sync == AL_SYNC_STEP) {
      /* Each block's load is its ranks' highest; stable among equals (insertion sort keeps the
       * random order of equal loads). */
      for (uint32_t q = 1; q < nb; q++)
        for (uint32_t r = q; r > 0 && block_load(s->load, s->blocks[r - 1], d) >
                                          block_load(s->load, s->blocks[r], d);
             r--) {
          uint32_t t = s->blocks[r];
          s->blocks[r] = s->blocks[r - 1];
          s->blocks[r - 1] = t;
        }
    }
    for (uint32_t q = 0; q < nb; q++) {
      const plan_micro *m = &p->micro[s->group[i + q]];
      uint32_t g = s->blocks[q];
      for (uint32_t r = 0; r < d; r++) {
        plan_micro *o = &out[((step * W) + g + r) * K + k];
        *o = *m;
        o->sp_degree = d;
        o->sp_rank = r;
        s->load[g + r] += m->cost;
      }
    }
    pos += nb * d;
    i = j;
  }
}

/* One window: batches [i0, i1) of the sequence (units a multiple of W x K) as steps from
 * global step `step0` on. */
static int pack_window(slotter *s, plan_rng *rng, size_t i0, size_t i1, size_t step0,
                       plan_micro *out, size_t *steps_out) {
  const al_plan *p = s->p;
  uint32_t K = p->micro_per_step;
  int adaptive = p->policy == AL_POLICY_ADAPTIVE;
  size_t m = i1 - i0, n_slots = 0;
  for (size_t x = 0; x < m; x++) s->items[x] = (uint32_t)(i0 + x);
  if (adaptive) qsort_r(s->items, m, sizeof *s->items, plan_cmp_micro_cost, p->micro);
  int rc = fill_slots(s, m, &n_slots);
  if (rc) return rc;
  size_t steps = n_slots / K;
  deal_slots(s, n_slots, steps, adaptive);
  for (size_t t = 0; t < steps; t++) s->perm[t] = (uint32_t)t;
  if (adaptive) plan_shuffle_u32(rng, s->perm, steps);
  for (size_t ti = 0; ti < steps; ti++) {
    uint32_t *sl = s->in_step + (size_t)s->perm[ti] * K;
    qsort_r(sl, K, sizeof *sl, cmp_slot_seq, s->slot_lo);
    memset(s->load, 0, p->world * sizeof *s->load);
    /* Under the step model the costliest slots are placed first (they decide the levelling);
     * ord (the step's slots by cost) is the window's slot_ord scratch, no longer needed. */
    uint32_t *ord = s->slot_ord;
    for (uint32_t k = 0; k < K; k++) ord[k] = sl[k], s->step_of[sl[k]] = k;
    if (p->sync == AL_SYNC_STEP) qsort_r(ord, K, sizeof *ord, cmp_slot_desc, s->slot_max);
    /* step_of (dealing's, done with) now holds each slot's place k in the step. */
    for (uint32_t q = 0; q < K; q++)
      lay_out_slot(s, rng, ord[q], step0 + ti, s->step_of[ord[q]], out);
  }
  *steps_out = steps;
  return AL_OK;
}

int plan_relayout_slots(al_plan *p, uint32_t step, plan_rng *rng) {
  uint32_t W = p->world, K = p->micro_per_step;
  size_t per = (size_t)W * K, got = 0;
  plan_micro *out = malloc(per * sizeof *out);
  slotter s;
  int rc = slotter_init(&s, p, per, K);
  if (!rc && !out) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  if (!rc) rc = pack_window(&s, rng, (size_t)step * per, (size_t)(step + 1) * per, 0, out, &got);
  if (!rc) memcpy(p->micro + (size_t)step * per, out, per * sizeof *out);
  slotter_free(&s);
  free(out);
  return rc;
}

int plan_schedule_slots(al_plan *p, plan_rng *rng) {
  uint32_t W = p->world, K = p->micro_per_step;
  uint64_t per = (uint64_t)W * K;
  int rc = p->policy == AL_POLICY_ADAPTIVE ? split_units(p, per) : AL_OK;
  if (!rc) rc = pad_or_drop_units(p, per);
  if (rc) return rc;
  uint64_t units = units_of(p);
  size_t steps = (size_t)(units / per);
  if (steps > UINT32_MAX) return al_set_error(AL_ERANGE, "plan: more than 2^32 - 1 steps");
  plan_micro *out = grow_big_block(units ? (size_t)units : 1, sizeof *out);
  uint64_t *slot = grow_big_block(steps * W + 1, sizeof *slot);
  slotter s;
  if (!rc) rc = slotter_init(&s, p, p->n_micro, steps * K);
  if (!rc && (!out || !slot)) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  /* Windows of `window` steps' units, each ending where the units are a multiple of W x K;
   * the last takes the tail when less than two windows are left. Others: one window. */
  uint64_t per_win = p->policy == AL_POLICY_ADAPTIVE ? (uint64_t)p->window * per : UINT64_MAX;
  size_t done = 0;
  uint64_t left = units;
  for (size_t i = 0; i < p->n_micro && !rc;) {
    size_t j = i;
    uint64_t u = 0;
    if (left < 2 * per_win || per_win == UINT64_MAX) {
      j = p->n_micro, u = left;
    } else {
      while (j < p->n_micro && (u < per_win || u % per)) u += deg(&p->micro[j++]);
    }
    size_t got = 0;
    rc = pack_window(&s, rng, i, j, done, out, &got);
    done += got;
    left -= u;
    i = j;
  }
  slotter_free(&s);
  if (rc) {
    free(out);
    free(slot);
    return rc;
  }
  for (size_t i = 0; i <= steps * W; i++) slot[i] = (uint64_t)i * K;
  free(p->micro);
  p->micro = out;
  p->n_micro = p->cap_micro = (size_t)units;
  free(p->slot);
  p->slot = slot;
  p->steps = (uint32_t)steps;
  return AL_OK;
}
