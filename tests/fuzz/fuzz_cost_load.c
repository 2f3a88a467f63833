/* libFuzzer harness: cost model files (cost/al_cost.h, al_cost_load) through
 * the proto container. Input byte 0, bit 0 clear: the rest is the decompressed
 * container stream, wrapped here in a valid LZ4 frame; set: the file as is.
 * A loaded model is used for predictions. */
#include <stddef.h>
#include <stdint.h>

#include "cost/al_cost.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *path;
  if (!path) path = fuzz_tmp_path(".alcost");
  fuzz_write_container(path, data, size);
  al_cost_model m = AL_COST_MODEL_INIT;
  if (al_cost_load(&m, path) != AL_OK) return 0;
  static const uint64_t S[] = {1, 256, 32760, 65536, 1u << 31};
  for (size_t i = 0; i < sizeof S / sizeof S[0]; i++) {
    (void)al_cost_predict(&m, 1, S[i]);
    (void)al_cost_predict(&m, 64, S[i]);
    (void)al_cost_per_sample(&m, S[i]);
  }
  uint64_t tokens;
  (void)al_cost_mem_tokens(&m, 141e9, 0.9, &tokens);
  (void)al_cost_family_name(m.fit.family);
  (void)al_cost_family_name(m.alt.family);
  return 0;
}
