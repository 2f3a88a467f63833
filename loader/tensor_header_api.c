/* al_tensor_header_parse (al_members.h): the typed-member header parser of the index and the
 * stream (tensor_header.c), offered to bindings so that none parses .npy or safetensors
 * headers itself. */
#include <stdio.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "loader/al_members.h"
#include "loader/tensor_header_internal.h"

_Static_assert(THEADER_MAX_DIMS == sizeof(((al_tensor_header *)0)->shape) / sizeof(uint64_t),
               "al_tensor_header.shape holds every dimension the parser takes");

int al_member_is_typed(const char *ext) { return theader_kind_of(ext) != THEADER_KIND_NONE; }

int al_tensor_header_parse(const char *ext, const void *buf, size_t have, uint64_t member_size,
                           al_tensor_header *out, size_t *need) {
  static const char fn[] = "al_tensor_header_parse";
  size_t n = 0;
  if (!out || !need) return al_set_error(AL_EINVAL, "%s: NULL out or need", fn);
  int rc = struct_out_size(out, sizeof *out, AL_TENSOR_HEADER_V1, fn, "al_tensor_header", &n);
  if (rc) return rc;
  theader_kind kind = theader_kind_of(ext);
  if (kind == THEADER_KIND_NONE)
    return al_set_error(AL_EINVAL, "%s: '%s' is not a typed member (.npy or .safetensors)", fn,
                        ext ? ext : "(null)");
  theader h;
  rc = theader_parse(kind, buf, have, member_size, NULL, &h, need);
  if (rc) return rc;
  al_tensor_header local;
  memset(&local, 0, sizeof local);
  snprintf(local.dtype, sizeof local.dtype, "%s", theader_dtype_name(h.dtype));
  local.ndim = h.ndim;
  memcpy(local.shape, h.shape, sizeof local.shape);
  local.data_offset = h.data_offset;
  local.data_bytes = h.data_bytes;
  struct_out(out, &local, n);
  return AL_OK;
}
