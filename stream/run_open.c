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

/* A mixture's run against its sources' indexes: source i's index fingerprint and samples are
 * those of indexes[i]; the sources' infos into src (n of them). */
static int check_sources(const al_index *const *indexes, size_t n, const al_run *run,
                         const al_run_info *ri, al_run_source_info *src) {
  if (ri->sources < 2 && !n) return AL_OK;
  if (n != ri->sources)
    return al_set_error(AL_EINVAL,
                        "the run is a mixture of %" PRIu32 " sources but %zu indexes were given",
                        ri->sources, n);
  for (size_t i = 0; i < n; i++) {
    src[i] = (al_run_source_info)AL_RUN_SOURCE_INFO_INIT;
    int rc = al_run_source_get(run, (uint32_t)i, &src[i]);
    if (rc) return rc;
    if (!indexes[i])
      return al_set_error(AL_EINVAL, "al_stream_open_run_mixture: index %zu is NULL", i);
    if ((rc = stream_check_source_index(indexes[i], &src[i], "run")) != AL_OK) return rc;
  }
  return AL_OK;
}

/* The stream of a run over its index (n 0) or over a mixture's indexes. */
static int open_run(al_stream **out, const al_index *idx, const al_index *const *indexes, size_t n,
                    const al_run *run, int rank, int world, uint32_t start_step,
                    const al_stream_options *caller_opts, const char *fn) {
  if (!out) return al_set_error(AL_EINVAL, "%s: NULL argument", fn);
  *out = NULL;
  if (!idx || !run) return al_set_error(AL_EINVAL, "%s: NULL index or run", fn);
  al_stream_options o;
  int rc = struct_in(&o, sizeof o, AL_STREAM_OPTIONS_V1, caller_opts, fn, "al_stream_options");
  if (rc != AL_OK) return rc;
  al_run_info ri = AL_RUN_INFO_INIT;
  if ((rc = al_run_get_info(run, &ri)) != AL_OK) return rc;
  al_run_source_info *src = n ? calloc(n, sizeof *src) : NULL;
  if (n && !src) return al_set_error(AL_ENOMEM, "stream open: %zu sources", n);
  if (!n && ri.sources > 1)
    rc = al_set_error(AL_EINVAL,
                      "the run is a mixture's (%" PRIu32
                      " sources): stream it over its sources' indexes (al_stream_open_run_mixture)",
                      ri.sources);
  if (!rc) rc = n ? check_sources(indexes, n, run, &ri, src) : check_index(idx, &ri);
  uint32_t r = 0, w = 0;
  if (!rc) rc = resolve(rank, world, o.world, &r, &w);
  o.world = 0; /* checked here; the engine takes the plan's */
  if (!rc && start_step > ri.steps)
    rc = al_set_error(AL_ERANGE, "start step %" PRIu32 " past the run's %" PRIu32 " steps",
                      start_step, ri.steps);
  if (!rc && (o.plan_ahead < 0 || o.plan_ahead > 64))
    rc = al_set_error(AL_EINVAL, "plan_ahead %d: must be 0 (= 2) to 64", o.plan_ahead);
  const char *one = NULL, *const *names = NULL;
  char dflt[AL_INDEX_EXT_MAX + 1];
  size_t n_names = 0;
  stream_requested_members(idx, &o, &one, dflt, sizeof dflt, &names, &n_names);
  const char *stored[AL_STREAM_MAX_MEMBERS];
  size_t n_stored = stream_stored_members(names, n_names < AL_STREAM_MAX_MEMBERS ? n_names : 0,
                                          stored);
  for (size_t i = 0; !rc && n_stored && i < (n ? n : 1); i++) {
    rc = al_index_members_known(n ? indexes[i] : idx, stored, n_stored);
    if (rc && n) rc = al_error_prefix(rc, "source '%s'", src[i].name);
  }
  if (rc != AL_OK) {
    free(src);
    return n_stored ? al_error_prefix(rc, "stream of rank %" PRIu32, r) : rc;
  }
  stream_feed_args fa = {.run = run,
                         .idx = idx,
                         .rank = r,
                         .world = w,
                         .ahead = o.plan_ahead,
                         .on_error = o.on_error,
                         .members = names,
                         .n_members = n_names,
                         .indexes = indexes,
                         .sources = src,
                         .n_sources = n};
  stream_feed *feed = NULL;
  uint32_t K = 0;
  stream_source source;
  rc = stream_feed_new(&feed, &fa, &K, &ri);
  if (!rc && n) rc = stream_mixture_source(indexes, src, n, &source);
  if (!rc && !n) stream_index_source(idx, &source);
  free(src);
  if (rc) {
    stream_feed_free(feed);
    return rc;
  }
  stream_rank_plan plan;
  memset(&plan, 0, sizeof plan);
  plan.rank = r;
  plan.world = w;
  plan.first_step = 0;
  plan.index_fingerprint = ri.index_fingerprint;
  plan.manifest_fingerprint = ri.fingerprint;
  plan.n_batches = (size_t)ri.steps * K;
  plan.fed_micro = K;
  plan.fed_start = (uint64_t)start_step * K;
  plan.seed = ri.seed;
  plan.epoch = ri.epoch;
  return stream_open_fed(out, &source, &plan, feed, &o);
}

int al_stream_open_run(al_stream **out, const al_index *idx, const al_run *run, int rank, int world,
                       uint32_t start_step, const al_stream_options *caller_opts) {
  return open_run(out, idx, NULL, 0, run, rank, world, start_step, caller_opts,
                  "al_stream_open_run");
}

int al_stream_open_run_mixture(al_stream **out, const al_index *const *indexes, size_t n,
                               const al_run *run, int rank, int world, uint32_t start_step,
                               const al_stream_options *opts) {
  if (!indexes || !n) return al_set_error(AL_EINVAL, "al_stream_open_run_mixture: no indexes");
  return open_run(out, indexes[0], indexes, n, run, rank, world, start_step, opts,
                  "al_stream_open_run_mixture");
}
