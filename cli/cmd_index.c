/* adaptiveload index: index WebDataset tar shards into an index file (loader/al_index.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "common/al_status.h"
#include "loader/al_index.h"

#define SHOW_REJECTED 20

static void usage(FILE *out) {
  fprintf(out,
          "usage: adaptiveload index [--threads T] [--json] [--dali-idx DIR] [--strict]\n"
          "                         [--fields width=W,height=H,frames=F,fps=R,duration=D]\n"
          "                         [--vae-stride T,S] -o INDEX SHARD...\n\n"
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
          "'shard-{000000..000099}.tar' (quote it so the shell leaves it alone).\n\n"
          "options:\n"
          "  -o, --output INDEX   index file to write\n"
          "  --threads T          shards indexed in parallel (default: all cores)\n"
          "  --json               print one summary object on stdout:\n"
          "                       {\"shards\", \"samples\", \"rejected\", \"bytes\", \"seconds\",\n"
          "                       \"bytes_read\", \"mem_records\", \"mem_keys\", \"warnings\"} (bytes:\n"
          "                       shard sizes;\n"
          "                       bytes_read: what was read, payloads of plain tar shards being\n"
          "                       skipped; mem_*: bytes the in-memory index holds)\n"
          "  --dali-idx DIR       also write DALI wds2idx v1.2 index files (plain tar shards)\n"
          "  --strict             exit 1 if anything was rejected (the index is still written)\n"
          "  --progress / --no-progress   force the progress line on or off (default: on a terminal)\n"
          "  --field-width NAME, --field-height NAME, --field-frames NAME, --field-fps NAME,\n"
          "  --field-duration NAME        JSON field names (defaults: width height frames fps duration)\n"
          "  --fields K=NAME,...  the same in one option, e.g. --fields frames=nb_frames,fps=rate\n"
          "                       (keys: width, height, frames, fps, duration)\n"
          "  --vae-stride T,S     VAE strides in time and space of the latent check (default 4,8)\n"
          "  --max-member-bytes N reject samples with a member over N bytes (default 512 MiB)\n"
          "  --block-size BYTES   fixed read size (default: plain tar reads 16 KiB after each\n"
          "                       payload skip, doubling to 1 MiB; compressed shards 4 MiB)\n\n"
          "exit status: 0 indexed (possibly with rejected samples), 1 no shard readable or\n"
          "--strict with rejections or an I/O error, 2 usage.\n");
}

/* --fields width=W,height=H,frames=F,fps=R,duration=D: names copied into `store` (freed by
 * the caller) and pointed to from the options. Returns 0, or -1 with a message. */
static int parse_fields(const char *v, al_index_options *o, char **store) {
  *store = strdup(v);
  if (!*store) return cli_usage_error("index", "out of memory"), -1;
  char *save = NULL;
  for (char *item = strtok_r(*store, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq || eq == item || !eq[1]) {
      cli_usage_error("index", "bad --fields item '%s' (want KEY=NAME)", item);
      return -1;
    }
    *eq = '\0';
    const char *name = eq + 1;
    if (!strcmp(item, "width")) {
      o->field_width = name;
    } else if (!strcmp(item, "height")) {
      o->field_height = name;
    } else if (!strcmp(item, "frames")) {
      o->field_frames = name;
    } else if (!strcmp(item, "fps")) {
      o->field_fps = name;
    } else if (!strcmp(item, "duration")) {
      o->field_duration = name;
    } else {
      cli_usage_error("index", "unknown --fields key '%s' (width, height, frames, fps, duration)",
                      item);
      return -1;
    }
  }
  return 0;
}

/* --vae-stride T,S. Returns 0, or -1 with a message. */
static int parse_vae_stride(const char *v, al_index_options *o) {
  unsigned t = 0, sp = 0;
  char tail;
  if (sscanf(v, "%u,%u%c", &t, &sp, &tail) != 2 || t < 1 || sp < 1 || t > 1024 || sp > 1024) {
    cli_usage_error("index", "bad --vae-stride '%s' (want T,S, e.g. 4,8)", v);
    return -1;
  }
  o->vae_stride_t = t;
  o->vae_stride_s = sp;
  return 0;
}

