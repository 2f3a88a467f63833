/* A shard file as the tar stream libarchive walks; see shard_source_internal.h. */
#include "loader/shard_source_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/al_status.h"

#define WHY_CAP SHARD_SOURCE_WHY_CAP
#define IN_CAP (1u << 20)

/*
 * Read sizes. In a plain tar, what is read past a header before the next skip
 * can seek is wasted, so reads start small after every skip (16 KiB: a header,
 * a KEY.json and the next header fit) and double while the data keeps being
 * consumed, up to 1 MiB: a latent corpus reads ~1% of its bytes, a
 * metadata-only one streams in large reads. A compressed shard is decompressed
 * through anyway, so it reads 4 MiB at a time. A block size set by the caller
 * fixes the read size.
 */
#define READ_MIN (16u << 10)
#define READ_MAX_PLAIN (1u << 20)
#define READ_COMPRESSED (4u << 20)
/* A plain tar at a URL: the first request, and the window of each header walk's GET. */
#define REMOTE_HEAD (16u << 10)

static const char *filter_name(int code) {
  switch (code) {
    case ARCHIVE_FILTER_NONE: return "none";
    case ARCHIVE_FILTER_GZIP: return "gzip";
    case ARCHIVE_FILTER_BZIP2: return "bzip2";
    case ARCHIVE_FILTER_COMPRESS: return "compress";
    case ARCHIVE_FILTER_LZMA: return "lzma";
    case ARCHIVE_FILTER_XZ: return "xz";
    case ARCHIVE_FILTER_LZIP: return "lzip";
    case ARCHIVE_FILTER_LZ4: return "lz4";
    case ARCHIVE_FILTER_ZSTD: return "zstd";
    default: return "other";
  }
}

/* The shard's next bytes at src->rpos (0 at its end); -1 with src->why set. */
static ssize_t file_read(shard_source *src, void *buf, size_t n) {
  size_t got = 0;
  if (shard_bytes_read(src->sb, src->rpos, buf, n, &got) != AL_OK) {
    snprintf(src->why, WHY_CAP, "%s", al_last_error());
    return -1;
  }
  src->rpos += got;
  return (ssize_t)got;
}

/* Exactly n bytes at off (1), or 0 when they cannot be had. */
static int file_pread(shard_source *src, void *buf, size_t n, uint64_t off) {
  if (shard_bytes_pread(src->sb, off, buf, n) == AL_OK) return 1;
  al_clear_error();
  return 0;
}

static uint64_t in_consumed(const shard_source *src) {
  return src->bytes_read - (uint64_t)(src->in_len - src->in_pos);
}

/* Refills the compressed input; returns -1 on a read error (src->why set). */
static int dec_refill(shard_source *src) {
  if (src->in_pos < src->in_len || src->in_eof) return 0;
  ssize_t n = file_read(src, src->in, IN_CAP);
  if (n < 0) return -1;
  src->bytes_read += (uint64_t)n;
  src->in_len = (size_t)n;
  src->in_pos = 0;
  if (n == 0) src->in_eof = 1;
  return 0;
}

/* SHARD_CODEC_OTHER: libarchive's raw reader decodes. As dec_read. */
static ssize_t dec_read_raw(shard_source *src, unsigned char *out, size_t cap) {
  size_t made = 0;
  while (made < cap) {
    la_ssize_t n = archive_read_data(src->raw, out + made, cap - made);
    if (n == 0) break;
    if (n < 0) {
      const char *m = archive_error_string(src->raw);
      snprintf(src->why, WHY_CAP, "%s stream: %s", archive_filter_name(src->raw, 0),
               m ? m : "corrupt data");
      src->failed = m && (strstr(m, "runcat") || strstr(m, "premature")) ? 2 : 1;
      if (made == 0) return -1;
      src->fail_next = 1;
      break;
    }
    made += (size_t)n;
  }
  la_int64_t in = archive_filter_bytes(src->raw, -1);
  if (in > 0) src->bytes_read = (uint64_t)in;
  return (ssize_t)made;
}

/* One inflate call over the `avail` input bytes into out[*made, cap). 0, or 1 with src->why
 * set (corrupt data, bytes after the last gzip member). */
