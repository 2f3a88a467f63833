/* The members of an index's samples (al_members.h): the latent rule, the default member, and
 * whether samples hold the members a run asks for. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader/al_members.h"
#include "loader/index_internal.h"

#define SHOW_MISSING 5

/* The length of ext without a trailing ".lz4". */
static size_t without_lz4(const char *ext) {
  size_t n = strlen(ext);
  return n > 4 && !strcmp(ext + n - 4, ".lz4") ? n - 4 : n;
}

int al_index_default_member(const al_index *idx, char *out, size_t cap) {
  if (!idx || !out) return al_set_error(AL_EINVAL, "al_index_default_member: NULL argument");
  uint64_t *count = calloc(idx->exts.n ? idx->exts.n : 1, sizeof *count);
  if (!count) return al_set_error(AL_ENOMEM, "default member: out of memory");
  int64_t best = -1;
  for (size_t i = 0; i < idx->n_samples; i++) {
    uint32_t t, h, w;
    size_t m;
    if (al_index_latent_grid(idx, i, &t, &h, &w, &m) != AL_OK) continue;
    uint32_t id = index_member_ext(&idx->members[idx->samples[i].member0 + m]);
    if (id >= idx->exts.n) continue;
    count[id]++;
    if (best < 0 || count[id] > count[best]) best = id;
  }
  uint64_t got = best >= 0 ? count[best] : 0;
  free(count);
  if (!got) return AL_ENOTFOUND;
  const char *ext = strtab_get(&idx->exts, (uint32_t)best);
  size_t n = without_lz4(ext);
  if (n + 1 > cap)
    return al_set_error(AL_ERANGE, "default member '%s': %zu bytes do not fit %zu", ext, n + 1,
                        cap);
  memcpy(out, ext, n);
  out[n] = 0;
  return AL_OK;
}

int al_index_member_is_latent(const al_index *idx, size_t sample, const char *ext) {
  if (!idx || !ext) return al_set_error(AL_EINVAL, "al_index_member_is_latent: NULL argument");
  if (sample >= idx->n_samples)
    return al_set_error(AL_ERANGE, "sample %zu out of range (%zu samples)", sample, idx->n_samples);
  uint32_t t, h, w;
  size_t lat;
  if (al_index_latent_grid(idx, sample, &t, &h, &w, &lat) != AL_OK) return 0;
  const index_sample_rec *s = &idx->samples[sample];
  size_t len = strlen(ext);
  int64_t exact = strtab_find(&idx->exts, ext, len), packed = -1;
  char buf[AL_INDEX_EXT_MAX + 8];
  if (len + 5 <= sizeof buf) {
    memcpy(buf, ext, len);
    memcpy(buf + len, ".lz4", 5);
    packed = strtab_find(&idx->exts, buf, len + 4);
  }
  /* The member the stream reads: the exact extension first, else the .lz4 one. */
  int64_t hit = -1;
  for (uint32_t k = 0; k < s->n_members; k++) {
    int64_t e = index_member_ext(&idx->members[s->member0 + k]);
    if (e >= 0 && e == exact) {
      hit = k;
      break;
    }
    if (e >= 0 && e == packed && hit < 0) hit = k;
  }
  return hit >= 0 && (size_t)hit == lat;
}

/* The extension ids a requested member matches: EXT and EXT.lz4 (-1: not in the index). */
typedef struct member_ids {
  int64_t exact, packed;
} member_ids;

static int resolve_ids(const al_index *idx, const char *const *members, size_t n, member_ids *ids) {
  for (size_t j = 0; j < n; j++) {
    if (!members[j] || !*members[j])
      return al_set_error(AL_EINVAL, "member %zu: NULL or empty name", j);
    size_t len = strlen(members[j]);
    ids[j].exact = strtab_find(&idx->exts, members[j], len);
    ids[j].packed = -1;
    char buf[AL_INDEX_EXT_MAX + 8];
    if (len + 5 <= sizeof buf) {
      memcpy(buf, members[j], len);
      memcpy(buf + len, ".lz4", 5);
      ids[j].packed = strtab_find(&idx->exts, buf, len + 4);
    }
  }
  return AL_OK;
}

static int sample_holds(const al_index *idx, const index_sample_rec *s, const member_ids *id) {
  if (id->exact < 0 && id->packed < 0) return 0;
  for (uint32_t k = 0; k < s->n_members; k++) {
    int64_t e = index_member_ext(&idx->members[s->member0 + k]);
    if (e == id->exact || e == id->packed) return 1;
  }
  return 0;
}

