/*
 * al_index.h - the sample index: what every WebDataset shard holds.
 *
 * An al_index lists shards, samples (key, shard, members with data offsets and
 * sizes, metadata) and rejected samples (shard, member, byte offset, reason).
 * It is built from tar shards (al_index_build), loaded from an index file
 * (al_index_load), or assembled by hand (al_index_new + al_index_add_*), which
 * planner benchmarks use to make 10M-sample indexes without writing shards.
 *
 * Ownership: the caller owns the al_index and frees it with al_index_free().
 * Strings and structs returned by accessors point into the index and stay
 * valid until it is freed.
 *
 * Thread safety: building is internally parallel. A finished index is
 * immutable: any number of threads may call the const accessors at once.
 * al_index_add_* must not run concurrently with anything else on that index.
 *
 * Errors: functions return an al_status (common/al_status.h) and set
 * al_last_error(). Bad input inside shards is not an error of the build: it is
 * recorded as a rejected entry and the build goes on (see al_index_options.strict).
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_index_options, al_shard_info,
 * al_sample_info, al_member_type, al_rejected_info, al_index_stats and al_storage_origin start
 * with `size_t struct_size`, the caller's sizeof, set in one line with the struct's AL_*_INIT
 * macro. The library reads and writes only the bytes that fit in it (fields past it read as zero,
 * are not written), so a caller built against an older header keeps working. A struct the library
 * fills must carry its size; an options struct it reads takes 0 as this header's struct (so `= {0}`
 * keeps working). A size below the struct's AL_*_V1 (its first sized version) or above the
 * library's is AL_EINVAL naming the function, the struct and both sizes. Fixed layouts that never
 * grow, with no size: al_member_info and al_shard_io (passed as arrays), al_storage_options (a
 * value type embedded in al_check_options).
 */
#ifndef AL_INDEX_H
#define AL_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/al_api.h"
#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_index al_index;

/* Limits on names, so that every indexed sample can also be streamed: a sample key
 * (a member name up to the first dot of its last path component) longer than
 * AL_INDEX_KEY_MAX bytes, or a member extension longer than AL_INDEX_EXT_MAX bytes,
 * is rejected with a reason at indexing time and refused by al_index_add_sample. */
#define AL_INDEX_KEY_MAX 1024
#define AL_INDEX_EXT_MAX 128

/* Default of al_index_options.max_member_bytes: 512 MiB, as AL_STREAM_MAX_MEMBER_DEFAULT. */
#define AL_INDEX_MAX_MEMBER_DEFAULT (512ull << 20)

