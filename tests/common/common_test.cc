// common/: the JSON writer gives valid JSON in valid UTF-8 for any bytes (a report once
// emitted raw invalid UTF-8 and NaN costs as `nan`), and the crash-safe
// file helper (atomic_file_internal.h) refuses what it must.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "tests/common/test_util.h"

extern "C" {
#include "common/atomic_file_internal.h"
#include "common/clock_internal.h"
#include "common/env_internal.h"
#include "common/json_write_internal.h"
#include "common/parse_internal.h"
#include "common/url_internal.h"
}

namespace {

TEST(Parse, U64TakesDigitsOnly) {
  uint64_t v = 7;
  EXPECT_EQ(parse_u64("0", &v), 0);
  EXPECT_EQ(v, 0u);
  EXPECT_EQ(parse_u64("18446744073709551615", &v), 0);
  EXPECT_EQ(v, UINT64_MAX);
  for (const char *bad : {"", " 1", " -1", "-1", "+5", "1 ", "1k", "0x10", "18446744073709551616",
                          "99999999999999999999999"}) {
    v = 7;
    EXPECT_EQ(parse_u64(bad, &v), -1) << "'" << bad << "'";
    EXPECT_EQ(v, 7u) << "'" << bad << "' changed the output";
  }
  EXPECT_EQ(parse_u64(nullptr, &v), -1);
}

TEST(Parse, I64AndDouble) {
  int64_t i = 0;
  EXPECT_EQ(parse_i64("-9223372036854775808", &i), 0);
  EXPECT_EQ(i, INT64_MIN);
  EXPECT_EQ(parse_i64("42", &i), 0);
  EXPECT_EQ(i, 42);
  for (const char *bad : {"", " 1", "+1", "--1", "-", "9223372036854775808", "1.5"})
    EXPECT_EQ(parse_i64(bad, &i), -1) << "'" << bad << "'";
  double d = 0;
  EXPECT_EQ(parse_double("0.9", &d), 0);
  EXPECT_DOUBLE_EQ(d, 0.9);
  EXPECT_EQ(parse_double("-2e3", &d), 0);
  EXPECT_DOUBLE_EQ(d, -2000.0);
  for (const char *bad : {"", " 1", "nan", "inf", "1e999", "1x", "0.5 "})
    EXPECT_EQ(parse_double(bad, &d), -1) << "'" << bad << "'";
}

TEST(Env, U64RefusesWhatParseRefuses) {
  setenv("AL_TEST_ENV_U64", " -1", 1);
  EXPECT_EQ(env_u64("AL_TEST_ENV_U64", 5), 5u);
  setenv("AL_TEST_ENV_U64", "0", 1);
  EXPECT_EQ(env_u64("AL_TEST_ENV_U64", 5), 5u);
  setenv("AL_TEST_ENV_U64", "123", 1);
  EXPECT_EQ(env_u64("AL_TEST_ENV_U64", 5), 123u);
  unsetenv("AL_TEST_ENV_U64");
  EXPECT_EQ(env_u64("AL_TEST_ENV_U64", 5), 5u);
}

TEST(Clock, Monotonic) {
  double a = clock_now_s(), b = clock_now_s();
  EXPECT_GT(a, 0.0);
  EXPECT_GE(b, a);
}

std::string Str(const std::string &bytes) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  jsonw_string_n(f, bytes.data(), bytes.size());
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

std::string Num(const char *fmt, double v) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  jsonw_number(f, fmt, v);
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

bool ValidUtf8(const std::string &s) {
  const unsigned char *p = reinterpret_cast<const unsigned char *>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    size_t k = jsonw_utf8_len(p + i, s.size() - i);
    if (!k) return false;
    i += k;
  }
  return true;
}

