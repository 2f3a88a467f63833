/*
 * al_adaln_tuning.h - kernel choice and configuration of the fused AdaLN (al_adaln.h).
 *
 * UNSTABLE: what this header declares may change or vanish in any release, without notice
 * or a change of the library version; for the benchmark (dev/adaln_bench.c), the tests and
 * experiments. Programs that only want the AdaLN results need al_adaln.h alone: the library
 * then makes every choice below itself (the "auto" rules documented here).
 *
 * Use: point al_adaln_options.tuning at an al_adaln_tuning. Zero in a field (or a NULL
 * tuning pointer) keeps the library's choice for it; a non-zero field forces that choice.
 * Forcing changes speed, never the math: every configuration computes the same y, mean,
 * rstd and dx (to rounding), and every backward stays deterministic.
 *
 * Ownership and thread safety: as for al_adaln_options (the library reads the struct during
 * a call and keeps no pointer to it).
 *
 * Errors: a value outside a field's range -> AL_EINVAL (message names the field); a forced
 * configuration that cannot run on this shape or device (too many vectors per thread, a
 * block too large for the registers or shared memory, the tile forward on the element-wise
 * path, the fused backward for a row that does not fit) -> AL_EUNSUPPORTED, nothing launched.
 * al_adaln_backward_workspace_size takes the same options as the backward it sizes.
 */
#ifndef AL_ADALN_TUNING_H
#define AL_ADALN_TUNING_H

#include "kernels/al_adaln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Knobs. 0 = chosen from D, dtype, alignment and the device. */
typedef struct al_adaln_tuning {
  /* Both directions. */
  int threads_per_row; /* threads sharing one row: 1,2,4,8,16,32 or a multiple of 32 <= 1024 */
  int force_general;   /* 1: element-wise path even when the 16-byte vector path applies */
  /* Forward. */
  int fwd_kernel; /* 0 auto, or AL_ADALN_FWD_KERNEL_* */
  /* Backward. */
  int bwd_path;       /* AL_ADALN_BWD_*; FUSED when the row does not fit -> AL_EUNSUPPORTED */
  int bwd_kernel;     /* fused backward kernel: 0 auto, or AL_ADALN_BWD_KERNEL_* */
  int bwd_stages;     /* fused backward row pipeline: 1 registers, 2..4 cp.async stages */
  int bwd_groups;     /* tile kernel: row groups per block (<= 1024 threads; <= 15 groups
                       * when threads_per_row > 32) */
  int rows_per_chunk; /* rows per partial-sum chunk (tile kernel: per block), >= 0 */
} al_adaln_tuning;

/* bwd_path */
#define AL_ADALN_BWD_AUTO 0  /* fused when the row fits the registers, else split */
#define AL_ADALN_BWD_FUSED 1 /* one pass: dx and per-feature partial sums from one read */
#define AL_ADALN_BWD_SPLIT 2 /* dx kernel, then a D-tile partial-sum kernel that re-reads x, dy */

/* bwd_kernel. Both are deterministic and give the same dx; the sums may differ in rounding.
 * GROUP: each row group writes its own partial-sum slot (cp.async stages 2..4, or 1: a
 *   register prefetch). TILE (auto on the 16-byte vector path, stages 2..3): the row groups
 *   of a block add their sums in shared memory and write one slot per block.
 * TILE_TIGHT: TILE under a tight register cap (more warps per SM, more instructions); TILE
 *   itself runs under a 128-register cap, the faster at 6 of the 7 benchmark shapes
 *   (docs/benchmarks-history.md, round 6). TILE_R128: the same as TILE (its name as a knob). */
#define AL_ADALN_BWD_KERNEL_GROUP 1
#define AL_ADALN_BWD_KERNEL_TILE 2
#define AL_ADALN_BWD_KERNEL_TILE_R128 3
#define AL_ADALN_BWD_KERNEL_TILE_TIGHT 4

/* fwd_kernel. Same math; the fp32 statistics of rows wider than a warp may differ in the
 * last bit (the cross-warp sums are added in another order).
 * ROWS: a grid over all rows, one row per group of threads; scale and shift read per row
 *   (through L1). The fastest with one sample, and at D < 3072 for any number of samples.
 * TILE (16-byte vector path only): one wave of blocks, each walking a contiguous chunk of
 *   rows with the current sample's scale and shift in shared memory and the rows in a
 *   cp.async pipeline. 2-3 points of copy faster than ROWS on wide rows (D >= 3072) of many
 *   short samples (docs/kernels-notes.md, v8 and v9).
 * Auto: TILE on the vector path for batches of several samples averaging at most 2048 rows
 * with D >= 3072, else ROWS. TILE asked for on the element-wise path -> AL_EUNSUPPORTED. */
#define AL_ADALN_FWD_KERNEL_ROWS 1
#define AL_ADALN_FWD_KERNEL_TILE 2

#ifdef __cplusplus
}
#endif

#endif /* AL_ADALN_TUNING_H */
