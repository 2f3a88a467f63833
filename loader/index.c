/* The in-memory index: storage, accessors and hand assembly. Layout in index_internal.h. */
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "common/struct_abi_internal.h"
#include "loader/hash_internal.h"
#include "loader/al_members.h"
#include "loader/index_internal.h"
#include "loader/shard_path_internal.h"
#include "storage/storage_internal.h"

const char *const index_default_fields[AL_N_FIELDS] = {"width", "height", "frames", "fps",
                                                       "duration"};

const char *index_compression_name(const char *name) {
  static const char *const known[] = {"none", "lz4",   "gzip",     "zstd", "bzip2",
                                      "xz",   "lzma",  "compress", "lzip", "lrzip",
                                      "lzop", "grzip", "uu",       "rpm",  "unknown"};
  if (!name || !*name) return "unknown";
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (!strcmp(known[i], name)) return known[i];
  return "other";
}

int al_index_new(al_index **out) {
  if (!out) return al_set_error(AL_EINVAL, "al_index_new: NULL argument");
  *out = NULL;
  al_index *idx = calloc(1, sizeof *idx);
  if (!idx) return al_set_error(AL_ENOMEM, "out of memory");
  if (index_set_fields(idx, index_default_fields)) {
    al_index_free(idx);
    return AL_ENOMEM;
  }
  *out = idx;
  return AL_OK;
}

static void trim(void **arr, size_t *cap, size_t n, size_t elem) {
  if (*cap <= n || n == 0) return;
  void *p = realloc(*arr, n * elem);
  if (p) {
    *arr = p;
    *cap = n;
  }
}

static void reserve_array(void **arr, size_t *cap, size_t n, size_t elem) {
  if (!n || *cap >= n || n > SIZE_MAX / elem) return;
  void *p = grow_big_block(n, elem);
  if (!p) return;
  free(*arr);
  *arr = p;
  *cap = n;
}

void index_reserve(al_index *idx, size_t samples, size_t members, size_t key_bytes) {
  if (idx->n_samples || idx->n_members || idx->keys_len) return; /* fresh indexes only */
  reserve_array((void **)&idx->samples, &idx->cap_samples, samples, sizeof *idx->samples);
  reserve_array((void **)&idx->members, &idx->cap_members, members, sizeof *idx->members);
  reserve_array((void **)&idx->keys, &idx->keys_cap, key_bytes, 1);
}

void index_trim(al_index *idx) {
  trim((void **)&idx->samples, &idx->cap_samples, idx->n_samples, sizeof *idx->samples);
  trim((void **)&idx->members, &idx->cap_members, idx->n_members, sizeof *idx->members);
  trim((void **)&idx->keys, &idx->keys_cap, idx->keys_len, 1);
  trim((void **)&idx->shards, &idx->cap_shards, idx->n_shards, sizeof *idx->shards);
  trim((void **)&idx->rejected.v, &idx->rejected.cap, idx->rejected.n, sizeof *idx->rejected.v);
  trim((void **)&idx->typed, &idx->cap_typed, idx->n_typed, sizeof *idx->typed);
  trim((void **)&idx->media, &idx->cap_media, idx->n_media, sizeof *idx->media);
  trim((void **)&idx->tshapes, &idx->cap_tshapes, idx->n_tshapes, sizeof *idx->tshapes);
  trim((void **)&idx->warnings.v, &idx->warnings.cap, idx->warnings.n, sizeof *idx->warnings.v);
  free(idx->tshape_slots); /* rebuilt if a shape is interned later */
  idx->tshape_slots = NULL;
  idx->n_tshape_slots = 0;
}

int index_set_fields(al_index *idx, const char *const names[AL_N_FIELDS]) {
  for (int i = 0; i < AL_N_FIELDS; i++) {
    char *s = strdup(names[i] ? names[i] : index_default_fields[i]);
    if (!s) return al_set_error(AL_ENOMEM, "out of memory");
    free(idx->fields[i]);
    idx->fields[i] = s;
  }
  return AL_OK;
}

void al_index_free(al_index *idx) {
  if (!idx) return;
  for (size_t i = 0; i < idx->n_shards; i++) {
    free(idx->shards[i].path);
    free(idx->shards[i].etag);
  }
  index_entry_clear(&idx->rejected);
  index_entry_clear(&idx->warnings);
  for (int i = 0; i < AL_N_FIELDS; i++) free(idx->fields[i]);
  free(idx->s3_endpoint);
  free(idx->s3_region);
  free(idx->typed);
  free(idx->media);
  strtab_free(&idx->codecs);
  free(idx->tshapes);
  free(idx->tshape_slots);
  free(idx->warnings.v);
  free(idx->shards);
  free(idx->samples);
  free(idx->members);
  free(idx->keys);
  free(idx->rejected.v);
  strtab_free(&idx->exts);
  free(idx);
}

