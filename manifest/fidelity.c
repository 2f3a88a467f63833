/* The crop report: the fraction of native latent tokens each sample's bucket keeps
 * (fidelity_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/al_plan.h"
#include "manifest/fidelity_internal.h"
#include "planner/plan_view_internal.h"

#define NO_BUCKET UINT32_MAX

const char *fidelity_band_name(fid_band b) {
  static const char *const names[FID_BANDS] = {"image", "<2s",   "2-5s",
                                               "5-10s", ">=10s", "fps unknown"};
  return (unsigned)b < FID_BANDS ? names[b] : "?";
}

fid_band fidelity_band(uint32_t frames, float fps) {
  if (frames <= 1) return FID_IMAGE;
  if (!(fps > 0)) return FID_FPS_UNKNOWN;
  double s = (double)frames / fps;
  return s < 2 ? FID_UNDER_2S : s < 5 ? FID_2S_5S : s < 10 ? FID_5S_10S : FID_10S_UP;
}

const char *fidelity_why_name(fid_why w) {
  static const char *const names[FID_WHYS] = {"kept", "crop to bucket (aspect/size)",
                                              "longer than M_mem (time cut)"};
  return (unsigned)w < FID_WHYS ? names[w] : "?";
}

/* A bucket as the report needs it: shape, tokens and its aspect group (an id into the
 * distinct names). */
typedef struct fid_bucket {
  uint32_t width, height, frames;
  uint64_t tokens;
  size_t aspect;
} fid_bucket;

typedef struct fid_aspects {
  char (*name)[24];
  size_t n;
} fid_aspects;

/* The id of aspect name `s` among the distinct names (added when new): 0 or -1. */
static int aspect_id(fid_aspects *a, const char *s, size_t *id) {
  for (size_t i = 0; i < a->n; i++)
    if (!strcmp(a->name[i], s)) {
      *id = i;
      return 0;
    }
  char(*v)[24] = realloc(a->name, (a->n + 1) * sizeof *v);
  if (!v) return -1;
  a->name = v;
  snprintf(v[a->n], sizeof v[a->n], "%s", s);
  *id = a->n++;
  return 0;
}

/* The sample's native latent frames (its typed latent's T, else 1 + (frames - 1) / st) and
 * tokens under `g`: its typed latent's grid, else its pixels' (al_tokens). */
static uint64_t native_tokens(const al_index *idx, size_t i, const al_sample_info *si,
                              const al_latent_geom *g, uint32_t *t_out) {
  uint32_t t, h, w;
  if (al_index_latent_grid(idx, i, &t, &h, &w, NULL) != AL_OK) {
    *t_out = si->frames ? 1 + (si->frames - 1) / g->vae_stride_t : 0;
    return al_tokens(g, si->width, si->height, si->frames);
  }
  *t_out = t;
  uint64_t tt = ((uint64_t)t + g->patch_t - 1) / g->patch_t;
  return tt * (h / g->patch_h) * (w / g->patch_w);
}

/* Why a sample of native latent frames t lost tokens under bucket b: a time cut when the
 * bucket has fewer latent frames and the sample's whole length at the bucket's size exceeds
 * mem_tokens (0 = no cap). */
static fid_why cut_why(const fid_bucket *b, uint32_t t, uint64_t native, const al_latent_geom *g,
                       uint64_t mem_tokens) {
  if (b->tokens >= native) return FID_KEPT;
  uint32_t tb = 1 + (b->frames - 1) / g->vae_stride_t;
  uint64_t tt = ((uint64_t)t + g->patch_t - 1) / g->patch_t;
  uint64_t whole = tt * (b->height / g->vae_stride_s / g->patch_h) *
                   (b->width / g->vae_stride_s / g->patch_w);
  return tb < t && mem_tokens && whole > mem_tokens ? FID_TIME_CUT : FID_CROP;
}

