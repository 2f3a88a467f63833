/*
 * al_shard_expand: a SHARD argument is a file, a directory (its *.tar* files,
 * sorted bytewise, not recursive) or a brace pattern as WebDataset and
 * braceexpand write them: "shard-{000000..000099}.tar" (zero padding follows
 * the width of the bounds), "{a,b,c}", several groups per pattern. A plain path
 * that does not exist is passed through: the build records it as unreadable.
 * al_shard_expand_remote also lists s3:// prefixes (ListObjectsV2). What a name is and
 * what a container holds come from storage (storage_lookup, storage_is_prefix,
 * storage_list_shards); the patterns are this file's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow_internal.h"
#include "loader/al_index.h"
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

/* Appends the tar shards of a container (a directory, an s3:// prefix: storage_list_shards,
 * sorted), opening the client of *c first for a server's. */
static int expand_container(list *L, storage_client **c, const al_storage_options *storage,
                            const char *path) {
  if (!*c && storage_ops_for(path)->remote) {
    al_storage_options used;
    al_storage_resolve(storage, NULL, &used, NULL);
    storage_config cfg;
    int rc = storage_config_make(used.s3_endpoint, used.s3_region, used.s3_addressing,
                                 used.remote_timeout_s, &cfg);
    if (rc == AL_OK) rc = storage_client_open(&cfg, c);
    if (rc != AL_OK) return AL_EINVAL;
  }
  storage_listing l;
  int rc = storage_list_shards(*c, path, &l);
  for (size_t i = 0; i < l.count && !rc; i++) {
    rc = push(L, l.entries[i].url);
    l.entries[i].url = NULL;
  }
  storage_listing_free(&l);
  return rc;
}

/* One item: a container (a directory, or with `prefixes` an s3:// prefix) listed, anything else
 * taken as it is. */
static int expand_item(list *L, storage_client **c, const al_storage_options *storage,
                       const char *item, int prefixes) {
  if (prefixes && storage_is_prefix(item)) return expand_container(L, c, storage, item);
  return push(L, strdup(item));
}

/* arg: a name that exists is taken as it is (a file, or a directory listed: storage_lookup,
 * which a URL has not: finding out would take a request); else a brace pattern expands, its
 * items taken as they are, or with `prefixes` s3:// prefixes among them listed. */
static int expand(const char *arg, const al_storage_options *storage, int prefixes, char ***paths,
                  size_t *n) {
  if (!*arg) return al_set_error(AL_EINVAL, "empty shard argument");
  int urc = shard_path_check_userinfo(arg, NULL);
  if (urc) return urc;
  list L = {paths, n, *n};
  size_t before = *n;
  storage_client *c = NULL;
  storage_stat st;
  int rc, known = storage_lookup(arg, &st) == AL_OK;
  al_clear_error();
  if (known && st.type == STORAGE_CONTAINER) {
    rc = expand_container(&L, &c, storage, arg);
  } else if (known || !strchr(arg, '{')) {
    rc = expand_item(&L, &c, storage, arg, prefixes);
  } else {
    char **items = NULL;
    size_t count = 0, budget = MAX_EXPANSION;
    list T = {&items, &count, 0};
    rc = expand_braces(&T, arg, arg, &budget);
    for (size_t i = 0; i < count && !rc; i++) rc = expand_item(&L, &c, storage, items[i], prefixes);
    for (size_t i = 0; i < count; i++) free(items[i]);
    free(items);
  }
  storage_client_close(c);
  if (rc) {
    for (size_t i = before; i < *n; i++) free((*paths)[i]);
    *n = before;
  }
  return rc;
}

int al_shard_expand(const char *arg, char ***paths, size_t *n) {
  if (!arg || !paths || !n) return al_set_error(AL_EINVAL, "al_shard_expand: NULL argument");
  return expand(arg, NULL, 0, paths, n);
}

int al_shard_expand_remote(const char *arg, const char *s3_endpoint, char ***paths, size_t *n) {
  al_storage_options st = {.s3_endpoint = s3_endpoint};
  return al_shard_expand_storage(arg, &st, paths, n);
}

int al_shard_expand_storage(const char *arg, const al_storage_options *storage, char ***paths,
                            size_t *n) {
  if (!arg || !paths || !n)
    return al_set_error(AL_EINVAL, "al_shard_expand_storage: NULL argument");
  return expand(arg, storage, 1, paths, n);
}
