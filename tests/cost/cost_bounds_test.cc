// Cost model bounds: a cost file whose predictions would be infinite, NaN, zero or negative
// somewhere in the planner's range (S = 1 .. 2^20 tokens per sample, B = 1 .. 2^32 - 1) is
// refused on load, and a benchmark whose fit would be refused there is refused by the fit
// itself, with the same reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "tests/common/test_util.h"

extern "C" {
#include "cost/al_cost.h"
}

namespace {

// A fitted-looking model of one family with the given parameters (what a forged or damaged
// cost file holds: al_cost_save writes any parameters).
al_cost_model Forged(al_cost_family f, double a, double b, double c) {
  al_cost_model m = AL_COST_MODEL_INIT;
  m.fit.family = f;
  m.fit.params[0] = a, m.fit.params[1] = b, m.fit.params[2] = c;
  m.rows = 39;
  m.min_tokens = 4096;
  snprintf(m.source, sizeof m.source, "forged");
  return m;
}

// al_cost_load of a saved model: its status, the error text in *why.
int SaveLoad(const al_cost_model &m, std::string *why) {
  std::string path = altest::TmpPath("forged.alcost");
  EXPECT_EQ(al_cost_save(&m, path.c_str()), AL_OK) << al_last_error();
  al_cost_model r = AL_COST_MODEL_INIT;
  memset(&r, 0x5a, sizeof r); // poisoned, but for its size
  r.struct_size = sizeof r;
  int rc = al_cost_load(&r, path.c_str());
  *why = rc ? al_last_error() : "";
  if (rc == AL_OK) {
    for (double B : {1.0, 2.0, 1e6, 4294967295.0})
      for (double S : {1.0, 256.0, 65536.0, 1048576.0}) {
        double t = al_cost_predict(&r, (uint64_t)B, (uint64_t)S);
        EXPECT_TRUE(std::isfinite(t) && t > 0) << "B " << B << " S " << S << ": " << t;
      }
  }
  return rc;
}

TEST(CostBounds, TheShippedFitsLoad) {
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&m), AL_OK) << al_last_error();
  std::string why;
  EXPECT_EQ(SaveLoad(m, &why), AL_OK) << why;
  al_cost_model alt = m;
  alt.fit = m.alt; // the power fit of the same benchmark
  EXPECT_EQ(SaveLoad(alt, &why), AL_OK) << why;
  EXPECT_EQ(SaveLoad(Forged(AL_COST_POWER, 0, 1e-3, 4.0), &why), AL_OK) << why; // p = 4 is in
  EXPECT_EQ(SaveLoad(Forged(AL_COST_POLY2, 0.5, 2e-3, 0), &why), AL_OK) << why; // linear
  // A small negative S^2 term that keeps c(S) growing up to 2^20 tokens.
  EXPECT_EQ(SaveLoad(Forged(AL_COST_POLY2, 0.5, 2e-3, -9e-10), &why), AL_OK) << why;
  // A negative intercept above -c(1): t(1, 1) > 0.
  EXPECT_EQ(SaveLoad(Forged(AL_COST_POLY2, -1e-3, 2e-3, 1e-7), &why), AL_OK) << why;
}

struct Bad {
  al_cost_family f;
  double a, b, c;
  const char *fragment;
};

TEST(CostBounds, ForgedModelsAreRefusedOnLoadNamingTheBound) {
  const Bad cases[] = {
      // p = 100: c(65536) is infinite, plan printed "imbalance CV -nan%, predicted inf s".
      {AL_COST_POWER, 3, 1e-4, 100, "exponent p = 100 outside (0, 4]"},
      {AL_COST_POWER, 3, 1e-4, 4.5, "exponent p = 4.5 outside (0, 4]"},
      {AL_COST_POWER, 3, 1e-4, 0, "exponent p = 0 outside (0, 4]"},
      {AL_COST_POWER, 3, 1e-4, -1, "exponent p = -1 outside (0, 4]"},
      {AL_COST_POWER, 3, -1e-4, 1.4, "per-sample cost does not grow with S"},
      {AL_COST_POWER, 3, 0, 1.4, "per-sample cost does not grow with S"},
      // Finite parameters, infinite or huge predictions.
      {AL_COST_POWER, 3, 1e250, 4, "above 1e+100 ms"},
      {AL_COST_POLY2, 1e101, 1e-3, 0, "above 1e+100 ms"},
      {AL_COST_POLY2, 3, 1e90, 1e90, "above 1e+100 ms"},
      // Per-sample cost <= 0 or shrinking within the range.
      {AL_COST_POLY2, 3, 0, 0, "per-sample cost does not grow with S"},
      {AL_COST_POLY2, 3, -1e-3, 8e-4, "per-sample cost c(1) = "}, // grows, but from <= 0
      {AL_COST_POLY2, 3, 2e-3, -1e-7, "per-sample cost does not grow with S"},
      {AL_COST_POLY2, 3, 2e-3, -1e-9, "per-sample cost does not grow with S"},
      // Negative predictions of small micro-batches.
      {AL_COST_POLY2, -5, 2e-3, 1e-7, "t(1, 1) = "},
      {AL_COST_POWER, -5, 1e-3, 1.5, "t(1, 1) = "},
  };
  for (const Bad &c : cases) {
    std::string why;
    EXPECT_EQ(SaveLoad(Forged(c.f, c.a, c.b, c.c), &why), AL_EFORMAT)
        << al_cost_family_name(c.f) << " " << c.a << " " << c.b << " " << c.c;
    EXPECT_NE(why.find(c.fragment), std::string::npos) << why;
    EXPECT_NE(why.find("forged.alcost"), std::string::npos) << why;
  }
}

