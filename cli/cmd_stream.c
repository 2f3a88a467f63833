/* adaptiveload stream: read one rank's packed micro-batches (stream/al_stream.h). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/cli_internal.h"
#include "cli/options_internal.h"
#include "cli/stream_steps_internal.h"
#include "common/al_status.h"
#include "common/clock_internal.h"
#include "common/json_write_internal.h"
#include "common/parse_internal.h"
#include "loader/al_index.h"
#include "stream/al_stream.h"
#include "stream/crc32_internal.h"
#include "cost/al_cost.h"
#include "manifest/al_manifest.h"
#include "manifest/al_mixture.h"

/* What the batch cost the consumer (al_stream_batch: its next()'s wait, the fetches while it
 * was the next one): run-dependent, so one object, "cost", that a comparison of what was
 * delivered leaves out. */
static void print_batch_cost_json(const al_stream_batch *b) {
  printf(",\"cost\":{\"stall_s\":%.6f,\"fetched_bytes\":%" PRIu64 ",\"requests\":%" PRIu64
         ",\"cache_hits\":%" PRIu64 ",\"cache_misses\":%" PRIu64 "}",
         b->stall_seconds, b->fetched_bytes, b->requests, b->cache_hits, b->cache_misses);
}

static void print_batch(const al_stream_batch *b, int json) {
  if (json) {
    printf("{\"position\":%" PRIu64 ",\"step\":%" PRIu32 ",\"micro\":%" PRIu32
           ",\"n_micro\":%" PRIu32 ",\"last_in_step\":%s,\"bucket\":%" PRIu32
           ",\"samples\":%zu,\"tokens\":%" PRIu64 ",\"bytes\":%zu,\"step_samples\":%" PRIu64
           ",\"step_tokens\":%" PRIu64 ",\"first_key\":",
           b->position, b->step, b->micro, b->n_micro, b->last_in_step ? "true" : "false",
           b->bucket, b->n, b->tokens, b->data_bytes, b->step_samples, b->step_tokens);
    jsonw_string(stdout, b->n ? b->keys[0] : "");
    size_t padded = 0;
    for (size_t i = 0; i < b->n; i++) padded += b->padded[i];
    printf(",\"padded\":%zu,\"skipped\":[", padded);
    for (size_t i = 0; i < b->n_skipped; i++) {
      printf("%s{\"key\":", i ? "," : "");
      jsonw_string(stdout, b->skipped_keys[i]);
      printf(",\"reason\":");
      jsonw_string(stdout, b->skipped_reasons[i]);
      printf("}");
    }
    printf("]");
    print_batch_cost_json(b);
    if (b->n_skipped) /* what the skips took from step_samples / step_tokens (real samples) */
      printf(",\"skipped_real_samples\":%" PRIu64 ",\"skipped_real_tokens\":%" PRIu64
             ",\"planned_tokens\":%" PRIu64,
             b->skipped_real_samples, b->skipped_real_tokens, b->planned_tokens);
    printf("}\n");
    return;
  }
  printf("step %" PRIu32 " micro %" PRIu32 "/%" PRIu32 " samples %zu tokens %" PRIu64
         " bytes %zu first %s stall_s %.6f fetched %" PRIu64,
         b->step, b->micro, b->n_micro, b->n, b->tokens, b->data_bytes, b->n ? b->keys[0] : "-",
         b->stall_seconds, b->fetched_bytes);
  if (b->n_skipped) {
    printf(" skipped %zu:", b->n_skipped);
    for (size_t i = 0; i < b->n_skipped; i++) printf(" %s", b->skipped_keys[i]);
  }
  printf("\n");
  for (size_t i = 0; i < b->n_skipped; i++)
    fprintf(stderr, "adaptiveload stream: skipped %s: %s\n", b->skipped_keys[i],
            b->skipped_reasons[i]);
}

/* --jsonl: what a consumer needs to check each sample's delivered bytes; a mixture's rows name
 * each sample's source (m's source names). */
