/* Chunked protobuf records inside an LZ4 frame. Format in pbio_internal.h. */
#include "proto/pbio_internal.h"

#include <errno.h>
#include <lz4frame.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic_file_internal.h"
#include "common/grow_internal.h"
#include "proto/adaptiveload.pb-c.h"

#define MAGIC "ALPB"
#define HEADER_LEN 16u
#define STAGE_CAP (1u << 20) /* uncompressed bytes handed to LZ4F per update */
#define READ_CAP (1u << 20)  /* compressed bytes read per fread */

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}
static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static void put_u64(uint8_t *p, uint64_t v) {
  put_u32(p, (uint32_t)v);
  put_u32(p + 4, (uint32_t)(v >> 32));
}
static uint64_t get_u64(const uint8_t *p) { return get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

const char *pbio_file_kind_name(pbio_file_kind kind) {
  switch (kind) {
    case AL_KIND_INDEX: return "index";
    case AL_KIND_COST: return "cost model";
    case AL_KIND_MANIFEST: return "manifest";
  }
  return "unknown";
}

/* ============================================================== writer == */

struct pbio_writer {
  afile *af; /* the temporary file (common/atomic_file_internal.h) */
  FILE *f;   /* its stream */
  char *path;
  const char *tmp; /* its name, owned by af */
  LZ4F_cctx *cctx;
  LZ4F_preferences_t prefs;
  uint8_t *stage; /* uncompressed bytes not yet compressed */
  size_t staged;
  uint8_t *out; /* compressed output scratch */
  size_t out_cap;
  uint64_t records;
  uint8_t *pack; /* scratch for pbio_write_msg */
  size_t pack_cap;
  /* Writer thread: LZ4 and fwrite of one full stage while the caller packs and
   * fills the next. The same stages reach LZ4F_compressUpdate in the same order as without
   * it, so the file's bytes are the same. */
  int threaded;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint8_t *job; /* a stage handed to the thread (job_len > 0), else its spare buffer */
  size_t job_len;
  int stop;
  int th_rc; /* the thread's first error, its text in th_err */
  char th_err[1024];
};

static int w_emit(pbio_writer *w, const void *buf, size_t n) {
  if (n && fwrite(buf, 1, n, w->f) != n)
    return al_set_error(AL_EIO, "%s: write failed: %s", w->tmp, strerror(errno));
  return AL_OK;
}

static int w_compress(pbio_writer *w, const uint8_t *buf, size_t len) {
  size_t n = LZ4F_compressUpdate(w->cctx, w->out, w->out_cap, buf, len, NULL);
  if (LZ4F_isError(n))
    return al_set_error(AL_EIO, "%s: LZ4 compression failed: %s", w->tmp, LZ4F_getErrorName(n));
  return w_emit(w, w->out, n);
}

static void *w_thread(void *arg) {
  pbio_writer *w = arg;
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->job_len && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
    if (!w->job_len) break; /* stopped, nothing left */
    int failed = w->th_rc;
    pthread_mutex_unlock(&w->mu);
    int rc = failed ? AL_OK : w_compress(w, w->job, w->job_len);
    pthread_mutex_lock(&w->mu);
    if (rc) {
      w->th_rc = rc;
      snprintf(w->th_err, sizeof w->th_err, "%s", al_last_error());
    }
    w->job_len = 0;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

/* Waits until the thread has nothing in hand; its error, if any (call with w->mu held). */
static int w_wait_idle_locked(pbio_writer *w) {
  while (w->job_len) pthread_cond_wait(&w->cv, &w->mu);
  return w->th_rc ? al_set_error(w->th_rc, "%s", w->th_err) : AL_OK;
}

static int w_drain(pbio_writer *w) {
  if (!w->threaded) return AL_OK;
  pthread_mutex_lock(&w->mu);
  int rc = w_wait_idle_locked(w);
  pthread_mutex_unlock(&w->mu);
  return rc;
}

static int w_flush_stage(pbio_writer *w) {
  if (!w->staged) return AL_OK;
  if (!w->threaded) {
    int rc = w_compress(w, w->stage, w->staged);
    if (!rc) w->staged = 0;
    return rc;
  }
  pthread_mutex_lock(&w->mu);
  int rc = w_wait_idle_locked(w);
  if (!rc) { /* hand the stage over, fill the spare */
    uint8_t *t = w->job;
    w->job = w->stage;
    w->job_len = w->staged;
    w->stage = t;
    w->staged = 0;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

static void w_thread_start(pbio_writer *w) {
  w->job = malloc(STAGE_CAP);
  if (!w->job) return; /* not fatal: the caller's thread compresses */
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  if (pthread_create(&w->th, NULL, w_thread, w) != 0) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w->job);
    w->job = NULL;
    return;
  }
  w->threaded = 1;
}

static void w_thread_stop(pbio_writer *w) {
  if (!w->threaded) return;
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->th, NULL);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  w->threaded = 0;
}

static int w_put(pbio_writer *w, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n) {
    size_t room = STAGE_CAP - w->staged;
    size_t k = n < room ? n : room;
    memcpy(w->stage + w->staged, p, k);
    w->staged += k;
    p += k;
    n -= k;
    if (w->staged == STAGE_CAP) {
      int rc = w_flush_stage(w);
      if (rc) return rc;
    }
  }
  return AL_OK;
}

