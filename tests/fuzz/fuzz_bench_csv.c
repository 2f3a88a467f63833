/* libFuzzer harness: the shape-benchmark reader (cost/al_cost.h,
 * al_bench_parse: CSV, or JSON when the first non-blank byte says so) on the
 * input bytes (not NUL-terminated), then the cost fit of what it read. */
#include <stddef.h>
#include <stdint.h>

#include "cost/al_cost.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  al_bench b = AL_BENCH_INIT;
  if (al_bench_parse(&b, (const char *)data, size, "fuzz.csv") != AL_OK) return 0;
  al_cost_fit_options o = {0};
  al_cost_model m = AL_COST_MODEL_INIT;
  if (al_cost_fit_bench(&b, &o, &m) == AL_OK) {
    (void)al_cost_predict(&m, 1, 256);
    (void)al_cost_per_sample(&m, 65536);
  }
  o.family = AL_COST_POWER;
  o.loss = AL_LOSS_ABS;
  o.min_tokens = 1;
  (void)al_cost_fit_bench(&b, &o, &m);
  al_bench_free(&b);
  return 0;
}
