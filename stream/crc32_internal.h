/*
 * crc32_internal.h - CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the checksum
 * zlib.crc32 and gzip compute: stream_crc32(0, "123456789", 9) == 0xcbf43926. Slice-by-8
 * tables, built once (thread-safe). Used by `adaptiveload stream --jsonl` so any consumer
 * can check the bytes it received. Internal to //stream and its users (cli/).
 */
#ifndef AL_CRC32_INTERNAL_H
#define AL_CRC32_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Continues `crc` (0 to start) over n bytes: stream_crc32(stream_crc32(0, a, k), a + k, n - k)
 * equals stream_crc32(0, a, n), as zlib.crc32(b, crc). */
uint32_t stream_crc32(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* AL_CRC32_INTERNAL_H */