static void w_free(pbio_writer *w) {
  if (!w) return;
  w_thread_stop(w); /* before the file goes */
  free(w->job);
  afile_abort(w->af);
  if (w->cctx) LZ4F_freeCompressionContext(w->cctx);
  free(w->stage);
  free(w->out);
  free(w->pack);
  free(w->path);
  free(w);
}

int pbio_writer_open_version(pbio_writer **out, const char *path, pbio_file_kind kind,
                             uint32_t version) {
  if (!out || !path) return al_set_error(AL_EINVAL, "pbio_writer_open: NULL argument");
  *out = NULL;
  pbio_writer *w = calloc(1, sizeof *w);
  if (!w) return al_set_error(AL_ENOMEM, "%s: out of memory", path);
  int rc = AL_OK;
  w->tmp = "";
  w->path = strdup(path);
  w->stage = malloc(STAGE_CAP);
  if (!w->path || !w->stage) {
    rc = al_set_error(AL_ENOMEM, "%s: out of memory", path);
    goto cleanup;
  }

  memset(&w->prefs, 0, sizeof w->prefs);
  w->prefs.frameInfo.blockSizeID = LZ4F_max4MB;
  w->prefs.frameInfo.blockMode = LZ4F_blockLinked;
  w->prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  w->prefs.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
  w->out_cap = LZ4F_compressBound(STAGE_CAP, &w->prefs) + LZ4F_HEADER_SIZE_MAX;
  w->out = malloc(w->out_cap);
  if (!w->out) {
    rc = al_set_error(AL_ENOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  size_t lz = LZ4F_createCompressionContext(&w->cctx, LZ4F_VERSION);
  if (LZ4F_isError(lz)) {
    w->cctx = NULL;
    rc = al_set_error(AL_ENOMEM, "%s: LZ4 context: %s", path, LZ4F_getErrorName(lz));
    goto cleanup;
  }
  rc = afile_create(&w->af, path);
  if (rc) goto cleanup;
  w->f = afile_stream(w->af);
  w->tmp = afile_tmp_path(w->af);
  size_t n = LZ4F_compressBegin(w->cctx, w->out, w->out_cap, &w->prefs);
  if (LZ4F_isError(n)) {
    rc = al_set_error(AL_EIO, "%s: LZ4 frame header: %s", path, LZ4F_getErrorName(n));
    goto cleanup;
  }
  uint8_t hdr[HEADER_LEN];
  memcpy(hdr, MAGIC, 4);
  put_u32(hdr + 4, version);
  put_u32(hdr + 8, (uint32_t)kind);
  put_u32(hdr + 12, 0);
  rc = w_emit(w, w->out, n);
  if (!rc) rc = w_put(w, hdr, sizeof hdr);
  if (rc) goto cleanup;
  w_thread_start(w);
  *out = w;
  return AL_OK;

cleanup:
  w_free(w); /* removes the partial temporary file */
  return rc;
}

int pbio_writer_open(pbio_writer **out, const char *path, pbio_file_kind kind) {
  return pbio_writer_open_version(out, path, kind, AL_FORMAT_VERSION);
}

int pbio_write(pbio_writer *w, uint32_t tag, const void *buf, size_t len) {
  if (!w || (!buf && len)) return al_set_error(AL_EINVAL, "pbio_write: NULL argument");
  if (tag == 0) return al_set_error(AL_EINVAL, "%s: record tag 0 is reserved", w->path);
  if (len > AL_PBIO_MAX_RECORD)
    return al_set_error(AL_ERANGE,
                        "%s: record of %zu bytes exceeds the %u-byte limit; write smaller chunks",
                        w->path, len, AL_PBIO_MAX_RECORD);
  uint8_t rh[8];
  put_u32(rh, tag);
  put_u32(rh + 4, (uint32_t)len);
  int rc = w_put(w, rh, sizeof rh);
  if (!rc) rc = w_put(w, buf, len);
  if (!rc) w->records++;
  return rc;
}

int pbio_write_msg(pbio_writer *w, uint32_t tag, const ProtobufCMessage *msg) {
  if (!w || !msg) return al_set_error(AL_EINVAL, "pbio_write_msg: NULL argument");
  size_t n = protobuf_c_message_get_packed_size(msg);
  if (n > AL_PBIO_MAX_RECORD)
    return al_set_error(AL_ERANGE, "%s: %s message of %zu bytes exceeds the %u-byte record limit",
                        w->path, msg->descriptor->name, n, AL_PBIO_MAX_RECORD);
  int rc = grow_array((void **)&w->pack, &w->pack_cap, n, 1, "the record buffer");
  if (rc) return al_error_prefix(rc, "%s", w->path);
  size_t got = protobuf_c_message_pack(msg, w->pack);
  return pbio_write(w, tag, w->pack, got);
}

int pbio_writer_close(pbio_writer *w) {
  if (!w) return al_set_error(AL_EINVAL, "pbio_writer_close: NULL writer");
  uint8_t end[16];
  put_u32(end, 0);
  put_u32(end + 4, 8);
  put_u64(end + 8, w->records);
  int rc = w_put(w, end, sizeof end);
  if (!rc) rc = w_flush_stage(w);
  int drc = w_drain(w); /* the thread idle: the context and the stream are the caller's again */
  if (!rc) rc = drc;
  if (!rc) {
    size_t n = LZ4F_compressEnd(w->cctx, w->out, w->out_cap, NULL);
    if (LZ4F_isError(n))
      rc = al_set_error(AL_EIO, "%s: LZ4 frame end: %s", w->path, LZ4F_getErrorName(n));
    else
      rc = w_emit(w, w->out, n);
  }
  afile *af = w->af;
  w->af = NULL;
  w->f = NULL;
  rc = afile_finish(af, rc); /* fsync, rename, fsync of the directory; or removal */
  w_free(w);
  return rc;
}

void pbio_writer_abort(pbio_writer *w) { w_free(w); }

int pbio_writer_finish(pbio_writer *w, int rc) {
  if (rc == AL_OK) return pbio_writer_close(w);
  pbio_writer_abort(w);
  return rc;
}

/* ============================================================== reader == */

/* Bump allocator for unpacked messages. protobuf-c otherwise mallocs every
 * sub-message, string and repeated field of a record and frees them one by one:
 * for a 10M-sample index that was most of the load time. A record's message
 * lives until the next read, so one arena reset per record frees it all. */
typedef struct arena_chunk {
  struct arena_chunk *next;
  size_t cap, used;
  _Alignas(16) uint8_t data[];
} arena_chunk;

static void *arena_alloc(void *ctx, size_t size) {
  arena_chunk **head = ctx;
  size = (size + 15) & ~(size_t)15;
  arena_chunk *c = *head;
  if (!c || c->cap - c->used < size) {
    size_t cap = c ? c->cap * 2 : (1u << 20);
    while (cap < size) cap *= 2;
    arena_chunk *n = malloc(sizeof *n + cap);
    if (!n) return NULL;
    n->next = c;
    n->cap = cap;
    n->used = 0;
    *head = n;
    c = n;
  }
  void *p = c->data + c->used;
  c->used += size;
  return p;
}

static void arena_free(void *ctx, void *p) {
  (void)ctx;
  (void)p;
}

/* Keeps the newest (largest) chunk for the next record, frees the rest. */
static void arena_reset(arena_chunk **head) {
  arena_chunk *c = *head;
  if (!c) return;
  arena_chunk *rest = c->next;
  while (rest) {
    arena_chunk *n = rest->next;
    free(rest);
    rest = n;
  }
  c->next = NULL;
  c->used = 0;
}

struct pbio_reader {
  FILE *f;
  char *path;
  uint32_t version;
  pbio_file_kind kind;
  LZ4F_dctx *dctx;
  uint8_t *in; /* compressed bytes read but not yet consumed */
  size_t in_pos, in_len;
  uint64_t in_off; /* file offset of in[in_pos] */
  /* The LZ4 frame is fed one unit at a time, what LZ4F asks for next (the rest of a block,
   * its checksum and the next block's size), so that a damaged block can be located. */
  size_t unit_want;  /* LZ4F's hint: the next unit's size (0 before the first call) */
  size_t unit_left;  /* bytes of the current unit not yet fed */
  uint64_t unit_off; /* file offset of the current unit */
  int file_eof;
  int frame_done; /* LZ4F reported the end of the frame (checksum verified) */
  uint8_t *d;     /* decompressed window */
  size_t d_cap, d_pos, d_len;
  uint64_t d_off; /* stream offset of d[d_pos] */
  uint64_t records;
  uint64_t max_bytes;   /* decoded bytes allowed (0 = no limit); pbio_reader_set_limit */
  const char *limit_by; /* what sets it, for the message */
  int finished;
  arena_chunk *arena;           /* backs the last unpacked message */
  ProtobufCAllocator allocator; /* arena_alloc / arena_free over `arena` */
  struct pbio_ahead *ahead;     /* read-ahead thread (pbio_reader_read_ahead), or NULL */
  uint32_t raw_tag;             /* records handed over undecoded (pbio_reader_set_raw_tag) */
};

/* A damaged LZ4 block: the damage lies in the unit being fed or in the block's 4-byte size
 * field just before it; LZ4F (a checksum over the whole block) cannot say where inside. */
static int r_corrupt(const pbio_reader *r, size_t lz_error) {
  uint64_t from = r->unit_off >= 4 ? r->unit_off - 4 : 0;
  uint64_t end = r->in_off + r->unit_left; /* the unit's end */
  return al_set_error(AL_EFORMAT,
                      "%s: corrupt LZ4 frame: damage in file bytes %llu..%llu (one LZ4 block; "
                      "where inside it the decoder cannot tell): %s",
                      r->path, (unsigned long long)from, (unsigned long long)(end - 1),
                      LZ4F_getErrorName(lz_error));
}

/* Makes at least `n` decompressed bytes available at r->d + r->d_pos, or fewer
 * when the stream ends. Returns AL_OK or an error for a corrupt/truncated frame. */
static int r_fill(pbio_reader *r, size_t n) {
  if (r->d_len - r->d_pos >= n) return AL_OK;
  if (r->d_pos) {
    memmove(r->d, r->d + r->d_pos, r->d_len - r->d_pos);
    r->d_len -= r->d_pos;
    r->d_pos = 0;
  }
  int rc = grow_array((void **)&r->d, &r->d_cap, n, 1, "the record buffer");
  if (rc) return al_error_prefix(rc, "%s", r->path);
  while (r->d_len < n && !r->frame_done) {
    if (r->in_pos == r->in_len) {
      if (r->file_eof) {
        return al_set_error(AL_EFORMAT,
                            "%s: truncated: LZ4 frame ends early at file byte %llu (decompressed byte %llu)",
                            r->path, (unsigned long long)r->in_off,
                            (unsigned long long)(r->d_off + r->d_len));
      }
      r->in_len = fread(r->in, 1, READ_CAP, r->f);
      r->in_pos = 0;
      if (r->in_len < READ_CAP) {
        if (ferror(r->f))
          return al_set_error(AL_EIO, "%s: read failed: %s", r->path, strerror(errno));
        r->file_eof = 1;
      }
      if (r->in_len == 0) continue;
    }
    if (r->unit_left == 0) {
      r->unit_left = r->unit_want ? r->unit_want : 7; /* 7: the shortest frame header */
      r->unit_off = r->in_off;
    }
    size_t src = r->in_len - r->in_pos;
    if (src > r->unit_left) src = r->unit_left;
    size_t dst = r->d_cap - r->d_len;
    size_t hint = LZ4F_decompress(r->dctx, r->d + r->d_len, &dst, r->in + r->in_pos, &src, NULL);
    if (LZ4F_isError(hint)) return r_corrupt(r, hint);
    r->in_pos += src;
    r->in_off += src;
    r->unit_left -= src;
    r->unit_want = hint;
    r->d_len += dst;
    if (hint == 0) r->frame_done = 1;
  }
  return AL_OK;
}

static void ahead_stop(pbio_reader *r);

static void r_free(pbio_reader *r) {
  if (!r) return;
  ahead_stop(r);
  if (r->f) fclose(r->f);
  if (r->dctx) LZ4F_freeDecompressionContext(r->dctx);
  arena_reset(&r->arena);
  free(r->arena);
  free(r->in);
  free(r->d);
  free(r->path);
  free(r);
}

int pbio_reader_open(pbio_reader **out, const char *path, pbio_file_kind expect) {
  if (!out || !path) return al_set_error(AL_EINVAL, "pbio_reader_open: NULL argument");
  *out = NULL;
  pbio_reader *r = calloc(1, sizeof *r);
  if (!r) return al_set_error(AL_ENOMEM, "%s: out of memory", path);
  int rc = AL_OK;
  r->path = strdup(path);
  r->in = malloc(READ_CAP);
  r->d_cap = 1u << 20;
  r->d = malloc(r->d_cap);
  if (!r->path || !r->in || !r->d) {
    rc = al_set_error(AL_ENOMEM, "%s: out of memory", path);
    goto cleanup;
  }
  size_t lz = LZ4F_createDecompressionContext(&r->dctx, LZ4F_VERSION);
  if (LZ4F_isError(lz)) {
    r->dctx = NULL;
    rc = al_set_error(AL_ENOMEM, "%s: LZ4 context: %s", path, LZ4F_getErrorName(lz));
    goto cleanup;
  }
  /* Refuses a FIFO, device or directory at once instead of blocking in open. */
  rc = afile_fopen_input(path, expect ? pbio_file_kind_name(expect) : "file", &r->f);
  if (rc) goto cleanup;
  /* An LZ4 frame starts with magic 0x184D2204; say so plainly for other files. */
  uint8_t m[4];
  size_t got = fread(m, 1, 4, r->f);
  if (got == 0) {
    rc = al_set_error(AL_EFORMAT, "%s: empty file (expected an AdaptiveLoad %s)", path,
                      expect ? pbio_file_kind_name(expect) : "file");
    goto cleanup;
  }
  if (got < 4 || get_u32(m) != 0x184D2204u) {
    rc = al_set_error(AL_EFORMAT, "%s: not an AdaptiveLoad file (no LZ4 frame magic at byte 0)",
                      path);
    goto cleanup;
  }
  rewind(r->f);
  rc = r_fill(r, HEADER_LEN);
  if (rc) goto cleanup;
  if (r->d_len < HEADER_LEN || memcmp(r->d, MAGIC, 4) != 0) {
    rc = al_set_error(AL_EFORMAT, "%s: not an AdaptiveLoad file (bad header magic)", path);
    goto cleanup;
  }
  r->version = get_u32(r->d + 4);
  r->kind = (pbio_file_kind)get_u32(r->d + 8);
  if (r->version != AL_FORMAT_VERSION) {
    rc = al_set_error(AL_EVERSION,
                      "%s: format version %u is not supported (this build reads version %u); "
                      "re-create the file with this version of adaptiveload",
                      path, r->version, AL_FORMAT_VERSION);
    goto cleanup;
  }
  if (expect && r->kind != expect) {
    rc = al_set_error(AL_EFORMAT, "%s: is a %s file, expected a %s file", path,
                      pbio_file_kind_name(r->kind), pbio_file_kind_name(expect));
    goto cleanup;
  }
  r->d_pos = HEADER_LEN;
  r->d_off = HEADER_LEN;
  r->allocator.alloc = arena_alloc;
  r->allocator.free = arena_free;
  r->allocator.allocator_data = &r->arena;
  *out = r;
  return AL_OK;

cleanup:
  r_free(r);
  return rc;
}

void pbio_reader_set_limit(pbio_reader *r, uint64_t max_bytes, const char *limit_by) {
  r->max_bytes = max_bytes;
  r->limit_by = limit_by;
}

pbio_file_kind pbio_reader_kind(const pbio_reader *r) { return r->kind; }
uint32_t pbio_reader_version(const pbio_reader *r) { return r->version; }
const char *pbio_reader_path(const pbio_reader *r) { return r->path; }

static int r_truncated(pbio_reader *r, size_t want) {
  return al_set_error(AL_EFORMAT,
                      "%s: record %llu at byte %llu: truncated (wanted %zu bytes, stream has %zu)",
                      r->path, (unsigned long long)r->records, (unsigned long long)r->d_off, want,
                      r->d_len - r->d_pos);
}

static int is_ahead_thread(const pbio_reader *r);

int pbio_read(pbio_reader *r, uint32_t *tag, const uint8_t **buf, size_t *len) {
  if (!r || !tag || !buf || !len) return al_set_error(AL_EINVAL, "pbio_read: NULL argument");
  if (r->ahead && !is_ahead_thread(r))
    return al_set_error(AL_ESTATE, "%s: pbio_read while the read-ahead thread reads", r->path);
  if (r->finished) return AL_EOF;
  int rc = r_fill(r, 8);
  if (rc) return rc;
  if (r->d_len - r->d_pos < 8) return r_truncated(r, 8);
  uint32_t t = get_u32(r->d + r->d_pos);
  uint32_t n = get_u32(r->d + r->d_pos + 4);
  if (n > AL_PBIO_MAX_RECORD)
    return al_set_error(AL_EFORMAT,
                        "%s: record %llu at byte %llu: length %u exceeds the %u-byte limit (corrupt file)",
                        r->path, (unsigned long long)r->records, (unsigned long long)r->d_off, n,
                        AL_PBIO_MAX_RECORD);
  if (r->max_bytes && r->d_off + 8 + (uint64_t)n > r->max_bytes)
    return al_set_error(AL_ERANGE,
                        "%s: record %llu at byte %llu: the file's content passes the limit of "
                        "%llu bytes (%s)",
                        r->path, (unsigned long long)r->records, (unsigned long long)r->d_off,
                        (unsigned long long)r->max_bytes, r->limit_by ? r->limit_by : "set");
  rc = r_fill(r, 8 + (size_t)n);
  if (rc) return rc;
  if (r->d_len - r->d_pos < 8 + (size_t)n) return r_truncated(r, 8 + (size_t)n);
  const uint8_t *p = r->d + r->d_pos + 8;
  if (t == 0) {
    if (n != 8 || get_u64(p) != r->records)
      return al_set_error(AL_EFORMAT,
                          "%s: byte %llu: bad end record (file claims %llu records, read %llu)",
                          r->path, (unsigned long long)r->d_off,
                          n == 8 ? (unsigned long long)get_u64(p) : 0ull,
                          (unsigned long long)r->records);
    r->d_pos += 16;
    r->d_off += 16;
    /* Drain the frame so its content checksum is verified before we say EOF. */
    rc = r_fill(r, (r->d_len - r->d_pos) + 1);
    if (rc) return rc;
    if (r->d_len != r->d_pos)
      return al_set_error(AL_EFORMAT, "%s: %zu unexpected bytes after the end record at byte %llu",
                          r->path, r->d_len - r->d_pos, (unsigned long long)r->d_off);
    if (!r->frame_done) return al_set_error(AL_EFORMAT, "%s: LZ4 frame not terminated", r->path);
    r->finished = 1;
    return AL_EOF;
  }
  *tag = t;
  *buf = p;
  *len = n;
  r->d_pos += 8 + (size_t)n;
  r->d_off += 8 + (uint64_t)n;
  r->records++;
  return AL_OK;
}

const ProtobufCMessageDescriptor *pbio_descriptor_for(uint32_t tag) {
  switch (tag) {
    case AL_REC_INDEX_HEADER: return &adaptiveload__index_header__descriptor;
    case AL_REC_INDEX_CHUNK: return &adaptiveload__index_chunk__descriptor;
    case AL_REC_INDEX_SUMMARY: return &adaptiveload__index_summary__descriptor;
    case AL_REC_COST_MODEL: return &adaptiveload__cost_model__descriptor;
    case AL_REC_MANIFEST_HEADER: return &adaptiveload__manifest_header__descriptor;
    case AL_REC_KEY_CHUNK: return &adaptiveload__key_chunk__descriptor;
    case AL_REC_MANIFEST_CHUNK: return &adaptiveload__manifest_chunk__descriptor;
    case AL_REC_MANIFEST_SUMMARY: return &adaptiveload__manifest_summary__descriptor;
  }
  return NULL;
}

/* Unpacks a record with `alloc`: the reader's arena (recycled at the next
 * read), or NULL for the heap (the caller frees the message). */
static int unpack(pbio_reader *r, uint32_t tag, const ProtobufCMessageDescriptor *desc,
                  ProtobufCAllocator *alloc, const uint8_t *buf, size_t len,
                  ProtobufCMessage **msg) {
  if (alloc == &r->allocator) arena_reset(&r->arena);
  *msg = protobuf_c_message_unpack(desc, alloc, len, buf);
  if (!*msg)
    return al_set_error(AL_EFORMAT,
                        "%s: record %llu (tag %u): cannot decode %s message of %zu bytes", r->path,
                        (unsigned long long)(r->records - 1), tag, desc->name, len);
  return AL_OK;
}

/* The next record, which must be `tag`, unpacked as `desc` with `alloc`. */
static int read_expected(pbio_reader *r, uint32_t tag, const ProtobufCMessageDescriptor *desc,
                         ProtobufCAllocator *alloc, ProtobufCMessage **msg) {
  *msg = NULL;
  uint32_t t;
  const uint8_t *buf;
  size_t len;
  int rc = pbio_read(r, &t, &buf, &len);
  if (rc == AL_EOF)
    return al_set_error(AL_EFORMAT, "%s: ends before the expected %s record", r->path, desc->name);
  if (rc) return rc;
  if (t != tag)
    return al_set_error(AL_EFORMAT, "%s: record %llu has tag %u, expected %u (%s)", r->path,
                        (unsigned long long)(r->records - 1), t, tag, desc->name);
  return unpack(r, t, desc, alloc, buf, len, msg);
}

/* ---------------------------------------------------------- read-ahead -- */

/* Two threads work ahead of the caller: one reads and decompresses the records (LZ4 and the
 * framing, in file order) into slots, one unpacks each slot's record with protobuf-c into the
 * slot's arena; the caller takes the slots in order and holds one (its last message) at a
 * time. Loading a 10M-sample index spends about two thirds of its time in LZ4 and protobuf-c:
 * that part then runs beside the caller's own work on the messages, and decompressing beside
 * unpacking. */
#define AHEAD_SLOTS 4
#define AHEAD_ERR_MAX 1024 /* an error message carried from a thread to the caller */

enum { SLOT_FREE = 0, SLOT_RAW = 1, SLOT_UNPACKING = 2, SLOT_READY = 3 };

typedef struct ahead_slot {
  int state;
  int rc; /* AL_OK, AL_EOF or an error */
  uint32_t tag;
  uint64_t record; /* record number, for messages */
  uint8_t *raw;    /* the record's bytes (SLOT_RAW) */
  size_t raw_len, raw_cap;
  ProtobufCMessage *msg; /* NULL for a record of the raw tag */
  arena_chunk *arena;
  ProtobufCAllocator allocator;
  char err[AHEAD_ERR_MAX];
} ahead_slot;

typedef struct pbio_ahead {
  pthread_t reader, unpacker;
  int have_unpacker;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  unsigned next_fill, next_unpack, next_take; /* slot numbers, mod AHEAD_SLOTS */
  int held;                                   /* the caller holds slot (next_take - 1) */
  int done;                                   /* the caller has seen AL_EOF or an error */
  int done_rc;
  char done_err[AHEAD_ERR_MAX];
  ahead_slot slot[AHEAD_SLOTS];
} pbio_ahead;

/* The next record's bytes copied into `sl`. */
static int read_raw(pbio_reader *r, ahead_slot *sl) {
  const uint8_t *buf;
  size_t len;
  int rc = pbio_read(r, &sl->tag, &buf, &len);
  if (rc) return rc;
  sl->record = r->records - 1;
  if (!pbio_descriptor_for(sl->tag))
    return al_set_error(AL_EFORMAT, "%s: record %llu has unknown tag %u", r->path,
                        (unsigned long long)sl->record, sl->tag);
  if ((rc = grow_array((void **)&sl->raw, &sl->raw_cap, len ? len : 1, 1, "a read-ahead record")))
    return al_error_prefix(rc, "%s", r->path);
  memcpy(sl->raw, buf, len);
  sl->raw_len = len;
  return AL_OK;
}

/* Unpacks the slot's record into its arena (reset first); a record of the raw tag stays bytes. */
static int unpack_slot(const pbio_reader *r, ahead_slot *sl) {
  const ProtobufCMessageDescriptor *desc = pbio_descriptor_for(sl->tag);
  arena_reset(&sl->arena);
  sl->msg = NULL;
  if (r->raw_tag && sl->tag == r->raw_tag) return AL_OK;
  sl->msg = protobuf_c_message_unpack(desc, &sl->allocator, sl->raw_len, sl->raw);
  if (!sl->msg)
    return al_set_error(AL_EFORMAT,
                        "%s: record %llu (tag %u): cannot decode %s message of %zu bytes", r->path,
                        (unsigned long long)sl->record, sl->tag, desc->name, sl->raw_len);
  return AL_OK;
}

static void *ahead_reader(void *arg) {
  pbio_reader *r = arg;
  pbio_ahead *a = r->ahead;
  for (;;) {
    pthread_mutex_lock(&a->mu);
    ahead_slot *sl = &a->slot[a->next_fill % AHEAD_SLOTS];
    while (!a->stop && sl->state != SLOT_FREE) pthread_cond_wait(&a->cv, &a->mu);
    int stop = a->stop;
    pthread_mutex_unlock(&a->mu);
    if (stop) break;
    int rc = read_raw(r, sl);
    if (rc && rc != AL_EOF) snprintf(sl->err, sizeof sl->err, "%s", al_last_error());
    if (rc == AL_OK && !a->have_unpacker) { /* no second thread: unpack here */
      rc = unpack_slot(r, sl);
      if (rc) snprintf(sl->err, sizeof sl->err, "%s", al_last_error());
      pthread_mutex_lock(&a->mu);
      sl->rc = rc;
      sl->state = SLOT_READY;
    } else {
      pthread_mutex_lock(&a->mu);
      sl->rc = rc;
      /* AL_EOF or a read error is ready as it is; a record waits for the unpacker. */
      sl->state = rc ? SLOT_READY : SLOT_RAW;
    }
    a->next_fill++;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    if (rc) break; /* AL_EOF or an error: nothing follows */
  }
  return NULL;
}

static void *ahead_unpacker(void *arg) {
  pbio_reader *r = arg;
  pbio_ahead *a = r->ahead;
  for (;;) {
    pthread_mutex_lock(&a->mu);
    ahead_slot *sl = &a->slot[a->next_unpack % AHEAD_SLOTS];
    while (!a->stop && sl->state != SLOT_RAW) pthread_cond_wait(&a->cv, &a->mu);
    int stop = a->stop;
    if (!stop) sl->state = SLOT_UNPACKING;
    pthread_mutex_unlock(&a->mu);
    if (stop) break;
    int rc = unpack_slot(r, sl);
    if (rc) snprintf(sl->err, sizeof sl->err, "%s", al_last_error());
    pthread_mutex_lock(&a->mu);
    sl->rc = rc;
    sl->state = SLOT_READY;
    a->next_unpack++;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
  }
  return NULL;
}

static int is_ahead_thread(const pbio_reader *r) {
  return pthread_equal(pthread_self(), r->ahead->reader);
}

int pbio_reader_read_ahead(pbio_reader *r) {
  if (!r) return al_set_error(AL_EINVAL, "pbio_reader_read_ahead: NULL argument");
  if (r->ahead) return AL_OK;
  pbio_ahead *a = calloc(1, sizeof *a);
  if (!a) return al_set_error(AL_ENOMEM, "%s: out of memory", r->path);
  for (int i = 0; i < AHEAD_SLOTS; i++) {
    a->slot[i].allocator.alloc = arena_alloc;
    a->slot[i].allocator.free = arena_free;
    a->slot[i].allocator.allocator_data = &a->slot[i].arena;
  }
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->cv, NULL);
  r->ahead = a;
  /* The unpacker first: the reader decides by have_unpacker whether to unpack itself. */
  a->have_unpacker = pthread_create(&a->unpacker, NULL, ahead_unpacker, r) == 0;
  if (pthread_create(&a->reader, NULL, ahead_reader, r) != 0) {
    /* Not fatal: reads go on in the caller's thread. */
    if (a->have_unpacker) {
      pthread_mutex_lock(&a->mu);
      a->stop = 1;
      pthread_cond_broadcast(&a->cv);
      pthread_mutex_unlock(&a->mu);
      pthread_join(a->unpacker, NULL);
    }
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
    r->ahead = NULL;
  }
  return AL_OK;
}

static void ahead_stop(pbio_reader *r) {
  pbio_ahead *a = r->ahead;
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  a->stop = 1;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  pthread_join(a->reader, NULL);
  if (a->have_unpacker) pthread_join(a->unpacker, NULL);
  for (int i = 0; i < AHEAD_SLOTS; i++) {
    arena_reset(&a->slot[i].arena);
    free(a->slot[i].arena);
    free(a->slot[i].raw);
  }
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->cv);
  free(a);
  r->ahead = NULL;
}

