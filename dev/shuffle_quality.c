/* shuffle_quality: how well a plan mixes a corpus's shards, for the epoch planner and a chunked
 * run of the same index, beside what a uniform draw gives (docs/DESIGN.md §6.4).
 *
 *   shuffle_quality INDEX --world W [--micro-per-step K] [--seed S] [--tmp DIR]
 *
 * For each planner it plans epochs 0 and 1 (saved to DIR and loaded back) and prints one JSON
 * line: the mean distinct shards a step draws from (and the analytic S (1 - (1 - 1/S)^n) for n
 * samples a step over S shards), the longest run of one shard in a rank's sample sequence over
 * the epoch (the largest over ranks, and its mean), the rank correlation of a sample's step
 * between the two epochs (0 for independent orders), and the fraction of the pairs of samples
 * that share a step in epoch 0 which share one in epoch 1 (1 / steps for independent orders). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse_internal.h"
#include "loader/al_index.h"
#include "manifest/al_manifest.h"
#include "manifest/al_plan_index.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"

typedef struct epoch_view {
  uint32_t steps;
  uint32_t *step_of; /* per index position: its step (UINT32_MAX: not planned) */
  double shards_per_step, samples_per_step;
  uint64_t longest_run_max;
  double longest_run_mean;
} epoch_view;

static int plan_epoch(const al_index *idx, const al_cost_model *cost, al_plan_options o,
                      int chunked, uint32_t epoch, const char *path) {
  o.epoch = epoch;
  al_plan *p = NULL;
  int rc;
  if (chunked) {
    al_run *r = NULL;
    al_run_info ri = AL_RUN_INFO_INIT;
    rc = al_run_open_index(&r, idx, cost, &o);
    if (!rc) rc = al_run_get_info(r, &ri);
    if (!rc) rc = al_run_plan_steps(r, o.world, 0, ri.steps, &p);
    al_run_free(r);
  } else {
    rc = al_plan_build_index(&p, idx, cost, &o);
  }
  if (!rc) rc = al_plan_save(p, path, al_plan_index_key, (void *)idx);
  al_plan_free(p);
  return rc;
}

/* Reads a saved plan: every sample's step, shards per step, longest shard runs per rank. */
static int read_epoch(const al_index *idx, const uint32_t *shard_of, const char *path,
                      epoch_view *v) {
  al_manifest *m = NULL;
  int rc = al_manifest_load(&m, path);
  if (rc) return rc;
  al_manifest_info mi = AL_MANIFEST_INFO_INIT;
  al_manifest_get_info(m, &mi);
  size_t n = al_index_sample_count(idx), n_shards = al_index_shard_count(idx);
  v->steps = mi.steps;
  v->step_of = malloc(n * sizeof *v->step_of);
  uint32_t *seen = calloc(n_shards, sizeof *seen); /* step + 1 that last drew the shard */
  uint64_t *run = calloc(mi.world, sizeof *run), *best = calloc(mi.world, sizeof *best);
  uint32_t *last = malloc(mi.world * sizeof *last);
  if (!v->step_of || !seen || !run || !best || !last) return AL_ENOMEM;
  for (size_t i = 0; i < n; i++) v->step_of[i] = UINT32_MAX;
  for (uint32_t r = 0; r < mi.world; r++) last[r] = UINT32_MAX;
  uint64_t distinct = 0, samples = 0;
  for (uint32_t s = mi.first_step; s < mi.first_step + mi.steps && !rc; s++)
    for (uint32_t r = 0; r < mi.world && !rc; r++) {
      uint32_t nm = 0;
      rc = al_manifest_micro_count(m, s, r, &nm);
      for (uint32_t k = 0; k < nm && !rc; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        rc = al_manifest_micro(m, s, r, k, &ref);
        if (rc || ref.n_padded || ref.sp_rank) continue;
        for (size_t q = 0; q < ref.n_samples; q++) {
          uint64_t x = ref.samples[q];
          uint32_t sh = shard_of[x];
          v->step_of[x] = s;
          samples++;
          if (seen[sh] != s + 1) seen[sh] = s + 1, distinct++;
          run[r] = last[r] == sh ? run[r] + 1 : 1;
          last[r] = sh;
          if (run[r] > best[r]) best[r] = run[r];
        }
      }
    }
  v->shards_per_step = (double)distinct / mi.steps;
  v->samples_per_step = (double)samples / mi.steps;
  v->longest_run_max = 0;
  double sum = 0;
  for (uint32_t r = 0; r < mi.world; r++) {
    if (best[r] > v->longest_run_max) v->longest_run_max = best[r];
    sum += (double)best[r];
  }
  v->longest_run_mean = sum / mi.world;
  free(seen), free(run), free(best), free(last);
  al_manifest_free(m);
  return rc;
}

/* Pearson correlation of the steps of samples planned in both epochs (steps are ranks already,
 * up to ties: a rank correlation). */
