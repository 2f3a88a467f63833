/* adaptiveload stream: read one rank's packed micro-batches (stream/al_stream.h). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_internal.h"
#include "common/al_status.h"
#include "common/json_write_internal.h"
#include "loader/al_index.h"
#include "stream/al_stream.h"
#include "stream/crc32_internal.h"
#include "planner/al_manifest.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: adaptiveload stream --index INDEX --manifest MANIFEST [--rank R] [options]\n\n"
          "Reads the micro-batches that MANIFEST assigns to rank R, in order, with reader\n"
          "threads packing each micro-batch into one buffer (samples 64-byte aligned).\n"
          "Without --bench, prints one line per batch:\n"
          "  step S micro M/N samples n tokens t bytes b first KEY [skipped k: KEY...]\n"
          "With --bench, reads the rank's whole epoch (or --max-batches) and reports\n"
          "packed GB/s, batches/s and stall time (time next() waited for the readers).\n\n"
          "options:\n"
          "  --index INDEX        index file (adaptiveload index)\n"
          "  --manifest MANIFEST  manifest file (adaptiveload plan), planned from INDEX\n"
          "  --rank R             rank to read (default: RANK from the environment; 0 when\n"
          "                       the manifest plans one rank). WORLD_SIZE, when set, must\n"
          "                       equal the manifest's world.\n"
          "  --threads T          reader threads (default: min(4, cores))\n"
          "  --prefetch N         buffers in the pool, i.e. batches read ahead (default 4)\n"
          "  --max-batches K      stop after K batches\n"
          "  --ext EXT            payload member extension (default latent; EXT.lz4 is decoded)\n"
          "  --members A,B,...    members to deliver per sample, in this order (e.g.\n"
          "                       latent.npy,t5.npy,txt; default: --ext). Typed members (.npy,\n"
          "                       .safetensors) lose their header; a typed latent (latent.*) is\n"
          "                       cropped to its bucket's latent grid (centred rows/columns,\n"
          "                       the first frames)\n"
          "  --root FROM=TO       the corpus moved: shard paths under directory FROM are\n"
          "                       read under TO (repeatable; shards are checked by size and\n"
          "                       content, so copies made with cp or rsync stream as indexed)\n"
          "  --max-sample-bytes N fail (or skip) a sample whose members together deliver\n"
          "                       more than N bytes (default 1 GiB; ADAPTIVELOAD_MAX_SAMPLE_BYTES)\n"
          "  --max-member-bytes N fail (or skip) a sample whose payload member holds or\n"
          "                       decodes to more than N bytes (default 512 MiB;\n"
          "                       ADAPTIVELOAD_MAX_MEMBER_BYTES)\n"
          "  --on-error fail|skip fail: stop at the first unreadable sample (exit 1);\n"
          "                       skip: deliver batches without it and list it (default fail)\n"
          "  --bench              measure instead of listing batches\n"
          "  --device [N]         also copy every batch to CUDA device N (default LOCAL_RANK\n"
          "                       or 0) on a copy stream; reports the time spent waiting for\n"
          "                       copies after next() (copy stall)\n"
          "  --compute-ms X       with --bench: pretend each batch takes X ms of compute\n"
          "                       (host busy-wait), to show read-ahead and copies overlapping\n"
          "  --no-pinned          plain host memory even when a CUDA device is present\n"
          "  --json               --bench: one JSON object; otherwise one JSON object per batch\n"
          "  --jsonl              one JSON line per batch for checking what was delivered:\n"
          "                       step, micro, keys, cu_seqlens and members {NAME: {dtype,\n"
          "                       shapes: [[...] per sample], crc32: [8 hex digits per sample,\n"
          "                       zlib's CRC-32 of the delivered array bytes]}}\n\n"
          "exit status: 0 done, 1 an error (unreadable sample with --on-error fail, index and\n"
          "manifest do not match, rank/world mismatch), 2 usage.\n");
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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
    printf("]}\n");
    return;
  }
  printf("step %" PRIu32 " micro %" PRIu32 "/%" PRIu32 " samples %zu tokens %" PRIu64
         " bytes %zu first %s",
         b->step, b->micro, b->n_micro, b->n, b->tokens, b->data_bytes, b->n ? b->keys[0] : "-");
  if (b->n_skipped) {
    printf(" skipped %zu:", b->n_skipped);
    for (size_t i = 0; i < b->n_skipped; i++) printf(" %s", b->skipped_keys[i]);
  }
  printf("\n");
  for (size_t i = 0; i < b->n_skipped; i++)
    fprintf(stderr, "adaptiveload stream: skipped %s: %s\n", b->skipped_keys[i],
            b->skipped_reasons[i]);
}

/* --jsonl: what a consumer needs to check each sample's delivered bytes. */
static void print_batch_jsonl(const al_stream_batch *b) {
  printf("{\"step\":%" PRIu32 ",\"micro\":%" PRIu32 ",\"position\":%" PRIu64 ",\"bucket\":%" PRIu32
         ",\"keys\":[",
         b->step, b->micro, b->position, b->bucket);
  for (size_t i = 0; i < b->n; i++) {
    if (i) putchar(',');
    jsonw_string(stdout, b->keys[i]);
  }
  printf("],\"cu_seqlens\":[");
  for (size_t i = 0; i <= b->n; i++) printf("%s%" PRId32, i ? "," : "", b->cu_seqlens[i]);
  printf("],\"padded\":[");
  for (size_t i = 0; i < b->n; i++) printf("%s%d", i ? "," : "", b->padded[i] ? 1 : 0);
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
  printf("]}\n");
  for (size_t i = 0; i < b->n_skipped; i++)
    fprintf(stderr, "adaptiveload stream: skipped %s: %s\n", b->skipped_keys[i],
            b->skipped_reasons[i]);
}

