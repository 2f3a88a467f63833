/* adaptiveload synth: write a synthetic WebDataset corpus (loader/al_synth.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "loader/al_synth.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: adaptiveload synth --out DIR [--samples N] [--shards K] [--seed S]\n"
          "                          [--payload latent|none] [--json-lz4] [--threads T]\n\n"
          "Writes a synthetic WebDataset corpus DIR/shard-000000.tar ... that looks like a\n"
          "video DiT training set: ~40%% still images, the rest clips of 2..121 frames (mostly\n"
          "4k+1) at 16/24/25/30 fps; short sides 240..720 px, aspect ratios 1:1..21:9, both\n"
          "orientations, dimensions multiples of 16. Each sample KEY has KEY.json (width,\n"
          "height, frames, fps, duration) and KEY.latent, a bf16 Wan-2.1 latent of the right\n"
          "size (16 x T' x H/8 x W/8 x 2 bytes, T' = 1 + (frames-1)/4) of pseudo-random bytes.\n"
          "Keys are SHARD-SAMPLE (\"000003-00001234\"). The same options give byte-identical files.\n\n"
          "options:\n"
          "  --out DIR          output directory (created)\n"
          "  --samples N        number of samples (default 2000)\n"
          "  --shards K         number of shards (default 8)\n"
          "  --seed S           random seed (default 0)\n"
          "  --payload KIND     latent (default) or none (metadata-only shards)\n"
          "  --json-lz4         store metadata as KEY.json.lz4 (an LZ4 frame)\n"
          "  --threads T        shards written in parallel (default: all cores)\n");
}

int cli_cmd_synth(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return AL_EXIT_OK;
  }
  al_synth_options o;
  memset(&o, 0, sizeof o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    unsigned long long n;
    if (!strcmp(a, "--json-lz4")) {
      o.lz4_json = 1;
      continue;
    }
    if (!v) return cli_usage_error("synth", "%s needs a value (or is unknown)", a);
    i++;
    if (!strcmp(a, "--out") || !strcmp(a, "-o")) {
      o.out_dir = v;
    } else if (!strcmp(a, "--samples") && !cli_parse_u64(v, &n) && n > 0) {
      o.samples = n;
    } else if (!strcmp(a, "--shards") && !cli_parse_u64(v, &n) && n > 0 && n <= 1000000) {
      o.shards = (uint32_t)n;
    } else if (!strcmp(a, "--seed") && !cli_parse_u64(v, &n)) {
      o.seed = n;
    } else if (!strcmp(a, "--threads") && !cli_parse_u64(v, &n) && n > 0 && n <= 4096) {
      o.threads = (int)n;
    } else if (!strcmp(a, "--payload") && (!strcmp(v, "latent") || !strcmp(v, "none"))) {
      o.payload = !strcmp(v, "none") ? AL_SYNTH_NONE : AL_SYNTH_LATENT;
    } else {
      return cli_usage_error("synth", "bad option or value: %s %s", a, v);
    }
  }
  if (!o.out_dir) return cli_usage_error("synth", "--out DIR is required");
  al_synth_stats stats;
  if (al_synth_write(&o, &stats) != AL_OK) return cli_fail("synth");
  fprintf(stderr,
          "synth: %llu samples (%llu images, %llu videos) in %u shards, %.1f MB, %.2f s -> %s\n",
          (unsigned long long)stats.samples, (unsigned long long)stats.images,
          (unsigned long long)stats.videos,
          o.shards ? (unsigned)(o.shards < stats.samples ? o.shards : stats.samples)
                   : (unsigned)(stats.samples < 8 ? stats.samples : 8),
          stats.bytes / 1e6, stats.seconds, o.out_dir);
  return AL_EXIT_OK;
}
