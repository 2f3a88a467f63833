/* Cost model fitting: weighted linear least squares (Householder QR) for
 * poly2, the memory line and the floor family's start, Levenberg-Marquardt for the power
 * law, deterministic k-fold held-out errors (overall and by band of tokens per sample), the
 * per-degree fits of a benchmark's d column, and the predictions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "cost/al_cost.h"
#include "cost/cost_internal.h"

#define LM_MAX_ITER 200

const char *al_cost_family_name(al_cost_family f) {
  switch (f) {
    case AL_COST_AUTO: return "auto";
    case AL_COST_POWER: return "power";
    case AL_COST_POLY2: return "poly2";
    case AL_COST_FLOOR: return "floor";
  }
  return "unknown";
}

int al_cost_family_parse(const char *s, al_cost_family *out) {
  if (!strcmp(s, "auto"))
    *out = AL_COST_AUTO;
  else if (!strcmp(s, "power"))
    *out = AL_COST_POWER;
  else if (!strcmp(s, "poly2"))
    *out = AL_COST_POLY2;
  else if (!strcmp(s, "floor"))
    *out = AL_COST_FLOOR;
  else
    return al_set_error(AL_EINVAL, "unknown cost model family '%s' (auto, power, poly2 or floor)",
                        s);
  return AL_OK;
}

static int dependent_columns(void) {
  return al_set_error(AL_ERANGE,
                      "least squares: columns are linearly dependent (degenerate benchmark grid)");
}

/* Minimises sum_i (w_i * (y_i - X_i . beta))^2 for k <= AL_LS_MAXK columns
 * (X row-major, n x k). Columns are scaled to unit max norm first so that
 * 1, B*S and B*S^2 (spanning ten orders of magnitude) stay well conditioned.
 * Returns AL_ERANGE when the columns are (numerically) dependent. */
int cost_lstsq(const double *X, const double *y, const double *w, size_t n, size_t k,
               double *beta) {
  if (k == 0 || k > AL_LS_MAXK || n < k)
    return al_set_error(AL_EINVAL, "least squares: %zu rows for %zu unknowns", n, k);
  double *A = malloc(sizeof(double) * n * (k + 1));
  if (!A) return al_set_error(AL_ENOMEM, "least squares: out of memory");
  double scale[AL_LS_MAXK];
  for (size_t j = 0; j < k; j++) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(X[i * k + j] * (w ? w[i] : 1.0)));
    scale[j] = m > 0 ? m : 1.0;
  }
  /* A = [W X D^-1 | W y], column-major for the reflections. */
  for (size_t i = 0; i < n; i++) {
    double wi = w ? w[i] : 1.0;
    for (size_t j = 0; j < k; j++) A[j * n + i] = wi * X[i * k + j] / scale[j];
    A[k * n + i] = wi * y[i];
  }
  int rc = AL_OK;
  for (size_t j = 0; j < k; j++) {
    double *col = A + j * n;
    double norm = 0;
    for (size_t i = j; i < n; i++) norm += col[i] * col[i];
    norm = sqrt(norm);
    if (norm < 1e-12) {
      rc = dependent_columns();
      goto cleanup;
    }
    double alpha = col[j] > 0 ? -norm : norm;
    double v0 = col[j] - alpha;
    /* Householder vector v = (v0, col[j+1..n-1]); H = I - 2 v v^T / (v^T v). */
    double vtv = v0 * v0;
    for (size_t i = j + 1; i < n; i++) vtv += col[i] * col[i];
    for (size_t c = j + 1; c <= k; c++) {
      double *cc = A + c * n;
      double dot = v0 * cc[j];
      for (size_t i = j + 1; i < n; i++) dot += col[i] * cc[i];
      double f = 2.0 * dot / vtv;
      cc[j] -= f * v0;
      for (size_t i = j + 1; i < n; i++) cc[i] -= f * col[i];
    }
    col[j] = alpha;
  }
  /* Relative rank check on R's diagonal. */
  double dmax = 0;
  for (size_t j = 0; j < k; j++) dmax = fmax(dmax, fabs(A[j * n + j]));
  for (size_t j = 0; j < k; j++)
    if (fabs(A[j * n + j]) < 1e-10 * dmax) {
      rc = dependent_columns();
      goto cleanup;
    }
  for (size_t j = k; j-- > 0;) {
    double s = A[k * n + j];
    for (size_t c = j + 1; c < k; c++) s -= A[c * n + j] * beta[c];
    beta[j] = s / A[j * n + j];
  }
  for (size_t j = 0; j < k; j++) beta[j] /= scale[j];
cleanup:
  free(A);
  return rc;
}

