/* Batch sizes (the dual constraint) and predicted batch costs, per bucket: what a plan and a
 * re-plan size their batches with and what the schedule balances. */
#include <math.h>
#include <string.h>

#include "common/grow_internal.h"
#include "planner/plan_internal.h"

const char *plan_limit_name(int l) {
  return l == AL_LIMIT_COMPUTE ? "compute" : l == AL_LIMIT_ONE ? "one" : "memory";
}

int plan_limit_parse(const char *name) {
  return !strcmp(name, "compute") ? AL_LIMIT_COMPUTE
         : !strcmp(name, "one")   ? AL_LIMIT_ONE
                                  : AL_LIMIT_MEMORY;
}

/* A degree of 0 (a bucket not yet given one) is 1. */
static uint32_t degree_of(const plan_bucket *b) { return b->sp_degree > 1 ? b->sp_degree : 1; }

/* c(S) at the bucket's degree: one rank's share of one more sample. */
static double per_sample(const al_plan *p, const plan_bucket *b) {
  uint32_t d = degree_of(b);
  return d > 1 ? al_cost_per_sample_sp(&p->cost, b->tokens, d)
               : al_cost_per_sample(&p->cost, b->tokens);
}

/* al_cost_predict_sp at d = 1 is al_cost_predict (a family whose time is not a + B c(S), the
 * floor, included). */
double plan_micro_cost(const al_plan *p, uint32_t bucket, uint32_t n) {
  const plan_bucket *b = &p->buckets[bucket];
  return al_cost_predict_sp(&p->cost, n, b->tokens, degree_of(b));
}

void plan_bucket_degrees(al_plan *p) {
  uint32_t dmax = p->sp_degrees[p->n_sp_degrees - 1];
  for (size_t i = 0; i < p->n_buckets; i++) {
    plan_bucket *b = &p->buckets[i];
    b->sp_degree = dmax;
    for (uint32_t k = 0; k < p->n_sp_degrees; k++)
      if (b->tokens <= (uint64_t)p->sp_degrees[k] * p->mem_tokens) {
        b->sp_degree = p->sp_degrees[k];
        break;
      }
  }
}

/* B = max(1, min(floor(d m / S), floor(M_comp / c_d(S)))) with m the micro-batch
 * token target (T / (W K), = M_mem by default), d the bucket's degree and c_d(S) one rank's
 * share of a sample at that degree (c(S) at d = 1); equal-token drops the compute term. */
static void size_bucket(const al_plan *p, plan_bucket *b, uint64_t m) {
  uint64_t bm = m * degree_of(b) / b->tokens;
  double c = per_sample(p, b);
  /* The relative epsilon keeps c(S*) / c(S*) == 1 from flooring to 0. */
  double bc = c > 0 ? floor(p->comp_ms / c * (1.0 + 1e-9)) : 1e18;
  /* Saturated at 1e18; NaN (an infinite M_comp over an infinite c) counts as 0. */
  uint64_t bcomp = bc > 1e18 ? (uint64_t)1e18 : bc >= 0 ? (uint64_t)bc : 0;
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

/* Rank-slots the epoch's samples take when micro-batches aim at m tokens: a batch of degree d
 * takes d (the batch count without SP). */
static uint64_t batches_at(const al_plan *p, uint64_t m) {
  uint64_t n = 0;
  for (size_t i = 0; i < p->n_buckets; i++) {
    if (!p->buckets[i].samples) continue;
    plan_bucket b = p->buckets[i];
    size_bucket(p, &b, m);
    n += (b.samples + b.batch_size - 1) / b.batch_size * degree_of(&b);
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

void plan_bucket_costs(al_plan *p) {
  for (size_t i = 0; i < p->n_buckets; i++) {
    plan_bucket *b = &p->buckets[i];
    b->batch_cost_ms = plan_micro_cost(p, (uint32_t)i, b->batch_size);
  }
}

void plan_size_buckets(al_plan *p) {
  plan_bucket_degrees(p);
  p->micro_tokens = calibrate_micro_tokens(p, p->micro_tokens);
  for (size_t i = 0; i < p->n_buckets; i++) size_bucket(p, &p->buckets[i], p->micro_tokens);
  plan_bucket_costs(p);
}

int plan_push_micro(al_plan *p, uint64_t first, uint32_t n, uint32_t bucket, uint32_t padded) {
  if (p->n_micro >= UINT32_MAX)
    return al_set_error(AL_ERANGE, "plan: more than 2^32 - 1 micro-batches");
  int rc = grow_array((void **)&p->micro, &p->cap_micro, p->n_micro + 1, sizeof *p->micro,
                      "plan micro-batches");
  if (rc) return rc;
  plan_micro *m = &p->micro[p->n_micro];
  memset(m, 0, sizeof *m);
  m->first = first;
  m->n = n;
  m->bucket = bucket;
  m->seq = (uint32_t)p->n_micro;
  m->padded = padded;
  m->cost = plan_micro_cost(p, bucket, n);
  m->sp_degree = degree_of(&p->buckets[bucket]);
  p->n_micro++;
  return AL_OK;
}

int plan_split_micro(al_plan *p, size_t i) {
  plan_micro *m = &p->micro[i];
  uint32_t half = (m->n + 1) / 2, rest = m->n - half, b = m->bucket;
  uint64_t first = m->first + half;
  m->n = half;
  m->cost = plan_micro_cost(p, b, half);
  return plan_push_micro(p, first, rest, b, 0);
}

int plan_cmp_micro_cost(const void *a, const void *b, void *ctx) {
  const plan_micro *mi = ctx;
  const plan_micro *x = &mi[*(const uint32_t *)a], *y = &mi[*(const uint32_t *)b];
  if (x->cost != y->cost) return x->cost < y->cost ? 1 : -1;
  if (x->bucket != y->bucket) return x->bucket < y->bucket ? -1 : 1;
  return (x->seq > y->seq) - (x->seq < y->seq);
}
