/* adaptiveload index: index WebDataset tar shards into an index file (loader/al_index.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "cli/options_internal.h"
#include "common/al_status.h"
#include "common/json_write_internal.h"
#include "loader/al_index.h"

#define SHOW_REJECTED 20

typedef struct index_args {
  al_index_options o;
  const char *output;
  int json;
  char **paths; /* expanded SHARD arguments (freed by the verb) */
  size_t n;
  const char **args; /* SHARD arguments as given, expanded after parsing (--s3-endpoint) */
  size_t n_args;
  char *fields; /* --fields, names pointed to from o (freed by the verb) */
} index_args;

/* --fields width=W,height=H,frames=F,fps=R,duration=D: names copied into a->fields and
 * pointed to from the options. */
static int parse_fields(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  index_args *a = args;
  if (a->fields)
    return cli_usage(verb, CLI_SAY_HINT, "--fields given twice (list every name in one)");
  a->fields = strdup(v);
  if (!a->fields) return cli_usage(verb, CLI_SAY_HINT, "out of memory");
  char *save = NULL;
  for (char *item = strtok_r(a->fields, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq || eq == item || !eq[1])
      return cli_usage(verb, CLI_SAY_HINT, "bad --fields item '%s' (want KEY=NAME)", item);
    *eq = '\0';
    const char *name = eq + 1;
    if (!strcmp(item, "width")) {
      a->o.field_width = name;
    } else if (!strcmp(item, "height")) {
      a->o.field_height = name;
    } else if (!strcmp(item, "frames")) {
      a->o.field_frames = name;
    } else if (!strcmp(item, "fps")) {
      a->o.field_fps = name;
    } else if (!strcmp(item, "duration")) {
      a->o.field_duration = name;
    } else {
      return cli_usage(verb, CLI_SAY_HINT,
                       "unknown --fields key '%s' (width, height, frames, fps, duration)", item);
    }
  }
  return 0;
}

/* --vae-stride T,S, each 1..1024. */
static int parse_vae_stride(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  index_args *a = args;
  uint64_t ts[2];
  if (cli_parse_u64_list(v, ts, 2) || ts[0] < 1 || ts[1] < 1 || ts[0] > 1024 || ts[1] > 1024)
    return cli_usage(verb, CLI_SAY_HINT, "bad --vae-stride '%s' (want T,S, e.g. 4,8)", v);
  a->o.vae_stride_t = (uint32_t)ts[0];
  a->o.vae_stride_s = (uint32_t)ts[1];
  return 0;
}

/* SHARD: kept, expanded once the options (--s3-endpoint) are known. */
static int add_shards(const cli_verb *verb, const char *arg, void *args) {
  index_args *a = args;
  const char **v = realloc(a->args, (a->n_args + 1) * sizeof *v);
  if (!v) return cli_usage(verb, CLI_SAY_HINT, "out of memory");
  a->args = v;
  a->args[a->n_args++] = arg;
  return 0;
}

/* Every SHARD argument into a->paths: a file, a directory, a brace pattern, a URL, an s3://
 * prefix. */
static int expand_shards(index_args *a) {
  al_storage_options st = {.s3_endpoint = a->o.s3_endpoint,
                           .s3_region = a->o.s3_region,
                           .s3_addressing = a->o.s3_addressing,
                           .remote_timeout_s = a->o.remote_timeout_s};
  for (size_t i = 0; i < a->n_args; i++)
    if (al_shard_expand_storage(a->args[i], &st, &a->paths, &a->n)) return cli_fail("index");
  return 0;
}

