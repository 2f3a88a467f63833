/*
 * storage/storage_internal.h - bytes at a path or a URL behind one interface (internal to
 * //storage; the index and the stream use it): what kind of place a shard path names, and a
 * table of operations per kind (open, stat with the size and the identity, ranged read, list,
 * the request counters, close), as libarchive puts its formats behind a table of function
 * pointers. A local file, an http(s):// object and an s3:// object are opened alike by
 * storage_open, which picks the backend by storage_url_kind, the one classifier of paths and
 * URLs: file_ops.c (pread on a descriptor), url_ops.c (http(s):// and s3:// through
 * storage_http_object, client_internal.h).
 *
 * A URL's object is pinned at open (its size and ETag: client_internal.h); a local file is
 * opened as afile_open_input opens inputs (a regular file only) and its size and mtime taken
 * then. The plan-ordered cache of the stream (stream/cache.c) and the index's cache of a
 * remote shard's headers (loader/remote_shard.c) sit above this layer, not in it.
 *
 * Thread safety: a storage_obj is used by one thread at a time (its stats may be read from
 * any); the client given to storage_open is shared (client_internal.h).
 *
 * Errors: every function returning int gives an al_status and records the message
 * (common/al_status.h), naming the path or the URL (a URL's user:password@ as ***@).
 */
#ifndef AL_STORAGE_STORAGE_INTERNAL_H
#define AL_STORAGE_STORAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_status.h"
#include "storage/client_internal.h"

/* The kinds of place, the values of loader/al_index.h's AL_SHARD_*. */
enum { STORAGE_LOCAL = 0, STORAGE_HTTP = 1, STORAGE_S3 = 2 };

/* STORAGE_HTTP (http://, https://), STORAGE_S3 (s3://) or STORAGE_LOCAL (anything else: a
 * path), from the scheme alone, in any case (HTTP:// is http://). */
int storage_url_kind(const char *path_or_url);

/* What an object is: its size and its identity. */
typedef struct storage_stat {
  uint64_t size;
  const char *etag; /* a URL's, as the server sent it ("" when none; the object owns it);
                       "" for a local file */
  int64_t mtime_ns; /* a local file's modification time; 0 for a URL */
} storage_stat;

typedef struct storage_obj storage_obj;

/* One backend. */
typedef struct storage_ops {
  const char *name; /* "file", "http", "s3" */
  /* client: the shared client of URLs (ignored by "file"; NULL is an error for a URL). */
  int (*open)(storage_client *client, const char *path_or_url, storage_obj **out);
  int (*stat)(const storage_obj *o, storage_stat *out);
  /* Exactly len bytes at off; [off, off + len) within the object. */
  int (*read)(storage_obj *o, uint64_t off, void *buf, size_t len);
  /* Every object under a prefix (s3://BUCKET/PREFIX); the other kinds refuse, naming it. */
  int (*list)(storage_client *client, const char *prefix, storage_listing *out, storage_counts *st);
  storage_counts (*stats)(const storage_obj *o); /* requests sent (zero for "file") */
  void (*close)(storage_obj *o);
} storage_ops;

/* The first member of every backend's object. */
struct storage_obj {
  const storage_ops *ops;
};

extern const storage_ops storage_file_ops; /* file_ops.c */
extern const storage_ops storage_http_ops; /* url_ops.c */
extern const storage_ops storage_s3_ops;   /* url_ops.c */

/* The backend of a kind (STORAGE_*; anything else: NULL). */
const storage_ops *storage_ops_of(int kind);

/* Opens path_or_url with the backend of storage_url_kind(path_or_url). */
int storage_open(storage_client *client, const char *path_or_url, storage_obj **out);
int storage_get_stat(const storage_obj *o, storage_stat *out);
int storage_read(storage_obj *o, uint64_t off, void *buf, size_t len);
int storage_list(storage_client *client, const char *prefix, storage_listing *out,
                 storage_counts *st);
storage_counts storage_stats(const storage_obj *o);
void storage_close(storage_obj *o); /* NULL: nothing */

#endif /* AL_STORAGE_STORAGE_INTERNAL_H */
