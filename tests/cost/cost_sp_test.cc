// The floor family and the per-degree (sequence-parallel) cost model: fits recover known
// parameters from synthetic rows, launch-bound rows included and a d column; d = 1 predictions
// are al_cost_predict's; the modelled all-to-all; errors by band of tokens per sample; files keep
// the fits; bad degrees, metadata and link figures are refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "tests/common/test_util.h"

extern "C" {
#include "cost/al_cost.h"
}

namespace {

// One rank's share at degree d: a launch floor F_d, then the work a + s B + (b B S + c B S^2) / d.
struct Truth {
  double F, a, s, b, c;
  double At(double B, double S, double d) const {
    double g = a + s * B + (b * B * S + c * B * S * S) / d;
    double m = std::fmax(F, g);
    return m * std::pow(std::pow(F / m, 8) + std::pow(g / m, 8), 1.0 / 8);
  }
};

const Truth kDeg[4] = {
    {3.0, 0.5, 0.01, 4.5e-4, 4e-8}, // d = 1
    {3.5, 0.4, 0.01, 4.7e-4, 4e-8}, // d = 2
    {3.2, 0.6, 0.01, 4.8e-4, 4e-8}, // d = 4
    {3.1, 0.6, 0.01, 4.9e-4, 4e-8}, // d = 8
};

// A benchmark with the metadata line and a d column over degrees {1, 2, 4, 8} (the first
// `degrees` of them), times with relative noise, every B*S from 256 tokens up.
std::string SpCsv(int degrees, double rel_noise, uint64_t seed, const char *meta = nullptr) {
  altest::SplitMix64 nz(seed);
  std::string csv = meta ? meta : "# shape_bench: hidden=1024 heads=8 layers=2 dtype_bytes=2\n";
  csv += "B,S,d,step_ms\n";
  for (int k = 0; k < degrees; k++) {
    double d = double(1 << k);
    for (double S : {256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0, 65536.0})
      for (double B : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0}) {
        if (B * S / d > (1 << 18)) continue;
        double t = kDeg[k].At(B, S, d) * (1 + rel_noise * nz.Normal());
        char line[128];
        snprintf(line, sizeof line, "%.0f,%.0f,%.0f,%.6f\n", B, S, d, t);
        csv += line;
      }
  }
  return csv;
}

int Fit(const std::string &text, al_cost_model *m, const al_cost_fit_options *o = nullptr) {
  al_bench b = AL_BENCH_INIT;
  int rc = al_bench_parse(&b, text.data(), text.size(), "sp.csv");
  if (rc) return rc;
  memset(m, 0x5a, sizeof *m); // poisoned, but for its size
  m->struct_size = sizeof *m;
  rc = al_cost_fit_bench(&b, o, m);
  al_bench_free(&b);
  return rc;
}

void ExpectRecovers(const al_cost_fit &f, const Truth &t, double tol) {
  EXPECT_EQ(f.family, AL_COST_FLOOR);
  EXPECT_NEAR(f.floor_ms / t.F, 1.0, tol);
  EXPECT_NEAR(f.params[1] / t.b, 1.0, tol);
  EXPECT_NEAR(f.params[2] / t.c, 1.0, tol);
  EXPECT_EQ(f.sharpness, AL_COST_FLOOR_SHARPNESS);
}

TEST(CostFloor, RecoversAFloorAndTheWorkOnEveryRow) {
  al_cost_model m = AL_COST_MODEL_INIT;
  al_cost_fit_options o{};
  o.family = AL_COST_FLOOR;
  ASSERT_EQ(Fit(SpCsv(1, 0.0, 1), &m, &o), AL_OK) << al_last_error();
  EXPECT_EQ(m.n_sp_fits, 0u);
  EXPECT_EQ(m.rows_excluded, 0u); // launch-bound rows are fitted
  ExpectRecovers(m.fit, kDeg[0], 0.01);
  EXPECT_NEAR(m.fit.params[0], kDeg[0].a, 0.05);
  EXPECT_NEAR(m.fit.per_sample_ms, kDeg[0].s, 0.005);
  EXPECT_LT(m.all_rows.max_rel_err, 1e-3);
  // Predictions: the floor below, the work above.
  EXPECT_NEAR(al_cost_predict(&m, 1, 256), kDeg[0].At(1, 256, 1), 1e-3);
  EXPECT_NEAR(al_cost_predict(&m, 4, 65536) / kDeg[0].At(4, 65536, 1), 1.0, 1e-3);
  EXPECT_DOUBLE_EQ(al_cost_per_sample(&m, 1000),
                   m.fit.per_sample_ms + m.fit.params[1] * 1000 + m.fit.params[2] * 1e6);
  // With noise, poly2 (launch-bound rows left out, then mispredicted) loses to floor under auto.
  al_cost_model a = AL_COST_MODEL_INIT;
  ASSERT_EQ(Fit(SpCsv(1, 0.03, 2), &a), AL_OK) << al_last_error();
  EXPECT_EQ(a.fit.family, AL_COST_FLOOR);
  o.family = AL_COST_POLY2;
  al_cost_model p2 = AL_COST_MODEL_INIT;
  ASSERT_EQ(Fit(SpCsv(1, 0.03, 2), &p2, &o), AL_OK) << al_last_error();
  EXPECT_GT(p2.rows_excluded, 0u);
  EXPECT_GT(p2.bands[0].max_rel_err, 2 * a.bands[0].max_rel_err);
}

