/*
 * adaln_fill_internal.h - device-side pseudo-random fills for kernel tests and benchmarks.
 * Counter-based (a hash of seed and element index): the same seed gives the same values on
 * any device and grid. Enqueued on `stream` (cudaStream_t); returns AL_OK, AL_EINVAL or
 * AL_ECUDA. Not part of the kernel API proper; thread-safe, allocates nothing.
 */
#ifndef AL_ADALN_FILL_INTERNAL_H
#define AL_ADALN_FILL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* n elements of dtype (al_dtype) ~ Normal(mean, std) (Box-Muller on hashed uniforms). */
int adaln_fill_normal(void *dst, int dtype, size_t n, uint64_t seed, float mean, float std,
                      void *stream);

#ifdef __cplusplus
}
#endif

#endif /* AL_ADALN_FILL_INTERNAL_H */
