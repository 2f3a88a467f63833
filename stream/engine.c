/*
 * The stream engine: reader threads fill a bounded pool of slots, the
 * consumer takes them in order.
 *
 * Ordering without deadlock: a reader takes a free slot and the next batch
 * number in one critical section, so slots are handed to batches in
 * increasing order. The batch the consumer waits for therefore always got its
 * slot before any later batch did, and the consumer can never wait for a
 * batch that has no slot - unless the caller itself holds every slot, which
 * al_stream_next reports (AL_ESTATE) instead of blocking forever.
 */
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/struct_abi_internal.h"
#include "common/clock_internal.h"
#include "common/env_internal.h"
#include "common/grow_internal.h"
#include "common/parse_internal.h"
#include "loader/al_members.h"
#include "stream/cuda_rt_internal.h"
#include "stream/member_reader_internal.h"
#include "stream/engine_internal.h"
#include "stream/plan_feed_internal.h"
#include "stream/prefetch_internal.h"
#include "stream/typed_member_internal.h"
#include "decode/al_decode.h"

typedef enum { SLOT_FREE, SLOT_FILLING, SLOT_READY, SLOT_HELD } slot_state;

/* Per-sample arrays of one member of a batch (capacity: the slot's meta_cap). */
typedef struct member_meta {
  uint32_t *ndim;
  uint64_t *shapes; /* AL_STREAM_MAX_DIMS per sample */
  uint64_t *offsets;
  uint64_t *sizes;
  int cropped; /* some sample of the batch had this member cropped to the grid */
} member_meta;

typedef struct slot {
  slot_state state;
  uint64_t seq; /* local batch number: global position = first + seq * stride */
  stream_growbuf buf;
  size_t host_cap; /* buf.cap as last published under the lock (stats) */
  void *dev;
  size_t dev_cap;
  void *ready_ev;
  void *release_ev;
  int copy_pending;    /* ready_ev recorded: the host buffer may still be read by DMA */
  int release_pending; /* release_ev recorded on the consumer's stream */

  size_t meta_cap;
  const char **keys;
  uint64_t *samples;
  uint32_t *shapes;
  uint8_t *padded;
  int32_t *cu;
  uint64_t *offsets;
  uint64_t *sizes;
  uint64_t *token_first;    /* n: first token of the sample's piece (0 when whole) */
  uint64_t *sample_tokens;  /* n: the sample's whole sequence */
  uint32_t *sources;        /* n: the source each sample is read from (stream_source_job) */
  stream_growbuf shard_tmp; /* a token shard's latent frames before the patchify */
  stream_growbuf media;     /* a raw video or image member's bytes, decoded into "pixels" */
  member_meta *mm;          /* n_members (the stream's) */
  al_stream_member *bm;     /* n_members: batch.members */
  size_t skip_cap, n_skipped;
  char **skipped_keys;
  char **skipped_reasons;

  int status;
  char *error;
  const char *grid_error; /* while filling: the plan's reason for no latent grid, if any */
  al_stream_batch batch;
} slot;

struct al_stream {
  stream_source src;
  stream_rank_plan plan;
  stream_feed *feed;    /* a run's stream: the batches come from it (plan.fed_micro set) */
  uint64_t counted_end; /* a run's stream: the chunks below this position are in `planned` */
  stream_shard_table *shards;
  char **members; /* n_members requested extensions */
  size_t n_members;
  theader_kind *kinds; /* per member: THEADER_KIND_NONE = raw bytes */
  uint8_t *pixels;     /* per member: 1 = "pixels", decoded from the raw media member */
  uint64_t max_member;
  uint64_t max_sample; /* a sample's members together, after the crop */
  int on_error;
  int sp_shard;     /* options.sp_shard: deliver this rank's token shard of the group's batch */
  double max_skip;  /* skipped > max_skip x planned fails the stream */
  uint64_t planned; /* samples of this stream's batches */
  uint64_t lacking; /* of them, found at open to lack a requested member */
  size_t align;
  size_t read_block;
  int pinned, device_copy, device;
  void *copy_stream;

  uint64_t first, stride, total;
  uint64_t base_delivered, base_skipped; /* from the resume state */

  pthread_mutex_t mu;
  pthread_cond_t cv_free, cv_ready;
  slot *slots;
  int n_slots;
  uint64_t next_claim, next_deliver;
  int in_use, held, max_in_use;
  atomic_int stop; /* read without the lock by fill() between samples */
  int failed, fail_status;
  char *fail_msg;

  pthread_t *threads;
  int n_threads;
  stream_prefetch *prefetch;          /* remote members into the cache ahead of the readers */
  atomic_uint_fast64_t delivered_pub; /* next_deliver, for the prefetcher */
  atomic_uint_fast32_t *begun;        /* with a prefetcher: per local batch, the samples its
                                         reader has begun (it fetches those itself) */

  uint64_t st_samples, st_bytes, st_skipped;
  double stall_s, read_s;
  stream_remote_counts at_delivery; /* the remote counters at the last delivery (consumer) */
};

void stream_rank_plan_free(stream_rank_plan *p) {
  if (!p) return;
  free(p->batches);
  free(p->samples);
  free(p->grid_error);
  memset(p, 0, sizeof *p);
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) & ~(a - 1); }

/* ------------------------------------------------------------ slot metadata */

/* The per-sample arrays of a batch share one capacity: n samples (n + 1 for
 * cu and offsets, 3 n for shapes). */
static int meta_reserve(slot *sl, size_t n, size_t n_members) {
  if (n <= sl->meta_cap) return AL_OK;
  const char *what = "batch metadata";
  size_t c;
  int rc = grow_capacity(sl->meta_cap, n, 3 * sizeof *sl->shapes, what, &c);
  if (!rc) rc = grow_resize((void **)&sl->keys, c, sizeof *sl->keys, what);
  if (!rc) rc = grow_resize((void **)&sl->samples, c, sizeof *sl->samples, what);
  if (!rc) rc = grow_resize((void **)&sl->shapes, c, 3 * sizeof *sl->shapes, what);
  if (!rc) rc = grow_resize((void **)&sl->padded, c, sizeof *sl->padded, what);
  if (!rc) rc = grow_resize((void **)&sl->cu, c + 1, sizeof *sl->cu, what);
  if (!rc) rc = grow_resize((void **)&sl->offsets, c + 1, sizeof *sl->offsets, what);
  if (!rc) rc = grow_resize((void **)&sl->sizes, c, sizeof *sl->sizes, what);
  if (!rc) rc = grow_resize((void **)&sl->token_first, c, sizeof *sl->token_first, what);
  if (!rc) rc = grow_resize((void **)&sl->sample_tokens, c, sizeof *sl->sample_tokens, what);
  if (!rc) rc = grow_resize((void **)&sl->sources, c, sizeof *sl->sources, what);
  for (size_t j = 0; !rc && j < n_members; j++) {
    member_meta *m = &sl->mm[j];
    rc = grow_resize((void **)&m->ndim, c, sizeof *m->ndim, what);
    if (!rc) rc = grow_resize((void **)&m->shapes, c, AL_STREAM_MAX_DIMS * sizeof *m->shapes, what);
    if (!rc) rc = grow_resize((void **)&m->offsets, c, sizeof *m->offsets, what);
    if (!rc) rc = grow_resize((void **)&m->sizes, c, sizeof *m->sizes, what);
  }
  if (!rc) sl->meta_cap = c;
  return rc;
}

static void skipped_clear(slot *sl) {
  for (size_t i = 0; i < sl->n_skipped; i++) {
    free(sl->skipped_keys[i]);
    free(sl->skipped_reasons[i]);
  }
  sl->n_skipped = 0;
}

static int skipped_add(slot *sl, const char *key, const char *reason) {
  if (sl->n_skipped == sl->skip_cap) {
    const char *what = "skipped-sample list";
    size_t c;
    int rc = grow_capacity(sl->skip_cap, sl->n_skipped + 1, sizeof(char *), what, &c);
    if (!rc) rc = grow_resize((void **)&sl->skipped_keys, c, sizeof *sl->skipped_keys, what);
    if (!rc) rc = grow_resize((void **)&sl->skipped_reasons, c, sizeof *sl->skipped_reasons, what);
    if (rc) return rc;
    sl->skip_cap = c;
  }
  char *kd = strdup(key ? key : "?");
  char *rd = strdup(reason);
  if (!kd || !rd) {
    free(kd);
    free(rd);
    return AL_ENOMEM;
  }
  sl->skipped_keys[sl->n_skipped] = kd;
  sl->skipped_reasons[sl->n_skipped] = rd;
  sl->n_skipped++;
  return AL_OK;
}

static void slot_set_error(slot *sl, int status) {
  sl->status = status;
  free(sl->error);
  sl->error = strdup(al_last_error());
}

static void slot_free(slot *sl, size_t n_members) {
  stream_growbuf_free(&sl->buf);
  stream_growbuf_free(&sl->shard_tmp);
  stream_growbuf_free(&sl->media);
  stream_cuda_free(sl->dev);
  stream_cuda_event_destroy(sl->ready_ev);
  stream_cuda_event_destroy(sl->release_ev);
  free((void *)sl->keys);
  free(sl->samples);
  free(sl->shapes);
  free(sl->padded);
  free(sl->cu);
  free(sl->offsets);
  free(sl->sizes);
  free(sl->token_first);
  free(sl->sample_tokens);
  free(sl->sources);
  for (size_t j = 0; sl->mm && j < n_members; j++) {
    free(sl->mm[j].ndim);
    free(sl->mm[j].shapes);
    free(sl->mm[j].offsets);
    free(sl->mm[j].sizes);
  }
  free(sl->mm);
  free(sl->bm);
  skipped_clear(sl);
  free(sl->skipped_keys);
  free(sl->skipped_reasons);
  free(sl->error);
}

