/* adaptiveload verify: the pre-flight check of a corpus before training. Every shard the
 * index relies on present and unchanged (loader/al_index.h: size, content fingerprint), every
 * sample holding the required members, the manifest planned from this index, what would be
 * skipped and why, and how much of each sample its bucket keeps (planner/fidelity_internal.h).
 * Every problem is reported, not only the first. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_internal.h"
#include "cli/options_internal.h"
#include "common/atomic_file_internal.h"
#include "common/clock_internal.h"
#include "common/json_write_internal.h"
#include "loader/al_index.h"
#include "planner/al_buckets.h"
#include "planner/al_manifest.h"
#include "planner/al_plan.h"
#include "planner/fidelity_internal.h"

/* Exit status when the check found problems (the check itself ran). */
#define AL_EXIT_PROBLEMS 3

#define MAX_ROOTS 16
#define MAX_MEMBERS 16
#define PROGRESS_EVERY_S 2.0

typedef enum vkind {
  VK_MISSING_SHARD,   /* cannot be opened or read */
  VK_CHANGED_SHARD,   /* other size (larger) or other content than indexed */
  VK_TRUNCATED_SHARD, /* shorter than indexed */
  VK_MISSING_MEMBER,  /* a sample without a required member */
  VK_MANIFEST,        /* the manifest does not load or was planned from another index */
  VK_COUNT
} vkind;

static const char *const KIND_NAME[VK_COUNT] = {"missing_shard", "changed_shard", "truncated_shard",
                                                "missing_member", "manifest"};

typedef struct vproblem {
  vkind kind;
  const char *shard; /* path (points into the index); NULL: none */
  const char *key;   /* sample key (points into the index); NULL: none */
  uint64_t lost;     /* samples it takes out of the epoch */
  char *message;
} vproblem;

/* Why a sample would not be streamed, as bits of verify_run.lost. */
enum { LOST_SHARD = 1, LOST_MEMBER = 2, LOST_PLAN = 4 };

/* What the plan did with a sample (verify_run.plan): 0 planned, 1..AL_REJECT_COUNT-1 rejected
 * for that al_reject_reason, PLAN_DROPPED dropped by the last-step policy, PLAN_CONSUMED
 * consumed before a re-planned manifest's first step. */
enum { PLAN_DROPPED = 16, PLAN_CONSUMED = 17 };

typedef struct verify_args {
  const char *index_path, *manifest_path;
  const char *roots[MAX_ROOTS]; /* --root FROM=TO */
  size_t n_roots;
  char members_buf[1024]; /* --members, split into members */
  const char *members[MAX_MEMBERS];
  size_t n_members;
  const char *buckets;
  uint64_t show, top;
  int json, quiet, strict;
} verify_args;

typedef struct verify_run {
  const verify_args *a;
  al_index *idx;
  al_manifest *m; /* NULL without one, or when it did not load or is of another index */
  const char *req[MAX_MEMBERS]; /* required members */
  size_t n_req;
  char req_default[AL_INDEX_EXT_MAX + 1];
  vproblem *p;
  size_t n_p, cap_p;
  uint64_t kind_n[VK_COUNT];
  uint64_t shards_checked;
  uint8_t *lost; /* per sample, LOST_* bits */
  uint8_t *plan; /* per sample, what the plan did */
  fid_report crop;
  const char *crop_from; /* "manifest", "bucket table", NULL: no report */
} verify_run;

/* ---- options ----------------------------------------------------------------------------- */

static int take_path(const cli_verb *verb, const char *arg, void *args) {
  (void)verb;
  verify_args *a = args;
  if (arg[0] == '-' || (a->index_path && a->manifest_path)) return CLI_BAD;
  if (!a->index_path)
    a->index_path = arg;
  else
    a->manifest_path = arg;
  return 0;
}

