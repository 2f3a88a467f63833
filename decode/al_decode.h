/*
 * al_decode.h - raw video and image members probed and decoded to a bucket's pixel shape.
 *
 * A member (KEY.mp4 / .mov / .mkv / .webm, KEY.jpg / .jpeg / .png / .webp) is read through an
 * al_decode_input: its bytes in memory, or a read callback that answers ranged reads, so that a
 * probe of a clip in a shard (or at a URL) reads its container header only. The CPU path is
 * FFmpeg (libavformat, libavcodec multi-threaded, libswscale), linked dynamically from the
 * system (Debian libavformat-dev & co.). Codecs: whatever that libavcodec decodes (Debian's:
 * H.264, HEVC, VP9, AV1 through libdav1d/libaom, MJPEG, PNG, WebP); a stream it lacks a decoder
 * for is AL_EUNSUPPORTED.
 *
 * The contract (a GPU path must give the same frames and the same geometry):
 *
 *   Frames. A clip's frames are numbered 0, 1, ... in presentation order. For a bucket of T
 *   frames, the span is frames [s0, s0 + L) with s0 = opts.span_start (0) and L =
 *   opts.span_frames (0 = T): by default the clip's first T frames, as the stream's latent crop
 *   keeps latent frames [0, T_b) of a clip cut in time. Output frame i (0 <= i < T) is clip frame
 *       f_i = s0 + floor(i * L / T)                      (al_decode_frame_index)
 *   so L = T takes every frame of the span and L > T samples it evenly, f_0 = s0 always. A
 *   frame index at or past the frames the stream holds is AL_ERANGE naming the frame; so is a
 *   span past opts.expect_frames (the count the index recorded), and a stream that holds fewer
 *   frames than expect_frames is AL_EFORMAT (the JSON's frame count is not what it holds).
 *
 *   Rotation. The stream's display matrix (mp4/mov `tkhd`, a `rotate` tag) gives a clockwise
 *   rotation r in {0, 90, 180, 270}; it is applied, so the displayed size (W_s, H_s) is the
 *   coded size swapped at 90 and 270. Other angles and mirrored matrices are AL_EUNSUPPORTED.
 *
 *   Scale and crop (al_decode_geometry). With the displayed size (W_s, H_s) and the bucket's
 *   (W_b, H_b): s = max(W_b / W_s, H_b / H_s) (aspect kept, the bucket covered), the scaled
 *   size W' = max(W_b, round(W_s * s)), H' = max(H_b, round(H_s * s)) (round half up), and the
 *   centre crop at x0 = (W' - W_b) / 2, y0 = (H' - H_b) / 2 (integer division). Each decoded
 *   frame is converted to RGB and scaled to (W', H') (before rotation: (H', W') at 90 and 270)
 *   by libswscale's bilinear filter (SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT),
 *   YUV to RGB with the stream's matrix and range (BT.601 and limited range when untagged),
 *   then rotated and the (W_b, H_b) window at (x0, y0) of the rotated image copied out.
 *
 *   Output: T x H_b x W_b x 3 uint8, C order (frame, row, column, R G B), no padding.
 *
 *   Reading. Frames are demuxed from the keyframe at or before f_0 (a seek on the container's
 *   index; no seek when f_0 is 0) up to f_{T-1}; packets past it are never read. Matroska and
 *   WebM hold no frame count: their packets are demuxed (not decoded) once first to number the
 *   frames. An image holds one frame, so its bucket has T = 1 (a larger T asks for frames it
 *   does not hold: AL_ERANGE, as for a clip).
 *
 * Bad input is an error, never a short or a concealed result: an unparsable container, a
 * truncated stream (frames missing before f_{T-1}), a decoder error or a frame the decoder
 * marks corrupt (errors are not concealed: AV_EF_EXPLODE), a gap in the frames' timestamps,
 * variable frame rate (timestamps not evenly spaced: AL_EUNSUPPORTED; opts.allow_vfr numbers
 * frames by their order instead) are AL_EFORMAT / AL_EUNSUPPORTED / AL_ERANGE with a message
 * "WHERE: frame N: what" (WHERE is al_decode_input.where, e.g. "s-0.tar: key 'k' member
 * 'k.mp4' at byte 1536"). A failed call leaves `out` unspecified.
 *
 * Ownership: nothing is kept after a call returns; the input's bytes and callback are used only
 * during it. Thread safety: every function is safe to call from any number of threads at once
 * (no state shared between calls; FFmpeg's codec registry is read-only). The read callback is
 * called from the calling thread only. Process-wide: the first probe or decode installs an
 * FFmpeg log callback (av_log_set_callback) that keeps each thread's last error line for the
 * messages here and prints nothing, so FFmpeg's own stderr output stops for the whole process
 * (a host that wants it back sets its own callback after that first call).
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_decode_input,
 * al_decode_options, al_media_info and al_decode_geom start with `size_t struct_size` (the
 * AL_DECODE_*_INIT macros); inputs and options take 0 as this header's struct, a struct the
 * library fills must carry its size.
 */
