/*
 * member_reader_internal.h - reading one sample's payload member into a growable buffer:
 * pread at the indexed offset for plain tar shards, libarchive's sequential
 * reader for compressed (not seekable) shards, LZ4 frame decoding for
 * KEY.ext.lz4 members. Internal to //stream.
 *
 * A shard table opens each shard once (lazily, shared by all readers: pread
 * needs no per-thread file position) and checks it against the index: size
 * and mtime_ns must still be what was indexed. An al_reader holds one reader
 * thread's scratch state and must not be shared between threads.
 *
 * Errors name the shard path, the key, the member and the byte offset.
 */
#ifndef AL_READER_H
#define AL_READER_H

#include <stddef.h>
#include <stdint.h>

#include "stream/engine_internal.h"

/* A host buffer that grows on demand; contents up to `keep` survive growth. */
typedef struct al_growbuf {
  uint8_t *p;
  size_t cap;
  int pinned;
} al_growbuf;

int al_growbuf_reserve(al_growbuf *b, size_t need, size_t keep);
void al_growbuf_free(al_growbuf *b);

typedef struct al_shard_table al_shard_table;

int al_shard_table_new(al_shard_table **out, const al_stream_source *src);
void al_shard_table_free(al_shard_table *t);

typedef struct al_reader al_reader;

int al_reader_new(al_reader **out, al_shard_table *t, size_t block);
void al_reader_free(al_reader *r);

/* Reads the payload of `job` into b->p + off (growing b, keeping its first
 * `off` bytes); *len is the payload size (decoded size for LZ4 members). */
int al_reader_read(al_reader *r, const al_source_job *job, al_growbuf *b, size_t off, size_t *len);

#endif /* AL_READER_H */
