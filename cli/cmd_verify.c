/* adaptiveload verify: the pre-flight check of a corpus before training. Every shard the
 * index relies on present and unchanged (loader/al_index.h: size, content fingerprint), every
 * sample holding the required members, the manifest planned from this index, what would be
 * skipped and why, and how much of each sample its bucket keeps (manifest/fidelity_internal.h).
 * Every problem is reported, not only the first. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_internal.h"
#include "cli/options_internal.h"
#include "cli/verify_internal.h"
#include "cli/verify_shards_internal.h"
#include "common/json_write_internal.h"
#include "manifest/al_mixture.h"
#include "loader/al_index.h"
#include "loader/al_members.h"
#include "planner/al_buckets.h"
#include "manifest/al_manifest.h"
#include "planner/al_plan.h"
#include "manifest/fidelity_internal.h"

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
  if (cli_split_list(v, a->members_buf, sizeof a->members_buf, a->members, VERIFY_MAX_MEMBERS,
                     &a->n_members))
    return cli_usage(verb, CLI_SAY_BLANK,
                     "bad --members '%s' (a comma list of at most %d member extensions, e.g. "
                     "latent.npy,t5.npy)",
                     v, VERIFY_MAX_MEMBERS);
  return 0;
}

static int parse_root(const cli_verb *verb, const char *opt, const char *v, void *args) {
  (void)opt;
  verify_args *a = args;
  return cli_parse_root(verb, v, a->roots, &a->n_roots, VERIFY_MAX_ROOTS);
}

/* clang-format off */
static const cli_option OPTIONS[] = {
    {.name = "--members", .type = CLI_CUSTOM, .parse = parse_members, .metavar = "A,B,...",
     .help = "members every sample must hold (e.g. latent.npy,t5.npy; each\n"
             "also found as NAME.lz4); default: the index's typed latent\n"
             "member, else latent (what stream delivers by default)"},
    {.name = "--mixture", .type = CLI_STRING, CLI_AT(verify_args, mixture_path),
     .metavar = "MIX.json",
     .help = "check every source of a mixture: each source's index as INDEX\n"
             "would be (then the one positional argument is MANIFEST, the\n"
             "mixture's plan: each source checked against its entry, the\n"
             "plan's verdict on each of its samples); the crop under\n"
             "--buckets"},
    {.name = "--root", .type = CLI_CUSTOM, .parse = parse_root, .metavar = "FROM=TO",
     .help = "the corpus moved: shard paths under directory FROM are\n"
             "checked under TO (repeatable), as stream --root"},
    {.name = "--buckets", .type = CLI_STRING, CLI_AT(verify_args, buckets), .metavar = "FILE",
     .help = "bucket table: without MANIFEST, the crop under it (with the\n"
             "default geometry and M_mem); with one, the aspect group names\n"
             "of its buckets (default: the default table)"},
    {.name = "--show", .type = CLI_U64, CLI_AT(verify_args, show), .max = 1000000,
     .metavar = "N", .help = "entries listed per kind of problem or skip (--json lists all)",
     .def = "10"},
    {.name = "--top", .type = CLI_U64, CLI_AT(verify_args, top), .max = 1000000, .metavar = "N",
     .help = "samples cut most, listed", .def = "10"},
    {.name = "--threads", .type = CLI_U64, CLI_AT(verify_args, threads), .min = 1, .max = 64,
     .metavar = "T", .help = "shards looked at in parallel", .def = "min(4, cores)"},
    {.name = "--strict", .type = CLI_FLAG, CLI_AT(verify_args, strict), .set = 1,
     .help = "samples the index or the plan rejected are problems too"},
    {.name = "--json", .type = CLI_FLAG, CLI_AT(verify_args, json), .set = 1,
     .help = "one JSON object on stdout: counts, every problem, every\n"
             "skipped sample with its reason, the crop report"},
    {.name = "--quiet", .alias = "-q", .type = CLI_FLAG, CLI_AT(verify_args, quiet), .set = 1,
     .help = "no progress lines on stderr"},
    CLI_STORAGE_OPTIONS(verify_args, storage),
    {.name = NULL},
};
/* clang-format on */