/* The next record from the read-ahead thread; the slot of the previous one is given back. */
static int ahead_take(pbio_reader *r, uint32_t *tag, ProtobufCMessage **msg, const uint8_t **raw,
                      size_t *raw_len, uint64_t *record) {
  pbio_ahead *a = r->ahead;
  if (a->done) /* the same answer again, as the plain reader gives */
    return a->done_rc == AL_EOF ? AL_EOF : al_set_error(a->done_rc, "%s", a->done_err);
  pthread_mutex_lock(&a->mu);
  if (a->held) {
    a->slot[(a->next_take - 1) % AHEAD_SLOTS].state = SLOT_FREE;
    a->held = 0;
    pthread_cond_broadcast(&a->cv);
  }
  ahead_slot *sl = &a->slot[a->next_take % AHEAD_SLOTS];
  while (sl->state != SLOT_READY) pthread_cond_wait(&a->cv, &a->mu);
  a->next_take++;
  a->held = 1;
  pthread_mutex_unlock(&a->mu);
  if (sl->rc) {
    a->done = 1;
    a->done_rc = sl->rc;
    snprintf(a->done_err, sizeof a->done_err, "%s", sl->err);
    return sl->rc == AL_EOF ? AL_EOF : al_set_error(sl->rc, "%s", sl->err);
  }
  *tag = sl->tag;
  *msg = sl->msg;
  *raw = sl->msg ? NULL : sl->raw; /* bytes only for a record of the raw tag */
  *raw_len = sl->msg ? 0 : sl->raw_len;
  *record = sl->record;
  return AL_OK;
}

