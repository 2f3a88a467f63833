/* Samples left out for lacking a required member: their key-table status (plan_members_internal.h).
 */
#include "planner/key_status_internal.h"
#include "planner/plan_internal.h"
#include "planner/plan_members_internal.h"

void plan_mark_no_member(al_plan *p, const uint8_t *excl, size_t n) {
  if (!p || !excl || !p->status || n != p->index_samples) return;
  for (size_t i = 0; i < n; i++) {
    if (!excl[i]) continue;
    uint8_t r = p->status[i];
    if (r >= 1 && r < AL_REJECT_COUNT && p->rejected[r]) {
      p->rejected[r]--;
      p->rejected[AL_REJECT_NONE]--;
    }
    p->status[i] = AL_KEY_NO_MEMBER;
  }
  /* The first rejected sample of each reason, among those still rejected. */
  for (int r = 1; r < AL_REJECT_COUNT; r++) p->first_rejected[r] = UINT64_MAX;
  for (size_t i = n; i-- > 0;) {
    uint8_t r = p->status[i];
    if (r >= 1 && r < AL_REJECT_COUNT) p->first_rejected[r] = i;
  }
}
