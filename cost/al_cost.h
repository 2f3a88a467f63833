/*
 * al_cost.h - the cost model: predicted time of one micro-batch of B samples
 * of S tokens each, fitted on a shape benchmark.
 *
 * Three families:
 *   power: t = a + b * B * S^p               (the paper's form; Levenberg-Marquardt)
 *   poly2: t = a + b * B * S + c * B * S^2   (matmuls linear, attention quadratic;
 *                                             linear least squares, Householder QR)
 *   floor: t = smax_k(F, a + s * B + b * B * S + c * B * S^2)
 *          poly2 with a per-sample term s and a launch floor F: a micro-batch too small to
 *          fill the GPU costs its kernel launches, F, whatever its size. smax_k(x, y) =
 *          (x^k + y^k)^(1/k) is a smooth maximum (k = AL_COST_FLOOR_SHARPNESS): near the knee
 *          launches and work overlap only in part. Levenberg-Marquardt from the best hard
 *          floor. Fitted on every row (launch-bound ones included) unless min_tokens is set.
 * All are fitted by least squares on the *relative* residual (t_i - f_i) / t_i
 * by default, because a benchmark spans three orders of magnitude of step time
 * and the planner needs every shape right, not only the slowest ones
 * (AL_LOSS_ABS gives plain residuals; cost/README.md compares them). Rows
 * with B * S < min_tokens (default 4096 for power and poly2, 1 for floor) are
 * launch-bound (their time is kernel-launch overhead and not even monotone in B):
 * power and poly2 leave them out and count them. Quality is reported as R^2 on the
 * fitted rows and the median and max relative error on held-out rows of a
 * deterministic k-fold (row i of the fitted rows is in fold i mod k), and per band
 * of tokens per sample over EVERY row (al_cost_model.bands: a row a family left
 * out is scored by its fit on all fitted rows, which never saw it).
 *
 * The per-sample cost c(S) is the part of t proportional to B:
 *   power: c(S) = b * S^p        poly2: c(S) = b * S + c * S^2
 *   floor: c(S) = s + b * S + c * S^2
 * so t(B, S) = a + B * c(S) (floor: smax_k(F, a + B * c(S))). The planner's compute
 * limit caps B * c(S).
 *
 * Sequence parallelism: a benchmark with a d column (examples/shape_bench.py
 * --sp-degrees) times one rank's share at degree d. Its d = 1 rows give the fit
 * above; the rows of each degree d > 1 give a floor fit of their own (sp_fits), with
 *   t_d = smax_k(F_d, a_d + s_d B + (b_d B S + c_d B S^2) / d)
 * (linear layers on S / d tokens, attention for H / d heads over S: both / d).
 * al_cost_predict_sp adds the modelled all-to-all time to it.
 *
 * Memory (when the benchmark has peak_mem_bytes): bytes = m0 + m1 * B * S,
 * giving a token cap M_mem = floor((capacity * safety - m0) / m1).
 *
 * Ownership: al_bench owns its arrays (al_bench_free); al_cost_model is a
 * plain value with fixed-size strings (copy it whole: its struct_size comes along).
 * Thread safety: no shared state; distinct objects may be used concurrently.
 * Errors: al_status codes; al_last_error() names file, line and column.
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_cost_model, al_bench,
 * al_cost_fit_options and al_trace_stats start with `size_t struct_size`, set with AL_*_INIT;
 * the library reads and writes only what fits in it. A function that fills one (al_cost_fit_bench,
 * al_cost_default, al_cost_load, al_manifest_cost, al_bench_parse and its kin) needs the size
 * set; one that reads one (the predictions, al_cost_save, al_plan_build, al_bench_append's src,
 * al_bench_free) takes 0 as this header's struct, and fields past a smaller size read as 0
 * (their defaults). A size below AL_*_V1 or above the library's is AL_EINVAL naming the struct
 * and both sizes; the predictions, which return no status, give NaN then (al_last_error() says
 * why). al_bench arrays the caller's struct has no field for are freed, never handed over.
 * al_cost_fit, al_cost_band and al_cost_sp_fit are embedded in al_cost_model: fixed layouts
 * that never grow, with no size.
 */
#ifndef AL_COST_H
#define AL_COST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/al_api.h"
#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum al_cost_family {
  AL_COST_AUTO = 0, /* choose: lower held-out median relative error over every row */
  AL_COST_POWER = 1,
  AL_COST_POLY2 = 2,
  AL_COST_FLOOR = 3
} al_cost_family;