/* -------------------------------------------------------------- filling */

static int stopping(al_stream *s) { return atomic_load_explicit(&s->stop, memory_order_relaxed); }

static int device_copy(al_stream *s, slot *sl, size_t bytes) {
  int rc;
  if (bytes > sl->dev_cap) {
    /* A device buffer still read by kernels of the consumer must not be
     * freed under them: wait for its release first (rare: growth only). */
    if (sl->release_pending && (rc = stream_cuda_event_sync(sl->release_ev)) != AL_OK) return rc;
    stream_cuda_free(sl->dev);
    sl->dev = NULL;
    sl->dev_cap = 0;
    size_t cap = align_up(bytes + bytes / 4, (size_t)1 << 20);
    if ((rc = stream_cuda_malloc(&sl->dev, cap)) != AL_OK) return rc;
    sl->dev_cap = cap;
  }
  if (sl->release_pending) {
    if ((rc = stream_cuda_stream_wait_event(s->copy_stream, sl->release_ev)) != AL_OK) return rc;
    sl->release_pending = 0;
  }
  if ((rc = stream_cuda_memcpy_h2d_async(sl->dev, sl->buf.p, bytes, s->copy_stream)) != AL_OK)
    return rc;
  if ((rc = stream_cuda_event_record(sl->ready_ev, s->copy_stream)) != AL_OK) return rc;
  sl->copy_pending = 1;
  return AL_OK;
}

/* Readies the slot for a batch of pb->n samples: the previous copy out of its host buffer is
 * over (it is about to be overwritten), its metadata has room, its members no dtype yet. */
static int fill_begin(al_stream *s, slot *sl, const stream_plan_batch *pb) {
  int rc;
  sl->status = AL_OK;
  skipped_clear(sl);
  if (sl->copy_pending) {
    if ((rc = stream_cuda_event_sync(sl->ready_ev)) != AL_OK) return rc;
    sl->copy_pending = 0;
  }
  if ((rc = meta_reserve(sl, pb->n, s->n_members)) != AL_OK) return rc;
  sl->cu[0] = 0;
  sl->offsets[0] = 0;
  for (size_t j = 0; j < s->n_members; j++) {
    sl->bm[j].dtype = NULL;
    sl->bm[j].itemsize = 0;
    sl->mm[j].cropped = 0;
  }
  return AL_OK;
}

/* Where the members of the sample being read go; the batch takes them (its sample count,
 * offset and end advanced) only when all of them were read. */
typedef struct sample_cursor {
  size_t cur;      /* where the next member goes (aligned) */
  size_t prev_end; /* the end of the last member written */
  uint64_t bytes;  /* the sample's members so far */
} sample_cursor;

/* What one member delivered. */
typedef struct member_read {
  size_t len;
  const char *dtype;
  size_t itemsize;
} member_read;

/* The tokens of a sample this batch holds: [first, first + count) of its sequence (the whole
 * sample without sp_shard). */
typedef struct sample_piece {
  uint64_t first, count;
} sample_piece;

/* The patch of a token shard: the plan's geometry's, 1x2x2 for a hand-made plan. */
static void shard_patch(const al_stream *s, uint32_t patch[3]) {
  int set = s->plan.patch[0] && s->plan.patch[1] && s->plan.patch[2];
  patch[0] = set ? s->plan.patch[0] : 1;
  patch[1] = set ? s->plan.patch[1] : 2;
  patch[2] = set ? s->plan.patch[2] : 2;
}

/* Tokens [pc->first, pc->first + pc->count) of the sample's latent, cropped to `grid` and
 * patchified into (count, C x p_t x p_h x p_w) rows at sl->buf + at: tokens in (t, y, x)
 * order of the patch grid, features (c, dt, dy, dx) (Python's latents.patchify). Only the
 * crop's latent frames those tokens lie in are read (stream_typed_read_frames). */
static int read_latent_piece(al_stream *s, stream_reader *rd, slot *sl, const uint32_t *grid,
                             size_t j, size_t n, size_t at, const sample_piece *pc,
                             const stream_source_job *job, member_read *out) {
  uint32_t p[3];
  shard_patch(s, p);
  const char *key = job->key ? job->key : "?";
  if (grid[0] % p[0] || grid[1] % p[1] || grid[2] % p[2])
    return al_set_error(AL_EFORMAT,
                        "key '%s' member '%s': the latent grid %" PRIu32 "x%" PRIu32 "x%" PRIu32
                        " does not split into %" PRIu32 "x%" PRIu32 "x%" PRIu32 " patches",
                        key, job->member, grid[0], grid[1], grid[2], p[0], p[1], p[2]);
  uint64_t hp = grid[1] / p[1], wp = grid[2] / p[2], plane = hp * wp;
  uint64_t tokens = (uint64_t)(grid[0] / p[0]) * plane;
  if (!pc->count || pc->first + pc->count > tokens)
    return al_set_error(AL_EFORMAT,
                        "key '%s' member '%s': tokens [%" PRIu64 ", %" PRIu64
                        ") of a latent of %" PRIu64 " tokens (grid %" PRIu32 "x%" PRIu32 "x%" PRIu32
                        "): the plan's token count is not the latent's",
                        key, job->member, pc->first, pc->first + pc->count, tokens, grid[0],
                        grid[1], grid[2]);
  uint64_t ta = pc->first / plane, tb = (pc->first + pc->count - 1) / plane;
  uint32_t f0 = (uint32_t)(ta * p[0]), fn = (uint32_t)((tb - ta + 1) * p[0]);
  stream_typed_out to;
  int rc = stream_typed_read_frames(rd, job, s->kinds[j], grid, f0, fn, &sl->shard_tmp, 0, &to);
  if (rc != AL_OK) return rc;
  uint64_t C = to.shape[0];
  size_t isz = theader_dtype_size(to.dtype);
  uint64_t feat = C * p[0] * p[1] * p[2];
  size_t bytes = (size_t)(pc->count * feat) * isz, run = p[2] * isz;
  if ((rc = stream_growbuf_reserve(&sl->buf, at + bytes, at)) != AL_OK) return rc;
  const uint8_t *src = sl->shard_tmp.p; /* (C, fn, h_b, w_b) */
  size_t row = grid[2] * isz, fplane = grid[1] * row, chan = fn * fplane;
  uint8_t *dst = sl->buf.p + at;
  for (uint64_t k = pc->first; k < pc->first + pc->count; k++) {
    uint64_t t = k / plane - ta, y = (k % plane) / wp, x = k % wp;
    for (uint64_t c = 0; c < C; c++)
      for (uint32_t dt = 0; dt < p[0]; dt++)
        for (uint32_t dy = 0; dy < p[1]; dy++, dst += run)
          memcpy(dst,
                 src + c * chan + (t * p[0] + dt) * fplane + (y * p[1] + dy) * row + x * p[2] * isz,
                 run);
  }
  member_meta *mm = &sl->mm[j];
  mm->cropped = 1;
  out->len = bytes;
  out->dtype = theader_dtype_name(to.dtype);
  out->itemsize = isz;
  mm->ndim[n] = 2;
  mm->shapes[AL_STREAM_MAX_DIMS * n] = pc->count;
  mm->shapes[AL_STREAM_MAX_DIMS * n + 1] = feat;
  return AL_OK;
}

/* Typed member j (.npy / .safetensors) of job into the slot at `at`: its array without the
 * header, the latent cropped to the bucket's grid; its shape into sample n's row. */
static int read_typed(al_stream *s, stream_reader *rd, slot *sl, const stream_plan_batch *pb,
                      size_t j, size_t n, size_t at, const sample_piece *pc,
                      const stream_source_job *job, member_read *out) {
  const uint32_t *grid = NULL;
  if (job->latent) { /* the index's latent of this sample */
    if (pb->grid[0])
      grid = pb->grid;
    else if (sl->grid_error)
      return al_set_error(AL_EFORMAT, "key '%s' member '%s': cannot crop the latent: %s",
                          job->key ? job->key : "?", job->member, sl->grid_error);
    else if (s->sp_shard)
      return al_set_error(AL_EUNSUPPORTED,
                          "key '%s' member '%s': sp_shard needs the bucket's latent grid to "
                          "cut the latent into tokens, and this plan carries none",
                          job->key ? job->key : "?", job->member);
    if (s->sp_shard) return read_latent_piece(s, rd, sl, grid, j, n, at, pc, job, out);
  }
  stream_typed_out to;
  int rc = stream_typed_read(rd, job, s->kinds[j], grid, &sl->buf, at, &to);
  if (rc != AL_OK) return rc;
  member_meta *mm = &sl->mm[j];
  mm->cropped |= grid != NULL;
  out->len = to.bytes;
  out->dtype = theader_dtype_name(to.dtype);
  out->itemsize = theader_dtype_size(to.dtype);
  mm->ndim[n] = to.ndim;
  memcpy(mm->shapes + AL_STREAM_MAX_DIMS * n, to.shape,
         sizeof(uint64_t) * (to.ndim < AL_STREAM_MAX_DIMS ? to.ndim : AL_STREAM_MAX_DIMS));
  return AL_OK;
}

