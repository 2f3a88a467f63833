/* The schedule: shuffle, batches inside buckets, then steps x ranks.
 *
 * Every step gives every rank exactly K micro-batches (al_plan.micro_per_step):
 * a step takes W x K batches. Equal-token deals the shuffled batch sequence
 * W x K at a time, round-robin over ranks. Adaptive cuts the sequence into
 * windows of `window` steps and sorts each window's batches by predicted cost.
 * K = 1: each run of W neighbours is one step (similar batches, so the ranks
 * are level). K > 1: the window's batches are dealt to its steps x W
 * (step, rank) bins, K each, so that all bins of the window carry about the
 * same cost (rounds, then swaps); bins of similar sums then make a step. So
 * steps cost about the same as each other too, as far as the batches allow.
 * Balancing only inside windows keeps the epoch's order random at window
 * granularity: a long clip drawn early is still trained early. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "planner/bin_level_internal.h"
#include "planner/plan_internal.h"
#include "planner/rng_internal.h"

/* Appends one sample to mb (padding repeats live there too). */
static int push_sample(al_plan *p, uint32_t s) {
  int rc = grow_array((void **)&p->mb, &p->cap_mb, p->n_mb + 1, sizeof *p->mb, "plan samples");
  if (rc) return rc;
  p->mb[p->n_mb++] = s;
  return AL_OK;
}

int plan_form_batches(al_plan *p, const uint64_t *items, size_t n) {
  size_t nb = p->n_buckets;
  uint64_t *cnt = calloc(nb + 1, sizeof *cnt);
  uint64_t *off = calloc(nb + 1, sizeof *off);
  uint32_t *fill = calloc(nb ? nb : 1, sizeof *fill);
  uint32_t *buf = NULL;
  int rc = (cnt && off && fill) ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t batches = 0;
  if (!rc) {
    for (size_t i = 0; i < n; i++) cnt[items[i] >> 32]++;
    /* One open batch per bucket, at most min(B, count) long. */
    for (size_t b = 0; b < nb; b++) {
      uint64_t B = p->buckets[b].batch_size;
      off[b + 1] = off[b] + (cnt[b] < B ? cnt[b] : B);
      batches += (size_t)((cnt[b] + B - 1) / B);
    }
    buf = malloc((off[nb] ? off[nb] : 1) * sizeof *buf);
    if (!buf) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  /* Sizes are known up front: allocate once (padding needs at most W more). */
  if (!rc)
    rc = grow_array((void **)&p->mb, &p->cap_mb, n + p->world, sizeof *p->mb, "plan samples");
  if (!rc)
    rc = grow_array((void **)&p->micro, &p->cap_micro, batches + 2 * (size_t)p->world,
                    sizeof *p->micro, "plan micro-batches");
  for (size_t i = 0; i < n && !rc; i++) {
    uint32_t s = (uint32_t)items[i], b = (uint32_t)(items[i] >> 32);
    buf[off[b] + fill[b]++] = s;
    if (fill[b] == p->buckets[b].batch_size) {
      memcpy(p->mb + p->n_mb, buf + off[b], (size_t)fill[b] * sizeof *buf);
      rc = plan_push_micro(p, p->n_mb, fill[b], b, 0);
      p->n_mb += fill[b];
      fill[b] = 0;
    }
  }
  for (size_t b = 0; b < nb && !rc; b++) {
    if (!fill[b]) continue;
    memcpy(p->mb + p->n_mb, buf + off[b], (size_t)fill[b] * sizeof *buf);
    rc = plan_push_micro(p, p->n_mb, fill[b], (uint32_t)b, 0);
    p->n_mb += fill[b];
  }
  free(cnt);
  free(off);
  free(fill);
  free(buf);
  return rc;
}

static void mark_dropped(al_plan *p, const plan_micro *m) {
  for (uint32_t k = 0; k < m->n; k++) p->status[p->mb[m->first + k]] = AL_KEY_DROPPED;
  p->dropped += m->n;
}

/* Padding micro-batch: one sample repeating the first sample of `like`. */
static int push_padding(al_plan *p, const plan_micro *like) {
  uint32_t s = p->mb[like->first], b = like->bucket;
  int rc = push_sample(p, s);
  if (!rc) rc = plan_push_micro(p, p->n_mb - 1, 1, b, 1);
  return rc;
}

/* Makes the batch count a multiple of `per` (W x K) by padding (one-sample
 * repeats of the first `rem` batches) or, with AL_LAST_DROP, by dropping the
 * last n % per batches. */
static int pad_or_drop(al_plan *p, size_t per) {
  size_t rem = p->n_micro % per;
  if (!rem) return AL_OK;
  if (p->last_step == AL_LAST_DROP) {
    for (size_t i = p->n_micro - rem; i < p->n_micro; i++) mark_dropped(p, &p->micro[i]);
    p->n_micro -= rem;
    return AL_OK;
  }
  size_t base = p->n_micro - rem;
  for (size_t q = 0; q < per - rem; q++) {
    plan_micro like = p->micro[base + q % rem];
    int rc = push_padding(p, &like);
    if (rc) return rc;
  }
  return AL_OK;
}

static int set_slots(al_plan *p, size_t steps, size_t per_rank) {
  size_t n = steps * p->world;
  p->steps = (uint32_t)steps;
  p->slot = grow_big_block(n + 1, sizeof *p->slot);
  if (!p->slot) return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i <= n; i++) p->slot[i] = (uint64_t)i * per_rank;
  return AL_OK;
}

