/* mixture.c - a mixture as a file (al_mixture.h): the JSON spec checked field by field, the
 * sources' indexes loaded, their run opened (planner/al_run.h), its plans saved with the sources'
 * keys. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/al_index.h"
#include "manifest/al_mixture.h"
#include "manifest/al_plan_index.h"
#include "manifest/plan_index_internal.h"
#include "common/struct_abi_internal.h"
#include "cost/al_cost.h"
#include "planner/al_buckets.h"
#include "planner/run_internal.h"

typedef struct mix_src {
  char *name, *index;
  char *map; /* "map": the source's index map, planned from instead of its index (NULL: none) */
  double weight;
  al_exhaust exhaust;
  al_index *idx;
  uint32_t *shape;
  al_latent_grid *grid;
  uint8_t *excl; /* the positions lacking a required member (NULL: none required) */
  al_plan_input in;
} mix_src;

struct al_mixture {
  char *what;
  al_mix_by by;
  uint32_t steps, until, until_passes;
  mix_src *src;
  size_t n;
  /* Stages as given: stage k from step stage_from[k], weights stage_w[k n + i]. */
  size_t n_stages;
  uint32_t *stage_from;
  double *stage_w;
  uint32_t *stage_ramp; /* ramp_steps; 0: none */
  al_mixture *cont;     /* al_mixture_continue: the schedule this one changes (borrowed) */
  uint32_t cont_at;
  al_run *run;
};

static void close_sources(al_mixture *mx) {
  for (size_t i = 0; i < mx->n; i++) {
    al_index_free(mx->src[i].idx);
    free(mx->src[i].shape);
    free(mx->src[i].grid);
    free(mx->src[i].excl);
    mx->src[i].idx = NULL, mx->src[i].shape = NULL, mx->src[i].grid = NULL;
    mx->src[i].excl = NULL;
  }
  al_run_free(mx->run);
  mx->run = NULL;
}

void al_mixture_free(al_mixture *mx) {
  if (!mx) return;
  close_sources(mx);
  for (size_t i = 0; i < mx->n; i++) {
    free(mx->src[i].name);
    free(mx->src[i].index);
    free(mx->src[i].map);
  }
  free(mx->src);
  free(mx->stage_from);
  free(mx->stage_w);
  free(mx->stage_ramp);
  free(mx->what);
  free(mx);
}

/* ---- the spec ---- */

static int bad(const al_mixture *mx, const char *fmt, const char *a, const char *b) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
  return al_set_error(AL_EINVAL, "%s: %s", mx->what, msg);
}

/* Only the fields of `allowed` (NULL-terminated) in object o. */
static int only_fields(const al_mixture *mx, json_t *o, const char *const *allowed,
                       const char *where) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    int ok = 0;
    for (const char *const *a = allowed; *a; a++) ok |= !strcmp(*a, k);
    if (!ok) return bad(mx, "%s: unknown field '%s'", where, k);
  }
  return AL_OK;
}

static int take_count(const al_mixture *mx, json_t *v, const char *field, uint32_t *out) {
  if (!json_is_integer(v) || json_integer_value(v) < 1 ||
      json_integer_value(v) > (json_int_t)UINT32_MAX)
    return bad(mx, "%s must be an integer in 1..4294967295%s", field, "");
  *out = (uint32_t)json_integer_value(v);
  return AL_OK;
}

static int take_weight(const al_mixture *mx, json_t *v, const char *name, double *out) {
  double w = json_is_number(v) ? json_number_value(v) : NAN;
  if (!(w > 0) || !isfinite(w))
    return bad(mx, "source '%s': weight must be a number above 0%s", name, "");
  *out = w;
  return AL_OK;
}

static char *join_path(const char *dir, const char *p) {
  size_t n = strlen(p) + (dir ? strlen(dir) : 0) + 2;
  char *s = malloc(n);
  if (!s) return NULL;
  if (p[0] == '/' || !dir || !dir[0] || strstr(p, "://"))
    snprintf(s, n, "%s", p);
  else
    snprintf(s, n, "%s/%s", dir, p);
  return s;
}

