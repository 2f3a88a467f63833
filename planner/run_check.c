/* run_check.c - the whole-run proof of a chunked run (al_run_check, al_run.h): every window
 * planned in turn and thrown away, one bit per input position marking what the steps train.
 * A slice checks its own samples only (manifest_check.c); this is what proves the pass.
 *
 * Memory: input positions / 8 bytes (125 MB at 10^9) and one window's plan at a time. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "planner/al_run.h"
#include "planner/plan_internal.h"
#include "planner/run_internal.h"

static int bit_get(const uint64_t *b, uint64_t i) { return (int)(b[i / 64] >> (i % 64) & 1); }
static void bit_set(uint64_t *b, uint64_t i) { b[i / 64] |= UINT64_C(1) << (i % 64); }

/* The real samples of plan p (steps from p->first_step) into the bitmap; the first one seen
 * before, or past the input, is the error, named with its step and rank. */
static int mark_plan(const al_plan *p, uint64_t *seen, uint64_t n_input, al_run_check_info *c) {
  uint32_t W = p->world;
  for (uint32_t s = 0; s < p->steps; s++)
    for (uint32_t r = 0; r < W; r++) {
      size_t sl = (size_t)s * W + r;
      for (uint64_t x = p->slot[sl]; x < p->slot[sl + 1]; x++) {
        const plan_micro *m = &p->micro[x];
        c->micro_batches++;
        if (m->sp_rank) continue;
        for (uint32_t k = 0; k < m->n; k++) {
          uint64_t smp = p->mb[m->first + k];
          if (smp >= n_input)
            return al_set_error(AL_EFORMAT,
                                "check: step %" PRIu32 " rank %" PRIu32 ": sample %" PRIu64
                                " is past the input's %" PRIu64 " samples",
                                p->first_step + s, r, smp, n_input);
          if (m->padded) {
            c->padded++;
            continue;
          }
          if (bit_get(seen, smp))
            return al_set_error(AL_EFORMAT,
                                "check: step %" PRIu32 " rank %" PRIu32 ": sample %" PRIu64
                                " is planned a second time in the pass",
                                p->first_step + s, r, smp);
          bit_set(seen, smp);
          c->samples++;
        }
      }
    }
  c->steps += p->steps;
  return AL_OK;
}

/* Every sample of a planned class in some step, none of a rejected class in any. */
static int check_classes(const al_run *r, const uint64_t *seen) {
  for (size_t c = 0; c < r->n_cls; c++)
    for (uint64_t k = 0; k < r->cls[c].n; k++)
      if (!bit_get(seen, r->cls[c].list[k]))
        return al_set_error(AL_EFORMAT, "check: sample %" PRIu32 " is planned in no step",
                            r->cls[c].list[k]);
  for (size_t c = 0; c < r->n_rejected; c++)
    for (uint64_t k = 0; k < r->rejected[c].n; k++)
      if (bit_get(seen, r->rejected[c].list[k]))
        return al_set_error(AL_EFORMAT,
                            "check: sample %" PRIu32 " is planned though rejected (reason %" PRIu32
                            ")",
                            r->rejected[c].list[k], r->rejected[c].reason);
  return AL_OK;
}

int al_run_check(const al_run *r, uint32_t world, al_run_check_info *out) {
  if (!r || !out) return al_set_error(AL_EINVAL, "al_run_check: NULL argument");
  size_t size;
  int rc = struct_out_size(out, sizeof *out, AL_RUN_CHECK_INFO_V1, "al_run_check",
                           "al_run_check_info", &size);
  if (rc) return rc;
  al_run_check_info c;
  memset(&c, 0, sizeof c);
  uint64_t n_input = r->tmpl->index_samples;
  uint64_t *seen = calloc(n_input / 64 + 1, sizeof *seen);
  if (!seen) return al_set_error(AL_ENOMEM, "check: out of memory for %" PRIu64 " bits", n_input);
  /* Ranges of a window each (the last takes the tail, as the run's windows do), so no window is
   * planned twice. */
  uint32_t win = r->tmpl->window;
  for (uint32_t a = 0; a < r->steps && !rc;) {
    uint32_t b = r->steps - a < 2 * (uint64_t)win ? r->steps : a + win;
    al_plan *p = NULL;
    rc = al_run_plan_steps(r, world, a, b, &p);
    if (!rc) rc = mark_plan(p, seen, n_input, &c);
    al_plan_free(p);
    a = b;
  }
  if (!rc) rc = check_classes(r, seen);
  if (!rc && c.samples != r->pass_samples)
    rc = al_set_error(AL_EFORMAT,
                      "check: %" PRIu64 " samples in the steps, the pass plans %" PRIu64, c.samples,
                      r->pass_samples);
  free(seen);
  if (rc) return rc;
  struct_out(out, &c, size);
  return AL_OK;
}
