/* al_plan_constant: the integer constants of the planner's, the cost model's and the manifest's
 * public headers by name (common/constant_table_internal.h). Here, in the manifest's library,
 * because it is the one that sees all three headers (cost/ <- planner/ <- manifest/). The
 * floating-point defaults (AL_COST_FLOOR_SHARPNESS, AL_COST_DEFAULT_SP_*,
 * AL_REPLAN_TOKEN_TOLERANCE) are not integers and not in it. */
#include "common/constant_table_internal.h"
#include "cost/al_cost.h"
#include "manifest/al_manifest.h"
#include "planner/al_buckets.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"

static const constant_entry table[] = {
    /* al_plan.h */
    CONSTANT(AL_POLICY_ADAPTIVE),
    CONSTANT(AL_POLICY_EQUAL_TOKEN),
    CONSTANT(AL_POLICY_ADAPTIVE_UNBALANCED),
    CONSTANT(AL_LAST_PAD),
    CONSTANT(AL_LAST_DROP),
    CONSTANT(AL_SYNC_AUTO),
    CONSTANT(AL_SYNC_STEP),
    CONSTANT(AL_SYNC_MICRO),
    CONSTANT(AL_PLAN_DEFAULT_MEM_TOKENS),
    CONSTANT(AL_PLAN_DEFAULT_WINDOW),
    CONSTANT(AL_PLAN_MAX_MEM_TOKENS),
    CONSTANT(AL_PLAN_MAX_STEP_MICRO),
    CONSTANT(AL_PLAN_STRUCT_OPTIONS),
    CONSTANT(AL_PLAN_STRUCT_INPUT),
    CONSTANT(AL_PLAN_STRUCT_MANIFEST_INFO),
    CONSTANT(AL_PLAN_STRUCT_BUCKET_INFO),
    CONSTANT(AL_PLAN_STRUCT_MICRO_REF),
    CONSTANT(AL_PLAN_STRUCT_STEP_INFO),
    CONSTANT(AL_PLAN_STRUCT_REPLAN_OPTIONS),
    CONSTANT(AL_PLAN_STRUCT_BUCKET_SHAPE),
    CONSTANT(AL_PLAN_STRUCT_COST_MODEL),
    CONSTANT(AL_PLAN_STRUCT_BENCH),
    CONSTANT(AL_PLAN_STRUCT_RUN_INFO),
    CONSTANT(AL_PLAN_STRUCT_RUN_SOURCE),
    CONSTANT(AL_PLAN_STRUCT_RUN_MIX),
    CONSTANT(AL_PLAN_STRUCT_RUN_SOURCE_INFO),
    CONSTANT(AL_PLAN_STRUCT_RUN_STAGE),
    CONSTANT(AL_PLAN_MAX_SP_DEGREES),
    /* al_run.h */
    CONSTANT(AL_MIX_TOKENS),
    CONSTANT(AL_MIX_SAMPLES),
    CONSTANT(AL_MIX_COMPUTE),
    CONSTANT(AL_EXHAUST_REPEAT),
    CONSTANT(AL_EXHAUST_STOP),
    CONSTANT(AL_RUN_NAME_MAX),
    CONSTANT(AL_RUN_MAX_SOURCES),
    CONSTANT(AL_RUN_MAX_STAGES),
    /* al_manifest.h */
    CONSTANT(AL_MANIFEST_MAX_BYTES_DEFAULT),
    /* al_buckets.h */
    CONSTANT(AL_REJECT_NONE),
    CONSTANT(AL_REJECT_BAD_SHAPE),
    CONSTANT(AL_REJECT_TOO_SMALL),
    CONSTANT(AL_REJECT_TOO_FEW_FRAMES),
    CONSTANT(AL_REJECT_OVER_MEMORY),
    CONSTANT(AL_REJECT_LATENT_GRID),
    CONSTANT(AL_REJECT_COUNT),
    /* al_cost.h */
    CONSTANT(AL_COST_AUTO),
    CONSTANT(AL_COST_POWER),
    CONSTANT(AL_COST_POLY2),
    CONSTANT(AL_COST_FLOOR),
    CONSTANT(AL_COST_BANDS),
    CONSTANT(AL_COST_MAX_SP_FITS),
    CONSTANT(AL_BENCH_MIN_ROWS),
    CONSTANT(AL_LOSS_REL),
    CONSTANT(AL_LOSS_ABS),
    CONSTANT(AL_COST_DEFAULT_MIN_TOKENS),
};

int al_plan_constant(const char *name, int64_t *value) {
  return constant_lookup(table, sizeof table / sizeof table[0], name, value, "al_plan_constant",
                         "planner/al_plan.h, planner/al_run.h, planner/al_buckets.h, cost/al_cost.h, manifest/al_manifest.h");
}
