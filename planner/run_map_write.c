/* run_map_write.c - the index map's class table and header (run_map_internal.h), and the
 * streaming writer of al_run.h: a map written from two passes over a corpus, holding only its
 * classes and a bounded write buffer per class, never a list of samples. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file_internal.h"
#include "planner/al_run.h"
#include "planner/run_map_internal.h"

/* ---- the class table ---- */

void map_table_init(map_table *t) { memset(t, 0, sizeof *t); }

void map_table_free(map_table *t) {
  free(t->cls);
  free(t->slot);
  memset(t, 0, sizeof *t);
}

static int cmp_class(const void *a, const void *b) {
  const map_class *x = a, *y = b;
  const uint32_t kx[7] = {x->flags,  x->width,  x->height, x->frames,
                          x->grid_t, x->grid_h, x->grid_w};
  const uint32_t ky[7] = {y->flags,  y->width,  y->height, y->frames,
                          y->grid_t, y->grid_h, y->grid_w};
  for (int i = 0; i < 7; i++)
    if (kx[i] != ky[i]) return kx[i] < ky[i] ? -1 : 1;
  return 0;
}

static uint64_t class_hash(const map_class *c) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  const uint32_t k[7] = {c->flags, c->width, c->height, c->frames, c->grid_t, c->grid_h, c->grid_w};
  for (int i = 0; i < 7; i++) h = (h ^ k[i]) * UINT64_C(0x100000001b3);
  return h ^ (h >> 29);
}

/* The slots rebuilt for cap classes (class k at the slot its hash probes to first). */
static int rehash(map_table *t, size_t cap) {
  uint32_t *ns = calloc(2 * cap, sizeof *ns);
  if (!ns) return al_set_error(AL_ENOMEM, "index map: out of memory");
  for (size_t k = 0; k < t->n; k++) {
    size_t s = class_hash(&t->cls[k]) & (2 * cap - 1);
    while (ns[s]) s = (s + 1) & (2 * cap - 1);
    ns[s] = (uint32_t)(k + 1);
  }
  free(t->slot);
  t->slot = ns;
  return AL_OK;
}

int map_table_find(map_table *t, const map_class *c, uint32_t *id) {
  if (!t->cap) {
    t->cls = malloc(1024 * sizeof *t->cls);
    if (!t->cls) return al_set_error(AL_ENOMEM, "index map: out of memory");
    t->cap = 1024;
    int rc = rehash(t, t->cap);
    if (rc) return rc;
  }
  size_t mask = 2 * t->cap - 1, s = class_hash(c) & mask;
  while (t->slot[s] && cmp_class(&t->cls[t->slot[s] - 1], c)) s = (s + 1) & mask;
  if (!t->slot[s]) {
    if (t->n == UINT32_MAX - 1)
      return al_set_error(AL_ERANGE, "index map: more than 2^32 - 2 classes");
    if (t->n + 1 > t->cap) { /* grow and rehash */
      map_class *nc = realloc(t->cls, 2 * t->cap * sizeof *nc);
      if (!nc) return al_set_error(AL_ENOMEM, "index map: out of memory");
      t->cls = nc;
      t->cap *= 2;
      int rc = rehash(t, t->cap);
      if (rc) return rc;
      mask = 2 * t->cap - 1, s = class_hash(c) & mask;
      while (t->slot[s]) s = (s + 1) & mask;
    }
    t->cls[t->n] = *c;
    t->cls[t->n].first = t->cls[t->n].count = 0;
    t->slot[s] = (uint32_t)++t->n;
  }
  *id = t->slot[s] - 1;
  return AL_OK;
}

int map_table_sort(map_table *t, uint32_t *renum) {
  size_t n = t->n;
  for (size_t k = 0; k < n; k++) t->cls[k].first = k; /* remember the old number */
  qsort(t->cls, n, sizeof *t->cls, cmp_class);
  uint64_t first = 0;
  for (size_t k = 0; k < n; k++) {
    renum[t->cls[k].first] = (uint32_t)k;
    t->cls[k].first = first;
    first += t->cls[k].count;
  }
  return n ? rehash(t, t->cap) : AL_OK;
}

void map_header_fill(map_header *h, uint64_t n_samples, uint64_t n_classes, uint64_t fingerprint) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, MAP_MAGIC, 8);
  h->version = MAP_VERSION, h->bom = MAP_BOM;
  h->n_samples = n_samples, h->n_classes = n_classes, h->index_fingerprint = fingerprint;
  h->class_off = MAP_HEADER;
  h->list_off = (MAP_HEADER + n_classes * sizeof(map_class) + 4095) / 4096 * 4096;
}

