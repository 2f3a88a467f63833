/*
 * verify_internal.h - what `adaptiveload verify` found (cmd_verify.c runs the checks) and
 * the report of it (verify_report.c: text and --json).
 *
 * Internal to cli/. Ownership: a verify_run owns its problems, per-sample arrays, crop report,
 * manifest and index (freed by cmd_verify.c). Thread safety: single-threaded (it prints to
 * stdout). Errors: none; the printers write what they can.
 */
#ifndef AL_VERIFY_INTERNAL_H
#define AL_VERIFY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "loader/al_index.h"
#include "manifest/al_manifest.h"
#include "manifest/fidelity_internal.h"

/* Exit status when the check found problems (the check itself ran). */
#define AL_EXIT_PROBLEMS 3

#define VERIFY_MAX_ROOTS 16
#define VERIFY_MAX_MEMBERS 16

typedef enum vkind {
  VK_MISSING_SHARD,   /* cannot be opened or read */
  VK_CHANGED_SHARD,   /* other size (larger) or other content than indexed */
  VK_TRUNCATED_SHARD, /* shorter than indexed */
  VK_MISSING_MEMBER,  /* a sample without a required member */
  VK_BAD_HEADER,      /* a typed member whose header disagrees with the index or its size */
  VK_MANIFEST,        /* the manifest does not load or was planned from another index */
  VK_COUNT
} vkind;

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
  const char *mixture_path; /* --mixture MIX.json: every source's index (MANIFEST its plan) */
  const char *roots[VERIFY_MAX_ROOTS]; /* --root FROM=TO */
  size_t n_roots;
  char members_buf[1024]; /* --members, split into members */
  const char *members[VERIFY_MAX_MEMBERS];
  size_t n_members;
  const char *buckets;
  uint64_t show, top, threads;
  int json, quiet, strict;
  al_storage_options storage; /* --s3-endpoint, --s3-region, --s3-addressing, --remote-timeout */
} verify_args;

typedef struct verify_run {
  const verify_args *a;
  al_index *idx;
  al_manifest *m; /* NULL without one, or when it did not load or is of another index */
  const char *req[VERIFY_MAX_MEMBERS]; /* required members */
  size_t n_req;
  char req_default[AL_INDEX_EXT_MAX + 1];
  vproblem *p;
  size_t n_p, cap_p;
  uint64_t kind_n[VK_COUNT];
  uint64_t shards_checked;
  uint64_t typed_checked, typed_skipped; /* typed member headers read, not read */
  uint64_t remote_requests;              /* requests sent to servers (URL shards) */
  uint8_t *lost;                         /* per sample, LOST_* bits */
  uint8_t *plan;                         /* per sample, what the plan did */
  fid_report crop;
  const char *crop_from; /* "manifest", "bucket table", NULL: no report */
  /* A source of a mixture (verify --mixture): its name, its index's path, and with a loaded
   * mixture manifest (mix_m, borrowed) the source's number there and its first draw; the
   * plan's verdict on position j is the key status of draw mix_base + j. */
  const char *source_name, *source_index;
  const al_manifest *mix_m;
  uint32_t mix_src;
  uint64_t mix_base;
} verify_run;

/* "missing_shard", ...: the names of the kinds in the report and in --json. */
const char *verify_kind_name(vkind k);

/* What the totals of a run are. */
typedef struct verify_counts {
  uint64_t lost, lost_shard, lost_member, lost_plan;
  uint64_t problems; /* the kinds' counts; with --strict also the samples the index or the plan
                        rejected */
} verify_counts;

void verify_count(const verify_run *r, verify_counts *c);

/* The report on stdout: a human summary with the first --show entries of each kind, or one
 * JSON object listing everything. */
void verify_print_text(const verify_run *r, const verify_counts *c);
void verify_print_json(const verify_run *r, const verify_counts *c);

/* The object verify_print_json prints, without its newline (a mixture's sources in an array). */
void verify_print_json_object(const verify_run *r, const verify_counts *c);

#endif /* AL_VERIFY_INTERNAL_H */
