/* Reading a training trace (JSONL, one measured micro-batch per line) into
 * benchmark rows for the cost fit: `adaptiveload fit --trace`. */
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "common/grow_internal.h"
#include "cost/al_cost.h"
#include "cost/cost_internal.h"
#include "common/text_read_internal.h"

#define TRACE_MAX_BYTES (1u << 30)

typedef struct trace_row {
  double B, S, ms, mem;
} trace_row;

static int by_shape_then_ms(const void *a, const void *b) {
  const trace_row *x = a, *y = b;
  if (x->B != y->B) return x->B < y->B ? -1 : 1;
  if (x->S != y->S) return x->S < y->S ? -1 : 1;
  return (x->ms > y->ms) - (x->ms < y->ms);
}

/* One line into *row; nonzero with a reason in why[] when it cannot be used. */
static int parse_line(const char *line, size_t len, trace_row *row, int *warmup, char *why,
                      size_t cap) {
  json_error_t err;
  json_t *o = json_loadb(line, len, 0, &err);
  int bad = 0;
  *warmup = 0;
  if (!o || !json_is_object(o)) {
    snprintf(why, cap, "not a JSON object%s%.100s", o ? "" : ": ", o ? "" : err.text);
    json_decref(o);
    return -1;
  }
  if (json_is_true(json_object_get(o, "warmup"))) {
    *warmup = 1;
    json_decref(o);
    return 1;
  }
  double B = 0, S = 0, ms = 0, tokens = 0, mem = -1;
  int rb = text_json_num(o, "B", "n", &B), rs = text_json_num(o, "S", NULL, &S),
      rm = text_json_num(o, "ms", "step_ms", &ms);
  int rt = text_json_num(o, "tokens", NULL, &tokens),
      rmem = text_json_num(o, "peak_mem_bytes", NULL, &mem);
  if (rs == 1 && rt == 0 && rb == 0 && B >= 1) S = tokens / B, rs = 0;
  if (rb || rs || rm || rt < 0 || rmem < 0) {
    snprintf(why, cap, "needs numbers B (or n), S (or tokens) and ms");
    bad = -1;
  } else if (!(B >= 1) || B != floor(B) || B > 1e9 || !(S >= 1) || S > 1e12 || S != floor(S)) {
    snprintf(why, cap, "B = %g, S = %g: B and S must be whole numbers >= 1", B, S);
    bad = -1;
  } else if (!(ms > 0) || !isfinite(ms)) {
    snprintf(why, cap, "ms = %g must be > 0", ms);
    bad = -1;
  }
  json_decref(o);
  if (bad) return bad;
  row->B = B, row->S = S, row->ms = ms, row->mem = rmem == 0 && isfinite(mem) ? mem : -1;
  return 0;
}

int al_bench_parse_trace(al_bench *caller, const char *text, size_t len, const char *name,
                         al_trace_stats *stats) {
  if (!caller || (!text && len))
    return al_set_error(AL_EINVAL, "al_bench_parse_trace: NULL argument");
  size_t n_stats = 0, n_out;
  int src = bench_out_size(caller, "al_bench_parse_trace", &n_out);
  if (!src && stats)
    src = struct_out_size(stats, sizeof(al_trace_stats), AL_TRACE_STATS_V1, "al_bench_parse_trace",
                          "al_trace_stats", &n_stats);
  if (src) return src;
  al_bench local = AL_BENCH_INIT, *out = &local;
  al_trace_stats st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  if (!name) name = "trace";
  snprintf(out->source, sizeof out->source, "%s", name);
  trace_row *rows = NULL;
  size_t n = 0, cap = 0;
  int rc = AL_OK;
  size_t lineno = 0;
  for (size_t at = 0; at < len && !rc;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t end = nl ? (size_t)(nl - text) : len;
    lineno++;
    size_t b = at, e = end;
    while (b < e && (text[b] == ' ' || text[b] == '\t' || text[b] == '\r')) b++;
    at = end + 1;
    if (b == e) continue;
    st.lines++;
    trace_row r;
    int warm;
    char why[160];
    int k = parse_line(text + b, e - b, &r, &warm, why, sizeof why);
    if (k > 0) {
      st.warmup++;
      continue;
    }
    if (k < 0) {
      /* A bad line (a run killed mid-write leaves half a line) is counted and named, and the
       * rest of the trace is used. */
      if (!st.skipped)
        snprintf(st.first_skipped, sizeof st.first_skipped, "%s: line %zu: %s", name, lineno, why);
      st.skipped++;
      continue;
    }
    if ((rc = grow_array((void **)&rows, &cap, n + 1, sizeof *rows, "trace rows"))) break;
    rows[n++] = r;
  }
  if (rc) goto cleanup;
  st.used = n;
  /* One benchmark row per (B, S): the median time (lower middle for an even count) and the
   * largest peak memory. A training trace has thousands of micro-batches of few shapes; the
   * median keeps a stray slow step (a checkpoint, a collective stall) out of the fit. */
  qsort(rows, n, sizeof *rows, by_shape_then_ms);
  size_t groups = 0;
  int has_mem = n > 0;
  for (size_t i = 0; i < n; i++) {
    has_mem &= rows[i].mem >= 0;
    groups += i == 0 || rows[i].B != rows[i - 1].B || rows[i].S != rows[i - 1].S;
  }
  const char *what = "trace rows";
  size_t g = groups ? groups : 1;
  if ((rc = grow_resize((void **)&out->B, g, sizeof *out->B, what)) ||
      (rc = grow_resize((void **)&out->S, g, sizeof *out->S, what)) ||
      (rc = grow_resize((void **)&out->ms, g, sizeof *out->ms, what)) ||
      (has_mem && (rc = grow_resize((void **)&out->mem, g, sizeof *out->mem, what))))
    goto cleanup;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    double mem = 0;
    for (; j < n && rows[j].B == rows[i].B && rows[j].S == rows[i].S; j++)
      if (rows[j].mem > mem) mem = rows[j].mem;
    out->B[out->n] = rows[i].B;
    out->S[out->n] = rows[i].S;
    out->ms[out->n] = rows[i + (j - i - 1) / 2].ms;
    if (has_mem) out->mem[out->n] = mem;
    out->n++;
    i = j;
  }
  st.groups = out->n;
  if (!rc && out->n < AL_BENCH_MIN_ROWS)
    rc = al_set_error(AL_EINVAL,
                      "%s: %zu distinct (B, S) shapes in %zu usable lines (%zu skipped%s%s); the "
                      "fit needs at least %d",
                      name, out->n, st.used, st.skipped, st.skipped ? ", first: " : "",
                      st.first_skipped, AL_BENCH_MIN_ROWS);