/* The "pixels" member j of a sample: its first raw video or image member (decode/al_decode.h:
 * al_decode_kind_of) read whole, then decoded to the bucket's (frames, height, width, 3) uint8
 * at `at`: frames [0, F_b) (the planned span, as the latent crop keeps), scaled and centre-
 * cropped, rotation applied. One decoder thread per reader (the readers are the parallelism). */
static int read_pixels(al_stream *s, stream_reader *rd, slot *sl, const stream_plan_batch *pb,
                       const stream_plan_sample *ps, size_t j, size_t n, size_t at,
                       stream_source_job *job, member_read *out) {
  static const char *const exts[] = {"mp4", "mov",  "m4v", "mkv", "webm",
                                     "jpg", "jpeg", "png", "webp"};
  int rc = AL_ENOTFOUND;
  for (size_t e = 0; e < sizeof exts / sizeof *exts && rc == AL_ENOTFOUND; e++)
    rc = s->src.job(s->src.ctx, ps->sample, exts[e], job);
  if (rc == AL_ENOTFOUND) {
    al_clear_error();
    return al_set_error(AL_ENOTFOUND,
                        "key '%s' member 'pixels': the sample has no raw video or image member "
                        "(mp4, mov, m4v, mkv, webm, jpg, jpeg, png, webp)",
                        job->key ? job->key : "?");
  }
  if (rc != AL_OK) return rc;
  job->step = pb->step;
  uint32_t w = pb->pixels[0], h = pb->pixels[1], t = pb->pixels[2];
  if (!w || !h || !t)
    return al_set_error(AL_EUNSUPPORTED,
                        "key '%s' member 'pixels': the plan carries no bucket shape to decode to",
                        job->key ? job->key : "?");
  size_t len = 0;
  rc = stream_reader_read(rd, job, &sl->media, 0, &len);
  if (rc != AL_OK) return rc;
  uint64_t bytes = (uint64_t)t * h * w * 3;
  uint64_t cap = stream_reader_max_member(rd);
  if (bytes > cap)
    return al_set_error(AL_ERANGE,
                        "key '%s' member 'pixels': %" PRIu32 "x%" PRIu32 "x%" PRIu32
                        "x3 is %" PRIu64 " bytes, past the %" PRIu64 "-byte member cap",
                        job->key ? job->key : "?", t, h, w, bytes, cap);
  rc = stream_growbuf_reserve(&sl->buf, at + (size_t)bytes, at);
  if (rc != AL_OK) return rc;
  stream_source_shard sh;
  const char *path = s->src.shard(s->src.ctx, job->shard, &sh) == AL_OK ? sh.path : "?";
  char where[AL_INDEX_KEY_MAX + 1024];
  snprintf(where, sizeof where, "%s: key '%s' member '%s' at byte %" PRIu64, path,
           job->key ? job->key : "?", job->member, job->offset);
  al_decode_input in = AL_DECODE_INPUT_INIT;
  in.data = sl->media.p;
  in.size = len;
  in.where = where;
  const char *dot = strrchr(job->member, '.');
  in.ext = dot ? dot + 1 : NULL;
  al_decode_options o = AL_DECODE_OPTIONS_INIT;
  o.threads = 1;
  o.expect_frames = job->frames;
  rc = al_decode_frames(&in, w, h, t, &o, sl->buf.p + at, (size_t)bytes);
  if (rc != AL_OK) return rc;
  out->len = (size_t)bytes;
  uint64_t *shape = sl->mm[j].shapes + AL_STREAM_MAX_DIMS * n;
  sl->mm[j].ndim[n] = 4;
  shape[0] = t;
  shape[1] = h;
  shape[2] = w;
  shape[3] = 3;
  return AL_OK;
}

/* Member j of plan sample ps, as sample n of the batch, at c->cur: typed or raw bytes (one
 * dimension, uint8). Its dtype must be the one the batch's earlier samples have, and the
 * sample's members together must stay within the cap. */
static int read_member(al_stream *s, stream_reader *rd, slot *sl, const stream_plan_batch *pb,
                       const stream_plan_sample *ps, const sample_piece *pc, size_t j, size_t n,
                       sample_cursor *c, stream_source_job *job) {
  member_meta *mm = &sl->mm[j];
  uint64_t *shape = mm->shapes + AL_STREAM_MAX_DIMS * n;
  memset(shape, 0, AL_STREAM_MAX_DIMS * sizeof *shape);
  member_read got = {0, "uint8", 1};
  int rc = s->pixels[j] ? read_pixels(s, rd, sl, pb, ps, j, n, c->cur, job, &got)
                        : s->src.job(s->src.ctx, ps->sample, s->members[j], job);
  if (rc != AL_OK) return rc;
  job->step = pb->step;
  if (s->pixels[j]) {
    /* decoded above */
  } else if (s->kinds[j] != THEADER_KIND_NONE) {
    rc = read_typed(s, rd, sl, pb, j, n, c->cur, pc, job, &got);
  } else if ((rc = stream_reader_read(rd, job, &sl->buf, c->cur, &got.len)) == AL_OK) {
    mm->ndim[n] = 1;
    shape[0] = got.len;
  }
  if (rc != AL_OK) return rc;
  al_stream_member *bm = &sl->bm[j];
  if (bm->dtype && strcmp(bm->dtype, got.dtype) != 0)
    return al_set_error(AL_EFORMAT,
                        "key '%s' member '%s': dtype %s, but the earlier samples of this "
                        "micro-batch have %s",
                        job->key ? job->key : "?", job->member, got.dtype, bm->dtype);
  if (!n || !bm->dtype) {
    bm->dtype = got.dtype;
    bm->itemsize = got.itemsize;
  }
  if (c->cur > c->prev_end) memset(sl->buf.p + c->prev_end, 0, c->cur - c->prev_end); /* padding */
  mm->offsets[n] = c->cur;
  mm->sizes[n] = got.len;
  c->prev_end = c->cur + got.len;
  c->cur = align_up(c->prev_end, s->align);
  c->bytes += got.len;
  if (c->bytes > s->max_sample)
    return al_set_error(AL_ERANGE,
                        "key '%s': its members hold %" PRIu64
                        " bytes by member '%s', past "
                        "the %" PRIu64
                        "-byte cap on a sample (max_sample_bytes, "
                        "ADAPTIVELOAD_MAX_SAMPLE_BYTES)",
                        job->key ? job->key : "?", c->bytes, job->member, s->max_sample);
  return AL_OK;
}

/* All members of plan sample ps (its tokens pc) as sample n of the batch (holding `tokens` so
 * far). */
static int read_sample(al_stream *s, stream_reader *rd, slot *sl, const stream_plan_batch *pb,
                       const stream_plan_sample *ps, const sample_piece *pc, size_t n,
                       uint64_t tokens, sample_cursor *c, stream_source_job *job) {
  int rc = AL_OK;
  for (size_t j = 0; j < s->n_members && rc == AL_OK; j++)
    rc = read_member(s, rd, sl, pb, ps, pc, j, n, c, job);
  if (rc == AL_OK && tokens + pc->count > (uint64_t)INT32_MAX)
    rc = al_set_error(AL_ERANGE,
                      "key '%s': micro-batch exceeds 2^31-1 tokens (cu_seqlens is int32)",
                      job->key ? job->key : "?");
  return rc;
}

/* Sample i of the batch (n delivered so far) failed with rc. AL_STREAM_SKIP_SAMPLE (unless
 * out of memory): listed as skipped, 1 (the batch goes on). Otherwise the slot carries the
 * error, 0. */
static int skip_sample(al_stream *s, slot *sl, const stream_plan_batch *pb, size_t i, size_t n,
                       const char *key, int rc) {
  /* Every message names the key; say where in the plan it sits, too. */
  al_error_prefix(rc, "step %" PRIu32 " micro %" PRIu32 " sample %zu", pb->step, pb->micro, i);
  if (s->on_error != AL_STREAM_SKIP_SAMPLE || rc == AL_ENOMEM) {
    slot_set_error(sl, rc);
    return 0;
  }
  if (skipped_add(sl, key, al_last_error()) != AL_OK) {
    slot_set_error(sl, al_set_error(AL_ENOMEM, "skipped-sample list"));
    return 0;
  }
  if (!n)
    for (size_t j = 0; j < s->n_members; j++) sl->bm[j].dtype = NULL;
  return 1;
}

/* Sample n of the batch is complete: its key, shape and the batch's first member's place
 * (offsets, sizes); cu_seqlens[n + 1] = `tokens`, the batch's tokens with it. */
static void commit_sample(slot *sl, const stream_plan_sample *ps, const sample_piece *pc,
                          const stream_source_job *job, size_t n, uint64_t tokens) {
  sl->keys[n] = job->key;
  sl->samples[n] = ps->sample;
  sl->shapes[3 * n] = job->width;
  sl->shapes[3 * n + 1] = job->height;
  sl->shapes[3 * n + 2] = job->frames;
  sl->padded[n] = ps->padded;
  sl->sizes[n] = sl->mm[0].sizes[n];
  sl->offsets[n] = sl->mm[0].offsets[n];
  sl->cu[n + 1] = (int32_t)tokens;
  sl->token_first[n] = pc->first;
  sl->sample_tokens[n] = ps->tokens;
  sl->sources[n] = job->source;
}

