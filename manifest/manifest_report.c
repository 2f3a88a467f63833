/* Reports on a loaded manifest: text summary, JSON, JSONL, SVG heat strip,
 * and a side-by-side comparison of two plans. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file_internal.h"
#include "common/json_write_internal.h"
#include "planner/al_plan.h"
#include "manifest/al_report.h"
#include "planner/key_status_internal.h"
#include "manifest/manifest_internal.h"
#include "planner/plan_view_internal.h"
#include "manifest/mixture_report_internal.h"

static size_t buckets_used(const al_manifest *m) {
  size_t n = 0;
  for (size_t i = 0; i < m->n_buckets; i++) n += m->buckets[i].samples != 0;
  return n;
}

static void print_cost_line(FILE *out, const al_cost_model *c) {
  const double *p = c->fit.params;
  if (c->fit.family == AL_COST_POWER)
    fprintf(out, "cost model  power: t = %.4g + %.4g * B * S^%.4f ms", p[0], p[1], p[2]);
  else if (c->fit.family == AL_COST_FLOOR)
    fprintf(out,
            "cost model  floor: t = smax_%g(%.4g, %.4g + %.4g * B + %.4g * B*S + %.4g * B*S^2) ms",
            c->fit.sharpness, c->fit.floor_ms, p[0], c->fit.per_sample_ms, p[1], p[2]);
  else
    fprintf(out, "cost model  poly2: t = %.4g + %.4g * B*S + %.4g * B*S^2 ms", p[0], p[1], p[2]);
  fprintf(out, " (held-out median rel. err %.1f%%, max %.1f%%)\n", 100 * c->fit.median_rel_err,
          100 * c->fit.max_rel_err);
}

/* A plan with SP degrees or the micro sync model: its reports add the group layout. */
static int info_is_sp(const al_manifest_info *in) {
  return (in->sync && !strcmp(in->sync, "micro")) || in->n_sp_degrees > 1 ||
         (in->n_sp_degrees == 1 && in->sp_degrees[0] != 1);
}

/* Reports that add the sync line (sync model, the bubble under both models, micro-batches per
 * degree): SP plans, and every plan of more than one micro-batch per rank per step, where the
 * two models differ (a step plan's FSDP bubble is what the micro model would remove). A plan
 * of one micro-batch per rank per step without SP prints as it always did. */
static int info_reports_sync(const al_manifest_info *in) {
  return info_is_sp(in) || in->micro_per_step > 1;
}

/* Groups and real tokens per allowed degree of a loaded manifest. */
static void manifest_degree_counts(const al_manifest *m, uint64_t *groups, uint64_t *tokens) {
  memset(groups, 0, AL_PLAN_MAX_SP_DEGREES * sizeof *groups);
  memset(tokens, 0, AL_PLAN_MAX_SP_DEGREES * sizeof *tokens);
  for (size_t x = 0; x < m->n_micro; x++) {
    const manifest_micro *mi = &m->micro[x];
    if (mi->sp_rank) continue;
    for (uint32_t t = 0; t < m->info.n_sp_degrees; t++)
      if (m->info.sp_degrees[t] == mi->sp_degree) {
        groups[t]++;
        tokens[t] += (uint64_t)(mi->n - mi->n_pad) * m->buckets[mi->bucket].tokens;
      }
  }
}

