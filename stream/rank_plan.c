/* One rank's micro-batches, flattened out of a manifest. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "stream/engine_internal.h"

int stream_manifest_rank(const al_manifest *m, uint32_t rank, al_manifest_info *info) {
  int rc = al_manifest_get_info(m, info);
  if (rc != AL_OK) return rc;
  if (rank >= info->world)
    return al_set_error(AL_EINVAL,
                        "rank %" PRIu32 " out of range: the manifest plans %" PRIu32 " ranks", rank,
                        info->world);
  return AL_OK;
}

int stream_bucket_grid(const al_manifest *m, uint32_t bucket, uint32_t grid[3]) {
  grid[0] = grid[1] = grid[2] = 0;
  al_bucket_info bi = AL_BUCKET_INFO_INIT;
  int rc = al_manifest_bucket(m, bucket, &bi);
  if (rc != AL_OK) return rc;
  /* The geometry the manifest was planned with; the grid is checked against the bucket's
   * recorded tokens. */
  al_latent_geom g;
  if ((rc = al_manifest_geometry(m, &g)) != AL_OK) return rc;
  bi.id = bucket;
  return stream_grid_of(&bi, &g, "manifest", grid);
}

int stream_group_check(uint32_t world, uint32_t step, uint32_t rank, uint32_t k,
                       const al_micro_ref *ref, const al_micro_ref *lead) {
  uint32_t d = ref->sp_degree ? ref->sp_degree : 1;
  const char *bad = NULL;
  if (d & (d - 1))
    bad = "the degree is not a power of two";
  else if (ref->sp_rank >= d)
    bad = "sp_rank is not below the degree";
  else if (rank < ref->sp_rank || (rank - ref->sp_rank) % d || rank - ref->sp_rank > world - d)
    bad = "the group is not an aligned group of the world's ranks";
  if (bad)
    return al_set_error(AL_EFORMAT,
                        "manifest step %" PRIu32 " rank %" PRIu32 " micro %" PRIu32
                        ": sequence-parallel degree %" PRIu32 " sp_rank %" PRIu32 " (world %" PRIu32
                        "): %s",
                        step, rank, k, d, ref->sp_rank, world, bad);
  if (!ref->sp_rank) return AL_OK;
  uint32_t first = rank - ref->sp_rank;
  int same = (lead->sp_degree ? lead->sp_degree : 1) == d && lead->sp_rank == 0 &&
             lead->bucket == ref->bucket && lead->n_samples == ref->n_samples &&
             lead->n_padded == ref->n_padded && !lead->tokens == !ref->tokens;
  for (size_t i = 0; same && i < ref->n_samples; i++)
    same = lead->samples[i] == ref->samples[i] &&
           (!ref->tokens || lead->tokens[i] == ref->tokens[i]);
  for (size_t i = 0; same && i < ref->n_padded; i++) same = lead->padded[i] == ref->padded[i];
  if (!same)
    return al_set_error(AL_EFORMAT,
                        "manifest step %" PRIu32 " micro %" PRIu32 ": rank %" PRIu32
                        " (sp_rank %" PRIu32 " of degree %" PRIu32
                        ") does not get its group's micro-batch: rank %" PRIu32
                        " has another (bucket %" PRIu32 ", %zu samples; here bucket %" PRIu32
                        ", %zu samples)",
                        step, k, rank, ref->sp_rank, d, first, lead->bucket, lead->n_samples,
                        ref->bucket, ref->n_samples);
  return AL_OK;
}

/* The group check of (step, rank, micro k) against the manifest's micro-batch of the group's
 * first rank. */
static int check_group(const al_manifest *m, uint32_t world, uint32_t step, uint32_t rank,
                       uint32_t k, const al_micro_ref *ref) {
  al_micro_ref lead = *ref;
  if (ref->sp_rank && ref->sp_rank <= rank) {
    int rc = al_manifest_micro(m, step, rank - ref->sp_rank, k, &lead);
    if (rc != AL_OK)
      return al_error_prefix(rc, "the group's first rank %" PRIu32, rank - ref->sp_rank);
  }
  return stream_group_check(world, step, rank, k, ref, &lead);
}

