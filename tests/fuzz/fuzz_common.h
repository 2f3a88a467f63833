/*
 * fuzz_common.h - what the libFuzzer harnesses of tests/fuzz/ share: one temp
 * file per process under $TMPDIR (made once with mkstemps, rewritten on every
 * input, removed at exit), and the LZ4 frame the container harnesses wrap
 * their input in so that mutations reach the records rather than the frame's
 * checksums. Header-only: each harness is one translation unit plus the library.
 */
#ifndef AL_FUZZ_COMMON_H
#define AL_FUZZ_COMMON_H

#include <lz4frame.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_MAX_TMP 4

static char fuzz_tmp_paths[FUZZ_MAX_TMP][4096];
static int fuzz_tmp_count;

static inline void fuzz_tmp_cleanup(void) {
  for (int i = 0; i < fuzz_tmp_count; i++) {
    char side[4200];
    unlink(fuzz_tmp_paths[i]);
    snprintf(side, sizeof side, "%s.tmp", fuzz_tmp_paths[i]);
    unlink(side); /* writers write PATH.tmp and rename */
  }
}

/* A path under $TMPDIR (default /tmp) ending in `suffix`, made once per call
 * site by the caller (keep the result in a static). Aborts if it cannot. */
static inline const char *fuzz_tmp_path(const char *suffix) {
  if (fuzz_tmp_count == FUZZ_MAX_TMP) abort();
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  char *p = fuzz_tmp_paths[fuzz_tmp_count];
  snprintf(p, sizeof fuzz_tmp_paths[0], "%s/al_fuzz_XXXXXX%s", dir, suffix);
  int fd = mkstemps(p, (int)strlen(suffix));
  if (fd < 0) {
    perror("fuzz: mkstemps");
    abort();
  }
  close(fd);
  if (fuzz_tmp_count++ == 0) atexit(fuzz_tmp_cleanup);
  return p;
}

static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) {
    perror("fuzz: fopen");
    abort();
  }
  if (size && fwrite(data, 1, size, f) != size) abort();
  if (fclose(f) != 0) abort();
}

/* Writes `data` as one LZ4 frame with block and content checksums, as
 * proto/pbio.c writes its files. */
static inline void fuzz_write_lz4(const char *path, const uint8_t *data, size_t size) {
  LZ4F_preferences_t prefs;
  memset(&prefs, 0, sizeof prefs);
  prefs.frameInfo.blockMode = LZ4F_blockLinked;
  prefs.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  prefs.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
  size_t cap = LZ4F_compressFrameBound(size, &prefs);
  void *buf = malloc(cap ? cap : 1);
  if (!buf) abort();
  size_t n = LZ4F_compressFrame(buf, cap, data, size, &prefs);
  if (LZ4F_isError(n)) abort();
  fuzz_write_file(path, buf, n);
  free(buf);
}

/* Container harnesses: byte 0 bit 0 clear = the rest is the decompressed
 * stream (wrapped in a valid LZ4 frame here); set = the rest is the file as is. */
static inline void fuzz_write_container(const char *path, const uint8_t *data, size_t size) {
  if (size == 0) {
    fuzz_write_file(path, data, 0);
  } else if (data[0] & 1) {
    fuzz_write_file(path, data + 1, size - 1);
  } else {
    fuzz_write_lz4(path, data + 1, size - 1);
  }
}

#endif /* AL_FUZZ_COMMON_H */
