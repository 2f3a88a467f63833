/*
 * al_report.h - what `adaptiveload inspect` and `plan` print: text
 * summaries, JSON, JSON lines and the SVG balance strip of manifests and
 * plans (a cost model's JSON, `fit --json`, is al_cost_print_json in
 * al_cost.h). Reading the numbers themselves is al_manifest.h's job;
 * this header only formats them.
 *
 * Ownership: nothing is retained; FILE streams stay the caller's.
 * Thread safety: each call reads its (immutable) arguments only; concurrent
 * calls writing to different streams are fine.
 * Errors: the int-returning calls return an al_status (AL_EIO with the path
 * for a failed write); the void ones write what they can.
 */
#ifndef AL_REPORT_H
#define AL_REPORT_H

#include <stdio.h>

#include "common/al_api.h"
#include "cost/al_cost.h"
#include "manifest/al_manifest.h"
#include "planner/al_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Human summary: config, counts, balance, predicted time, bucket table. */
AL_API void al_manifest_print_summary(FILE *out, const al_manifest *m, const char *name);
/* One JSON object (inspect --json). */
AL_API void al_manifest_print_json(FILE *out, const al_manifest *m);
/* One JSON object per micro-batch (inspect --jsonl). */
AL_API int al_manifest_print_jsonl(FILE *out, const al_manifest *m);
/* Heat strip of per-step per-rank predicted load (steps on x, ranks on y,
 * colour = rank cost / step max). Long manifests are binned to <= 1200 columns. */
AL_API int al_manifest_write_svg(const al_manifest *m, const char *path);
/* A mixture's manifest: each step's share of its units (the mixture's "by") per source as
 * stacked bars over the steps, the scheduled weights as lines (inspect --shares-svg). AL_EINVAL
 * for a plan of one index. */
AL_API int al_manifest_write_shares_svg(const al_manifest *m, const char *path);
/* The same JSON object / a short text summary for a plan not yet saved. */
AL_API void al_plan_print_json(FILE *out, const al_plan *p);
AL_API void al_plan_print_summary(FILE *out, const al_plan *p, const char *name);
/* Two manifests side by side (e.g. adaptive vs equal-token), with ratios. */
AL_API void al_plan_compare_print(FILE *out, const al_manifest *a, const al_manifest *b);

#ifdef __cplusplus
}
#endif

#endif /* AL_REPORT_H */
