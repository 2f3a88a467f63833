/*
 * index_decode_internal.h - a hand-written decoder of IndexChunk records that hold samples
 * (proto/adaptiveload.proto), for loading large indexes without protobuf-c.
 *
 * It accepts and rejects exactly what protobuf-c 1.4's protobuf_c_message_unpack does for
 * these messages (tags, wire types, varints of at most 10 bytes, length prefixes of at most
 * 5 bytes and at most INT_MAX, packed or unpacked repeated shapes, unknown fields of wire
 * types 0, 1, 2 and 5 skipped, groups refused, last value wins for singular fields) and
 * gives the values protobuf-c would (uint32 fields keep the low 32 bits of the varint; a
 * bool is true when any of its bytes has a low bit set). Strings are handed over as
 * pointers into the record, cut at their first NUL as the C string protobuf-c makes would
 * read. It never reads outside [buf, buf + len).
 */
#ifndef AL_INDEX_DECODE_INTERNAL_H
#define AL_INDEX_DECODE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/tensor_header_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct idec_member {
  const char *ext; /* not NUL-terminated; ext_len bytes */
  size_t ext_len;
  uint64_t offset, size, data_offset;
  int lz4;
  const char *dtype; /* not NUL-terminated; dtype_len bytes ("" when absent) */
  size_t dtype_len;
  const char *codec; /* not NUL-terminated; codec_len bytes ("" when absent) */
  size_t codec_len;
  size_t n_shape;                   /* every value the record gives */
  uint64_t shape[THEADER_MAX_DIMS]; /* the first THEADER_MAX_DIMS of them */
} idec_member;

typedef struct idec_sample {
  const char *key; /* not NUL-terminated; key_len bytes */
  size_t key_len;
  uint32_t shard, width, height, frames;
  float fps;
  size_t n_members;     /* every member the record gives */
  idec_member *members; /* the first min(n_members, IDEC_MEMBERS_KEPT) of them */
} idec_sample;

/* Members kept per sample: more than the index takes (AL_MEMBERS_MAX), so a sample over the
 * limit is still seen as such; the rest are checked but not kept. */
#define IDEC_MEMBERS_KEPT 0x10000u

/* Scratch memory reused from sample to sample (zero-initialise; idec_scratch_free). */
typedef struct idec_scratch {
  idec_member *mem;
  size_t cap;
} idec_scratch;

void idec_scratch_free(idec_scratch *s);

/* Where and why a record failed to decode. */
typedef struct idec_error {
  size_t offset;    /* byte offset in the record */
  const char *what; /* static text */
} idec_error;

/* The record holds fields other than samples (shards, rejected entries, warnings): decode it
 * with protobuf-c instead. */
#define IDEC_OTHER 1

/* Called for each sample in record order; a non-zero return stops decoding and is returned. */
typedef int (*idec_sample_fn)(void *ctx, const idec_sample *s);

/* Decodes the IndexChunk record buf[0, len). If it holds anything but samples (field 2) and
 * unknown fields, returns IDEC_OTHER having called nothing. Otherwise calls fn for each sample
 * and returns AL_OK, fn's non-zero return, AL_ENOMEM (with al_set_error), or AL_EFORMAT with
 * *err set (no al_set_error: the caller names the file and record). The top level is checked
 * whole before the first sample; a sample is checked whole before fn sees it. */
int idec_index_chunk(const uint8_t *buf, size_t len, idec_scratch *scratch, idec_sample_fn fn,
                     void *ctx, idec_error *err);

#ifdef __cplusplus
}
#endif

#endif /* AL_INDEX_DECODE_INTERNAL_H */
