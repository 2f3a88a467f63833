/* A shard checked against its index as the stream will find it (al_check.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/struct_abi_internal.h"
#include "common/atomic_file_internal.h"
#include "loader/al_check.h"
#include "loader/index_internal.h"
#include "storage/client_internal.h"
#include "loader/remote_shard_internal.h"
#include "loader/tensor_header_internal.h"

/* First bytes read of a typed member; a longer header is read again at the length it asks. */
#define TYPED_FIRST 256
#define ERR_CAP 1024

struct al_checker {
  const al_index *idx;
  storage_client *client; /* NULL: the index names no URL */
  int skip_typed;
  char note[1024]; /* appended to a failed s3:// open: the endpoint used vs the index's */
};

/* Where a shard's bytes come from: a local file or a remote shard's cache. */
typedef struct shard_bytes {
  int fd;
  remote_shard *rs;
  const char *path;
} shard_bytes;

static int read_exact(const shard_bytes *b, void *buf, size_t n, uint64_t off) {
  if (b->rs) {
    char err[ERR_CAP];
    if (remote_shard_pread(b->rs, off, buf, n, err, sizeof err) != 0)
      return al_set_error(AL_EIO, "%s", err);
    return AL_OK;
  }
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(b->fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return al_set_error(AL_EIO, "%s: read of %zu bytes at byte %" PRIu64 ": %s", b->path, n, off,
                          r < 0 ? strerror(errno) : "the file ends first");
    got += (size_t)r;
  }
  return AL_OK;
}

static int read_at(void *ctx, void *buf, size_t n, uint64_t off, const char *path) {
  (void)path;
  return read_exact(ctx, buf, n, off);
}

int al_checker_open(al_checker **out, const al_index *idx, const al_check_options *opts) {
  if (!out || !idx) return al_set_error(AL_EINVAL, "al_checker_open: NULL argument");
  *out = NULL;
  al_check_options d;
  int rc = struct_in(&d, sizeof d, AL_CHECK_OPTIONS_V1, opts, "al_checker_open",
                     "al_check_options");
  if (rc) return rc;
  const al_check_options *o = &d;
  const al_storage_options *st = &o->storage;
  rc = al_storage_check(st);
  if (rc) return rc;
  al_checker *c = calloc(1, sizeof *c);
  if (!c) return al_set_error(AL_ENOMEM, "al_checker_open: out of memory");
  c->idx = idx;
  c->skip_typed = o->skip_typed_headers;
  int remote = 0;
  for (size_t i = 0; i < idx->n_shards && !remote; i++) remote = idx->shards[i].etag != NULL;
  if (remote) {
    al_storage_options used;
    al_storage_origin from;
    al_storage_resolve(st, idx, &used, &from);
    al_storage_mismatch(&used, &from, idx, c->note, sizeof c->note);
    storage_config cfg;
    if (storage_config_make(used.s3_endpoint, used.s3_region, used.s3_addressing,
                            used.remote_timeout_s, &cfg) != AL_OK ||
        storage_client_open(&cfg, &c->client) != AL_OK) {
      free(c);
      return AL_EINVAL;
    }
  }
  *out = c;
  return AL_OK;
}

void al_checker_close(al_checker *c) {
  if (!c) return;
  storage_client_close(c->client);
  free(c);
}

/* Frees the message and zeroes the fields within the caller's struct_size (kept, so the struct
 * can be passed again); a size out of range is taken as the first version's, which every
 * caller's struct holds. */
void al_shard_check_clear(al_shard_check *r) {
  if (!r) return;
  size_t n = r->struct_size;
  if (n < AL_SHARD_CHECK_V1 || n > sizeof *r) n = AL_SHARD_CHECK_V1;
  free(r->error);
  memset((unsigned char *)r + sizeof r->struct_size, 0, n - sizeof r->struct_size);
}

/* The message of the last error, kept in r->error (NULL when out of memory: callers say so). */
static void keep_error(al_shard_check *r) {
  if (!r->error) r->error = strdup(al_last_error());
  al_clear_error();
}

/* ---- present and unchanged ---------------------------------------------------------------- */

