/* adaptiveload inspect: summarise a manifest (planner/al_plan.h reports) or an index
 * (loader/al_index.h; the file kind is detected). */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "cli/fidelity_print_internal.h"
#include "cli/options_internal.h"
#include "common/parse_internal.h"
#include "common/json_write_internal.h"
#include "loader/al_index.h"
#include "planner/al_buckets.h"
#include "planner/al_plan.h"
#include "manifest/al_report.h"

static const char *status_name(int key_status) {
  if (key_status >= 1 && key_status < AL_REJECT_COUNT)
    return al_reject_reason_name((al_reject_reason)key_status);
  if (key_status == 16) return "dropped by the last-step policy";
  if (key_status == 18) return "lacks a required member (plan --require-members)";
  return NULL;
}

/* ---- inspect INDEX ------------------------------------------------------------------- */

#define IX_SHOW 20     /* warnings and reasons listed */
#define IX_REASONS 512 /* distinct reasons counted; more go to "other" */

typedef struct ix_count {
  char *text;
  uint64_t n;
  size_t first; /* rejected reasons: the group's first entry, shown as its example */
} ix_count;

/* A reason with its numbers and quoted names replaced ("N", '...'), so that rejections of
 * one kind count together (the key of the group; its first real reason is what is shown). */
static void ix_normalize(const char *in, char *out, size_t cap) {
  size_t k = 0;
  for (size_t i = 0; in[i] && k + 4 < cap;) {
    if (isdigit((unsigned char)in[i])) {
      while (isdigit((unsigned char)in[i]) || in[i] == '.') i++;
      out[k++] = 'N';
    } else if (in[i] == '\'') {
      const char *e = strchr(in + i + 1, '\'');
      if (!e) {
        out[k++] = in[i++];
        continue;
      }
      memcpy(out + k, "'...'", 5 < cap - k - 1 ? 5 : cap - k - 1);
      k += 5 < cap - k - 1 ? 5 : cap - k - 1;
      i = (size_t)(e - in) + 1;
    } else {
      out[k++] = in[i++];
    }
  }
  out[k] = '\0';
}

static int ix_count_add(ix_count **arr, size_t *n, const char *text, size_t first) {
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*arr)[i].text, text)) return (*arr)[i].n++, 0;
  if (*n >= IX_REASONS) text = "(other reasons)";
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*arr)[i].text, text)) return (*arr)[i].n++, 0;
  ix_count *a = realloc(*arr, (*n + 1) * sizeof **arr);
  if (!a) return -1;
  *arr = a;
  a[*n].text = strdup(text);
  if (!a[*n].text) return -1;
  a[*n].n = 1;
  a[*n].first = first;
  (*n)++;
  return 0;
}

static int ix_count_desc(const void *x, const void *y) {
  const ix_count *a = x, *b = y;
  if (a->n != b->n) return a->n < b->n ? 1 : -1;
  return strcmp(a->text, b->text);
}

typedef struct ix_bucket_count {
  uint64_t n;
  size_t id;
} ix_bucket_count;

