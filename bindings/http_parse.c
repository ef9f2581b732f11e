/*
 * http_parse.c - requests and responses out of bytes, with http-parser 2.9
 * underneath.
 *
 * The parser's callbacks copy the pieces of one request into a
 * kv_http_request; on_message_complete pauses the parser, so one feed yields
 * at most one request and the caller learns exactly where the next one starts
 * (the server answers requests of a connection one at a time, in order).
 * Limits: the head is bounded by http-parser's HTTP_MAX_HEADER_SIZE (80 KiB,
 * answered with 431), the target by 64 KiB (414, the URL parser's offsets are
 * 16-bit) and the body by max_body (413, checked against Content-Length
 * before any body byte is read, and while chunks arrive).
 *
 * Responses (kv_hr, for the load client) are parsed in place: no callback
 * copies anything, the body is only framed, so a response costs the parser's
 * pass over its bytes and nothing else.
 */
#include "http_parse.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#define MAX_TARGET 65535

struct kv_hp {
  http_parser parser; /* first: callbacks get back to kv_hp from it */
  size_t max_body;
  kv_hp_head_fn on_head;
  void *ctx;
  kv_http_request *req;  /* being parsed */
  kv_http_request *done; /* complete and not yet taken */
  size_t url_len, name_len, value_len;
  int in_value; /* the last header callback was for a value */
  int status;   /* error status, 0 while the stream is fine */
  const char *why;
};

/* Append n bytes to the NUL-terminated *s of length *len; 0 on success. */
static int append(char **s, size_t *len, const char *data, size_t n) {
  char *p = realloc(*s, *len + n + 1);
  if (!p)
    return -1;
  memcpy(p + *len, data, n);
  *len += n;
  p[*len] = '\0';
  *s = p;
  return 0;
}

static char *dup_range(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = '\0';
  }
  return d;
}

void kv_http_request_free(kv_http_request *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->nheaders; i++) {
    free(r->headers[i].name);
    free(r->headers[i].value);
  }
  free(r->headers);
  free(r->url);
  free(r->path);
  free(r->query);
  free(r->body);
  free(r);
}

static kv_hp *hp_of(http_parser *parser) { return (kv_hp *)parser; }

/* Fail the stream from inside a callback: the parser stops at once. */
static int fail(kv_hp *p, int status, const char *why) {
  if (!p->status) {
    p->status = status;
    p->why = why;
  }
  return -1;
}

static int on_message_begin(http_parser *parser) {
  kv_hp *p = hp_of(parser);
  kv_http_request_free(p->req);
  p->req = calloc(1, sizeof *p->req);
  p->url_len = p->name_len = p->value_len = 0;
  p->in_value = 0;
  return p->req ? 0 : fail(p, 500, "out of memory");
}

static int on_url(http_parser *parser, const char *at, size_t n) {
  kv_hp *p = hp_of(parser);
  if (p->url_len + n > MAX_TARGET)
    return fail(p, 414, "request target too long");
  return append(&p->req->url, &p->url_len, at, n) ? fail(p, 500, "out of memory") : 0;
}

static int on_header_field(http_parser *parser, const char *at, size_t n) {
  kv_hp *p = hp_of(parser);
  kv_http_request *r = p->req;
  if (p->in_value || r->nheaders == 0) {
    kv_http_header *h = realloc(r->headers, (r->nheaders + 1) * sizeof *h);
    if (!h)
      return fail(p, 500, "out of memory");
    r->headers = h;
    h[r->nheaders++] = (kv_http_header){NULL, NULL};
    p->name_len = p->value_len = 0;
    p->in_value = 0;
  }
  kv_http_header *h = &r->headers[r->nheaders - 1];
  size_t from = p->name_len;
  if (append(&h->name, &p->name_len, at, n))
    return fail(p, 500, "out of memory");
  for (size_t i = from; i < p->name_len; i++)
    h->name[i] = (char)tolower((unsigned char)h->name[i]);
  return 0;
}

static int on_header_value(http_parser *parser, const char *at, size_t n) {
  kv_hp *p = hp_of(parser);
  kv_http_request *r = p->req;
  p->in_value = 1;
  if (r->nheaders == 0) /* the parser never gives a value first; be safe */
    return fail(p, 400, "header value without a name");
  kv_http_header *h = &r->headers[r->nheaders - 1];
  return append(&h->value, &p->value_len, at, n) ? fail(p, 500, "out of memory") : 0;
}

/* Split the target into path and query with the library's URL parser. */
static int split_target(kv_hp *p, kv_http_request *r) {
  struct http_parser_url u;
  http_parser_url_init(&u);
  const char *url = r->url ? r->url : "";
  if (http_parser_parse_url(url, p->url_len, p->parser.method == HTTP_CONNECT, &u))
    return fail(p, 400, "invalid request target");
  if (u.field_set & (1 << UF_PATH))
    r->path = dup_range(url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len);
  else
    r->path = dup_range("/", 1);
  if (u.field_set & (1 << UF_QUERY))
    r->query = dup_range(url + u.field_data[UF_QUERY].off, u.field_data[UF_QUERY].len);
  else
    r->query = dup_range("", 0);
  if (!r->url)
    r->url = dup_range("", 0);
  return r->path && r->query && r->url ? 0 : fail(p, 500, "out of memory");
}

