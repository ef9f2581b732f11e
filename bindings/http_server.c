/*
 * http_server.c - http.listen: an HTTP/1.1 server whose handlers are tasks.
 *
 * How it sits in the loop: the listener and every connection are libuv TCP
 * handles in malloc'd memory.  Bytes read from a connection go through the
 * request parser (http_parse.c); each complete request becomes a task
 * (kv_spawn into the scope that created the server) running
 * handler(req, res).  A connection answers its requests one at a time, in
 * order: while a handler runs, further bytes are only buffered (pipelining),
 * and parsing resumes when the response is finished.  Responses go out
 * through uv_write; a handler whose connection has too many bytes queued
 * waits in res:write/res:finish until the peer has read them.
 *
 * Failures stay inside their connection: a malformed request gets 400, a
 * head too large 431, a body over max_body 413 (then the connection drains
 * what the client still sends for a moment and closes, so the client reads
 * the answer instead of a reset); a peer that goes away closes the
 * connection, and the handler's writes then return nil, err.
 *
 * Lifetimes: the server is a tracked resource of its scope and its Lua
 * handle stays reachable while it is open; closing it (server:close(), __gc,
 * __close or the scope's end) closes the listener and every connection.  A
 * response userdata and its connection point at each other until either
 * goes away.
 */
#include "engine.h"
#include "http_parse.h"
#include "http_private.h"

#include <arpa/inet.h>
#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#define SERVER_MT "kvengine.http.server"
#define RES_MT "kvengine.http.response"

#define DEFAULT_MAX_BODY ((lua_Integer)8 << 20)
#define WRITE_HIGH (256u << 10) /* unsent bytes above which a write waits... */
#define WRITE_LOW (64u << 10)   /* ...until they are down to this */
#define INPUT_MAX (1u << 20)    /* buffered pipelined input before reading pauses */
#define LINGER_MS 2000          /* how long a rejected client may keep sending */
#define READ_SIZE 65536

typedef struct hs_server hs_server;
typedef struct hs_conn hs_conn;
typedef struct hs_res hs_res;

typedef struct hs_handle { /* the Lua side of a server */
  hs_server *s;            /* NULL once closed */
  int port;
} hs_handle;

struct hs_server {
  kv_resource res; /* tracked in the scope that created the server */
  uv_tcp_t tcp;    /* the listener */
  lua_State *L;    /* the main thread: handler tasks are made on it from loop callbacks */
  hs_handle *handle;
  int handle_ref, handler_ref; /* registry references while open */
  size_t max_body;
  int closed, listening;
  hs_conn *conns;
  int nconns;
};

struct hs_conn {
  uv_tcp_t tcp; /* first: the handle leads back to the connection */
  hs_server *srv;
  hs_conn *prev, *next;
  kv_hp *hp;
  kv_buf in;       /* received bytes not parsed yet */
  hs_res *res;     /* the response in progress, NULL between requests */
  int busy;        /* a handler owns the connection */
  int reading;     /* uv_read_start is in force */
  int closing;     /* uv_close was called */
  int close_after; /* close once every queued byte is written */
  int lingering;   /* rejected: discard input until EOF or the linger timer */
  int shut;
  uv_timer_t *linger;
  size_t queued;  /* bytes handed to uv_write whose callback has not run */
  int write_err;  /* the first write error, as a libuv code */
  kv_wait *drain; /* a handler waiting for the backlog to go down */
  char peer[64];
};

struct hs_res {
  hs_conn *conn; /* NULL once the response is done or the connection gone */
  int status;
  int head_sent, finished, chunked, no_body, head_only, keep_alive, http10;
};

typedef struct hs_drain {
  hs_conn *c;
  hs_res *r;
  int finishing; /* the response is complete: let the connection go on after */
  int err;
} hs_drain;

typedef struct hs_wreq {
  uv_write_t req;
  hs_conn *c;
  size_t len;
  char data[];
} hs_wreq;

static void conn_process(hs_conn *c, lua_State *L);
static void conn_close(hs_conn *c);

/* ---------------------------------------------------------- small helpers */

/* Append printf-formatted text (short: at most 255 bytes) to b; b->oom tells of failure. */
static void sb_printf(kv_buf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n > 0)
    kv_buf_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static const char *conn_error(const hs_conn *c) {
  return c && c->write_err ? uv_strerror(c->write_err) : "connection closed";
}