static void print_warnings(const al_index *idx) {
  size_t n = al_index_warning_count(idx);
  for (size_t i = 0; i < n && i < SHOW_REJECTED; i++) {
    al_rejected_info r;
    al_shard_info s;
    if (al_index_warning(idx, i, &r) || al_index_shard(idx, r.shard, &s)) break;
    fprintf(stderr, "  %s: sample '%s', member '%s' at byte %llu: %s\n", s.path, r.key, r.member,
            (unsigned long long)r.offset, r.reason);
  }
  if (n > SHOW_REJECTED) fprintf(stderr, "  ... and %zu more\n", n - SHOW_REJECTED);
}

static void print_rejected(const al_index *idx) {
  size_t n = al_index_rejected_count(idx);
  for (size_t i = 0; i < n && i < SHOW_REJECTED; i++) {
    al_rejected_info r;
    al_shard_info s;
    if (al_index_rejected(idx, i, &r) || al_index_shard(idx, r.shard, &s)) break;
    if (r.member[0])
      fprintf(stderr, "  %s: member '%s' at byte %llu: %s\n", s.path, r.member,
              (unsigned long long)r.offset, r.reason);
    else
      fprintf(stderr, "  %s: at byte %llu: %s\n", s.path, (unsigned long long)r.offset, r.reason);
  }
  if (n > SHOW_REJECTED) fprintf(stderr, "  ... and %zu more\n", n - SHOW_REJECTED);
}

