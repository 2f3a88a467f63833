// Forged manifests with valid checksums: a real plan is re-written record by
// record through the container writer with one lie in it, so only al_manifest_load's own
// checks (manifest/manifest_check.c) can catch it. Each case names what the message must say.
#include <gtest/gtest.h>

#include <jansson.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/manifest/manifest_forge.h"
#include "tests/planner/plan_fixtures.h"

extern "C" {
#include "planner/al_run.h"
}

extern "C" {
#include "manifest/al_report.h"
#include "proto/adaptiveload.pb-c.h"
#include "proto/pbio_internal.h"
}

namespace {

using altest::Forge;
using altest::Mutate;
using altest::Shapes;

struct ForgeTest : ::testing::Test {
  Shapes s = altest::MakeShapes(400, 7);
  std::string src = altest::TmpPath("real.alm");
  std::string dst = altest::TmpPath("forged.alm");
  void SetUp() override {
    al_plan_options o{};
    o.world = 2;
    o.seed = 3;
    o.micro_per_step = 2;
    al_manifest *m = altest::PlanAndLoad(s, o, "real.alm");
    ASSERT_TRUE(m);
    al_manifest_free(m);
  }
  // Forges and loads; returns the load status (the manifest, if any, is freed).
  int Load(const Mutate &mutate) {
    EXPECT_EQ(Forge(src, dst, mutate), AL_OK) << al_last_error();
    al_manifest *m = nullptr;
    int rc = al_manifest_load(&m, dst.c_str());
    al_manifest_free(m);
    return rc;
  }
};

Adaptiveload__ManifestChunk *Chunk(uint32_t tag, ProtobufCMessage *msg) {
  return tag == AL_REC_MANIFEST_CHUNK ? (Adaptiveload__ManifestChunk *)msg : nullptr;
}

// The first real micro-batch of (step 0, rank r) in the first chunk.
Adaptiveload__MicroBatch *Micro(Adaptiveload__ManifestChunk *c, uint32_t r, size_t k = 0) {
  return c->steps[0]->ranks[r]->micro[k];
}

TEST_F(ForgeTest, AnUnchangedCopyLoads) {
  EXPECT_EQ(Load([](uint32_t, ProtobufCMessage *) {}), AL_OK) << al_last_error();
}

TEST_F(ForgeTest, ASampleOnTwoRanksIsRefused) {
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (auto *c = Chunk(tag, msg)) Micro(c, 1)->samples[0] = Micro(c, 0)->samples[0];
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("scheduled a second time")) << al_last_error();
  EXPECT_TRUE(altest::ErrorContains("step 0 rank 1 micro 0")) << al_last_error();
}

TEST_F(ForgeTest, AMissingSampleIsRefusedEvenWithTotalsAdjusted) {
  uint64_t tok = 0;
  bool cut = false;
  EXPECT_EQ(Load([&](uint32_t tag, ProtobufCMessage *msg) {
              if (auto *c = Chunk(tag, msg)) {
                // The first micro-batch of two or more samples: drop its last sample and make
                // the step totals and the summary agree, so that only the key table tells.
                for (size_t st = 0; st < c->n_steps && !cut; st++)
                  for (size_t r = 0; r < c->steps[st]->n_ranks && !cut; r++)
                    for (size_t k = 0; k < c->steps[st]->ranks[r]->n_micro && !cut; k++) {
                      Adaptiveload__MicroBatch *mb = c->steps[st]->ranks[r]->micro[k];
                      if (mb->n_samples < 2 || mb->n_padded) continue;
                      tok = mb->tokens[mb->n_samples - 1];
                      mb->n_samples--, mb->n_tokens--;
                      c->steps[st]->samples--;
                      c->steps[st]->tokens -= tok;
                      cut = true;
                    }
              }
              if (tag == AL_REC_MANIFEST_SUMMARY) {
                auto *sm = (Adaptiveload__ManifestSummary *)msg;
                sm->samples--;
                sm->tokens -= tok;
              }
            }),
            AL_EFORMAT);
  ASSERT_TRUE(cut);
  EXPECT_TRUE(altest::ErrorContains("in no micro-batch")) << al_last_error();
}

