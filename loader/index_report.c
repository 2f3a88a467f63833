/* The rejected entries of an index as text lines or a JSON array (al_index_print_rejected). */
#include <stdio.h>

#include "common/json_write_internal.h"
#include "loader/al_index.h"

static void print_line(FILE *out, const char *shard, const al_rejected_info *r) {
  if (r->member[0] && r->key[0])
    fprintf(out, "%s: sample '%s', member '%s' at byte %llu: %s\n", shard, r->key, r->member,
            (unsigned long long)r->offset, r->reason);
  else if (r->member[0])
    fprintf(out, "%s: member '%s' at byte %llu: %s\n", shard, r->member,
            (unsigned long long)r->offset, r->reason);
  else
    fprintf(out, "%s: at byte %llu: %s\n", shard, (unsigned long long)r->offset, r->reason);
}

static void print_object(FILE *out, const char *shard, const al_rejected_info *r, int first) {
  fprintf(out, "%s{\"shard\": ", first ? "" : ", ");
  jsonw_string(out, shard);
  fprintf(out, ", \"member\": ");
  jsonw_string(out, r->member);
  fprintf(out, ", \"key\": ");
  jsonw_string(out, r->key);
  fprintf(out, ", \"offset\": %llu, \"reason\": ", (unsigned long long)r->offset);
  jsonw_string(out, r->reason);
  fprintf(out, "}");
}

int al_index_print_rejected(FILE *out, const al_index *idx, int json) {
  if (!out || !idx) return al_set_error(AL_EINVAL, "al_index_print_rejected: NULL argument");
  size_t n = al_index_rejected_count(idx);
  if (json) fprintf(out, "[");
  for (size_t i = 0; i < n; i++) {
    al_rejected_info r = AL_REJECTED_INFO_INIT;
    al_shard_info s = AL_SHARD_INFO_INIT;
    int rc = al_index_rejected(idx, i, &r);
    if (!rc) rc = al_index_shard(idx, r.shard, &s);
    if (rc) return rc;
    if (json)
      print_object(out, s.path, &r, i == 0);
    else
      print_line(out, s.path, &r);
  }
  if (json) fprintf(out, "]");
  if (ferror(out)) return al_set_error(AL_EIO, "al_index_print_rejected: writing failed");
  return AL_OK;
}
