/* libFuzzer harness: the tar indexer (loader/al_index.h, al_index_build) on the
 * input written to a temp *.tar file: libarchive's filters and tar reader, the
 * member grouping, KEY.json and KEY.json.lz4 metadata, rejections. The read size
 * follows the input's length: the adaptive default (two 1 MiB buffers, 4 MiB for
 * compressed shards) one time in four, else a fixed 512 B to 16 KiB, which also
 * splits headers across reads. A built index is walked; one time in four it is
 * also saved and loaded back (same counts and fingerprint): saving fsyncs. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "loader/al_index.h"
#include "tests/fuzz/fuzz_common.h"

static void walk(const al_index *idx) {
  size_t n = al_index_sample_count(idx);
  for (size_t i = 0; i < al_index_shard_count(idx); i++) {
    al_shard_info sh = AL_SHARD_INFO_INIT;
    if (al_index_shard(idx, i, &sh) != AL_OK) abort();
  }
  for (size_t i = 0; i < n; i++) {
    al_sample_info s = AL_SAMPLE_INFO_INIT;
    if (al_index_sample(idx, i, &s) != AL_OK) abort();
    for (size_t m = 0; m < s.n_members; m++) {
      al_member_info mi;
      if (al_index_member(idx, i, m, &mi) != AL_OK) abort();
    }
    al_member_info mi;
    (void)al_index_find_member(idx, i, "json", &mi);
  }
  for (size_t i = 0; i < al_index_rejected_count(idx); i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    if (al_index_rejected(idx, i, &r) != AL_OK) abort();
  }
  (void)al_index_memory(idx, NULL, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *shard, *saved;
  if (!shard) {
    shard = fuzz_tmp_path(".tar");
    saved = fuzz_tmp_path(".alidx");
  }
  fuzz_write_file(shard, data, size);
  al_index_options o = {0};
  o.threads = 1;
  o.progress = -1;
  static const size_t block[] = {0, 512, 1536, 4096, 16384};
  o.block_size = size % 4 == 0 ? 0 : block[1 + (size / 4) % 4];
  al_index *idx = NULL;
  int rc = al_index_build(&idx, &shard, 1, &o, NULL);
  if (idx) {
    walk(idx);
    if (rc == AL_OK && size % 4 == 0 && al_index_save(idx, saved) == AL_OK) {
      al_index *back = NULL;
      if (al_index_load(&back, saved) != AL_OK) abort(); /* what we wrote must load */
      if (al_index_sample_count(back) != al_index_sample_count(idx) ||
          al_index_rejected_count(back) != al_index_rejected_count(idx) ||
          al_index_fingerprint(back) != al_index_fingerprint(idx))
        abort();
      al_index_free(back);
    }
    al_index_free(idx);
  }
  return 0;
}