static int fit_poly2(const double *B, const double *S, const double *t, size_t n, int rel,
                     double params[3]) {
  if (n < 3) return al_set_error(AL_EINVAL, "poly2 fit: need at least 3 rows, got %zu", n);
  double *X = malloc(sizeof(double) * n * 3), *w = malloc(sizeof(double) * n);
  if (!X || !w) {
    free(X);
    free(w);
    return al_set_error(AL_ENOMEM, "poly2 fit: out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    X[i * 3 + 0] = 1.0;
    X[i * 3 + 1] = B[i] * S[i];
    X[i * 3 + 2] = B[i] * S[i] * S[i];
    w[i] = rel ? 1.0 / t[i] : 1.0;
  }
  int rc = cost_lstsq(X, t, w, n, 3, params);
  free(X);
  free(w);
  return rc;
}

/* Power law in scaled form t = a + q * B * (S / s0)^p, so q is in ms and the
 * Jacobian columns are of similar size; b = q / s0^p afterwards. */
typedef struct pw_data {
  const double *B, *S, *t;
  size_t n;
  double s0;
  int rel;
} pw_data;

static double pw_cost(const pw_data *d, const double th[3]) {
  double sse = 0;
  for (size_t i = 0; i < d->n; i++) {
    double f = th[0] + th[1] * d->B[i] * pow(d->S[i] / d->s0, th[2]);
    double r = d->rel ? (d->t[i] - f) / d->t[i] : d->t[i] - f;
    sse += r * r;
  }
  return sse;
}

/* Best (a, q) for a fixed p: weighted linear least squares. */
static int pw_linear(const pw_data *d, double p, double th[3], double *sse) {
  double *X = malloc(sizeof(double) * d->n * 2), *w = malloc(sizeof(double) * d->n);
  if (!X || !w) {
    free(X);
    free(w);
    return al_set_error(AL_ENOMEM, "power fit: out of memory");
  }
  for (size_t i = 0; i < d->n; i++) {
    X[i * 2] = 1.0;
    X[i * 2 + 1] = d->B[i] * pow(d->S[i] / d->s0, p);
    w[i] = d->rel ? 1.0 / d->t[i] : 1.0;
  }
  double beta[2];
  int rc = cost_lstsq(X, d->t, w, d->n, 2, beta);
  free(X);
  free(w);
  if (rc) return rc;
  th[0] = beta[0], th[1] = beta[1], th[2] = p;
  *sse = pw_cost(d, th);
  return AL_OK;
}

/* The power family as cost_lm.c minimises it: th = (a, q, p) with S scaled by s0. */
static void pw_normal(const void *ctx, const double *th, double *JtJ, double *Jtr) {
  const pw_data *d = ctx;
  for (size_t i = 0; i < d->n; i++) {
    double x = d->S[i] / d->s0, xp = pow(x, th[2]);
    double f = th[0] + th[1] * d->B[i] * xp;
    double w = d->rel ? 1.0 / d->t[i] : 1.0;
    double r = (d->t[i] - f) * w;
    double J[3] = {w, w * d->B[i] * xp, w * th[1] * d->B[i] * xp * log(x)};
    for (int a = 0; a < 3; a++) {
      Jtr[a] += J[a] * r;
      for (int b = 0; b < 3; b++) JtJ[a * 3 + b] += J[a] * J[b];
    }
  }
}

/* A damped step: (JtJ + lambda diag(JtJ)) delta = Jtr. */
static int pw_step(const void *ctx, const double *JtJ, const double *Jtr, const double *th,
                   double lambda, double *cand) {
  (void)ctx;
  double M[9], delta[3];
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      M[a * 3 + b] = JtJ[a * 3 + b] + (a == b ? lambda * JtJ[a * 3 + a] : 0);
  if (cost_solve(M, Jtr, 3, delta)) return -1;
  for (int a = 0; a < 3; a++) cand[a] = th[a] + delta[a];
  return 0;
}

static double pw_loss(const void *ctx, const double *th) { return pw_cost(ctx, th); }

static int fit_power(const double *B, const double *S, const double *t, size_t n, int rel,
                     double params[3]) {
  if (n < 3) return al_set_error(AL_EINVAL, "power fit: need at least 3 rows, got %zu", n);
  pw_data d = {B, S, t, n, 0, rel};
  for (size_t i = 0; i < n; i++) d.s0 = fmax(d.s0, S[i]);
  /* Start from the best exponent on a grid (variable projection), so LM
   * begins in the right basin whatever the data. */
  double th[3], best_sse = INFINITY;
  int have = 0;
  for (int k = 0; k <= 300; k++) {
    double p = 0.25 + 0.01 * k, cand[3], sse = INFINITY;
    if (pw_linear(&d, p, cand, &sse)) continue;
    if (sse < best_sse) best_sse = sse, memcpy(th, cand, sizeof th), have = 1;
  }
  if (!have)
    return al_set_error(AL_ERANGE,
                        "power fit: no exponent in [0.25, 3.25] gives a solvable fit (degenerate benchmark grid)");
  cost_lm_problem lm = {3, LM_MAX_ITER, &d, pw_normal, pw_step, pw_loss, NULL};
  cost_lm_minimize(&lm, th);
  params[0] = th[0];
  params[1] = th[1] / pow(d.s0, th[2]);
  params[2] = th[2];
  if (!isfinite(params[0]) || !isfinite(params[1]) || !isfinite(params[2]))
    return al_set_error(AL_ERANGE, "power fit: did not converge to finite parameters");
  return AL_OK;
}

int al_cost_fit_power(const double *B, const double *S, const double *t, size_t n,
                      double params[3]) {
  return fit_power(B, S, t, n, 1, params);
}

int al_cost_fit_poly2(const double *B, const double *S, const double *t, size_t n,
                      double params[3]) {
  return fit_poly2(B, S, t, n, 1, params);
}

/* ------------------------------------------------------------------ floor family ---- */

/* th = (F, a, s, b, c) of a floor fit. */
static void floor_th(const al_cost_fit *f, double th[COST_FLOOR_NP]) {
  th[0] = f->floor_ms, th[1] = f->params[0], th[2] = f->per_sample_ms;
  th[3] = f->params[1], th[4] = f->params[2];
}

/* The floor family's start at launch floor F: weighted least squares of the work term
 * a + s B + (b B S + c B S^2) / d on the rows measured above 1.2 F, then on the rows whose work
 * term exceeds F, five times. cols 4, or 3 without the per-sample column (a grid of one B).
 * 0 with beta, -1 when too few rows or dependent columns. */
static int floor_start(const cost_rows *r, double F, int rel, int cols, double *X, double *y,
                       double *w, double beta[4]) {
  for (int round = 0; round < 6; round++) {
    size_t m = 0;
    for (size_t i = 0; i < r->n; i++) {
      double d = r->D ? r->D[i] : 1.0, B = r->B[i], S = r->S[i];
      int above = round == 0 ? r->t[i] > 1.2 * F
                             : (beta[0] + (cols == 4 ? beta[1] * B : 0) +
                                (beta[cols - 2] * B * S + beta[cols - 1] * B * S * S) / d) > F;
      if (!above) continue;
      double *x = X + m * (size_t)cols;
      x[0] = 1.0;
      if (cols == 4) x[1] = B;
      x[cols - 2] = B * S / d;
      x[cols - 1] = B * S * S / d;
      y[m] = r->t[i];
      w[m] = rel ? 1.0 / r->t[i] : 1.0;
      m++;
    }
    if (m < (size_t)cols + 2) return round ? 0 : -1; /* keep the last solution */
    if (cost_lstsq(X, y, w, m, (size_t)cols, beta)) return -1;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The best start over launch floors at low quantiles of the measured times (by the smooth
 * maximum's loss), with the per-sample column (cols 4) or without it (3: s = 0); -1 when no
 * floor leaves enough rows above it. */
static int floor_best_start(const cost_rows *r, int rel, int cols, double *buf,
                            double best[COST_FLOOR_NP]) {
  size_t n = r->n;
  double *X = buf, *y = buf + 4 * n, *w = buf + 5 * n, *ts = buf + 6 * n;
  static const double quantiles[] = {0.02, 0.05, 0.1, 0.2, 0.3};
  double best_sse = INFINITY;
  for (size_t q = 0; q < sizeof quantiles / sizeof *quantiles; q++) {
    double F = ts[(size_t)(quantiles[q] * (double)(n - 1))], beta[4];
    if (!(F > 0) || floor_start(r, F, rel, cols, X, y, w, beta)) continue;
    double th[COST_FLOOR_NP] = {F, beta[0], cols == 4 ? beta[1] : 0, beta[cols - 2],
                                beta[cols - 1]};
    double sse = 0;
    for (size_t i = 0; i < n; i++) {
      double f = cost_floor_eval(th, AL_COST_FLOOR_SHARPNESS, r->B[i], r->S[i],
                                 r->D ? r->D[i] : 1.0);
      double e = rel ? (r->t[i] - f) / r->t[i] : r->t[i] - f;
      sse += e * e;
    }
    if (sse < best_sse) best_sse = sse, memcpy(best, th, sizeof th);
  }
  return isfinite(best_sse) ? 0 : -1;
}

/* Fits the floor family: the best start, refined by Levenberg-Marquardt. A per-sample cost s
 * below 0 (no work shrinks as samples are added; it comes from noise in a grid of few B) is
 * refitted with s = 0. */
static int fit_floor(const cost_rows *r, int rel, al_cost_fit *out) {
  size_t n = r->n;
  if (n < COST_FLOOR_NP + 1)
    return al_set_error(AL_EINVAL, "floor fit: need at least %d rows, got %zu", COST_FLOOR_NP + 1,
                        n);
  double *buf = malloc(sizeof(double) * n * 7);
  if (!buf) return al_set_error(AL_ENOMEM, "floor fit: out of memory");
  memcpy(buf + 6 * n, r->t, sizeof(double) * n);
  qsort(buf + 6 * n, n, sizeof(double), cmp_double);
  const double k = AL_COST_FLOOR_SHARPNESS;
  double best[COST_FLOOR_NP];
  int fix_s = 0, rc = floor_best_start(r, rel, 4, buf, best);
  if (!rc) cost_floor_refine(r, k, rel, 0, best);
  if (rc || !(best[2] >= 0)) {
    fix_s = 1;
    rc = floor_best_start(r, rel, 3, buf, best);
    if (!rc) cost_floor_refine(r, k, rel, 1, best);
  }
  free(buf);
  if (rc)
    return al_set_error(AL_ERANGE,
                        "floor fit: no launch floor leaves enough rows above it for the work term "
                        "(degenerate benchmark grid)");
  out->params[0] = best[1], out->params[1] = best[3], out->params[2] = best[4];
  out->per_sample_ms = fix_s ? 0 : best[2], out->floor_ms = best[0], out->sharpness = k;
  for (int i = 0; i < COST_FLOOR_NP; i++)
    if (!isfinite(best[i]))
      return al_set_error(AL_ERANGE, "floor fit: did not converge to finite parameters");
  return AL_OK;
}

/* -------------------------------------------------------------- one fit, evaluated ---- */

double cost_fit_eval(const al_cost_fit *f, double B, double S, double d) {
  const double *p = f->params;
  if (f->family == AL_COST_FLOOR) {
    double th[COST_FLOOR_NP];
    floor_th(f, th);
    return cost_floor_eval(th, f->sharpness, B, S, d);
  }
  if (f->family == AL_COST_POWER) return p[0] + p[1] * B * pow(S, p[2]);
  return p[0] + p[1] * B * S + p[2] * B * S * S;
}

/* c(S) of one fit. */
static double fit_per_sample(const al_cost_fit *f, double s) {
  const double *p = f->params;
  if (f->family == AL_COST_POWER) return p[1] * pow(s, p[2]);
  return (f->family == AL_COST_FLOOR ? f->per_sample_ms : 0) + p[1] * s + p[2] * s * s;
}

/* Whether c(S) grows on [1, COST_MAX_S]: b > 0 for a power law whose exponent is positive;
 * c'(S) = b + 2 c S, linear in S, positive at both ends for poly2 and floor. */
static int fit_grows(const al_cost_fit *f) {
  const double *p = f->params;
  if (f->family == AL_COST_POWER) return p[1] > 0;
  return p[1] + 2 * p[2] > 0 && p[1] + 2 * p[2] * COST_MAX_S > 0;
}

/* The first bound fit f breaks, as text in why (n > 0), or 0 when none. */
static int fit_bound_broken(const al_cost_fit *f, char *why, size_t cap) {
  const double *p = f->params;
  if (f->family != AL_COST_POWER && f->family != AL_COST_POLY2 && f->family != AL_COST_FLOOR)
    return snprintf(why, cap, "no fitted family");
  if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2]) || !isfinite(f->per_sample_ms) ||
      !isfinite(f->floor_ms) || !isfinite(f->sharpness))
    return snprintf(why, cap, "a parameter is not finite");
  if (f->family == AL_COST_POWER && !(p[2] > 0 && p[2] <= COST_MAX_P))
    return snprintf(why, cap, "exponent p = %g outside (0, %g]", p[2], COST_MAX_P);
  if (f->family == AL_COST_FLOOR && !(f->floor_ms > 0 && f->floor_ms <= COST_MAX_MS))
    return snprintf(why, cap, "launch floor F = %g ms outside (0, %g]", f->floor_ms, COST_MAX_MS);
  if (f->family == AL_COST_FLOOR && !(f->sharpness >= 1 && f->sharpness <= COST_MAX_SHARPNESS))
    return snprintf(why, cap, "sharpness k = %g outside [1, %g]", f->sharpness, COST_MAX_SHARPNESS);
  if (!fit_grows(f)) return snprintf(why, cap, "per-sample cost does not grow with S");
  const double c1 = fit_per_sample(f, 1);
  if (!(c1 > 0)) return snprintf(why, cap, "per-sample cost c(1) = %g ms <= 0", c1);
  if (f->family != AL_COST_FLOOR && !(p[0] + c1 > 0))
    return snprintf(why, cap, "t(1, 1) = a + c(1) = %g ms <= 0", p[0] + c1);
  const double tmax = p[0] + COST_MAX_B * fit_per_sample(f, COST_MAX_S);
  if (!(tmax <= COST_MAX_MS))
    return snprintf(why, cap, "t(2^32 - 1, 2^20) = %g ms above %g ms", tmax, COST_MAX_MS);
  return 0;
}

static int fit_usable_why(const al_cost_fit *f, const al_cost_fit *shown, char *why, size_t cap) {
  int n = fit_bound_broken(f, why, cap);
  if (n <= 0) return 0;
  if ((size_t)n < cap) {
    if (shown->family == AL_COST_FLOOR)
      snprintf(why + n, cap - (size_t)n, " (params a %g, b %g, c %g, s %g, F %g, k %g)",
               shown->params[0], shown->params[1], shown->params[2], shown->per_sample_ms,
               shown->floor_ms, shown->sharpness);
    else
      snprintf(why + n, cap - (size_t)n, " (params %g, %g, %g)", shown->params[0], shown->params[1],
               shown->params[2]);
  }
  return -1;
}

int cost_fit_usable(const al_cost_fit *f, char *why, size_t cap) {
  return fit_usable_why(f, f, why, cap);
}

int cost_sp_fit_usable(const al_cost_fit *f, double d, char *why, size_t cap) {
  al_cost_fit at = *f; /* the per-rank curve at degree d */
  at.params[1] /= d, at.params[2] /= d;
  return fit_usable_why(&at, f, why, cap);
}

static int fit_family(al_cost_family f, const cost_rows *r, int rel, al_cost_fit *out) {
  memset(out->params, 0, sizeof out->params);
  out->per_sample_ms = out->floor_ms = out->sharpness = 0;
  out->family = f;
  if (f == AL_COST_FLOOR) return fit_floor(r, rel, out);
  return f == AL_COST_POWER ? fit_power(r->B, r->S, r->t, r->n, rel, out->params)
                            : fit_poly2(r->B, r->S, r->t, r->n, rel, out->params);
}

static double median_sorted(const double *v, size_t n) {
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* R^2 on all rows, then held-out relative errors: row i is in fold i mod k. */
int cost_evaluate(al_cost_family f, const cost_rows *r, uint32_t folds, int rel, al_cost_fit *out,
                  double *row_err) {
  size_t n = r->n;
  memset(out, 0, sizeof *out);
  int rc = fit_family(f, r, rel, out);
  if (rc) return al_error_prefix(rc, "%s fit on all %zu rows", al_cost_family_name(f), n);
  double mean = 0, ss_tot = 0, ss_res = 0;
  for (size_t i = 0; i < n; i++) mean += r->t[i];
  mean /= (double)n;
  for (size_t i = 0; i < n; i++) {
    double e = r->t[i] - cost_fit_eval(out, r->B[i], r->S[i], r->D ? r->D[i] : 1.0);
    ss_res += e * e;
    ss_tot += (r->t[i] - mean) * (r->t[i] - mean);
  }
  out->r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 0.0;

  double *tb = malloc(sizeof(double) * n * 5);
  if (!tb) return al_set_error(AL_ENOMEM, "k-fold: out of memory");
  double *tB = tb, *tS = tb + n, *tD = tb + 2 * n, *tt = tb + 3 * n, *err = tb + 4 * n;
  for (uint32_t k = 0; k < folds && !rc; k++) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (i % folds != k)
        tB[m] = r->B[i], tS[m] = r->S[i], tD[m] = r->D ? r->D[i] : 1.0, tt[m] = r->t[i], m++;
    cost_rows train = {tB, tS, r->D ? tD : NULL, tt, m};
    al_cost_fit p;
    rc = fit_family(f, &train, rel, &p);
    if (rc) {
      al_error_prefix(rc, "%s fit, held-out fold %u of %u", al_cost_family_name(f), k + 1, folds);
      break;
    }
    for (size_t i = k; i < n; i += folds)
      err[i] = fabs(cost_fit_eval(&p, r->B[i], r->S[i], r->D ? r->D[i] : 1.0) - r->t[i]) / r->t[i];
  }
  if (!rc) {
    if (row_err) memcpy(row_err, err, sizeof(double) * n);
    qsort(err, n, sizeof *err, cmp_double);
    out->median_rel_err = median_sorted(err, n);
    out->max_rel_err = err[n - 1];
  }
  free(tb);
  return rc;
}

/* ---------------------------------------------------------- errors by size band ---- */

static const double BAND_EDGES[AL_COST_BANDS + 1] = {0, 2048, 8192, 32768, 0};

/* The median and max of err[i] over the rows with lo <= S[i] < hi (hi 0: no bound); scratch
 * holds n values. */
static void band_of(const double *S, const double *err, size_t n, double lo, double hi,
                    double *scratch, al_cost_band *out) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (S[i] >= lo && (hi == 0 || S[i] < hi)) scratch[m++] = err[i];
  memset(out, 0, sizeof *out);
  out->lo = lo, out->hi = hi, out->rows = (uint32_t)m;
  if (!m) return;
  qsort(scratch, m, sizeof *scratch, cmp_double);
  out->median_rel_err = median_sorted(scratch, m);
  out->max_rel_err = scratch[m - 1];
}

