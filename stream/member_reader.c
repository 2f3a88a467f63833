/* Reading one payload member through storage: ranged reads, libarchive fallback, LZ4 frames. */
#include "common/env_internal.h"
#include "stream/member_reader_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#include "common/grow_internal.h"
#include "loader/lz4_member_internal.h"
#include "storage/storage_internal.h"
#include "stream/cuda_rt_internal.h"
#include "stream/remote_fetch_internal.h"

/* ---------------------------------------------------------------- buffers */

int stream_growbuf_reserve(stream_growbuf *b, size_t need, size_t keep) {
  if (need <= b->cap) return AL_OK;
  /* Grow by half again (grow_capacity) so a run of slightly larger batches
   * does not reallocate (and, when pinned, re-register) each time; whole MiB. */
  const size_t mib = (size_t)1 << 20;
  size_t cap;
  int rc = grow_capacity(b->cap, need, 1, "a stream buffer", &cap);
  if (rc != AL_OK) return rc;
  if (cap > SIZE_MAX - (mib - 1))
    return al_set_error(AL_ENOMEM, "a stream buffer of %zu bytes exceeds the address space", need);
  cap = (cap + mib - 1) & ~(mib - 1);
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
  /* A seekable local shard's object, read by every reader (a file's reads are pread); a
   * compressed shard at a URL's download once on disk; else NULL. */
  storage_obj *obj;
  int remote;   /* its backend is a server's: read through stream_remote (pinned; no obj until
                   downloaded) */
  int download; /* a compressed shard at a URL: 0 = not on disk, 1 = downloading, 2 = in obj */
  int status;
  char *error; /* why unusable, without the key (added per sample) */
  stream_source_shard info;
} shard_slot;

struct stream_shard_table {
  pthread_mutex_t mu;
  pthread_cond_t downloaded; /* some slot's download ended */
  const stream_source *src;
  size_t n;
  shard_slot *slots;
  stream_remote *remote; /* opened at the first shard whose backend is a server's */
  /* Guards setting `remote` and `cancelled` apart from mu, which a shard's pin holds while it
   * retries: a cancel must not wait for it. */
  pthread_mutex_t cancel_mu;
  int cancelled;
  char *cache_dir;
  uint64_t cache_bytes;
  al_storage_options storage; /* resolved; its strings are copies owned here */
  char *note;                 /* appended to a failed pin's message */
};

int stream_shard_table_set_storage(stream_shard_table *t, const al_storage_options *storage,
                                   const char *note) {
  free((char *)t->storage.s3_endpoint);
  free((char *)t->storage.s3_region);
  free(t->note);
  t->storage = *storage;
  t->storage.s3_endpoint = storage->s3_endpoint ? strdup(storage->s3_endpoint) : NULL;
  t->storage.s3_region = storage->s3_region ? strdup(storage->s3_region) : NULL;
  t->note = strdup(note ? note : "");
  if ((storage->s3_endpoint && !t->storage.s3_endpoint) ||
      (storage->s3_region && !t->storage.s3_region) || !t->note)
    return al_set_error(AL_ENOMEM, "stream: out of memory");
  return AL_OK;
}

int stream_shard_table_set_cache(stream_shard_table *t, const char *dir, uint64_t bytes) {
  free(t->cache_dir);
  t->cache_dir = NULL;
  if (dir && *dir && !(t->cache_dir = strdup(dir))) return al_set_error(AL_ENOMEM, "cache_dir");
  t->cache_bytes = bytes;
  return AL_OK;
}

int stream_shard_table_remote_counts(stream_shard_table *t, stream_remote_counts *out) {
  memset(out, 0, sizeof *out);
  /* Under cancel_mu, not mu: a shard's pin holds mu while it retries, and the consumer reads
   * the counters at every delivery. */
  pthread_mutex_lock(&t->cancel_mu);
  stream_remote *r = t->remote;
  pthread_mutex_unlock(&t->cancel_mu);
  if (r) stream_remote_get_counts(r, out);
  return r != NULL;
}

