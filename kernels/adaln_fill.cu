/* adaln_fill.cu - pseudo-random device fills for tests and benchmarks; see adaln_fill_internal.h.
 */
#include "kernels/adaln_common.cuh"
#include "kernels/adaln_fill_internal.h"

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Grid-stride over elements; element i draws from hash(seed, i): layout-independent. */
template <typename T>
__global__ void fill_normal_kernel(T *dst, size_t n, uint64_t seed, float mean, float std) {
  typedef Elem<T> E;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const uint64_t h = mix64(seed * 0x9e3779b97f4a7c15ull + i);
    const float u1 = ((float)(uint32_t)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
    const float u2 = (float)(uint32_t)(h & 0xffffffu) * (1.0f / 16777216.0f);
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    reinterpret_cast<typename E::bits_t *>(dst)[i] = E::to_bits(mean + std * z);
  }
}

template <typename T>
static int fill_t(void *dst, size_t n, uint64_t seed, float mean, float std, void *stream) {
  if (n == 0) return AL_OK;
  size_t blocks = (n + 255) / 256;
  if (blocks > 65536) blocks = 65536;
  fill_normal_kernel<T>
      <<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>((T *)dst, n, seed, mean, std);
  ADALN_LAUNCHED("fill_normal_kernel");
  return AL_OK;
}

extern "C" int adaln_fill_normal(void *dst, int dtype, size_t n, uint64_t seed, float mean,
                                 float std, void *stream) {
  if (dst == NULL && n > 0) return al_set_error(AL_EINVAL, "adaln_fill_normal: dst is NULL");
  switch (dtype) {
    case AL_DTYPE_BF16: return fill_t<__nv_bfloat16>(dst, n, seed, mean, std, stream);
    case AL_DTYPE_FP16: return fill_t<__half>(dst, n, seed, mean, std, stream);
    case AL_DTYPE_FP32: return fill_t<float>(dst, n, seed, mean, std, stream);
    default: return al_set_error(AL_EINVAL, "adaln_fill_normal: dtype %d", dtype);
  }
}
