/* stats_internal.h - mean and population coefficient of variation of a series from its sums,
 * for the per-step figures of a plan (plan_info.c) and of a loaded manifest
 * (manifest/manifest_read.c), which must agree to the last bit. */
#ifndef AL_STATS_INTERNAL_H
#define AL_STATS_INTERNAL_H

#include <math.h>
#include <stddef.h>

/* Mean and population CV of n values given their sum and sum of squares
 * (0, 0 when n = 0; CV 0 when the mean is 0). */
static inline void plan_mean_cv(double sum, double sq, size_t n, double *mean, double *cv) {
  *mean = n ? sum / (double)n : 0;
  double var = n ? sq / (double)n - *mean * *mean : 0;
  if (var < 0) var = 0;
  *cv = *mean > 0 ? sqrt(var) / *mean : 0;
}

#endif /* AL_STATS_INTERNAL_H */
