// Benchmark CSV fields per RFC 4180: a field in double quotes may hold commas, line breaks and
// doubled quotes (""), in the header and in data rows; unquoted fields parse as before.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "tests/common/test_util.h"

extern "C" {
#include "cost/al_cost.h"
}

namespace {

std::string Rows(const char *fmt) {
  std::string out;
  for (int i = 1; i <= 10; i++) {
    char line[256];
    snprintf(line, sizeof line, fmt, i, 4096 * i, 2.5 * i);
    out += line;
  }
  return out;
}

// Parses text; on success checks the rows against B = i, S = 4096 i, ms = 2.5 i.
int Parse(const std::string &text, al_bench *b) {
  memset(b, 0x5a, sizeof *b); // poisoned, but for its size
  b->struct_size = sizeof *b;
  int rc = al_bench_parse(b, text.data(), text.size(), "q.csv");
  if (rc) return rc;
  EXPECT_EQ(b->n, 10u);
  for (size_t i = 0; i < b->n; i++) {
    EXPECT_EQ(b->B[i], i + 1.0);
    EXPECT_EQ(b->S[i], 4096.0 * (i + 1));
    EXPECT_EQ(b->ms[i], 2.5 * (i + 1));
  }
  return rc;
}

TEST(BenchCsvQuotes, FullyQuotedHeaderAndRows) {
  al_bench b = AL_BENCH_INIT;
  // What spreadsheets and Python's csv.QUOTE_ALL write: refused before with "missing column 'B'".
  ASSERT_EQ(Parse("\"B\",\"S\",\"step_ms\"\n" + Rows("\"%d\",\"%d\",\"%g\"\n"), &b), AL_OK)
      << al_last_error();
  al_bench_free(&b);
  ASSERT_EQ(Parse("\"B\",\"S\",\"step_ms\"\r\n" + Rows("%d,%d,%g\r\n"), &b), AL_OK)
      << al_last_error();
  al_bench_free(&b);
  ASSERT_EQ(Parse("  \"B\" , S,\"step_ms\"  \n" + Rows(" \"%d\" ,%d, %g\n"), &b), AL_OK)
      << al_last_error();
  al_bench_free(&b);
}

TEST(BenchCsvQuotes, CommasQuotesAndLineBreaksInsideQuotes) {
  al_bench b = AL_BENCH_INIT;
  // Other columns may hold anything quoted: commas, doubled quotes, a line break.
  std::string text = "\"note, free text\",B,S,\"the \"\"step\"\" ms\",step_ms\n";
  for (int i = 1; i <= 10; i++) {
    char line[256];
    snprintf(line, sizeof line, "\"run %d, \"\"warm\"\"\nsecond line\",%d,%d,x,%g\n", i, i,
             4096 * i, 2.5 * i);
    text += line;
  }
  ASSERT_EQ(Parse(text, &b), AL_OK) << al_last_error();
  al_bench_free(&b);
  // A doubled quote in a header name is one quote: "step""ms" is not step_ms.
  EXPECT_EQ(Parse("B,S,\"step\"\"_ms\"\n" + Rows("%d,%d,%g\n"), &b), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("q.csv: line 1 (header): missing column 'step_ms'"))
      << al_last_error();
}

TEST(BenchCsvQuotes, ErrorsNameTheLine) {
  al_bench b = AL_BENCH_INIT;
  // Line numbers count the line breaks inside quoted fields.
  std::string text = "note,B,S,step_ms\n\"a\nb\",1,4096,2.5\n" + Rows("x,%d,%d,%g\n");
  text += "x,1,\"40\"96\",3\n";
  EXPECT_EQ(Parse(text, &b), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("q.csv: line 14 column 3: text after the closing quote"))
      << al_last_error();
  EXPECT_EQ(Parse("B,S,step_ms\n" + Rows("%d,%d,%g\n") + "1,\"4096,2\n", &b), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("q.csv: line 12 column 2: quoted field not closed"))
      << al_last_error();
  EXPECT_EQ(Parse("B,S,step_ms\n1,\"4 096\",3\n" + Rows("%d,%d,%g\n"), &b), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("q.csv: line 2 column 2 (S): '4 096' is not a number"))
      << al_last_error();
  // Unquoted fields as before: comments, blank lines, a field count that differs.
  ASSERT_EQ(Parse("# bench\n\nB,S,step_ms\n" + Rows("%d,%d,%g\n") + "\n", &b), AL_OK)
      << al_last_error();
  al_bench_free(&b);
  EXPECT_EQ(Parse("B,S,step_ms\n1,4096\n" + Rows("%d,%d,%g\n"), &b), AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("q.csv: line 2: 2 fields, the header has 3"))
      << al_last_error();
}

} // namespace
