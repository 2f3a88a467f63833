/*
 * remote_probe - a command-line driver of //storage for the shell tests:
 *   remote_probe [-t TOTAL_S] [-s STALL_S] [-b BACKOFF_S] [-e ENDPOINT] [-k MAX_KEYS]
 *                [-w SYNC] head URL
 * (head, get, cat and tar open URL through storage_open: a local path works too)
 *   remote_probe [...] get URL OFF LEN OUT     bytes [OFF, OFF+LEN) to file OUT
 *   remote_probe [...] cat URL OUT CHUNK       the whole object, CHUNK bytes per read
 *   remote_probe [...] list URL                one "url size etag" line per object
 *   remote_probe [...] par URL THREADS OUT     the whole object, one slice per thread, each
 *                                              thread with its own object, one shared client
 *   remote_probe [...] tar URL BATCH           one "name data_offset size type" line per
 *                                              member, then "tar requests N fetched N"
 *   remote_probe [...] ranges LIST [crc]       each "URL OFF LEN" line of LIST read in order
 *                                              (an object opened when the URL changes; a
 *                                              local path read with pread, the baseline);
 *                                              prints "ranges N bytes N seconds S" and, with
 *                                              crc, "crc32 X" (IEEE, of the bytes in order)
 * -w SYNC: after the open, create SYNC.opened and wait for SYNC to exist before reading (the
 * test changes the object in between).
 * Prints the object's stats ("requests N retries N bytes N discarded N") on stderr; an error
 * goes to stderr with exit status 1.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock_internal.h"
#include "storage/client_internal.h"
#include "storage/tar_member_internal.h"
#include "storage/storage_internal.h"

static const char *g_sync;

static void sync_point(void) {
  if (g_sync == NULL) return;
  char opened[4096];
  snprintf(opened, sizeof opened, "%s.opened", g_sync);
  FILE *f = fopen(opened, "w");
  if (f) fclose(f);
  for (int i = 0; i < 1000 && access(g_sync, F_OK) != 0; i++) usleep(10000);
}

static void print_stats(storage_counts s) {
  fprintf(stderr,
          "requests %" PRIu64 " retries %" PRIu64 " bytes %" PRIu64 " discarded %" PRIu64 "\n",
          s.requests, s.retries, s.bytes, s.discarded);
}

/* The failed storage call's message (al_last_error) into err; 1. */
static int storage_failed(char *err, size_t cap) {
  snprintf(err, cap, "%s", al_last_error());
  return 1;
}

static int write_file(const char *path, const void *buf, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(buf, 1, n, f) != n) return perror(path), -1;
  return fclose(f) == 0 ? 0 : -1;
}

static int cmd_object(storage_client *c, int argc, char **argv) {
  char err[1024];
  storage_obj *o;
  storage_stat st;
  if (storage_open(c, argv[1], &o) != AL_OK || storage_get_stat(o, &st) != AL_OK)
    return fprintf(stderr, "%s\n", al_last_error()), 1;
  int rc = 0;
  uint64_t size = st.size;
  sync_point();
  if (strcmp(argv[0], "head") == 0) {
    printf("size %" PRIu64 " etag %s\n", size, st.etag ? st.etag : "");
  } else if (strcmp(argv[0], "get") == 0 && argc == 5) {
    uint64_t off = strtoull(argv[2], NULL, 10);
    size_t len = strtoull(argv[3], NULL, 10);
    char *buf = malloc(len ? len : 1);
    memset(buf, 0xA5, len); /* poisoned: every byte must come from the server */
    rc = storage_read(o, off, buf, len) != AL_OK ? storage_failed(err, sizeof err) : 0;
    if (rc == 0) rc = write_file(argv[4], buf, len) != 0;
    free(buf);
  } else if (strcmp(argv[0], "cat") == 0 && argc == 4) {
    size_t chunk = strtoull(argv[3], NULL, 10);
    char *buf = malloc(size ? size : 1);
    memset(buf, 0xA5, size);
    for (uint64_t off = 0; rc == 0 && off < size; off += chunk) {
      size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
      rc = storage_read(o, off, buf + off, n) != AL_OK ? storage_failed(err, sizeof err) : 0;
    }
    if (rc == 0) rc = write_file(argv[2], buf, size) != 0;
    free(buf);
  } else if (strcmp(argv[0], "tar") == 0 && argc == 3) {
    storage_tar_listing l;
    rc = storage_tar_scan(o, strtoull(argv[2], NULL, 10), &l) != AL_OK
             ? storage_failed(err, sizeof err)
             : 0;
    for (size_t i = 0; rc == 0 && i < l.count; i++) {
      const storage_tar_member *m = &l.members[i];
      printf("%s %" PRIu64 " %" PRIu64 " %c\n", m->name, m->data_off, m->size, m->type);
    }
    if (rc == 0) printf("tar requests %" PRIu64 " fetched %" PRIu64 "\n", l.requests, l.fetched);
    storage_tar_listing_free(&l);
  } else {
    snprintf(err, sizeof err, "usage: bad arguments to %s", argv[0]);
    rc = 1;
  }
  if (rc != 0) fprintf(stderr, "%s\n", err);
  print_stats(storage_stats(o));
  storage_close(o);
  return rc;
}