/* "1,2,4,8" */
static void degrees_text(const al_manifest_info *in, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (uint32_t t = 0; t < in->n_sp_degrees && used < cap; t++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%u", t ? "," : "", in->sp_degrees[t]);
}

/* One text line: sync model, both bubbles, micro-batches (and tokens) per degree. */
static void print_sp_line(FILE *out, const char *lead, const al_manifest_info *in,
                          const uint64_t *groups, const uint64_t *tokens) {
  char d[64];
  degrees_text(in, d, sizeof d);
  fprintf(out,
          "%ssync %s, sp-degrees %s (largest used %u): bubble %.2f%% (step model), %.2f%% (micro model); by degree:",
          lead, in->sync, d, in->sp_max_degree, 100 * in->bubble_step, 100 * in->bubble_micro);
  for (uint32_t t = 0; t < in->n_sp_degrees; t++)
    fprintf(out, " d%u %llu micro-batches %llu tokens%s", in->sp_degrees[t],
            (unsigned long long)groups[t], (unsigned long long)tokens[t],
            t + 1 < in->n_sp_degrees ? "," : "");
  fputc('\n', out);
}

static void print_sp_json(FILE *out, const al_manifest_info *in, const uint64_t *groups,
                          const uint64_t *tokens) {
  fputs(", \"sync\": ", out);
  jsonw_string(out, in->sync);
  fputs(", \"sp_degrees\": [", out);
  for (uint32_t t = 0; t < in->n_sp_degrees; t++)
    fprintf(out, "%s%u", t ? ", " : "", in->sp_degrees[t]);
  fprintf(out, "], \"sp_max_degree\": %u", in->sp_max_degree);
  jsonw_field_number(out, ", ", "bubble_step", "%.6f", in->bubble_step);
  jsonw_field_number(out, ", ", "bubble_micro", "%.6f", in->bubble_micro);
  fputs(", \"by_degree\": {", out);
  for (uint32_t t = 0; t < in->n_sp_degrees; t++)
    fprintf(out, "%s\"%u\": {\"micro_batches\": %llu, \"tokens\": %llu}", t ? ", " : "",
            in->sp_degrees[t], (unsigned long long)groups[t], (unsigned long long)tokens[t]);
  fputs("}", out);
}

/* The group layout of step s (counted from first_step): per slot k, the groups in rank order
 * as FIRST-LAST:dDEGREE. */
static void print_layout(FILE *out, const al_manifest *m, uint32_t s) {
  uint32_t W = m->ranks;
  const uint64_t *sl = m->slot + (size_t)s * W;
  uint64_t K = sl[1] - sl[0];
  fprintf(out, "layout      step %u (ranks FIRST-LAST:dDEGREE per micro-batch slot):\n",
          m->first_step + s);
  for (uint64_t k = 0; k < K && k < 16; k++) {
    fprintf(out, "  slot %llu:", (unsigned long long)k);
    for (uint32_t r = 0; r < W;) {
      if (sl[r] + k >= sl[r + 1]) break;
      const manifest_micro *mi = &m->micro[sl[r] + k];
      uint32_t d = mi->sp_degree ? mi->sp_degree : 1;
      fprintf(out, " %u-%u:d%u", r, r + d - 1, d);
      r += d;
      if (r >= 64 && r < W) {
        fprintf(out, " ...");
        break;
      }
    }
    fputc('\n', out);
  }
  if (K > 16) fprintf(out, "  ... (%llu slots)\n", (unsigned long long)K);
}

void al_manifest_print_summary(FILE *out, const al_manifest *m, const char *name) {
  const al_manifest_info *in = &m->info;
  fprintf(out, "manifest    %s\n", name ? name : m->path);
  fprintf(out, "policy      %s (last step: %s), world %u, seed %llu, epoch %u\n", in->policy,
          in->last_step, in->world, (unsigned long long)in->seed, in->epoch);
  if (in->steps)
    fprintf(out, "steps       %u..%u (%u steps, %llu micro-batches)\n", in->first_step,
            in->first_step + in->steps - 1, in->steps, (unsigned long long)in->micro_batches);
  else
    fprintf(out, "steps       none (from step %u)\n", in->first_step);
  fprintf(out,
          "samples     %llu planned, %llu dropped, %llu padding, %llu rejected, of %llu indexed\n",
          (unsigned long long)in->samples, (unsigned long long)in->dropped,
          (unsigned long long)in->padded, (unsigned long long)in->rejected,
          (unsigned long long)in->index_samples);
  if (in->rejected) {
    fprintf(out, "rejected   ");
    for (int r = 1; r < AL_REJECT_COUNT; r++)
      if (m->rejected[r])
        fprintf(out, " %llu %s;", (unsigned long long)m->rejected[r],
                al_reject_reason_name((al_reject_reason)r));
    fprintf(out, "\n");
  }
  uint64_t lacking = 0; /* plan --require-members: not rejections, listed by inspect --rejected */
  for (uint64_t i = 0; i < m->n_keys; i++) lacking += m->key_status[i] == AL_KEY_NO_MEMBER;
  if (lacking)
    fprintf(out, "left out    %llu lacking a required member (plan --require-members)\n",
            (unsigned long long)lacking);
  fprintf(out, "tokens      %llu\n", (unsigned long long)in->tokens);
  if (in->micro_per_step)
    fprintf(out,
            "step        %u micro-batches per rank (%u steps with unequal counts), target %llu tokens\n",
            in->micro_per_step, in->unequal_steps, (unsigned long long)in->step_tokens);
  else
    fprintf(out,
            "step        micro-batches per rank not fixed (the manifest records no K): %u steps with unequal counts\n",
            in->unequal_steps);
  fprintf(out, "per step    %.0f tokens (CV %.2f%%), %.1f samples (CV %.2f%%)\n",
          in->step_tokens_mean, 100 * in->step_tokens_cv, in->step_samples_mean,
          100 * in->step_samples_cv);
  fprintf(out,
          "balance     imbalance CV %.2f%%, bubble %.2f%%, step-time CV %.2f%% (across steps)\n",
          100 * in->imbalance_cv, 100 * in->bubble, 100 * in->step_time_cv);
  fprintf(out, "predicted   %.1f s, %.0f tokens/s\n", in->predicted_seconds,
          in->predicted_tokens_per_s);
  if (info_reports_sync(in)) {
    uint64_t g[AL_PLAN_MAX_SP_DEGREES], t[AL_PLAN_MAX_SP_DEGREES];
    manifest_degree_counts(m, g, t);
    print_sp_line(out, "sp          ", in, g, t);
    if (info_is_sp(in) && m->steps) print_layout(out, m, 0);
  }
  fprintf(out, "limits      M_mem %llu tokens, M_comp %.1f ms per micro-batch",
          (unsigned long long)in->mem_tokens, in->comp_budget_ms);
  if (in->micro_tokens)
    fprintf(out, ", micro-batch target %llu tokens", (unsigned long long)in->micro_tokens);
  if (!strcmp(in->policy, "adaptive")) fprintf(out, ", window %u steps", in->window);
  fprintf(out, "\n");
  print_cost_line(out, &m->cost);
  fprintf(out, "\nbuckets with samples (%zu of %zu):\n", buckets_used(m), m->n_buckets);
  fprintf(out, "  %5s %11s %6s %8s %6s %-8s %10s %10s\n", "id", "WxH", "frames", "tokens", "B",
          "limit", "batch ms", "samples");
  for (size_t i = 0; i < m->n_buckets; i++) {
    const al_bucket_info *b = &m->buckets[i];
    if (!b->samples) continue;
    char wh[32];
    snprintf(wh, sizeof wh, "%ux%u", b->width, b->height);
    fprintf(out, "  %5u %11s %6u %8llu %6u %-8s %10.1f %10llu\n", b->id, wh, b->frames,
            (unsigned long long)b->tokens, b->batch_size, b->limited_by, b->batch_cost_ms,
            (unsigned long long)b->samples);
  }
  manifest_mix_print_summary(out, m);
}

/* "layout": the groups of the first step, per slot, as [first rank, degree] pairs. */
static void print_layout_json(FILE *out, const al_manifest *m) {
  uint32_t W = m->ranks;
  fputs(", \"layout\": [", out);
  if (m->steps)
    for (uint64_t k = 0; k < m->slot[1] - m->slot[0]; k++) {
      fputs(k ? ", [" : "[", out);
      for (uint32_t r = 0; r < W;) {
        if (m->slot[r] + k >= m->slot[r + 1]) break;
        const manifest_micro *mi = &m->micro[m->slot[r] + k];
        uint32_t d = mi->sp_degree ? mi->sp_degree : 1;
        fprintf(out, "%s[%u, %u]", r ? ", " : "", r, d);
        r += d;
      }
      fputs("]", out);
    }
  fputs("]", out);
}

static void print_info_json(FILE *out, const al_manifest_info *in, const uint64_t *rejected,
                            size_t used, const uint64_t *groups, const uint64_t *tokens,
                            const al_manifest *m) {
  fprintf(out, "{\"policy\": ");
  jsonw_string(out, in->policy);
  fprintf(out, ", \"world\": %u, \"seed\": %llu, \"epoch\": %u, \"first_step\": %u, \"steps\": %u",
          in->world, (unsigned long long)in->seed, in->epoch, in->first_step, in->steps);
  fprintf(out,
          ", \"micro_batches\": %llu, \"samples\": %llu, \"dropped\": %llu, \"padded\": %llu, \"rejected\": %llu",
          (unsigned long long)in->micro_batches, (unsigned long long)in->samples,
          (unsigned long long)in->dropped, (unsigned long long)in->padded,
          (unsigned long long)in->rejected);
  fprintf(out, ", \"rejected_by_reason\": {");
  for (int r = 1; r < AL_REJECT_COUNT; r++) {
    fprintf(out, "%s", r > 1 ? ", " : "");
    jsonw_string(out, al_reject_reason_name((al_reject_reason)r));
    fprintf(out, ": %llu", (unsigned long long)rejected[r]);
  }
  fprintf(out, "}, \"index_samples\": %llu, \"tokens\": %llu",
          (unsigned long long)in->index_samples, (unsigned long long)in->tokens);
  /* Figures from a file may be anything (a forged cost model): NaN and inf print as null. */
  jsonw_field_number(out, ", ", "imbalance_cv", "%.6f", in->imbalance_cv);
  jsonw_field_number(out, ", ", "bubble", "%.6f", in->bubble);
  jsonw_field_number(out, ", ", "predicted_seconds", "%.6f", in->predicted_seconds);
  jsonw_field_number(out, ", ", "predicted_tokens_per_s", "%.3f", in->predicted_tokens_per_s);
  fprintf(out, ", \"mem_tokens\": %llu", (unsigned long long)in->mem_tokens);
  jsonw_field_number(out, ", ", "comp_budget_ms", "%.6f", in->comp_budget_ms);
  jsonw_field_number(out, ", ", "step_cost_ms", "%.6f", in->step_cost_ms);
  fprintf(out, ", \"window\": %u, \"last_step\": ", in->window);
  jsonw_string(out, in->last_step);
  fprintf(out,
          ", \"micro_per_step\": %u, \"step_tokens\": %llu, \"micro_tokens\": %llu, \"unequal_steps\": %u",
          in->micro_per_step, (unsigned long long)in->step_tokens,
          (unsigned long long)in->micro_tokens, in->unequal_steps);
  jsonw_field_number(out, ", ", "step_tokens_mean", "%.3f", in->step_tokens_mean);
  jsonw_field_number(out, ", ", "step_tokens_cv", "%.6f", in->step_tokens_cv);
  jsonw_field_number(out, ", ", "step_samples_mean", "%.3f", in->step_samples_mean);
  jsonw_field_number(out, ", ", "step_samples_cv", "%.6f", in->step_samples_cv);
  jsonw_field_number(out, ", ", "step_time_cv", "%.6f", in->step_time_cv);
  fprintf(out, ", \"buckets_used\": %zu, \"cost_model\": ", used);
  jsonw_string(out, in->cost_family);
  fprintf(out, ", \"index_fingerprint\": \"%016llx\"", (unsigned long long)in->index_fingerprint);
  if (info_reports_sync(in)) {
    print_sp_json(out, in, groups, tokens);
    if (info_is_sp(in) && m) print_layout_json(out, m);
  }
  if (m) manifest_mix_print_json(out, m);
  fputs("}\n", out);
}

void al_manifest_print_json(FILE *out, const al_manifest *m) {
  uint64_t g[AL_PLAN_MAX_SP_DEGREES], t[AL_PLAN_MAX_SP_DEGREES];
  manifest_degree_counts(m, g, t);
  print_info_json(out, &m->info, m->rejected, buckets_used(m), g, t, m);
}

void al_plan_print_json(FILE *out, const al_plan *p) {
  al_manifest_info in = AL_MANIFEST_INFO_INIT;
  al_plan_get_info(p, &in);
  uint64_t rej[AL_REJECT_COUNT];
  for (int r = 0; r < AL_REJECT_COUNT; r++) rej[r] = al_plan_rejected(p, (al_reject_reason)r);
  uint64_t g[AL_PLAN_MAX_SP_DEGREES], t[AL_PLAN_MAX_SP_DEGREES];
  plan_view_degree_counts(p, g, t);
  print_info_json(out, &in, rej, al_plan_buckets_used(p), g, t, NULL);
}

void al_plan_print_summary(FILE *out, const al_plan *p, const char *name) {
  al_manifest_info in = AL_MANIFEST_INFO_INIT;
  al_plan_get_info(p, &in);
  fprintf(out,
          "plan: %s: %s, world %u, %u steps from %u, %llu micro-batches, %llu samples (%llu padding, %llu dropped, "
          "%llu rejected), %zu buckets used\n",
          name, in.policy, in.world, in.steps, in.first_step, (unsigned long long)in.micro_batches,
          (unsigned long long)in.samples, (unsigned long long)in.padded,
          (unsigned long long)in.dropped, (unsigned long long)in.rejected, al_plan_buckets_used(p));
  fprintf(out,
          "plan: %u micro-batches per rank per step (%u steps unequal), %.0f tokens per step (CV %.2f%%, "
          "target %llu)\n",
          in.micro_per_step, in.unequal_steps, in.step_tokens_mean, 100 * in.step_tokens_cv,
          (unsigned long long)in.step_tokens);
  fprintf(out,
          "plan: imbalance CV %.2f%%, bubble %.2f%%, step-time CV %.2f%%, predicted %.1f s, %.0f "
          "tokens/s\n",
          100 * in.imbalance_cv, 100 * in.bubble, 100 * in.step_time_cv, in.predicted_seconds,
          in.predicted_tokens_per_s);
  if (info_reports_sync(&in)) {
    uint64_t g[AL_PLAN_MAX_SP_DEGREES], t[AL_PLAN_MAX_SP_DEGREES];
    plan_view_degree_counts(p, g, t);
    print_sp_line(out, "plan: ", &in, g, t);
  }
}

int al_manifest_print_jsonl(FILE *out, const al_manifest *m) {
  uint32_t W = m->ranks;
  int sp = info_is_sp(&m->info);
  for (uint32_t s = 0; s < m->steps; s++)
    for (uint32_t r = 0; r < W; r++) {
      size_t slot = (size_t)s * W + r;
      for (uint64_t x = m->slot[slot]; x < m->slot[slot + 1]; x++) {
        const manifest_micro *mi = &m->micro[x];
        fprintf(out, "{\"step\": %u, \"rank\": %u, \"micro\": %llu, \"bucket\": %u",
                m->first_step + s, m->rank0 + r, (unsigned long long)(x - m->slot[slot]),
                mi->bucket);
        if (sp) fprintf(out, ", \"sp_degree\": %u, \"sp_rank\": %u", mi->sp_degree, mi->sp_rank);
        jsonw_field_number(out, ", ", "cost_ms", "%.3f", mi->cost);
        fputs(", \"keys\": [", out);
        for (uint32_t k = 0; k < mi->n; k++) {
          if (k) fputs(", ", out);
          const char *key = al_manifest_key(m, m->samples[mi->first + k]);
          jsonw_string(out, key ? key : "");
        }
        fputs("], \"samples\": [", out);
        for (uint32_t k = 0; k < mi->n; k++)
          fprintf(out, "%s%llu", k ? ", " : "", (unsigned long long)m->samples[mi->first + k]);
        fputs("], \"tokens\": [", out);
        for (uint32_t k = 0; k < mi->n; k++)
          fprintf(out, "%s%llu", k ? ", " : "", (unsigned long long)m->tokens[mi->first + k]);
        fputs("], \"padded\": [", out);
        for (uint32_t k = 0; k < mi->n_pad; k++)
          fprintf(out, "%s%u", k ? ", " : "", m->pads[mi->pad_first + k]);
        if (m->n_sources) { /* a mixture: the source of each sample, by name */
          fputs("], \"sources\": [", out);
          for (uint32_t k = 0; k < mi->n; k++) {
            if (k) fputs(", ", out);
            jsonw_string(out, m->sources[manifest_source_of(m, m->samples[mi->first + k])].name);
          }
        }
        fputs("]}\n", out);
      }
    }
  return ferror(out) ? al_set_error(AL_EIO, "jsonl: write failed") : AL_OK;
}

/* Busy ranks dark green, idle ones through yellow to red: a straggler step
 * is one dark cell in a red column. */
static void load_colour(double ratio, char buf[8]) {
  if (ratio < 0) ratio = 0;
  if (ratio > 1) ratio = 1;
  static const double stops[4][4] = {{0.00, 215, 48, 39},
                                     {0.50, 253, 174, 97},
                                     {0.80, 255, 255, 191},
                                     {1.00, 26, 110, 60}};
  int k = 0;
  while (k < 2 && ratio > stops[k + 1][0]) k++;
  double t = (ratio - stops[k][0]) / (stops[k + 1][0] - stops[k][0]);
  int c[3];
  for (int i = 0; i < 3; i++)
    c[i] = (int)lround(stops[k][i + 1] + t * (stops[k + 1][i + 1] - stops[k][i + 1]));
  snprintf(buf, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
}

int al_manifest_write_svg(const al_manifest *m, const char *path) {
  afile *af;
  int rc = afile_create(&af, path); /* never half a file, never through a link */
  if (rc) return rc;
  FILE *f = afile_stream(af);
  uint32_t W = m->ranks, S = m->steps;
  uint32_t cols = S < 1200 ? S : 1200;
  double group = cols ? (double)S / cols : 1;
  double plot_w = 1200, row_h = W <= 16 ? 24 : W <= 64 ? 8 : 3;
  double plot_h = row_h * W, x0 = 60, y0 = 50;
  double total_w = x0 + plot_w + 20, total_h = y0 + plot_h + 80;
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n",
          total_w, total_h);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f,
          "<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s, world %u: imbalance CV %.2f%%, bubble %.2f%%, %.0f tokens/s predicted</text>\n",
          x0, m->info.policy, W, 100 * m->info.imbalance_cv, 100 * m->info.bubble,
          m->info.predicted_tokens_per_s);
  fprintf(f,
          "<text x=\"%.0f\" y=\"38\" fill=\"#555\">colour = rank's predicted cost / the step's slowest rank%s</text>\n",
          x0, group > 1.0001 ? " (columns average several steps)" : "");
  double *ratio = calloc(W ? W : 1, sizeof *ratio);
  if (!ratio) return afile_finish(af, al_set_error(AL_ENOMEM, "svg: out of memory"));
  double cw = cols ? plot_w / cols : plot_w;
  for (uint32_t c = 0; c < cols; c++) {
    uint32_t s0 = (uint32_t)floor(c * group), s1 = (uint32_t)floor((c + 1) * group);
    if (s1 <= s0) s1 = s0 + 1;
    if (s1 > S) s1 = S;
    for (uint32_t r = 0; r < W; r++) ratio[r] = 0;
    for (uint32_t s = s0; s < s1; s++) {
      double mx = m->stepv[s].max_cost;
      for (uint32_t r = 0; r < W; r++) {
        size_t slot = (size_t)s * W + r;
        double cost = 0;
        for (uint64_t x = m->slot[slot]; x < m->slot[slot + 1]; x++) cost += m->micro[x].cost;
        ratio[r] += mx > 0 ? cost / mx : 1;
      }
    }
    for (uint32_t r = 0; r < W; r++) {
      char col[8];
      load_colour(ratio[r] / (s1 - s0), col);
      fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n",
              x0 + c * cw, y0 + r * row_h, cw + 0.05, row_h, col);
    }
  }
  free(ratio);
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">step %u</text>\n", x0, y0 + plot_h + 16, m->first_step);
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">step %u</text>\n", x0 + plot_w,
          y0 + plot_h + 16, m->first_step + (S ? S - 1 : 0));
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">rank 0</text>\n", x0 - 4, y0 + 12);
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%u</text>\n", x0 - 4, y0 + plot_h,
          W ? W - 1 : 0);
  /* Legend. */
  double ly = y0 + plot_h + 34;
  for (int i = 0; i <= 100; i++) {
    char col[8];
    load_colour(i / 100.0, col);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"3.1\" height=\"12\" fill=\"%s\"/>\n",
            x0 + 3 * i, ly, col);
  }
  fprintf(f,
          "<text x=\"%.0f\" y=\"%.0f\">idle</text><text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">as busy as the slowest rank</text>\n",
          x0, ly + 26, x0 + 303, ly + 26);
  fprintf(f, "</svg>\n");
  return afile_finish(af, ferror(f) ? al_set_error(AL_EIO, "%s: write failed", path) : AL_OK);
}

