/*
 * adaln_api.cu - the public AdaLN entry points: argument checks, choice of kernel
 * configuration and path, workspace accounting. No kernels here.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/constant_table_internal.h"
#include "common/struct_abi_internal.h"
#include "kernels/adaln_common.cuh"
#include "kernels/al_adaln_tuning.h"

extern "C" size_t al_dtype_size(int dtype) {
  switch (dtype) {
    case AL_DTYPE_BF16: return 2;
    case AL_DTYPE_FP16: return 2;
    case AL_DTYPE_FP32: return 4;
    default: return 0;
  }
}

extern "C" size_t al_adaln_struct_size(int which) {
  switch (which) {
    case AL_ADALN_STRUCT_DESC: return sizeof(al_adaln_desc);
    case AL_ADALN_STRUCT_OPTIONS: return sizeof(al_adaln_options);
    case AL_ADALN_STRUCT_TUNING: return sizeof(al_adaln_tuning);
    default: return 0;
  }
}

static const constant_entry adaln_constants[] = {
    CONSTANT(AL_DTYPE_BF16),
    CONSTANT(AL_DTYPE_FP16),
    CONSTANT(AL_DTYPE_FP32),
    CONSTANT(AL_ADALN_MAX_DIM),
    CONSTANT(AL_ADALN_MAX_BATCH),
    CONSTANT(AL_ADALN_PLAIN_SCALE),
    CONSTANT(AL_ADALN_VALIDATE_OFFSETS),
    CONSTANT(AL_ADALN_STRUCT_DESC),
    CONSTANT(AL_ADALN_STRUCT_OPTIONS),
    CONSTANT(AL_ADALN_STRUCT_TUNING),
};

extern "C" int al_adaln_constant(const char *name, int64_t *value) {
  return constant_lookup(adaln_constants, sizeof adaln_constants / sizeof adaln_constants[0], name,
                         value, "al_adaln_constant", "kernels/al_adaln.h");
}

extern "C" int adaln_vec_elems(int dtype) { return dtype == AL_DTYPE_FP32 ? 4 : 8; }

static int aligned(const void *p, uintptr_t n) { return ((uintptr_t)p & (n - 1)) == 0; }

/* Checks offsets already on the host: cu[0] == 0, non-decreasing, cu[B] == rows. */
static int check_offsets(const char *fn, const char *what, const int32_t *cu, int B, int64_t rows) {
  if (cu[0] != 0) return al_set_error(AL_EINVAL, "%s: %s[0] = %d, must be 0", fn, what, (int)cu[0]);
  for (int b = 0; b < B; ++b) {
    if (cu[b + 1] < cu[b])
      return al_set_error(AL_EINVAL, "%s: %s[%d] = %d < %s[%d] = %d: offsets must not decrease", fn,
                          what, b + 1, (int)cu[b + 1], what, b, (int)cu[b]);
  }
  if ((int64_t)cu[B] != rows)
    return al_set_error(AL_EINVAL, "%s: %s[%d] = %d but rows = %lld", fn, what, B, (int)cu[B],
                        (long long)rows);
  return AL_OK;
}

/* A call's options with the tuning knobs in place: all zeros (every field's default) for a
 * NULL options or tuning pointer. */
typedef struct adaln_opts {
  float eps;
  unsigned flags;
  al_adaln_tuning t;
} adaln_opts;

