/*
 * adaln_bwd.cu - AdaLN backward over rows: dx, and in the fused variants the per-feature
 * partial sums of dscale and dshift from the same loads.
 */
#include "kernels/adaln_common.cuh"

template <typename T>
struct BwdArgs {
  const T *dy;
  const T *x;
  const T *scale;
  const float *mean;
  const float *rstd;
  T *dx;
  float *ws;       /* fused: partial-sum slots, [slot][2][D] fp32 */
  float *mean_err; /* dx-only: per-row residual of the stored mean, for the partials */
  Layout L;
  int64_t chunk; /* fused: rows per chunk (tile kernel: per block); dx-only: 1 */
  int D;
  int tpr;
  int groups; /* tile kernel: row groups per block */
  float one;
};

/* Writes a thread's per-feature sums (dy*xhat, then dy) into one [2][D] workspace slot:
 * 16-byte stores on the vector path (D a multiple of kVec keeps the slot 16-byte aligned). */
template <int VPT, int kVec, bool VEC>
__device__ __forceinline__ void flush_sums(float *ws, const float (&acc_s)[VPT * kVec],
                                           const float (&acc_h)[VPT * kVec], int t, int tpr, int nv,
                                           int D) {
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = t + i * tpr;
    if (v >= nv) continue;
    if constexpr (VEC) {
#pragma unroll
      for (int q = 0; q < kVec; q += 4) {
        const float *s = acc_s + i * kVec + q;
        const float *h = acc_h + i * kVec + q;
        reinterpret_cast<float4 *>(ws + v * kVec + q)[0] = make_float4(s[0], s[1], s[2], s[3]);
        reinterpret_cast<float4 *>(ws + D + v * kVec + q)[0] = make_float4(h[0], h[1], h[2], h[3]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const int d = v * kVec + j;
        if (d < D) {
          ws[d] = acc_s[i * kVec + j];
          ws[D + d] = acc_h[i * kVec + j];
        }
      }
    }
  }
}

/*
 * One row of the backward, rows of dy and x already in registers (thread t holds vectors
 * t + i*tpr). g = dy * (one + scale[b]), c = x - mean. One three-value group reduction (warp
 * xor-shuffles, then shared memory across warps for tpr > 32) of g, g*c*rstd and the stored
 * mean's residual e = mean_d(c): the fp32 mean is off by up to 3e-5 std at |mean|/std = 1e3,
 * so xhat = (c - e) * rstd, and sum g*xhat = sum g*c*rstd - e*rstd*sum g.
 * dx = rstd * (g - mean_d(g) - xhat * mean_d(g*xhat)). ACC: adds dy*xhat and dy to the
 * thread's per-feature sums. scale[b] is re-read (L1/L2) where used: registers are scarce.
 * Must be reached by every thread of the group (ok = false for padding rows).
 */
template <typename T, int VPT, bool VEC, bool ACC>
__device__ __forceinline__ void bwd_row(const BwdArgs<T> &a, int64_t row, bool ok, int t, int nv,
                                        const T *scb, uint4 (&rdy)[VPT], uint4 (&rx)[VPT],
                                        float (&acc_s)[ACC ? VPT * Elem<T>::kVec : 1],
                                        float (&acc_h)[ACC ? VPT * Elem<T>::kVec : 1], float *red) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  const int tpr = a.tpr, D = a.D;
  const float mu = ok ? __ldg(a.mean + row) : 0.0f;
  const float rs = ok ? __ldg(a.rstd + row) : 0.0f;

  /* Elements past D load as zero and add nothing to the g sums; the e sum is masked. */
  float sgx = 0.0f, sg = 0.0f, se = 0.0f;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = t + i * tpr;
    float fd[kVec], fx[kVec], fs[kVec];
    E::unpack(rdy[i], fd);
    E::unpack(rx[i], fx);
    E::unpack(load_vec<T, VEC, LD_KEEP>(scb, v, D, ok && v < nv), fs);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float c = fx[j] - mu;
      const float g = fd[j] * (a.one + fs[j]);
      sg += g;
      sgx = fmaf(g, c * rs, sgx);
      if (elem_in<T, VEC>(v, j, nv, D)) se += c;
    }
  }
  group_sum3(sgx, sg, se, tpr, red);
  const float e = se / (float)D;
  const float mg = sg / (float)D;
  const float mgx = (sgx - e * rs * sg) / (float)D;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    opaque(rdy[i]);
    opaque(rx[i]);
  }
  if (!ok) return;

  T *dxr = a.dx + row * (int64_t)D;
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = t + i * tpr;
    if (v < nv) {
      float fd[kVec], fx[kVec], fs[kVec], o[kVec];
      E::unpack(rdy[i], fd);
      E::unpack(rx[i], fx);
      E::unpack(load_vec<T, VEC, LD_KEEP>(scb, v, D, true), fs);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float xh = ((fx[j] - mu) - e) * rs;
        const float g = fd[j] * (a.one + fs[j]);
        o[j] = rs * (g - mg - xh * mgx);
        if constexpr (ACC) {
          acc_s[i * kVec + j] = fmaf(fd[j], xh, acc_s[i * kVec + j]);
          acc_h[i * kVec + j] += fd[j];
        }
      }
      store_vec<T, VEC>(dxr, v, D, o);
    }
  }
  /* dx-only (split path): the partial-sum kernel needs the mean residual too. */
  if (!ACC && t == 0 && a.mean_err != nullptr) a.mean_err[row] = e;
}