std::string Csv(double (*f)(double, double)) {
  std::string csv = "B,S,step_ms\n";
  for (double S : {1024.0, 4096.0, 16384.0, 65536.0})
    for (double B : {1.0, 2.0, 4.0, 8.0, 16.0}) {
      if (B * S < 4096) continue;
      char line[128];
      snprintf(line, sizeof line, "%.0f,%.0f,%.6f\n", B, S, f(B, S));
      csv += line;
    }
  return csv;
}

int Fit(const std::string &csv, al_cost_family fam, al_cost_model *m) {
  al_bench b = AL_BENCH_INIT;
  int rc = al_bench_parse(&b, csv.data(), csv.size(), "flat.csv");
  EXPECT_EQ(rc, AL_OK) << al_last_error();
  if (rc) return rc;
  al_cost_fit_options o{};
  o.family = fam;
  memset(m, 0x5a, sizeof *m); // poisoned, but for its size
  m->struct_size = sizeof *m;
  rc = al_cost_fit_bench(&b, &o, m);
  al_bench_free(&b);
  return rc;
}

// Times that do not grow with B*S fitted "successfully" before and plan --cost refused the
// model; the fit refuses it now, naming the reason.
TEST(CostBounds, AFitThePlannerWouldRefuseIsRefusedByTheFit) {
  auto shrinking = [](double B, double S) { return 50.0 - 1e-5 * B * S; };
  for (al_cost_family fam : {AL_COST_AUTO, AL_COST_POLY2, AL_COST_POWER}) {
    al_cost_model m = AL_COST_MODEL_INIT;
    EXPECT_EQ(Fit(Csv(shrinking), fam, &m), AL_ERANGE) << al_cost_family_name(fam);
    std::string why = al_last_error();
    EXPECT_NE(why.find("flat.csv"), std::string::npos) << why;
    EXPECT_NE(why.find("cannot be planned with"), std::string::npos) << why;
    EXPECT_NE(why.find("times that grow with B*S"), std::string::npos) << why;
  }
  // Growing times fit, and what the fit returns loads.
  auto quad = [](double B, double S) { return 2.0 + 2e-3 * B * S + 1.5e-7 * B * S * S; };
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(Fit(Csv(quad), AL_COST_AUTO, &m), AL_OK) << al_last_error();
  std::string why;
  EXPECT_EQ(SaveLoad(m, &why), AL_OK) << why;
}

// Auto keeps the family the planner can use when the better-fitting one is out of bounds.
TEST(CostBounds, AutoSkipsAFamilyOutOfBounds) {
  // Saturating times: poly2 fits a negative S^2 term (c(S) shrinking above ~50k tokens);
  // the power law stays usable.
  auto sat = [](double B, double S) { return 5.0 + 2e-3 * B * S - 2e-8 * B * S * S; };
  al_cost_model p2 = AL_COST_MODEL_INIT;
  EXPECT_EQ(Fit(Csv(sat), AL_COST_POLY2, &p2), AL_ERANGE);
  EXPECT_NE(std::string(al_last_error()).find("poly2 fit cannot be planned with"),
            std::string::npos)
      << al_last_error();
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(Fit(Csv(sat), AL_COST_AUTO, &m), AL_OK) << al_last_error();
  EXPECT_EQ(m.fit.family, AL_COST_POWER);
  EXPECT_EQ(m.alt.family, AL_COST_POLY2);
  EXPECT_LT(m.alt.median_rel_err, m.fit.median_rel_err); // kept for reports, not for planning
  std::string why;
  EXPECT_EQ(SaveLoad(m, &why), AL_OK) << why;
}

} // namespace