static int band_errors(const double *S, const double *err, size_t n, al_cost_band *bands,
                       al_cost_band *all) {
  double *scratch = malloc(sizeof(double) * (n ? n : 1));
  if (!scratch) return al_set_error(AL_ENOMEM, "band errors: out of memory");
  for (int b = 0; b < AL_COST_BANDS; b++)
    band_of(S, err, n, BAND_EDGES[b], BAND_EDGES[b + 1], scratch, &bands[b]);
  band_of(S, err, n, 0, 0, scratch, all);
  free(scratch);
  return AL_OK;
}

/* ------------------------------------------------------------------ the benchmark ---- */

#define COST_NEEDS "(the planner needs step times that grow with B*S: cost/README.md, section 3)"

/* Rows of a benchmark in one buffer: the ones of degree `degree` (every row without a d column,
 * when degree is 1) with B * S >= min_tok. */
typedef struct row_set {
  double *buf;
  cost_rows r;
  double *mem; /* peak memory, when the benchmark has it */
} row_set;

static int select_rows(const al_bench *in, double degree, double min_tok, row_set *out) {
  size_t cap = in->n ? in->n : 1;
  memset(out, 0, sizeof *out);
  out->buf = malloc(sizeof(double) * cap * 5);
  if (!out->buf) return al_set_error(AL_ENOMEM, "cost fit: out of memory");
  double *B = out->buf, *S = B + cap, *D = S + cap, *t = D + cap, *mem = t + cap;
  size_t n = 0;
  for (size_t i = 0; i < in->n; i++) {
    double d = in->d ? in->d[i] : 1.0;
    if (d != degree || in->B[i] * in->S[i] < min_tok) continue;
    B[n] = in->B[i], S[n] = in->S[i], D[n] = d, t[n] = in->ms[i];
    if (in->mem) mem[n] = in->mem[i];
    n++;
  }
  out->r = (cost_rows){B, S, degree > 1 ? D : NULL, t, n};
  out->mem = in->mem ? mem : NULL;
  return AL_OK;
}

