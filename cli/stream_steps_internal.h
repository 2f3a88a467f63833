/* stream_steps_internal.h - `stream --bench`'s per-step costs: the batches of one step of
 * the rank (its n_micro micro-batches, consecutive in the rank's sequence) added up, then
 * summarised over the steps read.
 *
 * Ownership: the caller owns the struct (zero it first, stream_steps_free at the end).
 * Not thread-safe: one reading loop adds to it. */
#ifndef AL_CLI_STREAM_STEPS_INTERNAL_H
#define AL_CLI_STREAM_STEPS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "stream/al_stream.h"

typedef struct stream_steps {
  double *stall;      /* per step: the stall_seconds of its batches, summed */
  uint64_t *fetched;  /* per step: fetched_bytes summed */
  uint64_t *requests; /* per step: requests summed */
  size_t n, cap;
  uint32_t last_step; /* the step of steps[n - 1] */
} stream_steps;

/* Over the steps read (a step cut short by --max-batches counts with the batches read).
 * Medians and the 95th percentile are nearest-rank: the value at rank ceil(q n) of the
 * sorted steps, so each is a step's own value. All 0 when no step was read. */
typedef struct stream_steps_summary {
  size_t steps;
  double stall_median, stall_p95, stall_max;
  uint64_t fetched_median, fetched_max;
  uint64_t requests_median, requests_max;
} stream_steps_summary;

/* Adds batch b to its step: a batch of another step than the previous one starts a step.
 * AL_OK, or AL_ENOMEM (message set). */
int stream_steps_add(stream_steps *t, const al_stream_batch *b);

/* AL_OK, or AL_ENOMEM (message set). */
int stream_steps_summarize(const stream_steps *t, stream_steps_summary *out);

void stream_steps_free(stream_steps *t);

#endif /* AL_CLI_STREAM_STEPS_INTERNAL_H */
