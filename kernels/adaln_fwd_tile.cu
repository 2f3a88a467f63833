/*
 * adaln_fwd_tile.cu - AdaLN forward for batches of several samples: one wave of blocks, each
 * walking a contiguous chunk of rows, with the current sample's scale and shift in shared
 * memory.
 *
 * Why a second forward: adaln_fwd_kernel reads scale[b] and shift[b] for every row after the
 * row's two reductions, through L1. With one sample the lines stay in L1 and the loads hit;
 * with many samples (an image batch, a packed batch) the rows a block of four rows gets are
 * of a sample this SM has not seen, every warp waits an L2 round trip on its last pass, and
 * the SM has nothing else in flight: at 32768 x 1536 the forward falls from 84.7% of copy at
 * B = 1 to 73.4% at B = 8 and 67.7% at B = 256, and with b forced to one sample the B = 8
 * batch runs at the B = 1 speed. Loading the modulation early into
 * registers fixes the dependence on B but needs ~120 registers and loses 13% everywhere.
 * Here a block loads the modulation once per piece of rows into shared memory, and its rows
 * stream through a cp.async pipeline, so nothing waits on L2 inside a row.
 */
#include "kernels/adaln_fwd.cuh"

/*
 * One row, its vectors already in this thread's stage slots (sx[i * nthr]). The math is
 * adaln_fwd_kernel's: two-pass statistics over the registers, then
 * y = (c - m1) * rstd * (one + scale) + shift with scale and shift read from shared memory
 * (mod: nv vectors of scale, then nv of shift, raw). Reached by every thread of the group
 * (ok = false: a padding row that only joins the reductions). red: this group's two
 * reduction buffers (nwg float4 each), one per reduction, so the next row's first reduction
 * never overwrites what a slower thread still reads.
 */
template <typename T, int VPT>
__device__ __forceinline__ void fwd_tile_row(const FwdArgs<T> &a, int64_t row, bool ok, int t,
                                             int grp, int nv, int nthr, const uint4 *sx,
                                             const uint4 *mod, float4 *red, int nwg) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  const int tpr = a.tpr, D = a.D;
  uint4 cur[VPT];
#pragma unroll
  for (int i = 0; i < VPT; ++i)
    cur[i] = ok && t + i * tpr < nv ? sx[i * nthr] : make_uint4(0u, 0u, 0u, 0u);

  float s[1] = {0.0f};
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    float f[kVec];
    E::unpack(cur[i], f);
#pragma unroll
    for (int j = 0; j < kVec; ++j) s[0] += f[j];
  }
  tile_sums(s, tpr, t, grp, red);
  const float mean0 = s[0] / (float)D; /* a division: see adaln_fwd_kernel */
#pragma unroll
  for (int i = 0; i < VPT; ++i) opaque(cur[i]);

  float s12[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    if (t + i * tpr < nv) {
      float f[kVec];
      E::unpack(cur[i], f);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float c = f[j] - mean0;
        s12[0] += c;
        s12[1] = fmaf(c, c, s12[1]);
      }
    }
  }
  tile_sums(s12, tpr, t, grp, red + nwg);
  const float m1 = s12[0] / (float)D;
  const float rstd = rsqrtf(fmaxf(s12[1] * a.inv_d - m1 * m1, 0.0f) + a.eps);
  const float nm1r = -m1 * rstd;
  if (!ok) return;
#pragma unroll
  for (int i = 0; i < VPT; ++i) opaque(cur[i]);

  uint4 *yr = reinterpret_cast<uint4 *>(a.y + row * (int64_t)D);
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int v = t + i * tpr;
    if (v < nv) {
      float o[kVec];
      fwd_y<T>(cur[i], mod[v], mod[nv + v], mean0, rstd, nm1r, a.one, o);
      yr[v] = E::pack(o);
    }
  }
  fwd_stats(a, row, t, mean0, m1, rstd);
}

/*
 * Forward, tile kernel (16-byte vector path, D a multiple of the vector). Block k owns rows
 * [k*chunk, (k+1)*chunk) and G row groups of tpr threads; the rows are cut at sample
 * boundaries into pieces and inside a piece group g takes rows p0 + g, p0 + g + G, ... (a
 * group past the piece end gets a padding row). At a piece start the block copies the
 * sample's scale and shift into shared memory (a barrier before: every group is done with the
 * previous sample's; one after). x rows stream through an S-stage cp.async pipeline into
 * thread-private slots (no barrier: a thread reads back only what it copied), S - 1 rounds
 * ahead across pieces. Row reductions: shuffles, and for tpr > 32 one named barrier per group
 * (tile_sums). Dynamic shared memory: stage [S][VPT][nthr] uint4, mod [2][nv] uint4, then
 * red [G][2][max(tpr/32, 1)] float4.
 */
