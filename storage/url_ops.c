/* storage/url_ops.c - the "http" and "s3" backends (storage_internal.h): a storage_http_object
 * (client_internal.h: pinned by a HEAD, read by ranged GETs), listings by storage_s3_list. */
#include <stdlib.h>

#include "storage/storage_internal.h"

typedef struct url_obj {
  storage_obj base;
  storage_http_object *o;
} url_obj;

static int url_open(const storage_ops *ops, storage_client *client, const char *url,
                    storage_obj **out) {
  if (!client) return al_set_error(AL_EINVAL, "storage_open: a URL needs a remote client");
  url_obj *u = calloc(1, sizeof *u);
  if (!u) return al_set_error(AL_ENOMEM, "remote object: out of memory");
  u->base.ops = ops;
  int rc = storage_http_open(client, url, &u->o);
  if (rc != AL_OK) {
    free(u);
    return rc;
  }
  *out = &u->base;
  return AL_OK;
}

static int http_open(storage_client *client, const char *url, storage_obj **out) {
  return url_open(&storage_http_ops, client, url, out);
}

static int s3_open(storage_client *client, const char *url, storage_obj **out) {
  return url_open(&storage_s3_ops, client, url, out);
}

static int url_stat(const storage_obj *o, storage_stat *out) {
  const url_obj *u = (const url_obj *)o;
  out->size = storage_http_size(u->o);
  out->etag = storage_http_etag(u->o);
  out->mtime_ns = 0;
  return AL_OK;
}

static int url_read(storage_obj *o, uint64_t off, void *buf, size_t len) {
  return storage_http_read(((url_obj *)o)->o, off, buf, len);
}

static storage_counts url_stats(const storage_obj *o) {
  return storage_http_stats(((const url_obj *)o)->o);
}

static void url_close(storage_obj *o) {
  storage_http_close(((url_obj *)o)->o);
  free(o);
}

const storage_ops storage_http_ops = {
    .name = "http",
    .open = http_open,
    .stat = url_stat,
    .read = url_read,
    .list = storage_s3_list, /* refuses an http(s):// URL, naming it */
    .stats = url_stats,
    .close = url_close,
};

const storage_ops storage_s3_ops = {
    .name = "s3",
    .open = s3_open,
    .stat = url_stat,
    .read = url_read,
    .list = storage_s3_list,
    .stats = url_stats,
    .close = url_close,
};
