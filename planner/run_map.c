/* run_map.c - the index map a chunked run reads instead of a loaded index (al_run.h): built in
 * memory from an input, saved, and opened from a file (layout: run_map_internal.h) with
 * mmap(PROT_READ, MAP_SHARED), so the ranks of a node share one copy in the page cache and the
 * lists are no rank's anonymous memory. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file_internal.h"
#include "common/struct_abi_internal.h"
#include "planner/key_status_internal.h"
#include "planner/run_internal.h"
#include "planner/run_map_internal.h"

/* A map in memory (built from an input: own_*) or mapped from a file (base). */
struct run_map {
  void *base;
  size_t len;
  const map_header *h;
  const map_class *cls;
  const uint32_t *lists;
  map_header own_h;
  map_class *own_cls;
  uint32_t *own_lists;
};

void run_map_close(run_map *m) {
  if (!m) return;
  if (m->base) munmap(m->base, m->len);
  free(m->own_cls);
  free(m->own_lists);
  free(m);
}

/* ---- writing ---- */

/* The classes of the input (sorted, each with its first entry in the lists) and every
 * position's class. */
static int classify(const al_plan_input *in, const al_latent_grid *grid, const uint8_t *excl,
                    map_class **out, size_t *n_out, uint32_t *class_of) {
  map_table t;
  map_table_init(&t);
  int rc = AL_OK;
  for (size_t i = 0; i < in->n && !rc; i++) {
    map_class c = {in->width[i], in->height[i], in->frames[i], 0, 0, 0, 0, 0, 0, 0};
    if (grid && grid[i].t) c.grid_t = grid[i].t, c.grid_h = grid[i].h, c.grid_w = grid[i].w;
    if (excl && excl[i]) c = (map_class){0, 0, 0, 0, 0, 0, MAP_LACKS_MEMBER, 0, 0, 0};
    rc = map_table_find(&t, &c, &class_of[i]);
    if (!rc) t.cls[class_of[i]].count++;
  }
  uint32_t *renum = rc ? NULL : malloc((t.n ? t.n : 1) * sizeof *renum);
  if (!rc && !renum) rc = al_set_error(AL_ENOMEM, "index map: out of memory");
  if (!rc) rc = map_table_sort(&t, renum);
  for (size_t i = 0; i < in->n && !rc; i++) class_of[i] = renum[class_of[i]];
  free(renum);
  free(t.slot);
  if (rc) {
    free(t.cls);
    return rc;
  }
  *out = t.cls;
  *n_out = t.n;
  return AL_OK;
}

int run_map_build(run_map **out, const al_plan_input *in, const al_latent_grid *grid,
                  const uint8_t *excl) {
  if (in->n > UINT32_MAX) return al_set_error(AL_ERANGE, "a run holds at most 2^32 - 1 samples");
  run_map *m = calloc(1, sizeof *m);
  uint32_t *class_of = malloc((in->n ? in->n : 1) * sizeof *class_of);
  if (m) m->own_lists = malloc((in->n ? in->n : 1) * sizeof *m->own_lists);
  size_t n_cls = 0;
  int rc = m && class_of && m->own_lists ? AL_OK : al_set_error(AL_ENOMEM, "plan: out of memory");
  if (!rc) rc = classify(in, grid, excl, &m->own_cls, &n_cls, class_of);
  if (!rc) {
    uint64_t *fill = calloc(n_cls ? n_cls : 1, sizeof *fill);
    if (!fill) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
    for (size_t i = 0; i < in->n && !rc; i++) {
      uint32_t c = class_of[i];
      m->own_lists[m->own_cls[c].first + fill[c]++] = (uint32_t)i;
    }
    free(fill);
  }
  free(class_of);
  if (rc) {
    run_map_close(m);
    return rc;
  }
  map_header *h = &m->own_h;
  map_header_fill(h, in->n, n_cls, in->index_fingerprint);
  m->h = h, m->cls = m->own_cls, m->lists = m->own_lists;
  *out = m;
  return AL_OK;
}

int run_map_save(const run_map *m, const char *path) {
  const map_header *h = m->h;
  size_t n_cls = (size_t)h->n_classes, n = (size_t)h->n_samples;
  afile *f = NULL;
  int rc = afile_create(&f, path);
  if (rc) return rc;
  FILE *s = afile_stream(f);
  static const char zeros[4096];
  size_t pad = h->list_off - MAP_HEADER - n_cls * sizeof(map_class);
  int ok = fwrite(h, sizeof *h, 1, s) == 1 && fwrite(zeros, MAP_HEADER - sizeof *h, 1, s) == 1 &&
           (!n_cls || fwrite(m->cls, sizeof(map_class), n_cls, s) == n_cls) &&
           (!pad || fwrite(zeros, pad, 1, s) == 1) &&
           (!n || fwrite(m->lists, sizeof *m->lists, n, s) == n);
  if (!ok) {
    afile_abort(f);
    return al_set_error(AL_EIO, "%s: writing the index map failed", path);
  }
  return afile_commit(f);
}