static void print_batch_jsonl(const al_stream_batch *b, const al_manifest *m) {
  printf("{\"step\":%" PRIu32 ",\"micro\":%" PRIu32 ",\"position\":%" PRIu64 ",\"bucket\":%" PRIu32
         ",\"keys\":[",
         b->step, b->micro, b->position, b->bucket);
  for (size_t i = 0; i < b->n; i++) {
    if (i) putchar(',');
    jsonw_string(stdout, b->keys[i]);
  }
  if (al_manifest_source_count(m)) {
    printf("],\"sources\":[");
    for (size_t i = 0; i < b->n; i++) {
      al_run_source_info si = AL_RUN_SOURCE_INFO_INIT;
      if (i) putchar(',');
      jsonw_string(stdout, al_manifest_source(m, b->sources[i], &si) == AL_OK ? si.name : "?");
    }
  }
  printf("],\"cu_seqlens\":[");
  for (size_t i = 0; i <= b->n; i++) printf("%s%" PRId32, i ? "," : "", b->cu_seqlens[i]);
  printf("],\"padded\":[");
  for (size_t i = 0; i < b->n; i++) printf("%s%d", i ? "," : "", b->padded[i] ? 1 : 0);
  /* The sequence-parallel group and, with --sp-shard, the shard and each sample's piece. */
  printf("],\"sp_degree\":%" PRIu32 ",\"sp_rank\":%" PRIu32 ",\"sp_group_first\":%" PRIu32
         ",\"sp_sharded\":%" PRIu32 ",\"shard_token_range\":[%" PRIu64 ",%" PRIu64
         "],\"token_first\":[",
         b->sp_degree, b->sp_rank, b->sp_group_first, b->sp_sharded, b->shard_token_begin,
         b->shard_token_end);
  for (size_t i = 0; i < b->n; i++) printf("%s%" PRIu64, i ? "," : "", b->token_first[i]);
  printf("],\"sample_tokens\":[");
  for (size_t i = 0; i < b->n; i++) printf("%s%" PRIu64, i ? "," : "", b->sample_tokens[i]);
  printf("],\"members\":{");
  for (size_t j = 0; j < b->n_members; j++) {
    const al_stream_member *m = &b->members[j];
    if (j) putchar(',');
    jsonw_string(stdout, m->name);
    printf(":{\"dtype\":");
    jsonw_string(stdout, m->dtype);
    printf(",\"shapes\":[");
    for (size_t i = 0; i < b->n; i++) {
      printf("%s[", i ? "," : "");
      for (uint32_t d = 0; d < m->ndim[i]; d++)
        printf("%s%" PRIu64, d ? "," : "", m->shapes[AL_STREAM_MAX_DIMS * i + d]);
      putchar(']');
    }
    printf("],\"crc32\":[");
    for (size_t i = 0; i < b->n; i++)
      printf("%s\"%08" PRIx32 "\"", i ? "," : "",
             stream_crc32(0, (const unsigned char *)b->data + m->offsets[i], m->sizes[i]));
    printf("]}");
  }
  printf("},\"skipped\":[");
  for (size_t i = 0; i < b->n_skipped; i++) {
    if (i) putchar(',');
    jsonw_string(stdout, b->skipped_keys[i]);
  }
  printf("]");
  print_batch_cost_json(b);
  printf("}\n");
  for (size_t i = 0; i < b->n_skipped; i++)
    fprintf(stderr, "adaptiveload stream: skipped %s: %s\n", b->skipped_keys[i],
            b->skipped_reasons[i]);
}

#define MAX_ROOTS 16

typedef struct stream_args {
  al_stream_options o;
  const char *index_path, *manifest_path;
  const char *mixture_path;     /* --mixture MIX.json: the sources' indexes */
  const char *roots[MAX_ROOTS]; /* --root FROM=TO */
  size_t n_roots;
  long rank, max_batches; /* -1: not given */
  long resume_at;         /* --resume-at; -1: not given */
  int bench, json, jsonl;
  int decode; /* --decode: the "pixels" member after the others */
  double compute_ms;
  const char *compute_cost; /* --compute-cost FILE */
  al_cost_model cost;       /* loaded from compute_cost */
  char members_buf[1024];   /* --members, split into member_names */
  const char *member_names[AL_STREAM_MAX_MEMBERS];
} stream_args;

static int parse_members(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  stream_args *a = args;
  if (cli_split_list(v, a->members_buf, sizeof a->members_buf, a->member_names,
                     AL_STREAM_MAX_MEMBERS, &a->o.n_members))
    return cli_usage(verb, CLI_SAY_BLANK,
                     "bad --members '%s' (a comma list of at most %d member extensions, e.g. "
                     "latent.npy,t5.npy,txt)",
                     v, AL_STREAM_MAX_MEMBERS);
  a->o.members = a->member_names;
  return 0;
}

static int parse_root(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  stream_args *a = args;
  return cli_parse_root(verb, v, a->roots, &a->n_roots, MAX_ROOTS);
}

/* --device [N]: copies on, to device N or (no N) LOCAL_RANK's. */
static int parse_device(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)verb, (void)opt;
  stream_args *a = args;
  uint64_t n = 0;
  if (v && (parse_u64(v, &n) || n > 1024)) return CLI_BAD;
  a->o.device_copy = 1;
  a->o.cuda_device = v ? (int)n : -1;
  return 0;
}

