/*
 * scan_internal.h - index one tar shard with libarchive (internal to //loader).
 *
 * The result is a one-shard al_index (shard id 0, extension ids local to it)
 * plus, per sample, the header offset of its first member (for messages when
 * the merge rejects a duplicate key). build.c runs scans in parallel and merges
 * the results in shard order.
 */
#ifndef AL_SCAN_INTERNAL_H
#define AL_SCAN_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "loader/index_internal.h"
#include "loader/meta_internal.h"
#include "storage/storage_internal.h"

typedef struct scan_result {
  al_index *idx;       /* one shard */
  uint64_t *first_hdr; /* per sample: header offset of its first member */
  size_t first_hdr_cap;
  int readable;        /* 0: the shard could not be opened or is not a tar */
  uint64_t bytes;      /* shard bytes (file size) when readable */
  uint64_t bytes_read; /* bytes actually read from the file (payloads skipped are not); for a
                          remote shard, body bytes received */
  int remote;          /* the shard's backend is a server's (storage_ops.remote): a URL */
  uint64_t requests;   /* HTTP requests sent (retries included); 0 for a file */
  /* The shard's identity, read in the scan (through a URL's cache), folded by build.c once the
   * merge has decided which samples stay. */
  uint64_t *hdr_off;   /* plain tar: data offset of each indexed member, ascending */
  uint64_t *hdr_hash;  /* the hash of the header block before it (shard_fp.c's term) */
  size_t n_hdr;        /* 0: no fingerprint can be recorded */
  uint64_t content_fp; /* compressed: the content fingerprint, 0 if none */
} scan_result;

typedef struct scan_progress {
  atomic_ullong samples;
  atomic_ullong bytes; /* bytes of the shards' files passed (read or skipped) */
} scan_progress;

/* Scans the shard at `path`, a local path or an http(s):// or s3:// URL (read through
 * `client`, which may be NULL when no shard is a URL), through storage (shard_bytes_internal.h).
 * Fails only for out-of-memory; everything wrong inside the shard becomes a rejected entry,
 * and so does a shard that cannot be opened (missing, not a regular file, unreachable, 403,
 * 404), naming the path or URL. The shard's record holds its size and, as the backend gives
 * them, its mtime (a file) or ETag (a URL). `progress` may be NULL. vae_t, vae_s: the VAE
 * strides of the latent cross-check (already resolved, >= 1). */
int scan_shard(const char *path, storage_client *client, const meta_fields *fields,
               size_t block_size, uint64_t max_member, uint32_t vae_t, uint32_t vae_s,
               scan_progress *progress, scan_result *out);

void scan_result_free(scan_result *r);

#endif /* AL_SCAN_INTERNAL_H */
