/*
 * index_internal.h - the in-memory layout of al_index, shared by the files of
 * //loader (index.c, index_io.c, build.c). Not a public header.
 *
 * Memory budget: <= 100 bytes per sample plus key bytes. A sample is one
 * 40-byte record, each member 16 bytes; keys live NUL-terminated in one arena;
 * member extensions are interned (a sample stores a 16-bit id, not a string).
 * Nothing is malloc'd per sample.
 */
#ifndef AL_INDEX_INTERNAL_H
#define AL_INDEX_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/al_index.h"
#include "loader/shard_fp_internal.h"
#include "loader/strtab_internal.h"
#include "loader/tensor_header_internal.h"

#define AL_OFFSET_BITS 48 /* member data offsets < 256 TiB */
#define AL_OFFSET_MAX ((UINT64_C(1) << AL_OFFSET_BITS) - 1)
#define AL_EXT_MAX 0x7FFFu     /* distinct member extensions per index */
#define AL_MEMBER_LZ4 0x8000u  /* off_ext bit: member is an LZ4 frame */
#define AL_MEMBERS_MAX 0xFFFFu /* members per sample */

typedef struct index_sample_rec {
  uint64_t key;     /* byte offset of the key in al_index.keys */
  uint64_t member0; /* first member in al_index.members */
  uint32_t shard;
  uint32_t width;
  uint32_t height;
  uint32_t frames;
  float fps;
  uint32_t n_members;
} index_sample_rec;

/* offset, LZ4 flag and extension share one word: offset << 16 | lz4 << 15 | ext id. */
typedef struct index_member_rec {
  uint64_t off_ext;
  uint64_t size;
} index_member_rec;

typedef struct index_shard_rec {
  char *path;
  const char *compression; /* static string */
  uint64_t size;
  int64_t mtime_ns;
  uint64_t sample_count;
  uint64_t rejected_count;
  int seekable;
  uint64_t content_fp; /* shard_fp.c; 0 = not recorded */
  char *etag;          /* a remote shard's ETag as its server quotes it (malloc'd); NULL: a
                          local file (remote shards always have one, "" when none was sent) */
  size_t first_sample; /* position of its first sample (sample_count > 0) */
  size_t last_sample;  /* position of its last sample */
  int scattered;       /* its samples are not contiguous (hand assembly) */
} index_shard_rec;

/* A rejected entry (a shard, member or sample left out of the index, with the reason) or a
 * warning (a sample indexed with a doubt, listed with its key; the sample is kept): one
 * record type and one list type serve both. */
typedef struct index_entry_rec {
  uint64_t sample; /* warnings: the sample's position (in a scan's one-shard index: its local
                    * position); rejected entries: 0 */
  uint32_t shard;
  uint64_t offset; /* byte offset of the member's header, or of the failure point */
  char *member;    /* "" for shard-level entries */
  char *key;
  char *reason;
} index_entry_rec;

typedef struct index_entry_list {
  index_entry_rec *v;
  size_t n, cap;
} index_entry_list;

#define AL_N_FIELDS 5 /* width, height, frames, fps, duration */

/* Typed members (.npy, .safetensors): a side table, so untyped members cost nothing. Each
 * typed member is one 8-byte word, member index << 24 | shape id, ascending by member index;
 * the (dtype, shape, data offset) tuples are interned, since a corpus has few distinct ones
 * (latents at a few hundred native grids, text embeddings at their lengths). */
#define AL_TYPED_SHAPE_BITS 24
#define AL_TYPED_SHAPES_MAX ((1u << AL_TYPED_SHAPE_BITS) - 1) /* distinct typed shapes */
#define AL_TYPED_MEMBER_MAX ((UINT64_C(1) << 40) - 1)         /* member index of a typed member */

typedef struct index_tshape {
  uint64_t dims[THEADER_MAX_DIMS]; /* 0 past ndim */
  uint64_t data_offset;            /* bytes from the member's first decoded byte to the data */
  uint8_t dtype;                   /* theader_dtype */
  uint8_t ndim;
} index_tshape;