static int parse_source(al_mixture *mx, json_t *o, size_t i, const char *base_dir) {
  static const char *const fields[] = {"name", "index", "map", "weight", "on_exhaust", NULL};
  char where[48];
  snprintf(where, sizeof where, "sources[%zu]", i);
  if (!json_is_object(o)) return bad(mx, "%s must be an object%s", where, "");
  int rc = only_fields(mx, o, fields, where);
  if (rc) return rc;
  json_t *name = json_object_get(o, "name"), *index = json_object_get(o, "index"),
         *map = json_object_get(o, "map");
  if (!json_is_string(name)) return bad(mx, "%s: name must be a string%s", where, "");
  if (!json_is_string(index) && !(map && !index))
    return bad(mx, "source '%s': index must be a path%s", json_string_value(name), "");
  if (map && !json_is_string(map))
    return bad(mx, "source '%s': map must be a path%s", json_string_value(name), "");
  mix_src *s = &mx->src[i];
  s->name = strdup(json_string_value(name));
  s->index = index ? join_path(base_dir, json_string_value(index)) : strdup("");
  s->map = map ? join_path(base_dir, json_string_value(map)) : NULL;
  if (!s->name || !s->index || (map && !s->map))
    return al_set_error(AL_ENOMEM, "mixture: out of memory");
  if (i && !s->map != !mx->src[0].map)
    return bad(mx, "source '%s': give every source a map, or none%s", s->name, "");
  json_t *w = json_object_get(o, "weight");
  s->weight = 1;
  if (w && (rc = take_weight(mx, w, s->name, &s->weight))) return rc;
  json_t *e = json_object_get(o, "on_exhaust");
  s->exhaust = AL_EXHAUST_REPEAT;
  if (e) {
    const char *v = json_is_string(e) ? json_string_value(e) : "";
    if (!strcmp(v, "stop"))
      s->exhaust = AL_EXHAUST_STOP;
    else if (strcmp(v, "repeat"))
      return bad(mx, "source '%s': on_exhaust must be \"repeat\" or \"stop\"%s", s->name, "");
  }
  return AL_OK;
}

static int source_named(const al_mixture *mx, const char *name, uint32_t *out) {
  for (size_t i = 0; i < mx->n; i++)
    if (!strcmp(mx->src[i].name, name)) {
      *out = (uint32_t)i;
      return AL_OK;
    }
  return bad(mx, "no source is named '%s'%s", name, "");
}

static int parse_until(al_mixture *mx, json_t *u) {
  uint32_t i;
  mx->until_passes = 1;
  if (json_is_string(u)) {
    int rc = source_named(mx, json_string_value(u), &i);
    if (!rc) mx->until = i + 1;
    return rc;
  }
  static const char *const fields[] = {"source", "passes", NULL};
  if (!json_is_object(u))
    return bad(mx, "until must be a source's name or {\"source\", \"passes\"}%s%s", "", "");
  int rc = only_fields(mx, u, fields, "until");
  json_t *s = json_object_get(u, "source"), *p = json_object_get(u, "passes");
  if (!rc && !json_is_string(s)) rc = bad(mx, "until: source must be a name%s%s", "", "");
  if (!rc) rc = source_named(mx, json_string_value(s), &i);
  if (!rc) mx->until = i + 1;
  if (!rc && p) rc = take_count(mx, p, "until.passes", &mx->until_passes);
  return rc;
}

/* Stage k's weights: each name a source's, each weight a number >= 0; a source the stage does
 * not name keeps the weight it had before the stage (the source's own before the first). */
static int stage_weights(al_mixture *mx, json_t *w, size_t k, const char *where) {
  double *out = mx->stage_w + k * mx->n;
  for (size_t i = 0; i < mx->n; i++)
    out[i] = k ? out[(ptrdiff_t)i - (ptrdiff_t)mx->n] : mx->src[i].weight;
  if (!w) return AL_OK;
  if (!json_is_object(w)) return bad(mx, "%s: weights must be an object of names%s", where, "");
  const char *name;
  json_t *v;
  json_object_foreach(w, name, v) {
    uint32_t i;
    int rc = source_named(mx, name, &i);
    if (rc) return rc;
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(x >= 0) || !isfinite(x))
      return bad(mx, "%s: weights: '%s' must be a number, 0 or more", where, name);
    out[i] = x;
  }
  return AL_OK;
}

