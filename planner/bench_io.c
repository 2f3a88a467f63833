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

/* A CSV reader (RFC 4180): records of comma-separated fields, one a line. A field in double
 * quotes may hold commas, line breaks and doubled quotes (""), each pair one quote; white space
 * around the quotes is ignored. Unquoted fields are trimmed of white space. Blank lines and
 * lines starting with '#' between records are skipped. */
typedef struct csv_reader {
  const char *text, *name;
  size_t len, pos;
  unsigned line; /* line of text[pos] */
  char *buf;     /* the record's fields, each NUL-terminated */
  size_t cap, used;
  size_t off[MAX_COLS]; /* where each field starts in buf */
  size_t nf;            /* fields in the record (may exceed MAX_COLS: only counted) */
} csv_reader;

static int csv_blank(char c) { return c != '\n' && isspace((unsigned char)c); }

static int csv_put(csv_reader *r, char c) {
  int rc = grow_array((void **)&r->buf, &r->cap, r->used + 1, 1, "a benchmark line");
  if (rc) return rc;
  r->buf[r->used++] = c;
  return AL_OK;
}

/* The quoted part of a field, from its opening quote; line breaks inside are counted. */
static int csv_quoted(csv_reader *r, unsigned rec_line) {
  const char *t = r->text;
  int rc = AL_OK;
  r->pos++;
  for (;;) {
    if (r->pos >= r->len)
      return al_set_error(AL_EFORMAT, "%s: line %u column %zu: quoted field not closed", r->name,
                          rec_line, r->nf + 1);
    char c = t[r->pos++];
    if (c == '"' && !(r->pos < r->len && t[r->pos] == '"')) break;
    if (c == '"') r->pos++; /* a doubled quote: one quote */
    if (c == '\n') r->line++;
    if ((rc = csv_put(r, c))) return rc;
  }
  while (r->pos < r->len && csv_blank(t[r->pos])) r->pos++;
  if (r->pos < r->len && t[r->pos] != ',' && t[r->pos] != '\n')
    return al_set_error(AL_EFORMAT, "%s: line %u column %zu: text after the closing quote", r->name,
                        rec_line, r->nf + 1);
  return AL_OK;
}

/* One field, up to the comma or line break that ends it (left unread). */
static int csv_field(csv_reader *r, unsigned rec_line) {
  const char *t = r->text;
  size_t start = r->used;
  int rc = AL_OK;
  while (r->pos < r->len && csv_blank(t[r->pos])) r->pos++;
  if (r->pos < r->len && t[r->pos] == '"') {
    rc = csv_quoted(r, rec_line);
  } else {
    while (!rc && r->pos < r->len && t[r->pos] != ',' && t[r->pos] != '\n')
      rc = csv_put(r, t[r->pos++]);
    while (r->used > start && csv_blank(r->buf[r->used - 1])) r->used--;
  }
  if (!rc) rc = csv_put(r, 0);
  if (!rc && r->nf < MAX_COLS) r->off[r->nf] = start;
  r->nf++;
  return rc;
}

/* Skips blank and comment lines, then reads one record: 1, or 0 at the end of the text (or an
 * error). *rec_line is the line it starts on. */
static int csv_record(csv_reader *r, unsigned *rec_line) {
  const char *t = r->text;
  for (;;) {
    size_t p = r->pos;
    while (p < r->len && csv_blank(t[p])) p++;
    if (p < r->len && t[p] != '\n' && t[p] != '#') break;
    while (p < r->len && t[p] != '\n') p++;
    if (p >= r->len) return 0;
    r->pos = p + 1;
    r->line++;
  }
  *rec_line = r->line;
  r->used = r->nf = 0;
  for (;;) {
    int rc = csv_field(r, *rec_line);
    if (rc) return rc;
    if (r->pos >= r->len) return 1;
    if (t[r->pos++] == '\n') {
      r->line++;
      return 1;
    }
  }
}

static const char *csv_at(const csv_reader *r, int col) { return r->buf + r->off[col]; }

/* The header record: which field holds B, S, step_ms and peak_mem_bytes (-1: none). */
static int csv_header(const csv_reader *r, unsigned line, int cols[4]) {
  for (int k = 0; k < 4; k++) cols[k] = -1;
  for (size_t i = 0; i < r->nf; i++) {
    const char *h = csv_at(r, (int)i);
    int k = !strcasecmp(h, "B") || !strcasecmp(h, "batch")      ? 0
            : !strcasecmp(h, "S") || !strcasecmp(h, "tokens")   ? 1
            : !strcasecmp(h, "step_ms") || !strcasecmp(h, "ms") ? 2
            : !strcasecmp(h, "peak_mem_bytes")                  ? 3
                                                                : -1;
    if (k >= 0 && cols[k] >= 0)
      return al_set_error(AL_EFORMAT, "%s: line %u (header): column '%s' given twice", r->name,
                          line, h);
    if (k >= 0) cols[k] = (int)i;
  }
  const char *missing = cols[0] < 0 ? "B" : cols[1] < 0 ? "S" : cols[2] < 0 ? "step_ms" : NULL;
  if (missing)
    return al_set_error(AL_EFORMAT,
                        "%s: line %u (header): missing column '%s' (need B, S, step_ms; optional peak_mem_bytes)",
                        r->name, line, missing);
  return AL_OK;
}

/* One data record: its numbers, checked, appended to b. */
static int csv_row(const csv_reader *r, unsigned line, const int cols[4], al_bench *b,
                   size_t *cap) {
  static const char *const names[4] = {"B", "S", "step_ms", "peak_mem_bytes"};
  double v[4] = {0, 0, 0, 0};
  for (int k = 0; k < 4; k++) {
    if (cols[k] < 0) continue;
    const char *s = csv_at(r, cols[k]);
    char *end;
    errno = 0;
    v[k] = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v[k]))
      return al_set_error(AL_EFORMAT, "%s: line %u column %d (%s): '%s' is not a number", r->name,
                          line, cols[k] + 1, names[k], s);
  }
  char where[600];
  snprintf(where, sizeof where, "%s: line %u", r->name, line);
  int rc = check_row(where, v[0], v[1], v[2], cols[3] >= 0, v[3]);
  return rc ? rc : bench_push(b, cap, cols[3] >= 0, v[0], v[1], v[2], v[3]);
}

static int parse_csv(al_bench *b, const char *text, size_t len, const char *name) {
  csv_reader r = {.text = text, .name = name, .len = len, .line = 1};
  int cols[4], have_header = 0, rc;
  size_t ncols = 0, cap = 0;
  unsigned line = 0;
  while ((rc = csv_record(&r, &line)) == 1) {
    if (r.nf > MAX_COLS) {
      rc = al_set_error(AL_EFORMAT, "%s: line %u: more than %d columns", name, line, MAX_COLS);
      break;
    }
    if (!have_header) {
      if ((rc = csv_header(&r, line, cols))) break;
      ncols = r.nf;
      have_header = 1;
      if (cols[3] >= 0 && !(b->mem = malloc(sizeof(double)))) { /* marks has_mem */
        rc = al_set_error(AL_ENOMEM, "%s: out of memory", name);
        break;
      }
      continue;
    }
    if (r.nf != ncols) {
      rc = al_set_error(AL_EFORMAT, "%s: line %u: %zu fields, the header has %zu", name, line, r.nf,
                        ncols);
      break;
    }
    if ((rc = csv_row(&r, line, cols, b, &cap))) break;
  }
  free(r.buf);
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