/* A local shard: opened and stat'ed as the stream opens it; its content fingerprint computed
 * when the size is the indexed one. */
static void open_local(const al_index *idx, size_t i, shard_bytes *b, al_shard_check *r) {
  const index_shard_rec *s = &idx->shards[i];
  struct stat st;
  r->open_rc = afile_open_input(s->path, "shard", &b->fd);
  if (!r->open_rc && fstat(b->fd, &st) != 0)
    r->open_rc = al_set_error(AL_EIO, "%s: fstat: %s", s->path, strerror(errno));
  if (r->open_rc) return keep_error(r);
  r->size = (uint64_t)st.st_size;
  r->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  if (r->size != s->size) return;
  r->verify_rc = al_index_shard_verify(idx, i, b->fd);
  if (r->verify_rc && r->verify_rc != AL_ENOTFOUND) keep_error(r);
  al_clear_error();
}

/* A shard at a URL: one HEAD (size and ETag, as the stream pins it); for a plain tar, the
 * header blocks and typed members' first bytes fetched in coalesced GETs; its fingerprint. */
static void open_remote(al_checker *c, size_t i, shard_bytes *b, al_shard_check *r) {
  const index_shard_rec *s = &c->idx->shards[i];
  char err[ERR_CAP];
  if (!c->client) {
    r->open_rc = al_set_error(AL_EINVAL, "%s: no remote client", s->path);
    return keep_error(r);
  }
  if (remote_shard_open(c->client, s->path, &b->rs, err, sizeof err) != 0) {
    r->open_rc = al_set_error(AL_EIO, "%s%s", err, strncmp(s->path, "s3://", 5) ? "" : c->note);
    return keep_error(r);
  }
  r->size = remote_shard_size(b->rs);
  if (r->size != s->size) return;
  if (s->seekable && remote_shard_plan(b->rs, 0, 0, err, sizeof err) != 0) {
    r->verify_rc = al_set_error(AL_EIO, "%s", err);
    return keep_error(r);
  }
  const char *etag = remote_shard_etag(b->rs);
  if (s->etag[0] && strcmp(etag, s->etag) != 0)
    r->verify_rc = al_set_error(AL_EFORMAT,
                                "%s: shard changed since indexing (object changed): ETag is %s, the "
                                "index says %s",
                                s->path, etag, s->etag);
  else
    r->verify_rc = index_shard_fp_check(c->idx, (uint32_t)i, read_at, b); /* through its cache */
  if (r->verify_rc && r->verify_rc != AL_ENOTFOUND) keep_error(r);
  al_clear_error();
}

/* ---- typed members ------------------------------------------------------------------------ */

/* The header of a typed member parsed from its first bytes (read again at the length it asks,
 * a few times at most). */
static int parse_typed(const shard_bytes *b, theader_kind kind, const al_member_info *mi,
                       theader *h) {
  size_t have = mi->size < TYPED_FIRST ? (size_t)mi->size : TYPED_FIRST;
  for (int round = 0;; round++) {
    unsigned char *buf = malloc(have ? have : 1);
    if (!buf) return al_set_error(AL_ENOMEM, "out of memory (%zu-byte header)", have);
    int rc = read_exact(b, buf, have, mi->offset);
    size_t need = 0;
    if (rc == AL_OK) rc = theader_parse(kind, buf, have, mi->size, NULL, h, &need);
    free(buf);
    if (rc != AL_ERANGE) return rc;
    if (round == 4 || need <= have || need > mi->size || need > THEADER_MAX_HEADER_BYTES)
      return al_set_error(AL_EFORMAT, "header needs %zu bytes, the member holds %" PRIu64, need,
                          mi->size);
    have = need;
  }
}

/* Member m of sample `sample`, when typed: its header read and compared. 1 when read, 0 when
 * not typed; a negative al_status for out of memory. */
