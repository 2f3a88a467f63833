/*
 * Index files: IndexHeader, IndexChunk*, IndexSummary through the proto
 * container (proto/pbio_internal.h). Chunks carry shards first, then samples, then
 * rejected entries, each at most CHUNK_* per record, so no record grows with
 * the corpus. The header's created_utc stays empty: the same shards must give
 * a byte-identical index file.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/al_version.h"
#include "common/grow_internal.h"
#include "loader/index_decode_internal.h"
#include "loader/index_internal.h"
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"

#define CHUNK_SHARDS 4096
#define CHUNK_SAMPLES 16384
#define CHUNK_REJECTED 4096
#define CHUNK_WARNINGS 4096
#define PRODUCER "adaptiveload " AL_VERSION_STRING

/* One kind of item (shards, samples, rejected entries, warnings) written as IndexChunk
 * records of at most `per_chunk` items. `msgs` and `ptrs` hold one chunk's
 * messages and the pointers to them; fill() puts items [base, base + n) into
 * the chunk. */
typedef struct chunk_writer {
  const al_index *idx;
  size_t per_chunk, msg_size;
  void *msgs, *ptrs;
  Adaptiveload__Member *mems; /* samples: their members, per chunk */
  void *mptrs;
  size_t mcap;
  uint64_t *shapes; /* samples: their typed members' shapes, per chunk */
  size_t scap;
  const index_entry_list *entries; /* rejected entries or warnings */
  void *(*entry_msg)(const index_entry_rec *r, void *at);
  int (*fill)(struct chunk_writer *cw, Adaptiveload__IndexChunk *c, size_t base, size_t n);
} chunk_writer;

static int save_chunks(chunk_writer *cw, pbio_writer *w, size_t total) {
  cw->msgs = calloc(cw->per_chunk, cw->msg_size);
  cw->ptrs = calloc(cw->per_chunk, sizeof(void *));
  int rc = (!cw->msgs || !cw->ptrs) ? al_set_error(AL_ENOMEM, "out of memory") : AL_OK;
  for (size_t base = 0; !rc && base < total; base += cw->per_chunk) {
    size_t n = total - base < cw->per_chunk ? total - base : cw->per_chunk;
    Adaptiveload__IndexChunk c = ADAPTIVELOAD__INDEX_CHUNK__INIT;
    rc = cw->fill(cw, &c, base, n);
    if (!rc) rc = pbio_write_msg(w, AL_REC_INDEX_CHUNK, &c.base);
  }
  free(cw->msgs);
  free(cw->ptrs);
  free(cw->mems);
  free(cw->mptrs);
  free(cw->shapes);
  return rc;
}

static int fill_shards(chunk_writer *cw, Adaptiveload__IndexChunk *c, size_t base, size_t n) {
  Adaptiveload__Shard *msgs = cw->msgs, **ptrs = cw->ptrs;
  for (size_t i = 0; i < n; i++) {
    const index_shard_rec *s = &cw->idx->shards[base + i];
    Adaptiveload__Shard *m = &msgs[i];
    adaptiveload__shard__init(m);
    m->id = (uint32_t)(base + i);
    m->path = s->path;
    m->size = s->size;
    m->mtime_ns = s->mtime_ns;
    m->sample_count = s->sample_count;
    m->rejected_count = s->rejected_count;
    m->seekable = s->seekable;
    m->compression = (char *)s->compression;
    m->content_fp = s->content_fp;
    if (s->etag && s->etag[0]) m->etag = s->etag;
    ptrs[i] = m;
  }
  c->n_shards = n;
  c->shards = ptrs;
  return AL_OK;
}