#define FIELD(member, what)                                                            \
  {                                                                                    \
    .name = "--field-" what, .type = CLI_STRING, CLI_AT(index_args, o.field_##member), \
    .metavar = "NAME", .help = "JSON field name of the " what, .def = what             \
  }

/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--output", .alias = "-o", .type = CLI_STRING, CLI_AT(index_args, output),
     .metavar = "INDEX", .help = "index file to write"},
    {.name = "--threads", .type = CLI_U64, CLI_AT(index_args, o.threads), .min = 1, .max = 4096,
     .metavar = "T", .help = "shards indexed in parallel (each remote one over a connection)",
     .def = "all cores; at least 8 with URL shards"},
    {.name = "--json", .type = CLI_FLAG, CLI_AT(index_args, json), .set = 1,
     .help = "print one summary object on stdout:\n"
             "{\"shards\", \"samples\", \"rejected\", \"bytes\", \"seconds\", \"bytes_read\",\n"
             "\"mem_records\", \"mem_keys\", \"warnings\", \"remote_shards\",\n"
             "\"remote_requests\", \"remote_bytes\", \"remote\": [{\"url\", \"requests\",\n"
             "\"bytes\"}]} (bytes: shard sizes; bytes_read: what was read, payloads\n"
             "of plain tar shards being skipped; mem_*: bytes the in-memory index\n"
             "holds; remote_*: HTTP requests and body bytes of URL shards)"},
    {.name = "--dali-idx", .type = CLI_STRING, CLI_AT(index_args, o.dali_idx_dir), .metavar = "DIR",
     .help = "also write DALI wds2idx v1.2 index files (plain tar shards)"},
    {.name = "--strict", .type = CLI_FLAG, CLI_AT(index_args, o.strict), .set = 1,
     .help = "exit 1 if anything was rejected (the index is still written)"},
    {.name = "--progress", .type = CLI_FLAG, CLI_AT(index_args, o.progress), .set = 1,
     .help = "force the progress line on", .def = "on when stderr is a terminal"},
    {.name = "--no-progress", .type = CLI_FLAG, CLI_AT(index_args, o.progress), .set = -1,
     .help = "force the progress line off"},
    FIELD(width, "width"),
    FIELD(height, "height"),
    FIELD(frames, "frames"),
    FIELD(fps, "fps"),
    FIELD(duration, "duration"),
    {.name = "--fields", .type = CLI_CUSTOM, .parse = parse_fields, .metavar = "K=NAME,...",
     .help = "the same in one option, e.g. --fields frames=nb_frames,fps=rate\n"
             "(keys: width, height, frames, fps, duration)"},
    {.name = "--vae-stride", .type = CLI_CUSTOM, .parse = parse_vae_stride, .metavar = "T,S",
     .help = "VAE strides in time and space of the latent check", .def = "4,8"},
    {.name = "--max-member-bytes", .type = CLI_U64, CLI_AT(index_args, o.max_member_bytes),
     .min = 1, .metavar = "N", .help = "reject samples with a member over N bytes",
     .def = "512 MiB"},
    CLI_STORAGE_OPTIONS(index_args, o),
    {.name = "--block-size", .type = CLI_U64, CLI_AT(index_args, o.block_size), .min = 512,
     .max = 1ull << 30, .metavar = "BYTES",
     .help = "fixed read size (default: plain tar reads 16 KiB after each\n"
             "payload skip, doubling to 1 MiB; compressed shards 4 MiB)"},
    {.name = NULL},
};
/* clang-format on */

static const cli_verb INDEX = {
    .name = "index",
    .usage =
        "usage: adaptiveload index [--threads T] [--json] [--dali-idx DIR] [--strict]\n"
        "                         [--fields width=W,height=H,frames=F,fps=R,duration=D]\n"
        "                         [--vae-stride T,S] [--s3-endpoint URL] [--s3-region REGION]\n"
        "                         [--s3-addressing path|virtual] [--remote-timeout S]\n"
        "                         -o INDEX SHARD...\n\n"
        "Indexes WebDataset tar shards: every sample's key, members (data offset and size)\n"
        "and metadata from KEY.json or KEY.json.lz4 (width, height, frames, fps, duration).\n"
        "Plain tar (GNU, pax, Python tarfile), .tar.gz, .tar.lz4, .tar.zst, .tar.bz2, .tar.xz.\n"
        "Samples that cannot be indexed are listed as rejected with shard, member, byte\n"
        "offset and reason; the rest is indexed.\n\n"
        "Typed members (KEY.latent.npy, KEY.t5.npy, KEY.x.safetensors and their .lz4 forms)\n"
        "have their header read (not their data) for dtype and shape. The latent member\n"
        "(the first typed member whose extension starts with 'latent', shape (C, T, H, W)\n"
        "or (C, H, W)) must match KEY.json under the VAE stride: H = height / S,\n"
        "W = width / S, T = (frames - 1) / T + 1; a KEY.json without width and height\n"
        "takes them from it. A sample with a duration or fps but no frame-count field\n"
        "(frames, num_frames, nframes, nb_frames, frame_count, length) is indexed and\n"
        "counted as a warning.\n\n"
        "SHARD is a file, a directory (all *.tar* inside, sorted) or a brace pattern such as\n"
        "'shard-{000000..000099}.tar' (quote it so the shell leaves it alone); arguments\n"
        "after -- are SHARDs.\n\n"
        "A SHARD may be a URL: http(s)://HOST/PATH/shard-{000..099}.tar, or\n"
        "s3://BUCKET/KEY (an s3:// prefix such as s3://BUCKET/train/ lists its *.tar,\n"
        "*.tar.gz, *.tar.lz4, *.tar.zst, *.tar.bz2, *.tar.xz objects, sorted). Plain tars are indexed from their\n"
        "headers and metadata members in coalesced range requests (payloads are not\n"
        "fetched); compressed ones are read through. Keys from AWS_ACCESS_KEY_ID,\n"
        "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (none: anonymous), AWS_REGION; never\n"
        "printed or stored. The index records the URL, size, ETag and content fingerprint,\n"
        "and the S3 endpoint, region and addressing it read s3:// shards with: `stream`,\n"
        "`verify` and the Python package take them as their defaults (an option or the\n"
        "environment overrides them).\n\n",
    .options = OPTIONS,
    .epilogue =
        "exit status: 0 indexed (possibly with rejected samples), 1 no shard readable or\n"
        "--strict with rejections or an I/O error, 2 usage.\n",
    .positional = add_shards,
    .dashdash = 1,
    .say = CLI_SAY_HINT,
    .missing = "%s needs a value (or is unknown)",
    .unknown = "unknown option '%s'",
    .bad = "bad %s '%s'",
    .bad_say = CLI_SAY_HINT,
};