TEST(CostSp, PerDegreeFitsRecoverTheirParameters) {
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(Fit(SpCsv(4, 0.01, 3), &m), AL_OK) << al_last_error();
  ASSERT_EQ(m.n_sp_fits, 3u);
  for (uint32_t i = 0; i < 3; i++) {
    EXPECT_EQ(m.sp_fits[i].degree, 2u << i);
    ExpectRecovers(m.sp_fits[i].fit, kDeg[i + 1], 0.05);
    EXPECT_LT(m.sp_fits[i].all_rows.median_rel_err, 0.02);
  }
  ExpectRecovers(m.fit, kDeg[0], 0.05);
  // 8 all-to-alls x hidden 1024 x 2 bytes x 2 layers, from the metadata line.
  EXPECT_EQ(m.sp_a2a_bytes_per_token, 32768.0);
  EXPECT_EQ(m.sp_link_gbps, 0.0); // the default
}

TEST(CostSp, DegreeOneIsThePlainModelAndHigherDegreesAddTheAllToAll) {
  al_cost_model m = AL_COST_MODEL_INIT;
  al_cost_fit_options o{};
  o.sp_link_gbps = 200;
  o.sp_a2a_bytes_per_token = 50000; // overrides the metadata's
  ASSERT_EQ(Fit(SpCsv(3, 0.01, 4), &m, &o), AL_OK) << al_last_error();
  ASSERT_EQ(m.n_sp_fits, 2u);
  EXPECT_EQ(m.sp_a2a_bytes_per_token, 50000.0);
  for (uint64_t S : {1u, 256u, 5000u, 65536u, 1u << 20})
    for (uint64_t B : {1u, 3u, 64u}) {
      EXPECT_EQ(al_cost_predict_sp(&m, B, S, 1), al_cost_predict(&m, B, S));
      EXPECT_EQ(al_cost_predict_sp(&m, B, S, 0), al_cost_predict(&m, B, S));
      EXPECT_EQ(al_cost_per_sample_sp(&m, S, 1), al_cost_per_sample(&m, S));
    }
  // d = 2: the d = 2 fit plus B S (d - 1) / d^2 x bytes / (GB/s x 1e6) ms.
  const al_cost_sp_fit &f2 = m.sp_fits[0];
  double compute = kDeg[1].At(8, 32768, 2), a2a = 8.0 * 32768 * 0.25 * 50000 / (200 * 1e6);
  EXPECT_NEAR(al_cost_predict_sp(&m, 8, 32768, 2) / (compute + a2a), 1.0, 0.03);
  double s = 32768;
  EXPECT_NEAR(al_cost_per_sample_sp(&m, 32768, 2),
              f2.fit.per_sample_ms + (f2.fit.params[1] * s + f2.fit.params[2] * s * s) / 2 +
                  s * 0.25 * 50000 / (200 * 1e6),
              1e-9);
  // d = 8 has no fit of its own: the largest fitted degree below it (4), evaluated at 8.
  const al_cost_sp_fit &f4 = m.sp_fits[1];
  ASSERT_EQ(f4.degree, 4u);
  double g8 = f4.fit.params[0] + f4.fit.per_sample_ms * 2 +
              (f4.fit.params[1] * 2 * s + f4.fit.params[2] * 2 * s * s) / 8;
  EXPECT_NEAR(al_cost_predict_sp(&m, 2, 32768, 8), g8 + 2 * s * 7.0 / 64 * 50000 / (200 * 1e6),
              1e-6 * g8);
  // Monotone in B and S at every degree.
  for (uint32_t d : {1u, 2u, 4u, 8u, 16u}) {
    double prev = 0;
    for (uint64_t S = 64; S <= (1u << 20); S *= 2) {
      double t = al_cost_predict_sp(&m, 2, S, d);
      EXPECT_GT(t, prev) << d << " " << S;
      EXPECT_GT(al_cost_predict_sp(&m, 3, S, d), t);
      prev = t;
    }
  }
}

