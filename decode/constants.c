/* al_decode_constant: the integer constants of decode/al_decode.h by name
 * (common/constant_table_internal.h). */
#include "common/constant_table_internal.h"
#include "decode/al_decode.h"

static const constant_entry table[] = {
    CONSTANT(AL_MEDIA_NONE),
    CONSTANT(AL_MEDIA_VIDEO),
    CONSTANT(AL_MEDIA_IMAGE),
    CONSTANT(AL_DECODE_NAME_MAX),
};

int al_decode_constant(const char *name, int64_t *value) {
  return constant_lookup(table, sizeof table / sizeof table[0], name, value, "al_decode_constant",
                         "decode/al_decode.h");
}