/* The fingerprint's parts (al_index_fingerprint), shared by an index and an al_index_fp. */
static uint64_t fp_shard(uint64_t state, const char *base, size_t base_len, uint64_t size) {
  return hash_fold(hash_fold(state, hash64(base, base_len, 1)), size);
}

/* Key, shard and shape of one sample; its members are folded in by fp_member. */
static uint64_t fp_sample(const char *key, size_t key_len, uint32_t shard, uint32_t width,
                          uint32_t height, uint32_t frames) {
  uint64_t h = hash64(key, key_len, shard);
  return hash_fold(hash_fold(hash_fold(h, width), height), frames);
}

/* One member: its offset and LZ4 flag (offset << 1 | lz4) and its stored size. */
static uint64_t fp_member(uint64_t h, uint64_t offset_lz4, uint64_t size) {
  return hash_fold(hash_fold(h, offset_lz4), size);
}

static uint64_t fp_value(uint64_t n_shards, uint64_t fp_shards, uint64_t n_samples,
                         uint64_t fp_samples) {
  uint64_t h = hash_fold(UINT64_C(0x41444c4f41444958), n_shards); /* "ADLOADIX" */
  h = hash_fold(h, fp_shards);
  h = hash_fold(h, n_samples);
  return hash_fold(h, fp_samples);
}

int index_add_shard_full(al_index *idx, const char *path, uint64_t size, int64_t mtime_ns,
                         int seekable, const char *compression, uint32_t *id) {
  if (!idx || !path) return al_set_error(AL_EINVAL, "al_index_add_shard: NULL argument");
  int rc = shard_path_check_userinfo(path, NULL);
  if (rc) return rc;
  if (idx->n_shards >= UINT32_MAX)
    return al_set_error(AL_ERANGE, "more than %u shards", UINT32_MAX - 1);
  rc = grow_array((void **)&idx->shards, &idx->cap_shards, idx->n_shards + 1, sizeof *idx->shards,
                  "the index's shards");
  if (rc) return rc;
  char *p = strdup(path);
  if (!p) return al_set_error(AL_ENOMEM, "out of memory");
  index_shard_rec *s = &idx->shards[idx->n_shards];
  memset(s, 0, sizeof *s);
  s->path = p;
  s->size = size;
  s->mtime_ns = mtime_ns;
  s->seekable = seekable != 0;
  s->compression = index_compression_name(compression ? compression
                                                      : (seekable ? "none" : "unknown"));
  /* The file name, not the path nor a URL's query: a corpus mounted elsewhere (another node,
   * a moved folder, a server) or reached through URLs signed again, and indexed again, keeps
   * its fingerprint, so its manifests and resume states stay valid. */
  size_t base_len;
  const char *base = shard_path_name(p, &base_len);
  idx->fp_shards = fp_shard(idx->fp_shards, base, base_len, size);
  if (id) *id = (uint32_t)idx->n_shards;
  idx->n_shards++;
  return AL_OK;
}

int al_index_add_shard(al_index *idx, const char *path, uint64_t size, int seekable, uint32_t *id) {
  return index_add_shard_full(idx, path, size, 0, seekable, NULL, id);
}

