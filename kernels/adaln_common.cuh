/*
 * adaln_common.cuh - device helpers shared by the AdaLN kernels: dtype packing, 16-byte and
 * element-wise row accesses, row-group reductions, sample lookup, CUDA error checks.
 *
 * Templates stop at what a dtype switch and compile-time register arrays need: the element
 * type T, VPT (vectors per thread, so the row can live in registers, indexed only by unrolled
 * loops) and VEC (16-byte path or element-wise path).
 */
#ifndef AL_ADALN_COMMON_CUH
#define AL_ADALN_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "common/al_status.h"
#include "kernels/al_adaln.h"
#include "kernels/adaln_internal.h"

/* Every CUDA runtime call is checked; the message names the call, file and line. */
#define ADALN_CUDA(call)                                                             \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess)                                                           \
      return al_set_error(AL_ECUDA, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, \
                          cudaGetErrorString(e_), cudaGetErrorName(e_));             \
  } while (0)

/* After a launch: configuration errors show up in cudaGetLastError. */
#define ADALN_LAUNCHED(what) ADALN_CUDA(cudaGetLastError())

/* ---------------------------------------------------------------- element packing -------- */

template <typename T>
struct Elem;

template <>
struct Elem<float> {
  static constexpr int kVec = 4;
  __device__ __forceinline__ static void unpack(const uint4 &r, float *f) {
    f[0] = __uint_as_float(r.x);
    f[1] = __uint_as_float(r.y);
    f[2] = __uint_as_float(r.z);
    f[3] = __uint_as_float(r.w);
  }
  __device__ __forceinline__ static uint4 pack(const float *f) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                      __float_as_uint(f[3]));
  }
  /* One element's bits <-> float, for the element-wise path. */
  typedef unsigned int bits_t;
  __device__ __forceinline__ static float from_bits(unsigned int b) { return __uint_as_float(b); }
  __device__ __forceinline__ static unsigned int to_bits(float f) { return __float_as_uint(f); }
};

__device__ __forceinline__ unsigned int pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned int *>(&h);
}

__device__ __forceinline__ unsigned int pack_f16x2(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned int *>(&h);
}

__device__ __forceinline__ float2 unpack_f16x2(unsigned int u) {
  __half2 h = *reinterpret_cast<__half2 *>(&u);
  return __half22float2(h);
}

template <>
struct Elem<__nv_bfloat16> {
  static constexpr int kVec = 8;
  __device__ __forceinline__ static void unpack(const uint4 &r, float *f) {
    /* bf16 is the top half of an fp32: a shift or a mask, no conversion instruction. */
    f[0] = __uint_as_float(r.x << 16);
    f[1] = __uint_as_float(r.x & 0xffff0000u);
    f[2] = __uint_as_float(r.y << 16);
    f[3] = __uint_as_float(r.y & 0xffff0000u);
    f[4] = __uint_as_float(r.z << 16);
    f[5] = __uint_as_float(r.z & 0xffff0000u);
    f[6] = __uint_as_float(r.w << 16);
    f[7] = __uint_as_float(r.w & 0xffff0000u);
  }
  __device__ __forceinline__ static uint4 pack(const float *f) {
    return make_uint4(pack_bf16x2(f[0], f[1]), pack_bf16x2(f[2], f[3]), pack_bf16x2(f[4], f[5]),
                      pack_bf16x2(f[6], f[7]));
  }
  typedef unsigned short bits_t;
  __device__ __forceinline__ static float from_bits(unsigned short b) {
    return __uint_as_float(((unsigned int)b) << 16);
  }
  __device__ __forceinline__ static unsigned short to_bits(float f) {
    return (unsigned short)(pack_bf16x2(f, 0.0f) & 0xffffu);
  }
};

template <>
struct Elem<__half> {
  static constexpr int kVec = 8;
  __device__ __forceinline__ static void unpack(const uint4 &r, float *f) {
    float2 a = unpack_f16x2(r.x), b = unpack_f16x2(r.y), c = unpack_f16x2(r.z),
           d = unpack_f16x2(r.w);
    f[0] = a.x;
    f[1] = a.y;
    f[2] = b.x;
    f[3] = b.y;
    f[4] = c.x;
    f[5] = c.y;
    f[6] = d.x;
    f[7] = d.y;
  }
  __device__ __forceinline__ static uint4 pack(const float *f) {
    return make_uint4(pack_f16x2(f[0], f[1]), pack_f16x2(f[2], f[3]), pack_f16x2(f[4], f[5]),
                      pack_f16x2(f[6], f[7]));
  }
  typedef unsigned short bits_t;
  __device__ __forceinline__ static float from_bits(unsigned short b) {
    return __half2float(__ushort_as_half(b));
  }
  __device__ __forceinline__ static unsigned short to_bits(float f) {
    return __half_as_ushort(__float2half_rn(f));
  }
};