/* The batch's per-member views (what an empty batch of a member would be when no sample was
 * delivered). */
static void publish_members(al_stream *s, slot *sl) {
  for (size_t j = 0; j < s->n_members; j++) {
    al_stream_member *m = &sl->bm[j];
    m->name = s->members[j];
    if (!m->dtype) {
      m->dtype = "uint8";
      m->itemsize = 1;
    }
    m->typed = s->kinds[j] != THEADER_KIND_NONE || s->pixels[j]; /* pixels: (T, H, W, 3) */
    m->cropped = sl->mm[j].cropped;
    m->ndim = sl->mm[j].ndim;
    m->shapes = sl->mm[j].shapes;
    m->offsets = sl->mm[j].offsets;
    m->sizes = sl->mm[j].sizes;
  }
}

/* The batch of n samples (payload [0, end), `tokens`, the token range [lo, hi) of the group's
 * packed sequence) for the consumer: cu_seqlens behind the payload, the batch's fields, and
 * the device copy when asked for. */
static int publish(al_stream *s, slot *sl, const stream_plan_batch *pb, size_t n, size_t end,
                   uint64_t tokens, uint64_t lo, uint64_t hi) {
  sl->offsets[n] = end;
  /* cu_seqlens rides behind the payload so one copy moves both. */
  size_t cu_off = align_up(end, s->align);
  size_t total = cu_off + (n + 1) * sizeof(int32_t);
  int rc = stream_growbuf_reserve(&sl->buf, total, end);
  if (rc != AL_OK) return rc;
  if (cu_off > end) memset(sl->buf.p + end, 0, cu_off - end);
  memcpy(sl->buf.p + cu_off, sl->cu, (n + 1) * sizeof(int32_t));
  al_stream_batch *b = &sl->batch;
  memset(b, 0, sizeof *b);
  b->struct_size = sizeof *b;
  b->position = s->first + sl->seq * s->stride;
  b->step = pb->step;
  b->micro = pb->micro;
  b->n_micro = pb->n_micro;
  b->last_in_step = pb->micro + 1 == pb->n_micro;
  b->bucket = pb->bucket;
  b->step_samples = pb->step_samples;
  b->step_tokens = pb->step_tokens;
  b->tokens = tokens;
  b->n = n;
  b->keys = sl->keys;
  b->samples = sl->samples;
  b->shapes = sl->shapes;
  b->padded = sl->padded;
  b->cu_seqlens = sl->cu;
  b->offsets = sl->offsets;
  b->sizes = sl->sizes;
  b->data = sl->buf.p;
  b->data_bytes = end;
  b->cu_seqlens_offset = cu_off;
  b->copy_bytes = total;
  b->pinned = sl->buf.pinned;
  b->n_skipped = sl->n_skipped;
  b->skipped_keys = (const char *const *)sl->skipped_keys;
  b->skipped_reasons = (const char *const *)sl->skipped_reasons;
  publish_members(s, sl);
  b->n_members = s->n_members;
  b->members = sl->bm;
  memcpy(b->grid, pb->grid, sizeof b->grid);
  b->sp_degree = pb->sp_degree ? pb->sp_degree : 1;
  b->sp_rank = pb->sp_rank;
  b->sp_group_first = s->plan.rank - pb->sp_rank;
  b->sp_sharded = s->sp_shard != 0;
  b->shard_token_begin = lo;
  b->shard_token_end = hi;
  b->token_first = sl->token_first;
  b->sample_tokens = sl->sample_tokens;
  b->sources = sl->sources;
  if (s->sp_shard) shard_patch(s, b->patch);
  if (!s->device_copy) return AL_OK;
  if ((rc = device_copy(s, sl, total)) != AL_OK)
    return al_error_prefix(rc, "step %" PRIu32 " micro %" PRIu32 ": device copy", pb->step,
                           pb->micro);
  b->device_data = sl->dev;
  b->ready_event = sl->ready_ev;
  return AL_OK;
}

/* The token range [lo, hi) of the group's packed sequence (N planned tokens, padding
 * included, returned) this rank holds: with sp_shard, rank j of degree d holds [floor(j N /
 * d), floor((j + 1) N / d)), so the d ranges tile [0, N); without, [0, N). */
static uint64_t shard_range(const al_stream *s, const stream_plan_batch *pb,
                            const stream_plan_sample *samples, uint64_t *lo, uint64_t *hi) {
  uint64_t N = 0;
  for (size_t i = 0; i < pb->n; i++) N += samples[pb->first + i].tokens;
  uint64_t d = pb->sp_degree ? pb->sp_degree : 1, j = pb->sp_rank;
  *lo = s->sp_shard ? j * N / d : 0;
  *hi = s->sp_shard ? (j + 1) * N / d : N;
  return N;
}

/* The piece of the sample at tokens [at, at + len) of the packed sequence within [lo, hi):
 * 1 with *pc set when the batch holds some of it, 0 when none. Without sp_shard every sample
 * whole; with it, a sample without tokens belongs to the group's first rank. */
static int shard_piece(const al_stream *s, const stream_plan_batch *pb, uint64_t at, uint64_t len,
                       uint64_t lo, uint64_t hi, sample_piece *pc) {
  pc->first = 0;
  pc->count = len;
  if (!s->sp_shard) return 1;
  if (!len) return pb->sp_rank == 0;
  uint64_t a = at > lo ? at : lo, e = at + len < hi ? at + len : hi;
  if (a >= e) return 0;
  pc->first = a - at;
  pc->count = e - a;
  return 1;
}

/* ------------------------------------------------------------ plan cursor */

/* The rank plan's batch at a position, whichever holds it: the manifest's whole rank plan, or
 * the chunk of a run's feed that holds it (pinned until plan_done). */
typedef struct plan_ref {
  const stream_plan_batch *pb;
  const stream_plan_sample *samples; /* pb->first indexes them */
  const char *grid_error;            /* why the batch carries no latent grid, if so */
} plan_ref;

static int plan_at(al_stream *s, uint64_t pos, plan_ref *out) {
  if (!s->feed) {
    out->pb = &s->plan.batches[pos];
    out->samples = s->plan.samples;
    out->grid_error = s->plan.grid_error;
    return AL_OK;
  }
  return stream_feed_batch(s->feed, pos, &out->pb, &out->samples, &out->grid_error);
}

static void plan_done(al_stream *s, uint64_t pos) {
  if (s->feed) stream_feed_unpin(s->feed, pos);
}

/* The (step, micro) of position pos (< plan.n_batches). */
static void plan_place(const stream_rank_plan *p, uint64_t pos, uint32_t *step, uint32_t *micro) {
  if (p->fed_micro) {
    *step = (uint32_t)(pos / p->fed_micro);
    *micro = (uint32_t)(pos % p->fed_micro);
  } else {
    *step = p->batches[pos].step;
    *micro = p->batches[pos].micro;
  }
}

/* Fills the slot with its batch: each sample's members one after the other, each at an
 * aligned offset; a sample that fails is skipped or fails the batch (options.on_error). */
static void fill_batch(al_stream *s, stream_reader *rd, slot *sl, const plan_ref *ref);

static void fill(al_stream *s, stream_reader *rd, slot *sl) {
  uint64_t pos = s->first + sl->seq * s->stride;
  plan_ref ref;
  int rc = plan_at(s, pos, &ref);
  if (rc != AL_OK) {
    al_error_prefix(rc, "micro-batch %" PRIu64 " of the rank (step %" PRIu64 ")", pos,
                    s->plan.fed_micro ? pos / s->plan.fed_micro : 0);
    slot_set_error(sl, rc);
    return;
  }
  fill_batch(s, rd, sl, &ref);
  plan_done(s, pos);
}

static void fill_batch(al_stream *s, stream_reader *rd, slot *sl, const plan_ref *ref) {
  const stream_plan_batch *pb = ref->pb;
  sl->grid_error = ref->grid_error;
  int rc = fill_begin(s, sl, pb);
  if (rc != AL_OK) {
    slot_set_error(sl, rc);
    return;
  }
  size_t n = 0, off = 0, end = 0;
  uint64_t tokens = 0, planned = 0, lost_samples = 0, lost_tokens = 0;
  uint64_t lo = 0, hi = 0, next_at = 0;
  const uint64_t group_tokens = shard_range(s, pb, ref->samples, &lo, &hi);
  for (size_t i = 0; i < pb->n; i++) {
    if (stopping(s)) {
      slot_set_error(sl, al_set_error(AL_ESTATE, "stream closed"));
      return;
    }
    const stream_plan_sample *ps = &ref->samples[pb->first + i];
    uint64_t at = next_at; /* the sample's first token in the group's packed sequence */
    next_at += ps->tokens;
    sample_piece pc;
    if (!shard_piece(s, pb, at, ps->tokens, lo, hi, &pc)) continue; /* no token here */
    stream_source_job job;
    job.key = NULL;
    sample_cursor c = {off, end, 0};
    planned += pc.count;
    if (s->begun) atomic_store(&s->begun[sl->seq], (uint_fast32_t)(i + 1));
    rc = read_sample(s, rd, sl, pb, ps, &pc, n, tokens, &c, &job);
    if (rc != AL_OK) {
      if (!skip_sample(s, sl, pb, i, n, job.key, rc)) return;
      /* The step totals count real samples only, each sample and token once over all ranks:
       * a sample by the rank holding its first token, a token by the rank holding it. */
      lost_samples += !ps->padded && !pc.first;
      lost_tokens += ps->padded ? 0 : pc.count;
      continue;
    }
    tokens += pc.count;
    commit_sample(sl, ps, &pc, &job, n, tokens);
    n++;
    end = c.prev_end;
    off = c.cur;
  }
  if ((rc = publish(s, sl, pb, n, end, tokens, lo, s->sp_shard ? hi : tokens)) != AL_OK) {
    slot_set_error(sl, rc);
    return;
  }
  if (!s->sp_shard && pb->sp_rank) /* a whole micro-batch's skips: counted by its first rank */
    lost_samples = lost_tokens = 0;
  sl->batch.skipped_real_samples = lost_samples;
  sl->batch.skipped_real_tokens = lost_tokens;
  sl->batch.planned_tokens = planned;
  sl->batch.group_tokens = group_tokens;
}

