// Cost model: both fits recover known parameters from noisy synthetic
// benchmarks, held-out errors, memory fit, file formats, clear errors, and the
// embedded H200 default.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "tests/common/test_util.h"

extern "C" {
#include "cost/al_cost.h"
}

namespace {

// A grid benchmark as CSV text, step time from `f` times (1 + rel_noise * N(0,1)).
template <class F>
std::string GridCsv(F f, double rel_noise, uint64_t seed, bool mem = false) {
  altest::SplitMix64 nz(seed); // deterministic Gaussian noise
  std::string csv = mem ? "S,step_ms,B,peak_mem_bytes\n" : "B,S,step_ms\n";
  for (double S : {1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0, 65536.0})
    for (double B : {1.0, 2.0, 4.0, 8.0, 16.0, 32.0}) {
      if (B * S < 4096 || B * S > 1 << 20) continue;
      double t = f(B, S) * (1 + rel_noise * nz.Normal());
      char line[256];
      if (mem)
        snprintf(line, sizeof line, "%.0f,%.6f,%.0f,%.0f\n", S, t, B, 2e9 + 350000.0 * B * S);
      else
        snprintf(line, sizeof line, "%.0f,%.0f,%.6f\n", B, S, t);
      csv += line;
    }
  return csv;
}

al_cost_model FitText(const std::string &text, al_cost_family fam = AL_COST_AUTO,
                      int *rc_out = nullptr) {
  al_bench b = AL_BENCH_INIT;
  al_cost_model m = AL_COST_MODEL_INIT;
  int rc = al_bench_parse(&b, text.data(), text.size(), "grid.csv");
  if (rc == AL_OK) {
    al_cost_fit_options o{};
    o.family = fam;
    rc = al_cost_fit_bench(&b, &o, &m);
    al_bench_free(&b);
  }
  if (rc_out)
    *rc_out = rc;
  else
    EXPECT_EQ(rc, AL_OK) << al_last_error();
  return m;
}

TEST(CostFit, PowerRecoversExponent) {
  auto truth = [](double B, double S) { return 5.0 + 2e-5 * B * std::pow(S, 1.6); };
  al_cost_model m = FitText(GridCsv(truth, 0.01, 7), AL_COST_POWER);
  ASSERT_EQ(m.fit.family, AL_COST_POWER);
  EXPECT_NEAR(m.fit.params[2], 1.6, 0.02);
  EXPECT_NEAR(m.fit.params[1] / 2e-5, 1.0, 0.15);
  EXPECT_NEAR(m.fit.params[0], 5.0, 1.0);
  EXPECT_LT(m.fit.median_rel_err, 0.02);
  EXPECT_GT(m.fit.r2, 0.999);
}

TEST(CostFit, Poly2RecoversCoefficients) {
  auto truth = [](double B, double S) { return 2.0 + 2e-3 * B * S + 1.5e-7 * B * S * S; };
  al_cost_model m = FitText(GridCsv(truth, 0.01, 11), AL_COST_POLY2);
  ASSERT_EQ(m.fit.family, AL_COST_POLY2);
  EXPECT_NEAR(m.fit.params[0], 2.0, 0.5);
  EXPECT_NEAR(m.fit.params[1] / 2e-3, 1.0, 0.03);
  EXPECT_NEAR(m.fit.params[2] / 1.5e-7, 1.0, 0.03);
  EXPECT_LT(m.fit.median_rel_err, 0.02);
}

TEST(CostFit, RawFittersExactOnNoiselessData) {
  double B[20], S[20], t[20], p[3];
  size_t n = 0;
  for (double s : {512.0, 2048.0, 8192.0, 32768.0})
    for (double b : {1.0, 3.0, 9.0, 27.0, 81.0}) {
      B[n] = b, S[n] = s, t[n] = 1.5 + 4e-4 * b * s + 2e-8 * b * s * s, n++;
    }
  ASSERT_EQ(al_cost_fit_poly2(B, S, t, n, p), AL_OK);
  EXPECT_NEAR(p[0], 1.5, 1e-6);
  EXPECT_NEAR(p[1], 4e-4, 1e-12);
  EXPECT_NEAR(p[2], 2e-8, 1e-15);
  for (size_t i = 0; i < n; i++) t[i] = 0.5 + 3e-6 * B[i] * std::pow(S[i], 1.75);
  ASSERT_EQ(al_cost_fit_power(B, S, t, n, p), AL_OK);
  EXPECT_NEAR(p[2], 1.75, 1e-4);
  EXPECT_NEAR(p[1] / 3e-6, 1.0, 1e-3);
  EXPECT_NEAR(p[0], 0.5, 1e-3);
}

TEST(CostFit, AutoPicksTheBetterFamily) {
  auto quad = [](double B, double S) { return 2.0 + 2e-3 * B * S + 1.5e-7 * B * S * S; };
  auto pw = [](double B, double S) { return 3.0 + 1e-4 * B * std::pow(S, 1.3); };
  // poly2 data: poly2 or floor (poly2 with a per-sample term and a launch floor: the same
  // curve when both are near 0), never the power law.
  al_cost_model a = FitText(GridCsv(quad, 0.005, 3));
  EXPECT_NE(a.fit.family, AL_COST_POWER);
  EXPECT_NE(a.alt.family, AL_COST_POWER);
  EXPECT_LT(a.all_rows.max_rel_err, 0.03);
  al_cost_model pw_fit = FitText(GridCsv(quad, 0.005, 3), AL_COST_POWER);
  EXPECT_LT(a.fit.median_rel_err, pw_fit.fit.median_rel_err);
  al_cost_model b = FitText(GridCsv(pw, 0.005, 4));
  EXPECT_EQ(b.fit.family, AL_COST_POWER);
  EXPECT_LE(b.fit.median_rel_err, b.alt.median_rel_err);
}

TEST(CostFit, PredictAndPerSampleCost) {
  al_cost_model m{};
  m.fit.family = AL_COST_POLY2;
  m.fit.params[0] = 1, m.fit.params[1] = 2e-3, m.fit.params[2] = 1e-7;
  EXPECT_DOUBLE_EQ(al_cost_per_sample(&m, 1000), 2.0 + 0.1);
  EXPECT_DOUBLE_EQ(al_cost_predict(&m, 4, 1000), 1 + 4 * 2.1);
  m.fit.family = AL_COST_POWER;
  m.fit.params[1] = 1e-3, m.fit.params[2] = 1.5;
  EXPECT_NEAR(al_cost_per_sample(&m, 10000), 1e-3 * 1e6, 1e-9);
}

TEST(CostFit, MemoryFitAndTokenCap) {
  auto quad = [](double B, double S) { return 2.0 + 2e-3 * B * S + 1.5e-7 * B * S * S; };
  al_cost_model m = FitText(GridCsv(quad, 0.0, 5, true));
  ASSERT_TRUE(m.has_mem);
  EXPECT_NEAR(m.mem_m0, 2e9, 1e3);
  EXPECT_NEAR(m.mem_m1, 350000.0, 1e-3);
  uint64_t tok = 0;
  ASSERT_EQ(al_cost_mem_tokens(&m, 141e9, 0.9, &tok), AL_OK);
  EXPECT_EQ(tok, (uint64_t)std::floor((141e9 * 0.9 - 2e9) / 350000.0));
  EXPECT_EQ(al_cost_mem_tokens(&m, 1e9, 0.9, &tok), AL_ERANGE); // below the fixed part
  al_cost_model no_mem = FitText(GridCsv(quad, 0.0, 5));
  EXPECT_EQ(al_cost_mem_tokens(&no_mem, 141e9, 0.9, &tok), AL_ESTATE);
}

TEST(CostFit, SaveLoadRoundTrip) {
  al_cost_model m = FitText(
      GridCsv([](double B, double S) { return 1 + 1e-3 * B * S + 1e-7 * B * S * S; }, 0.01, 9));
  std::string path = altest::TmpPath("cost.alcost");
  ASSERT_EQ(al_cost_save(&m, path.c_str()), AL_OK) << al_last_error();
  al_cost_model r = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_load(&r, path.c_str()), AL_OK) << al_last_error();
  EXPECT_EQ(r.fit.family, m.fit.family);
  for (int i = 0; i < 3; i++) EXPECT_EQ(r.fit.params[i], m.fit.params[i]);
  EXPECT_EQ(r.alt.family, m.alt.family);
  EXPECT_EQ(r.fit.median_rel_err, m.fit.median_rel_err);
  EXPECT_EQ(r.rows, m.rows);
  EXPECT_STREQ(r.source, "grid.csv");
  al_cost_model x = AL_COST_MODEL_INIT;
  EXPECT_NE(al_cost_load(&x, altest::TmpPath("missing.alcost").c_str()), AL_OK);
}

