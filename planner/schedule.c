/* The schedule: shuffle, batches inside buckets, then steps x ranks.
 *
 * Equal-token deals the shuffled batch sequence W at a time. Adaptive cuts
 * the sequence into windows of about `window` steps and, inside each window,
 * packs batches into steps x ranks bins by predicted cost (LPT: largest batch
 * first into the least loaded bin), then groups bins of similar load into the
 * same step. Balancing only inside windows keeps the epoch's order random at
 * window granularity: a long clip drawn early is still trained early. */
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "planner/plan_internal.h"
#include "planner/rng_internal.h"

static int push_micro(al_plan *p, uint64_t first, uint32_t n, uint32_t bucket, uint32_t padded) {
  int rc = grow_array((void **)&p->micro, &p->cap_micro, p->n_micro + 1, sizeof *p->micro,
                      "plan micro-batches");
  if (rc) return rc;
  plan_micro *m = &p->micro[p->n_micro];
  m->first = first;
  m->n = n;
  m->bucket = bucket;
  m->seq = (uint32_t)p->n_micro;
  m->padded = padded;
  m->cost = plan_micro_cost(p, bucket, n);
  p->n_micro++;
  return AL_OK;
}

/* Appends one sample to mb (padding repeats live there too). */
static int push_sample(al_plan *p, uint32_t s) {
  int rc = grow_array((void **)&p->mb, &p->cap_mb, p->n_mb + 1, sizeof *p->mb, "plan samples");
  if (rc) return rc;
  p->mb[p->n_mb++] = s;
  return AL_OK;
}

/* Walks the shuffled order with one open batch per bucket; a batch that
 * reaches B joins the sequence; leftovers follow in bucket order. */
static int form_batches(al_plan *p, const uint64_t *items, size_t n) {
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
      rc = push_micro(p, p->n_mb, fill[b], b, 0);
      p->n_mb += fill[b];
      fill[b] = 0;
    }
  }
  for (size_t b = 0; b < nb && !rc; b++) {
    if (!fill[b]) continue;
    memcpy(p->mb + p->n_mb, buf + off[b], (size_t)fill[b] * sizeof *buf);
    rc = push_micro(p, p->n_mb, fill[b], (uint32_t)b, 0);
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
  if (!rc) rc = push_micro(p, p->n_mb - 1, 1, b, 1);
  return rc;
}

static int deal_equal_token(al_plan *p) {
  uint32_t W = p->world;
  size_t full = p->n_micro / W, rem = p->n_micro % W;
  int rc = AL_OK;
  if (rem && p->last_step == AL_LAST_DROP) {
    for (size_t i = full * W; i < p->n_micro; i++) mark_dropped(p, &p->micro[i]);
    p->n_micro = full * W;
  } else if (rem) {
    size_t base = full * W;
    for (size_t r = rem; r < W && !rc; r++) {
      plan_micro like = p->micro[base + (r - rem) % rem];
      rc = push_padding(p, &like);
    }
    full++;
  }
  if (rc) return rc;
  p->steps = (uint32_t)full;
  p->slot = malloc((full * W + 1) * sizeof *p->slot);
  if (!p->slot) return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i <= full * W; i++) p->slot[i] = i;
  return AL_OK;
}

/* Fewer batches than ranks (a tiny epoch or re-plan remainder): split the
 * largest batches until every rank can have one; pad or drop only if there
 * are fewer samples than ranks. */
static int fit_tiny(al_plan *p) {
  uint32_t W = p->world;
  while (p->n_micro < W) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < p->n_micro; i++)
      if (p->micro[i].n >= 2 && (best == SIZE_MAX || p->micro[i].n > p->micro[best].n)) best = i;
    if (best == SIZE_MAX) break;
    plan_micro *m = &p->micro[best];
    uint32_t h = (m->n + 1) / 2, rest = m->n - h;
    uint64_t first = m->first + h;
    uint32_t b = m->bucket;
    m->n = h;
    m->cost = plan_micro_cost(p, b, h);
    int rc = push_micro(p, first, rest, b, 0);
    if (rc) return rc;
  }
  if (p->n_micro >= W || !p->n_micro) return AL_OK;
  if (p->last_step == AL_LAST_DROP) {
    for (size_t i = 0; i < p->n_micro; i++) mark_dropped(p, &p->micro[i]);
    p->n_micro = 0;
    return AL_OK;
  }
  size_t have = p->n_micro;
  for (size_t r = have; r < W; r++) {
    plan_micro like = p->micro[(r - have) % have];
    int rc = push_padding(p, &like);
    if (rc) return rc;
  }
  return AL_OK;
}