int index_add_sample_rec(al_index *idx, const char *key, size_t key_len, uint32_t shard,
                         uint32_t width, uint32_t height, uint32_t frames, float fps,
                         const index_member_rec *members, size_t n_members) {
  if (shard >= idx->n_shards)
    return al_set_error(AL_EINVAL, "sample '%.*s': shard id %u out of range (%zu shards)",
                        (int)key_len, key, shard, idx->n_shards);
  if (n_members > AL_MEMBERS_MAX)
    return al_set_error(AL_ERANGE, "sample '%.*s': %zu members (limit %u)", (int)key_len, key,
                        n_members, AL_MEMBERS_MAX);
  if (key_len > AL_INDEX_KEY_MAX)
    return al_set_error(AL_ERANGE, "sample '%.60s...': key of %zu bytes exceeds the %u-byte limit",
                        key, key_len, AL_INDEX_KEY_MAX);
  int rc = grow_array((void **)&idx->samples, &idx->cap_samples, idx->n_samples + 1,
                      sizeof *idx->samples, "the index's samples");
  if (!rc)
    rc = grow_array((void **)&idx->members, &idx->cap_members, idx->n_members + n_members,
                    sizeof *idx->members, "the index's members");
  if (!rc)
    rc = grow_array((void **)&idx->keys, &idx->keys_cap, idx->keys_len + key_len + 1, 1,
                    "the index's keys");
  if (rc) return rc;
  index_sample_rec *s = &idx->samples[idx->n_samples++];
  s->key = idx->keys_len;
  s->member0 = idx->n_members;
  s->shard = shard;
  s->width = width;
  s->height = height;
  s->frames = frames;
  s->fps = fps;
  s->n_members = (uint32_t)n_members;
  memcpy(idx->keys + idx->keys_len, key, key_len);
  idx->keys[idx->keys_len + key_len] = '\0';
  idx->keys_len += key_len + 1;
  if (n_members) memcpy(idx->members + idx->n_members, members, n_members * sizeof *members);
  idx->n_members += n_members;
  index_shard_rec *sh = &idx->shards[shard];
  if (!sh->sample_count)
    sh->first_sample = idx->n_samples - 1;
  else if (sh->last_sample != idx->n_samples - 2)
    sh->scattered = 1;
  sh->last_sample = idx->n_samples - 1;
  sh->sample_count++;
  /* Key, shape, member offsets, LZ4 flags and sizes: what a plan and a stream depend on.
   * Two corpora whose keys match but whose clips differ must not pass for one another, and
   * an index whose offsets were shifted must not stream foreign bytes under a manifest
   * planned from the real one. (Extension ids are left out: they are numbered per index.) */
  uint64_t h = fp_sample(key, key_len, shard, width, height, frames);
  for (size_t m = 0; m < n_members; m++)
    h = fp_member(h, members[m].off_ext >> 15, members[m].size);
  idx->fp_samples = hash_fold(idx->fp_samples, h);
  return AL_OK;
}

/* ---- typed members ---------------------------------------------------------------------- */

static uint64_t tshape_hash(const index_tshape *t) {
  uint64_t h = hash_fold(hash_fold(UINT64_C(0x7479706564), t->dtype), t->ndim);
  for (uint32_t i = 0; i < t->ndim; i++) h = hash_fold(h, t->dims[i]);
  return hash_fold(h, t->data_offset);
}

