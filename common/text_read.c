/* Text inputs read whole; see text_read_internal.h. */
#include "common/text_read_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/al_status.h"
#include "common/atomic_file_internal.h"
#include "common/grow_internal.h"

int text_is_json(const char *text, size_t len) {
  size_t i = 0;
  while (i < len && isspace((unsigned char)text[i])) i++;
  return i < len && text[i] == '{';
}

int text_json_parse(const char *text, size_t len, const char *name, json_t **root) {
  json_error_t err;
  *root = json_loadb(text, len, 0, &err);
  if (!*root)
    return al_set_error(AL_EFORMAT, "%s: line %d column %d: broken JSON: %s", name, err.line,
                        err.column, err.text);
  return AL_OK;
}

int text_read_file(const char *path, size_t max_bytes, const char *what, char **out,
                   size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  FILE *f;
  int rc = afile_fopen_input(path, what, &f); /* a FIFO or device is refused, not waited on */
  /* A missing file stays AL_EIO, as these loaders have always documented it. */
  if (rc == AL_ENOTFOUND) return al_set_error(AL_EIO, "%s: %s", path, strerror(ENOENT));
  if (rc) return rc;
  char *buf = NULL;
  size_t cap = 0, n = 0;
  while (rc == AL_OK) {
    if (n >= max_bytes) {
      rc = al_set_error(AL_ERANGE, "%s: %s larger than %zu MiB", path, what, max_bytes >> 20);
      break;
    }
    if (n == cap) {
      size_t want = cap ? cap * 2 : 65536;
      if (want > max_bytes) want = max_bytes;
      rc = grow_resize((void **)&buf, want, 1, path);
      if (rc) break;
      cap = want;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      if (ferror(f)) rc = al_set_error(AL_EIO, "%s: read failed: %s", path, strerror(errno));
      break;
    }
  }
  fclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  *out_len = n;
  return AL_OK;
}

int text_json_num(json_t *o, const char *k1, const char *k2, double *out) {
  json_t *v = json_object_get(o, k1);
  if (!v && k2) v = json_object_get(o, k2);
  if (!v) return 1;
  if (!json_is_number(v)) return -1;
  *out = json_number_value(v);
  return 0;
}