static const cli_choice ON_ERROR[] = {{"fail", AL_STREAM_FAIL},
                                      {"skip", AL_STREAM_SKIP_SAMPLE},
                                      {NULL, 0}};

/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--index", .type = CLI_STRING, CLI_AT(stream_args, index_path), .metavar = "INDEX",
     .help = "index file (adaptiveload index)"},
    {.name = "--manifest", .type = CLI_STRING, CLI_AT(stream_args, manifest_path),
     .metavar = "MANIFEST", .help = "manifest file (adaptiveload plan), planned from INDEX"},
    {.name = "--mixture", .type = CLI_STRING, CLI_AT(stream_args, mixture_path),
     .metavar = "MIX.json",
     .help = "instead of --index: MANIFEST is this mixture's (plan\n"
             "--mixture); every source is read from its index, and\n"
             "--jsonl rows name each sample's source"},
    {.name = "--rank", .type = CLI_U64, CLI_AT(stream_args, rank), .max = 1 << 30, .metavar = "R",
     .help = "rank to read (default: RANK from the environment; 0 when\n"
             "the manifest plans one rank). WORLD_SIZE, when set, must\n"
             "equal the manifest's world."},
    {.name = "--threads", .type = CLI_U64, CLI_AT(stream_args, o.threads), .min = 1, .max = 1024,
     .metavar = "T", .help = "reader threads", .def = "min(4, cores)"},
    {.name = "--prefetch", .type = CLI_U64, CLI_AT(stream_args, o.prefetch), .min = 1, .max = 4096,
     .metavar = "N", .help = "buffers in the pool, i.e. batches read ahead", .def = "4"},
    {.name = "--resume-at", .type = CLI_U64, CLI_AT(stream_args, resume_at), .max = LONG_MAX,
     .metavar = "P",
     .help = "resume at position P of the rank's sequence (after a crash:\n"
             "the last delivered batch's --jsonl position + 1), through\n"
             "the stream's resume state (al_stream_state_at)"},
    {.name = "--max-batches", .type = CLI_U64, CLI_AT(stream_args, max_batches), .max = LONG_MAX,
     .metavar = "K", .help = "stop after K batches"},
    {.name = "--ext", .type = CLI_STRING, CLI_AT(stream_args, o.ext), .metavar = "EXT",
     .help = "payload member extension; EXT.lz4 is decoded",
     .def = "the index's typed latent member, else latent"},
    {.name = "--members", .type = CLI_CUSTOM, .parse = parse_members, .metavar = "A,B,...",
     .help = "members to deliver per sample, in this order (e.g.\n"
             "latent.npy,t5.npy,txt; default: --ext). Typed members (.npy,\n"
             ".safetensors) lose their header; a sample's typed latent (the\n"
             "index's: latent*.npy/.safetensors) is cropped to its bucket's\n"
             "latent grid (centred rows/columns, the first frames). A member\n"
             "no sample has fails at once, listing the index's members"},
    {.name = "--decode", .type = CLI_FLAG, CLI_AT(stream_args, decode), .set = 1,
     .help = "also deliver 'pixels': each sample's raw video or image\n"
             "member (mp4, mov, mkv, webm, jpg, png, webp) decoded to its\n"
             "bucket's (frames, height, width, 3) uint8 (the first frames,\n"
             "scaled keeping the aspect, centre-cropped, rotation applied);\n"
             "after --members, or alone without them"},
    {.name = "--root", .type = CLI_CUSTOM, .parse = parse_root, .metavar = "FROM=TO",
     .help = "the corpus moved: shard paths under directory FROM are\n"
             "read under TO (repeatable; shards are checked by size and\n"
             "content, so copies made with cp or rsync stream as indexed)"},
    {.name = "--max-sample-bytes", .type = CLI_U64, CLI_AT(stream_args, o.max_sample_bytes),
     .min = 1, .metavar = "N",
     .help = "fail (or skip) a sample whose members together deliver\n"
             "more than N bytes (default 1 GiB; ADAPTIVELOAD_MAX_SAMPLE_BYTES)"},
    {.name = "--max-member-bytes", .type = CLI_U64, CLI_AT(stream_args, o.max_member_bytes),
     .min = 1, .metavar = "N",
     .help = "fail (or skip) a sample whose payload member holds or\n"
             "decodes to more than N bytes (default 512 MiB;\n"
             "ADAPTIVELOAD_MAX_MEMBER_BYTES)"},
    {.name = "--on-error", .type = CLI_CHOICE, CLI_AT(stream_args, o.on_error), .choices = ON_ERROR,
     .bad = "--on-error is fail or skip, not '%s'", .metavar = "fail|skip",
     .help = "fail: stop at the first unreadable sample (exit 1; samples\n"
             "lacking a requested member fail at open);\n"
             "skip: deliver batches without it and list it",
     .def = "fail"},
    {.name = "--max-skip-fraction", .type = CLI_DOUBLE, CLI_AT(stream_args, o.max_skip_fraction),
     .lo = 0, .hi = 1, .flags = CLI_ABOVE_LO, .metavar = "F",
     .help = "with --on-error skip: fail (exit 1) once more than F of the\n"
             "rank's samples were skipped (1: no limit); a run whose\n"
             "samples were all skipped fails whatever F",
     .def = "0.01"},
    {.name = "--sp-shard", .type = CLI_FLAG, CLI_AT(stream_args, o.sp_shard), .set = 1,
     .help = "sequence parallelism: deliver only this rank's token shard of\n"
             "its group's micro-batch (rank j of d: tokens [jN/d, (j+1)N/d)\n"
             "of the packed sequence), the typed latent patchified\n"
             "(tokens, C x patch); default: the group's whole micro-batch"},
    {.name = "--cache-dir", .type = CLI_STRING, CLI_AT(stream_args, o.cache_dir), .metavar = "DIR",
     .help = "shards at URLs (--root DIR=http://... or s3://...): keep\n"
             "fetched members in DIR (shared safely by the node's ranks)"},
    {.name = "--cache-bytes", .type = CLI_U64, CLI_AT(stream_args, o.cache_bytes), .min = 1,
     .metavar = "N",
     .help = "the byte limit of --cache-dir over all processes using it\n"
             "(default 1 GiB; entries go in plan order: read ones\n"
             "first, then those read furthest ahead)"},
    {.name = "--fetch-parallel", .type = CLI_U64, CLI_AT(stream_args, o.fetch_parallel), .min = 1,
     .max = 256, .metavar = "N",
     .help = "with --cache-dir: N threads fetch the coming micro-batches'\n"
             "members into the cache in plan order (default 4)"},
    CLI_STORAGE_OPTIONS(stream_args, o),
    {.name = "--no-fetch-ahead", .type = CLI_FLAG, CLI_AT(stream_args, o.fetch_parallel), .set = -1,
     .help = "with --cache-dir: no fetching ahead (readers fetch on demand)"},
    {.name = "--bench", .type = CLI_FLAG, CLI_AT(stream_args, bench), .set = 1,
     .help = "measure instead of listing batches"},
    {.name = "--device", .type = CLI_CUSTOM, .parse = parse_device, .flags = CLI_VALUE_IF_DIGIT,
     .metavar = "[N]",
     .help = "also copy every batch to CUDA device N (default LOCAL_RANK\n"
             "or 0) on a copy stream; reports the time spent waiting for\n"
             "copies after next() (copy stall)"},
    {.name = "--compute-ms", .type = CLI_DOUBLE, CLI_AT(stream_args, compute_ms), .hi = 1e6,
     .metavar = "X",
     .help = "with --bench: pretend each batch takes X ms of compute\n"
             "(host busy-wait), to show read-ahead and copies overlapping"},
    {.name = "--compute-cost", .type = CLI_STRING, CLI_AT(stream_args, compute_cost),
     .metavar = "COST",
     .help = "with --bench: each batch takes the time the cost model COST\n"
             "predicts for it (B samples of S tokens at its SP degree),\n"
             "slept as a GPU step leaves the host idle; `fit --trace TRACE\n"
             "-o COST` makes COST from a training run's trace, so the\n"
             "stream is read at that run's consumption rate"},
    {.name = "--no-pinned", .type = CLI_FLAG, CLI_AT(stream_args, o.pinned), .set = -1,
     .help = "plain host memory even when a CUDA device is present"},
    {.name = "--json", .type = CLI_FLAG, CLI_AT(stream_args, json), .set = 1,
     .help = "--bench: one JSON object (stall_fraction, steps,\n"
             "step_stall_seconds {median, p95, max}, step_fetched_bytes\n"
             "{median, max}, step_requests {median, max}, ...); otherwise\n"
             "one JSON object per batch, with its cost (see --jsonl)"},
    {.name = "--jsonl", .type = CLI_FLAG, CLI_AT(stream_args, jsonl), .set = 1,
     .help = "one JSON line per batch for checking what was delivered:\n"
             "step, micro, keys, cu_seqlens and members {NAME: {dtype,\n"
             "shapes: [[...] per sample], crc32: [8 hex digits per sample,\n"
             "zlib's CRC-32 of the delivered array bytes]}}, and the\n"
             "group: sp_degree, sp_rank, sp_group_first, sp_sharded,\n"
             "shard_token_range, token_first and sample_tokens per sample;\n"
             "last, what the batch cost, which varies from run to run:\n"
             "cost: {stall_s, fetched_bytes, requests, cache_hits,\n"
             "cache_misses} (as on the per-batch line; leave it out when\n"
             "comparing what two runs delivered)"},
    {.name = NULL},
};
/* clang-format on */