TEST_F(ForgeTest, TwoHundredThousandCopiesInAMicroBatchAreRefused) {
  std::vector<uint64_t> samples, tokens;
  EXPECT_EQ(Load([&](uint32_t tag, ProtobufCMessage *msg) {
              if (auto *c = Chunk(tag, msg)) {
                Adaptiveload__MicroBatch *mb = Micro(c, 0);
                samples.assign(200000, mb->samples[0]);
                tokens.assign(200000, mb->tokens[0]);
                mb->n_samples = mb->n_tokens = samples.size();
                mb->samples = samples.data();
                mb->tokens = tokens.data();
              }
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("200000 samples in bucket")) << al_last_error();
}

TEST_F(ForgeTest, ASummaryThatLiesIsRefused) {
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (tag == AL_REC_MANIFEST_SUMMARY) ((Adaptiveload__ManifestSummary *)msg)->samples++;
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("the summary says")) << al_last_error();
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (tag == AL_REC_MANIFEST_SUMMARY)
                ((Adaptiveload__ManifestSummary *)msg)->rejected++;
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("rejected")) << al_last_error();
}

TEST_F(ForgeTest, StepTotalsThatLieAreRefused) {
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (auto *c = Chunk(tag, msg)) c->steps[0]->tokens++;
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("loss normaliser")) << al_last_error();
}