static int parse_members(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  verify_args *a = args;
  int bad = strlen(v) >= sizeof a->members_buf;
  if (!bad) strcpy(a->members_buf, v);
  a->n_members = 0;
  for (char *p = a->members_buf; !bad;) {
    char *c = strchr(p, ',');
    if (c) *c = 0;
    bad = !*p || a->n_members == MAX_MEMBERS;
    if (!bad) a->members[a->n_members++] = p;
    if (!c) break;
    p = c + 1;
  }
  if (bad)
    return cli_usage(verb, CLI_SAY_BLANK,
                     "bad --members '%s' (a comma list of at most %d member extensions, e.g. "
                     "latent.npy,t5.npy)",
                     v, MAX_MEMBERS);
  return 0;
}

static int parse_root(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  verify_args *a = args;
  const char *eq = strchr(v, '=');
  if (!eq || eq == v || !eq[1] || a->n_roots == MAX_ROOTS)
    return cli_usage(verb, CLI_SAY_BLANK, "bad --root '%s' (FROM=TO, at most %d)", v, MAX_ROOTS);
  a->roots[a->n_roots++] = v;
  return 0;
}

/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--members", .type = CLI_CUSTOM, .parse = parse_members, .metavar = "A,B,...",
     .help = "members every sample must hold (e.g. latent.npy,t5.npy; each\n"
             "also found as NAME.lz4); default: the index's typed latent\n"
             "member, else latent (what stream delivers by default)"},
    {.name = "--root", .type = CLI_CUSTOM, .parse = parse_root, .metavar = "FROM=TO",
     .help = "the corpus moved: shard paths under directory FROM are\n"
             "checked under TO (repeatable), as stream --root"},
    {.name = "--buckets", .type = CLI_STRING, CLI_AT(verify_args, buckets), .metavar = "FILE",
     .help = "bucket table: without MANIFEST, the crop under it (with the\n"
             "default geometry and M_mem); with one, the aspect group names\n"
             "of its buckets",
     .def = "the default table"},
    {.name = "--show", .type = CLI_U64, CLI_AT(verify_args, show), .max = 1000000,
     .metavar = "N", .help = "entries listed per kind of problem or skip (--json lists all)",
     .def = "10"},
    {.name = "--top", .type = CLI_U64, CLI_AT(verify_args, top), .max = 1000000, .metavar = "N",
     .help = "samples cut most, listed", .def = "10"},
    {.name = "--strict", .type = CLI_FLAG, CLI_AT(verify_args, strict), .set = 1,
     .help = "samples the index or the plan rejected are problems too"},
    {.name = "--json", .type = CLI_FLAG, CLI_AT(verify_args, json), .set = 1,
     .help = "one JSON object on stdout: counts, every problem, every\n"
             "skipped sample with its reason, the crop report"},
    {.name = "--quiet", .alias = "-q", .type = CLI_FLAG, CLI_AT(verify_args, quiet), .set = 1,
     .help = "no progress lines on stderr"},
    {.name = NULL},
};
/* clang-format on */

static const cli_verb VERIFY = {
    .name = "verify",
    .usage =
        "usage: adaptiveload verify INDEX [MANIFEST] [--members A,B,...] [--root FROM=TO]\n"
        "                           [--buckets FILE] [--show N] [--top N] [--strict] [--json]\n"
        "                           [--quiet]\n\n"
        "The check to run before launching a training job. It reports, in one run, every\n"
        "  missing_shard    a shard holding indexed samples cannot be opened or read\n"
        "  changed_shard    a shard's size or content fingerprint (the header blocks of its\n"
        "                   members; a compressed shard's first and last 64 KiB) differs\n"
        "                   from what was indexed\n"
        "  truncated_shard  a shard is shorter than indexed (the samples whose members end\n"
        "                   past its end are named)\n"
        "  missing_member   a sample lacks a required member (--members)\n"
        "  manifest         MANIFEST does not load or was planned from another index\n"
        "and what would be skipped and why: samples in damaged shards or missing members,\n"
        "entries the index rejected, samples the plan rejected or dropped. Then the crop:\n"
        "the fraction of each sample's native latent tokens its bucket keeps (the plan's\n"
        "bucket with MANIFEST, else the default bucket table's choice), by aspect group and\n"
        "duration band (image, <2s, 2-5s, 5-10s, >=10s, fps unknown), and the samples cut\n"
        "most. Payload bytes are not read: a change inside member data that keeps the size\n"
        "and the headers is not seen.\n\n",
    .options = OPTIONS,
    .epilogue =
        "exit status: 0 no problems, 3 problems found (listed), 1 the check could not\n"
        "run (the index does not load), 2 usage.\n",
    .positional = take_path,
    .say = CLI_SAY_PAGE,
    .missing = "%s needs a value (or is unknown)",
    .unknown = "unknown option '%s'",
    .stray = "%s unexpected (INDEX [MANIFEST])",
    .bad = "bad %s '%s'",
    .bad_say = CLI_SAY_BLANK,
};

