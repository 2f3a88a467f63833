/* Planning from a loaded index (al_plan_index.h). */
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "common/grow_internal.h"
#include "loader/al_members.h"
#include "manifest/al_manifest.h"
#include "manifest/al_plan_index.h"
#include "manifest/plan_index_internal.h"
#include "planner/plan_grid_internal.h"
#include "planner/plan_members_internal.h"
#include "planner/run_internal.h"

/* The samples lacking a required member (*excl: 1 per such index position, malloc'd; NULL
 * when none is required). A member no sample holds, or every sample lacking one, is an error
 * naming it. */
static int find_lacking(const al_index *idx, const al_plan_options *o, uint8_t **excl) {
  *excl = NULL;
  if (!o->require_members || !o->n_require_members) return AL_OK;
  const char *const *req = o->require_members;
  size_t nr = o->n_require_members, n = al_index_sample_count(idx);
  int rc = al_index_members_known(idx, req, nr);
  if (rc != AL_OK) return al_error_prefix(rc, "plan: required members");
  uint32_t *lacks = calloc(n ? n : 1, sizeof *lacks);
  uint8_t *x = calloc(n ? n : 1, 1);
  uint64_t missing = 0;
  rc = lacks && x ? al_index_check_members(idx, req, nr, NULL, 0, lacks, NULL, &missing)
                  : al_set_error(AL_ENOMEM, "plan: out of memory for %zu samples", n);
  for (size_t i = 0; rc == AL_OK && i < n; i++) x[i] = lacks[i] != 0;
  if (rc == AL_OK && n && missing == n) {
    al_index_require_members(idx, req, nr, NULL, 0, NULL);
    rc = al_error_prefix(AL_ENOTFOUND, "plan: no sample holds every required member");
  }
  free(lacks);
  if (rc != AL_OK) {
    free(x);
    return rc;
  }
  *excl = x;
  return AL_OK;
}

/* The planner's input from an index: shapes (the lacking samples as zero-sized shapes, which no
 * bucket takes), latent grids (NULL when the index has none) and the lacking samples (*excl,
 * NULL when none is required). The caller frees *shape, *grid and *excl. */
int plan_index_input(const al_index *idx, const al_plan_options *opts, al_plan_input *in,
                     uint32_t **shape_out, al_latent_grid **grid_out, uint8_t **excl) {
  size_t n = al_index_sample_count(idx);
  *shape_out = NULL, *grid_out = NULL;
  int rc = find_lacking(idx, opts, excl);
  if (rc != AL_OK) return rc;
  uint32_t *shape = grow_big_block(n ? 3 * n : 3, sizeof *shape);
  al_latent_grid *grid = NULL; /* allocated at the first typed latent: none for most corpora */
  rc = shape ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory for %zu samples", n);
  size_t latents = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    rc = al_index_sample(idx, i, &si);
    shape[i] = si.width, shape[n + i] = si.height, shape[2 * n + i] = si.frames;
    /* Lacking a required member: a zero-sized shape without a grid, which no bucket takes;
     * plan_mark_no_member relabels it. */
    if (*excl && (*excl)[i]) {
      shape[i] = 0;
      continue;
    }
    /* Typed latents: the grid is the truth, buckets crop only. */
    al_latent_grid g1;
    int g = al_index_latent_grid(idx, i, &g1.t, &g1.h, &g1.w, NULL);
    if (g == AL_OK) {
      if (!grid && !(grid = calloc(n, sizeof *grid))) {
        rc = al_set_error(AL_ENOMEM, "plan: out of memory for %zu latent grids", n);
        break;
      }
      grid[i] = g1;
      latents++;
    } else if (g != AL_ENOTFOUND && !rc) {
      rc = g;
    }
  }
  al_plan_input i0 = {sizeof(al_plan_input),    n, shape, shape + n, shape + 2 * n,
                      al_index_fingerprint(idx)};
  *in = i0;
  *shape_out = shape;
  if (latents)
    *grid_out = grid;
  else
    free(grid);
  return rc;
}

/* What planning an index takes: the caller's options and cost model (sized structs, copied) and
 * the planner's input from the index (index_input). index_args_free releases it. */
typedef struct index_args {
  al_plan_options o;
  al_cost_model cost;
  al_plan_input in;
  uint32_t *shape;
  al_latent_grid *grid;
  uint8_t *excl;
} index_args;

static void index_args_free(index_args *a) {
  free(a->shape);
  free(a->grid);
  free(a->excl);
}

static int index_args_take(index_args *a, const al_index *idx, const al_cost_model *cost,
                           const al_plan_options *opts, const char *fn) {
  memset(a, 0, sizeof *a);
  if (!idx || !cost || !opts) return al_set_error(AL_EINVAL, "%s: NULL argument", fn);
  int rc = struct_in(&a->o, sizeof a->o, AL_PLAN_OPTIONS_V1, opts, fn, "al_plan_options");
  if (!rc) rc = struct_in(&a->cost, sizeof a->cost, AL_COST_MODEL_V1, cost, fn, "al_cost_model");
  if (!rc) rc = plan_index_input(idx, &a->o, &a->in, &a->shape, &a->grid, &a->excl);
  if (rc) index_args_free(a);
  return rc;
}

