/* Shape bucket tables (default, text, JSON) and sample-to-bucket assignment. */
#include "planner/al_buckets.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "planner/bucket_table_internal.h"
#include "common/text_read_internal.h"

#define MAX_FRAMES 64
#define MAX_ASPECTS 64
#define MAX_SIZES 1024

void al_bucket_table_free(al_bucket_table *t) {
  if (!t) return;
  free(t->aspects);
  free(t->sizes);
  free(t->frames);
  free(t);
}

static al_bucket_table *table_alloc(void) {
  al_bucket_table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->aspects = calloc(MAX_ASPECTS, sizeof *t->aspects);
  t->sizes = calloc(MAX_SIZES, sizeof *t->sizes);
  t->frames = calloc(MAX_FRAMES, sizeof *t->frames);
  if (!t->aspects || !t->sizes || !t->frames) {
    al_bucket_table_free(t);
    return NULL;
  }
  return t;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

static int cmp_size_area(const void *a, const void *b) {
  const bucket_table_size *x = a, *y = b;
  uint64_t ax = (uint64_t)x->w * x->h, ay = (uint64_t)y->w * y->h;
  if (ax != ay) return (ax > ay) - (ax < ay);
  return (x->w > y->w) - (x->w < y->w);
}

/* Sorts sizes by area inside each group and frames ascending, drops duplicate
 * frame counts, and checks that nothing is empty. */
static int table_finish(al_bucket_table *t, const char *name) {
  if (!t->n_frames) return al_set_error(AL_EFORMAT, "%s: no 'frames' given", name);
  if (!t->n_aspects) return al_set_error(AL_EFORMAT, "%s: no aspect group given", name);
  qsort(t->frames, t->n_frames, sizeof *t->frames, cmp_u32);
  size_t k = 0;
  for (size_t i = 0; i < t->n_frames; i++)
    if (!k || t->frames[k - 1] != t->frames[i]) t->frames[k++] = t->frames[i];
  t->n_frames = k;
  for (size_t a = 0; a < t->n_aspects; a++) {
    bucket_table_aspect *g = &t->aspects[a];
    if (!g->n_sizes)
      return al_set_error(AL_EFORMAT, "%s: aspect group '%s' has no sizes", name, g->name);
    qsort(t->sizes + g->first, g->n_sizes, sizeof *t->sizes, cmp_size_area);
    for (size_t i = 1; i < g->n_sizes; i++) {
      const bucket_table_size *p = &t->sizes[g->first + i - 1], *q = &t->sizes[g->first + i];
      if (p->w == q->w && p->h == q->h)
        return al_set_error(AL_EFORMAT, "%s: aspect group '%s' lists %ux%u twice", name, g->name,
                            q->w, q->h);
    }
  }
  return AL_OK;
}

static int parse_ratio(const char *s, uint32_t *rw, uint32_t *rh) {
  char *end;
  errno = 0;
  unsigned long a = strtoul(s, &end, 10);
  if (end == s || *end != ':' || errno) return -1;
  const char *s2 = end + 1;
  unsigned long b = strtoul(s2, &end, 10);
  if (end == s2 || *end || errno || !a || !b || a > 1000 || b > 1000) return -1;
  *rw = (uint32_t)a;
  *rh = (uint32_t)b;
  return 0;
}

static int add_aspect(al_bucket_table *t, const char *gname, const char *where) {
  if (t->n_aspects == MAX_ASPECTS)
    return al_set_error(AL_ERANGE, "%s: more than %d aspect groups", where, MAX_ASPECTS);
  bucket_table_aspect *g = &t->aspects[t->n_aspects];
  if (strlen(gname) >= sizeof g->name || parse_ratio(gname, &g->rw, &g->rh))
    return al_set_error(AL_EFORMAT, "%s: aspect '%s' is not a ratio W:H (e.g. 16:9)", where, gname);
  for (size_t i = 0; i < t->n_aspects; i++)
    if (!strcmp(t->aspects[i].name, gname))
      return al_set_error(AL_EFORMAT, "%s: aspect '%s' given twice", where, gname);
  strcpy(g->name, gname);
  g->first = t->n_sizes;
  g->n_sizes = 0;
  t->n_aspects++;
  return AL_OK;
}

static int add_size(al_bucket_table *t, uint64_t w, uint64_t h, const char *where) {
  if (!w || !h || w > 65536 || h > 65536)
    return al_set_error(AL_EFORMAT, "%s: size %llux%llu out of range (1..65536)", where,
                        (unsigned long long)w, (unsigned long long)h);
  if (t->n_sizes == MAX_SIZES)
    return al_set_error(AL_ERANGE, "%s: more than %d sizes", where, MAX_SIZES);
  t->sizes[t->n_sizes].w = (uint32_t)w;
  t->sizes[t->n_sizes].h = (uint32_t)h;
  t->n_sizes++;
  t->aspects[t->n_aspects - 1].n_sizes++;
  return AL_OK;
}

static int add_frames(al_bucket_table *t, uint64_t f, const char *where) {
  if (!f || f > 100000)
    return al_set_error(AL_EFORMAT, "%s: frame count %llu out of range (1..100000)", where,
                        (unsigned long long)f);
  if (t->n_frames == MAX_FRAMES)
    return al_set_error(AL_ERANGE, "%s: more than %d frame counts", where, MAX_FRAMES);
  t->frames[t->n_frames++] = (uint32_t)f;
  return AL_OK;
}

/* ------------------------------------------------------------ default -- */

static uint32_t round16(double v) {
  long r = lround(v / 16.0);
  return (uint32_t)(r < 1 ? 16 : r * 16);
}

int al_bucket_table_default(al_bucket_table **out) {
  static const struct {
    const char *name;
    uint32_t rw, rh;
  } ASPECTS[] = {
      {"1:1", 1, 1}, {"4:3", 4, 3}, {"3:2", 3, 2},   {"16:9", 16, 9}, {"21:9", 21, 9},
      {"3:4", 3, 4}, {"2:3", 2, 3}, {"9:16", 9, 16}, {"9:21", 9, 21},
  };
  /* Area levels, named by their 16:9 size (Wan's canonical resolutions). */
  static const uint32_t LEVELS[][2] = {{336, 192}, {416, 240}, {640, 368}, {832, 480}, {1280, 720}};
  static const uint32_t FRAMES[] = {1, 17, 33, 49, 65, 81, 97, 121};
  *out = NULL;
  al_bucket_table *t = table_alloc();
  if (!t) return al_set_error(AL_ENOMEM, "bucket table: out of memory");
  int rc = AL_OK;
  for (size_t i = 0; i < sizeof FRAMES / sizeof FRAMES[0] && !rc; i++)
    rc = add_frames(t, FRAMES[i], "default");
  for (size_t a = 0; a < sizeof ASPECTS / sizeof ASPECTS[0] && !rc; a++) {
    rc = add_aspect(t, ASPECTS[a].name, "default");
    for (size_t l = 0; l < sizeof LEVELS / sizeof LEVELS[0] && !rc; l++) {
      uint32_t w, h;
      uint32_t rw = ASPECTS[a].rw, rh = ASPECTS[a].rh;
      if (rw == 16 && rh == 9) {
        w = LEVELS[l][0], h = LEVELS[l][1];
      } else if (rw == 9 && rh == 16) {
        w = LEVELS[l][1], h = LEVELS[l][0];
      } else {
        /* The lowest level is the 240x240 square (so 240p squares have a
         * bucket); 336x192 is the nearest 16:9 size of Wan's smallest. */
        double area = l == 0 ? 240.0 * 240.0 : (double)LEVELS[l][0] * LEVELS[l][1];
        w = round16(sqrt(area * rw / rh));
        h = round16(sqrt(area * rh / rw));
      }
      rc = add_size(t, w, h, "default");
    }
  }
  if (!rc) rc = table_finish(t, "default bucket table");
  if (rc) {
    al_bucket_table_free(t);
    return rc;
  }
  *out = t;
  return AL_OK;
}

/* --------------------------------------------------------------- text -- */

static int parse_text(al_bucket_table *t, const char *text, size_t len, const char *name) {
  size_t pos = 0;
  unsigned line = 0;
  char buf[4096];
  while (pos < len) {
    size_t e = pos;
    while (e < len && text[e] != '\n') e++;
    line++;
    size_t n = e - pos;
    if (n >= sizeof buf)
      return al_set_error(AL_EFORMAT, "%s: line %u: longer than %zu bytes", name, line,
                          sizeof buf - 1);
    memcpy(buf, text + pos, n);
    buf[n] = 0;
    pos = e + 1;
    char *hash = strchr(buf, '#');
    if (hash) *hash = 0;
    char where[600];
    snprintf(where, sizeof where, "%s: line %u", name, line);
    char *save = NULL;
    char *tok = strtok_r(buf, " \t\r,", &save);
    if (!tok) continue;
    if (!strcmp(tok, "frames")) {
      int any = 0;
      while ((tok = strtok_r(NULL, " \t\r,", &save))) {
        char *end;
        errno = 0;
        unsigned long long f = strtoull(tok, &end, 10);
        if (end == tok || *end || errno || tok[0] == '-')
          return al_set_error(AL_EFORMAT, "%s: frame count '%s' is not a positive integer", where,
                              tok);
        int rc = add_frames(t, f, where);
        if (rc) return rc;
        any = 1;
      }
      if (!any)
        return al_set_error(AL_EFORMAT, "%s: 'frames' needs at least one frame count", where);
    } else if (!strcmp(tok, "aspect")) {
      char *gname = strtok_r(NULL, " \t\r,", &save);
      if (!gname) return al_set_error(AL_EFORMAT, "%s: 'aspect' needs a name W:H", where);
      int rc = add_aspect(t, gname, where);
      if (rc) return rc;
      while ((tok = strtok_r(NULL, " \t\r,", &save))) {
        char *x = strchr(tok, 'x');
        char *end1, *end2;
        unsigned long long w = 0, h = 0;
        int bad = !x || tok[0] == '-' || x[1] == '-';
        if (!bad) {
          errno = 0;
          w = strtoull(tok, &end1, 10);
          h = strtoull(x + 1, &end2, 10);
          bad = end1 != x || end2 == x + 1 || *end2 || errno;
        }
        if (bad)
          return al_set_error(AL_EFORMAT, "%s: size '%s' is not WxH (e.g. 832x480)", where, tok);
        rc = add_size(t, w, h, where);
        if (rc) return rc;
      }
    } else {
      return al_set_error(AL_EFORMAT, "%s: unknown directive '%s' (expected 'frames' or 'aspect')",
                          where, tok);
    }
  }
  return AL_OK;
}

/* --------------------------------------------------------------- JSON -- */

static int json_uint(const json_t *v, uint64_t *out) {
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  return -1;
}

static int parse_json(al_bucket_table *t, const char *text, size_t len, const char *name) {
  json_t *root;
  int rc = text_json_parse(text, len, name, &root);
  if (rc) return rc;
  json_t *frames = json_object_get(root, "frames");
  json_t *aspects = json_object_get(root, "aspects");
  if (!json_is_array(frames) || !json_is_array(aspects)) {
    rc = al_set_error(AL_EFORMAT, "%s: JSON needs arrays \"frames\" and \"aspects\"", name);
    goto cleanup;
  }
  char where[600];
  size_t i;
  json_t *v;
  json_array_foreach(frames, i, v) {
    uint64_t f;
    snprintf(where, sizeof where, "%s: frames[%zu]", name, i);
    if (json_uint(v, &f)) {
      rc = al_set_error(AL_EFORMAT, "%s: not a non-negative integer", where);
      goto cleanup;
    }
    if ((rc = add_frames(t, f, where))) goto cleanup;
  }
  json_array_foreach(aspects, i, v) {
    snprintf(where, sizeof where, "%s: aspects[%zu]", name, i);
    const char *gname = json_string_value(json_object_get(v, "name"));
    json_t *sizes = json_object_get(v, "sizes");
    if (!gname || !json_is_array(sizes)) {
      rc = al_set_error(AL_EFORMAT,
                        "%s: needs \"name\" (string W:H) and \"sizes\" (array of [W, H])", where);
      goto cleanup;
    }
    if ((rc = add_aspect(t, gname, where))) goto cleanup;
    size_t j;
    json_t *s;
    json_array_foreach(sizes, j, s) {
      uint64_t w, h;
      snprintf(where, sizeof where, "%s: aspects[%zu].sizes[%zu]", name, i, j);
      if (!json_is_array(s) || json_array_size(s) != 2 || json_uint(json_array_get(s, 0), &w) ||
          json_uint(json_array_get(s, 1), &h)) {
        rc = al_set_error(AL_EFORMAT, "%s: not [W, H]", where);
        goto cleanup;
      }
      if ((rc = add_size(t, w, h, where))) goto cleanup;
    }
  }
cleanup:
  json_decref(root);
  return rc;
}

int al_bucket_table_parse(al_bucket_table **out, const char *text, size_t len, const char *name) {
  if (!out || (!text && len))
    return al_set_error(AL_EINVAL, "al_bucket_table_parse: NULL argument");
  *out = NULL;
  if (!name) name = "bucket table";
  al_bucket_table *t = table_alloc();
  if (!t) return al_set_error(AL_ENOMEM, "%s: out of memory", name);
  int rc = text_is_json(text, len) ? parse_json(t, text, len, name)
                                   : parse_text(t, text, len, name);
  if (!rc) rc = table_finish(t, name);
  if (rc) {
    al_bucket_table_free(t);
    return rc;
  }
  *out = t;
  return AL_OK;
}

int al_bucket_table_load(al_bucket_table **out, const char *path) {
  if (!out || !path) return al_set_error(AL_EINVAL, "al_bucket_table_load: NULL argument");
  *out = NULL;
  char *buf;
  size_t n;
  int rc = text_read_file(path, 1 << 20, "bucket table", &buf, &n);
  if (rc) return rc;
  rc = al_bucket_table_parse(out, buf, n, path);
  free(buf);
  return rc;
}

/* ------------------------------------------------------------ queries -- */

size_t al_bucket_table_count(const al_bucket_table *t) { return t ? t->n_sizes * t->n_frames : 0; }

int al_bucket_table_get(const al_bucket_table *t, size_t id, al_bucket_shape *caller) {
  if (!t || !caller) return al_set_error(AL_EINVAL, "al_bucket_table_get: NULL argument");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_bucket_shape), AL_BUCKET_SHAPE_V1,
                           "al_bucket_table_get", "al_bucket_shape", &n);
  if (rc) return rc;
  if (id >= al_bucket_table_count(t))
    return al_set_error(AL_ERANGE, "bucket %zu out of range (table has %zu)", id,
                        al_bucket_table_count(t));
  size_t s = id / t->n_frames;
  al_bucket_shape out = AL_BUCKET_SHAPE_INIT;
  out.width = t->sizes[s].w;
  out.height = t->sizes[s].h;
  out.frames = t->frames[id % t->n_frames];
  out.aspect = "";
  for (size_t a = 0; a < t->n_aspects; a++)
    if (s >= t->aspects[a].first && s < t->aspects[a].first + t->aspects[a].n_sizes)
      out.aspect = t->aspects[a].name;
  struct_out(caller, &out, n);
  return AL_OK;
}

