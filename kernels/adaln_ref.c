/* CPU reference of AdaLN; see adaln_ref_internal.h. */
#include "kernels/adaln_ref_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "common/al_status.h"

/* What both passes take from a checked shape: eps (0 -> 1e-6) and the modulation's constant
 * (1 + scale, or scale alone). */
typedef struct ref_consts {
  double eps, one;
} ref_consts;

/* Checks the shape and fills *k. */
static int check_shape(const char *fn, const adaln_ref_shape *s, ref_consts *k) {
  if (s == NULL) return al_set_error(AL_EINVAL, "%s: shape is NULL", fn);
  k->eps = s->eps == 0.0 ? 1e-6 : s->eps;
  k->one = s->plain_scale ? 0.0 : 1.0;
  if (s->rows < 0 || s->batch < 1 || s->dim < 1)
    return al_set_error(AL_EINVAL, "%s: rows %lld, batch %d, dim %d", fn, (long long)s->rows,
                        (int)s->batch, (int)s->dim);
  if (s->seq_len > 0) {
    if (s->rows != (int64_t)s->batch * s->seq_len)
      return al_set_error(AL_EINVAL, "%s: rows %lld != batch %d x seq_len %lld", fn,
                          (long long)s->rows, (int)s->batch, (long long)s->seq_len);
    return AL_OK;
  }
  const int32_t *cu = s->cu_seqlens;
  if (cu == NULL) return al_set_error(AL_EINVAL, "%s: neither seq_len nor cu_seqlens", fn);
  if (cu[0] != 0) return al_set_error(AL_EINVAL, "%s: cu_seqlens[0] = %d", fn, (int)cu[0]);
  for (int b = 0; b < s->batch; ++b)
    if (cu[b + 1] < cu[b])
      return al_set_error(AL_EINVAL, "%s: cu_seqlens decreases at %d", fn, b + 1);
  if (cu[s->batch] != s->rows)
    return al_set_error(AL_EINVAL, "%s: cu_seqlens[%d] = %d != rows %lld", fn, (int)s->batch,
                        (int)cu[s->batch], (long long)s->rows);
  return AL_OK;
}

static int64_t seg_start(const adaln_ref_shape *s, int b) {
  return s->seq_len > 0 ? (int64_t)b * s->seq_len : (int64_t)s->cu_seqlens[b];
}

/* Two-pass statistics of one row in double. */
static void row_stats(const float *xr, int dim, double eps, double *mean, double *rstd) {
  double sum = 0.0;
  for (int d = 0; d < dim; ++d) sum += xr[d];
  const double m = sum / dim;
  double sq = 0.0;
  for (int d = 0; d < dim; ++d) sq += (xr[d] - m) * (xr[d] - m);
  *mean = m;
  *rstd = 1.0 / sqrt(sq / dim + eps);
}

int adaln_ref_forward(const adaln_ref_shape *s, const float *x, const float *scale,
                      const float *shift, float *y, float *mean, float *rstd) {
  ref_consts k;
  int rc = check_shape("adaln_ref_forward", s, &k);
  if (rc != AL_OK) return rc;
  const int D = s->dim;
  for (int b = 0; b < s->batch; ++b) {
    const float *sc = scale + (size_t)b * D, *sh = shift + (size_t)b * D;
    for (int64_t r = seg_start(s, b); r < seg_start(s, b + 1); ++r) {
      const float *xr = x + (size_t)r * D;
      double m, rs;
      row_stats(xr, D, k.eps, &m, &rs);
      for (int d = 0; d < D; ++d)
        y[(size_t)r * D + d] = (float)((xr[d] - m) * rs * (k.one + sc[d]) + sh[d]);
      if (mean != NULL) mean[r] = (float)m;
      if (rstd != NULL) rstd[r] = (float)rs;
    }
  }
  return AL_OK;
}

int adaln_ref_backward(const adaln_ref_shape *s, const float *dy, const float *x,
                       const float *scale, float *dx, float *dscale, float *dshift) {
  ref_consts k;
  int rc = check_shape("adaln_ref_backward", s, &k);
  if (rc != AL_OK) return rc;
  const int D = s->dim;
  /* Per-feature sums down a sample's rows, in double. */
  double *acc = (double *)malloc(sizeof(double) * 2 * (size_t)D);
  if (acc == NULL) return al_set_error(AL_ENOMEM, "adaln_ref_backward: %d doubles", 2 * D);
  for (int b = 0; b < s->batch; ++b) {
    const float *sc = scale + (size_t)b * D;
    for (int d = 0; d < 2 * D; ++d) acc[d] = 0.0;
    for (int64_t r = seg_start(s, b); r < seg_start(s, b + 1); ++r) {
      const float *xr = x + (size_t)r * D, *dyr = dy + (size_t)r * D;
      double m, rs;
      row_stats(xr, D, k.eps, &m, &rs);
      double sg = 0.0, sgx = 0.0;
      for (int d = 0; d < D; ++d) {
        const double xh = (xr[d] - m) * rs, g = dyr[d] * (k.one + sc[d]);
        sg += g;
        sgx += g * xh;
        acc[d] += dyr[d] * xh;
        acc[D + d] += dyr[d];
      }
      const double mg = sg / D, mgx = sgx / D;
      for (int d = 0; d < D; ++d) {
        const double xh = (xr[d] - m) * rs, g = dyr[d] * (k.one + sc[d]);
        dx[(size_t)r * D + d] = (float)(rs * (g - mg - xh * mgx));
      }
    }
    for (int d = 0; d < D; ++d) {
      dscale[(size_t)b * D + d] = (float)acc[d];
      dshift[(size_t)b * D + d] = (float)acc[D + d];
    }
  }
  free(acc);
  return AL_OK;
}
