/*
 * decode_internal.h - decode/'s functions shared with the rest of the library (not exported).
 */
#ifndef AL_DECODE_INTERNAL_H
#define AL_DECODE_INTERNAL_H

#include <stdint.h>

#include "decode/al_decode.h"

#ifdef __cplusplus
extern "C" {
#endif

/* al_decode_geometry into the library's own struct (no size rule). */
int decode_geometry(uint32_t width, uint32_t height, uint32_t bucket_w, uint32_t bucket_h,
                    al_decode_geom *out);

#ifdef __cplusplus
}
#endif

#endif /* AL_DECODE_INTERNAL_H */
