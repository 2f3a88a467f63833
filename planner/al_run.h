/*
 * al_run.h - a chunked plan: a pass over a corpus planned window by window, any steps at once.
 *
 * al_plan_build plans a whole epoch in memory, all of it before the first step. A run instead
 * fixes, by arithmetic, what every step holds, and plans only the windows asked for:
 *
 *   * Progress through the pass is one number f in [0, 1], and step s ends at
 *     f(s) = s T / P (P the pass's planned tokens, T the step's tokens), the last step at 1.
 *   * Every bucket's samples are visited in a keyed random order (a Feistel bijection over the
 *     bucket's list, planner/run_draw_internal.h); by progress f a bucket of n samples has given
 *     floor(n f + phi) of them (phi a keyed dither), so every stretch of steps holds every
 *     bucket's share of the corpus within one sample, and every sample is drawn exactly once in
 *     the pass whatever steps are planned.
 *   * A window (`window` steps, the balancing unit; more where a small W x K meets many buckets)
 *     draws its stretch [f(s0), f(s1)), shuffles it and forms batches per bucket at the capacity
 *     batch size (the dual constraint with M_mem, not T / (W K), so batches do not depend on the
 *     world size). Adaptive: the batches are split in halves (most samples first) until they are
 *     exactly steps x W_ref x K_ref, sorted by predicted cost and cut into groups of W_ref
 *     neighbours (one level slot); each group, costliest first, goes to the step with the most
 *     token quota left that holds fewer than K_ref groups. The baselines: each batch in batch order
 *     to the step with the most quota left. At the world the steps are asked for, each step's
 *     batches are split further until it has exactly W x K micro-batches, K = ceil(K_ref W_ref /
 *     W), and laid out over the ranks as the epoch planner lays out a step (levelled by predicted
 *     cost; rank orders shuffled).
 *   * Every step holds P / round(P / T) tokens as its target; adaptive K > 1 steps come within a
 *     group's spread of it, the baselines within one batch; adaptive K = 1 steps are one group of
 *     neighbours by cost each (level ranks), so their tokens vary as the epoch planner's do.
 *
 * So a step's samples depend on (corpus, cost model, options, seed, epoch, step) and never on the
 * world it is laid out at, nothing carries from one window to the next, planning steps [A, B)
 * plans only the windows that hold them, and a full plan is the concatenation of its windows:
 * al_run_plan_steps(run, W, A, B) gives, step for step, exactly the micro-batches of the same
 * steps of al_run_plan_steps(run, W, 0, steps).
 *
 * Not yet planned by a run: sequence-parallel degrees above 1 and --last-step drop (refused,
 * AL_EINVAL, naming the option); the epoch planner (al_plan_build) plans them.
 *
 * Ownership: the caller owns an al_run (al_run_free) and every al_plan it returns (al_plan_free).
 * A run keeps no pointer into its input or options after al_run_open returns.
 * Thread safety: an open run is immutable; al_run_plan_steps may be called from several threads
 * on one run at once (no global state).
 * Errors: al_status codes; al_last_error() says what and where.
 */
#ifndef AL_RUN_H
#define AL_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"
#include "planner/al_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_run al_run;

/* Opens a run of one pass over `in` with the options of al_plan_build (world and
 * micro_per_step are the reference W_ref and K_ref; step_tokens 0 = the T whose windows are
 * expected to fill 85 % of their W_ref x K_ref rank-slots with this corpus's capacity batches; a
 * given T that would fill more than 97 % is refused, AL_ERANGE, naming the figures). start_step is
 * ignored (al_run_plan_steps takes the steps). Errors as al_plan_build's, and AL_EINVAL for what
 * a run does not plan (above). */
AL_API int al_run_open(al_run **out, const al_plan_input *in, const al_cost_model *cost,
                       const al_plan_options *opts);