/* Buckets by count (descending), then id. */
static int ix_bucket_desc(const void *x, const void *y) {
  const ix_bucket_count *a = x, *b = y;
  if (a->n != b->n) return a->n < b->n ? 1 : -1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* Members grouped by extension, dtype and rank. */
typedef struct ix_group {
  const char *ext;   /* points into the index */
  const char *dtype; /* NULL: untyped */
  uint32_t ndim;
  uint64_t n, bytes;
  uint64_t lo[AL_INDEX_MAX_DIMS], hi[AL_INDEX_MAX_DIMS];
} ix_group;

static int u64_cmp(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* The name of a dimension that varies: C, T, H, W for (C, T, H, W) latents, C, H, W for
 * (C, H, W), else d0, d1, ... */
static void ix_dim_name(const ix_group *g, uint32_t d, char *out, size_t cap) {
  static const char *l4[] = {"C", "T", "H", "W"}, *l3[] = {"C", "H", "W"};
  if (!strncmp(g->ext, "latent", 6) && g->ndim == 4)
    snprintf(out, cap, "%s", l4[d]);
  else if (!strncmp(g->ext, "latent", 6) && g->ndim == 3)
    snprintf(out, cap, "%s", l3[d]);
  else
    snprintf(out, cap, "d%u", d);
}

typedef struct ix_summary {
  const al_index *idx;
  uint64_t bytes, compressed;
  uint64_t remote;  /* shards that are URLs */
  const char *url0; /* the first of them */
  ix_count *reasons;
  size_t n_reasons;
  uint64_t *shapes; /* sorted w | h << 21 | f << 42 */
  size_t n_shapes;
  ix_count *top; /* shape text, count */
  size_t n_top;
  uint64_t tok_hist[40]; /* tokens in [2^k, 2^(k+1)), [0] also 0 and 1 */
  uint64_t tok_total;
  ix_group *groups;
  size_t n_groups;
  size_t top_n; /* --top */
  uint64_t latent_samples;
  /* Buckets under the default table, geometry and mem-tokens (latent grids crop only). */
  al_bucket_table *table;
  uint64_t *bucket_n; /* per bucket */
  uint64_t bucket_rej[AL_REJECT_COUNT];
} ix_summary;

/* Shard bytes, compressed shards and the rejected entries counted by normalised reason. */
static int ix_collect_shards(ix_summary *S, const al_index *idx) {
  for (size_t i = 0; i < al_index_shard_count(idx); i++) {
    al_shard_info sh = AL_SHARD_INFO_INIT;
    if (al_index_shard(idx, i, &sh)) return -1;
    S->bytes += sh.size;
    S->compressed += !sh.seekable;
    if (sh.remote && !S->remote++) S->url0 = sh.path;
  }
  char norm[512];
  for (size_t i = 0; i < al_index_rejected_count(idx); i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    if (al_index_rejected(idx, i, &r)) return -1;
    ix_normalize(r.reason, norm, sizeof norm);
    if (ix_count_add(&S->reasons, &S->n_reasons, norm, i)) return -1;
  }
  if (S->n_reasons > 1) qsort(S->reasons, S->n_reasons, sizeof *S->reasons, ix_count_desc);
  return 0;
}

/* Sample i's members into their (extension, dtype, rank) groups, with shape ranges. */
static int ix_collect_members(ix_summary *S, const al_index *idx, size_t i, uint32_t n_members) {
  for (uint32_t m = 0; m < n_members; m++) {
    al_member_info mi;
    al_member_type mt = AL_MEMBER_TYPE_INIT;
    if (al_index_member(idx, i, m, &mi)) return -1;
    int typed = al_index_member_type(idx, i, m, &mt) == AL_OK;
    ix_group *g = NULL;
    for (size_t k2 = 0; k2 < S->n_groups && !g; k2++) {
      ix_group *c = &S->groups[k2];
      if (!strcmp(c->ext, mi.ext) &&
          (typed ? c->dtype && !strcmp(c->dtype, mt.dtype) && c->ndim == mt.ndim : !c->dtype))
        g = c;
    }
    if (!g) {
      ix_group *a = realloc(S->groups, (S->n_groups + 1) * sizeof *a);
      if (!a) return -1;
      S->groups = a;
      g = &a[S->n_groups++];
      memset(g, 0, sizeof *g);
      g->ext = mi.ext;
      g->dtype = typed ? mt.dtype : NULL;
      g->ndim = typed ? mt.ndim : 0;
      for (uint32_t d = 0; d < g->ndim; d++) g->lo[d] = UINT64_MAX;
    }
    g->n++;
    g->bytes += mi.size;
    for (uint32_t d = 0; typed && d < g->ndim; d++) {
      if (mt.shape[d] < g->lo[d]) g->lo[d] = mt.shape[d];
      if (mt.shape[d] > g->hi[d]) g->hi[d] = mt.shape[d];
    }
  }
  return 0;
}

/* Sample i: its shape, its tokens in the histogram, its bucket (or why none takes it) and
 * its members. */
static int ix_collect_sample(ix_summary *S, const al_index *idx, size_t i,
                             const al_latent_geom *geom) {
  al_sample_info si = AL_SAMPLE_INFO_INIT;
  if (al_index_sample(idx, i, &si)) return -1;
  uint64_t w = si.width & 0x1FFFFF, h = si.height & 0x1FFFFF, f = si.frames & 0x1FFFFF;
  S->shapes[S->n_shapes++] = w | h << 21 | f << 42;
  uint64_t t = al_tokens(geom, si.width, si.height, si.frames);
  int k = 0;
  while (k < 39 && t >> (k + 1)) k++;
  S->tok_hist[k]++;
  S->tok_total += t;
  al_latent_grid grid;
  int has_grid = al_index_latent_grid(idx, i, &grid.t, &grid.h, &grid.w, NULL) == AL_OK;
  S->latent_samples += (uint64_t)has_grid;
  uint32_t b = 0;
  al_reject_reason why = AL_REJECT_NONE;
  if (al_bucket_assign_grid(S->table, geom, AL_PLAN_DEFAULT_MEM_TOKENS, si.width, si.height,
                            si.frames, has_grid ? &grid : NULL, &b, &why) == AL_OK)
    S->bucket_n[b]++;
  else if ((unsigned)why < AL_REJECT_COUNT)
    S->bucket_rej[why]++;
  return ix_collect_members(S, idx, i, si.n_members);
}

/* The sorted shapes counted, the `top` most common kept as text. */
static int ix_top_shapes(ix_summary *S, size_t top) {
  if (S->n_shapes > 1) qsort(S->shapes, S->n_shapes, sizeof *S->shapes, u64_cmp);
  for (size_t i = 0; i < S->n_shapes;) {
    size_t j = i;
    while (j < S->n_shapes && S->shapes[j] == S->shapes[i]) j++;
    char text[64];
    snprintf(text, sizeof text, "%llux%llu x %llu", (unsigned long long)(S->shapes[i] & 0x1FFFFF),
             (unsigned long long)(S->shapes[i] >> 21 & 0x1FFFFF),
             (unsigned long long)(S->shapes[i] >> 42 & 0x1FFFFF));
    ix_count *a = realloc(S->top, (S->n_top + 1) * sizeof *a);
    if (!a) return -1;
    S->top = a;
    a[S->n_top].text = strdup(text);
    if (!a[S->n_top].text) return -1;
    a[S->n_top++].n = j - i;
    i = j;
  }
  if (S->n_top > 1) qsort(S->top, S->n_top, sizeof *S->top, ix_count_desc);
  if (S->n_top > top) {
    for (size_t i = top; i < S->n_top; i++) free(S->top[i].text);
    S->n_top = top;
  }
  return 0;
}

static int ix_collect(ix_summary *S, const al_index *idx, size_t top) {
  memset(S, 0, sizeof *S);
  S->idx = idx;
  S->top_n = top;
  size_t ns = al_index_sample_count(idx);
  if (ix_collect_shards(S, idx)) return -1;
  S->shapes = malloc((ns ? ns : 1) * sizeof *S->shapes);
  if (!S->shapes) return -1;
  al_latent_geom geom = al_latent_geom_resolve(NULL);
  if (al_bucket_table_default(&S->table)) return -1;
  S->bucket_n = calloc(al_bucket_table_count(S->table), sizeof *S->bucket_n);
  if (!S->bucket_n) return -1;
  for (size_t i = 0; i < ns; i++)
    if (ix_collect_sample(S, idx, i, &geom)) return -1;
  return ix_top_shapes(S, top);
}

static void ix_free(ix_summary *S) {
  for (size_t i = 0; i < S->n_reasons; i++) free(S->reasons[i].text);
  for (size_t i = 0; i < S->n_top; i++) free(S->top[i].text);
  free(S->reasons);
  free(S->top);
  free(S->shapes);
  free(S->groups);
  free(S->bucket_n);
  al_bucket_table_free(S->table);
}

/* "[16, T, H, W]" and, for the varying dimensions, " (T 1..21, H 30..90)". */
static void ix_shape_text(const ix_group *g, char *shape, size_t cap, char *ranges, size_t rcap) {
  size_t k = 0, r = 0;
  k += (size_t)snprintf(shape + k, cap - k, "[");
  ranges[0] = '\0';
  for (uint32_t d = 0; d < g->ndim && k < cap; d++) {
    char name[16];
    if (g->lo[d] == g->hi[d]) {
      k += (size_t)snprintf(shape + k, cap - k, "%s%llu", d ? ", " : "",
                            (unsigned long long)g->lo[d]);
    } else {
      ix_dim_name(g, d, name, sizeof name);
      k += (size_t)snprintf(shape + k, cap - k, "%s%s", d ? ", " : "", name);
      if (r < rcap)
        r += (size_t)snprintf(ranges + r, rcap - r, "%s%s %llu..%llu", r ? ", " : "", name,
                              (unsigned long long)g->lo[d], (unsigned long long)g->hi[d]);
    }
  }
  if (k < cap) snprintf(shape + k, cap - k, "]");
}

static const char *storage_addressing_name(int a) {
  return a == AL_S3_ADDRESSING_PATH      ? "path"
         : a == AL_S3_ADDRESSING_VIRTUAL ? "virtual"
                                         : "default";
}

static void ix_print_text(FILE *out, const ix_summary *S, const char *path) {
  const al_index *idx = S->idx;
  size_t ns = al_index_sample_count(idx);
  fprintf(out, "index %s: fingerprint %016llx\n", path,
          (unsigned long long)al_index_fingerprint(idx));
  fprintf(out, "  shards    %zu (%llu compressed), %.1f MB\n", al_index_shard_count(idx),
          (unsigned long long)S->compressed, S->bytes / 1e6);
  if (S->remote)
    fprintf(out, "  remote    %llu shards are URLs (the first %s)\n", (unsigned long long)S->remote,
            S->url0);
  al_storage_options st;
  al_index_storage(idx, &st);
  if (st.s3_endpoint || st.s3_region || st.s3_addressing)
    fprintf(out,
            "  s3        built with endpoint %s, region %s, addressing %s (readers' defaults)\n",
            st.s3_endpoint ? st.s3_endpoint : "AWS", st.s3_region ? st.s3_region : "default",
            storage_addressing_name(st.s3_addressing));
  fprintf(out, "  samples   %zu (%llu with a typed latent grid), %.0f tokens (Wan 2.1 geometry)\n",
          ns, (unsigned long long)S->latent_samples, (double)S->tok_total);
  fprintf(out, "  rejected  %zu\n", al_index_rejected_count(idx));
  for (size_t i = 0; i < S->n_reasons && i < IX_SHOW; i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    if (al_index_rejected(idx, S->reasons[i].first, &r)) break;
    fprintf(out, "    %10llu  %s%s\n", (unsigned long long)S->reasons[i].n,
            S->reasons[i].n > 1 ? "e.g. " : "", r.reason);
  }
  if (S->n_reasons > IX_SHOW)
    fprintf(out, "    ... and %zu more kinds (--rejected lists every entry)\n",
            S->n_reasons - IX_SHOW);
  fprintf(out, "  warnings  %zu\n", al_index_warning_count(idx));
  for (size_t i = 0; i < al_index_warning_count(idx) && i < IX_SHOW; i++) {
    al_rejected_info w = AL_REJECTED_INFO_INIT;
    if (al_index_warning(idx, i, &w)) break;
    fprintf(out, "    %s (%s): %s\n", w.key, w.member, w.reason);
  }
  if (al_index_warning_count(idx) > IX_SHOW)
    fprintf(out, "    ... and %zu more\n", al_index_warning_count(idx) - IX_SHOW);
  fprintf(out, "shapes (width x height x frames), most common:\n");
  for (size_t i = 0; i < S->n_top; i++)
    fprintf(out, "  %10llu  %5.1f%%  %s\n", (unsigned long long)S->top[i].n,
            ns ? 100.0 * S->top[i].n / ns : 0.0, S->top[i].text);
  fprintf(out, "tokens per sample (Wan 2.1: stride 4/8, patch 1x2x2):\n");
  for (int k = 0; k < 40; k++) {
    if (!S->tok_hist[k]) continue;
    fprintf(out, "  %10llu  [%llu, %llu)\n", (unsigned long long)S->tok_hist[k],
            k ? 1ull << k : 0ull, 1ull << (k + 1));
  }
  fprintf(out, "buckets (default table, mem-tokens %u; latent grids crop only), most used:\n",
          AL_PLAN_DEFAULT_MEM_TOKENS);
  {
    size_t nb = al_bucket_table_count(S->table), used = 0;
    ix_bucket_count *order = calloc(nb ? nb : 1, sizeof *order);
    for (size_t b = 0; order && b < nb; b++)
      if (S->bucket_n[b]) order[used].n = S->bucket_n[b], order[used++].id = b;
    if (order) qsort(order, used, sizeof *order, ix_bucket_desc);
    for (size_t i = 0; order && i < used && i < S->top_n; i++) {
      al_bucket_shape sh = AL_BUCKET_SHAPE_INIT;
      al_bucket_table_get(S->table, order[i].id, &sh);
      fprintf(out, "  %10llu  %ux%u x %u (%s)\n", (unsigned long long)order[i].n, sh.width,
              sh.height, sh.frames, sh.aspect);
    }
    free(order);
    for (int r = 1; r < AL_REJECT_COUNT; r++)
      if (S->bucket_rej[r])
        fprintf(out, "  %10llu  no bucket: %s\n", (unsigned long long)S->bucket_rej[r],
                al_reject_reason_name((al_reject_reason)r));
  }
  fprintf(out, "members:\n");
  for (size_t i = 0; i < S->n_groups; i++) {
    const ix_group *g = &S->groups[i];
    if (!g->dtype) {
      fprintf(out, "  %-20s %10llu members, %.1f MB\n", g->ext, (unsigned long long)g->n,
              g->bytes / 1e6);
      continue;
    }
    char shape[256], ranges[256];
    ix_shape_text(g, shape, sizeof shape, ranges, sizeof ranges);
    fprintf(out, "  %-20s %s %s x %llu, %.1f MB%s%s%s\n", g->ext, g->dtype, shape,
            (unsigned long long)g->n, g->bytes / 1e6, ranges[0] ? " (" : "", ranges,
            ranges[0] ? ")" : "");
  }
}

/* The JSON lists "rejected_by_reason" and "warning_list" (their contents). */
static void ix_json_rejected(FILE *out, const ix_summary *S) {
  const al_index *idx = S->idx;
  for (size_t i = 0; i < S->n_reasons; i++) {
    fprintf(out, "%s{\"reason\": ", i ? ", " : "");
    jsonw_string(out, S->reasons[i].text);
    fprintf(out, ", \"count\": %llu, \"example\": ", (unsigned long long)S->reasons[i].n);
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    jsonw_string(out, al_index_rejected(idx, S->reasons[i].first, &r) ? "" : r.reason);
    fprintf(out, "}");
  }
  fprintf(out, "], \"warning_list\": [");
  for (size_t i = 0; i < al_index_warning_count(idx) && i < 1000; i++) {
    al_rejected_info w = AL_REJECTED_INFO_INIT;
    if (al_index_warning(idx, i, &w)) break;
    fprintf(out, "%s{\"key\": ", i ? ", " : "");
    jsonw_string(out, w.key);
    fprintf(out, ", \"member\": ");
    jsonw_string(out, w.member);
    fprintf(out, ", \"reason\": ");
    jsonw_string(out, w.reason);
    fprintf(out, "}");
  }
}

/* The JSON lists "shapes" and "tokens_histogram" (their contents). */
static void ix_json_shapes(FILE *out, const ix_summary *S) {
  for (size_t i = 0; i < S->n_top; i++) {
    unsigned w = 0, h = 0, f = 0;
    sscanf(S->top[i].text, "%ux%u x %u", &w, &h, &f);
    fprintf(out, "%s{\"width\": %u, \"height\": %u, \"frames\": %u, \"count\": %llu}",
            i ? ", " : "", w, h, f, (unsigned long long)S->top[i].n);
  }
  fprintf(out, "], \"tokens_histogram\": [");
  int first = 1;
  for (int k = 0; k < 40; k++) {
    if (!S->tok_hist[k]) continue;
    fprintf(out, "%s{\"from\": %llu, \"to\": %llu, \"count\": %llu}", first ? "" : ", ",
            k ? 1ull << k : 0ull, 1ull << (k + 1), (unsigned long long)S->tok_hist[k]);
    first = 0;
  }
}

/* The JSON list "buckets" and object "bucket_rejected" (their contents). */
static void ix_json_buckets(FILE *out, const ix_summary *S) {
  size_t nb = al_bucket_table_count(S->table);
  int first = 1;
  for (size_t b = 0; b < nb; b++) {
    if (!S->bucket_n[b]) continue;
    al_bucket_shape sh = AL_BUCKET_SHAPE_INIT;
    al_bucket_table_get(S->table, b, &sh);
    fprintf(out, "%s{\"width\": %u, \"height\": %u, \"frames\": %u, \"count\": %llu}",
            first ? "" : ", ", sh.width, sh.height, sh.frames, (unsigned long long)S->bucket_n[b]);
    first = 0;
  }
  fprintf(out, "], \"bucket_rejected\": {");
  first = 1;
  for (int r = 1; r < AL_REJECT_COUNT; r++) {
    if (!S->bucket_rej[r]) continue;
    fprintf(out, "%s", first ? "" : ", ");
    jsonw_string(out, al_reject_reason_name((al_reject_reason)r));
    fprintf(out, ": %llu", (unsigned long long)S->bucket_rej[r]);
    first = 0;
  }
}

/* The JSON list "members" (its contents). */
static void ix_json_members(FILE *out, const ix_summary *S) {
  for (size_t i = 0; i < S->n_groups; i++) {
    const ix_group *g = &S->groups[i];
    fprintf(out, "%s{\"ext\": ", i ? ", " : "");
    jsonw_string(out, g->ext);
    fprintf(out, ", \"count\": %llu, \"bytes\": %llu", (unsigned long long)g->n,
            (unsigned long long)g->bytes);
    if (g->dtype) {
      char shape[256], ranges[256];
      ix_shape_text(g, shape, sizeof shape, ranges, sizeof ranges);
      fprintf(out, ", \"dtype\": \"%s\", \"shape\": ", g->dtype);
      jsonw_string(out, shape);
      fprintf(out, ", \"min_shape\": [");
      for (uint32_t d = 0; d < g->ndim; d++)
        fprintf(out, "%s%llu", d ? ", " : "", (unsigned long long)g->lo[d]);
      fprintf(out, "], \"max_shape\": [");
      for (uint32_t d = 0; d < g->ndim; d++)
        fprintf(out, "%s%llu", d ? ", " : "", (unsigned long long)g->hi[d]);
      fprintf(out, "]");
    }
    fprintf(out, "}");
  }
}

static void ix_print_json(FILE *out, const ix_summary *S, const char *path, const fid_report *fid,
                          const char *from) {
  const al_index *idx = S->idx;
  fprintf(out, "{\"kind\": \"index\", \"path\": ");
  jsonw_string(out, path);
  fprintf(out, ", \"fingerprint\": \"%016llx\", \"shards\": %zu, \"compressed_shards\": %llu, ",
          (unsigned long long)al_index_fingerprint(idx), al_index_shard_count(idx),
          (unsigned long long)S->compressed);
  fprintf(out, "\"remote_shards\": %llu, ", (unsigned long long)S->remote);
  al_storage_options st;
  al_index_storage(idx, &st);
  fprintf(out, "\"s3_storage\": ");
  if (st.s3_endpoint || st.s3_region || st.s3_addressing) {
    fprintf(out, "{\"endpoint\": ");
    jsonw_string(out, st.s3_endpoint ? st.s3_endpoint : "");
    fprintf(out, ", \"region\": ");
    jsonw_string(out, st.s3_region ? st.s3_region : "");
    fprintf(out, ", \"addressing\": \"%s\"}, ", storage_addressing_name(st.s3_addressing));
  } else {
    fprintf(out, "null, ");
  }
  fprintf(out,
          "\"bytes\": %llu, \"samples\": %zu, \"latent_samples\": %llu, \"tokens\": %llu, "
          "\"rejected\": %zu, \"warnings\": %zu, \"rejected_by_reason\": [",
          (unsigned long long)S->bytes, al_index_sample_count(idx),
          (unsigned long long)S->latent_samples, (unsigned long long)S->tok_total,
          al_index_rejected_count(idx), al_index_warning_count(idx));
  ix_json_rejected(out, S);
  fprintf(out, "], \"shapes\": [");
  ix_json_shapes(out, S);
  fprintf(out, "], \"buckets\": [");
  ix_json_buckets(out, S);
  fprintf(out, "}, \"members\": [");
  ix_json_members(out, S);
  fprintf(out, "], ");
  fidprint_json(out, fid, idx, from);
  fprintf(out, "}\n");
}

/* Returns an exit status. */
/* inspect INDEX --rejected [--json]: every rejected entry (al_index_print_rejected). Returns
 * an exit status. */
static int ix_rejected(const al_index *idx, const char *path, int json) {
  int rc = AL_OK;
  if (json) {
    printf("{\"kind\": \"index_rejected\", \"path\": ");
    jsonw_string(stdout, path);
    printf(", \"rejected\": %zu, \"entries\": ", al_index_rejected_count(idx));
  }
  rc = al_index_print_rejected(stdout, idx, json);
  if (json) printf("}\n");
  return rc ? cli_fail("inspect") : AL_EXIT_OK;
}

typedef struct inspect_args {
  const char *path, *svg, *other;
  const char *shares_svg; /* --shares-svg FILE: a mixture's shares over the steps */
  int json, jsonl, rejected;
  uint64_t top;        /* inspect INDEX --top N */
  const char *buckets; /* inspect INDEX --buckets FILE (NULL: the default table) */
  uint64_t mem_tokens; /* inspect INDEX --mem-tokens M (0: AL_PLAN_DEFAULT_MEM_TOKENS) */
  uint32_t sp_max;     /* inspect INDEX --sp-degrees D,...: the largest (0: not given) */
  char sp_text[128];
} inspect_args;

/* --sp-degrees 1,2,4,8 (as plan takes it): distinct powers of two 1..1024; the fidelity report
 * then cuts in time only beyond M_mem x the largest. */
static int parse_sp_degrees(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  inspect_args *a = args;
  uint32_t d[AL_PLAN_MAX_SP_DEGREES];
  size_t n = 0;
  int rc = cli_parse_sp_degrees(verb, v, d, &n);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++)
    if (d[i] > a->sp_max) a->sp_max = d[i];
  snprintf(a->sp_text, sizeof a->sp_text, "%s", v);
  return 0;
}

/* The crop report of every sample under the table --buckets names (or the default) at
 * --mem-tokens, into *fid, its label into `from`: 0 or an al_status. */
static int ix_fidelity(const al_index *idx, const inspect_args *a, fid_report *fid, char *from,
                       size_t cap) {
  al_bucket_table *t = NULL;
  int rc = a->buckets ? al_bucket_table_load(&t, a->buckets) : AL_OK;
  if (!rc && t) rc = al_bucket_table_check(t, NULL);
  uint64_t mem = a->mem_tokens ? a->mem_tokens : AL_PLAN_DEFAULT_MEM_TOKENS;
  if (a->sp_max)
    snprintf(from, cap,
             "%s, mem-tokens %llu, sp-degrees %s (time cuts beyond %llu tokens); latent grids crop only",
             a->buckets ? a->buckets : "default table", (unsigned long long)mem, a->sp_text,
             (unsigned long long)(mem * a->sp_max));
  else
    snprintf(from, cap, "%s, mem-tokens %llu; latent grids crop only",
             a->buckets ? a->buckets : "default table", (unsigned long long)mem);
  if (!rc)
    rc = fidelity_from_table(fid, idx, t, NULL, a->sp_max ? mem * a->sp_max : mem, (size_t)a->top);
  al_bucket_table_free(t);
  return rc;
}

static int ix_inspect(const al_index *idx, const inspect_args *a) {
  ix_summary S;
  fid_report fid;
  char from[1200];
  if (ix_fidelity(idx, a, &fid, from, sizeof from)) return cli_fail("inspect");
  if (ix_collect(&S, idx, (size_t)a->top)) {
    ix_free(&S);
    fidelity_free(&fid);
    fprintf(stderr, "adaptiveload inspect: %s: out of memory or a bad record\n", a->path);
    return AL_EXIT_FAIL;
  }
  if (a->json) {
    ix_print_json(stdout, &S, a->path, &fid, from);
  } else {
    ix_print_text(stdout, &S, a->path);
    fidprint_text(stdout, &fid, idx, from);
  }
  ix_free(&S);
  fidelity_free(&fid);
  return AL_EXIT_OK;
}

/* The one MANIFEST or INDEX argument. */
static int take_path(const cli_verb *verb, const char *arg, void *args) {
  (void)verb;
  inspect_args *a = args;
  if (arg[0] == '-' || a->path) return CLI_BAD;
  a->path = arg;
  return 0;
}

/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--json", .type = CLI_FLAG, CLI_AT(inspect_args, json), .set = 1,
     .help = "one JSON object: policy, world, steps, samples, dropped, padded,\n"
             "tokens, imbalance_cv (mean over steps of the CV of per-rank\n"
             "predicted cost), bubble (1 - sum of step means / sum of step\n"
             "maxima), predicted_seconds, predicted_tokens_per_s, ..."},
    {.name = "--jsonl", .type = CLI_FLAG, CLI_AT(inspect_args, jsonl), .set = 1,
     .help = "one JSON object per micro-batch: step, rank, micro, bucket,\n"
             "cost_ms, keys, samples (index positions), tokens, padded"},
    {.name = "--svg", .type = CLI_STRING, CLI_AT(inspect_args, svg), .metavar = "FILE",
     .help = "heat strip of per-step per-rank load (steps on x, ranks on y,\n"
             "colour = rank cost / the step's slowest rank)"},
    {.name = "--shares-svg", .type = CLI_STRING, CLI_AT(inspect_args, shares_svg),
     .metavar = "FILE",
     .help = "a mixture's manifest: each step's share of its units (tokens,\n"
             "samples or compute, the mixture's \"by\") per source as stacked\n"
             "bars over the steps, the scheduled weights as lines"},
    {.name = "--rejected", .type = CLI_FLAG, CLI_AT(inspect_args, rejected), .set = 1,
     .help = "list every sample the plan rejected or dropped, with the reason;\n"
             "INDEX: every rejected entry (shard, sample, member, byte, reason),\n"
             "one JSON object with --json"},
    {.name = "--compare", .type = CLI_STRING, CLI_AT(inspect_args, other), .metavar = "OTHER",
     .help = "print MANIFEST and OTHER side by side (e.g. adaptive vs equal-token)"},
    {.name = "--top", .type = CLI_U64, CLI_AT(inspect_args, top), .min = 1, .max = 100000,
     .bad = "bad --top %s", .metavar = "N",
     .help = "INDEX: the N most common shapes and most used buckets", .def = "10"},
    {.name = "--buckets", .type = CLI_STRING, CLI_AT(inspect_args, buckets), .metavar = "FILE",
     .help = "INDEX: the bucket table of the fidelity report (plan --buckets)",
     .def = "the default table"},
    {.name = "--mem-tokens", .type = CLI_U64, CLI_AT(inspect_args, mem_tokens), .min = 1,
     .max = AL_PLAN_MAX_MEM_TOKENS, .metavar = "M",
     .help = "INDEX: the per-sample token cap M_mem of the fidelity report", .def = "65536"},
    {.name = "--sp-degrees", .type = CLI_CUSTOM, .parse = parse_sp_degrees, .metavar = "D,...",
     .help = "INDEX: sequence-parallel degrees (plan --sp-degrees): the\n"
             "fidelity report cuts in time only beyond M_mem x the largest"},
    {.name = NULL},
};
/* clang-format on */