/* Start of a row group's chunk [r0, r1) in the per-group kernels: the per-feature sums
 * zeroed, b = the sample of its first row, bend = where that sample's rows end (INT64_MAX
 * for the last sample); b = 0, bend = INT64_MAX for an empty chunk. */
template <int kAcc>
__device__ __forceinline__ void chunk_start(const Layout &L, int64_t r0, int64_t r1,
                                            float (&acc_s)[kAcc], float (&acc_h)[kAcc], int &b,
                                            int64_t &bend) {
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc_s[i] = acc_h[i] = 0.0f;
  b = 0;
  bend = INT64_MAX;
  if (r0 < r1) {
    b = seg_of_row(L, r0);
    bend = b < L.B - 1 ? seg_end(L, b) : INT64_MAX;
  }
}

/* Opens a per-group kernel: the chunk [r0, r1) of row group k, its per-feature sums acc_s
 * and acc_h (kAcc each) zeroed, b and bend from chunk_start. A macro, so that both kernels
 * keep these as their own locals (the cubin is the same as with them written out in each). */
#define ADALN_BWD_CHUNK_START(a, k)                                             \
  const int64_t r0 = (k) * (a).chunk;                                           \
  const int64_t r1 = r0 + (a).chunk < (a).L.rows ? r0 + (a).chunk : (a).L.rows; \
  float acc_s[kAcc], acc_h[kAcc];                                               \
  int b;                                                                        \
  int64_t bend;                                                                 \
  chunk_start((a).L, r0, r1, acc_s, acc_h, b, bend)

/* Sample-boundary step of the fused kernels: when `row` starts a new sample, writes the
 * sums of the old one to slot k + b, clears them and moves b to the sample of `row`. */
template <int VPT, int kVec, bool VEC, bool ACC>
__device__ __forceinline__ void next_sample(const Layout &L, float *ws_base, int64_t k, int64_t row,
                                            int &b, int64_t &bend,
                                            float (&acc_s)[ACC ? VPT * kVec : 1],
                                            float (&acc_h)[ACC ? VPT * kVec : 1], int t, int tpr,
                                            int nv, int D) {
  if constexpr (ACC) {
    flush_sums<VPT, kVec, VEC>(ws_base + (k + b) * 2 * (int64_t)D, acc_s, acc_h, t, tpr, nv, D);
#pragma unroll
    for (int i = 0; i < VPT * kVec; ++i) acc_s[i] = acc_h[i] = 0.0f;
  }
  while (b < L.B - 1 && seg_end(L, b) <= row) ++b;
  bend = b < L.B - 1 ? seg_end(L, b) : INT64_MAX;
}

/*
 * Backward over rows, registers. A row group of tpr threads per row (several per block when
 * tpr <= 32, else the block is one group); each iteration first issues the loads of the next
 * row (a second register set), then works on the current one (bwd_row), so loads stay in
 * flight through the reductions and stores.
 * ACC (fused): group k of the grid walks the rows of chunk k = [k*chunk, (k+1)*chunk) in
 * order. Thread t owns the same features on every row, so it sums dy*xhat and dy for them in
 * registers: the D-tile coalesced reduction with the whole row as the tile and the tile's
 * accumulators in registers. At the chunk end, and whenever the sample changes inside the
 * chunk, it writes those sums to workspace slot k + b with 16-byte stores (a chunk never mixes
 * two samples; adaln_bwd_finalize.cu adds the slots in a fixed order: deterministic).
 * !ACC: one row per group (the split path's dx step); also writes e per row.
 * Launch bound 512 threads: up to 128 registers, which the fused sums need.
 * The row loop runs `chunk` times for every group of a block (rows past the chunk are masked)
 * so that shuffles and barriers are reached by all threads.
 */
