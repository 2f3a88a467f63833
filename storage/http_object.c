/*
 * storage/http_object.c - one remote object: opened by a HEAD request that pins its size and
 * ETag, read by ranged GETs that are retried, resumed where a short answer stopped, and
 * checked against the pinned size and ETag.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock_internal.h"
#include "storage/http_internal.h"

/* The counters are written by the object's one user and read by stats callers on other threads
 * (a stream's consumer, while its readers fetch): relaxed atomics, each counter exact alone. */
static void stat_add(uint64_t *c, uint64_t n) { __atomic_fetch_add(c, n, __ATOMIC_RELAXED); }

struct storage_http_object {
  storage_client *c;
  CURL *h; /* one connection, reused between requests */
  storage_target t;
  uint64_t size;
  char *etag; /* as the HEAD answer sent it, any length; "" when none */
  storage_counts st;
};

/* AL_EIO: the retries are spent (or the client cancelled). */
static int gave_up(const storage_http_object *o, const storage_retry *r, double t0,
                   const char *last) {
  return al_set_error(AL_EIO, "%s: gave up after %d attempt%s in %.1f s; last error: %s", o->t.name,
                      r->attempts, r->attempts == 1 ? "" : "s", clock_now_s() - t0, last);
}

static int head(storage_http_object *o) {
  storage_xfer x = {0};
  x.head = 1;
  storage_retry r;
  storage_retry_start(o->c, &r);
  x.deadline = r.deadline;
  double t0 = clock_now_s();
  char msg[768];
  for (;;) {
    r.attempts++;
    stat_add(&o->st.requests, 1);
    int v = storage_xfer_perform(o->c, o->h, &o->t, &x, msg, sizeof msg);
    if (v == STORAGE_XFER_OK && !x.have_length) {
      snprintf(msg, sizeof msg, "the HEAD answer has no Content-Length");
      v = STORAGE_XFER_FATAL;
    }
    if (v == STORAGE_XFER_OK) break;
    if (v == STORAGE_XFER_FATAL) {
      storage_xfer_free(&x);
      return al_set_error(AL_EIO, "%s: %s", o->t.name, msg);
    }
    if (storage_retry_wait(o->c, &r, x.retry_after) != 0) {
      storage_xfer_free(&x);
      return gave_up(o, &r, t0, msg);
    }
    stat_add(&o->st.retries, 1);
  }
  o->size = x.length;
  o->etag = strdup(x.answer_etag ? x.answer_etag : "");
  storage_xfer_free(&x);
  if (o->etag == NULL) return al_set_error(AL_ENOMEM, "%s: out of memory", o->t.name);
  return AL_OK;
}

int storage_http_open(storage_client *c, const char *url, storage_http_object **out) {
  *out = NULL;
  storage_http_object *o = calloc(1, sizeof *o);
  if (o == NULL) return al_set_error(AL_ENOMEM, "remote object: out of memory");
  o->c = c;
  int rc = storage_target_make(c, url, &o->t);
  if (rc != AL_OK) {
    free(o);
    return rc;
  }
  o->h = curl_easy_init();
  if (o->h == NULL) rc = al_set_error(AL_EIO, "%s: curl_easy_init failed", o->t.name);
  if (rc == AL_OK) rc = head(o);
  if (rc != AL_OK) {
    storage_http_close(o);
    return rc;
  }
  *out = o;
  return AL_OK;
}

uint64_t storage_http_size(const storage_http_object *o) { return o->size; }
const char *storage_http_etag(const storage_http_object *o) { return o->etag; }
const char *storage_http_url(const storage_http_object *o) { return o->t.name; }
storage_counts storage_http_stats(const storage_http_object *o) {
  storage_counts s;
  s.requests = __atomic_load_n(&o->st.requests, __ATOMIC_RELAXED);
  s.retries = __atomic_load_n(&o->st.retries, __ATOMIC_RELAXED);
  s.bytes = __atomic_load_n(&o->st.bytes, __ATOMIC_RELAXED);
  s.discarded = __atomic_load_n(&o->st.discarded, __ATOMIC_RELAXED);
  return s;
}

int storage_http_read(storage_http_object *o, uint64_t off, void *buf, size_t len) {
  if (off > o->size || len > o->size - off) {
    return al_set_error(AL_ERANGE, "%s: bytes %" PRIu64 "+%zu lie beyond its size %" PRIu64,
                        o->t.name, off, len, o->size);
  }
  storage_retry r;
  storage_retry_start(o->c, &r);
  double t0 = clock_now_s();
  uint64_t done = 0;
  char msg[768];
  while (done < len) {
    storage_xfer x = {0};
    x.range_off = off + done;
    x.range_len = len - done;
    x.dst = (unsigned char *)buf + done;
    x.etag = o->etag;
    x.expect_total = o->size;
    x.deadline = r.deadline;
    if (r.attempts++ > 0) stat_add(&o->st.retries, 1);
    stat_add(&o->st.requests, 1);
    int v = storage_xfer_perform(o->c, o->h, &o->t, &x, msg, sizeof msg);
    done += x.got;
    stat_add(&o->st.bytes, x.got);
    stat_add(&o->st.discarded, x.discarded);
    double retry_after = x.retry_after;
    storage_xfer_free(&x);
    if (v == STORAGE_XFER_OK && done == len) break;
    if (v == STORAGE_XFER_FATAL) return al_set_error(AL_EIO, "%s: %s", o->t.name, msg);
    /* Cut short after some bytes: resumed at once from where it broke, within the budget. */
    int left = x.got > 0 ? storage_retry_progress(o->c, &r)
                         : storage_retry_wait(o->c, &r, retry_after);
    if (left != 0) return gave_up(o, &r, t0, msg);
  }
  return AL_OK;
}

void storage_http_close(storage_http_object *o) {
  if (o == NULL) return;
  if (o->h) curl_easy_cleanup(o->h);
  storage_target_free(&o->t);
  free(o->etag);
  free(o);
}
