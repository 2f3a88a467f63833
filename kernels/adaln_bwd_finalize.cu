/*
 * adaln_bwd_finalize.cu - backward, last step: dscale and dshift from the partial-sum slots.
 */
#include "kernels/adaln_common.cuh"

template <typename T>
struct FinArgs {
  const float *ws; /* [slot][2][D] */
  T *dscale;
  T *dshift;
  Layout L;
  int64_t chunk;
  int D;
};

#define FIN_FEATS 8   /* features per block: one 32-byte sector of a slot row */
#define FIN_LANES 128 /* slot lanes per block */

/*
 * Finalize. Grid (D tile of 8 features, sample b). Block 8 x 128: lane x owns feature
 * d = tile*8 + x, row lane y adds the slots k + b for k = first + y, first + y + 128, ... up
 * to the last chunk of sample b (the chunks that overlap b, see adaln_internal.h). A warp
 * reads 4 slots x 32 contiguous bytes (whole sectors); D/8 blocks keep every SM busy even at
 * B = 1, and each thread has only ~rows/(chunk*128) slots to add. The 128 lane sums meet in
 * shared memory and are added by a fixed tree (64, 32, ..., 1): bitwise reproducible. An
 * empty sample gets zeros.
 */
template <typename T>
__global__ void __launch_bounds__(FIN_FEATS * FIN_LANES) adaln_bwd_finalize_kernel(FinArgs<T> a) {
  typedef Elem<T> E;
  __shared__ float part[2][FIN_LANES][FIN_FEATS + 1];
  const int x = threadIdx.x, y = threadIdx.y;
  const int d = blockIdx.x * FIN_FEATS + x;
  const int b = blockIdx.y;
  const int D = a.D;
  const int64_t s = seg_start(a.L, b), e = seg_end(a.L, b);

  float ss = 0.0f, sh = 0.0f;
  if (e > s && d < D) {
    const int64_t k0 = s / a.chunk, k1 = (e - 1) / a.chunk;
#pragma unroll 4
    for (int64_t k = k0 + y; k <= k1; k += FIN_LANES) {
      const float *p = a.ws + (k + b) * 2 * (int64_t)D;
      ss += p[d];
      sh += p[D + d];
    }
  }
  part[0][y][x] = ss;
  part[1][y][x] = sh;
  __syncthreads();
  for (int h = FIN_LANES / 2; h > 0; h >>= 1) {
    if (y < h) {
      part[0][y][x] += part[0][y + h][x];
      part[1][y][x] += part[1][y + h][x];
    }
    __syncthreads();
  }
  if (y < 2 && d < D) {
    T *out = (y == 0 ? a.dscale : a.dshift) + (int64_t)b * D + d;
    *reinterpret_cast<typename E::bits_t *>(out) = E::to_bits(part[y][0][x]);
  }
}

template <typename T>
static int finalize_launch_t(const adaln_launch *l, const float *ws, void *dscale, void *dshift) {
  FinArgs<T> a;
  a.ws = ws;
  a.dscale = (T *)dscale;
  a.dshift = (T *)dshift;
  a.L.cu = l->cu;
  a.L.seq_len = l->seq_len;
  a.L.rows = l->rows;
  a.L.B = l->batch;
  a.chunk = l->chunk;
  a.D = l->dim;
  dim3 grid((unsigned)((l->dim + FIN_FEATS - 1) / FIN_FEATS), (unsigned)l->batch);
  dim3 block(FIN_FEATS, FIN_LANES);
  adaln_bwd_finalize_kernel<T><<<grid, block, 0, (cudaStream_t)l->stream>>>(a);
  ADALN_LAUNCHED("adaln_bwd_finalize_kernel");
  return AL_OK;
}

extern "C" int adaln_bwd_finalize_launch(const adaln_launch *l, const float *ws, void *dscale,
                                         void *dshift) {
  switch (l->dtype) {
    case AL_DTYPE_BF16: return finalize_launch_t<__nv_bfloat16>(l, ws, dscale, dshift);
    case AL_DTYPE_FP16: return finalize_launch_t<__half>(l, ws, dscale, dshift);
    case AL_DTYPE_FP32: return finalize_launch_t<float>(l, ws, dscale, dshift);
    default: return al_set_error(AL_EUNSUPPORTED, "adaln finalize: dtype %d", l->dtype);
  }
}
