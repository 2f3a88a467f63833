/*
 * storage/http_internal.h - the pieces of //storage that its files share: the client's
 * resolved settings (client.c), URL mapping (url_target.c), one HTTP attempt (http_request.c),
 * the retry clock (retry.c), S3 XML helpers (s3_xml.c). Used by http_object.c and s3_list.c.
 */
#ifndef AL_STORAGE_HTTP_INTERNAL_H
#define AL_STORAGE_HTTP_INTERNAL_H

#include <curl/curl.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/client_internal.h"

#define STORAGE_ERR_BODY_CAP 4096

struct storage_client {
  storage_config cfg;     /* as opened (its endpoint and credentials: the copies below) */
  char *endpoint;         /* S3 endpoint without a trailing '/', NULL: AWS's */
  char sigv4[160];        /* "aws:amz:REGION:s3" (or the test hook's service) */
  char *userpwd;          /* "KEY:SECRET", NULL: anonymous */
  char *token_header;     /* "x-amz-security-token: ...", NULL: none */
  int payload_header;     /* send x-amz-content-sha256 (S3's; other services do not take it) */
  const char *connect_to; /* test hook, NULL: none */
  const char *const *test_headers; /* test hook, NULL: none */
  struct storage_cancel *cancel;   /* storage_client_cancel's flag (client.c) */
};

/* 1 once storage_client_cancel was called (an atomic read: any thread). */
int storage_client_cancelled(const storage_client *c);

/* Test hooks, for checking the requests the client sends (tests/storage/sigv4_probe.c):
 * sign for SigV4 service sign_service instead of "s3" (NULL: keep s3), connect as
 * connect_to says (one CURLOPT_CONNECT_TO entry "HOST:PORT:ADDRESS:PORT", NULL: none), and
 * add the header lines of headers (NULL-terminated; NULL: none) to every request. The
 * strings are not copied: they must outlive the client. Not for use outside tests: the
 * production settings come from storage_config_make. */
typedef struct storage_test_hooks {
  const char *sign_service;
  const char *connect_to;
  const char *const *headers;
} storage_test_hooks;
/* AL_OK, or AL_EINVAL for a sign_service that is no service name. */
int storage_client_set_test_hooks(storage_client *c, const storage_test_hooks *h);

/* Where a URL's requests go. */
typedef struct storage_target {
  char *http;         /* the URL requested (s3:// mapped to its endpoint), malloc'd */
  char *name;         /* what errors name: the URL (user:password@ as ***@), plus " (endpoint URL)"
                         for s3:// */
  int s3;             /* signed when the client has credentials; its path sent as is (keys are
                         opaque: no "." or ".." segment removed) */
  char *bucket, *key; /* s3:// only (key not encoded) */
} storage_target;

/* AL_OK; AL_EINVAL (not an http(s):// or s3://BUCKET/KEY URL, or an s3:// one with a
 * user:password@), AL_ENOMEM. */
int storage_target_make(const storage_client *c, const char *url, storage_target *t);
void storage_target_free(storage_target *t);
/* s's bytes percent-encoded (unreserved kept; '/' kept when keep_slash), malloc'd. */
char *storage_pct_encode(const char *s, int keep_slash);
/* The endpoint URL of bucket with "?query" (query already encoded; may be ""), malloc'd. */
char *storage_s3_bucket_url(const storage_client *c, const char *bucket, const char *query);