cleanup:
  free(rows);
  if (stats) struct_out(stats, &st, n_stats);
  if (rc) al_bench_free(out);
  bench_out(caller, out, n_out);
  return rc;
}

int al_bench_load_trace(al_bench *caller, const char *path, al_trace_stats *stats) {
  if (!caller || !path) return al_set_error(AL_EINVAL, "al_bench_load_trace: NULL argument");
  size_t n_out;
  int rc = bench_out_size(caller, "al_bench_load_trace", &n_out);
  if (rc) return rc;
  al_bench out = AL_BENCH_INIT;
  char *buf;
  size_t n;
  rc = text_read_file(path, TRACE_MAX_BYTES, "trace", &buf, &n);
  if (!rc) {
    rc = al_bench_parse_trace(&out, buf, n, path, stats);
    free(buf);
  }
  bench_out(caller, &out, n_out);
  return rc;
}

/* al_bench_append on benchmarks of this library's layout. */
static int append(al_bench *dst, const al_bench *src) {
  size_t n = dst->n + src->n;
  const char *what = "benchmark rows";
  int has_mem = src->mem != NULL && (dst->n == 0 || dst->mem != NULL);
  int has_d = src->d != NULL || dst->d != NULL; /* a side without the column is all d = 1 */
  int rc = grow_resize((void **)&dst->B, n, sizeof *dst->B, what);
  if (!rc) rc = grow_resize((void **)&dst->S, n, sizeof *dst->S, what);
  if (!rc) rc = grow_resize((void **)&dst->ms, n, sizeof *dst->ms, what);
  if (!rc && has_mem) rc = grow_resize((void **)&dst->mem, n, sizeof *dst->mem, what);
  int dst_had_d = dst->d != NULL;
  if (!rc && has_d) rc = grow_resize((void **)&dst->d, n, sizeof *dst->d, what);
  if (rc) return rc;
  for (size_t i = 0; has_d && !dst_had_d && i < dst->n; i++) dst->d[i] = 1;
  for (size_t i = 0; has_d && i < src->n; i++) dst->d[dst->n + i] = src->d ? src->d[i] : 1;
  memcpy(dst->B + dst->n, src->B, src->n * sizeof *src->B);
  memcpy(dst->S + dst->n, src->S, src->n * sizeof *src->S);
  memcpy(dst->ms + dst->n, src->ms, src->n * sizeof *src->ms);
  if (has_mem) memcpy(dst->mem + dst->n, src->mem, src->n * sizeof *src->mem);
  if (!has_mem && dst->mem) {
    free(dst->mem);
    dst->mem = NULL;
  }
  dst->n = n;
  char both[sizeof dst->source * 2 + 4];
  snprintf(both, sizeof both, "%s + %s", dst->source, src->source);
  memcpy(dst->source, both, sizeof dst->source - 1); /* truncated to fit */
  dst->source[sizeof dst->source - 1] = '\0';
  return AL_OK;
}

int al_bench_append(al_bench *caller_dst, const al_bench *caller_src) {
  if (!caller_dst || !caller_src) return al_set_error(AL_EINVAL, "al_bench_append: NULL argument");
  al_bench dst, src;
  int rc = struct_in(&dst, sizeof dst, AL_BENCH_V1, caller_dst, "al_bench_append", "al_bench");
  if (!rc) rc = struct_in(&src, sizeof src, AL_BENCH_V1, caller_src, "al_bench_append", "al_bench");
  if (rc) return rc;
  rc = append(&dst, &src); /* even when it fails, dst's arrays may have moved: handed back */
  bench_out(caller_dst, &dst, caller_dst->struct_size ? caller_dst->struct_size : sizeof dst);
  return rc;
}
