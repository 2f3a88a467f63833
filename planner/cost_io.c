/* Cost model files (CostModel message in the pbio container), the embedded
 * default, and the JSON report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_write_internal.h"
#include "planner/al_cost.h"
#include "planner/cost_internal.h"
#include "planner/al_report.h"
#include "proto/pbio_internal.h"

static char *s_or_empty(const char *s) { return (char *)(s ? s : ""); }

/* The fields of one fitted curve in a CostModel message: the chosen fit, or
 * the other family's (alt_*). Read through it too, with const cast away. */
typedef struct fit_fields {
  char **family;
  size_t *n_params;
  double **params;
  double *r2, *median_rel_err, *max_rel_err;
} fit_fields;

static fit_fields fit_fields_of(Adaptiveload__CostModel *msg, int alt) {
  if (alt)
    return (fit_fields){&msg->alt_family, &msg->n_alt_params,       &msg->alt_params,
                        &msg->alt_r2,     &msg->alt_median_rel_err, &msg->alt_max_rel_err};
  return (fit_fields){&msg->family, &msg->n_params,       &msg->params,
                      &msg->r2,     &msg->median_rel_err, &msg->max_rel_err};
}

static void fit_to_msg(const al_cost_fit *f, fit_fields o, double params[3]) {
  memcpy(params, f->params, 3 * sizeof(double));
  *o.family = s_or_empty(al_cost_family_name(f->family));
  *o.n_params = 3;
  *o.params = params;
  *o.r2 = f->r2;
  *o.median_rel_err = f->median_rel_err;
  *o.max_rel_err = f->max_rel_err;
}

void cost_to_msg(const al_cost_model *m, Adaptiveload__CostModel *msg, double params[3],
                 double alt[3]) {
  adaptiveload__cost_model__init(msg);
  fit_to_msg(&m->fit, fit_fields_of(msg, 0), params);
  msg->rows = m->rows;
  msg->rows_excluded = m->rows_excluded;
  msg->min_tokens = m->min_tokens;
  msg->abs_loss = m->abs_loss != 0;
  msg->device = s_or_empty(m->device);
  msg->measured = s_or_empty(m->measured);
  msg->source = s_or_empty(m->source);
  msg->has_mem = m->has_mem != 0;
  msg->mem_m0 = m->mem_m0;
  msg->mem_m1 = m->mem_m1;
  msg->sp_a2a_bytes_per_token = m->sp_a2a_bytes_per_token;
  msg->sp_link_gbps = m->sp_link_gbps;
  if (m->alt.family) fit_to_msg(&m->alt, fit_fields_of(msg, 1), alt);
}

static int family_of(const char *s, al_cost_family *f) {
  if (!strcmp(s, "power"))
    *f = AL_COST_POWER;
  else if (!strcmp(s, "poly2"))
    *f = AL_COST_POLY2;
  else
    return -1;
  return 0;
}

/* One fit out of the message; -1 (f untouched) when it has not 3 parameters
 * or no known family. */
static int fit_from_msg(fit_fields in, al_cost_fit *f) {
  if (*in.n_params != 3 || !*in.family || family_of(*in.family, &f->family)) return -1;
  memcpy(f->params, *in.params, 3 * sizeof(double));
  f->r2 = *in.r2;
  f->median_rel_err = *in.median_rel_err;
  f->max_rel_err = *in.max_rel_err;
  return 0;
}

int cost_from_msg(const Adaptiveload__CostModel *msg, al_cost_model *m, const char *where) {
  memset(m, 0, sizeof *m);
  if (family_of(msg->family ? msg->family : "", &m->fit.family))
    return al_set_error(AL_EFORMAT, "%s: cost model family '%s' is not power or poly2", where,
                        msg->family ? msg->family : "");
  if (msg->n_params != 3)
    return al_set_error(AL_EFORMAT, "%s: cost model has %zu parameters, expected 3", where,
                        msg->n_params);
  for (int i = 0; i < 3; i++)
    if (!isfinite(msg->params[i]))
      return al_set_error(AL_EFORMAT, "%s: cost model parameter %d is not finite", where, i);
  Adaptiveload__CostModel *in = (Adaptiveload__CostModel *)msg; /* read only */
  fit_from_msg(fit_fields_of(in, 0), &m->fit);
  fit_from_msg(fit_fields_of(in, 1), &m->alt); /* optional: left zero when absent */
  m->rows = msg->rows;
  m->rows_excluded = msg->rows_excluded;
  m->min_tokens = msg->min_tokens;
  m->abs_loss = msg->abs_loss;
  m->has_mem = msg->has_mem;
  m->mem_m0 = msg->mem_m0;
  m->mem_m1 = msg->mem_m1;
  if (!(isfinite(msg->sp_a2a_bytes_per_token) && msg->sp_a2a_bytes_per_token >= 0) ||
      !(isfinite(msg->sp_link_gbps) && msg->sp_link_gbps >= 0))
    return al_set_error(AL_EFORMAT,
                        "%s: cost model's all-to-all figures (%g bytes per token, %g GB/s) are not "
                        "finite and >= 0",
                        where, msg->sp_a2a_bytes_per_token, msg->sp_link_gbps);
  m->sp_a2a_bytes_per_token = msg->sp_a2a_bytes_per_token;
  m->sp_link_gbps = msg->sp_link_gbps;
  snprintf(m->device, sizeof m->device, "%s", msg->device ? msg->device : "");
  snprintf(m->measured, sizeof m->measured, "%s", msg->measured ? msg->measured : "");
  snprintf(m->source, sizeof m->source, "%s", msg->source ? msg->source : "");
  /* Predictions finite and positive over the plan's range, c(S) growing (or the compute limit
   * means nothing): the bounds of cost_internal.h, the ones a fit is held to. */
  char why[200];
  if (cost_fit_usable(&m->fit, why, sizeof why))
    return al_set_error(AL_EFORMAT, "%s: cost model's %s fit cannot be planned with: %s", where,
                        al_cost_family_name(m->fit.family), why);
  return AL_OK;
}

