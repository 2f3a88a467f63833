/*
 * storage/s3_xml.c - the little XML that S3 answers need: the text of an element by name and
 * entity decoding. S3's listing and error documents are flat (no attributes on the elements
 * read, no CDATA), so a search for "<Tag>" ... "</Tag>" finds exactly the element.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/http_internal.h"

static const char *find(const char *s, const char *end, const char *needle) {
  size_t n = strlen(needle);
  if ((size_t)(end - s) < n) return NULL;
  return memmem(s, (size_t)(end - s), needle, n);
}

/* UTF-8 of code point cp at p; the bytes written, 0 when cp is not a character. */
static size_t put_utf8(char *p, unsigned long cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  if (cp < 0x80) return p[0] = (char)cp, 1;
  if (cp < 0x800) {
    p[0] = (char)(0xC0 | (cp >> 6));
    p[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    p[0] = (char)(0xE0 | (cp >> 12));
    p[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    p[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  p[0] = (char)(0xF0 | (cp >> 18));
  p[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  p[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  p[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* The entity [e, e + n) (between '&' and ';') written at p; the bytes written, 0 if bad. */
static size_t put_entity(char *p, const char *e, size_t n) {
  static const struct {
    const char *name;
    char c;
  } named[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
  for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
    if (strlen(named[i].name) == n && memcmp(e, named[i].name, n) == 0) return p[0] = named[i].c, 1;
  }
  if (n < 2 || e[0] != '#') return 0;
  int hex = e[1] == 'x' || e[1] == 'X';
  size_t i = hex ? 2 : 1;
  if (i >= n || n - i > 8) return 0;
  unsigned long cp = 0;
  for (; i < n; i++) {
    char ch = e[i];
    int d = (ch >= '0' && ch <= '9')          ? ch - '0'
            : (hex && ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
            : (hex && ch >= 'A' && ch <= 'F') ? ch - 'A' + 10
                                              : -1;
    if (d < 0) return 0;
    cp = cp * (hex ? 16 : 10) + (unsigned long)d;
  }
  return put_utf8(p, cp);
}

char *storage_xml_decode(const char *s, size_t n) {
  char *out = malloc(n + 1); /* an entity's UTF-8 is never longer than the entity */
  if (out == NULL) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] != '&') {
      out[o++] = s[i++];
      continue;
    }
    const char *semi = memchr(s + i + 1, ';', n - i - 1);
    size_t w = semi ? put_entity(out + o, s + i + 1, (size_t)(semi - (s + i + 1))) : 0;
    if (w == 0) {
      free(out);
      return NULL;
    }
    o += w;
    i = (size_t)(semi - s) + 1;
  }
  out[o] = '\0';
  return out;
}

int storage_xml_span(const char *s, const char *end, const char *tag, const char **a,
                     const char **b) {
  char open[64], close[64];
  if (snprintf(open, sizeof open, "<%s>", tag) >= (int)sizeof open) return -1;
  snprintf(close, sizeof close, "</%s>", tag);
  const char *p = find(s, end, open);
  if (p == NULL) return -1;
  p += strlen(open);
  const char *q = find(p, end, close);
  if (q == NULL) return -1;
  *a = p;
  *b = q;
  return 0;
}

char *storage_xml_text(const char *s, const char *end, const char *tag, const char **next) {
  const char *a, *b;
  if (storage_xml_span(s, end, tag, &a, &b) != 0) return NULL;
  if (next) *next = b + strlen(tag) + 3;
  return storage_xml_decode(a, (size_t)(b - a));
}