/* Validates desc and options, fills *o and the parts of the launch they determine. */
static int setup(const char *fn, const al_adaln_desc *caller_desc,
                 const al_adaln_options *caller_opts, int check_device_offsets, void *stream,
                 adaln_launch *l, adaln_opts *o) {
  memset(l, 0, sizeof *l);
  memset(o, 0, sizeof *o);
  if (caller_desc == NULL) return al_set_error(AL_EINVAL, "%s: desc is NULL", fn);
  /* The caller's structs as this library's (common/struct_abi_internal.h). */
  al_adaln_desc desc;
  al_adaln_options local;
  int src = struct_in(&desc, sizeof desc, AL_ADALN_DESC_V1, caller_desc, fn, "al_adaln_desc");
  if (src == AL_OK && caller_opts)
    src = struct_in(&local, sizeof local, AL_ADALN_OPTIONS_V1, caller_opts, fn, "al_adaln_options");
  if (src != AL_OK) return src;
  const al_adaln_desc *d = &desc;
  const al_adaln_options *opts = caller_opts ? &local : NULL;
  if (al_dtype_size(d->dtype) == 0)
    return al_set_error(AL_EINVAL, "%s: dtype %d is not AL_DTYPE_BF16/FP16/FP32", fn, d->dtype);
  if (d->dim < 1 || d->dim > AL_ADALN_MAX_DIM)
    return al_set_error(AL_ERANGE, "%s: dim %d outside [1, %d]", fn, (int)d->dim, AL_ADALN_MAX_DIM);
  if (d->batch < 1 || d->batch > AL_ADALN_MAX_BATCH)
    return al_set_error(AL_ERANGE, "%s: batch %d outside [1, %d]", fn, (int)d->batch,
                        AL_ADALN_MAX_BATCH);
  if (d->rows < 0 || d->rows > INT32_MAX)
    return al_set_error(AL_ERANGE, "%s: rows %lld outside [0, %d]", fn, (long long)d->rows,
                        INT32_MAX);
  int64_t rows;
  if (d->cu_seqlens == NULL) {
    if (d->cu_seqlens_host != NULL)
      return al_set_error(AL_EINVAL, "%s: cu_seqlens_host given without cu_seqlens", fn);
    if (d->seq_len < 1)
      return al_set_error(AL_EINVAL,
                          "%s: seq_len %lld: the fixed layout needs seq_len >= 1 "
                          "(or pass cu_seqlens for a packed batch)",
                          fn, (long long)d->seq_len);
    if (d->seq_len > INT32_MAX / d->batch)
      return al_set_error(AL_ERANGE, "%s: batch %d x seq_len %lld rows exceed %d", fn,
                          (int)d->batch, (long long)d->seq_len, INT32_MAX);
    rows = (int64_t)d->batch * d->seq_len;
    if (d->rows != 0 && d->rows != rows)
      return al_set_error(AL_EINVAL, "%s: rows %lld != batch %d x seq_len %lld", fn,
                          (long long)d->rows, (int)d->batch, (long long)d->seq_len);
  } else {
    if (d->seq_len != 0)
      return al_set_error(AL_EINVAL, "%s: seq_len %lld with cu_seqlens: give one layout", fn,
                          (long long)d->seq_len);
    rows = d->rows;
    if (d->cu_seqlens_host != NULL) {
      int rc = check_offsets(fn, "cu_seqlens_host", d->cu_seqlens_host, d->batch, rows);
      if (rc != AL_OK) return rc;
    }
  }

  if (opts != NULL) {
    o->eps = opts->eps;
    o->flags = opts->flags;
    if (opts->tuning != NULL) o->t = *opts->tuning;
  }
  if (!(o->eps >= 0.0f) || isinf(o->eps))
    return al_set_error(AL_EINVAL, "%s: eps %g must be finite and >= 0", fn, (double)o->eps);
  if (o->flags & ~(AL_ADALN_PLAIN_SCALE | AL_ADALN_VALIDATE_OFFSETS))
    return al_set_error(AL_EINVAL, "%s: unknown flags 0x%x", fn, o->flags);
  const al_adaln_tuning *tu = &o->t;
  if (tu->bwd_path < AL_ADALN_BWD_AUTO || tu->bwd_path > AL_ADALN_BWD_SPLIT)
    return al_set_error(AL_EINVAL, "%s: bwd_path %d is not AL_ADALN_BWD_*", fn, tu->bwd_path);
  const int t = tu->threads_per_row;
  if (t != 0 && !(t == 1 || t == 2 || t == 4 || t == 8 || t == 16 || t == 32 ||
                  (t > 32 && t <= 1024 && t % 32 == 0)))
    return al_set_error(AL_EINVAL,
                        "%s: threads_per_row %d: use 1, 2, 4, 8, 16, 32 or a multiple of 32 "
                        "up to 1024",
                        fn, t);
  if (tu->rows_per_chunk < 0)
    return al_set_error(AL_EINVAL, "%s: rows_per_chunk %d < 0", fn, tu->rows_per_chunk);
  if (tu->bwd_stages < 0 || tu->bwd_stages > 4)
    return al_set_error(AL_EINVAL, "%s: bwd_stages %d outside [0, 4]", fn, tu->bwd_stages);
  if (tu->bwd_kernel < 0 || tu->bwd_kernel > AL_ADALN_BWD_KERNEL_TILE_TIGHT)
    return al_set_error(AL_EINVAL, "%s: bwd_kernel %d is not 0 or AL_ADALN_BWD_KERNEL_*", fn,
                        tu->bwd_kernel);
  if (tu->bwd_groups < 0 || tu->bwd_groups > 1024)
    return al_set_error(AL_EINVAL, "%s: bwd_groups %d outside [0, 1024]", fn, tu->bwd_groups);
  if (tu->fwd_kernel < 0 || tu->fwd_kernel > AL_ADALN_FWD_KERNEL_TILE)
    return al_set_error(AL_EINVAL, "%s: fwd_kernel %d is not 0 or AL_ADALN_FWD_KERNEL_*", fn,
                        tu->fwd_kernel);

  if (d->cu_seqlens != NULL && check_device_offsets && (o->flags & AL_ADALN_VALIDATE_OFFSETS)) {
    int32_t *h = (int32_t *)malloc(sizeof(int32_t) * ((size_t)d->batch + 1));
    if (h == NULL) return al_set_error(AL_ENOMEM, "%s: %d offsets", fn, (int)d->batch + 1);
    cudaError_t e = cudaMemcpyAsync(h, d->cu_seqlens, sizeof(int32_t) * ((size_t)d->batch + 1),
                                    cudaMemcpyDeviceToHost, (cudaStream_t)stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize((cudaStream_t)stream);
    int rc = AL_OK;
    if (e != cudaSuccess)
      rc = al_set_error(AL_ECUDA, "%s: copying cu_seqlens to the host: %s", fn,
                        cudaGetErrorString(e));
    else
      rc = check_offsets(fn, "cu_seqlens", h, d->batch, rows);
    free(h);
    if (rc != AL_OK) return rc;
  }

  l->dtype = d->dtype;
  l->rows = rows;
  l->batch = d->batch;
  l->dim = d->dim;
  l->seq_len = d->cu_seqlens == NULL ? d->seq_len : 0;
  l->cu = d->cu_seqlens;
  l->eps = o->eps == 0.0f ? 1e-6f : o->eps;
  l->one = (o->flags & AL_ADALN_PLAIN_SCALE) ? 0.0f : 1.0f;
  l->stream = stream;
  return AL_OK;
}

static int pow2_ceil(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

/* Threads per row group and vectors per thread for a row of nv vectors. Auto: the largest
 * vpt <= vmax whose group (a power of two up to 32, else a multiple of 32) wastes at most
 * 1/16 of its slots, with at least min(nv, 8) threads per row (full 32-byte sectors per load
 * instruction); else the least wasteful. Forced: vpt = ceil(nv / tpr) must be <= vmax. */
static int pick_cfg(const char *fn, int nv, int vmax, int tpr_max, int forced, int *tpr, int *vpt) {
  if (forced) {
    const int v = (nv + forced - 1) / forced;
    if (forced > tpr_max || v > vmax)
      return al_set_error(AL_EUNSUPPORTED,
                          "%s: threads_per_row %d: a row of %d vectors needs %d per thread "
                          "(at most %d compiled) and at most %d threads per row",
                          fn, forced, nv, v, vmax, tpr_max);
    *tpr = forced;
    *vpt = v;
    return AL_OK;
  }
  const int min_tpr = nv < 8 ? pow2_ceil(nv) : 8;
  int best_t = 0, best_v = 0, best_w = INT32_MAX;
  for (int v = vmax; v >= 1; --v) {
    int t = (nv + v - 1) / v;
    t = t <= 32 ? pow2_ceil(t) : (t + 31) / 32 * 32;
    if (t < min_tpr) continue;
    if (t > tpr_max) break;
    const int waste = t * v - nv;
    if (waste * 16 <= nv) {
      *tpr = t;
      *vpt = v;
      return AL_OK;
    }
    if (waste < best_w) {
      best_w = waste;
      best_t = t;
      best_v = v;
    }
  }
  if (best_t == 0)
    return al_set_error(AL_EUNSUPPORTED, "%s: no configuration for a row of %d vectors", fn, nv);
  *tpr = best_t;
  *vpt = best_v;
  return AL_OK;
}

static int block_for(int tpr) { return tpr <= 32 ? 128 : tpr; }

/* The per-group backward kernels (GROUP: adaln_bwd_rows_kernel, adaln_bwd_fused_async_kernel)
 * for the tpr set: one row group per row at a time, blocks of block_for(tpr) threads. */
static void use_group_kernel(adaln_launch *l) {
  l->kernel = ADALN_BWD_KERNEL_GROUP;
  l->groups = 1;
  l->loose_regs = 0;
  l->block = block_for(l->tpr);
}

/* Kernel attributes and occupancy are fixed per (device, kernel, block size), but the
 * runtime queries cost microseconds: cache them (a backward asks three times per call). */
typedef struct kattr {
  int dev;
  const void *fn;
  int block;
  size_t smem;
  int max_threads;
  int per_sm;
  int nsm;
} kattr;

#define KATTR_CAP 512
static kattr g_kattr[KATTR_CAP];
static int g_nkattr;
static pthread_mutex_t g_kattr_mu = PTHREAD_MUTEX_INITIALIZER;

static int kernel_attr(const void *kfn, int block, size_t smem, kattr *out) {
  int dev = 0;
  ADALN_CUDA(cudaGetDevice(&dev));
  pthread_mutex_lock(&g_kattr_mu);
  for (int i = 0; i < g_nkattr; ++i) {
    if (g_kattr[i].dev == dev && g_kattr[i].fn == kfn && g_kattr[i].block == block &&
        g_kattr[i].smem == smem) {
      *out = g_kattr[i];
      pthread_mutex_unlock(&g_kattr_mu);
      return AL_OK;
    }
  }
  pthread_mutex_unlock(&g_kattr_mu);
  kattr k;
  memset(&k, 0, sizeof k);
  k.dev = dev;
  k.fn = kfn;
  k.block = block;
  k.smem = smem;
  cudaFuncAttributes attr;
  ADALN_CUDA(cudaFuncGetAttributes(&attr, kfn));
  k.max_threads = attr.maxThreadsPerBlock;
  int optin = 0;
  ADALN_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  const size_t room = (size_t)optin - attr.sharedSizeBytes;
  if (smem > 48 * 1024 && smem <= room)
    ADALN_CUDA(cudaFuncSetAttribute(kfn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)room));
  if (k.max_threads >= block && smem <= room)
    ADALN_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.per_sm, kfn, block, smem));
  ADALN_CUDA(cudaDeviceGetAttribute(&k.nsm, cudaDevAttrMultiProcessorCount, dev));
  pthread_mutex_lock(&g_kattr_mu);
  if (g_nkattr < KATTR_CAP) g_kattr[g_nkattr++] = k;
  pthread_mutex_unlock(&g_kattr_mu);
  *out = k;
  return AL_OK;
}

