/* libFuzzer harness: the typed-member header parser (loader/tensor_header.c, theader_parse)
 * on the input bytes as a whole member, as .npy and as .safetensors (unnamed and with the
 * tensor name "a"), then once more fed the way a reader feeds it: starting from 0 bytes and
 * growing to what the parser asks for. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "loader/tensor_header_internal.h"

static void check(theader_kind kind, int rc, const theader *h, size_t have, size_t need,
                  uint64_t size) {
  if (rc == AL_OK) {
    if (h->dtype <= THEADER_NONE || h->dtype > THEADER_F64) abort();
    if (h->ndim > THEADER_MAX_DIMS) abort();
    for (uint32_t i = h->ndim; i < THEADER_MAX_DIMS; i++)
      if (h->shape[i] != 0) abort();
    if (h->data_offset > size || h->data_bytes > size - h->data_offset) abort();
    if (kind == THEADER_KIND_NPY && h->data_offset > have) abort(); /* the header was there */
    uint64_t n = theader_dtype_size(h->dtype);
    int zero = 0;
    for (uint32_t i = 0; i < h->ndim; i++) zero |= h->shape[i] == 0;
    for (uint32_t i = 0; i < h->ndim && !zero; i++) n *= h->shape[i]; /* no overflow: checked */
    if (h->data_bytes != (zero ? 0 : n)) abort();
  } else if (rc == AL_ERANGE) {
    if (need <= have || need > size || need > THEADER_MAX_HEADER_BYTES) abort();
  } else if (rc == AL_EFORMAT || rc == AL_ENOTFOUND) {
    if (al_last_error()[0] == '\0') abort(); /* a failure must say why */
    theader z;
    memset(&z, 0, sizeof z);
    if (memcmp(&z, h, sizeof z) != 0) abort();
  } else {
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const theader_kind kinds[2] = {THEADER_KIND_NPY, THEADER_KIND_SAFETENSORS};
  static const char *names[2] = {NULL, "a"};
  for (int k = 0; k < 2; k++) {
    for (int n = 0; n < 2; n++) {
      theader h;
      size_t need = 0;
      al_clear_error();
      int rc = theader_parse(kinds[k], data, size, size, names[n], &h, &need);
      check(kinds[k], rc, &h, size, need, size);
      if (rc == AL_ERANGE) abort(); /* the whole member is there */
      /* Fed as a reader feeds it. */
      size_t have = 0;
      for (int calls = 0;; calls++) {
        if (calls > 4) abort();
        al_clear_error();
        int rc2 = theader_parse(kinds[k], data, have, size, names[n], &h, &need);
        check(kinds[k], rc2, &h, have, need, size);
        if (rc2 != AL_ERANGE) {
          if (rc2 != rc) abort(); /* the same answer as with every byte */
          break;
        }
        have = need;
      }
    }
  }
  return 0;
}