/* ---- problems ---------------------------------------------------------------------------- */

static int add_problem(verify_run *r, vkind kind, const char *shard, const char *key, uint64_t lost,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int add_problem(verify_run *r, vkind kind, const char *shard, const char *key, uint64_t lost,
                       const char *fmt, ...) {
  if (r->n_p == r->cap_p) {
    size_t cap = r->cap_p ? 2 * r->cap_p : 64;
    vproblem *v = realloc(r->p, cap * sizeof *v);
    if (!v) return al_set_error(AL_ENOMEM, "verify: out of memory");
    r->p = v, r->cap_p = cap;
  }
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  vproblem *p = &r->p[r->n_p];
  p->kind = kind, p->shard = shard, p->key = key, p->lost = lost;
  if (!(p->message = strdup(buf))) return al_set_error(AL_ENOMEM, "verify: out of memory");
  r->n_p++;
  r->kind_n[kind]++;
  return AL_OK;
}

/* ---- shards ------------------------------------------------------------------------------ */

/* Whether the member ends of a seekable shard's samples pass `size`: the first such sample's
 * key, member and end into *key, *ext, *end; returns how many samples. */
static uint64_t past_end(const al_index *idx, uint32_t shard, uint64_t size, const char **key,
                         const char **ext, uint64_t *end) {
  uint64_t n = 0;
  size_t ns = al_index_sample_count(idx);
  for (size_t i = 0; i < ns; i++) {
    al_sample_info si;
    if (al_index_sample(idx, i, &si) || si.shard != shard) continue;
    for (uint32_t k = 0; k < si.n_members; k++) {
      al_member_info mi;
      if (al_index_member(idx, i, k, &mi) || mi.offset + mi.size <= size) continue;
      if (!n++) *key = si.key, *ext = mi.ext, *end = mi.offset + mi.size;
      break;
    }
  }
  return n;
}

/* A shard shorter than indexed. */
static int report_truncated(verify_run *r, uint32_t i, const al_shard_info *sh, uint64_t size) {
  const char *key = "", *ext = "";
  uint64_t end = 0, n = sh->seekable ? past_end(r->idx, i, size, &key, &ext, &end) : 0;
  if (!sh->seekable)
    return add_problem(r, VK_TRUNCATED_SHARD, sh->path, NULL, sh->sample_count,
                       "%s: truncated: %" PRIu64 " bytes, the index says %" PRIu64
                       " (compressed: all %" PRIu64 " samples lost)",
                       sh->path, size, sh->size, sh->sample_count);
  return add_problem(r, VK_TRUNCATED_SHARD, sh->path, n ? key : NULL, sh->sample_count,
                     "%s: truncated: %" PRIu64 " bytes, the index says %" PRIu64 "; %" PRIu64
                     " of its %" PRIu64
                     " samples have members past the end (first: key '%s' "
                     "member '%s' ends at byte %" PRIu64 "); the stream refuses all of them",
                     sh->path, size, sh->size, n, sh->sample_count, key, ext, end);
}

/* Shard i present and unchanged: size, then content fingerprint (or, for an index without
 * one, mtime), as the stream checks when it opens the shard. */
static int check_shard(verify_run *r, uint32_t i, const al_shard_info *sh) {
  int fd = -1;
  struct stat st;
  int rc = afile_open_input(sh->path, "shard", &fd);
  if (!rc && fstat(fd, &st) != 0)
    rc = al_set_error(AL_EIO, "%s: fstat: %s", sh->path, strerror(errno));
  if (rc) {
    if (fd >= 0) close(fd);
    return add_problem(r, VK_MISSING_SHARD, sh->path, NULL, sh->sample_count,
                       "%s (%" PRIu64 " samples lost)", al_last_error(), sh->sample_count);
  }
  uint64_t size = (uint64_t)st.st_size;
  int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
  if (size < sh->size) rc = report_truncated(r, i, sh, size);
  if (size > sh->size)
    rc = add_problem(r, VK_CHANGED_SHARD, sh->path, NULL, sh->sample_count,
                     "%s: shard changed since indexing: size is %" PRIu64
                     " bytes, the index says %" PRIu64 " (%" PRIu64 " samples lost)",
                     sh->path, size, sh->size, sh->sample_count);
  int v = size == sh->size ? al_index_shard_verify(r->idx, i, fd) : AL_OK;
  close(fd);
  if (v == AL_ENOTFOUND && sh->mtime_ns && mt != sh->mtime_ns)
    rc = add_problem(r, VK_CHANGED_SHARD, sh->path, NULL, sh->sample_count,
                     "%s: shard changed since indexing: mtime_ns is %" PRId64
                     ", the index says %" PRId64
                     " (an index from before content fingerprints: "
                     "index again) (%" PRIu64 " samples lost)",
                     sh->path, mt, sh->mtime_ns, sh->sample_count);
  else if (v != AL_OK && v != AL_ENOTFOUND)
    rc = add_problem(r, v == AL_EIO ? VK_MISSING_SHARD : VK_CHANGED_SHARD, sh->path, NULL,
                     sh->sample_count, "%s (%" PRIu64 " samples lost)", al_last_error(),
                     sh->sample_count);
  return rc;
}

/* Every shard holding indexed samples; a damaged one marks its samples lost. */
static int check_shards(verify_run *r) {
  size_t n = al_index_shard_count(r->idx);
  double t0 = clock_now_s(), last = t0;
  uint8_t *bad = calloc(n ? n : 1, 1);
  if (!bad) return al_set_error(AL_ENOMEM, "verify: out of memory");
  int rc = AL_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    al_shard_info sh;
    if ((rc = al_index_shard(r->idx, i, &sh)) || !sh.sample_count) continue;
    size_t before = r->n_p;
    rc = check_shard(r, (uint32_t)i, &sh);
    bad[i] = r->n_p > before;
    r->shards_checked++;
    if (!r->a->quiet && clock_now_s() - last >= PROGRESS_EVERY_S) {
      last = clock_now_s();
      fprintf(stderr, "verify: %zu of %zu shards checked, %zu problems (%.0f s)\n", i + 1, n,
              r->n_p, last - t0);
    }
  }
  size_t ns = al_index_sample_count(r->idx);
  for (size_t i = 0; i < ns && !rc; i++) {
    al_sample_info si;
    if (!(rc = al_index_sample(r->idx, i, &si)) && si.shard < n && bad[si.shard])
      r->lost[i] |= LOST_SHARD;
  }
  free(bad);
  return rc;
}