static int fill_samples(chunk_writer *cw, Adaptiveload__IndexChunk *c, size_t base, size_t n) {
  const al_index *idx = cw->idx;
  const index_sample_rec *first = &idx->samples[base];
  size_t nm = 0;
  for (size_t i = 0; i < n; i++) nm += first[i].n_members;
  if (nm > cw->mcap) {
    const char *what = "a chunk's members";
    size_t cap;
    int rc = grow_capacity(cw->mcap, nm, sizeof *cw->mems, what, &cap);
    if (!rc) rc = grow_resize((void **)&cw->mems, cap, sizeof *cw->mems, what);
    if (!rc) rc = grow_resize(&cw->mptrs, cap, sizeof(Adaptiveload__Member *), what);
    if (rc) return rc;
    cw->mcap = cap;
  }
  /* Room for every typed member's shape in the chunk. */
  size_t ns = 0;
  uint64_t m_lo = first[0].member0, m_hi = first[n - 1].member0 + first[n - 1].n_members;
  size_t t_lo = index_typed_lower_bound(idx, m_lo), t_hi = index_typed_lower_bound(idx, m_hi);
  for (size_t t = t_lo; t < t_hi; t++) ns += idx->tshapes[idx->typed[t] & AL_TYPED_SHAPES_MAX].ndim;
  if (ns > cw->scap) {
    size_t cap;
    int rc = grow_capacity(cw->scap, ns, sizeof *cw->shapes, "a chunk's shapes", &cap);
    if (!rc) rc = grow_resize((void **)&cw->shapes, cap, sizeof *cw->shapes, "a chunk's shapes");
    if (rc) return rc;
    cw->scap = cap;
  }
  size_t tk = t_lo, sk = 0;
  Adaptiveload__Sample *msgs = cw->msgs, **ptrs = cw->ptrs;
  Adaptiveload__Member **mptrs = cw->mptrs;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const index_sample_rec *s = &first[i];
    Adaptiveload__Sample *m = &msgs[i];
    adaptiveload__sample__init(m);
    m->key = idx->keys + s->key;
    m->shard = s->shard;
    m->width = s->width;
    m->height = s->height;
    m->frames = s->frames;
    m->fps = s->fps;
    m->n_members = s->n_members;
    m->members = mptrs + k;
    for (uint32_t j = 0; j < s->n_members; j++, k++) {
      const index_member_rec *r = &idx->members[s->member0 + j];
      Adaptiveload__Member *mm = &cw->mems[k];
      adaptiveload__member__init(mm);
      mm->ext = (char *)strtab_get(&idx->exts, index_member_ext(r));
      mm->offset = index_member_offset(r);
      mm->size = r->size;
      mm->lz4 = index_member_lz4(r);
      if (tk < t_hi && (idx->typed[tk] >> AL_TYPED_SHAPE_BITS) == s->member0 + j) {
        const index_tshape *ts = &idx->tshapes[idx->typed[tk++] & AL_TYPED_SHAPES_MAX];
        mm->dtype = (char *)theader_dtype_name((theader_dtype)ts->dtype);
        mm->n_shape = ts->ndim;
        mm->shape = cw->shapes + sk;
        memcpy(mm->shape, ts->dims, ts->ndim * sizeof *mm->shape);
        sk += ts->ndim;
        mm->data_offset = ts->data_offset;
      }
      const char *codec = idx->n_media ? index_member_codec(idx, s->member0 + j) : NULL;
      if (codec) mm->codec = (char *)codec;
      mptrs[k] = mm;
    }
    ptrs[i] = m;
  }
  c->n_samples = n;
  c->samples = ptrs;
  return AL_OK;
}

/* One entry as its message: a Rejected or, with the sample's position, a Warning. */
static void *rejected_msg(const index_entry_rec *r, void *at) {
  Adaptiveload__Rejected *m = at;
  adaptiveload__rejected__init(m);
  m->shard = r->shard;
  m->member = r->member;
  m->offset = r->offset;
  m->reason = r->reason;
  m->key = r->key;
  return m;
}

static void *warning_msg(const index_entry_rec *r, void *at) {
  Adaptiveload__Warning *m = at;
  adaptiveload__warning__init(m);
  m->sample = r->sample;
  m->shard = r->shard;
  m->member = r->member;
  m->offset = r->offset;
  m->reason = r->reason;
  m->key = r->key;
  return m;
}

/* Rejected entries and warnings: cw->entries, each through cw->entry_msg. */
static int fill_entries(chunk_writer *cw, Adaptiveload__IndexChunk *c, size_t base, size_t n) {
  void **ptrs = cw->ptrs;
  for (size_t i = 0; i < n; i++)
    ptrs[i] = cw->entry_msg(&cw->entries->v[base + i], (char *)cw->msgs + i * cw->msg_size);
  if (cw->entries == &cw->idx->warnings) {
    c->n_warnings = n;
    c->warnings = (Adaptiveload__Warning **)ptrs;
  } else {
    c->n_rejected = n;
    c->rejected = (Adaptiveload__Rejected **)ptrs;
  }
  return AL_OK;
}

static uint64_t total_bytes(const al_index *idx) {
  uint64_t b = 0;
  for (size_t i = 0; i < idx->n_shards; i++) b += idx->shards[i].size;
  return b;
}

/* AL_S3_ADDRESSING_* as the index file spells them. */
static const char *const ADDRESSING_NAME[4] = {"default", "path", "virtual", "default"};

