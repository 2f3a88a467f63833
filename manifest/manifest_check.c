/* manifest_check.c - what al_manifest_load proves about a manifest beyond its
 * checksums: that it is a plan.
 *
 * A manifest with valid checksums can still be forged or written by a buggy
 * tool; the checks below hold for every manifest the planner writes, so any
 * violation is refused with the step, rank, micro-batch and sample named:
 *   - every index position in range and with a known status; 17 (consumed
 *     before first_step) only in a re-plan;
 *   - every position with status 0 (scheduled) appears exactly once as a real
 *     sample, every other position never; padding repeats a scheduled sample;
 *   - a micro-batch holds at most its bucket's batch size, every sample the
 *     bucket's tokens, at most M_mem tokens in all, and distinct padding slots;
 *   - sequence-parallel groups: an allowed degree, aligned, every rank of the group present at
 *     the same micro-batch with sp_rank 0 .. d - 1 in order, the same bucket and cost; only the
 *     leader (sp_rank 0) lists samples, and a group holds at most d x M_mem tokens;
 *   - every step holds at least one real sample, and its totals (the loss
 *     normaliser handed to every micro-batch) are the sums of what it holds;
 *   - the summary's samples, padded, tokens, rejected (total and by reason)
 *     and dropped counts, and every bucket's sample count, are what the steps
 *     and the key table hold (a bucket's count is of the whole epoch: at least
 *     what the steps hold).
 * A slice of a chunked run (PlanConfig.own_keys) has no key table of the pass: its steps' real
 * samples are each listed once (checked by sorting them), every sample it lists (padding too) is
 * in its own key table when it has one, and every key there is in its steps; the rejected counts
 * are the run's census, not checked against a table. A rank's slice (only_rank) holds one rank's
 * work: its steps' totals (all ranks') are at least what that rank holds, and so are the summary's.
 * Cost: one byte per index position (a slice: per key, and 8 bytes per real sample) and one pass
 * over the samples. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/key_status_internal.h"
#include "manifest/manifest_internal.h"

#define SEEN_REAL 1u
#define SEEN_PAD 2u

int64_t manifest_key_entry(const al_manifest *m, uint64_t sample) {
  size_t lo = 0, hi = (size_t)m->n_keys;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->key_pos[mid] < sample)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < m->n_keys && m->key_pos[lo] == sample ? (int64_t)lo : -1;
}

/* The key of index position s, or "" (messages). */
static const char *key_or(const al_manifest *m, uint64_t s) {
  if (m->info.own_keys) {
    int64_t e = manifest_key_entry(m, s);
    return e < 0 ? "" : m->key_blob + m->key_off[e];
  }
  return s < m->n_keys ? m->key_blob + m->key_off[s] : "";
}

/* Step, rank and micro of micro-batch x, for messages. */
static void locate(const al_manifest *m, size_t x, uint32_t *step, uint32_t *rank,
                   uint32_t *micro) {
  size_t lo = 0, hi = (size_t)m->steps * m->ranks; /* slot[lo] <= x < slot[hi] */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (m->slot[mid] <= x)
      lo = mid;
    else
      hi = mid;
  }
  *step = m->first_step + (uint32_t)(lo / m->ranks);
  *rank = m->rank0 + (uint32_t)(lo % m->ranks);
  *micro = (uint32_t)(x - m->slot[lo]);
}

static int bad_micro(const al_manifest *m, size_t x, const char *what) {
  uint32_t st, r, k;
  locate(m, x, &st, &r, &k);
  return al_set_error(AL_EFORMAT, "%s: step %" PRIu32 " rank %" PRIu32 " micro %" PRIu32 ": %s",
                      m->path, st, r, k, what);
}

static int check_statuses(const al_manifest *m, uint64_t counts[AL_KEY_STATUS_MAX + 1]) {
  if (!m->info.own_keys && m->info.index_samples && m->n_keys != m->info.index_samples)
    return al_set_error(AL_EFORMAT,
                        "%s: no key table for an index of %" PRIu64
                        " samples (every manifest the planner writes has one)",
                        m->path, m->info.index_samples);
  for (uint64_t i = 0; i < m->n_keys; i++) {
    uint8_t s = m->key_status[i];
    int known = s < AL_REJECT_COUNT || s == AL_KEY_DROPPED || s == AL_KEY_CONSUMED ||
                s == AL_KEY_NO_MEMBER || s == AL_KEY_ELSEWHERE ||
                (s == AL_KEY_UNDRAWN && m->n_sources);
    if (!known)
      return al_set_error(AL_EFORMAT, "%s: sample %" PRIu64 " ('%s') has unknown status %u",
                          m->path, i, m->key_blob + m->key_off[i], s);
    if (s == AL_KEY_CONSUMED && !m->first_step)
      return al_set_error(AL_EFORMAT,
                          "%s: sample %" PRIu64
                          " ('%s') is marked consumed before step 0 (only a re-plan has that)",
                          m->path, i, m->key_blob + m->key_off[i]);
    counts[s]++;
  }
  return AL_OK;
}

