/*
 * adaln_bench.c - times the fused AdaLN kernels against a device-to-device copy measured in
 * the same run.
 *
 *   adaln_bench [--dtype bf16|fp16|fp32] [--iters N] [--json PATH] [--sweep]
 *               [--shape B,N,D]...
 *
 * Per shape: forward ms (median of per-launch CUDA event times), forward GB/s (read x + write
 * y) and its percent of copy GB/s (read + write); backward ms (dx + dscale + dshift, all
 * launches), the backward byte floor (read x, dy, mean, rstd, scale; write dx, dscale,
 * dshift) over copy GB/s, and the percent of that floor reached; then a device copy of x into
 * y timed the same way (copyx: the forward's own bytes with the same fixed launch, ramp and
 * drain costs, which the 1 GiB copy amortises) and the forward's time as a percent of it.
 * Inputs rotate among buffer sets larger than L2 together, so no launch reads what the
 * previous one left in L2.
 * --sweep also times backward variants (kernel, row groups per block, stages, register cap,
 * threads per row, the split path: the knobs of kernels/al_adaln_tuning.h). --split times the
 * backward's kernels apart (CUDA graphs),
 * --chunks the tile kernel's rows per block and row groups, --placement the default with the
 * buffers allocated five ways in one process, --fwd both forward kernels (fwd_kernel ROWS and
 * TILE) alternated on the same buffers.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "kernels/adaln_fill_internal.h"
#include "kernels/al_adaln.h"
#include "kernels/al_adaln_tuning.h"

#define CK(call)                                                                             \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define AL(call)                                                                             \
  do {                                                                                       \
    int rc_ = (call);                                                                        \
    if (rc_ != AL_OK) {                                                                      \
      fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, al_status_name(rc_), \
              al_last_error());                                                              \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define MAX_SETS 16
#define MAX_SAMPLES 64

typedef struct shape {
  int B, N, D;
  int nlens; /* > 0: packed with these lengths */
  int lens[MAX_SAMPLES];
  char name[64];
} shape;

typedef struct result {
  shape s;
  char variant[24];
  int64_t rows;
  double fwd_ms, fwd_gbps, fwd_pct_copy;
  double bwd_ms, bwd_floor_ms, bwd_gbps, bwd_pct_floor;
  double copyx_ms, fwd_pct_copyx; /* a copy of x into y: the forward's own bytes */
} result;

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static float median(float *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_float);
  return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* Device copy GB/s (bytes read + written), 1 GiB, median of 20. */
static double copy_gbps(void) {
  const size_t bytes = (size_t)1 << 30;
  void *a, *b;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float t[20];
  for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
  for (int i = 0; i < 20; ++i) {
    CK(cudaEventRecord(e0, 0));
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0));
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&t[i], e0, e1));
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 2.0 * (double)bytes / (median(t, 20) * 1e-3) / 1e9;
}

/* Buffer placement (--placement): how setup() gets its tensors, to test whether the
 * process-to-process spread follows where the buffers land. */
enum {
  PLACE_FRESH = 0, /* one cudaMalloc per tensor (the default) */
  PLACE_CARVED,    /* one big cudaMalloc, tensors at 2 MiB-aligned offsets */
  PLACE_SHIFT1G,   /* a 1 GiB allocation in front, then one cudaMalloc per tensor */
  PLACE_SKEW,      /* carved, tensor k at 2 MiB-aligned + 6 MiB + (k % 10) * 192 KiB */
  PLACE_REVERSE,   /* one cudaMalloc per tensor, allocated in reverse order of use */
  PLACE_N
};
static const char *const g_place_name[PLACE_N] = {"fresh", "carved2M", "shift1G", "skew",
                                                  "reverse"};
static int g_place = PLACE_FRESH;

typedef struct bufs {
  int nsets;
  char *pool; /* PLACE_CARVED / PLACE_SKEW: the one allocation */
  size_t pool_off, pool_bytes;
  int pool_k;  /* tensors carved so far */
  void *front; /* PLACE_SHIFT1G: the allocation in front */
  void *x[MAX_SETS], *y[MAX_SETS], *dy[MAX_SETS], *dx[MAX_SETS];
  float *mean[MAX_SETS], *rstd[MAX_SETS];
  void *scale, *shift, *dscale, *dshift, *ws;
  size_t ws_bytes;
  int32_t *cu;
  int32_t cu_host[MAX_SAMPLES + 1];
  al_adaln_desc desc;
} bufs;

