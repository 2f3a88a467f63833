/*
 * storage/storage_internal.h - bytes at a path or a URL behind one interface (internal to
 * //storage; the index and the stream use it): what kind of place a shard path names, and a
 * table of operations per kind, as libarchive puts its formats behind a table of function
 * pointers. storage_url_kind is the one classifier of paths and URLs; it picks the table
 * (storage_ops_for), and every caller above this layer asks the table instead of looking at
 * the path: file_ops.c and file_path.c (a local file: stat, pread on a descriptor, directory
 * listings, absolute normal paths), url_ops.c (http(s):// and s3:// through
 * storage_http_object, client_internal.h; S3 prefixes listed by storage_s3_list).
 *
 * What a table gives: the name a path is stored under (canonical); what a path names without
 * opening it (lookup: a file's stat; nothing for a URL, which costs a request); open, stat
 * (size and identity: a URL's ETag, a file's mtime), exact and partial ranged reads, the
 * request counters, close; which names are prefixes to list (is_prefix: s3://) and the tar
 * shards a container holds (list_shards: a directory, an S3 prefix); whether the backend's
 * objects are a server's (remote: every read a request), which tells the readers above to
 * coalesce and cache their reads. A tar's member list from its header blocks alone
 * (tar_member_internal.h) works over any storage_obj.
 *
 * A URL's object is pinned at open (its size and ETag: client_internal.h); a local file is
 * opened as afile_open_input opens inputs (a regular file only) and its size and mtime taken
 * then. The plan-ordered cache of the stream (stream/cache.c) and the index's cache of a
 * remote shard's headers (loader/shard_bytes.c) sit above this layer, not in it.
 *
 * Thread safety: a URL's storage_obj is used by one thread at a time (its stats may be read
 * from any); a file's may be read from any number of threads at once (pread, nothing
 * written after open). The client given to storage_open is shared (client_internal.h). The
 * tables are constant.
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

/* What a name is (storage_stat.type). */
enum {
  STORAGE_OBJECT = 0,    /* a regular file, an object: opened and read */
  STORAGE_CONTAINER = 1, /* a directory: list_shards lists it */
  STORAGE_OTHER = 2      /* a FIFO, a device, a socket: nothing to read as a shard */
};

/* What an object is: its size and its identity. */
typedef struct storage_stat {
  uint64_t size;
  const char *etag;      /* a URL's, as the server sent it ("" when none; the object owns it);
                            NULL for a file (files have no ETag) */
  int64_t mtime_ns;      /* a file's modification time; 0 for a URL */
  int type;              /* STORAGE_OBJECT, ... (an open object: STORAGE_OBJECT) */
  const char *type_name; /* "a regular file", "a directory", "a FIFO", ... (static) */
} storage_stat;

typedef struct storage_obj storage_obj;

/* One backend. */
typedef struct storage_ops {
  const char *name; /* "file", "http", "s3" */
  const char *noun; /* what messages call one of its objects: "file", "object" */
  /* 1: a server's objects (http, s3): every open and read is a request, so the readers above
   * pin each object once, coalesce and cache their reads and count what the requests
   * received; 0: reads are system calls (file). */
  int remote;
  /* The name path is stored under in an index, malloc'd (NULL when out of memory): file_path.c
   * for a path (absolute, normal), storage_url_canonical for a URL. */
  char *(*canonical)(const char *path);
  /* What path names, without opening it or sending a request: a file's stat(2) (size, mtime,
   * type; AL_ENOTFOUND or AL_EIO "PATH: cannot open: ERRNO-TEXT" when stat fails). NULL for
   * URLs: nothing is known of them before a request. */
  int (*lookup)(const char *path, storage_stat *out);
  /* client: the shared client of URLs (ignored by "file"; NULL is an error for a URL). */
  int (*open)(storage_client *client, const char *path_or_url, storage_obj **out);
  int (*stat)(const storage_obj *o, storage_stat *out);
  /* Exactly len bytes at off; [off, off + len) within the object. */
  int (*read)(storage_obj *o, uint64_t off, void *buf, size_t len);
  /* Up to cap bytes at off, as pread(2) reads them: *got is 0 at (or past) the end. */
  int (*read_some)(storage_obj *o, uint64_t off, void *buf, size_t cap, size_t *got);
  /* Whether path, by its text alone, names a prefix that list_shards lists (s3: its last
   * component names no tar). NULL: no name is (a directory is found by lookup; an http(s)
   * URL names one object). */
  int (*is_prefix)(const char *path);
  /* The tar shards a container holds, sorted bytewise (a directory's regular files whose names
   * hold ".tar", not starting with '.'; an S3 prefix's *.tar, *.tar.gz, *.tar.lz4, *.tar.zst,
   * *.tar.bz2, *.tar.xz objects): AL_ENOTFOUND when there are none, naming the container;
   * AL_EIO when it cannot be listed. NULL: nothing is a container (http). */
  int (*list_shards)(storage_client *client, const char *container, storage_listing *out);
  /* Every object under a prefix (s3://BUCKET/PREFIX); the other kinds refuse, naming it. */
  int (*list)(storage_client *client, const char *prefix, storage_listing *out, storage_counts *st);
  storage_counts (*stats)(const storage_obj *o); /* requests sent (zero for "file") */
  void (*close)(storage_obj *o);
} storage_ops;