static int check_member(al_checker *c, const shard_bytes *b, size_t sample, size_t m,
                        al_check_member_fn fn, void *ctx, al_shard_check *r) {
  al_member_type t = AL_MEMBER_TYPE_INIT;
  al_member_info mi;
  al_sample_info si = AL_SAMPLE_INFO_INIT;
  if (al_index_member_type(c->idx, sample, m, &t) != AL_OK ||
      al_index_member(c->idx, sample, m, &mi) != AL_OK ||
      al_index_sample(c->idx, sample, &si) != AL_OK) {
    al_clear_error();
    return 0;
  }
  const index_shard_rec *s = &c->idx->shards[si.shard];
  if (mi.lz4 || !s->seekable) {
    r->typed_skipped++;
    return 0;
  }
  theader h;
  int rc = parse_typed(b, theader_kind_of(mi.ext), &mi, &h);
  if (rc == AL_ENOMEM) return -AL_ENOMEM;
  if (rc == AL_OK) rc = theader_check_recorded(&h, t.dtype, t.ndim, t.shape);
  r->typed_checked++;
  if (rc == AL_OK) return 1;
  rc = al_error_prefix(AL_EFORMAT, "%s: key '%s' member '%s' at byte %" PRIu64, s->path, si.key,
                       mi.ext, mi.offset);
  (void)rc;
  r->typed_bad++;
  if (fn) fn(ctx, sample, m, al_last_error());
  al_clear_error();
  return 1;
}

static int check_sample(al_checker *c, const shard_bytes *b, size_t sample, al_check_member_fn fn,
                        void *ctx, al_shard_check *r) {
  const index_sample_rec *q = &c->idx->samples[sample];
  for (uint32_t m = 0; m < q->n_members; m++) {
    int rc = check_member(c, b, sample, m, fn, ctx, r);
    if (rc < 0) return -rc;
  }
  return AL_OK;
}

/* Every typed member of the shard's samples (its own, wherever the index put them). */
static int check_typed(al_checker *c, size_t i, const shard_bytes *b, al_check_member_fn fn,
                       void *ctx, al_shard_check *r) {
  const index_shard_rec *s = &c->idx->shards[i];
  if (!s->sample_count) return AL_OK;
  size_t lo = s->scattered ? 0 : s->first_sample;
  size_t hi = s->scattered ? c->idx->n_samples : s->last_sample + 1;
  for (size_t k = lo; k < hi; k++) {
    if (c->idx->samples[k].shard != i) continue;
    int rc = check_sample(c, b, k, fn, ctx, r);
    if (rc) return rc;
  }
  return AL_OK;
}

/* al_checker_shard into the library's struct (zeroed first). */
static int checker_shard(al_checker *c, size_t shard, al_check_member_fn fn, void *ctx,
                         al_shard_check *out) {
  if (shard >= c->idx->n_shards)
    return al_set_error(AL_ERANGE, "shard %zu out of range (%zu shards)", shard, c->idx->n_shards);
  const index_shard_rec *s = &c->idx->shards[shard];
  shard_bytes b = {.fd = -1, .rs = NULL, .path = s->path};
  if (s->etag)
    open_remote(c, shard, &b, out);
  else
    open_local(c->idx, shard, &b, out);
  int rc = AL_OK;
  int intact = !out->open_rc && out->size == s->size &&
               (out->verify_rc == AL_OK || out->verify_rc == AL_ENOTFOUND);
  if (intact && !c->skip_typed) rc = check_typed(c, shard, &b, fn, ctx, out);
  if (b.rs) {
    out->requests = remote_shard_stats(b.rs).requests;
    remote_shard_close(b.rs);
  }
  if (b.fd >= 0) close(b.fd);
  return rc;
}

int al_checker_shard(al_checker *c, size_t shard, al_check_member_fn fn, void *ctx,
                     al_shard_check *caller) {
  if (!c || !caller) return al_set_error(AL_EINVAL, "al_checker_shard: NULL argument");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_shard_check), AL_SHARD_CHECK_V1, "al_checker_shard",
                           "al_shard_check", &n);
  if (rc) return rc;
  al_shard_check r = AL_SHARD_CHECK_INIT;
  rc = checker_shard(c, shard, fn, ctx, &r);
  struct_out(caller, &r, n);
  return rc;
}