typedef struct slice {
  storage_client *c;
  const char *url;
  char *buf;
  uint64_t off;
  size_t len;
  int rc;
  char err[1024];
} slice;

static void *read_slice(void *arg) {
  slice *s = arg;
  storage_http_object *o;
  s->rc = storage_http_open(s->c, s->url, &o);
  if (s->rc == AL_OK) {
    s->rc = storage_http_read(o, s->off, s->buf + s->off, s->len);
    storage_http_close(o);
  }
  if (s->rc != AL_OK) storage_failed(s->err, sizeof s->err); /* this thread's message */
  return NULL;
}

/* THREADS threads share c; the object's size comes from a first open. */
static int cmd_par(storage_client *c, const char *url, int threads, const char *out) {
  storage_http_object *o;
  if (threads < 1 || threads > 64) return fprintf(stderr, "par: 1 to 64 threads\n"), 1;
  if (storage_http_open(c, url, &o) != AL_OK) return fprintf(stderr, "%s\n", al_last_error()), 1;
  uint64_t size = storage_http_size(o);
  storage_http_close(o);
  char *buf = malloc(size ? size : 1);
  memset(buf, 0xA5, size);
  slice sl[64];
  pthread_t th[64];
  uint64_t step = size / (uint64_t)threads;
  for (int i = 0; i < threads; i++) {
    sl[i] = (slice){.c = c, .url = url, .buf = buf, .off = step * (uint64_t)i};
    sl[i].len = (size_t)(i == threads - 1 ? size - sl[i].off : step);
    pthread_create(&th[i], NULL, read_slice, &sl[i]);
  }
  int rc = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(th[i], NULL);
    if (sl[i].rc != 0) rc = 1, fprintf(stderr, "%s\n", sl[i].err);
  }
  if (rc == 0) rc = write_file(out, buf, size) != 0;
  free(buf);
  return rc;
}

