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

#endif /* AL_API_H */
