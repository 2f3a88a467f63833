/* bin_level_internal.h - the levelling swaps of the K > 1 schedule: schedule.c deals a
 * window's batches to its (step, rank) bins, K each, then calls plan_level_bins to trade
 * batches between bins until their summed costs are level (planner/README.md §5). Planner-
 * private; in //planner's hdrs only so that tests/planner/bin_level_test.cc can check that the
 * two searches below make the same swaps.
 *
 * Thread safety: none needed (the arrays are the caller's; no global state). */
#ifndef AL_BIN_LEVEL_INTERNAL_H
#define AL_BIN_LEVEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* nb bins of K batches each; batch x (0 .. nb K) costs cost[x] and sits in bin bin_of[x];
 * bin b's summed cost is load[b]. plan_level_bins updates bin_of and load. */
typedef struct plan_bins {
  size_t nb;
  uint32_t K;
  const double *cost; /* nb K */
  uint32_t *bin_of;   /* nb K, in/out */
  double *load;       /* nb, in/out */
  uint32_t *member;   /* nb K scratch */
  uint32_t *count;    /* nb scratch */
} plan_bins;

/* How the swaps are searched; both make the same swaps (tested):
 * PAIRS tries every pair of two bins' batches, K x K per pair of bins;
 * SORTED keeps every bin's batches sorted by cost and finds each distinct cost's best partner
 * by binary search, O(R log K) per pair of bins for R distinct costs, plus O(K) to keep two
 * bins sorted after a swap. It needs finite costs;
 * AUTO: PAIRS up to K = PLAN_LEVEL_PAIRS_MAX_K or when a cost is not finite, SORTED above. */
typedef enum plan_level_search {
  PLAN_LEVEL_AUTO = 0,
  PLAN_LEVEL_PAIRS = 1,
  PLAN_LEVEL_SORTED = 2
} plan_level_search;

#define PLAN_LEVEL_PAIRS_MAX_K 16u

/* The swaps (README §5; bin_level.c says which): at most 512 per call, at most 64 of them
 * reaching past the fullest and emptiest pair. Ties go to the lower bin, then the lower slot
 * of a bin's batches in `member` order: deterministic. AL_OK, or AL_ENOMEM (SORTED's sorted
 * copies), with bin_of and load then as the swaps so far left them. */
int plan_level_bins(plan_bins *g, plan_level_search how);

#ifdef __cplusplus
}
#endif

#endif /* AL_BIN_LEVEL_INTERNAL_H */