/* A plan's predicted seconds under the sync model whose bubble is `bubble`: both models share
 * the mean rank cost, which is (1 - bubble) of each model's step time, so the plan's own
 * prediction scales by (1 - its own bubble) / (1 - bubble). 0 when that bubble is 100%. */
static double seconds_under(const al_manifest_info *in, double bubble) {
  double own = in->sync && !strcmp(in->sync, "micro") ? in->bubble_micro : in->bubble_step;
  return bubble < 1 ? in->predicted_seconds * (1 - own) / (1 - bubble) : 0;
}

void al_plan_compare_print(FILE *out, const al_manifest *a, const al_manifest *b) {
  const al_manifest_info *x = &a->info, *y = &b->info;
  fprintf(out, "%-24s %18s %18s %10s\n", "", x->policy, y->policy, "ratio");
  fprintf(out, "%-24s %18u %18u\n", "world", x->world, y->world);
  fprintf(out, "%-24s %18u %18u %9.2fx\n", "steps", x->steps, y->steps,
          y->steps ? (double)x->steps / y->steps : 0);
  fprintf(out, "%-24s %18llu %18llu\n", "micro-batches", (unsigned long long)x->micro_batches,
          (unsigned long long)y->micro_batches);
  fprintf(out, "%-24s %18llu %18llu\n", "samples", (unsigned long long)x->samples,
          (unsigned long long)y->samples);
  fprintf(out, "%-24s %18llu %18llu\n", "padding samples", (unsigned long long)x->padded,
          (unsigned long long)y->padded);
  fprintf(out, "%-24s %18llu %18llu\n", "dropped samples", (unsigned long long)x->dropped,
          (unsigned long long)y->dropped);
  fprintf(out, "%-24s %18llu %18llu\n", "tokens", (unsigned long long)x->tokens,
          (unsigned long long)y->tokens);
  fprintf(out, "%-24s %18u %18u\n", "micro-batches per rank", x->micro_per_step, y->micro_per_step);
  fprintf(out, "%-24s %18u %18u\n", "steps, unequal counts", x->unequal_steps, y->unequal_steps);
  fprintf(out, "%-24s %18.0f %18.0f %9.2fx\n", "tokens per step (mean)", x->step_tokens_mean,
          y->step_tokens_mean,
          y->step_tokens_mean > 0 ? x->step_tokens_mean / y->step_tokens_mean : 0);
  fprintf(out, "%-24s %17.2f%% %17.2f%%\n", "tokens per step (CV)", 100 * x->step_tokens_cv,
          100 * y->step_tokens_cv);
  fprintf(out, "%-24s %18.1f %18.1f %9.2fx\n", "samples per step (mean)", x->step_samples_mean,
          y->step_samples_mean,
          y->step_samples_mean > 0 ? x->step_samples_mean / y->step_samples_mean : 0);
  fprintf(out, "%-24s %17.2f%% %17.2f%%\n", "samples per step (CV)", 100 * x->step_samples_cv,
          100 * y->step_samples_cv);
  fprintf(out, "%-24s %17.2f%% %17.2f%%\n", "imbalance CV", 100 * x->imbalance_cv,
          100 * y->imbalance_cv);
  fprintf(out, "%-24s %17.2f%% %17.2f%%\n", "bubble", 100 * x->bubble, 100 * y->bubble);
  if (info_reports_sync(x) || info_reports_sync(y)) {
    /* Each plan's bubble and prediction are under its own sync model; both models side by
     * side say what a step plan would leave under FSDP, and a micro plan under DDP. */
    fprintf(out, "%-24s %18s %18s\n", "sync model", x->sync, y->sync);
    fprintf(out, "%-24s %17.2f%% %17.2f%%\n", "bubble, step model", 100 * x->bubble_step,
            100 * y->bubble_step);
    fprintf(out, "%-24s %17.2f%% %17.2f%%\n", "bubble, micro model", 100 * x->bubble_micro,
            100 * y->bubble_micro);
    double xs = seconds_under(x, x->bubble_step), ys = seconds_under(y, y->bubble_step);
    double xm = seconds_under(x, x->bubble_micro), ym = seconds_under(y, y->bubble_micro);
    fprintf(out, "%-24s %18.1f %18.1f %9.2fx\n", "predicted s, step model", xs, ys,
            xs > 0 ? ys / xs : 0);
    fprintf(out, "%-24s %18.1f %18.1f %9.2fx\n", "predicted s, micro model", xm, ym,
            xm > 0 ? ym / xm : 0);
  }
  fprintf(out, "%-24s %17.2f%% %17.2f%%\n", "step-time CV", 100 * x->step_time_cv,
          100 * y->step_time_cv);
  fprintf(out, "%-24s %18.1f %18.1f %9.2fx\n", "predicted seconds", x->predicted_seconds,
          y->predicted_seconds,
          x->predicted_seconds > 0 ? y->predicted_seconds / x->predicted_seconds : 0);
  fprintf(out, "%-24s %18.0f %18.0f %9.2fx\n", "predicted tokens/s", x->predicted_tokens_per_s,
          y->predicted_tokens_per_s,
          y->predicted_tokens_per_s > 0 ? x->predicted_tokens_per_s / y->predicted_tokens_per_s
                                        : 0);
}
