/* libFuzzer harness: the KEY.json metadata reader (loader/meta.c, meta_parse) on
 * the input bytes, with the default field names and with renamed fields. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loader/meta_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const meta_fields defaults = {"width", "height", "frames", "fps", "duration"};
  static const meta_fields renamed = {"w", "h", "num_frames", "frame_rate", "len"};
  meta_record rec;
  al_clear_error();
  if (meta_parse((const char *)data, size, &defaults, &rec) == AL_OK) {
    /* What the scan checks after a successful parse must hold. */
    if (rec.width < 1 || rec.width > AL_META_MAX_SIDE) abort();
    if (rec.height < 1 || rec.height > AL_META_MAX_SIDE) abort();
    if (rec.frames < 1 || rec.frames > AL_META_MAX_FRAMES) abort();
    if (!(rec.fps >= 0 && rec.fps <= AL_META_MAX_FPS)) abort();
    if (meta_tokens(rec.width, rec.height, rec.frames) > UINT32_MAX) abort();
    if (memchr(data, '\0', size)) abort(); /* a raw NUL is never JSON (RFC 8259) */
  } else if (al_last_error()[0] == '\0') {
    abort(); /* a failure must say why */
  }
  (void)meta_parse((const char *)data, size, &renamed, &rec);
  return 0;
}