int al_index_save(const al_index *idx, const char *path) {
  if (!idx || !path) return al_set_error(AL_EINVAL, "al_index_save: NULL argument");
  pbio_writer *w;
  int rc = pbio_writer_open(&w, path, AL_KIND_INDEX);
  if (rc) return rc;
  Adaptiveload__IndexHeader h = ADAPTIVELOAD__INDEX_HEADER__INIT;
  h.producer = PRODUCER;
  h.created_utc = "";
  h.n_field_names = AL_N_FIELDS;
  h.field_names = (char **)idx->fields;
  h.samples_hint = idx->n_samples;
  h.members_hint = idx->n_members;
  h.key_bytes_hint = idx->keys_len;
  if (idx->s3_recorded) { /* "" endpoint: AWS's; a non-empty addressing marks the record */
    h.s3_endpoint = idx->s3_endpoint ? idx->s3_endpoint : "";
    h.s3_region = idx->s3_region ? idx->s3_region : "";
    h.s3_addressing = (char *)ADDRESSING_NAME[idx->s3_addressing & 3];
  }
  rc = pbio_write_msg(w, AL_REC_INDEX_HEADER, &h.base);
  chunk_writer shards = {idx, CHUNK_SHARDS, sizeof(Adaptiveload__Shard), .fill = fill_shards};
  chunk_writer samples = {idx, CHUNK_SAMPLES, sizeof(Adaptiveload__Sample), .fill = fill_samples};
  chunk_writer rejected = {idx,
                           CHUNK_REJECTED,
                           sizeof(Adaptiveload__Rejected),
                           .entries = &idx->rejected,
                           .entry_msg = rejected_msg,
                           .fill = fill_entries};
  chunk_writer warnings = {idx,
                           CHUNK_WARNINGS,
                           sizeof(Adaptiveload__Warning),
                           .entries = &idx->warnings,
                           .entry_msg = warning_msg,
                           .fill = fill_entries};
  if (!rc) rc = save_chunks(&shards, w, idx->n_shards);
  if (!rc) rc = save_chunks(&samples, w, idx->n_samples);
  if (!rc) rc = save_chunks(&rejected, w, idx->rejected.n);
  if (!rc) rc = save_chunks(&warnings, w, idx->warnings.n);
  if (!rc) {
    Adaptiveload__IndexSummary s = ADAPTIVELOAD__INDEX_SUMMARY__INIT;
    s.shards = idx->n_shards;
    s.samples = idx->n_samples;
    s.rejected = idx->rejected.n;
    s.bytes = total_bytes(idx);
    s.fingerprint = al_index_fingerprint(idx);
    s.warnings = idx->warnings.n;
    rc = pbio_write_msg(w, AL_REC_INDEX_SUMMARY, &s.base);
  }
  if (rc) al_error_prefix(rc, "%s", path);
  return pbio_writer_finish(w, rc);
}

/* ------------------------------------------------------------- loading -- */

typedef struct loader {
  al_index *idx;
  const char *path;
  index_member_rec *mem; /* scratch for one sample's members */
  size_t mem_cap;
  uint64_t chunk; /* record number, for messages */
  int saw_samples, saw_rejected, saw_warnings;
  /* Per-shard counts as stored, checked against what the samples say. */
  uint64_t *want_samples, *want_rejected;
  size_t want_cap;
  idec_scratch scratch; /* decoded members of one sample */
  /* The extension last interned at member position j < 4 (samples repeat theirs:
   * json, latent, ...), so most members skip the hash table. */
  struct {
    const char *s; /* the interned copy (stable until the index is freed) */
    size_t len;
    uint32_t id;
  } ext_cache[4];
  int began; /* this record's samples have passed begin_samples */
} loader;

static int load_shards(loader *L, const Adaptiveload__IndexChunk *c) {
  al_index *idx = L->idx;
  if (c->n_shards && (L->saw_samples || L->saw_rejected || L->saw_warnings))
    return al_set_error(AL_EFORMAT, "%s: record %llu: shards after samples", L->path,
                        (unsigned long long)L->chunk);
  for (size_t i = 0; i < c->n_shards; i++) {
    const Adaptiveload__Shard *s = c->shards[i];
    if (s->id != idx->n_shards)
      return al_set_error(AL_EFORMAT, "%s: record %llu: shard id %u out of order (expected %zu)",
                          L->path, (unsigned long long)L->chunk, s->id, idx->n_shards);
    uint32_t id;
    int rc = index_add_shard_full(idx, s->path, s->size, s->mtime_ns, s->seekable, s->compression,
                                  &id);
    if (rc) return rc;
    idx->shards[id].content_fp = s->content_fp;
    if (s->etag && s->etag[0] && !(idx->shards[id].etag = strdup(s->etag)))
      return al_set_error(AL_ENOMEM, "out of memory");
    if (id >= L->want_cap) {
      size_t cap;
      rc = grow_capacity(L->want_cap, (size_t)id + 1, sizeof *L->want_samples, "per-shard counts",
                         &cap);
      if (!rc)
        rc = grow_resize((void **)&L->want_samples, cap, sizeof *L->want_samples,
                         "per-shard counts");
      if (!rc)
        rc = grow_resize((void **)&L->want_rejected, cap, sizeof *L->want_rejected,
                         "per-shard counts");
      if (rc) return rc;
      L->want_cap = cap;
    }
    L->want_samples[id] = s->sample_count;
    L->want_rejected[id] = s->rejected_count;
  }
  return AL_OK;
}

