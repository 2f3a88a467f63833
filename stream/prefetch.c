/* Remote members into the cache folder ahead of the readers, in plan order (prefetch_internal.h).
 */
#include "stream/prefetch_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/al_status.h"

/* Members of one shard closer than this are fetched in one request, the bytes between them
 * too (tar headers, small members the batch does not ask for); a run holds at most
 * STREAM_CACHE_MAX_RUN members and RUN_MAX_BYTES. At 50 ms a request and 500 MB/s, 64 KiB
 * cost 0.13 ms, a request 50. */
#define RUN_GAP_BYTES (64u << 10)
#define RUN_MAX_BYTES (64ull << 20)

/* One member of a batch (a job is rebuilt from sample and member when fetched: a job holds a
 * whole member name, over a kilobyte, and an epoch has millions of units). */
typedef struct unit {
  uint64_t k; /* local batch number */
  uint64_t sample;
  uint64_t offset, size; /* of the member in its shard */
  uint32_t shard;
  uint32_t member; /* index into the stream's members */
  uint32_t i;      /* sample of the batch */
  uint32_t step;   /* the batch's plan step */
} unit;

typedef struct run {
  size_t first, n; /* units[first, first + n) */
} run;

struct stream_prefetch {
  stream_prefetch_args a;
  unit *units;
  size_t n_units;
  run *runs;
  size_t n_runs;
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
  stream_source_job jobs[STREAM_CACHE_MAX_RUN];
  for (;;) {
    size_t u = atomic_fetch_add(&p->next, 1);
    if (u >= p->n_runs) break;
    const run *x = &p->runs[u];
    uint64_t k = p->units[x->first].k;
    /* Within the look-ahead: what lies between the consumer and this batch fits (or it is the
     * batch the consumer waits for). */
    int go = 0;
    while (!go) {
      if (atomic_load(&p->stop)) goto out;
      uint64_t d = atomic_load(p->a.delivered);
      if (d > k) break; /* delivered: too late */
      if (p->cum[k + 1] - p->cum[d] <= p->a.ahead_bytes || k == d)
        go = 1;
      else
        nap();
    }
    if (!go) continue;
    size_t n = 0;
    uint_fast32_t begun = p->a.begun ? atomic_load(&p->a.begun[k]) : 0;
    for (size_t i = 0; i < x->n; i++) {
      const unit *y = &p->units[x->first + i];
      if (y->i < begun) continue;
      if (p->a.src->job(p->a.src->ctx, y->sample, p->a.members[y->member], &jobs[n]) != AL_OK)
        continue; /* the reader reports it */
      jobs[n++].step = y->step;
    }
    (void)stream_reader_warm(rd, jobs, n); /* errors: the reader reports them */
  }
out:
  stream_reader_free(rd);
  return NULL;
}

static int cmp_unit(const void *a, const void *b) {
  const unit *x = a, *y = b;
  if (x->k != y->k) return x->k < y->k ? -1 : 1;
  if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
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
        p->units[p->n_units++] = (unit){.k = k,
                                        .sample = ps->sample,
                                        .offset = job.offset,
                                        .size = job.size,
                                        .shard = job.shard,
                                        .member = (uint32_t)j,
                                        .i = (uint32_t)i,
                                        .step = pb->step};
      }
    }
    p->cum[k + 1] = p->cum[k] + bytes;
  }
  return AL_OK;
}

/* Within each batch, its members by shard and offset, cut into runs: one request each. */
static int build_runs(stream_prefetch *p) {
  qsort(p->units, p->n_units, sizeof *p->units, cmp_unit);
  p->runs = calloc(p->n_units ? p->n_units : 1, sizeof *p->runs);
  if (!p->runs) return al_set_error(AL_ENOMEM, "prefetch");
  for (size_t i = 0; i < p->n_units; i++) {
    const unit *x = &p->units[i];
    if (p->n_runs) {
      run *r = &p->runs[p->n_runs - 1];
      const unit *f = &p->units[r->first], *l = &p->units[r->first + r->n - 1];
      uint64_t end = l->offset + l->size;
      if (f->k == x->k && f->shard == x->shard && x->offset >= end &&
          x->offset - end <= RUN_GAP_BYTES && r->n < STREAM_CACHE_MAX_RUN &&
          x->offset + x->size - f->offset <= RUN_MAX_BYTES) {
        r->n++;
        continue;
      }
    }
    p->runs[p->n_runs++] = (run){i, 1};
  }
  return AL_OK;
}

void stream_prefetch_stop(stream_prefetch *p) {
  if (!p) return;
  atomic_store(&p->stop, 1);
  for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  free(p->units);
  free(p->runs);
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
  if (rc == AL_OK) rc = build_runs(p);
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