static void fill_head(kv_hp *p, kv_http_request *r) {
  r->method = http_method_str((enum http_method)p->parser.method);
  r->major = p->parser.http_major;
  r->minor = p->parser.http_minor;
  r->keep_alive = http_should_keep_alive(&p->parser);
  for (size_t i = 0; i < r->nheaders; i++) {
    kv_http_header *h = &r->headers[i];
    if (!h->value && !(h->value = dup_range("", 0))) /* an empty value gets no callback */
      return;
    if (!h->name && !(h->name = dup_range("", 0)))
      return;
    if (strcmp(h->name, "expect") == 0 && strcasecmp(h->value, "100-continue") == 0)
      r->expect_continue = 1;
  }
}

static int on_headers_complete(http_parser *parser) {
  kv_hp *p = hp_of(parser);
  kv_http_request *r = p->req;
  fill_head(p, r);
  for (size_t i = 0; i < r->nheaders; i++)
    if (!r->headers[i].name || !r->headers[i].value)
      return fail(p, 500, "out of memory");
  if (split_target(p, r))
    return -1;
  /* ULLONG_MAX: no Content-Length (2.9 says so, whatever its comment says). */
  uint64_t cl = parser->content_length;
  if (!(parser->flags & F_CHUNKED) && cl != UINT64_MAX && cl > p->max_body)
    return fail(p, 413, "request body too large");
  if (p->on_head)
    p->on_head(p->ctx, r);
  return 0;
}

static int on_body(http_parser *parser, const char *at, size_t n) {
  kv_hp *p = hp_of(parser);
  kv_http_request *r = p->req;
  if (r->body_len + n > p->max_body)
    return fail(p, 413, "request body too large");
  return append(&r->body, &r->body_len, at, n) ? fail(p, 500, "out of memory") : 0;
}

static int on_message_complete(http_parser *parser) {
  kv_hp *p = hp_of(parser);
  kv_http_request *r = p->req;
  if (!r->body && !(r->body = dup_range("", 0)))
    return fail(p, 500, "out of memory");
  /* http_should_keep_alive is only meaningful here and in headers_complete. */
  r->keep_alive = http_should_keep_alive(parser) && !parser->upgrade;
  p->done = r;
  p->req = NULL;
  http_parser_pause(parser, 1); /* one request per feed */
  return 0;
}

static const http_parser_settings settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

kv_hp *kv_hp_new(size_t max_body, kv_hp_head_fn on_head, void *ctx) {
  kv_hp *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  http_parser_init(&p->parser, HTTP_REQUEST);
  p->max_body = max_body;
  p->on_head = on_head;
  p->ctx = ctx;
  return p;
}

void kv_hp_free(kv_hp *p) {
  if (!p)
    return;
  kv_http_request_free(p->req);
  kv_http_request_free(p->done);
  free(p);
}

static void set_parse_error(kv_hp *p) {
  enum http_errno e = HTTP_PARSER_ERRNO(&p->parser);
  if (p->status)
    return; /* one of our callbacks said why */
  if (e == HPE_HEADER_OVERFLOW) {
    p->status = 431;
    p->why = "request head too large";
  } else {
    p->status = 400;
    p->why = http_errno_description(e);
  }
}

/*
 * Contract: at most one request per call; after KV_HP_REQUEST the caller
 * takes it before feeding again; after KV_HP_ERROR every feed fails.
 */
kv_hp_result kv_hp_feed(kv_hp *p, const char *data, size_t len, size_t *used) {
  *used = 0;
  if (p->status || p->done)
    return p->status ? KV_HP_ERROR : KV_HP_REQUEST;
  if (len == 0) /* http-parser reads a zero-length feed as end of stream */
    return KV_HP_MORE;
  size_t n = http_parser_execute(&p->parser, &settings, data, len);
  enum http_errno e = HTTP_PARSER_ERRNO(&p->parser);
  *used = n;
  if (p->done) {
    if (e == HPE_PAUSED)
      http_parser_pause(&p->parser, 0);
    if (p->parser.upgrade) { /* the rest is another protocol: nothing more to parse */
      p->status = 400;
      p->why = "protocol upgrades are not supported";
    }
    return KV_HP_REQUEST;
  }
  if (e != HPE_OK || n != len) {
    set_parse_error(p);
    return KV_HP_ERROR;
  }
  return KV_HP_MORE;
}

kv_http_request *kv_hp_take(kv_hp *p) {
  kv_http_request *r = p->done;
  p->done = NULL;
  return r;
}

int kv_hp_error_status(const kv_hp *p) { return p->status; }

const char *kv_hp_error_text(const kv_hp *p) { return p->why ? p->why : "no error"; }

/* -------------------------------------------------------------- responses */