template <typename T, int VPT, bool VEC, bool ACC>
__global__ void __launch_bounds__(512) adaln_bwd_rows_kernel(BwdArgs<T> a) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  constexpr int kAcc = ACC ? VPT * kVec : 1;
  __shared__ float red[2][96];

  const int tpr = a.tpr;
  const int grp = threadIdx.x / tpr;
  const int t = threadIdx.x - grp * tpr;
  const int64_t k = (int64_t)blockIdx.x * (blockDim.x / tpr) + grp;
  const int D = a.D;
  const int nv = (D + kVec - 1) / kVec;
  ADALN_BWD_CHUNK_START(a, k);

  uint4 rdy[VPT], rx[VPT], ndy[VPT], nx[VPT];
  {
    const int64_t r = r0 < r1 ? r0 : 0;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = t + i * tpr;
      rdy[i] = load_vec<T, VEC, LD_STREAM>(a.dy + r * (int64_t)D, v, D, r0 < r1 && v < nv);
      rx[i] = load_vec<T, VEC, LD_STREAM>(a.x + r * (int64_t)D, v, D, r0 < r1 && v < nv);
    }
  }
  for (int64_t it = 0; it < a.chunk; ++it) {
    const int64_t row = r0 + it;
    const bool ok = row < r1;
    {
      const bool nok = row + 1 < r1;
      const int64_t r = nok ? row + 1 : 0;
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int v = t + i * tpr;
        ndy[i] = load_vec<T, VEC, LD_STREAM>(a.dy + r * (int64_t)D, v, D, nok && v < nv);
        nx[i] = load_vec<T, VEC, LD_STREAM>(a.x + r * (int64_t)D, v, D, nok && v < nv);
      }
    }
    if (ok && row >= bend)
      next_sample<VPT, kVec, VEC, ACC>(a.L, a.ws, k, row, b, bend, acc_s, acc_h, t, tpr, nv, D);
    bwd_row<T, VPT, VEC, ACC>(a, row, ok, t, nv, a.scale + (int64_t)b * D, rdy, rx, acc_s, acc_h,
                              red[it & 1]);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      rdy[i] = ndy[i];
      rx[i] = nx[i];
    }
  }
  if constexpr (ACC) {
    if (r0 < r1)
      flush_sums<VPT, kVec, VEC>(a.ws + (k + b) * 2 * (int64_t)D, acc_s, acc_h, t, tpr, nv, D);
  }
}

/*
 * Fused backward, cp.async pipeline (vector path). Same work split, chunks and sums as
 * adaln_bwd_rows_kernel<ACC>, but the rows of a chunk stream through S stages of shared
 * memory: while a thread works on row i it has already issued cp.async copies of its own
 * 16-byte vectors of dy and x for rows i+1 .. i+S-1, so S-1 rows per group are in flight
 * without holding registers (the register version holds one and needs ~128 registers for
 * it). Slots are thread-private, laid out [stage][tensor][vector][thread] (consecutive
 * threads, consecutive 16 bytes: no bank conflicts); a thread reads back only what it copied,
 * so cp.async.wait_group alone orders them, no barrier.
 */
template <typename T, int VPT, int S>
__global__ void __launch_bounds__(512) adaln_bwd_fused_async_kernel(BwdArgs<T> a) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  constexpr int kAcc = VPT * kVec;
  extern __shared__ uint4 stage_buf[];
  __shared__ float red[2][96];

  const int tpr = a.tpr;
  const int nthr = blockDim.x;
  const int grp = threadIdx.x / tpr;
  const int t = threadIdx.x - grp * tpr;
  const int64_t k = (int64_t)blockIdx.x * (nthr / tpr) + grp;
  const int D = a.D;
  const int nv = D / kVec;
  ADALN_BWD_CHUNK_START(a, k);

  /* Copies row `row` (zeros past the chunk) into stage s; one commit group per row. */
  auto issue = [&](int64_t row, int s) {
    const bool rok = row < r1;
    const uint4 *dyr = reinterpret_cast<const uint4 *>(a.dy + (rok ? row : 0) * (int64_t)D);
    const uint4 *xr = reinterpret_cast<const uint4 *>(a.x + (rok ? row : 0) * (int64_t)D);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = t + i * tpr;
      const bool vok = rok && v < nv;
      cp_async16(&stage_buf[((s * 2 + 0) * VPT + i) * nthr + threadIdx.x], vok ? dyr + v : dyr,
                 vok);
      cp_async16(&stage_buf[((s * 2 + 1) * VPT + i) * nthr + threadIdx.x], vok ? xr + v : xr, vok);
    }
    cp_async_commit();
  };