struct al_index {
  index_shard_rec *shards;
  size_t n_shards, cap_shards;
  index_sample_rec *samples;
  size_t n_samples, cap_samples;
  index_member_rec *members;
  size_t n_members, cap_members;
  char *keys;
  size_t keys_len, keys_cap;
  strtab exts; /* interned member extensions; id = position */
  index_entry_list rejected;
  char *fields[AL_N_FIELDS]; /* JSON field names the index was built with */
  /* The storage of its s3:// shards when built (storage.c): s3_recorded 0 = none recorded (no
   * s3:// shard, or an index written before it was); else the endpoint (NULL = AWS's regional
   * one) and region (NULL = the default) malloc'd, and the addressing (AL_S3_ADDRESSING_*). */
  int s3_recorded;
  char *s3_endpoint, *s3_region;
  int s3_addressing;
  uint64_t *typed; /* member index << AL_TYPED_SHAPE_BITS | shape id, ascending */
  size_t n_typed, cap_typed;
  index_tshape *tshapes; /* interned; id = position */
  size_t n_tshapes, cap_tshapes;
  uint32_t *tshape_slots; /* open addressing over tshapes: id + 1, 0 = empty */
  size_t n_tshape_slots;  /* a power of two, or 0 */
  index_entry_list warnings;
  /* Raw media members probed at indexing (scan.c): member index << 16 | codec id (in codecs,
   * libavcodec's names), ascending by member. Not folded into the fingerprint (informational). */
  uint64_t *media;
  size_t n_media, cap_media;
  strtab codecs;
  /* Fingerprint state, updated as shards and samples are added in order. */
  uint64_t fp_shards;
  uint64_t fp_samples;
};

/* Records the codec of member m (its position in the last sample added) of a raw media member
 * probed at indexing; members in increasing order. AL_OK, AL_EINVAL (order, range, an empty or
 * over-long name), AL_ERANGE past 65,535 distinct codecs, AL_ENOMEM. */
int index_add_member_codec(al_index *idx, uint32_t m, const char *codec);
/* The codec recorded for global member `member`, or NULL. */
const char *index_member_codec(const al_index *idx, uint64_t member);

/* Allocates the sample, member and key arrays for this many at once (0: leave that one),
 * as huge-page-friendly blocks: loading then writes each array once, in order. Only a hint:
 * a failed allocation leaves the arrays to grow as usual. */
void index_reserve(al_index *idx, size_t samples, size_t members, size_t key_bytes);

/* Records the storage settings `used` to read the index's s3:// shards (storage.c). AL_OK or
 * AL_ENOMEM. */
int index_record_storage(al_index *idx, const al_storage_options *used);

/* Static name for a compression string ("none", "lz4", ...); unknown names map to "other". */
const char *index_compression_name(const char *name);

/* Full shard record (load and build). Returns the new id in *id. */
int index_add_shard_full(al_index *idx, const char *path, uint64_t size, int64_t mtime_ns,
                         int seekable, const char *compression, uint32_t *id);

/* Appends a sample whose members are given as (ext id, offset, size) records
 * already interned in idx->exts. Bumps the shard's sample_count. */
int index_add_sample_rec(al_index *idx, const char *key, size_t key_len, uint32_t shard,
                         uint32_t width, uint32_t height, uint32_t frames, float fps,
                         const index_member_rec *members, size_t n_members);

/* Records the dtype and shape of member `m` (0-based within the sample) of the last sample
 * added; members of a sample are typed in increasing order, right after index_add_sample_rec.
 * Folds them into the fingerprint. AL_ERANGE past AL_TYPED_SHAPES_MAX distinct shapes or
 * AL_TYPED_MEMBER_MAX members, AL_EINVAL for a bad dtype, ndim or member (message recorded). */
int index_add_member_type(al_index *idx, uint32_t m, const theader *h);

/* The typed entry of global member `member`, or NULL. */
const index_tshape *index_member_tshape(const al_index *idx, uint64_t member);

/* First position in idx->typed whose member index is >= member. */
size_t index_typed_lower_bound(const al_index *idx, uint64_t member);

/* Appends an entry to `l` (strings copied, NULL as ""); `what` names the list in the
 * out-of-memory message. */
int index_entry_add(index_entry_list *l, uint64_t sample, uint32_t shard, const char *member,
                    uint64_t offset, const char *key, const char *reason, const char *what);

/* Frees the entries' strings and forgets them (the array is kept). */
void index_entry_clear(index_entry_list *l);

/* Records a warning about sample `sample` (strings copied). */
int index_add_warning(al_index *idx, uint64_t sample, uint32_t shard, const char *member,
                      uint64_t offset, const char *key, const char *reason);

/* Forgets every sample, member, typed entry and warning (a shard that failed its checksum). */
void index_drop_samples(al_index *idx);

/* Gives back growth slack once an index is complete (build, load). */
void index_trim(al_index *idx);

int index_set_fields(al_index *idx, const char *const names[AL_N_FIELDS]);

/* Default JSON field names, in al_index.fields order. */
extern const char *const index_default_fields[AL_N_FIELDS];

static inline uint64_t index_member_offset(const index_member_rec *m) { return m->off_ext >> 16; }
static inline uint32_t index_member_ext(const index_member_rec *m) {
  return (uint32_t)(m->off_ext & 0x7FFFu);
}
static inline int index_member_lz4(const index_member_rec *m) {
  return (m->off_ext & AL_MEMBER_LZ4) != 0;
}

#endif /* AL_INDEX_INTERNAL_H */
