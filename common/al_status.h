/*
 * al_status.h - status codes and the thread-local error message shared by every
 * AdaptiveLoad module (loader, planner, kernels, proto container, stream).
 *
 * Convention: every fallible public function returns an int status. AL_OK (0) is
 * success, AL_EOF (1) ends an iteration, negative values are errors. On error the
 * function has recorded a human-readable message, readable with al_last_error()
 * from the same thread until the next failing call on that thread. Messages name
 * the file, member and byte offset where that applies, e.g.
 *   "shard-000012.tar: member 7 'abc.json' at byte 5120: frames must be >= 1".
 *
 * Thread safety: the message buffer is thread-local; all functions here are safe
 * to call from any thread.
 */
#ifndef AL_STATUS_H
#define AL_STATUS_H

#include <stdarg.h>
#include <stdint.h>

#include "common/al_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum al_status {
  AL_OK = 0,
  AL_EOF = 1,           /* iteration finished; not an error */
  AL_EINVAL = -1,       /* bad argument from the caller */
  AL_EIO = -2,          /* open/read/write/rename failed (errno text in message) */
  AL_EFORMAT = -3,      /* malformed input: corrupt archive, broken JSON, bad checksum */
  AL_EVERSION = -4,     /* file written by an unsupported format version */
  AL_ENOMEM = -5,       /* allocation failed */
  AL_ERANGE = -6,       /* a value outside what is supported (absurd sizes) */
  AL_ECUDA = -7,        /* a CUDA runtime call failed */
  AL_EUNSUPPORTED = -8, /* a valid request this build cannot serve */
  AL_ESTATE = -9,       /* call not valid in the object's current state */
  AL_ENOTFOUND = -10    /* a named thing (file, member, key) does not exist */
} al_status;

/* Short constant name of a status ("AL_EFORMAT"); never NULL. */
AL_API const char *al_status_name(int status);

/* Message of the last error recorded on this thread; "" when none. Never NULL.
 * The pointer stays valid until the next al_set_error on this thread. */
AL_API const char *al_last_error(void);

/* Records a printf-style message for this thread and returns `status`, so that
 * error paths read `return al_set_error(AL_EIO, "%s: %s", path, strerror(errno));`.
 * Messages longer than 1023 bytes are truncated. */
AL_API int al_set_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
AL_API int al_set_errorv(int status, const char *fmt, va_list ap);

/* Prefixes the current message with "<prefix>: " (adds context on the way up). */
AL_API int al_error_prefix(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

AL_API void al_clear_error(void);

/* The value of the constant `name` of this header ("AL_EINVAL" -> -1): AL_OK with *value set;
 * AL_ENOTFOUND (message naming it) for a name this header does not define; AL_EINVAL for NULL.
 * Each module answers for its public headers the same way (al_adaln_constant,
 * al_index_constant, al_plan_constant, al_stream_constant), so that bindings (Python's ctypes)
 * read constants from the library instead of copying them. Thread-safe. */
AL_API int al_status_constant(const char *name, int64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* AL_STATUS_H */