typedef struct al_run_info {
  size_t struct_size;     /* set by the caller: sizeof(al_run_info) (AL_RUN_INFO_INIT) */
  uint32_t steps;         /* steps of the pass */
  uint32_t window;        /* steps a window (the unit planned at once) */
  uint32_t world_ref;     /* W_ref */
  uint32_t micro_ref;     /* K_ref */
  uint64_t step_tokens;   /* T */
  uint64_t pass_tokens;   /* P: the planned samples' tokens */
  uint64_t pass_samples;  /* planned samples */
  uint64_t capacity;      /* the T whose windows are expected to fill all their W_ref x K_ref
                             rank-slots with this corpus's capacity batches */
  uint64_t index_samples; /* the input's samples, planned and rejected */
  /* Added at the end: the run's identity. index_fingerprint is the input's (al_plan_input's,
   * the index map's; 0 if unknown). fingerprint is a 64-bit hash of what fixes every step's
   * samples: the configuration (policy, W_ref, K_ref, window, T, M_mem, M_comp, geometry, sync,
   * the buckets with their batch sizes and counts), the cost model, the index fingerprint and
   * sample count, seed and epoch; never the world the steps are laid out at, so the runs a
   * resize reopens have the same one. Never 0. What a stream over the run names in its state
   * (al_stream_open_run). seed and epoch are the run's (al_plan_options). */
  uint64_t index_fingerprint;
  uint64_t fingerprint;
  uint64_t seed;
  uint32_t epoch;
  uint32_t reserved;
  /* Added at the end: a mixture's sources (al_run_open_mixture; 1 for a run of one input) and
   * the draw ids its plans number samples by (the key table of a full plan: every source's
   * samples once per pass it reaches; index_samples for a run of one input). */
  uint32_t sources;
  uint32_t reserved2;
  uint64_t draw_ids;
} al_run_info;
#define AL_RUN_INFO_INIT AL_STRUCT_INIT(al_run_info)
#define AL_RUN_INFO_V1 offsetof(al_run_info, index_fingerprint)

AL_API int al_run_get_info(const al_run *run, al_run_info *out);

/* ---- mixtures ----
 *
 * A mixture plans several inputs (sources) as one run: every step is apportioned to the sources
 * by weight, in tokens, samples or predicted compute (al_mix_by), and each source is drawn as a
 * run draws its one input (stratified by bucket, keyed per source and pass), so that over any
 * stretch of steps each source gives its weight's share and every bucket of it its share within
 * one sample. A source that has given its whole pass starts another with a fresh keyed order
 * (AL_EXHAUST_REPEAT) or leaves (AL_EXHAUST_STOP: from the next step its weight is shared out
 * among the sources left). The run lasts `steps` steps, or until source `until` has given
 * `until_passes` passes, or, with neither, until every source has stopped (every source must
 * then be a stop source).
 *
 * Sample numbers: the plans of a mixture number each draw (source i, pass q, position j of the
 * source's input) as draw_base_i + q n_i + j (al_run_source_info), so that every number is
 * trained at most once in the run and a manifest's key table lists every pass of every source;
 * al_run_draw_where maps a number back. A full run's key table marks the draws of passes the
 * run left unfinished AL_KEY_UNDRAWN (al_manifest_key_status).
 *
 * Buckets are the one table of the options (their batch sizes at capacity, as a run's); T is
 * step_tokens, or by default the T that fills 85 % of a window's rank-slots. A mixture of one
 * stop source with no steps and no until is the run of its input: the same steps, byte for
 * byte, as al_run_open gives. */
typedef enum al_mix_by { AL_MIX_TOKENS = 0, AL_MIX_SAMPLES = 1, AL_MIX_COMPUTE = 2 } al_mix_by;
typedef enum al_exhaust { AL_EXHAUST_REPEAT = 0, AL_EXHAUST_STOP = 1 } al_exhaust;

#define AL_RUN_NAME_MAX 63
#define AL_RUN_MAX_SOURCES 2048