/* ---- reading ---- */

static int map_bad(const char *path, const char *what) {
  return al_set_error(AL_EFORMAT, "%s: not an index map of this library (%s)", path, what);
}

/* Positions a block of the exactly-once check covers: its bitmap is 2 MiB, cache-resident. */
#define CHECK_BLOCK (UINT64_C(1) << 24)

/* Every position below n_samples exactly once in the lists, each class's ascending: the lists
 * swept block by block of positions, every class's cursor advanced through the block, so the
 * check holds one block's bitmap and a cursor a class (not a bit per sample) and touches the
 * bitmap where the cache has it. */
static int check_lists(const run_map *m, const char *path) {
  uint64_t n = m->h->n_samples, nc = m->h->n_classes;
  uint64_t *at = malloc((nc ? nc : 1) * sizeof *at);
  uint64_t *bits = malloc(CHECK_BLOCK / 8);
  if (!at || !bits) {
    free(at), free(bits);
    return al_set_error(AL_ENOMEM, "%s: out of memory", path);
  }
  for (uint64_t c = 0; c < nc; c++) at[c] = m->cls[c].first;
  int rc = AL_OK;
  for (uint64_t lo = 0; lo < n && !rc; lo += CHECK_BLOCK) {
    uint64_t hi = n - lo < CHECK_BLOCK ? n : lo + CHECK_BLOCK;
    memset(bits, 0, (hi - lo + 63) / 64 * sizeof *bits);
    for (uint64_t c = 0; c < nc && !rc; c++) {
      uint64_t first = m->cls[c].first, end = first + m->cls[c].count, i = at[c];
      for (; i < end && m->lists[i] < hi; i++) {
        uint64_t x = m->lists[i];
        if ((i > first && x <= m->lists[i - 1]) || x < lo) {
          rc = map_bad(path, "a class's positions not ascending");
          break;
        }
        x -= lo;
        if (bits[x / 64] >> (x % 64) & 1) {
          rc = map_bad(path, "a position twice");
          break;
        }
        bits[x / 64] |= UINT64_C(1) << (x % 64);
      }
      at[c] = i;
    }
  }
  for (uint64_t c = 0; c < nc && !rc; c++)
    if (at[c] != m->cls[c].first + m->cls[c].count)
      rc = map_bad(path, "a position past the samples");
  free(at);
  free(bits);
  return rc;
}

static int map_open(run_map **out, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return al_set_error(AL_EIO, "%s: cannot open the index map", path);
  struct stat st;
  run_map *m = calloc(1, sizeof *m);
  int rc = m && !fstat(fd, &st) ? AL_OK : al_set_error(AL_EIO, "%s: cannot stat", path);
  if (!rc && (size_t)st.st_size < MAP_HEADER) rc = map_bad(path, "shorter than its header");
  if (!rc) {
    m->len = (size_t)st.st_size;
    m->base = mmap(NULL, m->len, PROT_READ, MAP_SHARED, fd, 0);
    if (m->base == MAP_FAILED) m->base = NULL, rc = al_set_error(AL_EIO, "%s: cannot map", path);
  }
  close(fd);
  if (!rc) {
    const map_header *h = m->h = m->base;
    if (memcmp(h->magic, MAP_MAGIC, 8))
      rc = map_bad(path, "magic");
    else if (h->bom != MAP_BOM)
      rc = map_bad(path, "byte order of another machine");
    else if (h->version != MAP_VERSION)
      rc = map_bad(path, "version");
    else if (h->n_samples > UINT32_MAX || h->n_classes > h->n_samples + 1 ||
             h->class_off != MAP_HEADER ||
             h->list_off < MAP_HEADER + h->n_classes * sizeof(map_class) || h->list_off > m->len ||
             (m->len - h->list_off) / 4 < h->n_samples)
      rc = map_bad(path, "sizes");
  }
  if (!rc) {
    m->cls = (const map_class *)((const char *)m->base + m->h->class_off);
    m->lists = (const uint32_t *)((const char *)m->base + m->h->list_off);
    uint64_t first = 0;
    for (uint64_t c = 0; c < m->h->n_classes && !rc; c++) {
      if (m->cls[c].first != first || m->cls[c].count > m->h->n_samples - first)
        rc = map_bad(path, "class lists");
      first += m->cls[c].count;
    }
    if (!rc && first != m->h->n_samples) rc = map_bad(path, "class counts");
    /* Every position exactly once: what makes every sample drawn once per pass. */
    if (!rc) rc = check_lists(m, path);
  }
  if (rc) {
    run_map_close(m);
    return rc;
  }
  *out = m;
  return AL_OK;
}

