/* A bucket table fitted to a corpus's latent grids (bucket_fit_internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/al_plan.h"
#include "planner/bucket_fit_internal.h"

#define FIT_MAX_FRAMES 64

/* One distinct sample shape: its pixels, frames, latent grid (or none) and how many. */
typedef struct fit_shape {
  uint32_t width, height, frames;
  uint32_t has_grid, gt, gh, gw;
  uint64_t count, native; /* native: tokens of one sample */
} fit_shape;

/* A candidate size (pixels) and the native tokens of the samples whose grid it is. */
typedef struct fit_size {
  uint32_t w, h;
  uint64_t weight;
} fit_size;

/* A chosen size: candidate id and the aspect group it is in. */
typedef struct fit_pick {
  size_t c;
  char group[16];
} fit_pick;

typedef struct fit_state {
  al_latent_geom g;
  uint64_t mem_tokens;
  fit_shape *shapes;
  size_t n_shapes;
  uint32_t frames[FIT_MAX_FRAMES];
  size_t n_frames;
  fit_size *cand;
  size_t n_cand;
} fit_state;

static int cmp_shape(const void *x, const void *y) {
  const fit_shape *a = x, *b = y;
  const uint32_t ka[7] = {a->width, a->height, a->frames, a->has_grid, a->gt, a->gh, a->gw};
  const uint32_t kb[7] = {b->width, b->height, b->frames, b->has_grid, b->gt, b->gh, b->gw};
  for (int k = 0; k < 7; k++)
    if (ka[k] != kb[k]) return ka[k] < kb[k] ? -1 : 1;
  return 0;
}

/* Every sample's shape, sorted and merged into distinct shapes with counts. */
static int collect_shapes(fit_state *S, const al_index *idx) {
  size_t n = al_index_sample_count(idx);
  S->shapes = calloc(n ? n : 1, sizeof *S->shapes);
  if (!S->shapes) return al_set_error(AL_ENOMEM, "bucket fit: out of memory");
  const al_latent_geom *g = &S->g;
  for (size_t i = 0; i < n; i++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    int rc = al_index_sample(idx, i, &si);
    if (rc) return rc;
    fit_shape *s = &S->shapes[i];
    s->width = si.width, s->height = si.height, s->frames = si.frames, s->count = 1;
    s->has_grid = al_index_latent_grid(idx, i, &s->gt, &s->gh, &s->gw, NULL) == AL_OK;
    if (s->has_grid)
      s->native = ((uint64_t)s->gt + g->patch_t - 1) / g->patch_t * (s->gh / g->patch_h) *
                  (s->gw / g->patch_w);
    else
      s->native = al_tokens(g, si.width, si.height, si.frames);
  }
  qsort(S->shapes, n, sizeof *S->shapes, cmp_shape);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (k && !cmp_shape(&S->shapes[k - 1], &S->shapes[i]))
      S->shapes[k - 1].count++;
    else
      S->shapes[k++] = S->shapes[i];
  }
  S->n_shapes = k;
  return AL_OK;
}

/* The native latent frames and the patch-floored latent rows and columns of a shape. */
static void shape_grid(const fit_state *S, const fit_shape *s, uint32_t *t, uint32_t *h,
                       uint32_t *w) {
  const al_latent_geom *g = &S->g;
  if (s->has_grid) {
    *t = s->gt, *h = s->gh, *w = s->gw;
  } else {
    *t = s->frames ? 1 + (s->frames - 1) / g->vae_stride_t : 0;
    *h = s->height / g->vae_stride_s, *w = s->width / g->vae_stride_s;
  }
  *h = *h / g->patch_h * g->patch_h;
  *w = *w / g->patch_w * g->patch_w;
}

static int cmp_size(const void *x, const void *y) {
  const fit_size *a = x, *b = y;
  if (a->weight != b->weight) return a->weight > b->weight ? -1 : 1;
  uint64_t aa = (uint64_t)a->w * a->h, ab = (uint64_t)b->w * b->h;
  if (aa != ab) return aa > ab ? -1 : 1;
  if (a->w != b->w) return a->w > b->w ? -1 : 1;
  return (a->h > b->h) - (a->h < b->h);
}

static int cmp_wh(const void *x, const void *y) {
  const fit_size *a = x, *b = y;
  if (a->w != b->w) return a->w < b->w ? -1 : 1;
  return (a->h > b->h) - (a->h < b->h);
}

