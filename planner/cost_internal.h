/* cost_internal.h - helpers shared by the cost model files (planner-private). */
#ifndef AL_COST_INTERNAL_H
#define AL_COST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/al_cost.h"
#include "proto/adaptiveload.pb-c.h"

#define AL_LS_MAXK 3

/* Weighted least squares (w may be NULL); see cost_fit.c. */
int cost_lstsq(const double *X, const double *y, const double *w, size_t n, size_t k, double *beta);

/* t(B, S) of one family with its parameters. */
double cost_eval(al_cost_family f, const double p[3], double B, double S);

/* Fits family f on all rows (params, R^2) and k-fold held-out errors. */
int cost_evaluate(al_cost_family f, const al_bench *b, uint32_t folds, int rel, al_cost_fit *out);

/* The range a plan evaluates t(B, S) = a + B * c(S) over, and the bounds a fit must meet there
 * (planner/README.md, section 3, says why): S up to 2^20 tokens per sample, B up to 2^32 - 1
 * samples per micro-batch (batch sizes are 32-bit), a power exponent in (0, 4], and no
 * prediction above 1e100 ms, so that sums and squares of up to 2^32 of them stay finite. */
#define COST_MAX_S 1048576.0
#define COST_MAX_B 4294967295.0
#define COST_MAX_P 4.0
#define COST_MAX_MS 1e100

/* 0 when a plan can use fit f: every parameter finite, c(S) > 0 and growing for S in
 * [1, COST_MAX_S], t(1, 1) > 0 (so every prediction is positive) and t(COST_MAX_B, COST_MAX_S)
 * <= COST_MAX_MS; otherwise -1 with the first bound it breaks, and the parameters, in why. */
int cost_fit_usable(const al_cost_fit *f, char *why, size_t cap);

/* CostModel message <-> al_cost_model. to_msg fills `msg` pointing into `m`
 * and the caller-provided arrays (3 doubles each); nothing to free. */
void cost_to_msg(const al_cost_model *m, Adaptiveload__CostModel *msg, double params[3],
                 double alt[3]);
int cost_from_msg(const Adaptiveload__CostModel *msg, al_cost_model *m, const char *where);

/* Embedded copy of planner/data/h200_dit_block_cost.json (generated). */
extern const char cost_default_json[];
extern const unsigned long cost_default_json_len;

#endif /* AL_COST_INTERNAL_H */
