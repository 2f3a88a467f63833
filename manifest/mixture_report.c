/* mixture_report.c - what a mixture's manifest realises: each source's share of every stage's
 * steps by tokens, samples and predicted compute beside its scheduled weight (inspect's text and
 * JSON), the source of each sample (inspect --jsonl), and the shares over the steps (SVG). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic_file_internal.h"
#include "common/json_write_internal.h"
#include "manifest/al_report.h"
#include "manifest/manifest_internal.h"
#include "manifest/mixture_report_internal.h"

uint32_t manifest_source_of(const al_manifest *m, uint64_t draw) {
  uint32_t lo = 0, hi = m->n_sources;
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (m->sources[mid].draw_base <= draw)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* The units a real sample of bucket b holds: [0] tokens (its own), [1] 1, [2] predicted ms (its
 * bucket's batch cost per sample). */
static void sample_units(const al_manifest *m, uint32_t b, uint64_t tokens, double u[3]) {
  const al_bucket_info *k = &m->buckets[b];
  u[0] = (double)tokens;
  u[1] = 1;
  u[2] = k->batch_size ? k->batch_cost_ms / k->batch_size : 0;
}

/* Adds step s's real samples (each group's micro-batch once) to t[source * 3 + unit]. */
static void tally_step(const al_manifest *m, uint32_t s, double *t) {
  uint32_t W = m->ranks;
  for (uint32_t r = 0; r < W; r++) {
    size_t slot = (size_t)s * W + r;
    for (uint64_t x = m->slot[slot]; x < m->slot[slot + 1]; x++) {
      const manifest_micro *mi = &m->micro[x];
      if (mi->sp_rank) continue;
      for (uint32_t k = 0; k < mi->n; k++) {
        int pad = 0;
        for (uint32_t j = 0; j < mi->n_pad && !pad; j++) pad = m->pads[mi->pad_first + j] == k;
        if (pad) continue;
        double u[3];
        sample_units(m, mi->bucket, m->tokens[mi->first + k], u);
        uint32_t i = manifest_source_of(m, m->samples[mi->first + k]);
        for (int q = 0; q < 3; q++) t[(size_t)i * 3 + q] += u[q];
      }
    }
  }
}

/* Stretch k of those reported: stage k's steps within the manifest's (all its steps when it has
 * no stages), and its weights into w (NULL: the sources' own). */
static void stretch(const al_manifest *m, uint32_t k, uint32_t *a, uint32_t *b, const double **w) {
  uint32_t s0 = m->first_step, s1 = m->first_step + m->steps;
  if (!m->n_stages) {
    *a = s0, *b = s1, *w = NULL;
    return;
  }
  uint32_t from = m->stage_from[k], to = k + 1 < m->n_stages ? m->stage_from[k + 1] : UINT32_MAX;
  *a = from > s0 ? from : s0;
  *b = to < s1 ? to : s1;
  if (*b < *a) *b = *a;
  *w = m->stage_w + (size_t)k * m->n_sources;
}

static double weight_of(const al_manifest *m, const double *w, uint32_t i) {
  return w ? w[i] : m->sources[i].weight;
}

/* Stretch k's tallies: t[source * 3 + unit], sums[unit]. Steps are the manifest's (0-based). */
static int tally_stretch(const al_manifest *m, uint32_t a, uint32_t b, double **t_out,
                         double sums[3]) {
  double *t = calloc((size_t)m->n_sources * 3, sizeof *t);
  if (!t) return al_set_error(AL_ENOMEM, "inspect: out of memory");
  for (uint32_t s = a; s < b; s++) tally_step(m, s - m->first_step, t);
  sums[0] = sums[1] = sums[2] = 0;
  for (uint32_t i = 0; i < m->n_sources; i++)
    for (int q = 0; q < 3; q++) sums[q] += t[(size_t)i * 3 + q];
  *t_out = t;
  return AL_OK;
}

static double share(double x, double sum) { return sum > 0 ? x / sum : 0; }

