/* run_map_internal.h - the index map's file layout (al_run.h) and its class table, shared by
 * run_map_write.c (the table, the header and the writers) and run_map.c (building a map in
 * memory, opening one). Planner-private.
 *
 * The file: a 4 KiB header, then one 48-byte record per class (width, height, frames, latent
 * grid t, h, w, flags, the class's first entry in the lists, its count), then, from the next
 * 4 KiB boundary, the lists: every input position as a u32, grouped by class (classes sorted by
 * their fields, positions ascending inside one). Native byte order, marked by a byte-order word
 * the reader checks. */
#ifndef AL_RUN_MAP_INTERNAL_H
#define AL_RUN_MAP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define MAP_MAGIC "ALRUNMAP"
#define MAP_VERSION 1u
#define MAP_BOM 0x01020304u
#define MAP_HEADER 4096u

typedef struct map_header {
  char magic[8];
  uint32_t version, bom;
  uint64_t n_samples, n_classes, index_fingerprint;
  uint64_t class_off, list_off;
} map_header;

/* flags: MAP_LACKS_MEMBER, the samples lacking a required member (planned by none). */
#define MAP_LACKS_MEMBER 1u
typedef struct map_class {
  uint32_t width, height, frames, grid_t, grid_h, grid_w, flags, pad;
  uint64_t first, count;
} map_class;

/* The distinct classes seen, in order of first sight, with their counts: an open-addressing
 * table that grows with them (corpora hold few). */
typedef struct map_table {
  map_class *cls;
  uint32_t *slot; /* 2 x cap: class + 1, 0 = empty */
  size_t n, cap;
} map_table;

/* Zeroes t; AL_OK. map_table_free releases it (a zeroed table is a no-op). */
void map_table_init(map_table *t);
void map_table_free(map_table *t);

/* The class c (its first and count ignored) in the table, added with count 0 when new:
 * *id its number. AL_ENOMEM, or AL_ERANGE past 2^32 - 2 classes. */
int map_table_find(map_table *t, const map_class *c, uint32_t *id);

/* Sorts the table's classes by their fields and sets each one's first entry in the lists;
 * renum[old id] = the sorted id (renum: t->n entries, the caller's). The table's lookups then
 * give sorted ids. AL_OK or AL_ENOMEM. */
int map_table_sort(map_table *t, uint32_t *renum);

/* The header of a map of n samples in the table's (sorted) classes. */
void map_header_fill(map_header *h, uint64_t n_samples, uint64_t n_classes, uint64_t fingerprint);

#endif /* AL_RUN_MAP_INTERNAL_H */
