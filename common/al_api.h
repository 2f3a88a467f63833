/*
 * al_api.h - the one visibility macro of the public C API.
 *
 * Every module is compiled with -fvisibility=hidden (.bazelrc, tools/cuda.bzl),
 * so a function is visible outside libadaptiveload.so only when its declaration
 * in a public header (al_*.h, listed in dist/BUILD) carries AL_API. Internal
 * functions (module-prefixed: scan_, plan_, stream_, ...; declared in
 * *_internal.h) stay hidden even though they are not static. The test
 * //tests/dist:exports_test checks that `nm -D` of the library lists exactly
 * the functions the public headers declare.
 */
#ifndef AL_API_H
#define AL_API_H

#if defined(__GNUC__) || defined(__clang__)
#define AL_API __attribute__((visibility("default")))
#else
#define AL_API
#endif

/* Sized public structs (docs/DESIGN.md, "The ABI of the public structs"): a struct the
 * library fills or reads starts with `size_t struct_size`, the caller's sizeof of it, so that a
 * library newer than the caller's header reads and writes only what the caller's struct holds.
 * AL_STRUCT_INIT(T) is an initializer of T with size set and every other field zero:
 *   al_shard_info si = AL_STRUCT_INIT(al_shard_info);   (each header's AL_X_INIT names it)
 * Structs the library fills require the size; options the library reads take size 0 as the
 * current struct, so `al_index_options o = {0};` keeps working. */
#ifdef __cplusplus
#define AL_STRUCT_INIT(T)                    \
  ([]() {                                    \
    T al_struct_init_{};                     \
    al_struct_init_.struct_size = sizeof(T); \
    return al_struct_init_;                  \
  }())
#else
#define AL_STRUCT_INIT(T) \
  { .struct_size = sizeof(T) }
#endif

#endif /* AL_API_H */