int al_cost_save(const al_cost_model *m, const char *path) {
  if (!m || !path) return al_set_error(AL_EINVAL, "al_cost_save: NULL argument");
  Adaptiveload__CostModel msg;
  double p[3], a[3];
  cost_to_msg(m, &msg, p, a);
  return pbio_save_one(path, AL_KIND_COST, AL_REC_COST_MODEL, &msg.base);
}

int al_cost_load(al_cost_model *out, const char *path) {
  if (!out || !path) return al_set_error(AL_EINVAL, "al_cost_load: NULL argument");
  ProtobufCMessage *msg = NULL;
  int rc = pbio_load_one(path, AL_KIND_COST, AL_REC_COST_MODEL,
                         &adaptiveload__cost_model__descriptor, &msg);
  if (rc) return rc;
  rc = cost_from_msg((const Adaptiveload__CostModel *)msg, out, path);
  protobuf_c_message_free_unpacked(msg, NULL);
  return rc;
}

const char *al_cost_default_json(void) { return cost_default_json; }

int al_cost_default(al_cost_model *out) {
  al_bench b;
  int rc = al_bench_parse(&b, cost_default_json, cost_default_json_len,
                          "embedded h200_dit_block_cost.json");
  if (rc) return rc;
  rc = al_cost_fit_bench(&b, NULL, out);
  al_bench_free(&b);
  return rc;
}

static void print_fit(FILE *out, const al_cost_fit *f) {
  const char *n2 = f->family == AL_COST_POWER ? "p" : "c";
  fprintf(out, "{\"family\": \"%s\", \"params\": {", al_cost_family_name(f->family));
  jsonw_field_number(out, "", "a", "%.9g", f->params[0]);
  jsonw_field_number(out, ", ", "b", "%.9g", f->params[1]);
  jsonw_field_number(out, ", ", n2, "%.9g", f->params[2]);
  jsonw_field_number(out, "}, ", "r2", "%.6f", f->r2);
  jsonw_field_number(out, ", ", "median_rel_err", "%.6f", f->median_rel_err);
  jsonw_field_number(out, ", ", "max_rel_err", "%.6f", f->max_rel_err);
  fputs("}", out);
}

void al_cost_print_json(const al_cost_model *m, FILE *out) {
  fprintf(out, "{\"model\": \"%s\", \"fit\": ", al_cost_family_name(m->fit.family));
  print_fit(out, &m->fit);
  fprintf(out, ", \"alternative\": ");
  if (m->alt.family)
    print_fit(out, &m->alt);
  else
    fprintf(out, "null");
  fprintf(out, ", \"rows\": %u, \"rows_excluded\": %u", m->rows, m->rows_excluded);
  jsonw_field_number(out, ", ", "min_tokens", "%.0f", m->min_tokens);
  fprintf(out, ", \"loss\": \"%s\", \"memory\": ", m->abs_loss ? "abs" : "rel");
  if (m->has_mem) {
    jsonw_field_number(out, "{", "m0_bytes", "%.9g", m->mem_m0);
    jsonw_field_number(out, ", ", "m1_bytes_per_token", "%.9g", m->mem_m1);
    fputs("}", out);
  } else {
    fprintf(out, "null");
  }
  fprintf(out, ", \"device\": ");
  jsonw_string(out, m->device);
  fprintf(out, ", \"measured\": ");
  jsonw_string(out, m->measured);
  fprintf(out, ", \"source\": ");
  jsonw_string(out, m->source);
  fprintf(out, "}\n");
}