/* Can the compiled kernel run blocks of this size (registers)? Fills *k when it can. */
static int kernel_fits(const void *kfn, int block, size_t smem, int *fits, kattr *k) {
  *fits = 0;
  if (kfn == NULL) return AL_OK;
  int rc = kernel_attr(kfn, block, smem, k);
  if (rc != AL_OK) return rc;
  *fits = k->max_threads >= block && k->per_sm >= 1;
  return AL_OK;
}

/* Forward tile kernel plan (tpr, vpt set): row groups per block (powers of two up to 512
 * threads, at most 15 groups of more than a warp: named barriers 1..15), the one with the
 * most resident threads per SM, then more groups; chunk = rows over one wave of blocks.
 * *ok = 0 when no configuration runs. */
static int plan_fwd_tile(adaln_launch *l, int *ok) {
  *ok = 0;
  const int gmax = l->tpr > 32 ? 15 : 512 / l->tpr;
  int best_g = 0, best_thr = 0;
  kattr best;
  memset(&best, 0, sizeof best);
  const void *fnp = adaln_fwd_tile_kernel_fn(l);
  for (int g = 1; g <= gmax; g *= 2) {
    const int block = g * l->tpr;
    if (block % 32 != 0) continue;
    if (block > 512) break;
    const size_t smem = adaln_fwd_tile_smem(l, g);
    int fits = 0;
    kattr k;
    int rc = kernel_fits(fnp, block, smem, &fits, &k);
    if (rc != AL_OK) return rc;
    if (!fits) continue;
    const int thr = k.per_sm * block;
    if (thr >= best_thr) {
      best_thr = thr;
      best_g = g;
      best = k;
    }
  }
  if (best_g == 0) return AL_OK;
  l->groups = best_g;
  l->block = best_g * l->tpr;
  l->smem = adaln_fwd_tile_smem(l, best_g);
  const int64_t blocks = (int64_t)best.per_sm * best.nsm;
  l->chunk = (l->rows + blocks - 1) / blocks;
  if (l->chunk < 1) l->chunk = 1;
  l->nchunks = (l->rows + l->chunk - 1) / l->chunk;
  *ok = 1;
  return AL_OK;
}

