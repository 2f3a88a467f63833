/*
 * struct_abi_internal.h - the size rule of the public structs, in one place (not a public
 * header, not exported). docs/DESIGN.md, "The ABI of the public structs".
 *
 * Every sized public struct starts with `size_t struct_size`, the caller's sizeof of it. Structs
 * only grow at their end, so a caller built against an older header passes a smaller struct_size;
 * the library then reads and writes only the bytes that fit in it:
 *   - a struct the library reads (options, inputs): struct_in copies the caller's bytes into
 *     a zeroed struct of the library's layout, so fields the caller does not know read as 0
 *     (their default). Size 0 means "the current struct" (keeps `x_options o = {0};` working).
 *   - a struct the library fills: struct_out_size checks the caller's size, the library fills
 *     a struct of its own layout, and struct_out copies back the bytes that fit. Size 0 is
 *     refused (the caller did not set it: AL_X_INIT).
 * A size below the struct's first sized version (`min`) or above the library's is AL_EINVAL,
 * e.g. "al_index_shard: al_shard_info.size is 24 bytes: below the first version's 64 (this
 * library's al_shard_info is 88 bytes)".
 *
 * Thread safety: none needed (no state).
 */
#ifndef AL_STRUCT_ABI_INTERNAL_H
#define AL_STRUCT_ABI_INTERNAL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Copies the caller's struct `in` (NULL: all defaults) into `local` (`full` bytes, the
 * library's layout) as above, and sets local's struct_size to `full`. AL_OK or AL_EINVAL naming
 * `where` (the public function) and `name` (the struct). */
int struct_in(void *local, size_t full, size_t min, const void *in, const char *where,
              const char *name);

/* Checks the size of the caller's struct `out` (non-NULL) that the library is to fill; *n gets
 * the bytes to write. AL_OK or AL_EINVAL as above (size 0 refused). */
int struct_out_size(const void *out, size_t full, size_t min, const char *where, const char *name,
                    size_t *n);

/* Copies the first n bytes (from struct_out_size) of `local` into `out`, struct_size set to n. */
void struct_out(void *out, const void *local, size_t n);

/* struct_out_size then struct_out, for a struct already filled in `local`. */
int struct_out_copy(void *out, const void *local, size_t full, size_t min, const char *where,
                    const char *name);

#ifdef __cplusplus
}
#endif

#endif /* AL_STRUCT_ABI_INTERNAL_H */
