/* Cost model fitting: weighted linear least squares (Householder QR) for
 * poly2 and the memory line, Levenberg-Marquardt for the power law, and
 * deterministic k-fold held-out errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/al_cost.h"
#include "planner/al_plan.h"
#include "planner/cost_internal.h"

#define LM_MAX_ITER 200

const char *al_cost_family_name(al_cost_family f) {
  switch (f) {
    case AL_COST_AUTO: return "auto";
    case AL_COST_POWER: return "power";
    case AL_COST_POLY2: return "poly2";
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
  else
    return al_set_error(AL_EINVAL, "unknown cost model family '%s' (auto, power or poly2)", s);
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

static int solve3(double M[3][3], const double g[3], double x[3]) {
  /* Gaussian elimination with partial pivoting on a 3x3 system. */
  double A[3][4];
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++) A[i][j] = M[i][j];
    A[i][3] = g[i];
  }
  for (int c = 0; c < 3; c++) {
    int piv = c;
    for (int r = c + 1; r < 3; r++)
      if (fabs(A[r][c]) > fabs(A[piv][c])) piv = r;
    if (fabs(A[piv][c]) < 1e-300) return -1;
    if (piv != c)
      for (int j = 0; j < 4; j++) {
        double tmp = A[c][j];
        A[c][j] = A[piv][j];
        A[piv][j] = tmp;
      }
    for (int r = c + 1; r < 3; r++) {
      double f = A[r][c] / A[c][c];
      for (int j = c; j < 4; j++) A[r][j] -= f * A[c][j];
    }
  }
  for (int i = 2; i >= 0; i--) {
    double s = A[i][3];
    for (int j = i + 1; j < 3; j++) s -= A[i][j] * x[j];
    x[i] = s / A[i][i];
  }
  return 0;
}

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
  double lambda = 1e-3, sse = best_sse;
  for (int it = 0; it < LM_MAX_ITER; it++) {
    double JtJ[3][3] = {{0}}, Jtr[3] = {0};
    for (size_t i = 0; i < n; i++) {
      double x = S[i] / d.s0, xp = pow(x, th[2]);
      double f = th[0] + th[1] * B[i] * xp;
      double w = rel ? 1.0 / t[i] : 1.0;
      double r = (t[i] - f) * w;
      double J[3] = {w, w * B[i] * xp, w * th[1] * B[i] * xp * log(x)};
      for (int a = 0; a < 3; a++) {
        Jtr[a] += J[a] * r;
        for (int b = 0; b < 3; b++) JtJ[a][b] += J[a] * J[b];
      }
    }
    int improved = 0;
    for (int tries = 0; tries < 30 && !improved; tries++) {
      double M[3][3], delta[3], cand[3];
      for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) M[a][b] = JtJ[a][b] + (a == b ? lambda * JtJ[a][a] : 0);
      if (solve3(M, Jtr, delta)) {
        lambda *= 10;
        continue;
      }
      for (int a = 0; a < 3; a++) cand[a] = th[a] + delta[a];
      double csse = pw_cost(&d, cand);
      if (isfinite(csse) && csse < sse) {
        double gain = sse - csse;
        memcpy(th, cand, sizeof th);
        sse = csse;
        lambda = fmax(lambda / 10, 1e-12);
        improved = 1;
        if (gain < 1e-14 * (1 + sse)) it = LM_MAX_ITER;
      } else {
        lambda *= 10;
      }
    }
    if (!improved) break;
  }
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

double cost_eval(al_cost_family f, const double p[3], double B, double S) {
  if (f == AL_COST_POWER) return p[0] + p[1] * B * pow(S, p[2]);
  return p[0] + p[1] * B * S + p[2] * B * S * S;
}

/* c(S) of one fit. */
static double fit_per_sample(const al_cost_fit *f, double s) {
  const double *p = f->params;
  return f->family == AL_COST_POWER ? p[1] * pow(s, p[2]) : p[1] * s + p[2] * s * s;
}