/* Zero means default for every field. */
typedef struct al_index_options {
  size_t
      struct_size; /* sizeof(al_index_options) (AL_INDEX_OPTIONS_INIT); 0 = this header's struct */
  int threads;     /* shards indexed in parallel; 0 = all online cores */
  int strict;      /* nonzero: al_index_build fails if anything was rejected */
  int progress;    /* 0 = progress line on stderr when it is a terminal, 1 = always, -1 = never */
  size_t block_size;        /* fixed read size; 0 = adaptive for plain tar (16 KiB after
                               each payload skip, doubling up to 1 MiB while data is
                               consumed), 4 MiB for compressed shards */
  const char *dali_idx_dir; /* non-NULL: also write DALI wds2idx v1.2 files here, one per shard */
  /* JSON field names; NULL = defaults. Aliases are tried after the configured name. */
  const char *field_width;    /* "width" */
  const char *field_height;   /* "height" */
  const char *field_frames;   /* "frames" (aliases: num_frames, nframes, nb_frames,
                                 frame_count, length) */
  const char *field_fps;      /* "fps" (alias: frame_rate) */
  const char *field_duration; /* "duration" */
  /* Cap on one member's stored bytes; 0 = AL_INDEX_MAX_MEMBER_DEFAULT. A sample with a
   * bigger member is rejected ("member of N bytes exceeds the M-byte cap"), since
   * streaming it would need that much memory at once. KEY.json is capped at 16 MiB. */
  uint64_t max_member_bytes;
  /* VAE strides in time and space, for the latent cross-check (below); 0 = 4 and 8 (Wan 2.1,
   * as al_latent_geom in planner/al_buckets.h). Typed members (.npy, .safetensors, and their
   * .lz4 forms) have their header parsed for dtype and shape (al_index_member_type); the
   * sample's latent member (al_index_latent_grid) must have the grid its KEY.json implies:
   * H = height / s, W = width / s, T = (frames - 1) / t + 1, or the sample is rejected; a
   * KEY.json without width and height takes them from the grid (W * s, H * s, (T - 1) * t + 1
   * frames). */
  uint32_t vae_stride_t;
  uint32_t vae_stride_s;
  /* Added at the end (the struct only grows there). Remote shards (a SHARD that is an
   * http://, https:// or s3:// URL): the S3 endpoint of s3:// URLs (path-style,
   * "http://127.0.0.1:9000"); NULL = $AWS_ENDPOINT_URL, else AWS's regional endpoint
   * ($AWS_REGION, default us-east-1). Keys from $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY,
   * $AWS_SESSION_TOKEN (none: anonymous requests); they are never printed or stored. With
   * remote shards and threads 0, up to max(cores, 8) shards are indexed at once, each over
   * one connection. */
  const char *s3_endpoint;
  /* The time in seconds one remote operation (a shard's HEAD, one ranged read, a listing
   * page) may take as a whole, its retries with backoff (timeouts, refused connections, 5xx,
   * 429) and a slow answer's transfer included; 0 = 60. */
  double remote_timeout_s;
  /* NULL, or an array of n (the shard count) filled with each shard's transfer figures. */
  struct al_shard_io *shard_io;
  /* Added at the end: the region of s3:// URLs (NULL = $AWS_REGION, else us-east-1) and their
   * addressing (AL_S3_ADDRESSING_*; 0 = path-style at a set endpoint, virtual-hosted at AWS).
   * The endpoint, region and addressing used are recorded in the index (never credentials):
   * al_index_storage, al_storage_resolve. */
  const char *s3_region;
  int s3_addressing;
} al_index_options;
#define AL_INDEX_OPTIONS_INIT AL_STRUCT_INIT(al_index_options)
#define AL_INDEX_OPTIONS_V1 offsetof(al_index_options, s3_endpoint)

/* What indexing one remote shard sent and received (zero for a local shard). */
typedef struct al_shard_io {
  uint64_t requests; /* HTTP requests (HEAD, ranged GETs, retries included) */
  uint64_t bytes;    /* body bytes received */
} al_shard_io;

typedef struct al_shard_info {
  size_t struct_size; /* sizeof(al_shard_info), set by the caller: AL_SHARD_INFO_INIT */
  const char *path;
  uint64_t size;
  int64_t mtime_ns;
  uint64_t sample_count;
  uint64_t rejected_count;
  int seekable;            /* plain tar: member offsets are file offsets */
  const char *compression; /* "none", "lz4", "gzip", "zstd", "bzip2", "xz" */
  /* Added at the end (the struct only grows there): the shard's identity besides its size,
   * without mtime (see al_index_shard_verify); 0 when not recorded (indexes written before
   * fingerprints, hand assembly, a shard that could not be read at the end of its build). */
  uint64_t content_fp;
  /* Remote shards: path is the URL as given (its scheme, and an http(s) host, in lower case;
   * a query kept: requests use the whole URL; s3://BUCKET/KEY stays s3://, its endpoint is the
   * reader's setting, not the index's), mtime_ns is 0, and the identity is size + content_fp
   * (the same hash as for a local copy: the header block of every indexed member, or a
   * compressed object's first and last 64 KiB) + etag, never the URL's query (a presigned
   * URL signed again is the same shard). remote: AL_SHARD_LOCAL, AL_SHARD_HTTP or
   * AL_SHARD_S3 (from the path's scheme, in any case). etag: the ETag the server sent when
   * the shard was indexed, quoted as sent, whole ("\"9a03...\"", W/"..." when weak); "" for a
   * local shard or a server that sent none. A reader opens the URL, checks size and ETag, and
   * sends If-Match (a strong ETag; a weak one is compared in the answers) with its ranged
   * GETs. No path holds a user:password@: every entry point refuses one. */
  int remote;
  const char *etag;
} al_shard_info;
#define AL_SHARD_INFO_INIT AL_STRUCT_INIT(al_shard_info)
#define AL_SHARD_INFO_V1 offsetof(al_shard_info, content_fp)