int run_map_concat(run_map **out, const char *const *paths, size_t count, uint64_t *n, uint64_t *fp,
                   uint64_t fp_all_seed) {
  *out = NULL;
  run_map **one = calloc(count ? count : 1, sizeof *one);
  if (!one) return al_set_error(AL_ENOMEM, "plan: out of memory");
  int rc = AL_OK;
  uint64_t samples = 0, classes = 0, fp_all = fp_all_seed;
  for (size_t i = 0; i < count && !rc; i++) {
    rc = map_open(&one[i], paths[i]);
    if (rc) break;
    n[i] = one[i]->h->n_samples;
    fp[i] = one[i]->h->index_fingerprint;
    samples += n[i];
    classes += one[i]->h->n_classes;
    run_fp_add(&fp_all, fp[i]);
    run_fp_add(&fp_all, n[i]);
  }
  if (!rc && samples > UINT32_MAX)
    rc = al_set_error(AL_ERANGE, "mixture: %llu samples in all, above 2^32 - 1",
                      (unsigned long long)samples);
  run_map *m = rc ? NULL : calloc(1, sizeof *m);
  if (!rc && m) {
    m->own_cls = malloc((classes ? classes : 1) * sizeof *m->own_cls);
    m->own_lists = malloc((samples ? samples : 1) * sizeof *m->own_lists);
  }
  if (!rc && (!m || !m->own_cls || !m->own_lists))
    rc = al_set_error(AL_ENOMEM, "plan: out of memory for the maps' %llu positions",
                      (unsigned long long)samples);
  uint64_t c0 = 0, base = 0;
  for (size_t i = 0; i < count && !rc; i++) {
    const run_map *x = one[i];
    for (uint64_t c = 0; c < x->h->n_classes; c++) {
      m->own_cls[c0 + c] = x->cls[c];
      m->own_cls[c0 + c].first += base;
    }
    for (uint64_t j = 0; j < x->h->n_samples; j++)
      m->own_lists[base + j] = x->lists[j] + (uint32_t)base;
    c0 += x->h->n_classes;
    base += x->h->n_samples;
  }
  for (size_t i = 0; i < count; i++) run_map_close(one[i]);
  free(one);
  if (rc) {
    run_map_close(m);
    return rc;
  }
  map_header_fill(&m->own_h, samples, classes, fp_all ? fp_all : 1);
  m->h = &m->own_h, m->cls = m->own_cls, m->lists = m->own_lists;
  *out = m;
  return AL_OK;
}

/* The run's template from the classes: plan_prepare on one input position per class (its
 * status then per class), then every count scaled from classes to their samples. */
static int prepare_classes(al_run *r, const run_map *m, const al_cost_model *cost,
                           const al_plan_options *o, uint64_t **items, size_t *n_items) {
  size_t n = (size_t)m->h->n_classes;
  uint32_t *shape = malloc((n ? 3 * n : 3) * sizeof *shape);
  al_latent_grid *grid = calloc(n ? n : 1, sizeof *grid);
  if (!shape || !grid) {
    free(shape), free(grid);
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  }
  int grids = 0;
  for (size_t c = 0; c < n; c++) {
    /* A class lacking a member is a zero-sized shape, which no bucket takes (relabelled below). */
    shape[c] = m->cls[c].width, shape[n + c] = m->cls[c].height,
    shape[2 * n + c] = m->cls[c].frames;
    grid[c].t = m->cls[c].grid_t, grid[c].h = m->cls[c].grid_h, grid[c].w = m->cls[c].grid_w;
    grids |= grid[c].t != 0;
  }
  al_plan_input in = {sizeof in, n, shape, shape + n, shape + 2 * n, m->h->index_fingerprint};
  int rc = plan_prepare(r->tmpl, &in, grids ? grid : NULL, cost, o, items, n_items);
  free(shape);
  free(grid);
  if (rc) return rc;
  al_plan *p = r->tmpl;
  for (size_t b = 0; b < p->n_buckets; b++) p->buckets[b].samples = 0;
  for (size_t i = 0; i < *n_items; i++) {
    uint64_t c = (uint32_t)(*items)[i];
    p->buckets[(*items)[i] >> 32].samples += m->cls[c].count;
  }
  memset(p->rejected, 0, sizeof p->rejected);
  for (int k = 0; k < AL_REJECT_COUNT; k++) p->first_rejected[k] = UINT64_MAX;
  for (size_t c = 0; c < n; c++) {
    if (m->cls[c].flags & MAP_LACKS_MEMBER) p->status[c] = AL_KEY_NO_MEMBER;
    uint8_t s = p->status[c];
    if (!s || s == AL_KEY_NO_MEMBER || !m->cls[c].count) continue;
    p->rejected[s] += m->cls[c].count;
    p->rejected[AL_REJECT_NONE] += m->cls[c].count;
    uint64_t first = m->lists[m->cls[c].first];
    if (first < p->first_rejected[s]) p->first_rejected[s] = first;
  }
  p->index_samples = m->h->n_samples;
  p->micro_tokens = p->mem_tokens;
  plan_size_buckets(p);
  return AL_OK;
}

