/* adaptiveload verify: every shard looked at by a few threads (verify_shards_internal.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/verify_shards_internal.h"
#include "common/clock_internal.h"

#define PROGRESS_EVERY_S 2.0
#define MAX_THREADS 64

typedef struct probe_pool {
  const al_index *idx;
  al_checker *checker;
  verify_shard *v;
  size_t n;
  atomic_size_t next, done;
  int quiet;
  pthread_mutex_t mu; /* guards last and the progress line */
  double t0, last;
} probe_pool;

/* A bad typed member of the shard being checked (this thread's verify_shard). */
static void bad_member(void *ctx, size_t sample, size_t member, const char *why) {
  verify_shard *v = ctx;
  verify_member *m = realloc(v->bad, (v->n_bad + 1) * sizeof *m);
  if (!m) return; /* c.typed_bad still counts it */
  v->bad = m;
  m[v->n_bad++] = (verify_member){.sample = sample, .member = member, .why = strdup(why)};
}

/* Shard i as the stream would find it when it opens the shard. */
static void probe(probe_pool *p, size_t i, verify_shard *v) {
  v->checked = 1;
  v->c.struct_size = sizeof v->c;
  if (al_checker_shard(p->checker, i, bad_member, v, &v->c) != AL_OK && !v->c.open_rc) {
    v->c.open_rc = AL_ENOMEM;
    v->c.error = strdup(al_last_error());
  }
  al_clear_error();
}

static void progress(probe_pool *p) {
  if (p->quiet) return;
  double now = clock_now_s();
  pthread_mutex_lock(&p->mu);
  if (now - p->last >= PROGRESS_EVERY_S) {
    p->last = now;
    fprintf(stderr, "verify: %zu of %zu shards checked (%.0f s)\n", atomic_load(&p->done), p->n,
            now - p->t0);
  }
  pthread_mutex_unlock(&p->mu);
}

static void *probe_worker(void *arg) {
  probe_pool *p = arg;
  for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;) {
    al_shard_info sh = AL_SHARD_INFO_INIT;
    if (al_index_shard(p->idx, i, &sh) == AL_OK && sh.sample_count) probe(p, i, &p->v[i]);
    al_clear_error();
    atomic_fetch_add(&p->done, 1);
    progress(p);
  }
  return NULL;
}

static int default_threads(void) {
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  return c < 1 ? 1 : c > 4 ? 4 : (int)c;
}

int verify_shards_probe(const al_index *idx, int threads, int quiet, const al_check_options *o,
                        verify_shard **out) {
  *out = NULL;
  size_t n = al_index_shard_count(idx);
  probe_pool p = {.idx = idx, .n = n, .quiet = quiet};
  int rc = al_checker_open(&p.checker, idx, o);
  if (rc) return rc;
  p.v = calloc(n ? n : 1, sizeof *p.v);
  if (!p.v) {
    al_checker_close(p.checker);
    return al_set_error(AL_ENOMEM, "verify: out of memory for %zu shards", n);
  }
  atomic_init(&p.next, 0);
  atomic_init(&p.done, 0);
  pthread_mutex_init(&p.mu, NULL);
  p.t0 = p.last = clock_now_s();
  if (threads <= 0) threads = default_threads();
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  if ((size_t)threads > n) threads = n ? (int)n : 1;
  pthread_t tid[MAX_THREADS];
  int started = 0;
  while (started < threads && !pthread_create(&tid[started], NULL, probe_worker, &p)) started++;
  if (!started) probe_worker(&p); /* no thread could start: this one does the work */
  for (int k = 0; k < started; k++) pthread_join(tid[k], NULL);
  pthread_mutex_destroy(&p.mu);
  al_checker_close(p.checker);
  *out = p.v;
  return AL_OK;
}

void verify_shards_free(verify_shard *v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) {
    for (size_t k = 0; k < v[i].n_bad; k++) free(v[i].bad[k].why);
    free(v[i].bad);
    al_shard_check_clear(&v[i].c);
  }
  free(v);
}
