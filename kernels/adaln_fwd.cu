/*
 * adaln_fwd.cu - AdaLN forward: LayerNorm statistics and modulation in one launch.
 */
#include "kernels/adaln_fwd.cuh"

/*
 * Forward. x, y: [rows, D] row-major; scale, shift: [B, D]. A row group of tpr threads owns
 * one row (several groups per block when tpr <= 32, else the block is one group).
 * Thread t holds the 16-byte vectors t + i*tpr (i < VPT) of its row in registers.
 * One row per group and a grid over all rows: <= 64 registers (launch bound 512 x 2), so
 * ~32 warps and ~100 KB of loads in flight per SM. A persistent, register-prefetched version
 * (docs/kernels-notes.md, v2) needed ~100 registers and lost 10% of bandwidth.
 * Statistics, two passes over the registers: mean0 = group sum of x / D; then one two-value
 * group sum of c = x - mean0 and c^2: m1 = sum c / D, var = sum c^2 / D - m1^2. x - mean0 is
 * exact for x near the mean and m1 is tiny, so xhat = (c - m1) * rstd keeps fp32 accuracy
 * even at |mean|/std = 1e3, and mean = mean0 + m1 is the correctly rounded fp32 mean.
 * Group sums: warp xor-shuffles, then one shared-memory step across the warps of a group for
 * tpr > 32. Last pass: y = (c - m1) * rstd * (one + scale[b]) + shift[b], 16-byte streaming
 * stores (st.global.cs; evict-first in L2 like the loads of x: +2-3 points of copy at 50 M
 * elements, docs/kernels-notes.md v9);
 * thread 0 of the group writes mean and rstd (fp32, 8 bytes per row).
 */
template <typename T, int VPT, bool VEC>
__global__ void __launch_bounds__(512, 2) adaln_fwd_kernel(FwdArgs<T> a) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  __shared__ float red[2][64];

  const int tpr = a.tpr;
  /* tpr <= 32 is a power of two (shifts, not divisions); beyond, the block is the group. */
  const int grp = tpr > 32 ? 0 : (int)(threadIdx.x >> a.tpr_shift);
  const int t = threadIdx.x - grp * tpr;
  const int64_t row = (int64_t)blockIdx.x * (tpr > 32 ? 1 : (int)(blockDim.x >> a.tpr_shift)) + grp;
  const bool ok = row < a.L.rows;
  const int D = a.D;
  const int nv = (D + kVec - 1) / kVec;

  uint4 cur[VPT];
  {
    const T *xr = a.x + (ok ? row : 0) * (int64_t)D;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = t + i * tpr;
      cur[i] = load_vec<T, VEC, LD_STREAM>(xr, v, D, ok && v < nv);
    }
  }

  /* Elements past D and rows past the end load as zero: no mask needed for the sum. */
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    float f[kVec];
    E::unpack(cur[i], f);
#pragma unroll
    for (int j = 0; j < kVec; ++j) s += f[j];
  }
  s = group_sum(s, tpr, red[0]);
  /* Divisions here and for m1, not multiplies by inv_d: their slow-path call keeps ptxas from
   * moving the next pass's unpacking above the reductions, which spills at the 64-register
   * cap (bf16 and fp16, VPT 4..8; neither opaque() on the result nor __syncwarp() stops it). */
  const float mean0 = s / (float)D;
#pragma unroll
  for (int i = 0; i < VPT; ++i) opaque(cur[i]);

  float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = t + i * tpr;
    float f[kVec];
    E::unpack(cur[i], f);
    /* One test per vector on the vector path (per element, the compiler branched per element). */
    if (VEC && v >= nv) continue;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      if (elem_in<T, VEC>(v, j, nv, D)) {
        const float c = f[j] - mean0;
        s1 += c;
        s2 = fmaf(c, c, s2);
      }
    }
  }
  group_sum2(s1, s2, tpr, red[1]);
  const float m1 = s1 / (float)D;
  const float rstd = rsqrtf(fmaxf(s2 * a.inv_d - m1 * m1, 0.0f) + a.eps);
  const float nm1r = -m1 * rstd;