extern "C" int al_adaln_forward(const al_adaln_desc *desc, const al_adaln_options *opts,
                                const void *x, const void *scale, const void *shift, void *y,
                                float *mean, float *rstd, void *stream) {
  static const char fn[] = "al_adaln_forward";
  adaln_launch l;
  adaln_opts o;
  int rc = setup(fn, desc, opts, 1, stream, &l, &o);
  if (rc != AL_OK) return rc;
  if (x == NULL || scale == NULL || shift == NULL || y == NULL)
    return al_set_error(AL_EINVAL, "%s: x, scale, shift and y must not be NULL", fn);
  if ((mean == NULL) != (rstd == NULL))
    return al_set_error(AL_EINVAL, "%s: give both mean and rstd, or neither", fn);
  if (!aligned(mean, 4) || !aligned(rstd, 4))
    return al_set_error(AL_EINVAL, "%s: mean and rstd must be 4-byte aligned", fn);
  const int kvec = adaln_vec_elems(l.dtype);
  l.vec = !o.t.force_general && l.dim % kvec == 0 && aligned(x, 16) && aligned(y, 16) &&
          aligned(scale, 16) && aligned(shift, 16);
  const int nv = (l.dim + kvec - 1) / kvec;
  rc = pick_cfg(fn, nv, ADALN_FWD_MAX_VPT, 512, o.t.threads_per_row, &l.tpr, &l.vpt);
  if (rc != AL_OK) return rc;
  l.block = block_for(l.tpr);
  if (l.rows == 0) return AL_OK;
  /* Auto: the tile forward for wide rows of short samples only. Since the row kernel streams
   * y (st.global.cs) and runs fewer instructions, it wins at D = 1536 for any sample count
   * (% of copy, row / tile kernel, same buffers: 256 x 128 82.5 / 76, 8 x 4096 78.5 / 77,
   * 1 x 32768 86.7 / 78) and at D = 3072 down to 4096-row samples (86.2 / 85.5); the tile
   * kernel keeps 1024 rows at D = 3072 (85.0 / 82.0) and 2048 at D = 5120 (85.8 / 83.8). */
  const int tile = o.t.fwd_kernel == AL_ADALN_FWD_KERNEL_TILE ||
                   (o.t.fwd_kernel == 0 && l.vec && l.batch > 1 &&
                    l.dim >= ADALN_FWD_TILE_MIN_DIM &&
                    l.rows <= (int64_t)ADALN_FWD_TILE_ROWS_PER_SAMPLE * l.batch);
  if (tile) {
    if (!l.vec)
      return al_set_error(AL_EUNSUPPORTED,
                          "%s: fwd_kernel TILE needs the 16-byte vector path (D a multiple of "
                          "%d, 16-byte aligned tensors)",
                          fn, kvec);
    int ok = 0;
    rc = plan_fwd_tile(&l, &ok);
    if (rc != AL_OK) return rc;
    if (ok) return adaln_fwd_tile_launch(&l, x, scale, shift, y, mean, rstd);
    if (o.t.fwd_kernel == AL_ADALN_FWD_KERNEL_TILE)
      return al_set_error(AL_EUNSUPPORTED, "%s: fwd_kernel TILE: no block of %d-thread groups fits",
                          fn, l.tpr);
    /* auto: the row kernel instead (plan_fwd_tile left l untouched) */
  }
  int fits = 0;
  kattr k;
  rc = kernel_fits(adaln_fwd_kernel_fn(&l), l.block, 0, &fits, &k);
  if (rc != AL_OK) return rc;
  if (!fits)
    return al_set_error(AL_EUNSUPPORTED, "%s: threads_per_row %d: block of %d threads too large",
                        fn, l.tpr, l.block);
  return adaln_fwd_launch(&l, x, scale, shift, y, mean, rstd);
}