static int tshape_eq(const index_tshape *a, const index_tshape *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim || a->data_offset != b->data_offset) return 0;
  for (uint32_t i = 0; i < a->ndim; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

static int tshape_rehash(al_index *idx) {
  size_t n = idx->n_tshape_slots ? idx->n_tshape_slots * 2 : 64;
  while (n < (idx->n_tshapes + 1) * 2) n *= 2;
  uint32_t *slots = calloc(n, sizeof *slots);
  if (!slots) return al_set_error(AL_ENOMEM, "out of memory (typed-shape table)");
  for (size_t id = 0; id < idx->n_tshapes; id++) {
    size_t j = (size_t)tshape_hash(&idx->tshapes[id]) & (n - 1);
    while (slots[j]) j = (j + 1) & (n - 1);
    slots[j] = (uint32_t)id + 1;
  }
  free(idx->tshape_slots);
  idx->tshape_slots = slots;
  idx->n_tshape_slots = n;
  return AL_OK;
}

static int tshape_intern(al_index *idx, const index_tshape *t, uint32_t *id) {
  if ((idx->n_tshapes + 1) * 2 > idx->n_tshape_slots) {
    int rc = tshape_rehash(idx);
    if (rc) return rc;
  }
  size_t mask = idx->n_tshape_slots - 1;
  size_t j = (size_t)tshape_hash(t) & mask;
  for (; idx->tshape_slots[j]; j = (j + 1) & mask) {
    uint32_t k = idx->tshape_slots[j] - 1;
    if (tshape_eq(&idx->tshapes[k], t)) {
      *id = k;
      return AL_OK;
    }
  }
  if (idx->n_tshapes >= AL_TYPED_SHAPES_MAX)
    return al_set_error(AL_ERANGE, "more than %u distinct typed-member shapes in one index",
                        AL_TYPED_SHAPES_MAX);
  int rc = grow_array((void **)&idx->tshapes, &idx->cap_tshapes, idx->n_tshapes + 1,
                      sizeof *idx->tshapes, "the index's typed shapes");
  if (rc) return rc;
  idx->tshapes[idx->n_tshapes] = *t;
  idx->tshape_slots[j] = (uint32_t)idx->n_tshapes + 1;
  *id = (uint32_t)idx->n_tshapes++;
  return AL_OK;
}

int index_add_member_type(al_index *idx, uint32_t m, const theader *h) {
  if (!idx->n_samples) return al_set_error(AL_EINVAL, "typed member without a sample");
  const index_sample_rec *s = &idx->samples[idx->n_samples - 1];
  const char *key = idx->keys + s->key;
  if (m >= s->n_members)
    return al_set_error(AL_EINVAL, "sample '%s': typed member %u out of range (%u members)", key, m,
                        s->n_members);
  if (h->dtype <= THEADER_NONE || h->dtype >= THEADER_DTYPE_COUNT || h->ndim > THEADER_MAX_DIMS)
    return al_set_error(AL_EINVAL, "sample '%s': member %u: bad dtype %d or ndim %u", key, m,
                        (int)h->dtype, h->ndim);
  uint64_t bytes = theader_dtype_size(h->dtype);
  int zero = 0;
  for (uint32_t i = 0; i < h->ndim; i++) zero |= h->shape[i] == 0;
  for (uint32_t i = 0; i < h->ndim && !zero; i++) {
    if (bytes > UINT64_MAX / h->shape[i])
      return al_set_error(AL_EINVAL, "sample '%s': member %u: shape product overflows 64 bits", key,
                          m);
    bytes *= h->shape[i];
  }
  if (h->data_offset > UINT64_MAX - bytes)
    return al_set_error(AL_EINVAL, "sample '%s': member %u: data offset overflows 64 bits", key, m);
  uint64_t member = s->member0 + m;
  if (member > AL_TYPED_MEMBER_MAX)
    return al_set_error(AL_ERANGE, "sample '%s': typed member index %llu beyond 2^40", key,
                        (unsigned long long)member);
  if (idx->n_typed && (idx->typed[idx->n_typed - 1] >> AL_TYPED_SHAPE_BITS) >= member)
    return al_set_error(AL_EINVAL, "sample '%s': typed member %u out of order", key, m);
  index_tshape t;
  memset(&t, 0, sizeof t);
  t.dtype = (uint8_t)h->dtype;
  t.ndim = (uint8_t)h->ndim;
  for (uint32_t i = 0; i < h->ndim; i++) t.dims[i] = h->shape[i];
  t.data_offset = h->data_offset;
  uint32_t id = 0;
  int rc = tshape_intern(idx, &t, &id);
  if (!rc)
    rc = grow_array((void **)&idx->typed, &idx->cap_typed, idx->n_typed + 1, sizeof *idx->typed,
                    "the index's typed members");
  if (rc) return rc;
  idx->typed[idx->n_typed++] = member << AL_TYPED_SHAPE_BITS | id;
  /* The member's position in its sample (not its global index: a shard's scan and the
   * merged index number members differently), dtype, shape and data offset. */
  idx->fp_samples = hash_fold(hash_fold(idx->fp_samples, m), tshape_hash(&t));
  return AL_OK;
}

size_t index_typed_lower_bound(const al_index *idx, uint64_t member) {
  size_t lo = 0, hi = idx->n_typed;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((idx->typed[mid] >> AL_TYPED_SHAPE_BITS) < member)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

const index_tshape *index_member_tshape(const al_index *idx, uint64_t member) {
  size_t k = index_typed_lower_bound(idx, member);
  if (k == idx->n_typed || (idx->typed[k] >> AL_TYPED_SHAPE_BITS) != member) return NULL;
  return &idx->tshapes[idx->typed[k] & AL_TYPED_SHAPES_MAX];
}

int index_entry_add(index_entry_list *l, uint64_t sample, uint32_t shard, const char *member,
                    uint64_t offset, const char *key, const char *reason, const char *what) {
  int rc = grow_array((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v, what);
  if (rc) return rc;
  index_entry_rec *e = &l->v[l->n];
  e->sample = sample;
  e->shard = shard;
  e->offset = offset;
  e->member = strdup(member ? member : "");
  e->key = strdup(key ? key : "");
  e->reason = strdup(reason ? reason : "");
  if (!e->member || !e->key || !e->reason) {
    free(e->member);
    free(e->key);
    free(e->reason);
    return al_set_error(AL_ENOMEM, "out of memory");
  }
  l->n++;
  return AL_OK;
}

void index_entry_clear(index_entry_list *l) {
  for (size_t i = 0; i < l->n; i++) {
    free(l->v[i].member);
    free(l->v[i].key);
    free(l->v[i].reason);
  }
  l->n = 0;
}

int index_add_warning(al_index *idx, uint64_t sample, uint32_t shard, const char *member,
                      uint64_t offset, const char *key, const char *reason) {
  return index_entry_add(&idx->warnings, sample, shard, member, offset, key, reason,
                         "the index's warnings");
}

void index_drop_samples(al_index *idx) {
  index_entry_clear(&idx->warnings);
  idx->n_samples = 0;
  idx->n_members = 0;
  idx->n_typed = 0;
  idx->n_media = 0;
  idx->keys_len = 0;
  for (size_t i = 0; i < idx->n_shards; i++) idx->shards[i].sample_count = 0;
}

int al_index_add_sample(al_index *idx, const char *key, uint32_t shard, uint32_t width,
                        uint32_t height, uint32_t frames, float fps, const al_member_info *members,
                        size_t n_members) {
  if (!idx || !key || (n_members && !members))
    return al_set_error(AL_EINVAL, "al_index_add_sample: NULL argument");
  index_member_rec small[8];
  index_member_rec *recs = n_members <= 8 ? small : malloc(n_members * sizeof *recs);
  if (!recs) return al_set_error(AL_ENOMEM, "out of memory");
  int rc = AL_OK;
  for (size_t i = 0; i < n_members && !rc; i++) {
    const al_member_info *m = &members[i];
    if (!m->ext) {
      rc = al_set_error(AL_EINVAL, "sample '%s': member %zu has no extension", key, i);
    } else if (m->offset > AL_OFFSET_MAX) {
      rc = al_set_error(AL_ERANGE, "sample '%s': member '%s' offset %llu beyond 2^48", key, m->ext,
                        (unsigned long long)m->offset);
    } else {
      uint32_t id;
      rc = strtab_intern(&idx->exts, m->ext, strlen(m->ext), AL_EXT_MAX, &id);
      recs[i].off_ext = m->offset << 16 | (m->lz4 ? AL_MEMBER_LZ4 : 0) | id;
      recs[i].size = m->size;
    }
  }
  if (!rc)
    rc = index_add_sample_rec(idx, key, strlen(key), shard, width, height, frames, fps, recs,
                              n_members);
  if (recs != small) free(recs);
  return rc;
}

int al_index_add_rejected(al_index *idx, uint32_t shard, const char *member, uint64_t offset,
                          const char *key, const char *reason) {
  if (!idx) return al_set_error(AL_EINVAL, "al_index_add_rejected: NULL argument");
  if (shard >= idx->n_shards)
    return al_set_error(AL_EINVAL, "rejected entry: shard id %u out of range (%zu shards)", shard,
                        idx->n_shards);
  int rc = index_entry_add(&idx->rejected, 0, shard, member, offset, key, reason,
                           "the index's rejected entries");
  if (rc) return rc;
  idx->shards[shard].rejected_count++;
  return AL_OK;
}

size_t al_index_shard_count(const al_index *idx) { return idx ? idx->n_shards : 0; }
size_t al_index_sample_count(const al_index *idx) { return idx ? idx->n_samples : 0; }
size_t al_index_rejected_count(const al_index *idx) { return idx ? idx->rejected.n : 0; }

uint64_t al_index_fingerprint(const al_index *idx) {
  if (!idx) return 0;
  return fp_value(idx->n_shards, idx->fp_shards, idx->n_samples, idx->fp_samples);
}

void al_index_fp_add_shard(al_index_fp *f, const char *path, uint64_t size) {
  size_t base_len;
  const char *base = shard_path_name(path, &base_len);
  f->fp_shards = fp_shard(f->fp_shards, base, base_len, size);
  f->n_shards++;
}

int al_index_fp_add_sample(al_index_fp *f, const char *key, uint32_t shard, uint32_t width,
                           uint32_t height, uint32_t frames, const al_member_info *members,
                           size_t n_members) {
  if (!f || !key || (n_members && !members))
    return al_set_error(AL_EINVAL, "al_index_fp_add_sample: NULL argument");
  if (shard >= f->n_shards)
    return al_set_error(AL_EINVAL, "sample '%s': shard id %u out of range (%llu shards)", key,
                        shard, (unsigned long long)f->n_shards);
  uint64_t h = fp_sample(key, strlen(key), shard, width, height, frames);
  for (size_t m = 0; m < n_members; m++)
    h = fp_member(h, members[m].offset << 1 | (members[m].lz4 != 0), members[m].size);
  f->fp_samples = hash_fold(f->fp_samples, h);
  f->n_samples++;
  return AL_OK;
}

uint64_t al_index_fp_value(const al_index_fp *f) {
  return f ? fp_value(f->n_shards, f->fp_shards, f->n_samples, f->fp_samples) : 0;
}

int al_index_shard(const al_index *idx, size_t i, al_shard_info *caller) {
  if (!idx || !caller) return al_set_error(AL_EINVAL, "al_index_shard: NULL argument");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_shard_info), AL_SHARD_INFO_V1, "al_index_shard",
                           "al_shard_info", &n);
  if (rc) return rc;
  if (i >= idx->n_shards)
    return al_set_error(AL_ERANGE, "shard %zu out of range (%zu shards)", i, idx->n_shards);
  const index_shard_rec *s = &idx->shards[i];
  al_shard_info info = AL_SHARD_INFO_INIT, *out = &info;
  out->path = s->path;
  out->size = s->size;
  out->mtime_ns = s->mtime_ns;
  out->sample_count = s->sample_count;
  out->rejected_count = s->rejected_count;
  out->seekable = s->seekable;
  out->compression = s->compression;
  out->content_fp = s->content_fp;
  out->remote = storage_url_kind(s->path);
  out->etag = s->etag ? s->etag : "";
  struct_out(caller, out, n);
  return AL_OK;
}

int al_index_sample(const al_index *idx, size_t i, al_sample_info *caller) {
  if (!idx || !caller) return al_set_error(AL_EINVAL, "al_index_sample: NULL argument");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_sample_info), AL_SAMPLE_INFO_V1, "al_index_sample",
                           "al_sample_info", &n);
  if (rc) return rc;
  if (i >= idx->n_samples)
    return al_set_error(AL_ERANGE, "sample %zu out of range (%zu samples)", i, idx->n_samples);
  const index_sample_rec *s = &idx->samples[i];
  al_sample_info info = AL_SAMPLE_INFO_INIT, *out = &info;
  out->key = idx->keys + s->key;
  out->shard = s->shard;
  out->width = s->width;
  out->height = s->height;
  out->frames = s->frames;
  out->fps = s->fps;
  out->n_members = s->n_members;
  struct_out(caller, out, n);
  return AL_OK;
}

