/*
 * al_version.h - the version of AdaptiveLoad: the one place it is written.
 *
 * The CLI prints it (`adaptiveload --version`), the Python package reports it
 * (`adaptiveload.__version__`, read from the loaded library) and the wheel is named
 * after it (//dist:wheel reads AL_VERSION_STRING from this file).
 *
 * Thread safety: al_version() returns a static string; safe from any thread.
 */
#ifndef AL_VERSION_H
#define AL_VERSION_H

#include "common/al_api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AL_VERSION_STRING "0.1.0"

/* AL_VERSION_STRING of the library actually loaded ("MAJOR.MINOR.PATCH"); never NULL. */
AL_API const char *al_version(void);

#ifdef __cplusplus
}
#endif

#endif /* AL_VERSION_H */
