/*
 * meta_internal.h - sample metadata from a KEY.json member: parse and validate.
 *
 * Why jansson: it is small, C89, widely packaged (Debian libjansson-dev), a
 * strict RFC 8259 parser, and its errors carry line and column, which go
 * straight into the rejected-sample reason. It can also refuse objects with
 * duplicate keys (JSON_REJECT_DUPLICATES), which would make width or frames
 * ambiguous.
 */
#ifndef AL_META_INTERNAL_H
#define AL_META_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_status.h"

/* JSON field names; aliases (frames: num_frames, nframes, nb_frames, frame_count, length;
 * fps: frame_rate, r_frame_rate, avg_frame_rate) are tried after, in that order. dims_optional: a
 * JSON without both width and height is accepted (no_dims set; the scan takes them from the latent
 * grid). */
typedef struct meta_fields {
  const char *width, *height, *frames, *fps, *duration;
  int dims_optional;
} meta_fields;

/* How frames was found (a sample with fps or duration but no frame-count field is kept and
 * warned about: it may be a video whose frame field has another name). META_FRAMES_LATENT:
 * set by the scan when the typed latent's T disagreed with the frames the JSON implied (1, or
 * duration x fps): frames then come from the grid, and json_frames keeps what the JSON gave. */
enum {
  META_FRAMES_FIELD = 0,
  META_FRAMES_IMAGE = 1,
  META_FRAMES_DURATION = 2,
  META_FRAMES_LATENT = 3
};

typedef struct meta_record {
  uint32_t width, height, frames;
  float fps;
  uint8_t no_dims;     /* width and height absent (dims_optional): both 0 */
  uint8_t frames_from; /* META_FRAMES_* */
  uint8_t has_fps;     /* an fps field was present */
  uint8_t has_duration;
  uint8_t json_from;    /* META_FRAMES_LATENT: what frames_from was (IMAGE or DURATION) */
  uint32_t json_frames; /* META_FRAMES_LATENT: the frames the JSON implied */
} meta_record;

/* Limits; samples beyond them are rejected. */
#define AL_META_MAX_SIDE 65536u
#define AL_META_MAX_FRAMES 100000u
#define AL_META_MAX_FPS 1000.0
#define AL_META_MAX_BYTES (16u << 20) /* largest KEY.json accepted */

/* Parses `len` bytes of JSON. AL_OK and *out filled, or AL_EFORMAT with the reason recorded
 * (al_set_error: "broken JSON: line 1 col 9: ...", "width must be >= 1 (got 0)"; the caller
 * locates it: the scan's rejected entry names the shard, the member and its offset). A raw
 * NUL byte anywhere is refused (RFC 8259 allows none), naming its byte. Numbers may be given
 * as strings holding a JSON number, the whole string ("81"; not "81x", "", " 81"); frame rates
 * also as "A/B" with B > 0 ("30000/1001", as ffprobe writes them). */
int meta_parse(const char *buf, size_t len, const meta_fields *f, meta_record *out);

/* Wan-2.1 token count T' * (H/16) * (W/16), T' = 1 + (frames - 1) / 4, in 64 bits. */
uint64_t meta_tokens(uint32_t width, uint32_t height, uint32_t frames);

#endif /* AL_META_INTERNAL_H */