/* ---------------------------------------------------------------- writing */

static void conn_finish_close(hs_conn *c);

/* Bytes not yet taken by the kernel (c->queued also counts unreported ones). */
static size_t backlog(hs_conn *c) { return uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp); }

static void drain_wake(hs_conn *c, int err) {
  kv_wait *w = c->drain;
  if (!w)
    return;
  c->drain = NULL;
  hs_drain *d = kv_wait_data(w);
  assert(d->c == c); /* the connection's one drain waiter */
  d->c = NULL;
  d->err = err;
  kv_wait_wake(w);
}

static void on_written(uv_write_t *req, int status) {
  hs_wreq *w = (hs_wreq *)req;
  hs_conn *c = w->c;
  assert(c->queued >= w->len); /* every write was counted when queued */
  c->queued -= w->len;
  free(w);
  if (c->closing)
    return; /* the close callback settles waiters */
  if (status < 0) {
    c->write_err = status;
    conn_close(c);
    return;
  }
  if (backlog(c) <= WRITE_LOW)
    drain_wake(c, 0);
  if (c->close_after && !c->busy && c->queued == 0)
    conn_finish_close(c);
}

/* Queue the concatenation of n byte ranges; 0 or a libuv error code. */
static int conn_write(hs_conn *c, const char *const *parts, const size_t *lens, int n) {
  if (c->closing)
    return c->write_err ? c->write_err : UV_ECONNRESET;
  size_t total = 0;
  for (int i = 0; i < n; i++)
    total += lens[i];
  if (total == 0)
    return 0;
  assert(total <= UINT_MAX); /* uv_buf_t's length is an unsigned int */
  hs_wreq *w = malloc(sizeof *w + total);
  if (!w)
    return UV_ENOMEM;
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    memcpy(w->data + off, parts[i], lens[i]);
    off += lens[i];
  }
  assert(off == total);
  w->c = c;
  w->len = total;
  uv_buf_t buf = uv_buf_init(w->data, (unsigned)total);
  int r = uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_written);
  if (r < 0) {
    free(w);
    c->write_err = r;
    conn_close(c);
    return r;
  }
  c->queued += total;
  return 0;
}

static int conn_write1(hs_conn *c, const char *s, size_t len) { return conn_write(c, &s, &len, 1); }

/* ---------------------------------------------------------- closing paths */

static void server_maybe_free(hs_server *s) {
  assert(s->nconns >= 0 && (s->nconns > 0 || !s->conns));
  if (s->closed && !s->listening && s->nconns == 0)
    free(s);
}

static void on_conn_closed(uv_handle_t *h) {
  hs_conn *c = (hs_conn *)h;
  hs_server *s = c->srv;
  assert(c->closing && !c->linger && s->nconns > 0);
  if (c->res) { /* detach first: the woken handler must not reach c */
    c->res->conn = NULL;
    c->res = NULL;
  }
  drain_wake(c, c->write_err ? c->write_err : UV_ECONNRESET);
  assert(!c->drain);
  KV_LIST_REMOVE(s->conns, c, prev, next);
  kv_hp_free(c->hp);
  kv_buf_free(&c->in);
  free(c);
  s->nconns--;
  server_maybe_free(s);
}

/* Close now (idempotent); pending writes are cancelled. */
static void conn_close(hs_conn *c) {
  if (c->closing)
    return;
  c->closing = 1;
  if (c->linger) {
    uv_close((uv_handle_t *)c->linger, kv_free_handle);
    c->linger = NULL;
  }
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
  hs_conn *c = req->data;
  free(req);
  if (status < 0 && status != UV_ECANCELED)
    conn_close(c);
}

/* Everything is written: close, or for a rejected client send FIN and drain. */
static void conn_finish_close(hs_conn *c) {
  if (!c->lingering) {
    conn_close(c);
    return;
  }
  if (c->shut || c->closing)
    return;
  c->shut = 1;
  uv_shutdown_t *req = malloc(sizeof *req);
  if (!req || uv_shutdown(req, (uv_stream_t *)&c->tcp, on_shutdown) < 0) {
    free(req);
    conn_close(c);
    return;
  }
  req->data = c;
}

