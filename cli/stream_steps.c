/* stream_steps.c - `stream --bench`'s per-step stall and fetch figures (stream_steps_internal.h).
 */
#include "cli/stream_steps_internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "common/grow_internal.h"

int stream_steps_add(stream_steps *t, const al_stream_batch *b) {
  if (!t->n || b->step != t->last_step) {
    if (t->n == t->cap) {
      size_t c;
      const char *what = "per-step stream figures";
      int rc = grow_capacity(t->cap, t->n + 1, sizeof *t->stall, what, &c);
      if (!rc) rc = grow_resize((void **)&t->stall, c, sizeof *t->stall, what);
      if (!rc) rc = grow_resize((void **)&t->fetched, c, sizeof *t->fetched, what);
      if (!rc) rc = grow_resize((void **)&t->requests, c, sizeof *t->requests, what);
      if (rc) return rc;
      t->cap = c;
    }
    t->stall[t->n] = 0;
    t->fetched[t->n] = t->requests[t->n] = 0;
    t->n++;
    t->last_step = b->step;
  }
  t->stall[t->n - 1] += b->stall_seconds;
  t->fetched[t->n - 1] += b->fetched_bytes;
  t->requests[t->n - 1] += b->requests;
  return AL_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* The index of the nearest-rank q-quantile of n sorted values (n > 0): rank ceil(q n). */
static size_t rank_of(size_t n, double q) {
  size_t r = (size_t)(q * (double)n);
  if ((double)r < q * (double)n) r++;
  return r ? r - 1 : 0;
}

int stream_steps_summarize(const stream_steps *t, stream_steps_summary *out) {
  memset(out, 0, sizeof *out);
  out->steps = t->n;
  if (!t->n) return AL_OK;
  double *stall = malloc(t->n * sizeof *stall);
  uint64_t *u = malloc(t->n * sizeof *u);
  if (!stall || !u) {
    free(stall);
    free(u);
    return al_set_error(AL_ENOMEM, "per-step stream figures of %zu steps", t->n);
  }
  memcpy(stall, t->stall, t->n * sizeof *stall);
  qsort(stall, t->n, sizeof *stall, cmp_double);
  out->stall_median = stall[rank_of(t->n, 0.5)];
  out->stall_p95 = stall[rank_of(t->n, 0.95)];
  out->stall_max = stall[t->n - 1];
  memcpy(u, t->fetched, t->n * sizeof *u);
  qsort(u, t->n, sizeof *u, cmp_u64);
  out->fetched_median = u[rank_of(t->n, 0.5)];
  out->fetched_max = u[t->n - 1];
  memcpy(u, t->requests, t->n * sizeof *u);
  qsort(u, t->n, sizeof *u, cmp_u64);
  out->requests_median = u[rank_of(t->n, 0.5)];
  out->requests_max = u[t->n - 1];
  free(stall);
  free(u);
  return AL_OK;
}

void stream_steps_free(stream_steps *t) {
  free(t->stall);
  free(t->fetched);
  free(t->requests);
  memset(t, 0, sizeof *t);
}
