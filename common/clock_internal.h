/*
 * clock_internal.h - the one clock the modules and the CLI time work with. Internal, not
 * exported. Thread-safe.
 */
#ifndef AL_CLOCK_INTERNAL_H
#define AL_CLOCK_INTERNAL_H

/* Seconds on CLOCK_MONOTONIC: differences are elapsed time, unaffected by changes to the
 * wall clock; the origin is arbitrary. */
double clock_now_s(void);

#endif /* AL_CLOCK_INTERNAL_H */
