/* run_internal.h - the layout of a chunked run (al_run.h), shared by run.c (opening from arrays,
 * planning steps) and run_map.c (opening from an index map); and run_open_grid, the open with
 * what only an index knows (latent grids, required members), for plan_index.c. Planner-private. */
#ifndef AL_RUN_INTERNAL_H
#define AL_RUN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/al_run.h"
#include "planner/plan_internal.h"
#include "planner/run_draw_internal.h"

/* A class: samples the planner cannot tell apart (one shape and grid), as a list of input
 * positions; reason: why no bucket takes them (0 for a planned class). */
typedef struct run_class {
  const uint32_t *list;
  uint64_t n;
  uint32_t reason;
} run_class;

typedef struct run_map run_map;

/* A mixture's layout (run_mix.c); NULL in a run of one input. */
typedef struct run_mix run_mix;

/* A bucket's samples are the concatenation of its classes' lists (the index map's classes, in
 * class order; a map built in memory when the run is opened from arrays or an index). */
struct al_run {
  al_plan *tmpl;  /* configuration at (W_ref, K_ref), buckets at capacity, key statuses
                     (NULL from a map: made per plan from the classes) */
  uint32_t *own;  /* opened from arrays: planned positions grouped by bucket */
  run_class *cls; /* the classes, grouped by bucket */
  size_t n_cls;
  uint64_t *cls_first; /* n_buckets + 1: bucket b's classes are cls[cls_first[b] .. [b + 1]) */
  uint64_t *cls_cum;   /* per class: samples of its bucket's classes before it */
  uint64_t *bucket_n;  /* per bucket: its samples */
  run_class *rejected; /* from a map: the classes no bucket takes, with their reasons */
  size_t n_rejected;
  run_map *map;
  run_perm *perm; /* per bucket */
  uint64_t *phi;  /* per bucket: the dither of its cumulative count */
  uint64_t pass_tokens, pass_samples, capacity;
  uint32_t steps;
  run_mix *mix;
};

/* run_map.c: unmaps an index map (NULL is a no-op). */
void run_map_close(run_map *m);

/* run_map.c: the index map of `in` in memory: its latent grids (NULL: none) and the positions
 * lacking a required member (excl; NULL: none), which form a class no bucket plans. */
int run_map_build(run_map **out, const al_plan_input *in, const al_latent_grid *grid,
                  const uint8_t *excl);

/* run_map.c: the maps of several sources as one, in memory: their classes one after another,
 * each source's positions after those of the sources before it (a mixture's concatenated input);
 * n[i] and fp[i] get source i's samples and index fingerprint, *fp_all the map's fingerprint
 * (of every source's, as a mixture of arrays has it). Each map is opened, checked and closed. */
int run_map_concat(run_map **out, const char *const *paths, size_t count, uint64_t *n, uint64_t *fp,
                   uint64_t fp_all_seed);

/* run_map.c: writes a map (built or mapped) to path, atomically. */
int run_map_save(const run_map *m, const char *path);

/* run_map.c: opens a run from a map, which the run then owns (closed with it, or here on an
 * error). */
int run_open_classes(al_run **out, run_map *map, const al_cost_model *cost,
                     const al_plan_options *o);

/* run_map.c: run_open_classes for a mixture: mix (owned by the run from here, freed on an error)
 * holds the sources as ranges of the map's positions. */
int run_open_classes_mix(al_run **out, run_map *map, run_mix *mix, const al_cost_model *cost,
                         const al_plan_options *o);

/* run_mix.c: al_run_open_mixture with each source's latent grids (grids[i] NULL, or grids
 * NULL: none) and the positions lacking a required member (excls[i]: 1 per such position, NULL:
 * none; excls NULL: no source's, and then options.require_members is refused), as an index gives
 * them (manifest/mixture.c). */
int run_open_mixture_grid(al_run **out, const al_run_source *src, size_t n, const al_run_mix *mix,
                          const al_latent_grid *const *grids, const uint8_t *const *excls,
                          const al_cost_model *cost, const al_plan_options *opts);

/* run_mix.c: frees a mixture's layout (NULL is a no-op). */
void run_mix_free(run_mix *m);

/* run_mix.c: with the run's classes indexed (run_index_classes), the mixture's strata (source x
 * bucket), rates, segments and length, T and the window (run_finish's part for a mixture), and
 * the template's counts in draw ids. */
int run_mix_finish(al_run *r, const al_plan_options *o);

/* run_mix.c: the window's draws, steps [s0, s1), as bucket << 32 | draw id (unshuffled). */
int run_mix_draw(const al_run *r, uint32_t s0, uint32_t s1, uint64_t **items, size_t *n);

/* run_mix.c: the tokens the run is expected to have drawn by the end of step s (the quotas of a
 * mixture's steps). */
uint64_t run_mix_expected_tokens(const al_run *r, uint64_t s);

/* run_mix.c: a full run's key statuses before its steps mark theirs (every draw id unplanned,
 * AL_KEY_UNDRAWN, or its sample's reject reason). */
void run_mix_fill_status(const al_run *r, uint8_t *status);

/* run_mix.c: the mixture's part of the run's fingerprint. */
uint64_t run_mix_fingerprint(const al_run *r, uint64_t h);

/* run_mix.c: the segment [*a, *b) holding step (< the run's steps). */
void run_mix_segment(const al_run *r, uint32_t step, uint32_t *a, uint32_t *b);

/* run_mix.c: the order of a window's steps (n of them; micro-batch x of p in step step_of[x])
 * that keeps every source's running share of the window's units nearest its share of the whole
 * window: greedy, each next step the one whose addition leaves the least squared deviation (ties:
 * the lower step). to[s] = the position step s moves to. AL_ENOMEM. */
int run_mix_order_steps(const al_run *r, const al_plan *p, const uint32_t *step_of, uint32_t n,
                        uint32_t *to);

/* run_mix.c: a mixture's figures of al_run_info (index_samples: the inputs'; sources;
 * draw_ids). */
void run_mix_info(const al_run *r, al_run_info *i);

/* run_mix.c: copies the sources into a plan (plan_source entries); AL_ENOMEM. */
int run_mix_plan_sources(const al_run *r, al_plan *p);

/* run.c: AL_ERANGE naming the first bucket with samples whose one sample holds more than t tokens
 * (a step of t tokens could not take it). */
int run_check_step_tokens(const al_plan *p, uint64_t t);

/* run.c: the splitmix-style mixing step of run fingerprints. */
void run_fp_add(uint64_t *h, uint64_t v);

/* run.c: what a run does not plan (SP degrees above 1, last-step drop): AL_EINVAL naming it. */
int run_check_options(const al_plan_options *o);

/* run.c: the window (the default where opts leave it 0) and T from the buckets' counts, checked
 * (al_run_open's refusals). */
int run_finish(al_run *r, const al_plan_options *o);

/* run.c: with r->cls, r->n_cls and r->cls_first set (classes grouped by bucket), the per-bucket
 * counts, keyed orders and dithers, and the pass's tokens and samples. AL_OK or AL_ENOMEM. */
int run_index_classes(al_run *r);

/* run.c: a run of `in` (its grids and the positions lacking a required member as
 * run_map_build takes them), options already copied. */
int run_open_grid(al_run **out, const al_plan_input *in, const al_latent_grid *grid,
                  const uint8_t *excl, const al_cost_model *cost, const al_plan_options *o);

#endif /* AL_RUN_INTERNAL_H */