#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue(r0 + s, s);
  int sr = 0, sw = S - 1;
  for (int64_t it = 0; it < a.chunk; ++it) {
    const int64_t row = r0 + it;
    const bool ok = row < r1;
    issue(row + S - 1, sw);
    cp_async_wait<S - 1>(); /* this thread's copies of `row` have landed */
    uint4 rdy[VPT], rx[VPT];
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      rdy[i] = stage_buf[((sr * 2 + 0) * VPT + i) * nthr + threadIdx.x];
      rx[i] = stage_buf[((sr * 2 + 1) * VPT + i) * nthr + threadIdx.x];
    }
    sr = sr + 1 == S ? 0 : sr + 1;
    sw = sw + 1 == S ? 0 : sw + 1;
    if (ok && row >= bend)
      next_sample<VPT, kVec, true, true>(a.L, a.ws, k, row, b, bend, acc_s, acc_h, t, tpr, nv, D);
    bwd_row<T, VPT, true, true>(a, row, ok, t, nv, a.scale + (int64_t)b * D, rdy, rx, acc_s, acc_h,
                                red[it & 1]);
  }
  cp_async_wait<0>();
  if (r0 < r1)
    flush_sums<VPT, kVec, true>(a.ws + (k + b) * 2 * (int64_t)D, acc_s, acc_h, t, tpr, nv, D);
}

/* Vector i (= v, t + i*tpr) of the tile kernel's row, as both passes of tile_row read it: dy
 * and x from the thread's stage slots, (one + scale) from the kVec/4 fp32 planes of scl. */
template <typename T>
__device__ __forceinline__ void tile_vec(const uint4 *sdy, const uint4 *sx, const float4 *scl,
                                         int i, int nthr, int nv, int v, float (&fd)[Elem<T>::kVec],
                                         float (&fx)[Elem<T>::kVec], float (&fs)[Elem<T>::kVec]) {
  typedef Elem<T> E;
  E::unpack(sdy[i * nthr], fd);
  E::unpack(sx[i * nthr], fx);
#pragma unroll
  for (int q = 0; q < E::kVec / 4; ++q) {
    const float4 s4 = scl[q * nv + v];
    fs[4 * q] = s4.x;
    fs[4 * q + 1] = s4.y;
    fs[4 * q + 2] = s4.z;
    fs[4 * q + 3] = s4.w;
  }
}

/*
 * One row of the tile kernel. The thread's vectors of dy and x are in its private stage slots
 * (sdy[i*nthr], sx[i*nthr]); the row's mean and rstd are in the slot of the thread's warp or
 * group (*sst, copied with the row: a load of them here would put a memory round trip on every
 * row's critical path). (one + scale[b]) is in shared memory as fp32, kVec/4 planes of float4
 * (plane q holds elements 4q..4q+3 of every vector: conflict-free 16-byte reads).
 * Pass 1 reads the slots: sums of g = dy*(one+scale), g*c (c = x - mean) and c; one group
 * reduction; pass 2 reads the slots again (nothing of the row stays in registers across the
 * reduction) and writes dx = rs*g + (-rs*mgx)*xhat - rs*mg, xhat = c*rs - e*rs, adding dy*xhat
 * and dy to the thread's per-feature sums. Reached by every thread of the group (ok = false:
 * a padding row, which only joins the reduction).
 */
template <typename T, int VPT>
__device__ __forceinline__ void tile_row(const BwdArgs<T> &a, int64_t row, bool ok, int t, int grp,
                                         int nv, int nthr, const uint4 *sdy, const uint4 *sx,
                                         const float2 *sst, const float4 *scl,
                                         float (&acc_s)[VPT * Elem<T>::kVec],
                                         float (&acc_h)[VPT * Elem<T>::kVec], float4 *red) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  const int tpr = a.tpr, D = a.D;
  float mu = 0.0f, rs = 0.0f;
  if (ok) {
    const float2 st = *sst; /* mean, rstd: copied with the row (one 8-byte broadcast read) */
    mu = st.x;
    rs = st.y;
  }
  float sg = 0.0f, sgc = 0.0f, se = 0.0f;
  if (ok) {
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int v = t + i * tpr;
      if (v < nv) {
        float fd[kVec], fx[kVec], fs[kVec];
        tile_vec<T>(sdy, sx, scl, i, nthr, nv, v, fd, fx, fs);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float c = fx[j] - mu;
          const float g = fd[j] * fs[j];
          sg += g;
          sgc = fmaf(g, c, sgc);
          se += c;
        }
      }
    }
  }
  float sums[3] = {sgc, sg, se};
  tile_sums(sums, tpr, t, grp, red);
  sgc = sums[0];
  sg = sums[1];
  se = sums[2];
  if (!ok) return;
  /* The slots are read again below, not kept in registers through the reduction. */
  asm volatile("" ::: "memory");
  /* Divisions, not multiplies by 1/D: with multiplies ptxas schedules this kernel so that
   * 1 x 32760 x 1536 runs 2.5 us slower (88.6 against 86.1 us), fewer instructions
   * notwithstanding. */
  const float e = se / (float)D;
  const float mg = sg / (float)D;
  const float mgx = rs * (sgc - e * sg) / (float)D;
  const float ka = -rs * mgx, kb = -rs * mg, ke = -e * rs;
  uint4 *dxr = reinterpret_cast<uint4 *>(a.dx + row * (int64_t)D);
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = t + i * tpr;
    if (v < nv) {
      float fd[kVec], fx[kVec], fs[kVec], o[kVec];
      tile_vec<T>(sdy, sx, scl, i, nthr, nv, v, fd, fx, fs);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float xh = fmaf(fx[j] - mu, rs, ke);
        o[j] = fmaf(rs, fd[j] * fs[j], fmaf(xh, ka, kb));
        acc_s[i * kVec + j] = fmaf(fd[j], xh, acc_s[i * kVec + j]);
        acc_h[i * kVec + j] += fd[j];
      }
      dxr[v] = E::pack(o);
    }
  }
}

