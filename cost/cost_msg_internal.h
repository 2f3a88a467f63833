/* cost_msg_internal.h - the CostModel message (proto/adaptiveload.proto) to and from
 * al_cost_model: what a cost file (cost_io.c) and a manifest's header (manifest/) hold. Internal
 * to the modules; cost_from_msg refuses a model outside the bounds a fit is held to. */
#ifndef AL_COST_MSG_INTERNAL_H
#define AL_COST_MSG_INTERNAL_H

#include "cost/al_cost.h"
#include "proto/adaptiveload.pb-c.h"

/* CostModel message <-> al_cost_model. to_msg fills `msg` pointing into `m` and the
 * caller's buffer; nothing to free. A fit's params: power, poly2 [a, b, c]; floor [a, b, c, s,
 * F, k]. sp_params (sp_family "floor"): COST_SP_STRIDE values per degree, ascending: d, a, b, c,
 * s, F, k, rows, held-out median and max relative error. */
#define COST_MSG_PARAMS 6
#define COST_SP_STRIDE 10
typedef struct cost_msg_buf {
  double params[COST_MSG_PARAMS], alt[COST_MSG_PARAMS];
  double sp[COST_SP_STRIDE * AL_COST_MAX_SP_FITS];
} cost_msg_buf;
void cost_to_msg(const al_cost_model *m, Adaptiveload__CostModel *msg, cost_msg_buf *buf);
int cost_from_msg(const Adaptiveload__CostModel *msg, al_cost_model *m, const char *where);

#endif /* AL_COST_MSG_INTERNAL_H */
