/*
 * storage/http_request.c - one HTTP request on a curl easy handle (headers parsed, a range's bytes
 * checked and put in place, other bodies kept) and the retry clock (backoff with jitter
 * within a time budget).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/clock_internal.h"
#include "storage/http_internal.h"

#define STORAGE_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* The value of header line [p, p + n) when its name is `name`, trimmed: [*v, *v + *len). */
static int header_span(const char *p, size_t n, const char *name, const char **v, size_t *len) {
  size_t nl = strlen(name);
  if (n <= nl || strncasecmp(p, name, nl) != 0 || p[nl] != ':') return 0;
  const char *a = p + nl + 1, *end = p + n;
  while (a < end && (*a == ' ' || *a == '\t')) a++;
  while (end > a && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
  *v = a;
  *len = (size_t)(end - a);
  return 1;
}

/* The same, copied into out (cap bytes); 0 also when it does not fit (the values read this
 * way, numbers and dates, are short). */
static int header_value(const char *p, size_t n, const char *name, char *out, size_t cap) {
  const char *v;
  size_t len;
  if (!header_span(p, n, name, &v, &len) || len >= cap) return 0;
  memcpy(out, v, len);
  out[len] = '\0';
  return 1;
}

static int parse_u64_prefix(const char **s, uint64_t *v) {
  const char *p = *s;
  uint64_t r = 0;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (r > (UINT64_MAX - 9) / 10) return -1;
    r = r * 10 + (uint64_t)(*p - '0');
  }
  *s = p;
  *v = r;
  return 0;
}

/* "bytes A-B/TOTAL" (TOTAL may be '*': unknown, cr_total 0). */
static void parse_content_range(storage_xfer *x, const char *v) {
  if (strncmp(v, "bytes ", 6) != 0) return;
  const char *p = v + 6;
  if (parse_u64_prefix(&p, &x->cr_start) != 0 || *p++ != '-') return;
  if (parse_u64_prefix(&p, &x->cr_end) != 0 || *p++ != '/') return;
  x->cr_total = 0;
  if (*p != '*' && (parse_u64_prefix(&p, &x->cr_total) != 0 || *p != '\0')) return;
  x->have_range = x->cr_end >= x->cr_start;
}

static void reset_response(storage_xfer *x, long status) {
  x->status = status;
  free(x->answer_etag);
  x->answer_etag = NULL;
  x->have_range = x->have_length = 0;
  x->retry_after = -1;
  x->body_len = 0;
  if (x->body != NULL) x->body[0] = '\0';
}

/* libcurl's header call, once per line; a 0 return (out of memory) aborts the transfer. */
static size_t on_header(char *p, size_t size, size_t n, void *ud) {
  storage_xfer *x = ud;
  size_t len = size * n;
  char v[256];
  const char *e;
  size_t elen;
  if (len > 9 && strncmp(p, "HTTP/", 5) == 0) {
    const char *sp = memchr(p, ' ', len);
    reset_response(x, sp ? strtol(sp + 1, NULL, 10) : 0);
    x->in_headers = 1;
  } else if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) {
    x->in_headers = 0; /* the blank line after the headers */
  } else if (header_span(p, len, "etag", &e, &elen)) {
    free(x->answer_etag);
    if ((x->answer_etag = strndup(e, elen)) == NULL) return 0;
  } else if (header_value(p, len, "content-range", v, sizeof v)) {
    parse_content_range(x, v);
  } else if (header_value(p, len, "content-length", v, sizeof v)) {
    const char *q = v;
    x->have_length = parse_u64_prefix(&q, &x->length) == 0 && *q == '\0';
  } else if (header_value(p, len, "retry-after", v, sizeof v)) {
    x->retry_after = storage_retry_after(v, (double)time(NULL));
  }
  return len;
}