typedef struct thread_arg {
  al_stream *s;
} thread_arg;

static void *reader_main(void *arg) {
  al_stream *s = arg;
  stream_reader *rd = NULL;
  int rc = stream_reader_new(&rd, s->shards, s->read_block);
  if (rc == AL_OK) stream_reader_set_max_member(rd, s->max_member);
  if (rc == AL_OK && (s->pinned || s->device_copy)) rc = stream_cuda_set_device(s->device);
  for (;;) {
    pthread_mutex_lock(&s->mu);
    slot *sl = NULL;
    for (;;) {
      if (s->stop || s->next_claim >= s->total) break;
      for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].state == SLOT_FREE) {
          sl = &s->slots[i];
          break;
        }
      if (sl) break;
      pthread_cond_wait(&s->cv_free, &s->mu);
    }
    if (!sl) {
      pthread_mutex_unlock(&s->mu);
      break;
    }
    sl->state = SLOT_FILLING;
    sl->seq = s->next_claim++;
    if (++s->in_use > s->max_in_use) s->max_in_use = s->in_use;
    pthread_mutex_unlock(&s->mu);

    double t0 = clock_now_s();
    if (rc != AL_OK)
      slot_set_error(sl, rc); /* the reader could not start: its first batch says why */
    else
      fill(s, rd, sl);
    double t1 = clock_now_s();

    pthread_mutex_lock(&s->mu);
    s->read_s += t1 - t0;
    sl->host_cap = sl->buf.cap;
    sl->state = SLOT_READY;
    pthread_cond_broadcast(&s->cv_ready);
    pthread_mutex_unlock(&s->mu);
    if (rc != AL_OK) break;
  }
  stream_reader_free(rd);
  return NULL;
}

/* ---------------------------------------------------------------- API */

/* Checks a resume state against the plan and sets first/stride from it. */
static int resume_from(al_stream *s, const al_stream_state *r, const al_stream_options *o) {
  const stream_rank_plan *p = &s->plan;
  if (r->version == 1)
    return al_set_error(AL_EVERSION,
                        "stream state version 1 names no manifest (it predates manifest "
                        "fingerprints), so it cannot be told apart from a state of another plan "
                        "of this index; start the epoch without a state (version %u expected)",
                        AL_STREAM_STATE_VERSION);
  if (r->version != AL_STREAM_STATE_VERSION)
    return al_set_error(AL_EVERSION, "stream state version %" PRIu32 ", expected %u", r->version,
                        AL_STREAM_STATE_VERSION);
  if (r->rank != p->rank || r->world != p->world || r->epoch != p->epoch || r->seed != p->seed ||
      r->index_fingerprint != p->index_fingerprint)
    return al_set_error(AL_ESTATE,
                        "stream state is of rank %" PRIu32 "/%" PRIu32 " epoch %" PRIu32
                        " seed %" PRIu64 " index %016" PRIx64 ", this stream is rank %" PRIu32
                        "/%" PRIu32 " epoch %" PRIu32 " seed %" PRIu64 " index %016" PRIx64,
                        r->rank, r->world, r->epoch, r->seed, r->index_fingerprint, p->rank,
                        p->world, p->epoch, p->seed, p->index_fingerprint);
  if (r->manifest_fingerprint != p->manifest_fingerprint)
    return al_set_error(AL_ESTATE,
                        "stream state belongs to %s %016" PRIx64
                        ", this stream reads %s %016" PRIx64
                        " (another plan of the same index, e.g. a re-plan)",
                        p->fed_micro ? "the plan" : "manifest", r->manifest_fingerprint,
                        p->fed_micro ? "run" : "manifest", p->manifest_fingerprint);
  if (r->stride == 0 || r->position > p->n_batches)
    return al_set_error(AL_ESTATE,
                        "stream state position %" PRIu64 " (stride %" PRIu32
                        ") out of range: %zu micro-batches",
                        r->position, r->stride, p->n_batches);
  if (r->position < p->fed_start)
    return al_set_error(AL_ESTATE,
                        "stream state position %" PRIu64 " (step %" PRIu32
                        ") lies before this stream's start step %" PRIu64,
                        r->position, r->next_step, p->fed_start / p->fed_micro);
  uint32_t at_step = 0, at_micro = 0;
  if (r->position < p->n_batches) plan_place(p, r->position, &at_step, &at_micro);
  if (r->position < p->n_batches && (at_step != r->next_step || at_micro != r->next_micro))
    return al_set_error(AL_ESTATE,
                        "stream state says micro-batch %" PRIu64 " is step %" PRIu32
                        " micro %" PRIu32 ", the %s has step %" PRIu32 " micro %" PRIu32
                        " there (another %s?)",
                        r->position, r->next_step, r->next_micro, p->fed_micro ? "run" : "manifest",
                        at_step, at_micro, p->fed_micro ? "run" : "manifest");
  if (r->position == p->n_batches && (r->next_step != UINT32_MAX || r->next_micro != UINT32_MAX))
    return al_set_error(AL_ESTATE,
                        "stream state says micro-batch %" PRIu64 " is step %" PRIu32
                        " micro %" PRIu32 ", but the rank's %zu micro-batches end there",
                        r->position, r->next_step, r->next_micro, p->n_batches);
  if (o->stride == 0) {
    s->first = r->position; /* continue exactly as the saved stream read */
    s->stride = r->stride;
  } else if (r->stride == 1) {
    s->first = r->position + o->first; /* a rank-level state, re-sliced (DataLoader workers) */
    s->stride = o->stride;
  } else {
    return al_set_error(AL_ESTATE,
                        "stream state of stride %" PRIu32
                        " cannot be re-sliced with stride %" PRIu32
                        "; resume it with stride 0 (unset)",
                        r->stride, o->stride);
  }
  s->base_delivered = r->delivered;
  s->base_skipped = r->skipped;
  return AL_OK;
}

/* Device copies: the device (option, else LOCAL_RANK, else 0) and the copy stream. */
static int open_device(al_stream *s, long dev, int devices) {
  if (devices == 0)
    return al_set_error(AL_EUNSUPPORTED,
                        "device copy requested but no CUDA device is usable "
                        "(cudaGetDeviceCount failed or found none)");
  if (dev < 0) {
    dev = 0;
    if (env_long("LOCAL_RANK", &dev) < 0)
      return al_set_error(AL_EINVAL, "LOCAL_RANK is not a number: '%s'", env_text("LOCAL_RANK"));
  }
  if (dev >= devices)
    return al_set_error(AL_EINVAL, "CUDA device %ld out of range (%d devices)", dev, devices);
  s->device = (int)dev;
  int rc = stream_cuda_set_device(s->device);
  if (rc == AL_OK) rc = stream_cuda_stream_create(&s->copy_stream);
  return rc;
}

/* The requested members (options.members, else options.ext, else "latent"): copied, checked
 * (non-empty, no duplicates, at most AL_STREAM_MAX_MEMBERS), with their header kinds. Which
 * member of a sample is its latent is the source's record (stream_source_job.latent). */
static int set_members(al_stream *s, const al_stream_options *o) {
  static const char *const dflt = "latent";
  const char *const one[1] = {o->ext ? o->ext : dflt};
  const char *const *names = o->members && o->n_members ? o->members : one;
  size_t n = o->members && o->n_members ? o->n_members : 1;
  if (n > AL_STREAM_MAX_MEMBERS)
    return al_set_error(AL_EINVAL, "%zu members requested, at most %d", n, AL_STREAM_MAX_MEMBERS);
  s->members = calloc(n, sizeof *s->members);
  s->kinds = calloc(n, sizeof *s->kinds);
  s->pixels = calloc(n, sizeof *s->pixels);
  if (!s->members || !s->kinds || !s->pixels) return al_set_error(AL_ENOMEM, "stream members");
  s->n_members = n;
  for (size_t j = 0; j < n; j++) {
    if (!names[j] || !*names[j] || strlen(names[j]) > AL_INDEX_EXT_MAX)
      return al_set_error(AL_EINVAL, "member %zu: empty or longer than %d bytes", j,
                          AL_INDEX_EXT_MAX);
    for (size_t k = 0; k < j; k++)
      if (!strcmp(names[k], names[j]))
        return al_set_error(AL_EINVAL, "member '%s' requested twice", names[j]);
    if (!(s->members[j] = strdup(names[j]))) return al_set_error(AL_ENOMEM, "stream members");
    s->kinds[j] = theader_kind_of(names[j]);
    s->pixels[j] = !strcmp(names[j], AL_STREAM_MEMBER_PIXELS);
  }
  return AL_OK;
}

