/*
 * storage/s3_list.c - the objects under an S3 prefix: ListObjectsV2 pages (list-type=2),
 * followed through their continuation tokens, each retried like any request.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/url_internal.h"
#include "storage/http_internal.h"
#include "storage/storage_internal.h"

#define LIST_BODY_MAX (64u << 20)

static int add_entry(storage_listing *l, size_t *cap, const char *bucket, const char *key,
                     uint64_t size, const char *etag) {
  if (l->count == *cap) {
    size_t n = *cap ? *cap * 2 : 64;
    storage_entry *e = realloc(l->entries, n * sizeof *e);
    if (e == NULL) return -1;
    l->entries = e;
    *cap = n;
  }
  storage_entry *e = &l->entries[l->count];
  memset(e, 0, sizeof *e);
  if (asprintf(&e->url, "s3://%s/%s", bucket, key) < 0) return e->url = NULL, -1;
  e->size = size;
  if ((e->etag = strdup(etag ? etag : "")) == NULL) return free(e->url), -1;
  l->count++;
  return 0;
}

/* The <Contents> of one page; *token receives NextContinuationToken when truncated. AL_OK, or
 * AL_EFORMAT "NAME: listing: ..." (name: the page's, for the message). */
static int parse_page(const char *body, size_t n, const char *bucket, storage_listing *l,
                      size_t *cap, char **token, const char *name) {
  const char *p = body, *end = body + n;
  *token = NULL;
  if (memmem(body, n, "<ListBucketResult", 17) == NULL)
    return al_set_error(AL_EFORMAT, "%s: listing: not a ListBucketResult document", name);
  const char *c, *ce;
  while (storage_xml_span(p, end, "Contents", &c, &ce) == 0) {
    char *key = storage_xml_text(c, ce, "Key", NULL);
    char *size = storage_xml_text(c, ce, "Size", NULL);
    char *etag = storage_xml_text(c, ce, "ETag", NULL);
    char *q = NULL;
    uint64_t sz = size ? strtoull(size, &q, 10) : 0;
    int ok = key && size && q && *q == '\0' && size[0] >= '0' && size[0] <= '9' &&
             add_entry(l, cap, bucket, key, sz, etag) == 0;
    free(key), free(size), free(etag);
    if (!ok)
      return al_set_error(AL_EFORMAT, "%s: listing: a <Contents> without a Key or a Size", name);
    p = ce + strlen("</Contents>");
  }
  char *trunc = storage_xml_text(body, end, "IsTruncated", NULL);
  int more = trunc && strcmp(trunc, "true") == 0;
  free(trunc);
  if (!more) return AL_OK;
  *token = storage_xml_text(body, end, "NextContinuationToken", NULL);
  if (*token == NULL || (*token)[0] == '\0') {
    free(*token);
    *token = NULL;
    return al_set_error(AL_EFORMAT, "%s: listing: truncated without a NextContinuationToken", name);
  }
  return AL_OK;
}

/* The page's URL: query parameters in the order SigV4 signs them (sorted by name). */
static char *page_url(const storage_client *c, const char *bucket, const char *prefix,
                      const char *token) {
  char *p = storage_pct_encode(prefix, 0);
  char *t = token ? storage_pct_encode(token, 0) : NULL;
  char *q = NULL, *url = NULL;
  char max[32] = "";
  if (c->cfg.list_max_keys > 0) snprintf(max, sizeof max, "&max-keys=%u", c->cfg.list_max_keys);
  if (p && (token == NULL || t)) {
    if (asprintf(&q, "?%s%s%slist-type=2%s&prefix=%s", t ? "continuation-token=" : "", t ? t : "",
                 t ? "&" : "", max, p) < 0) {
      q = NULL;
    }
  }
  if (q) url = storage_s3_bucket_url(c, bucket, q);
  free(p), free(t), free(q);
  return url;
}

/* One page, retried; its body in x on success. */
static int get_page(storage_client *c, CURL *h, storage_target *t, storage_xfer *x,
                    storage_counts *st) {
  storage_retry r;
  storage_retry_start(c, &r);
  x->deadline = r.deadline;
  char msg[768];
  for (;;) {
    r.attempts++;
    st->requests++;
    int v = storage_xfer_perform(c, h, t, x, msg, sizeof msg);
    if (v == STORAGE_XFER_OK) return AL_OK;
    if (v == STORAGE_XFER_FATAL) return al_set_error(AL_EIO, "%s: %s", t->name, msg);
    if (storage_retry_wait(c, &r, x->retry_after) != 0) {
      return al_set_error(AL_EIO, "%s: gave up after %d attempts; last error: %s", t->name,
                          r.attempts, msg);
    }
    st->retries++;
  }
}

/* The continuation tokens a listing has followed: a server that hands one out again would
 * have the listing go round for ever. */
typedef struct token_set {
  char **v;
  uint64_t *hash;
  size_t n, cap;
} token_set;