TEST_F(ForgeTest, FirstStepNearTwoToThe32IsRefused) {
  uint32_t step = 0;
  EXPECT_EQ(Load([&step](uint32_t tag, ProtobufCMessage *msg) {
              if (tag == AL_REC_MANIFEST_HEADER)
                ((Adaptiveload__ManifestHeader *)msg)->config->first_step = UINT32_MAX;
              if (auto *c = Chunk(tag, msg))
                for (size_t i = 0; i < c->n_steps; i++) c->steps[i]->step = UINT32_MAX + step++;
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("past 2^32-2")) << al_last_error();
}

TEST_F(ForgeTest, AScheduledSampleMarkedRejectedIsRefused) {
  uint64_t victim = UINT64_MAX;
  EXPECT_EQ(Load([&victim](uint32_t tag, ProtobufCMessage *msg) {
              if (tag == AL_REC_KEY_CHUNK) {
                auto *k = (Adaptiveload__KeyChunk *)msg;
                for (size_t i = 0; i < k->n_status && victim == UINT64_MAX; i++)
                  if (k->status[i] == 0) victim = k->first + i, k->status[i] = 1;
              }
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("not scheduled")) << al_last_error();
}

TEST_F(ForgeTest, ConsumedMarksOnlyInALaterStartingPlan) {
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (tag == AL_REC_KEY_CHUNK) {
                auto *k = (Adaptiveload__KeyChunk *)msg;
                if (k->n_status) k->status[0] = 17;
              }
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("consumed before step 0")) << al_last_error();
}

TEST_F(ForgeTest, DuplicatePaddingSlotsAreRefused) {
  std::vector<uint32_t> pads;
  EXPECT_EQ(Load([&pads](uint32_t tag, ProtobufCMessage *msg) {
              if (auto *c = Chunk(tag, msg)) {
                Adaptiveload__MicroBatch *mb = Micro(c, 0);
                pads = {0, 0};
                mb->n_padded = pads.size();
                mb->padded = pads.data();
              }
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("padding position 0 listed twice")) << al_last_error();
}

// The key table must be there: without it nothing could be checked.
TEST_F(ForgeTest, AManifestWithoutItsKeyTableIsRefused) {
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (tag == AL_REC_KEY_CHUNK) {
                auto *k = (Adaptiveload__KeyChunk *)msg;
                k->n_keys = k->n_status = 0;
              }
            }),
            AL_EFORMAT);
}

TEST_F(ForgeTest, AManifestPastTheSizeCapIsRefusedNamingTheSetting) {
  setenv("ADAPTIVELOAD_MAX_MANIFEST_BYTES", "4096", 1);
  al_manifest *m = nullptr;
  EXPECT_EQ(al_manifest_load(&m, src.c_str()), AL_ERANGE);
  EXPECT_TRUE(altest::ErrorContains("limit of 4096 bytes (ADAPTIVELOAD_MAX_MANIFEST_BYTES)"))
      << al_last_error();
  EXPECT_EQ(m, nullptr);
  setenv("ADAPTIVELOAD_MAX_MANIFEST_BYTES", "100000000", 1);
  EXPECT_EQ(al_manifest_load(&m, src.c_str()), AL_OK) << al_last_error();
  al_manifest_free(m);
  unsetenv("ADAPTIVELOAD_MAX_MANIFEST_BYTES");
}

// What a report function prints, as a string.
template <typename F>
std::string Printed(F print) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  print(f);
  fclose(f);
  std::string out(buf, len);
  free(buf);
  return out;
}

// Figures a file carries may be anything; the JSON reports stay JSON (NaN and inf as null).
TEST_F(ForgeTest, NonFiniteFiguresPrintAsNullInValidJson) {
  ASSERT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (tag == AL_REC_MANIFEST_SUMMARY) {
                auto *sm = (Adaptiveload__ManifestSummary *)msg;
                sm->imbalance_cv = NAN;
                sm->predicted_tokens_per_s = INFINITY;
              }
              if (tag == AL_REC_MANIFEST_HEADER) {
                auto *h = (Adaptiveload__ManifestHeader *)msg;
                h->cost->r2 = NAN;
                h->cost->median_rel_err = -INFINITY;
              }
              if (auto *c = Chunk(tag, msg)) Micro(c, 0)->cost_ms = NAN;
            }),
            AL_OK)
      << al_last_error();
  al_manifest *m = nullptr;
  ASSERT_EQ(al_manifest_load(&m, dst.c_str()), AL_OK) << al_last_error();
  std::string info = Printed([m](FILE *f) { al_manifest_print_json(f, m); });
  al_cost_model cost = AL_COST_MODEL_INIT;
  ASSERT_EQ(al_manifest_cost(m, &cost), AL_OK);
  std::string model = Printed([&cost](FILE *f) { al_cost_print_json(&cost, f); });
  std::string lines = Printed([m](FILE *f) { al_manifest_print_jsonl(f, m); });
  al_manifest_free(m);
  json_error_t err;
  json_t *j = json_loads(info.c_str(), 0, &err);
  ASSERT_TRUE(j) << err.text << "\n" << info;
  EXPECT_TRUE(json_is_null(json_object_get(j, "imbalance_cv")));
  EXPECT_TRUE(json_is_null(json_object_get(j, "predicted_tokens_per_s")));
  EXPECT_TRUE(json_is_number(json_object_get(j, "bubble")));
  json_decref(j);
  j = json_loads(model.c_str(), 0, &err);
  ASSERT_TRUE(j) << err.text << "\n" << model;
  json_t *fit = json_object_get(j, "fit");
  EXPECT_TRUE(json_is_null(json_object_get(fit, "r2")));
  EXPECT_TRUE(json_is_null(json_object_get(fit, "median_rel_err")));
  json_decref(j);
  std::string first = lines.substr(0, lines.find('\n'));
  j = json_loads(first.c_str(), 0, &err);
  ASSERT_TRUE(j) << err.text << "\n" << first;
  EXPECT_TRUE(json_is_null(json_object_get(j, "cost_ms")));
  json_decref(j);
}

// A plan resumed at step k (start_step) marks the steps before k consumed, and loads.
TEST(ManifestCheck, StartStepPlansLoadAndMarkTheCutOffConsumed) {
  Shapes s = altest::MakeShapes(600, 9);
  al_plan_options o{};
  o.world = 4;
  o.seed = 5;
  al_manifest *full = altest::PlanAndLoad(s, o, "full.alm");
  ASSERT_TRUE(full);
  uint32_t half = altest::Info(full).steps / 2;
  o.start_step = half;
  al_manifest *part = altest::PlanAndLoad(s, o, "part.alm");
  ASSERT_TRUE(part);
  auto before = altest::Occurrences(full, 0, half);
  ASSERT_FALSE(before.empty());
  for (const auto &kv : before) EXPECT_EQ(al_manifest_key_status(part, kv.first), 17);
  for (const auto &kv : altest::Occurrences(part))
    EXPECT_EQ(al_manifest_key_status(part, kv.first), 0);
  al_manifest_free(full);
  al_manifest_free(part);
}

