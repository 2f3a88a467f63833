/* al_index_struct_size: sizeof of the loader's public structs, for bindings' layout checks. */
#include "loader/al_index.h"
#include "loader/al_members.h"

size_t al_index_struct_size(int which) {
  switch (which) {
    case AL_INDEX_STRUCT_OPTIONS: return sizeof(al_index_options);
    case AL_INDEX_STRUCT_SHARD_INFO: return sizeof(al_shard_info);
    case AL_INDEX_STRUCT_MEMBER_INFO: return sizeof(al_member_info);
    case AL_INDEX_STRUCT_SAMPLE_INFO: return sizeof(al_sample_info);
    case AL_INDEX_STRUCT_MEMBER_TYPE: return sizeof(al_member_type);
    case AL_INDEX_STRUCT_REJECTED_INFO: return sizeof(al_rejected_info);
    case AL_INDEX_STRUCT_STATS: return sizeof(al_index_stats);
    case AL_INDEX_STRUCT_SHARD_IO: return sizeof(al_shard_io);
    case AL_INDEX_STRUCT_STORAGE: return sizeof(al_storage_options);
    case AL_INDEX_STRUCT_TENSOR_HEADER: return sizeof(al_tensor_header);
    case AL_INDEX_STRUCT_STORAGE_ORIGIN: return sizeof(al_storage_origin);
    default: return 0;
  }
}