/* ---------------------------------------------------------------- row accesses ----------- */

/* Cache policy of a load: streamed once (x, dy: evict-first, so the small reused arrays and
 * the partial sums stay in L2) or kept (scale, shift: read by every row of a sample). */
enum { LD_STREAM = 0, LD_KEEP = 1 };

__device__ __forceinline__ unsigned int set_half(unsigned int w, int hi, unsigned int b16) {
  return hi ? ((w & 0x0000ffffu) | (b16 << 16)) : ((w & 0xffff0000u) | b16);
}

/* Loads vector v (elements v*kVec ..) of the row starting at `row`. Elements at or past D, and
 * everything when !ok, read as zero bits (0.0f). VEC: one 16-byte load (row 16-byte aligned,
 * D a multiple of kVec). Otherwise element-wise. */
template <typename T, bool VEC, int POLICY>
__device__ __forceinline__ uint4 load_vec(const T *row, int v, int D, bool ok) {
  typedef Elem<T> E;
  uint4 r = make_uint4(0u, 0u, 0u, 0u);
  if constexpr (VEC) {
    if (ok) {
      const uint4 *p = reinterpret_cast<const uint4 *>(row) + v;
      r = POLICY == LD_STREAM ? __ldcs(p) : __ldg(p);
    }
  } else {
    unsigned int w[4] = {0u, 0u, 0u, 0u};
    const typename E::bits_t *p = reinterpret_cast<const typename E::bits_t *>(row);
#pragma unroll
    for (int j = 0; j < E::kVec; ++j) {
      int d = v * E::kVec + j;
      if (ok && d < D) {
        typename E::bits_t b = POLICY == LD_STREAM ? __ldcs(p + d) : __ldg(p + d);
        if constexpr (sizeof(typename E::bits_t) == 4)
          w[j] = (unsigned int)b;
        else
          w[j >> 1] = set_half(w[j >> 1], j & 1, (unsigned int)b);
      }
    }
    r = make_uint4(w[0], w[1], w[2], w[3]);
  }
  return r;
}

/* Cache policy of a store: plain, or streamed (st.global.cs: evict-first in L2). The row
 * forward streams y: at 32760 x 1536 that took it from 83.4-84.4% to 85.7-87.1% of copy
 * (measured in one process); streaming the backward's dx gained nothing. */
enum { ST_PLAIN = 0, ST_STREAM = 1 };

/* Stores vector v of a row; element-wise path stores only elements below D. */
template <typename T, bool VEC, int POLICY = ST_PLAIN>
__device__ __forceinline__ void store_vec(T *row, int v, int D, const float *f) {
  typedef Elem<T> E;
  if constexpr (VEC) {
    uint4 *p = reinterpret_cast<uint4 *>(row) + v;
    if (POLICY == ST_STREAM)
      __stcs(p, E::pack(f));
    else
      *p = E::pack(f);
  } else {
    typename E::bits_t *p = reinterpret_cast<typename E::bits_t *>(row);
#pragma unroll
    for (int j = 0; j < E::kVec; ++j) {
      int d = v * E::kVec + j;
      if (d < D) p[d] = E::to_bits(f[j]);
    }
  }
}

/* True when element j of vector v is inside the row. */
template <typename T, bool VEC>
__device__ __forceinline__ bool elem_in(int v, int j, int nv, int D) {
  return VEC ? (v < nv) : (v * Elem<T>::kVec + j < D);
}

/* Makes the compiler forget what a register vector holds, so that values derived from it
 * before a reduction (unpacked floats, xhat, g) are recomputed afterwards instead of being
 * kept live across it: the row stays in registers as packed 16-byte vectors (4 registers per
 * vector) rather than as up to three fp32 copies, which would spill. */
__device__ __forceinline__ void opaque(uint4 &r) {
  asm volatile("" : "+r"(r.x), "+r"(r.y), "+r"(r.z), "+r"(r.w));
}

/* ---------------------------------------------------------------- reductions ------------- */

/* The xor butterfly of N sums over the aligned lane group of min(tpr, 32) lanes, offsets
 * width/2 .. 1 (each step adds the same two values in either order, so all lanes agree).
 * Unrolled over the five possible offsets with a uniform test each: the loop over a runtime
 * width cost a compare, a shift and a branch per step on every row (ncu). */
template <int N>
__device__ __forceinline__ void xor_sums(float (&v)[N], int tpr) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    if (o < tpr) {
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
    }
  }
}

