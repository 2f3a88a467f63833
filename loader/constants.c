/* al_index_constant: the integer constants of the loader's public headers by name
 * (common/constant_table_internal.h). */
#include "common/constant_table_internal.h"
#include "loader/al_check.h"
#include "loader/al_index.h"
#include "loader/al_members.h"
#include "loader/al_synth.h"

static const constant_entry table[] = {
    /* al_index.h */
    CONSTANT(AL_INDEX_KEY_MAX),
    CONSTANT(AL_INDEX_EXT_MAX),
    CONSTANT(AL_INDEX_MAX_MEMBER_DEFAULT),
    CONSTANT(AL_INDEX_MAX_DIMS),
    CONSTANT(AL_SHARD_LOCAL),
    CONSTANT(AL_SHARD_HTTP),
    CONSTANT(AL_SHARD_S3),
    CONSTANT(AL_S3_ADDRESSING_DEFAULT),
    CONSTANT(AL_S3_ADDRESSING_PATH),
    CONSTANT(AL_S3_ADDRESSING_VIRTUAL),
    CONSTANT(AL_INDEX_STRUCT_OPTIONS),
    CONSTANT(AL_INDEX_STRUCT_SHARD_INFO),
    CONSTANT(AL_INDEX_STRUCT_MEMBER_INFO),
    CONSTANT(AL_INDEX_STRUCT_SAMPLE_INFO),
    CONSTANT(AL_INDEX_STRUCT_MEMBER_TYPE),
    CONSTANT(AL_INDEX_STRUCT_REJECTED_INFO),
    CONSTANT(AL_INDEX_STRUCT_STATS),
    CONSTANT(AL_INDEX_STRUCT_SHARD_IO),
    CONSTANT(AL_INDEX_STRUCT_STORAGE),
    CONSTANT(AL_INDEX_STRUCT_TENSOR_HEADER),
    CONSTANT(AL_INDEX_STRUCT_STORAGE_ORIGIN),
    /* al_members.h */
    CONSTANT(AL_TENSOR_DTYPE_MAX),
    /* al_synth.h */
    CONSTANT(AL_SYNTH_LATENT),
    CONSTANT(AL_SYNTH_NONE),
};

int al_index_constant(const char *name, int64_t *value) {
  return constant_lookup(table, sizeof table / sizeof table[0], name, value, "al_index_constant",
                         "loader/al_index.h, al_check.h, al_members.h, al_synth.h");
}
