/*
 * al_check.h - a shard checked against its index as the stream will find it, local or at a
 * URL: present, unchanged (size, ETag, content fingerprint), and every typed member's header
 * (.npy, .safetensors) saying what the index recorded and fitting the member's size. What
 * `adaptiveload verify` runs before training, so that a defect is found there and not at the
 * step that reads it.
 *
 * Reads: a local shard is opened and stat'ed; its fingerprint costs one 512-byte pread per
 * indexed member of a plain tar (the first and last 64 KiB of a compressed shard), and each
 * typed member's header one pread of its first bytes. A shard at a URL costs one HEAD (size
 * and ETag), then for a plain tar the header blocks of its members and the first bytes of its
 * typed members in a few coalesced ranged GETs (the payloads are never fetched), for a
 * compressed shard two ranged GETs of 64 KiB. Typed members stored as LZ4 frames and typed
 * members of compressed shards are not read (their headers need the bytes before them
 * decoded): al_shard_check counts them as skipped.
 *
 * Ownership: the checker belongs to the caller (al_checker_close); it keeps a pointer to the
 * index, which must outlive it. al_shard_check.error is the caller's (al_shard_check_clear).
 * Thread safety: al_checker_shard may run on several threads at once for distinct shards
 * (each call opens its own file or connection); the member callback runs on the calling
 * thread. Errors: al_status codes with al_last_error() set; what is wrong with a shard or a
 * member is a result (al_shard_check, the callback), not an error.
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_check_options and
 * al_shard_check start with `size_t struct_size`, set with the struct's AL_*_INIT macro; the
 * library reads and writes only what fits in it (options: 0 = this header's struct; a filled struct
 * must carry its size). A size below AL_*_V1 or above the library's is AL_EINVAL naming the struct
 * and both sizes.
 */
#ifndef AL_CHECK_H
#define AL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "loader/al_index.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_checker al_checker;

/* Zero means the default. */
typedef struct al_check_options {
  size_t
      struct_size; /* sizeof(al_check_options) (AL_CHECK_OPTIONS_INIT); 0 = this header's struct */
  /* Shards at URLs: each setting given here, else the environment's, else what the index
   * recorded (al_storage_resolve in al_index.h). Embedded by value, so al_storage_options keeps
   * its layout for good: a new storage setting would come as a field at the end of this struct. */
  al_storage_options storage;
  int skip_typed_headers; /* 1: do not read typed members' headers */
} al_check_options;
#define AL_CHECK_OPTIONS_INIT AL_STRUCT_INIT(al_check_options)
#define AL_CHECK_OPTIONS_V1 sizeof(al_check_options)

/* What al_checker_shard found. */
typedef struct al_shard_check {
  size_t struct_size;     /* sizeof(al_shard_check), set by the caller: AL_SHARD_CHECK_INIT */
  int open_rc;            /* AL_OK, or why the shard could not be opened, stat'ed or HEAD-ed */
  int verify_rc;          /* size as indexed: AL_OK unchanged, AL_EFORMAT changed (ETag or content
                             fingerprint), AL_EIO unreadable, AL_ENOTFOUND the index recorded no
                             fingerprint (a local reader then compares mtime); another size: AL_OK */
  uint64_t size;          /* bytes now */
  int64_t mtime_ns;       /* a local shard's mtime; 0 for a URL */
  char *error;            /* the message of a failed open or verify, else NULL */
  uint64_t typed_checked; /* typed member headers read and compared */
  uint64_t typed_bad;     /* of them, headers that disagree (each reported through the callback) */
  uint64_t typed_skipped; /* typed members not read (LZ4 frames, compressed shards) */
  uint64_t requests;      /* remote requests sent (0 for a local shard) */
} al_shard_check;
#define AL_SHARD_CHECK_INIT AL_STRUCT_INIT(al_shard_check)
#define AL_SHARD_CHECK_V1 sizeof(al_shard_check)

/* A typed member whose header disagrees with the index or its size: sample and member
 * positions in the index, and the message (naming shard, key, member and byte offset). */
typedef void (*al_check_member_fn)(void *ctx, size_t sample, size_t member, const char *why);

/* A checker of `idx`'s shards (o may be NULL: defaults). AL_OK; AL_ENOMEM; AL_EINVAL for a bad
 * option or an s3 endpoint that is not a URL. A shard at an s3:// URL that cannot be reached
 * gets the endpoint used and, when the index was built with another, that one in its message
 * (al_storage_mismatch). */
AL_API int al_checker_open(al_checker **out, const al_index *idx, const al_check_options *o);

/* Looks at shard `shard`: *out filled (its error freed by al_shard_check_clear). The typed
 * member headers are read only when the shard opened and kept its size and fingerprint. AL_OK
 * (whatever was found), AL_ERANGE for a bad shard number, AL_ENOMEM. */
AL_API int al_checker_shard(al_checker *c, size_t shard, al_check_member_fn fn, void *ctx,
                            al_shard_check *out);

AL_API void al_shard_check_clear(al_shard_check *r);
AL_API void al_checker_close(al_checker *c);

#ifdef __cplusplus
}
#endif

#endif /* AL_CHECK_H */