void ExpectBadBench(const std::string &text, int want, const char *fragment) {
  al_bench b = AL_BENCH_INIT;
  int rc = al_bench_parse(&b, text.data(), text.size(), "bad.csv");
  EXPECT_EQ(rc, want) << text;
  EXPECT_TRUE(altest::ErrorContains(fragment));
}

TEST(BenchFile, ClearErrors) {
  std::string rows;
  for (int i = 1; i <= 10; i++)
    rows += std::to_string(i) + ",4096," + std::to_string(i * 3.5) + "\n";
  ExpectBadBench("B,S\n" + rows, AL_EFORMAT, "bad.csv: line 1 (header): missing column 'step_ms'");
  ExpectBadBench("B,S,step_ms\n1,4096,abc\n" + rows, AL_EFORMAT,
                 "bad.csv: line 2 column 3 (step_ms): 'abc' is not a number");
  ExpectBadBench("B,S,step_ms\n1,4096,3\n2,4096,4\n", AL_EINVAL, "too few rows: 2");
  ExpectBadBench("B,S,step_ms\n1,4096\n", AL_EFORMAT, "line 2: 2 fields, the header has 3");
  ExpectBadBench("B,S,step_ms\n0,4096,1\n" + rows, AL_EFORMAT, "line 2: B = 0");
  ExpectBadBench("", AL_EFORMAT, "empty");
  ExpectBadBench("{\"rows\": [{\"B\": 1, \"S\": 4096}]}", AL_EFORMAT, "rows[0]: missing \"ms\"");
  ExpectBadBench("{\"rows\": [", AL_EFORMAT, "broken JSON");
  // Enough rows in the file but too few outside the launch-bound region.
  al_bench b = AL_BENCH_INIT;
  std::string small = "B,S,step_ms\n";
  for (int i = 1; i <= 10; i++) small += "1,256," + std::to_string(5 + i * 0.1) + "\n";
  ASSERT_EQ(al_bench_parse(&b, small.data(), small.size(), "small.csv"), AL_OK);
  al_cost_model m = AL_COST_MODEL_INIT;
  EXPECT_EQ(al_cost_fit_bench(&b, nullptr, &m), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("10 launch-bound rows left out"));
  // The source is named once, first (a path quoted twice pushed the reason past the message).
  EXPECT_EQ(std::string(al_last_error()).rfind("small.csv: too few rows: 0", 0), 0u)
      << al_last_error();
  EXPECT_EQ(std::string(al_last_error()).find("small.csv", 1), std::string::npos)
      << al_last_error();
  al_bench_free(&b);
  EXPECT_EQ(al_bench_load(&b, "/nonexistent/bench.csv"), AL_EIO);
}