/* ---- members ----------------------------------------------------------------------------- */

/* The first of the `n` required members sample i lacks (neither NAME nor NAME.lz4), or NULL.
 * A small function on purpose: the one place that says what "holding the members" means. */
static const char *sample_missing_member(const al_index *idx, size_t i, const char *const *names,
                                         size_t n) {
  for (size_t k = 0; k < n; k++) {
    al_member_info mi;
    if (al_index_find_member(idx, i, names[k], &mi) == AL_ENOTFOUND) return names[k];
  }
  return NULL;
}

/* The required members: --members, else the index's typed latent member, else "latent". */
static void required_members(verify_run *r) {
  if (r->a->n_members) {
    memcpy(r->req, r->a->members, r->a->n_members * sizeof *r->req);
    r->n_req = r->a->n_members;
    return;
  }
  snprintf(r->req_default, sizeof r->req_default, "latent");
  size_t ns = al_index_sample_count(r->idx), m;
  uint32_t t, h, w;
  for (size_t i = 0; i < ns; i++) {
    al_member_info mi;
    if (al_index_latent_grid(r->idx, i, &t, &h, &w, &m) == AL_OK &&
        al_index_member(r->idx, i, m, &mi) == AL_OK) {
      /* "latent.npy.lz4" is found as "latent.npy" too */
      size_t len = strlen(mi.ext);
      if (mi.lz4 && len > 4 && !strcmp(mi.ext + len - 4, ".lz4")) len -= 4;
      snprintf(r->req_default, sizeof r->req_default, "%.*s", (int)len, mi.ext);
      break;
    }
  }
  r->req[0] = r->req_default;
  r->n_req = 1;
}