/* ---- the streaming writer ---- */

/* Write buffers of all classes together: at most this many list entries (64 MiB). */
#define WRITER_BUFFER_ENTRIES (16u << 20)
#define WRITER_CLASS_MAX 16384u
#define WRITER_CLASS_MIN 64u

struct al_run_map_writer {
  char *path;
  uint64_t fingerprint;
  map_table t;
  uint64_t n;      /* samples counted (pass 1) */
  uint64_t placed; /* samples placed (pass 2) */
  int placing;
  map_header h;
  afile *f;
  FILE *s;
  uint64_t *fill;  /* per class: entries placed */
  uint32_t *buf;   /* the classes' buffers, one after another */
  size_t *buf_off; /* per class: its buffer in buf */
  uint32_t *buf_n, *buf_cap;
};

int al_run_map_writer_open(al_run_map_writer **out, const char *path, uint64_t index_fingerprint) {
  if (!out || !path) return al_set_error(AL_EINVAL, "al_run_map_writer_open: NULL argument");
  *out = NULL;
  al_run_map_writer *w = calloc(1, sizeof *w);
  if (!w || !(w->path = strdup(path))) {
    free(w);
    return al_set_error(AL_ENOMEM, "index map: out of memory");
  }
  map_table_init(&w->t);
  w->fingerprint = index_fingerprint;
  *out = w;
  return AL_OK;
}

void al_run_map_writer_free(al_run_map_writer *w) {
  if (!w) return;
  afile_abort(w->f);
  map_table_free(&w->t);
  free(w->fill), free(w->buf), free(w->buf_off), free(w->buf_n), free(w->buf_cap);
  free(w->path);
  free(w);
}

static map_class sample_class(uint32_t width, uint32_t height, uint32_t frames,
                              const al_latent_grid *grid) {
  map_class c = {width, height, frames, 0, 0, 0, 0, 0, 0, 0};
  if (grid && grid->t) c.grid_t = grid->t, c.grid_h = grid->h, c.grid_w = grid->w;
  return c;
}

void al_run_map_writer_set_fingerprint(al_run_map_writer *w, uint64_t index_fingerprint) {
  if (w) w->fingerprint = index_fingerprint;
}

int al_run_map_writer_count(al_run_map_writer *w, uint32_t width, uint32_t height, uint32_t frames,
                            const al_latent_grid *grid) {
  if (!w) return al_set_error(AL_EINVAL, "al_run_map_writer_count: NULL argument");
  if (w->placing)
    return al_set_error(AL_EINVAL, "%s: index map: a sample counted after the lists began",
                        w->path);
  if (w->n == UINT32_MAX)
    return al_set_error(AL_ERANGE, "%s: an index map holds at most 2^32 - 1 samples", w->path);
  map_class c = sample_class(width, height, frames, grid);
  uint32_t id;
  int rc = map_table_find(&w->t, &c, &id);
  if (rc) return al_error_prefix(rc, "%s", w->path);
  w->t.cls[id].count++;
  w->n++;
  return AL_OK;
}

