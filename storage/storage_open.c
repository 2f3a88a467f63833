/* storage/storage_open.c - the backend of a path or a URL, and the calls through its table
 * (storage_internal.h). */
#include "storage/storage_internal.h"

const storage_ops *storage_ops_of(int kind) {
  switch (kind) {
    case STORAGE_LOCAL: return &storage_file_ops;
    case STORAGE_HTTP: return &storage_http_ops;
    case STORAGE_S3: return &storage_s3_ops;
    default: return NULL;
  }
}

int storage_open(storage_client *client, const char *path_or_url, storage_obj **out) {
  *out = NULL;
  if (!path_or_url) return al_set_error(AL_EINVAL, "storage_open: NULL path");
  return storage_ops_of(storage_url_kind(path_or_url))->open(client, path_or_url, out);
}

int storage_get_stat(const storage_obj *o, storage_stat *out) { return o->ops->stat(o, out); }

int storage_read(storage_obj *o, uint64_t off, void *buf, size_t len) {
  return o->ops->read(o, off, buf, len);
}

int storage_list(storage_client *client, const char *prefix, storage_listing *out,
                 storage_counts *st) {
  return storage_ops_of(storage_url_kind(prefix))->list(client, prefix, out, st);
}

storage_counts storage_stats(const storage_obj *o) { return o->ops->stats(o); }

void storage_close(storage_obj *o) {
  if (o) o->ops->close(o);
}
