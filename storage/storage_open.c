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

const storage_ops *storage_ops_for(const char *path_or_url) {
  return storage_ops_of(storage_url_kind(path_or_url));
}

char *storage_canonical(const char *path_or_url) {
  return storage_ops_for(path_or_url)->canonical(path_or_url);
}

int storage_lookup(const char *path_or_url, storage_stat *out) {
  const storage_ops *ops = storage_ops_for(path_or_url);
  if (!ops->lookup)
    return al_set_error(AL_EUNSUPPORTED, "%s: a %s object is known only by a request", path_or_url,
                        ops->name);
  return ops->lookup(path_or_url, out);
}

int storage_open(storage_client *client, const char *path_or_url, storage_obj **out) {
  *out = NULL;
  if (!path_or_url) return al_set_error(AL_EINVAL, "storage_open: NULL path");
  return storage_ops_for(path_or_url)->open(client, path_or_url, out);
}

int storage_is_prefix(const char *path_or_url) {
  const storage_ops *ops = storage_ops_for(path_or_url);
  return ops->is_prefix ? ops->is_prefix(path_or_url) : 0;
}

int storage_list_shards(storage_client *client, const char *container, storage_listing *out) {
  const storage_ops *ops = storage_ops_for(container);
  out->entries = NULL;
  out->count = 0;
  if (!ops->list_shards)
    return al_set_error(AL_EINVAL, "%s: a %s URL names one object, not a container to list",
                        container, ops->name);
  return ops->list_shards(client, container, out);
}

int storage_list(storage_client *client, const char *prefix, storage_listing *out,
                 storage_counts *st) {
  return storage_ops_for(prefix)->list(client, prefix, out, st);
}

int storage_get_stat(const storage_obj *o, storage_stat *out) { return o->ops->stat(o, out); }

int storage_read(storage_obj *o, uint64_t off, void *buf, size_t len) {
  return o->ops->read(o, off, buf, len);
}

int storage_read_some(storage_obj *o, uint64_t off, void *buf, size_t cap, size_t *got) {
  return o->ops->read_some(o, off, buf, cap, got);
}

int storage_read_at(void *ctx, void *buf, size_t n, uint64_t off, const char *path) {
  (void)path;
  return storage_read(ctx, off, buf, n);
}

storage_counts storage_stats(const storage_obj *o) { return o->ops->stats(o); }

const char *storage_name(const storage_obj *o) { return o->name; }

int storage_is_remote(const storage_obj *o) { return o->ops->remote; }

void storage_close(storage_obj *o) {
  if (o) o->ops->close(o);
}
