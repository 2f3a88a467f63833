/* The floor family of the cost model (al_cost.h): its prediction, a smooth maximum of a launch
 * floor and poly2 with a per-sample term, and its Levenberg-Marquardt refinement on relative
 * (or absolute) residuals. The starting point comes from cost_fit.c (a hard floor and linear
 * least squares). */
#include <math.h>
#include <string.h>

#include "cost/cost_internal.h"

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

/* The floor family as cost_lm.c minimises it. */
typedef struct floor_problem {
  const cost_rows *r;
  double k;
  int rel, fix_s;
} floor_problem;

static void floor_normal(const void *ctx, const double *th, double *JtJ, double *Jtr) {
  const floor_problem *fp = ctx;
  const cost_rows *r = fp->r;
  for (size_t i = 0; i < r->n; i++) {
    double J[COST_FLOOR_NP];
    double f = floor_grad(th, fp->k, r->B[i], r->S[i], r->D ? r->D[i] : 1.0, J);
    double w = fp->rel ? 1.0 / r->t[i] : 1.0, e = (r->t[i] - f) * w;
    for (int a = 0; a < COST_FLOOR_NP; a++) {
      Jtr[a] += J[a] * w * e;
      for (int b = 0; b < COST_FLOOR_NP; b++) JtJ[a * COST_FLOOR_NP + b] += J[a] * J[b] * w * w;
    }
  }
}

/* One damped Gauss-Newton step at th: the normal equations scaled to unit diagonal (the
 * columns 1, B, B S and B S^2 span ten decades), damping lambda on that diagonal. 0 with the
 * candidate in cand, -1 when the system is singular. */
static int floor_step(const void *ctx, const double *JtJ, const double *Jtr, const double *th,
                      double lambda, double *cand) {
  const floor_problem *fp = ctx;
  enum { N = COST_FLOOR_NP };
  double M[N * N], g[N], x[N], dsc[N];
  for (int a = 0; a < N; a++) dsc[a] = JtJ[a * N + a] > 0 ? sqrt(JtJ[a * N + a]) : 1.0;
  for (int a = 0; a < N; a++) {
    for (int b = 0; b < N; b++) M[a * N + b] = JtJ[a * N + b] / (dsc[a] * dsc[b]);
    M[a * N + a] += lambda * M[a * N + a] + 1e-15;
    g[a] = Jtr[a] / dsc[a];
  }
  if (fp->fix_s) { /* s stays where it is: its row and column are the identity's */
    for (int b = 0; b < N; b++) M[2 * N + b] = M[b * N + 2] = 0;
    M[2 * N + 2] = 1, g[2] = 0;
  }
  if (cost_solve(M, g, N, x)) return -1;
  for (int a = 0; a < N; a++) cand[a] = th[a] + x[a] / dsc[a];
  return 0;
}

static double floor_loss(const void *ctx, const double *th) {
  const floor_problem *fp = ctx;
  return floor_sse(fp->r, th, fp->k, fp->rel);
}

static int floor_admits(const void *ctx, const double *cand) {
  (void)ctx;
  return cand[0] > 0; /* a positive launch floor */
}

void cost_floor_refine(const cost_rows *r, double k, int rel, int fix_s, double th[COST_FLOOR_NP]) {
  floor_problem fp = {r, k, rel, fix_s};
  cost_lm_problem p = {COST_FLOOR_NP, FLOOR_LM_MAX_ITER, &fp,         floor_normal,
                       floor_step,    floor_loss,        floor_admits};
  cost_lm_minimize(&p, th);
}