static void on_linger_end(uv_timer_t *t) { conn_close(t->data); }

/* Answer a request we will not handle, then let the connection die softly. */
static void conn_reject(hs_conn *c, int status, const char *why) {
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n",
                   status, kv_http_status_text(status), strlen(why) + 1);
  assert(n > 0 && (size_t)n < sizeof head);
  const char *parts[] = {head, why, "\n"};
  size_t lens[] = {(size_t)n, strlen(why), 1};
  c->lingering = 1;
  c->close_after = 1;
  c->in.len = 0;
  if (conn_write(c, parts, lens, 3) < 0)
    return;
  c->linger = malloc(sizeof *c->linger);
  if (!c->linger) {
    conn_close(c);
    return;
  }
  uv_timer_init(kv_loop(), c->linger);
  c->linger->data = c;
  kv_timer_start(c->linger, on_linger_end, LINGER_MS);
}

/* ---------------------------------------------------------------- reading */

static char read_buf[READ_SIZE]; /* libuv reads, we copy out before returning */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)h, (void)hint;
  *buf = uv_buf_init(read_buf, sizeof read_buf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf) {
  hs_conn *c = (hs_conn *)stream;
  if (nread == 0 || c->closing)
    return;
  if (nread < 0) { /* EOF or error: the client is gone, even mid-request */
    conn_close(c);
    return;
  }
  if (c->lingering)
    return;
  if (kv_buf_add(&c->in, buf->base, (size_t)nread)) {
    conn_close(c);
    return;
  }
  if (c->busy) {
    if (c->in.len > INPUT_MAX) { /* a pipelining client far ahead of us: wait */
      uv_read_stop(stream);
      c->reading = 0;
    }
    return;
  }
  conn_process(c, NULL);
}

static void conn_read(hs_conn *c) {
  if (c->reading || c->closing)
    return;
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0) {
    conn_close(c);
    return;
  }
  c->reading = 1;
}

/* The parser saw a head with "Expect: 100-continue" and a body we accept. */
static void on_head(void *ctx, const kv_http_request *head) {
  hs_conn *c = ctx;
  static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
  if (head->expect_continue && head->major == 1 && head->minor >= 1)
    conn_write1(c, cont, sizeof cont - 1);
}

/* ------------------------------------------------------------- responses */

static hs_res *check_res(lua_State *L, int i) { return luaL_checkudata(L, i, RES_MT); }

/* The response is complete: the connection serves its next request. */
static void res_done(lua_State *L, hs_res *r) {
  hs_conn *c = r->conn;
  if (!c)
    return;
  r->conn = NULL;
  c->res = NULL;
  c->busy = 0;
  if (!r->keep_alive || c->srv->closed) {
    c->close_after = 1;
    if (c->queued == 0)
      conn_finish_close(c);
    return;
  }
  conn_process(c, L);
}

/* Write the status line and headers into b; len < 0 means a streamed body. */
static void build_head(lua_State *L, int ri, hs_res *r, kv_buf *b, long long len) {
  sb_printf(b, "HTTP/1.1 %d %s\r\n", r->status, kv_http_status_text(r->status));
  lua_getiuservalue(L, ri, 1);
  for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
    size_t n;
    const char *line = lua_tolstring(L, -1, &n);
    kv_buf_add(b, line, n);
  }
  lua_pop(L, 1);
  int bodiless = r->status == 204 || r->status == 304;
  if (len >= 0 && !bodiless)
    sb_printf(b, "Content-Length: %lld\r\n", len);
  else if (len < 0 && r->chunked && !bodiless)
    kv_buf_add(b, "Transfer-Encoding: chunked\r\n", 28);
  if (!r->keep_alive)
    kv_buf_add(b, "Connection: close\r\n", 19);
  else if (r->http10)
    kv_buf_add(b, "Connection: keep-alive\r\n", 24);
  kv_buf_add(b, "\r\n", 2);
  r->head_sent = 1;
  r->no_body = r->head_only || bodiless;
}

static int push_fail(lua_State *L, hs_conn *c) { return kv_fail(L, "http: %s", conn_error(c)); }