/* One family's fit of the d = 1 rows: held-out errors on its rows, and by band over every d = 1
 * row (a row it left out is scored by its fit on all its rows). */
typedef struct family_fit {
  al_cost_fit fit;
  int usable;
  char why[240];
  double min_tok;
  uint32_t rows, excluded;
  al_cost_band bands[AL_COST_BANDS], all;
} family_fit;

static int fit_one_family(const al_bench *in, al_cost_family fam, const al_cost_fit_options *o,
                          family_fit *out) {
  memset(out, 0, sizeof *out);
  int rel = !(o && o->loss == AL_LOSS_ABS);
  uint32_t folds = o && o->folds ? o->folds : 5;
  out->min_tok = o && o->min_tokens     ? (double)o->min_tokens
                 : fam == AL_COST_FLOOR ? 1.0
                                        : AL_COST_DEFAULT_MIN_TOKENS;
  row_set all = {0}, fit = {0};
  int rc = select_rows(in, 1, 0, &all);
  if (!rc) rc = select_rows(in, 1, out->min_tok, &fit);
  size_t n = fit.r.n;
  if (!rc && n < AL_BENCH_MIN_ROWS)
    rc = al_set_error(AL_EINVAL,
                      "too few rows: %zu%s with B*S >= %.0f tokens (%zu launch-bound rows left out; need at least %d)",
                      n, in->d ? " of degree d = 1" : "", out->min_tok, all.r.n - n,
                      AL_BENCH_MIN_ROWS);
  else if (!rc && (folds < 2 || folds > n))
    rc = al_set_error(AL_EINVAL, "%u folds for %zu rows", folds, n);
  double *err = rc ? NULL : malloc(sizeof(double) * (all.r.n + n));
  if (!rc && !err) rc = al_set_error(AL_ENOMEM, "cost fit: out of memory");
  if (!rc) rc = cost_evaluate(fam, &fit.r, folds, rel, &out->fit, err + all.r.n);
  if (!rc) {
    /* The fitted rows are the rows of `all` with B*S >= min_tok, in the same order. */
    for (size_t i = 0, j = 0; i < all.r.n; i++) {
      const double B = all.r.B[i], S = all.r.S[i], t = all.r.t[i];
      err[i] = B * S >= out->min_tok ? err[all.r.n + j++]
                                     : fabs(cost_fit_eval(&out->fit, B, S, 1) - t) / t;
    }
    rc = band_errors(all.r.S, err, all.r.n, out->bands, &out->all);
  }
  if (!rc) {
    out->rows = (uint32_t)n, out->excluded = (uint32_t)(all.r.n - n);
    out->usable = !cost_fit_usable(&out->fit, out->why, sizeof out->why);
  } else {
    al_error_prefix(rc, "%s", in->source); /* the one place the messages above get the source */
  }
  free(err);
  free(all.buf);
  free(fit.buf);
  return rc;
}