typedef struct bin {
  double load;
  uint32_t id;
} bin;

static int bin_less(const bin *a, const bin *b) {
  return a->load < b->load || (a->load == b->load && a->id < b->id);
}

static void heap_down(bin *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && bin_less(&h[l], &h[m])) m = l;
    if (r < n && bin_less(&h[r], &h[m])) m = r;
    if (m == i) return;
    bin t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* qsort_r comparators: no globals, so plans may be built on several threads at once. */
static int cmp_item(const void *a, const void *b, void *ctx) {
  const plan_micro *mi = ctx;
  const plan_micro *x = &mi[*(const uint32_t *)a], *y = &mi[*(const uint32_t *)b];
  if (x->cost != y->cost) return x->cost < y->cost ? 1 : -1;
  return (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_bin(const void *a, const void *b, void *ctx) {
  const double *load = ctx;
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  if (load[x] != load[y]) return load[x] < load[y] ? 1 : -1;
  return (x > y) - (x < y);
}

typedef struct packer {
  uint32_t *items;  /* window items by cost */
  uint32_t *bin_of; /* per window item */
  bin *heap;
  double *load;
  uint32_t *bins;  /* bin ids by load */
  uint64_t *start; /* per bin, first item in `byb` */
  uint32_t *byb;   /* window items grouped by bin, seq order inside */
  uint32_t *perm;
  size_t cap_items, cap_bins;
} packer;

static void packer_free(packer *k) {
  free(k->items);
  free(k->bin_of);
  free(k->heap);
  free(k->load);
  free(k->bins);
  free(k->start);
  free(k->byb);
  free(k->perm);
}

static int packer_reserve(packer *k, size_t items, size_t bins) {
  if (items > k->cap_items) {
    free(k->items), free(k->bin_of), free(k->byb);
    k->items = malloc(items * sizeof *k->items);
    k->bin_of = malloc(items * sizeof *k->bin_of);
    k->byb = malloc(items * sizeof *k->byb);
    k->cap_items = items;
    if (!k->items || !k->bin_of || !k->byb) return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  if (bins > k->cap_bins) {
    free(k->heap), free(k->load), free(k->bins), free(k->start), free(k->perm);
    k->heap = malloc(bins * sizeof *k->heap);
    k->load = malloc(bins * sizeof *k->load);
    k->bins = malloc(bins * sizeof *k->bins);
    k->start = malloc((bins + 1) * sizeof *k->start);
    k->perm = malloc(2 * bins * sizeof *k->perm); /* step order, then one step's rank order */
    k->cap_bins = bins;
    if (!k->heap || !k->load || !k->bins || !k->start || !k->perm)
      return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  return AL_OK;
}

static void shuffle_u32(plan_rng *rng, uint32_t *a, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)plan_rng_below(rng, i);
    uint32_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

/* Packs micro [i0, i1) into `steps` steps; appends to out / slot. */
static int pack_window(al_plan *p, packer *k, plan_rng *rng, size_t i0, size_t i1, uint32_t steps,
                       plan_micro *out, size_t *n_out, uint64_t *slot, size_t *n_slot) {
  uint32_t W = p->world;
  size_t m = i1 - i0, nbins = (size_t)steps * W;
  int rc = packer_reserve(k, m, nbins);
  if (rc) return rc;
  for (size_t i = 0; i < m; i++) k->items[i] = (uint32_t)(i0 + i);
  qsort_r(k->items, m, sizeof *k->items, cmp_item, p->micro);
  for (size_t b = 0; b < nbins; b++) k->heap[b].load = 0, k->heap[b].id = (uint32_t)b;
  for (size_t i = 0; i < m; i++) {
    uint32_t it = k->items[i];
    k->bin_of[it - i0] = k->heap[0].id;
    k->heap[0].load += p->micro[it].cost;
    heap_down(k->heap, nbins, 0);
  }
  for (size_t b = 0; b < nbins; b++) k->load[k->heap[b].id] = k->heap[b].load;
  /* Items grouped by bin, keeping sequence order inside each bin. */
  memset(k->start, 0, (nbins + 1) * sizeof *k->start);
  for (size_t i = 0; i < m; i++) k->start[k->bin_of[i] + 1]++;
  for (size_t b = 0; b < nbins; b++) k->start[b + 1] += k->start[b];
  for (size_t i = 0; i < m; i++) k->byb[k->start[k->bin_of[i]]++] = (uint32_t)(i0 + i);
  for (size_t b = nbins; b > 0; b--) k->start[b] = k->start[b - 1];
  k->start[0] = 0;
  /* Bins of similar load share a step: the step's max is then close to its mean. */
  for (size_t b = 0; b < nbins; b++) k->bins[b] = (uint32_t)b;
  qsort_r(k->bins, nbins, sizeof *k->bins, cmp_bin, k->load);
  /* Random step order inside the window and random rank order inside the
   * step, so that no rank is always the heavy one. */
  for (uint32_t s = 0; s < steps; s++) k->perm[s] = s;
  shuffle_u32(rng, k->perm, steps);
  uint32_t *rperm = k->perm + steps;
  for (uint32_t si = 0; si < steps; si++) {
    uint32_t s = k->perm[si];
    for (uint32_t r = 0; r < W; r++) rperm[r] = r;
    shuffle_u32(rng, rperm, W);
    for (uint32_t r = 0; r < W; r++) {
      uint32_t b = k->bins[(size_t)s * W + rperm[r]];
      slot[(*n_slot)++] = *n_out;
      for (uint64_t x = k->start[b]; x < k->start[b + 1]; x++)
        out[(*n_out)++] = p->micro[k->byb[x]];
    }
  }
  return AL_OK;
}

static int deal_adaptive(al_plan *p, plan_rng *rng) {
  uint32_t W = p->world;
  int rc = fit_tiny(p);
  if (rc) return rc;
  size_t nb = p->n_micro;
  if (!nb) {
    p->steps = 0;
    p->slot = calloc(1, sizeof *p->slot);
    return p->slot ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  double T = p->step_ms;
  size_t per_win = (size_t)p->window * W;
  double win_cost = (double)per_win * T;
  plan_micro *out = malloc(nb * sizeof *out);
  /* Every step has at least W micro-batches, so nb / W bounds the steps. */
  size_t max_steps = nb / W;
  uint64_t *slot = malloc((max_steps * W + 1) * sizeof *slot);
  packer k;
  memset(&k, 0, sizeof k);
  if (!out || !slot) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  size_t n_out = 0, n_slot = 0, i = 0;
  uint32_t steps_total = 0;
  while (i < nb && !rc) {
    size_t j = i;
    double c = 0;
    while (j < nb && (j - i < per_win || c < win_cost)) c += p->micro[j++].cost;
    double rest = 0;
    for (size_t t = j; t < nb && rest < win_cost; t++) rest += p->micro[t].cost;
    if (nb - j < per_win || rest < win_cost) {
      for (; j < nb; j++) c += p->micro[j].cost;
    }
    size_t m = j - i;
    double want = c / ((double)W * T);
    size_t steps = want < 1.0 ? 1 : (size_t)(want + 0.5);
    if (steps > m / W) steps = m / W;
    if (steps < 1) steps = 1; /* m >= W always holds here: fit_tiny made nb >= W */
    rc = pack_window(p, &k, rng, i, j, (uint32_t)steps, out, &n_out, slot, &n_slot);
    steps_total += (uint32_t)steps;
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
  p->steps = steps_total;
  return AL_OK;
}

int plan_schedule(al_plan *p, uint64_t *items, size_t n, uint64_t stream) {
  plan_rng rng;
  plan_rng_seed(&rng, p->seed, p->epoch, stream);
  /* Fisher-Yates on (bucket, position) pairs: batch forming then reads them in order. */
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)plan_rng_below(&rng, i);
    uint64_t t = items[i - 1];
    items[i - 1] = items[j];
    items[j] = t;
  }
  int rc = form_batches(p, items, n);
  if (rc) return rc;
  if (p->policy == AL_POLICY_EQUAL_TOKEN) return deal_equal_token(p);
  return deal_adaptive(p, &rng);
}