/* Tile kernel, end of a piece: adds the G groups' per-feature sums in group order in shared
 * memory (buf, D floats; group 0 stores, the others add, one barrier each) and copies the
 * result to dst (D floats of a workspace slot) with coalesced 16-byte stores. Block-wide. */
template <int VPT, int kVec>
__device__ __forceinline__ void tile_combine(float *buf, float *dst, const float (&acc)[VPT * kVec],
                                             int t, int grp, int G, int tpr, int nv, int D) {
#pragma unroll 1
  for (int g2 = 0; g2 < G; ++g2) {
    if (grp == g2) {
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int v = t + i * tpr;
        if (v < nv) {
#pragma unroll
          for (int q = 0; q < kVec; q += 4) {
            float4 *p = reinterpret_cast<float4 *>(buf + v * kVec + q);
            float4 s = make_float4(acc[i * kVec + q], acc[i * kVec + q + 1], acc[i * kVec + q + 2],
                                   acc[i * kVec + q + 3]);
            if (g2 > 0) {
              const float4 o = *p;
              s.x = o.x + s.x;
              s.y = o.y + s.y;
              s.z = o.z + s.z;
              s.w = o.w + s.w;
            }
            *p = s;
          }
        }
      }
    }
    __syncthreads();
  }
  for (int q = threadIdx.x; q < D / 4; q += blockDim.x)
    reinterpret_cast<float4 *>(dst)[q] = reinterpret_cast<const float4 *>(buf)[q];
  __syncthreads();
}

/* (one + scale[b]) of sample b as fp32 planes in buf: plane q holds, for every vector v
 * of the row, the four factors of its elements 4q .. 4q + 3. The block's threads share it. */
template <typename T>
__device__ __forceinline__ void tile_scale_planes(const BwdArgs<T> &a, int b, float *buf, int nv,
                                                  int nthr) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  constexpr int kP = kVec / 4;
  const int D = a.D;
  const uint4 *sc = reinterpret_cast<const uint4 *>(a.scale + (int64_t)b * D);
  float4 *dst = reinterpret_cast<float4 *>(buf);
  for (int v = threadIdx.x; v < nv; v += nthr) {
    float f[kVec];
    E::unpack(__ldg(sc + v), f);
#pragma unroll
    for (int q = 0; q < kP; ++q)
      dst[q * nv + v] = make_float4(a.one + f[4 * q], a.one + f[4 * q + 1], a.one + f[4 * q + 2],
                                    a.one + f[4 * q + 3]);
  }
}

/*
 * Fused backward, tile kernel (vector path). Block k owns rows [k*chunk, (k+1)*chunk) and G row
 * groups of tpr threads; the block's rows are cut at sample boundaries into pieces (a piece
 * never mixes two samples), and inside a piece group g takes rows p0 + g, p0 + g + G, ...
 * (rounds of G rows; a group past the piece end gets a padding row). Thread t of a group owns
 * the same features on every row and sums dy*xhat and dy for them in registers (the D-tile
 * coalesced reduction, the tile being the whole row). At the end of a piece the G groups'
 * sums are added in group order in shared memory and written to workspace slot k + b (unique:
 * samples and blocks are contiguous and ordered), so there is one slot per block and sample,
 * not one per group. adaln_bwd_finalize.cu adds the slots in fixed order: deterministic.
 * Rows stream through an S-stage cp.async pipeline in thread-private shared-memory slots (no
 * barrier: a thread reads only what it copied); rows are read from the slots in both passes,
 * so only the sums live in registers (a register cap MAXREG, see plan_bwd). Each row's mean
 * and rstd are copied by one lane of each warp (of each group when tpr < 32) into a slot the
 * other lanes read after __syncwarp: copied by every thread, these 4-byte copies of one
 * address cost 32 shared-memory wavefronts per warp each, a third of the kernel's (ncu).
 * The factor (one + scale[b]) sits in shared memory as fp32 for the piece. Row
 * reductions: shuffles, and for tpr > 32 one named barrier per group, so groups do not wait
 * for each other.
 * Dynamic shared memory: stages [S][2][VPT][nthr] uint4, the rows' mean and rstd
 * [ADALN_TILE_STAT_SLOTS][ADALN_TILE_STAT_RING] float2, D floats (scale / combine), then red
 * [G][2][max(tpr/32,1)] float4.
 */
