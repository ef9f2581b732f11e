/*
 * http_parse.h - the HTTP/1.x parsers behind the http server and the load
 * client.
 *
 * The server never reads HTTP syntax itself: it feeds the bytes a
 * connection received to a kv_hp and gets back whole requests (method,
 * target split into path and query, lower-cased headers, body) or an error
 * with the status code to answer.  The load client (http_load.c) feeds
 * response bytes to a kv_hr, which copies nothing: it reports a response's
 * status, whether the connection stays open and where the next response
 * starts.  URLs are split here too.  This file and http_parse.c are the only
 * places that know the parser library (Debian's http-parser 2.9); llhttp has
 * the same callback model and can replace it here alone.
 *
 * Nothing here touches Lua or libuv, so the fuzz target drives it directly.
 */
#ifndef KV_HTTP_PARSE_H
#define KV_HTTP_PARSE_H

#include <stddef.h>

typedef struct kv_http_header {
  char *name; /* lower-case */
  char *value;
} kv_http_header;

/* One complete request; every string is NUL-terminated and owned. */
typedef struct kv_http_request {
  const char *method; /* static: "GET", "POST", ... */
  char *url;          /* the raw request target */
  char *path;         /* raw (not percent-decoded), "/" when the target has none */
  char *query;        /* raw, without '?', "" when absent */
  kv_http_header *headers;
  size_t nheaders;
  char *body;
  size_t body_len;
  int major, minor;    /* HTTP version */
  int keep_alive;      /* the connection may carry another request after this one */
  int expect_continue; /* the client sent "Expect: 100-continue" */
} kv_http_request;

typedef enum kv_hp_result {
  KV_HP_MORE,    /* every byte was consumed; no complete request yet */
  KV_HP_REQUEST, /* a request is complete: kv_hp_take it */
  KV_HP_ERROR,   /* the stream is unusable: answer kv_hp_error_status and close */
} kv_hp_result;

typedef struct kv_hp kv_hp;

/*
 * Called once the head of a request is parsed and before its body, with the
 * request so far (no body yet): the server answers "100 Continue" there.
 * It must not free or keep the request.
 */
typedef void (*kv_hp_head_fn)(void *ctx, const kv_http_request *head);

/*
 * kv_hp_new: a request parser for one connection, or NULL when memory runs
 * out; bodies above max_body bytes are an error (413); on_head (may be
 * NULL) is called with ctx.  The caller owns it: kv_hp_free frees it with
 * any request it holds (NULL does nothing).
 */
kv_hp *kv_hp_new(size_t max_body, kv_hp_head_fn on_head, void *ctx);
void kv_hp_free(kv_hp *p);

/*
 * Parse up to len bytes.  *used is set to how many were consumed: on
 * KV_HP_REQUEST the bytes after *used belong to the next request (pipelining)
 * and must be fed again after the request was taken.
 */
kv_hp_result kv_hp_feed(kv_hp *p, const char *data, size_t len, size_t *used);

/*
 * kv_hp_take: the completed request (after KV_HP_REQUEST; NULL otherwise),
 * now owned by the caller, who frees it with kv_http_request_free (NULL
 * does nothing).
 */
kv_http_request *kv_hp_take(kv_hp *p);
void kv_http_request_free(kv_http_request *r);

/*
 * After KV_HP_ERROR: kv_hp_error_status gives the status to answer (400,
 * 413, 431), kv_hp_error_text why (a static string; "no error" before any).
 */
int kv_hp_error_status(const kv_hp *p);
const char *kv_hp_error_text(const kv_hp *p);

/* ------------------------------------------------------------- responses */

typedef enum kv_hr_result {
  KV_HR_MORE,     /* every byte was consumed; the response is not complete */
  KV_HR_RESPONSE, /* a response is complete: kv_hr_status, kv_hr_keep_alive */
  KV_HR_ERROR,    /* not HTTP, or cut short: the connection is unusable */
} kv_hr_result;

typedef struct kv_hr kv_hr;

/*
 * kv_hr_new: a response parser for one connection, or NULL when memory
 * runs out; the caller frees it with kv_hr_free (NULL does nothing).
 */
kv_hr *kv_hr_new(void);
void kv_hr_free(kv_hr *p);

/*
 * Get ready for the response to the request about to be sent; head: it
 * answers a HEAD request, so it has no body whatever its headers say.
 */
void kv_hr_expect(kv_hr *p, int head);

/*
 * Parse up to len bytes of the expected response; *used is set to how many
 * were consumed.  Informational (1xx) responses are skipped.  Bytes after a
 * complete response were not asked for (no request is pipelined).
 */
kv_hr_result kv_hr_feed(kv_hr *p, const char *data, size_t len, size_t *used);

/* The peer closed: completes a response whose body runs to the close. */
kv_hr_result kv_hr_eof(kv_hr *p);

/*
 * What the parser knows: kv_hr_status, the status of the last complete
 * response; kv_hr_keep_alive, whether the connection may carry another
 * request; kv_hr_started, whether a byte of the expected response arrived;
 * kv_hr_error_text, why the stream is unusable after KV_HR_ERROR (a static
 * string).
 */
int kv_hr_status(const kv_hr *p);
int kv_hr_keep_alive(const kv_hr *p);
int kv_hr_started(const kv_hr *p);
const char *kv_hr_error_text(const kv_hr *p);

/* ------------------------------------------------------------------ URLs */

typedef struct kv_http_range {
  size_t off, len;
} kv_http_range;

/* An absolute http URL, as offsets into its text. */
typedef struct kv_http_url {
  kv_http_range scheme, host, authority; /* host without brackets; authority as sent in Host */
  kv_http_range target;                  /* path and query; send "/" first if it lacks one */
  int port;                              /* the URL's, else 80 */
} kv_http_url;

/* Split url (len bytes); 0, or -1 when it is not an absolute URL with a host. */
int kv_http_split_url(const char *url, size_t len, kv_http_url *out);

/* The reason phrase of a status code ("Not Found"), "Unknown" if none. */
const char *kv_http_status_text(int status);

#endif