/* Whether c(S) grows on [1, COST_MAX_S]: b > 0 for a power law whose exponent is positive;
 * c'(S) = b + 2 c S, linear in S, positive at both ends for poly2. */
static int fit_grows(const al_cost_fit *f) {
  const double *p = f->params;
  if (f->family == AL_COST_POWER) return p[1] > 0;
  return p[1] + 2 * p[2] > 0 && p[1] + 2 * p[2] * COST_MAX_S > 0;
}

/* The first bound fit f breaks, as text in why (n > 0), or 0 when none. */
static int fit_bound_broken(const al_cost_fit *f, char *why, size_t cap) {
  const double *p = f->params;
  if (f->family != AL_COST_POWER && f->family != AL_COST_POLY2)
    return snprintf(why, cap, "no fitted family");
  if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2]))
    return snprintf(why, cap, "a parameter is not finite");
  if (f->family == AL_COST_POWER && !(p[2] > 0 && p[2] <= COST_MAX_P))
    return snprintf(why, cap, "exponent p = %g outside (0, %g]", p[2], COST_MAX_P);
  if (!fit_grows(f)) return snprintf(why, cap, "per-sample cost does not grow with S");
  const double c1 = fit_per_sample(f, 1);
  if (!(c1 > 0)) return snprintf(why, cap, "per-sample cost c(1) = %g ms <= 0", c1);
  if (!(p[0] + c1 > 0)) return snprintf(why, cap, "t(1, 1) = a + c(1) = %g ms <= 0", p[0] + c1);
  const double tmax = p[0] + COST_MAX_B * fit_per_sample(f, COST_MAX_S);
  if (!(tmax <= COST_MAX_MS))
    return snprintf(why, cap, "t(2^32 - 1, 2^20) = %g ms above %g ms", tmax, COST_MAX_MS);
  return 0;
}

int cost_fit_usable(const al_cost_fit *f, char *why, size_t cap) {
  int n = fit_bound_broken(f, why, cap);
  if (n <= 0) return 0;
  if ((size_t)n < cap)
    snprintf(why + n, cap - (size_t)n, " (params %g, %g, %g)", f->params[0], f->params[1],
             f->params[2]);
  return -1;
}

static int fit_family(al_cost_family f, const double *B, const double *S, const double *t, size_t n,
                      int rel, double p[3]) {
  return f == AL_COST_POWER ? fit_power(B, S, t, n, rel, p) : fit_poly2(B, S, t, n, rel, p);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* R^2 on all rows, then held-out relative errors: row i is in fold i mod k. */
int cost_evaluate(al_cost_family f, const al_bench *b, uint32_t folds, int rel, al_cost_fit *out) {
  size_t n = b->n;
  memset(out, 0, sizeof *out);
  out->family = f;
  int rc = fit_family(f, b->B, b->S, b->ms, n, rel, out->params);
  if (rc) return al_error_prefix(rc, "%s fit on all %zu rows", al_cost_family_name(f), n);
  double mean = 0, ss_tot = 0, ss_res = 0;
  for (size_t i = 0; i < n; i++) mean += b->ms[i];
  mean /= (double)n;
  for (size_t i = 0; i < n; i++) {
    double r = b->ms[i] - cost_eval(f, out->params, b->B[i], b->S[i]);
    ss_res += r * r;
    ss_tot += (b->ms[i] - mean) * (b->ms[i] - mean);
  }
  out->r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 0.0;

  double *tb = malloc(sizeof(double) * n * 3), *err = malloc(sizeof(double) * n);
  if (!tb || !err) {
    free(tb);
    free(err);
    return al_set_error(AL_ENOMEM, "k-fold: out of memory");
  }
  double *tB = tb, *tS = tb + n, *tt = tb + 2 * n;
  for (uint32_t k = 0; k < folds && !rc; k++) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (i % folds != k) tB[m] = b->B[i], tS[m] = b->S[i], tt[m] = b->ms[i], m++;
    double p[3];
    rc = fit_family(f, tB, tS, tt, m, rel, p);
    if (rc) {
      al_error_prefix(rc, "%s fit, held-out fold %u of %u", al_cost_family_name(f), k + 1, folds);
      break;
    }
    for (size_t i = k; i < n; i += folds)
      err[i] = fabs(cost_eval(f, p, b->B[i], b->S[i]) - b->ms[i]) / b->ms[i];
  }
  if (!rc) {
    qsort(err, n, sizeof *err, cmp_double);
    out->median_rel_err = n % 2 ? err[n / 2] : 0.5 * (err[n / 2 - 1] + err[n / 2]);
    out->max_rel_err = err[n - 1];
  }
  free(tb);
  free(err);
  return rc;
}

