/*
 * rank_members_internal.h - the requested members against the index for a rank's samples, as a
 * stream opens (al_stream_open: the manifest's rank plan at once; al_stream_open_run: each
 * chunk as the feed plans it). Internal to //stream.
 */
#ifndef AL_RANK_MEMBERS_INTERNAL_H
#define AL_RANK_MEMBERS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/al_index.h"
#include "stream/engine_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every sample of samples[0, n) holding every member of names[0, n_names): under
 * AL_STREAM_FAIL an error naming the first that do not (with how to plan or stream around
 * them); under AL_STREAM_SKIP_SAMPLE those marked `lacks` (the engine counts and skips them). */
int stream_check_samples(const al_index *idx, stream_plan_sample *samples, size_t n, uint32_t rank,
                         int on_error, const char *const *names, size_t n_names);

/* The requested members held by some sample of the index (else an error naming the member
 * and what the index has, whatever on_error), then stream_check_samples. */
/* The names of `names` that are stored members (all but AL_STREAM_MEMBER_PIXELS, decoded from
 * each sample's raw media member) into out (room for n); returns how many. */
size_t stream_stored_members(const char *const *names, size_t n, const char **out);

/* Checks the stored members only ("pixels" is left out). */
int stream_check_members(const al_index *idx, stream_plan_sample *samples, size_t n, uint32_t rank,
                         int on_error, const char *const *names, size_t n_names);

/* stream_check_members for a mixture's samples (draw ids): source by source, each at its
 * positions in its own index (idx[i], source i's draw base, passes and samples in src[i]); the
 * flags of samples lacking a member go back in place. Errors name the source. */
int stream_check_mixture_samples(const al_index *const *idx, const al_run_source_info *src,
                                 size_t n, stream_plan_sample *samples, size_t n_samples,
                                 uint32_t rank, int on_error, const char *const *names,
                                 size_t n_names);

/* The members a stream delivers: options.members, else options.ext, else the index's default
 * (its typed latent, else "latent"; the name is kept in dflt, room for cap, and o->ext set to
 * it). *names points at o->members or at *one. */
void stream_requested_members(const al_index *idx, al_stream_options *o, const char **one,
                              char *dflt, size_t cap, const char *const **names, size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* AL_RANK_MEMBERS_INTERNAL_H */