static const cli_verb INSPECT = {
    .name = "inspect",
    .bad = "bad %s '%s'",
    .usage =
        "usage: adaptiveload inspect MANIFEST [--json] [--jsonl] [--svg FILE] [--shares-svg FILE]\n"
        "                                     [--rejected]\n"
        "                                     [--compare OTHER_MANIFEST]\n"
        "       adaptiveload inspect INDEX [--json] [--top N] [--rejected] [--buckets FILE]\n"
        "                                  [--mem-tokens M] [--sp-degrees D,...]\n\n"
        "An index file (adaptiveload index) is summarised: shards, samples, rejected\n"
        "entries by reason, the N most common shapes (width x height x frames), a token\n"
        "histogram (Wan 2.1 geometry), the N most used buckets of the default table (at\n"
        "the default mem-tokens; latent grids crop only) and the samples no bucket takes,\n"
        "members by extension with counts, bytes, dtypes and\n"
        "shapes (dimensions that vary are named: latent.npy float16 [16, T, H, W]) and the\n"
        "warnings; --json prints it as one object. Rejected entries are grouped by kind,\n"
        "each group shown with the reason of its first entry; --rejected lists every one\n"
        "(SHARD: sample 'KEY', member 'NAME' at byte N: REASON), --rejected --json as\n"
        "{\"kind\": \"index_rejected\", \"path\", \"rejected\", \"entries\": [{\"shard\",\n"
        "\"member\", \"key\", \"offset\", \"reason\"}, ...]}.\n\n"
        "The fidelity report ends it (\"fidelity\" in --json): how much of each sample's\n"
        "native latent tokens its bucket keeps under the default table (or --buckets FILE)\n"
        "at M_mem (--mem-tokens), per aspect group and duration band (samples, tokens kept,\n"
        "mean and min of one sample's fraction), the samples cut by why (crop to bucket:\n"
        "aspect/size; longer than M_mem: time cut) and the N cut most.\n\n"
        "Without flags: a text summary (config, counts, balance, predicted time) and the\n"
        "table of buckets that hold samples.\n\n",
    .options = OPTIONS,
    .positional = take_path,
    .say = CLI_SAY_PAGE,
    .missing = "bad argument: %s",
    .unknown = "bad argument: %s",
    .stray = "bad argument: %s",
    .bad_say = CLI_SAY_PAGE,
};