/* Sorts `v` by (w, h), merges equal ones (weights summed), then orders by weight: count. */
static size_t merge_sizes(fit_size *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_wh);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (k && v[k - 1].w == v[i].w && v[k - 1].h == v[i].h)
      v[k - 1].weight += v[i].weight;
    else
      v[k++] = v[i];
  }
  qsort(v, k, sizeof *v, cmp_size);
  return k;
}

/* Candidate sizes (grid x s, the BUCKET_FIT_CANDIDATES holding most tokens) and frame counts
 * (1 + (T-1) * st for the FIT_MAX_FRAMES latent lengths holding most tokens, the shortest
 * kept; a grid whose whole length exceeds M_mem also offers the longest length it allows). Reuses
 * fit_size for frame counts (w = frames, h = 0). */
static int collect_candidates(fit_state *S) {
  size_t n = S->n_shapes;
  fit_size *sz = calloc(n ? n : 1, sizeof *sz), *fr = calloc(n ? 2 * n : 1, sizeof *fr);
  if (!sz || !fr) {
    free(sz), free(fr);
    return al_set_error(AL_ENOMEM, "bucket fit: out of memory");
  }
  size_t ns = 0, nf = 0;
  uint32_t t_min = UINT32_MAX;
  for (size_t i = 0; i < n; i++) {
    uint32_t t, h, w;
    shape_grid(S, &S->shapes[i], &t, &h, &w);
    uint64_t weight = S->shapes[i].count * S->shapes[i].native;
    if (!t || !h || !w || !weight) continue;
    sz[ns++] = (fit_size){w * S->g.vae_stride_s, h * S->g.vae_stride_s, weight};
    fr[nf++] = (fit_size){1 + (t - 1) * S->g.vae_stride_t, 0, weight};
    uint64_t per_patch = (uint64_t)(h / S->g.patch_h) * (w / S->g.patch_w);
    uint64_t t_cap = per_patch ? S->mem_tokens / per_patch * S->g.patch_t : 0;
    if (t_cap >= 1 && t_cap < t) /* the longest the cap lets this grid keep */
      fr[nf++] = (fit_size){1 + ((uint32_t)t_cap - 1) * S->g.vae_stride_t, 0, weight};
    if (t < t_min) t_min = t;
  }
  S->n_cand = merge_sizes(sz, ns);
  if (S->n_cand > BUCKET_FIT_CANDIDATES) S->n_cand = BUCKET_FIT_CANDIDATES;
  S->cand = sz;
  nf = merge_sizes(fr, nf);
  uint32_t f_min = 1 + (t_min - 1) * S->g.vae_stride_t;
  S->n_frames = 0;
  if (nf) S->frames[S->n_frames++] = f_min;
  for (size_t i = 0; i < nf && S->n_frames < FIT_MAX_FRAMES; i++)
    if (fr[i].w != f_min) S->frames[S->n_frames++] = fr[i].w;
  free(fr);
  return AL_OK;
}

static uint32_t gcd_u32(uint32_t a, uint32_t b) {
  while (b) {
    uint32_t r = a % b;
    a = b, b = r;
  }
  return a;
}

/* The aspect group name of a size: its reduced ratio W:H, or the nearest ratio of terms at
 * most 1000 when the reduced one is larger (a bucket table's limit). */
static void ratio_name(uint32_t w, uint32_t h, char *out, size_t cap) {
  uint32_t d = gcd_u32(w, h), rw = w / d, rh = h / d;
  if (rw > 1000 || rh > 1000) {
    double x = (double)w / h, best = -1;
    for (uint32_t q = 1; q <= 1000; q++) {
      double p = x * q + 0.5;
      if (p < 1 || p > 1000.5) continue;
      double e = (uint32_t)p / (double)q - x;
      e = e < 0 ? -e : e;
      if (best < 0 || e < best) best = e, rw = (uint32_t)p, rh = q;
    }
  }
  snprintf(out, cap, "%u:%u", rw, rh);
}

/* -1 portrait, 0 square, 1 landscape. */
static int orientation(uint32_t w, uint32_t h) { return (w > h) - (w < h); }

/* The orientation of an aspect group named "W:H". */
static int group_orientation(const char *group) {
  unsigned rw = 0, rh = 0;
  if (sscanf(group, "%u:%u", &rw, &rh) != 2) return 0;
  return orientation(rw, rh);
}