/* After pass 1: the classes sorted, their buffers, and the header and class records written. */
static int start_lists(al_run_map_writer *w) {
  size_t n = w->t.n;
  uint32_t *renum = malloc((n ? n : 1) * sizeof *renum);
  int rc = renum ? map_table_sort(&w->t, renum)
                 : al_set_error(AL_ENOMEM, "index map: out of memory");
  free(renum);
  if (rc) return rc;
  w->fill = calloc(n ? n : 1, sizeof *w->fill);
  w->buf_off = calloc(n ? n : 1, sizeof *w->buf_off);
  w->buf_n = calloc(n ? n : 1, sizeof *w->buf_n);
  w->buf_cap = calloc(n ? n : 1, sizeof *w->buf_cap);
  if (!w->fill || !w->buf_off || !w->buf_n || !w->buf_cap)
    return al_set_error(AL_ENOMEM, "index map: out of memory");
  size_t per = n ? WRITER_BUFFER_ENTRIES / n : WRITER_CLASS_MAX, total = 0;
  if (per > WRITER_CLASS_MAX) per = WRITER_CLASS_MAX;
  if (per < WRITER_CLASS_MIN) per = WRITER_CLASS_MIN;
  for (size_t k = 0; k < n; k++) {
    uint64_t cap = w->t.cls[k].count < per ? w->t.cls[k].count : per;
    w->buf_off[k] = total;
    w->buf_cap[k] = (uint32_t)cap;
    total += cap;
  }
  w->buf = malloc((total ? total : 1) * sizeof *w->buf);
  if (!w->buf) return al_set_error(AL_ENOMEM, "index map: out of memory");
  map_header_fill(&w->h, w->n, n, w->fingerprint);
  if ((rc = afile_create(&w->f, w->path))) return rc;
  w->s = afile_stream(w->f);
  static const char zeros[4096];
  size_t pad = w->h.list_off - MAP_HEADER - n * sizeof(map_class);
  int ok = fwrite(&w->h, sizeof w->h, 1, w->s) == 1 &&
           fwrite(zeros, MAP_HEADER - sizeof w->h, 1, w->s) == 1 &&
           (!n || fwrite(w->t.cls, sizeof(map_class), n, w->s) == n) &&
           (!pad || fwrite(zeros, pad, 1, w->s) == 1);
  return ok ? AL_OK : al_set_error(AL_EIO, "%s: writing the index map failed", w->path);
}

/* Class k's buffered entries to their place in the lists. */
static int flush_class(al_run_map_writer *w, size_t k) {
  uint32_t m = w->buf_n[k];
  if (!m) return AL_OK;
  off_t at = (off_t)(w->h.list_off + 4 * (w->t.cls[k].first + w->fill[k] - m));
  if (fseeko(w->s, at, SEEK_SET) || fwrite(w->buf + w->buf_off[k], 4, m, w->s) != m)
    return al_set_error(AL_EIO, "%s: writing the index map failed", w->path);
  w->buf_n[k] = 0;
  return AL_OK;
}

int al_run_map_writer_place(al_run_map_writer *w, uint32_t width, uint32_t height, uint32_t frames,
                            const al_latent_grid *grid) {
  if (!w) return al_set_error(AL_EINVAL, "al_run_map_writer_place: NULL argument");
  int rc = AL_OK;
  if (!w->placing) {
    w->placing = 1;
    if ((rc = start_lists(w))) return al_error_prefix(rc, "%s", w->path);
  }
  if (!w->s) return al_set_error(AL_EINVAL, "%s: index map: writing failed before", w->path);
  map_class c = sample_class(width, height, frames, grid);
  uint32_t id = UINT32_MAX;
  size_t before = w->t.n;
  rc = map_table_find(&w->t, &c, &id);
  if (rc || w->t.n != before || w->fill[id] == w->t.cls[id].count)
    return rc ? al_error_prefix(rc, "%s", w->path)
              : al_set_error(AL_EINVAL,
                             "%s: index map: sample %llu (%ux%u x %u frames) is not what the "
                             "counting pass saw (place the samples counted, in their order)",
                             w->path, (unsigned long long)w->placed, width, height, frames);
  w->buf[w->buf_off[id] + w->buf_n[id]++] = (uint32_t)w->placed++;
  w->fill[id]++;
  return w->buf_n[id] == w->buf_cap[id] ? flush_class(w, id) : AL_OK;
}

int al_run_map_writer_finish(al_run_map_writer *w) {
  if (!w) return al_set_error(AL_EINVAL, "al_run_map_writer_finish: NULL argument");
  int rc = AL_OK;
  if (!w->placing) { /* no sample placed: a corpus of none, or only counted */
    w->placing = 1;
    rc = start_lists(w);
  }
  if (!rc && w->placed != w->n)
    rc = al_set_error(AL_EINVAL, "%s: index map: %llu samples counted, %llu placed", w->path,
                      (unsigned long long)w->n, (unsigned long long)w->placed);
  for (size_t k = 0; k < w->t.n && !rc; k++) rc = flush_class(w, k);
  /* The header again: the fingerprint may have been set after the lists began. */
  w->h.index_fingerprint = w->fingerprint;
  if (!rc && (fseeko(w->s, 0, SEEK_SET) || fwrite(&w->h, sizeof w->h, 1, w->s) != 1))
    rc = al_set_error(AL_EIO, "%s: writing the index map failed", w->path);
  if (!rc) {
    rc = afile_commit(w->f);
    w->f = NULL;
  }
  al_run_map_writer_free(w);
  return rc;
}