template <typename T, int VPT, int S, int MAXREG>
__global__ void __maxnreg__(MAXREG) adaln_bwd_tile_kernel(BwdArgs<T> a) {
  constexpr int kVec = Elem<T>::kVec;
  constexpr int kAcc = VPT * kVec;
  extern __shared__ uint4 smem_tile[];

  ADALN_TILE_THREAD(a, kVec);
  if (R0 >= R1) return; /* block-uniform */

  uint4 *stage = smem_tile;
  float2 *stats = reinterpret_cast<float2 *>(stage + S * 2 * VPT * nthr);
  static_assert(S < ADALN_TILE_STAT_RING, "the mean/rstd ring must outlast the row pipeline");
  float *buf = reinterpret_cast<float *>(stats +
                                         ADALN_TILE_STAT_RING * ADALN_TILE_STAT_SLOTS(nthr, tpr));
  /* This thread's mean/rstd ring (its warp's, or its group's when tpr < 32: [slot][ring]), and
   * whether it is the lane that fills it; computed where used (held in registers across the
   * loop, they made ptxas spill under the register cap). */
  auto stat_ring = [&]() {
    return stats + (tpr < 32 ? grp : (int)(threadIdx.x >> 5)) * ADALN_TILE_STAT_RING;
  };
  auto stat_copier = [&]() { return (tpr < 32 ? t : (int)(threadIdx.x & 31)) == 0; };
  const float4 *scl = reinterpret_cast<const float4 *>(buf);
  float4 *red = reinterpret_cast<float4 *>(buf + D) + grp * 2 * nwg;

  TilePiece pc; /* the consumer's piece */
  pc.first(L, R0, R1);
  /* Producer: the same (piece, round) sequence, S - 1 rounds ahead; one commit group per
   * round (empty for a padding row or past the end). */
  TileCursor prod;
  prod.init(pc, G);
  /* s: the data stage; q: the consumer round the copy is for (its mean/rstd slot q % 4). */
  auto issue = [&](int s, int q) {
    if (prod.live(G, grp)) {
      const int64_t row = prod.row(G, grp);
      const uint4 *dyr = reinterpret_cast<const uint4 *>(a.dy + row * (int64_t)D);
      const uint4 *xr = reinterpret_cast<const uint4 *>(a.x + row * (int64_t)D);
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int v = t + i * tpr;
        if (v < nv) {
          cp_async16(&stage[((s * 2 + 0) * VPT + i) * nthr + threadIdx.x], dyr + v, true);
          cp_async16(&stage[((s * 2 + 1) * VPT + i) * nthr + threadIdx.x], xr + v, true);
        }
      }
      if (stat_copier()) {
        float2 *st = stat_ring() + (q & (ADALN_TILE_STAT_RING - 1));
        cp_async4(&st->x, a.mean + row);
        cp_async4(&st->y, a.rstd + row);
      }
    }
    cp_async_commit();
    prod.advance(L, R1, G);
  };

#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue(s, s);
  int sr = 0, sw = S - 1, rnd = 0;
  for (;;) {
    /* buf is free (start, or after the last combine). */
    tile_scale_planes<T>(a, pc.b, buf, nv, nthr);
    __syncthreads();
    float acc_s[kAcc], acc_h[kAcc];
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc_s[i] = acc_h[i] = 0.0f;
    const int64_t nr = pc.rounds(G);
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t row = pc.p0 + r * G + grp;
      issue(sw, rnd + S - 1);
      cp_async_wait<S - 1>(); /* this thread's copies of `row` have landed */
      __syncwarp();           /* ... and those of the lane that copied mean and rstd */
      tile_row<T, VPT>(a, row, row < pc.p1, t, grp, nv, nthr,
                       stage + (sr * 2 + 0) * VPT * nthr + threadIdx.x,
                       stage + (sr * 2 + 1) * VPT * nthr + threadIdx.x,
                       stat_ring() + (rnd & (ADALN_TILE_STAT_RING - 1)), scl, acc_s, acc_h,
                       red + (rnd & 1) * nwg);
      sr = sr + 1 == S ? 0 : sr + 1;
      sw = sw + 1 == S ? 0 : sw + 1;
      ++rnd;
    }
    /* The finalize may start launching (it waits for this grid in griddepcontrol.wait). */
    if (pc.p1 >= R1) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    __syncthreads(); /* every group is done with the piece: buf is free */
    float *slot = a.ws + ((int64_t)blockIdx.x + pc.b) * 2 * (int64_t)D;
    tile_combine<VPT, kVec>(buf, slot, acc_s, t, grp, G, tpr, nv, D);
    tile_combine<VPT, kVec>(buf, slot + D, acc_h, t, grp, G, tpr, nv, D);
    if (!pc.next(L, R1)) break;
  }
  cp_async_wait<0>();
}