int stream_shard_table_new(stream_shard_table **out, const stream_source *src) {
  stream_shard_table *t = calloc(1, sizeof *t);
  if (!t) return al_set_error(AL_ENOMEM, "shard table");
  t->slots = calloc(src->n_shards ? src->n_shards : 1, sizeof *t->slots);
  if (!t->slots) {
    free(t);
    return al_set_error(AL_ENOMEM, "shard table of %zu shards", src->n_shards);
  }
  pthread_mutex_init(&t->mu, NULL);
  pthread_mutex_init(&t->cancel_mu, NULL);
  pthread_cond_init(&t->downloaded, NULL);
  t->src = src;
  t->n = src->n_shards;
  *out = t;
  return AL_OK;
}

void stream_shard_table_free(stream_shard_table *t) {
  if (!t) return;
  for (size_t i = 0; i < t->n; i++) {
    storage_close(t->slots[i].obj);
    free(t->slots[i].error);
  }
  stream_remote_free(t->remote);
  free(t->cache_dir);
  free((char *)t->storage.s3_endpoint);
  free((char *)t->storage.s3_region);
  free(t->note);
  pthread_cond_destroy(&t->downloaded);
  pthread_mutex_destroy(&t->mu);
  pthread_mutex_destroy(&t->cancel_mu);
  free(t->slots);
  free(t);
}

static void slot_fail(shard_slot *s, int status) {
  s->state = -1;
  s->status = status;
  s->error = strdup(al_last_error());
}

/* The shard in `o` (a local file, or a download) is the one indexed: the same size, then the
 * same content fingerprint (loader/shard_fp.c: cp, rsync and node-local copies keep it, a
 * rewrite changes it); a source without a fingerprint for it falls back to the mtime recorded
 * when indexing (`mtime`: 0 for a download, whose mtime is when it was fetched). */
static int shard_identity(const stream_shard_table *t, uint32_t id, const stream_source_shard *in,
                          storage_obj *o, int mtime) {
  storage_stat sb;
  int rc = storage_get_stat(o, &sb);
  if (rc != AL_OK) return rc;
  if (sb.size != in->size)
    return al_set_error(AL_EFORMAT,
                        "%s: shard changed since indexing: size is %" PRIu64
                        " bytes, the index says %" PRIu64,
                        in->path, sb.size, in->size);
  int v = t->src->verify ? t->src->verify(t->src->ctx, id, o) : AL_ENOTFOUND;
  if (v != AL_ENOTFOUND || !mtime) return v == AL_ENOTFOUND ? AL_OK : v;
  int64_t mt = sb.mtime_ns;
  if (in->mtime_ns != 0 && mt != in->mtime_ns)
    return al_set_error(AL_EFORMAT,
                        "%s: shard changed since indexing: mtime_ns is %" PRId64
                        ", the index says %" PRId64
                        " (an index from before content "
                        "fingerprints: index again to make copies of the shard valid)",
                        in->path, mt, in->mtime_ns);
  return AL_OK;
}

/* The last error with `note` appended (a note naming the S3 endpoint when it is not the one the
 * index was built with). */
static int append_note(int rc, const char *note) {
  if (!note || !*note) return rc;
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", al_last_error());
  return al_set_error(rc, "%s%s", msg, note);
}

/* A shard at a URL, pinned by a HEAD (its size must be the one indexed, and its ETag, when the
 * index has one from this server). A compressed one is downloaded at its first read
 * (shard_download). */
static int pin_shard(stream_shard_table *t, uint32_t id, shard_slot *s) {
  int rc = AL_OK;
  if (!t->remote) {
    stream_remote *r = NULL;
    rc = stream_remote_new(&r, t->n, t->cache_dir, t->cache_bytes, &t->storage);
    pthread_mutex_lock(&t->cancel_mu);
    t->remote = r;
    if (r && t->cancelled) stream_remote_cancel(r);
    pthread_mutex_unlock(&t->cancel_mu);
  }
  if (rc == AL_OK) rc = stream_remote_pin(t->remote, id, s->info.path, s->info.size, s->info.etag);
  if (rc != AL_OK && storage_url_kind(s->info.path) == STORAGE_S3) return append_note(rc, t->note);
  if (rc != AL_OK) return rc;
  s->remote = 1;
  s->state = 1;
  return AL_OK;
}

