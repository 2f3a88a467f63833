/* One rank's micro-batches of a chunked run, planned window by window ahead of the stream
 * (plan_feed_internal.h). */
#include "stream/plan_feed_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "planner/plan_view_internal.h"
#include "stream/rank_members_internal.h"

typedef struct chunk {
  uint64_t first, end;        /* positions [first, end) of the rank sequence */
  uint32_t s0, s1;            /* the window's steps */
  stream_plan_batch *batches; /* end - first */
  stream_plan_sample *samples;
  size_t n_samples;
  char *grid_error; /* why its batches carry no latent grid (NULL: they do) */
  uint32_t patch[3];
  int status; /* a planning error: the chunk holds no batch */
  char *error;
  int pins;
  int done; /* every batch taken by the consumer: freed when unpinned */
  struct chunk *next;
} chunk;

struct stream_feed {
  stream_feed_args a;
  char **members;
  al_run_source_info *sources; /* a mixture's (a.n_sources), copied */
  al_run_info info;
  uint32_t K;
  int ahead;

  pthread_mutex_t mu;
  pthread_cond_t cv;  /* a chunk queued, released or the feed stopped */
  chunk *head, *tail; /* alive chunks in position order */
  int alive, max_alive;
  uint64_t planned;
  uint32_t next_s0; /* the next window the thread plans */
  int stop, failed, started;
  pthread_t thread;
};

static void chunk_free(chunk *c) {
  if (!c) return;
  free(c->batches);
  free(c->samples);
  free(c->grid_error);
  free(c->error);
  free(c);
}

/* The window of al_run.h that starts at s0 ends here: `window` steps, the last taking the tail
 * when less than two windows are left. */
static uint32_t window_end(const stream_feed *f, uint32_t s0) {
  uint32_t win = f->info.window, steps = f->info.steps;
  return steps - s0 < 2 * win ? steps : s0 + win;
}

/* The first step of the window holding `step`. */
static uint32_t window_start(const stream_feed *f, uint32_t step) {
  uint32_t win = f->info.window, n = f->info.steps / win;
  uint32_t last = n > 1 ? (n - 1) * win : 0;
  uint32_t s0 = step / win * win;
  return s0 > last ? last : s0;
}

/* The latent grid of every bucket of the plan (its geometry); the first bucket without one
 * sets *error and no batch is cropped (as a manifest's rank plan does). */
static int bucket_grids(const al_plan *p, size_t n_buckets, uint32_t *grids, char **error) {
  const al_latent_geom *g = plan_view_geometry(p);
  for (size_t b = 0; b < n_buckets; b++) {
    al_bucket_info bi = AL_BUCKET_INFO_INIT;
    plan_view_bucket(p, b, &bi);
    bi.id = (uint32_t)b;
    if (stream_grid_of(&bi, g, "plan", grids + 3 * b) != AL_OK && !*error) {
      if (!(*error = strdup(al_last_error()))) return al_set_error(AL_ENOMEM, "plan feed");
    }
  }
  if (*error) memset(grids, 0, 3 * n_buckets * sizeof *grids);
  return AL_OK;
}

/* This rank's micro-batches of steps [s0, s1) of plan p (which holds them) into chunk c, with
 * each step's totals over all ranks. */