/* A record of the raw tag unpacked after all, for pbio_read_msg and pbio_read_any: into the
 * arena of the slot the caller holds, or the reader's. */
static int unpack_held(pbio_reader *r, uint32_t tag, const uint8_t *raw, size_t raw_len,
                       uint64_t record, ProtobufCMessage **msg) {
  arena_chunk **arena = &r->arena;
  ProtobufCAllocator *alloc = &r->allocator;
  if (r->ahead) {
    ahead_slot *sl = &r->ahead->slot[(r->ahead->next_take - 1) % AHEAD_SLOTS];
    arena = &sl->arena;
    alloc = &sl->allocator;
  }
  const ProtobufCMessageDescriptor *desc = pbio_descriptor_for(tag);
  arena_reset(arena);
  *msg = protobuf_c_message_unpack(desc, alloc, raw_len, raw);
  if (!*msg)
    return al_set_error(AL_EFORMAT,
                        "%s: record %llu (tag %u): cannot decode %s message of %zu bytes", r->path,
                        (unsigned long long)record, tag, desc->name, raw_len);
  return AL_OK;
}

void pbio_reader_set_raw_tag(pbio_reader *r, uint32_t tag) {
  if (r && !r->ahead) r->raw_tag = tag;
}

int pbio_read_msg(pbio_reader *r, uint32_t tag, const ProtobufCMessageDescriptor *desc,
                  ProtobufCMessage **msg) {
  if (!msg || !desc) return al_set_error(AL_EINVAL, "pbio_read_msg: NULL argument");
  if (!r->ahead) return read_expected(r, tag, desc, &r->allocator, msg);
  *msg = NULL;
  uint32_t t;
  const uint8_t *raw;
  size_t raw_len;
  uint64_t record;
  int rc = ahead_take(r, &t, msg, &raw, &raw_len, &record);
  if (!rc && !*msg && t == tag) rc = unpack_held(r, t, raw, raw_len, record, msg);
  if (rc == AL_EOF)
    return al_set_error(AL_EFORMAT, "%s: ends before the expected %s record", r->path, desc->name);
  if (rc) return rc;
  if (t != tag) {
    *msg = NULL;
    return al_set_error(AL_EFORMAT, "%s: a record has tag %u, expected %u (%s)", r->path, t, tag,
                        desc->name);
  }
  return AL_OK;
}

