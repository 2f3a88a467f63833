/*
 * al_members.h - the members of an index's samples: which member is the latent (the one rule
 * the index, the planner, the stream and Python share), the default payload member, and
 * whether the samples hold the members a run asks for (`stream --members`, `plan
 * --require-members`, `verify`).
 *
 * A requested member "EXT" is held by a sample that has KEY.EXT or KEY.EXT.lz4 (what the
 * stream reads, stream/index_source.c).
 *
 * Ownership: the index is only read; strings returned point into the index (valid while it
 * lives) or into caller buffers. Thread safety: every function only reads the index, so any
 * number may run at once on one index (not with al_index_remap_root or hand assembly).
 * Errors: al_status codes; al_last_error() names the member, the keys and their shards.
 */
#ifndef AL_MEMBERS_H
#define AL_MEMBERS_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"
#include "loader/al_index.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The latent rule: 1 when member extension `ext` names a latent ("latent", "latent.npy",
 * "latent_hr.npy", "latent.safetensors.lz4": it starts with "latent"), else 0 (NULL too). A
 * sample's latent is its first *typed* member (.npy / .safetensors, possibly .lz4) whose
 * extension this accepts: the index checks its grid against KEY.json, the planner plans it
 * crop-only, the stream crops it (al_index_latent_grid gives its position). */
AL_API int al_member_is_latent(const char *ext);

/* Whether requested member `ext` of `sample` (KEY.EXT, else KEY.EXT.lz4, as the stream resolves
 * it) is the sample's latent (al_index_latent_grid's member): 1 yes, 0 no (also when the sample
 * lacks it or has no typed latent); AL_ERANGE for a sample past the index, AL_EINVAL for NULL.
 * What the stream crops, for readers outside it (Python's IndexDataset). */
AL_API int al_index_member_is_latent(const al_index *idx, size_t sample, const char *ext);

/* The default payload member of the index: the extension of the typed latent member most
 * samples have (ties: the one met first), without a trailing ".lz4" (the stream falls back to
 * KEY.EXT.lz4), copied into out (cap bytes, NUL-terminated). AL_ENOTFOUND without a message
 * when no sample has a typed latent (callers then use "latent", the raw member of `synth`);
 * AL_ERANGE when cap is too small; AL_EINVAL for NULL arguments. */
AL_API int al_index_default_member(const al_index *idx, char *out, size_t cap);

/* Which of the samples hold every requested member. samples: n_samples index positions, or
 * NULL for every position of the index (n_samples ignored). For each checked sample i,
 * lacks[i] (NULL: not wanted) is 0 when it holds every member, else 1 + j for the first member
 * j it lacks; held[j] (NULL: not wanted; n_members entries) counts the checked samples holding
 * member j; *n_missing (may be NULL) counts the samples lacking at least one. AL_EINVAL for
 * NULL or empty member names, AL_ERANGE for a position past the index. */
AL_API int al_index_check_members(const al_index *idx, const char *const *members, size_t n_members,
                                  const uint64_t *samples, size_t n_samples, uint32_t *lacks,
                                  uint64_t *held, uint64_t *n_missing);

/* AL_OK when every requested member is held by at least one sample of the index; else
 * AL_ENOTFOUND: "member 'clip.npy' is in no sample of the index (N samples); the index has:
 * json, latent.npy, t5.npy, txt" (the first such member; the list is every extension the index
 * records, in first-seen order): a misspelt --members fails before anything is read. */
AL_API int al_index_members_known(const al_index *idx, const char *const *members,
                                  size_t n_members);

/* The members check as one call: AL_OK when every sample of `samples` (NULL: the whole index)
 * holds every member; else AL_ENOTFOUND whose message counts them and names the first few
 * (up to 5): "3 of 120 samples lack a requested member: key 'k1' (shard /d/s-0.tar) has no
 * 't5.npy', ...". *n_missing (may be NULL) gets the count either way. */
AL_API int al_index_require_members(const al_index *idx, const char *const *members,
                                    size_t n_members, const uint64_t *samples, size_t n_samples,
                                    uint64_t *n_missing);

/* A typed member's header (a NumPy .npy array, format 1.0-3.0, or a safetensors file of one
 * tensor), as the index and the stream read it: the dtype (NumPy name: "float16", "bfloat16",
 * ...), the shape, and where the array data lies. Filled by al_tensor_header_parse. */
#define AL_TENSOR_DTYPE_MAX 16 /* bytes of al_tensor_header.dtype, its NUL included */
typedef struct al_tensor_header {
  size_t struct_size; /* sizeof(al_tensor_header), set by the caller: AL_TENSOR_HEADER_INIT */
  char dtype[AL_TENSOR_DTYPE_MAX]; /* NumPy name, NUL-terminated */
  uint32_t ndim;
  uint64_t shape[AL_INDEX_MAX_DIMS]; /* shape[i] for i < ndim; 0 beyond */
  uint64_t data_offset;              /* bytes from the member's first byte to the array data */
  uint64_t data_bytes;               /* product(shape) x element size */
} al_tensor_header;
#define AL_TENSOR_HEADER_INIT AL_STRUCT_INIT(al_tensor_header)
#define AL_TENSOR_HEADER_V1 sizeof(al_tensor_header)

/* 1 when member extension `ext` names a typed member, whose header al_tensor_header_parse
 * reads ("latent.npy", "x.safetensors", "t5.npy.lz4"), else 0 (NULL too). */
AL_API int al_member_is_typed(const char *ext);

/* Parses the header at the start of a typed member named by extension `ext` ("latent.npy",
 * "t5.safetensors.lz4": the kind from its name; `buf` holds the first `have` decoded bytes of
 * a member of `member_size` decoded bytes). AL_OK with *out filled; AL_ERANGE with *need set
 * (no message) when more leading bytes are needed (at most 1 MiB ever is); AL_EFORMAT naming
 * the byte at fault for a bad header (the rules of the index's reader: little-endian C-order
 * arrays, the data ending the member, one tensor in a safetensors file); AL_EINVAL for an
 * extension of no typed kind, a NULL pointer or an unset struct_size. Thread-safe. */
AL_API int al_tensor_header_parse(const char *ext, const void *buf, size_t have,
                                  uint64_t member_size, al_tensor_header *out, size_t *need);

#ifdef __cplusplus
}
#endif

#endif /* AL_MEMBERS_H */
