/* plan_members_internal.h - samples left out of a plan because they lack a required member
 * (al_plan_options.require_members): plan_members.c provides the marking, manifest/plan_index.c
 * (//manifest:plan_index, al_plan_build_index) finds the samples in the index. Planner-private
 * otherwise. */
#ifndef AL_PLAN_MEMBERS_INTERNAL_H
#define AL_PLAN_MEMBERS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/al_plan.h"

/* Marks index positions i with excl[i] != 0 (n = the plan's index samples) as lacking a
 * required member in the key table (AL_KEY_NO_MEMBER), taking them out of the rejection counts
 * they were planned under (plan_index.c plans them as zero-sized shapes, which no bucket takes:
 * AL_REJECT_BAD_SHAPE), so the summary counts only the plan's own rejections. */
void plan_mark_no_member(al_plan *p, const uint8_t *excl, size_t n);

#endif /* AL_PLAN_MEMBERS_INTERNAL_H */
