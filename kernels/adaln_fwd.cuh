/*
 * adaln_fwd.cuh - the arguments of the two forward kernels (adaln_fwd.cu: ROWS,
 * adaln_fwd_tile.cu: TILE) and their fill from a launch plan.
 */
#ifndef AL_ADALN_FWD_CUH
#define AL_ADALN_FWD_CUH

#include "kernels/adaln_common.cuh"

template <typename T>
struct FwdArgs {
  const T *x;
  const T *scale;
  const T *shift;
  T *y;
  float *mean; /* may be NULL (inference) */
  float *rstd;
  Layout L;
  int64_t chunk; /* TILE: rows per block */
  int D;
  int tpr;
  int groups;    /* TILE: row groups per block */
  int tpr_shift; /* log2(tpr) for tpr <= 32 (a power of two) */
  float inv_d;   /* 1 / D, for the variance (the two means stay divisions: adaln_fwd_kernel) */
  float eps;
  float one;
};

template <typename T>
static inline FwdArgs<T> fwd_args_of(const adaln_launch *l, const void *x, const void *scale,
                                     const void *shift, void *y, float *mean, float *rstd) {
  FwdArgs<T> a;
  a.x = (const T *)x;
  a.scale = (const T *)scale;
  a.shift = (const T *)shift;
  a.y = (T *)y;
  a.mean = mean;
  a.rstd = rstd;
  a.L = layout_of(l);
  a.chunk = l->chunk;
  a.D = l->dim;
  a.tpr = l->tpr;
  a.groups = l->groups;
  a.tpr_shift = 0;
  while (a.tpr_shift < 5 && (1 << a.tpr_shift) < l->tpr) ++a.tpr_shift;
  a.inv_d = 1.0f / (float)l->dim;
  a.eps = l->eps;
  a.one = l->one;
  return a;
}

#endif
