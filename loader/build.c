/*
 * al_index_build: scan shards in parallel (scan.c), merge the per-shard
 * results in the order the shards were given, so the index does not depend on
 * the thread count. Duplicate keys are found during the merge: the first
 * occurrence (in shard order, then tar order) is kept, later ones rejected.
 *
 * Workers run at most WINDOW shards ahead of the merge, so a slow merge never
 * holds more than a few finished shards in memory.
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/grow_internal.h"
#include "loader/dali_idx_internal.h"
#include "loader/hash_internal.h"
#include "loader/index_internal.h"
#include "loader/scan_internal.h"

/* ---------------------------------------------------------- key dedupe -- */

/*
 * Open addressing over sample indexes. A slot holds (top 28 bits of the key's
 * hash) << 36 | (sample + 1); 0 = empty. The probe starts at the hash's top
 * log2(cap) bits, so up to 2^28 slots a rehash needs only the slot words, not
 * the keys (re-reading 10M keys from the arena dominated the merge).
 */
#define DD_IDX_BITS 36
#define DD_IDX_MASK ((UINT64_C(1) << DD_IDX_BITS) - 1)
#define DD_TAG_BITS (64 - DD_IDX_BITS)

typedef struct merger {
  al_index *g;
  uint64_t *slots;
  size_t cap, n;
  unsigned bits; /* cap = 1 << bits */
  index_member_rec *mem;
  size_t mem_cap;
  uint32_t *extmap;
  size_t extmap_cap;
} merger;

static uint64_t key_hash(const char *k, size_t len) { return hash64(k, len, 0x6b6579); }

static size_t home(uint64_t h, unsigned bits) { return (size_t)(h >> (64 - bits)); }

static int mg_rehash(merger *m) {
  unsigned bits = m->bits ? m->bits + 1 : 12;
  size_t cap = (size_t)1 << bits;
  uint64_t *s = calloc(cap, sizeof *s);
  if (!s) return al_set_error(AL_ENOMEM, "out of memory (key table of %zu slots)", cap);
  for (size_t i = 0; i < m->cap; i++) {
    uint64_t v = m->slots[i];
    if (!v) continue;
    uint64_t h;
    if (bits <= DD_TAG_BITS) {
      h = v & ~DD_IDX_MASK; /* the tag is the hash's top bits */
    } else {
      const char *k = m->g->keys + m->g->samples[(v & DD_IDX_MASK) - 1].key;
      h = key_hash(k, strlen(k));
    }
    size_t j = home(h, bits);
    while (s[j]) j = (j + 1) & (cap - 1);
    s[j] = v;
  }
  free(m->slots);
  m->slots = s;
  m->cap = cap;
  m->bits = bits;
  return AL_OK;
}

/* Finds `key`; returns the sample index or -1, and the free slot in *slot. */
static int64_t mg_find(const merger *m, const char *key, size_t len, uint64_t h, size_t *slot) {
  uint64_t tag = h >> DD_IDX_BITS;
  size_t j = home(h, m->bits);
  for (;;) {
    uint64_t v = m->slots[j];
    if (!v) {
      *slot = j;
      return -1;
    }
    if (v >> DD_IDX_BITS == tag) {
      size_t idx = (size_t)(v & DD_IDX_MASK) - 1;
      const char *k = m->g->keys + m->g->samples[idx].key;
      if (memcmp(k, key, len) == 0 && k[len] == '\0') return (int64_t)idx;
    }
    j = (j + 1) & (m->cap - 1);
  }
}