static void *balloc(bufs *b, size_t bytes) {
  if (!b->pool) {
    void *p;
    CK(cudaMalloc(&p, bytes));
    return p;
  }
  size_t off = (b->pool_off + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
  if (g_place == PLACE_SKEW) off += ((size_t)6 << 20) + (size_t)(b->pool_k % 10) * (192 << 10);
  if (off + bytes > b->pool_bytes) {
    fprintf(stderr, "pool of %zu bytes too small\n", b->pool_bytes);
    exit(1);
  }
  b->pool_off = off + bytes;
  b->pool_k++;
  return b->pool + off;
}

static void bfree(bufs *b, void *p) {
  if (!b->pool) CK(cudaFree(p));
}

static void setup(bufs *b, const shape *s, int dtype) {
  memset(b, 0, sizeof *b);
  const size_t es = al_dtype_size(dtype);
  int64_t rows = (int64_t)s->B * s->N;
  b->desc.dtype = dtype;
  b->desc.batch = s->nlens ? s->nlens : s->B;
  b->desc.dim = s->D;
  if (s->nlens) {
    b->cu_host[0] = 0;
    for (int i = 0; i < s->nlens; ++i) b->cu_host[i + 1] = b->cu_host[i] + s->lens[i];
    rows = b->cu_host[s->nlens];
    CK(cudaMalloc((void **)&b->cu, sizeof(int32_t) * (s->nlens + 1)));
    CK(cudaMemcpy(b->cu, b->cu_host, sizeof(int32_t) * (s->nlens + 1), cudaMemcpyHostToDevice));
    b->desc.rows = rows;
    b->desc.cu_seqlens = b->cu;
    b->desc.cu_seqlens_host = b->cu_host;
  } else {
    b->desc.seq_len = s->N;
  }
  const size_t n = (size_t)rows * s->D, nbd = (size_t)b->desc.batch * s->D;
  const size_t per_set = 4 * n * es;
  b->nsets = (int)((((size_t)256 << 20) + per_set - 1) / per_set);
  if (b->nsets < 2) b->nsets = 2;
  if (b->nsets > MAX_SETS) b->nsets = MAX_SETS;
  if (g_place == PLACE_SHIFT1G) CK(cudaMalloc(&b->front, (size_t)1 << 30));
  if (g_place == PLACE_CARVED || g_place == PLACE_SKEW) {
    /* 4 row tensors + mean, rstd per set, 4 [B, D] tensors, alignment and skew room */
    b->pool_bytes = (size_t)b->nsets * (4 * n * es + 2 * rows * sizeof(float)) + 4 * nbd * es +
                    (size_t)(6 * b->nsets + 4) * ((size_t)12 << 20);
    CK(cudaMalloc((void **)&b->pool, b->pool_bytes));
  }
  if (g_place == PLACE_REVERSE) {
    b->dshift = balloc(b, nbd * es);
    b->dscale = balloc(b, nbd * es);
    b->shift = balloc(b, nbd * es);
    b->scale = balloc(b, nbd * es);
  }
  for (int j = 0; j < b->nsets; ++j) {
    const int i = g_place == PLACE_REVERSE ? b->nsets - 1 - j : j;
    if (g_place == PLACE_REVERSE) {
      b->rstd[i] = (float *)balloc(b, rows * sizeof(float));
      b->mean[i] = (float *)balloc(b, rows * sizeof(float));
      b->dx[i] = balloc(b, n * es);
      b->dy[i] = balloc(b, n * es);
      b->y[i] = balloc(b, n * es);
      b->x[i] = balloc(b, n * es);
    } else {
      b->x[i] = balloc(b, n * es);
      b->y[i] = balloc(b, n * es);
      b->dy[i] = balloc(b, n * es);
      b->dx[i] = balloc(b, n * es);
      b->mean[i] = (float *)balloc(b, rows * sizeof(float));
      b->rstd[i] = (float *)balloc(b, rows * sizeof(float));
    }
    AL(adaln_fill_normal(b->x[i], dtype, n, 11 + i, 0.0f, 1.0f, NULL));
    AL(adaln_fill_normal(b->dy[i], dtype, n, 101 + i, 0.0f, 1.0f, NULL));
  }
  if (g_place != PLACE_REVERSE) {
    b->scale = balloc(b, nbd * es);
    b->shift = balloc(b, nbd * es);
    b->dscale = balloc(b, nbd * es);
    b->dshift = balloc(b, nbd * es);
  }
  AL(adaln_fill_normal(b->scale, dtype, nbd, 7, 0.0f, 0.5f, NULL));
  AL(adaln_fill_normal(b->shift, dtype, nbd, 8, 0.0f, 0.5f, NULL));
  CK(cudaDeviceSynchronize());
}

static void teardown(bufs *b) {
  for (int i = 0; i < b->nsets; ++i) {
    bfree(b, b->x[i]);
    bfree(b, b->y[i]);
    bfree(b, b->dy[i]);
    bfree(b, b->dx[i]);
    bfree(b, b->mean[i]);
    bfree(b, b->rstd[i]);
  }
  bfree(b, b->scale);
  bfree(b, b->shift);
  bfree(b, b->dscale);
  bfree(b, b->dshift);
  if (b->pool) CK(cudaFree(b->pool));
  if (b->front) CK(cudaFree(b->front));
  if (b->ws) CK(cudaFree(b->ws));
  if (b->cu) CK(cudaFree(b->cu));
}

static void fwd(bufs *b, const al_adaln_options *o, int i) {
  AL(al_adaln_forward(&b->desc, o, b->x[i], b->scale, b->shift, b->y[i], b->mean[i], b->rstd[i],
                      NULL));
}

static void bwd(bufs *b, const al_adaln_options *o, int i) {
  AL(al_adaln_backward(&b->desc, o, b->dy[i], b->x[i], b->scale, b->mean[i], b->rstd[i], b->dx[i],
                       b->dscale, b->dshift, b->ws, b->ws_bytes, NULL));
}

static float g_warm_ms = 50.0f; /* --warmup-ms */
static int g_per_set;           /* --per-set: print each input set's median to stderr */

static float minf(const float *v, int n) {
  float m = v[0];
  for (int i = 1; i < n; ++i) m = v[i] < m ? v[i] : m;
  return m;
}

static float maxf(const float *v, int n) {
  float m = v[0];
  for (int i = 1; i < n; ++i) m = v[i] > m ? v[i] : m;
  return m;
}

/* One timed operation on input set i: 0 forward, 1 backward, 2 a device copy of x into y
 * (the forward's bytes, read and written once: the same launch, ramp and drain costs). */
static void run_op(bufs *b, const al_adaln_options *o, int which, int i) {
  if (which == 2) {
    const al_adaln_desc *d = &b->desc;
    const int64_t rows = d->cu_seqlens ? d->rows : (int64_t)d->batch * d->seq_len;
    CK(cudaMemcpyAsync(b->y[i], b->x[i], (size_t)rows * d->dim * al_dtype_size(d->dtype),
                       cudaMemcpyDeviceToDevice, NULL));
  } else if (which == 1) {
    bwd(b, o, i);
  } else {
    fwd(b, o, i);
  }
}

/* Median ms of `iters` launches of run_op(which), one event pair each. */
static double time_op(bufs *b, const al_adaln_options *o, int which, int iters) {
  cudaEvent_t *ev = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * 2 * iters);
  float *t = (float *)malloc(sizeof(float) * iters);
  for (int i = 0; i < 2 * iters; ++i) CK(cudaEventCreate(&ev[i]));
  /* Warm up for --warmup-ms (50) of work, not a few launches: setup idles the GPU, and its
   * clocks take tens of ms to ramp back (a 3-launch warm-up gave 20% swings between shapes). */
  cudaEvent_t w0, w1;
  CK(cudaEventCreate(&w0));
  CK(cudaEventCreate(&w1));
  float warm_ms = 0.0f;
  for (int i = 0; i < 100000 && warm_ms < g_warm_ms; ++i) {
    if (i % 8 == 0) CK(cudaEventRecord(w0, NULL));
    run_op(b, o, which, i % b->nsets);
    if (i % 8 == 7) {
      CK(cudaEventRecord(w1, NULL));
      CK(cudaEventSynchronize(w1));
      float ms;
      CK(cudaEventElapsedTime(&ms, w0, w1));
      warm_ms += ms;
    }
  }
  CK(cudaEventDestroy(w0));
  CK(cudaEventDestroy(w1));
  for (int i = 0; i < iters; ++i) {
    CK(cudaEventRecord(ev[2 * i], NULL));
    run_op(b, o, which, i % b->nsets);
    CK(cudaEventRecord(ev[2 * i + 1], NULL));
  }
  CK(cudaDeviceSynchronize());
  CK(cudaGetLastError());
  for (int i = 0; i < iters; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  for (int i = 0; i < 2 * iters; ++i) CK(cudaEventDestroy(ev[i]));
  if (g_per_set) {
    /* Median per input set: tells a slow buffer set apart from a slow moment. */
    fprintf(stderr, "  %s per-set median ms:", which == 2 ? "copy" : which ? "bwd" : "fwd");
    float *u = (float *)malloc(sizeof(float) * iters);
    for (int s = 0; s < b->nsets; ++s) {
      int k = 0;
      for (int i = s; i < iters; i += b->nsets) u[k++] = t[i];
      fprintf(stderr, " %.4f", median(u, k));
    }
    fprintf(stderr, "  (min %.4f, max %.4f over %d launches)\n", minf(t, iters), maxf(t, iters),
            iters);
    free(u);
  }
  const double m = median(t, iters);
  free(ev);
  free(t);
  return m;
}

/* --split: the backward captured into a CUDA graph per input set, then each of its kernel
 * nodes alone in a graph of its own (the row kernel; the finalize, which then reads slots
 * the previous launch left in L2, as it does after the row kernel), and the whole graph.
 * Medians of per-launch event pairs, rotating over the sets; to stderr. */
static void time_split(bufs *b, const al_adaln_options *o, int iters, const char *tag) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraphExec_t ex[3][MAX_SETS];
  cudaGraph_t full[MAX_SETS], part[2][MAX_SETS];
  int nk = 0;
  for (int i = 0; i < b->nsets; ++i) {
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    AL(al_adaln_backward(&b->desc, o, b->dy[i], b->x[i], b->scale, b->mean[i], b->rstd[i], b->dx[i],
                         b->dscale, b->dshift, b->ws, b->ws_bytes, st));
    CK(cudaStreamEndCapture(st, &full[i]));
    cudaGraphNode_t nodes[8];
    size_t nn = 8;
    CK(cudaGraphGetNodes(full[i], nodes, &nn));
    cudaGraphNode_t kn[8];
    nk = 0;
    for (size_t j = 0; j < nn && j < 8; ++j) {
      enum cudaGraphNodeType ty;
      CK(cudaGraphNodeGetType(nodes[j], &ty));
      if (ty == cudaGraphNodeTypeKernel) kn[nk++] = nodes[j];
    }
    if (nk != 2) {
      fprintf(stderr, "  split %s: %d kernel nodes, skipped\n", tag, nk);
      return;
    }
    CK(cudaGraphInstantiate(&ex[0][i], full[i], 0));
    for (int k = 0; k < 2; ++k) {
      struct cudaKernelNodeParams kp;
      CK(cudaGraphKernelNodeGetParams(kn[k], &kp));
      cudaGraphNode_t n1;
      CK(cudaGraphCreate(&part[k][i], 0));
      CK(cudaGraphAddKernelNode(&n1, part[k][i], NULL, 0, &kp));
      CK(cudaGraphInstantiate(&ex[1 + k][i], part[k][i], 0));
    }
  }
  cudaEvent_t *ev = (cudaEvent_t *)malloc(sizeof(cudaEvent_t) * 2 * iters);
  float *t = (float *)malloc(sizeof(float) * iters);
  for (int i = 0; i < 2 * iters; ++i) CK(cudaEventCreate(&ev[i]));
  double med[3];
  for (int w = 0; w < 3; ++w) {
    for (int i = 0; i < 200; ++i) CK(cudaGraphLaunch(ex[w == 2 ? 0 : w][i % b->nsets], st));
    for (int i = 0; i < iters; ++i) {
      CK(cudaEventRecord(ev[2 * i], st));
      CK(cudaGraphLaunch(ex[w][i % b->nsets], st));
      CK(cudaEventRecord(ev[2 * i + 1], st));
    }
    CK(cudaStreamSynchronize(st));
    CK(cudaGetLastError());
    for (int i = 0; i < iters; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
    med[w] = median(t, iters);
  }
  /* the finalize alone again, each launch right after a full backward (slots as left by it) */
  for (int i = 0; i < iters; ++i) {
    CK(cudaGraphLaunch(ex[1][i % b->nsets], st));
    CK(cudaEventRecord(ev[2 * i], st));
    CK(cudaGraphLaunch(ex[2][i % b->nsets], st));
    CK(cudaEventRecord(ev[2 * i + 1], st));
  }
  CK(cudaStreamSynchronize(st));
  for (int i = 0; i < iters; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  const double fin_after = median(t, iters);
  fprintf(stderr,
          "  split %-22s graph %.4f ms  row kernel alone %.4f  finalize alone %.4f (after the "
          "row kernel %.4f)  row+fin %.4f\n",
          tag, med[0], med[1], med[2], fin_after, med[1] + fin_after);
  for (int i = 0; i < 2 * iters; ++i) CK(cudaEventDestroy(ev[i]));
  free(ev);
  free(t);
  for (int i = 0; i < b->nsets; ++i) {
    CK(cudaGraphExecDestroy(ex[0][i]));
    CK(cudaGraphDestroy(full[i]));
    for (int k = 0; k < 2; ++k) {
      CK(cudaGraphExecDestroy(ex[1 + k][i]));
      CK(cudaGraphDestroy(part[k][i]));
    }
  }
  CK(cudaStreamDestroy(st));
}

static result measure(bufs *b, const shape *s, const al_adaln_options *o, const char *variant,
                      int dtype, int iters, double copy) {
  result r;
  memset(&r, 0, sizeof r);
  r.s = *s;
  snprintf(r.variant, sizeof r.variant, "%s", variant);
  const size_t es = al_dtype_size(dtype);
  const int64_t rows = b->desc.cu_seqlens ? b->desc.rows : (int64_t)s->B * s->N;
  const double n = (double)rows * s->D, nbd = (double)b->desc.batch * s->D;
  size_t need = 0;
  AL(al_adaln_backward_workspace_size(&b->desc, o, &need));
  if (need > b->ws_bytes) {
    if (b->ws) CK(cudaFree(b->ws));
    CK(cudaMalloc(&b->ws, need));
    b->ws_bytes = need;
  }
  /* Every op once over every input set before anything is timed (mean/rstd for the
   * backward, and the buffers in the state a training step leaves them in): without it the
   * first measurement after setup ran 1-2.5% slower, the copy too (docs/kernels-notes.md,
   * v9). */
  for (int i = 0; i < b->nsets; ++i) {
    fwd(b, o, i);
    bwd(b, o, i);
    run_op(b, o, 2, i);
  }
  r.rows = rows;
  r.fwd_ms = time_op(b, o, 0, iters);
  r.bwd_ms = time_op(b, o, 1, iters);
  r.copyx_ms = time_op(b, o, 2, iters);
  const double fwd_bytes = 2.0 * n * es;
  const double bwd_bytes = 3.0 * n * es + 8.0 * rows + 3.0 * nbd * es;
  r.fwd_gbps = fwd_bytes / (r.fwd_ms * 1e-3) / 1e9;
  r.fwd_pct_copy = 100.0 * r.fwd_gbps / copy;
  r.fwd_pct_copyx = 100.0 * r.copyx_ms / r.fwd_ms;
  r.bwd_gbps = bwd_bytes / (r.bwd_ms * 1e-3) / 1e9;
  r.bwd_floor_ms = bwd_bytes / (copy * 1e9) * 1e3;
  r.bwd_pct_floor = 100.0 * r.bwd_floor_ms / r.bwd_ms;
  return r;
}

static void print_row(const result *r) {
  printf("%-22s %-12s %8lld %6d  %8.4f %7.0f %5.1f%%   %8.4f %8.4f %7.0f %5.1f%%   %8.4f %5.1f%%\n",
         r->s.name, r->variant, (long long)r->rows, r->s.D, r->fwd_ms, r->fwd_gbps, r->fwd_pct_copy,
         r->bwd_ms, r->bwd_floor_ms, r->bwd_gbps, r->bwd_pct_floor, r->copyx_ms, r->fwd_pct_copyx);
  fflush(stdout);
}

static void add_shape(shape *v, int *n, int B, int N, int D) {
  shape s;
  memset(&s, 0, sizeof s);
  s.B = B;
  s.N = N;
  s.D = D;
  snprintf(s.name, sizeof s.name, "%dx%dx%d", B, N, D);
  v[(*n)++] = s;
}

int main(int argc, char **argv) {
  int dtype = AL_DTYPE_BF16, iters = 100, sweep = 0, nshapes = 0, split = 0, placement = 0,
      chunks = 0, fwdk = 0;
  const char *json = NULL, *dname = "bf16";
  shape shapes[32];
  /* Options without a value: each sets its flag. */
  const struct {
    const char *name;
    int *on;
  } switches[] = {{"--per-set", &g_per_set},   {"--sweep", &sweep},   {"--split", &split},
                  {"--placement", &placement}, {"--chunks", &chunks}, {"--fwd", &fwdk}};
  const int nswitches = (int)(sizeof switches / sizeof switches[0]);
  for (int i = 1; i < argc; ++i) {
    int k = 0;
    while (k < nswitches && strcmp(argv[i], switches[k].name)) ++k;
    if (k < nswitches) {
      *switches[k].on = 1;
    } else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
      dname = argv[++i];
      dtype = !strcmp(dname, "bf16")   ? AL_DTYPE_BF16
              : !strcmp(dname, "fp16") ? AL_DTYPE_FP16
              : !strcmp(dname, "fp32") ? AL_DTYPE_FP32
                                       : 0;
      if (!dtype) {
        fprintf(stderr, "unknown dtype %s\n", dname);
        return 2;
      }
    } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--json") && i + 1 < argc) {
      json = argv[++i];
    } else if (!strcmp(argv[i], "--warmup-ms") && i + 1 < argc) {
      g_warm_ms = (float)atof(argv[++i]);
      if (g_warm_ms < 0.0f) g_warm_ms = 0.0f;
    } else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < 32) {
      int B, N, D;
      if (sscanf(argv[++i], "%d,%d,%d", &B, &N, &D) != 3) {
        fprintf(stderr, "--shape wants B,N,D\n");
        return 2;
      }
      add_shape(shapes, &nshapes, B, N, D);
    } else {
      fprintf(stderr,
              "usage: %s [--dtype bf16|fp16|fp32] [--iters N] [--warmup-ms MS] [--json PATH] "
              "[--sweep] [--per-set] [--split] [--placement] [--chunks] [--fwd] "
              "[--shape B,N,D]...\n",
              argv[0]);
      return 2;
    }
  }
  if (iters < 5) iters = 5;
  if (nshapes == 0) {
    add_shape(shapes, &nshapes, 1, 4096, 1536);
    add_shape(shapes, &nshapes, 1, 32760, 1536);
    add_shape(shapes, &nshapes, 1, 65536, 1536);
    add_shape(shapes, &nshapes, 2, 32760, 3072);
    add_shape(shapes, &nshapes, 1, 65536, 5120);
    add_shape(shapes, &nshapes, 1, 115200, 3072);
    /* Packed batch: one 480p clip, images, shorter clips; 65,536 rows. */
    static const int lens[8] = {32760, 1024, 256, 15600, 4096, 7800, 2048, 1952};
    shape s;
    memset(&s, 0, sizeof s);
    s.nlens = 8;
    s.D = 3072;
    s.B = 1;
    for (int i = 0; i < 8; ++i) {
      s.lens[i] = lens[i];
      s.N += lens[i];
    }
    snprintf(s.name, sizeof s.name, "packed8x%dx%d", s.N, s.D);
    shapes[nshapes++] = s;
  }

  struct cudaDeviceProp prop;
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  const double copy = copy_gbps();
  printf("device %s, %d SMs, L2 %d MB; dtype %s; copy %.0f GB/s (read + write); median of %d\n",
         prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, dname, copy, iters);
  printf("%-22s %-12s %8s %6s  %8s %7s %6s   %8s %8s %7s %6s   %8s %6s\n", "shape", "variant",
         "rows", "D", "fwd_ms", "GB/s", "%copy", "bwd_ms", "floor_ms", "GB/s", "%floor", "copyx_ms",
         "%cpyx");

  result res[512];
  int nres = 0;
  for (int si = 0; si < nshapes; ++si) {
    bufs b;
    /* o.tuning -> tu, all zeros (the library's choice) unless a variant below sets knobs. */
    al_adaln_tuning tu;
    memset(&tu, 0, sizeof tu);
    al_adaln_options o;
    memset(&o, 0, sizeof o);
    o.tuning = &tu;
    if (placement) {
      /* The default configuration with the buffers placed each way, in one process; "fresh"
       * again last (the drift of one placement over the sequence). */
      static const int order[] = {PLACE_FRESH, PLACE_CARVED,  PLACE_SHIFT1G,
                                  PLACE_SKEW,  PLACE_REVERSE, PLACE_FRESH};
      for (size_t k = 0; k < sizeof order / sizeof order[0] && nres < 500; ++k) {
        g_place = order[k];
        setup(&b, &shapes[si], dtype);
        char name[24];
        snprintf(name, sizeof name, "%s%s", g_place_name[g_place],
                 k ? (k + 1 == 6 ? "2" : "") : "");
        res[nres] = measure(&b, &shapes[si], &o, name, dtype, iters, copy);
        print_row(&res[nres++]);
        teardown(&b);
      }
      g_place = PLACE_FRESH;
      continue;
    }
    setup(&b, &shapes[si], dtype);
    res[nres] = measure(&b, &shapes[si], &o, "auto", dtype, iters, copy);
    print_row(&res[nres++]);
    if (split) time_split(&b, &o, iters, "auto");
    if (fwdk) {
      /* Both forward kernels on the same buffers, alternated (the backward is the default). */
      static const int ks[4] = {AL_ADALN_FWD_KERNEL_ROWS, AL_ADALN_FWD_KERNEL_TILE,
                                AL_ADALN_FWD_KERNEL_ROWS, AL_ADALN_FWD_KERNEL_TILE};
      for (int k = 0; k < 4 && nres < 500; ++k) {
        memset(&tu, 0, sizeof tu);
        tu.fwd_kernel = ks[k];
        if (al_adaln_forward(&b.desc, &o, b.x[0], b.scale, b.shift, b.y[0], b.mean[0], b.rstd[0],
                             NULL) != AL_OK)
          continue;
        res[nres] = measure(&b, &shapes[si], &o,
                            ks[k] == AL_ADALN_FWD_KERNEL_ROWS ? "fwd_rows" : "fwd_tile", dtype,
                            iters, copy);
        print_row(&res[nres++]);
      }
      memset(&tu, 0, sizeof tu);
    }
    if (chunks) {
      /* Rows per block and row groups per block of the tile kernel (slots = blocks). */
      typedef struct cvar {
        const char *name;
        int groups, chunk;
      } cvar;
      static const cvar cv[] = {{"g2", 2, 0},         {"g8", 8, 0},         {"chunk28", 0, 28},
                                {"chunk42", 0, 42},   {"chunk56", 0, 56},   {"chunk64", 0, 64},
                                {"chunk100", 0, 100}, {"chunk124", 0, 124}, {"auto_again", 0, 0}};
      for (size_t k = 0; k < sizeof cv / sizeof cv[0] && nres < 500; ++k) {
        memset(&tu, 0, sizeof tu);
        tu.bwd_groups = cv[k].groups;
        tu.rows_per_chunk = cv[k].chunk;
        size_t need;
        if (al_adaln_backward_workspace_size(&b.desc, &o, &need) != AL_OK) continue;
        res[nres] = measure(&b, &shapes[si], &o, cv[k].name, dtype, iters, copy);
        print_row(&res[nres++]);
        if (split) time_split(&b, &o, iters, cv[k].name);
      }
      memset(&tu, 0, sizeof tu);
    }
    if (sweep) {
      /* Backward variants: the round-1 per-group kernel, the tile kernel's row groups per block,
       * stages, register cap and vectors per thread, the split path; "auto" again last (the
       * spread of one configuration within the run). */
      const int kvec = dtype == AL_DTYPE_FP32 ? 4 : 8, nv = shapes[si].D / kvec;
      char name[24];
      typedef struct variant {
        const char *name;
        int kernel, groups, stages, tpr, path;
      } variant;
      int tpr3 = (nv + 2) / 3, tpr2 = (nv + 1) / 2;
      tpr3 = tpr3 <= 32 ? 0 : (tpr3 + 31) / 32 * 32;
      tpr2 = tpr2 <= 32 ? 0 : (tpr2 + 31) / 32 * 32;
      const variant vs[] = {
          {"group", AL_ADALN_BWD_KERNEL_GROUP, 0, 0, 0, 0},
          {"tile_g1", AL_ADALN_BWD_KERNEL_TILE, 1, 2, 0, 0},
          {"tile_g2", AL_ADALN_BWD_KERNEL_TILE, 2, 2, 0, 0},
          {"tile_g4", AL_ADALN_BWD_KERNEL_TILE, 4, 2, 0, 0},
          {"tile_s3", AL_ADALN_BWD_KERNEL_TILE, 0, 3, 0, 0},
          {"tile_tight", AL_ADALN_BWD_KERNEL_TILE_TIGHT, 0, 2, 0, 0},
          {"tile_vpt3", AL_ADALN_BWD_KERNEL_TILE, 0, 2, tpr3, 0},
          {"tile_vpt2", AL_ADALN_BWD_KERNEL_TILE, 0, 2, tpr2, 0},
          {"tile_vpt2_g1", AL_ADALN_BWD_KERNEL_TILE, 1, 2, tpr2, 0},
          {"split", 0, 0, 0, 0, AL_ADALN_BWD_SPLIT},
          {"auto2", 0, 0, 0, 0, 0},
      };
      for (size_t k = 0; k < sizeof vs / sizeof vs[0] && nres < 500; ++k) {
        if (!strncmp(vs[k].name, "tile_vpt2", 9) && !tpr2) continue;
        if (!strcmp(vs[k].name, "tile_vpt3") && !tpr3) continue;
        memset(&tu, 0, sizeof tu);
        tu.bwd_kernel = vs[k].kernel;
        tu.bwd_groups = vs[k].groups;
        tu.bwd_stages = vs[k].stages;
        tu.threads_per_row = vs[k].tpr;
        tu.bwd_path = vs[k].path;
        size_t need;
        if (al_adaln_backward_workspace_size(&b.desc, &o, &need) != AL_OK) continue;
        /* the forward may refuse a configuration the backward takes */
        if (al_adaln_forward(&b.desc, &o, b.x[0], b.scale, b.shift, b.y[0], b.mean[0], b.rstd[0],
                             NULL) != AL_OK)
          continue;
        snprintf(name, sizeof name, "%s", vs[k].name);
        res[nres] = measure(&b, &shapes[si], &o, name, dtype, iters, copy);
        print_row(&res[nres++]);
      }
    }
    teardown(&b);
  }

  if (json) {
    FILE *f = fopen(json, "w");
    if (!f) {
      perror(json);
      return 1;
    }
    fprintf(f,
            "{\n \"device\": \"%s\",\n \"dtype\": \"%s\",\n \"copy_GBps\": %.1f,\n \"rows\": [\n",
            prop.name, dname, copy);
    for (int i = 0; i < nres; ++i) {
      const result *r = &res[i];
      fprintf(f,
              "  {\"shape\": \"%s\", \"variant\": \"%s\", \"B\": %d, \"N\": %d, \"D\": %d, "
              "\"rows\": %lld, \"fwd_ms\": %.5f, \"fwd_GBps\": %.1f, \"fwd_pct_copy\": %.2f, "
              "\"bwd_ms\": %.5f, \"bwd_floor_ms\": %.5f, \"bwd_GBps\": %.1f, "
              "\"bwd_pct_floor\": %.2f, \"copyx_ms\": %.5f, \"fwd_pct_copyx\": %.2f}%s\n",
              r->s.name, r->variant, r->s.nlens ? r->s.nlens : r->s.B, r->s.N, r->s.D,
              (long long)r->rows, r->fwd_ms, r->fwd_gbps, r->fwd_pct_copy, r->bwd_ms,
              r->bwd_floor_ms, r->bwd_gbps, r->bwd_pct_floor, r->copyx_ms, r->fwd_pct_copyx,
              i + 1 < nres ? "," : "");
    }
    fprintf(f, " ]\n}\n");
    fclose(f);
  }
  return 0;
}