static int gzip_step(shard_source *src, unsigned char *out, size_t cap, size_t *made,
                     size_t avail) {
  if (src->z_member_done) {
    if (src->in[src->in_pos] != 0x1f) {
      snprintf(src->why, WHY_CAP, "bytes after the end of the gzip stream at compressed byte %llu",
               (unsigned long long)in_consumed(src));
      return 1;
    }
    inflateReset(&src->z);
    src->z_member_done = 0;
  }
  src->z.next_in = src->in + src->in_pos;
  src->z.avail_in = (uInt)avail;
  src->z.next_out = out + *made;
  src->z.avail_out = (uInt)(cap - *made);
  int zr = inflate(&src->z, Z_NO_FLUSH);
  src->in_pos = src->in_len - src->z.avail_in;
  *made = cap - src->z.avail_out;
  if (zr == Z_STREAM_END) {
    src->z_member_done = 1; /* CRC32 and length verified by zlib */
  } else if (zr != Z_OK && zr != Z_BUF_ERROR) {
    const char *m = src->z.msg ? src->z.msg : "corrupt data";
    snprintf(src->why, WHY_CAP, "gzip %s at compressed byte %llu",
             strstr(m, "data check")     ? "CRC32 checksum mismatch"
             : strstr(m, "length check") ? "length check mismatch"
                                         : m,
             (unsigned long long)in_consumed(src));
    return 1;
  }
  return 0;
}

/* One LZ4F_decompress call; as gzip_step. */
static int lz4_step(shard_source *src, unsigned char *out, size_t cap, size_t *made, size_t avail) {
  if (src->lz_unit_left == 0) {
    src->lz_unit_left = src->lz_hint ? src->lz_hint : 7; /* 7: the shortest frame header */
    src->lz_unit_off = in_consumed(src);
  }
  size_t dst = cap - *made, srcn = avail < src->lz_unit_left ? avail : src->lz_unit_left;
  size_t r = LZ4F_decompress(src->lz, out + *made, &dst, src->in + src->in_pos, &srcn, NULL);
  src->in_pos += srcn;
  *made += dst;
  if (LZ4F_isError(r)) {
    /* The damage is in this unit or in the block's size field just before it. */
    const char *m = LZ4F_getErrorName(r);
    uint64_t from = src->lz_unit_off >= 4 ? src->lz_unit_off - 4 : 0;
    snprintf(src->why, WHY_CAP,
             "LZ4 %s in compressed bytes %llu..%llu (one block; where inside it the decoder "
             "cannot tell)",
             strstr(m, "hecksum") ? "checksum mismatch" : m, (unsigned long long)from,
             (unsigned long long)(in_consumed(src) + src->lz_unit_left - 1));
    return 1;
  }
  src->lz_unit_left -= srcn;
  src->lz_hint = r;
  return 0;
}

/* Decodes up to `cap` bytes into `out`. Returns the count (0 at the clean end of
 * the compressed stream) or -1 with src->failed and src->why set. */
static ssize_t dec_read(shard_source *src, unsigned char *out, size_t cap) {
  if (src->fail_next) return -1;
  if (src->codec == SHARD_CODEC_OTHER) return dec_read_raw(src, out, cap);
  size_t made = 0;
  int fail = 0; /* 1: corrupt, 2: truncated or unreadable */
  while (made < cap && !fail) {
    if (dec_refill(src) < 0) {
      fail = 2;
      break;
    }
    size_t avail = src->in_len - src->in_pos;
    int between = src->codec == SHARD_CODEC_GZIP ? (!src->started || src->z_member_done)
                                                 : (!src->started || src->lz_hint == 0);
    if (avail == 0) {
      if (between) break; /* clean end */
      snprintf(src->why, WHY_CAP, "%s stream truncated at compressed byte %llu",
               src->codec == SHARD_CODEC_GZIP ? "gzip" : "LZ4",
               (unsigned long long)src->bytes_read);
      fail = 2;
      break;
    }
    src->started = 1;
    fail = src->codec == SHARD_CODEC_GZIP ? gzip_step(src, out, cap, &made, avail)
                                          : lz4_step(src, out, cap, &made, avail);
  }
  if (fail) {
    src->failed = fail;
    if (made == 0) return -1;
    src->fail_next = 1; /* the bytes decoded before the error go first */
  }
  return (ssize_t)made;
}

static la_ssize_t src_read(struct archive *a, void *cd, const void **out) {
  shard_source *src = cd;
  src->cur_buf ^= 1;
  unsigned char *buf = src->bufs[src->cur_buf];
  ssize_t n;
  if (src->codec != SHARD_CODEC_NONE) {
    n = dec_read(src, buf, src->cur);
    if (n < 0) {
      archive_set_error(a, EIO, "%s", src->why);
      return -1;
    }
  } else {
    n = file_read(src, buf, src->cur);
    if (n < 0) {
      archive_set_error(a, EIO, "%s", src->why);
      return -1;
    }
    src->bytes_read += (uint64_t)n;
  }
  src->off[src->cur_buf] = src->pos;
  src->len[src->cur_buf] = (size_t)n;
  src->pos += (uint64_t)n;
  if (src->cur < src->max) src->cur = src->cur * 2 < src->max ? src->cur * 2 : src->max;
  *out = buf;
  return n;
}