static void member_info(const al_index *idx, const index_member_rec *m, al_member_info *out) {
  out->ext = strtab_get(&idx->exts, index_member_ext(m));
  out->offset = index_member_offset(m);
  out->size = m->size;
  out->lz4 = index_member_lz4(m);
}

int al_index_member(const al_index *idx, size_t sample, size_t m, al_member_info *out) {
  if (!idx || !out) return al_set_error(AL_EINVAL, "al_index_member: NULL argument");
  if (sample >= idx->n_samples)
    return al_set_error(AL_ERANGE, "sample %zu out of range (%zu samples)", sample, idx->n_samples);
  const index_sample_rec *s = &idx->samples[sample];
  if (m >= s->n_members)
    return al_set_error(AL_ERANGE, "sample %zu '%s': member %zu out of range (%u members)", sample,
                        idx->keys + s->key, m, s->n_members);
  member_info(idx, &idx->members[s->member0 + m], out);
  return AL_OK;
}

int al_index_find_member(const al_index *idx, size_t sample, const char *ext, al_member_info *out) {
  if (!idx || !ext || !out) return al_set_error(AL_EINVAL, "al_index_find_member: NULL argument");
  if (sample >= idx->n_samples)
    return al_set_error(AL_ERANGE, "sample %zu out of range (%zu samples)", sample, idx->n_samples);
  const index_sample_rec *s = &idx->samples[sample];
  size_t n = strlen(ext);
  int64_t exact = strtab_find(&idx->exts, ext, n);
  int64_t packed = -1; /* "<ext>.lz4": same content, stored as an LZ4 frame */
  char buf[256];
  if (n + 5 <= sizeof buf) {
    memcpy(buf, ext, n);
    memcpy(buf + n, ".lz4", 5);
    packed = strtab_find(&idx->exts, buf, n + 4);
  }
  const index_member_rec *hit = NULL;
  for (uint32_t i = 0; i < s->n_members; i++) {
    const index_member_rec *m = &idx->members[s->member0 + i];
    int64_t id = index_member_ext(m);
    if (id == exact) {
      hit = m;
      break;
    }
    if (id == packed && !hit) hit = m;
  }
  if (!hit)
    return al_set_error(AL_ENOTFOUND, "sample %zu '%s' has no '%s' member", sample,
                        idx->keys + s->key, ext);
  member_info(idx, hit, out);
  return AL_OK;
}