static const cli_verb STREAM = {
    .name = "stream",
    .usage =
        "usage: adaptiveload stream --index INDEX --manifest MANIFEST [--rank R] [options]\n"
        "       adaptiveload stream --mixture MIX.json --manifest MANIFEST [--rank R] [options]\n\n"
        "Reads the micro-batches that MANIFEST assigns to rank R, in order, with reader\n"
        "threads packing each micro-batch into one buffer (samples 64-byte aligned).\n"
        "Without --bench, prints one line per batch:\n"
        "  step S micro M/N samples n tokens t bytes b first KEY stall_s X fetched F\n"
        "  [skipped k: KEY...]\n"
        "where X is the seconds this batch's next() waited for the readers and F the\n"
        "bytes received from servers (shards at URLs; 0 for local shards) since the\n"
        "previous batch was delivered: the readers fetch ahead, so F is what arrived\n"
        "while this batch was the next one, not the size of its members.\n"
        "With --bench, reads the rank's whole epoch (or --max-batches) and reports\n"
        "packed GB/s, batches/s, stall time (time next() waited for the readers) and\n"
        "its fraction of the run, and per step (the rank's micro-batches of one step\n"
        "added up; --micro-per-step of the plan): stall median / p95 / max, bytes\n"
        "fetched median / max and requests median / max (nearest-rank).\n\n",
    .options = OPTIONS,
    .epilogue =
        "exit status: 0 done, 1 an error (unreadable sample with --on-error fail, index and\n"
        "manifest do not match, rank/world mismatch), 2 usage.\n",
    .say = CLI_SAY_PAGE,
    .missing = "%s needs a value (or is unknown)",
    .unknown = "unknown option '%s'",
    .stray = "%s unexpected",
    .bad = "bad %s '%s'",
    .bad_say = CLI_SAY_BLANK,
};