static uint64_t token_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static int token_seen(const token_set *ts, const char *t, uint64_t h) {
  for (size_t i = 0; i < ts->n; i++)
    if (ts->hash[i] == h && strcmp(ts->v[i], t) == 0) return 1;
  return 0;
}

/* Adds t (copied): 1 when it was there already, -1 when out of memory, else 0. */
static int token_add(token_set *ts, const char *t) {
  uint64_t h = token_hash(t);
  if (token_seen(ts, t, h)) return 1;
  if (ts->n == ts->cap) {
    size_t n = ts->cap ? 2 * ts->cap : 16;
    char **v = realloc(ts->v, n * sizeof *v);
    if (v != NULL) ts->v = v;
    uint64_t *hs = v ? realloc(ts->hash, n * sizeof *hs) : NULL;
    if (hs == NULL) return -1;
    ts->hash = hs;
    ts->cap = n;
  }
  if ((ts->v[ts->n] = strdup(t)) == NULL) return -1;
  ts->hash[ts->n++] = h;
  return 0;
}

static void token_set_free(token_set *ts) {
  for (size_t i = 0; i < ts->n; i++) free(ts->v[i]);
  free(ts->v);
  free(ts->hash);
}

/* A listing's state between pages. */
typedef struct pager {
  const char *url, *bucket, *prefix;
  size_t cap;     /* of the listing's entries */
  char *token;    /* the next page's, NULL: the first page, or none after the last */
  token_set seen; /* every token followed */
  uint64_t pages;
} pager;

/* The token of the page just read, when there is one: refused when it came before. */
static int check_token(pager *pg, const storage_target *t) {
  int again = pg->token != NULL ? token_add(&pg->seen, pg->token) : 0;
  if (again < 0) return al_set_error(AL_ENOMEM, "%s: out of memory", t->name);
  if (again == 0) return AL_OK;
  return al_set_error(AL_EFORMAT,
                      "%s: listing: page %" PRIu64
                      " sent continuation token '%.200s' again, which would repeat the listing for ever",
                      t->name, pg->pages, pg->token);
}

/* One page: its entries into out, pg->token the next page's token (NULL: the last page). */
static int list_page(storage_client *c, CURL *h, pager *pg, storage_listing *out,
                     storage_counts *st) {
  storage_target t = {0};
  t.s3 = 1;
  t.http = page_url(c, pg->bucket, pg->prefix, pg->token);
  free(pg->token);
  pg->token = NULL;
  if (t.http == NULL || asprintf(&t.name, "%s (%s)", pg->url, t.http) < 0) {
    free(t.http);
    return al_set_error(AL_ENOMEM, "%s: out of memory", pg->url);
  }
  storage_xfer x = {0};
  x.body_max = LIST_BODY_MAX;
  pg->pages++;
  int rc = get_page(c, h, &t, &x, st);
  if (rc == AL_OK)
    rc = parse_page(x.body ? x.body : "", x.body_len, pg->bucket, out, &pg->cap, &pg->token,
                    t.name);
  if (rc == AL_OK) rc = check_token(pg, &t);
  storage_xfer_free(&x);
  storage_target_free(&t);
  return rc;
}

static int list_pages(storage_client *c, CURL *h, const char *url, const char *bucket,
                      const char *prefix, storage_listing *out, storage_counts *st) {
  pager pg = {.url = url, .bucket = bucket, .prefix = prefix};
  int rc;
  do {
    rc = list_page(c, h, &pg, out, st);
  } while (rc == AL_OK && pg.token != NULL);
  free(pg.token);
  token_set_free(&pg.seen);
  return rc;
}

int storage_s3_list(storage_client *c, const char *url, storage_listing *out,
                    storage_counts *stats) {
  memset(out, 0, sizeof *out);
  storage_counts st = {0};
  if (storage_url_kind(url) != STORAGE_S3 || url_userinfo(url, NULL) > 0) {
    char *shown = url_redact(url);
    int rc = al_set_error(AL_EINVAL,
                          "%s: only s3://BUCKET/PREFIX URLs (no user:password@) can be listed",
                          shown ? shown : "URL");
    free(shown);
    return rc;
  }
  const char *b = url + 5, *slash = strchr(b, '/');
  size_t bl = slash ? (size_t)(slash - b) : strlen(b);
  if (bl == 0) return al_set_error(AL_EINVAL, "%s: no bucket name", url);
  char *bucket = strndup(b, bl);
  CURL *h = curl_easy_init();
  int rc = bucket == NULL || h == NULL
               ? al_set_error(AL_ENOMEM, "%s: out of memory", url)
               : list_pages(c, h, url, bucket, slash ? slash + 1 : "", out, &st);
  if (h) curl_easy_cleanup(h);
  free(bucket);
  if (rc != AL_OK) storage_listing_free(out);
  if (stats) *stats = st;
  return rc;
}

void storage_listing_free(storage_listing *l) {
  for (size_t i = 0; i < l->count; i++) free(l->entries[i].url), free(l->entries[i].etag);
  free(l->entries);
  memset(l, 0, sizeof *l);
}