/* The baseline: step s takes batches [s W K, (s + 1) W K) of the sequence;
 * batch s W K + j W + r is micro-batch j of rank r (round-robin), so a short
 * last step pads the last micro-batches of the ranks. */
static int deal_equal_token(al_plan *p) {
  uint32_t W = p->world, K = p->micro_per_step;
  size_t per = (size_t)W * K;
  int rc = pad_or_drop(p, per);
  if (rc) return rc;
  size_t steps = p->n_micro / per;
  if (K > 1) {
    plan_micro *out = grow_big_block(p->n_micro ? p->n_micro : 1, sizeof *out);
    if (!out) return al_set_error(AL_ENOMEM, "plan: out of memory");
    for (size_t s = 0; s < steps; s++)
      for (uint32_t r = 0; r < W; r++)
        for (uint32_t j = 0; j < K; j++)
          out[s * per + (size_t)r * K + j] = p->micro[s * per + (size_t)j * W + r];
    free(p->micro);
    p->micro = out;
    p->cap_micro = p->n_micro ? p->n_micro : 1;
  }
  return set_slots(p, steps, K);
}

/* Split candidates: most samples first, later batches first on ties. */
static int split_before(const plan_micro *a, const plan_micro *b) {
  return a->n > b->n || (a->n == b->n && a->seq > b->seq);
}

static void split_heap_down(const plan_micro *mi, uint32_t *h, size_t n, size_t i) {
  /* Min-heap by split priority: the root is the weakest candidate kept. */
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && split_before(&mi[h[m]], &mi[h[l]])) m = l;
    if (r < n && split_before(&mi[h[m]], &mi[h[r]])) m = r;
    if (m == i) return;
    uint32_t t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static void split_heap_up(const plan_micro *mi, uint32_t *h, size_t i) {
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!split_before(&mi[h[up]], &mi[h[i]])) return;
    uint32_t t = h[i];
    h[i] = h[up];
    h[up] = t;
    i = up;
  }
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* Adaptive: makes the batch count a multiple of `per` by splitting batches in
 * halves (the batches with the most samples first; the second half joins the
 * end of the sequence), so that no step is short and every sample stays real.
 * What cannot be split (only one-sample batches left) is padded or dropped. */