/* Splits a comma list into names (pointers into buf, which it edits); -1 when empty parts or
 * too many. */
static int split_members(char *buf, const char **names, size_t cap, size_t *n) {
  *n = 0;
  for (char *p = buf;;) {
    char *c = strchr(p, ',');
    if (c) *c = 0;
    if (!*p || *n == cap) return -1;
    names[(*n)++] = p;
    if (!c) return 0;
    p = c + 1;
  }
}

static int parse_long(const char *opt, const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || *end || x < lo || x > hi) {
    fprintf(stderr, "adaptiveload stream: bad %s '%s'\n\n", opt, v);
    return -1;
  }
  *out = x;
  return 0;
}

int cli_cmd_stream(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return AL_EXIT_OK;
  }
  const char *index_path = NULL, *manifest_path = NULL;
  const char *roots[16];
  size_t n_roots = 0;
  long rank = -1, max_batches = -1;
  int bench = 0, json = 0, jsonl = 0;
  char members_buf[1024];
  const char *member_names[AL_STREAM_MAX_MEMBERS];
  double compute_ms = 0;
  al_stream_options o;
  memset(&o, 0, sizeof o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long x;
    if (!strcmp(a, "--bench")) {
      bench = 1;
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--jsonl")) {
      jsonl = 1;
    } else if (!strcmp(a, "--no-pinned")) {
      o.pinned = -1;
    } else if (!strcmp(a, "--device")) {
      o.device_copy = 1;
      o.cuda_device = -1;
      if (v && v[0] >= '0' && v[0] <= '9') {
        if (parse_long(a, v, 0, 1024, &x)) return AL_EXIT_USAGE;
        o.cuda_device = (int)x;
        i++;
      }
    } else if (!v || a[0] != '-') {
      return cli_usage_page("stream", usage, "%s %s", a,
                            a[0] == '-' ? "needs a value (or is unknown)" : "unexpected");
    } else {
      i++;
      if (!strcmp(a, "--max-member-bytes") || !strcmp(a, "--max-sample-bytes")) {
        unsigned long long b = 0;
        if (cli_parse_u64(v, &b) || b == 0) {
          fprintf(stderr, "adaptiveload stream: bad %s '%s'\n\n", a, v);
          return AL_EXIT_USAGE;
        }
        if (!strcmp(a, "--max-member-bytes"))
          o.max_member_bytes = b;
        else
          o.max_sample_bytes = b;
      } else if (!strcmp(a, "--root")) {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1] || n_roots == sizeof roots / sizeof roots[0]) {
          fprintf(stderr, "adaptiveload stream: bad --root '%s' (FROM=TO, at most %zu)\n\n", v,
                  sizeof roots / sizeof roots[0]);
          return AL_EXIT_USAGE;
        }
        roots[n_roots++] = v;
      } else if (!strcmp(a, "--index")) {
        index_path = v;
      } else if (!strcmp(a, "--manifest")) {
        manifest_path = v;
      } else if (!strcmp(a, "--rank")) {
        if (parse_long(a, v, 0, 1 << 30, &rank)) return AL_EXIT_USAGE;
      } else if (!strcmp(a, "--threads")) {
        if (parse_long(a, v, 1, 1024, &x)) return AL_EXIT_USAGE;
        o.threads = (int)x;
      } else if (!strcmp(a, "--prefetch")) {
        if (parse_long(a, v, 1, 4096, &x)) return AL_EXIT_USAGE;
        o.prefetch = (int)x;
      } else if (!strcmp(a, "--max-batches")) {
        if (parse_long(a, v, 0, LONG_MAX, &max_batches)) return AL_EXIT_USAGE;
      } else if (!strcmp(a, "--ext")) {
        o.ext = v;
      } else if (!strcmp(a, "--members")) {
        if (strlen(v) >= sizeof members_buf ||
            (strcpy(members_buf, v),
             split_members(members_buf, member_names, AL_STREAM_MAX_MEMBERS, &o.n_members))) {
          fprintf(stderr,
                  "adaptiveload stream: bad --members '%s' (a comma list of at most %d member "
                  "extensions, e.g. latent.npy,t5.npy,txt)\n\n",
                  v, AL_STREAM_MAX_MEMBERS);
          return AL_EXIT_USAGE;
        }
        o.members = member_names;
      } else if (!strcmp(a, "--on-error")) {
        if (!strcmp(v, "fail"))
          o.on_error = AL_STREAM_FAIL;
        else if (!strcmp(v, "skip"))
          o.on_error = AL_STREAM_SKIP_SAMPLE;
        else {
          fprintf(stderr, "adaptiveload stream: --on-error is fail or skip, not '%s'\n\n", v);
          return AL_EXIT_USAGE;
        }
      } else if (!strcmp(a, "--compute-ms")) {
        char *end;
        compute_ms = strtod(v, &end);
        if (*end || compute_ms < 0 || compute_ms > 1e6) {
          fprintf(stderr, "adaptiveload stream: bad --compute-ms '%s'\n\n", v);
          return AL_EXIT_USAGE;
        }
      } else {
        return cli_usage_page("stream", usage, "unknown option '%s'", a);
      }
    }
  }
  if (!index_path || !manifest_path)
    return cli_usage_page("stream", usage, "--index and --manifest are required");

  al_index *idx = NULL;
  al_manifest *m = NULL;
  al_stream *s = NULL;
  int exit_code = AL_EXIT_OK;
  if (al_index_load(&idx, index_path) != AL_OK) {
    exit_code = cli_fail("stream");
    goto cleanup;
  }
  for (size_t k = 0; k < n_roots; k++) {
    const char *eq = strchr(roots[k], '=');
    char from[4096];
    size_t moved = 0;
    snprintf(from, sizeof from, "%.*s", (int)(eq - roots[k]), roots[k]);
    if (al_index_remap_root(idx, from, eq + 1, &moved) != AL_OK) {
      exit_code = cli_fail("stream");
      goto cleanup;
    }
    fprintf(stderr, "stream: %zu shard paths moved from %s to %s\n", moved, from, eq + 1);
  }
  if (al_manifest_load(&m, manifest_path) != AL_OK ||
      al_stream_open(&s, idx, m, (int)rank, &o) != AL_OK) {
    exit_code = cli_fail("stream");
    goto cleanup;
  }

  double t0 = now_s(), copy_wait = 0, compute_total = 0;
  uint64_t batches = 0, bytes = 0, samples = 0, tokens = 0, skipped = 0, copied = 0;
  int rc = AL_OK;
  const al_stream_batch *b;
  while ((max_batches < 0 || batches < (uint64_t)max_batches) &&
         (rc = al_stream_next(s, &b)) == AL_OK) {
    batches++;
    bytes += b->data_bytes;
    samples += b->n;
    tokens += b->tokens;
    skipped += b->n_skipped;
    if (o.device_copy) {
      /* A training step would make its stream wait on the event; here the
       * host waits, which measures how far the copy lags behind next(). */
      double c0 = now_s();
      if (al_stream_batch_sync(b) != AL_OK) {
        exit_code = cli_fail("stream");
        al_stream_release(s, b);
        goto cleanup;
      }
      copy_wait += now_s() - c0;
      copied += b->copy_bytes;
    }
    if (!bench && jsonl) {
      print_batch_jsonl(b);
    } else if (!bench) {
      print_batch(b, json);
    } else if (compute_ms > 0) {
      double c0 = now_s();
      while (now_s() - c0 < compute_ms * 1e-3) {
      }
      compute_total += now_s() - c0;
    }
    al_stream_release(s, b);
  }
  if (max_batches < 0 || batches < (uint64_t)max_batches) {
    if (rc != AL_EOF) {
      exit_code = cli_fail("stream");
      fprintf(stderr, "adaptiveload stream: stopped after %" PRIu64 " batches\n", batches);
    }
  }
  double secs = now_s() - t0;
  al_stream_stats ss;
  al_stream_get_stats(s, &ss);
  if (bench) {
    double gbs = secs > 0 ? (double)bytes / secs / 1e9 : 0;
    double bps = secs > 0 ? (double)batches / secs : 0;
    if (json) {
      printf("{\"batches\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"tokens\":%" PRIu64
             ",\"bytes\":%" PRIu64 ",\"skipped\":%" PRIu64
             ",\"seconds\":%.6f,\"gb_per_s\":%.4f,\"batches_per_s\":%.2f"
             ",\"stall_seconds\":%.6f,\"read_seconds\":%.6f,\"compute_seconds\":%.6f,\"threads\":%d"
             ",\"prefetch\":%d,\"pinned\":%s,\"host_buffer_bytes\":%" PRIu64 ",\"device\":%s",
             batches, samples, tokens, bytes, skipped, secs, gbs, bps, ss.stall_seconds,
             ss.read_seconds, compute_total, ss.threads, ss.buffers, ss.pinned ? "true" : "false",
             ss.host_bytes, o.device_copy ? "true" : "false");
      if (o.device_copy)
        printf(",\"copied_bytes\":%" PRIu64
               ",\"copy_stall_seconds\":%.6f,\"device_buffer_bytes\":%" PRIu64,
               copied, copy_wait, ss.device_bytes);
      printf("}\n");
    } else {
      printf("batches %" PRIu64 "  samples %" PRIu64 "  tokens %" PRIu64 "  bytes %" PRIu64
             "  skipped %" PRIu64 "\n",
             batches, samples, tokens, bytes, skipped);
      printf("time %.3f s  %.3f GB/s  %.1f batches/s\n", secs, gbs, bps);
      printf(
          "stall %.3f s (%.1f%% of the time next() waited for readers)  reader busy %.3f s  threads %d  "
          "prefetch %d  pinned %s  pool %.1f MB\n",
          ss.stall_seconds, secs > 0 ? 100 * ss.stall_seconds / secs : 0, ss.read_seconds,
          ss.threads, ss.buffers, ss.pinned ? "yes" : "no", (double)ss.host_bytes / 1e6);
      if (compute_ms > 0) printf("simulated compute %.3f s\n", compute_total);
      if (o.device_copy)
        printf(
            "device copies %.3f GB, copy stall %.3f s (%.1f%%: time waiting for a batch's copy after "
            "next())\n",
            (double)copied / 1e9, copy_wait, secs > 0 ? 100 * copy_wait / secs : 0);
    }
  } else if (!json && !jsonl) {
    fprintf(stderr,
            "adaptiveload stream: %" PRIu64 " batches, %" PRIu64 " samples, %" PRIu64 " skipped\n",
            batches, samples, skipped);
  }
cleanup:
  al_stream_close(s);
  al_manifest_free(m);
  al_index_free(idx);
  return exit_code;
}
