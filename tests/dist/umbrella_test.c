/* A C program that includes only the umbrella header adaptiveload.h compiles warning-free
 * (-Wall -Wextra -Werror from .bazelrc, plus -Wpedantic and -Wstrict-prototypes here), links
 * against every module and can use the API: the sized structs' AL_*_INIT macros and a call. */
#include "adaptiveload.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  al_shard_info si = AL_SHARD_INFO_INIT;
  al_manifest_info mi = AL_MANIFEST_INFO_INIT;
  al_stream_stats st = AL_STREAM_STATS_INIT;
  al_stream_options so = {0}; /* options: struct_size 0 means this header's struct */
  int bad = 0;
  bad |= si.struct_size != sizeof si || mi.struct_size != sizeof mi || st.struct_size != sizeof st;
  bad |= so.struct_size != 0;
  bad |= strcmp(al_status_name(AL_EINVAL), "AL_EINVAL") != 0;
  bad |= al_version() == NULL;
  /* A filled struct without its size is refused, naming the struct. */
  al_index *idx = NULL;
  if (al_index_new(&idx) != AL_OK) return 1;
  al_sample_info x;
  memset(&x, 0, sizeof x);
  bad |= al_index_sample(idx, 0, &x) != AL_EINVAL || !strstr(al_last_error(), "al_sample_info");
  al_index_free(idx);
  if (bad) fprintf(stderr, "umbrella_test: failed (%s)\n", al_last_error());
  return bad;
}