/* One request and its response. Set the request part, then storage_xfer_perform. */
typedef struct storage_xfer {
  /* request */
  int head;
  uint64_t range_off, range_len; /* range_len 0: no Range header */
  /* The pinned ETag (NULL or "": none): an answer with another ETag is STORAGE_V_CHANGED. Sent
   * as If-Match unless weak (W/"..."): If-Match compares strongly, so a weak ETag never matches
   * there (RFC 9110, 13.1.1) and the answers' ETags are compared instead. */
  const char *etag;
  unsigned char *dst;    /* range_len bytes: where the range's bytes go */
  uint64_t expect_total; /* a pinned object's size (checked when dst is set) */
  size_t body_max;       /* other bodies (listings, errors) kept up to this */
  double deadline;       /* clock_now_s() by which the request ends (a timeout); 0: none */
  /* response */
  long status;
  char *answer_etag; /* the answer's ETag, any length, malloc'd (storage_xfer_free); NULL: none */
  int have_range, have_length;
  int in_headers; /* a header block is being received: its blank line not yet seen */
  uint64_t cr_start, cr_end, cr_total, length;
  double retry_after; /* seconds, < 0: none */
  uint64_t got;       /* bytes written to dst */
  uint64_t discarded; /* bytes dropped (the head of a 200 answer to a range) */
  char *body;         /* other bodies, NUL-terminated, malloc'd (storage_xfer_free) */
  size_t body_len;
  int checked; /* the response headers were checked, before its first byte */
  int verdict; /* STORAGE_V_* set by the write callback */
  char why[384];
} storage_xfer;

enum {
  STORAGE_V_NONE = 0,
  STORAGE_V_FULL = 1,    /* the range is complete (a 200 answer cut off on purpose) */
  STORAGE_V_CHANGED = 2, /* ETag or total size differs from the pinned one */
  STORAGE_V_BAD = 3,     /* a malformed or unexpected answer (why says what) */
};

enum { STORAGE_XFER_OK = 0, STORAGE_XFER_RETRY = 1, STORAGE_XFER_FATAL = 2 };

/* Sends x's request for t on easy handle h; the outcome: STORAGE_XFER_OK (a 2xx answer whose
 * body, if any, was taken in full or to the range's end), STORAGE_XFER_RETRY (a transient fault;
 * x->got may still be > 0), STORAGE_XFER_FATAL. msg receives a description of any fault. */
int storage_xfer_perform(const storage_client *c, CURL *h, const storage_target *t, storage_xfer *x,
                         char *msg, size_t msg_cap);
void storage_xfer_free(storage_xfer *x);

/* The retry clock of one operation (an open, a read, a listing page): its attempts end by
 * deadline, total_timeout_s after its start, whatever they received meanwhile. */
typedef struct storage_retry {
  double deadline;
  int attempts, failures;
  uint64_t rng;
} storage_retry;

void storage_retry_start(const storage_client *c, storage_retry *r);
/* Progress was made: the backoff starts again (the next attempt goes at once), the budget
 * does not: it bounds the operation as a whole. -1 when the budget is spent or the client
 * is cancelled. */
int storage_retry_progress(const storage_client *c, storage_retry *r);
/* A Retry-After value in seconds from now: delay-seconds or an HTTP date (RFC 9110: the
 * IMF-fixdate, or the obsolete RFC 850 and asctime forms), now being the wall clock
 * (seconds since the epoch). A date in the past is 0; at most 3600; -1 when malformed. */
double storage_retry_after(const char *value, double now);
/* Sleeps before the next attempt (backoff with jitter, at least retry_after when >= 0; a wait
 * that would reach the end of the budget is cut to half of what is left, or to retry_after,
 * so that the attempt has the rest); -1, without sleeping, when retry_after exceeds the
 * budget or that rest would be under 0.1 s, or (at once, also while sleeping) when the
 * client is cancelled. */
int storage_retry_wait(const storage_client *c, storage_retry *r, double retry_after);

/* XML of S3 answers. The content of the first <tag>...</tag> in [s, end), raw: [*a, *b);
 * -1 when absent. */
int storage_xml_span(const char *s, const char *end, const char *tag, const char **a,
                     const char **b);
/* The text of the first <tag>...</tag> in [s, end), entity-decoded,
 * malloc'd; NULL when absent. *next (may be NULL) is set past the closing tag. */
char *storage_xml_text(const char *s, const char *end, const char *tag, const char **next);
/* Decodes &amp; &lt; &gt; &quot; &apos; &#N; &#xH; of [s, s + n) into a malloc'd string;
 * NULL on a malformed entity. */
char *storage_xml_decode(const char *s, size_t n);

#endif /* AL_STORAGE_HTTP_INTERNAL_H */
