/*
 * http_client.c - http.request, http.get, http.post and http.batch on libcurl.
 *
 * How it sits in the loop: one curl multi handle per Lua state, driven by
 * the multi socket API.  curl names the sockets to watch (a uv_poll_t each,
 * closed as soon as curl lets a socket go, before its fd can be reused) and
 * the one timeout to arm (a uv_timer_t); both callbacks feed
 * curl_multi_socket_action, and curl_multi_info_read then reports finished
 * transfers.  Connections stay in the multi handle's cache, so requests to
 * the same host reuse them; easy handles are pooled.
 *
 * A Lua call (one request or a batch) is an hc_call owning its transfers.
 * The calling task waits on it; curl's callbacks only record (bytes into
 * buffers, "done" flags) and mark the call ready, and the tasks of ready calls
 * are woken after curl_multi_socket_action returns, never from inside a curl
 * callback.  Streamed chunks are therefore queued and handed to the stream
 * function by the waiting task itself (whole lines with `lines = true`,
 * framed by http_lines.c; a stream function returning false ends its
 * transfer there).  The call is anchored in a
 * to-be-closed slot of the calling C function, so a raised error, a normal
 * return and an abandoned task (lua_resetthread) all free it.
 */
#include "engine.h"
#include "http_lines.h"
#include "http_private.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <lauxlib.h>
#include <openssl/evp.h>

#define CLIENT_MT "kvengine.http.client"
#define CALL_MT "kvengine.http.call"

#define POOL_MAX 32            /* idle easy handles kept for reuse */
#define STREAM_HIGH (1u << 20) /* queued stream bytes before curl is paused */
/* The longest line `lines = true` hands out: a Kubernetes watch event is one
   object, and an API server refuses objects much past 1.5 MiB. */
#define STREAM_LINE_MAX ((size_t)16 << 20)
#define DEFAULT_CONCURRENCY 16

typedef struct hc_client hc_client;
typedef struct hc_call hc_call;

typedef struct hc_poll {
  uv_poll_t poll;
  curl_socket_t fd;
  hc_client *cl;
  struct hc_poll *prev, *next;
} hc_poll;

struct hc_client {
  CURLM *multi;
  uv_timer_t *timer;
  hc_poll *polls;               /* open polls, closed with the client */
  hc_call *calls;               /* every live call */
  hc_call *ready, **ready_tail; /* calls with news for their task */
  CURL *pool[POOL_MAX];
  int npool;
  int closed;
};

typedef struct hc_xfer {
  hc_call *call;
  CURL *easy;
  struct curl_slist *headers;
  struct curl_slist *connect_to; /* tls.server_name's CURLOPT_CONNECT_TO */
  int index;                     /* position of its request in the call's list */
  int stream;                    /* chunks go to the request's stream function */
  int lines;                     /* ... a line at a time (lines = true) */
  int has_line;                  /* lines: pending may hold a '\n' past off */
  int stopped;                   /* the stream function returned false */
  int in_multi, done, paused;
  CURLcode result;
  kv_buf body, pending;
  size_t off; /* bytes at pending's start already handed out */
  kvh_lines framing;
  char errbuf[CURL_ERROR_SIZE];
} hc_xfer;

struct hc_call {
  hc_client *cl; /* NULL once the client is gone */
  hc_call *prev, *next;
  hc_call *ready_next;
  int queued; /* on cl->ready */
  kv_wait *wait;
  hc_xfer **slots;
  int nslots, active;
  int next_req, total;
  hc_xfer *calling;     /* whose stream function runs, until it returns */
  lua_KFunction finish; /* makes the Lua results once every request has one */
};

/* ------------------------------------------------------------ ready calls */

static void call_signal(hc_call *c) {
  if (!c || c->queued || !c->cl)
    return;
  c->queued = 1;
  c->ready_next = NULL;
  assert(*c->cl->ready_tail == NULL); /* the tail is the list's last link */
  *c->cl->ready_tail = c;
  c->cl->ready_tail = &c->ready_next;
}

static void call_unqueue(hc_call *c) {
  if (!c->queued)
    return;
  hc_client *cl = c->cl;
  for (hc_call **p = &cl->ready; *p; p = &(*p)->ready_next) {
    if (*p == c) {
      *p = c->ready_next;
      if (cl->ready_tail == &c->ready_next)
        cl->ready_tail = p;
      break;
    }
  }
  c->queued = 0;
  c->ready_next = NULL;
  assert((cl->ready == NULL) == (cl->ready_tail == &cl->ready));
}

/*
 * Wake the tasks of ready calls.  Called from loop callbacks only, after curl
 * returned; a woken task may start or free calls, so take one at a time.
 */
static void client_wake_ready(hc_client *cl) {
  while (cl->ready) {
    hc_call *c = cl->ready;
    call_unqueue(c);
    if (c->wait) {
      kv_wait *w = c->wait;
      c->wait = NULL;
      kv_wait_wake(w);
    }
  }
}

/* ------------------------------------------------------------------- curl */

