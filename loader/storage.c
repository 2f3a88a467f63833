/* The storage settings of shards at URLs: recorded in the index, resolved for a reader
 * (al_index.h, "storage"). The one place that reads AWS_ENDPOINT_URL, AWS_REGION and
 * ADAPTIVELOAD_REMOTE_TIMEOUT_S for the readers' defaults; the readers hand what
 * al_storage_resolve gives to storage_config_make (storage/config.c), which adds the
 * credentials. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_internal.h"
#include "common/struct_abi_internal.h"
#include "loader/al_index.h"
#include "loader/index_internal.h"
#include "storage/client_internal.h"
#include "storage/storage_internal.h"

_Static_assert((int)AL_S3_ADDRESSING_DEFAULT == (int)STORAGE_ADDRESSING_DEFAULT &&
                   (int)AL_S3_ADDRESSING_PATH == (int)STORAGE_ADDRESSING_PATH &&
                   (int)AL_S3_ADDRESSING_VIRTUAL == (int)STORAGE_ADDRESSING_VIRTUAL,
               "al_storage_options.s3_addressing is handed to storage_config as it is");
_Static_assert((int)AL_SHARD_LOCAL == (int)STORAGE_LOCAL &&
                   (int)AL_SHARD_HTTP == (int)STORAGE_HTTP && (int)AL_SHARD_S3 == (int)STORAGE_S3,
               "al_shard_io.remote is storage_url_kind's value");

int al_storage_check(const al_storage_options *o) {
  if (!o) return AL_OK;
  int rc = storage_s3_check(o->s3_endpoint, o->s3_region, o->s3_addressing);
  if (rc != AL_OK) return rc;
  if (o->remote_timeout_s != 0 && !(o->remote_timeout_s >= 0.1 && o->remote_timeout_s <= 86400))
    return al_set_error(AL_EINVAL, "remote_timeout_s must be in [0.1, 86400] (0 = default), got %g",
                        o->remote_timeout_s);
  return AL_OK;
}

void al_index_storage(const al_index *idx, al_storage_options *out) {
  memset(out, 0, sizeof *out);
  if (!idx || !idx->s3_recorded) return;
  out->s3_endpoint = idx->s3_endpoint;
  out->s3_region = idx->s3_region;
  out->s3_addressing = idx->s3_addressing;
}

/* given, else the environment's, else the index's; *from names which. */
static const char *pick(const char *given, const char *env_name, const char *recorded,
                        const char **from) {
  const char *env = env_text(env_name);
  if (given && *given) return *from = "option", given;
  if (env) return *from = env_name, env;
  if (recorded && *recorded) return *from = "index", recorded;
  return *from = "default", NULL;
}

int al_storage_resolve(const al_storage_options *given, const al_index *idx,
                       al_storage_options *out, al_storage_origin *origin) {
  size_t n = 0;
  if (!out) return al_set_error(AL_EINVAL, "al_storage_resolve: out is NULL");
  if (origin) {
    int rc = struct_out_size(origin, sizeof(al_storage_origin), AL_STORAGE_ORIGIN_V1,
                             "al_storage_resolve", "al_storage_origin", &n);
    if (rc) return rc;
  }
  al_storage_options g, rec;
  memset(&g, 0, sizeof g);
  if (given) g = *given;
  al_index_storage(idx, &rec);
  al_storage_origin o = AL_STORAGE_ORIGIN_INIT;
  memset(out, 0, sizeof *out);
  out->s3_endpoint = pick(g.s3_endpoint, "AWS_ENDPOINT_URL", rec.s3_endpoint, &o.s3_endpoint);
  out->s3_region = pick(g.s3_region, "AWS_REGION", rec.s3_region, &o.s3_region);
  out->s3_addressing = g.s3_addressing ? g.s3_addressing : rec.s3_addressing;
  out->remote_timeout_s = g.remote_timeout_s > 0 ? g.remote_timeout_s
                                                 : env_seconds("ADAPTIVELOAD_REMOTE_TIMEOUT_S");
  if (origin) struct_out(origin, &o, n);
  return AL_OK;
}

const char *al_storage_mismatch(const al_storage_options *used, const al_storage_origin *caller,
                                const al_index *idx, char *buf, size_t cap) {
  if (!buf || !cap) return "";
  buf[0] = 0;
  al_storage_origin local;
  const al_storage_origin *origin = NULL; /* one of a size this library cannot read: not read */
  if (caller && struct_in(&local, sizeof local, AL_STORAGE_ORIGIN_V1, caller, "al_storage_mismatch",
                          "al_storage_origin") == AL_OK)
    origin = &local;
  const char *rec = idx && idx->s3_endpoint ? idx->s3_endpoint : NULL;
  const char *now = used && used->s3_endpoint ? used->s3_endpoint : NULL;
  if (!idx || !idx->s3_recorded || (rec && now && !strcmp(rec, now)) || (!rec && !now)) return buf;
  snprintf(buf, cap, " (S3 endpoint %s from %s; the index was built with %s)",
           now ? now : "AWS's regional endpoint",
           origin && origin->s3_endpoint ? origin->s3_endpoint : "the settings",
           rec ? rec : "AWS's regional endpoint");
  return buf;
}

int index_record_storage(al_index *idx, const al_storage_options *used) {
  free(idx->s3_endpoint);
  free(idx->s3_region);
  idx->s3_endpoint = used->s3_endpoint ? strdup(used->s3_endpoint) : NULL;
  idx->s3_region = used->s3_region ? strdup(used->s3_region) : NULL;
  idx->s3_addressing = used->s3_addressing;
  idx->s3_recorded = 1;
  if ((used->s3_endpoint && !idx->s3_endpoint) || (used->s3_region && !idx->s3_region))
    return al_set_error(AL_ENOMEM, "index: out of memory");
  return AL_OK;
}