TEST(BenchFile, ColumnOrderAliasesAndComments) {
  std::string csv = "# from shape_bench.py\nnote, ms ,S,B\n";
  for (int i = 1; i <= 9; i++)
    csv += "x," + std::to_string(10.0 * i) + ",8192," + std::to_string(i) + "\n";
  al_bench b = AL_BENCH_INIT;
  ASSERT_EQ(al_bench_parse(&b, csv.data(), csv.size(), "o.csv"), AL_OK) << al_last_error();
  ASSERT_EQ(b.n, 9u);
  EXPECT_EQ(b.B[2], 3.0);
  EXPECT_EQ(b.S[2], 8192.0);
  EXPECT_EQ(b.ms[2], 30.0);
  EXPECT_EQ(b.mem, nullptr);
  al_bench_free(&b);
}

// The shipped H200 benchmark: the embedded default is the floor family, fitted on all 46 rows
// (launch-bound ones included); its worst held-out error over every row is well under poly2's,
// which leaves the 7 launch-bound rows out and then mispredicts them by up to 86%.
TEST(DefaultModel, TheFloorFamilyOnEveryRow) {
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_default(&m), AL_OK) << al_last_error();
  EXPECT_EQ(m.fit.family, AL_COST_FLOOR);
  EXPECT_EQ(m.rows, 46u);
  EXPECT_EQ(m.rows_excluded, 0u);
  EXPECT_STREQ(m.device, "NVIDIA H200");
  EXPECT_EQ(m.all_rows.rows, 46u);
  for (const al_cost_band &b : m.bands) {
    EXPECT_GT(b.rows, 0u) << b.lo;
    EXPECT_LT(b.median_rel_err, 0.05) << b.lo;
  }
  EXPECT_LT(m.all_rows.max_rel_err, 0.35);
  al_bench b = AL_BENCH_INIT;
  ASSERT_EQ(al_bench_parse(&b, al_cost_default_json(), strlen(al_cost_default_json()), "h.json"),
            AL_OK);
  al_cost_fit_options o{};
  o.family = AL_COST_POLY2;
  al_cost_model p2 = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_fit_bench(&b, &o, &p2), AL_OK) << al_last_error();
  al_bench_free(&b);
  EXPECT_EQ(p2.rows, 39u);
  EXPECT_EQ(p2.rows_excluded, 7u);
  EXPECT_EQ(p2.bands[0].rows, 14u); // the left-out rows are scored too
  EXPECT_GT(p2.all_rows.max_rel_err, 2 * m.all_rows.max_rel_err);
  EXPECT_GT(p2.bands[0].max_rel_err, 0.5);
  EXPECT_LT(p2.fit.median_rel_err, 0.02); // on its own 39 rows
}