static int merge(merger *m, scan_result *r, const char *path) {
  al_index *g = m->g;
  const al_index *l = r->idx;
  const index_shard_rec *ls = &l->shards[0];
  uint32_t id;
  int rc = index_add_shard_full(g, path, ls->size, ls->mtime_ns, ls->seekable, ls->compression,
                                &id);
  if (rc) return rc;
  rc = grow_array((void **)&m->extmap, &m->extmap_cap, l->exts.n, sizeof *m->extmap,
                  "the extension map");
  if (rc) return rc;
  for (uint32_t i = 0; i < l->exts.n; i++) {
    const char *e = l->exts.strs[i];
    rc = strtab_intern(&g->exts, e, strlen(e), AL_EXT_MAX, &m->extmap[i]);
    if (rc == AL_ERANGE) { /* the index's table is full: samples using it are rejected below */
      al_clear_error();
      m->extmap[i] = UINT32_MAX;
      rc = AL_OK;
    }
    if (rc) return al_error_prefix(rc, "%s", path);
  }
  for (size_t i = 0; i < l->n_rejected; i++) {
    const index_rejected_rec *x = &l->rejected[i];
    rc = al_index_add_rejected(g, id, x->member, x->offset, x->key, x->reason);
    if (rc) return rc;
  }
  size_t tcur = 0, wcur = 0; /* the shard's typed members and warnings, in sample order */
  for (size_t i = 0; i < l->n_samples; i++) {
    const index_sample_rec *s = &l->samples[i];
    const char *key = l->keys + s->key;
    size_t len = strlen(key);
    size_t t0 = tcur, w0 = wcur;
    while (tcur < l->n_typed && (l->typed[tcur] >> AL_TYPED_SHAPE_BITS) < s->member0 + s->n_members)
      tcur++;
    while (wcur < l->n_warnings && l->warnings[wcur].sample == i) wcur++;
    if (g->n_samples + 1 >= DD_IDX_MASK) return al_set_error(AL_ERANGE, "more than 2^36 samples");
    if ((m->n + 1) * 4 > m->cap * 3) {
      rc = mg_rehash(m);
      if (rc) return rc;
    }
    uint64_t h = key_hash(key, len);
    size_t slot = 0;
    int64_t prev = mg_find(m, key, len, h, &slot);
    const index_member_rec *lm = &l->members[s->member0];
    if (prev >= 0) {
      const char *first = g->shards[g->samples[prev].shard].path;
      char name[4096], why[8192];
      snprintf(name, sizeof name, "%s%s%s", key, s->n_members ? "." : "",
               s->n_members ? l->exts.strs[index_member_ext(&lm[0])] : "");
      snprintf(why, sizeof why,
               "duplicate key '%s': first seen in %s (sample %lld, kept); this copy in %s rejected",
               key, first, (long long)prev, path);
      rc = al_index_add_rejected(g, id, name, r->first_hdr[i], key, why);
      if (rc) return rc;
      continue;
    }
    uint32_t over = UINT32_MAX;
    for (uint32_t j = 0; j < s->n_members && over == UINT32_MAX; j++)
      if (m->extmap[index_member_ext(&lm[j])] == UINT32_MAX) over = j;
    if (over != UINT32_MAX) {
      const char *ext = l->exts.strs[index_member_ext(&lm[over])];
      char name[4096], why[512];
      snprintf(name, sizeof name, "%s.%s", key, ext);
      snprintf(why, sizeof why,
               "extension '%.200s' does not fit: an index holds at most %u distinct extensions",
               ext, AL_EXT_MAX);
      rc = al_index_add_rejected(g, id, name, r->first_hdr[i], key, why);
      if (rc) return rc;
      continue;
    }
    rc = grow_array((void **)&m->mem, &m->mem_cap, s->n_members, sizeof *m->mem,
                    "a sample's members");
    if (rc) return rc;
    for (uint32_t j = 0; j < s->n_members; j++) {
      m->mem[j].off_ext = (lm[j].off_ext & ~UINT64_C(0x7FFF)) | m->extmap[index_member_ext(&lm[j])];
      m->mem[j].size = lm[j].size;
    }
    rc = index_add_sample_rec(g, key, len, id, s->width, s->height, s->frames, s->fps, m->mem,
                              s->n_members);
    for (size_t k = t0; k < tcur && !rc; k++) {
      const index_tshape *ts = &l->tshapes[l->typed[k] & AL_TYPED_SHAPES_MAX];
      theader th;
      memset(&th, 0, sizeof th);
      th.dtype = (theader_dtype)ts->dtype;
      th.ndim = ts->ndim;
      memcpy(th.shape, ts->dims, sizeof th.shape);
      th.data_offset = ts->data_offset;
      rc = index_add_member_type(g, (uint32_t)((l->typed[k] >> AL_TYPED_SHAPE_BITS) - s->member0),
                                 &th);
    }
    for (size_t k = w0; k < wcur && !rc; k++) {
      const index_warning_rec *w = &l->warnings[k];
      rc = index_add_warning(g, g->n_samples - 1, id, w->member, w->offset, w->key, w->reason);
    }
    if (rc) return rc;
    m->slots[slot] = (h & ~DD_IDX_MASK) | (uint64_t)g->n_samples;
    m->n++;
  }
  return AL_OK;
}

/* ------------------------------------------------------------- workers -- */

typedef struct build {
  const char *const *paths;
  size_t n;
  meta_fields fields;
  size_t block;
  uint64_t max_member;
  uint32_t vae_t, vae_s;
  scan_result *results;
  char *done;      /* results[i] ready */
  int *fail;       /* scan status per shard (out of memory) */
  char **fail_msg; /* message per failed shard (rare), malloc'd */
  size_t next;     /* next shard to claim */
  size_t merged;   /* shards merged so far */
  size_t window;
  int stop;
  pthread_mutex_t mu;
  pthread_cond_t cv_ready, cv_room;
  scan_progress progress;
  atomic_size_t shards_done;
} build;