static int cmd_list(storage_client *c, const char *url) {
  storage_listing l;
  storage_counts st;
  if (storage_s3_list(c, url, &l, &st) != AL_OK) {
    fprintf(stderr, "%s\n", al_last_error());
    print_stats(st);
    return 1;
  }
  for (size_t i = 0; i < l.count; i++) {
    printf("%s %" PRIu64 " %s\n", l.entries[i].url, l.entries[i].size, l.entries[i].etag);
  }
  print_stats(st);
  storage_listing_free(&l);
  return 0;
}

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n) {
  static uint32_t table[256];
  if (table[1] == 0) {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
  }
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* One source of ranges: a remote object or a local file, opened by storage_open. */
typedef struct source {
  char name[4096];
  storage_obj *o;
  storage_counts st; /* summed over closed objects */
} source;

static void source_close(source *s) {
  if (s->o) {
    storage_counts t = storage_stats(s->o);
    s->st.requests += t.requests, s->st.retries += t.retries;
    storage_close(s->o);
  }
  s->o = NULL, s->name[0] = '\0';
}

static int source_read(storage_client *c, source *s, const char *url, uint64_t off, char *buf,
                       size_t len, char *err, size_t cap) {
  if (!s->o || strcmp(s->name, url) != 0) {
    source_close(s);
    if (storage_open(c, url, &s->o) != AL_OK) return storage_failed(err, cap);
    snprintf(s->name, sizeof s->name, "%s", url);
  }
  return storage_read(s->o, off, buf, len) == AL_OK ? 0 : storage_failed(err, cap);
}

static int cmd_ranges(storage_client *c, const char *list, int crc) {
  FILE *f = fopen(list, "r");
  if (f == NULL) return perror(list), 1;
  source s = {0};
  char url[4096], err[1024];
  uint64_t off, len, total = 0, count = 0;
  uint32_t sum = 0;
  size_t cap = 0;
  char *buf = NULL;
  int rc = 0;
  double t0 = clock_now_s();
  while (rc == 0 && fscanf(f, "%4095s %" SCNu64 " %" SCNu64, url, &off, &len) == 3) {
    if (len > cap) {
      char *b = realloc(buf, len);
      if (b == NULL) return fprintf(stderr, "out of memory\n"), 1;
      buf = b, cap = len;
    }
    rc = source_read(c, &s, url, off, buf, (size_t)len, err, sizeof err) != 0;
    if (rc) fprintf(stderr, "%s\n", err);
    if (crc && rc == 0) sum = crc32_update(sum, (unsigned char *)buf, (size_t)len);
    total += len, count++;
  }
  source_close(&s);
  double dt = clock_now_s() - t0;
  fclose(f);
  free(buf);
  if (rc) return 1;
  printf("ranges %" PRIu64 " bytes %" PRIu64 " seconds %.3f\n", count, total, dt);
  if (crc) printf("crc32 %08x\n", sum);
  fprintf(stderr, "requests %" PRIu64 " retries %" PRIu64 "\n", s.st.requests, s.st.retries);
  return 0;
}

int main(int argc, char **argv) {
  double total = 0, stall = 0, backoff = 0;
  const char *endpoint = NULL;
  unsigned max_keys = 0;
  int opt;
  while ((opt = getopt(argc, argv, "t:s:b:e:k:w:")) != -1) {
    if (opt == 't') total = atof(optarg);
    if (opt == 's') stall = atof(optarg);
    if (opt == 'b') backoff = atof(optarg);
    if (opt == 'e') endpoint = optarg;
    if (opt == 'k') max_keys = (unsigned)atoi(optarg);
    if (opt == 'w') g_sync = optarg;
    if (opt == '?') return 2;
  }
  argc -= optind, argv += optind;
  if (argc < 2) return fprintf(stderr, "usage: remote_probe [opts] head|get|cat|list URL ...\n"), 2;
  storage_config cfg;
  storage_client *c;
  if (storage_config_make(endpoint, NULL, 0, total, &cfg) != AL_OK)
    return fprintf(stderr, "%s\n", al_last_error()), 1;
  if (stall > 0) cfg.stall_timeout_s = stall;
  if (backoff > 0) cfg.backoff_base_s = backoff;
  cfg.list_max_keys = max_keys;
  if (storage_client_open(&cfg, &c) != AL_OK) return fprintf(stderr, "%s\n", al_last_error()), 1;
  int rc;
  if (strcmp(argv[0], "ranges") == 0) {
    rc = cmd_ranges(c, argv[1], argc > 2 && strcmp(argv[2], "crc") == 0);
  } else if (strcmp(argv[0], "list") == 0) {
    rc = cmd_list(c, argv[1]);
  } else if (strcmp(argv[0], "par") == 0 && argc == 4) {
    rc = cmd_par(c, argv[1], atoi(argv[2]), argv[3]);
  } else {
    rc = cmd_object(c, argc, argv);
  }
  storage_client_close(c);
  return rc;
}