/* Keeps the n_cut samples of lowest fraction (then lowest position), ascending. */
static void cut_add(fid_report *r, size_t n_cut, const fid_cut *c) {
  size_t k = r->n_cut;
  if (k == n_cut) {
    if (!k || c->fraction >= r->cut[k - 1].fraction) return;
    k--; /* the last one goes */
  } else {
    r->n_cut++;
  }
  while (k > 0 && r->cut[k - 1].fraction > c->fraction) {
    r->cut[k] = r->cut[k - 1];
    k--;
  }
  r->cut[k] = *c;
}

/* The cells that hold samples, in order (aspect group, then band), into r->groups: 0 or -1. */
static int keep_groups(fid_report *r, fid_group *cells, size_t n_cells) {
  size_t n = 0;
  for (size_t i = 0; i < n_cells; i++) n += cells[i].samples > 0;
  r->groups = calloc(n ? n : 1, sizeof *r->groups);
  if (!r->groups) return -1;
  for (size_t i = 0; i < n_cells; i++)
    if (cells[i].samples) r->groups[r->n_groups++] = cells[i];
  return 0;
}

/* Sample i under bucket b into its cell and the cut list. */
static int add_sample(fid_report *r, fid_group *cells, const al_index *idx, size_t i,
                      const fid_bucket *b, const al_latent_geom *g, uint64_t mem_tokens,
                      size_t n_cut) {
  al_sample_info si = AL_SAMPLE_INFO_INIT;
  int rc = al_index_sample(idx, i, &si);
  if (rc) return rc;
  uint32_t t = 0;
  uint64_t native = native_tokens(idx, i, &si, g, &t);
  fid_why why = cut_why(b, t, native, g, mem_tokens);
  r->cut_by[why]++;
  r->lost_by[why] += native > b->tokens ? native - b->tokens : 0;
  double f = native ? (double)b->tokens / (double)native : 1.0;
  fid_group *c = &cells[b->aspect * FID_BANDS + fidelity_band(si.frames, si.fps)];
  if (!c->samples || f < c->min_fraction) c->min_fraction = f;
  c->samples++;
  c->native_tokens += native;
  c->kept_tokens += b->tokens;
  c->sum_fraction += f;
  r->samples++;
  r->native_tokens += native;
  r->kept_tokens += b->tokens;
  fid_cut cut = {i,         si.width, si.height, si.frames, b->width, b->height,
                 b->frames, native,   b->tokens, f,         why};
  cut_add(r, n_cut, &cut);
  return AL_OK;
}

/* The report over every sample with a bucket (bucket_of[i] != NO_BUCKET). */
static int accumulate(fid_report *r, const al_index *idx, const al_latent_geom *g,
                      uint64_t mem_tokens, const fid_bucket *b, const fid_aspects *names,
                      const uint32_t *bucket_of, size_t n_cut) {
  size_t n_cells = names->n * FID_BANDS;
  fid_group *cells = calloc(n_cells ? n_cells : 1, sizeof *cells);
  r->cut = calloc(n_cut ? n_cut : 1, sizeof *r->cut);
  int rc = cells && r->cut ? AL_OK : al_set_error(AL_ENOMEM, "crop report: out of memory");
  for (size_t k = 0; k < n_cells && !rc; k++) {
    snprintf(cells[k].aspect, sizeof cells[k].aspect, "%s", names->name[k / FID_BANDS]);
    cells[k].band = (fid_band)(k % FID_BANDS);
  }
  size_t n = al_index_sample_count(idx);
  for (size_t i = 0; i < n && !rc; i++) {
    if (bucket_of[i] == NO_BUCKET)
      r->unplanned++;
    else
      rc = add_sample(r, cells, idx, i, &b[bucket_of[i]], g, mem_tokens, n_cut);
  }
  if (!rc && keep_groups(r, cells, n_cells))
    rc = al_set_error(AL_ENOMEM, "crop report: out of memory");
  free(cells);
  return rc;
}

/* The aspect group of a bucket size in `t` (the first group holding that size), else
 * "WxH". */