static int drain_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  hs_drain *d = kv_wait_data(kv_wait_of(ctx));
  if (d->finishing)
    res_done(L, d->r);
  if (d->err)
    return kv_fail(L, "http: %s", uv_strerror(d->err));
  lua_pushboolean(L, 1);
  return 1;
}

static void drain_cancel(kv_wait *w) {
  hs_drain *d = kv_wait_data(w);
  if (d->c) { /* the handler is gone mid-response: nothing sane can follow */
    d->c->drain = NULL;
    conn_close(d->c);
  }
  kv_wait_wake(w);
}

/* After queuing: wait while the connection is far behind, then return true. */
static int after_write(lua_State *L, hs_res *r, int finishing) {
  hs_conn *c = r->conn;
  if (c && !c->closing && backlog(c) > WRITE_HIGH && !c->drain) {
    kv_wait *w = kv_wait_new(L, "http response", sizeof(hs_drain), drain_cancel, NULL);
    hs_drain *d = kv_wait_data(w);
    d->c = c;
    d->r = r;
    d->finishing = finishing;
    c->drain = w;
    return kv_wait_yield(L, w, drain_k);
  }
  if (finishing)
    res_done(L, r);
  if (c && c->closing)
    return push_fail(L, c);
  lua_pushboolean(L, 1);
  return 1;
}

/*
 * Finish the response of the userdata at ri with body (len bytes): the head
 * with Content-Length if none was sent, else the last chunk.  Returns like
 * res:finish (true | nil, err), possibly after waiting for the peer.
 */
static int res_end(lua_State *L, int ri, const char *body, size_t len) {
  hs_res *r = check_res(L, ri);
  hs_conn *c = r->conn;
  r->finished = 1;
  if (!c || c->closing) {
    res_done(L, r);
    return push_fail(L, c);
  }
  kv_buf head = {0};
  const char *parts[3] = {"", "", ""};
  size_t lens[3] = {0, 0, 0};
  char size[32];
  if (!r->head_sent) {
    build_head(L, ri, r, &head, (long long)len);
    if (head.oom)
      return luaL_error(L, "http: out of memory");
    parts[0] = head.p, lens[0] = head.len;
    if (!r->no_body)
      parts[1] = body, lens[1] = len;
  } else if (r->no_body) {
    /* nothing: a HEAD or bodiless answer ends with its head */
  } else if (r->chunked) {
    if (len > 0) {
      lens[0] = (size_t)snprintf(size, sizeof size, "%zx\r\n", len);
      parts[0] = size;
      parts[1] = body, lens[1] = len;
      parts[2] = "\r\n0\r\n\r\n", lens[2] = 7;
    } else {
      parts[2] = "0\r\n\r\n", lens[2] = 5;
    }
  } else {
    parts[1] = body, lens[1] = len;
  }
  int err = conn_write(c, parts, lens, 3);
  free(head.p);
  if (err < 0) {
    res_done(L, r);
    return push_fail(L, c);
  }
  return after_write(L, r, 1);
}

/* res:status(n) */
static int res_status(lua_State *L) {
  hs_res *r = check_res(L, 1);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_argcheck(L, n >= 200 && n <= 999, 2, "status must be in 200..999");
  if (r->head_sent)
    return luaL_error(L, "res:status: the head was already sent");
  r->status = (int)n;
  lua_settop(L, 1);
  return 1;
}

static int header_ok(const char *s, int name) {
  if (name && (!*s || strpbrk(s, ": \t")))
    return 0;
  return strpbrk(s, "\r\n") == NULL;
}

/*
 * res:header(name, value): set (replace) a response header; value may be a
 * list for repeated lines, nil removes.  Framing headers (content-length,
 * transfer-encoding, connection) belong to the server and are ignored.
 */