int al_index_check_members(const al_index *idx, const char *const *members, size_t n_members,
                           const uint64_t *samples, size_t n_samples, uint32_t *lacks,
                           uint64_t *held, uint64_t *n_missing) {
  if (!idx || (!members && n_members))
    return al_set_error(AL_EINVAL, "al_index_check_members: NULL argument");
  member_ids *ids = calloc(n_members ? n_members : 1, sizeof *ids);
  if (!ids) return al_set_error(AL_ENOMEM, "member check: out of memory");
  int rc = resolve_ids(idx, members, n_members, ids);
  size_t n = samples ? n_samples : idx->n_samples;
  uint64_t missing = 0;
  if (held) memset(held, 0, n_members * sizeof *held);
  for (size_t i = 0; i < n && rc == AL_OK; i++) {
    uint64_t pos = samples ? samples[i] : i;
    if (pos >= idx->n_samples) {
      rc = al_set_error(AL_ERANGE, "member check: sample %" PRIu64 " past the index's %zu", pos,
                        idx->n_samples);
      break;
    }
    uint32_t first = 0;
    for (size_t j = 0; j < n_members; j++) {
      int has = sample_holds(idx, &idx->samples[pos], &ids[j]);
      if (held) held[j] += (uint64_t)has;
      if (!has && !first) first = (uint32_t)j + 1;
    }
    if (lacks) lacks[i] = first;
    missing += first != 0;
  }
  free(ids);
  if (rc == AL_OK && n_missing) *n_missing = missing;
  return rc;
}

/* Every extension some sample of the index has, in first-seen order, ", "-separated into buf. */
static void list_exts(const al_index *idx, char *buf, size_t cap) {
  size_t at = 0, shown = 0;
  buf[0] = 0;
  uint8_t *held = calloc(idx->exts.n ? idx->exts.n : 1, 1);
  for (size_t k = 0; held && k < idx->n_members; k++) {
    uint32_t e = index_member_ext(&idx->members[k]);
    if (e < idx->exts.n) held[e] = 1;
  }
  for (uint32_t e = 0; e < idx->exts.n; e++) {
    if (held && !held[e]) continue;
    int w = snprintf(buf + at, cap - at, "%s%s", shown++ ? ", " : "", strtab_get(&idx->exts, e));
    if (w < 0 || (size_t)w >= cap - at) {
      snprintf(buf + cap - 5, 5, "...");
      break;
    }
    at += (size_t)w;
  }
  free(held);
  if (!shown) snprintf(buf, cap, "no members");
}

int al_index_members_known(const al_index *idx, const char *const *members, size_t n_members) {
  if (!idx || (!members && n_members))
    return al_set_error(AL_EINVAL, "al_index_members_known: NULL argument");
  member_ids ids_small[16];
  member_ids *ids = n_members <= 16 ? ids_small : calloc(n_members, sizeof *ids);
  uint8_t found_small[16];
  uint8_t *found = n_members <= 16 ? found_small : calloc(n_members, 1);
  int rc = ids && found ? resolve_ids(idx, members, n_members, ids)
                        : al_set_error(AL_ENOMEM, "member check: out of memory");
  if (found) memset(found, 0, n_members);
  /* Until each member is found in some sample: usually the first sample settles it. */
  size_t left = n_members;
  for (size_t i = 0; rc == AL_OK && left && i < idx->n_samples; i++)
    for (size_t j = 0; j < n_members; j++)
      if (!found[j] && sample_holds(idx, &idx->samples[i], &ids[j])) {
        found[j] = 1;
        left--;
      }
  for (size_t j = 0; rc == AL_OK && j < n_members; j++) {
    if (found[j]) continue;
    char have[1024];
    list_exts(idx, have, sizeof have);
    rc = al_set_error(AL_ENOTFOUND,
                      "member '%s' is in no sample of the index (%zu samples); the index has: %s",
                      members[j], idx->n_samples, have);
  }
  if (ids != ids_small) free(ids);
  if (found != found_small) free(found);
  return rc;
}

int al_index_require_members(const al_index *idx, const char *const *members, size_t n_members,
                             const uint64_t *samples, size_t n_samples, uint64_t *n_missing) {
  if (!idx) return al_set_error(AL_EINVAL, "al_index_require_members: NULL argument");
  size_t n = samples ? n_samples : idx->n_samples;
  uint32_t *lacks = calloc(n ? n : 1, sizeof *lacks);
  if (!lacks) return al_set_error(AL_ENOMEM, "member check: out of memory");
  uint64_t missing = 0;
  int rc = al_index_check_members(idx, members, n_members, samples, n_samples, lacks, NULL,
                                  &missing);
  if (n_missing) *n_missing = rc == AL_OK ? missing : 0;
  if (rc != AL_OK || !missing) {
    free(lacks);
    return rc;
  }
  char msg[2048];
  size_t at = 0, shown = 0;
  msg[0] = 0;
  for (size_t i = 0; i < n && shown < SHOW_MISSING; i++) {
    if (!lacks[i]) continue;
    const index_sample_rec *s = &idx->samples[samples ? samples[i] : i];
    const char *shard = s->shard < idx->n_shards ? idx->shards[s->shard].path : "?";
    int w = snprintf(msg + at, sizeof msg - at, "%skey '%s' (shard %s) has no '%s'",
                     shown ? ", " : "", idx->keys + s->key, shard, members[lacks[i] - 1]);
    if (w < 0 || (size_t)w >= sizeof msg - at) break;
    at += (size_t)w;
    shown++;
  }
  free(lacks);
  return al_set_error(AL_ENOTFOUND, "%" PRIu64 " of %zu samples lack a requested member: %s%s",
                      missing, n, msg, missing > shown ? ", ..." : "");
}