/* With sp_shard a latent must be typed to be cut into tokens: a raw member named as a latent
 * ("latent" of a synth corpus) is refused at open. */
static int check_shard_members(const al_stream *s) {
  for (size_t j = 0; s->sp_shard && j < s->n_members; j++)
    if (s->kinds[j] == THEADER_KIND_NONE && al_member_is_latent(s->members[j]))
      return al_set_error(AL_EUNSUPPORTED,
                          "sp_shard: member '%s' is untyped (raw bytes), so its tokens cannot "
                          "be cut into shards; store latents as .npy or .safetensors, or "
                          "stream the group's whole micro-batch (sp_shard 0)",
                          s->members[j]);
  return AL_OK;
}

/* The options that stand on their own: on_error, threads and prefetch, align. */
static int check_options(const al_stream_options *o) {
  if (o->on_error != AL_STREAM_FAIL && o->on_error != AL_STREAM_SKIP_SAMPLE)
    return al_set_error(AL_EINVAL,
                        "on_error must be AL_STREAM_FAIL or AL_STREAM_SKIP_SAMPLE, got %d",
                        o->on_error);
  if (o->threads < 0 || o->prefetch < 0)
    return al_set_error(AL_EINVAL, "threads and prefetch must be >= 0");
  size_t align = o->align ? o->align : 64;
  if ((align & (align - 1)) || align < 8)
    return al_set_error(AL_EINVAL, "align must be a power of two >= 8, got %zu", align);
  if (o->sp_shard != 0 && o->sp_shard != 1)
    return al_set_error(AL_EINVAL, "sp_shard must be 0 or 1, got %d", o->sp_shard);
  al_storage_options st = {.s3_endpoint = o->s3_endpoint,
                           .s3_region = o->s3_region,
                           .s3_addressing = o->s3_addressing,
                           .remote_timeout_s = o->remote_timeout_s};
  int rc = al_storage_check(&st);
  if (rc) return rc;
  if (!(o->max_skip_fraction >= 0 && o->max_skip_fraction <= 1))
    return al_set_error(AL_EINVAL, "max_skip_fraction must be in [0, 1] (0 = %g), got %g",
                        AL_STREAM_MAX_SKIP_DEFAULT, o->max_skip_fraction);
  return AL_OK;
}

/* Skipping more than max_skip x the stream's planned samples fails the stream. */
static int over_budget(const al_stream *s, uint64_t skipped) {
  return (double)skipped > s->max_skip * (double)s->planned;
}

static int budget_error(const al_stream *s, uint64_t skipped, const char *last) {
  return al_set_error(AL_EFORMAT,
                      "skipped %" PRIu64 " of the %" PRIu64
                      " samples this stream reads, more than max_skip_fraction %g allows "
                      "(--max-skip-fraction); the last: %s",
                      skipped, s->planned, s->max_skip, last ? last : "?");
}

/* The samples of this stream's batches (with sp_shard, those with tokens in its shards), and
 * those the open found lacking a member: under AL_STREAM_SKIP_SAMPLE they will be skipped, so
 * a count past the budget (or every sample) fails here instead of mid-epoch. */
static void count_batch(al_stream *s, const stream_plan_batch *pb,
                        const stream_plan_sample *samples) {
  uint64_t lo, hi, at = 0;
  shard_range(s, pb, samples, &lo, &hi);
  for (size_t i = 0; i < pb->n; i++) {
    const stream_plan_sample *ps = &samples[pb->first + i];
    sample_piece pc;
    if (shard_piece(s, pb, at, ps->tokens, lo, hi, &pc)) {
      s->planned++;
      s->lacking += ps->lacks;
    }
    at += ps->tokens;
  }
}

/* A run's stream counts its samples chunk by chunk as it delivers (consumer, lock held): the
 * chunk holding `pos` when it was not counted yet (its batches of this stream). */
static int count_fed(al_stream *s, uint64_t pos) {
  if (!s->feed || pos < s->counted_end) return AL_OK;
  stream_feed_chunk c;
  int rc = stream_feed_chunk_of(s->feed, pos, &c);
  if (rc != AL_OK) return rc;
  uint64_t k0 = c.first > s->first ? (c.first - s->first + s->stride - 1) / s->stride : 0;
  for (uint64_t k = k0; k < s->total && s->first + k * s->stride < c.end; k++)
    count_batch(s, &c.batches[s->first + k * s->stride - c.first], c.samples);
  s->counted_end = c.end;
  stream_feed_unpin(s->feed, pos);
  return AL_OK;
}

static int count_planned(al_stream *s) {
  if (s->feed) return AL_OK; /* counted as its chunks are delivered (count_fed) */
  for (uint64_t k = 0; k < s->total; k++)
    count_batch(s, &s->plan.batches[s->first + k * s->stride], s->plan.samples);
  if (!s->lacking) return AL_OK;
  if (s->lacking == s->planned || over_budget(s, s->lacking)) {
    char why[128];
    snprintf(why, sizeof why, "%" PRIu64 " samples lack a requested member (found at open)",
             s->lacking);
    return al_error_prefix(budget_error(s, s->lacking, why), "stream open");
  }
  return AL_OK;
}

/* Which micro-batches: first, first+stride, ... of the rank sequence (or where the resume
 * state says). */
static int set_range(al_stream *s, const al_stream_options *o) {
  s->first = s->plan.fed_start + o->first;
  s->stride = o->stride ? o->stride : 1;
  if (o->resume) {
    al_stream_state r = AL_STREAM_STATE_INIT;
    int rc = struct_in(&r, sizeof r, AL_STREAM_STATE_V1, o->resume, "al_stream_open",
                       "al_stream_options.resume (al_stream_state)");
    if (rc == AL_OK) rc = resume_from(s, &r, o);
    if (rc != AL_OK) return rc;
  }
  s->total = s->first < s->plan.n_batches
                 ? (s->plan.n_batches - s->first + s->stride - 1) / s->stride
                 : 0;
  return AL_OK;
}

/* Memory: pinned when a device is there (unless refused), device copy on request. */
static int set_memory(al_stream *s, const al_stream_options *o) {
  int devices = stream_cuda_devices();
  s->device_copy = o->device_copy != 0;
  s->pinned = o->pinned == -1 ? 0 : devices > 0;
  if (o->pinned == 1 && devices == 0)
    return al_set_error(AL_EUNSUPPORTED, "pinned buffers requested but no CUDA device is usable");
  return s->device_copy ? open_device(s, o->cuda_device, devices) : AL_OK;
}

/* The pool of o->prefetch slots (default 4), with their CUDA events for device copies. */
static int open_pool(al_stream *s, const al_stream_options *o) {
  s->n_slots = o->prefetch ? o->prefetch : 4;
  s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
  if (!s->slots) return al_set_error(AL_ENOMEM, "stream pool");
  int rc = AL_OK;
  for (int i = 0; i < s->n_slots && rc == AL_OK; i++) {
    s->slots[i].buf.pinned = s->pinned;
    s->slots[i].mm = calloc(s->n_members, sizeof *s->slots[i].mm);
    s->slots[i].bm = calloc(s->n_members, sizeof *s->slots[i].bm);
    if (!s->slots[i].mm || !s->slots[i].bm) return al_set_error(AL_ENOMEM, "stream pool");
    if (s->device_copy) {
      rc = stream_cuda_event_create(&s->slots[i].ready_ev);
      if (rc == AL_OK) rc = stream_cuda_event_create(&s->slots[i].release_ev);
    }
  }
  return rc;
}

/* o->threads reader threads (default: the cores, 1 to 4). */
static int start_readers(al_stream *s, const al_stream_options *o) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = o->threads ? o->threads : (int)(cores < 1 ? 1 : cores > 4 ? 4 : cores);
  s->threads = calloc((size_t)threads, sizeof *s->threads);
  if (!s->threads) return al_set_error(AL_ENOMEM, "stream threads");
  for (int i = 0; i < threads; i++) {
    if (pthread_create(&s->threads[i], NULL, reader_main, s) != 0)
      return al_set_error(AL_ENOMEM, "cannot start reader thread %d", i);
    s->n_threads++;
  }
  return AL_OK;
}

/* The prefetcher's view of the plan (prefetch_internal.h): the plan cursor's. */
static int prefetch_batch(void *ctx, uint64_t pos, const stream_plan_batch **pb,
                          const stream_plan_sample **samples) {
  plan_ref ref;
  int rc = plan_at(ctx, pos, &ref);
  if (rc == AL_OK) {
    *pb = ref.pb;
    *samples = ref.samples;
  }
  return rc;
}

static void prefetch_done(void *ctx, uint64_t pos) { plan_done(ctx, pos); }

