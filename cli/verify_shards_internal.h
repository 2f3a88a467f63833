/*
 * verify_shards_internal.h - `adaptiveload verify`'s look at every shard: opened, its size
 * and mtime read, and its content fingerprint checked (al_index_shard_verify) when the size is
 * the indexed one, by several threads at once (one 512-byte read per indexed member of a
 * plain tar shard: a network file system answers many at once).
 *
 * Internal to cli/ (cmd_verify.c turns the results into problems). Ownership: the caller
 * frees the array with verify_shards_free. Thread safety: verify_shards_probe runs its own
 * threads over the const index; call it from one thread. Errors: al_status codes (out of
 * memory); what is wrong with a shard is a result, not an error.
 */
#ifndef AL_VERIFY_SHARDS_INTERNAL_H
#define AL_VERIFY_SHARDS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/al_index.h"

typedef struct verify_shard {
  int checked;   /* 0: the shard holds no indexed sample and was not looked at */
  int open_rc;   /* AL_OK, or why it could not be opened or stat'ed (error) */
  int verify_rc; /* size as indexed: al_index_shard_verify's status (AL_ENOTFOUND: the index
                    has no fingerprint for it); another size: AL_OK, not called */
  uint64_t size; /* bytes now */
  int64_t mtime_ns;
  char *error; /* the message of a failed open or verify, else NULL */
} verify_shard;

/* Looks at every shard of `idx` holding samples with `threads` threads (0 = min(4, cores)) into
 * *out (al_index_shard_count entries). Unless `quiet`, prints "verify: K of N shards checked"
 * on stderr every 2 s of work. AL_OK or AL_ENOMEM (*out NULL). When no thread can start, the
 * calling thread does the work. */
int verify_shards_probe(const al_index *idx, int threads, int quiet, verify_shard **out);

void verify_shards_free(verify_shard *v, size_t n);

#endif /* AL_VERIFY_SHARDS_INTERNAL_H */