static void *worker(void *arg) {
  build *B = arg;
  for (;;) {
    pthread_mutex_lock(&B->mu);
    while (!B->stop && B->next < B->n && B->next >= B->merged + B->window)
      pthread_cond_wait(&B->cv_room, &B->mu);
    if (B->stop || B->next >= B->n) {
      pthread_mutex_unlock(&B->mu);
      return NULL;
    }
    size_t i = B->next++;
    pthread_mutex_unlock(&B->mu);
    scan_result r;
    int rc = scan_shard(B->paths[i], &B->fields, B->block, B->max_member, B->vae_t, B->vae_s,
                        &B->progress, &r);
    pthread_mutex_lock(&B->mu);
    B->results[i] = r;
    B->fail[i] = rc;
    if (rc) B->fail_msg[i] = strdup(al_last_error());
    B->done[i] = 1;
    pthread_cond_broadcast(&B->cv_ready);
    pthread_mutex_unlock(&B->mu);
    atomic_fetch_add(&B->shards_done, 1);
  }
}

/* ------------------------------------------------------------ progress -- */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void progress_line(build *B, double t0, uint64_t total_bytes, int final) {
  double el = now_s() - t0;
  uint64_t bytes = atomic_load(&B->progress.bytes);
  unsigned long long samples = atomic_load(&B->progress.samples);
  double mbs = el > 0 ? bytes / 1e6 / el : 0;
  char eta[32] = "--:--";
  if (bytes > 0 && total_bytes >= bytes) {
    double left = el * (double)(total_bytes - bytes) / (double)bytes;
    snprintf(eta, sizeof eta, "%d:%02d", (int)(left / 60), (int)left % 60);
  }
  fprintf(stderr, "\r\033[Kindex: %zu/%zu shards, %llu samples, %.1f MB/s, ETA %s%s",
          atomic_load(&B->shards_done), B->n, samples, mbs, eta, final ? "\n" : "");
  fflush(stderr);
}

/* ---------------------------------------------------------------- build -- */

static char *absolute(const char *path) {
  if (path[0] == '/') return strdup(path);
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return strdup(path);
  while (path[0] == '.' && path[1] == '/') {
    path += 2;
    while (*path == '/') path++;
  }
  size_t a = strlen(cwd), b = strlen(path);
  char *s = malloc(a + b + 2);
  if (!s) return NULL;
  memcpy(s, cwd, a);
  s[a] = '/';
  memcpy(s + a + 1, path, b + 1);
  return s;
}