/* The shard paths of idx moved by --root. 0, or -1 (al_last_error). */
static int remap_roots(const stream_args *a, al_index *idx, const char *what) {
  for (size_t k = 0; k < a->n_roots; k++) {
    const char *eq = strchr(a->roots[k], '=');
    char from[4096];
    size_t moved = 0;
    snprintf(from, sizeof from, "%.*s", (int)(eq - a->roots[k]), a->roots[k]);
    if (al_index_remap_root(idx, from, eq + 1, &moved) != AL_OK) return -1;
    fprintf(stderr, "stream: %s: %zu shard paths moved from %s to %s\n", what, moved, from, eq + 1);
  }
  return 0;
}

/* The indexes streamed: --index, or every source's of --mixture (checked to be the manifest's
 * sources, by name and in order). 0, or -1 (al_last_error). */
static int load_indexes(const stream_args *a, const al_manifest *m, al_index **idx, size_t *n) {
  if (!a->mixture_path) {
    if (al_index_load(&idx[0], a->index_path) != AL_OK) return -1;
    *n = 1;
    return remap_roots(a, idx[0], a->index_path);
  }
  al_mixture *mx = NULL;
  if (al_mixture_load(&mx, a->mixture_path) != AL_OK) return -1;
  size_t ns = al_mixture_source_count(mx);
  int rc = al_mixture_check_manifest(mx, m, a->manifest_path);
  for (size_t i = 0; rc == AL_OK && i < ns; i++) {
    rc = al_index_load(&idx[i], al_mixture_source_index(mx, i));
    if (rc != AL_OK)
      rc = al_error_prefix(rc, "%s: source '%s'", a->mixture_path, al_mixture_source_name(mx, i));
    *n = i + 1;
    if (rc == AL_OK && remap_roots(a, idx[i], al_mixture_source_index(mx, i))) rc = AL_EINVAL;
  }
  al_mixture_free(mx);
  return rc == AL_OK ? 0 : -1;
}

static int open_one(const stream_args *a, al_stream **s, al_index *const *idx, size_t n,
                    const al_manifest *m, const al_stream_options *o) {
  if (!a->mixture_path) return al_stream_open(s, idx[0], m, (int)a->rank, o);
  return al_stream_open_mixture(s, (const al_index *const *)idx, n, m, (int)a->rank, o);
}