// The numbers DESIGN.md quotes (power 17% / poly2 1.6% median) are absolute-residual fits on the
// rows with B*S >= 4096; the relative-residual fit does better on both and prefers poly2.
TEST(DefaultModel, ReproducesDesignNumbers) {
  std::string file = altest::ReadFile("cost/data/h200_dit_block_cost.json");
  ASSERT_FALSE(file.empty());
  EXPECT_EQ(file, std::string(al_cost_default_json())); // the embedded copy is the file
  al_bench b = AL_BENCH_INIT;
  ASSERT_EQ(al_bench_parse(&b, file.data(), file.size(), "h200.json"), AL_OK);
  al_cost_fit_options o{};
  o.loss = AL_LOSS_ABS;
  o.family = AL_COST_POLY2;
  al_cost_model a = AL_COST_MODEL_INIT, pw = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_fit_bench(&b, &o, &a), AL_OK);
  EXPECT_EQ(a.fit.family, AL_COST_POLY2);
  EXPECT_NEAR(a.fit.median_rel_err, 0.016, 0.01);
  o.family = AL_COST_POWER;
  ASSERT_EQ(al_cost_fit_bench(&b, &o, &pw), AL_OK);
  EXPECT_NEAR(pw.fit.median_rel_err, 0.18, 0.05);
  o.loss = AL_LOSS_REL;
  ASSERT_EQ(al_cost_fit_bench(&b, &o, &pw), AL_OK);
  o.family = AL_COST_POLY2;
  ASSERT_EQ(al_cost_fit_bench(&b, &o, &a), AL_OK);
  EXPECT_LT(a.fit.median_rel_err, 0.02);
  EXPECT_LT(a.fit.max_rel_err, 0.12);
  EXPECT_GT(pw.fit.median_rel_err, 0.08);
  al_bench_free(&b);
}

