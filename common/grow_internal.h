/*
 * grow_internal.h - growable arrays with checked size arithmetic, shared by
 * every module (not a public header, not exported).
 *
 * Growth policy: a full array grows by half again (at least 16 elements),
 * or straight to what is needed when that is more. Appending n elements one at a
 * time then costs O(n) copies, a grown array wastes at most a third of its
 * bytes, and a caller that reserves a known size up front gets exactly that.
 *
 * Sizes are checked: count * element size and the growth step must fit in
 * size_t. Errors follow common/al_status.h: AL_ENOMEM (the allocation failed
 * or the size does not fit) with a message naming `what` was growing, e.g.
 * "out of memory growing plan micro-batches to 1048576 entries (41943040 bytes)".
 *
 * Thread safety: none needed (no state); the arrays are the caller's.
 */
#ifndef AL_GROW_INTERNAL_H
#define AL_GROW_INTERNAL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The capacity an array of `cap` elements of `elem` bytes grows to so that it
 * holds `need` (policy above), in *out; `cap` itself when it already does.
 * Fails with AL_ENOMEM when need * elem does not fit in size_t. */
int grow_capacity(size_t cap, size_t need, size_t elem, const char *what, size_t *out);

/* Resizes *arr (realloc; *arr may be NULL) to exactly `count` elements of
 * `elem` bytes. On failure *arr is untouched. For parallel arrays that share
 * one capacity from grow_capacity. */
int grow_resize(void **arr, size_t count, size_t elem, const char *what);

/* Makes *arr (with *cap elements of `elem` bytes) hold at least `need`:
 * grow_capacity, then grow_resize. On failure *arr and *cap are untouched. */
int grow_array(void **arr, size_t *cap, size_t need, size_t elem, const char *what);

/* A fresh block for an array of `count` elements of `elem` bytes that is filled
 * once and released with free() (realloc works on it too): from GROW_BIG_BYTES
 * up, 2 MiB-aligned with transparent huge pages advised; plain malloc below.
 * On a virtual machine, first-touch page faults and TLB misses of 4 KiB pages
 * are most of the cost of one pass over a 10M-sample array. NULL
 * when the allocation fails or count * elem does not fit (no error is set:
 * callers name what they allocate). grow_array takes its first block of an
 * array (*arr NULL) from here. */
#define GROW_BIG_BYTES ((size_t)32 << 20)
void *grow_big_block(size_t count, size_t elem);

#ifdef __cplusplus
}
#endif

#endif /* AL_GROW_INTERNAL_H */
