/*
 * storage/client.c - the settings every remote object shares: timeouts and backoff, the S3
 * endpoint, region and credentials (read from the environment once, never printed).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_internal.h"
#include "storage/http_internal.h"

/* Apart from the client, which is otherwise read-only after open (C11 atomics stay out of the
 * header the C++ tests include). */
struct remote_cancel {
  atomic_int flag;
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_rc = CURLE_FAILED_INIT;

static void curl_init_once(void) { g_curl_rc = curl_global_init(CURL_GLOBAL_ALL); }

static double or_default(double v, double d) { return v > 0 ? v : d; }

int remote_storage_check(const char *endpoint, const char *region, int addressing, char *err,
                         size_t err_cap) {
  if (endpoint && remote_url_kind(endpoint) != REMOTE_HTTP)
    return snprintf(err, err_cap, "S3 endpoint %s: not an http:// or https:// URL", endpoint), -1;
  if (region && (!region[0] || strlen(region) >= REMOTE_REGION_CAP || strpbrk(region, ":/ ")))
    return snprintf(err, err_cap, "S3 region '%s': not a region name", region), -1;
  if (addressing < 0 || addressing > 2)
    return snprintf(err, err_cap, "S3 addressing %d: not 0 (default), 1 (path) or 2 (virtual)",
                    addressing),
           -1;
  return 0;
}

static int set_endpoint(remote_client *c, const char *ep) {
  if (ep == NULL) return 0;
  c->endpoint = strdup(ep);
  if (c->endpoint == NULL) return -1;
  size_t n = strlen(c->endpoint);
  while (n > 0 && c->endpoint[n - 1] == '/') c->endpoint[--n] = '\0';
  return 0;
}

static int set_credentials(remote_client *c) {
  const char *id = env_text("AWS_ACCESS_KEY_ID");
  const char *secret = env_text("AWS_SECRET_ACCESS_KEY");
  const char *token = env_text("AWS_SESSION_TOKEN");
  if (id == NULL || secret == NULL) return 0;
  if (asprintf(&c->userpwd, "%s:%s", id, secret) < 0) return c->userpwd = NULL, -1;
  if (token != NULL && asprintf(&c->token_header, "x-amz-security-token: %s", token) < 0) {
    return c->token_header = NULL, -1;
  }
  return 0;
}

int remote_client_open(const remote_opts *opts, remote_client **out, char *err, size_t err_cap) {
  *out = NULL;
  if (err_cap > 0) err[0] = '\0';
  pthread_once(&g_curl_once, curl_init_once);
  if (g_curl_rc != CURLE_OK) {
    snprintf(err, err_cap, "libcurl: initialisation failed: %s", curl_easy_strerror(g_curl_rc));
    return -1;
  }
  remote_opts o = {0};
  if (opts != NULL) o = *opts;
  remote_client *c = calloc(1, sizeof *c);
  if (c != NULL && (c->cancel = malloc(sizeof *c->cancel)) == NULL) {
    free(c);
    c = NULL;
  }
  if (c == NULL) return snprintf(err, err_cap, "remote client: out of memory"), -1;
  atomic_init(&c->cancel->flag, 0);
  c->o.total_timeout_s = or_default(o.total_timeout_s, 60);
  c->o.connect_timeout_s = or_default(o.connect_timeout_s, 10);
  c->o.stall_timeout_s = or_default(o.stall_timeout_s, 15);
  c->o.backoff_base_s = or_default(o.backoff_base_s, 0.1);
  c->o.backoff_max_s = or_default(o.backoff_max_s, 5);
  c->o.list_max_keys = o.list_max_keys;
  c->o.s3_addressing = o.s3_addressing;
  const char *region = o.s3_region ? o.s3_region : env_text("AWS_REGION");
  if (region == NULL) region = "us-east-1";
  const char *ep = o.s3_endpoint ? o.s3_endpoint : env_text("AWS_ENDPOINT_URL");
  if (remote_storage_check(ep, region, o.s3_addressing, err, err_cap) != 0) {
    remote_client_close(c);
    return -1;
  }
  snprintf(c->region, sizeof c->region, "%s", region);
  snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:s3", c->region);
  c->payload_header = 1;
  if (set_endpoint(c, ep) != 0 || set_credentials(c) != 0) {
    if (err_cap > 0 && err[0] == '\0') snprintf(err, err_cap, "remote client: out of memory");
    remote_client_close(c);
    return -1;
  }
  *out = c;
  return 0;
}

int remote_client_set_test_hooks(remote_client *c, const remote_test_hooks *h, char *err,
                                 size_t err_cap) {
  if (h->sign_service != NULL) {
    if (h->sign_service[0] == '\0' || strpbrk(h->sign_service, ": ") != NULL ||
        strlen(h->sign_service) > 64) {
      return snprintf(err, err_cap, "SigV4 service '%s': not a service name", h->sign_service), -1;
    }
    snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:%s", c->region, h->sign_service);
    c->payload_header = strcmp(h->sign_service, "s3") == 0;
  }
  c->connect_to = h->connect_to;
  c->test_headers = h->headers;
  return 0;
}

static void free_secret(char *s) {
  if (s == NULL) return;
  volatile char *p = s;
  while (*p) *p++ = '\0';
  free(s);
}

void remote_client_cancel(remote_client *c) { atomic_store(&c->cancel->flag, 1); }

int remote_client_cancelled(const remote_client *c) { return atomic_load(&c->cancel->flag); }

void remote_client_close(remote_client *c) {
  if (c == NULL) return;
  free(c->cancel);
  free(c->endpoint);
  free_secret(c->userpwd);
  free_secret(c->token_header);
  free(c);
}
