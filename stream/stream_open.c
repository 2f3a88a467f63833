/* al_stream_open: checks index against manifest, rank against world, then
 * starts the engine over the index source and the rank's plan. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_internal.h"
#include "common/struct_abi_internal.h"
#include "loader/al_members.h"
#include "stream/cuda_rt_internal.h"
#include "stream/member_reader_internal.h"
#include "stream/al_schedule.h"
#include "stream/engine_internal.h"
#include "stream/rank_members_internal.h"

int al_resolve_rank(const al_manifest *m, int rank, int world, uint32_t *out_rank) {
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  int rc = al_manifest_get_info(m, &info);
  if (rc != AL_OK) return rc;
  long w = world;
  if (world <= 0) {
    int e = env_long("WORLD_SIZE", &w);
    if (e < 0)
      return al_set_error(AL_EINVAL, "WORLD_SIZE is not a number: '%s'", env_text("WORLD_SIZE"));
    if (e == 0) w = 0;
    if (e > 0 && (uint64_t)w != info.world)
      return al_set_error(AL_EINVAL,
                          "the manifest was planned for a world of %" PRIu32
                          " ranks but WORLD_SIZE is %ld: plan again with --world %ld",
                          info.world, w, w);
  } else if ((uint64_t)w != info.world) {
    return al_set_error(AL_EINVAL,
                        "the manifest was planned for a world of %" PRIu32
                        " ranks but the world is %ld: plan again with --world %ld",
                        info.world, w, w);
  }
  long r = rank;
  if (rank < 0) {
    int e = env_long("RANK", &r);
    if (e < 0) return al_set_error(AL_EINVAL, "RANK is not a number: '%s'", env_text("RANK"));
    if (e == 0) {
      if (info.world != 1)
        return al_set_error(AL_EINVAL,
                            "no rank given and RANK is not set (the manifest plans %" PRIu32
                            " ranks)",
                            info.world);
      r = 0;
    }
  }
  if ((uint64_t)r >= info.world)
    return al_set_error(AL_EINVAL, "rank %ld out of range: the manifest plans %" PRIu32 " ranks", r,
                        info.world);
  *out_rank = (uint32_t)r;
  return AL_OK;
}

int al_stream_open(al_stream **out, const al_index *idx, const al_manifest *m, int rank,
                   const al_stream_options *caller_opts) {
  *out = NULL;
  if (!idx || !m) return al_set_error(AL_EINVAL, "stream: NULL index or manifest");
  al_stream_options local;
  int rc = struct_in(&local, sizeof local, AL_STREAM_OPTIONS_V1, caller_opts, "al_stream_open",
                     "al_stream_options");
  if (rc != AL_OK) return rc;
  const al_stream_options *opts = caller_opts ? &local : NULL;
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  rc = al_manifest_get_info(m, &info);
  if (rc != AL_OK) return rc;
  if (al_manifest_source_count(m))
    return al_set_error(AL_EINVAL,
                        "the manifest is a mixture's (%" PRIu32
                        " sources): stream it over its sources' indexes (stream --mixture, "
                        "al_stream_open_mixture)",
                        al_manifest_source_count(m));
  uint64_t fp = al_index_fingerprint(idx);
  if (info.index_fingerprint != fp)
    return al_set_error(AL_EINVAL,
                        "the manifest was planned from another index (index fingerprint %016" PRIx64
                        " in the manifest, %016" PRIx64
                        " in this index): plan again from this index",
                        info.index_fingerprint, fp);
  /* The fingerprint proves the index is the one planned from; the key table must agree
   * with it position by position (al_manifest_load has checked the table against the
   * steps: every scheduled position exactly once). */
  size_t n_idx = al_index_sample_count(idx);
  if (info.index_samples != n_idx)
    return al_set_error(AL_EFORMAT,
                        "the manifest was planned from an index of %" PRIu64
                        " samples but the index holds %zu",
                        info.index_samples, n_idx);
  for (size_t i = 0; i < n_idx; i++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    const char *mk = al_manifest_key(m, i);
    if ((rc = al_index_sample(idx, i, &si)) != AL_OK) return rc;
    if (mk && *mk && strcmp(mk, si.key)) /* "": saved without keys (al_plan_save, key NULL) */
      return al_set_error(AL_EFORMAT,
                          "the manifest's key table names '%s' at index position %zu where the "
                          "index holds '%s': plan again from this index",
                          mk, i, si.key);
  }
  uint32_t r;
  rc = al_resolve_rank(m, rank, opts ? opts->world : 0, &r);
  if (rc != AL_OK) return rc;
  stream_rank_plan plan;
  rc = stream_rank_plan_from_manifest(&plan, m, r);
  if (rc != AL_OK) return rc;
  for (size_t i = 0; i < plan.n_samples; i++)
    if (plan.samples[i].sample >= al_index_sample_count(idx)) {
      uint64_t bad = plan.samples[i].sample; /* read before the plan is freed */
      stream_rank_plan_free(&plan);
      return al_set_error(AL_EFORMAT,
                          "the manifest refers to sample %" PRIu64 " but the index holds %zu", bad,
                          al_index_sample_count(idx));
    }
  al_stream_options o;
  if (opts)
    o = *opts;
  else
    memset(&o, 0, sizeof o);
  const char *one = NULL, *const *names = NULL;
  char dflt[AL_INDEX_EXT_MAX + 1];
  size_t n_names = 0;
  stream_requested_members(idx, &o, &one, dflt, sizeof dflt, &names, &n_names);
  rc = stream_check_members(idx, plan.samples, plan.n_samples, r, o.on_error, names, n_names);
  if (rc != AL_OK) {
    stream_rank_plan_free(&plan);
    return rc;
  }
  stream_source src;
  stream_index_source(idx, &src);
  rc = stream_open_source(out, &src, &plan, &o);
  stream_rank_plan_free(&plan); /* no-op unless open failed before taking it */
  return rc;
}