/* What the checks carry from micro-batch to micro-batch and step to step. */
typedef struct checker {
  const al_manifest *m;
  uint8_t *seen;   /* per key (a whole plan: per index position): SEEN_* */
  uint64_t *reals; /* a slice: its real samples, sorted at the end to find repeats */
  size_t n_reals;
  uint64_t *bucket_real; /* per bucket: real samples the steps hold */
  uint8_t *is_pad;       /* per position in the micro-batch being checked: a padding repeat */
  size_t pad_cap;
  uint64_t real, padded, tokens; /* over the steps checked so far */
} checker;

/* Micro-batch x within its bucket's batch size and M_mem; is_pad[] its padding positions,
 * each listed once. */
static int check_micro_bounds(checker *c, size_t x) {
  const al_manifest *m = c->m;
  const manifest_micro *mc = &m->micro[x];
  const al_bucket_info *b = &m->buckets[mc->bucket];
  char what[512];
  if (b->batch_size && mc->n > b->batch_size) {
    snprintf(what, sizeof what, "%" PRIu32 " samples in bucket %" PRIu32 " of batch size %" PRIu32,
             mc->n, mc->bucket, b->batch_size);
    return bad_micro(m, x, what);
  }
  /* A group of degree d holds d x M_mem tokens (each rank S / d of every sample). */
  if (m->info.mem_tokens && (uint64_t)mc->n * b->tokens > m->info.mem_tokens * mc->sp_degree) {
    if (mc->sp_degree > 1)
      snprintf(what, sizeof what,
               "%" PRIu32 " samples of %" PRIu64 " tokens exceed %" PRIu32 " x M_mem = %" PRIu64
               " tokens (a group of degree %" PRIu32 ")",
               mc->n, b->tokens, mc->sp_degree, m->info.mem_tokens * mc->sp_degree, mc->sp_degree);
    else
      snprintf(what, sizeof what,
               "%" PRIu32 " samples of %" PRIu64 " tokens exceed M_mem = %" PRIu64 " tokens", mc->n,
               b->tokens, m->info.mem_tokens);
    return bad_micro(m, x, what);
  }
  if (mc->n > c->pad_cap) {
    free(c->is_pad);
    c->pad_cap = mc->n;
    if (!(c->is_pad = malloc(c->pad_cap)))
      return al_set_error(AL_ENOMEM, "%s: out of memory checking the manifest", m->path);
  }
  memset(c->is_pad, 0, mc->n);
  for (uint32_t q = 0; q < mc->n_pad; q++) {
    uint32_t k = m->pads[mc->pad_first + q]; /* < n: checked while loading */
    if (c->is_pad[k]) {
      snprintf(what, sizeof what, "padding position %" PRIu32 " listed twice", k);
      return bad_micro(m, x, what);
    }
    c->is_pad[k] = 1;
  }
  return AL_OK;
}

/* A slice's sample smp (k of micro-batch x): in its key table when it has one; a real one kept
 * for the repeat check (check_repeats). */