int pbio_read_next(pbio_reader *r, uint32_t *tag, ProtobufCMessage **msg, const uint8_t **raw,
                   size_t *raw_len, uint64_t *record) {
  if (!r || !tag || !msg || !raw || !raw_len || !record)
    return al_set_error(AL_EINVAL, "pbio_read_next: NULL argument");
  *msg = NULL;
  *raw = NULL;
  *raw_len = 0;
  if (r->ahead) return ahead_take(r, tag, msg, raw, raw_len, record);
  const uint8_t *buf;
  size_t len;
  int rc = pbio_read(r, tag, &buf, &len);
  if (rc) return rc;
  *record = r->records - 1;
  const ProtobufCMessageDescriptor *desc = pbio_descriptor_for(*tag);
  if (!desc)
    return al_set_error(AL_EFORMAT, "%s: record %llu has unknown tag %u", r->path,
                        (unsigned long long)*record, *tag);
  if (r->raw_tag && *tag == r->raw_tag) {
    *raw = buf;
    *raw_len = len;
    return AL_OK;
  }
  return unpack(r, *tag, desc, &r->allocator, buf, len, msg);
}

int pbio_read_any(pbio_reader *r, uint32_t *tag, ProtobufCMessage **msg) {
  if (!tag || !msg) return al_set_error(AL_EINVAL, "pbio_read_any: NULL argument");
  const uint8_t *raw;
  size_t raw_len;
  uint64_t record;
  int rc = pbio_read_next(r, tag, msg, &raw, &raw_len, &record);
  if (!rc && !*msg) rc = unpack_held(r, *tag, raw, raw_len, record, msg);
  return rc;
}

