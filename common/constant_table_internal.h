/*
 * constant_table_internal.h - the tables behind the public constant queries (al_status_constant,
 * al_adaln_constant, al_index_constant, al_plan_constant, al_stream_constant): one entry per
 * integer constant of a module's public headers, looked up by its name (not a public header,
 * not exported).
 *
 * An entry is written CONSTANT(AL_X): its name is the macro's or enumerator's own spelling and
 * its value the compiler's, so an entry cannot disagree with its header; //tests/dist:
 * constants_test checks that every integer constant of the public headers has one. Bindings
 * (Python's ctypes) read the values through the queries instead of copying them.
 *
 * Thread safety: the tables are constant; lookups may run concurrently.
 */
#ifndef AL_CONSTANT_TABLE_INTERNAL_H
#define AL_CONSTANT_TABLE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct constant_entry {
  const char *name;
  int64_t value;
} constant_entry;

#define CONSTANT(x) \
  { #x, (int64_t)(x) }

/* *value = the value of `name` in table t (n entries): AL_OK; AL_ENOTFOUND when the table has
 * no such name ("QUERY: no constant 'AL_X' here (HEADERS)": `query` is the public function,
 * `headers` the headers its table covers); AL_EINVAL for a NULL name or value. */
int constant_lookup(const constant_entry *t, size_t n, const char *name, int64_t *value,
                    const char *query, const char *headers);

#ifdef __cplusplus
}
#endif

#endif /* AL_CONSTANT_TABLE_INTERNAL_H */
