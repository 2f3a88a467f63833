/*
 * tar_write.h - a small, fast, deterministic tar writer (POSIX ustar, with
 * pax 'x' records for names longer than 100 bytes).
 *
 * Used by the synthetic corpus writer and by tests that hand-build shards.
 * Every header carries the same mode (0644), uid/gid (0), empty user/group
 * names and the caller's mtime, so the same calls give byte-identical files.
 * Output is buffered (1 MiB) and written with write(2).
 *
 * Usage: al_tarw_open; per member either al_tarw_add (whole data in memory) or
 * al_tarw_begin + al_tarw_data... + al_tarw_end (streamed, exact size declared
 * up front); al_tarw_close writes the two zero end blocks. al_tarw_abort
 * discards. Not thread-safe per handle; handles are independent.
 */
#ifndef AL_TAR_WRITE_H
#define AL_TAR_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct al_tarw al_tarw;

int al_tarw_open(al_tarw **out, const char *path, int64_t mtime);
int al_tarw_add(al_tarw *w, const char *name, const void *data, uint64_t size);
int al_tarw_begin(al_tarw *w, const char *name, uint64_t size);
int al_tarw_data(al_tarw *w, const void *data, size_t n);
int al_tarw_end(al_tarw *w);
/* Raw bytes (tests: build broken archives). */
int al_tarw_raw(al_tarw *w, const void *data, size_t n);
/* Bytes written so far (including buffered ones). */
uint64_t al_tarw_offset(const al_tarw *w);
/* Writes the end-of-archive blocks unless `no_trailer`, closes, frees. */
int al_tarw_close(al_tarw *w);
int al_tarw_close_ex(al_tarw *w, int no_trailer);
void al_tarw_abort(al_tarw *w);

/* Fills a 512-byte ustar header for a regular file (name <= 100 bytes). */
void al_tar_header(unsigned char hdr[512], const char *name, uint64_t size, int64_t mtime, char type);

#ifdef __cplusplus
}
#endif

#endif /* AL_TAR_WRITE_H */