#define COST_NEEDS "(the planner needs step times that grow with B*S: planner/README.md, section 3)"

/* Fits family fam (both for AL_COST_AUTO) into out->fit (and out->alt). A fit a plan could not
 * use (cost_fit_usable) is refused here, where the benchmark is at hand, rather than by plan;
 * auto keeps the usable family when only one is. */
static int fit_families(const al_bench *b, al_cost_family fam, uint32_t folds, int rel,
                        const char *src, al_cost_model *out) {
  char why[2][200];
  int rc;
  if (fam != AL_COST_AUTO) {
    if ((rc = cost_evaluate(fam, b, folds, rel, &out->fit))) return al_error_prefix(rc, "%s", src);
    if (cost_fit_usable(&out->fit, why[0], sizeof why[0]))
      return al_set_error(AL_ERANGE, "%s: the %s fit cannot be planned with: %s " COST_NEEDS, src,
                          al_cost_family_name(fam), why[0]);
    return AL_OK;
  }
  al_cost_fit pw, p2;
  if ((rc = cost_evaluate(AL_COST_POWER, b, folds, rel, &pw)) ||
      (rc = cost_evaluate(AL_COST_POLY2, b, folds, rel, &p2)))
    return al_error_prefix(rc, "%s", src);
  int pw_ok = !cost_fit_usable(&pw, why[0], sizeof why[0]);
  int p2_ok = !cost_fit_usable(&p2, why[1], sizeof why[1]);
  /* Ties go to poly2: it has no exponent to extrapolate wrongly. */
  int power_wins = pw_ok != p2_ok ? pw_ok : pw.median_rel_err < p2.median_rel_err;
  out->fit = power_wins ? pw : p2;
  out->alt = power_wins ? p2 : pw;
  if (!pw_ok && !p2_ok)
    return al_set_error(AL_ERANGE,
                        "%s: the %s fit cannot be planned with: %s, nor the %s fit: %s " COST_NEEDS,
                        src, al_cost_family_name(out->fit.family), why[!power_wins],
                        al_cost_family_name(out->alt.family), why[power_wins]);
  return AL_OK;
}