static int parse_stages(al_mixture *mx, json_t *st) {
  if (!json_is_array(st)) return bad(mx, "stages must be an array%s%s", "", "");
  static const char *const fields[] = {"from_step", "weights", "ramp_steps", NULL};
  /* What a stage may one day change besides the weights: refused by name until planned. */
  static const char *const later[] = {"buckets", "mem_tokens", "micro_per_step", "step_tokens",
                                      NULL};
  size_t n = json_array_size(st);
  if (n > AL_RUN_MAX_STAGES)
    return al_set_error(AL_EINVAL, "%s: %zu stages, at most %d", mx->what, n, AL_RUN_MAX_STAGES);
  mx->stage_from = calloc(n ? n : 1, sizeof *mx->stage_from);
  mx->stage_w = calloc((n ? n : 1) * mx->n, sizeof *mx->stage_w);
  mx->stage_ramp = calloc(n ? n : 1, sizeof *mx->stage_ramp);
  if (!mx->stage_from || !mx->stage_w || !mx->stage_ramp)
    return al_set_error(AL_ENOMEM, "mixture: out of memory");
  for (size_t k = 0; k < n; k++) {
    json_t *g = json_array_get(st, k);
    char where[48];
    snprintf(where, sizeof where, "stages[%zu]", k);
    if (!json_is_object(g)) return bad(mx, "%s must be an object%s", where, "");
    for (const char *const *l = later; *l; l++)
      if (json_object_get(g, *l))
        return bad(mx,
                   "%s: '%s' at a stage is not planned yet (a stage changes the weights; plan "
                   "the stretch with other buckets, M_mem, K or T as a run of its own)",
                   where, *l);
    int rc = only_fields(mx, g, fields, where);
    if (rc) return rc;
    json_t *f = json_object_get(g, "from_step");
    if (!json_is_integer(f) || json_integer_value(f) < 0 ||
        json_integer_value(f) > (json_int_t)UINT32_MAX)
      return bad(mx, "%s: from_step must be an integer in 0..4294967295%s", where, "");
    mx->stage_from[k] = (uint32_t)json_integer_value(f);
    if (k && (uint64_t)mx->stage_from[k] < (uint64_t)mx->stage_from[k - 1] +
                                               (mx->stage_ramp[k - 1] ? mx->stage_ramp[k - 1] : 1))
      return bad(mx, "%s: from_step must be after the stage before it%s", where,
                 mx->stage_ramp[k - 1] ? " and its ramp" : "");
    json_t *ramp = json_object_get(g, "ramp_steps");
    if (ramp && (rc = take_count(mx, ramp, "ramp_steps", &mx->stage_ramp[k]))) return rc;
    if ((rc = stage_weights(mx, json_object_get(g, "weights"), k, where))) return rc;
    mx->n_stages = k + 1;
  }
  return AL_OK;
}