static int check_members(verify_run *r) {
  required_members(r);
  size_t ns = al_index_sample_count(r->idx);
  for (size_t i = 0; i < ns; i++) {
    const char *miss = sample_missing_member(r->idx, i, r->req, r->n_req);
    if (!miss) continue;
    al_sample_info si;
    al_shard_info sh;
    int rc = al_index_sample(r->idx, i, &si);
    if (!rc) rc = al_index_shard(r->idx, si.shard, &sh);
    char has[512] = "";
    size_t len = 0;
    for (uint32_t k = 0; !rc && k < si.n_members && len < sizeof has; k++) {
      al_member_info mi;
      if (al_index_member(r->idx, i, k, &mi) == AL_OK)
        len += (size_t)snprintf(has + len, sizeof has - len, "%s%s", k ? ", " : "", mi.ext);
    }
    if (!rc)
      rc = add_problem(r, VK_MISSING_MEMBER, sh.path, si.key, 1,
                       "key '%s' in %s: no member '%s.%s' (nor '.%s.lz4'); the sample has: %s",
                       si.key, sh.path, si.key, miss, miss, has);
    if (rc) return rc;
    r->lost[i] |= LOST_MEMBER;
  }
  return AL_OK;
}

/* ---- the plan and the crop --------------------------------------------------------------- */

/* MANIFEST loaded and of this index, else a problem (and r->m stays NULL). */
static int check_manifest(verify_run *r) {
  const char *path = r->a->manifest_path;
  al_manifest *m = NULL;
  if (al_manifest_load(&m, path) != AL_OK) {
    al_manifest_free(m);
    return add_problem(r, VK_MANIFEST, NULL, NULL, 0, "%s", al_last_error());
  }
  al_manifest_info in;
  int rc = al_manifest_get_info(m, &in);
  uint64_t fp = al_index_fingerprint(r->idx);
  if (!rc && (in.index_fingerprint != fp || in.index_samples != al_index_sample_count(r->idx))) {
    rc = add_problem(r, VK_MANIFEST, NULL, NULL, 0,
                     "%s was planned from another index (fingerprint %016" PRIx64 ", %" PRIu64
                     " samples; %s has %016" PRIx64 ", %zu samples): plan it again",
                     path, in.index_fingerprint, in.index_samples, r->a->index_path, fp,
                     al_index_sample_count(r->idx));
    al_manifest_free(m);
    return rc;
  }
  r->m = m;
  return rc;
}

/* What the plan does with every sample (the manifest's key status, else the bucket table's
 * assignment), and the crop report. */
