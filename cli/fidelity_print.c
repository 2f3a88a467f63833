/* The crop report as inspect INDEX and plan print it (fidelity_print_internal.h). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/fidelity_print_internal.h"
#include "common/json_write_internal.h"

double fidprint_fraction(uint64_t kept, uint64_t native) {
  return native ? (double)kept / (double)native : 1.0;
}

static void print_groups_text(FILE *out, const fid_report *r) {
  if (r->n_groups)
    fprintf(out, "  %-8s %-12s %10s %8s %8s %8s\n", "aspect", "duration", "samples", "kept", "mean",
            "min");
  for (size_t k = 0; k < r->n_groups; k++) {
    const fid_group *g = &r->groups[k];
    fprintf(out, "  %-8s %-12s %10" PRIu64 " %7.1f%% %7.1f%% %7.1f%%\n", g->aspect,
            fidelity_band_name(g->band), g->samples,
            100 * fidprint_fraction(g->kept_tokens, g->native_tokens),
            100 * g->sum_fraction / (double)g->samples, 100 * g->min_fraction);
  }
}

void fidprint_text(FILE *out, const fid_report *r, const al_index *idx, const char *from) {
  fprintf(out,
          "fidelity (%s): %" PRIu64 " samples with a bucket (%" PRIu64
          " without, not counted), %.1f%% of their native latent tokens kept\n",
          from, r->samples, r->unplanned,
          100 * fidprint_fraction(r->kept_tokens, r->native_tokens));
  print_groups_text(out, r);
  fprintf(out, "  cut: ");
  for (int w = FID_CROP; w < FID_WHYS; w++)
    fprintf(out, "%s%" PRIu64 " %s, %.1f%% of tokens", w == FID_CROP ? "" : "; ", r->cut_by[w],
            fidelity_why_name((fid_why)w),
            100 * fidprint_fraction(r->lost_by[w], r->native_tokens));
  fprintf(out, "; %" PRIu64 " kept whole\n", r->cut_by[FID_KEPT]);
  if (r->n_cut && r->cut[0].why != FID_KEPT) fprintf(out, "  cut most:\n");
  for (size_t k = 0; k < r->n_cut; k++) {
    const fid_cut *x = &r->cut[k];
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    if (x->why == FID_KEPT || al_index_sample(idx, (size_t)x->sample, &si)) continue;
    fprintf(out,
            "    %s  %ux%u x %u -> %ux%u x %u  %" PRIu64 " of %" PRIu64 " tokens (%.1f%%): %s\n",
            si.key, x->width, x->height, x->frames, x->bucket_width, x->bucket_height,
            x->bucket_frames, x->kept_tokens, x->native_tokens, 100 * x->fraction,
            fidelity_why_name(x->why));
  }
}

static void print_totals_json(FILE *out, const fid_report *r) {
  fprintf(out,
          "\"samples\": %" PRIu64 ", \"unplanned\": %" PRIu64 ", \"native_tokens\": %" PRIu64
          ", \"kept_tokens\": %" PRIu64,
          r->samples, r->unplanned, r->native_tokens, r->kept_tokens);
  jsonw_field_number(out, ", ", "kept_fraction", "%.6f",
                     fidprint_fraction(r->kept_tokens, r->native_tokens));
  fprintf(out,
          ", \"kept_whole\": %" PRIu64 ", \"cropped\": %" PRIu64 ", \"time_cut\": %" PRIu64
          ", \"cropped_lost_tokens\": %" PRIu64 ", \"time_cut_lost_tokens\": %" PRIu64,
          r->cut_by[FID_KEPT], r->cut_by[FID_CROP], r->cut_by[FID_TIME_CUT], r->lost_by[FID_CROP],
          r->lost_by[FID_TIME_CUT]);
}

static void print_groups_json(FILE *out, const fid_report *r) {
  fprintf(out, ", \"groups\": [");
  for (size_t k = 0; k < r->n_groups; k++) {
    const fid_group *g = &r->groups[k];
    fprintf(out, "%s{\"aspect\": ", k ? ", " : "");
    jsonw_string(out, g->aspect);
    fprintf(out,
            ", \"duration\": \"%s\", \"samples\": %" PRIu64 ", \"native_tokens\": %" PRIu64
            ", \"kept_tokens\": %" PRIu64,
            fidelity_band_name(g->band), g->samples, g->native_tokens, g->kept_tokens);
    jsonw_field_number(out, ", ", "kept_fraction", "%.6f",
                       fidprint_fraction(g->kept_tokens, g->native_tokens));
    jsonw_field_number(out, ", ", "mean_fraction", "%.6f", g->sum_fraction / (double)g->samples);
    jsonw_field_number(out, ", ", "min_fraction", "%.6f", g->min_fraction);
    fputc('}', out);
  }
  fputc(']', out);
}

static void print_cuts_json(FILE *out, const fid_report *r, const al_index *idx) {
  fprintf(out, ", \"cut_most\": [");
  const char *sep = "";
  for (size_t k = 0; k < r->n_cut; k++) {
    const fid_cut *x = &r->cut[k];
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    if (x->why == FID_KEPT || al_index_sample(idx, (size_t)x->sample, &si)) continue;
    fprintf(out, "%s{\"sample\": %" PRIu64 ", \"key\": ", sep, x->sample);
    jsonw_string(out, si.key);
    fprintf(out,
            ", \"width\": %u, \"height\": %u, \"frames\": %u, \"bucket\": [%u, %u, %u]"
            ", \"native_tokens\": %" PRIu64 ", \"kept_tokens\": %" PRIu64,
            x->width, x->height, x->frames, x->bucket_width, x->bucket_height, x->bucket_frames,
            x->native_tokens, x->kept_tokens);
    jsonw_field_number(out, ", ", "fraction", "%.6f", x->fraction);
    fprintf(out, ", \"why\": \"%s\"}", fidelity_why_name(x->why));
    sep = ", ";
  }
  fputc(']', out);
}

void fidprint_json(FILE *out, const fid_report *r, const al_index *idx, const char *from) {
  fprintf(out, "\"fidelity\": {\"from\": ");
  jsonw_string(out, from);
  fprintf(out, ", ");
  print_totals_json(out, r);
  print_groups_json(out, r);
  print_cuts_json(out, r, idx);
  fputc('}', out);
}

void fidprint_plan_line(FILE *out, const fid_report *r) {
  fprintf(out,
          "plan: fidelity: %.2f%% of native latent tokens kept (%" PRIu64 " samples), %" PRIu64
          " cut in time (longer than M_mem), %" PRIu64 " cropped to bucket\n",
          100 * fidprint_fraction(r->kept_tokens, r->native_tokens), r->samples,
          r->cut_by[FID_TIME_CUT], r->cut_by[FID_CROP]);
}

void fidprint_plan_json(FILE *out, const fid_report *r) {
  fprintf(out, "\"fidelity\": {");
  print_totals_json(out, r);
  fputc('}', out);
}