void manifest_mix_print_summary(FILE *out, const al_manifest *m) {
  if (!m->n_sources) return;
  fprintf(out, "\nmixture by %s, %u sources, %u stage%s:\n", m->mix_by, m->n_sources,
          m->n_stages ? m->n_stages : 1, m->n_stages > 1 ? "s" : "");
  for (uint32_t i = 0; i < m->n_sources; i++) {
    const al_run_source_info *s = &m->sources[i];
    fprintf(out, "  source %-16s %s, %u pass%s of %llu samples, draws %llu, leaves at step %u\n",
            s->name, s->on_exhaust == AL_EXHAUST_STOP ? "stop  " : "repeat", s->passes,
            s->passes == 1 ? "  " : "es", (unsigned long long)s->pass_samples,
            (unsigned long long)s->drawn, s->stop_step);
  }
  uint32_t n = m->n_stages ? m->n_stages : 1;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t a, b;
    const double *w;
    stretch(m, k, &a, &b, &w);
    char head[64];
    if (b > a)
      snprintf(head, sizeof head, "stage %u (steps %u..%u)", k, a, b - 1);
    else
      snprintf(head, sizeof head, "stage %u (no step here)", k);
    fprintf(out, "  %-30s %8s %8s %8s %8s\n", head, "weight", "tokens", "samples", "compute");
    double *t = NULL, sums[3];
    if (b <= a || tally_stretch(m, a, b, &t, sums)) {
      free(t);
      continue;
    }
    for (uint32_t i = 0; i < m->n_sources; i++)
      fprintf(out, "    %-28s %7.2f%% %7.2f%% %7.2f%% %7.2f%%\n", m->sources[i].name,
              100 * weight_of(m, w, i), 100 * share(t[i * 3], sums[0]),
              100 * share(t[i * 3 + 1], sums[1]), 100 * share(t[i * 3 + 2], sums[2]));
    free(t);
  }
}

void manifest_mix_print_json(FILE *out, const al_manifest *m) {
  if (!m->n_sources) return;
  fputs(", \"mixture\": {\"by\": ", out);
  jsonw_string(out, m->mix_by);
  fputs(", \"sources\": [", out);
  for (uint32_t i = 0; i < m->n_sources; i++) {
    const al_run_source_info *s = &m->sources[i];
    fputs(i ? ", {\"name\": " : "{\"name\": ", out);
    jsonw_string(out, s->name);
    fprintf(out,
            ", \"weight\": %.6g, \"on_exhaust\": \"%s\", \"passes\": %u, \"samples\": %llu, "
            "\"pass_samples\": %llu, \"drawn\": %llu, \"drawn_tokens\": %llu, \"stop_step\": %u}",
            s->weight, s->on_exhaust == AL_EXHAUST_STOP ? "stop" : "repeat", s->passes,
            (unsigned long long)s->samples, (unsigned long long)s->pass_samples,
            (unsigned long long)s->drawn, (unsigned long long)s->drawn_tokens, s->stop_step);
  }
  fputs("], \"stages\": [", out);
  uint32_t n = m->n_stages ? m->n_stages : 1;
  for (uint32_t k = 0; k < n; k++) {
    uint32_t a, b;
    const double *w;
    stretch(m, k, &a, &b, &w);
    fprintf(out, "%s{\"from_step\": %u, \"steps\": [%u, %u], \"shares\": {", k ? ", " : "",
            m->n_stages ? m->stage_from[k] : 0, a, b);
    double *t = NULL, sums[3] = {0, 0, 0};
    if (b > a && tally_stretch(m, a, b, &t, sums)) t = NULL;
    for (uint32_t i = 0; i < m->n_sources; i++) {
      if (i) fputs(", ", out);
      jsonw_string(out, m->sources[i].name);
      fprintf(out, ": {\"weight\": %.6g, \"tokens\": %.6g, \"samples\": %.6g, \"compute\": %.6g}",
              weight_of(m, w, i), t ? share(t[i * 3], sums[0]) : 0,
              t ? share(t[i * 3 + 1], sums[1]) : 0, t ? share(t[i * 3 + 2], sums[2]) : 0);
    }
    fputs("}}", out);
    free(t);
  }
  fputs("]}", out);
}

/* Source colours: distinct at a glance, the first ones the most. */
static const char *const COLOURS[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
                                      "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac"};