/* k of the floor family's smooth maximum (8: the best held-out error of 4, 6, 8, 12, 16 and a
 * hard maximum on the shipped H200 benchmarks; cost/README.md, section 1). */
#define AL_COST_FLOOR_SHARPNESS 8.0

AL_API const char *al_cost_family_name(al_cost_family f);
/* "auto" | "power" | "poly2" | "floor" -> family; AL_EINVAL for anything else. */
AL_API int al_cost_family_parse(const char *s, al_cost_family *out);

typedef struct al_cost_fit {
  al_cost_family family; /* 0 when this fit is absent */
  double params[3];      /* power: a, b, p   poly2, floor: a, b, c   (ms, tokens) */
  double r2;             /* on all rows */
  double median_rel_err; /* held-out (k-fold) */
  double max_rel_err;    /* held-out (k-fold) */
  /* Added at the end: the floor family's other parameters (0 for power and poly2). */
  double per_sample_ms; /* s */
  double floor_ms;      /* F */
  double sharpness;     /* k */
} al_cost_fit;

/* Held-out relative errors of the rows whose tokens per sample S lie in [lo, hi). */
typedef struct al_cost_band {
  double lo, hi; /* hi = 0: no upper bound */
  uint32_t rows; /* 0: no row in the band */
  double median_rel_err, max_rel_err;
} al_cost_band;

/* The bands fit reports: S < 2k, 2k-8k, 8k-32k and >= 32k tokens per sample. */
#define AL_COST_BANDS 4

/* One degree's fit of a benchmark's d column (family floor; b and c per rank x d, see above). */
typedef struct al_cost_sp_fit {
  uint32_t degree; /* 2..1024, a power of two */
  uint32_t rows;
  al_cost_fit fit;
  al_cost_band bands[AL_COST_BANDS]; /* at fit time only (not saved) */
  al_cost_band all_rows;
} al_cost_sp_fit;

/* Degrees 2, 4, ..., 1024. */
#define AL_COST_MAX_SP_FITS 10

typedef struct al_cost_model {
  size_t struct_size;     /* sizeof(al_cost_model): AL_COST_MODEL_INIT */
  al_cost_fit fit;        /* the family in use */
  al_cost_fit alt;        /* the other family, for reports (family 0 if not fitted) */
  uint32_t rows;          /* rows fitted */
  uint32_t rows_excluded; /* launch-bound rows left out (B * S < min_tokens) */
  double min_tokens;
  int abs_loss; /* fitted with AL_LOSS_ABS */
  int has_mem;
  double mem_m0, mem_m1; /* bytes = m0 + m1 * B * S */
  char device[64];
  char measured[32];
  char source[256];
  /* Added at the end: sequence parallelism (al_cost_predict_sp). 0 = the defaults below. */
  double sp_a2a_bytes_per_token; /* all-to-all bytes one token of a micro-batch moves per step
                                    (forward and backward, every layer the model times) */
  double sp_link_gbps;           /* GB/s per GPU per direction the all-to-all runs at */
  /* Held-out errors of the fit over every row, by band of tokens per sample (at fit time only:
   * not saved; rows 0 in a loaded model). */
  al_cost_band bands[AL_COST_BANDS];
  al_cost_band all_rows; /* the same over every row (auto keeps the family lowest here) */
  /* Per-degree fits (sp_family "floor"), ascending by degree; 0: none, the analytic scaling of
   * al_cost_predict_sp applies. */
  uint32_t n_sp_fits;
  al_cost_sp_fit sp_fits[AL_COST_MAX_SP_FITS];
} al_cost_model;
#define AL_COST_MODEL_INIT AL_STRUCT_INIT(al_cost_model)
#define AL_COST_MODEL_V1 sizeof(al_cost_model)

/* The embedded default's blocks: 4 blocks of hidden 1536 in bf16, 8 all-to-alls a block (4
 * forward: q, k, v and the output; 4 backward), 8 x 1536 x 2 x 4 bytes per token. */
#define AL_COST_DEFAULT_SP_A2A_BYTES_PER_TOKEN 98304.0
/* An assumed, not measured, NVLink-4 all-to-all rate (NCCL on 8 H100/H200 reaches about this
 * per GPU per direction; the link is 450 GB/s each way). */
#define AL_COST_DEFAULT_SP_LINK_GBPS 350.0

