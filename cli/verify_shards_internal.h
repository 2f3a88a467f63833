/*
 * verify_shards_internal.h - `adaptiveload verify`'s look at every shard, local or at a URL,
 * as the stream will find it (loader/al_check.h): opened (a URL: one HEAD), its size, mtime or
 * ETag and content fingerprint checked, then every typed member's header read and compared
 * with the index and the member's size; by several threads at once (a network file system or
 * an object store answers many requests at once).
 *
 * Internal to cli/ (cmd_verify.c turns the results into problems). Ownership: the caller
 * frees the array with verify_shards_free. Thread safety: verify_shards_probe runs its own
 * threads over the const index; call it from one thread. Errors: al_status codes (out of
 * memory, bad storage options); what is wrong with a shard is a result, not an error.
 */
#ifndef AL_VERIFY_SHARDS_INTERNAL_H
#define AL_VERIFY_SHARDS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/al_check.h"
#include "loader/al_index.h"

/* A typed member whose header disagrees with the index or its size. */
typedef struct verify_member {
  size_t sample, member;
  char *why; /* NULL when out of memory: the report says so */
} verify_member;

typedef struct verify_shard {
  int checked; /* 0: the shard holds no indexed sample and was not looked at */
  al_shard_check c;
  verify_member *bad; /* n_bad of them, in index order (fewer than c.typed_bad when out of
                         memory) */
  size_t n_bad;
} verify_shard;

/* Looks at every shard of `idx` holding samples with `threads` threads (0 = min(4, cores)) into
 * *out (al_index_shard_count entries), through a checker with options `o`. Unless `quiet`,
 * prints "verify: K of N shards checked" on stderr every 2 s of work. AL_OK, AL_ENOMEM or
 * al_checker_open's error (*out NULL). When no thread can start, the calling thread does the
 * work. */
int verify_shards_probe(const al_index *idx, int threads, int quiet, const al_check_options *o,
                        verify_shard **out);

void verify_shards_free(verify_shard *v, size_t n);

#endif /* AL_VERIFY_SHARDS_INTERNAL_H */