/* Tile kernel plan (tpr, vpt set): stages, row groups per block, block, shared memory and the
 * chunk of rows per block (one wave of blocks). *fits = 0 when no configuration runs. Auto
 * groups: the candidate (1, 2, 4, ... up to 512 threads per block) with the most resident
 * threads per SM; among equals, one with at least 2 blocks per SM (a block-wide barrier, at a
 * piece's start and end, then never idles the SM), then more groups per block (fewer
 * partial-sum slots). Measured, % of the backward floor: D = 1536 G 4 (3 blocks per SM) 84%,
 * G 1 62%; D = 5120 (VPT 2) G 1 (2 blocks) 76%, G 2 (1 block) 74%. */
static int plan_tile(const char *fn, const al_adaln_tuning *tu, adaln_launch *l, int *fits) {
  *fits = 0;
  l->kernel = ADALN_BWD_KERNEL_TILE;
  /* The 128-register cap by default: measured against the tight cap (TileRegs) on the same
   * buffers, it is 2-4 points of the floor faster at every benchmark shape but D = 5120 (1.5
   * points slower there), the fewer warps per SM notwithstanding. */
  l->loose_regs = tu->bwd_kernel != AL_ADALN_BWD_KERNEL_TILE_TIGHT;
  l->stages = tu->bwd_stages ? tu->bwd_stages : 2;
  const int nwg = l->tpr > 32 ? l->tpr / 32 : 1;
  const int gmax = l->tpr > 32 ? 15 : 1024 / l->tpr; /* named barriers 1..15 for tpr > 32 */
  int best_g = 0, best_thr = 0, best_multi = 0;
  kattr best;
  memset(&best, 0, sizeof best);
  for (int g = 1; g <= gmax; g = tu->bwd_groups ? g + 1 : g * 2) {
    if (tu->bwd_groups && g != tu->bwd_groups) continue;
    const int block = g * l->tpr;
    if (block % 32 != 0 || block > 1024) continue;
    if (!tu->bwd_groups && block > 512) break;
    l->groups = g;
    l->block = block;
    const size_t smem = (size_t)l->stages * 2 * l->vpt * 16 * block +
                        (size_t)ADALN_TILE_STAT_RING * 8 * ADALN_TILE_STAT_SLOTS(block, l->tpr) +
                        (size_t)l->dim * 4 + (size_t)g * 2 * nwg * 16;
    int ok = 0;
    kattr k;
    int rc = kernel_fits(adaln_bwd_rows_kernel_fn(l, 1), block, smem, &ok, &k);
    if (rc != AL_OK) return rc;
    if (!ok) continue;
    const int thr = k.per_sm * block, multi = k.per_sm >= 2;
    if (thr > best_thr || (thr == best_thr && multi >= best_multi)) {
      best_thr = thr;
      best_multi = multi;
      best_g = g;
      best = k;
      l->smem = smem;
    }
  }
  if (best_g == 0) {
    if (tu->bwd_groups)
      return al_set_error(AL_EUNSUPPORTED,
                          "%s: bwd_groups %d: no tile kernel of %d groups x %d threads fits", fn,
                          tu->bwd_groups, tu->bwd_groups, l->tpr);
    return AL_OK;
  }
  l->groups = best_g;
  l->block = best_g * l->tpr;
  const int64_t blocks = (int64_t)best.per_sm * best.nsm;
  l->chunk = tu->rows_per_chunk ? tu->rows_per_chunk : (l->rows + blocks - 1) / blocks;
  *fits = 1;
  return AL_OK;
}