/* Opens shard `id` once and checks it against the index. On failure the
 * reason is kept, so every sample of the shard reports it (naming its key). */
static int shard_get(stream_shard_table *t, uint32_t id, shard_slot **out) {
  *out = NULL;
  if (id >= t->n)
    return al_set_error(AL_EFORMAT, "shard id %" PRIu32 " out of range (%zu shards)", id, t->n);
  pthread_mutex_lock(&t->mu);
  shard_slot *s = &t->slots[id];
  if (s->state == 0) {
    int rc = t->src->shard(t->src->ctx, id, &s->info);
    storage_obj *o = NULL;
    if (rc == AL_OK && storage_ops_for(s->info.path)->remote) {
      rc = pin_shard(t, id, s);
      if (rc != AL_OK) slot_fail(s, rc);
      goto done;
    }
    /* A FIFO or device put in the shard's place fails here instead of blocking. */
    if (rc == AL_OK) rc = storage_open(NULL, s->info.path, &o);
    if (rc == AL_OK) rc = shard_identity(t, id, &s->info, o, 1);
    if (rc != AL_OK) {
      slot_fail(s, rc);
      storage_close(o);
    } else if (s->info.seekable) {
      s->obj = o;
      s->state = 1;
    } else {
      storage_close(o); /* sequential shards are opened per reader by libarchive */
      s->state = 1;
    }
  }
done:;
  int rc = AL_OK;
  if (s->state < 0) rc = al_set_error(s->status, "%s", s->error ? s->error : "shard unusable");
  pthread_mutex_unlock(&t->mu);
  *out = s;
  return rc;
}

/* ----------------------------------------------------------------- reader */

struct stream_reader {
  stream_shard_table *t;
  size_t block;
  uint8_t *scratch;
  LZ4F_dctx *dctx;
  /* Sequential (libarchive) position: the member after `seq_offset` in
   * shard `seq_shard` can be reached without reopening. */
  uint64_t max_member;     /* cap on a member's stored and decoded bytes */
  stream_growbuf scratch2; /* stream_reader_scratch */
  struct archive *seq;
  storage_obj *seq_own; /* the shard it reads, opened for it (a local compressed shard), or */
  storage_obj *seq_src; /* what it reads: seq_own, or a downloaded shard's object (shared) */
  uint64_t seq_pos;     /* the next byte of seq_src that libarchive gets */
  uint8_t *seq_buf;     /* what it gets, r->block bytes */
  uint32_t seq_shard;
  uint64_t seq_offset;
  stream_remote_reader *rr; /* this thread's remote objects, opened on first use */
  stream_growbuf fetched;   /* a remote member's stored bytes */
};

int stream_reader_new(stream_reader **out, stream_shard_table *t, size_t block) {
  stream_reader *r = calloc(1, sizeof *r);
  if (!r) return al_set_error(AL_ENOMEM, "reader");
  r->t = t;
  r->max_member = stream_max_member_bytes();
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
  storage_close(r->seq_own);
  r->seq_own = r->seq_src = NULL;
}

void stream_reader_free(stream_reader *r) {
  if (!r) return;
  seq_close(r);
  stream_remote_reader_free(r->rr);
  stream_growbuf_free(&r->fetched);
  stream_growbuf_free(&r->scratch2);
  free(r->seq_buf);
  LZ4F_freeDecompressionContext(r->dctx);
  free(r->scratch);
  free(r);
}

uint64_t stream_max_member_bytes(void) {
  return env_u64("ADAPTIVELOAD_MAX_MEMBER_BYTES", AL_STREAM_MAX_MEMBER_DEFAULT);
}

/* Bytes of one member, from a shard offset (a ranged read) or the current libarchive entry. */
typedef struct member_in {
  storage_obj *obj;
  const uint8_t *mem; /* non-NULL: the member's bytes in memory, mem[0] at file offset base */
  uint64_t base;
  struct archive *a;
  uint64_t pos, end; /* shard offsets of ranged reads; pos counts bytes read for libarchive */
} member_in;