static int extract(stream_feed *f, const al_plan *p, chunk *c) {
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  int rc = al_plan_get_info(p, &info);
  if (rc) return rc;
  uint32_t W = f->a.world, r = f->a.rank, K = f->K, ns = c->s1 - c->s0;
  const uint64_t *slot = plan_view_slots(p);
  uint64_t *tokens = calloc(info.buckets ? info.buckets : 1, sizeof *tokens);
  uint32_t *grids = calloc(info.buckets ? 3 * info.buckets : 1, sizeof *grids);
  size_t nb = (size_t)ns * K;
  c->batches = calloc(nb ? nb : 1, sizeof *c->batches);
  if (!tokens || !grids || !c->batches) rc = al_set_error(AL_ENOMEM, "plan feed");
  for (size_t b = 0; !rc && b < info.buckets; b++) {
    al_bucket_info bi = AL_BUCKET_INFO_INIT;
    plan_view_bucket(p, b, &bi);
    tokens[b] = bi.tokens;
  }
  if (!rc) rc = bucket_grids(p, info.buckets, grids, &c->grid_error);
  const al_latent_geom *g = plan_view_geometry(p);
  c->patch[0] = g->patch_t;
  c->patch[1] = g->patch_h;
  c->patch[2] = g->patch_w;
  size_t cap = 0;
  for (uint32_t s = 0; !rc && s < ns; s++) {
    uint64_t st_samples = 0, st_tokens = 0;
    for (uint64_t x = slot[(size_t)s * W]; x < slot[(size_t)(s + 1) * W]; x++) {
      plan_micro_view pm;
      plan_view_micro(p, x, &pm);
      if (pm.sp_rank || pm.padded) continue;
      st_samples += pm.n;
      st_tokens += (uint64_t)pm.n * tokens[pm.bucket];
    }
    uint64_t a = slot[(size_t)s * W + r], e = slot[(size_t)s * W + r + 1];
    if (e - a != K) {
      rc = al_set_error(AL_EFORMAT,
                        "step %" PRIu32 " rank %" PRIu32 ": %" PRIu64
                        " micro-batches, the run's K at world %" PRIu32 " is %" PRIu32,
                        c->s0 + s, r, e - a, W, K);
      break;
    }
    for (uint64_t x = a; !rc && x < e; x++) {
      plan_micro_view pm;
      plan_view_micro(p, x, &pm);
      if (pm.sp_rank || pm.sp_degree > 1) {
        rc = al_set_error(AL_EUNSUPPORTED,
                          "step %" PRIu32 " rank %" PRIu32
                          ": a sequence-parallel group in a run (the stream of a run takes "
                          "degree 1 only)",
                          c->s0 + s, r);
        break;
      }
      rc = grow_array((void **)&c->samples, &cap, c->n_samples + pm.n, sizeof *c->samples,
                      "the plan feed's samples");
      if (rc) break;
      stream_plan_batch *b = &c->batches[(size_t)s * K + (x - a)];
      b->step = c->s0 + s;
      b->micro = (uint32_t)(x - a);
      b->n_micro = K;
      b->bucket = pm.bucket;
      b->step_samples = st_samples;
      b->step_tokens = st_tokens;
      b->first = c->n_samples;
      b->n = pm.n;
      memcpy(b->grid, grids + 3 * pm.bucket, sizeof b->grid);
      al_bucket_info pbi = AL_BUCKET_INFO_INIT;
      plan_view_bucket(p, pm.bucket, &pbi);
      b->pixels[0] = pbi.width;
      b->pixels[1] = pbi.height;
      b->pixels[2] = pbi.frames;
      b->sp_degree = 1;
      b->sp_rank = 0;
      for (uint32_t i = 0; i < pm.n; i++) {
        stream_plan_sample *ps = &c->samples[c->n_samples + i];
        ps->sample = pm.samples[i];
        ps->tokens = tokens[pm.bucket];
        ps->padded = pm.padded != 0;
        ps->lacks = 0;
      }
      c->n_samples += pm.n;
    }
  }
  if (!rc && f->a.n_sources)
    rc = stream_check_mixture_samples(f->a.indexes, f->sources, f->a.n_sources, c->samples,
                                      c->n_samples, r, f->a.on_error,
                                      (const char *const *)f->members, f->a.n_members);
  else if (!rc && f->a.idx)
    rc = stream_check_samples(f->a.idx, c->samples, c->n_samples, r, f->a.on_error,
                              (const char *const *)f->members, f->a.n_members);
  free(tokens);
  free(grids);
  return rc;
}

/* Plans the window [s0, s1) into a new chunk: its batches, or its error. */
static chunk *plan_chunk(stream_feed *f, uint32_t s0, uint32_t s1) {
  chunk *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->s0 = s0;
  c->s1 = s1;
  c->first = (uint64_t)s0 * f->K;
  c->end = (uint64_t)s1 * f->K;
  al_plan *p = NULL;
  int rc = al_run_plan_steps(f->a.run, f->a.world, s0, s1, &p);
  if (!rc) rc = extract(f, p, c);
  al_plan_free(p);
  if (rc) {
    al_error_prefix(rc, "planning steps %" PRIu32 ":%" PRIu32 " of the run (rank %" PRIu32 ")", s0,
                    s1, f->a.rank);
    free(c->batches);
    free(c->samples);
    c->batches = NULL;
    c->samples = NULL;
    c->n_samples = 0;
    c->status = rc;
    c->error = strdup(al_last_error());
  }
  return c;
}

