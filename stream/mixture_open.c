/* al_stream_open_mixture: checks every source's index against the mixture's manifest, the rank
 * against the world and the members against each source, then starts the engine over the
 * mixture's source (mixture_source.c) and the rank's plan. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/struct_abi_internal.h"
#include "stream/al_schedule.h"
#include "stream/engine_internal.h"
#include "stream/rank_members_internal.h"

/* indexes[i] is the index source i was planned from: fingerprint and sample count; every draw of
 * it keyed as its position is in the index (keys the manifest saved without are not checked). */
static int check_source(const al_index *idx, const al_manifest *m, const al_run_source_info *s) {
  int rc = stream_check_source_index(idx, s, "manifest");
  if (rc != AL_OK) return rc;
  size_t n = al_index_sample_count(idx);
  for (uint64_t q = 0; q < s->passes && n; q++)
    for (size_t j = 0; j < n; j++) {
      const char *mk = al_manifest_key(m, s->draw_base + q * n + j);
      if (!mk || !*mk) continue;
      al_sample_info si = AL_SAMPLE_INFO_INIT;
      int rc = al_index_sample(idx, j, &si);
      if (rc != AL_OK) return rc;
      if (strcmp(mk, si.key))
        return al_set_error(AL_EFORMAT,
                            "source '%s': the manifest's key table names '%s' at draw %" PRIu64
                            " (pass %" PRIu64 ", position %zu) where the index holds '%s'",
                            s->name, mk, s->draw_base + q * n + j, q, j, si.key);
    }
  return AL_OK;
}

int al_stream_open_mixture(al_stream **out, const al_index *const *indexes, size_t n,
                           const al_manifest *m, int rank, const al_stream_options *caller_opts) {
  if (!out) return al_set_error(AL_EINVAL, "al_stream_open_mixture: NULL argument");
  *out = NULL;
  if (!indexes || !m)
    return al_set_error(AL_EINVAL, "al_stream_open_mixture: NULL indexes or manifest");
  al_stream_options o;
  int rc = struct_in(&o, sizeof o, AL_STREAM_OPTIONS_V1, caller_opts, "al_stream_open_mixture",
                     "al_stream_options");
  if (rc != AL_OK) return rc;
  uint32_t ns = al_manifest_source_count(m);
  if (!ns)
    return al_set_error(AL_EINVAL,
                        "the manifest plans one index, not a mixture: open it with al_stream_open");
  if (n != ns)
    return al_set_error(AL_EINVAL,
                        "the manifest's mixture has %" PRIu32 " sources but %zu indexes were given",
                        ns, n);
  al_run_source_info *src = calloc(ns, sizeof *src);
  if (!src) return al_set_error(AL_ENOMEM, "stream open: %" PRIu32 " sources", ns);
  for (uint32_t i = 0; rc == AL_OK && i < ns; i++) {
    src[i].struct_size = sizeof src[i];
    if (!indexes[i])
      rc = al_set_error(AL_EINVAL, "al_stream_open_mixture: index %" PRIu32 " is NULL", i);
    else if ((rc = al_manifest_source(m, i, &src[i])) == AL_OK)
      rc = check_source(indexes[i], m, &src[i]);
  }
  uint32_t r = 0;
  if (rc == AL_OK) rc = al_resolve_rank(m, rank, o.world, &r);
  stream_rank_plan plan;
  memset(&plan, 0, sizeof plan);
  if (rc == AL_OK) rc = stream_rank_plan_from_manifest(&plan, m, r);
  const char *one = NULL, *const *names = NULL;
  char dflt[AL_INDEX_EXT_MAX + 1];
  size_t n_names = 0;
  if (rc == AL_OK) {
    stream_requested_members(indexes[0], &o, &one, dflt, sizeof dflt, &names, &n_names);
    rc = stream_check_mixture_samples(indexes, src, ns, plan.samples, plan.n_samples, r, o.on_error,
                                      names, n_names);
  }
  stream_source ms;
  if (rc == AL_OK) rc = stream_mixture_source(indexes, src, ns, &ms);
  free(src);
  if (rc == AL_OK) rc = stream_open_source(out, &ms, &plan, &o);
  stream_rank_plan_free(&plan); /* no-op unless open failed before taking it */
  return rc;
}
