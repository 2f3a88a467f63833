/*
 * url_internal.h - the scheme and the user:password@ part of URL text, one rule for every
 * module that takes URLs or prints them (the loader's shard paths, the remote layer's
 * messages, the CLI's --root). Internal to the modules, not exported.
 *
 * A URL here is "SCHEME://AUTHORITY/REST": SCHEME a letter then letters, digits, '+', '-' or
 * '.' (RFC 3986, compared without regard to case), AUTHORITY what runs up to the first '/',
 * '?' or '#'. Its userinfo is everything of AUTHORITY up to and including its last '@' (a
 * password may hold an unencoded '@'; the host cannot). Thread-safe (no state).
 */
#ifndef AL_URL_INTERNAL_H
#define AL_URL_INTERNAL_H

#include <stddef.h>

/* The length of s's "SCHEME://", 0 when s does not start with one. */
size_t url_scheme_len(const char *s);

/* Whether s starts with "scheme://" (scheme given in lower case; s in any case). */
int url_has_scheme(const char *s, const char *scheme);

/* The length of s's userinfo, the '@' included, and where it starts in *at (may be NULL); 0
 * when s is not a URL or has none. */
size_t url_userinfo(const char *s, size_t *at);

/* s with the userinfo of every URL in it shown as "***@" (s itself when there is none; a URL
 * may start anywhere in s, as in "DIR=http://user:pw@host/"), malloc'd; NULL when out of
 * memory. What every message that names a URL prints. */
char *url_redact(const char *s);

#endif /* AL_URL_INTERNAL_H */
