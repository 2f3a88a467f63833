/*
 * remote_index_dump INDEX - what an index says, one line per fact, for remote_index_test.sh
 * to compare an index of local shards with one of the same shards behind a URL:
 *   fingerprint HEX
 *   shard NAME size N seekable S compression C content_fp HEX samples N rejected N
 *   sample KEY shard I WxHxF fps R member EXT@OFFSET+SIZE[:lz4][:dtype(shape)]...
 * (NAME: the file name, the folder or URL prefix left out; the path, remote kind and ETag,
 * which differ between copies, go on "where" lines to stderr: "where I PATH remote K etag E").
 * Exit 1 when the index cannot be loaded.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "loader/al_index.h"

static void print_member(const al_index *idx, size_t i, size_t m) {
  al_member_info mi;
  if (al_index_member(idx, i, m, &mi)) return;
  printf(" %s@%" PRIu64 "+%" PRIu64 "%s", mi.ext, mi.offset, mi.size, mi.lz4 ? ":lz4" : "");
  al_member_type mt = AL_MEMBER_TYPE_INIT;
  if (al_index_member_type(idx, i, m, &mt) == AL_OK) {
    printf(":%s(", mt.dtype);
    for (uint32_t d = 0; d < mt.ndim; d++) printf("%s%" PRIu64, d ? "," : "", mt.shape[d]);
    printf(")+%" PRIu64, mt.data_offset);
  }
  const char *codec = al_index_member_codec(idx, i, m);
  if (*codec) printf(":codec=%s", codec);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: remote_index_dump INDEX\n");
    return 2;
  }
  al_index *idx = NULL;
  if (al_index_load(&idx, argv[1]) != AL_OK) {
    fprintf(stderr, "remote_index_dump: %s\n", al_last_error());
    return 1;
  }
  printf("fingerprint %016" PRIx64 "\n", al_index_fingerprint(idx));
  for (size_t i = 0; i < al_index_shard_count(idx); i++) {
    al_shard_info s = AL_SHARD_INFO_INIT;
    if (al_index_shard(idx, i, &s)) break;
    const char *name = strrchr(s.path, '/');
    printf("shard %s size %" PRIu64 " seekable %d compression %s content_fp %016" PRIx64
           " samples %" PRIu64 " rejected %" PRIu64 "\n",
           name ? name + 1 : s.path, s.size, s.seekable, s.compression, s.content_fp,
           s.sample_count, s.rejected_count);
    fprintf(stderr, "where %zu %s remote %d etag %s\n", i, s.path, s.remote, s.etag);
  }
  for (size_t i = 0; i < al_index_sample_count(idx); i++) {
    al_sample_info s = AL_SAMPLE_INFO_INIT;
    if (al_index_sample(idx, i, &s)) break;
    printf("sample %s shard %u %ux%ux%u fps %g member", s.key, s.shard, s.width, s.height, s.frames,
           (double)s.fps);
    for (size_t m = 0; m < s.n_members; m++) print_member(idx, i, m);
    printf("\n");
  }
  al_index_free(idx);
  return 0;
}