enum { AL_SHARD_LOCAL = 0, AL_SHARD_HTTP = 1, AL_SHARD_S3 = 2 };

typedef struct al_member_info {
  const char *ext; /* "json", "latent", "json.lz4" */
  uint64_t offset; /* data offset in the uncompressed tar stream */
  uint64_t size;   /* stored bytes */
  int lz4;         /* stored as an LZ4 frame */
} al_member_info;

typedef struct al_sample_info {
  size_t struct_size; /* sizeof(al_sample_info), set by the caller: AL_SAMPLE_INFO_INIT */
  const char *key;
  uint32_t shard;
  uint32_t width;
  uint32_t height;
  uint32_t frames; /* 1 for images */
  float fps;       /* 0 when unknown */
  uint32_t n_members;
} al_sample_info;
#define AL_SAMPLE_INFO_INIT AL_STRUCT_INIT(al_sample_info)
#define AL_SAMPLE_INFO_V1 sizeof(al_sample_info)

/* dtype and shape of a typed member (KEY.npy, KEY.latent.npy, KEY.t5.npy.lz4,
 * KEY.x.safetensors, ...), from its header at indexing time. */
#define AL_INDEX_MAX_DIMS 8
typedef struct al_member_type {
  size_t struct_size; /* sizeof(al_member_type), set by the caller: AL_MEMBER_TYPE_INIT */
  const char *dtype;  /* NumPy name: "float16", "bfloat16", "float32", "uint8", ...; static */
  size_t elem_size;   /* bytes per element */
  uint32_t ndim;      /* 0 for a scalar */
  uint64_t shape[AL_INDEX_MAX_DIMS]; /* C order; 0 past ndim */
  uint64_t data_offset; /* bytes from the member's first (decoded, for .lz4) byte to the data */
  uint64_t data_bytes;  /* product(shape) x elem_size: the rest of the member */
} al_member_type;
#define AL_MEMBER_TYPE_INIT AL_STRUCT_INIT(al_member_type)
#define AL_MEMBER_TYPE_V1 sizeof(al_member_type)

typedef struct al_rejected_info {
  size_t struct_size; /* sizeof(al_rejected_info), set by the caller: AL_REJECTED_INFO_INIT */
  uint32_t shard;
  const char *member; /* "" for shard-level failures */
  uint64_t offset;
  const char *key; /* "" when unknown */
  const char *reason;
} al_rejected_info;
#define AL_REJECTED_INFO_INIT AL_STRUCT_INIT(al_rejected_info)
#define AL_REJECTED_INFO_V1 sizeof(al_rejected_info)

/* Summary of a build, also what `adaptiveload index --json` prints. */
typedef struct al_index_stats {
  size_t struct_size; /* sizeof(al_index_stats), set by the caller: AL_INDEX_STATS_INIT */
  uint64_t shards;
  uint64_t samples;
  uint64_t rejected;
  uint64_t bytes; /* shard bytes (sum of file sizes of the shards) */
  double seconds;
  uint64_t bytes_read; /* bytes actually read from shard files: payloads of plain
                          tar shards are skipped with lseek, so this is far below
                          `bytes` when shards carry payloads; remote shards: body bytes
                          received */
  uint64_t warnings;   /* samples indexed with a doubt (al_index_warning) */
  /* Added at the end: remote shards given, HTTP requests sent and body bytes received for
   * them (al_index_options.shard_io has the per-shard figures). */
  uint64_t remote_shards;
  uint64_t remote_requests;
  uint64_t remote_bytes;
} al_index_stats;
#define AL_INDEX_STATS_INIT AL_STRUCT_INIT(al_index_stats)
#define AL_INDEX_STATS_V1 offsetof(al_index_stats, remote_shards)

