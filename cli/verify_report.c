/* adaptiveload verify: the report, as text or one JSON object (verify_internal.h). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/verify_internal.h"
#include "common/json_write_internal.h"
#include "planner/al_buckets.h"

static const char *const KIND_NAME[VK_COUNT] = {"missing_shard",   "changed_shard",
                                                "truncated_shard", "missing_member",
                                                "bad_header",      "manifest"};

const char *verify_kind_name(vkind k) { return (unsigned)k < VK_COUNT ? KIND_NAME[k] : "?"; }

static const char *plan_reason(int st) {
  if (st > 0 && st < AL_REJECT_COUNT) return al_reject_reason_name((al_reject_reason)st);
  return st == PLAN_DROPPED ? "dropped by the last-step policy" : NULL;
}

/* ---- the report -------------------------------------------------------------------------- */

void verify_count(const verify_run *r, verify_counts *c) {
  memset(c, 0, sizeof *c);
  size_t ns = al_index_sample_count(r->idx);
  for (size_t i = 0; i < ns; i++) {
    c->lost += r->lost[i] != 0;
    c->lost_shard += (r->lost[i] & LOST_SHARD) != 0;
    c->lost_member += (r->lost[i] & LOST_MEMBER) != 0;
    c->lost_plan += (r->lost[i] & LOST_PLAN) != 0;
  }
  for (int k = 0; k < VK_COUNT; k++) c->problems += r->kind_n[k];
  if (r->a->strict) c->problems += c->lost_plan + al_index_rejected_count(r->idx);
}

static double frac(uint64_t a, uint64_t b) { return b ? (double)a / (double)b : 1.0; }

static void print_crop_text(const verify_run *r) {
  const fid_report *c = &r->crop;
  printf("crop (%s): %" PRIu64
         " samples with a bucket, %.1f%% of their native latent tokens "
         "kept\n",
         r->crop_from, c->samples, 100 * frac(c->kept_tokens, c->native_tokens));
  if (c->n_groups)
    printf("  %-8s %-12s %10s %8s %8s %8s\n", "aspect", "duration", "samples", "kept", "mean",
           "min");
  for (size_t k = 0; k < c->n_groups; k++) {
    const fid_group *g = &c->groups[k];
    printf("  %-8s %-12s %10" PRIu64 " %7.1f%% %7.1f%% %7.1f%%\n", g->aspect,
           fidelity_band_name(g->band), g->samples, 100 * frac(g->kept_tokens, g->native_tokens),
           100 * g->sum_fraction / (double)g->samples, 100 * g->min_fraction);
  }
  if (c->n_cut) printf("cut most:\n");
  for (size_t k = 0; k < c->n_cut; k++) {
    const fid_cut *x = &c->cut[k];
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    al_index_sample(r->idx, (size_t)x->sample, &si);
    printf("  %s  %ux%u x %u -> %ux%u x %u  %" PRIu64 " of %" PRIu64 " tokens (%.1f%%)\n", si.key,
           x->width, x->height, x->frames, x->bucket_width, x->bucket_height, x->bucket_frames,
           x->kept_tokens, x->native_tokens, 100 * x->fraction);
  }
}

/* The index's rejected entries and the plan's skipped samples, the first `show` of each. */
static void print_skipped_text(const verify_run *r, const verify_counts *c) {
  size_t ns = al_index_sample_count(r->idx), nr = al_index_rejected_count(r->idx);
  printf("skipped: %" PRIu64 " of %zu samples would not be streamed: %" PRIu64
         " in damaged shards, %" PRIu64 " missing a member or with a bad header, %" PRIu64
         " rejected or dropped by the %s; the index rejected %zu entries\n",
         c->lost, ns, c->lost_shard, c->lost_member, c->lost_plan,
         r->m ? "plan" : "default bucket table", nr);
  for (size_t i = 0; i < nr && i < r->a->show; i++) {
    al_rejected_info e = AL_REJECTED_INFO_INIT;
    al_shard_info sh = AL_SHARD_INFO_INIT;
    if (al_index_rejected(r->idx, i, &e) || al_index_shard(r->idx, e.shard, &sh)) continue;
    printf("  index rejected: %s: member '%s' at byte %" PRIu64 ": %s\n", sh.path, e.member,
           e.offset, e.reason);
  }
  if (nr > r->a->show)
    printf("  ... %zu more rejected entries (--json lists all)\n", nr - r->a->show);
  uint64_t shown = 0;
  for (size_t i = 0; i < ns; i++) {
    const char *why = plan_reason(r->plan[i]);
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    if (!why || shown++ >= r->a->show || al_index_sample(r->idx, i, &si)) continue;
    printf("  %s: %s: %s\n", r->m ? "plan" : "buckets", si.key, why);
  }
  if (shown > r->a->show)
    printf("  ... %" PRIu64 " more skipped by the plan (--json lists all)\n", shown - r->a->show);
}