static void aspect_of(const al_bucket_table *t, uint32_t w, uint32_t h, char *out, size_t cap) {
  size_t n = al_bucket_table_count(t);
  for (size_t id = 0; id < n; id++) {
    al_bucket_shape s = AL_BUCKET_SHAPE_INIT;
    if (al_bucket_table_get(t, id, &s) == AL_OK && s.width == w && s.height == h) {
      snprintf(out, cap, "%s", s.aspect);
      return;
    }
  }
  snprintf(out, cap, "%ux%u", w, h);
}

/* The table's aspect group names, in its order. */
static int table_aspects(const al_bucket_table *t, fid_aspects *names) {
  size_t n = al_bucket_table_count(t), id;
  for (size_t k = 0; k < n; k++) {
    al_bucket_shape s = AL_BUCKET_SHAPE_INIT;
    int rc = al_bucket_table_get(t, k, &s);
    if (rc) return rc;
    if (aspect_id(names, s.aspect, &id))
      return al_set_error(AL_ENOMEM, "crop report: out of memory");
  }
  return AL_OK;
}

/* A schedule the report reads, a manifest or a plan in memory: its figures, its geometry, its
 * bucket k, and each sample's bucket (bucket_of[i], NO_BUCKET when not scheduled). */
typedef struct fid_schedule {
  al_manifest_info info;
  al_latent_geom geom;
  int (*bucket)(const void *src, size_t k, al_bucket_info *out);
  int (*bucket_of)(const void *src, const al_manifest_info *info, uint32_t *bucket_of);
  const void *src;
} fid_schedule;

/* The schedule's buckets as fid_buckets, their aspect names from `t` (the table's groups
 * first, in its order, then any "WxH" of a size it lacks). */
static int schedule_buckets(const fid_schedule *s, const al_bucket_table *t, fid_bucket **out,
                            fid_aspects *names) {
  int rc = table_aspects(t, names);
  if (rc) return rc;
  *out = calloc(s->info.buckets ? s->info.buckets : 1, sizeof **out);
  if (!*out) return al_set_error(AL_ENOMEM, "crop report: out of memory");
  for (size_t k = 0; k < s->info.buckets; k++) {
    al_bucket_info bi = AL_BUCKET_INFO_INIT;
    char name[24];
    if ((rc = s->bucket(s->src, k, &bi))) return rc;
    aspect_of(t, bi.width, bi.height, name, sizeof name);
    fid_bucket *b = &(*out)[k];
    b->width = bi.width, b->height = bi.height, b->frames = bi.frames, b->tokens = bi.tokens;
    if (aspect_id(names, name, &b->aspect))
      return al_set_error(AL_ENOMEM, "crop report: out of memory");
  }
  return AL_OK;
}

/* bucket_of[i] = the bucket of every real (not padding) sample the manifest schedules. */
static int manifest_bucket_of(const void *src, const al_manifest_info *mi, uint32_t *bucket_of) {
  const al_manifest *m = src;
  const al_manifest_info info = *mi;
  int rc = AL_OK;
  for (uint32_t s = info.first_step; !rc && s < info.first_step + info.steps; s++)
    for (uint32_t r = 0; !rc && r < info.world; r++) {
      uint32_t nm = 0;
      rc = al_manifest_micro_count(m, s, r, &nm);
      for (uint32_t k = 0; !rc && k < nm; k++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        if ((rc = al_manifest_micro(m, s, r, k, &ref))) break;
        size_t p = 0;
        for (size_t j = 0; j < ref.n_samples; j++) {
          if (p < ref.n_padded && ref.padded[p] == j) {
            p++;
            continue;
          }
          if (ref.samples[j] < info.index_samples) bucket_of[ref.samples[j]] = ref.bucket;
        }
      }
    }
  return rc;
}

static int manifest_bucket(const void *src, size_t k, al_bucket_info *out) {
  return al_manifest_bucket(src, k, out);
}

/* bucket_of[i] = the bucket of every real sample the plan schedules (a padding micro-batch
 * repeats samples already counted). */
