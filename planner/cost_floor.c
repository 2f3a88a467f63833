/* The floor family of the cost model (al_cost.h): its prediction, a smooth maximum of a launch
 * floor and poly2 with a per-sample term, and its Levenberg-Marquardt refinement on relative
 * (or absolute) residuals. The starting point comes from cost_fit.c (a hard floor and linear
 * least squares). */
#include <math.h>
#include <string.h>

#include "planner/cost_internal.h"

#define FLOOR_LM_MAX_ITER 200

/* smax_k(F, g) = (F^k + g^k)^(1/k) for g > 0 (computed from the larger of the two, so that
 * neither power overflows), F where the work term is not positive. */
static double smax(double F, double g, double k) {
  if (!(g > 0)) return F;
  double m = fmax(F, g);
  return m * pow(pow(F / m, k) + pow(g / m, k), 1.0 / k);
}

double cost_floor_work(const double th[COST_FLOOR_NP], double B, double S, double d) {
  return th[1] + th[2] * B + (th[3] * B * S + th[4] * B * S * S) / d;
}

double cost_floor_eval(const double th[COST_FLOOR_NP], double k, double B, double S, double d) {
  return smax(th[0], cost_floor_work(th, B, S, d), k);
}

/* f and its gradient in th at one row. */
static double floor_grad(const double th[COST_FLOOR_NP], double k, double B, double S, double d,
                         double J[COST_FLOOR_NP]) {
  double g = cost_floor_work(th, B, S, d);
  memset(J, 0, sizeof(double) * COST_FLOOR_NP);
  if (!(g > 0)) {
    J[0] = 1;
    return th[0];
  }
  double f = smax(th[0], g, k);
  double dF = pow(th[0] / f, k - 1), dg = pow(g / f, k - 1);
  J[0] = dF;
  J[1] = dg;
  J[2] = dg * B;
  J[3] = dg * B * S / d;
  J[4] = dg * B * S * S / d;
  return f;
}

static double floor_sse(const cost_rows *r, const double th[COST_FLOOR_NP], double k, int rel) {
  double sse = 0;
  for (size_t i = 0; i < r->n; i++) {
    double f = cost_floor_eval(th, k, r->B[i], r->S[i], r->D ? r->D[i] : 1.0);
    double e = rel ? (r->t[i] - f) / r->t[i] : r->t[i] - f;
    sse += e * e;
  }
  return sse;
}

/* Solves M x = g (n <= COST_FLOOR_NP) by Gaussian elimination with partial pivoting; -1 when
 * singular. */
static int solve_n(double M[COST_FLOOR_NP][COST_FLOOR_NP], const double g[COST_FLOOR_NP], int n,
                   double x[COST_FLOOR_NP]) {
  double A[COST_FLOOR_NP][COST_FLOOR_NP + 1];
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) A[i][j] = M[i][j];
    A[i][n] = g[i];
  }
  for (int c = 0; c < n; c++) {
    int piv = c;
    for (int r = c + 1; r < n; r++)
      if (fabs(A[r][c]) > fabs(A[piv][c])) piv = r;
    if (!(fabs(A[piv][c]) > 1e-300)) return -1;
    if (piv != c)
      for (int j = 0; j <= n; j++) {
        double tmp = A[c][j];
        A[c][j] = A[piv][j];
        A[piv][j] = tmp;
      }
    for (int r = c + 1; r < n; r++) {
      double f = A[r][c] / A[c][c];
      for (int j = c; j <= n; j++) A[r][j] -= f * A[c][j];
    }
  }
  for (int i = n - 1; i >= 0; i--) {
    double s = A[i][n];
    for (int j = i + 1; j < n; j++) s -= A[i][j] * x[j];
    x[i] = s / A[i][i];
  }
  return 0;
}

/* One damped Gauss-Newton step at th: the normal equations scaled to unit diagonal (the
 * columns 1, B, B S and B S^2 span ten decades), damping lambda on that diagonal. 0 with the
 * candidate in cand, -1 when the system is singular. */
static int floor_step(double JtJ[COST_FLOOR_NP][COST_FLOOR_NP], const double Jtr[COST_FLOOR_NP],
                      const double th[COST_FLOOR_NP], double lambda, int fix_s,
                      double cand[COST_FLOOR_NP]) {
  double M[COST_FLOOR_NP][COST_FLOOR_NP], g[COST_FLOOR_NP], x[COST_FLOOR_NP], dsc[COST_FLOOR_NP];
  for (int a = 0; a < COST_FLOOR_NP; a++) dsc[a] = JtJ[a][a] > 0 ? sqrt(JtJ[a][a]) : 1.0;
  for (int a = 0; a < COST_FLOOR_NP; a++) {
    for (int b = 0; b < COST_FLOOR_NP; b++) M[a][b] = JtJ[a][b] / (dsc[a] * dsc[b]);
    M[a][a] += lambda * M[a][a] + 1e-15;
    g[a] = Jtr[a] / dsc[a];
  }
  if (fix_s) { /* s stays where it is: its row and column are the identity's */
    for (int b = 0; b < COST_FLOOR_NP; b++) M[2][b] = M[b][2] = 0;
    M[2][2] = 1, g[2] = 0;
  }
  if (solve_n(M, g, COST_FLOOR_NP, x)) return -1;
  for (int a = 0; a < COST_FLOOR_NP; a++) cand[a] = th[a] + x[a] / dsc[a];
  return 0;
}

void cost_floor_refine(const cost_rows *r, double k, int rel, int fix_s, double th[COST_FLOOR_NP]) {
  double lambda = 1e-3, sse = floor_sse(r, th, k, rel);
  for (int it = 0; it < FLOOR_LM_MAX_ITER; it++) {
    double JtJ[COST_FLOOR_NP][COST_FLOOR_NP] = {{0}}, Jtr[COST_FLOOR_NP] = {0};
    for (size_t i = 0; i < r->n; i++) {
      double J[COST_FLOOR_NP];
      double f = floor_grad(th, k, r->B[i], r->S[i], r->D ? r->D[i] : 1.0, J);
      double w = rel ? 1.0 / r->t[i] : 1.0, e = (r->t[i] - f) * w;
      for (int a = 0; a < COST_FLOOR_NP; a++) {
        Jtr[a] += J[a] * w * e;
        for (int b = 0; b < COST_FLOOR_NP; b++) JtJ[a][b] += J[a] * J[b] * w * w;
      }
    }
    int improved = 0;
    for (int tries = 0; tries < 30 && !improved; tries++) {
      double cand[COST_FLOOR_NP];
      if (floor_step(JtJ, Jtr, th, lambda, fix_s, cand)) {
        lambda *= 10;
        continue;
      }
      double csse = cand[0] > 0 ? floor_sse(r, cand, k, rel) : INFINITY;
      if (isfinite(csse) && csse < sse) {
        double gain = sse - csse;
        memcpy(th, cand, sizeof cand);
        sse = csse;
        lambda = fmax(lambda / 10, 1e-12);
        improved = 1;
        if (gain < 1e-14 * (1 + sse)) it = FLOOR_LM_MAX_ITER;
      } else {
        lambda *= 10;
      }
    }
    if (!improved) break;
  }
}
