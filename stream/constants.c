/* al_stream_constant: the integer constants of the stream's public headers by name
 * (common/constant_table_internal.h). */
#include "common/constant_table_internal.h"
#include "stream/al_schedule.h"
#include "stream/al_stream.h"

static const constant_entry table[] = {
    CONSTANT(AL_STREAM_FAIL),
    CONSTANT(AL_STREAM_SKIP_SAMPLE),
    CONSTANT(AL_STREAM_STATE_VERSION),
    CONSTANT(AL_STREAM_MAX_MEMBER_DEFAULT),
    CONSTANT(AL_STREAM_MAX_SAMPLE_DEFAULT),
    CONSTANT(AL_STREAM_MAX_DIMS),
    CONSTANT(AL_STREAM_MAX_MEMBERS),
    CONSTANT(AL_STREAM_STRUCT_OPTIONS),
    CONSTANT(AL_STREAM_STRUCT_STATE),
    CONSTANT(AL_STREAM_STRUCT_BATCH),
    CONSTANT(AL_STREAM_STRUCT_STATS),
    CONSTANT(AL_STREAM_STRUCT_MEMBER),
};

int al_stream_constant(const char *name, int64_t *value) {
  return constant_lookup(table, sizeof table / sizeof table[0], name, value, "al_stream_constant",
                         "stream/al_stream.h, al_schedule.h");
}