/* Sum over the tpr threads of a row group; every thread of the group gets the same bits.
 * tpr <= 32: xor butterfly inside the aligned lane group (each step adds the same two values
 * in either order; IEEE addition is commutative, so all lanes agree). tpr > 32: the block is
 * the row group; lane 0 of each warp parks its warp's sum in red[], one barrier, then every
 * thread adds the warp sums in warp order. Callers alternate between two red[] buffers, so
 * one barrier per reduction suffices (a buffer is rewritten only after the next barrier). */
__device__ __forceinline__ float group_sum(float v, int tpr, float *red) {
  float w[1] = {v};
  xor_sums(w, tpr);
  v = w[0];
  if (tpr > 32) {
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    const int nw = tpr >> 5;
    v = 0.0f;
    for (int i = 0; i < nw; ++i) v += red[i];
  }
  return v;
}

/* Two sums at once (one barrier); red holds 64 floats. */
__device__ __forceinline__ void group_sum2(float &a, float &b, int tpr, float *red) {
  {
    float v[2] = {a, b};
    xor_sums(v, tpr);
    a = v[0];
    b = v[1];
  }
  if (tpr > 32) {
    const int w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
      red[w] = a;
      red[32 + w] = b;
    }
    __syncthreads();
    const int nw = tpr >> 5;
    a = b = 0.0f;
    for (int i = 0; i < nw; ++i) {
      a += red[i];
      b += red[32 + i];
    }
  }
}

/* Three sums at once (one barrier); red holds 96 floats. */
__device__ __forceinline__ void group_sum3(float &a, float &b, float &c, int tpr, float *red) {
  {
    float v[3] = {a, b, c};
    xor_sums(v, tpr);
    a = v[0];
    b = v[1];
    c = v[2];
  }
  if (tpr > 32) {
    const int w = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) {
      red[w] = a;
      red[32 + w] = b;
      red[64 + w] = c;
    }
    __syncthreads();
    const int nw = tpr >> 5;
    a = b = c = 0.0f;
    for (int i = 0; i < nw; ++i) {
      a += red[i];
      b += red[32 + i];
      c += red[64 + i];
    }
  }
}

/* ---------------------------------------------------------------- cp.async, group sums -- */

/* cp.async: 16-byte global -> shared copy that bypasses registers (and L1); zero-fills when
 * !valid (nothing is read then). */