void pbio_reader_close(pbio_reader *r) { r_free(r); }

int pbio_save_one(const char *path, pbio_file_kind kind, uint32_t tag,
                  const ProtobufCMessage *msg) {
  pbio_writer *w;
  int rc = pbio_writer_open(&w, path, kind);
  if (rc) return rc;
  return pbio_writer_finish(w, pbio_write_msg(w, tag, msg));
}

int pbio_load_one(const char *path, pbio_file_kind kind, uint32_t tag,
                  const ProtobufCMessageDescriptor *desc, ProtobufCMessage **msg) {
  *msg = NULL;
  pbio_reader *r;
  int rc = pbio_reader_open(&r, path, kind);
  if (rc) return rc;
  /* The heap, not the arena: the message outlives the reader. */
  rc = read_expected(r, tag, desc, NULL, msg);
  if (!rc) {
    uint32_t t;
    const uint8_t *b;
    size_t n;
    rc = pbio_read(r, &t, &b, &n);
    if (rc == AL_EOF)
      rc = AL_OK;
    else if (rc == AL_OK)
      rc = al_set_error(AL_EFORMAT, "%s: unexpected extra record after %s", path, desc->name);
    if (rc) {
      protobuf_c_message_free_unpacked(*msg, NULL);
      *msg = NULL;
    }
  }
  pbio_reader_close(r);
  return rc;
}