/* Expands a SHARD argument: a file, a directory (every *.tar* inside, sorted) or
 * a brace pattern "shard-{000000..000099}.tar" (also "{a,b}", several groups).
 * URLs (http://, https://, s3://) are expanded by al_shard_expand_remote; here they pass
 * through, brace patterns expanded.
 * Appends malloc'd paths to *paths (realloc'd; *n updated). Caller frees each
 * path and the array. A plain path that does not exist passes through (the
 * build records it as unreadable); a directory without *.tar* files is
 * AL_ENOTFOUND; a malformed pattern AL_EINVAL; more than 10M paths AL_ERANGE.
 * On error nothing is appended. */
AL_API int al_shard_expand(const char *arg, char ***paths, size_t *n);

/* al_shard_expand, and for URLs: brace patterns expand as for paths; an s3:// URL whose last
 * component does not name a tar (no ".tar" in it: "s3://b/train/", "s3://b/train/shard-",
 * "s3://b") is a prefix, listed (ListObjectsV2, every page) for its *.tar, *.tar.gz,
 * *.tar.lz4, *.tar.zst, *.tar.bz2, *.tar.xz objects, sorted bytewise (AL_ENOTFOUND when there are
 * none); http(s) URLs must name objects (no listing). s3_endpoint as al_index_options.s3_endpoint.
 * A URL with user:password@ (any scheme) is AL_EINVAL (the index would store it). Errors name
 * the URL without credentials; a failed listing is AL_EIO (a listing whose continuation tokens
 * come round again included). */
AL_API int al_shard_expand_remote(const char *arg, const char *s3_endpoint, char ***paths,
                                  size_t *n);

/* Indexes `n` shards. On AL_OK *out is a new index (possibly with rejected
 * entries). Fails only for bad arguments (AL_EINVAL, *out NULL), out of memory,
 * or with AL_EFORMAT when no shard could be read or with opts->strict when
 * anything was rejected; in those two cases *out is still set (caller frees)
 * so that the caller can report what was rejected. Shard paths are recorded
 * made absolute (cwd prefixed, not symlink-resolved). `stats` may be NULL.
 * A shard may be an http://, https:// or s3:// URL (al_shard_expand_remote expands
 * patterns and prefixes): a plain tar is indexed from its headers and metadata members in
 * coalesced ranged GETs, payloads never fetched; a compressed one is read through; the
 * record holds the URL, size, ETag and content fingerprint (al_shard_info). An object that
 * cannot be read (unreachable, 403, 404, not a tar) is a rejected shard naming the URL. */
AL_API int al_index_build(al_index **out, const char *const *shards, size_t n,
                          const al_index_options *opts, al_index_stats *stats);

AL_API int al_index_save(const al_index *idx, const char *path);
AL_API int al_index_load(al_index **out, const char *path);
AL_API void al_index_free(al_index *idx);

AL_API size_t al_index_shard_count(const al_index *idx);
AL_API size_t al_index_sample_count(const al_index *idx);
AL_API size_t al_index_rejected_count(const al_index *idx);
/* Hash of shard file names (not their folders, nor an http(s) URL's query or fragment) and
 * sizes, and of sample keys, shapes and member sizes; manifests record it to catch a manifest
 * used with another index. Deterministic across runs and machines, and unchanged when the
 * same shards are indexed at another path (another node's mount point, a server, presigned
 * URLs signed again). */
AL_API uint64_t al_index_fingerprint(const al_index *idx);

/* The fingerprint of an index folded without holding it (a map or a plan of a corpus too large
 * to load): add the shards and samples in the order al_index_add_shard and al_index_add_sample
 * would take them, and al_index_fp_value is what al_index_fingerprint gives that index (a latent
 * tensor header, which only a build records, is not folded). Zero-initialise (AL_INDEX_FP_INIT);
 * plain data, one writer at a time. al_index_fp_add_sample: AL_EINVAL for a shard id not added
 * yet. */
typedef struct al_index_fp {
  uint64_t n_shards, fp_shards, n_samples, fp_samples;
} al_index_fp;
#define AL_INDEX_FP_INIT \
  { 0, 0, 0, 0 }