static int keep_body(storage_xfer *x, const char *p, size_t len) {
  size_t max = x->body_max > STORAGE_ERR_BODY_CAP ? x->body_max : STORAGE_ERR_BODY_CAP;
  if (x->body_len + len > max) len = max - x->body_len; /* the rest is dropped */
  char *b = realloc(x->body, x->body_len + len + 1);
  if (b == NULL) return -1;
  memcpy(b + x->body_len, p, len);
  x->body = b;
  x->body_len += len;
  b[x->body_len] = '\0';
  return 0;
}

static int set_bad(storage_xfer *x, int verdict, const char *why) {
  x->verdict = verdict;
  snprintf(x->why, sizeof x->why, "%s", why);
  return -1;
}

/* An ETag for a message: as sent, or its start and its length when long. */
static void etag_shown(const char *etag, char *out, size_t cap) {
  size_t n = strlen(etag);
  if (n <= 80) {
    snprintf(out, cap, "%s", etag);
  } else {
    snprintf(out, cap, "%.72s... (%zu bytes)", etag, n);
  }
}

static int etag_changed(storage_xfer *x) {
  char was[128], now[128], why[300];
  etag_shown(x->etag, was, sizeof was);
  etag_shown(x->answer_etag, now, sizeof now);
  snprintf(why, sizeof why, "ETag %s, now %s", was, now);
  return set_bad(x, STORAGE_V_CHANGED, why);
}

static int size_changed(storage_xfer *x, uint64_t now) {
  char why[96];
  snprintf(why, sizeof why, "size %" PRIu64 ", now %" PRIu64, x->expect_total, now);
  return set_bad(x, STORAGE_V_CHANGED, why);
}

/* Before a range's first byte: is this the pinned object, and the range asked for? */
static int check_range_headers(storage_xfer *x) {
  if (x->etag && x->etag[0] && x->answer_etag && strcmp(x->answer_etag, x->etag) != 0) {
    return etag_changed(x);
  }
  if (x->status == 200) {
    if (x->have_length && x->expect_total && x->length != x->expect_total) {
      return size_changed(x, x->length);
    }
    return 0;
  }
  uint64_t last = x->range_off + x->range_len - 1;
  if (!x->have_range) return set_bad(x, STORAGE_V_BAD, "206 answer without a Content-Range");
  if (x->cr_start != x->range_off || x->cr_end > last) {
    char why[160];
    snprintf(why, sizeof why, "asked for bytes %" PRIu64 "-%" PRIu64 ", got %" PRIu64 "-%" PRIu64,
             x->range_off, last, x->cr_start, x->cr_end);
    return set_bad(x, STORAGE_V_BAD, why);
  }
  if (x->cr_total && x->expect_total && x->cr_total != x->expect_total) {
    return size_changed(x, x->cr_total);
  }
  return 0;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  storage_xfer *x = ud;
  size_t len = size * n;
  int ok = x->status == 200 || x->status == 206;
  if (x->dst == NULL || !ok) return keep_body(x, p, len) == 0 ? len : 0;
  if (!x->checked) {
    if (check_range_headers(x) != 0) return 0;
    x->checked = 1;
  }
  size_t i = 0;
  if (x->status == 200 && x->discarded < x->range_off) {
    uint64_t skip = x->range_off - x->discarded;
    i = skip < len ? (size_t)skip : len;
    x->discarded += i;
  }
  uint64_t room = x->range_len - x->got;
  size_t take = (len - i) < room ? len - i : (size_t)room;
  if (x->status == 206 && take < len - i) {
    return set_bad(x, STORAGE_V_BAD, "more bytes than the Content-Range"), 0;
  }
  memcpy(x->dst + x->got, p + i, take);
  x->got += take;
  if (x->status == 200 && x->got == x->range_len) {
    x->verdict = STORAGE_V_FULL; /* the rest of the object is not wanted */
    return 0;
  }
  return len;
}

/* If-Match goes with a strong ETag only (a weak one never matches there). */
static int sends_if_match(const storage_xfer *x) {
  return x->etag && x->etag[0] && strncmp(x->etag, "W/", 2) != 0;
}