/* Entry i of the rejected list (warnings 0) or of the warnings (1), for the two accessors. */
static int entry_get(const al_index *idx, int warnings, size_t i, al_rejected_info *caller) {
  static const char *const fn[2] = {"al_index_rejected", "al_index_warning"};
  static const char *const item[2] = {"rejected entry", "warning"};
  static const char *const items[2] = {"entries", "warnings"};
  if (!idx || !caller) return al_set_error(AL_EINVAL, "%s: NULL argument", fn[warnings]);
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_rejected_info), AL_REJECTED_INFO_V1, fn[warnings],
                           "al_rejected_info", &n);
  if (rc) return rc;
  al_rejected_info info = AL_REJECTED_INFO_INIT, *out = &info;
  const index_entry_list *l = warnings ? &idx->warnings : &idx->rejected;
  if (i >= l->n)
    return al_set_error(AL_ERANGE, "%s %zu out of range (%zu %s)", item[warnings], i, l->n,
                        items[warnings]);
  const index_entry_rec *r = &l->v[i];
  out->shard = r->shard;
  out->member = r->member;
  out->offset = r->offset;
  out->key = r->key;
  out->reason = r->reason;
  struct_out(caller, out, n);
  return AL_OK;
}

int al_index_rejected(const al_index *idx, size_t i, al_rejected_info *out) {
  return entry_get(idx, 0, i, out);
}

