/* al_stream_open_run: checks the run against the index, the rank against the world, then starts
 * the engine over the index source and the run's plan feed (plan_feed_internal.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_internal.h"
#include "common/struct_abi_internal.h"
#include "loader/al_members.h"
#include "stream/engine_internal.h"
#include "stream/plan_feed_internal.h"
#include "stream/rank_members_internal.h"

/* The world: `world` when > 0 (WORLD_SIZE, when set, must agree), else WORLD_SIZE, else 1; then
 * options.world, when set, must be it. The rank: `rank` when >= 0, else RANK, else 0 in a world
 * of one. */
static int resolve(int rank, int world, int opt_world, uint32_t *r_out, uint32_t *w_out) {
  long w = 0, env_w = 0;
  int e = env_long("WORLD_SIZE", &env_w);
  if (e < 0)
    return al_set_error(AL_EINVAL, "WORLD_SIZE is not a number: '%s'", env_text("WORLD_SIZE"));
  if (world > 0) {
    w = world;
    if (e > 0 && env_w != w)
      return al_set_error(AL_EINVAL, "the world is %d but WORLD_SIZE is %ld", world, env_w);
  } else {
    w = e > 0 ? env_w : 1;
  }
  if (w < 1 || w > (1l << 20))
    return al_set_error(AL_EINVAL, "world %ld: must be 1..%ld", w, 1l << 20);
  if (opt_world > 0 && opt_world != w)
    return al_set_error(AL_EINVAL, "al_stream_options.world %d, but the stream's world is %ld",
                        opt_world, w);
  long r = rank;
  if (rank < 0) {
    e = env_long("RANK", &r);
    if (e < 0) return al_set_error(AL_EINVAL, "RANK is not a number: '%s'", env_text("RANK"));
    if (e == 0) {
      if (w != 1)
        return al_set_error(AL_EINVAL, "no rank given and RANK is not set (the world is %ld)", w);
      r = 0;
    }
  }
  if (r < 0 || r >= w)
    return al_set_error(AL_EINVAL, "rank %ld out of range: the world is %ld ranks", r, w);
  *r_out = (uint32_t)r;
  *w_out = (uint32_t)w;
  return AL_OK;
}

/* The run was opened from this index: fingerprint and sample count. */
static int check_index(const al_index *idx, const al_run_info *ri) {
  uint64_t fp = al_index_fingerprint(idx);
  if (ri->index_fingerprint != fp)
    return al_set_error(AL_EINVAL,
                        "the run was opened from another index (index fingerprint %016" PRIx64
                        " in the run, %016" PRIx64 " in this index): open it from this index",
                        ri->index_fingerprint, fp);
  size_t n = al_index_sample_count(idx);
  if (ri->index_samples != n)
    return al_set_error(AL_EFORMAT,
                        "the run was opened from an index of %" PRIu64
                        " samples but the index holds %zu",
                        ri->index_samples, n);
  return AL_OK;
}

int al_stream_open_run(al_stream **out, const al_index *idx, const al_run *run, int rank, int world,
                       uint32_t start_step, const al_stream_options *caller_opts) {
  if (!out) return al_set_error(AL_EINVAL, "al_stream_open_run: NULL argument");
  *out = NULL;
  if (!idx || !run) return al_set_error(AL_EINVAL, "al_stream_open_run: NULL index or run");
  al_stream_options o;
  int rc = struct_in(&o, sizeof o, AL_STREAM_OPTIONS_V1, caller_opts, "al_stream_open_run",
                     "al_stream_options");
  if (rc != AL_OK) return rc;
  al_run_info ri = AL_RUN_INFO_INIT;
  if ((rc = al_run_get_info(run, &ri)) != AL_OK) return rc;
  if ((rc = check_index(idx, &ri)) != AL_OK) return rc;
  uint32_t r = 0, w = 0;
  if ((rc = resolve(rank, world, o.world, &r, &w)) != AL_OK) return rc;
  o.world = 0; /* checked here; the engine takes the plan's */
  if (start_step > ri.steps)
    return al_set_error(AL_ERANGE, "start step %" PRIu32 " past the run's %" PRIu32 " steps",
                        start_step, ri.steps);
  if (o.plan_ahead < 0 || o.plan_ahead > 64)
    return al_set_error(AL_EINVAL, "plan_ahead %d: must be 0 (= 2) to 64", o.plan_ahead);
  const char *one[1], *const *names = one;
  char dflt[AL_INDEX_EXT_MAX + 1];
  size_t n_names = 1;
  if (o.members && o.n_members) {
    names = o.members;
    n_names = o.n_members;
  } else {
    if (!o.ext) o.ext = al_index_default_member(idx, dflt, sizeof dflt) == AL_OK ? dflt : "latent";
    one[0] = o.ext;
  }
  const char *stored[AL_STREAM_MAX_MEMBERS];
  size_t n_stored = stream_stored_members(names, n_names < AL_STREAM_MAX_MEMBERS ? n_names : 0,
                                          stored);
  rc = n_stored ? al_index_members_known(idx, stored, n_stored) : AL_OK;
  if (rc != AL_OK) return al_error_prefix(rc, "stream of rank %" PRIu32, r);
  stream_feed_args fa = {.run = run,
                         .idx = idx,
                         .rank = r,
                         .world = w,
                         .ahead = o.plan_ahead,
                         .on_error = o.on_error,
                         .members = names,
                         .n_members = n_names};
  stream_feed *feed = NULL;
  uint32_t K = 0;
  if ((rc = stream_feed_new(&feed, &fa, &K, &ri)) != AL_OK) return rc;
  stream_rank_plan plan;
  memset(&plan, 0, sizeof plan);
  plan.rank = r;
  plan.world = w;
  plan.epoch = 0;
  plan.first_step = 0;
  plan.index_fingerprint = ri.index_fingerprint;
  plan.manifest_fingerprint = ri.fingerprint;
  plan.n_batches = (size_t)ri.steps * K;
  plan.fed_micro = K;
  plan.fed_start = (uint64_t)start_step * K;
  plan.seed = ri.seed;
  plan.epoch = ri.epoch;
  stream_source src;
  stream_index_source(idx, &src);
  return stream_open_fed(out, &src, &plan, feed, &o);
}
