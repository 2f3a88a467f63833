// storage/retry.c: Retry-After values, in seconds and as HTTP dates in the three forms
// RFC 9110 allows, against a fixed wall clock; malformed values are not a delay. A cancel of
// the client ends a retry wait at once, and later operations fail without a request.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

extern "C" {
#include "common/clock_internal.h"
#include "storage/http_internal.h"
}

namespace {

const double kDate = 1445412480; // Wed, 21 Oct 2015 07:28:00 GMT

TEST(RetryAfter, Seconds) {
  EXPECT_EQ(storage_retry_after("0", kDate), 0);
  EXPECT_EQ(storage_retry_after("120", kDate), 120);
  EXPECT_EQ(storage_retry_after("86400", kDate), 3600); // capped
  EXPECT_EQ(storage_retry_after("99999999999999999999999", kDate), 3600);
}

TEST(RetryAfter, HttpDates) {
  EXPECT_EQ(storage_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", kDate), 30);
  EXPECT_EQ(storage_retry_after("Wednesday, 21-Oct-15 07:28:30 GMT", kDate), 30);
  EXPECT_EQ(storage_retry_after("Wed Oct 21 07:28:30 2015", kDate), 30);
  EXPECT_EQ(storage_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", kDate), 0); // past
  EXPECT_EQ(storage_retry_after("Thu, 22 Oct 2015 07:28:00 GMT", kDate), 3600);
}

TEST(RetryAfter, Malformed) {
  EXPECT_EQ(storage_retry_after("", kDate), -1);
  EXPECT_EQ(storage_retry_after("12abc", kDate), -1);
  EXPECT_EQ(storage_retry_after("-5", kDate), -1);
  EXPECT_EQ(storage_retry_after("soon", kDate), -1);
  EXPECT_EQ(storage_retry_after("2015", kDate), 2015);           // digits are seconds, never a year
  EXPECT_EQ(storage_retry_after("Wed, 21 Oct 2015", kDate), -1); // no time of day
}

TEST(RetryClock, CancelEndsTheWait) {
  storage_config cfg;
  ASSERT_EQ(storage_config_make(nullptr, nullptr, 0, 30, &cfg), AL_OK) << al_last_error();
  storage_client *c = nullptr;
  ASSERT_EQ(storage_client_open(&cfg, &c), AL_OK) << al_last_error();
  storage_retry r;
  storage_retry_start(c, &r);
  std::thread canceller([c] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    storage_client_cancel(c);
  });
  double t0 = clock_now_s();
  EXPECT_EQ(storage_retry_wait(c, &r, 20), -1); // a 20 s Retry-After within a 30 s budget
  double waited = clock_now_s() - t0;
  canceller.join();
  EXPECT_LT(waited, 10) << "the wait outlived the cancel";
  EXPECT_GE(waited, 0.1) << "the wait ended before the cancel";
  // Cancelled for good: an open fails without waiting out a budget, saying why.
  storage_http_object *obj = nullptr;
  t0 = clock_now_s();
  EXPECT_EQ(storage_http_open(c, "http://127.0.0.1:9/x", &obj), AL_EIO);
  EXPECT_LT(clock_now_s() - t0, 10);
  std::string err = al_last_error();
  EXPECT_NE(err.find("http://127.0.0.1:9/x: cancelled"), std::string::npos) << err;
  storage_client_close(c);
}

} // namespace