/* Tight register cap of a tile kernel instance (AL_ADALN_BWD_KERNEL_TILE_TIGHT; the default
 * is 128): the per-feature sums (2 per element a thread owns) plus what the passes need,
 * spill-free in the -Xptxas -v report (docs/kernels-notes.md, "Workflow"). */
template <typename T, int VPT, int S>
struct TileRegs {
  static constexpr int value = Elem<T>::kVec == 4 ? (VPT == 4 ? 104 : 32 + 16 * VPT)
                                                  : (VPT == 1   ? 56
                                                     : VPT == 2 ? 72
                                                     : VPT == 3 ? (S == 2 ? 80 : 88)
                                                                : 104);
};

/* The tile kernel instance of a launch (l->stages 2 or 3; l->loose_regs: cap 128, else
 * TileRegs); NULL when none is compiled. */
template <typename T, int VPT>
static const void *tile_fn_t(const adaln_launch *l) {
  switch (l->stages) {
    case 2:
      if (l->loose_regs) return (const void *)adaln_bwd_tile_kernel<T, VPT, 2, 128>;
      return (const void *)adaln_bwd_tile_kernel<T, VPT, 2, TileRegs<T, VPT, 2>::value>;
    case 3:
      if (l->loose_regs) return (const void *)adaln_bwd_tile_kernel<T, VPT, 3, 128>;
      return (const void *)adaln_bwd_tile_kernel<T, VPT, 3, TileRegs<T, VPT, 3>::value>;
    default: return nullptr;
  }
}

template <typename T, int VPT, bool VEC, bool ACC>
static int bwd_rows_launch_t(const adaln_launch *l, const void *dy, const void *x,
                             const void *scale, const float *mean, const float *rstd, void *dx,
                             float *ws) {
  BwdArgs<T> a;
  a.mean_err = ACC ? nullptr : ws;
  a.dy = (const T *)dy;
  a.x = (const T *)x;
  a.scale = (const T *)scale;
  a.mean = mean;
  a.rstd = rstd;
  a.dx = (T *)dx;
  a.ws = ACC ? ws : nullptr;
  a.L = layout_of(l);
  a.chunk = ACC ? l->chunk : 1;
  a.D = l->dim;
  a.tpr = l->tpr;
  a.one = l->one;
  a.groups = l->groups;
  const int64_t groups = ACC ? l->nchunks : l->rows;
  const int64_t groups_per_block = l->block / l->tpr;
  const int64_t blocks = (groups + groups_per_block - 1) / groups_per_block;
  if constexpr (ACC && VEC) {
    if (l->kernel == ADALN_BWD_KERNEL_TILE) {
      /* one block per chunk of rows */
      const void *fn = tile_fn_t<T, VPT>(l);
      if (fn == nullptr)
        return al_set_error(AL_EUNSUPPORTED, "adaln backward: no tile kernel for %d stages",
                            l->stages);
      void *args[] = {&a};
      ADALN_CUDA(cudaLaunchKernel(fn, dim3((unsigned)l->nchunks), dim3((unsigned)l->block), args,
                                  l->smem, (cudaStream_t)l->stream));
      return AL_OK;
    }
    if (l->stages >= 2) {
      switch (l->stages) {
        case 2:
          adaln_bwd_fused_async_kernel<T, VPT, 2>
              <<<(unsigned)blocks, l->block, l->smem, (cudaStream_t)l->stream>>>(a);
          break;
        case 3:
          adaln_bwd_fused_async_kernel<T, VPT, 3>
              <<<(unsigned)blocks, l->block, l->smem, (cudaStream_t)l->stream>>>(a);
          break;
        default:
          adaln_bwd_fused_async_kernel<T, VPT, 4>
              <<<(unsigned)blocks, l->block, l->smem, (cudaStream_t)l->stream>>>(a);
          break;
      }
      ADALN_LAUNCHED("adaln_bwd_fused_async_kernel");
      return AL_OK;
    }
  }
  adaln_bwd_rows_kernel<T, VPT, VEC, ACC>
      <<<(unsigned)blocks, l->block, 0, (cudaStream_t)l->stream>>>(a);
  ADALN_LAUNCHED("adaln_bwd_rows_kernel");
  return AL_OK;
}