// A slice of a chunked run (its own key table) and a rank's slice: what loading proves of them.
class SliceForgeTest : public ::testing::Test {
 protected:
  altest::Shapes s = altest::MakeShapes(4000, 12);
  std::string src, dst = altest::TmpPath("slice_forged.alm");
  void Make(uint32_t only_rank) {
    al_cost_model c = altest::DefaultCost();
    al_plan_input in = s.Input();
    al_plan_options o = AL_PLAN_OPTIONS_INIT;
    o.world = 4, o.micro_per_step = 2;
    al_run *run = nullptr;
    ASSERT_EQ(al_run_open(&run, &in, &c, &o), AL_OK) << al_last_error();
    al_plan *p = nullptr;
    ASSERT_EQ(al_run_plan_steps(run, 4, 1, 3, &p), AL_OK) << al_last_error();
    al_run_free(run);
    src = altest::TmpPath("slice_src.alm");
    al_plan_save_options so = AL_PLAN_SAVE_OPTIONS_INIT;
    so.only_rank = only_rank;
    ASSERT_EQ(al_plan_save_opts(p, src.c_str(), altest::ShapeKey, (void *)&s, &so), AL_OK);
    al_plan_free(p);
  }
  int Load(const Mutate &mutate) {
    EXPECT_EQ(Forge(src, dst, mutate), AL_OK) << al_last_error();
    al_manifest *m = nullptr;
    int rc = al_manifest_load(&m, dst.c_str());
    al_manifest_free(m);
    return rc;
  }
};

TEST_F(SliceForgeTest, ASampleTwiceInASliceIsRefused) {
  Make(0);
  EXPECT_EQ(Load([](uint32_t, ProtobufCMessage *) {}), AL_OK) << al_last_error();
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (auto *c = Chunk(tag, msg)) Micro(c, 1)->samples[0] = Micro(c, 0)->samples[0];
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("scheduled a second time in this slice")) << al_last_error();
}

TEST_F(SliceForgeTest, ASampleOutsideItsKeyTableIsRefused) {
  Make(0);
  uint64_t unlisted = 0;
  EXPECT_EQ(Load([&](uint32_t tag, ProtobufCMessage *msg) {
              if (tag == AL_REC_KEY_CHUNK) { // the first position not listed
                auto *k = (Adaptiveload__KeyChunk *)msg;
                for (size_t i = 0; i < k->n_positions && k->positions[i] == unlisted; i++)
                  unlisted++;
              }
              if (auto *c = Chunk(tag, msg)) Micro(c, 0)->samples[0] = unlisted;
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("is not in the slice's key table")) << al_last_error();
}

TEST_F(SliceForgeTest, KeyPositionsOutOfOrderAreRefused) {
  Make(0);
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (tag != AL_REC_KEY_CHUNK) return;
              auto *k = (Adaptiveload__KeyChunk *)msg;
              ASSERT_GE(k->n_positions, 2u);
              std::swap(k->positions[0], k->positions[1]);
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("positions ascend")) << al_last_error();
}

TEST_F(SliceForgeTest, ARanksSliceBelowItsStepTotalsIsRefused) {
  Make(3);
  EXPECT_EQ(Load([](uint32_t, ProtobufCMessage *) {}), AL_OK) << al_last_error();
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (auto *c = Chunk(tag, msg)) c->steps[0]->samples = 1;
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("but rank 2 alone holds")) << al_last_error();
  EXPECT_EQ(Load([](uint32_t tag, ProtobufCMessage *msg) {
              if (tag != AL_REC_MANIFEST_HEADER) return;
              ((Adaptiveload__ManifestHeader *)msg)->config->only_rank = 9;
            }),
            AL_EFORMAT);
  EXPECT_TRUE(altest::ErrorContains("only_rank 9")) << al_last_error();
}

} // namespace