#ifndef AL_DECODE_H
#define AL_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"
#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a member extension holds (al_decode_kind_of). */
typedef enum al_media_kind {
  AL_MEDIA_NONE = 0,  /* not a raw media member */
  AL_MEDIA_VIDEO = 1, /* mp4, mov, mkv, webm (and m4v) */
  AL_MEDIA_IMAGE = 2  /* jpg, jpeg, png, webp */
} al_media_kind;

/* The kind of member extension `ext` ("mp4", "k.mp4" is not an extension; case-insensitive;
 * a trailing ".lz4" is not accepted: raw media are stored as they are). NULL: AL_MEDIA_NONE. */
AL_API al_media_kind al_decode_kind_of(const char *ext);

/* Reads up to n bytes of the member at `offset` (from its first byte) into buf. Returns the
 * bytes read (0 at or past the end), or a negative value on failure (the probe or decode then
 * fails with AL_EIO; a message the callback recorded with al_set_error is kept as the cause). */
typedef int64_t (*al_decode_read_fn)(void *ctx, uint64_t offset, void *buf, size_t n);

/* The member to read. Either `data` (size bytes in memory) or `read` (with `size` the member's
 * size in bytes) is set; `read` wins when both are. */
typedef struct al_decode_input {
  size_t struct_size; /* sizeof(al_decode_input) (AL_DECODE_INPUT_INIT); 0 = this header's */
  const void *data;
  uint64_t size;
  al_decode_read_fn read;
  void *read_ctx;
  const char *where; /* the member named in messages; NULL = "member" */
  const char *ext;   /* its extension ("mp4", "webm", "jpg"): names the container; NULL or
                        unknown: the container is probed from the bytes */
} al_decode_input;
#define AL_DECODE_INPUT_INIT AL_STRUCT_INIT(al_decode_input)
#define AL_DECODE_INPUT_V1 sizeof(al_decode_input)

#define AL_DECODE_NAME_MAX 32

/* What al_decode_probe reads from the container header. */
typedef struct al_media_info {
  size_t struct_size;     /* sizeof(al_media_info) (AL_MEDIA_INFO_INIT) */
  al_media_kind kind;     /* video or image (as the bytes say, not the extension) */
  uint32_t width, height; /* displayed size: rotation applied */
  uint32_t coded_width, coded_height;
  uint32_t frames;                    /* frames the stream holds (images: 1) */
  uint32_t rotation;                  /* clockwise degrees applied for display: 0, 90, 180, 270 */
  double fps;                         /* frames per second (images: 0) */
  uint32_t vfr;                       /* 1: timestamps not evenly spaced (variable frame rate) */
  uint32_t frames_counted;            /* 1: the container holds no frame count (Matroska, WebM):
                                         counted by demuxing every packet (no decoding) */
  uint64_t bytes_read;                /* bytes the probe read from the input */
  char codec[AL_DECODE_NAME_MAX];     /* libavcodec's name: "h264", "hevc", "vp9", "av1", "mjpeg",
                                         "png", "webp" */
  char container[AL_DECODE_NAME_MAX]; /* libavformat's first name: "mov", "matroska", ... */
  uint32_t decodable;                 /* 1: this build has a decoder for the codec */
} al_media_info;
#define AL_MEDIA_INFO_INIT AL_STRUCT_INIT(al_media_info)
#define AL_MEDIA_INFO_V1 sizeof(al_media_info)