template <typename T, int VPT, int S>
__global__ void __launch_bounds__(VPT >= 7 ? 384 : 512, 2) adaln_fwd_tile_kernel(FwdArgs<T> a) {
  typedef Elem<T> E;
  constexpr int kVec = E::kVec;
  extern __shared__ uint4 smem_fwd[];

  ADALN_TILE_THREAD(a, kVec);
  if (R0 >= R1) return; /* block-uniform */

  uint4 *stage = smem_fwd;
  uint4 *mod = stage + S * VPT * nthr;
  float4 *red = reinterpret_cast<float4 *>(mod + 2 * nv) + grp * 2 * nwg;

  TilePiece pc; /* the consumer's piece */
  pc.first(L, R0, R1);
  /* Producer: the same (piece, round) sequence, S - 1 rounds ahead; one commit group per
   * round (empty for a padding row or past the end). */
  TileCursor prod;
  prod.init(pc, G);
  auto issue = [&](int s) {
    if (prod.live(G, grp)) {
      const uint4 *xr = reinterpret_cast<const uint4 *>(a.x + prod.row(G, grp) * (int64_t)D);
#pragma unroll
      for (int i = 0; i < VPT; ++i) {
        const int v = t + i * tpr;
        if (v < nv) cp_async16(&stage[(s * VPT + i) * nthr + threadIdx.x], xr + v, true);
      }
    }
    cp_async_commit();
    prod.advance(L, R1, G);
  };

#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue(s);
  int sr = 0, sw = S - 1;
  for (;;) {
    {
      const uint4 *sc = reinterpret_cast<const uint4 *>(a.scale + (int64_t)pc.b * D);
      const uint4 *sh = reinterpret_cast<const uint4 *>(a.shift + (int64_t)pc.b * D);
      for (int v = threadIdx.x; v < nv; v += nthr) {
        mod[v] = __ldg(sc + v);
        mod[nv + v] = __ldg(sh + v);
      }
    }
    __syncthreads();
    const int64_t nr = pc.rounds(G);
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t row = pc.p0 + r * G + grp;
      issue(sw);
      cp_async_wait<S - 1>(); /* this thread's copies of `row` have landed */
      fwd_tile_row<T, VPT>(a, row, row < pc.p1, t, grp, nv, nthr,
                           stage + sr * VPT * nthr + threadIdx.x, mod, red, nwg);
      sr = sr + 1 == S ? 0 : sr + 1;
      sw = sw + 1 == S ? 0 : sw + 1;
    }
    if (pc.p1 >= R1) break;
    __syncthreads(); /* every group is done with this sample's modulation */
    pc.next(L, R1);
  }
  cp_async_wait<0>();
}

/* The stages of the tile forward: 2 (one row per group in flight while one is computed). */
#define ADALN_FWD_TILE_STAGES 2

template <typename T, int VPT>
static int fwd_tile_launch_t(const adaln_launch *l, const void *x, const void *scale,
                             const void *shift, void *y, float *mean, float *rstd) {
  const FwdArgs<T> a = fwd_args_of<T>(l, x, scale, shift, y, mean, rstd);
  adaln_fwd_tile_kernel<T, VPT, ADALN_FWD_TILE_STAGES>
      <<<(unsigned)l->nchunks, l->block, l->smem, (cudaStream_t)l->stream>>>(a);
  ADALN_LAUNCHED("adaln_fwd_tile_kernel");
  return AL_OK;
}

/* clang-format off */
#define ADALN_FWD_TILE_CASES(T, CALL)                          \
  switch (l->vpt) {                                            \
    case 1: return CALL(T, 1);                                 \
    case 2: return CALL(T, 2);                                 \
    case 3: return CALL(T, 3);                                 \
    case 4: return CALL(T, 4);                                 \
    case 5: return CALL(T, 5);                                 \
    case 6: return CALL(T, 6);                                 \
    case 7: return CALL(T, 7);                                 \
    case 8: return CALL(T, 8);                                 \
    default: break;                                            \
  }

#define ADALN_FWD_TILE_DISPATCH(CALL)                                        \
  do {                                                                       \
    if (l->dtype == AL_DTYPE_BF16) { ADALN_FWD_TILE_CASES(__nv_bfloat16, CALL) } \
    else if (l->dtype == AL_DTYPE_FP16) { ADALN_FWD_TILE_CASES(__half, CALL) }   \
    else if (l->dtype == AL_DTYPE_FP32) { ADALN_FWD_TILE_CASES(float, CALL) }    \
  } while (0)
/* clang-format on */

#define FWD_TILE_CALL(T, VPT) fwd_tile_launch_t<T, VPT>(l, x, scale, shift, y, mean, rstd)
#define FWD_TILE_FN(T, VPT) (const void *)adaln_fwd_tile_kernel<T, VPT, ADALN_FWD_TILE_STAGES>

extern "C" int adaln_fwd_tile_launch(const adaln_launch *l, const void *x, const void *scale,
                                     const void *shift, void *y, float *mean, float *rstd) {
  if (l->rows == 0) return AL_OK;
  ADALN_FWD_TILE_DISPATCH(FWD_TILE_CALL);
  return al_set_error(AL_EUNSUPPORTED,
                      "adaln forward: no tile kernel for dtype %d, %d vectors/thread", l->dtype,
                      l->vpt);
}

extern "C" const void *adaln_fwd_tile_kernel_fn(const adaln_launch *l) {
  ADALN_FWD_TILE_DISPATCH(FWD_TILE_FN);
  return nullptr;
}

extern "C" size_t adaln_fwd_tile_smem(const adaln_launch *l, int groups) {
  const int nv = l->dim / adaln_vec_elems(l->dtype);
  const int nwg = l->tpr > 32 ? l->tpr / 32 : 1;
  const size_t block = (size_t)groups * l->tpr;
  return (size_t)ADALN_FWD_TILE_STAGES * l->vpt * block * 16 + (size_t)2 * nv * 16 +
         (size_t)groups * 2 * nwg * 16;
}