int al_index_build(al_index **out, const char *const *shards, size_t n,
                   const al_index_options *opts, al_index_stats *stats) {
  if (!out || (!shards && n)) return al_set_error(AL_EINVAL, "al_index_build: NULL argument");
  *out = NULL;
  if (n == 0) return al_set_error(AL_EINVAL, "al_index_build: no shards given");
  al_index_options o;
  memset(&o, 0, sizeof o);
  if (opts) o = *opts;
  double t0 = now_s();

  build B;
  memset(&B, 0, sizeof B);
  B.paths = shards;
  B.n = n;
  B.fields.width = o.field_width ? o.field_width : index_default_fields[0];
  B.fields.height = o.field_height ? o.field_height : index_default_fields[1];
  B.fields.frames = o.field_frames ? o.field_frames : index_default_fields[2];
  B.fields.fps = o.field_fps ? o.field_fps : index_default_fields[3];
  B.fields.duration = o.field_duration ? o.field_duration : index_default_fields[4];
  B.fields.dims_optional = 1; /* a typed latent member can give them */
  B.vae_t = o.vae_stride_t ? o.vae_stride_t : 4;
  B.vae_s = o.vae_stride_s ? o.vae_stride_s : 8;
  B.block = o.block_size; /* 0: scan.c picks by compression */
  B.max_member = o.max_member_bytes ? o.max_member_bytes : AL_INDEX_MAX_MEMBER_DEFAULT;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t threads = o.threads > 0 ? (size_t)o.threads : (cores > 0 ? (size_t)cores : 1);
  if (threads > n) threads = n;
  B.window = 2 * threads + 2;
  B.results = calloc(n, sizeof *B.results);
  B.done = calloc(n, 1);
  B.fail = calloc(n, sizeof *B.fail);
  B.fail_msg = calloc(n, sizeof *B.fail_msg);
  pthread_t *tids = calloc(threads, sizeof *tids);
  size_t started = 0, readable = 0;
  uint64_t bytes_read = 0;
  merger M;
  memset(&M, 0, sizeof M);
  pthread_mutex_init(&B.mu, NULL);
  pthread_cond_init(&B.cv_ready, NULL);
  pthread_cond_init(&B.cv_room, NULL);
  int rc = (!B.results || !B.done || !B.fail || !B.fail_msg || !tids)
               ? al_set_error(AL_ENOMEM, "out of memory")
               : al_index_new(&M.g);
  const char *names[AL_N_FIELDS] = {B.fields.width, B.fields.height, B.fields.frames, B.fields.fps,
                                    B.fields.duration};
  if (!rc) rc = index_set_fields(M.g, names);
  if (!rc) rc = mg_rehash(&M);
  int show = o.progress > 0 || (o.progress == 0 && isatty(2));
  uint64_t total_bytes = 0;
  if (rc) goto cleanup;
  if (show)
    for (size_t i = 0; i < n; i++) {
      struct stat st;
      if (stat(shards[i], &st) == 0) total_bytes += (uint64_t)st.st_size;
    }

  for (; started < threads; started++)
    if (pthread_create(&tids[started], NULL, worker, &B) != 0) break;
  if (started == 0) rc = al_set_error(AL_ENOMEM, "cannot start indexing threads");

  double last_print = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    pthread_mutex_lock(&B.mu);
    while (!B.done[i]) {
      if (show) {
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 200000000;
        if (dl.tv_nsec >= 1000000000) {
          dl.tv_sec++;
          dl.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&B.cv_ready, &B.mu, &dl);
        if (now_s() - last_print > 0.2) {
          pthread_mutex_unlock(&B.mu);
          progress_line(&B, t0, total_bytes, 0);
          last_print = now_s();
          pthread_mutex_lock(&B.mu);
        }
      } else {
        pthread_cond_wait(&B.cv_ready, &B.mu);
      }
    }
    pthread_mutex_unlock(&B.mu);
    if (B.fail[i]) {
      rc = al_set_error(B.fail[i], "%s: %s", shards[i],
                        B.fail_msg[i] ? B.fail_msg[i] : "out of memory");
    } else {
      char *abs = absolute(shards[i]);
      rc = abs ? merge(&M, &B.results[i], abs) : al_set_error(AL_ENOMEM, "out of memory");
      free(abs);
      readable += (size_t)B.results[i].readable;
      bytes_read += B.results[i].bytes_read;
    }
    scan_result_free(&B.results[i]);
    pthread_mutex_lock(&B.mu);
    B.merged = i + 1;
    pthread_cond_broadcast(&B.cv_room);
    pthread_mutex_unlock(&B.mu);
  }
  if (show && !rc) progress_line(&B, t0, total_bytes, 1);

cleanup:
  pthread_mutex_lock(&B.mu);
  B.stop = 1;
  pthread_cond_broadcast(&B.cv_room);
  pthread_mutex_unlock(&B.mu);
  for (size_t i = 0; i < started; i++) pthread_join(tids[i], NULL);
  for (size_t i = 0; B.results && i < n; i++) scan_result_free(&B.results[i]);
  pthread_mutex_destroy(&B.mu);
  pthread_cond_destroy(&B.cv_ready);
  pthread_cond_destroy(&B.cv_room);
  free(B.results);
  free(B.done);
  free(B.fail);
  for (size_t i = 0; B.fail_msg && i < n; i++) free(B.fail_msg[i]);
  free(B.fail_msg);
  free(tids);
  free(M.slots);
  free(M.mem);
  free(M.extmap);
  if (rc) {
    al_index_free(M.g);
    return rc;
  }
  al_index *idx = M.g;
  index_trim(idx);
  index_record_content_fps(idx); /* a shard gone since its scan keeps 0: mtime is checked */
  if (o.dali_idx_dir) {
    rc = dali_idx_write(idx, o.dali_idx_dir);
    if (rc) {
      al_index_free(idx);
      return rc;
    }
  }
  if (stats) {
    stats->shards = idx->n_shards;
    stats->samples = idx->n_samples;
    stats->rejected = idx->n_rejected;
    stats->bytes = 0;
    for (size_t i = 0; i < idx->n_shards; i++) stats->bytes += idx->shards[i].size;
    stats->seconds = now_s() - t0;
    stats->bytes_read = bytes_read;
    stats->warnings = idx->n_warnings;
  }
  *out = idx;
  if (readable == 0)
    return al_set_error(AL_EFORMAT, "no shard could be read (%zu given); see the rejected list", n);
  if (o.strict && idx->n_rejected)
    return al_set_error(AL_EFORMAT, "%zu rejected entries (strict mode)", idx->n_rejected);
  return AL_OK;
}
