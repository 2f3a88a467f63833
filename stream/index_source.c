/* The stream's source over an al_index: sample position -> read job. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "loader/shard_fp_internal.h"
#include "storage/storage_internal.h"
#include "stream/engine_internal.h"

static int idx_shard(void *ctx, uint32_t id, stream_source_shard *out) {
  al_shard_info si = AL_SHARD_INFO_INIT;
  int rc = al_index_shard((const al_index *)ctx, id, &si);
  if (rc != AL_OK) return rc;
  out->path = si.path;
  out->size = si.size;
  out->mtime_ns = si.mtime_ns;
  out->seekable = si.seekable;
  out->etag = si.etag;
  return AL_OK;
}

/* What the index recorded of the member found (mi): whether it is the sample's latent (the
 * index's rule, al_index_latent_grid) and, for a typed member, its dtype and shape. */
static void idx_job_record(const al_index *idx, size_t sample, const al_sample_info *si,
                           const al_member_info *mi, stream_source_job *job) {
  size_t pos = si->n_members;
  for (uint32_t k = 0; k < si->n_members; k++) {
    al_member_info hm;
    if (al_index_member(idx, sample, k, &hm) == AL_OK && hm.offset == mi->offset &&
        hm.size == mi->size) {
      pos = k;
      break;
    }
  }
  if (pos == si->n_members) return;
  uint32_t t, h, w;
  size_t lat = 0;
  job->latent = al_index_latent_grid(idx, sample, &t, &h, &w, &lat) == AL_OK && lat == pos;
  job->type.struct_size = sizeof job->type;
  job->has_type = al_index_member_type(idx, sample, pos, &job->type) == AL_OK;
}

static int idx_job(void *ctx, uint64_t sample, const char *ext, stream_source_job *job) {
  const al_index *idx = ctx;
  al_sample_info si = AL_SAMPLE_INFO_INIT;
  memset(job, 0, sizeof *job);
  if (sample >= al_index_sample_count(idx))
    return al_set_error(AL_ERANGE, "sample %" PRIu64 " out of range: the index holds %zu samples",
                        sample, al_index_sample_count(idx));
  int rc = al_index_sample(idx, (size_t)sample, &si);
  if (rc != AL_OK) return rc;
  job->key = si.key;
  job->shard = si.shard;
  job->width = si.width;
  job->height = si.height;
  job->frames = si.frames;
  al_member_info mi;
  rc = al_index_find_member(idx, (size_t)sample, ext, &mi);
  if (rc == AL_ENOTFOUND) {
    /* KEY.ext.lz4: the index may list it under "ext.lz4". */
    char lz[AL_INDEX_EXT_MAX + 5];
    if ((size_t)snprintf(lz, sizeof lz, "%s.lz4", ext) < sizeof lz)
      rc = al_index_find_member(idx, (size_t)sample, lz, &mi);
  }
  if (rc != AL_OK) {
    al_shard_info sh = AL_SHARD_INFO_INIT;
    const char *path = al_index_shard(idx, si.shard, &sh) == AL_OK ? sh.path : "?";
    if (rc == AL_ENOTFOUND) {
      /* Name what the sample does have, so a wrong --members is obvious. */
      char have[512];
      size_t at = 0;
      have[0] = 0;
      for (uint32_t k = 0; k < si.n_members && at < sizeof have; k++) {
        al_member_info hm;
        if (al_index_member(idx, (size_t)sample, k, &hm) != AL_OK) break;
        int w = snprintf(have + at, sizeof have - at, "%s%s", k ? ", " : "", hm.ext);
        if (w < 0 || (size_t)w >= sizeof have - at) {
          snprintf(have + (sizeof have - 5), 5, "...");
          break;
        }
        at += (size_t)w;
      }
      return al_set_error(AL_ENOTFOUND,
                          "%s: key '%s': no member '%s.%s' (nor '.%s.lz4') in the index; the "
                          "sample has: %s",
                          path, si.key, si.key, ext, ext, si.n_members ? have : "no members");
    }
    return al_error_prefix(rc, "%s: key '%s'", path, si.key);
  }
  int n = snprintf(job->member, sizeof job->member, "%s.%s", si.key, mi.ext);
  /* The index may name the member "ext" with lz4 set, or "ext.lz4". */
  size_t el = strlen(mi.ext);
  if (mi.lz4 && !(el >= 4 && !strcmp(mi.ext + el - 4, ".lz4")) && n > 0 &&
      (size_t)n < sizeof job->member)
    n = snprintf(job->member, sizeof job->member, "%s.%s.lz4", si.key, mi.ext);
  if (n < 0 || (size_t)n >= sizeof job->member)
    return al_set_error(AL_ERANGE, "key '%s': member name too long", si.key);
  job->offset = mi.offset;
  job->size = mi.size;
  job->lz4 = mi.lz4;
  idx_job_record(idx, (size_t)sample, &si, &mi, job);
  return AL_OK;
}

static int idx_verify(void *ctx, uint32_t id, struct storage_obj *obj) {
  const al_index *idx = ctx;
  if (id >= al_index_shard_count(idx))
    return al_set_error(AL_ERANGE, "shard %" PRIu32 " out of range (%zu shards)", id,
                        al_index_shard_count(idx));
  return index_shard_fp_check(idx, id, storage_read_at, obj);
}

void stream_index_source(const al_index *idx, stream_source *out) {
  memset(out, 0, sizeof *out);
  out->ctx = (void *)idx;
  out->n_shards = al_index_shard_count(idx);
  out->shard = idx_shard;
  out->job = idx_job;
  out->verify = idx_verify;
  out->index = idx;
}
