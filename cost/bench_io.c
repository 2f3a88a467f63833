/* Reading a shape benchmark: CSV (header row, any column order) or the JSON
 * form of cost/data/h200_dit_block_cost.json. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/grow_internal.h"
#include "common/struct_abi_internal.h"
#include "cost/al_cost.h"
#include "cost/cost_internal.h"
#include "common/text_read_internal.h"

#define BENCH_MAX_BYTES (64u << 20)
#define MAX_COLS 64

int bench_out_size(const al_bench *caller, const char *fn, size_t *n) {
  return struct_out_size(caller, sizeof(al_bench), AL_BENCH_V1, fn, "al_bench", n);
}

void bench_out(al_bench *caller, al_bench *b, size_t n) {
  static const size_t arrays[] = {offsetof(al_bench, B), offsetof(al_bench, S),
                                  offsetof(al_bench, ms), offsetof(al_bench, mem),
                                  offsetof(al_bench, d)};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
    if (arrays[i] + sizeof(double *) <= n) continue;
    double **a = (double **)(void *)((char *)b + arrays[i]);
    free(*a);
    *a = NULL;
  }
  memcpy((char *)caller + sizeof(size_t), (char *)b + sizeof(size_t), n - sizeof(size_t));
}

void al_bench_free(al_bench *caller) {
  if (!caller) return;
  /* Read by the size rule: a size this library cannot read leaves it unknown where the arrays
   * lie, so nothing is freed. */
  al_bench local;
  if (struct_in(&local, sizeof local, AL_BENCH_V1, caller, "al_bench_free", "al_bench")) return;
  al_bench *b = &local;
  free(b->B);
  free(b->S);
  free(b->ms);
  free(b->mem);
  free(b->d);
  b->B = b->S = b->ms = b->mem = b->d = NULL;
  b->n = 0;
  bench_out(caller, b, caller->struct_size ? caller->struct_size : sizeof local);
}

/* One row: v = B, S, ms, mem, d (mem and d stored only when the input has them). */
static int bench_push(al_bench *b, size_t *cap, int has_mem, int has_d, const double v[5]) {
  if (b->n == *cap) {
    const char *what = "benchmark rows";
    size_t nc;
    int rc = grow_capacity(*cap, b->n + 1, sizeof(double), what, &nc);
    if (!rc) rc = grow_resize((void **)&b->B, nc, sizeof *b->B, what);
    if (!rc) rc = grow_resize((void **)&b->S, nc, sizeof *b->S, what);
    if (!rc) rc = grow_resize((void **)&b->ms, nc, sizeof *b->ms, what);
    if (!rc && has_mem) rc = grow_resize((void **)&b->mem, nc, sizeof *b->mem, what);
    if (!rc && has_d) rc = grow_resize((void **)&b->d, nc, sizeof *b->d, what);
    if (rc) return rc;
    *cap = nc;
  }
  b->B[b->n] = v[0];
  b->S[b->n] = v[1];
  b->ms[b->n] = v[2];
  if (has_mem) b->mem[b->n] = v[3];
  if (has_d) b->d[b->n] = v[4];
  b->n++;
  return AL_OK;
}