/* The text table of the picks, groups in the order first picked. */
static int build_table(const fit_state *S, const fit_pick *p, size_t n, al_bucket_table **out) {
  size_t cap = 64 + (size_t)FIT_MAX_FRAMES * 8 + n * 48, k = 0;
  char *text = malloc(cap);
  if (!text) return al_set_error(AL_ENOMEM, "bucket fit: out of memory");
  k += (size_t)snprintf(text + k, cap - k, "frames");
  for (size_t i = 0; i < S->n_frames; i++)
    k += (size_t)snprintf(text + k, cap - k, " %u", S->frames[i]);
  for (size_t i = 0; i < n; i++) {
    int seen = 0;
    for (size_t j = 0; j < i; j++) seen |= !strcmp(p[i].group, p[j].group);
    if (seen) continue;
    k += (size_t)snprintf(text + k, cap - k, "\naspect %s", p[i].group);
    for (size_t j = i; j < n; j++)
      if (!strcmp(p[i].group, p[j].group))
        k += (size_t)snprintf(text + k, cap - k, " %ux%u", S->cand[p[j].c].w, S->cand[p[j].c].h);
  }
  k += (size_t)snprintf(text + k, cap - k, "\n");
  int rc = al_bucket_table_parse(out, text, k, "fitted bucket table");
  free(text);
  return rc;
}

/* Tokens kept when every shape is assigned under `t` as the planner assigns it. */
static int table_kept(const fit_state *S, const al_bucket_table *t, uint64_t *kept) {
  *kept = 0;
  for (size_t i = 0; i < S->n_shapes; i++) {
    const fit_shape *s = &S->shapes[i];
    al_latent_grid grid = {s->gt, s->gh, s->gw};
    uint32_t b;
    al_reject_reason why;
    if (al_bucket_assign_grid(t, &S->g, S->mem_tokens, s->width, s->height, s->frames,
                              s->has_grid ? &grid : NULL, &b, &why) != AL_OK)
      continue;
    al_bucket_shape bs = AL_BUCKET_SHAPE_INIT;
    int rc = al_bucket_table_get(t, b, &bs);
    if (rc) return rc;
    *kept += s->count * al_tokens(&S->g, bs.width, bs.height, bs.frames);
  }
  return AL_OK;
}

/* Tokens kept by the picks plus candidate c in group `group`. */
static int try_pick(const fit_state *S, fit_pick *p, size_t n, size_t c, const char *group,
                    uint64_t *kept) {
  p[n].c = c;
  snprintf(p[n].group, sizeof p[n].group, "%s", group);
  al_bucket_table *t = NULL;
  int rc = build_table(S, p, n + 1, &t);
  if (!rc) rc = table_kept(S, t, kept);
  al_bucket_table_free(t);
  return rc;
}

/* One greedy round: the move (candidate c into its own ratio's group, or into a group already
 * picked of the same orientation: a portrait size never joins a landscape group, whose name
 * would then lie about it) that keeps the most tokens, into p[n]; *found = 0 when none adds
 * tokens. */
static int fit_round(const fit_state *S, fit_pick *p, size_t n, const char *used, uint64_t *kept,
                     int *found) {
  fit_pick best = {0, ""};
  uint64_t top = *kept;
  *found = 0;
  for (size_t c = 0; c < S->n_cand; c++) {
    if (used[c]) continue;
    char own[16];
    ratio_name(S->cand[c].w, S->cand[c].h, own, sizeof own);
    for (size_t g = 0; g <= n; g++) {
      const char *group = g == n ? own : p[g].group;
      int seen = 0; /* each distinct group once, in the order picked; its own ratio last */
      for (size_t j = 0; j < (g == n ? n : g) && !seen; j++) seen = !strcmp(p[j].group, group);
      if (seen || group_orientation(group) != orientation(S->cand[c].w, S->cand[c].h)) continue;
      uint64_t k;
      int rc = try_pick(S, p, n, c, group, &k);
      if (rc) return rc;
      if (k > top) {
        top = k, *found = 1, best.c = c;
        snprintf(best.group, sizeof best.group, "%s", group);
      }
    }
  }
  p[n] = best;
  *kept = top;
  return AL_OK;
}

