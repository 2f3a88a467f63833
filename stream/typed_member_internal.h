/*
 * typed_member_internal.h - reading a typed member (.npy, .safetensors, possibly .lz4) into
 * a batch buffer without its header, and cropping the latent to its bucket's grid while
 * copying. Internal to //stream.
 *
 * Plain members of seekable shards are read with pread: the header first (a few KiB,
 * more when the header says so), then only the bytes delivered: whole (C, T_b) planes when
 * the crop keeps whole rows, else each plane's band of rows into the reader's scratch and
 * its rows' middle parts copied out (memcpy of contiguous runs). LZ4 members and members of
 * libarchive shards are decoded whole into the scratch and cropped from there.
 *
 * The crop (latent member, shape (C, T, H, W) or (C, H, W) = T 1): channels whole, frames
 * [0, T_b), rows [y0, y0 + h_b) with y0 = (H - h_b) / 2, columns [x0, x0 + w_b) with
 * x0 = (W - w_b) / 2 (integer division), C order. A grid smaller than the bucket's in any
 * dimension is an error naming the key and both grids.
 */
#ifndef AL_TYPED_MEMBER_INTERNAL_H
#define AL_TYPED_MEMBER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/tensor_header_internal.h"
#include "stream/member_reader_internal.h"

/* What one typed read delivered. */
typedef struct stream_typed_out {
  theader_dtype dtype;
  uint32_t ndim;
  uint64_t shape[THEADER_MAX_DIMS];
  size_t bytes; /* written at b->p + off */
} stream_typed_out;

/* Reads typed member `job` (header kind `kind`) into b->p + off (growing b, keeping its first
 * `off` bytes). grid (T_b, h_b, w_b) non-NULL: crop to it. */
int stream_typed_read(stream_reader *r, const stream_source_job *job, theader_kind kind,
                      const uint32_t *grid, stream_growbuf *b, size_t off, stream_typed_out *out);

/* Like stream_typed_read with a grid, delivering only the crop's latent frames [t0, t0 + tn)
 * (C, tn, h_b, w_b): only those frames are read from a plain member (LZ4 and libarchive
 * members are still decoded whole). out->shape is the whole crop's; out->bytes what was
 * written. AL_EINVAL when the frames are not within [0, T_b). What a token shard reads
 * (al_stream_options.sp_shard). */
int stream_typed_read_frames(stream_reader *r, const stream_source_job *job, theader_kind kind,
                             const uint32_t *grid, uint32_t t0, uint32_t tn, stream_growbuf *b,
                             size_t off, stream_typed_out *out);

#endif /* AL_TYPED_MEMBER_INTERNAL_H */
