/* A rank's samples against the requested members (rank_members_internal.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "loader/al_members.h"
#include "stream/rank_members_internal.h"

int stream_check_samples(const al_index *idx, stream_plan_sample *samples, size_t n, uint32_t rank,
                         int on_error, const char *const *names, size_t n_names) {
  int rc = AL_OK;
  uint64_t *pos = malloc((n ? n : 1) * sizeof *pos);
  uint32_t *lacks = malloc((n ? n : 1) * sizeof *lacks);
  uint64_t missing = 0;
  if (!pos || !lacks) rc = al_set_error(AL_ENOMEM, "stream open: member check");
  for (size_t i = 0; rc == AL_OK && i < n; i++) pos[i] = samples[i].sample;
  if (rc == AL_OK) rc = al_index_check_members(idx, names, n_names, pos, n, lacks, NULL, &missing);
  if (rc == AL_OK && missing && on_error != AL_STREAM_SKIP_SAMPLE) {
    rc = al_index_require_members(idx, names, n_names, pos, n, NULL);
    rc = al_error_prefix(rc,
                         "stream of rank %" PRIu32
                         " (plan with --require-members to leave such samples out, or "
                         "stream with --on-error skip)",
                         rank);
  }
  for (size_t i = 0; rc == AL_OK && i < n; i++) samples[i].lacks = lacks[i] != 0;
  free(pos);
  free(lacks);
  return rc;
}

size_t stream_stored_members(const char *const *names, size_t n, const char **out) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], AL_STREAM_MEMBER_PIXELS) != 0) out[k++] = names[i];
  return k;
}

int stream_check_members(const al_index *idx, stream_plan_sample *samples, size_t n, uint32_t rank,
                         int on_error, const char *const *names, size_t n_names) {
  const char *stored[AL_STREAM_MAX_MEMBERS];
  if (n_names > AL_STREAM_MAX_MEMBERS) n_names = AL_STREAM_MAX_MEMBERS; /* refused at open */
  n_names = stream_stored_members(names, n_names, stored);
  if (!n_names) return AL_OK; /* "pixels" alone: each sample's media member, found as read */
  int rc = al_index_members_known(idx, stored, n_names);
  if (rc != AL_OK) return al_error_prefix(rc, "stream of rank %" PRIu32, rank);
  return stream_check_samples(idx, samples, n, rank, on_error, stored, n_names);
}

void stream_requested_members(const al_index *idx, al_stream_options *o, const char **one,
                              char *dflt, size_t cap, const char *const **names, size_t *n) {
  if (o->members && o->n_members) {
    *names = o->members;
    *n = o->n_members;
    return;
  }
  if (!o->ext) o->ext = al_index_default_member(idx, dflt, cap) == AL_OK ? dflt : "latent";
  *one = o->ext;
  *names = one;
  *n = 1;
}

int stream_check_mixture_samples(const al_index *const *idx, const al_run_source_info *src,
                                 size_t n, stream_plan_sample *samples, size_t n_samples,
                                 uint32_t rank, int on_error, const char *const *names,
                                 size_t n_names) {
  stream_plan_sample *part = malloc((n_samples ? n_samples : 1) * sizeof *part);
  size_t *at = malloc((n_samples ? n_samples : 1) * sizeof *at);
  int rc = part && at ? AL_OK : al_set_error(AL_ENOMEM, "stream open: member check");
  for (size_t i = 0; rc == AL_OK && i < n; i++) {
    uint64_t draws = (uint64_t)src[i].passes * src[i].samples;
    size_t k = 0;
    for (size_t p = 0; p < n_samples; p++) {
      uint64_t d = samples[p].sample;
      if (d < src[i].draw_base || d - src[i].draw_base >= draws) continue;
      part[k] = samples[p];
      part[k].sample = (d - src[i].draw_base) % src[i].samples;
      at[k++] = p;
    }
    rc = stream_check_members(idx[i], part, k, rank, on_error, names, n_names);
    if (rc != AL_OK) rc = al_error_prefix(rc, "source '%s'", src[i].name);
    for (size_t j = 0; rc == AL_OK && j < k; j++) samples[at[j]].lacks = part[j].lacks;
  }
  free(part);
  free(at);
  return rc;
}