/* clang-format off */
/* Fused instances go to 4 vectors per thread (the sums need registers too), dx-only to 8. */
#define ADALN_BWD_VPT_CASES(T, VEC, ACC, CALL)                 \
  switch (l->vpt) {                                            \
    case 1: return CALL(T, 1, VEC, ACC);                       \
    case 2: return CALL(T, 2, VEC, ACC);                       \
    case 3: return CALL(T, 3, VEC, ACC);                       \
    case 4: return CALL(T, 4, VEC, ACC);                       \
    case 5: if (!ACC) return CALL(T, 5, VEC, false); break;    \
    case 6: if (!ACC) return CALL(T, 6, VEC, false); break;    \
    case 7: if (!ACC) return CALL(T, 7, VEC, false); break;    \
    case 8: if (!ACC) return CALL(T, 8, VEC, false); break;    \
    default: break;                                            \
  }

#define ADALN_BWD_DISPATCH(ACC, CALL)                                          \
  do {                                                                         \
    if (l->dtype == AL_DTYPE_BF16) {                                           \
      if (l->vec) { ADALN_BWD_VPT_CASES(__nv_bfloat16, true, ACC, CALL) }      \
      else { ADALN_BWD_VPT_CASES(__nv_bfloat16, false, ACC, CALL) }            \
    } else if (l->dtype == AL_DTYPE_FP16) {                                    \
      if (l->vec) { ADALN_BWD_VPT_CASES(__half, true, ACC, CALL) }             \
      else { ADALN_BWD_VPT_CASES(__half, false, ACC, CALL) }                   \
    } else if (l->dtype == AL_DTYPE_FP32) {                                    \
      if (l->vec) { ADALN_BWD_VPT_CASES(float, true, ACC, CALL) }              \
      else { ADALN_BWD_VPT_CASES(float, false, ACC, CALL) }                    \
    }                                                                          \
  } while (0)
/* clang-format on */

#define BWD_CALL(T, VPT, VEC, ACC) \
  bwd_rows_launch_t<T, VPT, VEC, ACC>(l, dy, x, scale, mean, rstd, dx, ws)
#define BWD_FN(T, VPT, VEC, ACC) bwd_fn_t<T, VPT, VEC, ACC>(l)

extern "C" int adaln_bwd_fused_launch(const adaln_launch *l, const void *dy, const void *x,
                                      const void *scale, const float *mean, const float *rstd,
                                      void *dx, float *ws) {
  if (l->rows == 0) return AL_OK;
  ADALN_BWD_DISPATCH(true, BWD_CALL);
  return al_set_error(AL_EUNSUPPORTED,
                      "adaln backward: no fused kernel for dtype %d, %d vectors/thread", l->dtype,
                      l->vpt);
}

extern "C" int adaln_bwd_dx_launch(const adaln_launch *l, const void *dy, const void *x,
                                   const void *scale, const float *mean, const float *rstd,
                                   void *dx, float *mean_err) {
  float *ws = mean_err;
  if (l->rows == 0) return AL_OK;
  ADALN_BWD_DISPATCH(false, BWD_CALL);
  return al_set_error(AL_EUNSUPPORTED,
                      "adaln backward: no dx kernel for dtype %d, %d vectors/thread", l->dtype,
                      l->vpt);
}

/* The kernel a launch with this configuration uses (register or cp.async variant). */
template <typename T, int VPT, bool VEC, bool ACC>
static const void *bwd_fn_t(const adaln_launch *l) {
  if constexpr (ACC && VEC) {
    if (l->kernel == ADALN_BWD_KERNEL_TILE) return tile_fn_t<T, VPT>(l);
    switch (l->stages) {
      case 2: return (const void *)adaln_bwd_fused_async_kernel<T, VPT, 2>;
      case 3: return (const void *)adaln_bwd_fused_async_kernel<T, VPT, 3>;
      case 4: return (const void *)adaln_bwd_fused_async_kernel<T, VPT, 4>;
      default: break;
    }
  }
  return (const void *)adaln_bwd_rows_kernel<T, VPT, VEC, ACC>;
}

extern "C" const void *adaln_bwd_rows_kernel_fn(const adaln_launch *l, int acc) {
  if (acc)
    ADALN_BWD_DISPATCH(true, BWD_FN);
  else
    ADALN_BWD_DISPATCH(false, BWD_FN);
  return nullptr;
}