/* A shape benchmark: one row per (B, S) measurement. */
typedef struct al_bench {
  size_t struct_size; /* sizeof(al_bench): AL_BENCH_INIT */
  size_t n;
  double *B, *S, *ms;
  double *mem; /* peak_mem_bytes; NULL when the input had none */
  char device[64];
  char measured[32];
  char source[256];
  /* Added at the end. */
  double *d; /* SP degree of each row (column d, alias sp_degree); NULL when the input had none:
                every row is d = 1 */
  /* The model's shape from the benchmark's metadata (CSV comment line "# shape_bench: hidden=1536
   * layers=4 dtype_bytes=2 ...", JSON keys of those names); 0 = not given. The all-to-all bytes
   * per token are 8 x hidden x dtype_bytes x layers. */
  double hidden, layers, dtype_bytes;
} al_bench;
#define AL_BENCH_INIT AL_STRUCT_INIT(al_bench)
#define AL_BENCH_V1 sizeof(al_bench)

/* CSV: a header row naming B, S, step_ms (alias ms) and optionally
 * peak_mem_bytes and d (alias sp_degree: 1..1024, a power of two), in any order (other columns are
 * ignored); one row per measurement; fields per RFC 4180 (a field in double quotes may hold commas,
 * line breaks and doubled quotes). JSON: {"device": ..., "measured": ..., "rows": [{"B": 1, "S":
 * 256, "ms": 8.7, "peak_mem_bytes": ...}]} (the format of
 * cost/data/h200_dit_block_cost.json). The format is sniffed from the first
 * non-blank byte. Errors name the file, line and column; fewer than
 * AL_BENCH_MIN_ROWS rows is an error. */
#define AL_BENCH_MIN_ROWS 8
AL_API int al_bench_parse(al_bench *out, const char *text, size_t len, const char *name);
AL_API int al_bench_load(al_bench *out, const char *path);
AL_API void al_bench_free(al_bench *b);

/* A training trace: JSONL, one measured micro-batch per line, with numbers B (alias n:
 * samples), S (tokens per sample; or tokens, the micro-batch's total, S = tokens / B), ms
 * (alias step_ms) and optionally peak_mem_bytes; other keys are ignored, lines with
 * "warmup": true are counted and left out. Lines of one (B, S) become one benchmark row:
 * their median ms and largest peak memory (when every line has it). A line that is not
 * usable (a run killed mid-write leaves half a line) is skipped and counted, the first one
 * named in stats; fewer than AL_BENCH_MIN_ROWS distinct shapes is AL_EINVAL. examples/
 * train_dit.py --trace writes such a file. `stats` may be NULL. */
typedef struct al_trace_stats {
  size_t struct_size; /* sizeof(al_trace_stats), set by the caller: AL_TRACE_STATS_INIT */
  size_t lines;       /* non-blank lines */
  size_t used;        /* measurements kept */
  size_t warmup;      /* lines marked warmup */
  size_t skipped;     /* lines that could not be used */
  size_t groups;      /* distinct (B, S): the rows */
  char first_skipped[256];
} al_trace_stats;
#define AL_TRACE_STATS_INIT AL_STRUCT_INIT(al_trace_stats)
#define AL_TRACE_STATS_V1 sizeof(al_trace_stats)
AL_API int al_bench_parse_trace(al_bench *out, const char *text, size_t len, const char *name,
                                al_trace_stats *stats);
AL_API int al_bench_load_trace(al_bench *out, const char *path, al_trace_stats *stats);
/* Appends src's rows to dst (a benchmark and a trace fitted together). Peak memory is kept
 * only when both have it. */
AL_API int al_bench_append(al_bench *dst, const al_bench *src);

typedef enum al_cost_loss {
  AL_LOSS_REL = 0, /* minimise sum ((t - f) / t)^2 (default) */
  AL_LOSS_ABS = 1  /* minimise sum (t - f)^2 */
} al_cost_loss;

/* Rows with B * S below this are launch-bound and left out of the fit. */
#define AL_COST_DEFAULT_MIN_TOKENS 4096

typedef struct al_cost_fit_options {
  size_t struct_size; /* sizeof(al_cost_fit_options) (AL_COST_FIT_OPTIONS_INIT); 0 = this header's
                         struct */
  al_cost_family family; /* AL_COST_AUTO (0) = fit all three, keep the best */
  uint32_t folds;        /* 0 = 5 */
  uint64_t min_tokens;   /* 0 = AL_COST_DEFAULT_MIN_TOKENS for power and poly2, 1 for floor;
                            1 keeps every row */
  al_cost_loss loss;
  /* Added at the end: the all-to-all of al_cost_predict_sp. 0 = from the benchmark's metadata
   * (8 x hidden x dtype_bytes x layers; without it, AL_COST_DEFAULT_SP_A2A_BYTES_PER_TOKEN)
   * and AL_COST_DEFAULT_SP_LINK_GBPS. Otherwise finite and > 0 (AL_EINVAL naming it). */
  double sp_a2a_bytes_per_token;
  double sp_link_gbps;
} al_cost_fit_options;
#define AL_COST_FIT_OPTIONS_INIT AL_STRUCT_INIT(al_cost_fit_options)
#define AL_COST_FIT_OPTIONS_V1 offsetof(al_cost_fit_options, sp_a2a_bytes_per_token)

