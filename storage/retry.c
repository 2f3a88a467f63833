/*
 * storage/retry.c - the retry clock of one remote operation: exponential backoff with jitter
 * (half the delay fixed, half random), Retry-After honoured, within a time budget for the
 * operation as a whole: bytes received do not extend it, so a server that trickles an answer
 * (a byte every few seconds, each stall abort bringing one more) cannot hold an operation
 * past it. A delay that would reach the end of the budget is cut to half of what is left, so a
 * server that comes back within the budget is still reached and the attempt has time to run;
 * a Retry-After beyond the budget ends the operation at once. Retry-After
 * values (seconds or an HTTP date) are read here too.
 */
#include <curl/curl.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "common/clock_internal.h"
#include "storage/http_internal.h"

#define RETRY_AFTER_MAX_S 3600
#define CANCEL_SLICE_S 0.05
#define FINAL_ATTEMPT_MIN_S 0.1

double storage_retry_after(const char *value, double now) {
  const char *p = value;
  if (*p >= '0' && *p <= '9') {
    double s = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
      if (s < RETRY_AFTER_MAX_S) s = s * 10 + (*p - '0');
    }
    if (*p != '\0') return -1;
    return s > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : s;
  }
  /* An HTTP date: libcurl's parser reads the three forms RFC 9110 allows. A date carries a
   * time of day; without a ':' the value is not taken for one (curl_getdate accepts a bare
   * day or year). */
  time_t t = curl_getdate(value, NULL);
  if (t == (time_t)-1 || strchr(value, ':') == NULL) return -1;
  double d = (double)t - now;
  if (d < 0) d = 0;
  return d > RETRY_AFTER_MAX_S ? RETRY_AFTER_MAX_S : d;
}

void storage_retry_start(const storage_client *c, storage_retry *r) {
  double now = clock_now_s();
  r->deadline = now + c->cfg.total_timeout_s;
  r->attempts = 0;
  r->failures = 0;
  r->rng = (uint64_t)(now * 1e9) ^ (uint64_t)(uintptr_t)r ^ 0x9e3779b97f4a7c15ull;
  if (r->rng == 0) r->rng = 1;
}

int storage_retry_progress(const storage_client *c, storage_retry *r) {
  r->failures = 0;
  return storage_client_cancelled(c) || r->deadline - clock_now_s() <= 0.001 ? -1 : 0;
}

static double rand01(storage_retry *r) {
  r->rng ^= r->rng << 13; /* xorshift64 */
  r->rng ^= r->rng >> 7;
  r->rng ^= r->rng << 17;
  return (double)(r->rng >> 11) / 9007199254740992.0;
}

int storage_retry_wait(const storage_client *c, storage_retry *r, double retry_after) {
  double d = c->cfg.backoff_base_s;
  for (int i = 0; i < r->failures && d < c->cfg.backoff_max_s; i++) d *= 2;
  if (d > c->cfg.backoff_max_s) d = c->cfg.backoff_max_s;
  r->failures++;
  d = d / 2 + rand01(r) * d / 2;
  double left = r->deadline - clock_now_s();
  if (left <= 0.001 || (retry_after >= 0 && retry_after > left)) return -1;
  if (retry_after >= 0 && retry_after > d) d = retry_after;
  /* The budget bounds each attempt too (http_request.c): a wait that would reach its end is
   * cut to half of what is left (never below a Retry-After), so that the attempt after it has
   * the rest to run; when that rest would be under FINAL_ATTEMPT_MIN_S the operation ends
   * instead (an attempt with no time to run would only replace the last real error with a
   * timeout). */
  if (d >= left) {
    d = retry_after > left / 2 ? retry_after : left / 2;
    if (left - d < FINAL_ATTEMPT_MIN_S) return -1;
  }
  /* In slices, so that a cancel ends the wait within one. */
  double end = clock_now_s() + d;
  for (double now = clock_now_s(); now < end; now = clock_now_s()) {
    if (storage_client_cancelled(c)) return -1;
    double s = end - now < CANCEL_SLICE_S ? end - now : CANCEL_SLICE_S;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  return storage_client_cancelled(c) ? -1 : 0;
}
