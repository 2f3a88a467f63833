/*
 * fidelity_internal.h - how much of each sample its bucket keeps: the crop report of
 * `adaptiveload verify`.
 *
 * A bucket crops (and, for pixel samples, resizes) a sample to its shape: the fraction of the
 * sample's native latent tokens the bucket keeps is
 *     kept / native,  kept = the bucket's tokens per sample,
 *     native = ceil(T / p_t) * (H / p_h) * (W / p_w)
 * over the sample's native latent grid (T, H, W): the grid of its typed latent member
 * (al_index_latent_grid) when it has one, else 1 + (frames - 1) / st, height / s, width / s
 * (al_tokens of its width, height and frames). The report groups the planned samples by the
 * aspect group of their bucket and by duration band, and lists the samples cut most.
 *
 * A sample is cut for one of two reasons (fid_why): its bucket is smaller than its grid in
 * space or has fewer frames than the table could give it (crop to bucket: aspect, size or
 * frame-count granularity), or it is longer than M_mem holds at its bucket's size, so the
 * memory cap chose fewer frames (time cut: tokens(bucket size, the sample's frames) > M_mem and
 * the bucket has fewer frames than the sample). Sequence parallelism would not cut the second.
 *
 * Duration bands (frames / fps seconds): image (1 frame), under 2 s, 2 to 5 s, 5 to 10 s,
 * 10 s and more, and video at an unknown fps (fps 0). A band's lower bound is inclusive.
 *
 * Internal to //manifest:fidelity (used by cli/: verify, inspect INDEX, plan); not exported.
 * Ownership: a fid_report owns its arrays (fidelity_free). Thread safety: the functions only
 * read their arguments; a report is not shared while being built. Errors: al_status codes,
 * message in al_last_error().
 */
#ifndef AL_FIDELITY_INTERNAL_H
#define AL_FIDELITY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_status.h"
#include "loader/al_index.h"
#include "planner/al_buckets.h"
#include "manifest/al_manifest.h"
#include "planner/al_plan.h"

typedef enum fid_band {
  FID_IMAGE = 0,
  FID_UNDER_2S = 1,
  FID_2S_5S = 2,
  FID_5S_10S = 3,
  FID_10S_UP = 4,
  FID_FPS_UNKNOWN = 5,
  FID_BANDS = 6
} fid_band;

/* "image", "<2s", "2-5s", "5-10s", ">=10s", "fps unknown". */
const char *fidelity_band_name(fid_band b);
fid_band fidelity_band(uint32_t frames, float fps);

typedef enum fid_why {
  FID_KEPT = 0,     /* nothing cut */
  FID_CROP = 1,     /* crop to bucket (aspect/size) */
  FID_TIME_CUT = 2, /* longer than M_mem (time cut) */
  FID_WHYS = 3
} fid_why;

/* "kept", "crop to bucket (aspect/size)", "longer than M_mem (time cut)". */
const char *fidelity_why_name(fid_why w);

/* One (aspect group, duration band) cell. */
typedef struct fid_group {
  char aspect[24]; /* the bucket's group in the table ("16:9"), or its "WxH" when none */
  fid_band band;
  uint64_t samples;
  uint64_t native_tokens, kept_tokens; /* sums over the cell */
  double min_fraction;                 /* of one sample */
  double sum_fraction;                 /* mean = sum_fraction / samples */
} fid_group;

/* One sample among those cut most. */
typedef struct fid_cut {
  uint64_t sample; /* index position */
  uint32_t width, height, frames;
  uint32_t bucket_width, bucket_height, bucket_frames;
  uint64_t native_tokens, kept_tokens;
  double fraction;
  fid_why why;
} fid_cut;

typedef struct fid_report {
  uint64_t samples;                    /* samples given a bucket */
  uint64_t native_tokens, kept_tokens; /* their sums */
  uint64_t unplanned;                  /* samples without a bucket (rejected, dropped, ...) */
  fid_group *groups; /* cells holding samples: the table's aspect groups in its order (then
                        sizes it lacks, as "WxH"), each by band */
  size_t n_groups;
  fid_cut *cut; /* fraction ascending, then index position; at most the n_cut asked */
  size_t n_cut;
  uint64_t cut_by[FID_WHYS];  /* samples by why (cut_by[FID_KEPT]: nothing cut) */
  uint64_t lost_by[FID_WHYS]; /* native tokens not kept, by why */
} fid_report;

/* The crop of every sample the manifest schedules (padding repeats not counted again), under
 * the manifest's buckets, geometry and M_mem (times its largest allowed SP degree: a time cut is
 * a sample longer than that). `names` (NULL = the default table) gives each bucket
 * size its aspect group. The manifest must be planned from `idx` (the caller checks the
 * fingerprint); AL_EINVAL when its index sample count differs. `n_cut`: samples listed. */
int fidelity_from_manifest(fid_report *out, const al_index *idx, const al_manifest *m,
                           const al_bucket_table *names, size_t n_cut);

/* fidelity_from_manifest of the manifest `p` writes, read from the plan in memory (no
 * manifest load: a 10M-sample plan's manifest takes seconds and hundreds of MB to read back). */
int fidelity_from_plan(fid_report *out, const al_index *idx, const al_plan *p,
                       const al_bucket_table *names, size_t n_cut);

/* The crop of every sample under a bucket table (NULL = the default), geometry `g` (NULL =
 * defaults) and per-sample token cap `mem_tokens` (0 = AL_PLAN_DEFAULT_MEM_TOKENS; with SP
 * degrees, M_mem x the largest), each
 * sample assigned as the planner assigns it (al_bucket_assign_grid). */
int fidelity_from_table(fid_report *out, const al_index *idx, const al_bucket_table *t,
                        const al_latent_geom *g, uint64_t mem_tokens, size_t n_cut);

void fidelity_free(fid_report *r);

#endif /* AL_FIDELITY_INTERNAL_H */
