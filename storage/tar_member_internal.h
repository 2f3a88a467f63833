/*
 * storage/tar_member_internal.h - the members of a plain tar, from its header blocks alone, over
 * any storage_obj (internal to //storage; the index's shards at URLs use it through
 * loader/shard_bytes.c).
 *
 * The walk reads the header at offset 0, then each next header at the offset after the
 * previous member's data rounded up to 512 bytes, never the payloads in between. Reads are
 * coalesced: one ranged read (a GET for a URL) fetches a window of batch_bytes from a header,
 * so the headers of
 * neighbouring small members come in the same request; a header beyond the window starts a
 * new one. ustar, pax ('x': path and size records; 'g' skipped) and GNU long names ('L')
 * are understood; the header checksum is verified. The walk ends at a zero block or at the
 * end of the object; a header or its extension cut off by the end is an error naming the
 * object (its path or URL) and the offset.
 *
 * One walk uses its object alone (one thread).
 */
#ifndef AL_STORAGE_TAR_MEMBER_INTERNAL_H
#define AL_STORAGE_TAR_MEMBER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "storage/storage_internal.h"

typedef struct storage_tar_member {
  char *name;          /* pax path / GNU long name / ustar prefix + name */
  uint64_t header_off; /* the member's own ustar header */
  uint64_t data_off;
  uint64_t size;
  char type; /* ustar typeflag ('0' for a regular file; '\0' is reported as '0') */
} storage_tar_member;

typedef struct storage_tar_listing {
  storage_tar_member *members;
  size_t count;
  uint64_t fetched;  /* bytes the walk read (its GETs, for a URL) */
  uint64_t requests; /* ranged reads the walk made (GETs for a URL; retries not counted) */
} storage_tar_listing;

/* batch_bytes 0: 64 KiB (at least 512). AL_OK; else out is empty and the error is AL_EFORMAT
 * (not a tar, or cut off: naming the object and the offset), AL_ENOMEM or the read's. */
int storage_tar_scan(storage_obj *o, size_t batch_bytes, storage_tar_listing *out);
/* The same walk with its windows fetched by fetch(fetch_ctx, off, buf, len)
 * instead of storage_read (a cache in front of the object: loader/shard_bytes.c);
 * fetch returns an al_status (the message recorded). `fetched` and `requests` then count the
 * windows asked for, which the cache may have served without a request. batch_max > batch_bytes: a
 * window whose next header lies within batch_bytes of its end (dense members, no payload skipped)
 * is followed by one twice as large, up to batch_max; a skip goes back to batch_bytes (as
 * local reads grow while data is consumed). */
typedef int (*storage_tar_fetch_fn)(void *ctx, uint64_t off, void *buf, size_t len);
int storage_tar_scan_via(storage_obj *o, size_t batch_bytes, size_t batch_max,
                         storage_tar_fetch_fn fetch, void *fetch_ctx, storage_tar_listing *out);
void storage_tar_listing_free(storage_tar_listing *l);

#endif /* AL_STORAGE_TAR_MEMBER_INTERNAL_H */
