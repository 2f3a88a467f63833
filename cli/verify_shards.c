/* adaptiveload verify: every shard looked at by a few threads (verify_shards_internal.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/verify_shards_internal.h"
#include "common/atomic_file_internal.h"
#include "common/clock_internal.h"

#define PROGRESS_EVERY_S 2.0
#define MAX_THREADS 64

typedef struct probe_pool {
  const al_index *idx;
  verify_shard *v;
  size_t n;
  atomic_size_t next, done;
  int quiet;
  pthread_mutex_t mu; /* guards last and the progress line */
  double t0, last;
} probe_pool;

/* Shard i as the stream would find it when it opens the shard. */
static void probe(const al_index *idx, size_t i, const al_shard_info *sh, verify_shard *v) {
  int fd = -1;
  struct stat st;
  v->checked = 1;
  v->open_rc = afile_open_input(sh->path, "shard", &fd);
  if (!v->open_rc && fstat(fd, &st) != 0)
    v->open_rc = al_set_error(AL_EIO, "%s: fstat: %s", sh->path, strerror(errno));
  if (!v->open_rc) {
    v->size = (uint64_t)st.st_size;
    v->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    v->verify_rc = v->size == sh->size ? al_index_shard_verify(idx, i, fd) : AL_OK;
  }
  if (fd >= 0) close(fd);
  if (v->open_rc || (v->verify_rc && v->verify_rc != AL_ENOTFOUND))
    v->error = strdup(al_last_error()); /* NULL when out of memory: the report says so */
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
    al_shard_info sh;
    if (al_index_shard(p->idx, i, &sh) == AL_OK && sh.sample_count) probe(p->idx, i, &sh, &p->v[i]);
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

int verify_shards_probe(const al_index *idx, int threads, int quiet, verify_shard **out) {
  *out = NULL;
  size_t n = al_index_shard_count(idx);
  probe_pool p = {.idx = idx, .n = n, .quiet = quiet};
  p.v = calloc(n ? n : 1, sizeof *p.v);
  if (!p.v) return al_set_error(AL_ENOMEM, "verify: out of memory for %zu shards", n);
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
  *out = p.v;
  return AL_OK;
}

void verify_shards_free(verify_shard *v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) free(v[i].error);
  free(v);
}