/* The planned classes grouped by bucket (class order within one) and the rejected ones. */
static int group_classes(al_run *r, const run_map *m, const uint64_t *items, size_t n_items) {
  const al_plan *p = r->tmpl;
  size_t nb = p->n_buckets, n = (size_t)m->h->n_classes;
  r->cls = calloc(n_items ? n_items : 1, sizeof *r->cls);
  r->cls_first = calloc(nb + 1, sizeof *r->cls_first);
  r->rejected = calloc(n ? n : 1, sizeof *r->rejected);
  if (!r->cls || !r->cls_first || !r->rejected)
    return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i < n_items; i++) r->cls_first[(items[i] >> 32) + 1]++;
  for (size_t b = 0; b < nb; b++) r->cls_first[b + 1] += r->cls_first[b];
  uint64_t *fill = calloc(nb ? nb : 1, sizeof *fill);
  if (!fill) return al_set_error(AL_ENOMEM, "plan: out of memory");
  for (size_t i = 0; i < n_items; i++) { /* items are in class order: stable */
    size_t b = (size_t)(items[i] >> 32), c = (uint32_t)items[i];
    run_class *k = &r->cls[r->cls_first[b] + fill[b]++];
    k->list = m->lists + m->cls[c].first;
    k->n = m->cls[c].count;
  }
  free(fill);
  r->n_cls = n_items;
  for (size_t c = 0; c < n; c++)
    if (p->status[c] && m->cls[c].count)
      r->rejected[r->n_rejected++] = (run_class){m->lists + m->cls[c].first, m->cls[c].count,
                                                 p->status[c]};
  return AL_OK;
}

int run_open_classes(al_run **out, run_map *map, const al_cost_model *cost,
                     const al_plan_options *o) {
  return run_open_classes_mix(out, map, NULL, cost, o);
}

int run_open_classes_mix(al_run **out, run_map *map, run_mix *mix, const al_cost_model *cost,
                         const al_plan_options *o) {
  int rc = run_check_options(o);
  al_run *r = rc ? NULL : calloc(1, sizeof *r);
  if (!rc && (!r || !(r->tmpl = plan_alloc()))) rc = al_set_error(AL_ENOMEM, "plan: out of memory");
  if (rc) {
    if (r) al_plan_free(r->tmpl);
    free(r);
    run_map_close(map);
    run_mix_free(mix);
    return rc;
  }
  r->map = map;
  r->mix = mix;
  uint64_t *items = NULL;
  size_t n_items = 0;
  rc = prepare_classes(r, map, cost, o, &items, &n_items);
  if (!rc) rc = group_classes(r, map, items, n_items);
  free(items);
  if (!rc) {
    free(r->tmpl->status); /* per class; a plan's key statuses come from the classes */
    r->tmpl->status = NULL;
    rc = run_index_classes(r);
  }
  if (!rc) rc = run_finish(r, o);
  if (rc) {
    al_run_free(r);
    return rc;
  }
  *out = r;
  return AL_OK;
}

int al_run_open_map(al_run **out, const char *path, const al_cost_model *cost,
                    const al_plan_options *opts) {
  if (!out || !path || !cost || !opts)
    return al_set_error(AL_EINVAL, "al_run_open_map: NULL argument");
  *out = NULL;
  al_plan_options o;
  al_cost_model c;
  int rc = struct_in(&o, sizeof o, AL_PLAN_OPTIONS_V1, opts, "al_run_open_map", "al_plan_options");
  if (!rc) rc = struct_in(&c, sizeof c, AL_COST_MODEL_V1, cost, "al_run_open_map", "al_cost_model");
  if (!rc && o.n_require_members)
    rc = al_set_error(AL_EINVAL, "al_run_open_map: require_members needs the index, not its map");
  run_map *m = NULL;
  if (!rc) rc = map_open(&m, path);
  if (!rc) rc = run_open_classes(out, m, &c, &o);
  return rc ? al_error_prefix(rc, "%s", path) : AL_OK;
}

int al_run_map_write(const al_plan_input *in, const char *path) {
  if (!in || !path) return al_set_error(AL_EINVAL, "al_run_map_write: NULL argument");
  al_plan_input i;
  int rc = struct_in(&i, sizeof i, AL_PLAN_INPUT_V1, in, "al_run_map_write", "al_plan_input");
  run_map *m = NULL;
  if (!rc) rc = run_map_build(&m, &i, NULL, NULL);
  if (!rc) rc = run_map_save(m, path);
  run_map_close(m);
  return rc;
}