static int res_header(lua_State *L) {
  hs_res *r = check_res(L, 1);
  const char *k = luaL_checkstring(L, 2);
  luaL_argcheck(L, header_ok(k, 1), 2, "invalid header name");
  if (r->head_sent)
    return luaL_error(L, "res:header: the head was already sent");
  luaL_Buffer key;
  luaL_buffinit(L, &key);
  for (const char *p = k; *p; p++)
    luaL_addchar(&key, (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : *p);
  luaL_pushresult(&key);
  const char *lk = lua_tostring(L, -1);
  if (!strcmp(lk, "content-length") || !strcmp(lk, "transfer-encoding") ||
      !strcmp(lk, "connection")) {
    lua_settop(L, 1);
    return 1;
  }
  int key_i = lua_gettop(L);
  lua_getiuservalue(L, 1, 1);
  lua_pushvalue(L, key_i);
  if (lua_isnoneornil(L, 3)) {
    lua_pushnil(L);
  } else {
    luaL_Buffer b;
    int list = lua_istable(L, 3);
    lua_Integer n = list ? luaL_len(L, 3) : 1;
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= n; i++) {
      if (list)
        lua_geti(L, 3, i);
      else
        lua_pushvalue(L, 3);
      const char *v = lua_tostring(L, -1);
      if (!v || !header_ok(v, 0))
        return luaL_error(L, "res:header: invalid value for %s", k);
      lua_pop(L, 1);
      luaL_addstring(&b, k);
      luaL_addstring(&b, ": ");
      luaL_addstring(&b, v);
      luaL_addstring(&b, "\r\n");
    }
    luaL_pushresult(&b);
  }
  lua_rawset(L, -3);
  lua_settop(L, 1);
  return 1;
}

/* res:write(chunk) -> true | nil, err: streams the body (chunked on HTTP/1.1). */
static int res_write(lua_State *L) {
  hs_res *r = check_res(L, 1);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  if (r->finished)
    return luaL_error(L, "res:write: the response is already finished");
  hs_conn *c = r->conn;
  if (!c || c->closing)
    return push_fail(L, c);
  kv_buf head = {0};
  char size[32];
  const char *parts[4] = {"", "", "", ""};
  size_t lens[4] = {0, 0, 0, 0};
  if (!r->head_sent) {
    r->chunked = !r->http10;
    if (r->http10)
      r->keep_alive = 0; /* the end of an unframed body is the end of the connection */
    build_head(L, 1, r, &head, -1);
    if (head.oom)
      return luaL_error(L, "http: out of memory");
    parts[0] = head.p, lens[0] = head.len;
  }
  if (len > 0 && !r->no_body) {
    if (r->chunked) {
      lens[1] = (size_t)snprintf(size, sizeof size, "%zx\r\n", len);
      parts[1] = size;
      parts[3] = "\r\n", lens[3] = 2;
    }
    parts[2] = data, lens[2] = len;
  }
  int err = conn_write(c, parts, lens, 4);
  free(head.p);
  if (err < 0)
    return push_fail(L, c);
  return after_write(L, r, 0);
}

/* res:finish([body]) -> true | nil, err; a table body is sent as JSON. */
static int res_finish(lua_State *L) {
  hs_res *r = check_res(L, 1);
  if (r->finished)
    return luaL_error(L, "res:finish: the response is already finished");
  lua_settop(L, 2);
  if (lua_istable(L, 2)) {
    kvh_json_encode(L, 2);
    lua_replace(L, 2);
    lua_getiuservalue(L, 1, 1);
    int has_type = lua_getfield(L, -1, "content-type") != LUA_TNIL;
    lua_pop(L, 2);
    if (!has_type && !r->head_sent) {
      lua_pushcfunction(L, res_header);
      lua_pushvalue(L, 1);
      lua_pushliteral(L, "Content-Type");
      lua_pushliteral(L, "application/json");
      lua_call(L, 3, 0);
    }
  }
  size_t len = 0;
  const char *body = lua_isnil(L, 2) ? "" : luaL_checklstring(L, 2, &len);
  return res_end(L, 1, body, len);
}

static int res_gc(lua_State *L) {
  hs_res *r = check_res(L, 1);
  hs_conn *c = r->conn;
  if (c) { /* its handler vanished before finishing: the connection cannot go on */
    r->conn = NULL;
    c->res = NULL;
    conn_close(c);
  }
  return 0;
}

static int res_tostring(lua_State *L) {
  hs_res *r = check_res(L, 1);
  lua_pushfstring(L, "http response (%d%s)", r->status, r->finished ? ", finished" : "");
  return 1;
}

static const luaL_Reg res_methods[] = {
    {"status", res_status}, {"header", res_header}, {"write", res_write},
    {"finish", res_finish}, {NULL, NULL},
};

/* --------------------------------------------------------------- handlers */