__device__ __forceinline__ void cp_async16(uint4 *dst, const void *src, bool valid) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
/* cp.async of 4 bytes (through L1: .ca is the only mode for sizes below 16). */
__device__ __forceinline__ void cp_async4(float *dst, const float *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* bar.sync on a named barrier (1..15) for the n threads (whole warps) of one row group. */
__device__ __forceinline__ void group_bar(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

/* N (1..3) sums over the tpr threads of row group grp (tile kernels): xor shuffles inside
 * the aligned lane group; for tpr > 32, lane 0 of each warp parks its warp's sums as one
 * float4 in the group's red[nw], one named barrier of the group, then every thread adds the
 * nw float4 in warp order (one 16-byte broadcast read per warp). Same bits in every thread of
 * the group. Callers alternate two red buffers per group. */
template <int N>
__device__ __forceinline__ void tile_sums(float (&v)[N], int tpr, int t, int grp, float4 *red) {
  static_assert(N >= 1 && N <= 3, "tile_sums: 1 to 3 sums");
  xor_sums(v, tpr);
  if (tpr > 32) {
    const int nw = tpr >> 5;
    /* v[k % N]: an index that stays in bounds for every N, where N > k picks the value */
    if ((t & 31) == 0)
      red[t >> 5] = make_float4(v[0], N > 1 ? v[1 % N] : 0.0f, N > 2 ? v[2 % N] : 0.0f, 0.0f);
    group_bar(1 + grp, tpr);
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = 0.0f;
#pragma unroll 2
    /* unrolled by 2 only: fully unrolled, the loads' registers make the sums spill (ptxas) */
    for (int i = 0; i < nw; ++i) {
      const float4 r = red[i];
      v[0] += r.x;
      if (N > 1) v[1 % N] += r.y;
      if (N > 2) v[2 % N] += r.z;
    }
  }
}

/* ---------------------------------------------------------------- samples ---------------- */

/* Which rows belong to which sample. Offsets are clamped to [0, rows] and sample indices to
 * [0, B): unchecked bad offsets give wrong numbers, never out-of-bounds accesses. */
struct Layout {
  const int32_t *cu; /* packed: B + 1 offsets; NULL: fixed */
  int64_t seq_len;   /* fixed: rows per sample */
  int64_t rows;
  int B;
};

__device__ __forceinline__ int64_t seg_start(const Layout &L, int b) {
  if (L.cu == nullptr) return (int64_t)b * L.seq_len;
  int64_t v = __ldg(L.cu + b);
  return v < 0 ? 0 : (v > L.rows ? L.rows : v);
}

__device__ __forceinline__ int64_t seg_end(const Layout &L, int b) { return seg_start(L, b + 1); }

/* Sample of a row: the largest b in [0, B) with start(b) <= row (skips empty samples). */
__device__ __forceinline__ int seg_of_row(const Layout &L, int64_t row) {
  if (L.B == 1) return 0; /* the common video case: no division, no search */
  if (L.cu == nullptr) {
    /* 32-bit: rows <= INT32_MAX (checked by the API), and a 64-bit division is a long
     * instruction sequence on every row. */
    const int b = (int)row / (int)L.seq_len;
    return b < L.B ? b : L.B - 1;
  }
  int lo = 0, hi = L.B - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (seg_start(L, mid) <= row)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* The layout of a launch, for a kernel's arguments (host side). */
static inline Layout layout_of(const adaln_launch *l) {
  Layout L;
  L.cu = l->cu;
  L.seq_len = l->seq_len;
  L.rows = l->rows;
  L.B = l->batch;
  return L;
}

/* ---------------------------------------------------------------- tile walk -------------- */

/* The tile kernels' walk over a block's rows [R0, R1): pieces [p0, p1) cut at sample
 * boundaries (sample b), and inside a piece rounds of G rows, group g taking p0 + g,
 * p0 + g + G, ... */
struct TilePiece {
  int b;
  int64_t p0, p1;
  __device__ __forceinline__ void first(const Layout &L, int64_t R0, int64_t R1) {
    b = seg_of_row(L, R0);
    p0 = R0;
    cut(L, R1);
  }
  /* p1: the end of sample b's rows from p0 on (b advanced past samples that end by p0). */
  __device__ __forceinline__ void cut(const Layout &L, int64_t R1) {
    while (b < L.B - 1 && seg_end(L, b) <= p0) ++b;
    p1 = R1;
    if (b < L.B - 1) {
      const int64_t e = seg_end(L, b);
      if (e < p1) p1 = e;
    }
  }
  /* Moves to the next piece; false (nothing changed) after the last. */
  __device__ __forceinline__ bool next(const Layout &L, int64_t R1) {
    if (p1 >= R1) return false;
    p0 = p1;
    cut(L, R1);
    return true;
  }
  __device__ __forceinline__ int64_t rounds(int G) const { return (p1 - p0 + G - 1) / G; }
};

/* The opening of the tile kernels (adaln_fwd_tile_kernel, adaln_bwd_tile_kernel), whose
 * launch arguments `a` have tpr, groups, D, L and chunk: declares G (row groups per block),
 * tpr (threads per group), nthr (per block), grp and t (this thread's group and its thread
 * in the group), D, nv (16-byte vectors of kVec elements per row), nwg (warps per group, 1
 * below a warp), L, and the block's rows [R0, R1) (chunk blockIdx.x, clipped to the rows). */
#define ADALN_TILE_THREAD(a, kVec)                    \
  const int tpr = (a).tpr, G = (a).groups;            \
  const int nthr = blockDim.x;                        \
  const int grp = threadIdx.x / tpr;                  \
  const int t = threadIdx.x - grp * tpr;              \
  const int D = (a).D;                                \
  const int nv = D / (kVec);                          \
  const int nwg = tpr > 32 ? tpr >> 5 : 1;            \
  const Layout &L = (a).L;                            \
  const int64_t R0 = (int64_t)blockIdx.x * (a).chunk; \
  const int64_t R1 = R0 + (a).chunk < L.rows ? R0 + (a).chunk : L.rows

/* A cp.async producer's place in the same (piece, round) sequence, run S - 1 rounds ahead of
 * the consumer: row(grp) is the row to copy now when live(grp); advance() after each round. */
struct TileCursor {
  TilePiece pc;
  int64_t r, nr;
  bool done;
  __device__ __forceinline__ void init(const TilePiece &p, int G) {
    pc = p;
    r = 0;
    nr = p.rounds(G);
    done = false;
  }
  __device__ __forceinline__ int64_t row(int G, int grp) const { return pc.p0 + r * G + grp; }
  __device__ __forceinline__ bool live(int G, int grp) const {
    return !done && row(G, grp) < pc.p1;
  }
  __device__ __forceinline__ void advance(const Layout &L, int64_t R1, int G) {
    if (done || ++r != nr) return;
    if (!pc.next(L, R1)) {
      done = true;
    } else {
      r = 0;
      nr = pc.rounds(G);
    }
  }
};

#endif /* AL_ADALN_COMMON_CUH */