/*
 * Whether a streamed transfer has enough queued for its task to be behind.
 * With lines, queued bytes without a complete line are not the task's
 * delay: pausing on them would wait for a newline curl is kept from
 * reading.  They are held only past the longest line, which then fails.
 */
static int xfer_full(const hc_xfer *x) {
  size_t unread = x->pending.len - x->off;
  if (!x->lines)
    return unread >= STREAM_HIGH;
  return (x->has_line && unread >= STREAM_HIGH) || unread > STREAM_LINE_MAX + 1;
}

static size_t on_write(char *ptr, size_t size, size_t n, void *ud) {
  hc_xfer *x = ud;
  assert(x->call && x->in_multi && !x->done); /* curl writes only for a running transfer */
  size_t len = size * n;
  if (x->stream) {
    if (xfer_full(x)) { /* the task is behind: hold the data in curl */
      x->paused = 1;
      call_signal(x->call); /* its task decides when to go on, or fails a long line */
      return CURL_WRITEFUNC_PAUSE;
    }
    assert(x->off <= x->pending.len);
    if (x->off > 0 && x->off >= x->pending.len - x->off) { /* drop what was handed out */
      memmove(x->pending.p, x->pending.p + x->off, x->pending.len - x->off);
      x->pending.len -= x->off;
      x->off = 0;
    }
    if (kv_buf_add(&x->pending, ptr, len))
      return 0;
    x->has_line |= x->lines && memchr(ptr, '\n', len) != NULL;
    call_signal(x->call);
    return len;
  }
  return kv_buf_add(&x->body, ptr, len) ? 0 : len;
}

/* Collect finished transfers, then wake whoever waits for them. */
static void client_after_action(hc_client *cl) {
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(cl->multi, &left))) {
    if (m->msg != CURLMSG_DONE)
      continue;
    CURL *easy = m->easy_handle;
    CURLcode result = m->data.result; /* m is invalid once the handle is removed */
    hc_xfer *x = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
    curl_multi_remove_handle(cl->multi, easy);
    if (!x)
      continue;
    assert(x->in_multi && !x->done && x->easy == easy);
    x->in_multi = 0;
    x->done = 1;
    x->result = result;
    call_signal(x->call);
  }
  client_wake_ready(cl);
}

static void on_uv_timer(uv_timer_t *t) {
  hc_client *cl = t->data;
  int running;
  curl_multi_socket_action(cl->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  client_after_action(cl);
}

/* CURLMOPT_TIMERFUNCTION: only arm the timer; curl is not re-entered here. */
static int on_curl_timer(CURLM *multi, long ms, void *ud) {
  (void)multi;
  hc_client *cl = ud;
  if (ms < 0)
    uv_timer_stop(cl->timer);
  else
    kv_timer_start(cl->timer, on_uv_timer, (uint64_t)ms);
  return 0;
}

static void on_poll(uv_poll_t *h, int status, int events) {
  hc_poll *p = h->data;
  hc_client *cl = p->cl; /* p may be closed inside socket_action */
  int flags = 0, running;
  if (status < 0)
    flags = CURL_CSELECT_ERR;
  else
    flags = (events & UV_READABLE ? CURL_CSELECT_IN : 0) |
            (events & UV_WRITABLE ? CURL_CSELECT_OUT : 0);
  curl_multi_socket_action(cl->multi, p->fd, flags, &running);
  client_after_action(cl);
}

static void poll_close(hc_client *cl, hc_poll *p) {
  KV_LIST_REMOVE(cl->polls, p, prev, next);
  uv_close((uv_handle_t *)&p->poll, kv_free_handle);
}

/*
 * CURLMOPT_SOCKETFUNCTION: one uv_poll_t per socket.  On REMOVE the poll is
 * closed at once: curl may close the fd right after and a new socket can get
 * the same number, which libuv must not still be watching.
 */
static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *ud, void *sockp) {
  (void)easy;
  hc_client *cl = ud;
  hc_poll *p = sockp;
  assert(!p || (p->fd == s && p->cl == cl));
  if (what == CURL_POLL_REMOVE) {
    if (p) {
      curl_multi_assign(cl->multi, s, NULL);
      poll_close(cl, p);
    }
    return 0;
  }
  if (!p) {
    p = calloc(1, sizeof *p);
    if (!p)
      return -1;
    if (uv_poll_init_socket(kv_loop(), &p->poll, s) < 0) {
      free(p);
      return -1;
    }
    p->poll.data = p;
    p->fd = s;
    p->cl = cl;
    KV_LIST_PUSH(cl->polls, p, prev, next);
    curl_multi_assign(cl->multi, s, p);
  }
  int ev = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
  uv_poll_start(&p->poll, ev, on_poll);
  return 0;
}

/* ----------------------------------------------------------------- client */