// A real run of examples/shape_bench.py on an H200 (4 DiT blocks, bf16),
// with peak memory: both fits, the memory line and M_mem.
TEST(DefaultModel, ShapeBenchCsvWithMemory) {
  al_bench b = AL_BENCH_INIT;
  ASSERT_EQ(al_bench_load(&b, "cost/data/h200_shape_bench.csv"), AL_OK) << al_last_error();
  ASSERT_TRUE(b.mem);
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_fit_bench(&b, nullptr, &m), AL_OK) << al_last_error();
  al_bench_free(&b);
  EXPECT_EQ(m.fit.family, AL_COST_FLOOR);
  EXPECT_LT(m.fit.median_rel_err, 0.03);
  EXPECT_LT(m.all_rows.max_rel_err, 0.15);
  ASSERT_TRUE(m.has_mem);
  EXPECT_GT(m.mem_m1, 1e5); // hundreds of KB of activations per token for 4 blocks
  uint64_t tok = 0;
  ASSERT_EQ(al_cost_mem_tokens(&m, 141e9, 0.9, &tok), AL_OK);
  EXPECT_GT(tok, 100000u);
  EXPECT_LT(tok, 1000000u);
}

} // namespace

// ---- Training traces (fit --trace) ----

namespace trace {

// A trace of `reps` micro-batches per (B, S), times from `f` with relative noise, every
// 7th measurement of a shape 5x slow (a checkpoint or a collective stall), in a shuffled
// order, with warm-up lines, a line giving tokens instead of S, and a half-written last line.
template <class F>
std::string Jsonl(F f, int reps, uint64_t seed, size_t *measurements) {
  altest::SplitMix64 nz(seed);
  std::vector<std::string> lines;
  for (double S : {1024.0, 4096.0, 8192.0, 16384.0, 32768.0, 65536.0})
    for (double B : {1.0, 2.0, 4.0, 8.0}) {
      if (B * S > 1 << 18) continue;
      for (int k = 0; k < reps; k++) {
        double t = f(B, S) * (1 + 0.01 * nz.Normal()) * (k % 7 == 3 ? 5.0 : 1.0);
        char line[256];
        if (k == 1)
          snprintf(line, sizeof line, "{\"step\": %d, \"n\": %.0f, \"tokens\": %.0f, \"ms\": %.6f}",
                   k, B, B * S, t);
        else
          snprintf(line, sizeof line,
                   "{\"step\": %d, \"rank\": 0, \"B\": %.0f, \"S\": %.0f, \"ms\": %.6f}", k, B, S,
                   t);
        lines.push_back(line);
      }
    }
  *measurements = lines.size();
  for (size_t i = lines.size(); i > 1; i--) std::swap(lines[i - 1], lines[nz.Next() % i]);
  std::string out = "{\"warmup\": true, \"B\": 1, \"S\": 1024, \"ms\": 900}\n\n";
  out += "{\"warmup\": true, \"B\": 2, \"S\": 1024, \"ms\": 800}\n";
  for (auto &l : lines) out += l + "\n";
  return out + "{\"step\": 99, \"B\": 4, \"S\": 40"; // killed mid-write
}

} // namespace trace