/* Backward plan: fused or split, the row kernel's configuration, chunking and workspace. */
static int plan_bwd(const char *fn, const al_adaln_tuning *tu, adaln_launch *l, int *fused,
                    size_t *ws_bytes) {
  const int kvec = adaln_vec_elems(l->dtype);
  const int nv = (l->dim + kvec - 1) / kvec;
  int rc;
  *fused = 0;
  if (tu->bwd_path != AL_ADALN_BWD_SPLIT) {
    /* Registers per thread: ~4 per dy, x and scale vector word plus 2 fp32 sums per feature:
     * 16-bit types fit 3 vectors, fp32 4, under the kernel's 128-register cap. */
    const int vmax = tu->threads_per_row ? ADALN_BWD_MAX_VPT : (kvec == 8 ? 3 : 4);
    rc = pick_cfg(fn, nv, vmax, 512, tu->threads_per_row, &l->tpr, &l->vpt);
    const int tile = l->vec && tu->bwd_kernel != AL_ADALN_BWD_KERNEL_GROUP &&
                     (tu->bwd_stages == 0 || tu->bwd_stages == 2 || tu->bwd_stages == 3);
    /* No special case for wide 16-bit rows: at D = 5120, 3 vectors per thread measure 78-82%
     * of the floor with the clocks warmed up, 2 vectors 68-76%: 2 is not faster beyond the
     * spread between runs. */
    if (rc == AL_OK && tile) {
      rc = plan_tile(fn, tu, l, fused);
      if (rc != AL_OK) return rc;
    }
    if (rc == AL_OK && !*fused) {
      use_group_kernel(l);
      int fits = 0;
      kattr k;
      /* Row pipeline: cp.async stages in shared memory on the vector path (default 3), else
       * a register prefetch; falls back to registers when the stages do not fit. */
      l->stages = l->vec ? (tu->bwd_stages ? tu->bwd_stages : 3) : 0;
      if (l->stages < 2) l->stages = 0;
      l->smem = (size_t)l->stages * 2 * l->vpt * 16 * l->block;
      rc = kernel_fits(adaln_bwd_rows_kernel_fn(l, 1), l->block, l->smem, &fits, &k);
      if (rc != AL_OK) return rc;
      if (!fits && l->stages) {
        l->stages = 0;
        l->smem = 0;
        rc = kernel_fits(adaln_bwd_rows_kernel_fn(l, 1), l->block, 0, &fits, &k);
        if (rc != AL_OK) return rc;
      }
      if (fits) {
        /* One wave of row groups, each walking an equal chunk of rows. */
        const int64_t groups = (int64_t)k.per_sm * k.nsm * (l->block / l->tpr);
        l->chunk = tu->rows_per_chunk ? tu->rows_per_chunk : (l->rows + groups - 1) / groups;
        *fused = 1;
      }
    }
    if (!*fused && tu->bwd_path == AL_ADALN_BWD_FUSED)
      return al_set_error(AL_EUNSUPPORTED,
                          "%s: dim %d does not fit the fused backward (use AL_ADALN_BWD_AUTO)", fn,
                          l->dim);
  }
  if (!*fused) {
    rc = pick_cfg(fn, nv, ADALN_BWD_DX_MAX_VPT, 512, tu->threads_per_row, &l->tpr, &l->vpt);
    if (rc != AL_OK) return rc;
    use_group_kernel(l);
    l->stages = 0;
    l->smem = 0;
    int fits = 0;
    kattr k;
    rc = kernel_fits(adaln_bwd_rows_kernel_fn(l, 0), l->block, 0, &fits, &k);
    if (rc != AL_OK) return rc;
    if (!fits)
      return al_set_error(AL_EUNSUPPORTED, "%s: dx kernel cannot run %d threads per row", fn,
                          l->tpr);
    /* At most ~512 chunks: the split partial kernel re-reads rows, so chunks only trade
     * parallelism against partial-sum traffic. */
    l->chunk = tu->rows_per_chunk            ? tu->rows_per_chunk
               : (l->rows + 511) / 512 < 128 ? 128
                                             : (l->rows + 511) / 512;
  }
  if (l->chunk < 1) l->chunk = 1;
  l->nchunks = (l->rows + l->chunk - 1) / l->chunk;
  /* Slots; the split path adds one float per row (the stored mean's residual). */
  *ws_bytes = ((size_t)(l->nchunks + l->batch) * 2 * (size_t)l->dim +
               (*fused ? 0 : (size_t)l->rows)) *
              sizeof(float);
  return AL_OK;
}