int al_stream_rank_batches(const al_manifest *m, uint32_t rank, uint64_t *n) {
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  int rc = stream_manifest_rank(m, rank, &info);
  if (rc != AL_OK) return rc;
  uint64_t total = 0;
  for (uint32_t step = info.first_step; step < info.first_step + info.steps; step++) {
    uint32_t k = 0;
    if ((rc = al_manifest_micro_count(m, step, rank, &k)) != AL_OK) return rc;
    total += k;
  }
  *n = total;
  return AL_OK;
}

/* The default member of one sample: its typed latent (without ".lz4"), else "latent". */
static const char *sample_latent(const al_index *idx, uint64_t sample, char *buf, size_t cap) {
  uint32_t t, h, w;
  size_t m;
  al_member_info mi;
  if (al_index_latent_grid(idx, (size_t)sample, &t, &h, &w, &m) != AL_OK ||
      al_index_member(idx, (size_t)sample, m, &mi) != AL_OK)
    return "latent";
  size_t n = strlen(mi.ext);
  if (n > 4 && !strcmp(mi.ext + n - 4, ".lz4")) n -= 4;
  if (n + 1 > cap) return "latent";
  memcpy(buf, mi.ext, n);
  buf[n] = 0;
  return buf;
}

int al_stream_read_sample(const al_index *idx, uint64_t sample, const char *ext, void **out,
                          size_t *size) {
  *out = NULL;
  *size = 0;
  stream_source src;
  stream_index_source(idx, &src);
  stream_source_job job;
  char own[AL_INDEX_EXT_MAX + 1];
  if (!ext) ext = sample_latent(idx, sample, own, sizeof own);
  int rc = src.job(src.ctx, sample, ext, &job);
  if (rc != AL_OK) return rc;
  /* The table opens shards lazily: only this sample's shard is touched. */
  stream_shard_table *t = NULL;
  stream_reader *r = NULL;
  stream_growbuf b = {0};
  size_t len = 0;
  if ((rc = stream_shard_table_new(&t, &src)) == AL_OK &&
      (rc = stream_reader_new(&r, t, 0)) == AL_OK)
    rc = stream_reader_read(r, &job, &b, 0, &len);
  stream_reader_free(r);
  stream_shard_table_free(t);
  if (rc != AL_OK) {
    stream_growbuf_free(&b);
    return rc;
  }
  *out = b.p;
  *size = len;
  return AL_OK;
}

void al_stream_free(void *p) { stream_host_free(p, 0); }
