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

/* y of one vector of both forwards: (x - mean) * rstd * (one + scale) + shift, computed as
 * fmaf(fmaf(x - mean0, rstd, nm1r), one + scale, shift) with mean = mean0 + m1 and
 * nm1r = -m1 * rstd (x - mean0 is exact for x near the mean). fwd_y_math takes the unpacked
 * vectors; fwd_y unpacks x, scale and shift first. */
template <int kVec>
__device__ __forceinline__ void fwd_y_math(const float (&f)[kVec], const float (&fs)[kVec],
                                           const float (&fh)[kVec], float mean0, float rstd,
                                           float nm1r, float one, float (&o)[kVec]) {
#pragma unroll
  for (int j = 0; j < kVec; ++j) o[j] = fmaf(fmaf(f[j] - mean0, rstd, nm1r), one + fs[j], fh[j]);
}
template <typename T>
__device__ __forceinline__ void fwd_y(const uint4 &x, const uint4 &scale, const uint4 &shift,
                                      float mean0, float rstd, float nm1r, float one,
                                      float (&o)[Elem<T>::kVec]) {
  typedef Elem<T> E;
  float f[E::kVec], fs[E::kVec], fh[E::kVec];
  E::unpack(x, f);
  E::unpack(scale, fs);
  E::unpack(shift, fh);
  fwd_y_math(f, fs, fh, mean0, rstd, nm1r, one, o);
}

/* Thread 0 of a row group stores the row's fp32 mean (mean0 + m1) and rstd, unless the
 * caller asked for none (inference). */
template <typename T>
__device__ __forceinline__ void fwd_stats(const FwdArgs<T> &a, int64_t row, int t, float mean0,
                                          float m1, float rstd) {
  if (t == 0 && a.mean != nullptr) {
    a.mean[row] = mean0 + m1;
    a.rstd[row] = rstd;
  }
}

#endif
