/* manifest_internal.h - layout of a loaded al_manifest (manifest/-private).
 *
 * Arrays, not messages: the records are unpacked one at a time and copied
 * into flat arrays, so a 10M-sample manifest costs about 16 bytes per
 * sample (index position and tokens, both u64 because al_micro_ref hands
 * out pointers to them) plus the keys. */
#ifndef AL_MANIFEST_INTERNAL_H
#define AL_MANIFEST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/al_buckets.h"
#include "cost/al_cost.h"
#include "manifest/al_manifest.h"

typedef struct manifest_micro {
  uint64_t first;     /* into samples[] and tokens[] */
  uint64_t pad_first; /* into pads[] */
  uint32_t n;
  uint32_t n_pad;
  uint32_t bucket; /* position in buckets[] */
  double cost;
  /* Its sequence-parallel group (1 and 0 without SP). A follower (sp_rank > 0) stores no
   * samples: first, n, pad_first and n_pad are its leader's, the same micro-batch of rank
   * r - sp_rank. */
  uint32_t sp_degree;
  uint32_t sp_rank;
} manifest_micro;

typedef struct manifest_step {
  uint64_t samples, tokens;
  double max_cost, mean_cost;
} manifest_step;

struct al_manifest {
  char *path;
  char policy[32];
  char last_step[16];
  char cost_family[16];
  al_manifest_info info;
  al_latent_geom geom;
  al_cost_model cost;
  al_bucket_info *buckets;
  size_t n_buckets;
  uint32_t world, first_step, steps;
  /* Rank entries held a step: world, or 1 for a rank's slice (PlanConfig.only_rank = rank0 + 1),
   * whose entries are rank0's. Every slot[] index counts `ranks`. */
  uint32_t ranks, rank0;
  manifest_step *stepv;
  uint64_t *slot; /* steps * ranks + 1 offsets into micro */
  manifest_micro *micro;
  size_t n_micro, cap_micro;
  uint64_t *samples, *tokens;
  size_t n_samples, cap_samples, cap_tokens;
  uint32_t *pads;
  size_t n_pads, cap_pads;
  uint64_t n_keys;
  uint64_t *key_off; /* n_keys + 1 offsets into key_blob */
  char *key_blob;
  size_t blob_len, blob_cap;
  uint8_t *key_status; /* per key (a whole plan: per index position) */
  /* A slice's own key table (PlanConfig.own_keys): the index position of each key, ascending
   * (key_status then all 0); n_keys may be 0 (planned from an index map). */
  uint64_t *key_pos;
  uint64_t rejected[AL_REJECT_COUNT];
  /* A mixture's sources (PlanConfig.sources) and mix_by; none for a plan of one index. */
  al_run_source_info *sources;
  uint32_t n_sources;
  char mix_by[16];
  /* Its stages (PlanConfig.stages): stage k from step stage_from[k], weights
   * stage_w[k n_sources + i]; none when its weights never change. */
  uint32_t n_stages;
  uint32_t *stage_from;
  double *stage_w;
};

/* Checks that a loaded manifest is a plan: every scheduled sample exactly
 * once, bounded micro-batches, totals and summary matching what the steps hold
 * (manifest_check.c says what exactly). AL_OK or AL_EFORMAT naming the place. */
int manifest_check(const al_manifest *m);

/* A slice's key entry for index position `sample`: its number in key_pos, or -1 when it lists
 * none (manifest_check.c; the reader's key accessors use it too). */
int64_t manifest_key_entry(const al_manifest *m, uint64_t sample);

#endif /* AL_MANIFEST_INTERNAL_H */
