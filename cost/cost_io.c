/* Cost model files (CostModel message in the pbio container), the embedded
 * default, and the JSON report. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_write_internal.h"
#include "common/struct_abi_internal.h"
#include "cost/al_cost.h"
#include "cost/cost_internal.h"
#include "cost/cost_msg_internal.h"
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

static void fit_to_msg(const al_cost_fit *f, fit_fields o, double params[COST_MSG_PARAMS]) {
  memcpy(params, f->params, 3 * sizeof(double));
  params[3] = f->per_sample_ms, params[4] = f->floor_ms, params[5] = f->sharpness;
  *o.family = s_or_empty(al_cost_family_name(f->family));
  *o.n_params = f->family == AL_COST_FLOOR ? 6 : 3;
  *o.params = params;
  *o.r2 = f->r2;
  *o.median_rel_err = f->median_rel_err;
  *o.max_rel_err = f->max_rel_err;
}

/* sp_params: COST_SP_STRIDE values per degree (cost_internal.h). */
static void sp_to_msg(const al_cost_model *m, Adaptiveload__CostModel *msg, double *sp) {
  uint32_t n = m->n_sp_fits < AL_COST_MAX_SP_FITS ? m->n_sp_fits : AL_COST_MAX_SP_FITS;
  for (uint32_t i = 0; i < n; i++) {
    const al_cost_sp_fit *f = &m->sp_fits[i];
    double *v = sp + (size_t)i * COST_SP_STRIDE;
    v[0] = f->degree, v[1] = f->fit.params[0], v[2] = f->fit.params[1], v[3] = f->fit.params[2];
    v[4] = f->fit.per_sample_ms, v[5] = f->fit.floor_ms, v[6] = f->fit.sharpness;
    v[7] = f->rows, v[8] = f->fit.median_rel_err, v[9] = f->fit.max_rel_err;
  }
  msg->n_sp_params = (size_t)n * COST_SP_STRIDE;
  msg->sp_params = n ? sp : NULL;
  msg->sp_family = s_or_empty(n ? "floor" : "");
}

void cost_to_msg(const al_cost_model *m, Adaptiveload__CostModel *msg, cost_msg_buf *buf) {
  adaptiveload__cost_model__init(msg);
  fit_to_msg(&m->fit, fit_fields_of(msg, 0), buf->params);
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
  if (m->alt.family) fit_to_msg(&m->alt, fit_fields_of(msg, 1), buf->alt);
  sp_to_msg(m, msg, buf->sp);
}

static int family_of(const char *s, al_cost_family *f) {
  if (!strcmp(s, "power"))
    *f = AL_COST_POWER;
  else if (!strcmp(s, "poly2"))
    *f = AL_COST_POLY2;
  else if (!strcmp(s, "floor"))
    *f = AL_COST_FLOOR;
  else
    return -1;
  return 0;
}

static size_t params_of(al_cost_family f) { return f == AL_COST_FLOOR ? 6 : 3; }

/* One fit out of the message; -1 (f untouched) when it has no known family or not that
 * family's number of parameters. */
static int fit_from_msg(fit_fields in, al_cost_fit *f) {
  al_cost_family fam;
  if (!*in.family || family_of(*in.family, &fam) || *in.n_params != params_of(fam)) return -1;
  f->family = fam;
  memcpy(f->params, *in.params, 3 * sizeof(double));
  if (fam == AL_COST_FLOOR)
    f->per_sample_ms = (*in.params)[3], f->floor_ms = (*in.params)[4],
    f->sharpness = (*in.params)[5];
  f->r2 = *in.r2;
  f->median_rel_err = *in.median_rel_err;
  f->max_rel_err = *in.max_rel_err;
  return 0;
}

/* The per-degree fits: sp_family "floor" with whole groups of COST_SP_STRIDE values, degrees
 * ascending powers of two in [2, COST_MAX_SP_DEGREE], each fit inside the bounds at its degree;
 * an empty sp_family with no values means none. */
