/*
 * cuda_rt_internal.h - the few CUDA runtime calls the stream makes, optional at run
 * time: without a driver or device, stream_cuda_devices() is 0 and the stream
 * uses plain host memory. Internal to //stream.
 */
#ifndef AL_CUDA_RT_INTERNAL_H
#define AL_CUDA_RT_INTERNAL_H

#include <stddef.h>

/* Devices usable by this process; probed once (cudaGetDeviceCount). */
int stream_cuda_devices(void);

/* Host memory for a pool buffer: pinned (cudaHostAlloc, portable) when
 * `pinned`, else 4 KiB-aligned malloc. NULL on failure (al_last_error set). */
void *stream_host_alloc(size_t bytes, int pinned);
void stream_host_free(void *p, int pinned);

/* Thin checked wrappers: return AL_OK or AL_ECUDA with the CUDA error text
 * and `what` in al_last_error(). Handles are void* so callers need no CUDA
 * headers. */
int stream_cuda_set_device(int device);
int stream_cuda_malloc(void **p, size_t bytes);
void stream_cuda_free(void *p);
int stream_cuda_stream_create(void **stream);
void stream_cuda_stream_destroy(void *stream);
int stream_cuda_event_create(void **event);
void stream_cuda_event_destroy(void *event);
int stream_cuda_event_record(void *event, void *stream);
int stream_cuda_stream_wait_event(void *stream, void *event);
int stream_cuda_event_sync(void *event);
int stream_cuda_memcpy_h2d_async(void *dst, const void *src, size_t bytes, void *stream);

#endif /* AL_CUDA_RT_INTERNAL_H */
