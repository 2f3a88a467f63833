/* storage/url_kind.c - the one classifier of shard paths and URLs (storage_internal.h). */
#include "common/url_internal.h"
#include "storage/storage_internal.h"

int storage_url_kind(const char *s) {
  if (url_has_scheme(s, "s3")) return STORAGE_S3;
  if (url_has_scheme(s, "http") || url_has_scheme(s, "https")) return STORAGE_HTTP;
  return STORAGE_LOCAL;
}