/* Probes the member: container, first video stream, frame count and timestamps, without
 * decoding a frame. For mp4/mov the frame count and timestamps come from the sample table the
 * header holds (a ranged read of the `moov` box wherever it is); where the container has no
 * count, packets are demuxed (not decoded) to count them. An unreadable container, no video
 * stream or a zero size is AL_EFORMAT; a rotation that is no multiple of 90 AL_EUNSUPPORTED.
 * A codec without a decoder is not an error here: `decodable` is 0. */
AL_API int al_decode_probe(const al_decode_input *in, al_media_info *out);

/* Zero means default for every field. */
typedef struct al_decode_options {
  size_t struct_size;     /* sizeof(al_decode_options) (AL_DECODE_OPTIONS_INIT); 0 = this one */
  uint32_t threads;       /* decoder threads; 0 = FFmpeg's automatic count (one per core) */
  uint32_t span_start;    /* s0, the span's first frame (default 0) */
  uint32_t span_frames;   /* L, frames of the span (0 = the bucket's T) */
  uint32_t expect_frames; /* frames the index recorded for the clip; 0 = not checked */
  uint32_t allow_vfr;     /* 1: variable frame rate accepted, frames numbered by order */
} al_decode_options;
#define AL_DECODE_OPTIONS_INIT AL_STRUCT_INIT(al_decode_options)
#define AL_DECODE_OPTIONS_V1 sizeof(al_decode_options)

/* Clip frame of output frame i: s0 + floor(i * L / T) (L = 0 means T). UINT32_MAX for T = 0,
 * i >= T or an index past 32 bits. */
AL_API uint32_t al_decode_frame_index(uint32_t i, uint32_t t, uint32_t span_start,
                                      uint32_t span_frames);

/* The scale and crop of the contract above. */
typedef struct al_decode_geom {
  size_t struct_size;                   /* sizeof(al_decode_geom) (AL_DECODE_GEOM_INIT) */
  uint32_t scaled_width, scaled_height; /* W', H' (displayed orientation) */
  uint32_t crop_x, crop_y;              /* x0, y0 in the scaled, rotated image */
} al_decode_geom;
#define AL_DECODE_GEOM_INIT AL_STRUCT_INIT(al_decode_geom)
#define AL_DECODE_GEOM_V1 sizeof(al_decode_geom)

/* Geometry for a displayed size (width, height) into a bucket (bucket_w, bucket_h). AL_EINVAL
 * for a zero size; AL_ERANGE past 65536 pixels a side. */
AL_API int al_decode_geometry(uint32_t width, uint32_t height, uint32_t bucket_w, uint32_t bucket_h,
                              al_decode_geom *out);

/* Decodes `t` frames of the member at bucket shape (width, height) into `out` (out_size bytes,
 * at least t * height * width * 3), as the contract above says. */
AL_API int al_decode_frames(const al_decode_input *in, uint32_t width, uint32_t height, uint32_t t,
                            const al_decode_options *opts, uint8_t *out, size_t out_size);

/* The value of the constant `name` of this header, as al_status_constant (common/al_status.h)
 * answers for its own: AL_OK, AL_ENOTFOUND naming it, AL_EINVAL for NULL. Thread-safe. */
AL_API int al_decode_constant(const char *name, int64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* AL_DECODE_H */
