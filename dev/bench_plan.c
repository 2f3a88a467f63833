/* bench_plan: writes a large synthetic index without writing shards, for
 * timing `adaptiveload plan` (planner/README.md, "Benchmarks").
 *
 *   bench_plan -o /tmp/idx10m.alidx [--samples 10000000] [--shards 1000] [--seed 0] [--no-members]
 *   bench_plan --map /tmp/idx1b.map --samples 1000000000 [--shards K] [--seed S] [--no-members]
 *
 * Sample i has the shape `adaptiveload synth` would give it
 * (al_synth_sample(seed, i)), the same key format and, unless --no-members,
 * the same two members (KEY.json, KEY.latent) with plausible tar offsets, so
 * the index is as large as a real one of that many samples.
 *
 * --map writes the index map of that index instead (planner/al_run.h), the bytes
 * `plan --index INDEX --save-map MAP` writes for it, without building the index:
 * two passes over the samples (the classes counted and the index's fingerprint
 * folded, then every sample placed), holding only the classes and their write
 * buffers; a 10^9-sample map fits any machine with its 4 GB of disk. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/clock_internal.h"
#include "common/parse_internal.h"
#include "loader/al_index.h"
#include "loader/al_synth.h"
#include "planner/al_run.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: bench_plan -o INDEX [--samples N] [--shards K] [--seed S] [--no-members]\n"
          "       bench_plan --map MAP [--samples N] [--shards K] [--seed S] [--no-members]\n\n"
          "Builds an index of N samples (default 10,000,000) with the shape distribution of\n"
          "`adaptiveload synth` in memory (no shards are written) and saves it to INDEX;\n"
          "--map writes that index's index map to MAP instead (what `plan --index INDEX\n"
          "--save-map MAP` writes) without holding the index.\n");
}

/* Sample `next` of shard `id`: its shape, key and members (offsets from *off on). */
static int make_sample(uint64_t seed, uint64_t next, uint32_t id, uint64_t *off,
                       al_synth_sample_meta *m, char key[32], al_member_info mem[2]) {
  al_synth_sample_meta init = AL_SYNTH_SAMPLE_META_INIT;
  *m = init;
  int rc = al_synth_sample(seed, next, m);
  if (rc) return rc;
  snprintf(key, 32, "%06u-%08llu", id, (unsigned long long)next);
  mem[0] = (al_member_info){"json", *off + 512, 96, 0};
  mem[1] = (al_member_info){"latent", *off + 1536, m->latent_bytes, 0};
  *off += 1536 + ((m->latent_bytes + 511) / 512) * 512 + 512;
  return AL_OK;
}

static void shard_path(uint64_t s, char path[64]) {
  snprintf(path, 64, "/bench/shard-%06llu.tar", (unsigned long long)s);
}

/* --map: pass 1 counts the classes and folds the index's fingerprint, pass 2 places every
 * sample (al_run_map_writer). */
static int write_map(const char *out, uint64_t samples, uint64_t shards, uint64_t seed,
                     int members) {
  al_index_fp fp = AL_INDEX_FP_INIT;
  char path[64];
  for (uint64_t s = 0; s < shards; s++) {
    shard_path(s, path);
    al_index_fp_add_shard(&fp, path, 0);
  }
  al_run_map_writer *w = NULL;
  int rc = al_run_map_writer_open(&w, out, 0);
  for (int pass = 0; pass < 2 && !rc; pass++) {
    uint64_t next = 0;
    for (uint64_t s = 0; s < shards && !rc; s++) {
      uint64_t end = (s + 1) * samples / shards, off = 0;
      for (; next < end && !rc; next++) {
        al_synth_sample_meta m;
        char key[32];
        al_member_info mem[2];
        rc = make_sample(seed, next, (uint32_t)s, &off, &m, key, mem);
        if (!rc && !pass)
          rc = al_index_fp_add_sample(&fp, key, (uint32_t)s, m.width, m.height, m.frames,
                                      members ? mem : NULL, members ? 2 : 0);
        if (!rc)
          rc = pass ? al_run_map_writer_place(w, m.width, m.height, m.frames, NULL)
                    : al_run_map_writer_count(w, m.width, m.height, m.frames, NULL);
      }
    }
    /* The fingerprint is known after pass 1: the writer takes it before its header is written. */
    if (!rc && !pass) al_run_map_writer_set_fingerprint(w, al_index_fp_value(&fp));
  }
  if (rc) {
    al_run_map_writer_free(w);
    return rc;
  }
  return al_run_map_writer_finish(w);
}

int main(int argc, char **argv) {
  const char *out = NULL, *map = NULL;
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
    else if (!bad && !strcmp(a, "--map"))
      map = v;
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
  if (!out == !map) {
    usage(stderr);
    return 2;
  }
  if (shards > samples) shards = samples;
  double t0 = clock_now_s();
  if (map) {
    int rc = write_map(map, samples, shards, seed, members);
    if (rc) {
      fprintf(stderr, "bench_plan: %s\n", al_last_error());
      return 1;
    }
    fprintf(stderr, "bench_plan: the index map of %llu samples in %llu shards in %.2f s -> %s\n",
            (unsigned long long)samples, (unsigned long long)shards, clock_now_s() - t0, map);
    return 0;
  }
  al_index *idx = NULL;
  int rc = al_index_new(&idx);
  uint64_t next = 0;
  for (uint64_t s = 0; s < shards && !rc; s++) {
    char path[64];
    shard_path(s, path);
    uint32_t id;
    uint64_t end = (s + 1) * samples / shards;
    rc = al_index_add_shard(idx, path, 0, 1, &id);
    uint64_t off = 0;
    for (; next < end && !rc; next++) {
      al_synth_sample_meta m;
      char key[32];
      al_member_info mem[2];
      rc = make_sample(seed, next, id, &off, &m, key, mem);
      if (rc) break;
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