static int fit_greedy(fit_state *S, const bucket_fit_options *o, size_t max_sizes, fit_pick *p,
                      size_t *n, uint64_t native) {
  char *used = calloc(S->n_cand ? S->n_cand : 1, 1);
  if (!used) return al_set_error(AL_ENOMEM, "bucket fit: out of memory");
  uint64_t kept = 0;
  int rc = AL_OK, found = 1;
  *n = 0;
  while (!rc && *n < max_sizes) {
    rc = fit_round(S, p, *n, used, &kept, &found);
    if (rc || !found) break;
    used[p[*n].c] = 1;
    (*n)++;
    if (o->progress)
      fprintf(o->progress, "buckets: size %zu of at most %zu: %ux%u in %s, %.2f%% of tokens kept\n",
              *n, max_sizes, S->cand[p[*n - 1].c].w, S->cand[p[*n - 1].c].h, p[*n - 1].group,
              native ? 100.0 * (double)kept / (double)native : 100.0);
  }
  free(used);
  return rc;
}

/* The refusal when no candidate keeps a token: M_mem (the CLI's --mem-tokens) below the
 * tokens of one latent frame of the smallest candidate, which is then cut to no frames. */
static int refuse_nothing_kept(const fit_state *S) {
  size_t best = 0;
  uint64_t least = UINT64_MAX;
  for (size_t c = 0; c < S->n_cand; c++) {
    uint64_t t = al_tokens(&S->g, S->cand[c].w, S->cand[c].h, 1);
    if (t < least) least = t, best = c;
  }
  if (least > S->mem_tokens)
    return al_set_error(AL_EINVAL,
                        "bucket fit: no size keeps any token: M_mem %llu tokens (--mem-tokens) is "
                        "below one latent frame of the smallest candidate size, %ux%u (%llu tokens)",
                        (unsigned long long)S->mem_tokens, S->cand[best].w, S->cand[best].h,
                        (unsigned long long)least);
  return al_set_error(AL_EINVAL, "bucket fit: no size keeps any token at M_mem %llu (--mem-tokens)",
                      (unsigned long long)S->mem_tokens);
}

int bucket_fit(al_bucket_table **out, bucket_fit_result *res, const al_index *idx,
               const bucket_fit_options *o) {
  if (!out || !res || !idx || !o) return al_set_error(AL_EINVAL, "bucket_fit: NULL argument");
  *out = NULL;
  memset(res, 0, sizeof *res);
  size_t max_sizes = o->max_sizes ? o->max_sizes : 16;
  if (max_sizes > BUCKET_FIT_MAX_SIZES)
    return al_set_error(AL_ERANGE, "bucket fit: at most %d sizes", BUCKET_FIT_MAX_SIZES);
  fit_state S;
  memset(&S, 0, sizeof S);
  S.g = al_latent_geom_resolve(&o->geom);
  S.mem_tokens = o->mem_tokens ? o->mem_tokens : AL_PLAN_DEFAULT_MEM_TOKENS;
  fit_pick ids[BUCKET_FIT_MAX_SIZES + 1];
  size_t n_ids = 0;
  int rc = collect_shapes(&S, idx);
  if (!rc) rc = collect_candidates(&S);
  for (size_t i = 0; !rc && i < S.n_shapes; i++)
    res->native_tokens += S.shapes[i].count * S.shapes[i].native;
  if (!rc && !S.n_cand)
    rc = al_set_error(AL_EINVAL,
                      "bucket fit: no sample has a grid of one patch or more under the geometry "
                      "%u,%u,%u,%u,%u (--geometry: VAE strides t, s, patch t, h, w)",
                      S.g.vae_stride_t, S.g.vae_stride_s, S.g.patch_t, S.g.patch_h, S.g.patch_w);
  if (!rc) rc = fit_greedy(&S, o, max_sizes, ids, &n_ids, res->native_tokens);
  if (!rc && !n_ids) rc = refuse_nothing_kept(&S);
  if (!rc) rc = build_table(&S, ids, n_ids, out);
  if (!rc) rc = table_kept(&S, *out, &res->kept_tokens);
  res->sizes = n_ids, res->frames = S.n_frames, res->candidates = S.n_cand;
  res->shapes = S.n_shapes;
  if (rc) al_bucket_table_free(*out), *out = NULL;
  free(S.shapes);
  free(S.cand);
  return rc;
}