static int check_plan(verify_run *r, const al_bucket_table *table) {
  size_t ns = al_index_sample_count(r->idx);
  int rc = AL_OK;
  al_latent_geom g = al_latent_geom_resolve(NULL);
  for (size_t i = 0; i < ns && !rc; i++) {
    int st = 0;
    if (r->m) {
      st = al_manifest_key_status(r->m, i);
    } else {
      al_sample_info si;
      al_latent_grid grid;
      uint32_t b;
      al_reject_reason why = AL_REJECT_NONE;
      rc = al_index_sample(r->idx, i, &si);
      int has = al_index_latent_grid(r->idx, i, &grid.t, &grid.h, &grid.w, NULL) == AL_OK;
      if (!rc && al_bucket_assign_grid(table, &g, AL_PLAN_DEFAULT_MEM_TOKENS, si.width, si.height,
                                       si.frames, has ? &grid : NULL, &b, &why))
        st = (int)why;
    }
    r->plan[i] = (uint8_t)(st < 0 ? 0 : st);
    if (r->plan[i] && r->plan[i] != PLAN_CONSUMED) r->lost[i] |= LOST_PLAN;
  }
  if (rc) return rc;
  r->crop_from = r->m ? "manifest" : "bucket table";
  if (r->m) return fidelity_from_manifest(&r->crop, r->idx, r->m, table, (size_t)r->a->top);
  return fidelity_from_table(&r->crop, r->idx, table, &g, 0, (size_t)r->a->top);
}

static const char *plan_reason(int st) {
  if (st > 0 && st < AL_REJECT_COUNT) return al_reject_reason_name((al_reject_reason)st);
  return st == PLAN_DROPPED ? "dropped by the last-step policy" : NULL;
}

/* ---- the report -------------------------------------------------------------------------- */

typedef struct verify_counts {
  uint64_t lost, lost_shard, lost_member, lost_plan, problems;
  uint64_t plan[PLAN_CONSUMED + 1];
} verify_counts;

static void count(const verify_run *r, verify_counts *c) {
  memset(c, 0, sizeof *c);
  size_t ns = al_index_sample_count(r->idx);
  for (size_t i = 0; i < ns; i++) {
    c->lost += r->lost[i] != 0;
    c->lost_shard += (r->lost[i] & LOST_SHARD) != 0;
    c->lost_member += (r->lost[i] & LOST_MEMBER) != 0;
    c->lost_plan += (r->lost[i] & LOST_PLAN) != 0;
    if (r->plan[i] <= PLAN_CONSUMED) c->plan[r->plan[i]]++;
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
    al_sample_info si;
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
         " in damaged shards, %" PRIu64 " missing a member, %" PRIu64
         " rejected or dropped by the %s; the index rejected %zu entries\n",
         c->lost, ns, c->lost_shard, c->lost_member, c->lost_plan,
         r->m ? "plan" : "default bucket table", nr);
  for (size_t i = 0; i < nr && i < r->a->show; i++) {
    al_rejected_info e;
    al_shard_info sh;
    if (al_index_rejected(r->idx, i, &e) || al_index_shard(r->idx, e.shard, &sh)) continue;
    printf("  index rejected: %s: member '%s' at byte %" PRIu64 ": %s\n", sh.path, e.member,
           e.offset, e.reason);
  }
  if (nr > r->a->show)
    printf("  ... %zu more rejected entries (--json lists all)\n", nr - r->a->show);
  uint64_t shown = 0;
  for (size_t i = 0; i < ns; i++) {
    const char *why = plan_reason(r->plan[i]);
    al_sample_info si;
    if (!why || shown++ >= r->a->show || al_index_sample(r->idx, i, &si)) continue;
    printf("  %s: %s: %s\n", r->m ? "plan" : "buckets", si.key, why);
  }
  if (shown > r->a->show)
    printf("  ... %" PRIu64 " more skipped by the plan (--json lists all)\n", shown - r->a->show);
}