/* The checks that open a chunk of samples (the order of the kinds of records). */
static int begin_samples(loader *L) {
  if (L->saw_rejected || L->saw_warnings)
    return al_set_error(AL_EFORMAT, "%s: record %llu: samples after rejected entries", L->path,
                        (unsigned long long)L->chunk);
  L->saw_samples = 1;
  return AL_OK;
}

/* One sample into the index, from either decoder (protobuf-c's or index_decode.c's). */
static int add_sample(loader *L, const idec_sample *s) {
  al_index *idx = L->idx;
  int kl = s->key_len > INT_MAX ? INT_MAX : (int)s->key_len;
  size_t kept = s->n_members < IDEC_MEMBERS_KEPT ? s->n_members : IDEC_MEMBERS_KEPT;
  int rc = grow_array((void **)&L->mem, &L->mem_cap, kept, sizeof *L->mem, "a sample's members");
  if (rc) return rc;
  for (size_t j = 0; j < kept; j++) {
    const idec_member *m = &s->members[j];
    uint32_t id;
    if (m->offset > AL_OFFSET_MAX)
      return al_set_error(AL_EFORMAT, "%s: sample '%.*s': member offset %llu beyond 2^48", L->path,
                          kl, s->key, (unsigned long long)m->offset);
    if (j < 4 && L->ext_cache[j].s && L->ext_cache[j].len == m->ext_len &&
        memcmp(L->ext_cache[j].s, m->ext, m->ext_len) == 0) {
      id = L->ext_cache[j].id;
    } else {
      rc = strtab_intern(&idx->exts, m->ext, m->ext_len, AL_EXT_MAX, &id);
      if (rc) return al_error_prefix(rc, "%s", L->path);
      if (j < 4) {
        L->ext_cache[j].s = strtab_get(&idx->exts, id);
        L->ext_cache[j].len = m->ext_len;
        L->ext_cache[j].id = id;
      }
    }
    L->mem[j].off_ext = m->offset << 16 | (m->lz4 ? AL_MEMBER_LZ4 : 0) | id;
    L->mem[j].size = m->size;
  }
  rc = index_add_sample_rec(idx, s->key, s->key_len, s->shard, s->width, s->height, s->frames,
                            s->fps, L->mem, s->n_members);
  for (size_t j = 0; j < s->n_members && !rc; j++) {
    const idec_member *m = &s->members[j];
    int el = (int)m->ext_len;
    if (!m->dtype_len) {
      if (m->n_shape || m->data_offset)
        rc = al_set_error(AL_EFORMAT, "sample '%.*s': member '%.*s' has a shape but no dtype", kl,
                          s->key, el, m->ext);
      continue;
    }
    theader th;
    memset(&th, 0, sizeof th);
    if (m->n_shape > THEADER_MAX_DIMS) {
      rc = al_set_error(AL_EFORMAT, "sample '%.*s': member '%.*s' has %zu dimensions (max %d)", kl,
                        s->key, el, m->ext, m->n_shape, THEADER_MAX_DIMS);
      break;
    }
    char dtype[64];
    if (m->dtype_len < sizeof dtype) {
      memcpy(dtype, m->dtype, m->dtype_len);
      dtype[m->dtype_len] = '\0';
      rc = theader_dtype_from_name(dtype, &th.dtype);
    } else { /* no dtype name is that long */
      rc = al_set_error(AL_EFORMAT, "unknown dtype name '%.64s'", m->dtype);
    }
    if (rc) {
      al_error_prefix(rc, "sample '%.*s': member '%.*s'", kl, s->key, el, m->ext);
      break;
    }
    th.ndim = (uint32_t)m->n_shape;
    for (size_t d = 0; d < m->n_shape; d++) th.shape[d] = m->shape[d];
    th.data_offset = m->data_offset;
    rc = index_add_member_type(idx, (uint32_t)j, &th);
  }
  for (size_t j = 0; j < s->n_members && !rc; j++) {
    const idec_member *m = &s->members[j];
    if (!m->codec_len) continue;
    char codec[64];
    if (m->codec_len >= sizeof codec) {
      rc = al_set_error(AL_EFORMAT, "sample '%.*s': member '%.*s': a codec name of %zu bytes", kl,
                        s->key, (int)m->ext_len, m->ext, m->codec_len);
      break;
    }
    memcpy(codec, m->codec, m->codec_len);
    codec[m->codec_len] = '\0';
    rc = index_add_member_codec(idx, (uint32_t)j, codec);
  }
  if (rc)
    return al_error_prefix(rc == AL_EINVAL ? AL_EFORMAT : rc, "%s: record %llu", L->path,
                           (unsigned long long)L->chunk);
  return AL_OK;
}

