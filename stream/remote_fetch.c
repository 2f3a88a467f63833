/* Members of shards at URLs: pinned objects, ranged GETs, the cache (remote_fetch_internal.h). */
#include "stream/remote_fetch_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/al_status.h"
#include "storage/storage_internal.h"
#include "stream/cache_internal.h"
#include "stream/shard_download_internal.h"

typedef struct pin {
  char *url; /* what the requests go to */
  /* The cache folder's name of the object: with an ETag, the part of the URL that names the
   * object (storage_url_identity_len: a presigned URL signed again finds the entries the last
   * signature stored; the ETag and size tell versions apart); without one, the whole URL. */
  char *key;
  uint64_t size;
  char *etag; /* as the server sent it, any length; "" when none */
} pin;

struct stream_remote {
  storage_client *client;
  stream_cache *cache; /* NULL: none */
  size_t n;
  pin *pins; /* per shard; url NULL until pinned */
  pthread_mutex_t mu;
  stream_remote_reader **readers; /* for the counters */
  size_t n_readers, cap_readers;
  atomic_uint_fast64_t hits, misses, evicted, head_requests, head_bytes;
};

struct stream_remote_reader {
  stream_remote *r;
  storage_obj **obj; /* per shard, opened lazily */
  int lock_fd;
  storage_counts done; /* of objects closed */
};

int stream_remote_new(stream_remote **out, size_t n_shards, const char *cache_dir,
                      uint64_t cache_bytes, const al_storage_options *storage) {
  *out = NULL;
  stream_remote *r = calloc(1, sizeof *r);
  if (!r || !(r->pins = calloc(n_shards ? n_shards : 1, sizeof *r->pins))) {
    free(r);
    return al_set_error(AL_ENOMEM, "remote shards");
  }
  r->n = n_shards;
  pthread_mutex_init(&r->mu, NULL);
  storage_config cfg;
  int rc = storage_config_make(storage->s3_endpoint, storage->s3_region, storage->s3_addressing,
                               storage->remote_timeout_s, &cfg);
  if (rc == AL_OK) rc = storage_client_open(&cfg, &r->client);
  if (rc != AL_OK) rc = al_error_prefix(AL_EIO, "remote shards");
  if (rc == AL_OK && cache_dir && *cache_dir)
    rc = stream_cache_open(&r->cache, cache_dir, cache_bytes ? cache_bytes : (1ull << 30));
  if (rc != AL_OK) {
    stream_remote_free(r);
    return rc;
  }
  *out = r;
  return AL_OK;
}

void stream_remote_free(stream_remote *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n; i++) {
    free(r->pins[i].url);
    free(r->pins[i].key);
    free(r->pins[i].etag);
  }
  free(r->pins);
  free(r->readers);
  stream_cache_close(r->cache);
  storage_client_close(r->client);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

void stream_remote_cancel(stream_remote *r) { storage_client_cancel(r->client); }

/* Records the pin (p->url last: it marks the shard pinned). */
static int pin_set(pin *p, const char *url, uint64_t size, const char *etag) {
  size_t key_len = etag[0] ? storage_url_identity_len(url) : strlen(url);
  p->size = size;
  p->etag = strdup(etag);
  p->key = strndup(url, key_len);
  p->url = p->etag && p->key ? strdup(url) : NULL;
  if (p->url) return AL_OK;
  free(p->etag), free(p->key);
  p->etag = p->key = NULL;
  return al_set_error(AL_ENOMEM, "remote shard %s", url);
}

int stream_remote_pin(stream_remote *r, uint32_t id, const char *url, uint64_t size,
                      const char *etag) {
  if (id >= r->n) return al_set_error(AL_EINVAL, "remote shard %" PRIu32 " out of range", id);
  storage_obj *o = NULL;
  storage_stat is;
  if (storage_open(r->client, url, &o) != AL_OK) return AL_EIO;
  storage_counts st = storage_stats(o);
  atomic_fetch_add(&r->head_requests, st.requests);
  int rc = storage_get_stat(o, &is);
  if (rc == AL_OK && is.size != size)
    rc = al_set_error(AL_EFORMAT,
                      "%s: shard changed since indexing (object changed): size is %" PRIu64
                      " bytes, the index says %" PRIu64,
                      url, is.size, size);
  else if (rc == AL_OK && etag && etag[0] && strcmp(etag, is.etag) != 0)
    rc = al_set_error(AL_EFORMAT,
                      "%s: shard changed since indexing (object changed): ETag is %s, the index "
                      "says %s",
                      url, is.etag, etag);
  if (rc == AL_OK) rc = pin_set(&r->pins[id], url, size, is.etag);
  storage_close(o);
  return rc;
}