/* Preference on equal errors: poly2 (no exponent to extrapolate wrongly), floor, power. */
static int family_rank(al_cost_family f) {
  return f == AL_COST_POLY2 ? 0 : f == AL_COST_FLOOR ? 1 : 2;
}

/* Errors closer than this (0.1 %) are equal for auto: the fits' rounding, not the model. */
#define COST_ERR_TIE 1e-3

/* Whether a beats b for auto: usable first, then the lower held-out max relative error over
 * every row (a plan needs every micro-batch size right, the launch-bound ones too), then the
 * lower median, then family_rank. */
static int family_better(const family_fit *a, const family_fit *b) {
  if (a->usable != b->usable) return a->usable;
  if (fabs(a->all.max_rel_err - b->all.max_rel_err) > COST_ERR_TIE)
    return a->all.max_rel_err < b->all.max_rel_err;
  if (fabs(a->all.median_rel_err - b->all.median_rel_err) > COST_ERR_TIE)
    return a->all.median_rel_err < b->all.median_rel_err;
  return family_rank(a->fit.family) < family_rank(b->fit.family);
}

static void take_family(const family_fit *f, al_cost_model *out) {
  out->fit = f->fit;
  out->rows = f->rows, out->rows_excluded = f->excluded, out->min_tokens = f->min_tok;
  memcpy(out->bands, f->bands, sizeof out->bands);
  out->all_rows = f->all;
}