/* Log through the engine's global log() when there is one; never raises. */
static void log_error(lua_State *L, const char *msg) {
  if (lua_getglobal(L, "log") == LUA_TFUNCTION) {
    lua_pushstring(L, msg);
    if (lua_pcall(L, 1, 0, 0) == LUA_OK)
      return;
  }
  lua_pop(L, 1);
  fprintf(stderr, "%s\n", msg);
}

static int traceback(lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  if (!msg)
    msg = luaL_tolstring(L, 1, NULL);
  luaL_traceback(L, L, msg, 1);
  return 1;
}

/*
 * After handler(req, res) returned or raised (stack: 1 traceback, 2 res,
 * 3 req[, error]): finish what the handler left open, with a 500 carrying
 * the error when it raised and the head was not sent yet.
 */
static int handler_done(lua_State *L, int status, lua_KContext ctx) {
  (void)ctx;
  hs_res *r = check_res(L, 2);
  if (status != LUA_OK && status != LUA_YIELD) {
    const char *err = lua_tostring(L, -1);
    lua_getfield(L, 3, "method");
    lua_getfield(L, 3, "path");
    lua_pushfstring(L, "http: handler for %s %s failed: %s", lua_tostring(L, -2),
                    lua_tostring(L, -1), err ? err : "(error object is not a string)");
    log_error(L, lua_tostring(L, -1));
    if (!r->finished && !r->head_sent) {
      r->status = 500;
      lua_newtable(L);
      lua_pushliteral(L, "Content-Type: text/plain\r\n");
      lua_setfield(L, -2, "content-type");
      lua_setiuservalue(L, 2, 1);
      size_t len;
      const char *body = lua_tolstring(L, -1, &len);
      return res_end(L, 2, body, len);
    }
    if (!r->finished && r->conn) /* mid-stream: only a cut connection tells the client */
      conn_close(r->conn);
    return 0;
  }
  if (!r->finished)
    return res_end(L, 2, "", 0);
  return 0;
}

/* The body of a handler task: run(handler, req, res). */
static int handler_run(lua_State *L) {
  lua_pushcfunction(L, traceback);
  lua_insert(L, 1);    /* traceback, handler, req, res */
  lua_pushvalue(L, 4); /* ..., res */
  lua_insert(L, 2);    /* traceback, res, handler, req, res */
  lua_pushvalue(L, 4); /* ..., req */
  lua_insert(L, 3);    /* traceback, res, req, handler, req, res */
  return handler_done(L, lua_pcallk(L, 2, 0, 1, 0, handler_done), 0);
}

static void push_request(lua_State *L, const kv_http_request *q, const hs_conn *c) {
  lua_createtable(L, 0, 8);
  lua_pushstring(L, q->method);
  lua_setfield(L, -2, "method");
  lua_pushstring(L, q->path);
  lua_setfield(L, -2, "path");
  lua_pushstring(L, q->query);
  lua_setfield(L, -2, "query");
  lua_createtable(L, 0, (int)q->nheaders);
  for (size_t i = 0; i < q->nheaders; i++) {
    const kv_http_header *h = &q->headers[i];
    if (lua_getfield(L, -1, h->name) == LUA_TSTRING) /* repeated: join, as RFC 9110 allows */
      lua_pushfstring(L, "%s, %s", lua_tostring(L, -1), h->value);
    else
      lua_pushstring(L, h->value);
    lua_setfield(L, -3, h->name);
    lua_pop(L, 1);
  }
  lua_setfield(L, -2, "headers");
  lua_pushlstring(L, q->body, q->body_len);
  lua_setfield(L, -2, "body");
  lua_pushcfunction(L, kvh_body_json);
  lua_setfield(L, -2, "json");
  lua_pushstring(L, c->peer);
  lua_setfield(L, -2, "peer");
}

typedef struct hs_dispatch {
  hs_conn *c;
  kv_http_request *q; /* NULL once consumed */
} hs_dispatch;