AL_API void al_index_fp_add_shard(al_index_fp *f, const char *path, uint64_t size);
AL_API int al_index_fp_add_sample(al_index_fp *f, const char *key, uint32_t shard, uint32_t width,
                                  uint32_t height, uint32_t frames, const al_member_info *members,
                                  size_t n_members);
AL_API uint64_t al_index_fp_value(const al_index_fp *f);

AL_API int al_index_shard(const al_index *idx, size_t i, al_shard_info *out);

/* Checks that `fd`, the open file of shard `shard`, is the shard that was indexed: its
 * content fingerprint (al_shard_info.content_fp) is computed again (plain tar: one 512-byte
 * read per indexed member; compressed: two 64 KiB reads) and compared. Size and mtime are
 * the caller's (the stream checks the size and, without a fingerprint, the mtime). AL_OK;
 * AL_ENOTFOUND when the index recorded no fingerprint; AL_EFORMAT "PATH: shard changed since
 * indexing: ..." when it differs; AL_EIO for a failed read. Thread-safe (reads only). */
AL_API int al_index_shard_verify(const al_index *idx, size_t shard, int fd);

/* Moves a corpus: every shard path that starts with directory `from` (the whole component)
 * starts with `to` instead (`from` = /data/corpus, `to` = /local/corpus). Shards are checked
 * by size and content fingerprint, not path or mtime, so a copied corpus streams under the
 * same manifests (the index fingerprint leaves folders out). *remapped (may be NULL) counts
 * the shards moved; AL_ENOTFOUND when none starts with `from`. A moved shard's ETag is
 * forgotten (it was the old server's). `from` or `to` a URL with user:password@ is AL_EINVAL.
 * Not thread-safe: call before streaming. */
AL_API int al_index_remap_root(al_index *idx, const char *from, const char *to, size_t *remapped);
AL_API int al_index_sample(const al_index *idx, size_t i, al_sample_info *out);
AL_API int al_index_member(const al_index *idx, size_t sample, size_t m, al_member_info *out);
/* The member with extension `ext`, or else with "<ext>.lz4" (same content stored
 * as an LZ4 frame; out->lz4 tells). AL_ENOTFOUND when there is neither. */
AL_API int al_index_find_member(const al_index *idx, size_t sample, const char *ext,
                                al_member_info *out);
AL_API int al_index_rejected(const al_index *idx, size_t i, al_rejected_info *out);

/* Writes every rejected entry of `idx` to `out`, in index order, each with its shard's path,
 * member, byte offset, key and full reason. json == 0: one line each,
 * "SHARD: sample 'KEY', member 'NAME' at byte N: REASON" ("SHARD: member 'NAME' at byte N:
 * REASON" without a key, "SHARD: at byte N: REASON" for shard-level entries); json != 0: one
 * JSON array (no newline) of {"shard": PATH, "member": NAME, "key": KEY, "offset": N,
 * "reason": TEXT} objects, valid JSON for any bytes. The caller keeps `out` and `idx`.
 * AL_OK; AL_EINVAL for a NULL argument; AL_EIO when writing to `out` failed. Thread-safe
 * (reads only). */
AL_API int al_index_print_rejected(FILE *out, const al_index *idx, int json);

/* The dtype and shape of member m of a sample: AL_OK, AL_ENOTFOUND (no message recorded)
 * when the member is not typed, AL_ERANGE when sample or m is out of range. */
AL_API int al_index_member_type(const al_index *idx, size_t sample, size_t m, al_member_type *out);

/* The codec ("h264", "vp9", "png": libavcodec's name) of member m of a sample, recorded when
 * the index probed that raw video or image member's header (loader/README.md, "Raw video and
 * image members"); "" when it was not probed, and for a NULL index or an index out of range.
 * Never NULL; points into the index. Thread-safe (reads only). */
AL_API const char *al_index_member_codec(const al_index *idx, size_t sample, size_t m);

/* The sample's latent grid (latent frames T, rows H, columns W) from its latent member: the
 * first typed member whose extension starts with "latent" ("latent.npy",
 * "latent.safetensors.lz4"), of shape (C, T, H, W), or (C, H, W) read as T = 1. AL_OK with
 * *member set to its position in the sample (member may be NULL), AL_ENOTFOUND (no message)
 * when the sample has none, AL_ERANGE when sample is out of range. */