/* With a cache folder: the prefetcher of remote members (prefetch_internal.h). The streams
 * sharing the folder share half its limit as look-ahead: this node's ranks (LOCAL_WORLD_SIZE,
 * as torchrun sets it; 1 when unset) times this rank's streams (stride: DataLoader workers), so
 * what they fetch ahead together stays within it and none evicts another's unread members. */
static int start_prefetch(al_stream *s, const al_stream_options *o) {
  if (!o->cache_dir || !*o->cache_dir || o->fetch_parallel < 0) return AL_OK;
  uint64_t limit = o->cache_bytes ? o->cache_bytes : (1ull << 30);
  long local = 1;
  if (env_long("LOCAL_WORLD_SIZE", &local) < 0 || local < 1 || local > 1 << 20)
    return al_set_error(AL_EINVAL, "LOCAL_WORLD_SIZE is not a positive number: '%s'",
                        env_text("LOCAL_WORLD_SIZE"));
  uint64_t sharing = (uint64_t)local * (s->stride ? s->stride : 1);
  if (!(s->begun = calloc(s->total ? s->total : 1, sizeof *s->begun)))
    return al_set_error(AL_ENOMEM, "prefetch: %" PRIu64 " batches", s->total);
  stream_prefetch_args a = {.src = &s->src,
                            .batch = prefetch_batch,
                            .done = prefetch_done,
                            .ctx = s,
                            .shards = s->shards,
                            .members = (const char *const *)s->members,
                            .n_members = s->n_members,
                            .first = s->first,
                            .stride = s->stride,
                            .total = s->total,
                            .delivered = &s->delivered_pub,
                            .begun = s->begun,
                            .ahead_bytes = limit / 2 / sharing,
                            .parallel = o->fetch_parallel ? o->fetch_parallel : 4,
                            .read_block = s->read_block};
  return stream_prefetch_start(&s->prefetch, &a);
}

/* The storage settings of shards at URLs: the options, else the environment, else what the
 * index recorded (al_storage_resolve), with the note naming a mismatch for error messages. */
static int set_storage(al_stream *s, const al_stream_options *o) {
  al_storage_options given = {.s3_endpoint = o->s3_endpoint,
                              .s3_region = o->s3_region,
                              .s3_addressing = o->s3_addressing,
                              .remote_timeout_s = o->remote_timeout_s},
                     used;
  al_storage_origin from = AL_STORAGE_ORIGIN_INIT;
  char note[1024];
  int rc = al_storage_resolve(&given, s->src.index, &used, &from);
  if (rc) return rc;
  al_storage_mismatch(&used, &from, s->src.index, note, sizeof note);
  return stream_shard_table_set_storage(s->shards, &used, note);
}

/* A run's feed, begun where the stream reads first; the first chunk's patch and grid (what a
 * manifest's rank plan carries for the whole epoch) are the run's. */
static int begin_feed(al_stream *s) {
  if (!s->feed || !s->total) return AL_OK;
  int rc = stream_feed_begin(s->feed, s->first);
  stream_feed_chunk c;
  if (rc == AL_OK) rc = stream_feed_chunk_of(s->feed, s->first, &c);
  if (rc != AL_OK) return rc;
  memcpy(s->plan.patch, c.patch, sizeof s->plan.patch);
  if (c.grid_error && !(s->plan.grid_error = strdup(c.grid_error)))
    rc = al_set_error(AL_ENOMEM, "stream");
  stream_feed_unpin(s->feed, s->first);
  return rc;
}

static int open_engine(al_stream **out, const stream_source *src, stream_rank_plan *plan,
                       stream_feed *feed, const al_stream_options *opts) {
  al_stream_options o;
  *out = NULL;
  int rc = struct_in(&o, sizeof o, AL_STREAM_OPTIONS_V1, opts, "al_stream_open",
                     "al_stream_options");
  if (rc == AL_OK) rc = check_options(&o);
  al_stream *s = rc == AL_OK ? calloc(1, sizeof *s) : NULL;
  if (rc == AL_OK && !s) rc = al_set_error(AL_ENOMEM, "stream");
  if (rc != AL_OK) {
    stream_feed_free(feed);
    if (src->release) src->release(src->ctx);
    return rc;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv_free, NULL);
  pthread_cond_init(&s->cv_ready, NULL);
  s->src = *src;
  s->plan = *plan;
  s->feed = feed;
  memset(plan, 0, sizeof *plan);
  s->on_error = o.on_error;
  s->sp_shard = o.sp_shard;
  s->max_skip = o.max_skip_fraction > 0 ? o.max_skip_fraction : AL_STREAM_MAX_SKIP_DEFAULT;
  s->align = o.align ? o.align : 64;
  s->read_block = o.read_block ? o.read_block : ((size_t)1 << 20);
  s->max_member = o.max_member_bytes;
  s->max_sample = o.max_sample_bytes
                      ? o.max_sample_bytes
                      : env_u64("ADAPTIVELOAD_MAX_SAMPLE_BYTES", AL_STREAM_MAX_SAMPLE_DEFAULT);
  rc = set_members(s, &o);
  if (rc == AL_OK) rc = check_shard_members(s);
  if (rc == AL_OK) rc = set_range(s, &o);
  if (rc == AL_OK) rc = begin_feed(s);
  if (rc == AL_OK) rc = count_planned(s);
  if (rc == AL_OK) rc = set_memory(s, &o);
  if (rc == AL_OK) rc = open_pool(s, &o);
  if (rc == AL_OK) rc = stream_shard_table_new(&s->shards, &s->src);
  if (rc == AL_OK) rc = stream_shard_table_set_cache(s->shards, o.cache_dir, o.cache_bytes);
  if (rc == AL_OK) rc = set_storage(s, &o);
  /* The prefetcher first: the readers publish their progress into its `begun`. */
  if (rc == AL_OK) rc = start_prefetch(s, &o);
  if (rc == AL_OK) rc = start_readers(s, &o);
  if (rc != AL_OK) {
    al_stream_close(s);
    return rc;
  }
  *out = s;
  return AL_OK;
}

int stream_open_source(al_stream **out, const stream_source *src, stream_rank_plan *plan,
                       const al_stream_options *opts) {
  return open_engine(out, src, plan, NULL, opts);
}

int stream_open_fed(al_stream **out, const stream_source *src, stream_rank_plan *plan,
                    stream_feed *feed, const al_stream_options *opts) {
  if (!feed || !plan->fed_micro) {
    stream_feed_free(feed);
    if (src->release) src->release(src->ctx);
    return al_set_error(AL_EINVAL, "stream_open_fed: no feed, or a plan that is not a run's");
  }
  return open_engine(out, src, plan, feed, opts);
}

struct stream_feed *stream_get_feed(const al_stream *s) {
  return s ? s->feed : NULL;
}

/* The growth of a counter that only grows; 0 if it ever went back, so nothing wraps. */
static uint64_t counter_growth(uint64_t now, uint64_t *last) {
  uint64_t d = now > *last ? now - *last : 0;
  if (now > *last) *last = now;
  return d;
}

/* Charges the remote counters' growth since the previous delivery to batch b (consumer
 * thread only: at_delivery is not shared). */
static void account_remote(al_stream *s, al_stream_batch *b) {
  stream_remote_counts now;
  b->fetched_bytes = b->requests = b->cache_hits = b->cache_misses = 0;
  if (!stream_shard_table_remote_counts(s->shards, &now)) return;
  stream_remote_counts *last = &s->at_delivery;
  b->fetched_bytes = counter_growth(now.bytes_fetched, &last->bytes_fetched);
  b->requests = counter_growth(now.requests, &last->requests);
  b->cache_hits = counter_growth(now.cache_hits, &last->cache_hits);
  b->cache_misses = counter_growth(now.cache_misses, &last->cache_misses);
}