int al_bucket_table_check(const al_bucket_table *t, const al_latent_geom *gin) {
  al_latent_geom g = al_latent_geom_resolve(gin);
  uint64_t fw = (uint64_t)g.vae_stride_s * g.patch_w, fh = (uint64_t)g.vae_stride_s * g.patch_h;
  for (size_t a = 0; a < t->n_aspects; a++)
    for (size_t i = 0; i < t->aspects[a].n_sizes; i++) {
      const bucket_table_size *s = &t->sizes[t->aspects[a].first + i];
      if (s->w % fw || s->h % fh)
        return al_set_error(AL_EINVAL,
                            "bucket size %ux%u (aspect %s) is not a multiple of the %llux%llu patch footprint",
                            s->w, s->h, t->aspects[a].name, (unsigned long long)fw,
                            (unsigned long long)fh);
    }
  return AL_OK;
}

int al_bucket_table_write(const al_bucket_table *t, FILE *out) {
  fprintf(out, "frames");
  for (size_t i = 0; i < t->n_frames; i++) fprintf(out, " %u", t->frames[i]);
  fprintf(out, "\n");
  for (size_t a = 0; a < t->n_aspects; a++) {
    fprintf(out, "aspect %s", t->aspects[a].name);
    for (size_t i = 0; i < t->aspects[a].n_sizes; i++)
      fprintf(out, " %ux%u", t->sizes[t->aspects[a].first + i].w,
              t->sizes[t->aspects[a].first + i].h);
    fprintf(out, "\n");
  }
  return ferror(out) ? al_set_error(AL_EIO, "bucket table: write failed") : AL_OK;
}