static int sp_from_msg(const Adaptiveload__CostModel *msg, al_cost_model *m, const char *where) {
  const char *fam = msg->sp_family ? msg->sp_family : "";
  if (!*fam && !msg->n_sp_params) return AL_OK;
  if (strcmp(fam, "floor"))
    return al_set_error(AL_EFORMAT, "%s: cost model sp_family '%s' is not floor", where, fam);
  size_t n = msg->n_sp_params / COST_SP_STRIDE;
  if (msg->n_sp_params % COST_SP_STRIDE || !n || n > AL_COST_MAX_SP_FITS)
    return al_set_error(AL_EFORMAT,
                        "%s: cost model sp_params has %zu values, not 1 to %d groups of %d", where,
                        msg->n_sp_params, AL_COST_MAX_SP_FITS, COST_SP_STRIDE);
  for (size_t i = 0; i < n; i++) {
    const double *v = msg->sp_params + i * COST_SP_STRIDE;
    double d = v[0], prev = i ? m->sp_fits[i - 1].degree : 1;
    if (!(d >= 2 && d <= COST_MAX_SP_DEGREE && d == floor(d) &&
          !((uint32_t)d & ((uint32_t)d - 1))) ||
        !(d > prev))
      return al_set_error(AL_EFORMAT,
                          "%s: cost model sp_params group %zu: degree %g is not a power of two in "
                          "[2, %.0f] above the previous one",
                          where, i, d, COST_MAX_SP_DEGREE);
    for (int j = 1; j < COST_SP_STRIDE; j++)
      if (!isfinite(v[j]))
        return al_set_error(AL_EFORMAT,
                            "%s: cost model sp_params group %zu: value %d is not finite", where, i,
                            j);
    al_cost_sp_fit *f = &m->sp_fits[i];
    memset(f, 0, sizeof *f);
    f->degree = (uint32_t)d;
    f->rows = v[7] >= 0 && v[7] <= UINT32_MAX ? (uint32_t)v[7] : 0;
    f->fit.family = AL_COST_FLOOR;
    f->fit.params[0] = v[1], f->fit.params[1] = v[2], f->fit.params[2] = v[3];
    f->fit.per_sample_ms = v[4], f->fit.floor_ms = v[5], f->fit.sharpness = v[6];
    f->fit.median_rel_err = v[8], f->fit.max_rel_err = v[9];
    char why[240];
    if (cost_sp_fit_usable(&f->fit, d, why, sizeof why))
      return al_set_error(AL_EFORMAT,
                          "%s: cost model's floor fit of degree d = %g cannot be planned with: %s",
                          where, d, why);
    m->n_sp_fits = (uint32_t)(i + 1);
  }
  return AL_OK;
}

int cost_from_msg(const Adaptiveload__CostModel *msg, al_cost_model *m, const char *where) {
  memset(m, 0, sizeof *m);
  m->struct_size = sizeof *m;
  if (family_of(msg->family ? msg->family : "", &m->fit.family))
    return al_set_error(AL_EFORMAT, "%s: cost model family '%s' is not power, poly2 or floor",
                        where, msg->family ? msg->family : "");
  if (msg->n_params != params_of(m->fit.family))
    return al_set_error(AL_EFORMAT, "%s: cost model has %zu parameters, expected %zu for %s", where,
                        msg->n_params, params_of(m->fit.family), msg->family);
  for (size_t i = 0; i < msg->n_params; i++)
    if (!isfinite(msg->params[i]))
      return al_set_error(AL_EFORMAT, "%s: cost model parameter %zu is not finite", where, i);
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
  char why[240];
  if (cost_fit_usable(&m->fit, why, sizeof why))
    return al_set_error(AL_EFORMAT, "%s: cost model's %s fit cannot be planned with: %s", where,
                        al_cost_family_name(m->fit.family), why);
  return sp_from_msg(msg, m, where);
}

int al_cost_save(const al_cost_model *caller, const char *path) {
  if (!caller || !path) return al_set_error(AL_EINVAL, "al_cost_save: NULL argument");
  al_cost_model local;
  const al_cost_model *m = cost_model_in(caller, &local, "al_cost_save");
  if (!m) return AL_EINVAL;
  Adaptiveload__CostModel msg;
  cost_msg_buf buf;
  cost_to_msg(m, &msg, &buf);
  return pbio_save_one(path, AL_KIND_COST, AL_REC_COST_MODEL, &msg.base);
}

int al_cost_load(al_cost_model *out, const char *path) {
  if (!out || !path) return al_set_error(AL_EINVAL, "al_cost_load: NULL argument");
  size_t n;
  int rc = struct_out_size(out, sizeof(al_cost_model), AL_COST_MODEL_V1, "al_cost_load",
                           "al_cost_model", &n);
  if (rc) return rc;
  ProtobufCMessage *msg = NULL;
  rc = pbio_load_one(path, AL_KIND_COST, AL_REC_COST_MODEL, &adaptiveload__cost_model__descriptor,
                     &msg);
  if (rc) return rc;
  al_cost_model m;
  rc = cost_from_msg((const Adaptiveload__CostModel *)msg, &m, path);
  protobuf_c_message_free_unpacked(msg, NULL);
  if (!rc) struct_out(out, &m, n);
  return rc;
}

const char *al_cost_default_json(void) { return cost_default_json; }

int al_cost_default(al_cost_model *out) {
  if (!out) return al_set_error(AL_EINVAL, "al_cost_default: NULL argument");
  size_t n;
  int rc = struct_out_size(out, sizeof(al_cost_model), AL_COST_MODEL_V1, "al_cost_default",
                           "al_cost_model", &n);
  if (rc) return rc;
  al_bench b = AL_BENCH_INIT;
  rc = al_bench_parse(&b, cost_default_json, cost_default_json_len,
                      "embedded h200_dit_block_cost.json");
  if (rc) return rc;
  al_cost_model m = AL_COST_MODEL_INIT;
  rc = al_cost_fit_bench(&b, NULL, &m);
  al_bench_free(&b);
  if (!rc) struct_out(out, &m, n);
  return rc;
}

