/* adaptiveload synth: write a synthetic WebDataset corpus (loader/al_synth.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "cli/options_internal.h"
#include "loader/al_synth.h"

static const cli_choice PAYLOADS[] = {{"latent", AL_SYNTH_LATENT},
                                      {"none", AL_SYNTH_NONE},
                                      {NULL, 0}};

/* The arguments land in the library's options directly. */
/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--out", .alias = "-o", .type = CLI_STRING, CLI_AT(al_synth_options, out_dir),
     .metavar = "DIR", .help = "output directory (created)"},
    {.name = "--samples", .type = CLI_U64, CLI_AT(al_synth_options, samples), .min = 1,
     .metavar = "N", .help = "number of samples", .def = "2000"},
    {.name = "--shards", .type = CLI_U64, CLI_AT(al_synth_options, shards), .min = 1,
     .max = 1000000, .metavar = "K", .help = "number of shards", .def = "8"},
    {.name = "--seed", .type = CLI_U64, CLI_AT(al_synth_options, seed), .metavar = "S",
     .help = "random seed", .def = "0"},
    {.name = "--payload", .type = CLI_CHOICE, CLI_AT(al_synth_options, payload),
     .choices = PAYLOADS, .metavar = "KIND",
     .help = "latent: bf16 latents of the right size; none: metadata-only shards", .def = "latent"},
    {.name = "--json-lz4", .type = CLI_FLAG, CLI_AT(al_synth_options, lz4_json), .set = 1,
     .help = "store metadata as KEY.json.lz4 (an LZ4 frame)"},
    {.name = "--threads", .type = CLI_U64, CLI_AT(al_synth_options, threads), .min = 1, .max = 4096,
     .metavar = "T", .help = "shards written in parallel", .def = "all cores"},
    {.name = NULL},
};
/* clang-format on */

static const cli_verb SYNTH = {
    .name = "synth",
    .usage =
        "usage: adaptiveload synth --out DIR [--samples N] [--shards K] [--seed S]\n"
        "                          [--payload latent|none] [--json-lz4] [--threads T]\n\n"
        "Writes a synthetic WebDataset corpus DIR/shard-000000.tar ... that looks like a\n"
        "video DiT training set: ~40% still images, the rest clips of 2..121 frames (mostly\n"
        "4k+1) at 16/24/25/30 fps; short sides 240..720 px, aspect ratios 1:1..21:9, both\n"
        "orientations, dimensions multiples of 16. Each sample KEY has KEY.json (width,\n"
        "height, frames, fps, duration) and KEY.latent, a bf16 Wan-2.1 latent of the right\n"
        "size (16 x T' x H/8 x W/8 x 2 bytes, T' = 1 + (frames-1)/4) of pseudo-random bytes.\n"
        "Keys are SHARD-SAMPLE (\"000003-00001234\"). The same options give byte-identical "
        "files.\n\n",
    .options = OPTIONS,
    .say = CLI_SAY_HINT,
    .missing = "%s needs a value (or is unknown)",
    .unknown = "bad option or value: %s %s",
    .bad = "bad option or value: %s %s",
    .bad_say = CLI_SAY_HINT,
};

int cli_cmd_synth(int argc, char **argv) {
  al_synth_options o;
  memset(&o, 0, sizeof o);
  int ec = cli_parse(&SYNTH, argc, argv, &o);
  if (ec != CLI_RUN) return ec;
  if (!o.out_dir) return cli_usage(&SYNTH, CLI_SAY_HINT, "--out DIR is required");
  al_synth_stats stats = AL_SYNTH_STATS_INIT;
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