TEST(Trace, MediansPerShapeFitTheTrueModelDespiteStallsAndAHalfLine) {
  auto truth = [](double B, double S) { return 1.5 + 2e-6 * B * std::pow(S, 1.3); };
  size_t meas = 0;
  std::string text = trace::Jsonl(truth, 15, 21, &meas);
  al_bench b = AL_BENCH_INIT;
  al_trace_stats st;
  memset(&st, 0x5a, sizeof st); // poisoned
  st.struct_size = sizeof st;
  ASSERT_EQ(al_bench_parse_trace(&b, text.data(), text.size(), "run.jsonl", &st), AL_OK)
      << al_last_error();
  EXPECT_EQ(st.lines, meas + 3);
  EXPECT_EQ(st.warmup, 2u);
  EXPECT_EQ(st.skipped, 1u);
  EXPECT_EQ(st.used, meas);
  EXPECT_EQ(st.groups, b.n);
  EXPECT_EQ(b.n, meas / 15);
  EXPECT_NE(std::string(st.first_skipped).find("run.jsonl: line"), std::string::npos)
      << st.first_skipped;
  EXPECT_EQ(b.mem, nullptr);
  for (size_t i = 0; i < b.n; i++) { // the median, not the mean: the stalls do not show
    double want = truth(b.B[i], b.S[i]);
    EXPECT_NEAR(b.ms[i] / want, 1.0, 0.03) << "B " << b.B[i] << " S " << b.S[i];
  }
  al_cost_fit_options fo{};
  fo.family = AL_COST_POWER;
  fo.min_tokens = 1;
  al_cost_model m = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_cost_fit_bench(&b, &fo, &m), AL_OK) << al_last_error();
  EXPECT_NEAR(m.fit.params[2], 1.3, 0.02);
  EXPECT_LT(m.fit.median_rel_err, 0.02);
  EXPECT_STREQ(m.source, "run.jsonl");
  al_bench_free(&b);
}

TEST(Trace, TooFewShapesAndAppendToABenchmark) {
  const char *two =
      "{\"B\": 1, \"S\": 1024, \"ms\": 3}\n{\"B\": 1, \"S\": 1024, \"ms\": 4}\n"
      "{\"B\": 2, \"S\": 1024, \"ms\": 5}\nnot json\n";
  al_bench b = AL_BENCH_INIT;
  al_trace_stats st = AL_TRACE_STATS_INIT;
  EXPECT_EQ(al_bench_parse_trace(&b, two, strlen(two), "short.jsonl", &st), AL_EINVAL);
  EXPECT_TRUE(altest::ErrorContains("2 distinct (B, S) shapes in 3 usable lines (1 skipped"))
      << al_last_error();
  EXPECT_TRUE(altest::ErrorContains("short.jsonl: line 4: not a JSON object")) << al_last_error();

  auto truth = [](double B, double S) { return 2 + 1e-6 * B * S + 1e-11 * B * S * S; };
  std::string csv = GridCsv(truth, 0.0, 3, /*mem=*/true);
  al_bench bench = AL_BENCH_INIT;
  ASSERT_EQ(al_bench_parse(&bench, csv.data(), csv.size(), "bench.csv"), AL_OK) << al_last_error();
  size_t meas = 0, n0 = bench.n;
  std::string text = trace::Jsonl(truth, 5, 4, &meas);
  ASSERT_EQ(al_bench_parse_trace(&b, text.data(), text.size(), "run.jsonl", nullptr), AL_OK)
      << al_last_error();
  ASSERT_EQ(al_bench_append(&bench, &b), AL_OK) << al_last_error();
  EXPECT_EQ(bench.n, n0 + b.n);
  EXPECT_EQ(bench.mem, nullptr); // the trace had no peak memory: none is kept
  EXPECT_EQ(bench.B[n0], b.B[0]);
  EXPECT_EQ(bench.ms[bench.n - 1], b.ms[b.n - 1]);
  EXPECT_STREQ(bench.source, "bench.csv + run.jsonl");
  al_bench_free(&b);
  al_bench_free(&bench);
}