static void push(stream_feed *f, chunk *c) {
  if (f->tail)
    f->tail->next = c;
  else
    f->head = c;
  f->tail = c;
}

static void *feed_main(void *arg) {
  stream_feed *f = arg;
  pthread_mutex_lock(&f->mu);
  while (!f->stop && !f->failed && f->next_s0 < f->info.steps) {
    if (f->alive >= f->ahead + 1) {
      pthread_cond_wait(&f->cv, &f->mu);
      continue;
    }
    uint32_t s0 = f->next_s0, s1 = window_end(f, s0);
    f->alive++; /* the chunk being planned counts */
    if (f->alive > f->max_alive) f->max_alive = f->alive;
    pthread_mutex_unlock(&f->mu);
    chunk *c = plan_chunk(f, s0, s1);
    pthread_mutex_lock(&f->mu);
    if (!c) { /* out of memory for the chunk itself: a static error chunk is not possible */
      f->alive--;
      f->failed = 1;
      pthread_cond_broadcast(&f->cv);
      break;
    }
    f->planned++;
    f->next_s0 = s1;
    if (c->status) f->failed = 1;
    push(f, c);
    pthread_cond_broadcast(&f->cv);
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

int stream_feed_new(stream_feed **out, const stream_feed_args *a, uint32_t *micro,
                    al_run_info *info) {
  *out = NULL;
  if (!a->run) return al_set_error(AL_EINVAL, "plan feed: NULL run");
  if (a->ahead < 0 || a->ahead > 64)
    return al_set_error(AL_EINVAL, "plan_ahead %d: must be 0 (default 2) to 64", a->ahead);
  al_run_info ri = AL_RUN_INFO_INIT;
  int rc = al_run_get_info(a->run, &ri);
  if (rc) return rc;
  if (a->world < 1 || a->world > (1u << 20))
    return al_set_error(AL_EINVAL, "world %" PRIu32 ": must be 1..%u", a->world, 1u << 20);
  if (a->rank >= a->world)
    return al_set_error(AL_EINVAL, "rank %" PRIu32 " out of range: the world is %" PRIu32, a->rank,
                        a->world);
  uint64_t K = ((uint64_t)ri.micro_ref * ri.world_ref + a->world - 1) / a->world;
  if (!K || K > UINT32_MAX || !ri.window || !ri.steps)
    return al_set_error(AL_EINVAL,
                        "plan feed: a run of %" PRIu32 " steps, window %" PRIu32 ", K %" PRIu64
                        " at world %" PRIu32,
                        ri.steps, ri.window, K, a->world);
  stream_feed *f = calloc(1, sizeof *f);
  if (!f) return al_set_error(AL_ENOMEM, "plan feed");
  f->a = *a;
  f->info = ri;
  f->K = (uint32_t)K;
  f->ahead = a->ahead ? a->ahead : 2;
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  f->members = calloc(a->n_members ? a->n_members : 1, sizeof *f->members);
  rc = f->members ? AL_OK : al_set_error(AL_ENOMEM, "plan feed");
  for (size_t j = 0; !rc && j < a->n_members; j++)
    if (!(f->members[j] = strdup(a->members[j]))) rc = al_set_error(AL_ENOMEM, "plan feed");
  f->a.members = NULL;
  if (!rc && a->n_sources) {
    f->sources = malloc(a->n_sources * sizeof *f->sources);
    if (!f->sources)
      rc = al_set_error(AL_ENOMEM, "plan feed");
    else
      memcpy(f->sources, a->sources, a->n_sources * sizeof *f->sources);
  }
  f->a.sources = NULL;
  if (rc) {
    stream_feed_free(f);
    return rc;
  }
  *micro = f->K;
  *info = ri;
  *out = f;
  return AL_OK;
}

int stream_feed_begin(stream_feed *f, uint64_t from) {
  uint64_t n = (uint64_t)f->info.steps * f->K;
  if (from >= n) return AL_OK; /* nothing to plan: the stream is at its end */
  f->next_s0 = window_start(f, (uint32_t)(from / f->K));
  if (pthread_create(&f->thread, NULL, feed_main, f) != 0)
    return al_set_error(AL_ENOMEM, "cannot start the plan feed's thread");
  f->started = 1;
  return AL_OK;
}

/* The alive chunk holding pos, waiting for it; NULL with the status in *rc otherwise (lock
 * held). */
static chunk *find(stream_feed *f, uint64_t pos, int *rc) {
  for (;;) {
    if (f->stop) {
      *rc = al_set_error(AL_ESTATE, "stream closed");
      return NULL;
    }
    if (f->head && pos < f->head->first) {
      *rc = al_set_error(AL_ENOTFOUND, "position %" PRIu64 ": its chunk was released", pos);
      return NULL;
    }
    for (chunk *c = f->head; c; c = c->next) {
      if (c->status) {
        *rc = al_set_error(c->status, "%s", c->error ? c->error : "planning failed");
        return NULL;
      }
      if (pos >= c->first && pos < c->end) return c;
    }
    if (f->failed) {
      *rc = al_set_error(AL_ENOMEM, "plan feed: out of memory planning the run");
      return NULL;
    }
    if (!f->started || pos >= (uint64_t)f->info.steps * f->K) {
      *rc = al_set_error(AL_ERANGE, "position %" PRIu64 " is not planned by this feed", pos);
      return NULL;
    }
    pthread_cond_wait(&f->cv, &f->mu);
  }
}

int stream_feed_batch(stream_feed *f, uint64_t pos, const stream_plan_batch **pb,
                      const stream_plan_sample **samples, const char **grid_error) {
  int rc = AL_OK;
  pthread_mutex_lock(&f->mu);
  chunk *c = find(f, pos, &rc);
  if (c) {
    c->pins++;
    *pb = &c->batches[pos - c->first];
    *samples = c->samples;
    *grid_error = c->grid_error;
  }
  pthread_mutex_unlock(&f->mu);
  return rc;
}

/* Frees the done chunks at the head that nothing pins (lock held). */
static void reap(stream_feed *f) {
  while (f->head && f->head->done && !f->head->pins) {
    chunk *c = f->head;
    f->head = c->next;
    if (!f->head) f->tail = NULL;
    chunk_free(c);
    f->alive--;
    pthread_cond_broadcast(&f->cv);
  }
}

void stream_feed_unpin(stream_feed *f, uint64_t pos) {
  pthread_mutex_lock(&f->mu);
  for (chunk *c = f->head; c; c = c->next)
    if (pos >= c->first && pos < c->end && c->pins > 0) {
      c->pins--;
      break;
    }
  reap(f);
  pthread_mutex_unlock(&f->mu);
}

int stream_feed_chunk_of(stream_feed *f, uint64_t pos, stream_feed_chunk *out) {
  int rc = AL_OK;
  pthread_mutex_lock(&f->mu);
  chunk *c = find(f, pos, &rc);
  if (c) {
    out->first = c->first;
    out->end = c->end;
    out->batches = c->batches;
    out->samples = c->samples;
    out->grid_error = c->grid_error;
    memcpy(out->patch, c->patch, sizeof out->patch);
    c->pins++;
  }
  pthread_mutex_unlock(&f->mu);
  return rc;
}

void stream_feed_release(stream_feed *f, uint64_t pos) {
  pthread_mutex_lock(&f->mu);
  for (chunk *c = f->head; c && c->end <= pos; c = c->next) c->done = 1;
  reap(f);
  pthread_mutex_unlock(&f->mu);
}

void stream_feed_cancel(stream_feed *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  f->stop = 1;
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

void stream_feed_free(stream_feed *f) {
  if (!f) return;
  stream_feed_cancel(f);
  if (f->started) pthread_join(f->thread, NULL);
  while (f->head) {
    chunk *c = f->head;
    f->head = c->next;
    chunk_free(c);
  }
  for (size_t j = 0; f->members && j < f->a.n_members; j++) free(f->members[j]);
  free(f->members);
  free(f->sources);
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

void stream_feed_get_counts(stream_feed *f, stream_feed_counts *out) {
  pthread_mutex_lock(&f->mu);
  out->alive = f->alive;
  out->max_alive = f->max_alive;
  out->planned = f->planned;
  out->micro = f->K;
  pthread_mutex_unlock(&f->mu);
}
