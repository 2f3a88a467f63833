/* CUDA runtime calls of the stream, linked from cudart_static. */
#include "common/env_internal.h"
#include "stream/cuda_rt_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cuda_runtime_api.h>

#include "common/al_status.h"
#include "stream/al_stream.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probed_devices;

static void probe(void) {
  int n = 0;
  /* AL_NO_CUDA=1 forces the host-only path (tests of it on GPU machines). */
  const char *off = env_text("AL_NO_CUDA");
  if (off && *off && strcmp(off, "0") != 0) return;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the sticky "no driver" error */
    n = 0;
  }
  probed_devices = n > 0 ? n : 0;
}

int stream_cuda_devices(void) {
  pthread_once(&probe_once, probe);
  return probed_devices;
}

int al_stream_cuda_available(void) { return stream_cuda_devices() > 0; }

/* AL_OK, or AL_ECUDA naming the call (`what`) and CUDA's error. */
static int cuda_check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return AL_OK;
  return al_set_error(AL_ECUDA, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

void *stream_host_alloc(size_t bytes, int pinned) {
  void *p = NULL;
  if (bytes == 0) bytes = 1;
  if (pinned) {
    if (cuda_check(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), "cudaHostAlloc") != AL_OK) {
      al_error_prefix(AL_ENOMEM, "pinned buffer of %zu bytes", bytes);
      return NULL;
    }
    return p;
  }
  /* Page alignment keeps O_DIRECT-style reads and later pinning possible. Buffers of 2 MiB
   * and more are 2 MiB-aligned and asked for transparent huge pages: first touches of a
   * fresh pool buffer then fault 512 times less often (page faults are expensive in VMs). */
  size_t huge = (size_t)2 << 20;
  size_t a = bytes >= huge ? huge : 4096;
  size_t rounded = (bytes + a - 1) & ~(a - 1);
  p = aligned_alloc(a, rounded);
  if (!p) {
    al_set_error(AL_ENOMEM, "buffer of %zu bytes: %s", bytes, strerror(errno));
    return NULL;
  }
#ifdef MADV_HUGEPAGE
  if (a == huge) (void)madvise(p, rounded, MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
  return p;
}

void stream_host_free(void *p, int pinned) {
  if (!p) return;
  if (pinned)
    cudaFreeHost(p);
  else
    free(p);
}

int stream_cuda_set_device(int device) {
  return cuda_check(cudaSetDevice(device), "cudaSetDevice");
}

int stream_cuda_malloc(void **p, size_t bytes) {
  int rc = cuda_check(cudaMalloc(p, bytes ? bytes : 1), "cudaMalloc");
  if (rc != AL_OK) *p = NULL;
  return rc;
}

void stream_cuda_free(void *p) {
  if (p) cudaFree(p);
}

int stream_cuda_stream_create(void **stream) {
  cudaStream_t s = NULL;
  int rc = cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  if (rc == AL_OK) *stream = s;
  return rc;
}

void stream_cuda_stream_destroy(void *stream) {
  if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

int stream_cuda_event_create(void **event) {
  cudaEvent_t ev = NULL;
  int rc = cuda_check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreate");
  if (rc == AL_OK) *event = ev;
  return rc;
}

void stream_cuda_event_destroy(void *event) {
  if (event) cudaEventDestroy((cudaEvent_t)event);
}

int stream_cuda_event_record(void *event, void *stream) {
  return cuda_check(cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream), "cudaEventRecord");
}

int stream_cuda_stream_wait_event(void *stream, void *event) {
  return cuda_check(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0),
                    "cudaStreamWaitEvent");
}

int stream_cuda_event_sync(void *event) {
  return cuda_check(cudaEventSynchronize((cudaEvent_t)event), "cudaEventSynchronize");
}

int stream_cuda_memcpy_h2d_async(void *dst, const void *src, size_t bytes, void *stream) {
  return cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)stream),
                    "cudaMemcpyAsync");
}