/* al_index_member_type into the library's struct (zeroed first, also on failure). */
static int member_type(const al_index *idx, size_t sample, size_t m, al_member_type *out) {
  if (sample >= idx->n_samples)
    return al_set_error(AL_ERANGE, "sample %zu out of range (%zu samples)", sample, idx->n_samples);
  const index_sample_rec *s = &idx->samples[sample];
  if (m >= s->n_members)
    return al_set_error(AL_ERANGE, "sample %zu '%s': member %zu out of range (%u members)", sample,
                        idx->keys + s->key, m, s->n_members);
  const index_tshape *t = index_member_tshape(idx, s->member0 + m);
  if (!t) return AL_ENOTFOUND;
  out->dtype = theader_dtype_name((theader_dtype)t->dtype);
  out->elem_size = theader_dtype_size((theader_dtype)t->dtype);
  out->ndim = t->ndim;
  uint64_t bytes = out->elem_size;
  for (uint32_t i = 0; i < t->ndim; i++) {
    out->shape[i] = t->dims[i];
    bytes *= t->dims[i]; /* no overflow: checked by index_add_member_type */
  }
  out->data_offset = t->data_offset;
  out->data_bytes = bytes;
  return AL_OK;
}

int al_index_member_type(const al_index *idx, size_t sample, size_t m, al_member_type *caller) {
  if (!idx || !caller) return al_set_error(AL_EINVAL, "al_index_member_type: NULL argument");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_member_type), AL_MEMBER_TYPE_V1,
                           "al_index_member_type", "al_member_type", &n);
  if (rc) return rc;
  al_member_type info = AL_MEMBER_TYPE_INIT;
  rc = member_type(idx, sample, m, &info);
  struct_out(caller, &info, n);
  return rc;
}

int index_add_member_codec(al_index *idx, uint32_t m, const char *codec) {
  if (!idx->n_samples) return al_set_error(AL_EINVAL, "a member codec without a sample");
  const index_sample_rec *s = &idx->samples[idx->n_samples - 1];
  const char *key = idx->keys + s->key;
  size_t len = codec ? strlen(codec) : 0;
  if (m >= s->n_members)
    return al_set_error(AL_EINVAL, "sample '%s': codec of member %u out of range (%u members)", key,
                        m, s->n_members);
  if (len == 0 || len > 63)
    return al_set_error(AL_EINVAL, "sample '%s': member %u: a codec name of %zu bytes", key, m,
                        len);
  uint64_t member = s->member0 + m;
  if (idx->n_media && (idx->media[idx->n_media - 1] >> 16) >= member)
    return al_set_error(AL_EINVAL, "sample '%s': codec of member %u out of order", key, m);
  uint32_t id;
  int rc = strtab_intern(&idx->codecs, codec, len, 0xFFFF, &id);
  if (rc) return rc;
  rc = grow_array((void **)&idx->media, &idx->cap_media, idx->n_media + 1, sizeof *idx->media,
                  "the index's media members");
  if (rc) return rc;
  idx->media[idx->n_media++] = member << 16 | id;
  return AL_OK;
}

