/*
 * al_buckets.h - tokens per sample and shape buckets.
 *
 * Tokens: a sample of W x H pixels and F frames becomes, after the VAE and the
 * patchify, S = T'' * (H / (s * ph)) * (W / (s * pw)) tokens, where
 *   T'  = 1 + (F - 1) / st          (latent frames; images: F = 1, T' = 1)
 *   T'' = ceil(T' / pt)             (temporal patches)
 * with VAE strides st (time), s (space) and patch (pt, ph, pw). Divisions are
 * integer divisions. Wan 2.1 defaults: st = 4, s = 8, patch 1 x 2 x 2, so
 * 480x832 x 81 frames -> 21 * 30 * 52 = 32,760 tokens. All math is 64-bit.
 *
 * Buckets: a table of aspect groups (a nominal ratio such as 16:9 and a list of
 * W x H sizes) crossed with a list of frame counts. A sample goes to the bucket
 * that keeps most of it without upscaling (see planner/README.md):
 *   1. aspect group: the nominal ratio nearest to the sample's W/H (in log
 *      space; ties go to the group listed first);
 *   2. size: the largest area in that group with w <= W and h <= H (the sample
 *      is resized so the bucket fits inside it and then center-cropped; never
 *      upscaled);
 *   3. frames: the largest bucket frame count <= F (the first frames are kept)
 *      whose token count fits the memory cap; when even the fewest frames do
 *      not fit at that size, the next smaller size is tried.
 * A sample no bucket fits is rejected with a reason (al_reject_reason).
 *
 * Ownership: the caller owns an al_bucket_table (al_bucket_table_free).
 * Thread safety: a table is immutable after creation; share it freely.
 * Errors: al_status codes with al_last_error() naming file and line.
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_bucket_shape starts with
 * `size_t struct_size`, set with AL_BUCKET_SHAPE_INIT; al_bucket_table_get writes only what fits
 * in it, and a size of 0, below AL_BUCKET_SHAPE_V1 or above the library's is AL_EINVAL naming the
 * struct and both sizes. al_latent_geom and al_latent_grid are value types of a fixed layout
 * that never grows (al_latent_geom is embedded in al_plan_options and returned by value): they
 * carry no size.
 */
#ifndef AL_BUCKETS_H
#define AL_BUCKETS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/al_api.h"
#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Zero in any field means the Wan 2.1 default (4, 8, 1, 2, 2). */
typedef struct al_latent_geom {
  uint32_t vae_stride_t;
  uint32_t vae_stride_s;
  uint32_t patch_t;
  uint32_t patch_h;
  uint32_t patch_w;
} al_latent_geom;

/* Copies `in` (NULL = all defaults) with zero fields replaced by defaults. */
AL_API al_latent_geom al_latent_geom_resolve(const al_latent_geom *in);

/* Tokens of one sample; 0 when the sample is smaller than one patch or F = 0; UINT64_MAX when
 * the count does not fit in 64 bits (32-bit shapes under a unit geometry). */
AL_API uint64_t al_tokens(const al_latent_geom *g, uint32_t width, uint32_t height,
                          uint32_t frames);

typedef struct al_bucket_table al_bucket_table;

typedef struct al_bucket_shape {
  size_t struct_size; /* sizeof(al_bucket_shape), set by the caller: AL_BUCKET_SHAPE_INIT */
  uint32_t width, height, frames;
  const char *aspect; /* group name, e.g. "16:9"; points into the table */
} al_bucket_shape;
#define AL_BUCKET_SHAPE_INIT AL_STRUCT_INIT(al_bucket_shape)
#define AL_BUCKET_SHAPE_V1 sizeof(al_bucket_shape)

/* The default Wan-like table: aspect groups 1:1, 4:3, 3:2, 16:9, 21:9 and the
 * portrait 3:4, 2:3, 9:16, 9:21; five area levels (240x240, 240p, 360p, 480p,
 * 720p: 16:9 sizes 336x192, 416x240, 640x368, 832x480, 1280x720; the others
 * keep the level's area, rounded to multiples of 16); frames
 * {1, 17, 33, 49, 65, 81, 97, 121}. */
