// The struct-size queries bindings check their mirrors against: al_plan_struct_size,
// al_index_struct_size and al_stream_struct_size give sizeof of the struct each id names
// and 0 for an id past the last or below the first.
#include <cstddef>

#include <gtest/gtest.h>

extern "C" {
#include "loader/al_index.h"
#include "loader/al_members.h"
#include "planner/al_plan.h"
#include "planner/al_run.h"
#include "stream/al_stream.h"
}

TEST(StructSize, PlannerStructs) {
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_OPTIONS), sizeof(al_plan_options));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_INPUT), sizeof(al_plan_input));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_MANIFEST_INFO), sizeof(al_manifest_info));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_BUCKET_INFO), sizeof(al_bucket_info));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_MICRO_REF), sizeof(al_micro_ref));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_STEP_INFO), sizeof(al_step_info));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_REPLAN_OPTIONS), sizeof(al_replan_options));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_BUCKET_SHAPE), sizeof(al_bucket_shape));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_COST_MODEL), sizeof(al_cost_model));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_BENCH), sizeof(al_bench));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_RUN_INFO), sizeof(al_run_info));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_RUN_SOURCE), sizeof(al_run_source));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_RUN_MIX), sizeof(al_run_mix));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_RUN_SOURCE_INFO), sizeof(al_run_source_info));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_RUN_STAGE), sizeof(al_run_stage));
  EXPECT_EQ(al_plan_struct_size(AL_PLAN_STRUCT_RUN_STAGE + 1), 0u);
  EXPECT_EQ(al_plan_struct_size(-1), 0u);
}

TEST(StructSize, IndexStructs) {
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_OPTIONS), sizeof(al_index_options));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_SHARD_INFO), sizeof(al_shard_info));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_MEMBER_INFO), sizeof(al_member_info));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_SAMPLE_INFO), sizeof(al_sample_info));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_MEMBER_TYPE), sizeof(al_member_type));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_REJECTED_INFO), sizeof(al_rejected_info));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_STATS), sizeof(al_index_stats));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_SHARD_IO), sizeof(al_shard_io));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_STORAGE), sizeof(al_storage_options));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_TENSOR_HEADER), sizeof(al_tensor_header));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_STORAGE_ORIGIN), sizeof(al_storage_origin));
  EXPECT_EQ(al_index_struct_size(AL_INDEX_STRUCT_STORAGE_ORIGIN + 1), 0u);
  EXPECT_EQ(al_index_struct_size(-1), 0u);
}

TEST(StructSize, StreamStructs) {
  EXPECT_EQ(al_stream_struct_size(AL_STREAM_STRUCT_OPTIONS), sizeof(al_stream_options));
  EXPECT_EQ(al_stream_struct_size(AL_STREAM_STRUCT_STATE), sizeof(al_stream_state));
  EXPECT_EQ(al_stream_struct_size(AL_STREAM_STRUCT_BATCH), sizeof(al_stream_batch));
  EXPECT_EQ(al_stream_struct_size(AL_STREAM_STRUCT_STATS), sizeof(al_stream_stats));
  EXPECT_EQ(al_stream_struct_size(AL_STREAM_STRUCT_MEMBER), sizeof(al_stream_member));
  EXPECT_EQ(al_stream_struct_size(AL_STREAM_STRUCT_MEMBER + 1), 0u);
  EXPECT_EQ(al_stream_struct_size(-1), 0u);
}
