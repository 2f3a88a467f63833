/*
 * decode.c - al_decode.h over FFmpeg: probe (container header only), frames at a bucket's
 * shape (seek, decode, swscale to the scaled size, rotate and crop while copying out).
 */
#include "decode/al_decode.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>

#include "common/struct_abi_internal.h"
#include "decode/decode_internal.h"

#define IO_BUF_SIZE (64 * 1024)
#define MAX_SIDE 65536u

/* ---- FFmpeg's log: kept per thread (the last error line), never printed ---- */

static _Thread_local char av_last[256];
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_cb(void *avcl, int level, const char *fmt, va_list ap) {
  (void)avcl;
  if (level > AV_LOG_ERROR) return;
  char line[sizeof av_last];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  if (n > 0) memcpy(av_last, line, n + 1);
}

static void log_init(void) { av_log_set_callback(log_cb); }

static const char *av_err(int e, char *buf, size_t n) {
  av_strerror(e, buf, n);
  if (av_last[0] != '\0') {
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, " (%s)", av_last);
  }
  return buf;
}

/* ---- public helpers ---- */

al_media_kind al_decode_kind_of(const char *ext) {
  static const char *const video[] = {"mp4", "mov", "m4v", "mkv", "webm"};
  static const char *const image[] = {"jpg", "jpeg", "png", "webp"};
  if (ext == NULL) return AL_MEDIA_NONE;
  for (size_t i = 0; i < sizeof video / sizeof *video; i++)
    if (strcasecmp(ext, video[i]) == 0) return AL_MEDIA_VIDEO;
  for (size_t i = 0; i < sizeof image / sizeof *image; i++)
    if (strcasecmp(ext, image[i]) == 0) return AL_MEDIA_IMAGE;
  return AL_MEDIA_NONE;
}

uint32_t al_decode_frame_index(uint32_t i, uint32_t t, uint32_t span_start, uint32_t span_frames) {
  if (t == 0 || i >= t) return UINT32_MAX;
  uint64_t l = span_frames ? span_frames : t;
  uint64_t f = (uint64_t)span_start + (uint64_t)i * l / t;
  return f >= UINT32_MAX ? UINT32_MAX : (uint32_t)f;
}

int decode_geometry(uint32_t w, uint32_t h, uint32_t bw, uint32_t bh, al_decode_geom *g) {
  if (w == 0 || h == 0 || bw == 0 || bh == 0)
    return al_set_error(AL_EINVAL, "decode geometry: a zero size (%ux%u into %ux%u)", w, h, bw, bh);
  if (w > MAX_SIDE || h > MAX_SIDE || bw > MAX_SIDE || bh > MAX_SIDE)
    return al_set_error(AL_ERANGE, "decode geometry: %ux%u into %ux%u: a side above %u", w, h, bw,
                        bh, MAX_SIDE);
  /* s = max(bw / w, bh / h), compared exactly in integers: bw * h vs bh * w. */
  uint64_t sw, sh;
  if ((uint64_t)bw * h >= (uint64_t)bh * w) { /* width ratio wins: W' = bw */
    sw = bw;
    sh = ((uint64_t)h * bw * 2 + w) / (2 * (uint64_t)w); /* round(h * bw / w), half up */
  } else {
    sh = bh;
    sw = ((uint64_t)w * bh * 2 + h) / (2 * (uint64_t)h);
  }
  if (sw < bw) sw = bw;
  if (sh < bh) sh = bh;
  memset(g, 0, sizeof *g);
  g->struct_size = sizeof *g;
  g->scaled_width = (uint32_t)sw;
  g->scaled_height = (uint32_t)sh;
  g->crop_x = (uint32_t)((sw - bw) / 2);
  g->crop_y = (uint32_t)((sh - bh) / 2);
  return AL_OK;
}

int al_decode_geometry(uint32_t width, uint32_t height, uint32_t bucket_w, uint32_t bucket_h,
                       al_decode_geom *out) {
  size_t n;
  if (out == NULL) return al_set_error(AL_EINVAL, "al_decode_geometry: out is NULL");
  int rc = struct_out_size(out, sizeof(al_decode_geom), AL_DECODE_GEOM_V1, "al_decode_geometry",
                           "al_decode_geom", &n);
  if (rc != AL_OK) return rc;
  al_decode_geom g;
  rc = decode_geometry(width, height, bucket_w, bucket_h, &g);
  if (rc != AL_OK) return rc;
  struct_out(out, &g, n);
  return AL_OK;
}

/* ---- the input as an AVIOContext ---- */

typedef struct io_state {
  al_decode_input in;
  uint64_t pos;
  uint64_t bytes_read;
  int failed; /* the callback failed (its message kept) */
} io_state;

