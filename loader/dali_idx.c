/* DALI wds2idx v1.2 index files; format in dali_idx_internal.h. */
#include "loader/dali_idx_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/atomic_file_internal.h"
#include "loader/index_internal.h"

static int idx_name(const char *shard, const char *dir, char *out, size_t cap) {
  const char *base = strrchr(shard, '/');
  base = base ? base + 1 : shard;
  /* wds2idx: the name up to the first dot after its first character. */
  const char *dot = base[0] ? strchr(base + 1, '.') : NULL;
  size_t len = dot ? (size_t)(dot - base) : strlen(base);
  int n = snprintf(out, cap, "%s/%.*s.idx", dir, (int)len, base);
  return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int dali_idx_write(const al_index *idx, const char *dir) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return al_set_error(AL_EIO, "%s: cannot create directory: %s", dir, strerror(errno));
  size_t n = idx->n_shards;
  char **names = calloc(n ? n : 1, sizeof *names);
  if (!names) return al_set_error(AL_ENOMEM, "out of memory");
  int rc = AL_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    if (!idx->shards[i].seekable) continue;
    char buf[4096];
    if (idx_name(idx->shards[i].path, dir, buf, sizeof buf)) {
      rc = al_set_error(AL_EINVAL, "%s: DALI index path too long", idx->shards[i].path);
      break;
    }
    for (size_t j = 0; j < i; j++)
      if (names[j] && !strcmp(names[j], buf)) {
        rc = al_set_error(AL_EINVAL, "%s and %s would both write DALI index %s",
                          idx->shards[j].path, idx->shards[i].path, buf);
        break;
      }
    if (!rc && !(names[i] = strdup(buf))) rc = al_set_error(AL_ENOMEM, "out of memory");
  }
  /* Samples of one shard are contiguous after a build; count per shard, then write in index order.
   */
  uint64_t *count = rc ? NULL : calloc(n ? n : 1, sizeof *count);
  if (!rc && !count) rc = al_set_error(AL_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < idx->n_samples; i++) count[idx->samples[i].shard]++;
  /* Each file through common/atomic_file: a temporary beside it, renamed over it only
   * when everything was written (never a half file, never through a planted symlink). */
  afile **afs = rc ? NULL : calloc(n ? n : 1, sizeof *afs);
  if (!rc && !afs) rc = al_set_error(AL_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < n; i++) {
    if (!names[i]) continue;
    rc = afile_create(&afs[i], names[i]);
    if (!rc) fprintf(afile_stream(afs[i]), "v1.2 %llu\n", (unsigned long long)count[i]);
  }
  for (size_t i = 0; !rc && i < idx->n_samples; i++) {
    const index_sample_rec *s = &idx->samples[i];
    FILE *f = afs[s->shard] ? afile_stream(afs[s->shard]) : NULL;
    if (!f) continue;
    const char *key = idx->keys + s->key;
    for (uint32_t m = 0; m < s->n_members; m++) {
      const index_member_rec *r = &idx->members[s->member0 + m];
      const char *ext = strtab_get(&idx->exts, index_member_ext(r));
      fprintf(f, "%s%s %llu %llu %s.%s", m ? " " : "", ext,
              (unsigned long long)index_member_offset(r), (unsigned long long)r->size, key, ext);
    }
    fputc('\n', f);
  }
  for (size_t i = 0; afs && i < n; i++) {
    if (!afs[i]) continue;
    if (rc)
      afile_abort(afs[i]);
    else
      rc = afile_commit(afs[i]);
  }
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
  free(count);
  free(afs);
  return rc;
}