/* Loads the manifest and the indexes (moving their shard paths by --root) and opens the rank's
 * stream: 0, or -1 (al_last_error). What was opened is in the out-arguments either way. */
static int open_stream(const stream_args *a, al_index **idx, size_t *n_idx, al_manifest **m,
                       al_stream **s) {
  if (al_manifest_load(m, a->manifest_path) != AL_OK) return -1;
  if (load_indexes(a, *m, idx, n_idx)) return -1;
  al_stream_state st = AL_STREAM_STATE_INIT;
  al_stream_options o = a->o;
  int rc = AL_OK;
  if (a->resume_at >= 0) {
    /* The state at P comes from a stream of the rank opened at P (one reader, one buffer, no
     * fetching ahead: it is closed at once), and the stream is reopened from that state. */
    al_stream_options probe = a->o;
    probe.first = (uint64_t)a->resume_at;
    probe.threads = probe.prefetch = 1;
    probe.fetch_parallel = -1;
    rc = open_one(a, s, idx, *n_idx, *m, &probe);
    if (rc == AL_OK) rc = al_stream_state_at(*s, (uint64_t)a->resume_at, &st);
    al_stream_close(*s);
    *s = NULL;
    o.resume = &st;
  }
  if (rc == AL_OK) rc = open_one(a, s, idx, *n_idx, *m, &o);
  /* The pair's own messages (another index, members, rank) do not know the file names. */
  if (rc != AL_OK)
    al_error_prefix(rc, "manifest %s, %s %s", a->manifest_path,
                    a->mixture_path ? "mixture" : "index",
                    a->mixture_path ? a->mixture_path : a->index_path);
  return rc != AL_OK ? -1 : 0;
}

/* What a run read and how long it took. */
typedef struct stream_totals {
  uint64_t batches, bytes, samples, tokens, skipped, copied;
  double seconds, copy_wait, compute;
  stream_steps steps; /* --bench: stall and fetches per step */
} stream_totals;

/* --bench with --compute-ms: the host busy for `ms` milliseconds, as a training step. */
static double pretend_compute(double ms) {
  double c0 = clock_now_s();
  while (clock_now_s() - c0 < ms * 1e-3) {
  }
  return clock_now_s() - c0;
}

/* --bench with --compute-cost: the host asleep for the model's time of batch b (its samples at
 * S = planned tokens per sample, its SP degree), as while the GPU runs the step. */