static int plan_bucket_of(const void *src, const al_manifest_info *info, uint32_t *bucket_of) {
  for (uint64_t x = 0; x < info->micro_batches; x++) {
    plan_micro_view v;
    plan_view_micro(src, x, &v);
    if (v.padded) continue;
    for (uint32_t j = 0; j < v.n; j++)
      if (v.samples[j] < info->index_samples) bucket_of[v.samples[j]] = v.bucket;
  }
  return AL_OK;
}

static int plan_bucket(const void *src, size_t k, al_bucket_info *out) {
  plan_view_bucket(src, k, out);
  return AL_OK;
}

static int with_default_table(const al_bucket_table *t, al_bucket_table **own,
                              const al_bucket_table **use) {
  *own = NULL;
  *use = t;
  if (t) return AL_OK;
  int rc = al_bucket_table_default(own);
  *use = *own;
  return rc;
}

/* The crop of every sample schedule s holds (its index: idx, checked by the callers). */
static int from_schedule(fid_report *out, const al_index *idx, const fid_schedule *s,
                         const al_bucket_table *names, size_t n_cut) {
  size_t n = al_index_sample_count(idx);
  al_bucket_table *own = NULL;
  const al_bucket_table *t = NULL;
  fid_bucket *b = NULL;
  fid_aspects asp = {NULL, 0};
  uint32_t *bucket_of = malloc((n ? n : 1) * sizeof *bucket_of);
  int rc = bucket_of ? AL_OK : al_set_error(AL_ENOMEM, "crop report: out of memory");
  for (size_t i = 0; !rc && i < n; i++) bucket_of[i] = NO_BUCKET;
  if (!rc) rc = with_default_table(names, &own, &t);
  if (!rc) rc = schedule_buckets(s, t, &b, &asp);
  if (!rc) rc = s->bucket_of(s->src, &s->info, bucket_of);
  /* A sample is cut in time only beyond what the largest allowed SP degree holds. */
  uint64_t cap = s->info.mem_tokens, dmax = 1;
  for (uint32_t k = 0; k < s->info.n_sp_degrees && k < AL_PLAN_MAX_SP_DEGREES; k++)
    if (s->info.sp_degrees[k] > dmax) dmax = s->info.sp_degrees[k];
  if (cap > UINT64_MAX / dmax)
    cap = UINT64_MAX;
  else
    cap *= dmax;
  if (!rc) rc = accumulate(out, idx, &s->geom, cap, b, &asp, bucket_of, n_cut);
  if (rc) fidelity_free(out);
  free(bucket_of);
  free(b);
  free(asp.name);
  al_bucket_table_free(own);
  return rc;
}

int fidelity_from_manifest(fid_report *out, const al_index *idx, const al_manifest *m,
                           const al_bucket_table *names, size_t n_cut) {
  if (!out || !idx || !m) return al_set_error(AL_EINVAL, "fidelity_from_manifest: NULL argument");
  memset(out, 0, sizeof *out);
  fid_schedule s = {.bucket = manifest_bucket, .bucket_of = manifest_bucket_of, .src = m};
  s.info.struct_size = sizeof s.info;
  int rc = al_manifest_get_info(m, &s.info);
  size_t n = al_index_sample_count(idx);
  if (!rc && s.info.index_samples != n)
    return al_set_error(AL_EINVAL, "%s: planned from %llu samples, the index has %zu",
                        al_manifest_path(m), (unsigned long long)s.info.index_samples, n);
  if (!rc) rc = al_manifest_geometry(m, &s.geom);
  return rc ? rc : from_schedule(out, idx, &s, names, n_cut);
}