static const cli_verb VERIFY = {
    .name = "verify",
    .usage =
        "usage: adaptiveload verify INDEX [MANIFEST] [--members A,B,...] [--root FROM=TO]\n"
        "       adaptiveload verify --mixture MIX.json [MANIFEST] [options]\n"
        "                           [--buckets FILE] [--show N] [--top N] [--threads T]\n"
        "                           [--strict] [--json] [--quiet] [--s3-endpoint URL]\n"
        "                           [--s3-region REGION] [--s3-addressing path|virtual]\n"
        "                           [--remote-timeout S]\n\n"
        "The check to run before launching a training job, for shards on disk or at URLs\n"
        "(http(s)://, s3://: read through the stream's remote layer, payloads never\n"
        "fetched). It reports, in one run, every\n"
        "  missing_shard    a shard holding indexed samples cannot be opened or read\n"
        "  changed_shard    a shard's size, ETag (a URL) or content fingerprint (the header\n"
        "                   blocks of its members; a compressed shard's first and last\n"
        "                   64 KiB) differs from what was indexed\n"
        "  truncated_shard  a shard is shorter than indexed (the samples whose members end\n"
        "                   past its end are named)\n"
        "  missing_member   a sample lacks a required member (--members)\n"
        "  bad_header       a typed member's header (.npy, .safetensors) does not say the\n"
        "                   dtype and shape the index recorded, or does not fit the member's\n"
        "                   size (typed members stored as LZ4 frames or in compressed shards\n"
        "                   are not read here; the stream checks them)\n"
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

/* A shard shorter than indexed, and its samples whose members end past its end. */
typedef struct vtrunc {
  uint32_t shard;
  uint64_t size;   /* bytes now */
  uint64_t n;      /* samples with a member past the end */
  const char *key; /* the first of them */
  const char *ext; /* its first member past the end */
  uint64_t end;    /* where that member ends */
} vtrunc;

/* Counts sample i into t when one of its members ends past the shard's end. */
static void truncated_sample(const al_index *idx, size_t i, const al_sample_info *si, vtrunc *t) {
  for (uint32_t k = 0; k < si->n_members; k++) {
    al_member_info mi;
    if (al_index_member(idx, i, k, &mi) || mi.offset + mi.size <= t->size) continue;
    if (!t->n++) t->key = si->key, t->ext = mi.ext, t->end = mi.offset + mi.size;
    return;
  }
}

static int report_truncated(verify_run *r, const vtrunc *t) {
  al_shard_info sh = AL_SHARD_INFO_INIT;
  int rc = al_index_shard(r->idx, t->shard, &sh);
  if (rc) return rc;
  if (!sh.seekable)
    return add_problem(r, VK_TRUNCATED_SHARD, sh.path, NULL, sh.sample_count,
                       "%s: truncated: %" PRIu64 " bytes, the index says %" PRIu64
                       " (compressed: all %" PRIu64 " samples lost)",
                       sh.path, t->size, sh.size, sh.sample_count);
  return add_problem(r, VK_TRUNCATED_SHARD, sh.path, t->n ? t->key : NULL, sh.sample_count,
                     "%s: truncated: %" PRIu64 " bytes, the index says %" PRIu64 "; %" PRIu64
                     " of its %" PRIu64
                     " samples have members past the end (first: key '%s' "
                     "member '%s' ends at byte %" PRIu64 "); the stream refuses all of them",
                     sh.path, t->size, sh.size, t->n, sh.sample_count, t->n ? t->key : "",
                     t->n ? t->ext : "", t->end);
}

/* What the look at a shard found, as problems: present (opened), then unchanged by size and
 * content fingerprint (or, for an index without one, mtime), as the stream checks them. A
 * shorter shard is the caller's (report_truncated). */
static int report_shard(verify_run *r, const al_shard_info *sh, const al_shard_check *v) {
  const char *err = v->error ? v->error : "(message lost: out of memory)";
  uint64_t lost = sh->sample_count;
  if (v->open_rc)
    return add_problem(r, VK_MISSING_SHARD, sh->path, NULL, lost, "%s (%" PRIu64 " samples lost)",
                       err, lost);
  if (v->size > sh->size)
    return add_problem(r, VK_CHANGED_SHARD, sh->path, NULL, lost,
                       "%s: shard changed since indexing: size is %" PRIu64
                       " bytes, the index says %" PRIu64 " (%" PRIu64 " samples lost)",
                       sh->path, v->size, sh->size, lost);
  if (v->verify_rc == AL_ENOTFOUND && sh->mtime_ns && v->mtime_ns != sh->mtime_ns)
    return add_problem(r, VK_CHANGED_SHARD, sh->path, NULL, lost,
                       "%s: shard changed since indexing: mtime_ns is %" PRId64
                       ", the index says %" PRId64
                       " (an index from before content "
                       "fingerprints: index again) (%" PRIu64 " samples lost)",
                       sh->path, v->mtime_ns, sh->mtime_ns, lost);
  if (v->verify_rc && v->verify_rc != AL_ENOTFOUND)
    return add_problem(r, v->verify_rc == AL_EIO ? VK_MISSING_SHARD : VK_CHANGED_SHARD, sh->path,
                       NULL, lost, "%s (%" PRIu64 " samples lost)", err, lost);
  return AL_OK;
}

/* The typed members of a shard whose headers disagree, one problem each; their samples lost
 * (as the stream skips or fails a sample whose member it cannot read). */
static int report_headers(verify_run *r, const al_shard_info *sh, const verify_shard *v) {
  for (size_t k = 0; k < v->n_bad; k++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    int rc = al_index_sample(r->idx, v->bad[k].sample, &si);
    if (rc) return rc;
    rc = add_problem(r, VK_BAD_HEADER, sh->path, si.key, 1, "%s",
                     v->bad[k].why ? v->bad[k].why : "(message lost: out of memory)");
    if (rc) return rc;
    r->lost[v->bad[k].sample] |= LOST_MEMBER;
  }
  if (v->c.typed_bad > v->n_bad)
    return add_problem(r, VK_BAD_HEADER, sh->path, NULL, v->c.typed_bad - v->n_bad,
                       "%s: %" PRIu64
                       " more typed members with bad headers (messages lost: out of "
                       "memory)",
                       sh->path, v->c.typed_bad - v->n_bad);
  return AL_OK;
}

/* The samples of damaged shards marked lost; those of truncated shards counted into their
 * vtrunc. `trunc_of[shard]`: 1 + its position in `t`, 0 when not truncated. */
static int mark_lost(verify_run *r, const uint8_t *bad, const uint32_t *trunc_of, vtrunc *t) {
  size_t ns = al_index_sample_count(r->idx), n = al_index_shard_count(r->idx);
  for (size_t i = 0; i < ns; i++) {
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    int rc = al_index_sample(r->idx, i, &si);
    if (rc) return rc;
    if (si.shard >= n || !bad[si.shard]) continue;
    r->lost[i] |= LOST_SHARD;
    if (trunc_of[si.shard]) truncated_sample(r->idx, i, &si, &t[trunc_of[si.shard] - 1]);
  }
  return AL_OK;
}

/* Every shard holding indexed samples, looked at in parallel; a damaged one marks its samples
 * lost. */
static int check_shards(verify_run *r) {
  size_t n = al_index_shard_count(r->idx), nt = 0;
  verify_shard *v = NULL;
  al_check_options o = {.storage = r->a->storage};
  int rc = verify_shards_probe(r->idx, (int)r->a->threads, r->a->quiet, &o, &v);
  uint8_t *bad = rc ? NULL : calloc(n ? n : 1, 1);
  uint32_t *trunc_of = rc ? NULL : calloc(n ? n : 1, sizeof *trunc_of);
  vtrunc *t = rc ? NULL : calloc(n ? n : 1, sizeof *t);
  if (!rc && (!bad || !trunc_of || !t)) rc = al_set_error(AL_ENOMEM, "verify: out of memory");
  for (size_t i = 0; i < n && !rc; i++) {
    al_shard_info sh = AL_SHARD_INFO_INIT;
    if (!v[i].checked || (rc = al_index_shard(r->idx, i, &sh))) continue;
    r->shards_checked++;
    r->typed_checked += v[i].c.typed_checked;
    r->typed_skipped += v[i].c.typed_skipped;
    r->remote_requests += v[i].c.requests;
    if (!v[i].c.open_rc && v[i].c.size < sh.size) {
      t[nt] = (vtrunc){.shard = (uint32_t)i, .size = v[i].c.size};
      trunc_of[i] = (uint32_t)++nt;
      bad[i] = 1;
      continue;
    }
    size_t before = r->n_p;
    rc = report_shard(r, &sh, &v[i].c);
    bad[i] = r->n_p > before;
    if (!rc) rc = report_headers(r, &sh, &v[i]);
  }
  if (!rc) rc = mark_lost(r, bad, trunc_of, t);
  for (size_t k = 0; k < nt && !rc; k++) rc = report_truncated(r, &t[k]);
  free(bad);
  free(trunc_of);
  free(t);
  verify_shards_free(v, n);
  return rc;
}

/* ---- members ----------------------------------------------------------------------------- */

/* The required members: --members, else the index's typed latent member, else "latent". */
static void required_members(verify_run *r) {
  if (r->a->n_members) {
    memcpy(r->req, r->a->members, r->a->n_members * sizeof *r->req);
    r->n_req = r->a->n_members;
    return;
  }
  if (al_index_default_member(r->idx, r->req_default, sizeof r->req_default) != AL_OK)
    snprintf(r->req_default, sizeof r->req_default, "latent");
  r->req[0] = r->req_default;
  r->n_req = 1;
}

static int check_members(verify_run *r) {
  required_members(r);
  size_t ns = al_index_sample_count(r->idx);
  uint32_t *lacks = calloc(ns ? ns : 1, sizeof *lacks);
  if (!lacks) return AL_ENOMEM;
  int crc = al_index_check_members(r->idx, r->req, r->n_req, NULL, 0, lacks, NULL, NULL);
  for (size_t i = 0; crc == AL_OK && i < ns; i++) {
    if (!lacks[i]) continue;
    const char *miss = r->req[lacks[i] - 1];
    al_sample_info si = AL_SAMPLE_INFO_INIT;
    al_shard_info sh = AL_SHARD_INFO_INIT;
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
    if (rc)
      crc = rc;
    else
      r->lost[i] |= LOST_MEMBER;
  }
  free(lacks);
  return crc;
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
  al_manifest_info in = AL_MANIFEST_INFO_INIT;
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

/* A mixture's source against its entry in the mixture's manifest (index fingerprint and
 * samples), else a problem (and r->mix_m is cleared). */
static int check_source_entry(verify_run *r) {
  al_run_source_info si = AL_RUN_SOURCE_INFO_INIT;
  int rc = al_manifest_source(r->mix_m, r->mix_src, &si);
  if (rc) return rc;
  uint64_t fp = al_index_fingerprint(r->idx);
  if (si.index_fingerprint != fp || si.samples != al_index_sample_count(r->idx)) {
    rc = add_problem(r, VK_MANIFEST, NULL, NULL, 0,
                     "%s: source '%s' was planned from another index (fingerprint %016" PRIx64
                     ", %" PRIu64 " samples; %s has %016" PRIx64 ", %zu samples): plan it again",
                     r->a->manifest_path, si.name, si.index_fingerprint, si.samples,
                     r->source_index, fp, al_index_sample_count(r->idx));
    r->mix_m = NULL;
    return rc;
  }
  r->mix_base = si.draw_base;
  return AL_OK;
}

/* What the plan does with every sample (the manifest's key status, a mixture's of the sample's
 * first pass, else the bucket table's assignment), and the crop report. */
static int check_plan(verify_run *r, const al_bucket_table *table) {
  size_t ns = al_index_sample_count(r->idx);
  int rc = AL_OK;
  al_latent_geom g = al_latent_geom_resolve(NULL);
  for (size_t i = 0; i < ns && !rc; i++) {
    int st = 0;
    if (r->mix_m) {
      st = al_manifest_key_status(r->mix_m, r->mix_base + i);
    } else if (r->m) {
      st = al_manifest_key_status(r->m, i);
    } else {
      al_sample_info si = AL_SAMPLE_INFO_INIT;
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
  if (r->mix_m) r->crop_from = "bucket table";
  if (r->m) return fidelity_from_manifest(&r->crop, r->idx, r->m, table, (size_t)r->a->top);
  return fidelity_from_table(&r->crop, r->idx, table, &g, 0, (size_t)r->a->top);
}

/* ---- the verb ---------------------------------------------------------------------------- */

/* Loads the index at path and moves its shard paths by --root: 0 or -1 (al_last_error). */
static int load_index(const verify_args *a, const char *path, al_index **idx) {
  if (al_index_load(idx, path) != AL_OK) return -1;
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
  if (!rc && r->mix_m) {
    rc = check_source_entry(r);
    if (!rc) rc = check_plan(r, table);
  } else if (!rc && r->a->manifest_path && !r->a->mixture_path) {
    rc = check_manifest(r);
  }
  if (!rc && !r->mix_m && (r->m || !r->a->manifest_path)) rc = check_plan(r, table);
  al_bucket_table_free(table);
  return rc;
}

static void free_run(verify_run *r) {
  for (size_t i = 0; i < r->n_p; i++) free(r->p[i].message);
  free(r->p);
  free(r->lost);
  free(r->plan);
  fidelity_free(&r->crop);
  al_manifest_free(r->m);
  al_index_free(r->idx);
  memset(r, 0, sizeof *r);
}

/* verify --mixture: every source's index checked as INDEX would be, in the mixture's order, and
 * with MANIFEST (the mixture's plan) each against its entry; one report per source (--json: one
 * object, "sources" an array of the per-source objects). A manifest that does not load, or is
 * not this mixture's, is a problem of its own. Returns an exit status. */
static int verify_mixture(verify_args *a) {
  al_mixture *mx = NULL;
  al_manifest *m = NULL;
  if (al_mixture_load(&mx, a->mixture_path)) return cli_fail("verify");
  uint64_t problems = 0;
  char mproblem[1024] = "";
  if (a->manifest_path && al_manifest_load(&m, a->manifest_path)) {
    snprintf(mproblem, sizeof mproblem, "%s", al_last_error());
    al_manifest_free(m);
    m = NULL;
  }
  size_t ns = al_mixture_source_count(mx);
  if (m && al_mixture_check_manifest(mx, m, a->manifest_path)) {
    snprintf(mproblem, sizeof mproblem, "%s: it is not this mixture's plan", al_last_error());
    al_manifest_free(m);
    m = NULL;
  }
  if (*mproblem) {
    problems++;
    if (!a->json) printf("verify: manifest: %s\n", mproblem);
  }
  if (a->json) {
    printf("{\"mixture\":");
    jsonw_string(stdout, a->mixture_path);
    if (*mproblem) {
      printf(",\"manifest_problem\":");
      jsonw_string(stdout, mproblem);
    }
    printf(",");
  }
  if (a->json) printf("\"sources\":[");
  int ec = AL_EXIT_OK;
  for (uint32_t i = 0; i < ns && ec != AL_EXIT_FAIL; i++) {
    verify_run r;
    memset(&r, 0, sizeof r);
    r.a = a;
    r.source_name = al_mixture_source_name(mx, i);
    r.source_index = al_mixture_source_index(mx, i);
    r.mix_m = m;
    r.mix_src = i;
    if (load_index(a, r.source_index, &r.idx) || run_checks(&r)) {
      al_error_prefix(AL_EINVAL, "source '%s'", r.source_name);
      ec = cli_fail("verify");
    } else {
      verify_counts c;
      verify_count(&r, &c);
      problems += c.problems;
      if (a->json) {
        if (i) printf(",");
        verify_print_json_object(&r, &c);
      } else {
        verify_print_text(&r, &c);
      }
    }
    free_run(&r);
  }
  if (a->json && ec != AL_EXIT_FAIL)
    printf("],\"ok\":%s,\"problem_count\":%" PRIu64 "}\n", problems ? "false" : "true", problems);
  else if (ec != AL_EXIT_FAIL)
    printf("verify: mixture %s: %zu sources, %s\n", a->mixture_path, ns,
           problems ? "problems found" : "no problems");
  al_manifest_free(m);
  al_mixture_free(mx);
  if (ec == AL_EXIT_FAIL) return ec;
  return problems ? AL_EXIT_PROBLEMS : AL_EXIT_OK;
}

int cli_cmd_verify(int argc, char **argv) {
  verify_args a;
  memset(&a, 0, sizeof a);
  a.show = a.top = 10;
  int ec = cli_parse(&VERIFY, argc, argv, &a);
  if (ec != CLI_RUN) return ec;
  if (a.mixture_path) {
    if (a.manifest_path)
      return cli_usage(&VERIFY, CLI_SAY_PAGE, "with --mixture, the one argument is MANIFEST");
    a.manifest_path = a.index_path; /* the one positional argument */
    a.index_path = NULL;
    return verify_mixture(&a);
  }
  if (!a.index_path) return cli_usage(&VERIFY, CLI_SAY_PAGE, "INDEX is required");
  verify_run r;
  memset(&r, 0, sizeof r);
  r.a = &a;
  if (load_index(&a, a.index_path, &r.idx) || run_checks(&r)) {
    ec = cli_fail("verify");
  } else {
    verify_counts c;
    verify_count(&r, &c);
    if (a.json)
      verify_print_json(&r, &c);
    else
      verify_print_text(&r, &c);
    ec = c.problems ? AL_EXIT_PROBLEMS : AL_EXIT_OK;
  }
  free_run(&r);
  return ec;
}