/* protobuf-c's Sample as the decoder's view of one (C strings: up to their NUL). */
static int load_samples(loader *L, const Adaptiveload__IndexChunk *c) {
  if (!c->n_samples) return AL_OK;
  int rc = begin_samples(L);
  for (size_t i = 0; i < c->n_samples && !rc; i++) {
    const Adaptiveload__Sample *s = c->samples[i];
    idec_sample v;
    memset(&v, 0, sizeof v);
    v.key = s->key;
    v.key_len = strlen(s->key);
    v.shard = s->shard;
    v.width = s->width;
    v.height = s->height;
    v.frames = s->frames;
    v.fps = s->fps;
    v.n_members = s->n_members;
    size_t kept = s->n_members < IDEC_MEMBERS_KEPT ? s->n_members : IDEC_MEMBERS_KEPT;
    rc = grow_array((void **)&L->scratch.mem, &L->scratch.cap, kept, sizeof *L->scratch.mem,
                    "a sample's members");
    for (size_t j = 0; j < kept && !rc; j++) {
      const Adaptiveload__Member *m = s->members[j];
      idec_member *d = &L->scratch.mem[j];
      memset(d, 0, sizeof *d);
      d->ext = m->ext;
      d->ext_len = strlen(m->ext);
      d->offset = m->offset;
      d->size = m->size;
      d->lz4 = m->lz4 != 0;
      d->dtype = m->dtype ? m->dtype : "";
      d->dtype_len = strlen(d->dtype);
      d->n_shape = m->n_shape;
      for (size_t k = 0; k < m->n_shape && k < THEADER_MAX_DIMS; k++) d->shape[k] = m->shape[k];
      d->data_offset = m->data_offset;
      d->codec = m->codec ? m->codec : "";
      d->codec_len = strlen(d->codec);
    }
    v.members = L->scratch.mem;
    if (!rc) rc = add_sample(L, &v);
  }
  return rc;
}

/* A record of samples decoded by hand (loader/index_decode.c); IDEC_OTHER when it holds more
 * than samples (protobuf-c then decodes it). */
static int sample_fn(void *ctx, const idec_sample *s) {
  loader *L = ctx;
  if (!L->began) {
    int rc = begin_samples(L);
    if (rc) return rc;
    L->began = 1;
  }
  return add_sample(L, s);
}

static int load_chunk(loader *L, const Adaptiveload__IndexChunk *c);

static int load_raw_chunk(loader *L, const uint8_t *buf, size_t len, uint64_t record) {
  idec_error err = {0, NULL};
  L->began = 0;
  int rc = idec_index_chunk(buf, len, &L->scratch, sample_fn, L, &err);
  if (rc == IDEC_OTHER) { /* shards, rejected entries or warnings: protobuf-c, as before */
    Adaptiveload__IndexChunk *c = adaptiveload__index_chunk__unpack(NULL, len,
                                                                    (const uint8_t *)buf);
    if (!c)
      return al_set_error(AL_EFORMAT,
                          "%s: record %llu (tag %u): cannot decode %s message of %zu bytes",
                          L->path, (unsigned long long)record, (unsigned)AL_REC_INDEX_CHUNK,
                          adaptiveload__index_chunk__descriptor.name, len);
    rc = load_chunk(L, c);
    adaptiveload__index_chunk__free_unpacked(c, NULL);
    return rc;
  }
  if (rc && err.what) /* the decoder's own finding (a callback's error is already set) */
    return al_set_error(AL_EFORMAT,
                        "%s: record %llu (tag %u): cannot decode %s message of %zu bytes: %s at "
                        "byte %zu",
                        L->path, (unsigned long long)record, (unsigned)AL_REC_INDEX_CHUNK,
                        adaptiveload__index_chunk__descriptor.name, len, err.what, err.offset);
  return rc;
}