int fidelity_from_plan(fid_report *out, const al_index *idx, const al_plan *p,
                       const al_bucket_table *names, size_t n_cut) {
  if (!out || !idx || !p) return al_set_error(AL_EINVAL, "fidelity_from_plan: NULL argument");
  memset(out, 0, sizeof *out);
  fid_schedule s = {.bucket = plan_bucket, .bucket_of = plan_bucket_of, .src = p};
  s.info.struct_size = sizeof s.info;
  int rc = al_plan_get_info(p, &s.info);
  size_t n = al_index_sample_count(idx);
  if (!rc && s.info.index_samples != n)
    return al_set_error(AL_EINVAL, "plan of %llu samples, the index has %zu",
                        (unsigned long long)s.info.index_samples, n);
  if (!rc) s.geom = *plan_view_geometry(p);
  return rc ? rc : from_schedule(out, idx, &s, names, n_cut);
}

/* Sample i's bucket in `t` as the planner assigns it: its id, or NO_BUCKET. */
static int table_bucket(const al_index *idx, size_t i, const al_bucket_table *t,
                        const al_latent_geom *g, uint64_t mem_tokens, uint32_t *bucket) {
  al_sample_info si = AL_SAMPLE_INFO_INIT;
  int rc = al_index_sample(idx, i, &si);
  if (rc) return rc;
  al_latent_grid grid;
  int has = al_index_latent_grid(idx, i, &grid.t, &grid.h, &grid.w, NULL) == AL_OK;
  al_reject_reason why;
  if (al_bucket_assign_grid(t, g, mem_tokens, si.width, si.height, si.frames, has ? &grid : NULL,
                            bucket, &why) != AL_OK)
    *bucket = NO_BUCKET;
  return AL_OK;
}

/* Every bucket of `t` as a fid_bucket. */
static int table_buckets(const al_bucket_table *t, const al_latent_geom *g, fid_bucket **out,
                         fid_aspects *names) {
  size_t nb = al_bucket_table_count(t);
  *out = calloc(nb ? nb : 1, sizeof **out);
  if (!*out) return al_set_error(AL_ENOMEM, "crop report: out of memory");
  for (size_t k = 0; k < nb; k++) {
    al_bucket_shape s = AL_BUCKET_SHAPE_INIT;
    int rc = al_bucket_table_get(t, k, &s);
    if (rc) return rc;
    fid_bucket *b = &(*out)[k];
    b->width = s.width, b->height = s.height, b->frames = s.frames;
    b->tokens = al_tokens(g, s.width, s.height, s.frames);
    if (aspect_id(names, s.aspect, &b->aspect))
      return al_set_error(AL_ENOMEM, "crop report: out of memory");
  }
  return AL_OK;
}

int fidelity_from_table(fid_report *out, const al_index *idx, const al_bucket_table *t,
                        const al_latent_geom *g, uint64_t mem_tokens, size_t n_cut) {
  if (!out || !idx) return al_set_error(AL_EINVAL, "fidelity_from_table: NULL argument");
  memset(out, 0, sizeof *out);
  al_latent_geom geom = al_latent_geom_resolve(g);
  if (!mem_tokens) mem_tokens = AL_PLAN_DEFAULT_MEM_TOKENS;
  size_t n = al_index_sample_count(idx);
  al_bucket_table *own = NULL;
  const al_bucket_table *use = NULL;
  fid_bucket *b = NULL;
  fid_aspects asp = {NULL, 0};
  uint32_t *bucket_of = malloc((n ? n : 1) * sizeof *bucket_of);
  int rc = bucket_of ? AL_OK : al_set_error(AL_ENOMEM, "crop report: out of memory");
  if (!rc) rc = with_default_table(t, &own, &use);
  if (!rc) rc = table_buckets(use, &geom, &b, &asp);
  for (size_t i = 0; !rc && i < n; i++)
    rc = table_bucket(idx, i, use, &geom, mem_tokens, &bucket_of[i]);
  if (!rc) rc = accumulate(out, idx, &geom, mem_tokens, b, &asp, bucket_of, n_cut);
  if (rc) fidelity_free(out);
  free(bucket_of);
  free(b);
  free(asp.name);
  al_bucket_table_free(own);
  return rc;
}

void fidelity_free(fid_report *r) {
  if (!r) return;
  free(r->groups);
  free(r->cut);
  memset(r, 0, sizeof *r);
}
