/*
 * storage/url_target.c - what a remote URL's requests are sent to: http(s):// as given (the scheme
 * in lower case), s3:// mapped to the client's endpoint (path-style) or to AWS's
 * virtual-hosted endpoint; the name messages give it (no user:password); the part of it
 * that names the object; the name it is stored under in an index.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/url_internal.h"
#include "storage/http_internal.h"
#include "storage/storage_internal.h"

size_t storage_url_identity_len(const char *url) {
  if (storage_url_kind(url) == STORAGE_HTTP) return strcspn(url, "?#");
  return strlen(url);
}

char *storage_url_canonical(const char *url) {
  int http = storage_url_kind(url) == STORAGE_HTTP;
  size_t scheme = url_scheme_len(url), at = 0, user = url_userinfo(url, &at);
  const char *h = url + scheme + user; /* the host (s3://: the bucket) */
  size_t hl = strcspn(h, "/?#"), rest = strlen(h + hl);
  char *s = malloc(scheme + hl + rest + 1);
  if (!s) return NULL;
  for (size_t i = 0; i < scheme; i++) s[i] = (char)tolower((unsigned char)url[i]);
  for (size_t i = 0; i < hl; i++) s[scheme + i] = http ? (char)tolower((unsigned char)h[i]) : h[i];
  memcpy(s + scheme + hl, h + hl, rest + 1);
  return s;
}

char *storage_pct_encode(const char *s, int keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  size_t n = strlen(s);
  char *out = malloc(3 * n + 1);
  if (out == NULL) return NULL;
  char *p = out;
  for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
    int c = *q;
    int keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/');
    if (keep) {
      *p++ = (char)c;
    } else {
      *p++ = '%';
      *p++ = hex[c >> 4];
      *p++ = hex[c & 15];
    }
  }
  *p = '\0';
  return out;
}

/* A bucket name that can be a host name label: virtual-hosted addressing on AWS. */
static int dns_bucket(const char *b) {
  for (const char *p = b; *p; p++) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) return 0;
  }
  return b[0] != '\0';
}

/* ENDPOINT with BUCKET. prefixed to its host: "http://h:9000/p" -> "http://BUCKET.h:9000/p/". */
static int virtual_endpoint(char **out, const char *endpoint, const char *bucket,
                            const char *query) {
  const char *host = strstr(endpoint, "://") + 3;
  return asprintf(out, "%.*s%s.%s/%s", (int)(host - endpoint), endpoint, bucket, host, query);
}

char *storage_s3_bucket_url(const storage_client *c, const char *bucket, const char *query) {
  char *out = NULL;
  int n;
  int virt = dns_bucket(bucket) && (c->endpoint ? c->cfg.s3_addressing == STORAGE_ADDRESSING_VIRTUAL
                                                : c->cfg.s3_addressing != STORAGE_ADDRESSING_PATH);
  if (c->endpoint != NULL && virt) {
    n = virtual_endpoint(&out, c->endpoint, bucket, query);
  } else if (c->endpoint != NULL) {
    n = asprintf(&out, "%s/%s%s", c->endpoint, bucket, query);
  } else if (virt) {
    n = asprintf(&out, "https://%s.s3.%s.amazonaws.com/%s", bucket, c->cfg.s3_region, query);
  } else {
    n = asprintf(&out, "https://s3.%s.amazonaws.com/%s%s", c->cfg.s3_region, bucket, query);
  }
  return n < 0 ? NULL : out;
}

/* t for s3://BUCKET/KEY; url has no user:password@ (storage_target_make refuses one). */
static int s3_target(const storage_client *c, const char *url, storage_target *t) {
  const char *b = url + 5;
  const char *slash = strchr(b, '/');
  if (slash == NULL || slash == b || slash[1] == '\0')
    return al_set_error(AL_EINVAL, "%s: an S3 object URL is s3://BUCKET/KEY", url);
  t->bucket = strndup(b, (size_t)(slash - b));
  t->key = strdup(slash + 1);
  char *enc = t->key ? storage_pct_encode(t->key, 1) : NULL;
  char *base = t->bucket ? storage_s3_bucket_url(c, t->bucket, "") : NULL;
  int ok = enc != NULL && base != NULL;
  if (ok) {
    /* base ends with the bucket (path-style) or with '/' (virtual-hosted). */
    size_t bl = strlen(base);
    ok = asprintf(&t->http, "%s%s%s", base, base[bl - 1] == '/' ? "" : "/", enc) >= 0;
    if (!ok) t->http = NULL;
  }
  free(enc);
  free(base);
  if (ok && asprintf(&t->name, "%s (%s)", url, t->http) < 0) t->name = NULL, ok = 0;
  t->s3 = 1;
  return ok ? AL_OK : al_set_error(AL_ENOMEM, "%s: out of memory", url);
}

/* url as requested: the scheme in lower case (libcurl's own choice of protocol handler is
 * case-insensitive too; the request is then what an all-lower-case URL would send). */
static char *http_url(const char *url) {
  char *s = strdup(url);
  if (s == NULL) return NULL;
  for (char *p = s; *p != ':'; p++) *p = (char)tolower((unsigned char)*p);
  return s;
}

/* The target of a URL whose messages name it as shown (its user:password@ as ***@). */
static int target_of(const storage_client *c, const char *url, const char *shown,
                     storage_target *t) {
  int kind = storage_url_kind(url);
  if (kind == STORAGE_S3 && strcmp(shown, url) != 0) {
    return al_set_error(AL_EINVAL,
                        "%s: an s3:// URL takes no user:password@ (S3 credentials come from the environment)",
                        shown);
  }
  if (kind == STORAGE_S3) return s3_target(c, url, t);
  if (kind != STORAGE_HTTP)
    return al_set_error(AL_EINVAL, "%s: not an http://, https:// or s3:// URL", shown);
  t->http = http_url(url);
  t->name = strdup(shown);
  if (t->http && t->name) return AL_OK;
  return al_set_error(AL_ENOMEM, "%s: out of memory", shown);
}

int storage_target_make(const storage_client *c, const char *url, storage_target *t) {
  memset(t, 0, sizeof *t);
  char *shown = url ? url_redact(url) : strdup("(null)");
  int rc = shown == NULL ? al_set_error(AL_ENOMEM, "remote URL: out of memory")
                         : target_of(c, url ? url : "", shown, t);
  free(shown);
  if (rc != AL_OK) storage_target_free(t);
  return rc;
}

void storage_target_free(storage_target *t) {
  free(t->http);
  free(t->name);
  free(t->bucket);
  free(t->key);
  memset(t, 0, sizeof *t);
}