static int split_to_multiple(al_plan *p, size_t per) {
  size_t need = (per - p->n_micro % per) % per;
  uint32_t *heap = NULL;
  int rc = AL_OK;
  if (need) {
    heap = malloc(need * sizeof *heap);
    if (!heap) return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  while (need && !rc) {
    /* The `need` best candidates (a bounded min-heap over the batches; split_before is a
     * total order, so which batches it keeps does not depend on how the heap is kept). */
    size_t h = 0;
    for (size_t i = 0; i < p->n_micro; i++) {
      if (p->micro[i].n < 2) continue;
      if (h < need) {
        heap[h++] = (uint32_t)i;
        split_heap_up(p->micro, heap, h - 1);
      } else if (split_before(&p->micro[i], &p->micro[heap[0]])) {
        heap[0] = (uint32_t)i;
        split_heap_down(p->micro, heap, h, 0);
      }
    }
    if (!h) break;
    /* Split in index order: the appended halves then come out the same on every machine. */
    qsort(heap, h, sizeof *heap, cmp_u32);
    for (size_t q = 0; q < h && !rc; q++) rc = plan_split_micro(p, heap[q]);
    need -= h;
  }
  free(heap);
  if (!rc) rc = pad_or_drop(p, per);
  return rc;
}

typedef struct packer {
  uint32_t *items;   /* window items by cost */
  uint32_t *rank_of; /* per window item: rank within its step */
  uint32_t *perm;    /* step order inside the window */
  uint32_t *rperm;   /* rank order inside a step */
  uint32_t *byrank;  /* one step's items grouped by rank, K each */
  uint32_t *cnt;     /* per rank: items placed in byrank */
  double *bin_load;  /* K > 1: per (step, rank) bin of the window: its cost so far */
  uint32_t *bin_of;  /* K > 1: per window item (by cost): its bin */
  uint32_t *bins;    /* K > 1: bins by load (a sort buffer) */
  uint32_t *bin_pos; /* K > 1: per bin: its place in the window's step-major order */
  double *cost;      /* K > 1: per window item (by cost): its predicted cost */
  size_t cap_items, cap_steps;
} packer;

static void packer_free(packer *k) {
  free(k->items);
  free(k->rank_of);
  free(k->perm);
  free(k->rperm);
  free(k->byrank);
  free(k->cnt);
  free(k->bin_load);
  free(k->bin_of);
  free(k->bins);
  free(k->bin_pos);
  free(k->cost);
}

static int packer_init(packer *k, uint32_t W, uint32_t K) {
  memset(k, 0, sizeof *k);
  k->rperm = malloc(W * sizeof *k->rperm);
  k->byrank = malloc((size_t)W * K * sizeof *k->byrank);
  k->cnt = malloc(W * sizeof *k->cnt);
  if (!k->rperm || !k->byrank || !k->cnt) return al_set_error(AL_ENOMEM, "plan: out of memory");
  return AL_OK;
}

static int packer_reserve(packer *k, size_t items, size_t steps, uint32_t W, uint32_t K) {
  if (items > k->cap_items) {
    free(k->items), free(k->rank_of), free(k->bin_of), free(k->cost);
    k->items = malloc(items * sizeof *k->items);
    k->rank_of = malloc(items * sizeof *k->rank_of);
    k->bin_of = K > 1 ? malloc(items * sizeof *k->bin_of) : NULL;
    k->cost = K > 1 ? malloc(items * sizeof *k->cost) : NULL;
    k->cap_items = items;
    if (!k->items || !k->rank_of || (K > 1 && (!k->bin_of || !k->cost)))
      return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  if (steps > k->cap_steps) {
    size_t nbins = steps * W;
    free(k->perm), free(k->bin_load), free(k->bins), free(k->bin_pos);
    k->perm = malloc(steps * sizeof *k->perm);
    k->bin_load = K > 1 ? malloc(nbins * sizeof *k->bin_load) : NULL;
    k->bins = K > 1 ? malloc(nbins * sizeof *k->bins) : NULL;
    k->bin_pos = K > 1 ? malloc(nbins * sizeof *k->bin_pos) : NULL;
    k->cap_steps = steps;
    if (!k->perm || (K > 1 && (!k->bin_load || !k->bins || !k->bin_pos)))
      return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  return AL_OK;
}

/* qsort_r comparators: no globals, so plans may be built on several threads at once. */
static int cmp_seq(const void *a, const void *b, void *ctx) {
  const plan_micro *mi = ctx;
  uint32_t x = mi[*(const uint32_t *)a].seq, y = mi[*(const uint32_t *)b].seq;
  return (x > y) - (x < y);
}

/* Bins by load, descending (ties: lower index first). */
static int cmp_bin_desc(const void *a, const void *b, void *ctx) {
  const double *load = ctx;
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  if (load[x] != load[y]) return load[x] < load[y] ? 1 : -1;
  return (x > y) - (x < y);
}

/* K > 1: deals the window's batches items[0..m) (by cost, descending) to its
 * steps x W bins of K each, then makes steps of bins. Round 0 gives bin b the
 * b-th costliest batch; each later round deals the next steps x W batches so
 * that the bin carrying the most gets the cheapest of them; plan_level_bins (bin_level.c) then
 * swaps. The bins' sums come out level across the whole window (a costly clip
 * and cheap images share a rank), so steps cost about the same as each other,
 * not only their ranks. Then the bins, by sum, descending, are cut into steps
 * of W neighbours. Rewrites items[] step-major (each step's W x K batches)
 * with rank_of[] the batch's place (0..W-1) inside its step. */
static int deal_bins(const al_plan *p, packer *k, size_t steps) {
  uint32_t W = p->world, K = p->micro_per_step;
  size_t nb = steps * W, m = nb * K;
  for (size_t x = 0; x < m; x++) k->cost[x] = p->micro[k->items[x]].cost;
  for (size_t b = 0; b < nb; b++) {
    k->bin_of[b] = (uint32_t)b;
    k->bin_load[b] = k->cost[b];
    k->bins[b] = (uint32_t)b;
  }
  for (uint32_t j = 1; j < K; j++) {
    qsort_r(k->bins, nb, sizeof *k->bins, cmp_bin_desc, k->bin_load);
    for (size_t q = 0; q < nb; q++) {
      size_t x = (size_t)j * nb + (nb - 1 - q);
      uint32_t b = k->bins[q];
      k->bin_of[x] = b;
      k->bin_load[b] += k->cost[x];
    }
  }
  /* The swaps (bin_level.c); rank_of and bins are their scratch. */
  plan_bins g = {nb, K, k->cost, k->bin_of, k->bin_load, k->rank_of, k->bins};
  int rc = plan_level_bins(&g, PLAN_LEVEL_AUTO);
  if (rc) return rc;
  for (size_t b = 0; b < nb; b++) k->bins[b] = (uint32_t)b;
  qsort_r(k->bins, nb, sizeof *k->bins, cmp_bin_desc, k->bin_load);
  /* bins[q] is place q % W of step q / W: its batches go to slots from bin_pos. */
  for (size_t q = 0; q < nb; q++) k->bin_pos[k->bins[q]] = (uint32_t)q;
  /* Each batch's slot: its bin's place times K plus its rank inside the bin
   * (rank_of[0..nb) counts meanwhile); then rank_of holds the batches by slot. */
  uint32_t *cnt = k->rank_of;
  memset(cnt, 0, nb * sizeof *cnt);
  for (size_t x = 0; x < m; x++) {
    uint32_t b = k->bin_of[x];
    k->bin_of[x] = (uint32_t)((size_t)k->bin_pos[b] * K + cnt[b]++);
  }
  for (size_t x = 0; x < m; x++) k->rank_of[k->bin_of[x]] = k->items[x];
  memcpy(k->items, k->rank_of, m * sizeof *k->items);
  for (size_t x = 0; x < m; x++) k->rank_of[x] = (uint32_t)((x / K) % W);
  return AL_OK;
}

/* Packs micro [i0, i1) (a multiple of W x K batches) into steps; appends to out / slot. */
static int pack_window(al_plan *p, packer *k, plan_rng *rng, size_t i0, size_t i1, plan_micro *out,
                       size_t *n_out, uint64_t *slot, size_t *n_slot) {
  uint32_t W = p->world, K = p->micro_per_step;
  size_t per = (size_t)W * K, m = i1 - i0, steps = m / per;
  int rc = packer_reserve(k, m, steps, W, K);
  if (rc) return rc;
  for (size_t i = 0; i < m; i++) k->items[i] = (uint32_t)(i0 + i);
  qsort_r(k->items, m, sizeof *k->items, plan_cmp_micro_cost, p->micro);
  /* K = 1: each run of W neighbours by cost is one step. */
  if (K > 1)
    rc = deal_bins(p, k, steps);
  else
    for (size_t x = 0; x < m; x++) k->rank_of[x] = (uint32_t)(x % W);
  if (rc) return rc;
  /* Random step order inside the window and random rank order inside the
   * step, so that no rank is always the heavy one. */
  for (size_t s = 0; s < steps; s++) k->perm[s] = (uint32_t)s;
  plan_shuffle_u32(rng, k->perm, steps);
  for (size_t si = 0; si < steps; si++) {
    size_t s = k->perm[si];
    const uint32_t *it = k->items + s * per, *ro = k->rank_of + s * per;
    memset(k->cnt, 0, W * sizeof *k->cnt);
    for (size_t x = 0; x < per; x++) k->byrank[(size_t)ro[x] * K + k->cnt[ro[x]]++] = it[x];
    for (uint32_t r = 0; r < W; r++) k->rperm[r] = r;
    plan_shuffle_u32(rng, k->rperm, W);
    for (uint32_t r = 0; r < W; r++) {
      uint32_t *mine = k->byrank + (size_t)k->rperm[r] * K;
      /* A rank's micro-batches keep the sequence order (gradient accumulation). */
      if (K > 1) qsort_r(mine, K, sizeof *mine, cmp_seq, p->micro);
      slot[(*n_slot)++] = *n_out;
      for (uint32_t q = 0; q < K; q++) out[(*n_out)++] = p->micro[mine[q]];
    }
  }
  return AL_OK;
}

static int deal_adaptive(al_plan *p, plan_rng *rng) {
  uint32_t W = p->world, K = p->micro_per_step;
  size_t per = (size_t)W * K;
  int rc = split_to_multiple(p, per);
  if (rc) return rc;
  size_t nb = p->n_micro;
  if (!nb) return set_slots(p, 0, K);
  size_t per_win = (size_t)p->window * per;
  plan_micro *out = grow_big_block(nb, sizeof *out);
  uint64_t *slot = grow_big_block(nb / K + 1, sizeof *slot);
  packer k;
  rc = packer_init(&k, W, K);
  if (!rc && (!out || !slot)) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t n_out = 0, n_slot = 0;
  for (size_t i = 0; i < nb && !rc;) {
    /* The last window takes the tail when less than two windows are left. */
    size_t j = nb - i < 2 * per_win ? nb : i + per_win;
    rc = pack_window(p, &k, rng, i, j, out, &n_out, slot, &n_slot);
    i = j;
  }
  packer_free(&k);
  if (rc) {
    free(out);
    free(slot);
    return rc;
  }
  slot[n_slot] = n_out;
  free(p->micro);
  p->micro = out;
  p->cap_micro = nb;
  p->slot = slot;
  p->steps = (uint32_t)(nb / per);
  return AL_OK;
}

int plan_relayout_bins(al_plan *p, uint32_t step, plan_rng *rng) {
  uint32_t W = p->world, K = p->micro_per_step;
  size_t per = (size_t)W * K, n_out = 0, n_slot = 0;
  plan_micro *out = malloc(per * sizeof *out);
  uint64_t *slot = malloc(((size_t)W + 1) * sizeof *slot);
  packer k;
  int rc = packer_init(&k, W, K);
  if (!rc && (!out || !slot)) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  if (!rc)
    rc = pack_window(p, &k, rng, (size_t)step * per, (size_t)(step + 1) * per, out, &n_out, slot,
                     &n_slot);
  if (!rc) memcpy(p->micro + (size_t)step * per, out, per * sizeof *out);
  packer_free(&k);
  free(out);
  free(slot);
  return rc;
}

int plan_schedule(al_plan *p, uint64_t *items, size_t n, uint64_t stream) {
  uint64_t per = (uint64_t)p->world * p->micro_per_step;
  if (per > AL_PLAN_MAX_STEP_MICRO)
    return al_set_error(AL_ERANGE,
                        "world %u x micro-per-step %u = %llu micro-batches per step, above the "
                        "planner's maximum %u (a step is one manifest record of at most 256 MiB)",
                        p->world, p->micro_per_step, (unsigned long long)per,
                        AL_PLAN_MAX_STEP_MICRO);
  plan_rng rng;
  plan_rng_seed(&rng, p->seed, p->epoch, stream);
  /* Fisher-Yates on (bucket, position) pairs: batch forming then reads them in order. */
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)plan_rng_below(&rng, i);
    uint64_t t = items[i - 1];
    items[i - 1] = items[j];
    items[j] = t;
  }
  int rc = plan_form_batches(p, items, n);
  if (rc) return rc;
  /* Sequence parallelism or the micro sync model: the slot schedule (sp_schedule.c). */
  if (p->sp_sched) return plan_schedule_slots(p, &rng);
  /* adaptive-unbalanced: adaptive's batches, dealt as they come (no per-step balancing). */
  if (p->policy != AL_POLICY_ADAPTIVE) return deal_equal_token(p);
  return deal_adaptive(p, &rng);
}