void verify_print_text(const verify_run *r, const verify_counts *c) {
  if (r->source_name) printf("== source %s\n", r->source_name);
  printf("verify %s: %zu shards (%" PRIu64
         " holding samples checked), %zu samples; members "
         "required:",
         r->source_index ? r->source_index : r->a->index_path, al_index_shard_count(r->idx),
         r->shards_checked, al_index_sample_count(r->idx));
  for (size_t k = 0; k < r->n_req; k++) printf("%s%s", k ? "," : " ", r->req[k]);
  if (r->a->manifest_path)
    printf("; manifest %s%s", r->a->manifest_path, r->m || r->mix_m ? "" : " (not used)");
  printf("\ntyped member headers: %" PRIu64 " read%s", r->typed_checked,
         r->typed_skipped ? ", " : "");
  if (r->typed_skipped)
    printf("%" PRIu64 " not read (LZ4 frames, compressed shards: checked when streamed)",
           r->typed_skipped);
  if (r->remote_requests) printf("; %" PRIu64 " requests to servers", r->remote_requests);
  printf("\nproblems:");
  for (int k = 0; k < VK_COUNT; k++)
    printf("%s %s %" PRIu64, k ? "," : "", KIND_NAME[k], r->kind_n[k]);
  printf("\n");
  for (int k = 0; k < VK_COUNT; k++) {
    uint64_t shown = 0;
    for (size_t i = 0; i < r->n_p; i++)
      if (r->p[i].kind == (vkind)k && shown++ < r->a->show)
        printf("  %s: %s\n", KIND_NAME[k], r->p[i].message);
    if (shown > r->a->show)
      printf("  ... %" PRIu64 " more %s (--json lists all)\n", shown - r->a->show, KIND_NAME[k]);
  }
  print_skipped_text(r, c);
  if (r->crop_from) print_crop_text(r);
  if (c->problems)
    printf("verify: %" PRIu64 " problems%s\n", c->problems,
           r->a->strict ? " (--strict: rejected samples count)" : "");
  else
    printf("verify: no problems\n");
}

static void json_key(const char *sep, const char *key) {
  printf("%s", sep);
  jsonw_string(stdout, key);
  putchar(':');
}

static void print_problems_json(const verify_run *r) {
  printf(",\"counts\":{");
  for (int k = 0; k < VK_COUNT; k++) {
    json_key(k ? "," : "", KIND_NAME[k]);
    printf("%" PRIu64, r->kind_n[k]);
  }
  printf("},\"problems\":[");
  for (size_t i = 0; i < r->n_p; i++) {
    const vproblem *p = &r->p[i];
    printf("%s{\"kind\":\"%s\",\"shard\":", i ? "," : "", KIND_NAME[p->kind]);
    if (p->shard)
      jsonw_string(stdout, p->shard);
    else
      printf("null");
    printf(",\"key\":");
    if (p->key)
      jsonw_string(stdout, p->key);
    else
      printf("null");
    printf(",\"lost\":%" PRIu64 ",\"message\":", p->lost);
    jsonw_string(stdout, p->message);
    putchar('}');
  }
  putchar(']');
}

static void print_skipped_json(const verify_run *r, const verify_counts *c) {
  size_t ns = al_index_sample_count(r->idx), nr = al_index_rejected_count(r->idx);
  printf(",\"skipped\":{\"samples\":%" PRIu64 ",\"damaged_shard\":%" PRIu64
         ",\"missing_member\":%" PRIu64 ",\"plan\":%" PRIu64
         ",\"index_rejected\":%zu"
         ",\"index_warnings\":%zu}",
         c->lost, c->lost_shard, c->lost_member, c->lost_plan, nr, al_index_warning_count(r->idx));
  printf(",\"index_rejected\":[");
  for (size_t i = 0; i < nr; i++) {
    al_rejected_info e = AL_REJECTED_INFO_INIT;
    al_shard_info sh = AL_SHARD_INFO_INIT;
    if (al_index_rejected(r->idx, i, &e) || al_index_shard(r->idx, e.shard, &sh)) continue;
    printf("%s{\"shard\":", i ? "," : "");
    jsonw_string(stdout, sh.path);
    printf(",\"member\":");
    jsonw_string(stdout, e.member);
    printf(",\"offset\":%" PRIu64 ",\"key\":", e.offset);
    jsonw_string(stdout, e.key);
    printf(",\"reason\":");
    jsonw_string(stdout, e.reason);
    putchar('}');
  }
  printf("],\"plan_skipped\":[");
  const char *sep = "";
  for (size_t i = 0; i < ns; i++) {
    const char *why = plan_reason(r->plan[i]);
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    if (!why || al_index_sample(r->idx, i, &si)) continue;
    printf("%s{\"sample\":%zu,\"key\":", sep, i);
    jsonw_string(stdout, si.key);
    printf(",\"reason\":");
    jsonw_string(stdout, why);
    putchar('}');
    sep = ",";
  }
  putchar(']');
}

