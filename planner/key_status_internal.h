/* key_status_internal.h - what a manifest's key table records per index position
 * (KeyChunk.status, proto/adaptiveload.proto; al_manifest_key_status returns it).
 *
 * The planner writes these codes (plan.c, plan_members.c, schedule.c, sp_schedule.c; the re-plan,
 * manifest/replan.c) and the manifest checks and reports them (manifest/manifest_check.c,
 * manifest_report.c): the one list both sides use. */
#ifndef AL_KEY_STATUS_INTERNAL_H
#define AL_KEY_STATUS_INTERNAL_H

/* 1..AL_REJECT_COUNT - 1 are al_reject_reason (planner/al_buckets.h). */
#define AL_KEY_PLANNED 0u    /* scheduled in the manifest's steps */
#define AL_KEY_DROPPED 16u   /* dropped by the last-step policy (--last-step drop) */
#define AL_KEY_CONSUMED 17u  /* re-plan: scheduled before first_step by the old plan */
#define AL_KEY_NO_MEMBER 18u /* left out: lacks a required member (plan --require-members) */
#define AL_KEY_ELSEWHERE 19u /* a slice of a chunked run: planned in steps outside the slice */
#define AL_KEY_UNDRAWN 20u   /* a mixture: a draw of a pass the run leaves unfinished */
#define AL_KEY_STATUS_MAX AL_KEY_UNDRAWN

#endif /* AL_KEY_STATUS_INTERNAL_H */
