/*
 * storage/config.c - the client's settings built in one place: the caller's S3 endpoint,
 * region, addressing and time budget, the environment's where the caller leaves one unset
 * (AWS_ENDPOINT_URL, AWS_REGION), the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN), the defaults of the rest; and the rules the S3 settings follow.
 */
#include <stdio.h>
#include <string.h>

#include "common/al_status.h"
#include "common/env_internal.h"
#include "storage/client_internal.h"
#include "storage/storage_internal.h"

int storage_s3_check(const char *endpoint, const char *region, int addressing) {
  if (endpoint && storage_url_kind(endpoint) != STORAGE_HTTP)
    return al_set_error(AL_EINVAL, "S3 endpoint %s: not an http:// or https:// URL", endpoint);
  if (region && (!region[0] || strlen(region) >= STORAGE_REGION_CAP || strpbrk(region, ":/ ")))
    return al_set_error(AL_EINVAL, "S3 region '%s': not a region name", region);
  if (addressing < 0 || addressing > 2)
    return al_set_error(AL_EINVAL, "S3 addressing %d: not 0 (default), 1 (path) or 2 (virtual)",
                        addressing);
  return AL_OK;
}

int storage_config_make(const char *s3_endpoint, const char *s3_region, int s3_addressing,
                        double total_timeout_s, storage_config *out) {
  memset(out, 0, sizeof *out);
  out->total_timeout_s = total_timeout_s > 0 ? total_timeout_s : 60;
  out->connect_timeout_s = 10;
  out->stall_timeout_s = 15;
  out->backoff_base_s = 0.1;
  out->backoff_max_s = 5;
  out->s3_addressing = s3_addressing;
  const char *region = s3_region ? s3_region : env_text("AWS_REGION");
  if (region == NULL) region = "us-east-1";
  const char *ep = s3_endpoint ? s3_endpoint : env_text("AWS_ENDPOINT_URL");
  int rc = storage_s3_check(ep, region, s3_addressing);
  if (rc != AL_OK) return rc;
  snprintf(out->s3_region, sizeof out->s3_region, "%s", region);
  out->s3_endpoint = ep;
  out->access_key_id = env_text("AWS_ACCESS_KEY_ID");
  out->secret_access_key = env_text("AWS_SECRET_ACCESS_KEY");
  out->session_token = env_text("AWS_SESSION_TOKEN");
  return AL_OK;
}
