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
 * whole member name, over a kilobyte). */
typedef struct unit {
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

/* The units and runs of one batch (local number k) are built when the threads reach it: the
 * prefetcher holds one batch's units at a time, whatever the epoch's length. */
struct stream_prefetch {
  stream_prefetch_args a;
  pthread_mutex_t mu;
  uint64_t built; /* batches [0, built) have their bytes in cum; built - 1 is the current */
  unit *units;    /* the current batch's */
  size_t n_units, cap_units;
  run *runs;
  size_t n_runs, next_run, cap_runs;
  uint64_t *cum; /* cum[k]: member bytes of batches [0, k) (total + 1 entries) */
  atomic_int stop;
  pthread_t *threads;
  int n_threads;
};

static void nap(void) {
  struct timespec ts = {0, 2 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static int cmp_unit(const void *a, const void *b) {
  const unit *x = a, *y = b;
  if (x->shard != y->shard) return x->shard < y->shard ? -1 : 1;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int add_unit(stream_prefetch *p, const unit *u) {
  if (p->n_units == p->cap_units) {
    size_t nc = p->cap_units ? 2 * p->cap_units : 256;
    unit *nu = realloc(p->units, nc * sizeof *nu);
    if (!nu) return al_set_error(AL_ENOMEM, "prefetch");
    p->units = nu;
    p->cap_units = nc;
  }
  p->units[p->n_units++] = *u;
  return AL_OK;
}

/* The remote members of batch k (cum[k + 1] their bytes), by shard and offset, cut into runs:
 * one request each. A batch the consumer took already, or one the plan cannot give, has none. */
static int build_batch(stream_prefetch *p, uint64_t k) {
  const stream_prefetch_args *a = &p->a;
  p->n_units = p->n_runs = p->next_run = 0;
  uint64_t bytes = 0, pos = a->first + k * a->stride;
  const stream_plan_batch *pb;
  const stream_plan_sample *samples;
  int rc = AL_OK;
  if (atomic_load(a->delivered) <= k && a->batch(a->ctx, pos, &pb, &samples) == AL_OK) {
    for (size_t i = 0; i < pb->n && !rc; i++) {
      const stream_plan_sample *ps = &samples[pb->first + i];
      if (ps->lacks) continue;
      for (size_t j = 0; j < a->n_members && !rc; j++) {
        stream_source_job job;
        if (a->src->job(a->src->ctx, ps->sample, a->members[j], &job) != AL_OK) continue;
        if (!stream_shard_table_is_remote(a->shards, job.shard)) continue;
        bytes += job.size;
        unit u = {.sample = ps->sample,
                  .offset = job.offset,
                  .size = job.size,
                  .shard = job.shard,
                  .member = (uint32_t)j,
                  .i = (uint32_t)i,
                  .step = pb->step};
        rc = add_unit(p, &u);
      }
    }
    a->done(a->ctx, pos);
  }
  p->cum[k + 1] = p->cum[k] + bytes;
  if (rc) return rc;
  qsort(p->units, p->n_units, sizeof *p->units, cmp_unit);
  if (p->n_units > p->cap_runs) {
    run *nr = realloc(p->runs, p->n_units * sizeof *nr);
    if (!nr) return al_set_error(AL_ENOMEM, "prefetch");
    p->runs = nr;
    p->cap_runs = p->n_units;
  }
  for (size_t i = 0; i < p->n_units; i++) {
    const unit *x = &p->units[i];
    if (p->n_runs) {
      run *r = &p->runs[p->n_runs - 1];
      const unit *f = &p->units[r->first], *l = &p->units[r->first + r->n - 1];
      uint64_t end = l->offset + l->size;
      if (f->shard == x->shard && x->offset >= end && x->offset - end <= RUN_GAP_BYTES &&
          r->n < STREAM_CACHE_MAX_RUN && x->offset + x->size - f->offset <= RUN_MAX_BYTES) {
        r->n++;
        continue;
      }
    }
    p->runs[p->n_runs++] = (run){i, 1};
  }
  return AL_OK;
}

/* The next run in plan order into units[0, *n) and its batch k; 0 at the end (or on stop). */
static int take_run(stream_prefetch *p, unit *units, size_t *n, uint64_t *k) {
  pthread_mutex_lock(&p->mu);
  int got = 0;
  while (!atomic_load(&p->stop)) {
    if (p->built && p->next_run < p->n_runs) {
      const run *x = &p->runs[p->next_run++];
      memcpy(units, &p->units[x->first], x->n * sizeof *units);
      *n = x->n;
      *k = p->built - 1;
      got = 1;
      break;
    }
    if (p->built >= p->a.total) break;
    if (build_batch(p, p->built++) != AL_OK) break; /* out of memory: fetch no further */
  }
  pthread_mutex_unlock(&p->mu);
  return got;
}

static void *prefetch_main(void *arg) {
  stream_prefetch *p = arg;
  stream_reader *rd = NULL;
  if (stream_reader_new(&rd, p->a.shards, p->a.read_block) != AL_OK) return NULL;
  stream_source_job jobs[STREAM_CACHE_MAX_RUN];
  unit units[STREAM_CACHE_MAX_RUN];
  size_t nu;
  uint64_t k;
  while (take_run(p, units, &nu, &k)) {
    /* Within the look-ahead: what lies between the consumer and this batch fits (or it is the
     * batch the consumer waits for). cum[0, k + 1] is final once batch k is built. */
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
    for (size_t i = 0; i < nu; i++) {
      const unit *y = &units[i];
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

void stream_prefetch_stop(stream_prefetch *p) {
  if (!p) return;
  atomic_store(&p->stop, 1);
  for (int i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  free(p->threads);
  free(p->units);
  free(p->runs);
  free(p->cum);
  free(p);
}

/* Whether any shard of the source is at a URL: local shards cost nothing to read ahead. */
static int any_remote(const stream_prefetch_args *a) {
  for (size_t i = 0; i < a->src->n_shards; i++)
    if (stream_shard_table_is_remote(a->shards, (uint32_t)i)) return 1;
  return 0;
}

int stream_prefetch_start(stream_prefetch **out, const stream_prefetch_args *a) {
  *out = NULL;
  if (a->parallel <= 0 || !a->total || !any_remote(a)) return AL_OK;
  stream_prefetch *p = calloc(1, sizeof *p);
  if (!p) return al_set_error(AL_ENOMEM, "prefetch");
  p->a = *a;
  pthread_mutex_init(&p->mu, NULL);
  int rc = AL_OK;
  p->cum = calloc(a->total + 1, sizeof *p->cum);
  p->threads = calloc((size_t)a->parallel, sizeof *p->threads);
  if (!p->cum || !p->threads) rc = al_set_error(AL_ENOMEM, "prefetch");
  for (int i = 0; rc == AL_OK && i < a->parallel; i++) {
    if (pthread_create(&p->threads[i], NULL, prefetch_main, p) != 0)
      rc = al_set_error(AL_ENOMEM, "cannot start prefetch thread %d", i);
    else
      p->n_threads++;
  }
  if (rc != AL_OK) {
    stream_prefetch_stop(p);
    return rc;
  }
  *out = p;
  return AL_OK;
}