/* Fits family fam (all three for AL_COST_AUTO) into out->fit (and the runner-up into out->alt).
 * A fit a plan could not use (cost_fit_usable) is refused here, where the benchmark is at hand,
 * rather than by plan; auto keeps a usable family when there is one. */
static int fit_families(const al_bench *in, const al_cost_fit_options *o, al_cost_model *out) {
  al_cost_family fam = o ? o->family : AL_COST_AUTO;
  if (fam != AL_COST_AUTO) {
    family_fit f;
    int rc = fit_one_family(in, fam, o, &f);
    if (rc) return rc;
    if (!f.usable)
      return al_set_error(AL_ERANGE, "%s: the %s fit cannot be planned with: %s " COST_NEEDS,
                          in->source, al_cost_family_name(fam), f.why);
    take_family(&f, out);
    return AL_OK;
  }
  static const al_cost_family all[3] = {AL_COST_POWER, AL_COST_POLY2, AL_COST_FLOOR};
  family_fit f[3];
  int rcs[3], failed = 0, best = 0, second = -1;
  for (int i = 0; i < 3; i++) {
    /* A family that cannot be fitted at all (a degenerate grid for its form) is out of the
     * choice, not the end of it. */
    if ((rcs[i] = fit_one_family(in, all[i], o, &f[i]))) {
      memset(&f[i], 0, sizeof f[i]);
      f[i].fit.family = all[i];
      snprintf(f[i].why, sizeof f[i].why, "%s", al_last_error());
      failed++;
    }
  }
  if (failed == 3) return al_set_error(rcs[1], "%s", f[1].why);
  for (int i = 1; i < 3; i++)
    if (family_better(&f[i], &f[best])) best = i;
  for (int i = 0; i < 3; i++)
    if (i != best && !rcs[i] && (second < 0 || family_better(&f[i], &f[second]))) second = i;
  take_family(&f[best], out);
  if (second >= 0) out->alt = f[second].fit;
  if (!f[best].usable)
    return al_set_error(AL_ERANGE,
                        "%s: the power fit cannot be planned with: %s, nor the poly2 fit: %s, nor "
                        "the floor fit: %s " COST_NEEDS,
                        in->source, f[0].why, f[1].why, f[2].why);
  return AL_OK;
}

/* The memory line bytes = m0 + m1 B S on the d = 1 rows with B*S >= min_tokens (default 4096,
 * whatever the family: the small rows' peak is the model's weights, not its activations). */
static int fit_memory(const al_bench *in, const al_cost_fit_options *o, al_cost_model *out) {
  double min_tok = o && o->min_tokens ? (double)o->min_tokens : AL_COST_DEFAULT_MIN_TOKENS;
  row_set rs = {0};
  int rc = select_rows(in, 1, min_tok, &rs);
  size_t n = rs.r.n;
  double *X = rc ? NULL : malloc(sizeof(double) * (n ? n : 1) * 2);
  if (!rc && !X) rc = al_set_error(AL_ENOMEM, "memory fit: out of memory");
  for (size_t i = 0; !rc && i < n; i++) X[2 * i] = 1.0, X[2 * i + 1] = rs.r.B[i] * rs.r.S[i];
  double beta[2];
  if (!rc && (rc = cost_lstsq(X, rs.mem, NULL, n, 2, beta)))
    al_error_prefix(rc, "%s: memory fit", in->source);
  if (!rc) out->has_mem = 1, out->mem_m0 = beta[0], out->mem_m1 = beta[1];
  free(X);
  free(rs.buf);
  return rc;
}

