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

#include "common/struct_abi_internal.h"
#include "common/clock_internal.h"
#include "common/grow_internal.h"
#include "loader/dali_idx_internal.h"
#include "loader/hash_internal.h"
#include "loader/index_internal.h"
#include "storage/client_internal.h"
#include "loader/scan_internal.h"
#include "loader/shard_path_internal.h"
#include "storage/storage_internal.h"

/* ---------------------------------------------------------- key dedupe -- */

/*
 * Open addressing over sample indexes. A slot holds (top 28 bits of the key's
 * hash) << 36 | (sample + 1); 0 = empty. The probe starts at the hash's top
 * log2(cap) bits, so up to 2^28 slots a rehash needs only the slot words, not
 * the keys (re-reading 10M keys from the arena dominated the merge).
 */
#define REMOTE_THREADS 8 /* default parallelism of builds with remote shards */
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

/* The shard's record into the merged index (its id in *id), and the map from the shard's
 * extension ids to the index's (UINT32_MAX: the index's table is full). */
static int merge_shard(merger *m, const al_index *l, const char *path, uint32_t *id) {
  const index_shard_rec *ls = &l->shards[0];
  int rc = index_add_shard_full(m->g, path, ls->size, ls->mtime_ns, ls->seekable, ls->compression,
                                id);
  if (rc) return rc;
  if (ls->etag && !(m->g->shards[*id].etag = strdup(ls->etag)))
    return al_set_error(AL_ENOMEM, "out of memory");
  rc = grow_array((void **)&m->extmap, &m->extmap_cap, l->exts.n, sizeof *m->extmap,
                  "the extension map");
  if (rc) return rc;
  for (uint32_t i = 0; i < l->exts.n; i++) {
    const char *e = l->exts.strs[i];
    rc = strtab_intern(&m->g->exts, e, strlen(e), AL_EXT_MAX, &m->extmap[i]);
    if (rc == AL_ERANGE) { /* the index's table is full: samples using it are rejected */
      al_clear_error();
      m->extmap[i] = UINT32_MAX;
      rc = AL_OK;
    }
    if (rc) return al_error_prefix(rc, "%s", path);
  }
  return AL_OK;
}

/* Sample i of the shard (id `id`) has the key of sample `prev` of the index: rejected. */
static int reject_duplicate(merger *m, const scan_result *r, size_t i, uint32_t id, int64_t prev,
                            const char *path) {
  const al_index *g = m->g, *l = r->idx;
  const index_sample_rec *s = &l->samples[i];
  const char *key = l->keys + s->key;
  const index_member_rec *lm = &l->members[s->member0];
  const char *first = g->shards[g->samples[prev].shard].path;
  char name[4096], why[8192];
  snprintf(name, sizeof name, "%s%s%s", key, s->n_members ? "." : "",
           s->n_members ? l->exts.strs[index_member_ext(&lm[0])] : "");
  snprintf(why, sizeof why,
           "duplicate key '%s': first seen in %s (sample %lld, kept); this copy in %s rejected",
           key, first, (long long)prev, path);
  return al_index_add_rejected(m->g, id, name, r->first_hdr[i], key, why);
}

/* Sample i of the shard has an extension the index's table has no room for: rejected.
 * 1 when so (AL_OK recorded), 0 when all its extensions fit, or a negative status. */
static int reject_ext_over(merger *m, const scan_result *r, size_t i, uint32_t id) {
  const al_index *l = r->idx;
  const index_sample_rec *s = &l->samples[i];
  const index_member_rec *lm = &l->members[s->member0];
  uint32_t over = UINT32_MAX;
  for (uint32_t j = 0; j < s->n_members && over == UINT32_MAX; j++)
    if (m->extmap[index_member_ext(&lm[j])] == UINT32_MAX) over = j;
  if (over == UINT32_MAX) return 0;
  const char *key = l->keys + s->key;
  const char *ext = l->exts.strs[index_member_ext(&lm[over])];
  char name[4096], why[512];
  snprintf(name, sizeof name, "%s.%s", key, ext);
  snprintf(why, sizeof why,
           "extension '%.200s' does not fit: an index holds at most %u distinct extensions", ext,
           AL_EXT_MAX);
  int rc = al_index_add_rejected(m->g, id, name, r->first_hdr[i], key, why);
  return rc ? rc : 1;
}

