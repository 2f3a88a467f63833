/*
 * adaln_bwd_partials.cu - split backward, step 1: per-feature partial sums of dy*xhat and dy
 * over (D tile, row chunk) blocks. Used when a row does not fit the fused kernel's registers
 * (large D) or when asked for (AL_ADALN_BWD_SPLIT); it reads x and dy once more than the
 * fused path.
 */
#include "kernels/adaln_common.cuh"

template <typename T>
struct PartArgs {
  const T *dy;
  const T *x;
  const float *mean;
  const float *mean_err; /* per-row residual of the stored mean (from the dx kernel) */
  const float *rstd;
  float *ws; /* [slot][2][D] */
  Layout L;
  int64_t chunk;
  int D;
};

/*
 * Partial sums, the D-tile coalesced reduction. Grid (chunk k, D tile). Block 32 x 8: lane x
 * owns the 16-byte vector v = tile*32 + x of every row, so a warp reads 32 consecutive vectors
 * (512 bytes of bf16) of one row; row lane y walks rows p0 + y, p0 + y + 8, ... of the piece
 * of chunk k that belongs to one sample, summing dy*xhat and dy in fp32 registers
 * (xhat = (x - mean - e) * rstd, e = the stored mean's residual from the dx kernel). At the end
 * of each piece the 8 row lanes meet in shared memory, are added in y order by all 256
 * threads (each finishes two of the 2 x 32*kVec sums), and the result goes to slot k + b.
 */
template <typename T, bool VEC>
__global__ void __launch_bounds__(256) adaln_bwd_partials_kernel(PartArgs<T> a) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  constexpr int kTile = ADALN_SPLIT_TILE_VECS * kVec; /* features per tile */
  __shared__ float part[ADALN_SPLIT_ROW_LANES][2][kTile];

  const int x = threadIdx.x, y = threadIdx.y;
  const int tid = y * ADALN_SPLIT_TILE_VECS + x;
  const int64_t k = blockIdx.x;
  const int tile = blockIdx.y;
  const int v = tile * ADALN_SPLIT_TILE_VECS + x;
  const int D = a.D;
  const int nv = (D + kVec - 1) / kVec;
  const int B = a.L.B;
  const int64_t rows = a.L.rows;
  const int64_t r0 = k * a.chunk;
  const int64_t r1 = r0 + a.chunk < rows ? r0 + a.chunk : rows;

  int64_t p0 = r0;
  while (p0 < r1) { /* block-uniform: every thread computes the same pieces */
    const int b = seg_of_row(a.L, p0);
    int64_t p1 = b < B - 1 ? seg_end(a.L, b) : r1;
    if (p1 > r1 || p1 <= p0) p1 = r1;

    float as[kVec], ah[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) as[j] = ah[j] = 0.0f;
#pragma unroll 4
    for (int64_t row = p0 + y; row < p1; row += ADALN_SPLIT_ROW_LANES) {
      const uint4 rdy = load_vec<T, VEC, LD_STREAM>(a.dy + row * (int64_t)D, v, D, v < nv);
      const uint4 rx = load_vec<T, VEC, LD_STREAM>(a.x + row * (int64_t)D, v, D, v < nv);
      const float mu = __ldg(a.mean + row), e = a.mean_err[row], rs = __ldg(a.rstd + row);
      float fd[kVec], fx[kVec];
      E::unpack(rdy, fd);
      E::unpack(rx, fx);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        as[j] = fmaf(fd[j], ((fx[j] - mu) - e) * rs, as[j]);
        ah[j] += fd[j];
      }
    }
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      part[y][0][x * kVec + j] = as[j];
      part[y][1][x * kVec + j] = ah[j];
    }
    __syncthreads();
    float *ws = a.ws + (k + b) * 2 * (int64_t)D;
    for (int q = tid; q < 2 * kTile; q += ADALN_SPLIT_TILE_VECS * ADALN_SPLIT_ROW_LANES) {
      const int which = q / kTile, e = q - which * kTile;
      const int d = tile * kTile + e;
      float s = 0.0f;
#pragma unroll
      for (int yy = 0; yy < ADALN_SPLIT_ROW_LANES; ++yy) s += part[yy][which][e];
      if (d < D) ws[(int64_t)which * D + d] = s;
    }
    __syncthreads(); /* part[] is rewritten by the next piece */
    p0 = p1;
  }
}

template <typename T, bool VEC>
static int partials_launch_t(const adaln_launch *l, const void *dy, const void *x,
                             const float *mean, const float *mean_err, const float *rstd,
                             float *ws) {
  PartArgs<T> a;
  a.dy = (const T *)dy;
  a.x = (const T *)x;
  a.mean = mean;
  a.mean_err = mean_err;
  a.rstd = rstd;
  a.ws = ws;
  a.L = layout_of(l);
  a.chunk = l->chunk;
  a.D = l->dim;
  const int kvec = (int)(16 / sizeof(T));
  const int nv = (l->dim + kvec - 1) / kvec;
  dim3 grid((unsigned)l->nchunks,
            (unsigned)((nv + ADALN_SPLIT_TILE_VECS - 1) / ADALN_SPLIT_TILE_VECS));
  dim3 block(ADALN_SPLIT_TILE_VECS, ADALN_SPLIT_ROW_LANES);
  adaln_bwd_partials_kernel<T, VEC><<<grid, block, 0, (cudaStream_t)l->stream>>>(a);
  ADALN_LAUNCHED("adaln_bwd_partials_kernel");
  return AL_OK;
}

extern "C" int adaln_bwd_partials_launch(const adaln_launch *l, const void *dy, const void *x,
                                         const float *mean, const float *mean_err,
                                         const float *rstd, float *ws) {
  if (l->rows == 0) return AL_OK;
  switch (l->dtype) {
    case AL_DTYPE_BF16:
      return l->vec ? partials_launch_t<__nv_bfloat16, true>(l, dy, x, mean, mean_err, rstd, ws)
                    : partials_launch_t<__nv_bfloat16, false>(l, dy, x, mean, mean_err, rstd, ws);
    case AL_DTYPE_FP16:
      return l->vec ? partials_launch_t<__half, true>(l, dy, x, mean, mean_err, rstd, ws)
                    : partials_launch_t<__half, false>(l, dy, x, mean, mean_err, rstd, ws);
    case AL_DTYPE_FP32:
      return l->vec ? partials_launch_t<float, true>(l, dy, x, mean, mean_err, rstd, ws)
                    : partials_launch_t<float, false>(l, dy, x, mean, mean_err, rstd, ws);
    default: return al_set_error(AL_EUNSUPPORTED, "adaln partials: dtype %d", l->dtype);
  }
}