const char *index_member_codec(const al_index *idx, uint64_t member) {
  size_t lo = 0, hi = idx->n_media;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if ((idx->media[mid] >> 16) < member)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == idx->n_media || (idx->media[lo] >> 16) != member) return NULL;
  return strtab_get(&idx->codecs, (uint32_t)(idx->media[lo] & 0xFFFF));
}

const char *al_index_member_codec(const al_index *idx, size_t sample, size_t m) {
  if (!idx || sample >= idx->n_samples || m >= idx->samples[sample].n_members) return "";
  const char *c = index_member_codec(idx, idx->samples[sample].member0 + m);
  return c ? c : "";
}

int al_index_latent_grid(const al_index *idx, size_t sample, uint32_t *t, uint32_t *h, uint32_t *w,
                         size_t *member) {
  if (!idx || !t || !h || !w) return al_set_error(AL_EINVAL, "al_index_latent_grid: NULL argument");
  if (sample >= idx->n_samples)
    return al_set_error(AL_ERANGE, "sample %zu out of range (%zu samples)", sample, idx->n_samples);
  const index_sample_rec *s = &idx->samples[sample];
  for (size_t k = index_typed_lower_bound(idx, s->member0); k < idx->n_typed; k++) {
    uint64_t mi = idx->typed[k] >> AL_TYPED_SHAPE_BITS;
    if (mi >= s->member0 + s->n_members) break;
    const char *ext = strtab_get(&idx->exts, index_member_ext(&idx->members[mi]));
    if (!al_member_is_latent(ext)) continue;
    const index_tshape *ts = &idx->tshapes[idx->typed[k] & AL_TYPED_SHAPES_MAX];
    uint64_t gt, gh, gw;
    if (ts->ndim == 4) {
      gt = ts->dims[1], gh = ts->dims[2], gw = ts->dims[3];
    } else if (ts->ndim == 3) {
      gt = 1, gh = ts->dims[1], gw = ts->dims[2];
    } else {
      return AL_ENOTFOUND;
    }
    if (!gt || !gh || !gw || gt > UINT32_MAX || gh > UINT32_MAX || gw > UINT32_MAX)
      return AL_ENOTFOUND; /* never from a build (the scan rejects such grids) */
    *t = (uint32_t)gt, *h = (uint32_t)gh, *w = (uint32_t)gw;
    if (member) *member = (size_t)(mi - s->member0);
    return AL_OK;
  }
  return AL_ENOTFOUND;
}

size_t al_index_warning_count(const al_index *idx) { return idx ? idx->warnings.n : 0; }

int al_index_warning(const al_index *idx, size_t i, al_rejected_info *out) {
  return entry_get(idx, 1, i, out);
}

/* Bytes an entry list holds: its records and their strings. */
static size_t entry_list_bytes(const index_entry_list *l) {
  size_t r = l->cap * sizeof *l->v;
  for (size_t i = 0; i < l->n; i++)
    r += strlen(l->v[i].member) + strlen(l->v[i].key) + strlen(l->v[i].reason) + 3;
  return r;
}

size_t al_index_memory(const al_index *idx, size_t *records, size_t *keys) {
  size_t r = 0, k = 0;
  if (idx) {
    r = sizeof *idx + idx->cap_shards * sizeof *idx->shards +
        idx->cap_samples * sizeof *idx->samples + idx->cap_members * sizeof *idx->members +
        entry_list_bytes(&idx->rejected) + idx->exts.cap * sizeof(char *) +
        idx->exts.n_slots * sizeof(uint32_t);
    for (size_t i = 0; i < idx->n_shards; i++) r += strlen(idx->shards[i].path) + 1;
    for (uint32_t i = 0; i < idx->exts.n; i++) r += strlen(idx->exts.strs[i]) + 1;
    r += idx->cap_typed * sizeof *idx->typed + idx->cap_tshapes * sizeof *idx->tshapes +
         idx->n_tshape_slots * sizeof *idx->tshape_slots + entry_list_bytes(&idx->warnings) +
         idx->cap_media * sizeof *idx->media;
    k = idx->keys_cap;
  }
  if (records) *records = r;
  if (keys) *keys = k;
  return r + k;
}
