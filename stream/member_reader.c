/* Reading one payload member: pread, libarchive fallback, LZ4 frames. */
#include "stream/member_reader_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <lz4frame.h>

#include "stream/cuda_rt_internal.h"

/* ---------------------------------------------------------------- buffers */

int stream_growbuf_reserve(stream_growbuf *b, size_t need, size_t keep) {
  if (need <= b->cap) return AL_OK;
  /* Grow by half again so a run of slightly larger batches does not
   * reallocate (and, when pinned, re-register) each time. */
  size_t cap = b->cap + b->cap / 2;
  if (cap < need) cap = need;
  cap = (cap + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
  uint8_t *p = stream_host_alloc(cap, b->pinned);
  if (!p) return AL_ENOMEM;
  if (keep) memcpy(p, b->p, keep);
  stream_host_free(b->p, b->pinned);
  b->p = p;
  b->cap = cap;
  return AL_OK;
}

void stream_growbuf_free(stream_growbuf *b) {
  stream_host_free(b->p, b->pinned);
  b->p = NULL;
  b->cap = 0;
}

/* ------------------------------------------------------------ shard table */

typedef struct shard_slot {
  int state; /* 0 = not opened, 1 = open, -1 = unusable */
  int fd;
  int status;
  char *error; /* why unusable, without the key (added per sample) */
  stream_source_shard info;
} shard_slot;

struct stream_shard_table {
  pthread_mutex_t mu;
  const stream_source *src;
  size_t n;
  shard_slot *slots;
};

int stream_shard_table_new(stream_shard_table **out, const stream_source *src) {
  stream_shard_table *t = calloc(1, sizeof *t);
  if (!t) return al_set_error(AL_ENOMEM, "shard table");
  t->slots = calloc(src->n_shards ? src->n_shards : 1, sizeof *t->slots);
  if (!t->slots) {
    free(t);
    return al_set_error(AL_ENOMEM, "shard table of %zu shards", src->n_shards);
  }
  pthread_mutex_init(&t->mu, NULL);
  t->src = src;
  t->n = src->n_shards;
  for (size_t i = 0; i < t->n; i++) t->slots[i].fd = -1;
  *out = t;
  return AL_OK;
}

void stream_shard_table_free(stream_shard_table *t) {
  if (!t) return;
  for (size_t i = 0; i < t->n; i++) {
    if (t->slots[i].fd >= 0) close(t->slots[i].fd);
    free(t->slots[i].error);
  }
  pthread_mutex_destroy(&t->mu);
  free(t->slots);
  free(t);
}

static void slot_fail(shard_slot *s, int status) {
  s->state = -1;
  s->status = status;
  s->error = strdup(al_last_error());
}

/* Opens shard `id` once and checks it against the index. On failure the
 * reason is kept, so every sample of the shard reports it (naming its key). */
static int shard_get(stream_shard_table *t, uint32_t id, shard_slot **out) {
  *out = NULL;
  if (id >= t->n) return al_set_error(AL_EFORMAT, "shard id %" PRIu32 " out of range (%zu shards)", id, t->n);
  pthread_mutex_lock(&t->mu);
  shard_slot *s = &t->slots[id];
  if (s->state == 0) {
    int st = t->src->shard(t->src->ctx, id, &s->info);
    if (st != AL_OK) {
      slot_fail(s, st);
    } else if (s->info.seekable) {
      int fd = open(s->info.path, O_RDONLY | O_CLOEXEC);
      struct stat sb;
      if (fd < 0) {
        slot_fail(s, al_set_error(errno == ENOENT ? AL_ENOTFOUND : AL_EIO, "%s: %s", s->info.path,
                                  strerror(errno)));
      } else if (fstat(fd, &sb) != 0) {
        slot_fail(s, al_set_error(AL_EIO, "%s: fstat: %s", s->info.path, strerror(errno)));
        close(fd);
      } else if ((uint64_t)sb.st_size != s->info.size) {
        slot_fail(s, al_set_error(AL_EFORMAT,
                                  "%s: shard changed since indexing: size is %" PRIu64
                                  " bytes, the index says %" PRIu64,
                                  s->info.path, (uint64_t)sb.st_size, s->info.size));
        close(fd);
      } else if (s->info.mtime_ns != 0 &&
                 (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec != s->info.mtime_ns) {
        slot_fail(s, al_set_error(AL_EFORMAT,
                                  "%s: shard changed since indexing: mtime_ns is %" PRId64
                                  ", the index says %" PRId64,
                                  s->info.path,
                                  (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec,
                                  s->info.mtime_ns));
        close(fd);
      } else {
        s->fd = fd;
        s->state = 1;
      }
    } else {
      /* Sequential shards are opened per reader by libarchive; check them here. */
      struct stat sb;
      if (stat(s->info.path, &sb) != 0)
        slot_fail(s, al_set_error(errno == ENOENT ? AL_ENOTFOUND : AL_EIO, "%s: %s", s->info.path,
                                  strerror(errno)));
      else if ((uint64_t)sb.st_size != s->info.size)
        slot_fail(s, al_set_error(AL_EFORMAT,
                                  "%s: shard changed since indexing: size is %" PRIu64
                                  " bytes, the index says %" PRIu64,
                                  s->info.path, (uint64_t)sb.st_size, s->info.size));
      else if (s->info.mtime_ns != 0 &&
               (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec != s->info.mtime_ns)
        slot_fail(s, al_set_error(AL_EFORMAT, "%s: shard changed since indexing (mtime_ns differs)",
                                  s->info.path));
      else
        s->state = 1;
    }
  }
  int st = AL_OK;
  if (s->state < 0) st = al_set_error(s->status, "%s", s->error ? s->error : "shard unusable");
  pthread_mutex_unlock(&t->mu);
  *out = s;
  return st;
}

/* ----------------------------------------------------------------- reader */

struct stream_reader {
  stream_shard_table *t;
  size_t block;
  uint8_t *scratch;
  LZ4F_dctx *dctx;
  /* Sequential (libarchive) position: the member after `seq_offset` in
   * shard `seq_shard` can be reached without reopening. */
  struct archive *seq;
  uint32_t seq_shard;
  uint64_t seq_offset;
};

int stream_reader_new(stream_reader **out, stream_shard_table *t, size_t block) {
  stream_reader *r = calloc(1, sizeof *r);
  if (!r) return al_set_error(AL_ENOMEM, "reader");
  r->t = t;
  r->block = block ? block : ((size_t)1 << 20);
  r->scratch = malloc(r->block);
  LZ4F_errorCode_t e = LZ4F_createDecompressionContext(&r->dctx, LZ4F_VERSION);
  if (!r->scratch || LZ4F_isError(e)) {
    free(r->scratch);
    if (!LZ4F_isError(e)) LZ4F_freeDecompressionContext(r->dctx);
    free(r);
    return al_set_error(AL_ENOMEM, "reader scratch of %zu bytes", block);
  }
  *out = r;
  return AL_OK;
}

static void seq_close(stream_reader *r) {
  if (r->seq) archive_read_free(r->seq);
  r->seq = NULL;
}

void stream_reader_free(stream_reader *r) {
  if (!r) return;
  seq_close(r);
  LZ4F_freeDecompressionContext(r->dctx);
  free(r->scratch);
  free(r);
}

/* Bytes of one member, from a file offset (pread) or the current libarchive entry. */
typedef struct member_in {
  int fd;
  struct archive *a;
  uint64_t pos, end; /* file offsets for pread; pos counts bytes read for libarchive */
} member_in;

static int fail_at(const stream_source_job *job, const char *shard, uint64_t at, int status,
                   const char *fmt, const char *detail) {
  return al_set_error(status, "%s: key '%s' member '%s' at byte %" PRIu64 ": %s%s", shard,
                      job->key ? job->key : "?", job->member, at, fmt, detail ? detail : "");
}

/* Reads up to cap bytes; 0 at the end of the member; < 0 on error (message set). */
static long long in_read(member_in *in, void *buf, size_t cap, const stream_source_job *job,
                         const char *shard) {
  if (in->a) {
    la_ssize_t n = archive_read_data(in->a, buf, cap);
    if (n < 0)
      return fail_at(job, shard, job->offset + in->pos, AL_EFORMAT, "libarchive: ",
                     archive_error_string(in->a));
    in->pos += (uint64_t)n;
    return n;
  }
  uint64_t left = in->end - in->pos;
  if (cap > left) cap = (size_t)left;
  if (cap == 0) return 0;
  for (;;) {
    ssize_t n = pread(in->fd, buf, cap, (off_t)in->pos);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail_at(job, shard, in->pos, AL_EIO, "read: ", strerror(errno));
    if (n == 0) {
      char what[96];
      snprintf(what, sizeof what, "%" PRIu64 " of %" PRIu64 " bytes", in->pos - job->offset, job->size);
      return fail_at(job, shard, in->pos, AL_EIO, "short read (shard truncated?): got ", what);
    }
    in->pos += (uint64_t)n;
    return n;
  }
}

static int read_exact(member_in *in, uint8_t *dst, uint64_t size, const stream_source_job *job,
                      const char *shard) {
  uint64_t got = 0;
  while (got < size) {
    long long n = in_read(in, dst + got, (size_t)(size - got), job, shard);
    if (n < 0) return (int)n;
    if (n == 0) {
      char what[96];
      snprintf(what, sizeof what, "%" PRIu64 " of %" PRIu64 " bytes", got, size);
      return fail_at(job, shard, job->offset + got, AL_EIO, "short read: got ", what);
    }
    got += (uint64_t)n;
  }
  return AL_OK;
}

static int decode_lz4(stream_reader *r, member_in *in, const stream_source_job *job, const char *shard,
                      stream_growbuf *b, size_t off, size_t *len) {
  LZ4F_resetDecompressionContext(r->dctx);
  uint64_t consumed = 0; /* member bytes handed to LZ4F */
  size_t have = 0, at = 0;
  size_t out = 0;
  unsigned long long content = 0;
  int header = 1;
  size_t hint = 1;
  while (hint != 0) {
    if (at == have) {
      if (consumed >= job->size) break;
      uint64_t want = job->size - consumed;
      long long n = in_read(in, r->scratch, want < r->block ? (size_t)want : r->block, job, shard);
      if (n < 0) return (int)n;
      if (n == 0) break;
      have = (size_t)n;
      at = 0;
      consumed += (uint64_t)n;
    }
    if (header) {
      /* The frame header may carry the decoded size: reserve it at once. */
      LZ4F_frameInfo_t info;
      size_t hn = have - at;
      size_t e = LZ4F_getFrameInfo(r->dctx, &info, r->scratch + at, &hn);
      if (LZ4F_isError(e))
        return fail_at(job, shard, job->offset, AL_EFORMAT, "LZ4 frame header: ", LZ4F_getErrorName(e));
      at += hn;
      if (hn == 0 && at == have) continue; /* header split across reads */
      header = 0;
      content = info.contentSize;
      if (content > (unsigned long long)(SIZE_MAX / 2))
        return fail_at(job, shard, job->offset, AL_ERANGE, "LZ4 content size absurd", NULL);
      int st = stream_growbuf_reserve(b, off + (content ? (size_t)content : r->block), off);
      if (st != AL_OK) return st;
      hint = e;
      continue;
    }
    if (b->cap - off - out == 0) {
      int st = stream_growbuf_reserve(b, off + out + (out > r->block ? out : r->block), off + out);
      if (st != AL_OK) return st;
    }
    size_t dn = b->cap - off - out;
    size_t sn = have - at;
    hint = LZ4F_decompress(r->dctx, b->p + off + out, &dn, r->scratch + at, &sn, NULL);
    if (LZ4F_isError(hint))
      return fail_at(job, shard, job->offset + consumed - (have - at), AL_EFORMAT, "LZ4 decode: ",
                     LZ4F_getErrorName(hint));
    at += sn;
    out += dn;
  }
  if (hint != 0)
    return fail_at(job, shard, job->offset + consumed, AL_EFORMAT, "truncated LZ4 frame", NULL);
  if (at != have || consumed != job->size)
    return fail_at(job, shard, job->offset + consumed - (have - at), AL_EFORMAT,
                   "bytes after the end of the LZ4 frame", NULL);
  if (content && out != content) {
    char what[96];
    snprintf(what, sizeof what, "%zu bytes, header says %llu", out, content);
    return fail_at(job, shard, job->offset, AL_EFORMAT, "LZ4 content size mismatch: decoded ", what);
  }
  *len = out;
  return AL_OK;
}

/* Positions r->seq on the data of job->member, reading the shard from its
 * start when the member lies behind the current position. */
static int seq_seek(stream_reader *r, const stream_source_job *job, const char *path) {
  if (r->seq && (r->seq_shard != job->shard || job->offset <= r->seq_offset)) seq_close(r);
  if (!r->seq) {
    r->seq = archive_read_new();
    if (!r->seq) return al_set_error(AL_ENOMEM, "archive_read_new");
    archive_read_support_filter_all(r->seq);
    archive_read_support_format_tar(r->seq);
    archive_read_support_format_gnutar(r->seq);
    if (archive_read_open_filename(r->seq, path, r->block) != ARCHIVE_OK) {
      int st = al_set_error(AL_EIO, "%s: key '%s' member '%s': libarchive open: %s", path,
                            job->key ? job->key : "?", job->member, archive_error_string(r->seq));
      seq_close(r);
      return st;
    }
    r->seq_shard = job->shard;
    r->seq_offset = 0;
  }
  for (;;) {
    struct archive_entry *e;
    int rc = archive_read_next_header(r->seq, &e);
    if (rc == ARCHIVE_EOF) break;
    if (rc < ARCHIVE_WARN) {
      int st = fail_at(job, path, (uint64_t)archive_read_header_position(r->seq), AL_EFORMAT,
                       "libarchive: ", archive_error_string(r->seq));
      seq_close(r);
      return st;
    }
    uint64_t hdr = (uint64_t)archive_read_header_position(r->seq);
    if (hdr >= job->offset) break; /* the data of our member would start before this header */
    const char *name = archive_entry_pathname(e);
    if (name && !strcmp(name, job->member)) {
      r->seq_offset = job->offset;
      return AL_OK;
    }
  }
  seq_close(r);
  return fail_at(job, path, job->offset, AL_ENOTFOUND, "member not found in the shard", NULL);
}

int stream_reader_read(stream_reader *r, const stream_source_job *job, stream_growbuf *b, size_t off, size_t *len) {
  shard_slot *s = NULL;
  int st = shard_get(r->t, job->shard, &s);
  if (st != AL_OK || !s) {
    return al_error_prefix(st, "key '%s' member '%s' at byte %" PRIu64, job->key ? job->key : "?",
                           job->member, job->offset);
  }
  const char *path = s->info.path;
  member_in in = {.fd = -1};
  if (s->info.seekable) {
    if (job->offset > s->info.size || job->size > s->info.size - job->offset)
      return fail_at(job, path, job->offset, AL_EFORMAT, "member extends past the end of the shard",
                     NULL);
    in.fd = s->fd;
    in.pos = job->offset;
    in.end = job->offset + job->size;
  } else {
    st = seq_seek(r, job, path);
    if (st != AL_OK) return st;
    in.a = r->seq;
  }
  if (job->lz4) {
    st = decode_lz4(r, &in, job, path, b, off, len);
  } else {
    if (job->size > (uint64_t)(SIZE_MAX / 2))
      return fail_at(job, path, job->offset, AL_ERANGE, "member size absurd", NULL);
    st = stream_growbuf_reserve(b, off + (size_t)job->size, off);
    if (st == AL_OK) st = read_exact(&in, b->p + off, job->size, job, path);
    if (st == AL_OK) *len = (size_t)job->size;
  }
  if (st != AL_OK && in.a) seq_close(r); /* position unknown after a failed read */
  return st;
}
