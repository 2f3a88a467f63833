/* The cost model's one nonlinear solver: Levenberg-Marquardt over a family's parameters
 * (cost_internal.h), and the dense linear solve its steps take. The families (power and floor,
 * cost_fit.c and cost_floor.c) supply how their rows build the normal equations, how a damped
 * step is taken from them and what a candidate costs; the iteration, damping schedule and
 * stopping rule are here only. */
#include <math.h>
#include <string.h>

#include "cost/cost_internal.h"

int cost_solve(const double *M, const double *g, int n, double *x) {
  double A[COST_LM_MAX_NP][COST_LM_MAX_NP + 1];
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) A[i][j] = M[i * n + j];
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

void cost_lm_minimize(const cost_lm_problem *p, double *th) {
  const int np = p->np;
  double lambda = 1e-3, sse = p->sse(p->ctx, th);
  for (int it = 0; it < p->max_iter; it++) {
    double JtJ[COST_LM_MAX_NP * COST_LM_MAX_NP] = {0}, Jtr[COST_LM_MAX_NP] = {0};
    p->normal(p->ctx, th, JtJ, Jtr);
    int improved = 0;
    for (int tries = 0; tries < 30 && !improved; tries++) {
      double cand[COST_LM_MAX_NP];
      if (p->step(p->ctx, JtJ, Jtr, th, lambda, cand)) {
        lambda *= 10;
        continue;
      }
      double csse = p->admits && !p->admits(p->ctx, cand) ? INFINITY : p->sse(p->ctx, cand);
      if (isfinite(csse) && csse < sse) {
        double gain = sse - csse;
        memcpy(th, cand, sizeof(double) * (size_t)np);
        sse = csse;
        lambda = fmax(lambda / 10, 1e-12);
        improved = 1;
        if (gain < 1e-14 * (1 + sse)) it = p->max_iter;
      } else {
        lambda *= 10;
      }
    }
    if (!improved) break;
  }
}
