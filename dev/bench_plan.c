/* bench_plan: writes a large synthetic index without writing shards, for
 * timing `adaptiveload plan` (planner/README.md, "Benchmarks").
 *
 *   bench_plan -o /tmp/idx10m.alidx [--samples 10000000] [--shards 1000] [--seed 0] [--no-members]
 *
 * Sample i has the shape `adaptiveload synth` would give it
 * (al_synth_sample(seed, i)), the same key format and, unless --no-members,
 * the same two members (KEY.json, KEY.latent) with plausible tar offsets, so
 * the index is as large as a real one of that many samples. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/clock_internal.h"
#include "common/parse_internal.h"
#include "loader/al_index.h"
#include "loader/al_synth.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: bench_plan -o INDEX [--samples N] [--shards K] [--seed S] [--no-members]\n\n"
          "Builds an index of N samples (default 10,000,000) with the shape distribution of\n"
          "`adaptiveload synth` in memory (no shards are written) and saves it to INDEX.\n");
}

int main(int argc, char **argv) {
  const char *out = NULL;
  uint64_t samples = 10000000, shards = 1000, seed = 0;
  int members = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    }
    if (!strcmp(a, "--no-members")) {
      members = 0;
      continue;
    }
    int bad = !v;
    if (!bad && (!strcmp(a, "-o") || !strcmp(a, "--out")))
      out = v;
    else if (!bad && !strcmp(a, "--samples"))
      bad = parse_u64(v, &samples) || !samples;
    else if (!bad && !strcmp(a, "--shards"))
      bad = parse_u64(v, &shards) || !shards || shards > 1000000;
    else if (!bad && !strcmp(a, "--seed"))
      bad = parse_u64(v, &seed);
    else
      bad = 1;
    if (bad) {
      fprintf(stderr, "bench_plan: bad option %s %s\n\n", a, v ? v : "");
      usage(stderr);
      return 2;
    }
    i++;
  }
  if (!out) {
    usage(stderr);
    return 2;
  }
  if (shards > samples) shards = samples;
  double t0 = clock_now_s();
  al_index *idx = NULL;
  int rc = al_index_new(&idx);
  uint64_t next = 0;
  for (uint64_t s = 0; s < shards && !rc; s++) {
    char path[64];
    snprintf(path, sizeof path, "/bench/shard-%06llu.tar", (unsigned long long)s);
    uint32_t id;
    uint64_t end = (s + 1) * samples / shards;
    rc = al_index_add_shard(idx, path, 0, 1, &id);
    uint64_t off = 0;
    for (; next < end && !rc; next++) {
      al_synth_sample_meta m = AL_SYNTH_SAMPLE_META_INIT;
      rc = al_synth_sample(seed, next, &m);
      if (rc) break;
      char key[32];
      snprintf(key, sizeof key, "%06u-%08llu", id, (unsigned long long)next);
      al_member_info mem[2] = {{"json", off + 512, 96, 0},
                               {"latent", off + 1536, m.latent_bytes, 0}};
      off += 1536 + ((m.latent_bytes + 511) / 512) * 512 + 512;
      rc = al_index_add_sample(idx, key, id, m.width, m.height, m.frames, m.fps,
                               members ? mem : NULL, members ? 2 : 0);
    }
  }
  double t1 = clock_now_s();
  if (!rc) rc = al_index_save(idx, out);
  double t2 = clock_now_s();
  if (rc) {
    fprintf(stderr, "bench_plan: %s\n", al_last_error());
    al_index_free(idx);
    return 1;
  }
  fprintf(stderr,
          "bench_plan: %llu samples in %llu shards: built in %.2f s, saved in %.2f s -> %s\n",
          (unsigned long long)samples, (unsigned long long)shards, t1 - t0, t2 - t1, out);
  al_index_free(idx);
  return 0;
}
