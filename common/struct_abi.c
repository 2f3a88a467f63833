/* The size rule of the public structs. See struct_abi_internal.h. */
#include "common/struct_abi_internal.h"

#include <string.h>

#include "common/al_status.h"

static int check(size_t n, size_t full, size_t min, const char *where, const char *name) {
  if (n < min)
    return al_set_error(AL_EINVAL,
                        "%s: %s.struct_size is %zu bytes: below the first version's %zu (this "
                        "library's %s is %zu bytes; set it with sizeof or the _INIT macro)",
                        where, name, n, min, name, full);
  if (n > full)
    return al_set_error(AL_EINVAL,
                        "%s: %s.struct_size is %zu bytes: above this library's %zu (a header newer "
                        "than the library?)",
                        where, name, n, full);
  return AL_OK;
}

int struct_in(void *local, size_t full, size_t min, const void *in, const char *where,
              const char *name) {
  memset(local, 0, full);
  size_t n = full;
  if (in) {
    memcpy(&n, in, sizeof n);
    if (n == 0) n = full;
    int rc = check(n, full, min, where, name);
    if (rc != AL_OK) return rc;
    memcpy(local, in, n);
  }
  memcpy(local, &full, sizeof full);
  return AL_OK;
}

int struct_out_size(const void *out, size_t full, size_t min, const char *where, const char *name,
                    size_t *n) {
  memcpy(n, out, sizeof *n);
  if (*n == 0)
    return al_set_error(AL_EINVAL,
                        "%s: %s.struct_size is 0: set it to sizeof(%s) (or initialise with the "
                        "_INIT macro); this library's is %zu bytes",
                        where, name, name, full);
  return check(*n, full, min, where, name);
}

void struct_out(void *out, const void *local, size_t n) {
  memcpy(out, local, n);
  memcpy(out, &n, sizeof n);
}

int struct_out_copy(void *out, const void *local, size_t full, size_t min, const char *where,
                    const char *name) {
  size_t n;
  int rc = struct_out_size(out, full, min, where, name, &n);
  if (rc == AL_OK) struct_out(out, local, n);
  return rc;
}
