/* Growable arrays with checked sizes; see grow_internal.h. */
#include "common/grow_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "common/al_status.h"

static int too_large(const char *what, size_t count, size_t elem) {
  return al_set_error(AL_ENOMEM, "%s: %zu entries of %zu bytes exceed the address space", what,
                      count, elem);
}

int grow_capacity(size_t cap, size_t need, size_t elem, const char *what, size_t *out) {
  if (elem == 0) elem = 1;
  size_t max = SIZE_MAX / elem;
  if (need > max) return too_large(what, need, elem);
  if (need <= cap) {
    *out = cap;
    return AL_OK;
  }
  size_t step = cap / 2 > 16 ? cap / 2 : 16;
  size_t c = cap > max - step ? max : cap + step;
  *out = c > need ? c : need;
  return AL_OK;
}

void *grow_big_block(size_t count, size_t elem) {
  const size_t huge = (size_t)2 << 20;
  if (elem && count > SIZE_MAX / elem) return NULL;
  size_t bytes = count * elem;
  if (bytes < GROW_BIG_BYTES) return malloc(bytes ? bytes : 1);
  void *p = NULL;
  if (posix_memalign(&p, huge, bytes) != 0) return NULL;
  (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice only: unchanged where THP is off */
  return p;
}

int grow_resize(void **arr, size_t count, size_t elem, const char *what) {
  if (elem && count > SIZE_MAX / elem) return too_large(what, count, elem);
  size_t bytes = count * elem;
  void *p = *arr ? realloc(*arr, bytes ? bytes : 1) : grow_big_block(count, elem);
  if (!p)
    return al_set_error(AL_ENOMEM, "out of memory growing %s to %zu entries (%zu bytes)", what,
                        count, bytes);
  *arr = p;
  return AL_OK;
}

int grow_array(void **arr, size_t *cap, size_t need, size_t elem, const char *what) {
  if (need <= *cap) return AL_OK;
  size_t c = 0; /* set by grow_capacity on success; gcc -O2 cannot tell */
  int rc = grow_capacity(*cap, need, elem, what, &c);
  if (rc == AL_OK) rc = grow_resize(arr, c, elem, what);
  if (rc == AL_OK) *cap = c;
  return rc;
}
