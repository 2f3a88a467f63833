/* libFuzzer harness: manifests (manifest/al_manifest.h, al_manifest_load) through
 * the proto container. Input byte 0, bit 0 clear: the rest is the decompressed
 * container stream, wrapped here in a valid LZ4 frame; set: the file as is.
 * A loaded manifest is walked: buckets, every (step, rank) micro-batch (up to a
 * bound), step totals, rank costs, keys and their status, the cost model. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "manifest/al_manifest.h"
#include "tests/fuzz/fuzz_common.h"

#define WALK_MAX 100000 /* micro-batches visited per input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *path;
  if (!path) path = fuzz_tmp_path(".alm");
  fuzz_write_container(path, data, size);
  al_manifest *m = NULL;
  if (al_manifest_load(&m, path) != AL_OK) {
    if (m) abort(); /* nothing handed out on failure */
    return 0;
  }
  al_manifest_info info = AL_MANIFEST_INFO_INIT;
  if (al_manifest_get_info(m, &info) != AL_OK) abort();
  for (size_t b = 0; b < info.buckets; b++) {
    al_bucket_info bi = AL_BUCKET_INFO_INIT;
    if (al_manifest_bucket(m, b, &bi) != AL_OK) abort();
  }
  size_t visited = 0;
  for (uint32_t s = 0; s < info.steps && visited < WALK_MAX; s++) {
    uint32_t step = info.first_step + s;
    al_step_info si = AL_STEP_INFO_INIT;
    if (al_manifest_step(m, step, &si) != AL_OK) abort();
    for (uint32_t r = 0; r < info.world && visited < WALK_MAX; r++) {
      uint32_t n = 0;
      double cost;
      if (al_manifest_micro_count(m, step, r, &n) != AL_OK) abort();
      if (n == 0) abort(); /* the loader promises >= 1 micro-batch per rank per step */
      if (al_manifest_rank_cost(m, step, r, &cost) != AL_OK) abort();
      for (uint32_t k = 0; k < n && visited < WALK_MAX; k++, visited++) {
        al_micro_ref ref = AL_MICRO_REF_INIT;
        if (al_manifest_micro(m, step, r, k, &ref) != AL_OK) abort();
        for (size_t j = 0; j < ref.n_samples; j++) {
          (void)al_manifest_key(m, ref.samples[j]);
          (void)al_manifest_key_status(m, ref.samples[j]);
        }
        for (size_t j = 0; j < ref.n_padded; j++)
          if (ref.padded[j] >= ref.n_samples) abort();
      }
    }
  }
  for (uint64_t i = 0; i < info.index_samples && i < WALK_MAX; i++) {
    (void)al_manifest_key(m, i);
    (void)al_manifest_key_status(m, i);
  }
  al_cost_model cm = AL_COST_MODEL_INIT;
  (void)al_manifest_cost(m, &cm);
  (void)al_manifest_rejected(m, AL_REJECT_NONE);
  al_manifest_free(m);
  return 0;
}