static int io_read(void *opaque, uint8_t *buf, int n) {
  io_state *s = opaque;
  if (s->pos >= s->in.size) return AVERROR_EOF;
  uint64_t left = s->in.size - s->pos;
  size_t want = (uint64_t)n < left ? (size_t)n : (size_t)left;
  int64_t got;
  if (s->in.read) {
    got = s->in.read(s->in.read_ctx, s->pos, buf, want);
    if (got < 0) {
      s->failed = 1;
      return AVERROR(EIO);
    }
    if (got == 0) return AVERROR_EOF;
    if ((uint64_t)got > want) got = (int64_t)want;
  } else {
    memcpy(buf, (const uint8_t *)s->in.data + s->pos, want);
    got = (int64_t)want;
  }
  s->pos += (uint64_t)got;
  s->bytes_read += (uint64_t)got;
  return (int)got;
}

static int64_t io_seek(void *opaque, int64_t off, int whence) {
  io_state *s = opaque;
  whence &= ~AVSEEK_FORCE;
  if (whence == AVSEEK_SIZE) return (int64_t)s->in.size;
  int64_t base = whence == SEEK_SET   ? 0
                 : whence == SEEK_CUR ? (int64_t)s->pos
                 : whence == SEEK_END ? (int64_t)s->in.size
                                      : -1;
  if (base < 0 || base + off < 0) return AVERROR(EINVAL);
  s->pos = (uint64_t)(base + off);
  return (int64_t)s->pos;
}

