/* Reading a shape benchmark: CSV (header row, any column order) or the JSON
 * form of planner/data/h200_dit_block_cost.json. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/grow_internal.h"
#include "planner/al_cost.h"
#include "planner/text_internal.h"

#define BENCH_MAX_BYTES (64u << 20)
#define MAX_COLS 64

void al_bench_free(al_bench *b) {
  if (!b) return;
  free(b->B);
  free(b->S);
  free(b->ms);
  free(b->mem);
  b->B = b->S = b->ms = b->mem = NULL;
  b->n = 0;
}

static int bench_push(al_bench *b, size_t *cap, int has_mem, double B, double S, double ms,
                      double mem) {
  if (b->n == *cap) {
    const char *what = "benchmark rows";
    size_t nc;
    int rc = grow_capacity(*cap, b->n + 1, sizeof(double), what, &nc);
    if (!rc) rc = grow_resize((void **)&b->B, nc, sizeof *b->B, what);
    if (!rc) rc = grow_resize((void **)&b->S, nc, sizeof *b->S, what);
    if (!rc) rc = grow_resize((void **)&b->ms, nc, sizeof *b->ms, what);
    if (!rc && has_mem) rc = grow_resize((void **)&b->mem, nc, sizeof *b->mem, what);
    if (rc) return rc;
    *cap = nc;
  }
  b->B[b->n] = B;
  b->S[b->n] = S;
  b->ms[b->n] = ms;
  if (has_mem) b->mem[b->n] = mem;
  b->n++;
  return AL_OK;
}

/* Range checks shared by both formats; `where` names the row. */
static int check_row(const char *where, double B, double S, double ms, int has_mem, double mem) {
  if (!(B >= 1) || B != floor(B) || B > 1e9)
    return al_set_error(AL_EFORMAT, "%s: B = %g must be an integer >= 1", where, B);
  if (!(S >= 1) || S > 1e12) return al_set_error(AL_EFORMAT, "%s: S = %g must be >= 1", where, S);
  if (!(ms > 0) || !isfinite(ms))
    return al_set_error(AL_EFORMAT, "%s: step_ms = %g must be > 0", where, ms);
  if (has_mem && (!(mem >= 0) || !isfinite(mem)))
    return al_set_error(AL_EFORMAT, "%s: peak_mem_bytes = %g must be >= 0", where, mem);
  return AL_OK;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
  if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
    s[n - 1] = 0;
    s++;
  }
  return s;
}

/* Splits `line` in place at commas; returns the number of fields. */
static size_t split_csv(char *line, char **fields, size_t max) {
  size_t n = 0;
  char *p = line;
  for (;;) {
    char *c = strchr(p, ',');
    if (n < max) fields[n] = p;
    n++;
    if (!c) break;
    *c = 0;
    p = c + 1;
  }
  return n;
}

static int parse_csv(al_bench *b, const char *text, size_t len, const char *name) {
  int col_B = -1, col_S = -1, col_ms = -1, col_mem = -1;
  size_t ncols = 0, cap = 0, pos = 0;
  unsigned line = 0;
  int have_header = 0;
  char *buf = NULL;
  size_t buf_cap = 0;
  int rc = AL_OK;
  while (pos < len && !rc) {
    size_t e = pos;
    while (e < len && text[e] != '\n') e++;
    line++;
    size_t n = e - pos;
    if ((rc = grow_array((void **)&buf, &buf_cap, n + 1, 1, "a benchmark line"))) break;
    memcpy(buf, text + pos, n);
    buf[n] = 0;
    pos = e + 1;
    char *l = trim(buf);
    if (!*l || *l == '#') continue;
    char *f[MAX_COLS];
    size_t nf = split_csv(l, f, MAX_COLS);
    if (nf > MAX_COLS) {
      rc = al_set_error(AL_EFORMAT, "%s: line %u: more than %d columns", name, line, MAX_COLS);
      break;
    }
    if (!have_header) {
      for (size_t i = 0; i < nf; i++) {
        char *h = trim(f[i]);
        int *slot = NULL;
        if (!strcasecmp(h, "B") || !strcasecmp(h, "batch"))
          slot = &col_B;
        else if (!strcasecmp(h, "S") || !strcasecmp(h, "tokens"))
          slot = &col_S;
        else if (!strcasecmp(h, "step_ms") || !strcasecmp(h, "ms"))
          slot = &col_ms;
        else if (!strcasecmp(h, "peak_mem_bytes"))
          slot = &col_mem;
        if (slot && *slot >= 0) {
          rc = al_set_error(AL_EFORMAT, "%s: line %u (header): column '%s' given twice", name, line,
                            h);
          break;
        }
        if (slot) *slot = (int)i;
      }
      if (rc) break;
      const char *missing = col_B < 0 ? "B" : col_S < 0 ? "S" : col_ms < 0 ? "step_ms" : NULL;
      if (missing) {
        rc = al_set_error(AL_EFORMAT,
                          "%s: line %u (header): missing column '%s' (need B, S, step_ms; optional peak_mem_bytes)",
                          name, line, missing);
        break;
      }
      ncols = nf;
      have_header = 1;
      if (col_mem >= 0) {
        b->mem = malloc(sizeof(double)); /* marks has_mem; grown by bench_push */
        if (!b->mem) rc = al_set_error(AL_ENOMEM, "%s: out of memory", name);
      }
      continue;
    }
    if (nf != ncols) {
      rc = al_set_error(AL_EFORMAT, "%s: line %u: %zu fields, the header has %zu", name, line, nf,
                        ncols);
      break;
    }
    double v[4] = {0, 0, 0, 0};
    const int cols[4] = {col_B, col_S, col_ms, col_mem};
    static const char *const names[4] = {"B", "S", "step_ms", "peak_mem_bytes"};
    for (int k = 0; k < 4 && !rc; k++) {
      if (cols[k] < 0) continue;
      char *s = trim(f[cols[k]]), *end;
      errno = 0;
      v[k] = strtod(s, &end);
      if (!*s || *end || errno || !isfinite(v[k]))
        rc = al_set_error(AL_EFORMAT, "%s: line %u column %d (%s): '%s' is not a number", name,
                          line, cols[k] + 1, names[k], s);
    }
    if (rc) break;
    char where[600];
    snprintf(where, sizeof where, "%s: line %u", name, line);
    if ((rc = check_row(where, v[0], v[1], v[2], col_mem >= 0, v[3]))) break;
    rc = bench_push(b, &cap, col_mem >= 0, v[0], v[1], v[2], v[3]);
  }
  free(buf);
  if (!rc && !have_header)
    rc = al_set_error(AL_EFORMAT, "%s: empty (no header row with B, S, step_ms)", name);
  return rc;
}