static void print_text(const verify_run *r, const verify_counts *c) {
  printf("verify %s: %zu shards (%" PRIu64
         " holding samples checked), %zu samples; members "
         "required:",
         r->a->index_path, al_index_shard_count(r->idx), r->shards_checked,
         al_index_sample_count(r->idx));
  for (size_t k = 0; k < r->n_req; k++) printf("%s%s", k ? "," : " ", r->req[k]);
  if (r->a->manifest_path)
    printf("; manifest %s%s", r->a->manifest_path, r->m ? "" : " (not used)");
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
    al_rejected_info e;
    al_shard_info sh;
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
    al_sample_info si;
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
    al_sample_info si;
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

static void print_json(const verify_run *r, const verify_counts *c) {
  printf("{\"index\":");
  jsonw_string(stdout, r->a->index_path);
  printf(",\"manifest\":");
  if (r->a->manifest_path)
    jsonw_string(stdout, r->a->manifest_path);
  else
    printf("null");
  printf(",\"manifest_used\":%s,\"index_fingerprint\":\"%016" PRIx64
         "\",\"shards\":%zu"
         ",\"shards_checked\":%" PRIu64 ",\"samples\":%zu,\"members\":[",
         r->m ? "true" : "false", al_index_fingerprint(r->idx), al_index_shard_count(r->idx),
         r->shards_checked, al_index_sample_count(r->idx));
  for (size_t k = 0; k < r->n_req; k++) {
    if (k) putchar(',');
    jsonw_string(stdout, r->req[k]);
  }
  printf("],\"ok\":%s,\"problem_count\":%" PRIu64 ",\"strict\":%s", c->problems ? "false" : "true",
         c->problems, r->a->strict ? "true" : "false");
  print_problems_json(r);
  print_skipped_json(r, c);
  if (r->crop_from) print_crop_json(r);
  printf("}\n");
}

/* ---- the verb ---------------------------------------------------------------------------- */

/* Loads the index and moves its shard paths by --root: 0 or -1 (al_last_error). */
static int load_index(const verify_args *a, al_index **idx) {
  if (al_index_load(idx, a->index_path) != AL_OK) return -1;
  for (size_t k = 0; k < a->n_roots; k++) {
    const char *eq = strchr(a->roots[k], '=');
    char from[4096];
    size_t moved = 0;
    snprintf(from, sizeof from, "%.*s", (int)(eq - a->roots[k]), a->roots[k]);
    if (al_index_remap_root(*idx, from, eq + 1, &moved) != AL_OK) return -1;
    if (!a->quiet)
      fprintf(stderr, "verify: %zu shard paths moved from %s to %s\n", moved, from, eq + 1);
  }
  return 0;
}

/* Every check, in order; a defect found is listed and the checks go on. */
static int run_checks(verify_run *r) {
  size_t ns = al_index_sample_count(r->idx);
  r->lost = calloc(ns ? ns : 1, 1);
  r->plan = calloc(ns ? ns : 1, 1);
  if (!r->lost || !r->plan) return al_set_error(AL_ENOMEM, "verify: out of memory");
  al_bucket_table *table = NULL;
  int rc = r->a->buckets ? al_bucket_table_load(&table, r->a->buckets)
                         : al_bucket_table_default(&table);
  if (!rc) rc = check_shards(r);
  if (!rc) rc = check_members(r);
  if (!rc && r->a->manifest_path) rc = check_manifest(r);
  if (!rc && (r->m || !r->a->manifest_path)) rc = check_plan(r, table);
  al_bucket_table_free(table);
  return rc;
}

int cli_cmd_verify(int argc, char **argv) {
  verify_args a;
  memset(&a, 0, sizeof a);
  a.show = a.top = 10;
  int ec = cli_parse(&VERIFY, argc, argv, &a);
  if (ec != CLI_RUN) return ec;
  if (!a.index_path) return cli_usage(&VERIFY, CLI_SAY_PAGE, "INDEX is required");
  verify_run r;
  memset(&r, 0, sizeof r);
  r.a = &a;
  if (load_index(&a, &r.idx) || run_checks(&r)) {
    ec = cli_fail("verify");
  } else {
    verify_counts c;
    count(&r, &c);
    if (a.json)
      print_json(&r, &c);
    else
      print_text(&r, &c);
    ec = c.problems ? AL_EXIT_PROBLEMS : AL_EXIT_OK;
  }
  for (size_t i = 0; i < r.n_p; i++) free(r.p[i].message);
  free(r.p);
  free(r.lost);
  free(r.plan);
  fidelity_free(&r.crop);
  al_manifest_free(r.m);
  al_index_free(r.idx);
  return ec;
}