/* Protected part of conn_dispatch: build req and res, start the task. */
static int dispatch_protected(lua_State *L) {
  hs_dispatch *d = lua_touserdata(L, 1);
  hs_conn *c = d->c;
  kv_http_request *q = d->q;
  lua_settop(L, 0);
  lua_pushcfunction(L, handler_run);
  lua_rawgeti(L, LUA_REGISTRYINDEX, c->srv->handler_ref);
  push_request(L, q, c);
  hs_res *r = lua_newuserdatauv(L, sizeof *r, 1);
  memset(r, 0, sizeof *r);
  luaL_setmetatable(L, RES_MT);
  lua_newtable(L);
  lua_setiuservalue(L, -2, 1);
  r->status = 200;
  r->http10 = q->major == 1 && q->minor == 0;
  r->keep_alive = q->keep_alive;
  r->head_only = strcmp(q->method, "HEAD") == 0;
  d->q = NULL;
  kv_http_request_free(q);
  kv_spawn(L, c->srv->res.scope, 3);
  r->conn = c; /* linked only once nothing can raise any more */
  c->res = r;
  c->busy = 1;
  return 0;
}

/*
 * Hand request q (consumed) to a new handler task in the server's scope.  L
 * is the running task's thread when called from Lua, NULL from a loop
 * callback (the main thread is used then).  Never raises: a failure (out of
 * memory) costs the connection only.
 */
static void conn_dispatch(hs_conn *c, kv_http_request *q, lua_State *L) {
  hs_server *s = c->srv;
  hs_dispatch d = {c, q};
  if (!L)
    L = s->L;
  if (s->closed || !s->res.scope || !lua_checkstack(L, 3)) {
    kv_http_request_free(q);
    conn_close(c);
    return;
  }
  lua_pushcfunction(L, dispatch_protected);
  lua_pushlightuserdata(L, &d);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    log_error(L, lua_tostring(L, -1));
    lua_pop(L, 1);
    kv_http_request_free(d.q);
    conn_close(c);
  }
}

/* Parse what is buffered until a request is dispatched or more bytes are needed. */
static void conn_process(hs_conn *c, lua_State *L) {
  while (!c->busy && !c->closing && !c->lingering && c->in.len > 0) {
    size_t used;
    kv_hp_result r = kv_hp_feed(c->hp, c->in.p, c->in.len, &used);
    memmove(c->in.p, c->in.p + used, c->in.len - used);
    c->in.len -= used;
    if (r == KV_HP_MORE)
      break;
    if (r == KV_HP_ERROR) {
      conn_reject(c, kv_hp_error_status(c->hp), kv_hp_error_text(c->hp));
      break;
    }
    conn_dispatch(c, kv_hp_take(c->hp), L);
  }
  if (!c->busy || c->in.len <= INPUT_MAX)
    conn_read(c);
}

/* ----------------------------------------------------------------- server */