/* libarchive asks to skip `request` bytes past what it has buffered. */
static la_int64_t src_skip(struct archive *a, void *cd, la_int64_t request) {
  shard_source *src = cd;
  (void)a;
  if (src->codec != SHARD_CODEC_NONE) return 0; /* decoded or filtered: libarchive reads instead */
  if (request < 0) return 0;
  /* Nothing is read; past the end as lseek does: reads there find the end. */
  src->rpos += (uint64_t)request;
  src->pos += (uint64_t)request;
  src->cur = src->min;
  return request;
}

static la_int64_t src_seek(struct archive *a, void *cd, la_int64_t offset, int whence) {
  shard_source *src = cd;
  if (src->codec != SHARD_CODEC_NONE) {
    archive_set_error(a, ESPIPE, "compressed shard: no seeking");
    return ARCHIVE_FATAL;
  }
  uint64_t size = shard_bytes_stat(src->sb)->size;
  int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)src->rpos : (int64_t)size;
  if (offset < -base) { /* as lseek: past the end is allowed, before the start is not */
    archive_set_error(a, EINVAL, "seek outside the %s", shard_bytes_noun(src->sb));
    return ARCHIVE_FATAL;
  }
  src->rpos = (uint64_t)(base + offset);
  src->pos = src->rpos;
  return (la_int64_t)src->rpos;
}

int shard_source_block(shard_source *src, uint64_t off, unsigned char out[512]) {
  size_t got = 0;
  while (got < 512) {
    uint64_t want = off + got;
    int found = 0;
    for (int b = 0; b < 2 && !found; b++) {
      if (!src->bufs[b]) continue;
      if (want >= src->off[b] && want < src->off[b] + src->len[b]) {
        size_t at = (size_t)(want - src->off[b]);
        size_t k = src->len[b] - at < 512 - got ? src->len[b] - at : 512 - got;
        memcpy(out + got, src->bufs[b] + at, k);
        got += k;
        found = 1;
      }
    }
    if (!found) break;
  }
  if (got == 512) return 1;
  if (src->codec != SHARD_CODEC_NONE) return 0;
  return file_pread(src, out, 512, off);
}

static int detect_codec(shard_source *src) {
  unsigned char m[6] = {0};
  uint64_t size = shard_bytes_stat(src->sb)->size;
  ssize_t n = size < sizeof m ? (ssize_t)size : (ssize_t)sizeof m;
  if (!file_pread(src, m, (size_t)n, 0)) n = 0;
  if (n < 4) return SHARD_CODEC_NONE;
  static const unsigned char gz[] = {0x1f, 0x8b}, lz4[] = {0x04, 0x22, 0x4d, 0x18},
                             zst[] = {0x28, 0xb5, 0x2f, 0xfd}, bz2[] = {'B', 'Z', 'h'},
                             xz[] = {0xfd, '7', 'z', 'X', 'Z', 0x00},
                             lz4legacy[] = {0x02, 0x21, 0x4c, 0x18};
  if (!memcmp(m, gz, 2)) return SHARD_CODEC_GZIP;
  if (!memcmp(m, lz4, 4)) return SHARD_CODEC_LZ4;
  if (!memcmp(m, zst, 4) || !memcmp(m, bz2, 3) || (n >= 6 && !memcmp(m, xz, 6)) ||
      !memcmp(m, lz4legacy, 4))
    return SHARD_CODEC_OTHER;
  return SHARD_CODEC_NONE;
}

/* libarchive's raw reader's input: the shard's bytes in order. */
static la_ssize_t raw_read(struct archive *a, void *cd, const void **out) {
  shard_source *src = cd;
  ssize_t n = file_read(src, src->in, IN_CAP);
  if (n < 0) {
    archive_set_error(a, EIO, "%s", src->why);
    return -1;
  }
  *out = src->in;
  return n;
}

/* SHARD_CODEC_OTHER: libarchive's raw reader over the shard, at its first (only) entry.
 * AL_EFORMAT when the stream is not readable; *ok = 0 when out of memory. */