static int fail_at(const stream_source_job *job, const char *shard, uint64_t at, int status,
                   const char *fmt, const char *detail) {
  return al_set_error(status, "%s: key '%s' member '%s' at byte %" PRIu64 ": %s%s", shard,
                      job->key ? job->key : "?", job->member, at, fmt, detail ? detail : "");
}

/* A stored member past the reader's cap (or too large to address). */
static int over_cap(const stream_reader *r, const stream_source_job *job) {
  return job->size > r->max_member || job->size > (uint64_t)(SIZE_MAX / 2);
}

static int cap_error(const stream_reader *r, const stream_source_job *job, const char *shard) {
  char what[96];
  snprintf(what, sizeof what,
           "%" PRIu64 " bytes exceeds the cap of %" PRIu64 " bytes (ADAPTIVELOAD_MAX_MEMBER_BYTES)",
           job->size, r->max_member);
  return fail_at(job, shard, job->offset, AL_ERANGE, "member of ", what);
}

/* Reads up to cap bytes; 0 at the end of the member; < 0 on error (message set). */
static long long in_read(member_in *in, void *buf, size_t cap, const stream_source_job *job,
                         const char *shard) {
  if (in->a) {
    la_ssize_t n = archive_read_data(in->a, buf, cap);
    if (n < 0)
      return fail_at(job, shard, job->offset + in->pos, AL_EFORMAT,
                     "libarchive: ", archive_error_string(in->a));
    in->pos += (uint64_t)n;
    return n;
  }
  uint64_t left = in->end - in->pos;
  if (cap > left) cap = (size_t)left;
  if (cap == 0) return 0;
  if (in->mem) {
    memcpy(buf, in->mem + (in->pos - in->base), cap);
    in->pos += cap;
    return (long long)cap;
  }
  size_t n = 0;
  int rc = storage_read_some(in->obj, in->pos, buf, cap, &n);
  if (rc != AL_OK)
    return al_error_prefix(rc, "key '%s' member '%s' at byte %" PRIu64, job->key ? job->key : "?",
                           job->member, in->pos);
  if (n == 0) {
    char what[96];
    snprintf(what, sizeof what, "%" PRIu64 " of %" PRIu64 " bytes", in->pos - job->offset,
             job->size);
    return fail_at(job, shard, in->pos, AL_EIO, "short read (shard truncated?): got ", what);
  }
  in->pos += (uint64_t)n;
  return (long long)n;
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

/* LZ4 member input: in_read, with the job and shard for its messages. */
typedef struct lz4_in {
  member_in *in;
  const stream_source_job *job;
  const char *shard;
} lz4_in;

static long long lz4_read(void *ctx, uint8_t *buf, size_t cap) {
  lz4_in *li = ctx;
  return in_read(li->in, buf, cap, li->job, li->shard);
}

/* LZ4 member output: b->p + off on, the first `off` bytes of b kept. */
typedef struct lz4_out {
  stream_growbuf *b;
  size_t off;
} lz4_out;

static int lz4_reserve(void *ctx, size_t need, size_t keep, uint8_t **out, size_t *cap) {
  lz4_out *lo = ctx;
  if (need > SIZE_MAX - lo->off)
    return al_set_error(AL_ENOMEM, "stream buffer: %zu + %zu bytes exceed the address space",
                        lo->off, need);
  int rc = stream_growbuf_reserve(lo->b, lo->off + need, lo->off + keep);
  if (rc != AL_OK) return rc;
  *out = lo->b->p + lo->off;
  *cap = lo->b->cap - lo->off;
  return AL_OK;
}

static int decode_lz4(stream_reader *r, member_in *in, const stream_source_job *job,
                      const char *shard, stream_growbuf *b, size_t off, size_t *len) {
  lz4_in li = {in, job, shard};
  lz4_out lo = {b, off};
  lz4_member_src src = {.size = job->size,
                        .read = lz4_read,
                        .ctx = &li,
                        .scratch = r->scratch,
                        .block = r->block};
  lz4_member_dst dst = {.reserve = lz4_reserve,
                        .ctx = &lo,
                        .first = r->block,
                        .limit = r->max_member < SIZE_MAX / 2 ? (size_t)r->max_member
                                                              : SIZE_MAX / 2};
  lz4_member_result res;
  int rc = lz4_member_decode(r->dctx, &src, &dst, &res);
  if (rc != AL_OK) return rc;
  char what[96];
  switch (res.fault) {
    case LZ4_MEMBER_OK: break;
    case LZ4_MEMBER_BAD_HEADER:
      return fail_at(job, shard, job->offset, AL_EFORMAT, "LZ4 frame header: ", res.lz4_error);
    case LZ4_MEMBER_TOO_LARGE:
      snprintf(what, sizeof what, "%" PRIu64 " bytes (ADAPTIVELOAD_MAX_MEMBER_BYTES)",
               r->max_member);
      return fail_at(job, shard, job->offset + res.at, AL_ERANGE,
                     "LZ4 member decodes to more than the cap of ", what);
    case LZ4_MEMBER_CORRUPT:
      return fail_at(job, shard, job->offset + res.at, AL_EFORMAT, "LZ4 decode: ", res.lz4_error);
    case LZ4_MEMBER_TRUNCATED:
      return fail_at(job, shard, job->offset + res.at, AL_EFORMAT, "truncated LZ4 frame", NULL);
    case LZ4_MEMBER_TRAILING:
      return fail_at(job, shard, job->offset + res.at, AL_EFORMAT,
                     "bytes after the end of the LZ4 frame", NULL);
    case LZ4_MEMBER_SIZE_MISMATCH:
      snprintf(what, sizeof what, "%zu bytes, header says %llu", res.len, res.content);
      return fail_at(job, shard, job->offset, AL_EFORMAT, "LZ4 content size mismatch: decoded ",
                     what);
  }
  *len = res.len;
  return AL_OK;
}

/* libarchive's input: the reader's own position over r->seq_src. */
static la_ssize_t seq_read(struct archive *a, void *ctx, const void **buf) {
  stream_reader *r = ctx;
  size_t n = 0;
  if (storage_read_some(r->seq_src, r->seq_pos, r->seq_buf, r->block, &n) != AL_OK) {
    archive_set_error(a, EIO, "%s", al_last_error());
    return -1;
  }
  r->seq_pos += n;
  *buf = r->seq_buf;
  return (la_ssize_t)n;
}

/* libarchive (r->seq) reads the shard at `path` (an object of its own), or the downloaded one
 * in `shared`. */
static int seq_open(stream_reader *r, const stream_source_job *job, const char *path,
                    storage_obj *shared) {
  if (!r->seq_buf && !(r->seq_buf = malloc(r->block)))
    return al_set_error(AL_ENOMEM, "reader buffer of %zu bytes", r->block);
  r->seq_src = shared;
  if (!shared) {
    /* Opened as inputs are: never blocks on a FIFO put in the shard's place. */
    int rc = storage_open(NULL, path, &r->seq_own);
    if (rc != AL_OK)
      return al_error_prefix(rc, "key '%s' member '%s'", job->key ? job->key : "?", job->member);
    r->seq_src = r->seq_own;
  }
  r->seq_pos = 0;
  int ar = archive_read_open(r->seq, r, NULL, seq_read, NULL);
  if (ar != ARCHIVE_OK)
    return al_set_error(AL_EIO, "%s: key '%s' member '%s': libarchive open: %s", path,
                        job->key ? job->key : "?", job->member, archive_error_string(r->seq));
  return AL_OK;
}

/* Positions r->seq on the data of job->member, reading the shard from its
 * start when the member lies behind the current position. */
static int seq_seek(stream_reader *r, const stream_source_job *job, const char *path,
                    storage_obj *shared) {
  if (r->seq && (r->seq_shard != job->shard || job->offset <= r->seq_offset)) seq_close(r);
  if (!r->seq) {
    r->seq = archive_read_new();
    if (!r->seq) return al_set_error(AL_ENOMEM, "archive_read_new");
    archive_read_support_filter_all(r->seq);
    archive_read_support_format_tar(r->seq);
    archive_read_support_format_gnutar(r->seq);
    int rc = seq_open(r, job, path, shared);
    if (rc != AL_OK) {
      seq_close(r);
      return rc;
    }
    r->seq_shard = job->shard;
    r->seq_offset = 0;
  }
  for (;;) {
    struct archive_entry *e;
    int ar = archive_read_next_header(r->seq, &e);
    if (ar == ARCHIVE_EOF) break;
    if (ar < ARCHIVE_WARN) {
      int rc = fail_at(job, path, (uint64_t)archive_read_header_position(r->seq), AL_EFORMAT,
                       "libarchive: ", archive_error_string(r->seq));
      seq_close(r);
      return rc;
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

/* This thread's remote reader, made at its first remote read. */
static int remote_reader(stream_reader *r) {
  if (r->rr) return AL_OK;
  pthread_mutex_lock(&r->t->mu);
  stream_remote *rem = r->t->remote;
  pthread_mutex_unlock(&r->t->mu);
  return stream_remote_reader_new(&r->rr, rem);
}

/* A compressed shard at a URL on local disk: downloaded once per stream, by the first thread
 * that needs it (the others wait for it), then checked against the index like a local shard
 * (size, content fingerprint). *obj: the download's object, shared by the readers. A failed
 * download or check makes the shard unusable, its reason reported for each of its samples. */
static int shard_download(stream_reader *r, uint32_t id, shard_slot *s, storage_obj **obj) {
  stream_shard_table *t = r->t;
  pthread_mutex_lock(&t->mu);
  while (s->download == 1) pthread_cond_wait(&t->downloaded, &t->mu);
  int rc = AL_OK, mine = s->state > 0 && s->download == 0;
  if (mine) s->download = 1;
  pthread_mutex_unlock(&t->mu);
  storage_obj *got = NULL;
  if (mine) {
    int fd = -1;
    rc = remote_reader(r);
    if (rc == AL_OK) rc = stream_remote_download(r->rr, id, &fd);
    if (rc == AL_OK) rc = storage_file_adopt(fd, s->info.path, &got);
    if (rc == AL_OK) rc = shard_identity(t, id, &s->info, got, 0);
    if (rc != AL_OK) storage_close(got);
  }
  pthread_mutex_lock(&t->mu);
  if (mine) {
    if (rc == AL_OK) {
      s->obj = got;
      s->download = 2;
    } else {
      slot_fail(s, rc);
      s->download = 0;
    }
    pthread_cond_broadcast(&t->downloaded);
  }
  if (s->state < 0) rc = al_set_error(s->status, "%s", s->error ? s->error : "shard unusable");
  *obj = s->obj;
  pthread_mutex_unlock(&t->mu);
  return rc;
}

#define TAR_BLOCK 512

/* The 512-byte tar header block before a member's data, fetched with it (the bytes a local
 * reader's content fingerprint covers, checked where the member is read). */
static uint64_t header_before(const stream_source_job *job) {
  return job->offset >= TAR_BLOCK ? TAR_BLOCK : 0;
}

/* An octal tar number field (NUL or space ended); -1 when it is not one (base-256 and damaged
 * fields: not compared). */
static int64_t tar_octal(const uint8_t *f, size_t n) {
  int64_t v = 0;
  size_t i = 0;
  while (i < n && f[i] == ' ') i++;
  if (i == n || f[i] < '0' || f[i] > '7') return -1;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) v = v * 8 + (f[i] - '0');
  return i == n || f[i] == 0 || f[i] == ' ' ? v : -1;
}

/* The header block before a remote member must be the one indexed: a valid checksum, its size,
 * and (when its name is not cut at 100 bytes) the member's name. A same-size shard whose tar
 * headers were rewritten is refused here as a local reader refuses it by its fingerprint. */
static int check_header_block(const uint8_t *h, const stream_source_job *job, const char *url) {
  int64_t sum = tar_octal(h + 148, 8), got = 0;
  for (size_t i = 0; i < TAR_BLOCK; i++) got += (i >= 148 && i < 156) ? ' ' : h[i];
  int64_t size = tar_octal(h + 124, 12);
  char name[512] = "";
  size_t nlen = strnlen((const char *)h, 100);
  if (nlen < 100) {
    size_t plen = memcmp(h + 257, "ustar", 5) == 0 ? strnlen((const char *)h + 345, 155) : 0;
    snprintf(name, sizeof name, "%.*s%s%.*s", (int)plen, (const char *)h + 345, plen ? "/" : "",
             (int)nlen, (const char *)h);
  }
  const char *why = sum != got                                  ? "its checksum does not match"
                    : size >= 0 && (uint64_t)size != job->size  ? "it gives another size"
                    : name[0] && strcmp(name, job->member) != 0 ? "it names another member"
                                                                : NULL;
  if (!why) return AL_OK;
  return al_set_error(AL_EFORMAT,
                      "%s: shard changed since indexing: the tar header before key '%s' member '%s' "
                      "at byte %" PRIu64 " names '%s' (%" PRId64 " bytes): %s",
                      url, job->key ? job->key : "?", job->member, job->offset,
                      name[0] ? name : "(a cut name)", size, why);
}

/* The stored bytes of a member of a remote shard into r->fetched (cache or ranged GET), after
 * the header block before them (checked); *data is where the member's bytes start. */
static int remote_member(stream_reader *r, const stream_source_job *job, const char *url,
                         const uint8_t **data) {
  uint64_t hdr = header_before(job);
  int rc = remote_reader(r);
  if (rc == AL_OK) rc = stream_growbuf_reserve(&r->fetched, (size_t)(job->size + hdr) + 1, 0);
  if (rc == AL_OK)
    rc = stream_remote_read(r->rr, job->shard, job->offset - hdr, job->size + hdr, r->fetched.p,
                            job->step);
  if (rc != AL_OK)
    return al_error_prefix(rc, "%s: key '%s' member '%s' at byte %" PRIu64, url,
                           job->key ? job->key : "?", job->member, job->offset);
  if (hdr && (rc = check_header_block(r->fetched.p, job, url)) != AL_OK) return rc;
  *data = r->fetched.p + hdr;
  return AL_OK;
}

int stream_reader_read(stream_reader *r, const stream_source_job *job, stream_growbuf *b,
                       size_t off, size_t *len) {
  shard_slot *s = NULL;
  int rc = shard_get(r->t, job->shard, &s);
  if (rc != AL_OK || !s) {
    return al_error_prefix(rc, "key '%s' member '%s' at byte %" PRIu64, job->key ? job->key : "?",
                           job->member, job->offset);
  }
  const char *path = s->info.path;
  member_in in = {.obj = NULL};
  if (s->remote && !s->info.seekable) {
    storage_obj *got = NULL;
    if ((rc = shard_download(r, job->shard, s, &got)) != AL_OK)
      return al_error_prefix(rc, "key '%s' member '%s' at byte %" PRIu64, job->key ? job->key : "?",
                             job->member, job->offset);
    if ((rc = seq_seek(r, job, path, got)) != AL_OK) return rc;
    in.a = r->seq;
  } else if (s->remote) {
    if (job->offset > s->info.size || job->size > s->info.size - job->offset)
      return fail_at(job, path, job->offset, AL_EFORMAT, "member extends past the end of the shard",
                     NULL);
    if (over_cap(r, job)) return cap_error(r, job, path);
    const uint8_t *data = NULL;
    if ((rc = remote_member(r, job, path, &data)) != AL_OK) return rc;
    in.mem = data;
    in.base = job->offset;
    in.pos = job->offset;
    in.end = job->offset + job->size;
  } else if (s->info.seekable) {
    if (job->offset > s->info.size || job->size > s->info.size - job->offset)
      return fail_at(job, path, job->offset, AL_EFORMAT, "member extends past the end of the shard",
                     NULL);
    in.obj = s->obj;
    in.pos = job->offset;
    in.end = job->offset + job->size;
  } else {
    rc = seq_seek(r, job, path, NULL);
    if (rc != AL_OK) return rc;
    in.a = r->seq;
  }
  if (job->lz4) {
    rc = decode_lz4(r, &in, job, path, b, off, len);
  } else {
    if (over_cap(r, job)) return cap_error(r, job, path);
    rc = stream_growbuf_reserve(b, off + (size_t)job->size, off);
    if (rc == AL_OK) rc = read_exact(&in, b->p + off, job->size, job, path);
    if (rc == AL_OK) *len = (size_t)job->size;
  }
  if (rc != AL_OK && in.a) seq_close(r); /* position unknown after a failed read */
  return rc;
}

void stream_shard_table_cancel(stream_shard_table *t) {
  if (!t) return;
  pthread_mutex_lock(&t->cancel_mu);
  t->cancelled = 1;
  if (t->remote) stream_remote_cancel(t->remote);
  pthread_mutex_unlock(&t->cancel_mu);
}

int stream_shard_table_is_remote(stream_shard_table *t, uint32_t id) {
  stream_source_shard info;
  if (id >= t->n || t->src->shard(t->src->ctx, id, &info) != AL_OK) return 0;
  return storage_ops_for(info.path)->remote;
}

int stream_reader_warm(stream_reader *r, const stream_source_job *jobs, size_t n) {
  if (!n) return AL_OK;
  shard_slot *s = NULL;
  int rc = shard_get(r->t, jobs[0].shard, &s);
  if (rc != AL_OK || !s || !s->remote || !r->t->cache_dir) return rc;
  if (!s->info.seekable) { /* the whole object, ahead of the readers */
    storage_obj *got;
    return shard_download(r, jobs[0].shard, s, &got);
  }
  stream_cache_span spans[STREAM_CACHE_MAX_RUN];
  size_t m = 0;
  for (size_t i = 0; i < n && m < STREAM_CACHE_MAX_RUN; i++) {
    const stream_source_job *job = &jobs[i];
    if (job->shard != jobs[0].shard || job->offset > s->info.size ||
        job->size > s->info.size - job->offset || over_cap(r, job))
      continue;                        /* the reader reports it */
    uint64_t hdr = header_before(job); /* read with the member: remote_member */
    if (m && job->offset - hdr < spans[m - 1].off + spans[m - 1].len) continue; /* not ascending */
    spans[m++] = (stream_cache_span){job->offset - hdr, job->size + hdr};
  }
  if ((rc = remote_reader(r)) != AL_OK) return rc;
  rc = stream_remote_warm_run(r->rr, jobs[0].shard, spans, m, jobs[0].step);
  if (rc != AL_OK)
    return al_error_prefix(rc, "%s: key '%s' member '%s' at byte %" PRIu64, s->info.path,
                           jobs[0].key ? jobs[0].key : "?", jobs[0].member, jobs[0].offset);
  return AL_OK;
}

void stream_reader_set_max_member(stream_reader *r, uint64_t max_member) {
  r->max_member = max_member ? max_member : stream_max_member_bytes();
}

uint64_t stream_reader_max_member(const stream_reader *r) { return r->max_member; }

stream_growbuf *stream_reader_scratch(stream_reader *r) { return &r->scratch2; }

int stream_reader_direct(stream_reader *r, const stream_source_job *job, storage_obj **obj,
                         const char **path) {
  *obj = NULL;
  *path = NULL;
  shard_slot *s = NULL;
  int rc = shard_get(r->t, job->shard, &s);
  if (rc != AL_OK || !s)
    return al_error_prefix(rc, "key '%s' member '%s' at byte %" PRIu64, job->key ? job->key : "?",
                           job->member, job->offset);
  *path = s->info.path;
  if (job->lz4 || !s->info.seekable || s->remote) return AL_OK;
  if (job->offset > s->info.size || job->size > s->info.size - job->offset)
    return fail_at(job, s->info.path, job->offset, AL_EFORMAT,
                   "member extends past the end of the shard", NULL);
  if (over_cap(r, job)) return cap_error(r, job, s->info.path);
  *obj = s->obj;
  return AL_OK;
}

int stream_reader_pread(storage_obj *obj, const char *path, const stream_source_job *job, void *dst,
                        size_t n, uint64_t at) {
  member_in in = {.obj = obj, .pos = at, .end = at + n};
  uint8_t *p = dst;
  size_t got = 0;
  while (got < n) {
    long long k = in_read(&in, p + got, n - got, job, path);
    if (k < 0) return (int)k;
    got += (size_t)k;
  }
  return AL_OK;
}
