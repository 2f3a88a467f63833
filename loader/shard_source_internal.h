/*
 * shard_source_internal.h - a shard as the tar stream libarchive's tar reader walks (internal
 * to //loader; scan.c is its user). Its bytes come through shard_bytes_internal.h, whatever
 * the shard's backend (a file, a URL).
 *
 * Our own read callbacks instead of archive_read_open_filename: the same read-a-block /
 * seek-to-skip behaviour, plus a count of the bytes really read, which is how the
 * benchmark shows that payloads are skipped. A plain tar is read as is; the skip callback
 * moves the read position over data beyond the read buffer, so payloads are not read (for a
 * URL, not fetched: the shard's plan fetched its headers and metadata members).
 *
 * gzip and LZ4-frame shards are decoded here (zlib, LZ4F) rather than by libarchive's
 * filters, which verify neither the gzip CRC32 nor the LZ4 content checksum: libarchive
 * then reads a plain tar stream, and a checksum mismatch fails the shard. Other codecs
 * (zstd, bzip2, xz, legacy LZ4) go through libarchive's filters with the raw format, which
 * give the tar stream too. Either way the source knows which bytes of the (uncompressed)
 * tar stream its last two buffers hold, so the scanner can look at a member's raw ustar
 * header (shard_source_block).
 *
 * One source serves one walk, on one thread.
 */
#ifndef AL_SHARD_SOURCE_INTERNAL_H
#define AL_SHARD_SOURCE_INTERNAL_H

#include <archive.h>
#include <lz4frame.h>
#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "loader/shard_bytes_internal.h"

#define SHARD_SOURCE_WHY_CAP 512

enum { SHARD_CODEC_NONE = 0, SHARD_CODEC_GZIP = 1, SHARD_CODEC_LZ4 = 2, SHARD_CODEC_OTHER = 3 };

/* The state of the read callbacks. The scanner reads `failed`, `why`, `pos` and `bytes_read`;
 * the rest is this file's. */
typedef struct shard_source {
  shard_bytes *sb;        /* the shard's bytes (the caller's) */
  uint64_t rpos;          /* the read position in them */
  unsigned char *bufs[2]; /* handed out in turn: the previous one stays readable */
  int cur_buf;
  uint64_t off[2]; /* tar-stream offset of each buffer's first byte */
  size_t len[2];
  uint64_t pos;         /* tar-stream offset after the last byte handed out */
  size_t min, max, cur; /* read size: cur grows from min to max, back to min after a skip */
  uint64_t bytes_read;  /* bytes read from the file */
  int codec;            /* SHARD_CODEC_*, from the file's first bytes */
  /* Decoding (SHARD_CODEC_GZIP, SHARD_CODEC_LZ4). */
  unsigned char *in;
  size_t in_len, in_pos;
  int in_eof;
  z_stream z;
  int z_init, z_member_done; /* between gzip members */
  LZ4F_dctx *lz;
  size_t lz_hint; /* 0: between LZ4 frames */
  /* LZ4 is fed one unit at a time (what LZ4F asks for: the rest of a block, its checksum, the
   * next block's size), so that a damaged block is located in the compressed stream. */
  size_t lz_unit_left;
  uint64_t lz_unit_off; /* compressed offset of the current unit */
  /* SHARD_CODEC_OTHER: libarchive's filters, raw format, give the tar stream, so that its
   * header blocks can be checked as for gzip and LZ4 shards. */
  struct archive *raw;
  int started;   /* some compressed input consumed */
  int failed;    /* 1: checksum/data error (the shard's data cannot be trusted), 2: truncated */
  int fail_next; /* the error comes with the next call (bytes decoded before it go first) */
  char why[SHARD_SOURCE_WHY_CAP]; /* what failed, when `failed` */
} shard_source;

/* Opens the source over `sb` (kept open by the caller; named `path` in messages): the codec
 * from the first bytes, the read size (block_size, or 0: by codec), buffers and decoder. A
 * URL's first 16 KiB are fetched for the codec, then a plain tar's headers and metadata in
 * coalesced GETs (shard_bytes_plan), a compressed shard read through in order
 * (shard_bytes_stream). AL_OK; AL_ENOMEM "out of memory (libarchive, N-byte block)"; any other
 * error (a compressed stream of another codec that cannot be opened, a request that failed)
 * is the shard's to reject, its message naming path. shard_source_close frees what it holds in
 * every case. */
int shard_source_open(shard_source *src, shard_bytes *sb, const char *path, size_t block_size);

void shard_source_close(shard_source *src);

/* Makes `a` (a new archive, not yet opened) read through the source. */
void shard_source_attach(shard_source *src, struct archive *a);

/* After the tar reader's first header: the compression the index records ("none", "gzip",
 * "lz4", "zstd", ...) and whether member data offsets are file offsets (plain tar). */
const char *shard_source_compression(const shard_source *src, struct archive *a);
int shard_source_seekable(const shard_source *src, struct archive *a);

/* The 512 bytes of the tar stream at `off`, from the last two buffers (or, for a plain tar,
 * the file). Returns 1, or 0 when they cannot be had (zstd, xz, ...). */
int shard_source_block(shard_source *src, uint64_t off, unsigned char out[512]);

/* The tar reader stops after the end-of-archive blocks: decodes the rest of a compressed
 * shard, so that the gzip CRC32 / LZ4 content checksum at its very end is checked too.
 * AL_OK, or AL_EFORMAT with `failed` and `why` set (and why recorded as the message). Nothing
 * to do for a plain tar or a source that failed already. */
int shard_source_drain(shard_source *src);

#endif /* AL_SHARD_SOURCE_INTERNAL_H */