int al_stream_next(al_stream *s, const al_stream_batch **out) {
  *out = NULL;
  pthread_mutex_lock(&s->mu);
  if (s->failed) {
    int rc = al_set_error(s->fail_status, "%s", s->fail_msg ? s->fail_msg : "stream failed");
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  if (s->next_deliver >= s->total) {
    int rc = AL_EOF;
    if (s->planned && !s->st_samples)
      rc = al_set_error(AL_EFORMAT,
                        "the stream delivered no sample: all %" PRIu64
                        " of its samples were "
                        "skipped (%" PRIu64 " batches)",
                        s->planned, s->total);
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  slot *sl;
  double stall = 0;
  for (;;) {
    sl = NULL;
    for (int i = 0; i < s->n_slots; i++)
      if (s->slots[i].state == SLOT_READY && s->slots[i].seq == s->next_deliver) {
        sl = &s->slots[i];
        break;
      }
    if (sl) break;
    if (s->held == s->n_slots) {
      pthread_mutex_unlock(&s->mu);
      return al_set_error(AL_ESTATE,
                          "all %d stream buffers are held by the caller: release a batch first",
                          s->n_slots);
    }
    double t0 = clock_now_s();
    pthread_cond_wait(&s->cv_ready, &s->mu);
    double waited = clock_now_s() - t0;
    stall += waited;
    s->stall_s += waited;
  }
  if (sl->status == AL_OK) {
    int rc = count_fed(s, s->first + s->next_deliver * s->stride);
    if (rc != AL_OK) slot_set_error(sl, rc);
  }
  if (sl->status == AL_OK && sl->batch.n_skipped &&
      over_budget(s, s->st_skipped + sl->batch.n_skipped)) {
    /* Past the skip budget: the stream fails at this batch, as AL_STREAM_FAIL would. */
    slot_set_error(sl, budget_error(s, s->st_skipped + sl->batch.n_skipped,
                                    sl->skipped_reasons[sl->n_skipped - 1]));
  }
  if (sl->status != AL_OK) {
    /* AL_STREAM_FAIL: stop here; the state keeps pointing at this batch. */
    s->failed = 1;
    s->fail_status = sl->status;
    s->fail_msg = strdup(sl->error ? sl->error : "batch failed");
    s->stop = 1;
    sl->state = SLOT_FREE;
    s->in_use--;
    pthread_cond_broadcast(&s->cv_free);
    int rc = al_set_error(s->fail_status, "%s", s->fail_msg ? s->fail_msg : "batch failed");
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  sl->state = SLOT_HELD;
  s->held++;
  s->next_deliver++;
  atomic_store(&s->delivered_pub, s->next_deliver);
  /* A run's chunks whose batches were all delivered are freed, and the feed plans on. */
  if (s->feed) stream_feed_release(s->feed, s->first + s->next_deliver * s->stride);
  s->st_samples += sl->batch.n;
  s->st_bytes += sl->batch.data_bytes;
  s->st_skipped += sl->batch.n_skipped;
  pthread_mutex_unlock(&s->mu);
  sl->batch.stall_seconds = stall;
  account_remote(s, &sl->batch);
  *out = &sl->batch;
  return AL_OK;
}

static slot *slot_of(al_stream *s, const al_stream_batch *b) {
  for (int i = 0; i < s->n_slots; i++)
    if (&s->slots[i].batch == b) return &s->slots[i];
  return NULL;
}

int al_stream_release_after(al_stream *s, const al_stream_batch *b, void *cuda_stream) {
  if (!s || !b) return al_set_error(AL_EINVAL, "release: NULL stream or batch");
  pthread_mutex_lock(&s->mu);
  slot *sl = slot_of(s, b);
  if (!sl || sl->state != SLOT_HELD) {
    pthread_mutex_unlock(&s->mu);
    return al_set_error(AL_EINVAL,
                        "release: batch not held (released twice, or from another stream)");
  }
  if (cuda_stream != (void *)-1 && s->device_copy) {
    int rc = stream_cuda_event_record(sl->release_ev, cuda_stream);
    if (rc != AL_OK) {
      pthread_mutex_unlock(&s->mu);
      return rc;
    }
    sl->release_pending = 1;
  }
  sl->state = SLOT_FREE;
  s->held--;
  s->in_use--;
  pthread_cond_signal(&s->cv_free);
  pthread_mutex_unlock(&s->mu);
  return AL_OK;
}

int al_stream_release(al_stream *s, const al_stream_batch *b) {
  return al_stream_release_after(s, b, (void *)-1);
}

int al_stream_batch_wait(const al_stream_batch *b, void *cuda_stream) {
  if (!b) return al_set_error(AL_EINVAL, "batch_wait: NULL batch");
  if (!b->ready_event) return AL_OK;
  return stream_cuda_stream_wait_event(cuda_stream, b->ready_event);
}

int al_stream_batch_sync(const al_stream_batch *b) {
  if (!b) return al_set_error(AL_EINVAL, "batch_sync: NULL batch");
  if (!b->ready_event) return AL_OK;
  return stream_cuda_event_sync(b->ready_event);
}

/* The state after the batches delivered so far, in the library's struct. */
static void get_state(const al_stream *s, al_stream_state *out) {
  al_stream *m = (al_stream *)s;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  pthread_mutex_lock(&m->mu);
  uint64_t pos = s->first + s->next_deliver * s->stride;
  out->version = AL_STREAM_STATE_VERSION;
  out->rank = s->plan.rank;
  out->world = s->plan.world;
  out->epoch = s->plan.epoch;
  out->seed = s->plan.seed;
  out->index_fingerprint = s->plan.index_fingerprint;
  out->position = pos < s->plan.n_batches ? pos : s->plan.n_batches;
  out->stride = (uint32_t)s->stride;
  out->next_step = out->next_micro = UINT32_MAX;
  if (pos < s->plan.n_batches) plan_place(&s->plan, pos, &out->next_step, &out->next_micro);
  out->skipped = s->base_skipped + s->st_skipped;
  out->delivered = s->base_delivered + s->next_deliver;
  out->manifest_fingerprint = s->plan.manifest_fingerprint;
  pthread_mutex_unlock(&m->mu);
}

int al_stream_get_state(const al_stream *s, al_stream_state *caller) {
  if (!s || !caller) return al_set_error(AL_EINVAL, "al_stream_get_state: NULL argument");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_stream_state), AL_STREAM_STATE_V1,
                           "al_stream_get_state", "al_stream_state", &n);
  if (rc) return rc;
  al_stream_state st = AL_STREAM_STATE_INIT;
  get_state(s, &st);
  struct_out(caller, &st, n);
  return AL_OK;
}

int al_stream_state_at(const al_stream *s, uint64_t position, al_stream_state *caller) {
  if (!s || !caller) return al_set_error(AL_EINVAL, "al_stream_state_at: NULL argument");
  size_t n;
  int rc = struct_out_size(caller, sizeof(al_stream_state), AL_STREAM_STATE_V1,
                           "al_stream_state_at", "al_stream_state", &n);
  if (rc) return rc;
  al_stream_state st, *out = &st;
  get_state(s, out);
  if (position > s->plan.n_batches) {
    struct_out(caller, out, n);
    return al_set_error(AL_ERANGE, "position %" PRIu64 " past the %zu micro-batches of the rank",
                        position, s->plan.n_batches);
  }
  out->position = position;
  out->stride = 1;
  out->next_step = out->next_micro = UINT32_MAX;
  if (position < s->plan.n_batches)
    plan_place(&s->plan, position, &out->next_step, &out->next_micro);
  struct_out(caller, out, n);
  return AL_OK;
}

int al_stream_get_stats(const al_stream *s, al_stream_stats *caller) {
  if (!s || !caller) return al_set_error(AL_EINVAL, "al_stream_get_stats: NULL argument");
  size_t n;
  int rc0 = struct_out_size(caller, sizeof(al_stream_stats), AL_STREAM_STATS_V1,
                            "al_stream_get_stats", "al_stream_stats", &n);
  if (rc0) return rc0;
  al_stream_stats st, *out = &st;
  al_stream *m = (al_stream *)s;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  pthread_mutex_lock(&m->mu);
  out->batches = s->next_deliver;
  out->samples = s->st_samples;
  out->bytes = s->st_bytes;
  out->skipped = s->st_skipped;
  out->total_batches = s->total;
  out->stall_seconds = s->stall_s;
  out->read_seconds = s->read_s;
  out->buffers = s->n_slots;
  for (int i = 0; i < s->n_slots; i++) {
    if (s->slots[i].host_cap) out->buffers_allocated++;
    out->host_bytes += s->slots[i].host_cap;
    out->device_bytes += s->slots[i].dev_cap;
  }
  out->max_in_use = s->max_in_use;
  out->pinned = s->pinned;
  out->device_copy = s->device_copy;
  out->threads = s->n_threads;
  out->lacking = s->lacking;
  pthread_mutex_unlock(&m->mu);
  stream_remote_counts rc;
  if (stream_shard_table_remote_counts(s->shards, &rc)) {
    out->bytes_fetched = rc.bytes_fetched;
    out->requests = rc.requests;
    out->cache_hits = rc.cache_hits;
    out->cache_misses = rc.cache_misses;
    out->evicted_bytes = rc.evicted_bytes;
  }
  struct_out(caller, out, n);
  return AL_OK;
}

void al_stream_close(al_stream *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_broadcast(&s->cv_free);
  pthread_cond_broadcast(&s->cv_ready);
  pthread_mutex_unlock(&s->mu);
  /* Readers and fetchers retrying against a server that is down stop now, not at the end of
   * their retry budgets. */
  stream_shard_table_cancel(s->shards);
  /* Readers and the prefetcher waiting for a window of a run's feed wake now. */
  stream_feed_cancel(s->feed);
  for (int i = 0; i < s->n_threads; i++) pthread_join(s->threads[i], NULL);
  free(s->threads);
  stream_prefetch_stop(s->prefetch);
  stream_feed_free(s->feed);
  free(s->begun);
  if (s->slots) {
    /* Copies may still read host buffers: let them finish before freeing. */
    for (int i = 0; i < s->n_slots; i++)
      if (s->slots[i].copy_pending) stream_cuda_event_sync(s->slots[i].ready_ev);
    for (int i = 0; i < s->n_slots; i++) slot_free(&s->slots[i], s->n_members);
    free(s->slots);
  }
  stream_cuda_stream_destroy(s->copy_stream);
  stream_shard_table_free(s->shards);
  stream_rank_plan_free(&s->plan);
  if (s->src.release) s->src.release(s->src.ctx);
  for (size_t j = 0; s->members && j < s->n_members; j++) free(s->members[j]);
  free(s->members);
  free(s->kinds);
  free(s->pixels);
  free(s->fail_msg);
  pthread_cond_destroy(&s->cv_free);
  pthread_cond_destroy(&s->cv_ready);
  pthread_mutex_destroy(&s->mu);
  free(s);
}
