/*
 * storage/file_path.c - the name a local path is stored under (storage_ops.canonical of the
 * "file" backend): absolute and normal, no "." or ".." components, no repeated or trailing
 * slashes, so that al_index_remap_root (`stream --root FROM=TO`) can replace a leading
 * directory: "/data/errs/../corpus/s.tar" moved by /data=/local would name
 * "/local/errs/../corpus/s.tar", which exists only if /local has an errs/ as well.
 *
 * Normalisation is lexical, and symlinks are not resolved, so the names the user gave (a
 * symlinked mount such as /data -> /mnt/nvme0/data) stay in the index and a --root written
 * with them matches. A relative path is joined to the logical working directory ($PWD when
 * it names the working directory, as `pwd -L`; else getcwd). Lexical ".." differs from the
 * file system's when it follows a symlink ("/a/link/../s.tar"): when the lexical path does
 * not name the same file as the given one (device and inode), the realpath is stored.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env_internal.h"
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

char *storage_file_canonical(const char *path) {
  char *s;
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