const char *al_reject_reason_name(al_reject_reason r) {
  switch (r) {
    case AL_REJECT_NONE: return "none";
    case AL_REJECT_BAD_SHAPE: return "zero width, height or frames";
    case AL_REJECT_TOO_SMALL: return "smaller than every bucket of its aspect group";
    case AL_REJECT_TOO_FEW_FRAMES: return "fewer frames than the smallest bucket frame count";
    case AL_REJECT_OVER_MEMORY: return "every fitting bucket exceeds the memory cap (mem-tokens)";
    case AL_REJECT_LATENT_GRID:
      return "no bucket's latent grid fits inside the sample's latent grid (crop only)";
    default: return "unknown";
  }
}

/* ------------------------------------------------------------- assign -- */

int al_bucket_assign(const al_bucket_table *t, const al_latent_geom *g, uint64_t max_tokens,
                     uint32_t width, uint32_t height, uint32_t frames, uint32_t *bucket,
                     al_reject_reason *reason) {
  return al_bucket_assign_grid(t, g, max_tokens, width, height, frames, NULL, bucket, reason);
}

int al_bucket_assign_grid(const al_bucket_table *t, const al_latent_geom *gin, uint64_t max_tokens,
                          uint32_t width, uint32_t height, uint32_t frames,
                          const al_latent_grid *grid, uint32_t *bucket, al_reject_reason *reason) {
  *reason = AL_REJECT_NONE;
  if (!width || !height || !frames || (grid && (!grid->t || !grid->h || !grid->w))) {
    *reason = AL_REJECT_BAD_SHAPE;
    return AL_ENOTFOUND;
  }
  al_latent_geom g = al_latent_geom_resolve(gin);
  /* Nearest ratio in log space without a log: the larger of x and 1/x, where
   * x = (W/H) / (rw/rh), is monotone in |ln x|. */
  size_t best = 0;
  double best_d = INFINITY;
  for (size_t a = 0; a < t->n_aspects; a++) {
    double x = ((double)width * t->aspects[a].rh) / ((double)height * t->aspects[a].rw);
    double d = x >= 1.0 ? x : 1.0 / x;
    if (d < best_d) best_d = d, best = a;
  }
  const bucket_table_aspect *grp = &t->aspects[best];
  if (frames < t->frames[0]) {
    *reason = AL_REJECT_TOO_FEW_FRAMES;
    return AL_ENOTFOUND;
  }
  size_t nf = t->n_frames;
  while (nf > 1 && t->frames[nf - 1] > frames) nf--;
  int fits_dims = 0, fits_grid = 0;
  for (size_t i = grp->n_sizes; i-- > 0;) {
    size_t s = grp->first + i;
    if (t->sizes[s].w > width || t->sizes[s].h > height) continue;
    fits_dims = 1;
    if (grid &&
        (t->sizes[s].w / g.vae_stride_s > grid->w || t->sizes[s].h / g.vae_stride_s > grid->h))
      continue;
    for (size_t f = nf; f-- > 0;) {
      if (grid && 1 + (t->frames[f] - 1) / g.vae_stride_t > grid->t) continue;
      fits_grid = 1;
      uint64_t tok = al_tokens(&g, t->sizes[s].w, t->sizes[s].h, t->frames[f]);
      if (!tok) continue;
      if (!max_tokens || tok <= max_tokens) {
        *bucket = (uint32_t)(s * t->n_frames + f);
        return AL_OK;
      }
    }
  }
  *reason = !fits_dims   ? AL_REJECT_TOO_SMALL
            : !fits_grid ? AL_REJECT_LATENT_GRID
                         : AL_REJECT_OVER_MEMORY;
  return AL_ENOTFOUND;
}