static void print_warnings(const al_index *idx) {
  size_t n = al_index_warning_count(idx);
  for (size_t i = 0; i < n && i < SHOW_REJECTED; i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    al_shard_info s = AL_SHARD_INFO_INIT;
    if (al_index_warning(idx, i, &r) || al_index_shard(idx, r.shard, &s)) break;
    fprintf(stderr, "  %s: sample '%s', member '%s' at byte %llu: %s\n", s.path, r.key, r.member,
            (unsigned long long)r.offset, r.reason);
  }
  if (n > SHOW_REJECTED) fprintf(stderr, "  ... and %zu more\n", n - SHOW_REJECTED);
}

static void print_rejected(const al_index *idx) {
  size_t n = al_index_rejected_count(idx);
  for (size_t i = 0; i < n && i < SHOW_REJECTED; i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    al_shard_info s = AL_SHARD_INFO_INIT;
    if (al_index_rejected(idx, i, &r) || al_index_shard(idx, r.shard, &s)) break;
    if (r.member[0])
      fprintf(stderr, "  %s: member '%s' at byte %llu: %s\n", s.path, r.member,
              (unsigned long long)r.offset, r.reason);
    else
      fprintf(stderr, "  %s: at byte %llu: %s\n", s.path, (unsigned long long)r.offset, r.reason);
  }
  if (n > SHOW_REJECTED) fprintf(stderr, "  ... and %zu more\n", n - SHOW_REJECTED);
}

/* The summary line, the rejected and warning lists and the DALI note, on stderr. */
static void print_summary(const al_index *idx, const al_index_stats *stats, const index_args *a) {
  if (!a->json || al_index_rejected_count(idx) || al_index_warning_count(idx)) {
    fprintf(stderr,
            "index: %llu shards, %llu samples, %llu rejected, %llu warnings, %.1f MB in %.2f s (%.0f samples/s) -> %s\n",
            (unsigned long long)stats->shards, (unsigned long long)stats->samples,
            (unsigned long long)stats->rejected, (unsigned long long)stats->warnings,
            stats->bytes / 1e6, stats->seconds,
            stats->seconds > 0 ? stats->samples / stats->seconds : 0.0, a->output);
    if (stats->remote_shards)
      fprintf(stderr, "index: %llu remote shards: %llu requests, %.2f MB received\n",
              (unsigned long long)stats->remote_shards, (unsigned long long)stats->remote_requests,
              stats->remote_bytes / 1e6);
    if (al_index_rejected_count(idx)) {
      fprintf(stderr, "rejected:\n");
      print_rejected(idx);
    }
    if (al_index_warning_count(idx)) {
      fprintf(stderr, "warnings (indexed, but check them):\n");
      print_warnings(idx);
    }
  }
  if (a->o.dali_idx_dir) {
    size_t skipped = 0;
    for (size_t i = 0; i < al_index_shard_count(idx); i++) {
      al_shard_info sh = AL_SHARD_INFO_INIT;
      if (al_index_shard(idx, i, &sh) == AL_OK && !sh.seekable) skipped++;
    }
    if (skipped)
      fprintf(stderr,
              "index: no DALI index for %zu compressed or unreadable shard(s): DALI needs file offsets\n",
              skipped);
  }
}

