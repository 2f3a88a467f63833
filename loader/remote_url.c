/*
 * remote_url.c - what a remote URL's requests are sent to: http(s):// as given, s3:// mapped
 * to the client's endpoint (path-style) or to AWS's virtual-hosted endpoint.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/remote_xfer_internal.h"

int remote_url_kind(const char *s) {
  if (s == NULL) return REMOTE_NOT_URL;
  if (strncmp(s, "s3://", 5) == 0) return REMOTE_S3;
  if (strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0) return REMOTE_HTTP;
  return REMOTE_NOT_URL;
}

char *remote_pct_encode(const char *s, int keep_slash) {
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

char *remote_s3_bucket_url(const remote_client *c, const char *bucket, const char *query) {
  char *out = NULL;
  int n;
  int virt = dns_bucket(bucket) && (c->endpoint ? c->o.s3_addressing == REMOTE_ADDRESSING_VIRTUAL
                                                : c->o.s3_addressing != REMOTE_ADDRESSING_PATH);
  if (c->endpoint != NULL && virt) {
    n = virtual_endpoint(&out, c->endpoint, bucket, query);
  } else if (c->endpoint != NULL) {
    n = asprintf(&out, "%s/%s%s", c->endpoint, bucket, query);
  } else if (virt) {
    n = asprintf(&out, "https://%s.s3.%s.amazonaws.com/%s", bucket, c->region, query);
  } else {
    n = asprintf(&out, "https://s3.%s.amazonaws.com/%s%s", c->region, bucket, query);
  }
  return n < 0 ? NULL : out;
}

static int s3_target(const remote_client *c, const char *url, remote_target *t, char *err,
                     size_t err_cap) {
  const char *b = url + 5;
  const char *slash = strchr(b, '/');
  if (slash == NULL || slash == b || slash[1] == '\0') {
    snprintf(err, err_cap, "%s: an S3 object URL is s3://BUCKET/KEY", url);
    return -1;
  }
  t->bucket = strndup(b, (size_t)(slash - b));
  t->key = strdup(slash + 1);
  char *enc = t->key ? remote_pct_encode(t->key, 1) : NULL;
  char *base = t->bucket ? remote_s3_bucket_url(c, t->bucket, "") : NULL;
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
  if (!ok) snprintf(err, err_cap, "%s: out of memory", url);
  t->s3 = 1;
  return ok ? 0 : -1;
}

/* url for messages: a user:password@ part becomes "***@". */
static char *display_name(const char *url) {
  const char *host = strstr(url, "://") + 3;
  size_t n = strcspn(host, "/?#");
  const char *at = memchr(host, '@', n);
  char *out = NULL;
  if (at == NULL) return strdup(url);
  if (asprintf(&out, "%.*s***%s", (int)(host - url), url, at) < 0) return NULL;
  return out;
}

int remote_target_make(const remote_client *c, const char *url, remote_target *t, char *err,
                       size_t err_cap) {
  memset(t, 0, sizeof *t);
  int kind = remote_url_kind(url);
  int rc;
  if (kind == REMOTE_S3) {
    rc = s3_target(c, url, t, err, err_cap);
  } else if (kind == REMOTE_HTTP) {
    t->http = strdup(url);
    t->name = display_name(url);
    rc = (t->http && t->name) ? 0 : -1;
    if (rc != 0) snprintf(err, err_cap, "%s: out of memory", url);
  } else {
    snprintf(err, err_cap, "%s: not an http://, https:// or s3:// URL", url ? url : "(null)");
    rc = -1;
  }
  if (rc != 0) remote_target_free(t);
  return rc;
}

void remote_target_free(remote_target *t) {
  free(t->http);
  free(t->name);
  free(t->bucket);
  free(t->key);
  memset(t, 0, sizeof *t);
}