static hc_client *client_of(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

static CURL *easy_get(hc_client *cl) {
  if (cl->npool > 0)
    return cl->pool[--cl->npool];
  return curl_easy_init();
}

static void easy_put(hc_client *cl, CURL *easy) {
  assert(easy && (!cl || (cl->npool >= 0 && cl->npool <= POOL_MAX)));
  if (cl && !cl->closed && cl->npool < POOL_MAX) {
    curl_easy_reset(easy);
    cl->pool[cl->npool++] = easy;
  } else {
    curl_easy_cleanup(easy);
  }
}

static void call_stop(hc_call *c);
static int call_box_close(lua_State *L);

/* __gc of the client (the Lua state closes): stop everything curl does. */
static int client_gc(lua_State *L) {
  hc_client *cl = luaL_checkudata(L, 1, CLIENT_MT);
  if (cl->closed)
    return 0;
  while (cl->calls) { /* left by tasks that never ended: orphan them */
    hc_call *c = cl->calls;
    call_stop(c);
    call_unqueue(c);
    cl->calls = c->next;
    c->prev = c->next = NULL;
    c->cl = NULL;
  }
  assert(!cl->ready && cl->ready_tail == &cl->ready); /* every call was unqueued */
  cl->closed = 1;
  curl_multi_cleanup(cl->multi);
  while (cl->polls)
    poll_close(cl, cl->polls);
  uv_close((uv_handle_t *)cl->timer, kv_free_handle);
  while (cl->npool > 0)
    curl_easy_cleanup(cl->pool[--cl->npool]);
  return 0;
}

void kvh_client_push(lua_State *L) {
  hc_client *cl = lua_newuserdatauv(L, sizeof *cl, 0);
  memset(cl, 0, sizeof *cl);
  cl->ready_tail = &cl->ready;
  cl->closed = 1; /* until fully set up: __gc must not touch half of it */
  kv_class_new(L, CLIENT_MT, NULL, client_gc, NULL);
  kv_class_new(L, CALL_MT, NULL, call_box_close, NULL);
  luaL_setmetatable(L, CLIENT_MT);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  cl->multi = curl_multi_init();
  if (!cl->multi)
    luaL_error(L, "http: cannot set up libcurl");
  cl->timer = kv_timer_new(cl);
  curl_multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
  curl_multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
  curl_multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
  curl_multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
  /* curl's default cache holds 4 connections per easy handle in the multi,
     which shrinks as transfers finish: a busy client would close and redial. */
  curl_multi_setopt(cl->multi, CURLMOPT_MAXCONNECTS, 256L);
  cl->closed = 0;
}

/* -------------------------------------------------------------- transfers */

static void xfer_free(hc_call *c, hc_xfer *x) {
  assert(x->call == c);
  hc_client *cl = c->cl;
  if (x->easy) {
    if (x->in_multi && cl)
      curl_multi_remove_handle(cl->multi, x->easy);
    easy_put(cl, x->easy);
  }
  curl_slist_free_all(x->headers);
  curl_slist_free_all(x->connect_to);
  kv_buf_free(&x->body);
  kv_buf_free(&x->pending);
  free(x);
}

static int check_header_text(const char *s) { return strpbrk(s, "\r\n") == NULL; }

/* Append "name: value" for each headers entry; returns whether content-type was given. */
static int add_headers(lua_State *L, int t, hc_xfer *x) {
  int has_type = 0;
  if (lua_getfield(L, t, "headers") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  if (!lua_istable(L, -1))
    luaL_error(L, "http: headers must be a table");
  int h = lua_gettop(L);
  for (lua_pushnil(L); lua_next(L, h); lua_pop(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
      luaL_error(L, "http: header names and values must be strings");
    const char *k = lua_tostring(L, -2);
    const char *v = lua_tostring(L, -1);
    if (!check_header_text(k) || !check_header_text(v) || !*k || strchr(k, ':'))
      luaL_error(L, "http: invalid header %s", k);
    has_type |= strcasecmp(k, "content-type") == 0;
    /* "name;" is curl's way to send a header with an empty value. */
    lua_pushfstring(L, *v ? "%s: %s" : "%s;", k, v);
    struct curl_slist *n = curl_slist_append(x->headers, lua_tostring(L, -1));
    lua_pop(L, 1);
    if (!n)
      luaL_error(L, "http: out of memory");
    x->headers = n;
  }
  lua_pop(L, 1);
  return has_type;
}

static const char *const tls_keys[] = {
    "ca", "cert", "key", "ca_data", "cert_data", "key_data", "insecure", "server_name", NULL};

/*
 * Push the bytes the base64 text at idx encodes (line breaks allowed, as a
 * kubeconfig's *-data fields hold PEM text); raises naming tls.<field> when
 * it is not base64.  OpenSSL's decoder stops quietly at a '-', so the
 * alphabet is checked first: PEM text given as is must not pass for empty.
 */
static void push_base64(lua_State *L, int idx, const char *field) {
  size_t len;
  const char *in = lua_tolstring(L, idx, &len);
  if (strspn(in, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/= \t\r\n") !=
          len ||
      len > INT_MAX / 2)
    luaL_error(L, "http: tls.%s is not base64", field);
  luaL_Buffer b;
  unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, len / 4 * 3 + 3);
  EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
  int n = 0, last = 0, ok = 0;
  if (ctx) { /* no Lua call until ctx is freed: a raise would leak it */
    EVP_DecodeInit(ctx);
    ok = EVP_DecodeUpdate(ctx, out, &n, (const unsigned char *)in, (int)len) >= 0 &&
         EVP_DecodeFinal(ctx, out + n, &last) >= 0;
    EVP_ENCODE_CTX_free(ctx);
  }
  if (!ctx)
    luaL_error(L, "http: out of memory");
  if (!ok)
    luaL_error(L, "http: tls.%s is not base64", field);
  if (n + last == 0)
    luaL_error(L, "http: tls.%s is empty", field);
  luaL_pushresultsize(&b, (size_t)(n + last));
}

/* tls.<file> or tls.<file>_data (one of them) into curl's option for it. */
static void set_pem(lua_State *L, int tls, CURL *e, int i) {
  static const struct {
    const char *file, *data;
    CURLoption file_opt, blob_opt;
  } pem[] = {{"ca", "ca_data", CURLOPT_CAINFO, CURLOPT_CAINFO_BLOB},
             {"cert", "cert_data", CURLOPT_SSLCERT, CURLOPT_SSLCERT_BLOB},
             {"key", "key_data", CURLOPT_SSLKEY, CURLOPT_SSLKEY_BLOB}};
  int fty = lua_getfield(L, tls, pem[i].file);
  int dty = lua_getfield(L, tls, pem[i].data);
  if (fty != LUA_TNIL && fty != LUA_TSTRING)
    luaL_error(L, "http: tls.%s must be a file name", pem[i].file);
  if (dty != LUA_TNIL && dty != LUA_TSTRING)
    luaL_error(L, "http: tls.%s must be base64 text", pem[i].data);
  if (fty == LUA_TSTRING && dty == LUA_TSTRING)
    luaL_error(L, "http: tls.%s and tls.%s are both given: one or the other", pem[i].file,
               pem[i].data);
  if (fty == LUA_TSTRING)
    curl_easy_setopt(e, pem[i].file_opt, lua_tostring(L, -2));
  if (dty == LUA_TSTRING) {
    push_base64(L, -1, pem[i].data);
    struct curl_blob blob = {.flags = CURL_BLOB_COPY};
    blob.data = (void *)lua_tolstring(L, -1, &blob.len);
    curl_easy_setopt(e, pem[i].blob_opt, &blob);
    if (pem[i].blob_opt == CURLOPT_SSLCERT_BLOB)
      curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
}

/*
 * tls.server_name: the name the server's certificate carries where it is
 * not the URL's host (a kubeconfig's tls-server-name, for an API server
 * reached by address).  curl checks the URL's host, so the URL's host
 * becomes server_name, for SNI and verification (and the Host header), and
 * CURLOPT_CONNECT_TO still sends the connection to the URL's own host and
 * port.  The URL is taken apart by curl's URL API, as curl itself reads it.
 */
static void set_server_name(lua_State *L, int tls, hc_xfer *x, const char *url) {
  int ty = lua_getfield(L, tls, "server_name");
  if (ty == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (ty != LUA_TSTRING || !*lua_tostring(L, -1))
    luaL_error(L, "http: tls.server_name must be a host name");
  const char *name = lua_tostring(L, -1);
  CURLU *u = curl_url();
  char *host = NULL, *port = NULL, *full = NULL, *to = NULL;
  CURLUcode rc = u ? curl_url_set(u, CURLUPART_URL, url, CURLU_GUESS_SCHEME) : CURLUE_OUT_OF_MEMORY;
  if (rc == CURLUE_OK)
    rc = curl_url_get(u, CURLUPART_HOST, &host, 0);
  if (rc == CURLUE_OK)
    rc = curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
  const char *failed = rc == CURLUE_OK ? NULL : "url";
  if (!failed && (rc = curl_url_set(u, CURLUPART_HOST, name, 0)) != CURLUE_OK)
    failed = "tls.server_name";
  if (!failed && (rc = curl_url_get(u, CURLUPART_URL, &full, 0)) != CURLUE_OK)
    failed = "url";
  /* No Lua call until curl's strings are freed. */
  size_t room = failed ? 0 : strlen(name) + strlen(host) + 2 * strlen(port) + 4;
  struct curl_slist *n = NULL;
  if (!failed && (to = malloc(room))) {
    snprintf(to, room, "%s:%s:%s:%s", name, port, host, port);
    n = curl_slist_append(x->connect_to, to);
  }
  if (n) {
    x->connect_to = n;
    curl_easy_setopt(x->easy, CURLOPT_URL, full);
    curl_easy_setopt(x->easy, CURLOPT_CONNECT_TO, x->connect_to);
  }
  free(to);
  curl_free(full);
  curl_free(port);
  curl_free(host);
  curl_url_cleanup(u);
  if (failed)
    luaL_error(L, "http: tls.server_name %s with url %s: %s", name, url, curl_url_strerror(rc));
  if (!n)
    luaL_error(L, "http: out of memory");
  lua_pop(L, 1);
}

/*
 * tls = {...}: what an https:// request trusts and presents, for servers of
 * a test's own CA such as a Kubernetes API server, in the forms a
 * kubeconfig gives them: PEM files (ca, cert, key) or their base64 text
 * (ca_data, cert_data, key_data), the name the server's certificate
 * carries (server_name) and no verification at all (insecure).  curl
 * copies strings and blobs; curl ignores all of it for http://.
 */
static void set_tls(lua_State *L, int t, hc_xfer *x, const char *url) {
  if (lua_getfield(L, t, "tls") == LUA_TNIL) {
    lua_pop(L, 1);
    return;
  }
  if (!lua_istable(L, -1))
    luaL_error(L, "http: tls must be a table {ca=, cert=, key=, ...}");
  int tls = lua_gettop(L);
  kv_check_options(L, tls, "http: tls", tls_keys);
  for (int i = 0; i < 3; i++)
    set_pem(L, tls, x->easy, i);
  int ty = lua_getfield(L, tls, "insecure");
  if (ty != LUA_TNIL && ty != LUA_TBOOLEAN)
    luaL_error(L, "http: tls.insecure must be a boolean");
  if (lua_toboolean(L, -1)) {
    curl_easy_setopt(x->easy, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(x->easy, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  lua_pop(L, 1);
  set_server_name(L, tls, x, url);
  lua_settop(L, tls - 1);
}

/* Push the body to send (nil if none); json= is encoded and typed. */
static void push_body(lua_State *L, int t, hc_xfer *x, int has_type) {
  if (lua_getfield(L, t, "json") != LUA_TNIL) {
    kvh_json_encode(L, -1);
    lua_remove(L, -2);
    if (!has_type) {
      struct curl_slist *n = curl_slist_append(x->headers, "Content-Type: application/json");
      if (!n)
        luaL_error(L, "http: out of memory");
      x->headers = n;
    }
    return;
  }
  lua_pop(L, 1);
  lua_getfield(L, t, "body");
  if (!lua_isnil(L, -1) && !lua_isstring(L, -1))
    luaL_error(L, "http: body must be a string");
}

static void set_method(CURL *e, const char *method, int has_body) {
  if (has_body) {
    if (strcmp(method, "POST") != 0)
      curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  } else if (strcmp(method, "GET") == 0) {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else if (strcmp(method, "HEAD") == 0) {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  }
}

/*
 * Configure x->easy from the request spec at stack index t (a table, or a
 * URL string for a GET).  Raises on a malformed spec: that is the script's
 * bug, not a network failure.
 */
static void xfer_setup(lua_State *L, hc_xfer *x, int t) {
  CURL *e = x->easy;
  double timeout = kv_opt_timeout(L, lua_istable(L, t) ? t : 0, "http", KV_WAIT_TRANSFER);
  const char *method = NULL;
  int top = lua_gettop(L);
  if (lua_type(L, t) == LUA_TSTRING) {
    curl_easy_setopt(e, CURLOPT_URL, lua_tostring(L, t));
  } else {
    if (!lua_istable(L, t))
      luaL_error(L, "http: a request is a table or a URL string");
    if (lua_getfield(L, t, "url") != LUA_TSTRING)
      luaL_error(L, "http: url must be a string");
    const char *url = lua_tostring(L, -1);
    curl_easy_setopt(e, CURLOPT_URL, url);
    if (lua_getfield(L, t, "method") != LUA_TNIL && !(method = lua_tostring(L, -1)))
      luaL_error(L, "http: method must be a string");
    int st = lua_getfield(L, t, "stream");
    if (st != LUA_TNIL && st != LUA_TFUNCTION)
      luaL_error(L, "http: stream must be a function");
    x->stream = st == LUA_TFUNCTION;
    int lt = lua_getfield(L, t, "lines");
    if (lt != LUA_TNIL && lt != LUA_TBOOLEAN)
      luaL_error(L, "http: lines must be a boolean");
    x->lines = lua_toboolean(L, -1);
    if (x->lines && !x->stream)
      luaL_error(L, "http: lines = true frames a streamed body: it needs stream = function");
    x->framing.max = STREAM_LINE_MAX;
    set_tls(L, t, x, url);
    int has_type = add_headers(L, t, x);
    push_body(L, t, x, has_type);
  }
  size_t blen = 0;
  const char *body =
      lua_isstring(L, -1) && lua_gettop(L) > top ? lua_tolstring(L, -1, &blen) : NULL;
  if (!method)
    method = body ? "POST" : "GET";
  if (!body && (!strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH")))
    body = ""; /* sends Content-Length: 0, which some servers insist on */
  if (body) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
    struct curl_slist *n = curl_slist_append(x->headers, "Expect:"); /* no 100-continue wait */
    if (!n)
      luaL_error(L, "http: out of memory");
    x->headers = n;
  }
  set_method(e, method, body != NULL);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
  /* To curl 0 ms is no limit: a poll gets the least it counts, 1 ms. */
  long ms = (long)(timeout * 1000.0 + 0.5);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms > 0 ? ms : 1L);
  curl_easy_setopt(e, CURLOPT_PRIVATE, x);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROXY, ""); /* tests talk to the addresses they name */
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  lua_settop(L, top);
}

/* Start request number i (its spec on top of the stack) in a free slot. */
static void xfer_start(lua_State *L, hc_call *c, int i) {
  int slot = 0;
  assert(c->active < c->nslots && i >= 1 && i <= c->total);
  while (c->slots[slot])
    slot++;
  assert(slot < c->nslots); /* a free slot exists while active < nslots */
  hc_xfer *x = calloc(1, sizeof *x);
  if (!x)
    luaL_error(L, "http: out of memory");
  x->call = c;
  x->index = i;
  c->slots[slot] = x; /* owned by the call from here, whatever raises below */
  c->active++;
  if (!(x->easy = easy_get(c->cl)))
    luaL_error(L, "http: cannot create a curl handle");
  xfer_setup(L, x, lua_gettop(L));
  if (curl_multi_add_handle(c->cl->multi, x->easy) != CURLM_OK) {
    x->done = 1;
    x->result = CURLE_FAILED_INIT;
    return;
  }
  x->in_multi = 1;
}

/* ------------------------------------------------------------------ calls */

/* Stop every transfer of c (idempotent); their buffers stay until c is freed. */
static void call_stop(hc_call *c) {
  if (!c->cl)
    return;
  for (int i = 0; i < c->nslots; i++) {
    hc_xfer *x = c->slots[i];
    if (x && x->in_multi) {
      curl_multi_remove_handle(c->cl->multi, x->easy);
      x->in_multi = 0;
    }
  }
}

static void call_free(hc_call *c) {
  for (int i = 0; i < c->nslots; i++)
    if (c->slots[i])
      xfer_free(c, c->slots[i]);
  if (c->cl) {
    call_unqueue(c);
    KV_LIST_REMOVE(c->cl->calls, c, prev, next);
  }
  free(c->slots);
  free(c);
}

/* __close and __gc of the call's anchor. */
static int call_box_close(lua_State *L) {
  hc_call **box = luaL_checkudata(L, 1, CALL_MT);
  if (*box) {
    call_free(*box);
    *box = NULL;
  }
  return 0;
}

/* The task waiting on the call was abandoned: stop its transfers, free the record. */
static void call_cancel(kv_wait *w) {
  hc_call *c = *(hc_call **)kv_wait_data(w);
  if (c && c->wait == w) {
    c->wait = NULL;
    call_stop(c);
  }
  kv_wait_wake(w);
}

/* Push x's response status and its headers (lower-case names) as received so far. */
static void push_head(lua_State *L, hc_xfer *x) {
  long status = 0;
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
  lua_pushinteger(L, status);
  lua_newtable(L);
  struct curl_header *h = NULL;
  while ((h = curl_easy_nextheader(x->easy, CURLH_HEADER, -1, h))) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *p = h->name; *p; p++)
      luaL_addchar(&b, (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p);
    luaL_pushresult(&b);
    if (lua_getfield(L, -2, lua_tostring(L, -1)) == LUA_TSTRING) /* repeated: join */
      lua_pushfstring(L, "%s, %s", lua_tostring(L, -1), h->value);
    else
      lua_pushstring(L, h->value);
    lua_remove(L, -2);
    lua_settable(L, -3);
  }
}

/* Push the response table of a finished transfer, or {err = "http: <curl's words>" | "timeout"}. */
static void push_result(lua_State *L, hc_xfer *x) {
  if (x->result != CURLE_OK) {
    lua_createtable(L, 0, 1);
    if (x->result == CURLE_OPERATION_TIMEDOUT)
      lua_pushliteral(L, "timeout");
    else
      lua_pushfstring(L, "http: %s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(x->result));
    lua_setfield(L, -2, "err");
    return;
  }
  lua_createtable(L, 0, 5);
  push_head(L, x);
  lua_setfield(L, -3, "headers");
  lua_setfield(L, -2, "status");
  lua_pushlstring(L, x->body.p ? x->body.p : "", x->body.len);
  lua_setfield(L, -2, "body");
  lua_pushcfunction(L, kvh_body_json);
  lua_setfield(L, -2, "json");
  if (x->stopped) {
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "stopped");
  }
}

/*
 * The stack of a call, set up by call_run: 1 = list of request specs,
 * 2 = results, 3 = the call's to-be-closed anchor.
 */
static int call_step(lua_State *L, hc_call *c);

/* End x where it is, as if curl had finished it with result (and msg, if any, as curl's words). */
static void xfer_end(hc_xfer *x, CURLcode result, const char *msg) {
  hc_client *cl = x->call->cl;
  if (x->in_multi && cl)
    curl_multi_remove_handle(cl->multi, x->easy);
  x->in_multi = 0;
  x->done = 1;
  x->result = result;
  if (msg)
    snprintf(x->errbuf, sizeof x->errbuf, "%s", msg);
}

/* A stream function returned (its result on top): exactly false ends its transfer. */
static void stream_returned(lua_State *L, hc_call *c) {
  hc_xfer *x = c->calling;
  c->calling = NULL;
  if (x && lua_isboolean(L, -1) && !lua_toboolean(L, -1)) {
    x->stopped = 1;
    x->pending.len = x->off = 0; /* no more calls */
    xfer_end(x, CURLE_OK, NULL);
  }
  lua_pop(L, 1);
}

static int step_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  stream_returned(L, (hc_call *)ctx);
  return call_step(L, (hc_call *)ctx);
}

static int wait_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  return call_step(L, *(hc_call **)kv_wait_data(kv_wait_of(ctx)));
}

static void call_fill(lua_State *L, hc_call *c) {
  while (c->active < c->nslots && c->next_req <= c->total) {
    int i = c->next_req++;
    lua_geti(L, 1, i);
    xfer_start(L, c, i);
    lua_pop(L, 1);
  }
}

/* Let curl deliver to a paused transfer again once its task caught up. */
static void xfer_resume(hc_xfer *x) {
  if (x->paused && x->in_multi && !xfer_full(x)) {
    x->paused = 0;
    curl_easy_pause(x->easy, CURLPAUSE_CONT); /* may queue more at once */
  }
}

/*
 * The next piece of x's body for its stream function, at *p: *n bytes to
 * hand over, *used to drop once they are pushed.  That is everything
 * queued, or with lines the next line (http_lines.c): the rest once the
 * body ended well, never the cut rest of a failed transfer.  0 when x has
 * none now; a line past the limit fails x.
 */
static int xfer_piece(hc_xfer *x, const char **p, size_t *n, size_t *used) {
  size_t unread = x->pending.len - x->off;
  *p = x->pending.p + x->off;
  if (!x->lines) {
    *n = *used = unread;
    return unread > 0;
  }
  int end = x->done && x->result == CURLE_OK;
  /* Past max without a newline is too long already: fail it now, not when more comes. */
  if (!x->has_line && !x->paused && unread <= x->framing.max && !(end && unread > 0))
    return 0;
  switch (kvh_lines_next(&x->framing, *p, unread, end, n, used)) {
  case KVH_LINE:
    return 1;
  case KVH_LINE_MORE:
    x->has_line = 0;
    xfer_resume(x);
    return 0;
  case KVH_LINE_TOO_LONG:
    break;
  }
  x->pending.len = x->off = 0;
  xfer_end(x, CURLE_WRITE_ERROR, "a line of the streamed body is longer than 16 MiB");
  return 0;
}

/* A transfer with a piece for its stream function, if any (see xfer_piece). */
static hc_xfer *call_piece(hc_call *c, const char **p, size_t *n, size_t *used) {
  for (int i = 0; i < c->nslots; i++)
    if (c->slots[i] && xfer_piece(c->slots[i], p, n, used))
      return c->slots[i];
  return NULL;
}

/* Move finished transfers into the results; returns how many. */
static int call_collect(lua_State *L, hc_call *c) {
  int n = 0;
  for (int i = 0; i < c->nslots; i++) {
    hc_xfer *x = c->slots[i];
    if (!x || !x->done)
      continue;
    push_result(L, x);
    lua_seti(L, 2, x->index);
    c->slots[i] = NULL;
    c->active--;
    assert(c->active >= 0);
    xfer_free(c, x);
    n++;
  }
  return n;
}

/*
 * Run the call until every request has a result: start transfers up to the
 * concurrency, hand queued chunks to stream functions (which may wait
 * themselves), collect results, and wait when there is nothing to do.
 */
static int call_step(lua_State *L, hc_call *c) {
  for (;;) {
    if (!c->cl)
      return luaL_error(L, "http: the client is closed");
    call_fill(L, c);
    const char *p;
    size_t n, used;
    hc_xfer *x = call_piece(c, &p, &n, &used);
    if (x) {
      lua_geti(L, 1, x->index);
      lua_getfield(L, -1, "stream");
      lua_remove(L, -2);
      lua_pushlstring(L, p, n);
      x->off += used;
      assert(x->off <= x->pending.len);
      if (x->off == x->pending.len)
        x->pending.len = x->off = 0;
      lua_createtable(L, 0, 2); /* the head, so a relay can copy status and headers */
      push_head(L, x);
      lua_setfield(L, -3, "headers");
      lua_setfield(L, -2, "status");
      xfer_resume(x);
      c->calling = x;
      lua_callk(L, 2, 1, (lua_KContext)c, step_k);
      stream_returned(L, c);
      continue;
    }
    if (call_collect(L, c) > 0)
      continue;
    if (c->active == 0 && c->next_req > c->total)
      return c->finish(L, LUA_OK, 0);
    assert(c->active > 0 && !c->wait); /* waits only for transfers in flight, once */
    kv_wait *w = kv_wait_new(L, "http", sizeof(hc_call *), call_cancel, NULL);
    *(hc_call **)kv_wait_data(w) = c;
    c->wait = w;
    return kv_wait_yield(L, w, wait_k);
  }
}

/*
 * Run the requests listed at index 1 with the given concurrency; when all
 * are done, k makes the function's results from the results table at index 2
 * (it runs in place of the function, possibly after yields).
 */
static int call_run(lua_State *L, int concurrency, lua_KFunction k) {
  hc_client *cl = client_of(L);
  if (cl->closed)
    return luaL_error(L, "http: the client is closed");
  int total = (int)luaL_len(L, 1);
  assert(concurrency >= 1);
  lua_settop(L, 1);
  lua_createtable(L, total, 0);
  hc_call **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, CALL_MT);
  lua_toclose(L, 3);
  hc_call *c = calloc(1, sizeof *c);
  if (c)
    c->slots = calloc((size_t)(concurrency < total ? concurrency : total) + 1, sizeof *c->slots);
  if (!c || !c->slots) {
    free(c);
    return luaL_error(L, "http: out of memory");
  }
  *box = c;
  c->cl = cl;
  c->nslots = concurrency < total ? concurrency : total;
  c->next_req = 1;
  c->total = total;
  KV_LIST_PUSH(cl->calls, c, prev, next);
  c->finish = k;
  return call_step(L, c);
}

/* ------------------------------------------------------------ Lua surface */

/* What a request spec may hold (http.request's table, each of http.batch's). */
static const char *const request_keys[] = {"method",  "url",    "headers", "body", "json",
                                           "timeout", "stream", "lines",   "tls",  NULL};
static const char *const get_keys[] = {"headers", "body",  "json", "timeout",
                                       "stream",  "lines", "tls",  NULL};
static const char *const post_keys[] = {"method", "headers", "body", "json", "timeout",
                                        "stream", "lines",   "tls",  NULL};
static const char *const batch_keys[] = {"concurrency", "summary", NULL};

const kv_option_keys kvh_client_options[] = {{"request", request_keys},
                                             {"get", get_keys},
                                             {"post", post_keys},
                                             {"batch", batch_keys},
                                             {NULL, NULL}};

static int request_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lua_geti(L, 2, 1);
  if (lua_getfield(L, -1, "err") != LUA_TNIL) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  lua_pop(L, 1);
  return 1;
}

static int request_run(lua_State *L) {
  lua_createtable(L, 1, 0);
  lua_insert(L, 1);
  lua_rawseti(L, 1, 1);
  return call_run(L, 1, request_done);
}

/*
 * http.request{method, url, headers, body, json, timeout, stream, lines, tls} ->
 * {status, headers, body, json [, stopped]} | nil, err
 */
int kvh_request(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  kv_check_options(L, 1, "http.request", request_keys);
  lua_settop(L, 1);
  return request_run(L);
}

/* A copy of the options table at idx (or a new one) with url set. */
static void push_opts(lua_State *L, int url, int idx) {
  lua_newtable(L);
  if (lua_istable(L, idx)) {
    for (lua_pushnil(L); lua_next(L, idx);) { /* copy, leaving the key for lua_next */
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_settable(L, -4);
    }
  }
  lua_pushvalue(L, url);
  lua_setfield(L, -2, "url");
}

/* http.get(url, opts) */
int kvh_get(lua_State *L) {
  luaL_checkstring(L, 1);
  kv_opt_timeout(L, 2, "http.get", KV_WAIT_TRANSFER); /* refuses http.get(url, 5) by name */
  kv_check_options(L, 2, "http.get", get_keys);
  push_opts(L, 1, 2);
  lua_pushliteral(L, "GET");
  lua_setfield(L, -2, "method");
  lua_replace(L, 1);
  lua_settop(L, 1);
  return request_run(L);
}

/* http.post(url, body_or_opts): a string is the body, a table the options. */
int kvh_post(lua_State *L) {
  luaL_checkstring(L, 1);
  int t = lua_type(L, 2);
  luaL_argexpected(L, t == LUA_TSTRING || t == LUA_TTABLE || t <= LUA_TNIL, 2, "body or options");
  if (t == LUA_TTABLE)
    kv_check_options(L, 2, "http.post", post_keys);
  push_opts(L, 1, 2);
  if (t == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "body");
  }
  if (lua_getfield(L, -1, "method") == LUA_TNIL) {
    lua_pushliteral(L, "POST");
    lua_setfield(L, -3, "method");
  }
  lua_pop(L, 1);
  lua_replace(L, 1);
  lua_settop(L, 1);
  return request_run(L);
}

static int batch_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  lua_pushvalue(L, 2);
  return 1;
}

/*
 * http.batch(requests, {concurrency = n}) -> results in order (response or
 * {err = msg}); with summary = true, counts and a latency histogram from the
 * load client (http_load.c) instead.
 */
int kvh_batch(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  for (lua_Integer i = 1, total = luaL_len(L, 1); i <= total; i++) { /* before any is sent */
    if (lua_geti(L, 1, i) == LUA_TTABLE)
      kv_check_options(L, -1, "http.batch", request_keys);
    lua_pop(L, 1);
  }
  lua_Integer n = DEFAULT_CONCURRENCY;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    kv_check_options(L, 2, "http.batch", batch_keys);
    if (lua_getfield(L, 2, "concurrency") != LUA_TNIL)
      n = luaL_checkinteger(L, -1);
    luaL_argcheck(L, n >= 1 && n <= 100000, 2, "concurrency must be at least 1");
    if (lua_getfield(L, 2, "summary") == LUA_TBOOLEAN && lua_toboolean(L, -1))
      return kvh_batch_summary(L, (int)n);
  }
  lua_settop(L, 1);
  return call_run(L, (int)n, batch_done);
}