/* The first member of every backend's object. */
struct storage_obj {
  const storage_ops *ops;
  const char *name; /* what messages name: the path, or the URL as storage_http_url gives it */
};

extern const storage_ops storage_file_ops; /* file_ops.c */
extern const storage_ops storage_http_ops; /* url_ops.c */
extern const storage_ops storage_s3_ops;   /* url_ops.c */

/* The backend of a kind (STORAGE_*; anything else: NULL). */
const storage_ops *storage_ops_of(int kind);
/* The backend of a path or URL: storage_ops_of(storage_url_kind(path_or_url)). */
const storage_ops *storage_ops_for(const char *path_or_url);

/* Calls through the table of storage_url_kind(path_or_url). */
char *storage_canonical(const char *path_or_url);
/* AL_EUNSUPPORTED (message recorded) for a backend without lookup (URLs). */
int storage_lookup(const char *path_or_url, storage_stat *out);
int storage_open(storage_client *client, const char *path_or_url, storage_obj **out);
/* 0 for a backend without is_prefix. */
int storage_is_prefix(const char *path_or_url);
/* AL_EINVAL (message recorded) for a backend without list_shards. */
int storage_list_shards(storage_client *client, const char *container, storage_listing *out);
int storage_list(storage_client *client, const char *prefix, storage_listing *out,
                 storage_counts *st);

/* Calls through an open object's table. */
int storage_get_stat(const storage_obj *o, storage_stat *out);
int storage_read(storage_obj *o, uint64_t off, void *buf, size_t len);
int storage_read_some(storage_obj *o, uint64_t off, void *buf, size_t cap, size_t *got);
storage_counts storage_stats(const storage_obj *o);
void storage_close(storage_obj *o); /* NULL: nothing */
/* The object's path or URL, as its messages name it. */
const char *storage_name(const storage_obj *o);
/* o->ops->remote: its reads are requests to a server. */
int storage_is_remote(const storage_obj *o);

/* A "file" object over fd, a regular file the caller opened (a download of the stream's, in
 * its cache folder or a private temporary file), named `name` in messages; the object owns fd
 * from then on (closed by storage_close, also when this fails). AL_EIO when fstat fails,
 * AL_ENOMEM. */
int storage_file_adopt(int fd, const char *name, storage_obj **out);

/* The index's read_at callback shape (loader/index_internal.h's index_read_at_fn) over an
 * object (ctx, a storage_obj *): exactly n bytes at off; path ignored (the object's name is in
 * its messages). */
int storage_read_at(void *ctx, void *buf, size_t n, uint64_t off, const char *path);

/* The tables' canonical names (storage_ops.canonical): a local path made absolute and normal
 * (file_path.c); a URL with its scheme, and an http(s) host, in lower case and any
 * user:password@ left out (url_target.c). */
char *storage_file_canonical(const char *path);
char *storage_url_canonical(const char *url);

#endif /* AL_STORAGE_STORAGE_INTERNAL_H */
