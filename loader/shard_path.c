/* The absolute, normal path a shard is stored under; see shard_path_internal.h. */
#include "common/env_internal.h"
#include "loader/shard_path_internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/al_status.h"
#include "common/url_internal.h"
#include "storage/client_internal.h"
#include "storage/storage_internal.h"

/* Whether a and b name the same existing file. */
static int same_file(const char *a, const char *b) {
  struct stat x, y;
  return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The working directory as the user named it: $PWD when absolute and the same directory as
 * ".", else getcwd. A malloc'ed string, or NULL. */
static char *logical_cwd(void) {
  const char *pwd = env_text("PWD");
  if (pwd && pwd[0] == '/' && same_file(pwd, ".")) return strdup(pwd);
  char cwd[PATH_MAX];
  return getcwd(cwd, sizeof cwd) ? strdup(cwd) : NULL;
}

/* Rewrites the absolute path `s` in place: "." and empty components dropped, ".." removing
 * the component before it (at the root, nothing). */
static void lexical_normal(char *s) {
  size_t out = 0; /* s[0..out) is the result so far, "" or "/a/b" */
  const char *p = s;
  while (*p) {
    while (*p == '/') p++;
    const char *e = p;
    while (*e && *e != '/') e++;
    size_t n = (size_t)(e - p);
    if (n == 0 || (n == 1 && p[0] == '.')) {
      /* nothing */
    } else if (n == 2 && p[0] == '.' && p[1] == '.') {
      while (out > 0 && s[out - 1] != '/') out--;
      if (out > 0) out--; /* the slash before the removed component */
    } else {
      s[out++] = '/';
      memmove(s + out, p, n);
      out += n;
    }
    p = e;
  }
  if (out == 0) s[out++] = '/';
  s[out] = '\0';
}

char *shard_path_url_normal(const char *url) {
  int http = storage_url_kind(url) == STORAGE_HTTP;
  size_t scheme = url_scheme_len(url), at = 0, user = url_userinfo(url, &at);
  const char *h = url + scheme + user; /* the host (s3://: the bucket) */
  size_t hl = strcspn(h, "/?#"), rest = strlen(h + hl);
  char *s = malloc(scheme + hl + rest + 1);
  if (!s) return NULL;
  for (size_t i = 0; i < scheme; i++) s[i] = (char)tolower((unsigned char)url[i]);
  for (size_t i = 0; i < hl; i++) s[scheme + i] = http ? (char)tolower((unsigned char)h[i]) : h[i];
  memcpy(s + scheme + hl, h + hl, rest + 1);
  return s;
}

const char *shard_path_name(const char *path, size_t *len) {
  const char *end = path + storage_url_identity_len(path), *base = end;
  while (base > path && base[-1] != '/') base--;
  *len = (size_t)(end - base);
  return base;
}

int shard_path_check_userinfo(const char *path, const char *where) {
  if (url_userinfo(path, NULL) == 0) return AL_OK;
  char *shown = url_redact(path);
  int rc = al_set_error(AL_EINVAL,
                        "%s%s%s: a URL with user:password@ is refused: shard paths are stored in the index and named in messages, credentials must be neither; serve the shards without them",
                        where ? where : "", where ? ": " : "", shown ? shown : "URL");
  free(shown);
  return rc;
}

char *shard_path_absolute(const char *path) {
  char *s;
  if (storage_url_kind(path)) return shard_path_url_normal(path);
  if (path[0] == '/') {
    s = strdup(path);
  } else {
    char *cwd = logical_cwd();
    if (!cwd) return strdup(path); /* no working directory: kept as given */
    size_t a = strlen(cwd), b = strlen(path);
    s = malloc(a + b + 2);
    if (s) {
      memcpy(s, cwd, a);
      s[a] = '/';
      memcpy(s + a + 1, path, b + 1);
    }
    free(cwd);
  }
  if (!s) return NULL;
  lexical_normal(s);
  struct stat st;
  if (stat(path, &st) == 0 && !same_file(s, path)) {
    char *real = realpath(path, NULL); /* a ".." after a symlink: the file system's answer */
    if (real) {
      free(s);
      s = real;
    }
  }
  return s;
}
