/*
 * al_shard_expand: a SHARD argument is a file, a directory (its *.tar* files,
 * sorted bytewise, not recursive) or a brace pattern as WebDataset and
 * braceexpand write them: "shard-{000000..000099}.tar" (zero padding follows
 * the width of the bounds), "{a,b,c}", several groups per pattern. A plain path
 * that does not exist is passed through: the build records it as unreadable.
 * al_shard_expand_remote also lists s3:// prefixes (ListObjectsV2).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/grow_internal.h"
#include "loader/al_index.h"
#include "storage/client_internal.h"
#include "loader/shard_path_internal.h"
#include "storage/storage_internal.h"

#define MAX_EXPANSION 10000000u

typedef struct list {
  char ***paths;
  size_t *n;
  size_t cap;
} list;

static int push(list *L, char *s) {
  if (!s) return al_set_error(AL_ENOMEM, "out of memory");
  int rc = grow_array((void **)L->paths, &L->cap, *L->n + 1, sizeof **L->paths, "the shard list");
  if (rc) {
    free(s);
    return rc;
  }
  (*L->paths)[(*L->n)++] = s;
  return AL_OK;
}

static char *splice(const char *pre, size_t pre_len, const char *mid, size_t mid_len,
                    const char *post) {
  size_t post_len = strlen(post);
  char *s = malloc(pre_len + mid_len + post_len + 1);
  if (!s) return NULL;
  memcpy(s, pre, pre_len);
  memcpy(s + pre_len, mid, mid_len);
  memcpy(s + pre_len + mid_len, post, post_len + 1);
  return s;
}

static int is_number(const char *s, size_t n) {
  if (n == 0 || n > 18) return 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9') return 0;
  return 1;
}

static int expand_braces(list *L, const char *pat, const char *arg, size_t *budget);

/* Expands the first {...} group of `pat`, recursing on the rest. */
static int expand_group(list *L, const char *pat, const char *open, const char *close,
                        const char *arg, size_t *budget) {
  const char *body = open + 1;
  size_t blen = (size_t)(close - body);
  const char *dots = NULL;
  for (size_t i = 0; i + 1 < blen; i++)
    if (body[i] == '.' && body[i + 1] == '.') {
      dots = body + i;
      break;
    }
  if (dots) {
    size_t alen = (size_t)(dots - body), zlen = blen - alen - 2;
    const char *z = dots + 2;
    if (!is_number(body, alen) || !is_number(z, zlen))
      return al_set_error(AL_EINVAL,
                          "%s: bad range {%.*s}: expected {FIRST..LAST} with decimal numbers", arg,
                          (int)blen, body);
    long long a = strtoll(body, NULL, 10), b = strtoll(z, NULL, 10);
    int width = (body[0] == '0' && alen > 1) || alen == zlen ? (int)alen : 0;
    long long step = a <= b ? 1 : -1;
    unsigned long long count = (unsigned long long)(a <= b ? b - a : a - b) + 1;
    if (count > *budget)
      return al_set_error(AL_ERANGE, "%s: pattern expands to more than %u paths", arg,
                          MAX_EXPANSION);
    for (long long v = a;; v += step) {
      char num[32];
      int k = snprintf(num, sizeof num, "%0*lld", width, v);
      char *next = splice(pat, (size_t)(open - pat), num, (size_t)k, close + 1);
      if (!next) return al_set_error(AL_ENOMEM, "out of memory");
      int rc = expand_braces(L, next, arg, budget);
      free(next);
      if (rc) return rc;
      if (v == b) break;
    }
    return AL_OK;
  }
  const char *p = body;
  for (;;) {
    const char *comma = memchr(p, ',', (size_t)(close - p));
    const char *end = comma ? comma : close;
    char *next = splice(pat, (size_t)(open - pat), p, (size_t)(end - p), close + 1);
    if (!next) return al_set_error(AL_ENOMEM, "out of memory");
    int rc = expand_braces(L, next, arg, budget);
    free(next);
    if (rc) return rc;
    if (!comma) break;
    p = comma + 1;
  }
  return AL_OK;
}

static int expand_braces(list *L, const char *pat, const char *arg, size_t *budget) {
  const char *open = strchr(pat, '{');
  if (!open) {
    if (*budget == 0)
      return al_set_error(AL_ERANGE, "%s: pattern expands to more than %u paths", arg,
                          MAX_EXPANSION);
    (*budget)--;
    return push(L, strdup(pat));
  }
  const char *close = strchr(open, '}');
  const char *nested = strchr(open + 1, '{');
  if (!close || (nested && nested < close))
    return al_set_error(AL_EINVAL, "%s: unbalanced or nested braces", arg);
  return expand_group(L, pat, open, close, arg, budget);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int expand_dir(list *L, const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return al_set_error(AL_EIO, "%s: cannot list directory: %s", dir, strerror(errno));
  size_t first = *L->n;
  size_t dlen = strlen(dir);
  while (dlen > 1 && dir[dlen - 1] == '/') dlen--;
  struct dirent *e;
  int rc = AL_OK;
  while (!rc && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || !strstr(e->d_name, ".tar")) continue;
    size_t nl = strlen(e->d_name);
    char *p = malloc(dlen + nl + 2);
    if (!p) {
      rc = al_set_error(AL_ENOMEM, "out of memory");
      break;
    }
    memcpy(p, dir, dlen);
    p[dlen] = '/';
    memcpy(p + dlen + 1, e->d_name, nl + 1);
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
      free(p);
      continue;
    }
    rc = push(L, p);
  }
  closedir(d);
  if (rc) return rc;
  if (*L->n == first) return al_set_error(AL_ENOTFOUND, "%s: no *.tar* files in directory", dir);
  qsort(*L->paths + first, *L->n - first, sizeof(char *), cmp_str);
  return AL_OK;
}