TEST(JsonWrite, ValidUtf8PassesThrough) {
  EXPECT_EQ(Str("plain"), "\"plain\"");
  EXPECT_EQ(Str("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(Str("\xe2\x82\xac \xf0\x9f\x8e\xac"), "\"\xe2\x82\xac \xf0\x9f\x8e\xac\"");
  EXPECT_EQ(Str("q\"b\\"), "\"q\\\"b\\\\\"");
  EXPECT_EQ(Str(std::string("a\0b\n", 4)), "\"a\\u0000b\\u000a\"");
}

TEST(JsonWrite, EveryInvalidByteBecomesOneReplacementCharacter) {
  EXPECT_EQ(Str("a\xff"
                "b"),
            "\"a\\ufffdb\"");
  EXPECT_EQ(Str("\xc0\xaf"), "\"\\ufffd\\ufffd\"");                       // overlong '/'
  EXPECT_EQ(Str("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");            // a surrogate
  EXPECT_EQ(Str("\xe2\x82"), "\"\\ufffd\\ufffd\"");                       // cut short
  EXPECT_EQ(Str("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); // > U+10FFFF
  EXPECT_EQ(Str("\x80x"), "\"\\ufffdx\"");                                // lone continuation
}

TEST(JsonWrite, AnyBytesGiveValidUtf8) {
  altest::SplitMix64 rng(13);
  for (int t = 0; t < 2000; t++) {
    std::string s(rng.Next() % 40, '\0');
    for (auto &c : s) c = static_cast<char>(rng.Next() & 0xff);
    std::string j = Str(s);
    EXPECT_TRUE(ValidUtf8(j)) << t;
    EXPECT_EQ(j.front(), '"');
    EXPECT_EQ(j.back(), '"');
    for (unsigned char c : j) EXPECT_GE(c, 0x20) << t;
  }
}

TEST(JsonWrite, NonFiniteNumbersAreNull) {
  EXPECT_EQ(Num("%.3f", 1.5), "1.500");
  EXPECT_EQ(Num("%.6g", std::nan("")), "null");
  EXPECT_EQ(Num("%.6g", std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(Num("%.6g", -std::numeric_limits<double>::infinity()), "null");
}

TEST(AtomicFile, WritesAndRefusesNonRegularTargets) {
  std::string d = altest::TmpPath("afile");
  mkdir(d.c_str(), 0755);
  std::string p = d + "/out.txt";
  ASSERT_EQ(afile_write_all(p.c_str(), "hello", 5), AL_OK) << al_last_error();
  EXPECT_EQ(altest::ReadFile(p), "hello");
  chmod(p.c_str(), 0640);
  ASSERT_EQ(afile_write_all(p.c_str(), "again", 5), AL_OK);
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "a replaced file keeps its mode";
  EXPECT_EQ(afile_write_all(d.c_str(), "x", 1), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("directory"));
  EXPECT_EQ(afile_write_all("/dev/null", "x", 1), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("character device"));
  EXPECT_EQ(afile_write_all((d + "/no/such/dir/x").c_str(), "x", 1), AL_EIO);
  afile *f = nullptr;
  ASSERT_EQ(afile_create(&f, p.c_str()), AL_OK);
  fputs("partial", afile_stream(f));
  afile_abort(f);
  EXPECT_EQ(altest::ReadFile(p), "again");
}

TEST(AtomicFile, InputsThatAreNotRegularFilesAreRefusedWithoutBlocking) {
  std::string fifo = altest::TmpPath("afile-fifo");
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  alarm(20);
  int fd = -1;
  EXPECT_EQ(afile_open_input(fifo.c_str(), "manifest", &fd), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("manifest is a FIFO, not a regular file")) << al_last_error();
  EXPECT_EQ(afile_open_input("/dev/zero", "index", &fd), AL_EINVAL);
  EXPECT_EQ(afile_open_input("/", "index", &fd), AL_EINVAL);
  EXPECT_EQ(afile_open_input(altest::TmpPath("nope").c_str(), "index", &fd), AL_ENOTFOUND);
  FILE *f = nullptr;
  std::string reg = altest::TmpPath("afile-reg");
  altest::WriteFile(reg, "x");
  ASSERT_EQ(afile_fopen_input(reg.c_str(), nullptr, &f), AL_OK);
  EXPECT_EQ(fgetc(f), 'x');
  fclose(f);
  alarm(0);
}

std::string Redacted(const char *s) {
  char *r = url_redact(s);
  std::string out = r ? r : "(null)";
  std::free(r);
  return out;
}

// The user:password@ of every URL in a text is shown as ***@, up to the authority's last '@'
// (a password may hold one); '@' outside an authority is left alone.
TEST(Url, UserinfoIsRedactedWhereverAUrlStarts) {
  EXPECT_EQ(Redacted("http://u:p@ss@h/x?a=b@c"), "http://***@h/x?a=b@c");
  EXPECT_EQ(Redacted("S3://key:secret@bkt/k"), "S3://***@bkt/k");
  EXPECT_EQ(Redacted("/data=HTTPS://u:p@h/d"), "/data=HTTPS://***@h/d");
  EXPECT_EQ(Redacted("http://h/a@b"), "http://h/a@b");
  EXPECT_EQ(Redacted("/local/a@b"), "/local/a@b");
  EXPECT_EQ(Redacted("x=ftp://@h y=http://u@"), "x=ftp://***@h y=http://***@");
  size_t at = 0;
  EXPECT_EQ(url_userinfo("Http://u:p@h/", &at), 4u);
  EXPECT_EQ(at, 7u);
  EXPECT_EQ(url_userinfo("/data=http://u:p@h/", &at), 0u); // not a URL itself
  EXPECT_TRUE(url_has_scheme("HTTPS://h/", "https"));
  EXPECT_FALSE(url_has_scheme("https2://h/", "https"));
  EXPECT_EQ(url_scheme_len("s3:/b"), 0u);
}

} // namespace
