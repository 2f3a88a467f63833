/*
 * al_adaln.h - fused AdaLN (LayerNorm without affine + per-sample modulation) on CUDA.
 *
 *   y[r,d] = (x[r,d] - mean[r]) * rstd[r] * (1 + scale[b,d]) + shift[b,d]
 *   mean[r] = mean_d x[r,d],  rstd[r] = 1 / sqrt(var_d x[r,d] + eps),  b = sample of row r
 *
 * With AL_ADALN_PLAIN_SCALE the factor is scale[b,d] instead of (1 + scale[b,d]).
 * x, y, dy, dx are row-major [rows, D]; scale, shift, dscale, dshift are [B, D]; all five share
 * one dtype. mean and rstd are fp32 [rows] (8 bytes per row: all the forward keeps for the
 * backward). Statistics and every sum are computed in fp32. The backward re-derives the
 * residual of the fp32-rounded mean from x (which it reads anyway), so xhat keeps fp32
 * accuracy even when |mean| >> std.
 *
 * Rows belong to samples in one of two layouts:
 *   fixed   seq_len = N > 0, cu_seqlens = NULL: x is [B, N, D], rows = B * N.
 *   packed  seq_len = 0, cu_seqlens = int32 device array of B + 1 offsets: sample b owns rows
 *           [cu_seqlens[b], cu_seqlens[b+1]); samples may be empty; cu_seqlens[B] = rows.
 *
 * Backward:
 *   g       = dy * (1 + scale[b])                     (or dy * scale[b])
 *   dx      = rstd * (g - mean_d(g) - xhat * mean_d(g * xhat)),  xhat = (x - mean) * rstd
 *   dscale  = sum over the rows of sample b of dy * xhat
 *   dshift  = sum over the rows of sample b of dy
 * dscale and dshift are reduced deterministically (fixed order, no float atomics): two runs on
 * the same inputs give bitwise identical dx, dscale and dshift.
 *
 * Validation (before any launch; a bad argument returns an error and launches nothing):
 *   dtype set; 1 <= D <= 16384 (tuned for 64..16384); 1 <= B <= AL_ADALN_MAX_BATCH;
 *   0 <= rows <= INT32_MAX; fixed layout: rows == B * N; every pointer that is used is non-NULL;
 *   mean/rstd 4-byte aligned, workspace 16-byte aligned and at least the queried size.
 *   cu_seqlens lives on the device, where checking it would cost a copy and a synchronisation.
 *   So: pass a host mirror in cu_seqlens_host and it is checked in full (cu[0] == 0,
 *   non-decreasing, cu[B] == rows) at no device cost; or set AL_ADALN_VALIDATE_OFFSETS and the
 *   library copies the device array and synchronises the stream to check it. With neither, the
 *   offsets are trusted: the kernels clamp every offset to [0, rows] and every sample index to
 *   [0, B), so bad offsets can never make them read or write out of bounds, but the results
 *   are then unspecified.
 *
 * Fast path: D a multiple of 8 (bf16, fp16) or 4 (fp32) and x, y, scale, shift (forward) or
 * dy, x, scale, dx (backward) 16-byte aligned -> 16-byte vector loads and stores. Anything else
 * (odd D, offset views) silently takes the general path: same results, element-wise accesses,
 * slower. Never an error.
 *
 * Kernels: the library picks them, and their configuration, from the shape, dtype, alignment
 * and device. Forward: a row kernel; for batches of several samples averaging at most 2048
 * rows with D >= 3072 (fast path only) a tiled kernel that holds each sample's scale and shift
 * in shared memory. Backward: one fused pass (dx and the per-feature partial sums from one
 * read of x and dy) while a row fits the registers (D <= 12288 for bf16/fp16, 8192 for fp32),
 * else a split path that reads x and dy twice. The rules, and the knobs that force a choice
 * (for the benchmark, tests and experiments), are in al_adaln_tuning.h, which is unstable.
 *
 * Ownership: every pointer is the caller's; the library allocates nothing, keeps no pointer after
 * a call returns, and holds no global state besides a small, mutex-protected per-process
 * cache of kernel attributes (registers, occupancy) per device.
 * All work is enqueued on `stream` (a cudaStream_t; NULL = the legacy default stream) and the
 * calls return without waiting for it, except with AL_ADALN_VALIDATE_OFFSETS. The caller keeps
 * the buffers alive until the stream has finished. Launches use the current CUDA device.
 *
 * Thread safety: all functions may be called concurrently from any threads (on different or
 * the same streams); error messages are thread-local (al_last_error()).
 *
 * Errors: AL_EINVAL (bad argument), AL_ERANGE (size outside the supported range), AL_ECUDA (a
 * CUDA runtime call or launch failed; the message names the call and the CUDA error),
 * AL_EUNSUPPORTED (only for a configuration forced through al_adaln_tuning.h that cannot run).
 * Errors from earlier asynchronous work on the stream may surface as AL_ECUDA from a later call.
 *
 * Struct sizes (docs/DESIGN.md, "The ABI of the public structs"): al_adaln_desc and
 * al_adaln_options start with `size_t struct_size` (AL_*_INIT; 0 = this header's struct); the
 * library reads only what fits in it, fields past it as zero. A size below AL_*_V1 or above the
 * library's is AL_EINVAL naming the struct and both sizes. al_adaln_tuning (al_adaln_tuning.h)
 * is unstable and keeps no size.
 */
