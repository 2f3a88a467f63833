/* The stream's source over a mixture's indexes: draw id -> (source, position) -> read job of that
 * source's index, with every source's shards numbered after the sources before it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "stream/engine_internal.h"

typedef struct mix_input {
  stream_source one;   /* the index source of this input */
  uint64_t draw_base;  /* its first draw id */
  uint64_t draws;      /* passes x samples */
  uint64_t samples;    /* its index's samples */
  uint32_t shard_base; /* its first shard number in the mixture */
  char name[AL_RUN_NAME_MAX + 1];
} mix_input;

typedef struct mix_source {
  size_t n;
  mix_input *in;
} mix_source;

/* The input holding draw id d: the last whose draw base is <= d (an input without draws shares
 * its base with the next), when d is below its end. */
static const mix_input *input_of_draw(const mix_source *ms, uint64_t d, uint32_t *which) {
  size_t lo = 0, hi = ms->n;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (ms->in[mid].draw_base <= d)
      lo = mid;
    else
      hi = mid;
  }
  const mix_input *x = &ms->in[lo];
  if (d < x->draw_base || d - x->draw_base >= x->draws) return NULL;
  *which = (uint32_t)lo;
  return x;
}

/* The input holding mixture shard id (the last whose first shard is <= id), and the id in its
 * own index. */
static const mix_input *input_of_shard(const mix_source *ms, uint32_t id, uint32_t *local) {
  size_t lo = 0, hi = ms->n;
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (ms->in[mid].shard_base <= id)
      lo = mid;
    else
      hi = mid;
  }
  const mix_input *x = &ms->in[lo];
  if (id < x->shard_base || id - x->shard_base >= x->one.n_shards) return NULL;
  *local = id - x->shard_base;
  return x;
}

static int mix_shard(void *ctx, uint32_t id, stream_source_shard *out) {
  uint32_t local = 0;
  const mix_input *x = input_of_shard(ctx, id, &local);
  if (!x) return al_set_error(AL_ERANGE, "mixture: shard %" PRIu32 " out of range", id);
  return x->one.shard(x->one.ctx, local, out);
}

static int mix_job(void *ctx, uint64_t sample, const char *ext, stream_source_job *job) {
  uint32_t which = 0;
  const mix_input *x = input_of_draw(ctx, sample, &which);
  if (!x) {
    memset(job, 0, sizeof *job);
    return al_set_error(AL_ERANGE, "mixture: draw %" PRIu64 " is no source's", sample);
  }
  uint64_t pos = (sample - x->draw_base) % x->samples;
  int rc = x->one.job(x->one.ctx, pos, ext, job);
  job->shard += x->shard_base;
  job->source = which;
  if (rc != AL_OK) return al_error_prefix(rc, "source '%s'", x->name);
  return AL_OK;
}

static int mix_verify(void *ctx, uint32_t id, struct storage_obj *obj) {
  uint32_t local = 0;
  const mix_input *x = input_of_shard(ctx, id, &local);
  if (!x) return al_set_error(AL_ERANGE, "mixture: shard %" PRIu32 " out of range", id);
  return x->one.verify(x->one.ctx, local, obj);
}

static void mix_release(void *ctx) {
  mix_source *ms = ctx;
  if (!ms) return;
  free(ms->in);
  free(ms);
}

int stream_check_source_index(const al_index *idx, const al_run_source_info *s,
                              const char *origin) {
  uint64_t fp = al_index_fingerprint(idx);
  if (s->index_fingerprint != fp)
    return al_set_error(AL_EINVAL,
                        "source '%s' was planned from another index (index fingerprint %016" PRIx64
                        " in the %s, %016" PRIx64
                        " in the index given for it): give the sources' indexes in the %s's order",
                        s->name, s->index_fingerprint, origin, fp, origin);
  size_t n = al_index_sample_count(idx);
  if (s->samples != n)
    return al_set_error(AL_EFORMAT,
                        "source '%s' was planned from an index of %" PRIu64
                        " samples but its index holds %zu",
                        s->name, s->samples, n);
  return AL_OK;
}

int stream_mixture_source(const al_index *const *idx, const al_run_source_info *src, size_t n,
                          stream_source *out) {
  memset(out, 0, sizeof *out);
  if (!n) return al_set_error(AL_EINVAL, "mixture stream: no sources");
  mix_source *ms = calloc(1, sizeof *ms);
  mix_input *in = calloc(n, sizeof *in);
  if (!ms || !in) {
    free(ms);
    free(in);
    return al_set_error(AL_ENOMEM, "mixture stream: %zu sources", n);
  }
  ms->n = n;
  ms->in = in;
  uint64_t shards = 0;
  for (size_t i = 0; i < n; i++) {
    stream_index_source(idx[i], &in[i].one);
    in[i].draw_base = src[i].draw_base;
    in[i].samples = src[i].samples;
    in[i].draws = src[i].samples ? (uint64_t)src[i].passes * src[i].samples : 0;
    in[i].shard_base = (uint32_t)shards;
    snprintf(in[i].name, sizeof in[i].name, "%s", src[i].name);
    shards += in[i].one.n_shards;
    if (shards > UINT32_MAX) {
      mix_release(ms);
      return al_set_error(AL_ERANGE, "mixture stream: %" PRIu64 " shards in all, above 2^32 - 1",
                          shards);
    }
  }
  out->ctx = ms;
  out->n_shards = (size_t)shards;
  out->shard = mix_shard;
  out->job = mix_job;
  out->verify = mix_verify;
  out->index = idx[0];
  out->release = mix_release;
  return AL_OK;
}