static int parse_root(al_mixture *mx, json_t *root, const char *base_dir) {
  static const char *const fields[] = {"by", "steps", "until", "sources", "stages", NULL};
  if (!json_is_object(root)) return bad(mx, "a mixture is a JSON object%s%s", "", "");
  int rc = only_fields(mx, root, fields, "mixture");
  if (rc) return rc;
  json_t *by = json_object_get(root, "by");
  mx->by = AL_MIX_TOKENS;
  if (by) {
    const char *v = json_is_string(by) ? json_string_value(by) : "";
    if (!strcmp(v, "samples"))
      mx->by = AL_MIX_SAMPLES;
    else if (!strcmp(v, "compute"))
      mx->by = AL_MIX_COMPUTE;
    else if (strcmp(v, "tokens"))
      return bad(mx, "by must be \"tokens\", \"samples\" or \"compute\"%s%s", "", "");
  }
  json_t *src = json_object_get(root, "sources");
  if (!json_is_array(src) || !json_array_size(src) || json_array_size(src) > AL_RUN_MAX_SOURCES)
    return bad(mx, "sources must be an array of 1..2048 sources%s%s", "", "");
  mx->n = json_array_size(src);
  mx->src = calloc(mx->n, sizeof *mx->src);
  if (!mx->src) return al_set_error(AL_ENOMEM, "mixture: out of memory");
  for (size_t i = 0; i < mx->n && !rc; i++)
    rc = parse_source(mx, json_array_get(src, i), i, base_dir);
  json_t *steps = json_object_get(root, "steps");
  if (!rc && steps) rc = take_count(mx, steps, "steps", &mx->steps);
  json_t *until = json_object_get(root, "until");
  if (!rc && until) rc = parse_until(mx, until);
  json_t *stages = json_object_get(root, "stages");
  if (!rc && stages) rc = parse_stages(mx, stages);
  return rc;
}

int al_mixture_parse(al_mixture **out, const char *json, const char *base_dir, const char *what) {
  if (!out || !json) return al_set_error(AL_EINVAL, "al_mixture_parse: NULL argument");
  *out = NULL;
  al_mixture *mx = calloc(1, sizeof *mx);
  if (!mx || !(mx->what = strdup(what ? what : "mixture"))) {
    free(mx);
    return al_set_error(AL_ENOMEM, "mixture: out of memory");
  }
  json_error_t e;
  json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &e);
  int rc = root ? parse_root(mx, root, base_dir)
                : al_set_error(AL_EINVAL, "%s: line %d column %d: %s", mx->what, e.line, e.column,
                               e.text);
  json_decref(root);
  if (rc) {
    al_mixture_free(mx);
    return rc;
  }
  *out = mx;
  return AL_OK;
}