static int load_rejected(loader *L, const Adaptiveload__IndexChunk *c) {
  if (c->n_rejected) {
    if (L->saw_warnings)
      return al_set_error(AL_EFORMAT, "%s: record %llu: rejected entries after warnings", L->path,
                          (unsigned long long)L->chunk);
    L->saw_rejected = 1;
  }
  for (size_t i = 0; i < c->n_rejected; i++) {
    const Adaptiveload__Rejected *r = c->rejected[i];
    int rc = al_index_add_rejected(L->idx, r->shard, r->member, r->offset, r->key, r->reason);
    if (rc)
      return al_error_prefix(rc == AL_EINVAL ? AL_EFORMAT : rc, "%s: record %llu", L->path,
                             (unsigned long long)L->chunk);
  }
  return AL_OK;
}

static int load_warnings(loader *L, const Adaptiveload__IndexChunk *c) {
  if (c->n_warnings) L->saw_warnings = 1;
  al_index *idx = L->idx;
  for (size_t i = 0; i < c->n_warnings; i++) {
    const Adaptiveload__Warning *w = c->warnings[i];
    if (w->sample >= idx->n_samples || w->shard >= idx->n_shards ||
        idx->samples[w->sample].shard != w->shard ||
        (idx->warnings.n && idx->warnings.v[idx->warnings.n - 1].sample > w->sample))
      return al_set_error(AL_EFORMAT,
                          "%s: record %llu: warning for sample %llu, shard %u: no such sample or "
                          "out of order",
                          L->path, (unsigned long long)L->chunk, (unsigned long long)w->sample,
                          w->shard);
    int rc = index_add_warning(idx, w->sample, w->shard, w->member, w->offset, w->key, w->reason);
    if (rc) return rc;
  }
  return AL_OK;
}

static int load_chunk(loader *L, const Adaptiveload__IndexChunk *c) {
  int rc = load_shards(L, c);
  if (!rc) rc = load_samples(L, c);
  if (!rc) rc = load_rejected(L, c);
  if (!rc) rc = load_warnings(L, c);
  return rc;
}

static int check_summary(loader *L, const Adaptiveload__IndexSummary *s) {
  al_index *idx = L->idx;
  if (s->warnings != idx->warnings.n)
    return al_set_error(AL_EFORMAT, "%s: summary says %llu warnings; file holds %zu", L->path,
                        (unsigned long long)s->warnings, idx->warnings.n);
  if (s->shards != idx->n_shards || s->samples != idx->n_samples || s->rejected != idx->rejected.n)
    return al_set_error(AL_EFORMAT,
                        "%s: summary says %llu shards, %llu samples, %llu rejected; file holds %zu, %zu, %zu",
                        L->path, (unsigned long long)s->shards, (unsigned long long)s->samples,
                        (unsigned long long)s->rejected, idx->n_shards, idx->n_samples,
                        idx->rejected.n);
  for (size_t i = 0; i < idx->n_shards; i++) {
    if (L->want_samples[i] != idx->shards[i].sample_count ||
        L->want_rejected[i] != idx->shards[i].rejected_count)
      return al_set_error(AL_EFORMAT,
                          "%s: shard %zu '%s' claims %llu samples and %llu rejected; file holds %llu and %llu",
                          L->path, i, idx->shards[i].path, (unsigned long long)L->want_samples[i],
                          (unsigned long long)L->want_rejected[i],
                          (unsigned long long)idx->shards[i].sample_count,
                          (unsigned long long)idx->shards[i].rejected_count);
  }
  if (s->fingerprint != al_index_fingerprint(idx))
    return al_set_error(AL_EFORMAT, "%s: fingerprint mismatch (stored %016llx, computed %016llx)",
                        L->path, (unsigned long long)s->fingerprint,
                        (unsigned long long)al_index_fingerprint(idx));
  return AL_OK;
}

/* ------------------------------------------------------------ prefault -- */

/* Faulting in the index's three big arrays (zeroing ~1 GB for 10M samples; on a virtual
 * machine the largest part of loading) on a helper thread, a bounded distance ahead of where
 * the loader writes, so the loader finds its pages present. MADV_POPULATE_WRITE
 * (Linux 5.14) faults pages in without touching what they hold, so racing the loader's writes
 * is harmless; it stops at the first failure (an older kernel: EINVAL), and keeps at most
 * min(written + PREFAULT_STEP, PREFAULT_AHEAD) bytes ahead of what the loader has written to
 * each array, so a file whose hints lie costs little. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define PREFAULT_AHEAD ((size_t)64 << 20)
#define PREFAULT_STEP ((size_t)4 << 20)

typedef struct prefault {
  pthread_t th;
  int running;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  uint8_t *base[3];
  size_t bytes[3]; /* reserved */
  size_t used[3];  /* written by the loader so far (published per record) */
} prefault;