static struct curl_slist *request_headers(const storage_client *c, const storage_target *t,
                                          const storage_xfer *x, int *oom) {
  struct curl_slist *h = NULL, *n;
  char line[96];
  char *if_match = NULL;
  *oom = 0;
  if (x->range_len > 0) {
    snprintf(line, sizeof line, "Range: bytes=%" PRIu64 "-%" PRIu64, x->range_off,
             x->range_off + x->range_len - 1);
    if ((n = curl_slist_append(h, line)) == NULL) goto fail;
    h = n;
  }
  if (sends_if_match(x)) {
    if (asprintf(&if_match, "If-Match: %s", x->etag) < 0) goto fail;
    n = curl_slist_append(h, if_match);
    free(if_match);
    if (n == NULL) goto fail;
    h = n;
  }
  /* SigV4 for S3 needs the payload's hash; libcurl signs it from this header. GET and HEAD
   * send no payload. */
  if (t->s3 && c->userpwd && c->payload_header) {
    if ((n = curl_slist_append(h, "x-amz-content-sha256: " STORAGE_EMPTY_SHA256)) == NULL) {
      goto fail;
    }
    h = n;
  }
  if (t->s3 && c->userpwd && c->token_header) {
    if ((n = curl_slist_append(h, c->token_header)) == NULL) goto fail;
    h = n;
  }
  for (const char *const *e = c->test_headers; e != NULL && *e != NULL; e++) {
    if ((n = curl_slist_append(h, *e)) == NULL) goto fail;
    h = n;
  }
  return h;
fail:
  curl_slist_free_all(h);
  *oom = 1;
  return NULL;
}

/* libcurl's progress call: a non-zero return aborts the transfer (storage_client_cancel). */
static int on_progress(void *client, curl_off_t dl_total, curl_off_t dl_now, curl_off_t ul_total,
                       curl_off_t ul_now) {
  (void)dl_total, (void)dl_now, (void)ul_total, (void)ul_now;
  return storage_client_cancelled(client);
}

static void set_options(const storage_client *c, CURL *h, const storage_target *t, storage_xfer *x,
                        struct curl_slist *hdrs, struct curl_slist *connect_to, char *errbuf) {
  curl_easy_reset(h); /* keeps the connection and DNS caches */
  curl_easy_setopt(h, CURLOPT_URL, t->http);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "adaptiveload");
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  if (connect_to != NULL) curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to);
  if (x->head) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->cfg.connect_timeout_s * 1000));
  /* A stall: under 1 byte/s for stall_timeout_s (waiting for the answer included). */
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(c->cfg.stall_timeout_s + 0.999));
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)c);
  /* The whole request, a slow answer's trickle included, ends by the operation's deadline. */
  if (x->deadline > 0) {
    double left = x->deadline - clock_now_s();
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, left > 0.001 ? (long)(left * 1000 + 0.999) : 1L);
  }
  /* An S3 key is opaque: "x/../a.tar" names that key, not a.tar (SigV4 signs it as sent). */
  if (t->s3) curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
  if (t->s3 && c->userpwd) {
    curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
    curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
  } else if (!t->s3) {
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
  }
}

static int retryable_curl(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_HTTP2:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_HTTP2_STREAM: return 1;
    default: return 0;
  }
}

/* " (Code: Message)" from an S3 error body, or "". */
static void s3_error_detail(const storage_xfer *x, char *out, size_t cap) {
  out[0] = '\0';
  if (x->body == NULL) return;
  const char *end = x->body + x->body_len;
  char *code = storage_xml_text(x->body, end, "Code", NULL);
  char *msg = storage_xml_text(x->body, end, "Message", NULL);
  if (code) snprintf(out, cap, " (%s%s%s)", code, msg ? ": " : "", msg ? msg : "");
  free(code);
  free(msg);
}

/* Headers over libcurl's limits (a line over 100 KiB: "out of memory"; over 300 KiB in all: a
 * receive error saying so), which a retry would only receive again. */