AL_API int al_bucket_table_default(al_bucket_table **out);

/* Text form (lines; '#' starts a comment):
 *     frames 1 17 33 49 65 81 97 121
 *     aspect 16:9 336x192 416x240 640x368 832x480 1280x720
 *     aspect 1:1 256x256 320x320
 * or JSON: {"frames": [1, 17], "aspects": [{"name": "16:9", "sizes": [[832, 480]]}]}.
 * The name of a group is its nominal ratio "W:H". `name` labels errors. */
AL_API int al_bucket_table_parse(al_bucket_table **out, const char *text, size_t len,
                                 const char *name);
AL_API int al_bucket_table_load(al_bucket_table **out, const char *path);
AL_API void al_bucket_table_free(al_bucket_table *t);

/* Buckets are numbered size-major: id = size * frame_count + frame. */
AL_API size_t al_bucket_table_count(const al_bucket_table *t);
AL_API int al_bucket_table_get(const al_bucket_table *t, size_t id, al_bucket_shape *out);
/* Checks that every size is a positive multiple of the patch footprint of `g`. */
AL_API int al_bucket_table_check(const al_bucket_table *t, const al_latent_geom *g);
/* Writes the table in its text form (round-trips through al_bucket_table_parse). */
AL_API int al_bucket_table_write(const al_bucket_table *t, FILE *out);

typedef enum al_reject_reason {
  AL_REJECT_NONE = 0,
  AL_REJECT_BAD_SHAPE = 1,      /* width, height or frames is 0 */
  AL_REJECT_TOO_SMALL = 2,      /* smaller than every size of its aspect group */
  AL_REJECT_TOO_FEW_FRAMES = 3, /* fewer frames than the smallest frame count */
  AL_REJECT_OVER_MEMORY = 4,    /* every fitting bucket has more tokens than the cap */
  AL_REJECT_LATENT_GRID = 5,    /* a latent sample: no bucket's latent grid fits inside its
                                   grid (crop only: never upscaled or padded) */
  AL_REJECT_COUNT = 6
} al_reject_reason;

AL_API const char *al_reject_reason_name(al_reject_reason r);

/* Puts a sample into a bucket. `max_tokens` is the per-sample token cap (the
 * memory limit M_mem; 0 = no cap). Returns AL_OK and *bucket, or
 * AL_ENOTFOUND with *reason set (no error message is recorded: rejections
 * are counted by the caller, not failures). */
AL_API int al_bucket_assign(const al_bucket_table *t, const al_latent_geom *g, uint64_t max_tokens,
                            uint32_t width, uint32_t height, uint32_t frames, uint32_t *bucket,
                            al_reject_reason *reason);

/* The latent grid of a sample stored as VAE latents: latent frames T, rows H, columns W. */
typedef struct al_latent_grid {
  uint32_t t, h, w;
} al_latent_grid;

/* al_bucket_assign for a sample whose latent grid is known (`grid`; NULL = unknown, the same
 * as al_bucket_assign): latents can only be cropped, so only buckets whose latent grid under
 * `g` -- T_b = 1 + (frames_b - 1) / st, h_b = height_b / s, w_b = width_b / s -- fits inside
 * the sample's (T_b <= T, h_b <= H, w_b <= W) may be chosen, by the same rules otherwise.
 * When the grid is the one the sample's width, height and frames give under `g`, the result
 * is al_bucket_assign's (the pixel rule already keeps the bucket inside). A sample that some
 * bucket fits in pixels but none in its grid is rejected with AL_REJECT_LATENT_GRID. */
AL_API int al_bucket_assign_grid(const al_bucket_table *t, const al_latent_geom *g,
                                 uint64_t max_tokens, uint32_t width, uint32_t height,
                                 uint32_t frames, const al_latent_grid *grid, uint32_t *bucket,
                                 al_reject_reason *reason);

#ifdef __cplusplus
}
#endif

#endif /* AL_BUCKETS_H */
