// Reports: inspect's JSON, JSONL and SVG, the side-by-side comparison.
#include <gtest/gtest.h>
#include <jansson.h>

#include <cstdio>
#include <sstream>
#include <string>

#include "tests/planner/plan_fixtures.h"
#include "manifest/al_report.h"

namespace {

std::string Capture(void (*fn)(FILE *, const al_manifest *), const al_manifest *m) {
  std::string path = altest::TmpPath("out.txt");
  FILE *f = fopen(path.c_str(), "w");
  fn(f, m);
  fclose(f);
  return altest::ReadFile(path);
}

al_manifest *Plan(uint32_t world, al_policy pol, const altest::Shapes &s, const char *name) {
  al_plan_options o{};
  o.world = world;
  o.policy = pol;
  return altest::PlanAndLoad(s, o, name);
}

TEST(Report, JsonHasTheFields) {
  altest::Shapes s = altest::MakeShapes(2000, 41);
  al_manifest *m = Plan(8, AL_POLICY_ADAPTIVE, s, "r.alm");
  ASSERT_TRUE(m);
  std::string text = Capture(al_manifest_print_json, m);
  json_error_t err;
  json_t *j = json_loads(text.c_str(), 0, &err);
  ASSERT_TRUE(j) << err.text << "\n" << text;
  for (const char *k : {"policy", "world", "steps", "samples", "dropped", "padded", "tokens",
                        "imbalance_cv", "bubble", "predicted_seconds", "predicted_tokens_per_s"})
    EXPECT_TRUE(json_object_get(j, k)) << k;
  EXPECT_STREQ(json_string_value(json_object_get(j, "policy")), "adaptive");
  EXPECT_EQ(json_integer_value(json_object_get(j, "samples")), 2000);
  al_manifest_info in = altest::Info(m);
  EXPECT_NEAR(json_number_value(json_object_get(j, "predicted_tokens_per_s")),
              (double)in.tokens / in.predicted_seconds, 1.0);
  json_decref(j);
  al_manifest_free(m);
}

TEST(Report, JsonlOneLinePerMicroBatch) {
  altest::Shapes s = altest::MakeShapes(600, 43);
  al_manifest *m = Plan(3, AL_POLICY_ADAPTIVE, s, "r2.alm");
  ASSERT_TRUE(m);
  std::string path = altest::TmpPath("out.jsonl");
  FILE *f = fopen(path.c_str(), "w");
  ASSERT_EQ(al_manifest_print_jsonl(f, m), AL_OK);
  fclose(f);
  std::istringstream lines(altest::ReadFile(path));
  std::string line;
  size_t n = 0, keys = 0;
  while (std::getline(lines, line)) {
    json_error_t err;
    json_t *j = json_loads(line.c_str(), 0, &err);
    ASSERT_TRUE(j) << err.text;
    for (const char *k : {"step", "rank", "micro", "bucket", "keys", "tokens"})
      ASSERT_TRUE(json_object_get(j, k)) << k;
    ASSERT_EQ(json_array_size(json_object_get(j, "keys")),
              json_array_size(json_object_get(j, "tokens")));
    keys += json_array_size(json_object_get(j, "keys"));
    json_decref(j);
    n++;
  }
  al_manifest_info in = altest::Info(m);
  EXPECT_EQ(n, in.micro_batches);
  EXPECT_EQ(keys, in.samples + in.padded);
  al_manifest_free(m);
}

TEST(Report, SvgSummaryAndCompare) {
  altest::Shapes s = altest::MakeShapes(3000, 47);
  al_manifest *a = Plan(8, AL_POLICY_ADAPTIVE, s, "ra.alm");
  al_manifest *e = Plan(8, AL_POLICY_EQUAL_TOKEN, s, "re.alm");
  ASSERT_TRUE(a && e);
  std::string svg = altest::TmpPath("load.svg");
  ASSERT_EQ(al_manifest_write_svg(e, svg.c_str()), AL_OK);
  std::string text = altest::ReadFile(svg);
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_TRUE(altest::Contains(text, "</svg>"));
  EXPECT_TRUE(altest::Contains(text, "equal-token"));
  std::string path = altest::TmpPath("sum.txt");
  FILE *f = fopen(path.c_str(), "w");
  al_manifest_print_summary(f, a, "ra.alm");
  al_plan_compare_print(f, a, e);
  fclose(f);
  std::string sum = altest::ReadFile(path);
  EXPECT_TRUE(altest::Contains(sum, "imbalance CV"));
  EXPECT_TRUE(altest::Contains(sum, "buckets with samples"));
  EXPECT_TRUE(altest::Contains(sum, "predicted tokens/s"));
  EXPECT_EQ(al_manifest_write_svg(a, "/nonexistent/dir/x.svg"), AL_EIO);
  al_manifest_free(a);
  al_manifest_free(e);
}

} // namespace
