/* Status names, their constants and the thread-local error messages. See al_status.h. */
#include "common/al_status.h"

#include <stdio.h>
#include <string.h>

#include "common/constant_table_internal.h"

#define AL_ERRMSG_MAX 1024

static _Thread_local char tl_msg[AL_ERRMSG_MAX];

const char *al_status_name(int status) {
  switch (status) {
    case AL_OK: return "AL_OK";
    case AL_EOF: return "AL_EOF";
    case AL_EINVAL: return "AL_EINVAL";
    case AL_EIO: return "AL_EIO";
    case AL_EFORMAT: return "AL_EFORMAT";
    case AL_EVERSION: return "AL_EVERSION";
    case AL_ENOMEM: return "AL_ENOMEM";
    case AL_ERANGE: return "AL_ERANGE";
    case AL_ECUDA: return "AL_ECUDA";
    case AL_EUNSUPPORTED: return "AL_EUNSUPPORTED";
    case AL_ESTATE: return "AL_ESTATE";
    case AL_ENOTFOUND: return "AL_ENOTFOUND";
    default: return "AL_UNKNOWN";
  }
}

static const constant_entry status_constants[] = {
    CONSTANT(AL_OK),      CONSTANT(AL_EOF),          CONSTANT(AL_EINVAL), CONSTANT(AL_EIO),
    CONSTANT(AL_EFORMAT), CONSTANT(AL_EVERSION),     CONSTANT(AL_ENOMEM), CONSTANT(AL_ERANGE),
    CONSTANT(AL_ECUDA),   CONSTANT(AL_EUNSUPPORTED), CONSTANT(AL_ESTATE), CONSTANT(AL_ENOTFOUND),
};

int al_status_constant(const char *name, int64_t *value) {
  return constant_lookup(status_constants, sizeof status_constants / sizeof status_constants[0],
                         name, value, "al_status_constant", "common/al_status.h");
}

const char *al_last_error(void) { return tl_msg; }

void al_clear_error(void) { tl_msg[0] = '\0'; }

int al_set_errorv(int status, const char *fmt, va_list ap) {
  vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
  return status;
}

int al_set_error(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  al_set_errorv(status, fmt, ap);
  va_end(ap);
  return status;
}

int al_error_prefix(int status, const char *fmt, ...) {
  char prefix[AL_ERRMSG_MAX];
  char old[AL_ERRMSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, tl_msg, sizeof old);
  /* Compose by hand: snprintf("%s: %s") trips -Wformat-truncation. */
  size_t n = strlen(prefix);
  size_t m = strlen(old);
  if (n > AL_ERRMSG_MAX - 3) n = AL_ERRMSG_MAX - 3;
  memcpy(tl_msg, prefix, n);
  tl_msg[n++] = ':';
  tl_msg[n++] = ' ';
  if (m > AL_ERRMSG_MAX - 1 - n) m = AL_ERRMSG_MAX - 1 - n;
  memcpy(tl_msg + n, old, m);
  tl_msg[n + m] = '\0';
  return status;
}
