/*
 * adaln_internal.h - what the AdaLN API layer (adaln_api.cu) hands to the kernel launchers
 * (adaln_fwd.cu, adaln_fwd_tile.cu, adaln_bwd.cu, adaln_bwd_partials.cu,
 * adaln_bwd_finalize.cu).
 * Host-only; not installed.
 *
 * Work split shared by every kernel: a row group of `tpr` threads owns one row at a time;
 * thread t of the group holds the row's 16-byte vectors t, t + tpr, ..., t + (vpt-1)*tpr in
 * registers (a "vector" is 8 bf16/fp16 or 4 fp32 elements; the general path uses the same
 * numbering with element-wise accesses). tpr is a power of two up to 32 (several groups per
 * warp, shuffle reductions) or a multiple of 32 (the block is one group; warps combine
 * through shared memory).
 *
 * Backward partial sums: rows are cut into chunks of `chunk` rows, chunk k = rows
 * [k*chunk, (k+1)*chunk). The part of chunk k that belongs to sample b writes its per-feature
 * sums of dy*xhat and dy into workspace slot k + b (one [2][D] fp32 slab). k + b is unique
 * for every non-empty (chunk, sample) overlap because samples are contiguous and ordered, so
 * no slot is written twice and a chunk never mixes two samples. The finalize kernel sums
 * slots k + b for k = first..last chunk of b in a fixed order.
 */
#ifndef AL_ADALN_INTERNAL_H
#define AL_ADALN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct adaln_launch {
  int dtype;
  int vec;   /* 1: 16-byte vector path; 0: general element-wise path */
  int tpr;   /* threads per row group */
  int vpt;   /* vectors per thread */
  int block; /* threads per block */
  int64_t rows;
  int32_t batch;
  int32_t dim;
  int64_t seq_len;   /* > 0: fixed layout */
  const int32_t *cu; /* packed layout offsets (device) */
  float eps;
  float one;       /* 1.0f: (1 + scale); 0.0f: plain scale */
  int64_t chunk;   /* backward: rows per chunk; tile forward: rows per block */
  int64_t nchunks; /* ceil(rows / chunk) */
  int stages;      /* fused backward: 0/1 register prefetch, 2..4 cp.async stages */
  int kernel;      /* fused backward: ADALN_BWD_KERNEL_* */
  int groups;      /* tile kernels: row groups per block */
  int loose_regs;  /* tile kernel: register cap 128 (default) instead of the tight one */
  size_t smem;     /* dynamic shared memory per block (cp.async stages) */
  void *stream;
} adaln_launch;

/* Fused backward kernels. GROUP: one partial-sum slot per row group (adaln_bwd_fused_async_kernel
 * or, without cp.async stages, adaln_bwd_rows_kernel). TILE: adaln_bwd_tile_kernel, G row
 * groups per block adding their sums in shared memory, one slot per block (vector path). */
#define ADALN_BWD_KERNEL_GROUP 1
#define ADALN_BWD_KERNEL_TILE 2

/* Tile backward: a row's mean and rstd are copied once per warp (per row group when tpr < 32),
 * not once per thread, into [slots][ADALN_TILE_STAT_RING] float2 (slots rounded up to even
 * keeps what follows 16-byte aligned). The ring is longer than the row pipeline (2-3 stages),
 * so the slot a lane refills was read at least two rounds earlier, before the row reduction
 * that every lane of the warp has since passed: no extra barrier. The kernel and the planner's
 * shared-memory size both use these. */
#define ADALN_TILE_STAT_SLOTS(block, tpr) ((((block) / ((tpr) < 32 ? (tpr) : 32)) + 1) & ~1)
#define ADALN_TILE_STAT_RING 4

/* Elements per 16-byte vector of a dtype (8 for bf16/fp16, 4 for fp32). */
int adaln_vec_elems(int dtype);

/* Launchers: enqueue on l->stream and return AL_OK or AL_ECUDA (message set). */
int adaln_fwd_launch(const adaln_launch *l, const void *x, const void *scale, const void *shift,
                     void *y, float *mean, float *rstd);

/* Forward, tile kernel (vector path; l->groups, l->chunk, l->nchunks, l->smem set): one wave
 * of blocks walking contiguous chunks of rows, the sample's scale and shift in shared memory
 * (adaln_fwd_tile.cu). The kernel instance, and its dynamic shared memory for `groups` row
 * groups of l->tpr threads. */
/* Auto takes the tile forward for batches of B > 1 samples averaging at most this many rows,
 * rows of at least ADALN_FWD_TILE_MIN_DIM elements (docs/kernels-notes.md, v9). */
#define ADALN_FWD_TILE_ROWS_PER_SAMPLE 2048
#define ADALN_FWD_TILE_MIN_DIM 3072
int adaln_fwd_tile_launch(const adaln_launch *l, const void *x, const void *scale,
                          const void *shift, void *y, float *mean, float *rstd);
const void *adaln_fwd_tile_kernel_fn(const adaln_launch *l);
size_t adaln_fwd_tile_smem(const adaln_launch *l, int groups);

/* Fused backward: dx plus per-chunk partial sums into ws ((nchunks + batch) * 2 * dim floats). */
int adaln_bwd_fused_launch(const adaln_launch *l, const void *dy, const void *x, const void *scale,
                           const float *mean, const float *rstd, void *dx, float *ws);

/* Split backward, step 1: dx only (row group per row, like the forward), plus the per-row
 * residual of the stored mean (mean_err, rows floats) that step 2 needs. */
int adaln_bwd_dx_launch(const adaln_launch *l, const void *dy, const void *x, const void *scale,
                        const float *mean, const float *rstd, void *dx, float *mean_err);
/* Split backward, step 2: partial sums over (chunk, D tile) from dy, x, mean + mean_err, rstd. */
int adaln_bwd_partials_launch(const adaln_launch *l, const void *dy, const void *x,
                              const float *mean, const float *mean_err, const float *rstd,
                              float *ws);

/* Sums the slots of each sample into dscale, dshift (dtype of l). */
int adaln_bwd_finalize_launch(const adaln_launch *l, const float *ws, void *dscale, void *dshift);

/* The kernel instance a launch with this configuration would use (for cudaFuncGetAttributes
 * and occupancy queries); NULL when none is compiled. acc: 1 fused, 0 dx-only. */
const void *adaln_fwd_kernel_fn(const adaln_launch *l);
const void *adaln_bwd_rows_kernel_fn(const adaln_launch *l, int acc);

/* Split path geometry shared by the partials launcher and the workspace size. */
#define ADALN_SPLIT_TILE_VECS 32 /* 16-byte vectors per D tile (one per lane) */
#define ADALN_SPLIT_ROW_LANES 8  /* threads walking down the rows of a chunk */

/* Largest vectors-per-thread compiled for each kernel kind. */
#define ADALN_FWD_MAX_VPT 8
#define ADALN_BWD_MAX_VPT 4    /* fused */
#define ADALN_BWD_DX_MAX_VPT 8 /* dx-only (split path) */

#ifdef __cplusplus
}
#endif

#endif /* AL_ADALN_INTERNAL_H */