#ifndef AL_ADALN_H
#define AL_ADALN_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifndef AL_DTYPE_DEFINED
#define AL_DTYPE_DEFINED
/* Element type of tensors. 0 is deliberately not a dtype: a zeroed descriptor is an error. */
typedef enum al_dtype { AL_DTYPE_BF16 = 1, AL_DTYPE_FP16 = 2, AL_DTYPE_FP32 = 3 } al_dtype;
#endif

#define AL_ADALN_MAX_DIM 16384
#define AL_ADALN_MAX_BATCH 65535

/* What the tensors look like. */
typedef struct al_adaln_desc {
  size_t struct_size; /* sizeof(al_adaln_desc) (AL_ADALN_DESC_INIT); 0 = this header's struct */
  int dtype;          /* al_dtype of x, y, dy, dx, scale, shift, dscale, dshift */
  int32_t batch;      /* B: samples, rows of scale/shift */
  int32_t dim;        /* D: features */
  int64_t rows;       /* tokens in x; fixed layout: 0 (derived) or B * seq_len */
  int64_t seq_len;    /* fixed layout: N tokens per sample; 0 for packed */
  const int32_t *cu_seqlens;      /* packed layout: device, B + 1 offsets; NULL for fixed */
  const int32_t *cu_seqlens_host; /* optional host mirror of cu_seqlens, checked when given */
} al_adaln_desc;
#define AL_ADALN_DESC_INIT AL_STRUCT_INIT(al_adaln_desc)
#define AL_ADALN_DESC_V1 sizeof(al_adaln_desc)

/* flags */
#define AL_ADALN_PLAIN_SCALE 1u      /* modulate with scale instead of (1 + scale) */
#define AL_ADALN_VALIDATE_OFFSETS 2u /* copy cu_seqlens to the host and check (synchronises) */

struct al_adaln_tuning; /* al_adaln_tuning.h: kernel choice and configuration (unstable) */

/* Options: zero (or a NULL pointer) means default for every field. */
typedef struct al_adaln_options {
  size_t
      struct_size; /* sizeof(al_adaln_options) (AL_ADALN_OPTIONS_INIT); 0 = this header's struct */
  float eps;       /* added to the variance; 0 -> 1e-6 */
  unsigned flags;  /* AL_ADALN_PLAIN_SCALE | AL_ADALN_VALIDATE_OFFSETS */
  const struct al_adaln_tuning *tuning; /* NULL: the library's choice (al_adaln_tuning.h) */
} al_adaln_options;
#define AL_ADALN_OPTIONS_INIT AL_STRUCT_INIT(al_adaln_options)
#define AL_ADALN_OPTIONS_V1 sizeof(al_adaln_options)

/* Forward. x, scale, shift in; y out; mean, rstd (fp32, rows entries each) out for the backward.
 * mean and rstd may both be NULL when no backward follows (inference). */
AL_API int al_adaln_forward(const al_adaln_desc *desc, const al_adaln_options *opts, const void *x,
                            const void *scale, const void *shift, void *y, float *mean, float *rstd,
                            void *stream);

/* Bytes of device workspace al_adaln_backward needs for this desc and options on the current
 * device (depends on rows, B, D, dtype, options and the device's multiprocessor count). */
AL_API int al_adaln_backward_workspace_size(const al_adaln_desc *desc, const al_adaln_options *opts,
                                            size_t *bytes);

/* Backward. dy, x, scale, and the forward's mean and rstd in; dx, dscale, dshift out
 * (dscale and dshift are overwritten, not accumulated into). workspace: device memory of at
 * least al_adaln_backward_workspace_size() bytes, 16-byte aligned, used only during the
 * enqueued work (one workspace per concurrently running backward). dx must not overlap dy
 * or x. */
AL_API int al_adaln_backward(const al_adaln_desc *desc, const al_adaln_options *opts,
                             const void *dy, const void *x, const void *scale, const float *mean,
                             const float *rstd, void *dx, void *dscale, void *dshift,
                             void *workspace, size_t workspace_bytes, void *stream);

/* Bytes per element of a dtype; 0 for an unknown one. */
AL_API size_t al_dtype_size(int dtype);

/* Ids of al_adaln_struct_size. */
typedef enum al_adaln_struct {
  AL_ADALN_STRUCT_DESC = 0,    /* al_adaln_desc */
  AL_ADALN_STRUCT_OPTIONS = 1, /* al_adaln_options */
  AL_ADALN_STRUCT_TUNING = 2   /* struct al_adaln_tuning (al_adaln_tuning.h) */
} al_adaln_struct;

/* sizeof of the struct `which` (an al_adaln_struct) names; 0 otherwise. Lets bindings (Python
 * ctypes) check their struct layouts against the library's. */
AL_API size_t al_adaln_struct_size(int which);

/* The value of the integer constant `name` of this header ("AL_ADALN_MAX_DIM" -> 16384, the
 * dtypes, the flags, the struct ids): AL_OK with *value set; AL_ENOTFOUND (message naming it)
 * for a name this header does not define; AL_EINVAL for NULL. As al_status_constant
 * (common/al_status.h): bindings read constants here instead of copying them. Thread-safe. */
AL_API int al_adaln_constant(const char *name, int64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* AL_ADALN_H */
