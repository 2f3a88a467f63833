/*
 * shard_path_internal.h - what the index takes from a shard's path (internal to //loader): its
 * file name, and the refusal of a URL with credentials. The name a path is stored under (an
 * absolute, normal path; a URL's scheme and host in lower case) is its storage backend's,
 * storage_canonical (storage/storage_internal.h).
 */
#ifndef AL_SHARD_PATH_INTERNAL_H
#define AL_SHARD_PATH_INTERNAL_H

#include <stddef.h>

/* The shard's file name, [*return, *return + *len) of path: after its last '/', and for an
 * http(s) URL before its query or fragment (storage_url_identity_len: a presigned URL signed
 * again names the same object). What the index fingerprint folds for a shard, so a corpus
 * keeps its fingerprint wherever it lives and however its URLs are signed. */
const char *shard_path_name(const char *path, size_t *len);

/* AL_EINVAL when path is a URL (any scheme) with a user:password@ part, with a message that
 * names it as ***@ and prefixed by `where` (NULL: none); else AL_OK. Every way a path enters
 * an index (indexing, expansion, hand assembly, loading, --root) refuses such a URL, so no
 * index, message or report carries the credentials. */
int shard_path_check_userinfo(const char *path, const char *where);

#endif /* AL_SHARD_PATH_INTERNAL_H */
