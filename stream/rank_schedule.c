/* al_schedule: a rank plan behind flat accessors for ctypes. */
#include "stream/al_schedule.h"

#include <stdlib.h>
#include <string.h>

#include "stream/engine_internal.h"

typedef struct sched_bucket {
  uint32_t id, width, height, frames;
  uint64_t tokens;
} sched_bucket;

struct al_schedule {
  stream_rank_plan plan;
  size_t n_buckets;
  sched_bucket *buckets;
};

int al_schedule_open(al_schedule **out, const al_manifest *m, int rank, int world) {
  *out = NULL;
  uint32_t r;
  int rc = al_resolve_rank(m, rank, world, &r);
  if (rc != AL_OK) return rc;
  al_schedule *s = calloc(1, sizeof *s);
  if (!s) return al_set_error(AL_ENOMEM, "schedule");
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  if ((rc = stream_rank_plan_from_manifest(&s->plan, m, r)) != AL_OK) goto cleanup;
  if ((rc = al_manifest_get_info(m, &info)) == AL_OK && info.buckets) {
    s->buckets = calloc(info.buckets, sizeof *s->buckets);
    if (!s->buckets) rc = al_set_error(AL_ENOMEM, "schedule buckets");
    for (size_t i = 0; rc == AL_OK && i < info.buckets; i++) {
      al_bucket_info bi = AL_BUCKET_INFO_INIT;
      if ((rc = al_manifest_bucket(m, i, &bi)) != AL_OK) break;
      s->buckets[i] = (sched_bucket){bi.id, bi.width, bi.height, bi.frames, bi.tokens};
    }
    s->n_buckets = info.buckets;
  }
  if (rc != AL_OK) goto cleanup;
  *out = s;
  return AL_OK;

cleanup:
  al_schedule_free(s);
  return rc;
}

int al_schedule_open_path(al_schedule **out, const char *manifest_path, int rank, int world) {
  *out = NULL;
  al_manifest *m = NULL;
  int rc = al_manifest_load(&m, manifest_path);
  if (rc != AL_OK) return rc;
  rc = al_schedule_open(out, m, rank, world);
  if (rc != AL_OK) al_error_prefix(rc, "%s", manifest_path);
  al_manifest_free(m);
  return rc;
}

void al_schedule_free(al_schedule *s) {
  if (!s) return;
  stream_rank_plan_free(&s->plan);
  free(s->buckets);
  free(s);
}

size_t al_schedule_bucket_count(const al_schedule *s) { return s->n_buckets; }

int al_schedule_bucket(const al_schedule *s, size_t k, uint32_t *id, uint32_t *width,
                       uint32_t *height, uint32_t *frames, uint64_t *tokens) {
  if (k >= s->n_buckets)
    return al_set_error(AL_ERANGE, "bucket %zu out of range (%zu buckets)", k, s->n_buckets);
  const sched_bucket *b = &s->buckets[k];
  if (id) *id = b->id;
  if (width) *width = b->width;
  if (height) *height = b->height;
  if (frames) *frames = b->frames;
  if (tokens) *tokens = b->tokens;
  return AL_OK;
}

uint64_t al_schedule_batches(const al_schedule *s) { return s->plan.n_batches; }
uint64_t al_schedule_samples(const al_schedule *s) { return s->plan.n_samples; }
uint32_t al_schedule_rank(const al_schedule *s) { return s->plan.rank; }
uint32_t al_schedule_world(const al_schedule *s) { return s->plan.world; }
uint32_t al_schedule_epoch(const al_schedule *s) { return s->plan.epoch; }
uint64_t al_schedule_seed(const al_schedule *s) { return s->plan.seed; }
uint64_t al_schedule_index_fingerprint(const al_schedule *s) { return s->plan.index_fingerprint; }
uint64_t al_schedule_manifest_fingerprint(const al_schedule *s) {
  return s->plan.manifest_fingerprint;
}

int al_schedule_export(const al_schedule *s, uint64_t *first, uint32_t *step, uint32_t *micro,
                       uint32_t *n_micro, uint32_t *bucket, uint64_t *step_samples,
                       uint64_t *step_tokens, uint64_t *samples, uint64_t *tokens,
                       uint8_t *padded) {
  const stream_rank_plan *p = &s->plan;
  for (size_t i = 0; i < p->n_batches; i++) {
    const stream_plan_batch *b = &p->batches[i];
    if (first) first[i] = b->first;
    if (step) step[i] = b->step;
    if (micro) micro[i] = b->micro;
    if (n_micro) n_micro[i] = b->n_micro;
    if (bucket) bucket[i] = b->bucket;
    if (step_samples) step_samples[i] = b->step_samples;
    if (step_tokens) step_tokens[i] = b->step_tokens;
  }
  if (first) first[p->n_batches] = p->n_samples;
  for (size_t i = 0; i < p->n_samples; i++) {
    if (samples) samples[i] = p->samples[i].sample;
    if (tokens) tokens[i] = p->samples[i].tokens;
    if (padded) padded[i] = p->samples[i].padded;
  }
  return AL_OK;
}

int al_schedule_export_sp(const al_schedule *s, uint32_t *sp_degree, uint32_t *sp_rank) {
  if (!s) return al_set_error(AL_EINVAL, "al_schedule_export_sp: NULL schedule");
  for (size_t i = 0; i < s->plan.n_batches; i++) {
    const stream_plan_batch *b = &s->plan.batches[i];
    if (sp_degree) sp_degree[i] = b->sp_degree ? b->sp_degree : 1;
    if (sp_rank) sp_rank[i] = b->sp_rank;
  }
  return AL_OK;
}