#pragma unroll
  for (int i = 0; i < VPT; ++i) opaque(cur[i]);

  if (ok) {
    const int b = seg_of_row(a.L, row);
    const T *sc = a.scale + (int64_t)b * D;
    const T *sh = a.shift + (int64_t)b * D;
    T *yr = a.y + row * (int64_t)D;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = t + i * tpr;
      if (v < nv) {
        float f[kVec], fs[kVec], fh[kVec], o[kVec];
        E::unpack(cur[i], f);
        E::unpack(load_vec<T, VEC, LD_KEEP>(sc, v, D, true), fs);
        E::unpack(load_vec<T, VEC, LD_KEEP>(sh, v, D, true), fh);
        fwd_y_math(f, fs, fh, mean0, rstd, nm1r, a.one, o);
        store_vec<T, VEC, ST_STREAM>(yr, v, D, o);
      }
    }
    fwd_stats(a, row, t, mean0, m1, rstd);
  }
}

template <typename T, int VPT, bool VEC>
static int fwd_launch_t(const adaln_launch *l, const void *x, const void *scale, const void *shift,
                        void *y, float *mean, float *rstd) {
  const FwdArgs<T> a = fwd_args_of<T>(l, x, scale, shift, y, mean, rstd);
  const int64_t groups_per_block = l->block / l->tpr;
  const int64_t blocks = (l->rows + groups_per_block - 1) / groups_per_block;
  adaln_fwd_kernel<T, VPT, VEC><<<(unsigned)blocks, l->block, 0, (cudaStream_t)l->stream>>>(a);
  ADALN_LAUNCHED("adaln_fwd_kernel");
  return AL_OK;
}

/* clang-format off */
/* dtype x vec x VPT -> one template instance. */
#define ADALN_FWD_VPT_CASES(T, VEC, CALL)                      \
  switch (l->vpt) {                                            \
    case 1: return CALL(T, 1, VEC);                            \
    case 2: return CALL(T, 2, VEC);                            \
    case 3: return CALL(T, 3, VEC);                            \
    case 4: return CALL(T, 4, VEC);                            \
    case 5: return CALL(T, 5, VEC);                            \
    case 6: return CALL(T, 6, VEC);                            \
    case 7: return CALL(T, 7, VEC);                            \
    case 8: return CALL(T, 8, VEC);                            \
    default: break;                                            \
  }

#define ADALN_FWD_DISPATCH(CALL)                                           \
  do {                                                                     \
    if (l->dtype == AL_DTYPE_BF16) {                                       \
      if (l->vec) { ADALN_FWD_VPT_CASES(__nv_bfloat16, true, CALL) }       \
      else { ADALN_FWD_VPT_CASES(__nv_bfloat16, false, CALL) }             \
    } else if (l->dtype == AL_DTYPE_FP16) {                                \
      if (l->vec) { ADALN_FWD_VPT_CASES(__half, true, CALL) }              \
      else { ADALN_FWD_VPT_CASES(__half, false, CALL) }                    \
    } else if (l->dtype == AL_DTYPE_FP32) {                                \
      if (l->vec) { ADALN_FWD_VPT_CASES(float, true, CALL) }               \
      else { ADALN_FWD_VPT_CASES(float, false, CALL) }                     \
    }                                                                      \
  } while (0)
/* clang-format on */

#define FWD_CALL(T, VPT, VEC) fwd_launch_t<T, VPT, VEC>(l, x, scale, shift, y, mean, rstd)
#define FWD_FN(T, VPT, VEC) (const void *)adaln_fwd_kernel<T, VPT, VEC>

extern "C" int adaln_fwd_launch(const adaln_launch *l, const void *x, const void *scale,
                                const void *shift, void *y, float *mean, float *rstd) {
  if (l->rows == 0) return AL_OK;
  ADALN_FWD_DISPATCH(FWD_CALL);
  return al_set_error(AL_EUNSUPPORTED, "adaln forward: no kernel for dtype %d, %d vectors/thread",
                      l->dtype, l->vpt);
}

/* The kernel instance a launch would use (for attribute and occupancy queries). */
extern "C" const void *adaln_fwd_kernel_fn(const adaln_launch *l) {
  ADALN_FWD_DISPATCH(FWD_FN);
  return nullptr;
}