TEST(CostSp, ErrorsByBand) {
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(Fit(SpCsv(2, 0.02, 5), &m), AL_OK) << al_last_error();
  // The grid's rows of d = 1 per band (B in 1..64, B * S <= 2^18): S 256..1024 (3 sizes x 7
  // B), 2048, 4096 (2 x 7), 8192, 16384 (6 + 5), 32768, 65536 (4 + 3).
  const uint32_t rows[AL_COST_BANDS] = {21, 14, 11, 7};
  const double lo[AL_COST_BANDS] = {0, 2048, 8192, 32768};
  uint32_t total = 0;
  for (int i = 0; i < AL_COST_BANDS; i++) {
    EXPECT_EQ(m.bands[i].rows, rows[i]) << i;
    EXPECT_EQ(m.bands[i].lo, lo[i]);
    EXPECT_EQ(m.bands[i].hi, i + 1 < AL_COST_BANDS ? lo[i + 1] : 0.0);
    EXPECT_GT(m.bands[i].median_rel_err, 0.0);
    EXPECT_LT(m.bands[i].median_rel_err, 0.04);
    EXPECT_LE(m.bands[i].median_rel_err, m.bands[i].max_rel_err);
    EXPECT_LE(m.bands[i].max_rel_err, m.all_rows.max_rel_err);
    total += m.bands[i].rows;
  }
  EXPECT_EQ(total, m.all_rows.rows);
  ASSERT_EQ(m.n_sp_fits, 1u);
  EXPECT_EQ(m.sp_fits[0].bands[3].rows, 9u); // d = 2: B * S / 2 <= 2^18, so 5 + 4 rows
}

TEST(CostSp, FilesKeepThePerDegreeFits) {
  al_cost_model m = AL_COST_MODEL_INIT, r = AL_COST_MODEL_INIT;
  ASSERT_EQ(Fit(SpCsv(4, 0.01, 6), &m), AL_OK) << al_last_error();
  std::string path = altest::TmpPath("sp.cost");
  ASSERT_EQ(al_cost_save(&m, path.c_str()), AL_OK) << al_last_error();
  ASSERT_EQ(al_cost_load(&r, path.c_str()), AL_OK) << al_last_error();
  ASSERT_EQ(r.n_sp_fits, 3u);
  EXPECT_EQ(r.fit.family, AL_COST_FLOOR);
  EXPECT_EQ(r.sp_a2a_bytes_per_token, m.sp_a2a_bytes_per_token);
  for (uint32_t i = 0; i < 3; i++) {
    EXPECT_EQ(r.sp_fits[i].degree, m.sp_fits[i].degree);
    EXPECT_EQ(r.sp_fits[i].rows, m.sp_fits[i].rows);
    EXPECT_EQ(r.sp_fits[i].fit.max_rel_err, m.sp_fits[i].fit.max_rel_err);
  }
  for (uint32_t d : {1u, 2u, 4u, 8u, 32u})
    for (uint64_t S : {300u, 70000u})
      EXPECT_EQ(al_cost_predict_sp(&r, 5, S, d), al_cost_predict_sp(&m, 5, S, d));
  EXPECT_EQ(r.all_rows.rows, 0u); // bands are a fit-time report
}

std::string ParseError(const std::string &text) {
  al_bench b = AL_BENCH_INIT;
  int rc = al_bench_parse(&b, text.data(), text.size(), "bad.csv");
  if (rc == AL_OK) {
    al_bench_free(&b);
    return "";
  }
  return al_last_error();
}

