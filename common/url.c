/* URL text: scheme and userinfo; see url_internal.h. */
#include "common/url_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int scheme_char(char c, int first) {
  int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return alpha || (!first && ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.'));
}

size_t url_scheme_len(const char *s) {
  if (s == NULL) return 0;
  size_t n = 0;
  while (scheme_char(s[n], n == 0)) n++;
  return n > 0 && strncmp(s + n, "://", 3) == 0 ? n + 3 : 0;
}

int url_has_scheme(const char *s, const char *scheme) {
  size_t n = url_scheme_len(s), k = strlen(scheme);
  return n == k + 3 && strncasecmp(s, scheme, k) == 0;
}

size_t url_userinfo(const char *s, size_t *at) {
  size_t start = url_scheme_len(s);
  if (start == 0) return 0;
  size_t auth = strcspn(s + start, "/?#");
  const char *last = NULL;
  for (const char *p = s + start; p < s + start + auth; p++)
    if (*p == '@') last = p;
  if (last == NULL) return 0;
  if (at) *at = start;
  return (size_t)(last - (s + start)) + 1;
}

/* Where the next URL with a userinfo starts in s (its authority at *auth, the userinfo *n
 * bytes long), or NULL. */
static const char *next_userinfo(const char *s, const char **auth, size_t *n) {
  for (const char *p = strstr(s, "://"); p != NULL; p = strstr(p + 3, "://")) {
    const char *b = p;
    while (b > s && scheme_char(b[-1], 0)) b--;
    while (b < p && !scheme_char(*b, 1)) b++;
    if (b == p) continue;
    size_t len = url_userinfo(b, NULL);
    if (len == 0) continue;
    *auth = p + 3;
    *n = len;
    return b;
  }
  return NULL;
}

char *url_redact(const char *s) {
  char *out = malloc(4 * strlen(s) + 1); /* "@" may become "***@" */
  if (out == NULL) return NULL;
  char *o = out;
  const char *auth;
  size_t n;
  while (next_userinfo(s, &auth, &n) != NULL) {
    memcpy(o, s, (size_t)(auth - s));
    o += auth - s;
    memcpy(o, "***@", 4);
    o += 4;
    s = auth + n;
  }
  strcpy(o, s);
  return out;
}
