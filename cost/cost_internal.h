/* cost_internal.h - helpers shared by the cost model's files (cost/-private). */
#ifndef AL_COST_INTERNAL_H
#define AL_COST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "cost/al_cost.h"

#define AL_LS_MAXK 4

/* The size rule of al_bench (bench_io.c; docs/DESIGN.md, "The ABI of the public structs"):
 * bench_out_size checks the struct_size of a caller's benchmark to fill (0 refused) and gives
 * the bytes it holds; bench_out hands `b` (this library's layout) over to the caller's first n
 * bytes, its struct_size left as it is, after freeing every array whose field lies past them
 * (the caller could never free it). */
int bench_out_size(const al_bench *caller, const char *fn, size_t *n);
void bench_out(al_bench *caller, al_bench *b, size_t n);

/* Weighted least squares (w may be NULL); see cost_fit.c. */
int cost_lstsq(const double *X, const double *y, const double *w, size_t n, size_t k, double *beta);

/* Benchmark rows as a fitter takes them: B, S, the SP degree (NULL: all 1) and the time. */
typedef struct cost_rows {
  const double *B, *S, *D, *t;
  size_t n;
} cost_rows;

/* t(B, S) of fit f at SP degree d (1: the plain model; floor only divides b and c by d). */
double cost_fit_eval(const al_cost_fit *f, double B, double S, double d);

/* Fits family f on the rows (params, R^2) and their k-fold held-out errors: the median and max
 * in out, each row's in err (n values, row order) when err is not NULL. */
int cost_evaluate(al_cost_family f, const cost_rows *r, uint32_t folds, int rel, al_cost_fit *out,
                  double *err);

/* The floor family (cost_floor.c). th = (F, a, s, b, c):
 *   work = a + s B + (b B S + c B S^2) / d,   t = smax_k(F, work)   (F where work <= 0). */
#define COST_FLOOR_NP 5
double cost_floor_work(const double th[COST_FLOOR_NP], double B, double S, double d);
double cost_floor_eval(const double th[COST_FLOOR_NP], double k, double B, double S, double d);
/* Levenberg-Marquardt from th on relative (rel) or absolute residuals; th only improves. fix_s
 * keeps s (th[2]) as it is. */
void cost_floor_refine(const cost_rows *r, double k, int rel, int fix_s, double th[COST_FLOOR_NP]);

/* Levenberg-Marquardt (cost_lm.c), the solver of the power and floor families. A family gives
 * its normal equations at th (JtJ, np x np row-major, and Jtr, both zeroed by the caller, of
 * the weighted residuals), a damped step from them (0 with the candidate, -1 when singular)
 * the loss of a candidate, and which candidates its domain admits. From th, which
 * only improves: up to max_iter iterations of up to 30 tries each, the damping divided by 10
 * after an accepted step and multiplied by 10 after a refused one; it stops when no try
 * improves or the gain falls below 1e-14 of the loss. */
#define COST_LM_MAX_NP 8
typedef struct cost_lm_problem {
  int np, max_iter;
  const void *ctx;
  void (*normal)(const void *ctx, const double *th, double *JtJ, double *Jtr);
  int (*step)(const void *ctx, const double *JtJ, const double *Jtr, const double *th,
              double lambda, double *cand);
  double (*sse)(const void *ctx, const double *th);
  int (*admits)(const void *ctx, const double *cand); /* NULL: every candidate */
} cost_lm_problem;
void cost_lm_minimize(const cost_lm_problem *p, double *th);
/* Solves M x = g (M n x n row-major, n <= COST_LM_MAX_NP; M is not changed) by Gaussian
 * elimination with partial pivoting; -1 when singular. */
int cost_solve(const double *M, const double *g, int n, double *x);

/* The range a plan evaluates t(B, S) = a + B * c(S) over, and the bounds a fit must meet there
 * (cost/README.md, section 3, says why): S up to 2^20 tokens per sample, B up to 2^32 - 1
 * samples per micro-batch (batch sizes are 32-bit), a power exponent in (0, 4], and no
 * prediction above 1e100 ms, so that sums and squares of up to 2^32 of them stay finite. */
#define COST_MAX_S 1048576.0
#define COST_MAX_B 4294967295.0
#define COST_MAX_P 4.0
#define COST_MAX_MS 1e100
/* The floor family's k: 1 (a sum) to 64 (all but a hard maximum). */
#define COST_MAX_SHARPNESS 64.0
/* The largest SP degree a benchmark row may have (AL_PLAN_MAX_SP_DEGREES powers of two). */
#define COST_MAX_SP_DEGREE 1024.0
/* The largest M_mem al_cost_mem_tokens gives: the planner's, AL_PLAN_MAX_MEM_TOKENS (al_plan.h,
 * a layer above; PlanLimits.MemCapacitySaturates holds them equal). */
#define COST_MAX_MEM_TOKENS 4294967295u

/* 0 when a plan can use fit f: every parameter finite, c(S) > 0 and growing for S in
 * [1, COST_MAX_S], t(1, 1) > 0 (so every prediction is positive) and t(COST_MAX_B, COST_MAX_S)
 * <= COST_MAX_MS; otherwise -1 with the first bound it breaks, and the parameters, in why. */
int cost_fit_usable(const al_cost_fit *f, char *why, size_t cap);
/* The same for a per-degree fit, evaluated at its degree d. */
int cost_sp_fit_usable(const al_cost_fit *f, double d, char *why, size_t cap);

/* The model `m` as this library reads it (the read rule of common/struct_abi_internal.h): `m`
 * itself when its struct_size is 0 or this library's, else its bytes copied into `local` (fields
 * past them 0, their defaults); NULL, with AL_EINVAL naming `fn` set, for any other size. */
const al_cost_model *cost_model_in(const al_cost_model *m, al_cost_model *local, const char *fn);

/* Embedded copy of cost/data/h200_dit_block_cost.json (generated). */
extern const char cost_default_json[];
extern const unsigned long cost_default_json_len;

#endif /* AL_COST_INTERNAL_H */