AL_API int al_index_latent_grid(const al_index *idx, size_t sample, uint32_t *t, uint32_t *h,
                                uint32_t *w, size_t *member);

/* Warnings: samples that were indexed but with a doubt, e.g. a KEY.json with a duration or
 * an fps but no frame-count field the index knows (the sample is indexed with the frames it
 * computes, and the warning says how many; map the field with al_index_options.field_frames).
 * out->member is the metadata member, out->offset its header's byte offset. */
AL_API size_t al_index_warning_count(const al_index *idx);
AL_API int al_index_warning(const al_index *idx, size_t i, al_rejected_info *out);

/* Memory the index holds, by allocated capacity: *records gets the bytes of
 * sample, member, shard and rejected records and tables, *keys the key arena
 * (keys with their NULs). Either may be NULL. Returns the sum. */
AL_API size_t al_index_memory(const al_index *idx, size_t *records, size_t *keys);

/* Hand assembly (planner benchmarks, tests). Members are optional. Unlike
 * al_index_build, nothing is validated beyond the shard id and offsets < 2^48:
 * keys are not checked for duplicates and shapes are stored as given.
 * add_shard records mtime 0 and compression "none" (seekable) or "unknown"; a path that is a
 * URL with user:password@ is AL_EINVAL (as everywhere a shard path enters an index: build,
 * expansion, loading, al_index_remap_root), with a message showing it as ***@. */
AL_API int al_index_new(al_index **out);
AL_API int al_index_add_shard(al_index *idx, const char *path, uint64_t size, int seekable,
                              uint32_t *id);
AL_API int al_index_add_sample(al_index *idx, const char *key, uint32_t shard, uint32_t width,
                               uint32_t height, uint32_t frames, float fps,
                               const al_member_info *members, size_t n_members);
/* Records a rejected entry (strings copied; NULL member/key mean ""). */
AL_API int al_index_add_rejected(al_index *idx, uint32_t shard, const char *member, uint64_t offset,
                                 const char *key, const char *reason);

/* ---- storage: one set of settings for every reader of shards at URLs ---------------------- */

enum {
  AL_S3_ADDRESSING_DEFAULT = 0, /* path-style at a set endpoint, virtual-hosted at AWS */
  AL_S3_ADDRESSING_PATH = 1,    /* ENDPOINT/BUCKET/KEY */
  AL_S3_ADDRESSING_VIRTUAL = 2  /* BUCKET.ENDPOINT-HOST/KEY */
};

/* Where and how shards at URLs are read: `index`, `verify`, `stream` and the Python entry
 * points take the same four settings. Zero or NULL means "not given". A value type of a fixed
 * layout that never grows (it is embedded in al_check_options): it carries no struct_size, and a
 * setting it lacks would come as a new field of the options that embed it. */
typedef struct al_storage_options {
  const char *s3_endpoint; /* S3-compatible endpoint URL of s3:// shards, "http://host:9000" */
  const char *s3_region;   /* SigV4 region, "us-east-1" */
  int s3_addressing;       /* AL_S3_ADDRESSING_* */
  double remote_timeout_s; /* a request's retry budget since its last progress, seconds */
} al_storage_options;

/* What the index recorded when it was built (its s3:// shards' endpoint, region, addressing;
 * NULL / 0 when none; remote_timeout_s 0). Strings point into the index. */
AL_API void al_index_storage(const al_index *idx, al_storage_options *out);

/* AL_OK when the settings given (NULL members: not given) are ones a reader can use: an
 * endpoint that is an http:// or https:// URL, a region name, an addressing of
 * AL_S3_ADDRESSING_*, a timeout of 0 or in [0.1, 86400]; else AL_EINVAL naming the setting. */
AL_API int al_storage_check(const al_storage_options *o);