typedef struct al_run_source {
  size_t struct_size;         /* set by the caller: sizeof(al_run_source) (AL_RUN_SOURCE_INIT) */
  const char *name;           /* 1..AL_RUN_NAME_MAX bytes of [A-Za-z0-9_.-], unique in the mix */
  const al_plan_input *input; /* the source's samples (copied on open) */
  double weight;              /* > 0, finite; the weights are normalised over the sources */
  al_exhaust on_exhaust;
  /* Added at the end: instead of input, the path of the source's index map (plan --save-map,
   * al_run_map_writer), read mapped: its classes and their position lists, which the run copies
   * (4 bytes a sample) while each map is open; no shapes array, no index. Either every source
   * has a map or none. */
  const char *map;
} al_run_source;
#define AL_RUN_SOURCE_INIT AL_STRUCT_INIT(al_run_source)
#define AL_RUN_SOURCE_V1 offsetof(al_run_source, map)

/* A stage of a mixture: from step from_step on, the sources draw by these weights (n sources, in
 * the mixture's order; each >= 0 and finite, normalised over the sources still drawing; a
 * source of weight 0 draws nothing in the stage and goes on with its pass where it stood when a
 * later stage weighs it again). Stages ascend strictly by from_step; before the first, the
 * sources' own weights hold (a stage from step 0 replaces them). The change is exact at the
 * boundary: every source's pass goes on where it stood, so no sample of a pass is repeated or
 * skipped, and windows end at the boundary (each window draws by one stage's weights). */
typedef struct al_run_stage {
  size_t struct_size; /* set by the caller: sizeof(al_run_stage) (AL_RUN_STAGE_INIT) */
  uint32_t from_step;
  /* 0: the weights hold from from_step; N: they move linearly, from those in effect before the
   * stage (the sources' own before the first) to these, over [from_step, from_step + N), in
   * stages of one window each at the weights of its middle step (al_run_stage_get lists them);
   * the next stage starts at or after from_step + N. */
  uint32_t ramp_steps;
  const double *weights; /* n sources */
} al_run_stage;
#define AL_RUN_STAGE_INIT AL_STRUCT_INIT(al_run_stage)
#define AL_RUN_STAGE_V1 sizeof(al_run_stage)
#define AL_RUN_MAX_STAGES 4096

typedef struct al_run_mix {
  size_t struct_size;    /* set by the caller: sizeof(al_run_mix) (AL_RUN_MIX_INIT) */
  al_mix_by by;          /* what the weights apportion */
  uint32_t steps;        /* the run's length; 0: until, or every stop source stopped */
  uint32_t until;        /* 1 + the source whose passes end the run; 0: none */
  uint32_t until_passes; /* passes of that source; 0 = 1 */
  /* Added at the end: the stages (al_run_stage; NULL, 0: the sources' weights throughout),
   * at most AL_RUN_MAX_STAGES. */
  const al_run_stage *stages;
  size_t n_stages;
  /* Added at the end: a changed schedule. With `continues` (a mixture's run, borrowed: it must
   * outlive this run), this run is that run until step E, the first of its window boundaries at
   * or after at_step (its own end when at_step is at or past it), and this schedule from E on:
   * the same steps before E, byte for byte, and from E every source's pass goes on where that
   * run left it, so no sample of a pass is repeated or skipped across the change. The continued
   * run's sources come first, in its order and with its names, exhaust policies and inputs;
   * sources may be added after them (they start their first pass at E); a source is kept with
   * weight 0 rather than removed. T, the window, the bucket table, W_ref, K_ref, by, seed and
   * epoch are the continued run's (different options are refused); weights, stages, steps and
   * until are this mixture's (its stages before E are passed). al_run_continued_at gives E. */
  const struct al_run *continues;
  uint32_t at_step;
  uint32_t reserved;
} al_run_mix;
#define AL_RUN_MIX_INIT AL_STRUCT_INIT(al_run_mix)
#define AL_RUN_MIX_V1 offsetof(al_run_mix, stages)