/* Sample i of shard index l into the merged index as shard `id`: its members (extension ids
 * mapped), its typed members l->typed[t0, t1) and its warnings l->warnings.v[w0, w1). */
static int merge_sample(merger *m, const al_index *l, size_t i, uint32_t id, size_t t0, size_t t1,
                        size_t w0, size_t w1) {
  al_index *g = m->g;
  const index_sample_rec *s = &l->samples[i];
  const char *key = l->keys + s->key;
  const index_member_rec *lm = &l->members[s->member0];
  int rc = grow_array((void **)&m->mem, &m->mem_cap, s->n_members, sizeof *m->mem,
                      "a sample's members");
  if (rc) return rc;
  for (uint32_t j = 0; j < s->n_members; j++) {
    m->mem[j].off_ext = (lm[j].off_ext & ~UINT64_C(0x7FFF)) | m->extmap[index_member_ext(&lm[j])];
    m->mem[j].size = lm[j].size;
  }
  rc = index_add_sample_rec(g, key, strlen(key), id, s->width, s->height, s->frames, s->fps, m->mem,
                            s->n_members);
  for (size_t k = t0; k < t1 && !rc; k++) {
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
  for (uint32_t j = 0; j < s->n_members && !rc && l->n_media; j++) {
    const char *codec = index_member_codec(l, s->member0 + j);
    if (codec) rc = index_add_member_codec(g, j, codec);
  }
  for (size_t k = w0; k < w1 && !rc; k++) {
    const index_entry_rec *w = &l->warnings.v[k];
    rc = index_add_warning(g, g->n_samples - 1, id, w->member, w->offset, w->key, w->reason);
  }
  return rc;
}

/* One scanned shard into the merged index: its record, its rejected entries, then its
 * samples in order, each kept unless its key was seen before or an extension does not fit. */
static int merge(merger *m, scan_result *r, const char *path) {
  const al_index *l = r->idx;
  uint32_t id;
  int rc = merge_shard(m, l, path, &id);
  for (size_t i = 0; i < l->rejected.n && !rc; i++) {
    const index_entry_rec *x = &l->rejected.v[i];
    rc = al_index_add_rejected(m->g, id, x->member, x->offset, x->key, x->reason);
  }
  if (rc) return rc;
  size_t tcur = 0, wcur = 0; /* the shard's typed members and warnings, in sample order */
  for (size_t i = 0; i < l->n_samples; i++) {
    const index_sample_rec *s = &l->samples[i];
    const char *key = l->keys + s->key;
    size_t len = strlen(key);
    size_t t0 = tcur, w0 = wcur;
    while (tcur < l->n_typed && (l->typed[tcur] >> AL_TYPED_SHAPE_BITS) < s->member0 + s->n_members)
      tcur++;
    while (wcur < l->warnings.n && l->warnings.v[wcur].sample == i) wcur++;
    if (m->g->n_samples + 1 >= DD_IDX_MASK)
      return al_set_error(AL_ERANGE, "more than 2^36 samples");
    if ((m->n + 1) * 4 > m->cap * 3 && (rc = mg_rehash(m))) return rc;
    uint64_t h = key_hash(key, len);
    size_t slot = 0;
    int64_t prev = mg_find(m, key, len, h, &slot);
    if (prev >= 0) {
      if ((rc = reject_duplicate(m, r, i, id, prev, path))) return rc;
      continue;
    }
    if ((rc = reject_ext_over(m, r, i, id))) {
      if (rc < 0) return rc;
      continue;
    }
    if ((rc = merge_sample(m, l, i, id, t0, tcur, w0, wcur))) return rc;
    m->slots[slot] = (h & ~DD_IDX_MASK) | (uint64_t)m->g->n_samples;
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
  /* The merging thread's own. */
  size_t threads, started;
  pthread_t *tids;
  double t0;            /* clock_now_s() at the start */
  int show;             /* progress lines on stderr */
  uint64_t total_bytes; /* of all shards, for the progress line's ETA */
  double last_print;
  size_t readable;            /* shards that could be read */
  uint64_t bytes_read;        /* from the shards' files */
  storage_client *client;     /* when a shard is a URL */
  al_storage_options storage; /* what s3:// shards are read with (recorded in the index) */
  int any_s3;
  al_shard_io *io; /* the caller's per-shard figures, or NULL */
  uint64_t remote_shards, remote_requests, remote_bytes;
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
    int rc = scan_shard(B->paths[i], B->client, &B->fields, B->block, B->max_member, B->vae_t,
                        B->vae_s, &B->progress, &r);
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

static void progress_line(build *B, int final) {
  double el = clock_now_s() - B->t0;
  uint64_t bytes = atomic_load(&B->progress.bytes);
  unsigned long long samples = atomic_load(&B->progress.samples);
  double mbs = el > 0 ? bytes / 1e6 / el : 0;
  char eta[32] = "--:--";
  if (bytes > 0 && B->total_bytes >= bytes) {
    double left = el * (double)(B->total_bytes - bytes) / (double)bytes;
    snprintf(eta, sizeof eta, "%d:%02d", (int)(left / 60), (int)left % 60);
  }
  fprintf(stderr, "\r\033[Kindex: %zu/%zu shards, %llu samples, %.1f MB/s, ETA %s%s",
          atomic_load(&B->shards_done), B->n, samples, mbs, eta, final ? "\n" : "");
  fflush(stderr);
}

/* ---------------------------------------------------------------- build -- */

/* The build's settings from the options (zero: the default) and its per-shard arrays. */
static int build_init(build *B, const char *const *shards, size_t n, const al_index_options *o) {
  memset(B, 0, sizeof *B);
  B->t0 = clock_now_s();
  B->paths = shards;
  B->n = n;
  B->fields.width = o->field_width ? o->field_width : index_default_fields[0];
  B->fields.height = o->field_height ? o->field_height : index_default_fields[1];
  B->fields.frames = o->field_frames ? o->field_frames : index_default_fields[2];
  B->fields.fps = o->field_fps ? o->field_fps : index_default_fields[3];
  B->fields.duration = o->field_duration ? o->field_duration : index_default_fields[4];
  B->fields.dims_optional = 1; /* a typed latent member can give them */
  B->vae_t = o->vae_stride_t ? o->vae_stride_t : 4;
  B->vae_s = o->vae_stride_s ? o->vae_stride_s : 8;
  B->block = o->block_size; /* 0: shard_source.c picks by compression */
  B->max_member = o->max_member_bytes ? o->max_member_bytes : AL_INDEX_MAX_MEMBER_DEFAULT;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  B->threads = o->threads > 0 ? (size_t)o->threads : (cores > 0 ? (size_t)cores : 1);
  size_t remote = 0;
  for (size_t i = 0; i < n; i++) {
    remote += (size_t)storage_ops_for(shards[i])->remote;
    B->any_s3 |= storage_url_kind(shards[i]) == STORAGE_S3; /* its settings go into the index */
  }
  al_storage_options given = {.s3_endpoint = o->s3_endpoint,
                              .s3_region = o->s3_region,
                              .s3_addressing = o->s3_addressing,
                              .remote_timeout_s = o->remote_timeout_s};
  al_storage_resolve(&given, NULL, &B->storage, NULL);
  /* Remote shards wait on round trips, not cores: by default up to REMOTE_THREADS of them
   * at once (each holds one connection). */
  if (remote && o->threads <= 0 && B->threads < REMOTE_THREADS) B->threads = REMOTE_THREADS;
  B->io = o->shard_io;
  if (B->io) memset(B->io, 0, n * sizeof *B->io);
  if (B->threads > n) B->threads = n;
  B->window = 2 * B->threads + 2;
  B->results = calloc(n, sizeof *B->results);
  B->done = calloc(n, 1);
  B->fail = calloc(n, sizeof *B->fail);
  B->fail_msg = calloc(n, sizeof *B->fail_msg);
  B->tids = calloc(B->threads, sizeof *B->tids);
  pthread_mutex_init(&B->mu, NULL);
  pthread_cond_init(&B->cv_ready, NULL);
  pthread_cond_init(&B->cv_room, NULL);
  B->show = o->progress > 0 || (o->progress == 0 && isatty(2));
  if (!B->results || !B->done || !B->fail || !B->fail_msg || !B->tids)
    return al_set_error(AL_ENOMEM, "out of memory");
  if (remote) {
    storage_config cfg;
    const al_storage_options *u = &B->storage;
    if (storage_config_make(u->s3_endpoint, u->s3_region, u->s3_addressing, u->remote_timeout_s,
                            &cfg) != AL_OK ||
        storage_client_open(&cfg, &B->client) != AL_OK)
      return AL_EINVAL;
  }
  return AL_OK;
}

/* Waits until shard i is scanned; with progress shown, prints a line every 0.2 s meanwhile. */
static void wait_scanned(build *B, size_t i) {
  pthread_mutex_lock(&B->mu);
  while (!B->done[i]) {
    if (!B->show) {
      pthread_cond_wait(&B->cv_ready, &B->mu);
      continue;
    }
    struct timespec dl; /* pthread_cond_timedwait's deadline is on CLOCK_REALTIME */
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 200000000;
    if (dl.tv_nsec >= 1000000000) {
      dl.tv_sec++;
      dl.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&B->cv_ready, &B->mu, &dl);
    if (clock_now_s() - B->last_print > 0.2) {
      pthread_mutex_unlock(&B->mu);
      progress_line(B, 0);
      B->last_print = clock_now_s();
      pthread_mutex_lock(&B->mu);
    }
  }
  pthread_mutex_unlock(&B->mu);
}

/* The content fingerprint of shard i, just merged as the index's last shard, from the
 * header hashes its scan kept (only its kept samples count); the transfer figures of a shard
 * at a URL. */
static void shard_done(build *B, al_index *g, const scan_result *r, size_t i) {
  index_shard_rec *sh = &g->shards[g->n_shards - 1];
  if (r->remote) {
    B->remote_shards++;
    B->remote_requests += r->requests;
    B->remote_bytes += r->bytes_read;
    if (B->io) {
      B->io[i].requests = r->requests;
      B->io[i].bytes = r->bytes_read;
    }
  }
  if (!sh->sample_count) return;
  if (!sh->seekable) {
    sh->content_fp = r->content_fp;
    return;
  }
  if (!r->n_hdr) return;
  uint64_t h = hash_fold(UINT64_C(0x5ad0f1), sh->size);
  for (size_t k = sh->first_sample; k <= sh->last_sample; k++) {
    const index_sample_rec *q = &g->samples[k];
    for (uint32_t m = 0; m < q->n_members; m++) {
      uint64_t off = g->members[q->member0 + m].off_ext >> 16;
      size_t lo = 0, hi = r->n_hdr;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->hdr_off[mid] < off)
          lo = mid + 1;
        else
          hi = mid;
      }
      if (lo == r->n_hdr || r->hdr_off[lo] != off) return; /* cannot be: none recorded */
      h = hash_fold(h, r->hdr_hash[lo]);
    }
  }
  sh->content_fp = h ? h : 1;
}

/* Starts the workers and merges the shards in the order given, each as soon as it is
 * scanned; the workers stay at most B->window shards ahead. */
static int scan_and_merge(build *B, merger *M) {
  if (B->show)
    for (size_t i = 0; i < B->n; i++) {
      storage_stat st; /* a file's size; a URL's is not known before its HEAD */
      if (storage_lookup(B->paths[i], &st) == AL_OK) B->total_bytes += st.size;
      al_clear_error();
    }
  for (; B->started < B->threads; B->started++)
    if (pthread_create(&B->tids[B->started], NULL, worker, B) != 0) break;
  int rc = B->started == 0 ? al_set_error(AL_ENOMEM, "cannot start indexing threads") : AL_OK;
  for (size_t i = 0; i < B->n && !rc; i++) {
    wait_scanned(B, i);
    if (B->fail[i]) {
      rc = al_set_error(B->fail[i], "%s: %s", B->paths[i],
                        B->fail_msg[i] ? B->fail_msg[i] : "out of memory");
    } else {
      char *abs = storage_canonical(B->paths[i]);
      rc = abs ? merge(M, &B->results[i], abs) : al_set_error(AL_ENOMEM, "out of memory");
      free(abs);
      if (!rc) shard_done(B, M->g, &B->results[i], i);
      B->readable += (size_t)B->results[i].readable;
      B->bytes_read += B->results[i].bytes_read;
    }
    scan_result_free(&B->results[i]);
    pthread_mutex_lock(&B->mu);
    B->merged = i + 1;
    pthread_cond_broadcast(&B->cv_room);
    pthread_mutex_unlock(&B->mu);
  }
  if (B->show && !rc) progress_line(B, 1);
  return rc;
}

/* Stops and joins the workers and frees what the build and the merger hold (not the index). */
static void build_free(build *B, merger *M) {
  pthread_mutex_lock(&B->mu);
  B->stop = 1;
  pthread_cond_broadcast(&B->cv_room);
  pthread_mutex_unlock(&B->mu);
  for (size_t i = 0; i < B->started; i++) pthread_join(B->tids[i], NULL);
  for (size_t i = 0; B->results && i < B->n; i++) scan_result_free(&B->results[i]);
  pthread_mutex_destroy(&B->mu);
  pthread_cond_destroy(&B->cv_ready);
  pthread_cond_destroy(&B->cv_room);
  free(B->results);
  free(B->done);
  free(B->fail);
  for (size_t i = 0; B->fail_msg && i < B->n; i++) free(B->fail_msg[i]);
  free(B->fail_msg);
  free(B->tids);
  free(M->slots);
  free(M->mem);
  free(M->extmap);
  storage_client_close(B->client);
}

static void fill_stats(const build *B, const al_index *idx, al_index_stats *stats) {
  stats->shards = idx->n_shards;
  stats->samples = idx->n_samples;
  stats->rejected = idx->rejected.n;
  stats->bytes = 0;
  for (size_t i = 0; i < idx->n_shards; i++) stats->bytes += idx->shards[i].size;
  stats->seconds = clock_now_s() - B->t0;
  stats->bytes_read = B->bytes_read;
  stats->warnings = idx->warnings.n;
  stats->remote_shards = B->remote_shards;
  stats->remote_requests = B->remote_requests;
  stats->remote_bytes = B->remote_bytes;
}

int al_index_build(al_index **out, const char *const *shards, size_t n,
                   const al_index_options *opts, al_index_stats *stats) {
  if (!out || (!shards && n)) return al_set_error(AL_EINVAL, "al_index_build: NULL argument");
  *out = NULL;
  if (n == 0) return al_set_error(AL_EINVAL, "al_index_build: no shards given");
  for (size_t i = 0; i < n; i++) {
    int urc = shards[i] ? shard_path_check_userinfo(shards[i], NULL) : AL_OK;
    if (urc) return urc;
  }
  al_index_options o;
  int rc = struct_in(&o, sizeof o, AL_INDEX_OPTIONS_V1, opts, "al_index_build", "al_index_options");
  if (rc) return rc;
  size_t n_stats = 0;
  if (stats && (rc = struct_out_size(stats, sizeof(al_index_stats), AL_INDEX_STATS_V1,
                                     "al_index_build", "al_index_stats", &n_stats)))
    return rc;
  build B;
  merger M;
  memset(&M, 0, sizeof M);
  rc = build_init(&B, shards, n, &o);
  if (!rc) rc = al_index_new(&M.g);
  const char *names[AL_N_FIELDS] = {B.fields.width, B.fields.height, B.fields.frames, B.fields.fps,
                                    B.fields.duration};
  if (!rc) rc = index_set_fields(M.g, names);
  if (!rc) rc = mg_rehash(&M);
  if (!rc) rc = scan_and_merge(&B, &M);
  build_free(&B, &M);
  if (rc) {
    al_index_free(M.g);
    return rc;
  }
  al_index *idx = M.g;
  index_trim(idx);
  if (B.any_s3 && (rc = index_record_storage(idx, &B.storage))) {
    al_index_free(idx);
    return rc;
  }
  if (o.dali_idx_dir && (rc = dali_idx_write(idx, o.dali_idx_dir))) {
    al_index_free(idx);
    return rc;
  }
  if (stats) {
    al_index_stats full = AL_INDEX_STATS_INIT;
    fill_stats(&B, idx, &full);
    struct_out(stats, &full, n_stats);
  }
  *out = idx;
  if (B.readable == 0)
    return al_set_error(AL_EFORMAT, "no shard could be read (%zu given); see the rejected list", n);
  if (o.strict && idx->rejected.n)
    return al_set_error(AL_EFORMAT, "%zu rejected entries (strict mode)", idx->rejected.n);
  return AL_OK;
}