/* The container named by the extension (NULL: probe the bytes). */
static const AVInputFormat *format_of(const char *ext) {
  if (ext == NULL) return NULL;
  const char *name = NULL;
  if (!strcasecmp(ext, "mp4") || !strcasecmp(ext, "mov") || !strcasecmp(ext, "m4v"))
    name = "mov";
  else if (!strcasecmp(ext, "mkv") || !strcasecmp(ext, "webm"))
    name = "matroska";
  else if (!strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg"))
    name = "jpeg_pipe";
  else if (!strcasecmp(ext, "png"))
    name = "png_pipe";
  else if (!strcasecmp(ext, "webp"))
    name = "webp_pipe";
  return name ? av_find_input_format(name) : NULL;
}

/* ---- one open member ---- */

typedef struct media {
  io_state io;
  const char *where;
  AVFormatContext *fmt;
  AVIOContext *pb;
  int si; /* the video stream */
  AVStream *st;
  int image;
  uint32_t rotation;
  /* Timestamps (stream time base): frame i presents at t0 + i * d (d > 0), when known. */
  int have_grid;
  int64_t t0;
  double d;
  uint32_t frames; /* 0: unknown */
  int vfr;
  int counted;
} media;

static void media_close(media *m) {
  if (m->fmt) avformat_close_input(&m->fmt);
  if (m->pb) {
    av_freep(&m->pb->buffer);
    avio_context_free(&m->pb);
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Frame count, the grid and whether it is even, from n timestamps (sorted here). */
static void grid_from(media *m, int64_t *ts, size_t n) {
  m->frames = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
  if (n == 0) return;
  qsort(ts, n, sizeof *ts, cmp_i64);
  m->t0 = ts[0];
  if (n < 2) return;
  m->d = (double)(ts[n - 1] - ts[0]) / (double)(n - 1);
  if (m->d <= 0) {
    m->vfr = 1;
    return;
  }
  m->have_grid = 1;
  double tol = fmax(1.01, 0.02 * m->d);
  for (size_t i = 0; i < n; i++) {
    double want = (double)ts[0] + (double)i * m->d;
    if (fabs((double)ts[i] - want) > tol) {
      m->vfr = 1;
      break;
    }
  }
}

static int media_open(media *m, const al_decode_input *in_user, const char *fn) {
  memset(m, 0, sizeof *m);
  m->si = -1;
  int rc = struct_in(&m->io.in, sizeof m->io.in, AL_DECODE_INPUT_V1, in_user, fn,
                     "al_decode_input");
  if (rc != AL_OK) return rc;
  m->where = m->io.in.where ? m->io.in.where : "member";
  if (in_user == NULL || (m->io.in.read == NULL && m->io.in.data == NULL))
    return al_set_error(AL_EINVAL, "%s: %s: no bytes and no read callback", fn, m->where);
  if (m->io.in.size == 0) return al_set_error(AL_EFORMAT, "%s: empty (0 bytes)", m->where);
  pthread_once(&log_once, log_init);
  av_last[0] = '\0';
  uint8_t *buf = av_malloc(IO_BUF_SIZE);
  if (buf == NULL) return al_set_error(AL_ENOMEM, "%s: out of memory", m->where);
  m->pb = avio_alloc_context(buf, IO_BUF_SIZE, 0, &m->io, io_read, NULL, io_seek);
  if (m->pb == NULL) {
    av_free(buf);
    return al_set_error(AL_ENOMEM, "%s: out of memory", m->where);
  }
  m->fmt = avformat_alloc_context();
  if (m->fmt == NULL) return al_set_error(AL_ENOMEM, "%s: out of memory", m->where);
  m->fmt->pb = m->pb;
  m->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  char eb[512];
  int e = avformat_open_input(&m->fmt, NULL, format_of(m->io.in.ext), NULL);
  if (e < 0) {
    m->fmt = NULL; /* freed by avformat_open_input */
    if (m->io.failed) return al_error_prefix(AL_EIO, "%s: reading the container header", m->where);
    return al_set_error(AL_EFORMAT, "%s: not a readable container: %s", m->where,
                        av_err(e, eb, sizeof eb));
  }
  for (unsigned i = 0; i < m->fmt->nb_streams; i++) {
    AVStream *st = m->fmt->streams[i];
    if (st->codecpar->codec_type == AVMEDIA_TYPE_VIDEO &&
        !(st->disposition & AV_DISPOSITION_ATTACHED_PIC)) {
      m->si = (int)i;
      m->st = st;
      break;
    }
  }
  if (m->st == NULL) return al_set_error(AL_EFORMAT, "%s: no video stream", m->where);
  for (unsigned i = 0; i < m->fmt->nb_streams; i++)
    if ((int)i != m->si) m->fmt->streams[i]->discard = AVDISCARD_ALL;
  m->image = (m->fmt->iformat->flags & AVFMT_NOTIMESTAMPS) ||
             strstr(m->fmt->iformat->name, "_pipe") != NULL;
  const uint8_t *dm = av_stream_get_side_data(m->st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
  if (dm != NULL) {
    const int32_t *mat = (const int32_t *)dm;
    double ccw = av_display_rotation_get(mat);
    if (isnan(ccw))
      return al_set_error(AL_EUNSUPPORTED, "%s: display matrix with no rotation", m->where);
    double cw = fmod(-ccw + 720.0, 360.0);
    long r = lround(cw / 90.0) * 90 % 360;
    if (fabs(cw - (double)r) > 0.5 && fabs(cw - (double)r - 360.0) > 0.5)
      return al_set_error(AL_EUNSUPPORTED, "%s: rotation of %.1f degrees (only multiples of 90)",
                          m->where, cw);
    /* A mirror: the determinant of the 2x2 part is negative. */
    double det = (double)mat[0] * mat[4] - (double)mat[1] * mat[3];
    if (det < 0)
      return al_set_error(AL_EUNSUPPORTED, "%s: mirrored display matrix (flip)", m->where);
    m->rotation = (uint32_t)r;
  }
  return AL_OK;
}

/* Frame count and grid: the container's index when it holds every frame (mov), else (counting
 * or not) packets demuxed from the start. `count`: demux when the index cannot say. */
static int media_frames(media *m, int count) {
  if (m->image) {
    m->frames = 1;
    return AL_OK;
  }
  int ne = avformat_index_get_entries_count(m->st);
  if (ne > 0 && m->st->nb_frames > 0) {
    int64_t *ts = malloc((size_t)ne * sizeof *ts);
    if (ts == NULL) return al_set_error(AL_ENOMEM, "%s: out of memory", m->where);
    size_t n = 0;
    for (int i = 0; i < ne; i++) {
      const AVIndexEntry *e = avformat_index_get_entry(m->st, i);
      if (e && !(e->flags & AVINDEX_DISCARD_FRAME)) ts[n++] = e->timestamp;
    }
    if ((int64_t)n == m->st->nb_frames || m->st->nb_frames == ne) {
      grid_from(m, ts, n);
      free(ts);
      /* The index holds decode timestamps; the first presented one comes from the stream's
       * start (mov shifts presentation to start there). */
      if (m->st->start_time != AV_NOPTS_VALUE) m->t0 = m->st->start_time;
      return AL_OK;
    }
    free(ts);
  }
  if (!count) return AL_OK;
  m->counted = 1;
  size_t cap = 1024, n = 0;
  int64_t *ts = malloc(cap * sizeof *ts);
  AVPacket *pkt = av_packet_alloc();
  if (ts == NULL || pkt == NULL) {
    free(ts);
    av_packet_free(&pkt);
    return al_set_error(AL_ENOMEM, "%s: out of memory", m->where);
  }
  int rc = AL_OK;
  char eb[512];
  for (;;) {
    int e = av_read_frame(m->fmt, pkt);
    if (e == AVERROR_EOF) break;
    if (e < 0) {
      rc = m->io.failed ? al_error_prefix(AL_EIO, "%s: packet %zu", m->where, n)
                        : al_set_error(AL_EFORMAT, "%s: packet %zu: %s", m->where, n,
                                       av_err(e, eb, sizeof eb));
      break;
    }
    if (pkt->stream_index == m->si) {
      if (n == cap) {
        int64_t *t2 = realloc(ts, 2 * cap * sizeof *ts);
        if (t2 == NULL) {
          rc = al_set_error(AL_ENOMEM, "%s: out of memory", m->where);
          av_packet_unref(pkt);
          break;
        }
        ts = t2;
        cap *= 2;
      }
      ts[n++] = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
    }
    av_packet_unref(pkt);
  }
  av_packet_free(&pkt);
  if (rc == AL_OK) grid_from(m, ts, n);
  free(ts);
  if (rc == AL_OK && n == 0)
    rc = al_set_error(AL_EFORMAT, "%s: the video stream has no frames", m->where);
  if (rc == AL_OK) {
    int e = avformat_seek_file(m->fmt, m->si, INT64_MIN, m->t0, m->t0, 0);
    if (e < 0) rc = al_set_error(AL_EFORMAT, "%s: cannot seek back to the start", m->where);
  }
  return rc;
}

static int open_decoder(media *m, uint32_t threads, AVCodecContext **out) {
  const AVCodec *c = avcodec_find_decoder(m->st->codecpar->codec_id);
  if (c == NULL)
    return al_set_error(AL_EUNSUPPORTED, "%s: codec %s: no decoder in this build", m->where,
                        avcodec_get_name(m->st->codecpar->codec_id));
  AVCodecContext *cx = avcodec_alloc_context3(c);
  if (cx == NULL) return al_set_error(AL_ENOMEM, "%s: out of memory", m->where);
  char eb[512];
  int e = avcodec_parameters_to_context(cx, m->st->codecpar);
  if (e >= 0) {
    cx->thread_count = (int)threads;
    cx->thread_type = FF_THREAD_FRAME | FF_THREAD_SLICE;
    cx->err_recognition |= AV_EF_EXPLODE | AV_EF_CRCCHECK;
    cx->pkt_timebase = m->st->time_base;
    e = avcodec_open2(cx, c, NULL);
  }
  if (e < 0) {
    avcodec_free_context(&cx);
    return al_set_error(AL_EUNSUPPORTED, "%s: codec %s: %s", m->where, c->name,
                        av_err(e, eb, sizeof eb));
  }
  *out = cx;
  return AL_OK;
}

/* ---- probe ---- */

/* Images: their size is known only to the decoder; an image's bytes are the whole member. */
static int probe_image(media *m, uint32_t *w, uint32_t *h) {
  AVCodecContext *cx = NULL;
  int rc = open_decoder(m, 1, &cx);
  if (rc != AL_OK) return rc;
  AVPacket *pkt = av_packet_alloc();
  AVFrame *fr = av_frame_alloc();
  char eb[512];
  rc = AL_EFORMAT;
  if (pkt && fr) {
    int e;
    while ((e = av_read_frame(m->fmt, pkt)) >= 0) {
      if (pkt->stream_index == m->si) {
        e = avcodec_send_packet(cx, pkt);
        av_packet_unref(pkt);
        if (e < 0) break;
        e = avcodec_receive_frame(cx, fr);
        if (e >= 0) break;
        if (e != AVERROR(EAGAIN)) break;
      } else {
        av_packet_unref(pkt);
      }
    }
    if (e == AVERROR_EOF || e == AVERROR(EAGAIN)) {
      avcodec_send_packet(cx, NULL);
      e = avcodec_receive_frame(cx, fr);
    }
    if (e >= 0 && fr->width > 0 && fr->height > 0) {
      *w = (uint32_t)fr->width;
      *h = (uint32_t)fr->height;
      rc = AL_OK;
    } else if (m->io.failed) {
      rc = al_error_prefix(AL_EIO, "%s: frame 0", m->where);
    } else {
      rc = al_set_error(AL_EFORMAT, "%s: frame 0: %s", m->where,
                        e < 0 ? av_err(e, eb, sizeof eb) : "no picture");
    }
  } else {
    rc = al_set_error(AL_ENOMEM, "%s: out of memory", m->where);
  }
  av_frame_free(&fr);
  av_packet_free(&pkt);
  avcodec_free_context(&cx);
  return rc;
}

int al_decode_probe(const al_decode_input *in, al_media_info *out) {
  size_t n;
  if (out == NULL) return al_set_error(AL_EINVAL, "al_decode_probe: out is NULL");
  int rc = struct_out_size(out, sizeof(al_media_info), AL_MEDIA_INFO_V1, "al_decode_probe",
                           "al_media_info", &n);
  if (rc != AL_OK) return rc;
  media m;
  al_media_info mi;
  memset(&mi, 0, sizeof mi);
  mi.struct_size = sizeof mi;
  rc = media_open(&m, in, "al_decode_probe");
  if (rc == AL_OK) {
    const AVCodecParameters *par = m.st->codecpar;
    uint32_t cw = (uint32_t)(par->width > 0 ? par->width : 0);
    uint32_t ch = (uint32_t)(par->height > 0 ? par->height : 0);
    if (m.image) rc = probe_image(&m, &cw, &ch);
    if (rc == AL_OK) rc = media_frames(&m, 1);
    if (rc == AL_OK && (cw == 0 || ch == 0))
      rc = al_set_error(AL_EFORMAT, "%s: the video stream has no size", m.where);
    if (rc == AL_OK) {
      mi.kind = m.image ? AL_MEDIA_IMAGE : AL_MEDIA_VIDEO;
      mi.coded_width = cw;
      mi.coded_height = ch;
      int swap = m.rotation == 90 || m.rotation == 270;
      mi.width = swap ? ch : cw;
      mi.height = swap ? cw : ch;
      mi.rotation = m.rotation;
      mi.frames = m.frames;
      if (!m.image) {
        double grid = m.have_grid && m.d > 0 ? 1.0 / (m.d * av_q2d(m.st->time_base)) : 0;
        double avg = m.st->avg_frame_rate.num > 0 && m.st->avg_frame_rate.den > 0
                         ? av_q2d(m.st->avg_frame_rate)
                         : 0;
        /* A coarse time base (Matroska's milliseconds) rounds the grid: the container's rate,
         * when it agrees within 1%, is the exact one. */
        if (grid > 0 && avg > 0 && fabs(avg - grid) <= 0.01 * grid)
          mi.fps = avg;
        else if (grid > 0)
          mi.fps = grid;
        else if (m.st->avg_frame_rate.num > 0 && m.st->avg_frame_rate.den > 0)
          mi.fps = av_q2d(m.st->avg_frame_rate);
        else if (m.st->r_frame_rate.num > 0 && m.st->r_frame_rate.den > 0)
          mi.fps = av_q2d(m.st->r_frame_rate);
      }
      mi.vfr = (uint32_t)m.vfr;
      mi.frames_counted = (uint32_t)m.counted;
      snprintf(mi.codec, sizeof mi.codec, "%s", avcodec_get_name(par->codec_id));
      snprintf(mi.container, sizeof mi.container, "%.*s", (int)strcspn(m.fmt->iformat->name, ","),
               m.fmt->iformat->name);
      mi.decodable = avcodec_find_decoder(par->codec_id) != NULL;
      if (mi.frames == 0) rc = al_set_error(AL_EFORMAT, "%s: no frame count", m.where);
    }
  }
  mi.bytes_read = m.io.bytes_read;
  media_close(&m);
  if (rc == AL_OK) struct_out(out, &mi, n);
  return rc;
}

/* ---- decode ---- */

typedef struct conv {
  struct SwsContext *sws;
  uint32_t rot;
  uint32_t sw, sh; /* scaled size before rotation */
  uint32_t bw, bh, x0, y0;
  uint8_t *rgb;              /* sw x sh x 3 */
  struct SwsContext *cs_for; /* the context the colour details were set on */
  int cs, full;
} conv;

static int conv_frame(conv *c, const AVFrame *f, uint8_t *dst, const char *where, uint32_t idx) {
  c->sws = sws_getCachedContext(c->sws, f->width, f->height, (enum AVPixelFormat)f->format,
                                (int)c->sw, (int)c->sh, AV_PIX_FMT_RGB24,
                                SWS_BILINEAR | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, NULL, NULL,
                                NULL);
  if (c->sws == NULL)
    return al_set_error(AL_EUNSUPPORTED, "%s: frame %u: cannot convert pixel format %s", where, idx,
                        av_get_pix_fmt_name((enum AVPixelFormat)f->format));
  int cs = f->colorspace == AVCOL_SPC_UNSPECIFIED ? SWS_CS_ITU601 : (int)f->colorspace;
  if (cs == AVCOL_SPC_RGB || cs > AVCOL_SPC_ICTCP) cs = SWS_CS_ITU601;
  int full = f->color_range == AVCOL_RANGE_JPEG || f->format == AV_PIX_FMT_YUVJ420P ||
             f->format == AV_PIX_FMT_YUVJ422P || f->format == AV_PIX_FMT_YUVJ444P;
  if (c->sws != c->cs_for || cs != c->cs || full != c->full) {
    const int *coef = sws_getCoefficients(cs);
    int *inv, *tab, srcr, dstr, b, ct, sat;
    if (sws_getColorspaceDetails(c->sws, &inv, &srcr, &tab, &dstr, &b, &ct, &sat) >= 0)
      sws_setColorspaceDetails(c->sws, coef, full, coef, 1, b, ct, sat);
    c->cs_for = c->sws;
    c->cs = cs;
    c->full = full;
  }
  uint8_t *dp[4] = {c->rgb, NULL, NULL, NULL};
  int ds[4] = {(int)c->sw * 3, 0, 0, 0};
  int h = sws_scale(c->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dp, ds);
  if (h != (int)c->sh) return al_set_error(AL_EFORMAT, "%s: frame %u: scaling failed", where, idx);
  /* Rotate and crop: output (x, y) is displayed (X, Y) = (x + x0, y + y0), read from the
   * unrotated scaled image S (sw x sh): 0: S(X, Y); 90: S(Y, sh-1-X); 180: S(sw-1-X, sh-1-Y);
   * 270: S(sw-1-Y, X). */
  const uint8_t *s = c->rgb;
  size_t ss = (size_t)c->sw * 3;
  for (uint32_t y = 0; y < c->bh; y++) {
    uint8_t *o = dst + (size_t)y * c->bw * 3;
    uint32_t Y = y + c->y0;
    if (c->rot == 0) {
      memcpy(o, s + (size_t)Y * ss + (size_t)c->x0 * 3, (size_t)c->bw * 3);
      continue;
    }
    for (uint32_t x = 0; x < c->bw; x++) {
      uint32_t X = x + c->x0, sx, sy;
      if (c->rot == 90) {
        sx = Y;
        sy = c->sh - 1 - X;
      } else if (c->rot == 180) {
        sx = c->sw - 1 - X;
        sy = c->sh - 1 - Y;
      } else {
        sx = c->sw - 1 - Y;
        sy = X;
      }
      memcpy(o + (size_t)x * 3, s + (size_t)sy * ss + (size_t)sx * 3, 3);
    }
  }
  return AL_OK;
}

int al_decode_frames(const al_decode_input *in, uint32_t width, uint32_t height, uint32_t t,
                     const al_decode_options *opts_user, uint8_t *out, size_t out_size) {
  al_decode_options o;
  int rc = struct_in(&o, sizeof o, AL_DECODE_OPTIONS_V1, opts_user, "al_decode_frames",
                     "al_decode_options");
  if (rc != AL_OK) return rc;
  if (t == 0 || width == 0 || height == 0)
    return al_set_error(AL_EINVAL, "al_decode_frames: bucket %ux%u x %u frames: a zero size", width,
                        height, t);
  if (width > MAX_SIDE || height > MAX_SIDE)
    return al_set_error(AL_ERANGE, "al_decode_frames: bucket %ux%u: a side above %u", width, height,
                        MAX_SIDE);
  uint64_t frame_bytes = (uint64_t)width * height * 3;
  if (out == NULL || (uint64_t)out_size / t < frame_bytes)
    return al_set_error(AL_EINVAL,
                        "al_decode_frames: out holds %zu bytes, %u x %u x %u x 3 = %llu needed",
                        out_size, t, height, width, (unsigned long long)(frame_bytes * t));
  uint32_t last = al_decode_frame_index(t - 1, t, o.span_start, o.span_frames);
  uint32_t first = o.span_start;
  media m;
  rc = media_open(&m, in, "al_decode_frames");
  if (rc != AL_OK) {
    media_close(&m);
    return rc;
  }
  AVCodecContext *cx = NULL;
  AVPacket *pkt = NULL;
  AVFrame *fr = NULL;
  conv c;
  memset(&c, 0, sizeof c);
  char eb[512];
  if (last == UINT32_MAX) {
    rc = al_set_error(AL_ERANGE, "%s: span %u + %u frames past 32 bits", m.where, o.span_start,
                      o.span_frames);
    goto done;
  }
  if (o.expect_frames && last >= o.expect_frames) {
    rc = al_set_error(AL_ERANGE, "%s: frame %u: the index records %u frames", m.where, last,
                      o.expect_frames);
    goto done;
  }
  /* The grid: mov's index says it (no packet read); others are demuxed once when a seek or a
   * frame count needs it. */
  rc = media_frames(&m, first > 0 || o.expect_frames > 0 || !m.image);
  if (rc != AL_OK) goto done;
  if (m.vfr && !o.allow_vfr) {
    rc = al_set_error(AL_EUNSUPPORTED,
                      "%s: variable frame rate (%u frames, timestamps not evenly "
                      "spaced): not supported",
                      m.where, m.frames);
    goto done;
  }
  if (m.frames && o.expect_frames && m.frames < o.expect_frames) {
    rc = al_set_error(AL_EFORMAT, "%s: the stream holds %u frames, the index records %u", m.where,
                      m.frames, o.expect_frames);
    goto done;
  }
  if (m.frames && last >= m.frames) {
    rc = al_set_error(AL_ERANGE, "%s: frame %u: the stream holds %u frames", m.where, last,
                      m.frames);
    goto done;
  }
  rc = open_decoder(&m, o.threads, &cx);
  if (rc != AL_OK) goto done;
  /* Geometry: displayed size from the coded one and the rotation. */
  uint32_t cw = (uint32_t)m.st->codecpar->width, ch = (uint32_t)m.st->codecpar->height;
  int geom_ready = 0;
  pkt = av_packet_alloc();
  fr = av_frame_alloc();
  if (pkt == NULL || fr == NULL) {
    rc = al_set_error(AL_ENOMEM, "%s: out of memory", m.where);
    goto done;
  }
  int use_ts = !m.image && !(m.vfr && o.allow_vfr);
  int64_t t0 = m.t0;
  /* Without a seek the first frame out is frame 0 and gives t0; a seek takes the container's. */
  int t0_known = first == 0 ? 0 : m.counted ? 1 : m.st->start_time != AV_NOPTS_VALUE;
  if (first > 0 && use_ts) {
    if (!m.have_grid || !t0_known) {
      rc = al_set_error(AL_EUNSUPPORTED, "%s: frame %u: no frame timestamps to seek by", m.where,
                        first);
      goto done;
    }
    int64_t target = t0 + (int64_t)llround((double)first * m.d);
    int e = av_seek_frame(m.fmt, m.si, target, AVSEEK_FLAG_BACKWARD);
    if (e < 0) {
      rc = al_set_error(AL_EFORMAT, "%s: frame %u: seek failed: %s", m.where, first,
                        av_err(e, eb, sizeof eb));
      goto done;
    }
  }
  uint32_t next = 0;  /* next output frame */
  int64_t seen = -1;  /* index of the last decoded frame */
  int64_t order = -1; /* decoded frames counted in order (images, allow_vfr) */
  int eof = 0;
  while (next < t) {
    int e;
    if (!eof) {
      e = av_read_frame(m.fmt, pkt);
      if (e == AVERROR_EOF) {
        eof = 1;
        e = avcodec_send_packet(cx, NULL);
      } else if (e < 0) {
        rc = m.io.failed ? al_error_prefix(AL_EIO, "%s: after frame %lld", m.where, (long long)seen)
                         : al_set_error(AL_EFORMAT, "%s: frame %lld: %s", m.where,
                                        (long long)seen + 1, av_err(e, eb, sizeof eb));
        goto done;
      } else {
        if (pkt->stream_index != m.si) {
          av_packet_unref(pkt);
          continue;
        }
        e = avcodec_send_packet(cx, pkt);
        av_packet_unref(pkt);
      }
      if (e < 0 && e != AVERROR(EAGAIN) && e != AVERROR_EOF) {
        rc = al_set_error(AL_EFORMAT, "%s: frame %lld: %s", m.where, (long long)seen + 1,
                          av_err(e, eb, sizeof eb));
        goto done;
      }
    }
    for (;;) {
      e = avcodec_receive_frame(cx, fr);
      if (e == AVERROR(EAGAIN)) break;
      if (e == AVERROR_EOF) {
        rc = al_set_error(seen + 1 < (int64_t)m.frames ? AL_EFORMAT : AL_ERANGE,
                          "%s: frame %u: the stream ends after frame %lld (truncated or short "
                          "of the frames its header counts: %u)",
                          m.where, al_decode_frame_index(next, t, o.span_start, o.span_frames),
                          (long long)seen, m.frames);
        goto done;
      }
      if (e < 0) {
        rc = al_set_error(AL_EFORMAT, "%s: frame %lld: %s", m.where, (long long)seen + 1,
                          av_err(e, eb, sizeof eb));
        goto done;
      }
      order++;
      int64_t idx = order;
      if (use_ts) {
        int64_t ts = fr->best_effort_timestamp != AV_NOPTS_VALUE ? fr->best_effort_timestamp
                                                                 : fr->pts;
        if (ts == AV_NOPTS_VALUE) {
          rc = al_set_error(AL_EFORMAT, "%s: frame after %lld: no timestamp", m.where,
                            (long long)seen);
          goto done;
        }
        if (!t0_known) { /* no seek happened: the first frame out is frame 0 */
          t0 = ts;
          t0_known = 1;
        }
        if (m.have_grid) {
          double q = (double)(ts - t0) / m.d;
          idx = llround(q);
          if (fabs(q - (double)idx) > 0.25) {
            rc = al_set_error(o.allow_vfr ? AL_EFORMAT : AL_EUNSUPPORTED,
                              "%s: frame after %lld: timestamp %lld off the %.3f fps grid "
                              "(variable frame rate)",
                              m.where, (long long)seen, (long long)ts,
                              1.0 / (m.d * av_q2d(m.st->time_base)));
            goto done;
          }
        } else {
          idx = order;
        }
      }
      if (fr->decode_error_flags || (fr->flags & AV_FRAME_FLAG_CORRUPT)) {
        rc = al_set_error(AL_EFORMAT, "%s: frame %lld: the decoder marks it corrupt", m.where,
                          (long long)idx);
        goto done;
      }
      if (idx <= seen && seen >= 0 && use_ts) {
        rc = al_set_error(AL_EFORMAT, "%s: frame %lld: decoded again after frame %lld", m.where,
                          (long long)idx, (long long)seen);
        goto done;
      }
      uint32_t want = al_decode_frame_index(next, t, o.span_start, o.span_frames);
      if (seen >= 0 && idx > seen + 1 && (uint64_t)seen + 1 <= want) {
        rc = al_set_error(AL_EFORMAT,
                          "%s: frame %lld: missing (the decoder went from frame %lld "
                          "to %lld)",
                          m.where, (long long)seen + 1, (long long)seen, (long long)idx);
        goto done;
      }
      if (seen < 0 && idx > (int64_t)want) {
        rc = al_set_error(AL_EFORMAT, "%s: frame %u: missing (decoding starts at frame %lld)",
                          m.where, want, (long long)idx);
        goto done;
      }
      seen = idx;
      if (idx < (int64_t)want) {
        av_frame_unref(fr);
        continue;
      }
      if (!geom_ready) {
        if (fr->width != (int)cw || fr->height != (int)ch) {
          cw = (uint32_t)fr->width;
          ch = (uint32_t)fr->height;
        }
        int swap = m.rotation == 90 || m.rotation == 270;
        al_decode_geom g;
        rc = decode_geometry(swap ? ch : cw, swap ? cw : ch, width, height, &g);
        if (rc != AL_OK) {
          al_error_prefix(rc, "%s", m.where);
          goto done;
        }
        c.rot = m.rotation;
        c.sw = swap ? g.scaled_height : g.scaled_width;
        c.sh = swap ? g.scaled_width : g.scaled_height;
        c.bw = width;
        c.bh = height;
        c.x0 = g.crop_x;
        c.y0 = g.crop_y;
        c.rgb = malloc((size_t)c.sw * c.sh * 3);
        if (c.rgb == NULL) {
          rc = al_set_error(AL_ENOMEM, "%s: out of memory", m.where);
          goto done;
        }
        geom_ready = 1;
      } else if (fr->width != (int)cw || fr->height != (int)ch) {
        rc = al_set_error(AL_EUNSUPPORTED, "%s: frame %lld: size changes from %ux%u to %dx%d",
                          m.where, (long long)idx, cw, ch, fr->width, fr->height);
        goto done;
      }
      uint8_t *dst = out + (size_t)next * frame_bytes;
      rc = conv_frame(&c, fr, dst, m.where, (uint32_t)idx);
      if (rc != AL_OK) goto done;
      next++;
      /* Repeats (a span shorter than T): the same frame again. */
      while (next < t && al_decode_frame_index(next, t, o.span_start, o.span_frames) == idx) {
        memcpy(out + (size_t)next * frame_bytes, dst, frame_bytes);
        next++;
      }
      av_frame_unref(fr);
      if (next == t) break;
      if (m.image) {
        rc = al_set_error(AL_ERANGE, "%s: frame %u: an image holds 1 frame", m.where,
                          al_decode_frame_index(next, t, o.span_start, o.span_frames));
        goto done;
      }
    }
  }
  rc = AL_OK;
done:
  free(c.rgb);
  sws_freeContext(c.sws);
  av_frame_free(&fr);
  av_packet_free(&pkt);
  avcodec_free_context(&cx);
  media_close(&m);
  return rc;
}