/* ", \"remote\": [...]": each remote shard's URL, requests and bytes. */
static void print_remote_json(const al_index *idx, const al_shard_io *io) {
  printf(", \"remote\": [");
  const char *sep = "";
  for (size_t i = 0; io && i < al_index_shard_count(idx); i++) {
    al_shard_info sh = AL_SHARD_INFO_INIT;
    if (al_index_shard(idx, i, &sh) || !sh.remote) continue;
    printf("%s{\"url\": ", sep);
    jsonw_string(stdout, sh.path);
    printf(", \"requests\": %llu, \"bytes\": %llu}", (unsigned long long)io[i].requests,
           (unsigned long long)io[i].bytes);
    sep = ", ";
  }
  printf("]");
}

/* The memory line on stderr, or with --json the summary object on stdout. */
static void print_memory(const al_index *idx, const al_index_stats *stats, const al_shard_io *io,
                         int json) {
  size_t mem_records = 0, mem_keys = 0;
  al_index_memory(idx, &mem_records, &mem_keys);
  if (!json)
    fprintf(stderr,
            "index memory: %.1f MB records (%.1f B/sample) + %.1f MB keys; read %.1f of %.1f MB\n",
            mem_records / 1e6, stats->samples ? (double)mem_records / stats->samples : 0.0,
            mem_keys / 1e6, stats->bytes_read / 1e6, stats->bytes / 1e6);
  else {
    printf(
        "{\"shards\": %llu, \"samples\": %llu, \"rejected\": %llu, \"bytes\": %llu, \"seconds\": %.6f, "
        "\"bytes_read\": %llu, \"mem_records\": %zu, \"mem_keys\": %zu, \"warnings\": %llu, "
        "\"remote_shards\": %llu, \"remote_requests\": %llu, \"remote_bytes\": %llu",
        (unsigned long long)stats->shards, (unsigned long long)stats->samples,
        (unsigned long long)stats->rejected, (unsigned long long)stats->bytes, stats->seconds,
        (unsigned long long)stats->bytes_read, mem_records, mem_keys,
        (unsigned long long)stats->warnings, (unsigned long long)stats->remote_shards,
        (unsigned long long)stats->remote_requests, (unsigned long long)stats->remote_bytes);
    print_remote_json(idx, io);
    printf("}\n");
  }
}

/* Builds, saves and reports the index. With --strict or unreadable shards the build fails
 * but the index is complete: it is written anyway, and the build's error ends the run. */
static int build_index(const index_args *a) {
  al_index *idx = NULL;
  al_index_stats stats = AL_INDEX_STATS_INIT;
  al_index_options o = a->o;
  al_shard_io *io = calloc(a->n, sizeof *io);
  if (!io) return cli_fail("index");
  o.shard_io = io;
  int rc = al_index_build(&idx, (const char *const *)a->paths, a->n, &o, &stats);
  if (!idx) {
    free(io);
    return cli_fail("index");
  }
  char build_err[1024];
  snprintf(build_err, sizeof build_err, "%s", rc ? al_last_error() : "");
  if (al_index_save(idx, a->output) != AL_OK) {
    cli_fail("index");
    al_index_free(idx);
    free(io);
    return AL_EXIT_FAIL;
  }
  print_summary(idx, &stats, a);
  print_memory(idx, &stats, io, a->json);
  al_index_free(idx);
  free(io);
  if (rc) {
    fprintf(stderr, "adaptiveload index: %s\n", build_err);
    return AL_EXIT_FAIL;
  }
  return AL_EXIT_OK;
}

int cli_cmd_index(int argc, char **argv) {
  index_args a;
  memset(&a, 0, sizeof a);
  int ec = cli_parse(&INDEX, argc, argv, &a);
  if (ec == CLI_RUN && a.n_args && expand_shards(&a)) ec = AL_EXIT_FAIL;
  if (ec == CLI_RUN && (!a.output || a.n == 0))
    ec = cli_usage(&INDEX, CLI_SAY_HINT, "%s",
                   !a.output ? "-o INDEX is required" : "no SHARD given");
  if (ec == CLI_RUN) ec = build_index(&a);
  for (size_t i = 0; i < a.n; i++) free(a.paths[i]);
  free(a.paths);
  free(a.args);
  free(a.fields); /* the index keeps its own copies of the names */
  return ec;
}