static int parse_json(al_bench *b, const char *text, size_t len, const char *name) {
  json_t *root;
  int rc = plan_json_parse(text, len, name, &root);
  if (rc) return rc;
  json_t *rows = json_object_get(root, "rows");
  if (!json_is_array(rows)) {
    rc = al_set_error(AL_EFORMAT, "%s: JSON needs an array \"rows\" of {\"B\", \"S\", \"ms\"}",
                      name);
    goto cleanup;
  }
  const char *dev = json_string_value(json_object_get(root, "device"));
  const char *meas = json_string_value(json_object_get(root, "measured"));
  if (dev) snprintf(b->device, sizeof b->device, "%s", dev);
  if (meas) snprintf(b->measured, sizeof b->measured, "%s", meas);
  size_t cap = 0, i;
  int has_mem = -1;
  json_t *row;
  json_array_foreach(rows, i, row) {
    char where[600];
    snprintf(where, sizeof where, "%s: rows[%zu]", name, i);
    double v[4] = {0, 0, 0, 0};
    static const char *const keys[4] = {"B", "S", "ms", "peak_mem_bytes"};
    for (int k = 0; k < 4; k++) {
      int r = plan_json_num(row, keys[k], k == 2 ? "step_ms" : NULL, &v[k]);
      if (r < 0) {
        rc = al_set_error(AL_EFORMAT, "%s: \"%s\" is not a number", where, keys[k]);
        goto cleanup;
      }
      if (r > 0 && k < 3) {
        rc = al_set_error(AL_EFORMAT, "%s: missing \"%s\"", where, keys[k]);
        goto cleanup;
      }
      if (k == 3) {
        int hm = r == 0;
        if (has_mem < 0) {
          has_mem = hm;
          if (hm && !(b->mem = malloc(sizeof(double)))) {
            rc = al_set_error(AL_ENOMEM, "%s: out of memory", name);
            goto cleanup;
          }
        } else if (has_mem != hm) {
          rc = al_set_error(AL_EFORMAT, "%s: \"peak_mem_bytes\" must be given on every row or none",
                            where);
          goto cleanup;
        }
      }
    }
    if ((rc = check_row(where, v[0], v[1], v[2], has_mem == 1, v[3]))) goto cleanup;
    if ((rc = bench_push(b, &cap, has_mem == 1, v[0], v[1], v[2], v[3]))) goto cleanup;
  }
cleanup:
  json_decref(root);
  return rc;
}

int al_bench_parse(al_bench *out, const char *text, size_t len, const char *name) {
  if (!out || (!text && len)) return al_set_error(AL_EINVAL, "al_bench_parse: NULL argument");
  memset(out, 0, sizeof *out);
  if (!name) name = "benchmark";
  snprintf(out->source, sizeof out->source, "%s", name);
  int rc = plan_text_is_json(text, len) ? parse_json(out, text, len, name)
                                        : parse_csv(out, text, len, name);
  if (!rc && out->n < AL_BENCH_MIN_ROWS)
    rc = al_set_error(AL_EINVAL, "%s: too few rows: %zu (need at least %d)", name, out->n,
                      AL_BENCH_MIN_ROWS);
  if (rc) {
    al_bench_free(out);
    return rc;
  }
  return AL_OK;
}

int al_bench_load(al_bench *out, const char *path) {
  if (!out || !path) return al_set_error(AL_EINVAL, "al_bench_load: NULL argument");
  memset(out, 0, sizeof *out);
  char *buf;
  size_t n;
  int rc = plan_read_file(path, BENCH_MAX_BYTES, "benchmark", &buf, &n);
  if (rc) return rc;
  rc = al_bench_parse(out, buf, n, path);
  free(buf);
  return rc;
}