static void print_crop_json(const verify_run *r) {
  const fid_report *c = &r->crop;
  printf(",\"crop\":{\"from\":\"%s\",\"samples\":%" PRIu64 ",\"unplanned\":%" PRIu64
         ",\"native_tokens\":%" PRIu64 ",\"kept_tokens\":%" PRIu64,
         r->crop_from, c->samples, c->unplanned, c->native_tokens, c->kept_tokens);
  jsonw_field_number(stdout, ",", "kept_fraction", "%.6f", frac(c->kept_tokens, c->native_tokens));
  printf(",\"groups\":[");
  for (size_t k = 0; k < c->n_groups; k++) {
    const fid_group *g = &c->groups[k];
    printf("%s{\"aspect\":", k ? "," : "");
    jsonw_string(stdout, g->aspect);
    printf(",\"duration\":\"%s\",\"samples\":%" PRIu64 ",\"native_tokens\":%" PRIu64
           ",\"kept_tokens\":%" PRIu64,
           fidelity_band_name(g->band), g->samples, g->native_tokens, g->kept_tokens);
    jsonw_field_number(stdout, ",", "kept_fraction", "%.6f",
                       frac(g->kept_tokens, g->native_tokens));
    jsonw_field_number(stdout, ",", "mean_fraction", "%.6f", g->sum_fraction / (double)g->samples);
    jsonw_field_number(stdout, ",", "min_fraction", "%.6f", g->min_fraction);
    putchar('}');
  }
  printf("],\"cut_most\":[");
  for (size_t k = 0; k < c->n_cut; k++) {
    const fid_cut *x = &c->cut[k];
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    al_index_sample(r->idx, (size_t)x->sample, &si);
    printf("%s{\"sample\":%" PRIu64 ",\"key\":", k ? "," : "", x->sample);
    jsonw_string(stdout, si.key);
    printf(",\"width\":%u,\"height\":%u,\"frames\":%u,\"bucket\":[%u,%u,%u],\"native_tokens\":%" PRIu64
           ",\"kept_tokens\":%" PRIu64,
           x->width, x->height, x->frames, x->bucket_width, x->bucket_height, x->bucket_frames,
           x->native_tokens, x->kept_tokens);
    jsonw_field_number(stdout, ",", "fraction", "%.6f", x->fraction);
    putchar('}');
  }
  printf("]}");
}

void verify_print_json(const verify_run *r, const verify_counts *c) {
  verify_print_json_object(r, c);
  printf("\n");
}

void verify_print_json_object(const verify_run *r, const verify_counts *c) {
  printf("{");
  if (r->source_name) {
    printf("\"source\":");
    jsonw_string(stdout, r->source_name);
    printf(",");
  }
  printf("\"index\":");
  jsonw_string(stdout, r->source_index ? r->source_index : r->a->index_path);
  printf(",\"manifest\":");
  if (r->a->manifest_path)
    jsonw_string(stdout, r->a->manifest_path);
  else
    printf("null");
  printf(",\"manifest_used\":%s,\"index_fingerprint\":\"%016" PRIx64
         "\",\"shards\":%zu"
         ",\"shards_checked\":%" PRIu64 ",\"typed_headers_read\":%" PRIu64
         ",\"typed_headers_not_read\":%" PRIu64 ",\"remote_requests\":%" PRIu64
         ",\"samples\":%zu,\"members\":[",
         r->m || r->mix_m ? "true" : "false", al_index_fingerprint(r->idx),
         al_index_shard_count(r->idx), r->shards_checked, r->typed_checked, r->typed_skipped,
         r->remote_requests, al_index_sample_count(r->idx));
  for (size_t k = 0; k < r->n_req; k++) {
    if (k) putchar(',');
    jsonw_string(stdout, r->req[k]);
  }
  printf("],\"ok\":%s,\"problem_count\":%" PRIu64 ",\"strict\":%s", c->problems ? "false" : "true",
         c->problems, r->a->strict ? "true" : "false");
  print_problems_json(r);
  print_skipped_json(r, c);
  if (r->crop_from) print_crop_json(r);
  printf("}");
}