/* Opens the mixture of n (1..AL_RUN_MAX_SOURCES) sources. Errors: AL_EINVAL naming the source
 * and field (a bad name or weight, a repeated name, a length that never ends); AL_ERANGE for a run
 * past 2^32 - 1 steps or draw ids; those of al_run_open. */
AL_API int al_run_open_mixture(al_run **out, const al_run_source *src, size_t n,
                               const al_run_mix *mix, const al_cost_model *cost,
                               const al_plan_options *opts);

typedef struct al_run_source_info {
  size_t struct_size; /* set by the caller: sizeof(al_run_source_info) (AL_RUN_SOURCE_INFO_INIT) */
  char name[AL_RUN_NAME_MAX + 1];
  double weight; /* normalised */
  al_exhaust on_exhaust;
  uint32_t passes;            /* passes the run reaches (the last may be unfinished) */
  uint64_t samples;           /* its input's samples, planned and rejected */
  uint64_t pass_samples;      /* planned samples of one pass */
  uint64_t pass_tokens;       /* their tokens */
  uint64_t draw_base;         /* its first draw id */
  uint64_t drawn;             /* samples the run draws of it, over all passes */
  uint64_t drawn_tokens;      /* their tokens */
  double drawn_ms;            /* their predicted compute (per sample at its bucket's batch size) */
  uint64_t index_fingerprint; /* the input's */
  uint32_t stop_step; /* the step it leaves at (a stop source's pass ends in step stop_step -
                         1); the run's steps if it never leaves */
  uint32_t reserved;
} al_run_source_info;
#define AL_RUN_SOURCE_INFO_INIT AL_STRUCT_INIT(al_run_source_info)
#define AL_RUN_SOURCE_INFO_V1 sizeof(al_run_source_info)

/* Source i (< al_run_info.sources) of a run (a run of one input: its one source, named "0").
 * AL_ERANGE past the sources. */
AL_API int al_run_source_get(const al_run *run, uint32_t i, al_run_source_info *out);

/* A mixture's stages (0 when its weights never change; a run of one input has none): stage k
 * holds from step *from_step with weights[i] for source i (room for al_run_info.sources;
 * normalised over all sources). AL_ERANGE past the stages or for too little room; any
 * out-pointer may be NULL. */
AL_API uint32_t al_run_stage_count(const al_run *run);

/* The step a changed schedule takes effect at (al_run_mix.continues): E; 0 for a run of its own. */
AL_API uint32_t al_run_continued_at(const al_run *run);
AL_API int al_run_stage_get(const al_run *run, uint32_t k, uint32_t *from_step, double *weights,
                            size_t n_weights);

/* Which draw a sample number of the run's plans is: its source, pass and position in the source's
 * input. AL_ERANGE past al_run_info.draw_ids. Any pointer may be NULL. */
AL_API int al_run_draw_where(const al_run *run, uint64_t id, uint32_t *source, uint32_t *pass,
                             uint64_t *position);

/* Samples source i has given by the end of step s (s <= steps), as passes in units of 2^-48
 * (pass q's share of position j is drawn when this passes q + its fraction): what resume states
 * name per source. AL_ERANGE past the sources or steps. */
AL_API int al_run_source_progress(const al_run *run, uint32_t i, uint32_t s, uint64_t *progress);

/* Plans steps [first, end) at `world` ranks (1..2^20; K = ceil(K_ref W_ref / world)): an
 * al_plan holding exactly those steps (first_step = first), which al_plan_get_info, al_plan_save
 * and the reports take as they take an epoch plan. A full pass (first 0, end = steps) carries
 * the key table of the pass; a slice has none (no memory per input position): saved, it lists
 * its own samples' keys (al_plan_save_opts, manifest/al_manifest.h), so that loading it checks
 * its own samples.
 * AL_ERANGE for a range outside [0, steps] or empty. */
AL_API int al_run_plan_steps(const al_run *run, uint32_t world, uint32_t first, uint32_t end,
                             al_plan **out);

AL_API void al_run_free(al_run *run);

