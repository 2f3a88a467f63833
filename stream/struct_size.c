/* al_stream_struct_size: sizeof of the stream's public structs, for bindings' layout checks. */
#include "stream/al_stream.h"

size_t al_stream_struct_size(int which) {
  switch (which) {
    case AL_STREAM_STRUCT_OPTIONS: return sizeof(al_stream_options);
    case AL_STREAM_STRUCT_STATE: return sizeof(al_stream_state);
    case AL_STREAM_STRUCT_BATCH: return sizeof(al_stream_batch);
    case AL_STREAM_STRUCT_STATS: return sizeof(al_stream_stats);
    case AL_STREAM_STRUCT_MEMBER: return sizeof(al_stream_member);
    default: return 0;
  }
}