/* Prints every sample the plan rejected or dropped: position, key, reason. */
static void print_rejected(const al_manifest *m) {
  al_manifest_info in = AL_MANIFEST_INFO_INIT;
  al_manifest_get_info(m, &in);
  for (uint64_t i = 0; i < in.index_samples; i++) {
    const char *why = status_name(al_manifest_key_status(m, i));
    const char *key = al_manifest_key(m, i);
    if (why) printf("%llu\t%s\t%s\n", (unsigned long long)i, key ? key : "", why);
  }
}

/* inspect MANIFEST. `index_err` is why the file did not load as an index: reported instead
 * when the file is an index after all (a damaged one). Returns an exit status. */
static int inspect_manifest(const inspect_args *a, const char *index_err) {
  al_manifest *m = NULL, *o = NULL;
  int rc = al_manifest_load(&m, a->path);
  if (!rc && a->other) rc = al_manifest_load(&o, a->other);
  if (rc) goto cleanup;
  if (a->json) al_manifest_print_json(stdout, m);
  if (a->jsonl) rc = al_manifest_print_jsonl(stdout, m);
  if (!rc && a->svg) {
    rc = al_manifest_write_svg(m, a->svg);
    if (!rc) fprintf(stderr, "inspect: wrote %s\n", a->svg);
  }
  if (!rc && a->shares_svg) {
    rc = al_manifest_write_shares_svg(m, a->shares_svg);
    if (!rc) fprintf(stderr, "inspect: wrote %s\n", a->shares_svg);
  }
  if (!rc && a->rejected) print_rejected(m);
  if (!rc && o) al_plan_compare_print(stdout, m, o);
  if (!rc && !a->json && !a->jsonl && !a->svg && !a->shares_svg && !a->rejected && !o)
    al_manifest_print_summary(stdout, m, a->path);

cleanup:
  al_manifest_free(m);
  al_manifest_free(o);
  if (rc && strstr(al_last_error(), "is a index file")) {
    fprintf(stderr, "adaptiveload inspect: %s\n", index_err);
    return AL_EXIT_FAIL;
  }
  return rc ? cli_fail("inspect") : AL_EXIT_OK;
}

