/* A shard path's file name and its refusal of credentials; see shard_path_internal.h. */
#include "loader/shard_path_internal.h"

#include <stdlib.h>

#include "common/al_status.h"
#include "common/url_internal.h"
#include "storage/client_internal.h"

const char *shard_path_name(const char *path, size_t *len) {
  const char *end = path + storage_url_identity_len(path), *base = end;
  while (base > path && base[-1] != '/') base--;
  *len = (size_t)(end - base);
  return base;
}

int shard_path_check_userinfo(const char *path, const char *where) {
  if (url_userinfo(path, NULL) == 0) return AL_OK;
  char *shown = url_redact(path);
  int rc = al_set_error(AL_EINVAL,
                        "%s%s%s: a URL with user:password@ is refused: shard paths are stored in the index and named in messages, credentials must be neither; serve the shards without them",
                        where ? where : "", where ? ": " : "", shown ? shown : "URL");
  free(shown);
  return rc;
}