/* Raw fitters on n rows (weights: relative residuals). params as above. */
AL_API int al_cost_fit_power(const double *B, const double *S, const double *t, size_t n,
                             double params[3]);
AL_API int al_cost_fit_poly2(const double *B, const double *S, const double *t, size_t n,
                             double params[3]);

/* Fits the family/families, fills errors (held-out, and by band), memory fit and provenance.
 * AL_ERANGE, naming the bound, when the fit is outside what a plan can use (predictions finite
 * and positive and c(S) growing over S = 1..2^20, B = 1..2^32 - 1: cost/README.md, section
 * 3); AL_COST_AUTO then keeps another family if it is inside. With a d column: the d = 1 rows
 * give the fit (at least AL_BENCH_MIN_ROWS of them, else AL_EINVAL), each degree d > 1 with at
 * least AL_BENCH_MIN_ROWS rows a floor fit in sp_fits (fewer: AL_EINVAL naming the degree). */
AL_API int al_cost_fit_bench(const al_bench *b, const al_cost_fit_options *opts,
                             al_cost_model *out);

/* The embedded default: cost/data/h200_dit_block_cost.json fitted with
 * AL_COST_AUTO. Deterministic; takes a few milliseconds. */
AL_API int al_cost_default(al_cost_model *out);
/* The embedded JSON text itself (NUL-terminated). */
AL_API const char *al_cost_default_json(void);

/* Predicted ms of a micro-batch of B samples of S tokens: a + B * c(S) (floor: smax_k(F, a + B
 * c(S))). */
AL_API double al_cost_predict(const al_cost_model *m, uint64_t B, uint64_t S);
/* The B-proportional cost of one sample, c(S), in ms. */
AL_API double al_cost_per_sample(const al_cost_model *m, uint64_t S);
/* One rank's share, in ms, of a micro-batch of B samples of S tokens run by a sequence-parallel
 * group of d ranks (Ulysses: linear layers on S / d tokens, attention for H / d heads over all
 * S tokens), with the all-to-all time the group spends on it. d = 1 (or 0) is exactly
 * al_cost_predict. For d > 1: compute + a2a, a2a = B S (d - 1) / d^2 x sp_a2a_bytes_per_token /
 * (sp_link_gbps x 1e6) ms (each all-to-all moves a rank's B S / d tokens, of which (d - 1) / d
 * leave it), compute = the per-degree fit of d when sp_fits has one (else the one of the largest
 * fitted degree below d, else the smallest fitted degree, each evaluated at d); without
 * sp_fits: a + B c(S) / d (floor: smax_k(F, a + s B + B (b S + c S^2) / d)). */
AL_API double al_cost_predict_sp(const al_cost_model *m, uint64_t B, uint64_t S, uint32_t d);
/* The B-proportional part of al_cost_predict_sp: what one more sample adds to a rank's share. */
AL_API double al_cost_per_sample_sp(const al_cost_model *m, uint64_t S, uint32_t d);
/* Token cap from the memory fit: floor((capacity * safety - m0) / m1), saturated at the
 * planner's largest M_mem, 2^32 - 1 (AL_PLAN_MAX_MEM_TOKENS, al_plan.h).
 * AL_ESTATE without a memory fit, AL_ERANGE when the cap would be < 1. */
AL_API int al_cost_mem_tokens(const al_cost_model *m, double capacity_bytes, double safety,
                              uint64_t *tokens);

/* Saves / loads a cost model file (proto/pbio_internal.h, AL_KIND_COST). Loading refuses
 * (AL_EFORMAT, naming the bound) a model outside the bounds al_cost_fit_bench holds fits to. */
AL_API int al_cost_save(const al_cost_model *m, const char *path);
AL_API int al_cost_load(al_cost_model *out, const char *path);

/* One JSON object: family, params, errors, alternative, memory fit (`adaptiveload fit --json`;
 * al_report.h, which includes this header, holds the manifest and plan reports). AL_OK; AL_EINVAL
 * (nothing written) for a model whose struct_size this library cannot read. */
AL_API int al_cost_print_json(const al_cost_model *m, FILE *out);

#ifdef __cplusplus
}
#endif

#endif /* AL_COST_H */
