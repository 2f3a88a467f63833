/*
 * lz4_member_internal.h - decoding one KEY.ext.lz4 tar member (a single LZ4
 * frame): the index scan decodes KEY.json.lz4 metadata (scan.c, whole member
 * in memory), the stream decodes payloads (stream/member_reader.c, read in
 * blocks by pread or libarchive). Internal to //loader and //stream.
 *
 * The decoder says what is wrong with a frame and at which member byte; each
 * caller words the message for its context (a rejected-sample reason, or a
 * stream error naming shard, key and file offset). Input and output go through
 * the caller: bytes are read into the caller's scratch (or taken from memory),
 * decoded bytes land in a buffer the caller grows.
 *
 * Not thread-safe per LZ4F context; one context per thread.
 */
#ifndef AL_LZ4_MEMBER_INTERNAL_H
#define AL_LZ4_MEMBER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <lz4frame.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lz4_member_fault {
  LZ4_MEMBER_OK = 0,
  LZ4_MEMBER_BAD_HEADER,   /* the frame header does not parse (lz4_error says why) */
  LZ4_MEMBER_TOO_LARGE,    /* the header's content size, or what decodes, is over `limit` */
  LZ4_MEMBER_CORRUPT,      /* a block does not decode (lz4_error says why) */
  LZ4_MEMBER_TRUNCATED,    /* the member ends inside the frame */
  LZ4_MEMBER_TRAILING,     /* bytes follow the end of the frame */
  LZ4_MEMBER_SIZE_MISMATCH /* decoded size differs from the header's content size */
} lz4_member_fault;

/* The member's stored bytes: all of them in memory (`data`), or read through
 * `read` into `scratch`, at most `block` bytes a call. */
typedef struct lz4_member_src {
  uint64_t size;
  const uint8_t *data;
  /* Copies up to `cap` next bytes of the member into `buf`; returns how many,
   * 0 at the member's end, or a negative al_status with the message recorded. */
  long long (*read)(void *ctx, uint8_t *buf, size_t cap);
  void *ctx;
  uint8_t *scratch;
  size_t block;
} lz4_member_src;

/* Where decoded bytes go. */
typedef struct lz4_member_dst {
  /* Makes room for `need` decoded bytes, keeping the first `keep`; sets *out to
   * the buffer and *cap to its size from *out. AL_OK or an al_status (message
   * recorded). */
  int (*reserve)(void *ctx, size_t need, size_t keep, uint8_t **out, size_t *cap);
  void *ctx;
  size_t first; /* first reservation when the header gives no content size (> 0) */
  size_t limit; /* most decoded bytes accepted (< SIZE_MAX) */
} lz4_member_dst;

typedef struct lz4_member_result {
  lz4_member_fault fault;
  uint64_t at;                /* member byte the fault is at (0: the header) */
  const char *lz4_error;      /* LZ4F's error name for BAD_HEADER and CORRUPT, else NULL */
  size_t len;                 /* decoded bytes */
  unsigned long long content; /* the header's content size; 0 when it gives none */
} lz4_member_result;

/* Decodes the member with `dctx` (reset first). Returns AL_OK with
 * res->fault telling whether the frame was good, or a negative status from
 * src->read or dst->reserve (their message recorded). Where `at` points:
 * BAD_HEADER and SIZE_MISMATCH 0; TOO_LARGE 0 when the header said so, else
 * the input position; CORRUPT the first byte of the input being decoded;
 * TRUNCATED the member's end (its bytes, or fewer when the source ran dry);
 * TRAILING the first byte after the frame. */
int lz4_member_decode(LZ4F_dctx *dctx, const lz4_member_src *src, const lz4_member_dst *dst,
                      lz4_member_result *res);

#ifdef __cplusplus
}
#endif

#endif /* AL_LZ4_MEMBER_INTERNAL_H */
