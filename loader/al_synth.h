/*
 * al_synth.h - a synthetic WebDataset corpus that looks like a video DiT
 * training set: still images and clips mixed, several resolutions and aspect
 * ratios, Wan-2.1-sized latents.
 *
 * Each sample i has KEY.json ({"width","height","frames","fps","duration"};
 * images carry only width and height) and, unless payload is NONE, KEY.latent
 * whose size is a bf16 Wan-2.1 latent: 16 x T' x H/8 x W/8 x 2 bytes,
 * T' = 1 + (frames - 1) / 4, filled with cheap deterministic pseudo-random
 * bytes. Keys are "%06u-%08llu" (shard, global sample number); shards are
 * OUT/shard-000000.tar ... Sample i goes to shard i * shards / samples, so
 * shards differ in size by at most one sample.
 *
 * Determinism: the same options give byte-identical shards (fixed mtime,
 * uid/gid 0, no user names), whatever the thread count. A sample's shape is a
 * pure function of (seed, i): al_synth_sample gives it without writing
 * anything, so planner benchmarks can draw the same distribution in memory.
 *
 * Thread safety: al_synth_write is internally parallel and reentrant.
 * Errors: al_status return, message in al_last_error().
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_synth_options,
 * al_synth_sample_meta and al_synth_stats start with `size_t struct_size`, set with the struct's
 * AL_*_INIT macro; the library reads and writes only what fits in it (options: 0 = this header's
 * struct; a filled struct must carry its size). A size below AL_*_V1 or above the library's is
 * AL_EINVAL naming the struct and both sizes.
 */
#ifndef AL_SYNTH_H
#define AL_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum al_synth_payload {
  AL_SYNTH_LATENT = 0, /* KEY.json + KEY.latent */
  AL_SYNTH_NONE = 1    /* KEY.json only */
} al_synth_payload;

/* Zero means default for every field. */
typedef struct al_synth_options {
  size_t
      struct_size; /* sizeof(al_synth_options) (AL_SYNTH_OPTIONS_INIT); 0 = this header's struct */
  const char *out_dir; /* created if missing */
  uint64_t samples;    /* 0 = 2000 */
  uint32_t shards;     /* 0 = 8; capped at `samples` */
  uint64_t seed;
  al_synth_payload payload;
  int threads;  /* 0 = all online cores */
  int lz4_json; /* nonzero: write KEY.json.lz4 (an LZ4 frame) instead of KEY.json */
} al_synth_options;
#define AL_SYNTH_OPTIONS_INIT AL_STRUCT_INIT(al_synth_options)
#define AL_SYNTH_OPTIONS_V1 sizeof(al_synth_options)

typedef struct al_synth_sample_meta {
  size_t
      struct_size; /* sizeof(al_synth_sample_meta), set by the caller: AL_SYNTH_SAMPLE_META_INIT */
  uint32_t width, height, frames; /* multiples of 16; frames 1 for images */
  float fps;                      /* 0 for images */
  int is_image;
  uint64_t latent_bytes; /* 16 * T' * H/8 * W/8 * 2 */
} al_synth_sample_meta;
#define AL_SYNTH_SAMPLE_META_INIT AL_STRUCT_INIT(al_synth_sample_meta)
#define AL_SYNTH_SAMPLE_META_V1 sizeof(al_synth_sample_meta)

typedef struct al_synth_stats {
  size_t struct_size; /* sizeof(al_synth_stats), set by the caller: AL_SYNTH_STATS_INIT */
  uint64_t samples, images, videos;
  uint64_t bytes; /* tar bytes written */
  double seconds;
} al_synth_stats;
#define AL_SYNTH_STATS_INIT AL_STRUCT_INIT(al_synth_stats)
#define AL_SYNTH_STATS_V1 sizeof(al_synth_stats)

/* Shape of sample `i` for `seed` (pure function): AL_OK; AL_EINVAL for a NULL `out` or a bad
 * struct_size (nothing written). */
AL_API int al_synth_sample(uint64_t seed, uint64_t i, al_synth_sample_meta *out);

/* Writes the corpus. `stats` may be NULL. */
AL_API int al_synth_write(const al_synth_options *opts, al_synth_stats *stats);

#ifdef __cplusplus
}
#endif

#endif /* AL_SYNTH_H */