int cli_cmd_index(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return AL_EXIT_OK;
  }
  al_index_options o;
  memset(&o, 0, sizeof o);
  const char *output = NULL;
  int json = 0;
  char **paths = NULL;
  size_t n = 0;
  char *fields = NULL; /* --fields, names pointed to from o */
  int exit_code = AL_EXIT_OK;
  for (int i = 1; i < argc && exit_code == AL_EXIT_OK; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--strict")) {
      o.strict = 1;
    } else if (!strcmp(a, "--progress")) {
      o.progress = 1;
    } else if (!strcmp(a, "--no-progress")) {
      o.progress = -1;
    } else if (a[0] == '-' && a[1] == '-' && a[2] == '\0') {
      for (i++; i < argc && exit_code == AL_EXIT_OK; i++)
        if (al_shard_expand(argv[i], &paths, &n)) exit_code = cli_fail("index");
    } else if (a[0] == '-' && a[1] != '\0') {
      if (!v) {
        exit_code = cli_usage_error("index", "%s needs a value (or is unknown)", a);
        break;
      }
      i++;
      char *end;
      errno = 0;
      if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
        output = v;
      } else if (!strcmp(a, "--threads")) {
        long t = strtol(v, &end, 10);
        if (errno || *end || t < 1 || t > 4096)
          exit_code = cli_usage_error("index", "bad --threads '%s'", v);
        o.threads = (int)t;
      } else if (!strcmp(a, "--block-size")) {
        unsigned long long b = strtoull(v, &end, 10);
        if (errno || *end || b < 512 || b > (1ull << 30))
          exit_code = cli_usage_error("index", "bad --block-size '%s'", v);
        o.block_size = (size_t)b;
      } else if (!strcmp(a, "--max-member-bytes")) {
        unsigned long long b = 0;
        if (cli_parse_u64(v, &b) || b == 0)
          exit_code = cli_usage_error("index", "bad --max-member-bytes '%s'", v);
        o.max_member_bytes = b;
      } else if (!strcmp(a, "--dali-idx")) {
        o.dali_idx_dir = v;
      } else if (!strcmp(a, "--field-width")) {
        o.field_width = v;
      } else if (!strcmp(a, "--field-height")) {
        o.field_height = v;
      } else if (!strcmp(a, "--field-frames")) {
        o.field_frames = v;
      } else if (!strcmp(a, "--field-fps")) {
        o.field_fps = v;
      } else if (!strcmp(a, "--field-duration")) {
        o.field_duration = v;
      } else if (!strcmp(a, "--fields")) {
        if (fields)
          exit_code = cli_usage_error("index", "--fields given twice (list every name in one)");
        else if (parse_fields(v, &o, &fields))
          exit_code = AL_EXIT_USAGE;
      } else if (!strcmp(a, "--vae-stride")) {
        if (parse_vae_stride(v, &o)) exit_code = AL_EXIT_USAGE;
      } else {
        exit_code = cli_usage_error("index", "unknown option '%s'", a);
      }
    } else if (al_shard_expand(a, &paths, &n)) {
      exit_code = cli_fail("index");
    }
  }
  if (exit_code == AL_EXIT_OK && (!output || n == 0))
    exit_code = cli_usage_error("index", "%s", !output ? "-o INDEX is required" : "no SHARD given");
  al_index *idx = NULL;
  al_index_stats stats;
  memset(&stats, 0, sizeof stats);
  int rc = exit_code == AL_EXIT_OK ? al_index_build(&idx, (const char *const *)paths, n, &o, &stats)
                                   : AL_OK;
  char build_err[1024];
  snprintf(build_err, sizeof build_err, "%s", rc ? al_last_error() : "");
  for (size_t i = 0; i < n; i++) free(paths[i]);
  free(paths);
  free(fields); /* the index keeps its own copies of the names */
  if (exit_code != AL_EXIT_OK) return exit_code;
  if (!idx) return cli_fail("index");
  /* With --strict or unreadable shards the build fails but the index is complete: write it anyway.
   */
  if (al_index_save(idx, output) != AL_OK) {
    cli_fail("index");
    al_index_free(idx);
    return AL_EXIT_FAIL;
  }
  if (!json || al_index_rejected_count(idx) || al_index_warning_count(idx)) {
    fprintf(stderr,
            "index: %llu shards, %llu samples, %llu rejected, %llu warnings, %.1f MB in %.2f s (%.0f samples/s) -> %s\n",
            (unsigned long long)stats.shards, (unsigned long long)stats.samples,
            (unsigned long long)stats.rejected, (unsigned long long)stats.warnings,
            stats.bytes / 1e6, stats.seconds,
            stats.seconds > 0 ? stats.samples / stats.seconds : 0.0, output);
    if (al_index_rejected_count(idx)) {
      fprintf(stderr, "rejected:\n");
      print_rejected(idx);
    }
    if (al_index_warning_count(idx)) {
      fprintf(stderr, "warnings (indexed, but check them):\n");
      print_warnings(idx);
    }
  }
  if (o.dali_idx_dir) {
    size_t skipped = 0;
    for (size_t i = 0; i < al_index_shard_count(idx); i++) {
      al_shard_info sh;
      if (al_index_shard(idx, i, &sh) == AL_OK && !sh.seekable) skipped++;
    }
    if (skipped)
      fprintf(stderr,
              "index: no DALI index for %zu compressed or unreadable shard(s): DALI needs file offsets\n",
              skipped);
  }
  size_t mem_records = 0, mem_keys = 0;
  al_index_memory(idx, &mem_records, &mem_keys);
  if (!json)
    fprintf(stderr,
            "index memory: %.1f MB records (%.1f B/sample) + %.1f MB keys; read %.1f of %.1f MB\n",
            mem_records / 1e6, stats.samples ? (double)mem_records / stats.samples : 0.0,
            mem_keys / 1e6, stats.bytes_read / 1e6, stats.bytes / 1e6);
  if (json)
    printf(
        "{\"shards\": %llu, \"samples\": %llu, \"rejected\": %llu, \"bytes\": %llu, \"seconds\": %.6f, "
        "\"bytes_read\": %llu, \"mem_records\": %zu, \"mem_keys\": %zu, \"warnings\": %llu}\n",
        (unsigned long long)stats.shards, (unsigned long long)stats.samples,
        (unsigned long long)stats.rejected, (unsigned long long)stats.bytes, stats.seconds,
        (unsigned long long)stats.bytes_read, mem_records, mem_keys,
        (unsigned long long)stats.warnings);
  al_index_free(idx);
  if (rc) {
    fprintf(stderr, "adaptiveload index: %s\n", build_err);
    return AL_EXIT_FAIL;
  }
  return AL_EXIT_OK;
}
