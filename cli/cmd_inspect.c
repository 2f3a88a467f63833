/* adaptiveload inspect: summarise a manifest (planner/al_plan.h reports). */
#include <stdio.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "planner/al_plan.h"
#include "planner/al_report.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: adaptiveload inspect MANIFEST [--json] [--jsonl] [--svg FILE] [--rejected]\n"
          "                                     [--compare OTHER_MANIFEST]\n\n"
          "Without flags: a text summary (config, counts, balance, predicted time) and the\n"
          "table of buckets that hold samples.\n\n"
          "options:\n"
          "  --json            one JSON object: policy, world, steps, samples, dropped, padded,\n"
          "                    tokens, imbalance_cv (mean over steps of the CV of per-rank\n"
          "                    predicted cost), bubble (1 - sum of step means / sum of step\n"
          "                    maxima), predicted_seconds, predicted_tokens_per_s, ...\n"
          "  --jsonl           one JSON object per micro-batch: step, rank, micro, bucket,\n"
          "                    cost_ms, keys, samples (index positions), tokens, padded\n"
          "  --svg FILE        heat strip of per-step per-rank load (steps on x, ranks on y,\n"
          "                    colour = rank cost / the step's slowest rank)\n"
          "  --rejected        list every sample the plan rejected or dropped, with the reason\n"
          "  --compare OTHER   print MANIFEST and OTHER side by side (e.g. adaptive vs equal-token)\n");
}

static const char *status_name(int key_status) {
  if (key_status >= 1 && key_status < AL_REJECT_COUNT)
    return al_reject_reason_name((al_reject_reason)key_status);
  if (key_status == 16) return "dropped by the last-step policy";
  return NULL;
}

int cli_cmd_inspect(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return AL_EXIT_OK;
  }
  const char *path = NULL, *svg = NULL, *other = NULL;
  int json = 0, jsonl = 0, rejected = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--json"))
      json = 1;
    else if (!strcmp(a, "--jsonl"))
      jsonl = 1;
    else if (!strcmp(a, "--rejected"))
      rejected = 1;
    else if ((!strcmp(a, "--svg") || !strcmp(a, "--compare")) && i + 1 < argc) {
      if (!strcmp(a, "--svg"))
        svg = argv[++i];
      else
        other = argv[++i];
    } else if (a[0] != '-' && !path) {
      path = a;
    } else {
      return cli_usage_page("inspect", usage, "bad argument: %s", a);
    }
  }
  if (!path) return cli_usage_page("inspect", usage, "MANIFEST is required");
  al_manifest *m = NULL, *o = NULL;
  int rc = al_manifest_load(&m, path);
  if (!rc && other) rc = al_manifest_load(&o, other);
  if (rc) goto cleanup;
  if (json) al_manifest_print_json(stdout, m);
  if (jsonl) rc = al_manifest_print_jsonl(stdout, m);
  if (!rc && svg) {
    rc = al_manifest_write_svg(m, svg);
    if (!rc) fprintf(stderr, "inspect: wrote %s\n", svg);
  }
  if (!rc && rejected) {
    al_manifest_info in;
    al_manifest_get_info(m, &in);
    for (uint64_t i = 0; i < in.index_samples; i++) {
      const char *why = status_name(al_manifest_key_status(m, i));
      const char *key = al_manifest_key(m, i);
      if (why) printf("%llu\t%s\t%s\n", (unsigned long long)i, key ? key : "", why);
    }
  }
  if (!rc && o) al_plan_compare_print(stdout, m, o);
  if (!rc && !json && !jsonl && !svg && !rejected && !o) al_manifest_print_summary(stdout, m, path);

cleanup:
  al_manifest_free(m);
  al_manifest_free(o);
  return rc ? cli_fail("inspect") : AL_EXIT_OK;
}
