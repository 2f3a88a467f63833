/* libFuzzer harness: index files (loader/al_index.h, al_index_load) through the
 * proto container. Input byte 0, bit 0 clear: the rest is the decompressed
 * container stream, wrapped here in a valid LZ4 frame; set: the file as is.
 * A loaded index is walked through every accessor. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "loader/al_index.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *path;
  if (!path) path = fuzz_tmp_path(".alidx");
  fuzz_write_container(path, data, size);
  al_index *idx = NULL;
  if (al_index_load(&idx, path) != AL_OK) {
    if (idx) abort(); /* nothing handed out on failure */
    return 0;
  }
  for (size_t i = 0; i < al_index_shard_count(idx); i++) {
    al_shard_info sh;
    if (al_index_shard(idx, i, &sh) != AL_OK) abort();
  }
  for (size_t i = 0; i < al_index_sample_count(idx); i++) {
    al_sample_info s;
    if (al_index_sample(idx, i, &s) != AL_OK) abort();
    if (s.shard >= al_index_shard_count(idx)) abort();
    for (size_t m = 0; m < s.n_members; m++) {
      al_member_info mi;
      if (al_index_member(idx, i, m, &mi) != AL_OK) abort();
    }
    al_member_info mi;
    (void)al_index_find_member(idx, i, "latent", &mi);
  }
  for (size_t i = 0; i < al_index_rejected_count(idx); i++) {
    al_rejected_info r;
    if (al_index_rejected(idx, i, &r) != AL_OK) abort();
  }
  (void)al_index_fingerprint(idx);
  (void)al_index_memory(idx, NULL, NULL);
  al_index_free(idx);
  return 0;
}
