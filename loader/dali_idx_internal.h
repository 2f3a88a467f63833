/*
 * dali_idx_internal.h - DALI's WebDataset index files (what NVIDIA DALI's
 * tools/wds2idx.py writes, format "v1.2"), one per shard:
 *
 *   v1.2 <number of samples>
 *   <ext> <data offset> <size> <member name> [<ext> <offset> <size> <name> ...]
 *
 * one line per sample, members in tar order, offsets of the member's data in
 * the tar file. Only plain (seekable) tar shards get one: DALI reads members at
 * file offsets, which compressed shards do not have. Only indexed samples are
 * listed, so DALI reads exactly what the planner planned from. The file is
 * DIR/<shard file name up to its first dot>.idx ("shard-000003.tar" ->
 * "shard-000003.idx"), as wds2idx names it.
 */
#ifndef AL_DALI_IDX_INTERNAL_H
#define AL_DALI_IDX_INTERNAL_H

#include "loader/al_index.h"

/* Writes DIR/<name>.idx for every seekable shard; creates DIR. Two shards
 * mapping to the same file name is an error (AL_EINVAL). */
int dali_idx_write(const al_index *idx, const char *dir);

#endif /* AL_DALI_IDX_INTERNAL_H */
