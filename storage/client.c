/*
 * storage/client.c - what every remote object of a client shares: its settings (a copy of the
 * storage_config it was opened with: timeouts and backoff, the S3 endpoint, region and
 * credentials, never printed), libcurl's initialisation, the cancel flag.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "storage/http_internal.h"

/* Apart from the client, which is otherwise read-only after open (C11 atomics stay out of the
 * header the C++ tests include). */
struct storage_cancel {
  atomic_int flag;
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_rc = CURLE_FAILED_INIT;

static void curl_init_once(void) { g_curl_rc = curl_global_init(CURL_GLOBAL_ALL); }

static int set_endpoint(storage_client *c, const char *ep) {
  if (ep == NULL) return 0;
  c->endpoint = strdup(ep);
  if (c->endpoint == NULL) return -1;
  size_t n = strlen(c->endpoint);
  while (n > 0 && c->endpoint[n - 1] == '/') c->endpoint[--n] = '\0';
  return 0;
}

static int set_credentials(storage_client *c, const storage_config *cfg) {
  if (cfg->access_key_id == NULL || cfg->secret_access_key == NULL) return 0;
  if (asprintf(&c->userpwd, "%s:%s", cfg->access_key_id, cfg->secret_access_key) < 0)
    return c->userpwd = NULL, -1;
  if (cfg->session_token != NULL &&
      asprintf(&c->token_header, "x-amz-security-token: %s", cfg->session_token) < 0) {
    return c->token_header = NULL, -1;
  }
  return 0;
}

int storage_client_open(const storage_config *cfg, storage_client **out) {
  *out = NULL;
  pthread_once(&g_curl_once, curl_init_once);
  if (g_curl_rc != CURLE_OK)
    return al_set_error(AL_EIO, "libcurl: initialisation failed: %s",
                        curl_easy_strerror(g_curl_rc));
  storage_config dflt;
  if (cfg == NULL) {
    int rc = storage_config_make(NULL, NULL, 0, 0, &dflt);
    if (rc != AL_OK) return rc;
    cfg = &dflt;
  }
  storage_client *c = calloc(1, sizeof *c);
  if (c != NULL && (c->cancel = malloc(sizeof *c->cancel)) == NULL) {
    free(c);
    c = NULL;
  }
  if (c == NULL) return al_set_error(AL_ENOMEM, "remote client: out of memory");
  atomic_init(&c->cancel->flag, 0);
  c->cfg = *cfg;
  c->cfg.s3_endpoint = NULL; /* c->endpoint holds the copy */
  c->cfg.access_key_id = c->cfg.secret_access_key = c->cfg.session_token = NULL;
  snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:s3", c->cfg.s3_region);
  c->payload_header = 1;
  if (set_endpoint(c, cfg->s3_endpoint) != 0 || set_credentials(c, cfg) != 0) {
    storage_client_close(c);
    return al_set_error(AL_ENOMEM, "remote client: out of memory");
  }
  *out = c;
  return AL_OK;
}

int storage_client_set_test_hooks(storage_client *c, const storage_test_hooks *h) {
  if (h->sign_service != NULL) {
    if (h->sign_service[0] == '\0' || strpbrk(h->sign_service, ": ") != NULL ||
        strlen(h->sign_service) > 64) {
      return al_set_error(AL_EINVAL, "SigV4 service '%s': not a service name", h->sign_service);
    }
    snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:%s", c->cfg.s3_region, h->sign_service);
    c->payload_header = strcmp(h->sign_service, "s3") == 0;
  }
  c->connect_to = h->connect_to;
  c->test_headers = h->headers;
  return AL_OK;
}

static void free_secret(char *s) {
  if (s == NULL) return;
  volatile char *p = s;
  while (*p) *p++ = '\0';
  free(s);
}

void storage_client_cancel(storage_client *c) { atomic_store(&c->cancel->flag, 1); }

int storage_client_cancelled(const storage_client *c) { return atomic_load(&c->cancel->flag); }

void storage_client_close(storage_client *c) {
  if (c == NULL) return;
  free(c->cancel);
  free(c->endpoint);
  free_secret(c->userpwd);
  free_secret(c->token_header);
  free(c);
}
