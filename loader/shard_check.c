/* A shard checked against its index as the stream will find it (al_check.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "loader/al_check.h"
#include "loader/index_internal.h"
#include "loader/shard_bytes_internal.h"
#include "loader/tensor_header_internal.h"
#include "storage/storage_internal.h"

/* First bytes read of a typed member; a longer header is read again at the length it asks. */
#define TYPED_FIRST 256

struct al_checker {
  const al_index *idx;
  storage_client *client; /* NULL: the index names no URL */
  int skip_typed;
  char note[1024]; /* appended to a failed s3:// open: the endpoint used vs the index's */
};

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
  for (size_t i = 0; i < idx->n_shards && !remote; i++)
    remote = storage_ops_for(idx->shards[i].path)->remote;
  if (remote) {
    al_storage_options used;
    al_storage_origin from = AL_STORAGE_ORIGIN_INIT;
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

/* Shard i opened as the stream opens it (a file as inputs are; a URL by one HEAD, which pins
 * its size and ETag); when its size is the indexed one, a plain tar at a URL has its header
 * blocks and typed members' first bytes fetched in coalesced GETs, then its ETag (where the
 * index and the server have one) and its content fingerprint are compared. */
static void open_shard(al_checker *c, size_t i, shard_bytes **b, al_shard_check *r) {
  const index_shard_rec *s = &c->idx->shards[i];
  r->open_rc = shard_bytes_open(c->client, s->path, b);
  if (r->open_rc) {
    if (storage_url_kind(s->path) == STORAGE_S3 && c->note[0]) {
      char msg[2048];
      snprintf(msg, sizeof msg, "%s", al_last_error());
      al_set_error(r->open_rc, "%s%s", msg, c->note);
    }
    return keep_error(r);
  }
  const storage_stat *st = shard_bytes_stat(*b);
  r->size = st->size;
  r->mtime_ns = st->mtime_ns;
  if (r->size != s->size) return;
  if (s->seekable && (r->verify_rc = shard_bytes_plan(*b, 0, 0)) != AL_OK) return keep_error(r);
  if (s->etag && s->etag[0] && st->etag && strcmp(st->etag, s->etag) != 0)
    r->verify_rc = al_set_error(AL_EFORMAT,
                                "%s: shard changed since indexing (object changed): ETag is %s, the "
                                "index says %s",
                                s->path, st->etag, s->etag);
  else
    r->verify_rc = index_shard_fp_check(c->idx, (uint32_t)i, shard_bytes_read_at, *b);
  if (r->verify_rc && r->verify_rc != AL_ENOTFOUND) keep_error(r);
  al_clear_error();
}

/* ---- typed members ------------------------------------------------------------------------ */

/* The header of a typed member parsed from its first bytes (read again at the length it asks,
 * a few times at most). */
static int parse_typed(shard_bytes *b, theader_kind kind, const al_member_info *mi, theader *h) {
  size_t have = mi->size < TYPED_FIRST ? (size_t)mi->size : TYPED_FIRST;
  for (int round = 0;; round++) {
    unsigned char *buf = malloc(have ? have : 1);
    if (!buf) return al_set_error(AL_ENOMEM, "out of memory (%zu-byte header)", have);
    int rc = shard_bytes_pread(b, mi->offset, buf, have);
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
static int check_member(al_checker *c, shard_bytes *b, size_t sample, size_t m,
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

static int check_sample(al_checker *c, shard_bytes *b, size_t sample, al_check_member_fn fn,
                        void *ctx, al_shard_check *r) {
  const index_sample_rec *q = &c->idx->samples[sample];
  for (uint32_t m = 0; m < q->n_members; m++) {
    int rc = check_member(c, b, sample, m, fn, ctx, r);
    if (rc < 0) return -rc;
  }
  return AL_OK;
}

/* Every typed member of the shard's samples (its own, wherever the index put them). */
static int check_typed(al_checker *c, size_t i, shard_bytes *b, al_check_member_fn fn, void *ctx,
                       al_shard_check *r) {
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
  shard_bytes *b = NULL;
  open_shard(c, shard, &b, out);
  int rc = AL_OK;
  int intact = !out->open_rc && out->size == s->size &&
               (out->verify_rc == AL_OK || out->verify_rc == AL_ENOTFOUND);
  if (intact && !c->skip_typed) rc = check_typed(c, shard, b, fn, ctx, out);
  if (b) {
    out->requests = shard_bytes_counts(b).requests;
    shard_bytes_close(b);
  }
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
