/*
 * al_schedule.h - one rank's micro-batch schedule as flat arrays: what
 * Python's adaptiveload.BatchSampler reads through ctypes (plain integer
 * arguments, no structs), and what C users can use to drive their own reader.
 *
 * The schedule lists the rank's micro-batches in stream order (step by step,
 * micro by micro) - the same "rank sequence" that al_stream_state.position
 * counts in.
 *
 * Ownership: al_schedule_open copies what it needs; the manifest may be freed
 * afterwards. Thread safety: immutable once opened.
 */
#ifndef AL_SCHEDULE_H
#define AL_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"
#include "manifest/al_manifest.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_schedule al_schedule;

/* rank < 0: RANK from the environment (0 when unset and the world is 1);
 * world > 0 (or WORLD_SIZE when world == 0 and it is set) must equal the
 * manifest's world. */
AL_API int al_schedule_open(al_schedule **out, const al_manifest *m, int rank, int world);
/* Same, loading the manifest file itself. */
AL_API int al_schedule_open_path(al_schedule **out, const char *manifest_path, int rank, int world);
AL_API void al_schedule_free(al_schedule *s);

AL_API uint64_t al_schedule_batches(const al_schedule *s);
/* Samples over all its batches, padding included. */
AL_API uint64_t al_schedule_samples(const al_schedule *s);
AL_API uint32_t al_schedule_rank(const al_schedule *s);
AL_API uint32_t al_schedule_world(const al_schedule *s);
AL_API uint32_t al_schedule_epoch(const al_schedule *s);
AL_API uint64_t al_schedule_seed(const al_schedule *s);
AL_API uint64_t al_schedule_index_fingerprint(const al_schedule *s);
/* al_stream_manifest_fingerprint of the manifest the schedule was opened from. */
AL_API uint64_t al_schedule_manifest_fingerprint(const al_schedule *s);

/* Shape buckets of the manifest, in manifest order: the k-th of
 * al_schedule_bucket_count() has id *id (what batches carry), shape width x
 * height x frames (what its samples are resized/cropped to) and `tokens`
 * tokens per sample. Any output may be NULL. AL_ERANGE past the end. */
AL_API size_t al_schedule_bucket_count(const al_schedule *s);
AL_API int al_schedule_bucket(const al_schedule *s, size_t k, uint32_t *id, uint32_t *width,
                              uint32_t *height, uint32_t *frames, uint64_t *tokens);

/* Bulk export. Each array may be NULL; sizes: batch arrays hold
 * al_schedule_batches() entries, `first` one more, sample arrays
 * al_schedule_samples() entries. Batch i's samples are
 * samples[first[i] .. first[i+1]). */
AL_API int al_schedule_export(const al_schedule *s, uint64_t *first, uint32_t *step,
                              uint32_t *micro, uint32_t *n_micro, uint32_t *bucket,
                              uint64_t *step_samples, uint64_t *step_tokens, uint64_t *samples,
                              uint64_t *tokens, uint8_t *padded);

/* The sequence-parallel group of each batch (al_micro_ref): its degree and this rank's number
 * in the group, ranks [rank - sp_rank, rank - sp_rank + sp_degree); 1 and 0 without SP.
 * Each array may be NULL, else holds al_schedule_batches() entries. */
AL_API int al_schedule_export_sp(const al_schedule *s, uint32_t *sp_degree, uint32_t *sp_rank);

/* Resolves rank and world as al_stream_open and al_schedule_open do:
 * *rank from `rank` or RANK, checked against the manifest's world and against
 * `world` or WORLD_SIZE. Errors say which variable disagrees. */
AL_API int al_resolve_rank(const al_manifest *m, int rank, int world, uint32_t *out_rank);

#ifdef __cplusplus
}
#endif

#endif /* AL_SCHEDULE_H */