static int headers_too_long(const storage_xfer *x, CURLcode rc, const char *errbuf) {
  if (!x->in_headers) return 0;
  return rc == CURLE_OUT_OF_MEMORY ||
         (rc == CURLE_RECV_ERROR && strstr(errbuf, "Too large response headers") != NULL);
}

static int classify(storage_xfer *x, CURLcode rc, const char *errbuf, char *msg, size_t cap) {
  char detail[512], shown[128];
  if (x->verdict == STORAGE_V_CHANGED) {
    snprintf(msg, cap, "the object changed since it was opened (%s)", x->why);
    return STORAGE_XFER_FATAL;
  }
  if (x->verdict == STORAGE_V_BAD)
    return snprintf(msg, cap, "bad answer: %s", x->why), STORAGE_XFER_FATAL;
  if (x->verdict == STORAGE_V_FULL) return STORAGE_XFER_OK;
  if (rc == CURLE_ABORTED_BY_CALLBACK) return snprintf(msg, cap, "cancelled"), STORAGE_XFER_FATAL;
  if (headers_too_long(x, rc, errbuf)) {
    snprintf(msg, cap,
             "the answer's headers are too long (libcurl takes a header line of up to 100 KiB, 300 KiB of headers in all)%s%s",
             errbuf[0] ? ": " : "", errbuf);
    return STORAGE_XFER_FATAL;
  }
  if (rc != CURLE_OK) {
    snprintf(msg, cap, "%s%s%s", curl_easy_strerror(rc), errbuf[0] ? ": " : "", errbuf);
    return retryable_curl(rc) ? STORAGE_XFER_RETRY : STORAGE_XFER_FATAL;
  }
  long s = x->status;
  if (s >= 200 && s < 300) {
    if (x->dst == NULL || x->got == x->range_len) return STORAGE_XFER_OK;
    snprintf(msg, cap, "short answer: %" PRIu64 " of %" PRIu64 " bytes", x->got, x->range_len);
    return STORAGE_XFER_RETRY;
  }
  s3_error_detail(x, detail, sizeof detail);
  if (s == 412) {
    etag_shown(x->etag ? x->etag : "", shown, sizeof shown);
    snprintf(msg, cap, "the object changed since it was opened (HTTP 412, ETag no longer %s)",
             shown);
    return STORAGE_XFER_FATAL;
  }
  snprintf(msg, cap, "HTTP %ld%s", s, detail);
  return (s == 408 || s == 429 || s >= 500) ? STORAGE_XFER_RETRY : STORAGE_XFER_FATAL;
}

int storage_xfer_perform(const storage_client *c, CURL *h, const storage_target *t, storage_xfer *x,
                         char *msg, size_t msg_cap) {
  char errbuf[CURL_ERROR_SIZE] = "";
  if (storage_client_cancelled(c)) return snprintf(msg, msg_cap, "cancelled"), STORAGE_XFER_FATAL;
  int oom;
  struct curl_slist *hdrs = request_headers(c, t, x, &oom);
  x->got = x->discarded = 0;
  x->checked = 0;
  x->verdict = STORAGE_V_NONE;
  x->why[0] = '\0';
  reset_response(x, 0);
  x->in_headers = 1; /* until the answer's headers end */
  struct curl_slist *connect_to = NULL;
  if (!oom && c->connect_to != NULL) {
    connect_to = curl_slist_append(NULL, c->connect_to);
    oom = connect_to == NULL;
  }
  if (oom) {
    curl_slist_free_all(hdrs);
    return snprintf(msg, msg_cap, "out of memory"), STORAGE_XFER_FATAL;
  }
  set_options(c, h, t, x, hdrs, connect_to, errbuf);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
  curl_easy_setopt(h, CURLOPT_CONNECT_TO, NULL);
  curl_slist_free_all(hdrs);
  curl_slist_free_all(connect_to);
  return classify(x, rc, errbuf, msg, msg_cap);
}

void storage_xfer_free(storage_xfer *x) {
  free(x->body);
  x->body = NULL;
  x->body_len = 0;
  free(x->answer_etag);
  x->answer_etag = NULL;
}
