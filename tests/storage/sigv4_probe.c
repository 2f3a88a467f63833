/*
 * sigv4_probe - sends one request of an AWS Signature V4 test vector through //storage's
 * request path (storage_xfer_perform with the client's signing settings), for sigv4_test.sh:
 *   sigv4_probe PORT req  VECTOR.req    the request as the vector writes it: the path and
 *                                       each query name and value percent-encoded as the
 *                                       remote layer encodes S3 keys and listing queries
 *                                       (storage_pct_encode), the query in the order given,
 *                                       every header line sent as written
 *   sigv4_probe PORT creq VECTOR.creq   the vector's canonical request, sent as it is: URI
 *                                       and query already canonical, each canonical header
 *                                       line one header
 * The vector's host is connected to 127.0.0.1:PORT (CURLOPT_CONNECT_TO), so the Host header
 * libcurl writes (and signs) is the vector's. The client signs for service "service" in its
 * region (AWS_REGION, default us-east-1) with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY;
 * the vector's X-Amz-Date header is sent, and libcurl signs with it. Prints the answer's
 * HTTP status; exit status 0 on a 2xx answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "storage/client_internal.h"
#include "storage/http_internal.h"

#define MAX_LINES 32

/* The file's text in a static buffer (one file per run; nothing to free on any exit path). */
static char *read_all(const char *path) {
  static char buf[65536];
  FILE *f = fopen(path, "rb");
  if (f == NULL) return perror(path), NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  if (n == sizeof buf - 1) return fprintf(stderr, "%s: too long\n", path), NULL;
  buf[n] = '\0';
  return buf;
}

/* path?query with the path and each query name and value percent-encoded. */
static char *encode_target(const char *target) {
  const char *q = strchr(target, '?');
  size_t plen = q ? (size_t)(q - target) : strlen(target);
  char *path = strndup(target, plen);
  char *out = path ? storage_pct_encode(path, 1) : NULL;
  free(path);
  if (out == NULL || q == NULL) return out;
  size_t cap = strlen(out) + 3 * strlen(q) + 2;
  char *r = realloc(out, cap);
  if (r == NULL) return free(out), NULL;
  strcat(r, "?");
  char *query = strdup(q + 1);
  char *save = NULL;
  for (char *pair = strtok_r(query, "&", &save); pair; pair = strtok_r(NULL, "&", &save)) {
    char *eq = strchr(pair, '=');
    if (eq) *eq = '\0';
    char *k = storage_pct_encode(pair, 0);
    char *v = eq ? storage_pct_encode(eq + 1, 0) : NULL;
    if (r[strlen(r) - 1] != '?') strcat(r, "&");
    strcat(r, k);
    if (v) strcat(strcat(r, "="), v);
    free(k);
    free(v);
  }
  free(query);
  return r;
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[2], "req") != 0 && strcmp(argv[2], "creq") != 0)) {
    return fprintf(stderr, "usage: sigv4_probe PORT req|creq FILE\n"), 2;
  }
  int creq = strcmp(argv[2], "creq") == 0;
  char *text = read_all(argv[3]);
  if (text == NULL) return 1;
  char *lines[MAX_LINES];
  int n = 0;
  char *save = NULL;
  /* strtok_r drops empty lines: the canonical request's empty query and its blank line. */
  for (char *l = strtok_r(text, "\n", &save); l && n < MAX_LINES; l = strtok_r(NULL, "\n", &save)) {
    lines[n++] = l;
  }
  if (n < (creq ? 5 : 2)) return fprintf(stderr, "%s: too few lines\n", argv[3]), 1;
  char target[4096] = "", host[256] = "";
  const char *headers[MAX_LINES + 1];
  int nh = 0;
  int first_header = 1;
  if (creq) {
    /* GET, URI, [query], headers..., signed header names, payload hash. */
    int has_query = n > 2 && strchr(lines[2], ':') == NULL;
    snprintf(target, sizeof target, "%s%s%s", lines[1], has_query ? "?" : "",
             has_query ? lines[2] : "");
    first_header = has_query ? 3 : 2;
    n -= 2;
  } else {
    char *sp = strchr(lines[0], ' '), *end = strrchr(lines[0], ' ');
    if (sp == NULL || end == sp) return fprintf(stderr, "%s: no request line\n", argv[3]), 1;
    *end = '\0';
    char *enc = encode_target(sp + 1);
    snprintf(target, sizeof target, "%s", enc ? enc : "");
    free(enc);
  }
  if (strncmp(lines[0], "GET", 3) != 0) return fprintf(stderr, "%s: not a GET\n", argv[3]), 1;
  for (int i = first_header; i < n; i++) {
    if (strncasecmp(lines[i], "host:", 5) == 0) {
      snprintf(host, sizeof host, "%s", lines[i] + 5);
    } else {
      headers[nh++] = lines[i];
    }
  }
  headers[nh] = NULL;
  if (host[0] == '\0') return fprintf(stderr, "%s: no Host\n", argv[3]), 1;

  char err[1024], connect_to[512], url[4600];
  snprintf(connect_to, sizeof connect_to, "%s:80:127.0.0.1:%s", host, argv[1]);
  snprintf(url, sizeof url, "http://%s%s", host, target);
  storage_client *c;
  if (storage_client_open(NULL, &c) != AL_OK) return fprintf(stderr, "%s\n", al_last_error()), 1;
  storage_test_hooks hooks = {.sign_service = "service",
                              .connect_to = connect_to,
                              .headers = headers};
  if (storage_client_set_test_hooks(c, &hooks) != AL_OK) {
    fprintf(stderr, "%s\n", al_last_error());
    storage_client_close(c);
    return 1;
  }
  storage_target t = {.http = url, .name = url, .s3 = 1};
  storage_xfer x = {.body_max = 1024};
  CURL *h = curl_easy_init();
  int v = storage_xfer_perform(c, h, &t, &x, err, sizeof err);
  printf("%ld\n", x.status);
  if (v != STORAGE_XFER_OK) fprintf(stderr, "%s: %s\n", url, err);
  storage_xfer_free(&x);
  curl_easy_cleanup(h);
  storage_client_close(c);
  return v == STORAGE_XFER_OK ? 0 : 1;
}