static void *prefault_main(void *arg) {
  prefault *pf = arg;
  size_t done[3] = {0, 0, 0}, page = (size_t)sysconf(_SC_PAGESIZE);
  pthread_mutex_lock(&pf->mu);
  while (!pf->stop) {
    int worked = 0;
    for (int i = 0; i < 3 && !pf->stop; i++) {
      /* Ahead by as much as is written (at least a step), at most PREFAULT_AHEAD: a file whose
       * hints promise more than it holds gets at most about twice what it filled. */
      size_t ahead = pf->used[i] + PREFAULT_STEP < PREFAULT_AHEAD ? pf->used[i] + PREFAULT_STEP
                                                                  : PREFAULT_AHEAD;
      size_t until = pf->used[i] + ahead;
      if (until > pf->bytes[i]) until = pf->bytes[i];
      if (done[i] >= until) continue;
      size_t n = until - done[i] < PREFAULT_STEP ? until - done[i] : PREFAULT_STEP;
      uint8_t *a = pf->base[i] + done[i];
      uint8_t *from = (uint8_t *)((uintptr_t)a & ~(uintptr_t)(page - 1));
      pthread_mutex_unlock(&pf->mu);
      int bad = madvise(from, (size_t)(a + n - from), MADV_POPULATE_WRITE) != 0;
      pthread_mutex_lock(&pf->mu);
      if (bad) pf->stop = 1;
      done[i] += n;
      worked = 1;
    }
    if (!worked && !pf->stop) pthread_cond_wait(&pf->cv, &pf->mu);
  }
  pthread_mutex_unlock(&pf->mu);
  return NULL;
}

static void prefault_start(prefault *pf, const al_index *idx) {
  memset(pf, 0, sizeof *pf);
  pf->base[0] = (uint8_t *)idx->samples;
  pf->bytes[0] = idx->cap_samples * sizeof *idx->samples;
  pf->base[1] = (uint8_t *)idx->members;
  pf->bytes[1] = idx->cap_members * sizeof *idx->members;
  pf->base[2] = (uint8_t *)idx->keys;
  pf->bytes[2] = idx->keys_cap;
  /* Only arrays big enough to be worth a thread (reserve_block gave them their own mapping). */
  size_t total = 0;
  for (int i = 0; i < 3; i++) {
    if (!pf->base[i] || pf->bytes[i] < ((size_t)32 << 20)) pf->bytes[i] = 0;
    total += pf->bytes[i];
  }
  if (!total) return;
  pthread_mutex_init(&pf->mu, NULL);
  pthread_cond_init(&pf->cv, NULL);
  if (pthread_create(&pf->th, NULL, prefault_main, pf) != 0) {
    pthread_mutex_destroy(&pf->mu);
    pthread_cond_destroy(&pf->cv);
    return;
  }
  pf->running = 1;
}

/* What the loader has written; stops the helper once an array outgrew its reservation. */
static void prefault_progress(prefault *pf, const al_index *idx) {
  if (!pf->running) return;
  pthread_mutex_lock(&pf->mu);
  if ((uint8_t *)idx->samples != pf->base[0] || (uint8_t *)idx->members != pf->base[1] ||
      (uint8_t *)idx->keys != pf->base[2])
    pf->stop = 1;
  pf->used[0] = idx->n_samples * sizeof *idx->samples;
  pf->used[1] = idx->n_members * sizeof *idx->members;
  pf->used[2] = idx->keys_len;
  pthread_cond_signal(&pf->cv);
  pthread_mutex_unlock(&pf->mu);
}

static void prefault_stop(prefault *pf) {
  if (!pf->running) return;
  pthread_mutex_lock(&pf->mu);
  pf->stop = 1;
  pthread_cond_signal(&pf->cv);
  pthread_mutex_unlock(&pf->mu);
  pthread_join(pf->th, NULL);
  pthread_mutex_destroy(&pf->mu);
  pthread_cond_destroy(&pf->cv);
  pf->running = 0;
}

/* The storage the header recorded (an index with s3:// shards), into the index. */
static int load_storage(al_index *idx, const Adaptiveload__IndexHeader *h) {
  if (!h->s3_addressing || !*h->s3_addressing) return AL_OK; /* none recorded */
  al_storage_options s = {.s3_endpoint = *h->s3_endpoint ? h->s3_endpoint : NULL,
                          .s3_region = *h->s3_region ? h->s3_region : NULL};
  for (int k = 0; k < 3; k++)
    if (!strcmp(h->s3_addressing, ADDRESSING_NAME[k])) s.s3_addressing = k;
  return index_record_storage(idx, &s);
}