static void print_fit(FILE *out, const al_cost_fit *f) {
  const char *n2 = f->family == AL_COST_POWER ? "p" : "c";
  fprintf(out, "{\"family\": \"%s\", \"params\": {", al_cost_family_name(f->family));
  jsonw_field_number(out, "", "a", "%.9g", f->params[0]);
  jsonw_field_number(out, ", ", "b", "%.9g", f->params[1]);
  jsonw_field_number(out, ", ", n2, "%.9g", f->params[2]);
  if (f->family == AL_COST_FLOOR) {
    jsonw_field_number(out, ", ", "s", "%.9g", f->per_sample_ms);
    jsonw_field_number(out, ", ", "F", "%.9g", f->floor_ms);
    jsonw_field_number(out, ", ", "k", "%.9g", f->sharpness);
  }
  jsonw_field_number(out, "}, ", "r2", "%.6f", f->r2);
  jsonw_field_number(out, ", ", "median_rel_err", "%.6f", f->median_rel_err);
  jsonw_field_number(out, ", ", "max_rel_err", "%.6f", f->max_rel_err);
  fputs("}", out);
}

static void print_band(FILE *out, const al_cost_band *b) {
  jsonw_field_number(out, "{", "lo", "%.0f", b->lo);
  fputs(", \"hi\": ", out);
  if (b->hi > 0)
    jsonw_number(out, "%.0f", b->hi);
  else
    fputs("null", out);
  fprintf(out, ", \"rows\": %u", b->rows);
  jsonw_field_number(out, ", ", "median_rel_err", "%.6f", b->median_rel_err);
  jsonw_field_number(out, ", ", "max_rel_err", "%.6f", b->max_rel_err);
  fputs("}", out);
}

/* "bands": [...] and "all_rows": {...}, or nulls for a loaded model (bands are not saved). */
static void print_bands(FILE *out, const al_cost_band *bands, const al_cost_band *all) {
  fputs("\"bands\": ", out);
  if (!all->rows) {
    fputs("null, \"all_rows\": null", out);
    return;
  }
  fputs("[", out);
  for (int i = 0; i < AL_COST_BANDS; i++) {
    if (i) fputs(", ", out);
    print_band(out, &bands[i]);
  }
  fputs("], \"all_rows\": ", out);
  print_band(out, all);
}

static void print_sp(FILE *out, const al_cost_model *m) {
  fputs("\"sp\": {", out);
  jsonw_field_number(out, "", "a2a_bytes_per_token", "%.9g",
                     m->sp_a2a_bytes_per_token > 0 ? m->sp_a2a_bytes_per_token
                                                   : AL_COST_DEFAULT_SP_A2A_BYTES_PER_TOKEN);
  jsonw_field_number(out, ", ", "link_gbps", "%.9g",
                     m->sp_link_gbps > 0 ? m->sp_link_gbps : AL_COST_DEFAULT_SP_LINK_GBPS);
  fprintf(out, ", \"family\": \"%s\", \"fits\": [", m->n_sp_fits ? "floor" : "analytic");
  for (uint32_t i = 0; i < m->n_sp_fits && i < AL_COST_MAX_SP_FITS; i++) {
    const al_cost_sp_fit *f = &m->sp_fits[i];
    fprintf(out, "%s{\"d\": %u, \"rows\": %u, \"fit\": ", i ? ", " : "", f->degree, f->rows);
    print_fit(out, &f->fit);
    fputs(", ", out);
    print_bands(out, f->bands, &f->all_rows);
    fputs("}", out);
  }
  fputs("]}", out);
}

int al_cost_print_json(const al_cost_model *caller, FILE *out) {
  al_cost_model local;
  const al_cost_model *m = cost_model_in(caller, &local, "al_cost_print_json");
  if (!m) return AL_EINVAL;
  fprintf(out, "{\"model\": \"%s\", \"fit\": ", al_cost_family_name(m->fit.family));
  print_fit(out, &m->fit);
  fprintf(out, ", \"alternative\": ");
  if (m->alt.family)
    print_fit(out, &m->alt);
  else
    fprintf(out, "null");
  fprintf(out, ", \"rows\": %u, \"rows_excluded\": %u", m->rows, m->rows_excluded);
  jsonw_field_number(out, ", ", "min_tokens", "%.0f", m->min_tokens);
  fprintf(out, ", \"loss\": \"%s\", ", m->abs_loss ? "abs" : "rel");
  print_bands(out, m->bands, &m->all_rows);
  fprintf(out, ", \"memory\": ");
  if (m->has_mem) {
    jsonw_field_number(out, "{", "m0_bytes", "%.9g", m->mem_m0);
    jsonw_field_number(out, ", ", "m1_bytes_per_token", "%.9g", m->mem_m1);
    fputs("}", out);
  } else {
    fprintf(out, "null");
  }
  fputs(", ", out);
  print_sp(out, m);
  fprintf(out, ", \"device\": ");
  jsonw_string(out, m->device);
  fprintf(out, ", \"measured\": ");
  jsonw_string(out, m->measured);
  fprintf(out, ", \"source\": ");
  jsonw_string(out, m->source);
  fprintf(out, "}\n");
  return AL_OK;
}