/* The whole-run proof that no slice can carry: every window of the run planned at `world` in
 * turn (nothing kept), one bit per input position marking the real samples its steps train.
 * AL_OK when every planned sample is in exactly one step and no rejected one in any; AL_EFORMAT
 * naming the step, rank and sample of the first repeat, or the first sample planned in no step.
 * Holds input samples / 8 bytes and one window's plan at a time. Reentrant as
 * al_run_plan_steps. */
typedef struct al_run_check_info {
  size_t struct_size; /* set by the caller: sizeof(al_run_check_info) (AL_RUN_CHECK_INFO_INIT) */
  uint32_t steps;     /* steps planned */
  uint64_t samples;   /* real samples, each once */
  uint64_t padded;    /* padding repeats */
  uint64_t micro_batches; /* over all steps and ranks */
} al_run_check_info;
#define AL_RUN_CHECK_INFO_INIT AL_STRUCT_INIT(al_run_check_info)
#define AL_RUN_CHECK_INFO_V1 sizeof(al_run_check_info)

AL_API int al_run_check(const al_run *run, uint32_t world, al_run_check_info *out);

/* The index map: what a run needs of an index (each sample's shape and latent grid, as classes
 * of equal ones with their lists of positions), in a flat file that al_run_open_map maps
 * read-only (the ranks of a node share it in the page cache; none of it is a rank's anonymous
 * memory). al_run_map_write writes the map of `in` (al_run_map_write_index, al_plan_index.h, that
 * of an index, with its grids); AL_ERANGE past 2^32 - 1 samples. */
AL_API int al_run_map_write(const al_plan_input *in, const char *path);

/* Opens a run as al_run_open does, from an index map: the same steps, byte for byte, as a run of
 * the same samples opened from arrays or the index. The map is checked on open (every position
 * exactly once; AL_EFORMAT naming the file otherwise). require_members needs the index
 * (AL_EINVAL). Plans saved from such a run have empty keys in their key table (al_plan_save
 * with no key function; the stream accepts them for the index the map was made from). */
AL_API int al_run_open_map(al_run **out, const char *path, const al_cost_model *cost,
                           const al_plan_options *opts);

/* A streaming writer of an index map, for a corpus too large to hold: two passes over its
 * samples in position order, the first counting each sample's class (al_run_map_writer_count),
 * the second placing it (al_run_map_writer_place: the same samples in the same order), then
 * al_run_map_writer_finish, which writes the file atomically; the bytes are those
 * al_run_map_write (or al_run_map_write_index) writes for the same samples and fingerprint. It
 * holds the classes and at most 64 MiB of write buffers, never a list of samples. grid NULL (or
 * t = 0): no latent grid. Errors: AL_ERANGE past 2^32 - 1 samples; AL_EINVAL for a count after
 * the first place, or a placed sample the counting pass did not see (named by its position);
 * AL_EIO naming the file; a finish before every counted sample is placed, AL_EINVAL. Ownership:
 * al_run_map_writer_finish frees the writer whatever it returns; al_run_map_writer_free abandons
 * one (nothing is written). One thread at a time. */
typedef struct al_run_map_writer al_run_map_writer;
AL_API int al_run_map_writer_open(al_run_map_writer **out, const char *path,
                                  uint64_t index_fingerprint);
/* The fingerprint recorded in the header, when known only after the passes (any time before
 * al_run_map_writer_finish). */
AL_API void al_run_map_writer_set_fingerprint(al_run_map_writer *w, uint64_t index_fingerprint);
AL_API int al_run_map_writer_count(al_run_map_writer *w, uint32_t width, uint32_t height,
                                   uint32_t frames, const al_latent_grid *grid);
AL_API int al_run_map_writer_place(al_run_map_writer *w, uint32_t width, uint32_t height,
                                   uint32_t frames, const al_latent_grid *grid);
AL_API int al_run_map_writer_finish(al_run_map_writer *w);
AL_API void al_run_map_writer_free(al_run_map_writer *w);

#ifdef __cplusplus
}
#endif

#endif /* AL_RUN_H */