int stream_remote_reader_new(stream_remote_reader **out, stream_remote *r) {
  *out = NULL;
  stream_remote_reader *rr = calloc(1, sizeof *rr);
  if (!rr || !(rr->obj = calloc(r->n ? r->n : 1, sizeof *rr->obj))) {
    free(rr);
    return al_set_error(AL_ENOMEM, "remote reader");
  }
  rr->r = r;
  rr->lock_fd = -1;
  int rc = r->cache ? stream_cache_lock_fd(r->cache, &rr->lock_fd) : AL_OK;
  pthread_mutex_lock(&r->mu);
  if (rc == AL_OK && r->n_readers == r->cap_readers) {
    size_t nc = r->cap_readers ? 2 * r->cap_readers : 8;
    stream_remote_reader **nr = realloc(r->readers, nc * sizeof *nr);
    if (!nr)
      rc = al_set_error(AL_ENOMEM, "remote reader");
    else {
      r->readers = nr;
      r->cap_readers = nc;
    }
  }
  if (rc == AL_OK) r->readers[r->n_readers++] = rr;
  pthread_mutex_unlock(&r->mu);
  if (rc != AL_OK) {
    if (rr->lock_fd >= 0) close(rr->lock_fd);
    free(rr->obj);
    free(rr);
    return rc;
  }
  *out = rr;
  return AL_OK;
}

static void add_stats(storage_counts *to, storage_counts s) {
  to->requests += s.requests;
  to->retries += s.retries;
  to->bytes += s.bytes;
  to->discarded += s.discarded;
}

void stream_remote_reader_free(stream_remote_reader *rr) {
  if (!rr) return;
  stream_remote *r = rr->r;
  pthread_mutex_lock(&r->mu);
  for (size_t i = 0; i < r->n; i++)
    if (rr->obj[i]) {
      add_stats(&rr->done, storage_stats(rr->obj[i]));
      storage_close(rr->obj[i]);
      rr->obj[i] = NULL;
    }
  /* Its counts stay with the stream; the reader leaves the list. */
  atomic_fetch_add(&r->head_requests, rr->done.requests);
  atomic_fetch_add(&r->head_bytes, rr->done.bytes);
  for (size_t i = 0; i < r->n_readers; i++)
    if (r->readers[i] == rr) r->readers[i] = r->readers[--r->n_readers];
  pthread_mutex_unlock(&r->mu);
  if (rr->lock_fd >= 0) close(rr->lock_fd);
  free(rr->obj);
  free(rr);
}

/* This thread's object of shard id, opened (HEAD) on first use and checked against the pin. */
static int reader_object(stream_remote_reader *rr, uint32_t id, storage_obj **out) {
  stream_remote *r = rr->r;
  const pin *p = &r->pins[id];
  if (rr->obj[id]) {
    *out = rr->obj[id];
    return AL_OK;
  }
  storage_obj *o = NULL;
  storage_stat is;
  if (storage_open(r->client, p->url, &o) != AL_OK) return AL_EIO;
  int rc = storage_get_stat(o, &is);
  if (rc == AL_OK && (is.size != p->size || strcmp(is.etag, p->etag) != 0))
    rc = al_set_error(AL_EFORMAT,
                      "%s: object changed while streaming: size %" PRIu64
                      " ETag %s, pinned "
                      "at %" PRIu64 " ETag %s",
                      p->url, is.size, is.etag, p->size, p->etag);
  if (rc != AL_OK) {
    pthread_mutex_lock(&r->mu);
    add_stats(&rr->done, storage_stats(o));
    pthread_mutex_unlock(&r->mu);
    storage_close(o);
    return rc;
  }
  pthread_mutex_lock(&r->mu);
  rr->obj[id] = o;
  pthread_mutex_unlock(&r->mu);
  *out = o;
  return AL_OK;
}

typedef struct fetch_ctx {
  stream_remote_reader *rr;
  uint32_t id;
  stream_remote *r;
  int whole; /* a range of a whole-object download: not a member fetched */
} fetch_ctx;

/* One ranged GET through this thread's object of the shard (opened, with its HEAD, only when
 * something must be fetched: a warm cache sends no request past the pins). */
static int fetch_range(void *ctx, uint64_t off, uint64_t len, void *dst) {
  fetch_ctx *f = ctx;
  storage_obj *o = NULL;
  int rc = reader_object(f->rr, f->id, &o);
  if (rc != AL_OK) return rc;
  if (storage_read(o, off, dst, (size_t)len) != AL_OK) return AL_EIO;
  /* Counted when fetched, before the entry is stored: once a reader can see it, it counts. */
  if (!f->whole) atomic_fetch_add(&f->r->misses, 1);
  return AL_OK;
}

