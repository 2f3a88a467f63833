/*
 * storage/client_internal.h - shards in object storage and on HTTP servers: size, ETag and byte
 * ranges of one object, and listings of an S3 prefix (internal to //storage; the
 * index reads remote shards through it, loader/shard_bytes_internal.h; the stream through
 * stream/remote_fetch_internal.h).
 *
 * URLs: http://host[:port]/path, https://..., s3://bucket/key (schemes in any case: HTTP://
 * is http://). An s3:// key is opaque: it is sent as it is written, percent-encoded, with no
 * "." or ".." segment removed (libcurl's CURLOPT_PATH_AS_IS; SigV4 signs that path, as S3
 * does). An s3:// URL is sent to
 * REGION's AWS endpoint (https://BUCKET.s3.REGION.amazonaws.com/KEY), or, when an endpoint
 * is set (storage_config.s3_endpoint: given, else the environment's AWS_ENDPOINT_URL), to
 * ENDPOINT/BUCKET/KEY (path-style addressing, what S3-compatible servers expect);
 * storage_config.s3_addressing chooses the other addressing at either. Requests
 * are signed with AWS Signature V4 (libcurl's CURLOPT_AWS_SIGV4, "aws:amz:REGION:s3") when
 * AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are set; AWS_SESSION_TOKEN adds the
 * x-amz-security-token header; AWS_REGION names the region (default us-east-1). Without
 * credentials requests are anonymous. Credentials are read once, by storage_config_make,
 * and appear in no message: errors name the URL (and, for s3://, the endpoint URL), with an
 * http(s) URL's user:password@ shown as ***@ (an s3:// URL with one is refused).
 *
 * Faults: timeouts, connection failures and resets, 5xx, 429 and 408 answers are retried
 * with exponential backoff and jitter (a Retry-After, in seconds or as an HTTP date, is
 * honoured). storage_config.total_timeout_s bounds each operation as a whole (an open, a read,
 * a listing page), its requests and retries and the bytes they bring together: a server
 * that trickles its answer fails as one that does not answer. Then the operation fails with
 * the URL, the number of attempts and the last error. A response cut short is resumed from
 * its last byte. Answer headers over libcurl's limits (a line over 100 KiB, 300 KiB in all)
 * fail at once, saying so. An object is pinned at open by its size and ETag (of any length,
 * kept as sent): each ranged GET sends If-Match (a strong ETag; a weak one, W/"...", never
 * matches there, so it is not sent), and an answer with a different ETag or total size (or
 * a 412) is an error naming the URL, never different bytes.
 *
 * Thread safety: a storage_client is read-only after storage_client_open and may be shared by
 * any number of threads (each object then holds its own connection). A storage_http_object is
 * used by one thread at a time. storage_client_open initialises libcurl once per process
 * (thread-safe).
 *
 * Errors: functions returning int give an al_status and record the message (al_set_error,
 * common/al_status.h) naming the URL: AL_EINVAL for a URL or a setting that is refused,
 * AL_EIO for a request that failed (its retries spent, a fatal answer, a changed object,
 * "cancelled"), AL_EFORMAT for a listing the server sent wrong, AL_ERANGE for a read beyond the
 * object, AL_ENOMEM.
 */
#ifndef AL_STORAGE_CLIENT_INTERNAL_H
#define AL_STORAGE_CLIENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/al_status.h"

/* storage_config.s3_addressing: the values of loader/al_index.h's AL_S3_ADDRESSING_*. */
enum {
  STORAGE_ADDRESSING_DEFAULT = 0,
  STORAGE_ADDRESSING_PATH = 1,
  STORAGE_ADDRESSING_VIRTUAL = 2
};

/* Longest S3 region name + 1. */
#define STORAGE_REGION_CAP 64

/* Every setting a client opens with, resolved: made by storage_config_make alone (config.c),
 * from the caller's settings (the readers pass al_storage_options as al_storage_resolve gives
 * them) and the environment. Tests may change a field after storage_config_make. */
typedef struct storage_config {
  double total_timeout_s;             /* an operation's whole time, retries included; default 60 */
  double connect_timeout_s;           /* per connection attempt; 10 */
  double stall_timeout_s;             /* no byte received for this long: a timeout; 15 */
  double backoff_base_s;              /* first retry delay (before jitter); 0.1 */
  double backoff_max_s;               /* longest delay between attempts; 5 */
  const char *s3_endpoint;            /* given, else $AWS_ENDPOINT_URL, else NULL: AWS's regional
                                         endpoint (not copied: it must outlive storage_client_open) */
  char s3_region[STORAGE_REGION_CAP]; /* given, else $AWS_REGION, else us-east-1 */
  unsigned list_max_keys;             /* keys per ListObjectsV2 page; 0: the server's (1000) */
  int s3_addressing;                  /* STORAGE_ADDRESSING_*: 0 = path-style at a set
                                         endpoint, virtual-hosted at AWS; 1 path-style; 2
                                         virtual-hosted (BUCKET.HOST; a bucket that is no host
                                         name label stays path-style) */
  /* $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY, $AWS_SESSION_TOKEN (NULL: unset; without the
   * first two requests are anonymous). Never printed; the client copies them at open. */
  const char *access_key_id, *secret_access_key, *session_token;
} storage_config;