int stream_rank_plan_from_manifest(stream_rank_plan *out, const al_manifest *m, uint32_t rank) {
  memset(out, 0, sizeof *out);
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  int rc = stream_manifest_rank(m, rank, &info);
  if (rc != AL_OK) return rc;
  out->rank = rank;
  out->world = info.world;
  out->epoch = info.epoch;
  out->first_step = info.first_step;
  out->seed = info.seed;
  out->index_fingerprint = info.index_fingerprint;
  if ((rc = al_stream_manifest_fingerprint(m, &out->manifest_fingerprint)) != AL_OK) return rc;
  al_latent_geom geom;
  if ((rc = al_manifest_geometry(m, &geom)) != AL_OK) return rc;
  out->patch[0] = geom.patch_t;
  out->patch[1] = geom.patch_h;
  out->patch[2] = geom.patch_w;
  size_t bcap = 0, scap = 0;
  for (uint32_t step = info.first_step; step < info.first_step + info.steps; step++) {
    uint32_t nm = 0;
    rc = al_manifest_micro_count(m, step, rank, &nm);
    if (rc != AL_OK) goto cleanup;
    for (uint32_t k = 0; k < nm; k++) {
      al_micro_ref ref = AL_MICRO_REF_INIT;
      rc = al_manifest_micro(m, step, rank, k, &ref);
      if (rc == AL_OK) rc = check_group(m, info.world, step, rank, k, &ref);
      if (rc != AL_OK) goto cleanup;
      rc = grow_array((void **)&out->batches, &bcap, out->n_batches + 1, sizeof *out->batches,
                      "the rank plan's micro-batches");
      if (rc == AL_OK)
        rc = grow_array((void **)&out->samples, &scap, out->n_samples + ref.n_samples,
                        sizeof *out->samples, "the rank plan's samples");
      if (rc != AL_OK) goto cleanup;
      stream_plan_batch *b = &out->batches[out->n_batches++];
      b->step = step;
      b->micro = k;
      b->n_micro = nm;
      b->bucket = ref.bucket;
      b->step_samples = ref.step_samples;
      b->step_tokens = ref.step_tokens;
      b->first = out->n_samples;
      b->n = ref.n_samples;
      b->sp_degree = ref.sp_degree ? ref.sp_degree : 1;
      b->sp_rank = ref.sp_rank;
      al_bucket_info pbi = AL_BUCKET_INFO_INIT;
      if (al_manifest_bucket(m, ref.bucket, &pbi) == AL_OK) {
        b->pixels[0] = pbi.width;
        b->pixels[1] = pbi.height;
        b->pixels[2] = pbi.frames;
      }
      if (stream_bucket_grid(m, ref.bucket, b->grid) != AL_OK && !out->grid_error) {
        out->grid_error = strdup(al_last_error()); /* reported by a typed latent's read */
        if (!out->grid_error) {
          rc = al_set_error(AL_ENOMEM, "the rank plan");
          goto cleanup;
        }
      }
      for (size_t i = 0; i < ref.n_samples; i++) {
        stream_plan_sample *ps = &out->samples[out->n_samples + i];
        ps->sample = ref.samples[i];
        ps->tokens = ref.tokens ? ref.tokens[i] : 0;
        ps->padded = 0;
        ps->lacks = 0;
      }
      for (size_t j = 0; j < ref.n_padded; j++) {
        if (ref.padded[j] >= ref.n_samples) {
          rc = al_set_error(AL_EFORMAT,
                            "manifest step %" PRIu32 " rank %" PRIu32 " micro %" PRIu32
                            ": padded position %" PRIu32 " past %zu samples",
                            step, rank, k, ref.padded[j], ref.n_samples);
          goto cleanup;
        }
        out->samples[out->n_samples + ref.padded[j]].padded = 1;
      }
      out->n_samples += ref.n_samples;
    }
  }
  if (out->grid_error) /* one unknown grid: no batch is cropped (a typed latent says why) */
    for (size_t i = 0; i < out->n_batches; i++)
      memset(out->batches[i].grid, 0, sizeof out->batches[i].grid);
  return AL_OK;
cleanup:
  stream_rank_plan_free(out);
  return rc;
}