static double step_correlation(const epoch_view *a, const epoch_view *b, size_t n) {
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0, k = 0;
  for (size_t i = 0; i < n; i++) {
    if (a->step_of[i] == UINT32_MAX || b->step_of[i] == UINT32_MAX) continue;
    double x = a->step_of[i], y = b->step_of[i];
    sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y, k++;
  }
  double cov = sxy / k - (sx / k) * (sy / k);
  double vx = sxx / k - (sx / k) * (sx / k), vy = syy / k - (sy / k) * (sy / k);
  return vx > 0 && vy > 0 ? cov / sqrt(vx * vy) : 0;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Of the pairs sharing a step in epoch a, the fraction sharing one in epoch b: sort samples by
 * (step in a, step in b) and count equal runs. */
static double pair_retention(const epoch_view *a, const epoch_view *b, size_t n) {
  uint64_t *key = malloc(n * sizeof *key);
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (a->step_of[i] != UINT32_MAX && b->step_of[i] != UINT32_MAX)
      key[k++] = (uint64_t)a->step_of[i] << 32 | b->step_of[i];
  qsort(key, k, sizeof *key, cmp_u64);
  double same_a = 0, same_both = 0;
  for (size_t i = 0, j; i < k; i = j) {
    for (j = i; j < k && key[j] >> 32 == key[i] >> 32; j++) {
    }
    double na = (double)(j - i);
    same_a += na * (na - 1) / 2;
    for (size_t u = i, w; u < j; u = w) {
      for (w = u; w < j && key[w] == key[u]; w++) {
      }
      double nb = (double)(w - u);
      same_both += nb * (nb - 1) / 2;
    }
  }
  free(key);
  return same_a > 0 ? same_both / same_a : 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr,
            "usage: shuffle_quality INDEX --world W [--micro-per-step K] [--seed S] "
            "[--tmp DIR]\n");
    return 2;
  }
  al_plan_options o = AL_PLAN_OPTIONS_INIT;
  const char *tmp = "/tmp";
  for (int i = 2; i + 1 < argc; i += 2) {
    uint64_t v = 0;
    if (strcmp(argv[i], "--tmp") && parse_u64(argv[i + 1], &v)) {
      fprintf(stderr, "shuffle_quality: bad value for %s: '%s'\n", argv[i], argv[i + 1]);
      return 2;
    }
    if (!strcmp(argv[i], "--world"))
      o.world = (uint32_t)v;
    else if (!strcmp(argv[i], "--micro-per-step"))
      o.micro_per_step = (uint32_t)v;
    else if (!strcmp(argv[i], "--seed"))
      o.seed = v;
    else if (!strcmp(argv[i], "--tmp"))
      tmp = argv[i + 1];
    else {
      fprintf(stderr, "shuffle_quality: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  al_index *idx = NULL;
  al_cost_model cost = AL_COST_MODEL_INIT;
  if (al_index_load(&idx, argv[1]) || al_cost_default(&cost)) {
    fprintf(stderr, "shuffle_quality: %s\n", al_last_error());
    return 1;
  }
  size_t n = al_index_sample_count(idx), S = al_index_shard_count(idx);
  uint32_t *shard_of = malloc(n * sizeof *shard_of);
  for (size_t i = 0; i < n; i++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    al_index_sample(idx, i, &si);
    shard_of[i] = si.shard;
  }
  for (int chunked = 0; chunked < 2; chunked++) {
    epoch_view e[2];
    for (uint32_t ep = 0; ep < 2; ep++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/shuffle_quality_%d_%u.alm", tmp, chunked, ep);
      if (plan_epoch(idx, &cost, o, chunked, ep, path) || read_epoch(idx, shard_of, path, &e[ep])) {
        fprintf(stderr, "shuffle_quality: %s\n", al_last_error());
        return 1;
      }
      remove(path);
    }
    double nps = e[0].samples_per_step;
    printf(
        "{\"planner\": \"%s\", \"samples\": %zu, \"shards\": %zu, \"steps\": %u, "
        "\"samples_per_step\": %.1f, \"shards_per_step\": %.1f, \"shards_per_step_uniform\": "
        "%.1f, \"longest_shard_run_max\": %llu, \"longest_shard_run_mean\": %.2f, "
        "\"step_correlation_epochs\": %.4f, \"pair_retention\": %.5f, "
        "\"pair_retention_independent\": %.5f}\n",
        chunked ? "chunked" : "epoch", n, S, e[0].steps, nps, e[0].shards_per_step,
        S * (1 - pow(1 - 1.0 / S, nps)), (unsigned long long)e[0].longest_run_max,
        e[0].longest_run_mean, step_correlation(&e[0], &e[1], n), pair_retention(&e[0], &e[1], n),
        1.0 / e[1].steps);
    free(e[0].step_of), free(e[1].step_of);
  }
  free(shard_of);
  al_index_free(idx);
  return 0;
}