/* The one place the client's settings are built: s3_endpoint, s3_region (NULL: the
 * environment's, else the default), s3_addressing and total_timeout_s (<= 0: 60 s) as given,
 * the other timeouts and the backoff at their defaults, the credentials from the environment.
 * AL_OK, or AL_EINVAL (storage_s3_check's message). */
int storage_config_make(const char *s3_endpoint, const char *s3_region, int s3_addressing,
                        double total_timeout_s, storage_config *out);

/* What one object (or the listing calls) sent and received. */
typedef struct storage_counts {
  uint64_t requests;  /* HTTP requests sent, retries included */
  uint64_t retries;   /* requests that repeated a failed or short one */
  uint64_t bytes;     /* body bytes received into callers' buffers */
  uint64_t discarded; /* body bytes received and dropped (a 200 answer to a range) */
} storage_counts;

typedef struct storage_client storage_client;
typedef struct storage_http_object storage_http_object;

/* One listed object. */
typedef struct storage_entry {
  char *url; /* s3://bucket/key */
  uint64_t size;
  char *etag; /* as the server quotes it, e.g. "\"9a0364b9...\"" (malloc'd; "" when none) */
} storage_entry;

typedef struct storage_listing {
  storage_entry *entries; /* in the server's order (S3: keys in UTF-8 binary order) */
  size_t count;
} storage_listing;

/* The S3 settings' rules, the one place they are written: an endpoint (NULL: none) must be an
 * http:// or https:// URL, a region (NULL: none) a name of fewer than STORAGE_REGION_CAP bytes
 * without ':', '/' or ' ', the addressing 0, 1 or 2. AL_OK, or AL_EINVAL naming the setting. */
int storage_s3_check(const char *endpoint, const char *region, int addressing);

/* How much of url names the object: an http(s) URL up to its query or fragment (a
 * presigned URL's signature, "?X-Amz-Signature=...", changes when it is signed again; the
 * object does not); an s3:// URL whole ('?' and '#' belong to its key). Requests use the
 * whole URL. */
size_t storage_url_identity_len(const char *url);

/* cfg NULL: storage_config_make(NULL, NULL, 0, 0). The client copies what it needs from cfg
 * and reads no environment. AL_OK; AL_EINVAL (cfg NULL and the environment's settings bad),
 * AL_EIO (libcurl's initialisation failed), AL_ENOMEM. */
int storage_client_open(const storage_config *cfg, storage_client **out);
void storage_client_close(storage_client *c);
/* Ends every operation of the client's objects, now and later: a retry wait ends at once and a
 * transfer in flight stops at its next progress call (libcurl's, within about a second); they
 * fail with "cancelled". For closing while other threads are mid-retry against a server that is
 * down, so closing does not wait out their budgets. Thread-safe; the only call that may run
 * while other threads use the client. */
void storage_client_cancel(storage_client *c);

/* Opens url: one HEAD request (with retries) that pins its size and ETag. The client must
 * outlive the object. */
int storage_http_open(storage_client *c, const char *url, storage_http_object **out);
uint64_t storage_http_size(const storage_http_object *o);
/* As the server sent it (any length); "" when it sent none (then only the size is checked). */
const char *storage_http_etag(const storage_http_object *o);
const char *storage_http_url(const storage_http_object *o);
/* Reads exactly len bytes at offset off into buf (ranged GETs, resumed and retried), within
 * total_timeout_s for the whole read. [off, off + len) must lie within the object. */
int storage_http_read(storage_http_object *o, uint64_t off, void *buf, size_t len);
/* Safe to call while another thread uses the object (the counters are atomic). */
storage_counts storage_http_stats(const storage_http_object *o);
void storage_http_close(storage_http_object *o);

/* Every object whose key starts with the prefix of url (s3://bucket/prefix; "" lists the
 * bucket), following continuation tokens (ListObjectsV2); a token sent a second time is an
 * error (the listing would go round for ever). out is filled on success and left empty on
 * failure; stats (may be NULL) receives the requests sent. */
int storage_s3_list(storage_client *c, const char *url, storage_listing *out,
                    storage_counts *stats);
void storage_listing_free(storage_listing *l);

#endif /* AL_STORAGE_CLIENT_INTERNAL_H */