/* The IndexHeader: the field names, the storage, the arrays reserved from its size hints. */
static int load_header(loader *L, pbio_reader *r) {
  ProtobufCMessage *msg = NULL; /* owned by the reader (arena) */
  int rc = pbio_read_msg(r, AL_REC_INDEX_HEADER, &adaptiveload__index_header__descriptor, &msg);
  if (rc) return rc;
  const Adaptiveload__IndexHeader *h = (const Adaptiveload__IndexHeader *)msg;
  const char *names[AL_N_FIELDS] = {NULL};
  for (size_t i = 0; i < h->n_field_names && i < AL_N_FIELDS; i++) names[i] = h->field_names[i];
  rc = index_set_fields(L->idx, names);
  if (!rc) rc = load_storage(L->idx, h);
  /* One allocation per array instead of growing (a 10M-sample index: ~1 GB written once);
   * the hints are bounded by what the file could decode to (LZ4 expands at most 255x, and
   * a sample or member record takes at least 4 bytes), so a lying file cannot reserve more. */
  struct stat sb;
  if (!rc && stat(L->path, &sb) == 0 && sb.st_size > 0) {
    uint64_t most = (uint64_t)sb.st_size * 255;
    index_reserve(L->idx, h->samples_hint <= most / 4 ? h->samples_hint : 0,
                  h->members_hint <= most / 4 ? h->members_hint : 0,
                  h->key_bytes_hint <= most ? h->key_bytes_hint : 0);
  }
  return rc;
}

/* The records after the header: IndexChunks, then one IndexSummary, then the end. */
static int load_records(loader *L, pbio_reader *r, prefault *pf) {
  int have_summary = 0;
  for (;;) {
    uint32_t tag;
    ProtobufCMessage *msg = NULL;
    const uint8_t *raw = NULL;
    size_t raw_len = 0;
    uint64_t record = 0;
    L->chunk++;
    int rc = pbio_read_next(r, &tag, &msg, &raw, &raw_len, &record);
    if (rc == AL_EOF)
      return have_summary ? AL_OK : al_set_error(AL_EFORMAT, "%s: no IndexSummary record", L->path);
    if (rc) return rc;
    if (have_summary) {
      rc = al_set_error(AL_EFORMAT, "%s: record %llu after the IndexSummary", L->path,
                        (unsigned long long)L->chunk);
    } else if (tag == AL_REC_INDEX_CHUNK) {
      rc = msg ? load_chunk(L, (const Adaptiveload__IndexChunk *)msg)
               : load_raw_chunk(L, raw, raw_len, record);
      prefault_progress(pf, L->idx);
    } else if (tag == AL_REC_INDEX_SUMMARY) {
      have_summary = 1;
      rc = check_summary(L, (const Adaptiveload__IndexSummary *)msg);
    } else {
      rc = al_set_error(AL_EFORMAT, "%s: record %llu has unexpected tag %u in an index file",
                        L->path, (unsigned long long)L->chunk, tag);
    }
    if (rc) return rc;
  }
}

int al_index_load(al_index **out, const char *path) {
  if (!out || !path) return al_set_error(AL_EINVAL, "al_index_load: NULL argument");
  *out = NULL;
  pbio_reader *r;
  int rc = pbio_reader_open(&r, path, AL_KIND_INDEX);
  if (rc) return rc;
  /* LZ4 runs on a second thread, beside the decoding into the index; IndexChunk records come
   * as bytes, decoded by hand (loader/index_decode.c: no protobuf-c messages to allocate and
   * walk), the other records through protobuf-c on a third. */
  pbio_reader_set_raw_tag(r, AL_REC_INDEX_CHUNK);
  if ((rc = pbio_reader_read_ahead(r))) {
    pbio_reader_close(r);
    return rc;
  }
  loader L;
  memset(&L, 0, sizeof L);
  L.path = path;
  rc = al_index_new(&L.idx);
  if (!rc) rc = load_header(&L, r);
  prefault pf;
  memset(&pf, 0, sizeof pf);
  if (!rc) prefault_start(&pf, L.idx);
  if (!rc) rc = load_records(&L, r, &pf);
  prefault_stop(&pf); /* before the arrays are trimmed or freed */
  pbio_reader_close(r);
  free(L.mem);
  idec_scratch_free(&L.scratch);
  free(L.want_samples);
  free(L.want_rejected);
  if (rc) {
    al_index_free(L.idx);
    return rc;
  }
  index_trim(L.idx);
  *out = L.idx;
  return AL_OK;
}