int al_mixture_load(al_mixture **out, const char *path) {
  if (!out || !path) return al_set_error(AL_EINVAL, "al_mixture_load: NULL argument");
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return al_set_error(AL_EIO, "%s: cannot open the mixture: %s", path, strerror(errno));
  char *buf = NULL;
  size_t n = 0, cap = 0;
  int rc = AL_OK;
  for (;;) {
    if (n + 4096 + 1 > cap) {
      size_t nc = cap ? cap * 2 : 8192;
      if (nc > (64u << 20)) {
        rc = al_set_error(AL_ERANGE, "%s: a mixture file above 64 MiB", path);
        break;
      }
      char *nb = realloc(buf, nc);
      if (!nb) {
        rc = al_set_error(AL_ENOMEM, "mixture: out of memory");
        break;
      }
      buf = nb, cap = nc;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (!got) break;
  }
  if (!rc && ferror(f)) rc = al_set_error(AL_EIO, "%s: reading the mixture failed", path);
  fclose(f);
  if (!rc) {
    buf[n] = 0;
    if (strlen(buf) != n) rc = al_set_error(AL_EINVAL, "%s: a NUL byte in the mixture", path);
  }
  char *dir = rc ? NULL : strdup(path);
  if (!rc && !dir) rc = al_set_error(AL_ENOMEM, "mixture: out of memory");
  if (!rc) {
    char *slash = strrchr(dir, '/');
    if (slash)
      *slash = 0;
    else
      dir[0] = 0;
    rc = al_mixture_parse(out, buf, dir, path);
  }
  free(dir);
  free(buf);
  return rc;
}

size_t al_mixture_source_count(const al_mixture *mx) { return mx ? mx->n : 0; }

const char *al_mixture_source_name(const al_mixture *mx, size_t i) {
  return mx && i < mx->n ? mx->src[i].name : NULL;
}

const char *al_mixture_source_index(const al_mixture *mx, size_t i) {
  return mx && i < mx->n ? mx->src[i].index : NULL;
}

const al_index *al_mixture_index(const al_mixture *mx, size_t i) {
  return mx && mx->run && i < mx->n ? mx->src[i].idx : NULL;
}

/* ---- the run ---- */

int al_mixture_open_run(al_mixture *mx, const al_cost_model *cost, const al_plan_options *opts,
                        const al_run **run) {
  if (!mx || !cost || !opts || !run)
    return al_set_error(AL_EINVAL, "al_mixture_open_run: NULL argument");
  *run = NULL;
  close_sources(mx);
  al_run_source *rs = calloc(mx->n, sizeof *rs);
  const al_latent_grid **grids = calloc(mx->n, sizeof *grids);
  const uint8_t **excls = calloc(mx->n, sizeof *excls);
  int rc = rs && grids && excls ? AL_OK : al_set_error(AL_ENOMEM, "mixture: out of memory");
  for (size_t i = 0; i < mx->n && !rc; i++) {
    mix_src *s = &mx->src[i];
    if (!s->map) rc = al_index_load(&s->idx, s->index);
    if (!rc && !s->map) rc = plan_index_input(s->idx, opts, &s->in, &s->shape, &s->grid, &s->excl);
    if (rc) {
      al_error_prefix(rc, "%s: source '%s'", mx->what, s->name);
      break;
    }
    rs[i] = (al_run_source)AL_RUN_SOURCE_INIT;
    rs[i].name = s->name;
    rs[i].input = s->map ? NULL : &s->in;
    rs[i].map = s->map;
    rs[i].weight = s->weight;
    rs[i].on_exhaust = s->exhaust;
    grids[i] = s->grid;
    excls[i] = s->excl;
  }
  al_run_mix mix = AL_RUN_MIX_INIT;
  mix.by = mx->by;
  mix.steps = mx->steps;
  mix.until = mx->until;
  mix.until_passes = mx->until_passes;
  al_run_stage *stages = calloc(mx->n_stages ? mx->n_stages : 1, sizeof *stages);
  if (!rc && !stages) rc = al_set_error(AL_ENOMEM, "mixture: out of memory");
  for (size_t k = 0; !rc && k < mx->n_stages; k++) {
    stages[k] = (al_run_stage)AL_RUN_STAGE_INIT;
    stages[k].from_step = mx->stage_from[k];
    stages[k].ramp_steps = mx->stage_ramp[k];
    stages[k].weights = mx->stage_w + k * mx->n;
  }
  mix.stages = stages;
  mix.n_stages = mx->n_stages;
  if (!rc && mx->cont) { /* the run it continues first, with the same options */
    const al_run *old = NULL;
    rc = al_mixture_open_run(mx->cont, cost, opts, &old);
    mix.continues = old;
    mix.at_step = mx->cont_at;
  }
  if (!rc) {
    rc = run_open_mixture_grid(&mx->run, rs, mx->n, &mix, mx->src[0].map ? NULL : grids,
                               mx->src[0].map ? NULL : excls, cost, opts);
    if (rc) al_error_prefix(rc, "%s", mx->what);
  }
  free(rs);
  free(grids);
  free(excls);
  free(stages);
  if (!rc) *run = mx->run;
  return rc;
}

int al_mixture_check_manifest(const al_mixture *mx, const al_manifest *m,
                              const char *manifest_path) {
  if (!mx || !m) return al_set_error(AL_EINVAL, "al_mixture_check_manifest: NULL argument");
  const char *mp = manifest_path ? manifest_path : "the manifest";
  if (mx->n != al_manifest_source_count(m))
    return al_set_error(AL_EINVAL, "%s has %zu sources but manifest %s plans %u", mx->what, mx->n,
                        mp, al_manifest_source_count(m));
  for (size_t i = 0; i < mx->n; i++) {
    al_run_source_info si = AL_RUN_SOURCE_INFO_INIT;
    int rc = al_manifest_source(m, (uint32_t)i, &si);
    if (rc) return rc;
    if (strcmp(si.name, mx->src[i].name))
      return al_set_error(AL_EINVAL, "%s: source %zu is '%s' but manifest %s's source %zu is '%s'",
                          mx->what, i, mx->src[i].name, mp, i, si.name);
  }
  return AL_OK;
}

int al_mixture_continue(al_mixture *mx, al_mixture *old, uint32_t at_step) {
  if (!mx) return al_set_error(AL_EINVAL, "al_mixture_continue: NULL mixture");
  for (const al_mixture *c = old; c; c = c->cont)
    if (c == mx) return al_set_error(AL_EINVAL, "%s: a schedule cannot continue itself", mx->what);
  mx->cont = old;
  mx->cont_at = at_step;
  return AL_OK;
}

const char *al_mixture_key(void *ctx, uint64_t id) {
  al_mixture *mx = ctx;
  uint32_t src;
  uint64_t pos;
  if (!mx || !mx->run) return "";
  if (al_run_draw_where(mx->run, id, &src, NULL, &pos)) return "";
  return mx->src[src].idx ? al_plan_index_key(mx->src[src].idx, pos) : ""; /* a map has no keys */
}

int al_mixture_save(al_mixture *mx, const al_plan *p, const char *path,
                    const al_plan_save_options *so) {
  if (!mx || !p || !path) return al_set_error(AL_EINVAL, "al_mixture_save: NULL argument");
  if (!mx->run) return al_set_error(AL_EINVAL, "%s: no run is open", mx->what);
  al_plan_save_options o = AL_PLAN_SAVE_OPTIONS_INIT;
  if (so) o = *so;
  return al_plan_save_opts(p, path, al_mixture_key, mx, &o);
}

int al_mixture_open_run_paths(al_mixture *mx, const char *cost_path, const char *buckets_path,
                              const al_plan_options *opts, const al_run **run) {
  if (!mx || !opts || !run)
    return al_set_error(AL_EINVAL, "al_mixture_open_run_paths: NULL argument");
  al_cost_model cost = AL_COST_MODEL_INIT;
  al_bucket_table *table = NULL;
  al_plan_options o;
  int rc = struct_in(&o, sizeof o, AL_PLAN_OPTIONS_V1, opts, "al_mixture_open_run_paths",
                     "al_plan_options");
  if (!rc) rc = cost_path ? al_cost_load(&cost, cost_path) : al_cost_default(&cost);
  if (!rc && buckets_path) {
    rc = al_bucket_table_load(&table, buckets_path);
    o.buckets = table;
  }
  if (!rc) rc = al_mixture_open_run(mx, &cost, &o, run);
  al_bucket_table_free(table);
  return rc;
}

int al_mixture_write(al_mixture *mx, const char *cost_path, const char *buckets_path,
                     const al_plan_options *opts, uint32_t world, uint32_t first, uint32_t end,
                     uint32_t only_rank, const char *out_path) {
  if (!mx || !opts || !out_path) return al_set_error(AL_EINVAL, "al_mixture_write: NULL argument");
  al_cost_model cost = AL_COST_MODEL_INIT;
  al_bucket_table *table = NULL;
  al_plan_options o;
  int rc = struct_in(&o, sizeof o, AL_PLAN_OPTIONS_V1, opts, "al_mixture_write", "al_plan_options");
  if (rc) return rc;
  rc = cost_path ? al_cost_load(&cost, cost_path) : al_cost_default(&cost);
  if (!rc && buckets_path) {
    rc = al_bucket_table_load(&table, buckets_path);
    o.buckets = table;
  }
  const al_run *run = NULL;
  al_run_info ri = AL_RUN_INFO_INIT;
  al_plan *plan = NULL;
  if (!rc) rc = al_mixture_open_run(mx, &cost, &o, &run);
  al_bucket_table_free(table);
  if (!rc) rc = al_run_get_info(run, &ri);
  if (!rc) rc = al_run_plan_steps(run, world ? world : o.world, first, end ? end : ri.steps, &plan);
  al_plan_save_options so = AL_PLAN_SAVE_OPTIONS_INIT;
  so.only_rank = only_rank;
  if (!rc) rc = al_mixture_save(mx, plan, out_path, &so);
  al_plan_free(plan);
  return rc;
}