static double pretend_step(const al_cost_model *m, const al_stream_batch *b) {
  if (!b->n) return 0;
  uint64_t S = (b->planned_tokens + b->n - 1) / b->n;
  double ms = al_cost_predict_sp(m, b->n, S, b->sp_degree ? b->sp_degree : 1);
  double c0 = clock_now_s();
  if (ms > 0) {
    struct timespec ts = {(time_t)(ms / 1e3), (long)(fmod(ms, 1e3) * 1e6)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
  return clock_now_s() - c0;
}

/* Reads the rank's batches (all, or --max-batches), listing or timing them. Returns 0,
 * AL_EXIT_FAIL when reading stopped at an error (what was read is still reported), or -1 when
 * a device copy failed (nothing more is reported); the message is printed. */
static int read_batches(const stream_args *a, al_stream *s, const al_manifest *m,
                        stream_totals *t) {
  double t0 = clock_now_s();
  int rc = AL_OK;
  const al_stream_batch *b;
  while ((a->max_batches < 0 || t->batches < (uint64_t)a->max_batches) &&
         (rc = al_stream_next(s, &b)) == AL_OK) {
    t->batches++;
    t->bytes += b->data_bytes;
    t->samples += b->n;
    t->tokens += b->tokens;
    t->skipped += b->n_skipped;
    if (a->bench && stream_steps_add(&t->steps, b) != AL_OK) {
      cli_fail("stream");
      al_stream_release(s, b);
      return -1;
    }
    if (a->o.device_copy) {
      /* A training step would make its stream wait on the event; here the
       * host waits, which measures how far the copy lags behind next(). */
      double c0 = clock_now_s();
      if (al_stream_batch_sync(b) != AL_OK) {
        cli_fail("stream");
        al_stream_release(s, b);
        return -1;
      }
      t->copy_wait += clock_now_s() - c0;
      t->copied += b->copy_bytes;
    }
    if (!a->bench && a->jsonl)
      print_batch_jsonl(b, m);
    else if (!a->bench)
      print_batch(b, a->json);
    else if (a->compute_cost)
      t->compute += pretend_step(&a->cost, b);
    else if (a->compute_ms > 0)
      t->compute += pretend_compute(a->compute_ms);
    al_stream_release(s, b);
  }
  int ec = AL_EXIT_OK;
  if ((a->max_batches < 0 || t->batches < (uint64_t)a->max_batches) && rc != AL_EOF) {
    ec = cli_fail("stream");
    fprintf(stderr, "adaptiveload stream: stopped after %" PRIu64 " batches\n", t->batches);
  }
  t->seconds = clock_now_s() - t0;
  return ec;
}

static void print_bench_json(const stream_args *a, const stream_totals *t,
                             const al_stream_stats *ss, const stream_steps_summary *ps) {
  double secs = t->seconds;
  printf("{\"batches\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"tokens\":%" PRIu64
         ",\"bytes\":%" PRIu64 ",\"skipped\":%" PRIu64
         ",\"seconds\":%.6f,\"gb_per_s\":%.4f,\"batches_per_s\":%.2f"
         ",\"stall_seconds\":%.6f,\"read_seconds\":%.6f,\"compute_seconds\":%.6f,\"threads\":%d"
         ",\"prefetch\":%d,\"pinned\":%s,\"host_buffer_bytes\":%" PRIu64 ",\"device\":%s",
         t->batches, t->samples, t->tokens, t->bytes, t->skipped, secs,
         secs > 0 ? (double)t->bytes / secs / 1e9 : 0, secs > 0 ? (double)t->batches / secs : 0,
         ss->stall_seconds, ss->read_seconds, t->compute, ss->threads, ss->buffers,
         ss->pinned ? "true" : "false", ss->host_bytes, a->o.device_copy ? "true" : "false");
  printf(",\"bytes_fetched\":%" PRIu64 ",\"requests\":%" PRIu64 ",\"cache_hits\":%" PRIu64
         ",\"cache_misses\":%" PRIu64 ",\"evicted_bytes\":%" PRIu64,
         ss->bytes_fetched, ss->requests, ss->cache_hits, ss->cache_misses, ss->evicted_bytes);
  printf(
      ",\"stall_fraction\":%.6f,\"steps\":%zu,\"step_stall_seconds\":{\"median\":%.6f,"
      "\"p95\":%.6f,\"max\":%.6f},\"step_fetched_bytes\":{\"median\":%" PRIu64 ",\"max\":%" PRIu64
      "},\"step_requests\":{\"median\":%" PRIu64 ",\"max\":%" PRIu64 "}",
      secs > 0 ? ss->stall_seconds / secs : 0, ps->steps, ps->stall_median, ps->stall_p95,
      ps->stall_max, ps->fetched_median, ps->fetched_max, ps->requests_median, ps->requests_max);
  if (a->o.device_copy)
    printf(",\"copied_bytes\":%" PRIu64
           ",\"copy_stall_seconds\":%.6f,\"device_buffer_bytes\":%" PRIu64,
           t->copied, t->copy_wait, ss->device_bytes);
  printf("}\n");
}

static void print_bench_text(const stream_args *a, const stream_totals *t,
                             const al_stream_stats *ss, const stream_steps_summary *ps) {
  double secs = t->seconds;
  printf("batches %" PRIu64 "  samples %" PRIu64 "  tokens %" PRIu64 "  bytes %" PRIu64
         "  skipped %" PRIu64 "\n",
         t->batches, t->samples, t->tokens, t->bytes, t->skipped);
  printf("time %.3f s  %.3f GB/s  %.1f batches/s\n", secs,
         secs > 0 ? (double)t->bytes / secs / 1e9 : 0, secs > 0 ? (double)t->batches / secs : 0);
  printf(
      "stall %.3f s (%.1f%% of the time next() waited for readers)  reader busy %.3f s  threads %d  "
      "prefetch %d  pinned %s  pool %.1f MB\n",
      ss->stall_seconds, secs > 0 ? 100 * ss->stall_seconds / secs : 0, ss->read_seconds,
      ss->threads, ss->buffers, ss->pinned ? "yes" : "no", (double)ss->host_bytes / 1e6);
  printf("per step (%zu steps): stall median %.6f s  p95 %.6f s  max %.6f s  fetched median %" PRIu64
         " B  max %" PRIu64 " B  requests median %" PRIu64 "  max %" PRIu64 "\n",
         ps->steps, ps->stall_median, ps->stall_p95, ps->stall_max, ps->fetched_median,
         ps->fetched_max, ps->requests_median, ps->requests_max);
  if (a->compute_ms > 0 || a->compute_cost) printf("simulated compute %.3f s\n", t->compute);
  if (ss->requests)
    printf("remote: fetched %.3f MB in %" PRIu64 " requests, cache hits %" PRIu64 " misses %" PRIu64
           ", evicted %.3f MB\n",
           (double)ss->bytes_fetched / 1e6, ss->requests, ss->cache_hits, ss->cache_misses,
           (double)ss->evicted_bytes / 1e6);
  if (a->o.device_copy)
    printf(
        "device copies %.3f GB, copy stall %.3f s (%.1f%%: time waiting for a batch's copy after "
        "next())\n",
        (double)t->copied / 1e9, t->copy_wait, secs > 0 ? 100 * t->copy_wait / secs : 0);
}

/* The run's totals: with --bench as text or JSON on stdout, else one line on stderr (not
 * with --json or --jsonl, whose stdout is read by programs). */
static int report(const stream_args *a, al_stream *s, const stream_totals *t) {
  al_stream_stats ss = AL_STREAM_STATS_INIT;
  al_stream_get_stats(s, &ss);
  stream_steps_summary ps;
  if (a->bench && stream_steps_summarize(&t->steps, &ps) != AL_OK) return cli_fail("stream");
  if (a->bench && a->json)
    print_bench_json(a, t, &ss, &ps);
  else if (a->bench)
    print_bench_text(a, t, &ss, &ps);
  else if (!a->json && !a->jsonl)
    fprintf(stderr,
            "adaptiveload stream: %" PRIu64 " batches, %" PRIu64 " samples, %" PRIu64 " skipped\n",
            t->batches, t->samples, t->skipped);
  if (!a->bench && ss.requests)
    fprintf(stderr,
            "adaptiveload stream: remote fetched %" PRIu64 " bytes in %" PRIu64
            " requests, cache hits %" PRIu64 " misses %" PRIu64 " evicted %" PRIu64 " bytes\n",
            ss.bytes_fetched, ss.requests, ss.cache_hits, ss.cache_misses, ss.evicted_bytes);
  return AL_EXIT_OK;
}

int cli_cmd_stream(int argc, char **argv) {
  stream_args a;
  memset(&a, 0, sizeof a);
  a.rank = a.max_batches = a.resume_at = -1;
  a.cost.struct_size = sizeof a.cost;
  int ec = cli_parse(&STREAM, argc, argv, &a);
  if (ec != CLI_RUN) return ec;
  if (a.index_path && a.mixture_path)
    return cli_usage(&STREAM, CLI_SAY_PAGE, "--index and --mixture exclude each other");
  if (!a.manifest_path || (!a.index_path && !a.mixture_path))
    return cli_usage(&STREAM, CLI_SAY_PAGE, "--manifest and --index (or --mixture) are required");
  if (a.o.ext && !*a.o.ext)
    return cli_usage(&STREAM, CLI_SAY_PAGE, "--ext needs a member extension");
  if (a.compute_cost && a.compute_ms > 0)
    return cli_usage(&STREAM, CLI_SAY_PAGE, "--compute-cost and --compute-ms exclude each other");
  if (a.decode) {
    if (!a.o.members) a.o.n_members = 0;
    size_t k = 0;
    while (k < a.o.n_members && strcmp(a.member_names[k], AL_STREAM_MEMBER_PIXELS) != 0) k++;
    if (k == a.o.n_members) {
      if (a.o.n_members == AL_STREAM_MAX_MEMBERS)
        return cli_usage(&STREAM, CLI_SAY_PAGE, "--decode: --members already names %d members",
                         AL_STREAM_MAX_MEMBERS);
      a.member_names[a.o.n_members++] = AL_STREAM_MEMBER_PIXELS;
    }
    a.o.members = a.member_names;
  }
  if (a.compute_cost && !a.bench)
    return cli_usage(&STREAM, CLI_SAY_PAGE, "--compute-cost needs --bench");
  if (a.compute_cost && al_cost_load(&a.cost, a.compute_cost) != AL_OK)
    return cli_fail("stream: --compute-cost");
  al_index *idx[AL_RUN_MAX_SOURCES] = {NULL};
  size_t n_idx = 0;
  al_manifest *m = NULL;
  al_stream *s = NULL;
  if (open_stream(&a, idx, &n_idx, &m, &s)) {
    ec = cli_fail("stream");
  } else {
    stream_totals t;
    memset(&t, 0, sizeof t);
    int rc = read_batches(&a, s, m, &t);
    if (rc >= 0 && report(&a, s, &t) != AL_EXIT_OK) rc = AL_EXIT_FAIL;
    ec = rc < 0 ? AL_EXIT_FAIL : rc;
    stream_steps_free(&t.steps);
  }
  al_stream_close(s);
  al_manifest_free(m);
  for (size_t i = 0; i < n_idx; i++) al_index_free(idx[i]);
  return ec;
}