/* Pinned shard `id`'s pin, with [off, off + len) inside the object. */
static int pinned_range(const stream_remote *r, uint32_t id, uint64_t off, uint64_t len,
                        const pin **out) {
  if (id >= r->n || !r->pins[id].url)
    return al_set_error(AL_ESTATE, "remote shard %" PRIu32 " read before it was pinned", id);
  const pin *p = &r->pins[id];
  if (off > p->size || len > p->size - off)
    return al_set_error(AL_EFORMAT,
                        "%s: bytes [%" PRIu64 ", +%" PRIu64 ") past the end of the object (%" PRIu64
                        " bytes)",
                        p->url, off, len, p->size);
  *out = p;
  return AL_OK;
}

int stream_remote_read(stream_remote_reader *rr, uint32_t id, uint64_t off, uint64_t len, void *dst,
                       uint32_t step) {
  stream_remote *r = rr->r;
  const pin *p = NULL;
  int rc = pinned_range(r, id, off, len, &p);
  if (rc != AL_OK) return rc;
  fetch_ctx f = {rr, id, r, 0};
  if (!r->cache) return fetch_range(&f, off, len, dst);
  int hit = 0;
  uint64_t ev = 0;
  rc = stream_cache_get(r->cache, rr->lock_fd, p->key, p->etag, p->size, off, len, dst, fetch_range,
                        &f, 1, step, &hit, &ev);
  if (hit) atomic_fetch_add(&r->hits, 1);
  atomic_fetch_add(&r->evicted, ev);
  return rc;
}

/* The members a run fetched: cache misses. */
static void count_run(void *ctx, size_t n) {
  fetch_ctx *f = ctx;
  atomic_fetch_add(&f->r->misses, n);
}

int stream_remote_warm_run(stream_remote_reader *rr, uint32_t id, const stream_cache_span *spans,
                           size_t n, uint32_t step) {
  stream_remote *r = rr->r;
  if (!r->cache || !n) return AL_OK;
  const pin *p = NULL;
  int rc = pinned_range(r, id, spans[0].off, spans[n - 1].off + spans[n - 1].len - spans[0].off,
                        &p);
  if (rc != AL_OK) return rc;
  fetch_ctx f = {rr, id, r, 1}; /* count_run counts a miss per member */
  uint64_t ev = 0;
  rc = stream_cache_warm_run(r->cache, rr->lock_fd, p->key, p->etag, p->size, spans, n, step,
                             fetch_range, count_run, &f, &ev);
  atomic_fetch_add(&r->evicted, ev);
  return rc;
}

int stream_remote_download(stream_remote_reader *rr, uint32_t id, int *fd) {
  stream_remote *r = rr->r;
  *fd = -1;
  if (id >= r->n || !r->pins[id].url)
    return al_set_error(AL_ESTATE, "remote shard %" PRIu32 " downloaded before it was pinned", id);
  const pin *p = &r->pins[id];
  fetch_ctx f = {rr, id, r, 1};
  int hit = 0;
  uint64_t ev = 0;
  int rc = stream_shard_download(r->cache, rr->lock_fd, p->key, p->etag, p->size, fetch_range, &f,
                                 fd, &hit, &ev);
  if (rc == AL_OK) atomic_fetch_add(hit ? &r->hits : &r->misses, 1);
  atomic_fetch_add(&r->evicted, ev);
  return rc;
}

void stream_remote_get_counts(const stream_remote *rc, stream_remote_counts *out) {
  stream_remote *r = (stream_remote *)rc;
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&r->mu);
  for (size_t k = 0; k < r->n_readers; k++) {
    stream_remote_reader *rr = r->readers[k];
    out->requests += rr->done.requests;
    out->bytes_fetched += rr->done.bytes;
    for (size_t i = 0; i < r->n; i++)
      if (rr->obj[i]) {
        storage_counts s = storage_stats(rr->obj[i]);
        out->requests += s.requests;
        out->bytes_fetched += s.bytes;
      }
  }
  pthread_mutex_unlock(&r->mu);
  out->requests += atomic_load(&r->head_requests);
  out->bytes_fetched += atomic_load(&r->head_bytes);
  out->cache_hits = atomic_load(&r->hits);
  out->cache_misses = atomic_load(&r->misses);
  out->evicted_bytes = atomic_load(&r->evicted);
}