int al_shard_expand(const char *arg, char ***paths, size_t *n) {
  if (!arg || !paths || !n) return al_set_error(AL_EINVAL, "al_shard_expand: NULL argument");
  if (!*arg) return al_set_error(AL_EINVAL, "empty shard argument");
  int urc = shard_path_check_userinfo(arg, NULL);
  if (urc) return urc;
  list L = {paths, n, *n};
  size_t before = *n;
  struct stat st;
  int rc;
  if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
    rc = expand_dir(&L, arg);
  } else if (strchr(arg, '{') && stat(arg, &st) != 0) {
    size_t budget = MAX_EXPANSION;
    rc = expand_braces(&L, arg, arg, &budget);
  } else {
    rc = push(&L, strdup(arg));
  }
  if (rc) {
    for (size_t i = before; i < *n; i++) free((*paths)[i]);
    *n = before;
  }
  return rc;
}

/* Whether an s3:// URL names a prefix to list: its last component has no ".tar". */
static int s3_is_prefix(const char *url) {
  const char *key = strchr(url + 5, '/');
  if (!key) return 1; /* s3://bucket */
  const char *base = strrchr(key, '/') + 1;
  return strstr(base, ".tar") == NULL;
}

static int has_tar_suffix(const char *s) {
  static const char *const ok[] = {".tar",     ".tar.gz",  ".tar.lz4",
                                   ".tar.zst", ".tar.bz2", ".tar.xz"};
  size_t n = strlen(s);
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    size_t k = strlen(ok[i]);
    if (n > k && !strcmp(s + n - k, ok[i])) return 1;
  }
  return 0;
}

/* The tar objects (*.tar, *.tar.gz, *.tar.lz4, *.tar.zst, *.tar.bz2, *.tar.xz) under an
 * s3:// prefix, sorted, appended to L. */
static int expand_s3_prefix(list *L, storage_client *c, const char *url) {
  storage_listing l;
  storage_counts st;
  if (storage_list(c, url, &l, &st) != AL_OK) return AL_EIO;
  size_t first = *L->n;
  int rc = AL_OK;
  for (size_t i = 0; i < l.count && !rc; i++)
    if (has_tar_suffix(l.entries[i].url)) rc = push(L, strdup(l.entries[i].url));
  storage_listing_free(&l);
  if (rc) return rc;
  if (*L->n == first)
    return al_set_error(AL_ENOTFOUND,
                        "%s: no *.tar, *.tar.gz, *.tar.lz4, *.tar.zst, *.tar.bz2 or *.tar.xz objects under this prefix",
                        url);
  qsort(*L->paths + first, *L->n - first, sizeof(char *), cmp_str);
  return AL_OK;
}

int al_shard_expand_remote(const char *arg, const char *s3_endpoint, char ***paths, size_t *n) {
  al_storage_options st = {.s3_endpoint = s3_endpoint};
  return al_shard_expand_storage(arg, &st, paths, n);
}

int al_shard_expand_storage(const char *arg, const al_storage_options *storage, char ***paths,
                            size_t *n) {
  if (!arg || !paths || !n)
    return al_set_error(AL_EINVAL, "al_shard_expand_storage: NULL argument");
  if (!storage_url_kind(arg)) return al_shard_expand(arg, paths, n);
  int urc = shard_path_check_userinfo(arg, NULL);
  if (urc) return urc;
  char **items = NULL;
  size_t count = 0, before = *n;
  list T = {&items, &count, 0};
  size_t budget = MAX_EXPANSION;
  int rc = strchr(arg, '{') ? expand_braces(&T, arg, arg, &budget) : push(&T, strdup(arg));
  storage_client *c = NULL;
  list L = {paths, n, *n};
  for (size_t i = 0; i < count && !rc; i++) {
    if (storage_url_kind(items[i]) == STORAGE_S3 && s3_is_prefix(items[i])) {
      if (!c) {
        al_storage_options used;
        al_storage_resolve(storage, NULL, &used, NULL);
        storage_config cfg;
        rc = storage_config_make(used.s3_endpoint, used.s3_region, used.s3_addressing,
                                 used.remote_timeout_s, &cfg);
        if (rc == AL_OK) rc = storage_client_open(&cfg, &c);
        if (rc != AL_OK) {
          rc = AL_EINVAL;
          break;
        }
      }
      rc = expand_s3_prefix(&L, c, items[i]);
    } else {
      rc = push(&L, items[i]);
      items[i] = NULL;
    }
  }
  storage_client_close(c);
  for (size_t i = 0; i < count; i++) free(items[i]);
  free(items);
  if (rc) {
    for (size_t i = before; i < *n; i++) free((*paths)[i]);
    *n = before;
  }
  return rc;
}
