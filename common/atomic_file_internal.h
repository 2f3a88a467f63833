/*
 * atomic_file_internal.h - crash-safe file writes and non-blocking input opens,
 * shared by every module that writes or reads a file by path (prefix `afile_`).
 *
 * Writing: afile_create() makes a temporary file with a unique name in the
 * target's directory (".<name>.<pid>.<n>.<random>.tmp", O_CREAT|O_EXCL|
 * O_NOFOLLOW, mode 0666 & ~umask, or the mode of the file it will replace), so
 * two writers of one target never share a temporary and a symlink planted at a
 * temporary name is never followed. afile_commit() flushes, fsyncs the file,
 * renames it over the target and fsyncs the directory: after a crash the target
 * holds either its old content or the whole new one. A target that exists and
 * is not a regular file (device node, FIFO, directory, socket, or a symlink to
 * one) is refused before anything is written. On any error the temporary file
 * is removed.
 *
 * Reading: afile_open_input() opens with O_NONBLOCK, refuses anything but a
 * regular file (so a FIFO, device or directory given as an input fails at once
 * instead of blocking), then clears O_NONBLOCK.
 *
 * Errors: al_status codes; messages name the path. Thread safety: handles are
 * used by one thread at a time; distinct handles are independent.
 */
#ifndef AL_ATOMIC_FILE_INTERNAL_H
#define AL_ATOMIC_FILE_INTERNAL_H

#include <stdio.h>

#include "common/al_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct afile afile;

/* Creates the temporary file for `path`. *out owns it until afile_commit(),
 * afile_abort() or afile_finish(). `path` must not name an existing
 * non-regular file (AL_EINVAL) and its directory must be writable (AL_EIO). */
int afile_create(afile **out, const char *path);

/* The temporary file as a stdio stream (opened "wb") and its descriptor. */
FILE *afile_stream(afile *f);
/* The temporary file's name (for messages). */
const char *afile_tmp_path(const afile *f);

/* fflush + fsync, close, rename over the target, fsync the directory; frees
 * `f` whatever happens and removes the temporary file on error. */
int afile_commit(afile *f);

/* Closes and removes the temporary file, frees `f`. NULL is a no-op. */
void afile_abort(afile *f);

/* afile_commit(f) when rc is AL_OK, else afile_abort(f) and rc. */
int afile_finish(afile *f, int rc);

/* Writes `len` bytes to `path` through afile_create/afile_commit. */
int afile_write_all(const char *path, const void *buf, size_t len);

/* Opens `path` read-only (O_CLOEXEC); refuses non-regular files without blocking:
 * AL_ENOTFOUND when it does not exist, AL_EINVAL when it is not a regular file
 * ("PATH: not a regular file (a FIFO)"), AL_EIO otherwise. `what` ("shard",
 * "index", ...) goes into messages; may be NULL. */
int afile_open_input(const char *path, const char *what, int *fd);

/* The same as a stdio stream opened "rb". */
int afile_fopen_input(const char *path, const char *what, FILE **out);

/* "a FIFO", "a directory", ... for a st_mode (messages). */
const char *afile_kind_name(unsigned mode);

#ifdef __cplusplus
}
#endif

#endif /* AL_ATOMIC_FILE_INTERNAL_H */
