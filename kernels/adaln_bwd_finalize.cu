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
__global__ void __launch_bounds__(FIN_FEATS *FIN_LANES) adaln_bwd_finalize_kernel(FinArgs<T> a) {
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

/* Waits for the grids this one depends on (programmatic dependent launch; a no-op when
 * launched without it). */
__device__ __forceinline__ void wait_prior_grids() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

#define FIN4_QUADS 8 /* float4 columns per block: 32 features, one 128-byte line of a slot row */

/*
 * Finalize, D a multiple of 4. Grid (D tile of 32 features, sample b). Block 8 x lanes
 * (lanes a power of two, 8..128, from the slots per sample): thread x owns features
 * tile*32 + 4x .. +3 and reads them with one 16-byte load per slot and sum; row lane y adds
 * the slots k + b for k = first + y, first + y + lanes, ... (a warp reads 4 slots x 128
 * contiguous bytes). The lane sums meet in shared memory and are added by a fixed tree:
 * bitwise reproducible. Fewer, fuller blocks than adaln_bwd_finalize_kernel when B > 1.
 */
template <typename T>
__global__ void __launch_bounds__(1024) adaln_bwd_finalize4_kernel(FinArgs<T> a) {
  typedef Elem<T> E;
  extern __shared__ float4 part4[]; /* [2][lanes][FIN4_QUADS] */
  const int x = threadIdx.x, y = threadIdx.y, lanes = blockDim.y;
  const int d = (blockIdx.x * FIN4_QUADS + x) * 4;
  const int b = blockIdx.y;
  const int D = a.D;
  wait_prior_grids();
  const int64_t s = seg_start(a.L, b), e = seg_end(a.L, b);
  float4 ss = make_float4(0.0f, 0.0f, 0.0f, 0.0f), sh = ss;
  if (e > s && d < D) {
    const int64_t k0 = s / a.chunk, k1 = (e - 1) / a.chunk;
#pragma unroll 4
    for (int64_t k = k0 + y; k <= k1; k += lanes) {
      const float *p = a.ws + (k + b) * 2 * (int64_t)D + d;
      const float4 u = *reinterpret_cast<const float4 *>(p);
      const float4 w = *reinterpret_cast<const float4 *>(p + D);
      ss.x += u.x;
      ss.y += u.y;
      ss.z += u.z;
      ss.w += u.w;
      sh.x += w.x;
      sh.y += w.y;
      sh.z += w.z;
      sh.w += w.w;
    }
  }
  float4 *p0 = part4, *p1 = part4 + lanes * FIN4_QUADS;
  p0[y * FIN4_QUADS + x] = ss;
  p1[y * FIN4_QUADS + x] = sh;
  __syncthreads();
  for (int h = lanes / 2; h > 0; h >>= 1) {
    if (y < h) {
      float4 u = p0[y * FIN4_QUADS + x], v = p0[(y + h) * FIN4_QUADS + x];
      p0[y * FIN4_QUADS + x] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
      u = p1[y * FIN4_QUADS + x];
      v = p1[(y + h) * FIN4_QUADS + x];
      p1[y * FIN4_QUADS + x] = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    }
    __syncthreads();
  }
  if (y < 2 && d < D) {
    const float4 r = (y == 0 ? p0 : p1)[x];
    typename E::bits_t *out = reinterpret_cast<typename E::bits_t *>(
        (y == 0 ? a.dscale : a.dshift) + (int64_t)b * D + d);
    out[0] = E::to_bits(r.x);
    out[1] = E::to_bits(r.y);
    out[2] = E::to_bits(r.z);
    out[3] = E::to_bits(r.w);
  }
}

/* Launches with programmatic stream serialization (the launch overlaps the end of the
 * backward kernel before it; the kernel waits for it in griddepcontrol.wait), or plainly
 * where that attribute is refused. */
template <typename K, typename A>
static int launch_dependent(K kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                            const A &args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cudaLaunchKernelEx(&cfg, kernel, args) == cudaSuccess) return AL_OK;
  (void)cudaGetLastError(); /* not sticky: a refused attribute */
  kernel<<<grid, block, smem, stream>>>(args);
  ADALN_LAUNCHED("adaln_bwd_finalize");
  return AL_OK;
}

template <typename T>
static int finalize_launch_t(const adaln_launch *l, const float *ws, void *dscale, void *dshift) {
  FinArgs<T> a;
  a.ws = ws;
  a.dscale = (T *)dscale;
  a.dshift = (T *)dshift;
  a.L = layout_of(l);
  a.chunk = l->chunk;
  a.D = l->dim;
  if (l->dim % 4 == 0) {
    /* Lanes: about half the slots of an average sample, a power of two in [8, 128]. */
    const int64_t per_sample = (l->nchunks + l->batch - 1) / l->batch + 1;
    int lanes = 8;
    while (lanes < 128 && 2 * lanes < per_sample) lanes *= 2;
    dim3 grid((unsigned)((l->dim / 4 + FIN4_QUADS - 1) / FIN4_QUADS), (unsigned)l->batch);
    dim3 block(FIN4_QUADS, (unsigned)lanes);
    return launch_dependent(adaln_bwd_finalize4_kernel<T>, grid, block,
                            2 * (size_t)lanes * FIN4_QUADS * sizeof(float4),
                            (cudaStream_t)l->stream, a);
  }
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
