/*
 * tar_write_internal.h - a small, fast, deterministic tar writer (POSIX ustar, with
 * pax 'x' records for names longer than 100 bytes).
 *
 * Used by the synthetic corpus writer and by tests that hand-build shards.
 * Every header carries the same mode (0644), uid/gid (0), empty user/group
 * names and the caller's mtime, so the same calls give byte-identical files.
 * Output is buffered (1 MiB) and written with write(2).
 *
 * Usage: tarw_open; per member either tarw_add (whole data in memory) or
 * tarw_begin + tarw_data... + tarw_end (streamed, exact size declared
 * up front); tarw_close writes the two zero end blocks. tarw_abort
 * discards. Not thread-safe per handle; handles are independent.
 */
#ifndef AL_TAR_WRITE_INTERNAL_H
#define AL_TAR_WRITE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tarw tarw;

int tarw_open(tarw **out, const char *path, int64_t mtime);
int tarw_add(tarw *w, const char *name, const void *data, uint64_t size);
int tarw_begin(tarw *w, const char *name, uint64_t size);
int tarw_data(tarw *w, const void *data, size_t n);
int tarw_end(tarw *w);
/* Raw bytes (tests: build broken archives). */
int tarw_raw(tarw *w, const void *data, size_t n);
/* Bytes written so far (including buffered ones). */
uint64_t tarw_offset(const tarw *w);
/* Writes the end-of-archive blocks unless `no_trailer`, closes, frees. */
int tarw_close(tarw *w);
int tarw_close_ex(tarw *w, int no_trailer);
void tarw_abort(tarw *w);

/* Fills a 512-byte ustar header for a regular file (name <= 100 bytes). */
void tarw_header(unsigned char hdr[512], const char *name, uint64_t size, int64_t mtime, char type);

#ifdef __cplusplus
}
#endif

#endif /* AL_TAR_WRITE_INTERNAL_H */
