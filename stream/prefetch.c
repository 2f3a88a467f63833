/* Remote members into the cache folder ahead of the readers, in plan order (prefetch_internal.h).
 */
#include "stream/prefetch_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/al_status.h"

typedef struct unit {
  uint64_t k; /* local batch number */
  uint64_t sample;
  uint32_t member;
} unit;

struct stream_prefetch {
  stream_prefetch_args a;
  unit *units;
  size_t n_units;
  uint64_t *cum; /* cum[k]: member bytes of batches [0, k) (total + 1 entries) */
  atomic_size_t next;
  atomic_int stop;
  pthread_t *threads;
  int n_threads;
};

static void nap(void) {
  struct timespec ts = {0, 2 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static void *prefetch_main(void *arg) {
  stream_prefetch *p = arg;
  stream_reader *rd = NULL;
  if (stream_reader_new(&rd, p->a.shards, p->a.read_block) != AL_OK) return NULL;
  for (;;) {
    size_t u = atomic_fetch_add(&p->next, 1);
    if (u >= p->n_units) break;
    const unit *x = &p->units[u];
    /* Within the look-ahead: what lies between the consumer and this batch fits. */
    for (;;) {
      if (atomic_load(&p->stop)) goto out;
      uint64_t d = atomic_load(p->a.delivered);
      if (atomic_load(p->a.claimed) > x->k) break; /* a reader has it */
      if (p->cum[x->k + 1] - p->cum[d] <= p->a.ahead_bytes || x->k == d) break;
      nap();
    }
    if (atomic_load(p->a.claimed) > x->k) continue;
    stream_source_job job;
    if (p->a.src->job(p->a.src->ctx, x->sample, p->a.members[x->member], &job) == AL_OK)
      (void)stream_reader_warm(rd, &job); /* errors: the reader reports them */
  }
out:
  stream_reader_free(rd);
  return NULL;
}

/* The units of the remote shards, in plan order, and the byte prefix sums. */
static int build_units(stream_prefetch *p) {
  const stream_prefetch_args *a = &p->a;
  size_t cap = 0;
  p->cum = calloc(a->total + 1, sizeof *p->cum);
  if (!p->cum) return al_set_error(AL_ENOMEM, "prefetch");
  for (uint64_t k = 0; k < a->total; k++) {
    const stream_plan_batch *pb = &a->plan->batches[a->first + k * a->stride];
    uint64_t bytes = 0;
    for (size_t i = 0; i < pb->n; i++) {
      const stream_plan_sample *ps = &a->plan->samples[pb->first + i];
      if (ps->lacks) continue;
      for (size_t j = 0; j < a->n_members; j++) {
        stream_source_job job;
        if (a->src->job(a->src->ctx, ps->sample, a->members[j], &job) != AL_OK) continue;
        if (!stream_shard_table_is_remote(a->shards, job.shard)) continue;
        bytes += job.size;
        if (p->n_units == cap) {
          size_t nc = cap ? 2 * cap : 256;
          unit *nu = realloc(p->units, nc * sizeof *nu);
          if (!nu) return al_set_error(AL_ENOMEM, "prefetch");
          p->units = nu;
          cap = nc;
        }
        p->units[p->n_units++] = (unit){k, ps->sample, (uint32_t)j};
      }
    }
    p->cum[k + 1] = p->cum[k] + bytes;
  }
  return AL_OK;
}

void stream_prefetch_stop(stream_prefetch *p) {
  if (!p) return;
  atomic_store(&p->stop, 1);
  for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  free(p->units);
  free(p->cum);
  free(p);
}

int stream_prefetch_start(stream_prefetch **out, const stream_prefetch_args *a) {
  *out = NULL;
  if (a->parallel <= 0 || !a->total) return AL_OK;
  stream_prefetch *p = calloc(1, sizeof *p);
  if (!p) return al_set_error(AL_ENOMEM, "prefetch");
  p->a = *a;
  int rc = build_units(p);
  if (rc == AL_OK && p->n_units) {
    p->threads = calloc((size_t)a->parallel, sizeof *p->threads);
    if (!p->threads) rc = al_set_error(AL_ENOMEM, "prefetch");
    for (int i = 0; rc == AL_OK && i < a->parallel; i++) {
      if (pthread_create(&p->threads[i], NULL, prefetch_main, p) != 0)
        rc = al_set_error(AL_ENOMEM, "cannot start prefetch thread %d", i);
      else
        p->n_threads++;
    }
  }
  if (rc != AL_OK || !p->n_units) {
    stream_prefetch_stop(p);
    return rc;
  }
  *out = p;
  return AL_OK;
}