int al_manifest_write_shares_svg(const al_manifest *m, const char *path) {
  if (!m || !path) return al_set_error(AL_EINVAL, "al_manifest_write_shares_svg: NULL argument");
  if (!m->n_sources)
    return al_set_error(AL_EINVAL, "%s plans one index: shares are a mixture's", m->path);
  int unit = !strcmp(m->mix_by, "samples") ? 1 : !strcmp(m->mix_by, "compute") ? 2 : 0;
  uint32_t S = m->steps, ns = m->n_sources;
  uint32_t cols = S < 1200 ? S : 1200;
  double group = cols ? (double)S / cols : 1, plot_w = 1200, plot_h = 300, x0 = 60, y0 = 50;
  double *t = calloc((size_t)ns * 3, sizeof *t), *col = calloc(ns, sizeof *col);
  if (!t || !col) {
    free(t), free(col);
    return al_set_error(AL_ENOMEM, "svg: out of memory");
  }
  afile *af;
  int rc = afile_create(&af, path);
  if (rc) {
    free(t), free(col);
    return rc;
  }
  FILE *f = afile_stream(af);
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
          "fill=\"white\"/>\n",
          x0 + plot_w + 20, y0 + plot_h + 60 + 16.0 * ns);
  fprintf(f,
          "<text x=\"%.0f\" y=\"20\" font-size=\"14\">share of each step's %s by source "
          "(bars), scheduled weights (black lines)%s</text>\n",
          x0, m->mix_by, group > 1.0001 ? "; columns average several steps" : "");
  double cw = cols ? plot_w / cols : plot_w;
  for (uint32_t c = 0; c < cols; c++) {
    uint32_t s0 = (uint32_t)floor(c * group), s1 = (uint32_t)floor((c + 1) * group);
    if (s1 <= s0) s1 = s0 + 1;
    if (s1 > S) s1 = S;
    memset(t, 0, (size_t)ns * 3 * sizeof *t);
    for (uint32_t s = s0; s < s1; s++) tally_step(m, s, t);
    double sum = 0;
    for (uint32_t i = 0; i < ns; i++) sum += t[(size_t)i * 3 + unit];
    double y = y0;
    for (uint32_t i = 0; i < ns; i++) {
      double h = share(t[(size_t)i * 3 + unit], sum) * plot_h;
      fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n",
              x0 + c * cw, y, cw + 0.05, h, COLOURS[i % 10]);
      y += h;
    }
    /* The scheduled weights at the column's first step, as the boundaries of the stack. */
    uint32_t step = m->first_step + s0, k = 0;
    while (k + 1 < m->n_stages && m->stage_from[k + 1] <= step) k++;
    const double *w = m->n_stages ? m->stage_w + (size_t)k * ns : NULL;
    double acc = 0, wsum = 0;
    for (uint32_t i = 0; i < ns; i++)
      if (step < m->sources[i].stop_step) wsum += weight_of(m, w, i);
    for (uint32_t i = 0; i + 1 < ns; i++) {
      if (step < m->sources[i].stop_step) acc += share(weight_of(m, w, i), wsum);
      col[i] = y0 + acc * plot_h;
      fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"1\" fill=\"black\"/>\n",
              x0 + c * cw, col[i] - 0.5, cw + 0.05);
    }
  }
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">step %u</text>\n", x0, y0 + plot_h + 16, m->first_step);
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">step %u</text>\n", x0 + plot_w,
          y0 + plot_h + 16, m->first_step + (S ? S - 1 : 0));
  for (uint32_t i = 0; i < ns; i++) {
    double ly = y0 + plot_h + 30 + 16.0 * i;
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>", x0, ly,
            COLOURS[i % 10]);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", x0 + 18, ly + 11);
    fputs(m->sources[i].name, f); /* [A-Za-z0-9_.-]: nothing to escape */
    fprintf(f, "</text>\n");
  }
  fprintf(f, "</svg>\n");
  free(t);
  free(col);
  return afile_finish(af, ferror(f) ? al_set_error(AL_EIO, "%s: write failed", path) : AL_OK);
}
