/* storage/url_ops.c - the "http" and "s3" backends (storage_internal.h): a remote_object
 * (client_internal.h: pinned by a HEAD, read by ranged GETs), listings by remote_list. */
#include <stdlib.h>

#include "storage/storage_internal.h"

typedef struct url_obj {
  storage_obj base;
  remote_object *o;
} url_obj;

static int url_open(const storage_ops *ops, remote_client *client, const char *url,
                    storage_obj **out) {
  if (!client) return al_set_error(AL_EINVAL, "storage_open: a URL needs a remote client");
  url_obj *u = calloc(1, sizeof *u);
  if (!u) return al_set_error(AL_ENOMEM, "remote object: out of memory");
  u->base.ops = ops;
  int rc = remote_object_open(client, url, &u->o);
  if (rc != AL_OK) {
    free(u);
    return rc;
  }
  *out = &u->base;
  return AL_OK;
}

static int http_open(remote_client *client, const char *url, storage_obj **out) {
  return url_open(&storage_http_ops, client, url, out);
}

static int s3_open(remote_client *client, const char *url, storage_obj **out) {
  return url_open(&storage_s3_ops, client, url, out);
}

static int url_stat(const storage_obj *o, storage_stat *out) {
  const url_obj *u = (const url_obj *)o;
  out->size = remote_object_size(u->o);
  out->etag = remote_object_etag(u->o);
  out->mtime_ns = 0;
  return AL_OK;
}

static int url_read(storage_obj *o, uint64_t off, void *buf, size_t len) {
  return remote_object_read(((url_obj *)o)->o, off, buf, len);
}

static remote_stats url_stats(const storage_obj *o) {
  return remote_object_stats(((const url_obj *)o)->o);
}

static void url_close(storage_obj *o) {
  remote_object_close(((url_obj *)o)->o);
  free(o);
}

const storage_ops storage_http_ops = {
    .name = "http",
    .open = http_open,
    .stat = url_stat,
    .read = url_read,
    .list = remote_list, /* refuses an http(s):// URL, naming it */
    .stats = url_stats,
    .close = url_close,
};

const storage_ops storage_s3_ops = {
    .name = "s3",
    .open = s3_open,
    .stat = url_stat,
    .read = url_read,
    .list = remote_list,
    .stats = url_stats,
    .close = url_close,
};