int al_plan_build_index(al_plan **out, const al_index *idx, const al_cost_model *cost,
                        const al_plan_options *opts) {
  if (!out) return al_set_error(AL_EINVAL, "al_plan_build_index: NULL argument");
  *out = NULL;
  index_args a;
  int rc = index_args_take(&a, idx, cost, opts, "al_plan_build_index");
  if (rc) return rc;
  rc = plan_build_grid(out, &a.in, a.grid, &a.cost, &a.o);
  if (!rc && a.excl) plan_mark_no_member(*out, a.excl, a.in.n);
  index_args_free(&a);
  return rc;
}

int al_run_open_index(al_run **out, const al_index *idx, const al_cost_model *cost,
                      const al_plan_options *opts) {
  if (!out) return al_set_error(AL_EINVAL, "al_run_open_index: NULL argument");
  *out = NULL;
  index_args a;
  int rc = index_args_take(&a, idx, cost, opts, "al_run_open_index");
  if (rc) return rc;
  rc = run_open_grid(out, &a.in, a.grid, a.excl, &a.cost, &a.o);
  index_args_free(&a);
  return rc;
}

const char *al_plan_index_key(void *index, uint64_t i) {
  al_sample_info si = AL_SAMPLE_INFO_INIT;
  if (!index || al_index_sample((const al_index *)index, (size_t)i, &si)) return "";
  return si.key ? si.key : "";
}

int al_plan_index_write(const al_index *idx, const char *cost_path, const char *buckets_path,
                        const al_plan_options *opts, const char *out_path) {
  if (!idx || !opts || !out_path)
    return al_set_error(AL_EINVAL, "al_plan_index_write: NULL argument");
  al_cost_model cost = AL_COST_MODEL_INIT;
  al_bucket_table *table = NULL;
  al_plan *plan = NULL;
  al_plan_options o;
  int rc = struct_in(&o, sizeof o, AL_PLAN_OPTIONS_V1, opts, "al_plan_index_write",
                     "al_plan_options");
  if (rc) return rc;
  rc = cost_path ? al_cost_load(&cost, cost_path) : al_cost_default(&cost);
  if (!rc && buckets_path) {
    rc = al_bucket_table_load(&table, buckets_path);
    o.buckets = table;
  }
  if (!rc) rc = al_plan_build_index(&plan, idx, &cost, &o);
  if (!rc) rc = al_plan_save(plan, out_path, al_plan_index_key, (void *)idx);
  al_plan_free(plan);
  al_bucket_table_free(table);
  return rc;
}

int al_run_index_open(al_run **out, const al_index *idx, const char *cost_path,
                      const char *buckets_path, const al_plan_options *opts) {
  if (!out || !idx || !opts) return al_set_error(AL_EINVAL, "al_run_index_open: NULL argument");
  *out = NULL;
  al_cost_model cost = AL_COST_MODEL_INIT;
  al_bucket_table *table = NULL;
  al_plan_options o;
  int rc = struct_in(&o, sizeof o, AL_PLAN_OPTIONS_V1, opts, "al_run_index_open",
                     "al_plan_options");
  if (rc) return rc;
  rc = cost_path ? al_cost_load(&cost, cost_path) : al_cost_default(&cost);
  if (!rc && buckets_path) {
    rc = al_bucket_table_load(&table, buckets_path);
    o.buckets = table;
  }
  if (!rc) rc = al_run_open_index(out, idx, &cost, &o); /* keeps no pointer into the table */
  al_bucket_table_free(table);
  return rc;
}

int al_run_index_write(const al_index *idx, const char *cost_path, const char *buckets_path,
                       const al_plan_options *opts, uint32_t world, uint32_t first, uint32_t end,
                       const char *out_path) {
  return al_run_index_write_rank(idx, cost_path, buckets_path, opts, world, first, end, 0,
                                 out_path);
}

int al_run_index_write_rank(const al_index *idx, const char *cost_path, const char *buckets_path,
                            const al_plan_options *opts, uint32_t world, uint32_t first,
                            uint32_t end, uint32_t only_rank, const char *out_path) {
  if (!idx || !opts || !out_path)
    return al_set_error(AL_EINVAL, "al_run_index_write: NULL argument");
  al_run *run = NULL;
  al_plan *plan = NULL;
  al_run_info ri = AL_RUN_INFO_INIT;
  al_plan_options o;
  int rc = struct_in(&o, sizeof o, AL_PLAN_OPTIONS_V1, opts, "al_run_index_write",
                     "al_plan_options");
  if (!rc) rc = al_run_index_open(&run, idx, cost_path, buckets_path, opts);
  if (!rc) rc = al_run_get_info(run, &ri);
  if (!rc) rc = al_run_plan_steps(run, world ? world : o.world, first, end ? end : ri.steps, &plan);
  al_plan_save_options so = AL_PLAN_SAVE_OPTIONS_INIT;
  so.only_rank = only_rank;
  if (!rc) rc = al_plan_save_opts(plan, out_path, al_plan_index_key, (void *)idx, &so);
  al_plan_free(plan);
  al_run_free(run);
  return rc;
}

int al_run_map_write_index(const al_index *idx, const char *path) {
  if (!idx || !path) return al_set_error(AL_EINVAL, "al_run_map_write_index: NULL argument");
  al_plan_options none = AL_PLAN_OPTIONS_INIT;
  al_plan_input in;
  uint32_t *shape = NULL;
  al_latent_grid *grid = NULL;
  uint8_t *excl = NULL;
  run_map *m = NULL;
  int rc = plan_index_input(idx, &none, &in, &shape, &grid, &excl);
  if (!rc) rc = run_map_build(&m, &in, grid, NULL);
  if (!rc) rc = run_map_save(m, path);
  run_map_close(m);
  free(shape);
  free(grid);
  free(excl);
  return rc;
}
