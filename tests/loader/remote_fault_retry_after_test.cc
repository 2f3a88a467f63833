// loader/remote_retry.c: Retry-After values, in seconds and as HTTP dates in the three forms
// RFC 9110 allows, against a fixed wall clock; malformed values are not a delay.
#include <gtest/gtest.h>

extern "C" {
#include "loader/remote_xfer_internal.h"
}

namespace {

const double kDate = 1445412480; // Wed, 21 Oct 2015 07:28:00 GMT

TEST(RetryAfter, Seconds) {
  EXPECT_EQ(remote_retry_after("0", kDate), 0);
  EXPECT_EQ(remote_retry_after("120", kDate), 120);
  EXPECT_EQ(remote_retry_after("86400", kDate), 3600); // capped
  EXPECT_EQ(remote_retry_after("99999999999999999999999", kDate), 3600);
}

TEST(RetryAfter, HttpDates) {
  EXPECT_EQ(remote_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", kDate), 30);
  EXPECT_EQ(remote_retry_after("Wednesday, 21-Oct-15 07:28:30 GMT", kDate), 30);
  EXPECT_EQ(remote_retry_after("Wed Oct 21 07:28:30 2015", kDate), 30);
  EXPECT_EQ(remote_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", kDate), 0); // past
  EXPECT_EQ(remote_retry_after("Thu, 22 Oct 2015 07:28:00 GMT", kDate), 3600);
}

TEST(RetryAfter, Malformed) {
  EXPECT_EQ(remote_retry_after("", kDate), -1);
  EXPECT_EQ(remote_retry_after("12abc", kDate), -1);
  EXPECT_EQ(remote_retry_after("-5", kDate), -1);
  EXPECT_EQ(remote_retry_after("soon", kDate), -1);
  EXPECT_EQ(remote_retry_after("2015", kDate), 2015);           // digits are seconds, never a year
  EXPECT_EQ(remote_retry_after("Wed, 21 Oct 2015", kDate), -1); // no time of day
}

} // namespace