static int check_own_sample(checker *c, size_t x, uint32_t k, uint64_t smp, uint64_t *st_samples,
                            uint64_t *st_tokens) {
  const al_manifest *m = c->m;
  const manifest_micro *mc = &m->micro[x];
  if (m->n_keys) {
    int64_t e = manifest_key_entry(m, smp);
    if (e < 0) {
      char what[256];
      snprintf(what, sizeof what, "sample %" PRIu64 " is not in the slice's key table", smp);
      return bad_micro(m, x, what);
    }
    c->seen[e] |= c->is_pad[k] ? SEEN_PAD : SEEN_REAL;
  }
  if (c->is_pad[k]) {
    c->padded++;
    return AL_OK;
  }
  c->reals[c->n_reals++] = smp;
  c->real++, (*st_samples)++;
  c->tokens += m->buckets[mc->bucket].tokens, *st_tokens += m->buckets[mc->bucket].tokens;
  c->bucket_real[mc->bucket]++;
  return AL_OK;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* A slice: no real sample twice; the second listing of a repeated one is named. */
static int check_repeats(checker *c) {
  const al_manifest *m = c->m;
  qsort(c->reals, c->n_reals, sizeof *c->reals, cmp_u64);
  for (size_t i = 1; i < c->n_reals; i++) {
    if (c->reals[i] != c->reals[i - 1]) continue;
    uint64_t v = c->reals[i];
    int seen = 0;
    for (size_t x = 0; x < m->n_micro; x++) {
      const manifest_micro *mc = &m->micro[x];
      if (mc->sp_rank) continue;
      for (uint32_t k = 0; k < mc->n; k++) {
        int pad = 0;
        for (uint32_t q = 0; q < mc->n_pad; q++) pad |= m->pads[mc->pad_first + q] == k;
        if (pad || m->samples[mc->first + k] != v) continue;
        if (seen++) {
          char what[256];
          snprintf(what, sizeof what,
                   "sample %" PRIu64 " ('%s') is scheduled a second time in this slice", v,
                   key_or(m, v));
          return bad_micro(m, x, what);
        }
      }
    }
  }
  return AL_OK;
}

/* Sample k of micro-batch x: its bucket's tokens, scheduled in the key table, and (unless
 * padding) not seen before; counted into the step's and the epoch's totals. */
static int check_sample(checker *c, size_t x, uint32_t k, uint64_t *st_samples,
                        uint64_t *st_tokens) {
  const al_manifest *m = c->m;
  const manifest_micro *mc = &m->micro[x];
  const al_bucket_info *b = &m->buckets[mc->bucket];
  uint64_t smp = m->samples[mc->first + k];
  char what[512];
  if (m->tokens[mc->first + k] != b->tokens) {
    snprintf(what, sizeof what,
             "sample %" PRIu64 " ('%s') carries %" PRIu64 " tokens, its bucket %" PRIu32
             " holds %" PRIu64,
             smp, key_or(m, smp), m->tokens[mc->first + k], mc->bucket, b->tokens);
    return bad_micro(m, x, what);
  }
  if (m->info.own_keys) return check_own_sample(c, x, k, smp, st_samples, st_tokens);
  uint8_t st = m->key_status[smp]; /* smp < index_samples = n_keys: checked on load */
  if (st != AL_KEY_PLANNED) {
    snprintf(what, sizeof what,
             "sample %" PRIu64 " ('%s') has status %u in the key table (%s), not scheduled", smp,
             key_or(m, smp), st,
             st == AL_KEY_DROPPED     ? "dropped"
             : st == AL_KEY_CONSUMED  ? "consumed before first_step"
             : st == AL_KEY_NO_MEMBER ? "lacks a required member"
             : st == AL_KEY_ELSEWHERE ? "planned outside this slice"
             : st == AL_KEY_UNDRAWN   ? "a draw the run does not reach"
                                      : "rejected");
    return bad_micro(m, x, what);
  }
  if (c->is_pad[k]) {
    c->padded++;
    c->seen[smp] |= SEEN_PAD;
    return AL_OK;
  }
  if (c->seen[smp] & SEEN_REAL) {
    snprintf(what, sizeof what,
             "sample %" PRIu64 " ('%s') is scheduled a second time in this epoch", smp,
             key_or(m, smp));
    return bad_micro(m, x, what);
  }
  c->seen[smp] |= SEEN_REAL;
  c->real++, (*st_samples)++;
  c->tokens += b->tokens, *st_tokens += b->tokens;
  c->bucket_real[mc->bucket]++;
  return AL_OK;
}

/* The group led by micro-batch x (rank r, micro k of step s): an allowed degree, aligned
 * (r a multiple of it), and ranks r + 1 .. r + d - 1 holding its followers, sp_rank 1 .. d - 1
 * in order, at the same micro k (their bucket and cost are the leader's: checked on load). */
static int check_group(const al_manifest *m, uint32_t s, uint32_t r, uint64_t k, size_t x) {
  const manifest_micro *mc = &m->micro[x];
  uint32_t d = mc->sp_degree, W = m->world;
  char what[512];
  if (m->info.only_rank && d > 1) {
    snprintf(what, sizeof what,
             "a group of degree %" PRIu32 " in a rank's slice (its other ranks are not in it)", d);
    return bad_micro(m, x, what);
  }
  if (m->info.only_rank) return AL_OK;
  int allowed = 0;
  for (uint32_t i = 0; i < m->info.n_sp_degrees; i++) allowed |= m->info.sp_degrees[i] == d;
  if (!allowed) {
    snprintf(what, sizeof what, "sequence-parallel degree %" PRIu32 " is not one the plan allows",
             d);
    return bad_micro(m, x, what);
  }
  if (r % d || r + d > W) {
    snprintf(what, sizeof what,
             "a group of degree %" PRIu32 " led by rank %" PRIu32
             " is not aligned (ranks [g, g + d) with g a multiple of d, within world %" PRIu32 ")",
             d, r, W);
    return bad_micro(m, x, what);
  }
  for (uint32_t q = 1; q < d; q++) {
    size_t sl = (size_t)s * W + r + q;
    if (m->slot[sl] + k >= m->slot[sl + 1] || m->micro[m->slot[sl] + k].sp_rank != q ||
        m->micro[m->slot[sl] + k].sp_degree != d) {
      snprintf(what, sizeof what,
               "rank %" PRIu32 " of its group of degree %" PRIu32
               " does not run it (sp_rank %" PRIu32 " missing at that micro-batch)",
               r + q, d, q);
      return bad_micro(m, x, what);
    }
  }
  return AL_OK;
}

/* Step s (counted from first_step): every micro-batch and sample, then the step's totals. */
static int check_step(checker *c, uint32_t s) {
  const al_manifest *m = c->m;
  uint64_t st_samples = 0, st_tokens = 0;
  uint32_t R = m->ranks;
  for (uint32_t r = 0; r < R; r++) {
    size_t sl = (size_t)s * R + r;
    for (uint64_t x = m->slot[sl]; x < m->slot[sl + 1]; x++) {
      int rc = AL_OK;
      if (!m->micro[x].sp_rank &&
          (m->micro[x].sp_degree > 1 || m->info.n_sp_degrees > 1 || m->info.sp_degrees[0] != 1))
        rc = check_group(m, s, r, x - m->slot[sl], x);
      if (rc) return rc;
    }
  }
  for (uint64_t x = m->slot[(size_t)s * R]; x < m->slot[(size_t)(s + 1) * R]; x++) {
    if (m->micro[x].sp_rank) continue; /* a follower: its leader holds the group's samples */
    int rc = check_micro_bounds(c, x);
    for (uint32_t k = 0; k < m->micro[x].n && !rc; k++)
      rc = check_sample(c, x, k, &st_samples, &st_tokens);
    if (rc) return rc;
  }
  const manifest_step *ms = &m->stepv[s];
  if (m->info.only_rank) { /* one rank's share of the step's totals */
    if (!ms->samples || ms->samples < st_samples || ms->tokens < st_tokens)
      return al_set_error(AL_EFORMAT,
                          "%s: step %" PRIu32 " says %" PRIu64 " samples and %" PRIu64
                          " tokens over all ranks, but rank %" PRIu32 " alone holds %" PRIu64
                          " and %" PRIu64,
                          m->path, m->first_step + s, ms->samples, ms->tokens, m->rank0, st_samples,
                          st_tokens);
    return AL_OK;
  }
  if (!st_samples)
    return al_set_error(AL_EFORMAT, "%s: step %" PRIu32 " holds only padding", m->path,
                        m->first_step + s);
  if (ms->samples != st_samples || ms->tokens != st_tokens)
    return al_set_error(AL_EFORMAT,
                        "%s: step %" PRIu32 " says %" PRIu64 " samples and %" PRIu64
                        " tokens (the loss normaliser) but holds %" PRIu64 " and %" PRIu64,
                        m->path, m->first_step + s, ms->samples, ms->tokens, st_samples, st_tokens);
  return AL_OK;
}

/* Every position the key table schedules is a real sample of some micro-batch. */
static int check_all_seen(const checker *c) {
  const al_manifest *m = c->m;
  if (m->info.own_keys) {
    for (uint64_t i = 0; i < m->n_keys; i++)
      if (!c->seen[i])
        return al_set_error(AL_EFORMAT,
                            "%s: sample %" PRIu64
                            " ('%s') is in the slice's key table but in none of its micro-batches",
                            m->path, m->key_pos[i], m->key_blob + m->key_off[i]);
    return AL_OK;
  }
  for (uint64_t i = 0; i < m->n_keys; i++)
    if (m->key_status[i] == AL_KEY_PLANNED && !(c->seen[i] & SEEN_REAL))
      return al_set_error(AL_EFORMAT,
                          "%s: sample %" PRIu64
                          " ('%s') is scheduled in the key table but in no "
                          "micro-batch%s",
                          m->path, i, key_or(m, i),
                          c->seen[i] & SEEN_PAD ? " (only as padding)" : "");
  return AL_OK;
}

/* The summary's rejected (by reason and in all) and dropped counts against the key table's
 * counts per status. */
static int check_key_counts(const al_manifest *m, const uint64_t counts[AL_KEY_STATUS_MAX + 1]) {
  const al_manifest_info *in = &m->info;
  uint64_t rej = 0;
  for (int r = 1; r < AL_REJECT_COUNT; r++) {
    rej += counts[r];
    if (m->rejected[r] != counts[r])
      return al_set_error(AL_EFORMAT,
                          "%s: the summary says %" PRIu64
                          " samples rejected for reason %d; the key table marks %" PRIu64,
                          m->path, m->rejected[r], r, counts[r]);
  }
  if (in->rejected != rej)
    return al_set_error(AL_EFORMAT,
                        "%s: the summary says %" PRIu64 " rejected; the key table marks %" PRIu64,
                        m->path, in->rejected, rej);
  /* A re-plan keeps the old plan's dropped marks but counts only its own drops. */
  uint64_t dr = counts[AL_KEY_DROPPED];
  if (m->first_step ? in->dropped > dr : in->dropped != dr)
    return al_set_error(AL_EFORMAT,
                        "%s: the summary says %" PRIu64 " dropped; the key table marks %" PRIu64,
                        m->path, in->dropped, dr);
  return AL_OK;
}

/* The summary's totals and every bucket's sample count against what the steps hold. */
static int check_summary(const checker *c, const uint64_t counts[AL_KEY_STATUS_MAX + 1]) {
  const al_manifest *m = c->m;
  const al_manifest_info *in = &m->info;
  int part = m->info.only_rank != 0; /* the summary is all ranks' */
  if (part ? in->samples < c->real || in->padded < c->padded || in->tokens < c->tokens
           : in->samples != c->real || in->padded != c->padded || in->tokens != c->tokens)
    return al_set_error(AL_EFORMAT,
                        "%s: the summary says %" PRIu64 " samples, %" PRIu64 " padding, %" PRIu64
                        " tokens; the steps hold %" PRIu64 ", %" PRIu64 ", %" PRIu64,
                        m->path, in->samples, in->padded, in->tokens, c->real, c->padded,
                        c->tokens);
  int rc = m->n_keys && !m->info.own_keys ? check_key_counts(m, counts) : AL_OK;
  if (rc) return rc;
  /* A bucket's count is of the epoch (dropped samples included, and for a plan that starts
   * at a later step, the steps before it): never fewer than the steps hold. */
  for (size_t b = 0; b < m->n_buckets; b++)
    if (m->buckets[b].samples < c->bucket_real[b])
      return al_set_error(AL_EFORMAT,
                          "%s: bucket %zu says %" PRIu64 " samples; the steps hold %" PRIu64,
                          m->path, b, m->buckets[b].samples, c->bucket_real[b]);
  return AL_OK;
}

int manifest_check(const al_manifest *m) {
  uint64_t counts[AL_KEY_STATUS_MAX + 1] = {0};
  int rc = check_statuses(m, counts);
  if (rc) return rc;
  checker c;
  memset(&c, 0, sizeof c);
  c.m = m;
  c.seen = calloc(m->n_keys ? m->n_keys : 1, 1);
  c.bucket_real = calloc(m->n_buckets ? m->n_buckets : 1, sizeof *c.bucket_real);
  if (m->info.own_keys) c.reals = malloc((m->n_samples ? m->n_samples : 1) * sizeof *c.reals);
  if (!c.seen || !c.bucket_real || (m->info.own_keys && !c.reals))
    rc = al_set_error(AL_ENOMEM, "%s: out of memory checking the manifest", m->path);
  for (uint32_t s = 0; s < m->steps && !rc; s++) rc = check_step(&c, s);
  if (!rc && m->info.own_keys) rc = check_repeats(&c);
  if (!rc) rc = check_all_seen(&c);
  if (!rc) rc = check_summary(&c, counts);
  free(c.reals);
  free(c.seen);
  free(c.bucket_real);
  free(c.is_pad);
  return rc;
}
