/* storage/url_ops.c - the "http" and "s3" backends (storage_internal.h): a storage_http_object
 * (client_internal.h: pinned by a HEAD, read by ranged GETs), listings by storage_s3_list, the
 * tar shards under an S3 prefix. */
#include <stdlib.h>
#include <string.h>

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
  u->base.name = storage_http_url(u->o);
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
  out->type = STORAGE_OBJECT;
  out->type_name = "an object";
  return AL_OK;
}

static int url_read(storage_obj *o, uint64_t off, void *buf, size_t len) {
  return storage_http_read(((url_obj *)o)->o, off, buf, len);
}

/* What lies of [off, off + cap) within the object, in one ranged read. */
static int url_read_some(storage_obj *o, uint64_t off, void *buf, size_t cap, size_t *got) {
  uint64_t size = storage_http_size(((url_obj *)o)->o);
  *got = 0;
  if (off >= size || cap == 0) return AL_OK;
  size_t n = size - off < cap ? (size_t)(size - off) : cap;
  int rc = url_read(o, off, buf, n);
  if (rc == AL_OK) *got = n;
  return rc;
}

static storage_counts url_stats(const storage_obj *o) {
  return storage_http_stats(((const url_obj *)o)->o);
}

static void url_close(storage_obj *o) {
  storage_http_close(((url_obj *)o)->o);
  free(o);
}

/* Whether an s3:// URL names a prefix to list: its last component has no ".tar". */
static int s3_is_prefix(const char *url) {
  const char *key = strchr(url + 5, '/');
  if (!key) return 1; /* s3://bucket */
  const char *base = strrchr(key, '/') + 1;
  return strstr(base, ".tar") == NULL;
}

static int has_tar_suffix(const char *s) {
  static const char *const ok[] = {".tar",     ".tar.gz",  ".tar.lz4",
                                   ".tar.zst", ".tar.bz2", ".tar.xz"};
  size_t n = strlen(s);
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    size_t k = strlen(ok[i]);
    if (n > k && !strcmp(s + n - k, ok[i])) return 1;
  }
  return 0;
}

static int cmp_entry(const void *a, const void *b) {
  return strcmp(((const storage_entry *)a)->url, ((const storage_entry *)b)->url);
}

/* The tar objects under an s3:// prefix (every page of its listing), sorted. */
static int s3_list_shards(storage_client *client, const char *url, storage_listing *out) {
  storage_counts st;
  if (storage_s3_list(client, url, out, &st) != AL_OK) return AL_EIO;
  size_t kept = 0;
  for (size_t i = 0; i < out->count; i++) {
    storage_entry *e = &out->entries[i];
    if (has_tar_suffix(e->url)) {
      out->entries[kept++] = *e;
    } else {
      free(e->url);
      free(e->etag);
    }
  }
  out->count = kept;
  if (kept == 0) {
    storage_listing_free(out);
    return al_set_error(AL_ENOTFOUND,
                        "%s: no *.tar, *.tar.gz, *.tar.lz4, *.tar.zst, *.tar.bz2 or *.tar.xz "
                        "objects under this prefix",
                        url);
  }
  qsort(out->entries, out->count, sizeof *out->entries, cmp_entry);
  return AL_OK;
}

const storage_ops storage_http_ops = {
    .name = "http",
    .noun = "object",
    .remote = 1,
    .canonical = storage_url_canonical,
    .lookup = NULL,
    .open = http_open,
    .stat = url_stat,
    .read = url_read,
    .read_some = url_read_some,
    .is_prefix = NULL,
    .list_shards = NULL,
    .list = storage_s3_list, /* refuses an http(s):// URL, naming it */
    .stats = url_stats,
    .close = url_close,
};

const storage_ops storage_s3_ops = {
    .name = "s3",
    .noun = "object",
    .remote = 1,
    .canonical = storage_url_canonical,
    .lookup = NULL,
    .open = s3_open,
    .stat = url_stat,
    .read = url_read,
    .read_some = url_read_some,
    .is_prefix = s3_is_prefix,
    .list_shards = s3_list_shards,
    .list = storage_s3_list,
    .stats = url_stats,
    .close = url_close,
};