static void on_connection(uv_stream_t *listener, int status) {
  hs_server *s = listener->data;
  if (status < 0 || s->closed)
    return;
  hs_conn *c = calloc(1, sizeof *c);
  if (!c)
    return;
  uv_tcp_init(kv_loop(), &c->tcp);
  c->srv = s;
  KV_LIST_PUSH(s->conns, c, prev, next);
  s->nconns++;
  c->hp = kv_hp_new(s->max_body, on_head, c);
  if (!c->hp || uv_accept(listener, (uv_stream_t *)&c->tcp) < 0) {
    conn_close(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char ip[48] = "?";
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
    if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
      snprintf(c->peer, sizeof c->peer, "[%s]:%d", ip,
               ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    } else {
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
      snprintf(c->peer, sizeof c->peer, "%s:%d", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
    }
  }
  conn_read(c);
}

static void on_listener_closed(uv_handle_t *h) {
  hs_server *s = h->data;
  s->listening = 0;
  server_maybe_free(s);
}

/* The resource's close: stop listening, close every connection.  Idempotent. */
static void server_close(kv_resource *res) {
  hs_server *s = (hs_server *)res;
  kv_untrack(res);
  if (s->closed)
    return;
  s->closed = 1;
  if (s->handle) {
    s->handle->s = NULL;
    s->handle = NULL;
  }
  lua_checkstack(s->L, 4);
  luaL_unref(s->L, LUA_REGISTRYINDEX, s->handler_ref);
  luaL_unref(s->L, LUA_REGISTRYINDEX, s->handle_ref);
  for (hs_conn *c = s->conns; c; c = c->next)
    conn_close(c);
  uv_close((uv_handle_t *)&s->tcp, on_listener_closed);
}

static hs_handle *check_server(lua_State *L) { return luaL_checkudata(L, 1, SERVER_MT); }

/* server:close(), __close and __gc */
static int server_gc(lua_State *L) {
  hs_handle *h = check_server(L);
  if (h->s)
    server_close(&h->s->res);
  return 0;
}

static int server_port(lua_State *L) {
  lua_pushinteger(L, check_server(L)->port);
  return 1;
}

static int server_tostring(lua_State *L) {
  hs_handle *h = check_server(L);
  if (h->s)
    lua_pushfstring(L, "http server (port %d)", h->port);
  else
    lua_pushliteral(L, "http server (closed)");
  return 1;
}

static const luaL_Reg server_methods[] = {
    {"port", server_port}, {"close", server_gc}, {NULL, NULL}};

static int bind_failed(lua_State *L, hs_server *s, const char *host, int port, int err) {
  s->closed = 1;
  uv_close((uv_handle_t *)&s->tcp, on_listener_closed);
  luaL_unref(L, LUA_REGISTRYINDEX, s->handler_ref);
  return kv_fail(L, "http: cannot listen on %s:%d: %s", host, port, uv_strerror(err));
}

static int opt_integer(lua_State *L, const char *k, lua_Integer def) {
  lua_getfield(L, 1, k);
  lua_Integer v = lua_isnil(L, -1) ? def : lua_tointeger(L, -1);
  if (!lua_isnil(L, -1) && !lua_isinteger(L, -1))
    luaL_error(L, "http.listen: %s must be an integer", k);
  lua_pop(L, 1);
  return (int)(v > 0x7fffffff ? 0x7fffffff : v);
}

static const char *const listen_keys[] = {"host", "port", "handler", "max_body", NULL};

const kv_option_keys kvh_server_options[] = {{"listen", listen_keys}, {NULL, NULL}};

/*
 * http.listen{host = "127.0.0.1", port = 0, handler = fn(req, res),
 * max_body = 8 MiB} -> server | nil, err.  The server is tracked in the
 * current scope; handlers run as tasks in that scope.
 */
int kvh_listen(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  kv_check_options(L, 1, "http.listen", listen_keys);
  lua_settop(L, 1);
  lua_getfield(L, 1, "host");
  const char *host = luaL_optstring(L, -1, "127.0.0.1");
  int port = opt_integer(L, "port", 0);
  lua_Integer max_body = opt_integer(L, "max_body", DEFAULT_MAX_BODY);
  luaL_argcheck(L, port >= 0 && port <= 65535, 1, "port must be in 0..65535");
  luaL_argcheck(L, max_body >= 0, 1, "max_body must not be negative");
  if (lua_getfield(L, 1, "handler") != LUA_TFUNCTION)
    return luaL_error(L, "http.listen: handler must be a function");
  struct sockaddr_storage addr;
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&addr) &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr))
    return luaL_error(L, "http.listen: host must be an IP address, not %s", host);

  hs_server *s = calloc(1, sizeof *s);
  if (!s)
    return luaL_error(L, "http.listen: out of memory");
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  s->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  s->max_body = (size_t)max_body;
  s->handler_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  s->handle_ref = LUA_NOREF;
  uv_tcp_init(kv_loop(), &s->tcp);
  s->tcp.data = s;
  s->listening = 1;
  int err = uv_tcp_bind(&s->tcp, (struct sockaddr *)&addr, 0);
  if (!err)
    err = uv_listen((uv_stream_t *)&s->tcp, 511, on_connection);
  if (err)
    return bind_failed(L, s, host, port, err);

  struct sockaddr_storage bound;
  int len = sizeof bound;
  uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&bound, &len);
  hs_handle *h = lua_newuserdatauv(L, sizeof *h, 0);
  h->s = s;
  h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
  luaL_setmetatable(L, SERVER_MT);
  s->handle = h;
  lua_pushvalue(L, -1);
  s->handle_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* open servers stay reachable */
  kv_track(&s->res, "http server", server_close);
  return 1;
}

void kvh_server_open(lua_State *L) {
  kv_class_new(L, SERVER_MT, server_methods, server_gc, server_tostring);
  kv_class_new(L, RES_MT, res_methods, res_gc, res_tostring);
}
