/* bucket_table_internal.h - layout of al_bucket_table (planner-private). */
#ifndef AL_BUCKET_TABLE_INTERNAL_H
#define AL_BUCKET_TABLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct al_bt_size {
  uint32_t w, h;
} al_bt_size;

typedef struct al_bt_aspect {
  char name[16];
  uint32_t rw, rh;     /* nominal ratio rw:rh */
  size_t first;        /* first size in al_bucket_table.sizes */
  size_t n_sizes;      /* sorted by area, ascending */
} al_bt_aspect;

struct al_bucket_table {
  al_bt_aspect *aspects;
  size_t n_aspects;
  al_bt_size *sizes;   /* grouped by aspect */
  size_t n_sizes;
  uint32_t *frames;    /* ascending, unique */
  size_t n_frames;
};

#endif /* AL_BUCKET_TABLE_INTERNAL_H */
