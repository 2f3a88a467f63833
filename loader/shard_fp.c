/* Shard identity without mtime, and moving a corpus.
 *
 * A shard is the same shard when its size and the bytes the index relies on are the same:
 * `cp`, `rsync` and a node-local copy keep both (and change mtime); a rewrite of the same
 * size changes the member headers (name, size, mtime and checksum of each member). For a
 * plain tar those are the 512-byte ustar header blocks right before each indexed member's
 * data; for a compressed shard, whose headers cannot be reached without decompressing it all,
 * the first and last 64 KiB of the file (gzip, LZ4 frames, zstd, bzip2 and xz keep a checksum
 * of the content at the end). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader/hash_internal.h"
#include "loader/index_internal.h"
#include "loader/shard_path_internal.h"

#define FP_ENDS (64u << 10)

static int fd_read_at(void *ctx, void *buf, size_t n, uint64_t off, const char *path) {
  int fd = *(const int *)ctx;
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return al_set_error(AL_EIO, "%s: read at byte %" PRIu64 ": %s", path, off + got,
                          strerror(errno));
    if (r == 0)
      return al_set_error(AL_EFORMAT,
                          "%s: ends at byte %" PRIu64 ", before the %zu bytes at %" PRIu64, path,
                          off + got, n, off);
    got += (size_t)r;
  }
  return AL_OK;
}

int index_shard_content_fp_by(const al_index *idx, uint32_t shard, index_read_at_fn read_at,
                              void *ctx, uint64_t *out) {
  const index_shard_rec *s = &idx->shards[shard];
  uint64_t h = hash_fold(UINT64_C(0x5ad0f1), s->size);
  if (!s->seekable) {
    unsigned char *buf = malloc(FP_ENDS);
    if (!buf) return al_set_error(AL_ENOMEM, "%s: out of memory", s->path);
    uint64_t head = s->size < FP_ENDS ? s->size : FP_ENDS;
    uint64_t tail_at = s->size > FP_ENDS ? s->size - FP_ENDS : 0;
    int rc = read_at(ctx, buf, (size_t)head, 0, s->path);
    if (!rc) {
      h = hash_fold(h, hash64(buf, (size_t)head, 1));
      rc = read_at(ctx, buf, (size_t)(s->size - tail_at), tail_at, s->path);
    }
    if (!rc) h = hash_fold(h, hash64(buf, (size_t)(s->size - tail_at), 2));
    free(buf);
    if (rc) return rc;
    *out = h ? h : 1; /* 0 means "not recorded" */
    return AL_OK;
  }
  size_t from = s->first_sample, to = s->sample_count ? s->last_sample + 1 : from;
  if (s->scattered) from = 0, to = idx->n_samples;
  unsigned char blk[512];
  for (size_t i = from; i < to; i++) {
    const index_sample_rec *r = &idx->samples[i];
    if (r->shard != shard) continue;
    for (uint32_t m = 0; m < r->n_members; m++) {
      uint64_t off = idx->members[r->member0 + m].off_ext >> 16;
      if (off < 512)
        return al_set_error(AL_EFORMAT,
                            "%s: member data at byte %" PRIu64 " has no header before it", s->path,
                            off);
      int rc = read_at(ctx, blk, sizeof blk, off - 512, s->path);
      if (rc) return rc;
      h = hash_fold(h, hash64(blk, sizeof blk, off));
    }
  }
  *out = h ? h : 1;
  return AL_OK;
}

int al_index_shard_verify(const al_index *idx, size_t shard, int fd) {
  if (!idx || fd < 0) return al_set_error(AL_EINVAL, "al_index_shard_verify: bad argument");
  if (shard >= idx->n_shards)
    return al_set_error(AL_ERANGE, "shard %zu out of range (%zu shards)", shard, idx->n_shards);
  return index_shard_fp_check(idx, (uint32_t)shard, fd_read_at, &fd);
}

int index_shard_fp_check(const al_index *idx, uint32_t shard, index_read_at_fn read_at, void *ctx) {
  const index_shard_rec *s = &idx->shards[shard];
  if (!s->content_fp) return AL_ENOTFOUND;
  uint64_t fp;
  int rc = index_shard_content_fp_by(idx, shard, read_at, ctx, &fp);
  if (rc) return al_error_prefix(rc, "shard changed since indexing");
  if (fp != s->content_fp)
    return al_set_error(AL_EFORMAT,
                        "%s: shard changed since indexing: %s differ from what was indexed (content "
                        "fingerprint %016" PRIx64 ", the index says %016" PRIx64
                        "); index it again",
                        s->path,
                        s->seekable ? "the headers of its indexed members"
                                    : "its first or last 64 KiB",
                        fp, s->content_fp);
  return AL_OK;
}

/* Whether `path` starts with directory `from` (the whole prefix, then '/' or the end). */
static size_t prefix_len(const char *path, const char *from) {
  size_t n = strlen(from);
  while (n > 1 && from[n - 1] == '/') n--;
  if (strncmp(path, from, n)) return 0;
  return path[n] == '/' || path[n] == '\0' ? n : 0;
}

int al_index_remap_root(al_index *idx, const char *from, const char *to, size_t *remapped) {
  if (remapped) *remapped = 0;
  if (!idx || !from || !to || !*from)
    return al_set_error(AL_EINVAL, "al_index_remap_root: NULL or empty argument");
  int rc = shard_path_check_userinfo(from, "--root FROM");
  if (!rc) rc = shard_path_check_userinfo(to, "--root TO");
  if (rc) return rc;
  size_t tn = strlen(to), count = 0;
  while (tn > 1 && to[tn - 1] == '/') tn--;
  for (size_t i = 0; i < idx->n_shards; i++) {
    index_shard_rec *s = &idx->shards[i];
    size_t n = prefix_len(s->path, from);
    if (!n) continue;
    size_t rest = strlen(s->path + n);
    char *p = malloc(tn + rest + 1);
    if (!p) return al_set_error(AL_ENOMEM, "out of memory remapping shard paths");
    memcpy(p, to, tn);
    memcpy(p + tn, s->path + n, rest + 1);
    free(s->path);
    s->path = p;
    /* The ETag belongs to the server the shard was indexed from; a copy elsewhere has its own
     * (its identity there is size and content fingerprint). */
    free(s->etag);
    s->etag = NULL;
    count++;
  }
  if (remapped) *remapped = count;
  if (!count)
    return al_set_error(AL_ENOTFOUND,
                        "--root %s=%s: no shard path starts with %s (the first is %s)", from, to,
                        from, idx->n_shards ? idx->shards[0].path : "(no shards)");
  return AL_OK;
}