static int open_raw(shard_source *src, const char *path, int *ok) {
  struct archive_entry *re = NULL;
  *ok = (src->raw = archive_read_new()) != NULL;
  if (*ok) *ok = (src->in = malloc(IN_CAP)) != NULL;
  if (!*ok) return AL_OK;
  archive_read_support_filter_all(src->raw);
  archive_read_support_format_raw(src->raw);
  if (archive_read_open(src->raw, src, NULL, raw_read, NULL) != ARCHIVE_OK ||
      archive_read_next_header(src->raw, &re) != ARCHIVE_OK)
    return al_set_error(AL_EFORMAT, "%s: not a readable compressed stream: %s", path,
                        archive_error_string(src->raw) ? archive_error_string(src->raw)
                                                       : "unknown");
  return AL_OK;
}

static int source_init(shard_source *src, const char *path, size_t block_size);

int shard_source_open(shard_source *src, shard_bytes *sb, const char *path, size_t block_size) {
  memset(src, 0, sizeof *src);
  src->sb = sb;
  /* The first window holds the magic bytes and, for a plain tar, the first headers (one GET
   * for a URL; nothing is read ahead of a file). */
  uint64_t size = shard_bytes_stat(sb)->size;
  int rc = shard_bytes_prefetch(sb, 0, size < REMOTE_HEAD ? (size_t)size : REMOTE_HEAD);
  if (rc == AL_OK) rc = source_init(src, path, block_size);
  if (rc != AL_OK) return rc;
  if (src->codec != SHARD_CODEC_NONE) {
    shard_bytes_stream(sb);
    return AL_OK;
  }
  return shard_bytes_plan(sb, REMOTE_HEAD, 0);
}

static int source_init(shard_source *src, const char *path, size_t block_size) {
  src->codec = detect_codec(src);
  if (block_size) {
    src->min = src->max = block_size;
  } else if (src->codec != SHARD_CODEC_NONE) {
    src->min = src->max = READ_COMPRESSED;
  } else {
    src->min = READ_MIN;
    src->max = READ_MAX_PLAIN;
  }
  src->cur = src->min;
  src->bufs[0] = malloc(src->max);
  src->bufs[1] = malloc(src->max);
  int dec_ok = 1, raw_rc = AL_OK;
  if (src->codec == SHARD_CODEC_GZIP) {
    src->in = malloc(IN_CAP);
    dec_ok = inflateInit2(&src->z, 15 + 16) == Z_OK;
    src->z_init = dec_ok;
  } else if (src->codec == SHARD_CODEC_LZ4) {
    src->in = malloc(IN_CAP);
    dec_ok = !LZ4F_isError(LZ4F_createDecompressionContext(&src->lz, LZ4F_VERSION));
    if (!dec_ok) src->lz = NULL;
  } else if (src->codec == SHARD_CODEC_OTHER) {
    raw_rc = open_raw(src, path, &dec_ok);
  }
  if (!src->bufs[0] || !src->bufs[1] || !dec_ok ||
      ((src->codec == SHARD_CODEC_GZIP || src->codec == SHARD_CODEC_LZ4) && !src->in))
    return al_set_error(AL_ENOMEM, "out of memory (libarchive, %zu-byte block)", src->max);
  return raw_rc;
}

void shard_source_close(shard_source *src) {
  if (src->z_init) inflateEnd(&src->z);
  if (src->lz) LZ4F_freeDecompressionContext(src->lz);
  if (src->raw) archive_read_free(src->raw);
  free(src->in);
  free(src->bufs[0]);
  free(src->bufs[1]);
  src->z_init = 0;
  src->lz = NULL;
  src->raw = NULL;
  src->in = src->bufs[0] = src->bufs[1] = NULL;
}

void shard_source_attach(shard_source *src, struct archive *a) {
  archive_read_set_callback_data(a, src);
  archive_read_set_read_callback(a, src_read);
  archive_read_set_skip_callback(a, src_skip);
  archive_read_set_seek_callback(a, src_seek);
}

const char *shard_source_compression(const shard_source *src, struct archive *a) {
  switch (src->codec) {
    case SHARD_CODEC_GZIP: return "gzip";
    case SHARD_CODEC_LZ4: return "lz4";
    case SHARD_CODEC_OTHER: return filter_name(archive_filter_code(src->raw, 0));
    default: return filter_name(archive_filter_code(a, 0));
  }
}

int shard_source_seekable(const shard_source *src, struct archive *a) {
  return archive_filter_code(a, 0) == ARCHIVE_FILTER_NONE && src->codec == SHARD_CODEC_NONE;
}

int shard_source_drain(shard_source *src) {
  if (src->failed || src->codec == SHARD_CODEC_NONE) return AL_OK;
  ssize_t n;
  while ((n = dec_read(src, src->bufs[0], src->max)) > 0) {
  }
  return n < 0 ? al_set_error(AL_EFORMAT, "%s", src->why) : AL_OK;
}
