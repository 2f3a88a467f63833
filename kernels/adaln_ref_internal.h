/*
 * adaln_ref_internal.h - CPU reference of the AdaLN forward and backward (al_adaln.h has the math).
 * Plain C11, float tensors in and out, every sum accumulated in double. Used by the tests as
 * ground truth; slow (one thread, two or three passes per row) and meant for small shapes.
 *
 * Layout: x, y, dy, dx are [rows, dim]; scale, shift, dscale, dshift are [batch, dim];
 * mean and rstd are [rows]. Rows belong to samples by seq_len (> 0: row / seq_len) or, when
 * seq_len == 0, by host offsets cu_seqlens[batch + 1] (checked: cu[0] == 0, non-decreasing,
 * cu[batch] == rows). plain_scale != 0 modulates by scale instead of (1 + scale).
 * The backward recomputes mean and rstd from x in double (it does not take the forward's).
 * Returns AL_OK, AL_EINVAL or AL_ENOMEM (message via al_last_error()). Thread-safe; the
 * backward allocates 2 * dim doubles of scratch for the call.
 */
#ifndef AL_ADALN_REF_INTERNAL_H
#define AL_ADALN_REF_INTERNAL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct adaln_ref_shape {
  int64_t rows;
  int32_t batch;
  int32_t dim;
  int64_t seq_len;           /* fixed layout; 0 -> cu_seqlens */
  const int32_t *cu_seqlens; /* host, batch + 1 entries */
  double eps;                /* 0 -> 1e-6 */
  int plain_scale;
} adaln_ref_shape;

/* y, mean, rstd out (mean, rstd may be NULL). */
int adaln_ref_forward(const adaln_ref_shape *s, const float *x, const float *scale,
                      const float *shift, float *y, float *mean, float *rstd);

/* dx, dscale, dshift out. */
int adaln_ref_backward(const adaln_ref_shape *s, const float *dy, const float *x,
                       const float *scale, float *dx, float *dscale, float *dshift);

#ifdef __cplusplus
}
#endif

#endif /* AL_ADALN_REF_INTERNAL_H */
