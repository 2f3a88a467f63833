/* Crash-safe writes (temporary file, fsync, rename, fsync of the directory)
 * and non-blocking input opens; see atomic_file_internal.h. */
#include "common/atomic_file_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct afile {
  char *path; /* the target */
  char *tmp;  /* the temporary file beside it */
  char *dir;  /* the target's directory (for its fsync) */
  FILE *f;
};

static atomic_uint_fast64_t g_counter;

const char *afile_kind_name(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISREG(mode)) return "a regular file";
  return "not a regular file";
}

static void afile_free(afile *f) {
  if (!f) return;
  if (f->f) fclose(f->f);
  free(f->path);
  free(f->tmp);
  free(f->dir);
  free(f);
}

int afile_create(afile **out, const char *path) {
  if (!out || !path || !*path) return al_set_error(AL_EINVAL, "afile_create: NULL or empty path");
  *out = NULL;
  /* Follows a symlink at the target on purpose: "-o link-to-/dev/null" is refused too. */
  struct stat st;
  int have_old = stat(path, &st) == 0;
  if (have_old && !S_ISREG(st.st_mode))
    return al_set_error(AL_EINVAL, "%s: is %s, not a regular file: refusing to replace it", path,
                        afile_kind_name(st.st_mode));
  if (!have_old && errno != ENOENT)
    return al_set_error(AL_EIO, "%s: cannot write: %s", path, strerror(errno));
  afile *f = calloc(1, sizeof *f);
  if (!f) return al_set_error(AL_ENOMEM, "%s: out of memory", path);
  size_t plen = strlen(path);
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t dlen = slash ? (size_t)(slash - path) : 0;
  f->path = strdup(path);
  f->dir = malloc(dlen + 2);
  f->tmp = malloc(plen + 96);
  if (!f->path || !f->dir || !f->tmp) {
    afile_free(f);
    return al_set_error(AL_ENOMEM, "%s: out of memory", path);
  }
  if (!slash)
    strcpy(f->dir, ".");
  else if (dlen == 0)
    strcpy(f->dir, "/");
  else {
    memcpy(f->dir, path, dlen);
    f->dir[dlen] = '\0';
  }
  mode_t mode = have_old ? (st.st_mode & 07777) : 0666;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t n = atomic_fetch_add(&g_counter, 1);
    uint64_t r = ((uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uintptr_t)f << 7) ^
                 (n * 0xBF58476D1CE4E5B9ull);
    snprintf(f->tmp, plen + 96, "%.*s.%s.%ld.%llu.%08llx.tmp", (int)(base - path), path, base,
             (long)getpid(), (unsigned long long)n, (unsigned long long)(r >> 32));
    fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    int e = errno;
    al_set_error(AL_EIO, "%s: cannot create a temporary file in '%s': %s", path, f->dir,
                 strerror(e));
    afile_free(f);
    return AL_EIO;
  }
  /* Keep the replaced file's mode (umask applied to new files only). */
  if (have_old) (void)fchmod(fd, mode);
  f->f = fdopen(fd, "wb");
  if (!f->f) {
    int e = errno;
    close(fd);
    unlink(f->tmp);
    al_set_error(AL_EIO, "%s: %s", f->tmp, strerror(e));
    afile_free(f);
    return AL_EIO;
  }
  *out = f;
  return AL_OK;
}

FILE *afile_stream(afile *f) { return f ? f->f : NULL; }
const char *afile_tmp_path(const afile *f) { return f ? f->tmp : ""; }

void afile_abort(afile *f) {
  if (!f) return;
  if (f->f) {
    fclose(f->f);
    f->f = NULL;
  }
  unlink(f->tmp);
  afile_free(f);
}

int afile_commit(afile *f) {
  if (!f) return al_set_error(AL_EINVAL, "afile_commit: NULL file");
  int rc = AL_OK;
  if (fflush(f->f) != 0 || ferror(f->f))
    rc = al_set_error(AL_EIO, "%s: write failed: %s", f->tmp, strerror(errno));
  if (!rc && fsync(fileno(f->f)) != 0 && errno != EINVAL && errno != EROFS)
    rc = al_set_error(AL_EIO, "%s: fsync failed: %s", f->tmp, strerror(errno));
  int c = fclose(f->f);
  f->f = NULL;
  if (!rc && c != 0) rc = al_set_error(AL_EIO, "%s: close failed: %s", f->tmp, strerror(errno));
  if (!rc) {
    /* The target may have become a device or directory since afile_create. */
    struct stat st;
    if (stat(f->path, &st) == 0 && !S_ISREG(st.st_mode))
      rc = al_set_error(AL_EINVAL, "%s: is %s, not a regular file: refusing to replace it", f->path,
                        afile_kind_name(st.st_mode));
  }
  if (!rc && rename(f->tmp, f->path) != 0)
    rc = al_set_error(AL_EIO, "%s: rename from %s failed: %s", f->path, f->tmp, strerror(errno));
  if (rc) {
    unlink(f->tmp);
    afile_free(f);
    return rc;
  }
  int dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    if (fsync(dfd) != 0 && errno != EINVAL && errno != EROFS)
      rc = al_set_error(AL_EIO, "%s: fsync of directory '%s' failed: %s", f->path, f->dir,
                        strerror(errno));
    close(dfd);
  }
  afile_free(f);
  return rc;
}

int afile_finish(afile *f, int rc) {
  if (rc == AL_OK) return afile_commit(f);
  afile_abort(f);
  return rc;
}

int afile_write_all(const char *path, const void *buf, size_t len) {
  afile *f = NULL;
  int rc = afile_create(&f, path);
  if (rc) return rc;
  if (len && fwrite(buf, 1, len, afile_stream(f)) != len)
    rc = al_set_error(AL_EIO, "%s: write failed: %s", afile_tmp_path(f), strerror(errno));
  return afile_finish(f, rc);
}

int afile_open_input(const char *path, const char *what, int *fd) {
  *fd = -1;
  if (!path) return al_set_error(AL_EINVAL, "afile_open_input: NULL path");
  const char *w = what ? what : "input";
  int d = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (d < 0) {
    int e = errno;
    return al_set_error(e == ENOENT ? AL_ENOTFOUND : AL_EIO, "%s: cannot open %s: %s", path, w,
                        strerror(e));
  }
  struct stat st;
  if (fstat(d, &st) != 0) {
    int e = errno;
    close(d);
    return al_set_error(AL_EIO, "%s: cannot stat %s: %s", path, w, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(d);
    return al_set_error(AL_EINVAL, "%s: %s is %s, not a regular file", path, w,
                        afile_kind_name(st.st_mode));
  }
  int fl = fcntl(d, F_GETFL);
  if (fl < 0 || fcntl(d, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(d);
    return al_set_error(AL_EIO, "%s: fcntl: %s", path, strerror(e));
  }
  *fd = d;
  return AL_OK;
}

int afile_fopen_input(const char *path, const char *what, FILE **out) {
  *out = NULL;
  int fd;
  int rc = afile_open_input(path, what, &fd);
  if (rc) return rc;
  *out = fdopen(fd, "rb");
  if (!*out) {
    int e = errno;
    close(fd);
    return al_set_error(AL_EIO, "%s: %s", path, strerror(e));
  }
  return AL_OK;
}