/* The SP degree of a row: 1..1024, a power of two. */
static int check_degree(const char *where, double d) {
  if (!(d >= 1 && d <= 1024 && d == floor(d)) || ((uint32_t)d & ((uint32_t)d - 1)))
    return al_set_error(AL_EFORMAT, "%s: d = %g must be a power of two in [1, 1024]", where, d);
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

/* The header record: which field holds B, S, step_ms, peak_mem_bytes and d (-1: none). */
#define CSV_KEYS 5
static int csv_header(const csv_reader *r, unsigned line, int cols[CSV_KEYS]) {
  for (int k = 0; k < CSV_KEYS; k++) cols[k] = -1;
  for (size_t i = 0; i < r->nf; i++) {
    const char *h = csv_at(r, (int)i);
    int k = !strcasecmp(h, "B") || !strcasecmp(h, "batch")       ? 0
            : !strcasecmp(h, "S") || !strcasecmp(h, "tokens")    ? 1
            : !strcasecmp(h, "step_ms") || !strcasecmp(h, "ms")  ? 2
            : !strcasecmp(h, "peak_mem_bytes")                   ? 3
            : !strcasecmp(h, "d") || !strcasecmp(h, "sp_degree") ? 4
                                                                 : -1;
    if (k >= 0 && cols[k] >= 0)
      return al_set_error(AL_EFORMAT, "%s: line %u (header): column '%s' given twice", r->name,
                          line, h);
    if (k >= 0) cols[k] = (int)i;
  }
  const char *missing = cols[0] < 0 ? "B" : cols[1] < 0 ? "S" : cols[2] < 0 ? "step_ms" : NULL;
  if (missing)
    return al_set_error(AL_EFORMAT,
                        "%s: line %u (header): missing column '%s' (need B, S, step_ms; optional peak_mem_bytes, d)",
                        r->name, line, missing);
  return AL_OK;
}

/* One data record: its numbers, checked, appended to b. */
static int csv_row(const csv_reader *r, unsigned line, const int cols[CSV_KEYS], al_bench *b,
                   size_t *cap) {
  static const char *const names[CSV_KEYS] = {"B", "S", "step_ms", "peak_mem_bytes", "d"};
  double v[CSV_KEYS] = {0, 0, 0, 0, 1};
  for (int k = 0; k < CSV_KEYS; k++) {
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
  if (!rc && cols[4] >= 0) {
    snprintf(where, sizeof where, "%s: line %u column %d", r->name, line, cols[4] + 1);
    rc = check_degree(where, v[4]);
  }
  return rc ? rc : bench_push(b, cap, cols[3] >= 0, cols[4] >= 0, v);
}

/* The metadata comment "# shape_bench: key=value key="a value" ..." (examples/shape_bench.py):
 * hidden, layers and dtype_bytes (numbers > 0, else an error naming the line), device and
 * measured. Other keys are ignored; so are other comment lines. */
static int csv_metadata(al_bench *b, const char *line, size_t len, const char *name,
                        unsigned lineno) {
  static const char tag[] = "shape_bench:";
  size_t p = 0;
  while (p < len && (line[p] == '#' || csv_blank(line[p]))) p++;
  if (len - p < sizeof tag - 1 || memcmp(line + p, tag, sizeof tag - 1)) return AL_OK;
  p += sizeof tag - 1;
  while (p < len) {
    while (p < len && csv_blank(line[p])) p++;
    size_t k0 = p;
    while (p < len && line[p] != '=' && !csv_blank(line[p])) p++;
    size_t k1 = p, v0, v1;
    if (p >= len || line[p] != '=') continue;
    p++;
    if (p < len && line[p] == '"') {
      v0 = ++p;
      while (p < len && line[p] != '"') p++;
      v1 = p;
      if (p < len) p++;
    } else {
      v0 = p;
      while (p < len && !csv_blank(line[p])) p++;
      v1 = p;
    }
    char key[32], val[128];
    snprintf(key, sizeof key, "%.*s", (int)(k1 - k0), line + k0);
    snprintf(val, sizeof val, "%.*s", (int)(v1 - v0), line + v0);
    double *num = !strcmp(key, "hidden")        ? &b->hidden
                  : !strcmp(key, "layers")      ? &b->layers
                  : !strcmp(key, "dtype_bytes") ? &b->dtype_bytes
                                                : NULL;
    if (num) {
      char *end;
      errno = 0;
      *num = strtod(val, &end);
      if (!*val || *end || errno || !isfinite(*num) || !(*num > 0))
        return al_set_error(AL_EFORMAT,
                            "%s: line %u (shape_bench metadata): %s = '%s' must be a number > 0",
                            name, lineno, key, val);
    } else if (!strcmp(key, "device")) {
      snprintf(b->device, sizeof b->device, "%.*s", (int)sizeof b->device - 1, val);
    } else if (!strcmp(key, "measured")) {
      snprintf(b->measured, sizeof b->measured, "%.*s", (int)sizeof b->measured - 1, val);
    }
  }
  return AL_OK;
}

/* The metadata comment lines before the header (csv_metadata). */
static int csv_comments(al_bench *b, const char *text, size_t len, const char *name) {
  size_t p = 0;
  unsigned line = 1;
  while (p < len) {
    size_t e = p;
    while (e < len && text[e] != '\n') e++;
    size_t q = p;
    while (q < e && csv_blank(text[q])) q++;
    if (q < e && text[q] != '#') break; /* the header */
    int rc = q < e ? csv_metadata(b, text + q, e - q, name, line) : AL_OK;
    if (rc) return rc;
    p = e + 1;
    line++;
  }
  return AL_OK;
}

static int parse_csv(al_bench *b, const char *text, size_t len, const char *name) {
  int rc = csv_comments(b, text, len, name);
  if (rc) return rc;
  csv_reader r = {.text = text, .name = name, .len = len, .line = 1};
  int cols[CSV_KEYS], have_header = 0;
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
      if ((cols[3] >= 0 && !(b->mem = malloc(sizeof(double)))) || /* marks has_mem */
          (cols[4] >= 0 && !(b->d = malloc(sizeof(double))))) {   /* marks has_d */
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
  int rc = text_json_parse(text, len, name, &root);
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
  static const char *const shape_keys[3] = {"hidden", "layers", "dtype_bytes"};
  double *shape[3] = {&b->hidden, &b->layers, &b->dtype_bytes};
  for (int k = 0; k < 3; k++) {
    int r = text_json_num(root, shape_keys[k], NULL, shape[k]);
    if (r < 0 || (r == 0 && !(*shape[k] > 0))) {
      rc = al_set_error(AL_EFORMAT, "%s: \"%s\" must be a number > 0", name, shape_keys[k]);
      goto cleanup;
    }
    if (r > 0) *shape[k] = 0;
  }
  size_t cap = 0, i;
  int has_mem = -1, has_d = -1;
  json_t *row;
  json_array_foreach(rows, i, row) {
    char where[600];
    snprintf(where, sizeof where, "%s: rows[%zu]", name, i);
    double v[5] = {0, 0, 0, 0, 1};
    static const char *const keys[5] = {"B", "S", "ms", "peak_mem_bytes", "d"};
    for (int k = 0; k < 5; k++) {
      int r = text_json_num(row, keys[k], k == 2 ? "step_ms" : k == 4 ? "sp_degree" : NULL, &v[k]);
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
      if (k == 4) {
        int hd = r == 0;
        if (has_d < 0) {
          has_d = hd;
          if (hd && !(b->d = malloc(sizeof(double)))) {
            rc = al_set_error(AL_ENOMEM, "%s: out of memory", name);
            goto cleanup;
          }
        } else if (has_d != hd) {
          rc = al_set_error(AL_EFORMAT, "%s: \"d\" must be given on every row or none", where);
          goto cleanup;
        }
        if (hd && (rc = check_degree(where, v[4]))) goto cleanup;
      }
    }
    if ((rc = check_row(where, v[0], v[1], v[2], has_mem == 1, v[3]))) goto cleanup;
    if ((rc = bench_push(b, &cap, has_mem == 1, has_d == 1, v))) goto cleanup;
  }
cleanup:
  json_decref(root);
  return rc;
}

int al_bench_parse(al_bench *caller, const char *text, size_t len, const char *name) {
  if (!caller || (!text && len)) return al_set_error(AL_EINVAL, "al_bench_parse: NULL argument");
  size_t n_out;
  int rc = bench_out_size(caller, "al_bench_parse", &n_out);
  if (rc) return rc;
  al_bench local = AL_BENCH_INIT, *out = &local;
  if (!name) name = "benchmark";
  snprintf(out->source, sizeof out->source, "%s", name);
  rc = text_is_json(text, len) ? parse_json(out, text, len, name) : parse_csv(out, text, len, name);
  if (!rc && out->n < AL_BENCH_MIN_ROWS)
    rc = al_set_error(AL_EINVAL, "%s: too few rows: %zu (need at least %d)", name, out->n,
                      AL_BENCH_MIN_ROWS);
  if (rc) al_bench_free(out);
  bench_out(caller, out, n_out);
  return rc;
}

int al_bench_load(al_bench *caller, const char *path) {
  if (!caller || !path) return al_set_error(AL_EINVAL, "al_bench_load: NULL argument");
  size_t n_out;
  int rc = bench_out_size(caller, "al_bench_load", &n_out);
  if (rc) return rc;
  al_bench out = AL_BENCH_INIT;
  char *buf;
  size_t n;
  rc = text_read_file(path, BENCH_MAX_BYTES, "benchmark", &buf, &n);
  if (!rc) {
    rc = al_bench_parse(&out, buf, n, path);
    free(buf);
  }
  bench_out(caller, &out, n_out);
  return rc;
}