/* Where each setting a reader uses came from (al_storage_resolve). */
typedef struct al_storage_origin {
  size_t struct_size; /* sizeof(al_storage_origin), set by the caller: AL_STORAGE_ORIGIN_INIT */
  const char *s3_endpoint; /* "option", "AWS_ENDPOINT_URL", "index", "default" */
  const char *s3_region;   /* "option", "AWS_REGION", "index", "default" */
} al_storage_origin;
#define AL_STORAGE_ORIGIN_INIT AL_STRUCT_INIT(al_storage_origin)
#define AL_STORAGE_ORIGIN_V1 sizeof(al_storage_origin)

/* The settings a reader uses: each one given (non-NULL, non-zero) in `given` (may be NULL),
 * else from the environment (AWS_ENDPOINT_URL, AWS_REGION, ADAPTIVELOAD_REMOTE_TIMEOUT_S when
 * a positive number of seconds), else what `idx` recorded (idx may be NULL), else the default
 * (NULL endpoint: AWS's regional endpoint; region NULL: us-east-1; 0 addressing and timeout:
 * the library's defaults). Strings point into `given`, the environment or the index. `origin`
 * (may be NULL) says where the endpoint and region came from. AL_OK; AL_EINVAL for a NULL `out`
 * or an origin whose struct_size is 0, below AL_STORAGE_ORIGIN_V1 or above the library's
 * (nothing written). */
AL_API int al_storage_resolve(const al_storage_options *given, const al_index *idx,
                              al_storage_options *out, al_storage_origin *origin);

/* One line naming the endpoint a reader used and, when the index recorded another one, that
 * one: " (S3 endpoint http://a from AWS_ENDPOINT_URL; the index was built with http://b)", or
 * "" when they agree. For error messages about s3:// shards. `origin` (may be NULL) is read as
 * far as its struct_size (0: this header's struct); one of another size is not read (the line
 * then says "from the settings"). */
AL_API const char *al_storage_mismatch(const al_storage_options *used,
                                       const al_storage_origin *origin, const al_index *idx,
                                       char *buf, size_t cap);

/* al_shard_expand_remote with every storage setting (storage may be NULL): an s3:// prefix is
 * listed with them as al_storage_resolve gives them (no index). */
AL_API int al_shard_expand_storage(const char *arg, const al_storage_options *storage,
                                   char ***paths, size_t *n);

/* Ids of al_index_struct_size: the structs of this header. */
typedef enum al_index_struct {
  AL_INDEX_STRUCT_OPTIONS = 0,        /* al_index_options */
  AL_INDEX_STRUCT_SHARD_INFO = 1,     /* al_shard_info */
  AL_INDEX_STRUCT_MEMBER_INFO = 2,    /* al_member_info */
  AL_INDEX_STRUCT_SAMPLE_INFO = 3,    /* al_sample_info */
  AL_INDEX_STRUCT_MEMBER_TYPE = 4,    /* al_member_type */
  AL_INDEX_STRUCT_REJECTED_INFO = 5,  /* al_rejected_info */
  AL_INDEX_STRUCT_STATS = 6,          /* al_index_stats */
  AL_INDEX_STRUCT_SHARD_IO = 7,       /* al_shard_io */
  AL_INDEX_STRUCT_STORAGE = 8,        /* al_storage_options */
  AL_INDEX_STRUCT_TENSOR_HEADER = 9,  /* al_tensor_header (al_members.h) */
  AL_INDEX_STRUCT_STORAGE_ORIGIN = 10 /* al_storage_origin */
} al_index_struct;

/* sizeof of the struct `which` (an al_index_struct) names; 0 for any other value. Bindings
 * (Python ctypes) check their struct mirrors against it. Thread-safe. */
AL_API size_t al_index_struct_size(int which);

/* The value of the integer constant `name` of the loader's public headers (al_index.h,
 * al_check.h, al_members.h, al_synth.h: "AL_INDEX_MAX_DIMS" -> 8, the addressing modes, the
 * struct ids, ...): AL_OK with *value set; AL_ENOTFOUND (message naming it) for a name they do
 * not define; AL_EINVAL for NULL. As al_status_constant (common/al_status.h): bindings read
 * constants here instead of copying them. Thread-safe. */
AL_API int al_index_constant(const char *name, int64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* AL_INDEX_H */