TEST(CostSp, BadDegreesAndMetadataAreRefusedByName) {
  std::string good = SpCsv(2, 0.0, 7);
  std::string zero = good + "1,1024,0,5.0\n";
  std::string e = ParseError(zero);
  EXPECT_NE(e.find("bad.csv: line "), std::string::npos) << e;
  EXPECT_NE(e.find("column 3: d = 0 must be a power of two"), std::string::npos) << e;
  e = ParseError(good + "1,1024,3,5.0\n");
  EXPECT_NE(e.find("d = 3 must be a power of two in [1, 1024]"), std::string::npos) << e;
  e = ParseError(good + "1,1024,2048,5.0\n");
  EXPECT_NE(e.find("d = 2048"), std::string::npos) << e;
  e = ParseError(good + "1,1024,x,5.0\n");
  EXPECT_NE(e.find("(d): 'x' is not a number"), std::string::npos) << e;
  e = ParseError(SpCsv(1, 0, 7, "# shape_bench: hidden=abc layers=2\n"));
  EXPECT_NE(e.find("line 1 (shape_bench metadata): hidden = 'abc' must be a number > 0"),
            std::string::npos)
      << e;
  e = ParseError(SpCsv(1, 0, 7, "# shape_bench: layers=-4\n"));
  EXPECT_NE(e.find("layers = '-4'"), std::string::npos) << e;
  // The alias and the JSON form.
  al_bench b = AL_BENCH_INIT;
  std::string alias =
      "B,S,sp_degree,step_ms\n1,256,2,3\n2,256,2,3\n4,256,2,3\n8,256,2,3\n"
      "1,512,1,3\n2,512,1,3\n4,512,1,3\n8,512,1,3\n";
  ASSERT_EQ(al_bench_parse(&b, alias.data(), alias.size(), "a.csv"), AL_OK) << al_last_error();
  ASSERT_TRUE(b.d);
  EXPECT_EQ(b.d[0], 2.0);
  EXPECT_EQ(b.d[7], 1.0);
  al_bench_free(&b);
  std::string json = "{\"hidden\": 1536, \"layers\": 4, \"dtype_bytes\": 2, \"rows\": [";
  for (int i = 0; i < 8; i++)
    json += std::string(i ? ", " : "") + "{\"B\": " + std::to_string(i + 1) +
            ", \"S\": 256, \"ms\": 3, \"d\": 4}";
  ASSERT_EQ(al_bench_parse(&b, json.data(), json.size() - 0, "j.json"), AL_EFORMAT); // no ]}
  json += "]}";
  ASSERT_EQ(al_bench_parse(&b, json.data(), json.size(), "j.json"), AL_OK) << al_last_error();
  EXPECT_EQ(b.d[3], 4.0);
  EXPECT_EQ(b.hidden, 1536.0);
  EXPECT_EQ(b.layers * b.dtype_bytes, 8.0);
  al_bench_free(&b);
  std::string bad = json;
  bad.replace(bad.find("\"d\": 4}"), 7, "\"d\": 6}");
  EXPECT_NE(ParseError(bad).find("rows[0]: d = 6 must be a power of two"), std::string::npos)
      << al_last_error();
}

TEST(CostSp, BadFitInputsAreRefusedByName) {
  al_cost_model m = AL_COST_MODEL_INIT;
  al_cost_fit_options o{};
  for (double bad : {-1.0, double(NAN), double(INFINITY)}) {
    o = al_cost_fit_options{};
    o.sp_link_gbps = bad;
    EXPECT_EQ(Fit(SpCsv(2, 0.01, 8), &m, &o), AL_EINVAL);
    EXPECT_NE(std::string(al_last_error()).find("sp_link_gbps"), std::string::npos);
    o = al_cost_fit_options{};
    o.sp_a2a_bytes_per_token = bad;
    EXPECT_EQ(Fit(SpCsv(2, 0.01, 8), &m, &o), AL_EINVAL);
    EXPECT_NE(std::string(al_last_error()).find("sp_a2a_bytes_per_token"), std::string::npos);
  }
  // A degree with too few rows, and no d = 1 rows at all.
  std::string few = SpCsv(1, 0.01, 9) + "1,1024,2,5\n2,1024,2,9\n";
  EXPECT_EQ(Fit(few, &m), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("too few rows of degree d = 2: 2"), std::string::npos)
      << al_last_error();
  std::string text = SpCsv(2, 0.01, 9), only2 = "B,S,d,step_ms\n";
  for (size_t p = text.find("\n", text.find("step_ms")) + 1; p < text.size();) {
    size_t e = text.find('\n', p);
    std::string line = text.substr(p, e - p + 1);
    if (line.find(",2,") != std::string::npos) only2 += line;
    p = e + 1;
  }
  EXPECT_EQ(Fit(only2, &m), AL_EINVAL);
  EXPECT_NE(std::string(al_last_error()).find("of degree d = 1"), std::string::npos)
      << al_last_error();
}

} // namespace