/* The per-degree floor fits of the rows with d > 1, ascending by degree. */
static int fit_degrees(const al_bench *in, const al_cost_fit_options *o, al_cost_model *out) {
  int rel = !(o && o->loss == AL_LOSS_ABS);
  uint32_t folds = o && o->folds ? o->folds : 5;
  double min_tok = o && o->min_tokens ? (double)o->min_tokens : 1.0;
  for (double d = 2; d <= COST_MAX_SP_DEGREE && out->n_sp_fits < AL_COST_MAX_SP_FITS; d *= 2) {
    row_set rs = {0};
    int rc = select_rows(in, d, min_tok, &rs), present = 0;
    for (size_t i = 0; !rc && i < in->n && !present; i++) present = in->d[i] == d;
    size_t n = rs.r.n;
    if (!rc && present && n < AL_BENCH_MIN_ROWS)
      rc = al_set_error(AL_EINVAL,
                        "%s: too few rows of degree d = %.0f: %zu with B*S >= %.0f (need at least %d)",
                        in->source, d, n, min_tok, AL_BENCH_MIN_ROWS);
    else if (!rc && present && folds > n)
      rc = al_set_error(AL_EINVAL, "%s: %u folds for the %zu rows of degree d = %.0f", in->source,
                        folds, n, d);
    al_cost_sp_fit *sf = &out->sp_fits[out->n_sp_fits];
    double *err = !rc && present ? malloc(sizeof(double) * n) : NULL;
    if (!rc && present && !err) rc = al_set_error(AL_ENOMEM, "cost fit: out of memory");
    if (!rc && present) {
      memset(sf, 0, sizeof *sf);
      sf->degree = (uint32_t)d, sf->rows = (uint32_t)n;
      rc = cost_evaluate(AL_COST_FLOOR, &rs.r, folds, rel, &sf->fit, err);
      if (rc) al_error_prefix(rc, "%s: degree d = %.0f", in->source, d);
    }
    if (!rc && present) rc = band_errors(rs.r.S, err, n, sf->bands, &sf->all_rows);
    char why[240];
    if (!rc && present && cost_sp_fit_usable(&sf->fit, d, why, sizeof why))
      rc = al_set_error(AL_ERANGE,
                        "%s: the floor fit of degree d = %.0f cannot be planned with: %s " COST_NEEDS,
                        in->source, d, why);
    if (!rc && present) out->n_sp_fits++;
    free(err);
    free(rs.buf);
    if (rc) return rc;
  }
  return AL_OK;
}

/* The all-to-all figures: the options', else from the benchmark's model shape, else 0 (the
 * defaults of al_cost.h apply). */
static int set_a2a(const al_bench *in, const al_cost_fit_options *o, al_cost_model *out) {
  double bytes = o ? o->sp_a2a_bytes_per_token : 0, gbps = o ? o->sp_link_gbps : 0;
  if (bytes != 0 && !(isfinite(bytes) && bytes > 0))
    return al_set_error(AL_EINVAL, "sp_a2a_bytes_per_token = %g must be finite and > 0", bytes);
  if (gbps != 0 && !(isfinite(gbps) && gbps > 0))
    return al_set_error(AL_EINVAL, "sp_link_gbps = %g must be finite and > 0", gbps);
  if (bytes == 0 && in->hidden > 0 && in->layers > 0 && in->dtype_bytes > 0)
    bytes = 8.0 * in->hidden * in->dtype_bytes * in->layers; /* 4 all-to-alls forward, 4 back */
  out->sp_a2a_bytes_per_token = bytes;
  out->sp_link_gbps = gbps;
  return AL_OK;
}

int al_cost_fit_bench(const al_bench *caller_in, const al_cost_fit_options *caller_opts,
                      al_cost_model *caller_out) {
  if (!caller_in || !caller_out) return al_set_error(AL_EINVAL, "al_cost_fit_bench: NULL argument");
  al_cost_fit_options local;
  int rc = struct_in(&local, sizeof local, AL_COST_FIT_OPTIONS_V1, caller_opts, "al_cost_fit_bench",
                     "al_cost_fit_options");
  if (rc) return rc;
  const al_cost_fit_options *opts = caller_opts ? &local : NULL;
  al_bench in;
  size_t n;
  rc = struct_in(&in, sizeof in, AL_BENCH_V1, caller_in, "al_cost_fit_bench", "al_bench");
  if (!rc)
    rc = struct_out_size(caller_out, sizeof(al_cost_model), AL_COST_MODEL_V1, "al_cost_fit_bench",
                         "al_cost_model", &n);
  if (rc) return rc;
  al_cost_model out;
  memset(&out, 0, sizeof out);
  out.struct_size = sizeof out;
  rc = set_a2a(&in, opts, &out);
  if (!rc) rc = fit_families(&in, opts, &out);
  if (!rc && in.mem) rc = fit_memory(&in, opts, &out);
  if (!rc && in.d) rc = fit_degrees(&in, opts, &out);
  if (rc) return rc;
  out.abs_loss = opts && opts->loss == AL_LOSS_ABS;
  snprintf(out.device, sizeof out.device, "%s", in.device);
  snprintf(out.measured, sizeof out.measured, "%s", in.measured);
  snprintf(out.source, sizeof out.source, "%s", in.source);
  struct_out(caller_out, &out, n);
  return AL_OK;
}

/* ------------------------------------------------------------------ predictions ---- */