struct kv_hr {
  http_parser parser; /* first, as in kv_hp */
  int head;           /* the expected response answers a HEAD */
  int started;        /* a byte of it arrived */
  int complete;       /* on_message_complete ran for it */
  int status, keep_alive;
  const char *why;
};

static kv_hr *hr_of(http_parser *parser) { return (kv_hr *)parser; }

/* 1 tells http-parser that this response has no body (it answers a HEAD). */
static int hr_headers_complete(http_parser *parser) { return hr_of(parser)->head ? 1 : 0; }

static int hr_message_complete(http_parser *parser) {
  kv_hr *p = hr_of(parser);
  if (parser->status_code >= 100 && parser->status_code < 200 && parser->status_code != 101)
    return 0; /* 100 Continue and the like: the real answer follows */
  p->complete = 1;
  p->status = parser->status_code;
  p->keep_alive = http_should_keep_alive(parser) && !parser->upgrade;
  http_parser_pause(parser, 1); /* one response per feed */
  return 0;
}

static const http_parser_settings response_settings = {
    .on_headers_complete = hr_headers_complete,
    .on_message_complete = hr_message_complete,
};

kv_hr *kv_hr_new(void) {
  kv_hr *p = calloc(1, sizeof *p);
  if (p)
    http_parser_init(&p->parser, HTTP_RESPONSE);
  return p;
}

void kv_hr_free(kv_hr *p) { free(p); }

void kv_hr_expect(kv_hr *p, int head) {
  http_parser_init(&p->parser, HTTP_RESPONSE);
  p->head = head;
  p->started = p->complete = 0;
}

static kv_hr_result hr_outcome(kv_hr *p, size_t n, size_t len) {
  enum http_errno e = HTTP_PARSER_ERRNO(&p->parser);
  if (p->complete) {
    if (e == HPE_PAUSED)
      http_parser_pause(&p->parser, 0);
    return KV_HR_RESPONSE;
  }
  if (e != HPE_OK || n != len) {
    p->why = http_errno_description(e);
    return KV_HR_ERROR;
  }
  return KV_HR_MORE;
}

kv_hr_result kv_hr_feed(kv_hr *p, const char *data, size_t len, size_t *used) {
  *used = 0;
  if (p->complete || len == 0)
    return p->complete ? KV_HR_RESPONSE : KV_HR_MORE;
  p->started = 1;
  size_t n = http_parser_execute(&p->parser, &response_settings, data, len);
  *used = n;
  return hr_outcome(p, n, len);
}

kv_hr_result kv_hr_eof(kv_hr *p) {
  if (p->complete)
    return KV_HR_RESPONSE;
  if (!p->started) {
    p->why = "connection closed before the response";
    return KV_HR_ERROR;
  }
  http_parser_execute(&p->parser, &response_settings, NULL, 0); /* a zero-length feed is EOF */
  kv_hr_result r = hr_outcome(p, 0, 0);
  if (r == KV_HR_MORE) {
    p->why = "connection closed mid-response";
    return KV_HR_ERROR;
  }
  return r;
}

int kv_hr_status(const kv_hr *p) { return p->status; }

int kv_hr_keep_alive(const kv_hr *p) { return p->keep_alive; }

int kv_hr_started(const kv_hr *p) { return p->started; }

const char *kv_hr_error_text(const kv_hr *p) { return p->why ? p->why : "no error"; }

/* ------------------------------------------------------------------- URLs */

static kv_http_range url_field(const struct http_parser_url *u, int f) {
  if (!(u->field_set & (1 << f)))
    return (kv_http_range){0, 0};
  return (kv_http_range){u->field_data[f].off, u->field_data[f].len};
}

int kv_http_split_url(const char *url, size_t len, kv_http_url *out) {
  struct http_parser_url u;
  http_parser_url_init(&u);
  if (http_parser_parse_url(url, len, 0, &u) || !(u.field_set & (1 << UF_HOST)) ||
      !(u.field_set & (1 << UF_SCHEMA)))
    return -1;
  out->scheme = url_field(&u, UF_SCHEMA);
  out->host = url_field(&u, UF_HOST);
  out->port = (u.field_set & (1 << UF_PORT)) ? u.port : 80;
  /* The authority runs from the host (its '[' for IPv6) to the port's end. */
  size_t from = out->host.off, to = out->host.off + out->host.len;
  if (from > 0 && url[from - 1] == '[')
    from--, to++;
  if (u.field_set & (1 << UF_PORT))
    to = u.field_data[UF_PORT].off + u.field_data[UF_PORT].len;
  out->authority = (kv_http_range){from, to - from};
  kv_http_range path = url_field(&u, UF_PATH), query = url_field(&u, UF_QUERY);
  size_t start = path.len ? path.off : query.len ? query.off - 1 : to;
  size_t end = query.len ? query.off + query.len : path.len ? path.off + path.len : to;
  out->target = (kv_http_range){start, end - start};
  return 0;
}

const char *kv_http_status_text(int status) {
  const char *s = http_status_str((enum http_status)status);
  return s && *s && strcmp(s, "<unknown>") != 0 ? s : "Unknown";
}