int cli_cmd_inspect(int argc, char **argv) {
  inspect_args a;
  memset(&a, 0, sizeof a);
  a.top = 10;
  int ec = cli_parse(&INSPECT, argc, argv, &a);
  if (ec != CLI_RUN) return ec;
  if (!a.path) return cli_usage(&INSPECT, CLI_SAY_PAGE, "MANIFEST is required");
  /* An index file? A manifest (or any other kind) fails at its header; a damaged index is
   * reported with the index loader's message. */
  al_index *idx = NULL;
  if (al_index_load(&idx, a.path) == AL_OK) {
    if (a.jsonl || a.svg || a.shares_svg || a.other)
      ec = cli_usage(&INSPECT, CLI_SAY_PAGE,
                     "%s is an index: --jsonl, --svg and --compare are for manifests", a.path);
    else if (a.rejected)
      ec = ix_rejected(idx, a.path, a.json);
    else
      ec = ix_inspect(idx, &a);
    al_index_free(idx);
    return ec;
  }
  if (a.buckets || a.mem_tokens)
    return cli_usage(&INSPECT, CLI_SAY_PAGE, "--buckets and --mem-tokens are for an INDEX");
  char index_err[1024];
  snprintf(index_err, sizeof index_err, "%s", al_last_error());
  al_clear_error();
  return inspect_manifest(&a, index_err);
}
