/* bucket_table_internal.h - layout of al_bucket_table (planner-private). */
#ifndef AL_BUCKET_TABLE_INTERNAL_H
#define AL_BUCKET_TABLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct bucket_table_size {
  uint32_t w, h;
} bucket_table_size;

typedef struct bucket_table_aspect {
  char name[16];
  uint32_t rw, rh; /* nominal ratio rw:rh */
  size_t first;    /* first size in al_bucket_table.sizes */
  size_t n_sizes;  /* sorted by area, ascending */
} bucket_table_aspect;

struct al_bucket_table {
  bucket_table_aspect *aspects;
  size_t n_aspects;
  bucket_table_size *sizes; /* grouped by aspect */
  size_t n_sizes;
  uint32_t *frames; /* ascending, unique */
  size_t n_frames;
};

#endif /* AL_BUCKET_TABLE_INTERNAL_H */
