/*
 * bench_feed - what a stream over a chunked run costs in plan memory and time, against the
 * manifest path, on a metadata-only corpus opened from its index map (no shards: no sample is
 * read; the stream's readers are not started).
 *
 *   bench_feed --map M --world W --micro-per-step K --rank R --mode feed|manifest
 *              [--windows N] [--ahead A] [--at first|middle|last]
 *
 * feed: the run is opened from the map and the stream's plan feed (stream/plan_feed_internal.h,
 * the thread of al_stream_open_run, with no index: no member check) is begun at the step --at
 * names; this process pulls rank R's batch descriptors of N windows through it (as the engine's
 * readers and consumer do: batch, unpin, release), and reports the time to the first batch and
 * the total, and the peak RssAnon (/proc/self/status, sampled after every batch).
 * manifest: the run's whole epoch planned at W (al_run_plan_steps 0:steps), saved without keys,
 * loaded and flattened into rank R's plan (stream_rank_plan_from_manifest), as al_stream_open
 * prepares a manifest's stream before its first batch: the time to that point and the peak
 * RssAnon (sampled at each stage). One process per mode, so the peaks do not mix.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock_internal.h"
#include "common/parse_internal.h"
#include "cost/al_cost.h"
#include "manifest/al_manifest.h"
#include "planner/al_run.h"
#include "stream/engine_internal.h"
#include "stream/plan_feed_internal.h"

static long rss_anon_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "RssAnon:", 8)) kb = strtol(line + 8, NULL, 10);
  if (f) fclose(f);
  return kb;
}

static long peak;
static void sample(void) {
  long kb = rss_anon_kb();
  if (kb > peak) peak = kb;
}

static int die(const char *what) {
  fprintf(stderr, "bench_feed: %s: %s\n", what, al_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const char *map = NULL, *mode = "feed", *at = "first";
  uint64_t world = 1, K = 1, rank = 0, windows = 4, ahead = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    int bad = 0;
    if (!strcmp(k, "--map"))
      map = v;
    else if (!strcmp(k, "--mode"))
      mode = v;
    else if (!strcmp(k, "--at"))
      at = v;
    else if (!strcmp(k, "--world"))
      bad = parse_u64(v, &world) || !world;
    else if (!strcmp(k, "--micro-per-step"))
      bad = parse_u64(v, &K) || !K;
    else if (!strcmp(k, "--rank"))
      bad = parse_u64(v, &rank);
    else if (!strcmp(k, "--windows"))
      bad = parse_u64(v, &windows) || !windows;
    else if (!strcmp(k, "--ahead"))
      bad = parse_u64(v, &ahead) || ahead > 64;
    else
      bad = 1;
    if (bad) {
      fprintf(stderr, "bench_feed: bad argument %s %s\n", k, v);
      return 2;
    }
  }
  if (!map || rank >= world || (strcmp(mode, "feed") && strcmp(mode, "manifest"))) {
    fprintf(stderr,
            "usage: bench_feed --map M --world W --micro-per-step K --rank R "
            "--mode feed|manifest [--windows N] [--ahead A] [--at first|middle|last]\n");
    return 2;
  }
  sample();
  double t0 = clock_now_s();
  al_cost_model cost = AL_COST_MODEL_INIT;
  al_plan_options po = AL_PLAN_OPTIONS_INIT;
  po.world = (uint32_t)world;
  po.micro_per_step = (uint32_t)K;
  al_run *run = NULL;
  if (al_cost_default(&cost) || al_run_open_map(&run, map, &cost, &po)) return die("opening");
  al_run_info ri = AL_RUN_INFO_INIT;
  if (al_run_get_info(run, &ri)) return die("run info");
  sample();
  double t_open = clock_now_s() - t0;
  if (!strcmp(mode, "manifest")) {
    al_plan *p = NULL;
    if (al_run_plan_steps(run, (uint32_t)world, 0, ri.steps, &p)) return die("planning");
    sample();
    char path[] = "/tmp/bench_feed_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    if (al_plan_save(p, path, NULL, NULL)) return die("saving");
    sample();
    al_plan_free(p);
    al_manifest *m = NULL;
    if (al_manifest_load(&m, path)) return die("loading");
    sample();
    stream_rank_plan rp;
    if (stream_rank_plan_from_manifest(&rp, m, (uint32_t)rank)) return die("rank plan");
    sample();
    double t_first = clock_now_s() - t0;
    printf("mode manifest world %" PRIu64 " K %" PRIu64 " rank %" PRIu64
           ": steps %u, rank batches %zu, "
           "open %.2f s, first batch %.2f s, peak RssAnon %.1f MB\n",
           world, K, rank, ri.steps, rp.n_batches, t_open, t_first, peak / 1024.0);
    stream_rank_plan_free(&rp);
    al_manifest_free(m);
    unlink(path);
    al_run_free(run);
    return 0;
  }
  stream_feed_args fa = {.run = run,
                         .rank = (uint32_t)rank,
                         .world = (uint32_t)world,
                         .ahead = (int)ahead};
  stream_feed *f = NULL;
  uint32_t k = 0;
  if (stream_feed_new(&f, &fa, &k, &ri)) return die("feed");
  uint32_t step = !strcmp(at, "middle") ? ri.steps / 2 : !strcmp(at, "last") ? ri.steps - 1 : 0;
  uint64_t from = (uint64_t)step * k, end = (uint64_t)ri.steps * k;
  uint64_t until = from + windows * ri.window * k;
  if (until > end) until = end;
  if (stream_feed_begin(f, from)) return die("feed begin");
  double t_first = 0;
  uint64_t samples = 0;
  for (uint64_t pos = from; pos < until; pos++) {
    const stream_plan_batch *pb;
    const stream_plan_sample *ps;
    const char *ge;
    if (stream_feed_batch(f, pos, &pb, &ps, &ge)) return die("batch");
    if (pos == from) t_first = clock_now_s() - t0;
    samples += pb->n;
    stream_feed_unpin(f, pos);
    stream_feed_release(f, pos + 1);
    sample();
  }
  double t_all = clock_now_s() - t0;
  stream_feed_counts c;
  stream_feed_get_counts(f, &c);
  printf("mode feed world %" PRIu64 " K %u rank %" PRIu64
         " at step %u (%s): steps %u, window %u, "
         "%" PRIu64 " batches (%" PRIu64 " samples) of %" PRIu64
         " windows, open %.2f s, first batch %.2f s, all %.2f s, peak RssAnon %.1f MB, most chunks "
         "alive %d (ahead %" PRIu64 ")\n",
         world, k, rank, step, at, ri.steps, ri.window, until - from, samples, c.planned, t_open,
         t_first, t_all, peak / 1024.0, c.max_alive, ahead);
  stream_feed_free(f);
  al_run_free(run);
  return 0;
}