int al_cost_fit_bench(const al_bench *in, const al_cost_fit_options *opts, al_cost_model *out) {
  if (!in || !out) return al_set_error(AL_EINVAL, "al_cost_fit_bench: NULL argument");
  memset(out, 0, sizeof *out);
  al_cost_family fam = opts ? opts->family : AL_COST_AUTO;
  uint32_t folds = opts && opts->folds ? opts->folds : 5;
  double min_tok = opts && opts->min_tokens ? (double)opts->min_tokens : AL_COST_DEFAULT_MIN_TOKENS;
  int rel = !(opts && opts->loss == AL_LOSS_ABS);
  /* Launch-bound rows (tiny B*S) measure kernel-launch overhead, not work:
   * their times are not even monotone in B, so they are left out of the fit
   * and counted. */
  al_bench b = *in;
  size_t n = 0;
  b.B = malloc(sizeof(double) * (in->n ? in->n : 1) * 4);
  if (!b.B) return al_set_error(AL_ENOMEM, "cost fit: out of memory");
  b.S = b.B + in->n, b.ms = b.S + in->n, b.mem = in->mem ? b.ms + in->n : NULL;
  for (size_t i = 0; i < in->n; i++) {
    if (in->B[i] * in->S[i] < min_tok) continue;
    b.B[n] = in->B[i], b.S[n] = in->S[i], b.ms[n] = in->ms[i];
    if (in->mem) b.mem[n] = in->mem[i];
    n++;
  }
  b.n = n;
  int rc = AL_OK;
  if (n < AL_BENCH_MIN_ROWS)
    rc = al_set_error(AL_EINVAL,
                      "%s: too few rows: %zu with B*S >= %.0f tokens (%zu launch-bound rows left out; need at least %d)",
                      in->source, n, min_tok, in->n - n, AL_BENCH_MIN_ROWS);
  else if (folds < 2 || folds > n)
    rc = al_set_error(AL_EINVAL, "%s: %u folds for %zu rows", in->source, folds, n);
  if (!rc) rc = fit_families(&b, fam, folds, rel, in->source, out);
  if (!rc && b.mem) {
    double *X = malloc(sizeof(double) * n * 2);
    if (!X) rc = al_set_error(AL_ENOMEM, "memory fit: out of memory");
    for (size_t i = 0; X && i < n; i++) X[2 * i] = 1.0, X[2 * i + 1] = b.B[i] * b.S[i];
    double beta[2];
    if (!rc && (rc = cost_lstsq(X, b.mem, NULL, n, 2, beta)))
      al_error_prefix(rc, "%s: memory fit", in->source);
    free(X);
    if (!rc) out->has_mem = 1, out->mem_m0 = beta[0], out->mem_m1 = beta[1];
  }
  free(b.B);
  if (rc) return rc;
  out->rows = (uint32_t)n;
  out->rows_excluded = (uint32_t)(in->n - n);
  out->min_tokens = min_tok;
  out->abs_loss = !rel;
  snprintf(out->device, sizeof out->device, "%s", in->device);
  snprintf(out->measured, sizeof out->measured, "%s", in->measured);
  snprintf(out->source, sizeof out->source, "%s", in->source);
  return AL_OK;
}

double al_cost_predict(const al_cost_model *m, uint64_t B, uint64_t S) {
  return m->fit.params[0] + (double)B * al_cost_per_sample(m, S);
}

double al_cost_per_sample(const al_cost_model *m, uint64_t S) {
  const double *p = m->fit.params;
  double s = (double)S;
  if (m->fit.family == AL_COST_POWER) return p[1] * pow(s, p[2]);
  return p[1] * s + p[2] * s * s;
}

double al_cost_per_sample_sp(const al_cost_model *m, uint64_t S, uint32_t d) {
  double c = al_cost_per_sample(m, S);
  if (d <= 1) return c;
  double bytes = m->sp_a2a_bytes_per_token > 0 ? m->sp_a2a_bytes_per_token
                                               : AL_COST_DEFAULT_SP_A2A_BYTES_PER_TOKEN;
  double gbps = m->sp_link_gbps > 0 ? m->sp_link_gbps : AL_COST_DEFAULT_SP_LINK_GBPS;
  double dd = (double)d;
  /* bytes / (GB/s x 1e9) seconds = bytes / (gbps x 1e6) ms */
  double a2a_ms = (double)S * (dd - 1) / (dd * dd) * bytes / (gbps * 1e6);
  return c / dd + a2a_ms;
}

double al_cost_predict_sp(const al_cost_model *m, uint64_t B, uint64_t S, uint32_t d) {
  if (d <= 1) return al_cost_predict(m, B, S);
  return m->fit.params[0] + (double)B * al_cost_per_sample_sp(m, S, d);
}

int al_cost_mem_tokens(const al_cost_model *m, double capacity, double safety, uint64_t *tokens) {
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
  *tokens = tok > AL_PLAN_MAX_MEM_TOKENS ? AL_PLAN_MAX_MEM_TOKENS : (uint64_t)tok;
  return AL_OK;
}
