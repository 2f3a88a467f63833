/* al_plan_struct_size: sizeof of the planner's public structs, for bindings' layout checks. */
#include "planner/al_plan.h"
#include "planner/al_run.h"

size_t al_plan_struct_size(int which) {
  switch (which) {
    case AL_PLAN_STRUCT_OPTIONS: return sizeof(al_plan_options);
    case AL_PLAN_STRUCT_INPUT: return sizeof(al_plan_input);
    case AL_PLAN_STRUCT_MANIFEST_INFO: return sizeof(al_manifest_info);
    case AL_PLAN_STRUCT_BUCKET_INFO: return sizeof(al_bucket_info);
    case AL_PLAN_STRUCT_MICRO_REF: return sizeof(al_micro_ref);
    case AL_PLAN_STRUCT_STEP_INFO: return sizeof(al_step_info);
    case AL_PLAN_STRUCT_REPLAN_OPTIONS: return sizeof(al_replan_options);
    case AL_PLAN_STRUCT_BUCKET_SHAPE: return sizeof(al_bucket_shape);
    case AL_PLAN_STRUCT_COST_MODEL: return sizeof(al_cost_model);
    case AL_PLAN_STRUCT_BENCH: return sizeof(al_bench);
    case AL_PLAN_STRUCT_RUN_INFO: return sizeof(al_run_info);
    case AL_PLAN_STRUCT_RUN_SOURCE: return sizeof(al_run_source);
    case AL_PLAN_STRUCT_RUN_MIX: return sizeof(al_run_mix);
    case AL_PLAN_STRUCT_RUN_SOURCE_INFO: return sizeof(al_run_source_info);
    case AL_PLAN_STRUCT_RUN_STAGE: return sizeof(al_run_stage);
    default: return 0;
  }
}
