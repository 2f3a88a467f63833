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

/* CostModel message <-> al_cost_model. to_msg fills `msg` pointing into `m`
 * and the caller-provided arrays (3 doubles each); nothing to free. */
void cost_to_msg(const al_cost_model *m, Adaptiveload__CostModel *msg, double params[3],
                 double alt[3]);
int cost_from_msg(const Adaptiveload__CostModel *msg, al_cost_model *m, const char *where);

/* Embedded copy of planner/data/h200_dit_block_cost.json (generated). */
extern const char cost_default_json[];
extern const unsigned long cost_default_json_len;

#endif /* AL_COST_INTERNAL_H */