extern "C" int al_adaln_backward_workspace_size(const al_adaln_desc *desc,
                                                const al_adaln_options *opts, size_t *bytes) {
  static const char fn[] = "al_adaln_backward_workspace_size";
  if (bytes == NULL) return al_set_error(AL_EINVAL, "%s: bytes is NULL", fn);
  *bytes = 0;
  adaln_launch l;
  adaln_opts o;
  int rc = setup(fn, desc, opts, 0, NULL, &l, &o);
  if (rc != AL_OK) return rc;
  /* The backward may take the vector or the element-wise path (pointer alignment): enough
   * for either. */
  size_t most = 0;
  for (int vec = 0; vec <= 1; ++vec) {
    int fused;
    size_t n = 0;
    l.vec = vec;
    rc = plan_bwd(fn, &o.t, &l, &fused, &n);
    if (rc != AL_OK) return rc;
    if (n > most) most = n;
  }
  *bytes = most;
  return AL_OK;
}

extern "C" int al_adaln_backward(const al_adaln_desc *desc, const al_adaln_options *opts,
                                 const void *dy, const void *x, const void *scale,
                                 const float *mean, const float *rstd, void *dx, void *dscale,
                                 void *dshift, void *workspace, size_t workspace_bytes,
                                 void *stream) {
  static const char fn[] = "al_adaln_backward";
  adaln_launch l;
  adaln_opts o;
  int rc = setup(fn, desc, opts, 1, stream, &l, &o);
  if (rc != AL_OK) return rc;
  if (dy == NULL || x == NULL || scale == NULL || mean == NULL || rstd == NULL || dx == NULL ||
      dscale == NULL || dshift == NULL || workspace == NULL)
    return al_set_error(AL_EINVAL,
                        "%s: dy, x, scale, mean, rstd, dx, dscale, dshift and workspace must "
                        "not be NULL",
                        fn);
  if (!aligned(mean, 4) || !aligned(rstd, 4))
    return al_set_error(AL_EINVAL, "%s: mean and rstd must be 4-byte aligned", fn);
  if (!aligned(workspace, 16))
    return al_set_error(AL_EINVAL, "%s: workspace must be 16-byte aligned", fn);
  const int kvec = adaln_vec_elems(l.dtype);
  l.vec = !o.t.force_general && l.dim % kvec == 0 && aligned(dy, 16) && aligned(x, 16) &&
          aligned(scale, 16) && aligned(dx, 16);
  int fused = 0;
  size_t need = 0;
  rc = plan_bwd(fn, &o.t, &l, &fused, &need);
  if (rc != AL_OK) return rc;
  if (workspace_bytes < need)
    return al_set_error(AL_EINVAL,
                        "%s: workspace of %zu bytes, needs %zu "
                        "(al_adaln_backward_workspace_size)",
                        fn, workspace_bytes, need);
  float *ws = (float *)workspace;
  if (fused) {
    rc = adaln_bwd_fused_launch(&l, dy, x, scale, mean, rstd, dx, ws);
  } else {
    /* dx first: it also leaves each row's mean residual for the partial sums. */
    float *mean_err = ws + (size_t)(l.nchunks + l.batch) * 2 * (size_t)l.dim;
    rc = adaln_bwd_dx_launch(&l, dy, x, scale, mean, rstd, dx, mean_err);
    if (rc == AL_OK) rc = adaln_bwd_partials_launch(&l, dy, x, mean, mean_err, rstd, ws);
  }
  if (rc != AL_OK) return rc;
  return adaln_bwd_finalize_launch(&l, ws, dscale, dshift);
}