const al_cost_model *cost_model_in(const al_cost_model *m, al_cost_model *local, const char *fn) {
  if (m->struct_size == 0 || m->struct_size == sizeof *m) return m;
  return struct_in(local, sizeof *local, AL_COST_MODEL_V1, m, fn, "al_cost_model") == AL_OK ? local
                                                                                            : NULL;
}

static double per_sample(const al_cost_model *m, uint64_t S) {
  return fit_per_sample(&m->fit, (double)S);
}

static double predict(const al_cost_model *m, uint64_t B, uint64_t S) {
  if (m->fit.family == AL_COST_FLOOR) return cost_fit_eval(&m->fit, (double)B, (double)S, 1);
  return m->fit.params[0] + (double)B * per_sample(m, S);
}

/* The modelled all-to-all, ms per token of a micro-batch at degree d > 1. */
static double a2a_ms_per_token(const al_cost_model *m, double d) {
  double bytes = m->sp_a2a_bytes_per_token > 0 ? m->sp_a2a_bytes_per_token
                                               : AL_COST_DEFAULT_SP_A2A_BYTES_PER_TOKEN;
  double gbps = m->sp_link_gbps > 0 ? m->sp_link_gbps : AL_COST_DEFAULT_SP_LINK_GBPS;
  /* bytes / (GB/s x 1e9) seconds = bytes / (gbps x 1e6) ms */
  return (d - 1) / (d * d) * bytes / (gbps * 1e6);
}

/* The fit that models degree d: its own, else the largest fitted degree below d, else the
 * smallest fitted degree; NULL without per-degree fits. Then the floor family of the plain
 * model, and last the analytic a + B c(S) / d. */
static const al_cost_fit *compute_fit_at(const al_cost_model *m, uint32_t d) {
  const al_cost_fit *f = m->n_sp_fits ? &m->sp_fits[0].fit : NULL;
  for (uint32_t i = 0; i < m->n_sp_fits && i < AL_COST_MAX_SP_FITS; i++)
    if (m->sp_fits[i].degree <= d) f = &m->sp_fits[i].fit;
  return f ? f : m->fit.family == AL_COST_FLOOR ? &m->fit : NULL;
}

static double per_sample_sp(const al_cost_model *m, uint64_t S, uint32_t d) {
  if (d <= 1) return per_sample(m, S);
  double dd = (double)d, s = (double)S;
  const al_cost_fit *f = compute_fit_at(m, d);
  double c = f ? f->per_sample_ms + (f->params[1] * s + f->params[2] * s * s) / dd
               : per_sample(m, S) / dd;
  return c + s * a2a_ms_per_token(m, dd);
}

static double predict_sp(const al_cost_model *m, uint64_t B, uint64_t S, uint32_t d) {
  if (d <= 1) return predict(m, B, S);
  double dd = (double)d, tokens = (double)B * (double)S;
  const al_cost_fit *f = compute_fit_at(m, d);
  if (!f) return m->fit.params[0] + (double)B * per_sample_sp(m, S, d);
  return cost_fit_eval(f, (double)B, (double)S, dd) + tokens * a2a_ms_per_token(m, dd);
}

/* The public predictions: the model read by the size rule (cost_model_in), NaN when it cannot be.
 */
double al_cost_predict(const al_cost_model *caller, uint64_t B, uint64_t S) {
  al_cost_model local;
  const al_cost_model *m = cost_model_in(caller, &local, "al_cost_predict");
  return m ? predict(m, B, S) : NAN;
}

double al_cost_per_sample(const al_cost_model *caller, uint64_t S) {
  al_cost_model local;
  const al_cost_model *m = cost_model_in(caller, &local, "al_cost_per_sample");
  return m ? per_sample(m, S) : NAN;
}

double al_cost_per_sample_sp(const al_cost_model *caller, uint64_t S, uint32_t d) {
  al_cost_model local;
  const al_cost_model *m = cost_model_in(caller, &local, "al_cost_per_sample_sp");
  return m ? per_sample_sp(m, S, d) : NAN;
}

double al_cost_predict_sp(const al_cost_model *caller, uint64_t B, uint64_t S, uint32_t d) {
  al_cost_model local;
  const al_cost_model *m = cost_model_in(caller, &local, "al_cost_predict_sp");
  return m ? predict_sp(m, B, S, d) : NAN;
}

int al_cost_mem_tokens(const al_cost_model *caller, double capacity, double safety,
                       uint64_t *tokens) {
  al_cost_model local;
  const al_cost_model *m = cost_model_in(caller, &local, "al_cost_mem_tokens");
  if (!m) return AL_EINVAL;
  if (!m->has_mem)
    return al_set_error(AL_ESTATE,
                        "cost model has no memory fit (benchmark had no peak_mem_bytes)");
  if (!(capacity > 0) || !(safety > 0) || safety > 1)
    return al_set_error(AL_EINVAL, "memory capacity must be > 0 and safety in (0, 1]");
  if (!(m->mem_m1 > 0))
    return al_set_error(AL_ERANGE, "memory fit has slope %g bytes/token; cannot derive a token cap",
                        m->mem_m1);
  double tok = floor((capacity * safety - m->mem_m0) / m->mem_m1);
  if (!(tok >= 1))
    return al_set_error(AL_ERANGE,
                        "capacity %.0f bytes x safety %.2f leaves no room above the fixed %.0f bytes",
                        capacity, safety, m->mem_m0);
  /* Saturated at the planner's largest M_mem. */
  *tokens = tok > COST_MAX_MEM_TOKENS ? COST_MAX_MEM_TOKENS : (uint64_t)tok;
  return AL_OK;
}
