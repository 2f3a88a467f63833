/*
 * shard_path_internal.h - the path a shard is stored under in the index (internal to
 * //loader).
 *
 * Stored paths are absolute and normal: no "." or ".." components, no repeated or trailing
 * slashes, so that al_index_remap_root (`stream --root FROM=TO`) can replace a leading
 * directory: "/data/errs/../corpus/s.tar" moved by /data=/local would name
 * "/local/errs/../corpus/s.tar", which exists only if /local has an errs/ as well.
 *
 * Normalisation is lexical, and symlinks are not resolved, so the names the user gave (a
 * symlinked mount such as /data -> /mnt/nvme0/data) stay in the index and a --root written
 * with them matches. A relative path is joined to the logical working directory ($PWD when
 * it names the working directory, as `pwd -L`; else getcwd). Lexical ".." differs from the
 * file system's when it follows a symlink ("/a/link/../s.tar"): when the lexical path does
 * not name the same file as the given one (device and inode), the realpath is stored.
 */
#ifndef AL_SHARD_PATH_INTERNAL_H
#define AL_SHARD_PATH_INTERNAL_H

#include <stddef.h>

/* A malloc'ed absolute, normal path for `path` (as above), or NULL when out of memory. A URL
 * (storage_url_kind) is stored as shard_path_url_normal makes it. */
char *shard_path_absolute(const char *path);

/* url (storage_url_kind != STORAGE_LOCAL) with its scheme in lower case, for http(s) the host in
 * lower case too, and any user:password@ left out (the index never stores credentials); the
 * path, the query and an s3:// bucket and key as given. malloc'ed, NULL when out of memory. */
char *shard_path_url_normal(const char *url);

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
