/*
 * redis.c - the `redis` module: a Redis client for scenarios, on the loop.
 *
 *   local redis = require "redis"
 *   local c = redis.connect{host = "127.0.0.1", port = 6379, db = 0,
 *                           password = nil, timeout = 5}  -- or nil, err
 *   c:call("HSET", key, field, value)   -> reply; raises "redis: <error>"
 *   c:pcall(...)                        -> reply | nil, "redis: <error>"
 *   c:hgetall(key)                      -> {field = value}
 *   c:pipeline(function(p) p:call(...) ... end) -> {reply, ...}
 *   c:close()
 *   redis.null (a unique sentinel), redis.version ("hiredis 0.14.1")
 *
 * Replies: status and bulk strings -> string, integer -> integer, nil ->
 * nil, array -> table (nil elements are redis.null, error elements
 * {err = msg}).  A pipeline returns one entry per command in order: error
 * replies as {err = msg}, nil replies as redis.null (so the array has no
 * holes).  Arguments are strings (binary-safe) or numbers (integers in
 * decimal, floats in the shortest form that reads back the same).
 *
 * How it sits in the loop: hiredis's async API over a libuv poll handle on
 * the connection's socket.  Each call (a command, a pipeline, or the connect
 * handshake) is a `call` record: it yields the calling task on a kv_wait and
 * arms a libuv timer, because hiredis 0.14 has no command timeouts.  hiredis
 * callbacks only copy replies into the record; the task is woken after
 * hiredis has returned to the poll callback (or, for outcomes decided
 * outside hiredis, from the call's own timer restarted at 0 ms), so Lua
 * never runs inside a hiredis callback and whatever Lua does next (close,
 * another call) cannot pull the context from under hiredis.
 *
 * Failure model: when a call times out, the replies still to come can no
 * longer be matched to their calls, so every pending call on the connection
 * fails and the connection is dropped; later calls fail with "redis:
 * connection lost: ...".  A server that closes or resets the connection
 * fails the pending calls the same way.  There is no automatic reconnect:
 * a scenario that restarts Redis connects again.  A call whose task is
 * abandoned (test timeout, task:cancel) keeps its place: its reply is read
 * and dropped, and the connection stays usable.  (P)SUBSCRIBE, SSUBSCRIBE,
 * their UNSUBSCRIBEs and MONITOR raise: hiredis would call back many times.
 *
 * Our own poll adapter replaces hiredis's libuv adapter
 * (<hiredis/adapters/libuv.h>): that one returns early when libuv reports a
 * poll error (status < 0), and libuv has already stopped the handle by then
 * (it does so on POLLERR, for example a refused connect or a reset), so the
 * connection would hang forever.  Ours lets hiredis find the socket's error
 * and drops the connection if hiredis does not.
 *
 * Memory: a connection (`conn`) outlives its userdata while hiredis or a
 * call still points at it (a reference count); a call outlives its task's
 * wait while hiredis still owes it replies (another count).  redisAsyncFree
 * is never called from inside hiredis: there it is deferred to a timer.
 */
#include "engine.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <lauxlib.h>

#define CONN_MT "redis.connection"
#define PIPE_MT "redis.pipeline"

static const char null_key = 'n'; /* registry key of redis.null */

typedef struct conn conn;
typedef struct call call;

/* A reply copied out of hiredis, which frees its own after the callback. */
typedef struct reply {
  int type;
  long long integer;
  size_t len;
  char *str;
  size_t n;
  struct reply **elem;
} reply;

/* What a call hands back to Lua. */
enum call_kind { K_CALL, K_PCALL, K_HGETALL, K_PIPELINE, K_CONNECT };

struct call {
  conn *c;
  kv_wait *w;        /* NULL once delivered or cancelled */
  uv_timer_t *timer; /* non-NULL exactly while w is */
  call *prev, *next; /* in c->calls while unsettled */
  int refs;          /* the wait + hiredis callbacks still to come */
  enum call_kind kind;
  int settled;      /* outcome known; the timer (at 0 ms) only delivers it */
  call *ready_next; /* in the ready list (settled inside hiredis) */
  int n, got;       /* replies expected and received */
  reply **replies;
  char *err; /* failure, without the "redis: " prefix */
};

/* The libuv side of one hiredis context. */
typedef struct adapter {
  uv_poll_t poll;
  redisAsyncContext *ac; /* NULL once hiredis has cleaned up */
  conn *c;
  int events;
} adapter;

struct conn {
  kv_resource res;
  redisAsyncContext *ac; /* NULL once freed, by hiredis or by us */
  char *lost;            /* why the connection is unusable; NULL while usable */
  char *where;           /* "host:port" */
  double timeout;
  call *calls; /* unsettled calls, oldest first */
  call *calls_tail;
  int refs; /* the userdata, the adapter, each call, a pending reaper */
  int closed;
};

/* Depth of hiredis entry points on the stack (read/write handlers). */
static int in_hiredis;

/*
 * Calls settled while hiredis was on the stack, each holding a reference:
 * the poll callback delivers them once hiredis has returned, which saves the
 * loop turn that a 0 ms timer would cost on every reply.
 */
static call *ready_head, **ready_tail = &ready_head;

static void free_handle(uv_handle_t *h) { free(h); }

static char *xstrdup(const char *s) {
  char *d = strdup(s);
  if (!d)
    abort();
  return d;
}

static char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *xprintf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  if (vasprintf(&s, fmt, ap) < 0)
    abort();
  va_end(ap);
  return s;
}

/* ---------------------------------------------------------------- replies */

static void reply_free(reply *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->n; i++)
    reply_free(r->elem[i]);
  free(r->elem);
  free(r->str);
  free(r);
}

/* Deep copy of a hiredis reply (hiredis frees the original on return). */
static reply *reply_copy(const redisReply *h) {
  reply *r = calloc(1, sizeof *r);
  if (!r)
    abort();
  r->type = h->type;
  r->integer = h->integer;
  if (h->str) {
    r->len = h->len;
    r->str = malloc(h->len + 1);
    if (!r->str)
      abort();
    memcpy(r->str, h->str, h->len);
    r->str[h->len] = '\0';
  }
  if (h->type == REDIS_REPLY_ARRAY && h->elements > 0) {
    r->n = h->elements;
    r->elem = calloc(h->elements, sizeof *r->elem);
    if (!r->elem)
      abort();
    for (size_t i = 0; i < h->elements; i++)
      r->elem[i] = reply_copy(h->element[i]);
  }
  return r;
}

static void push_null(lua_State *L) { lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key); }

static void push_err_table(lua_State *L, const reply *r) {
  lua_createtable(L, 0, 1);
  lua_pushlstring(L, r->str ? r->str : "", r->len);
  lua_setfield(L, -2, "err");
}

/*
 * Push r as a Lua value.  Inside an array (nested = 1) nil becomes redis.null
 * and an error becomes {err = msg}; at the top the caller handles errors.
 */
static void push_reply(lua_State *L, const reply *r, int nested) {
  luaL_checkstack(L, 4, "redis: reply too deep");
  switch (r->type) {
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_STATUS:
    lua_pushlstring(L, r->str ? r->str : "", r->len);
    break;
  case REDIS_REPLY_INTEGER:
    lua_pushinteger(L, (lua_Integer)r->integer);
    break;
  case REDIS_REPLY_ARRAY:
    lua_createtable(L, (int)r->n, 0);
    for (size_t i = 0; i < r->n; i++) {
      push_reply(L, r->elem[i], 1);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    break;
  case REDIS_REPLY_ERROR:
    push_err_table(L, r);
    break;
  default: /* REDIS_REPLY_NIL */
    if (nested)
      push_null(L);
    else
      lua_pushnil(L);
    break;
  }
}

/* ------------------------------------------------------------ connections */

static void conn_unref(conn *c) {
  if (--c->refs > 0)
    return;
  free(c->lost);
  free(c->where);
  free(c);
}

static void call_settle(call *k, char *err);

/*
 * Mark c unusable for `why` (kept: the first reason wins) and settle every
 * pending call with `calls_err` (or `why`).  Does not touch the context.
 */
static void conn_lose(conn *c, const char *why, const char *calls_err) {
  if (!c->lost)
    c->lost = xstrdup(why);
  while (c->calls)
    call_settle(c->calls, xstrdup(calls_err ? calls_err : why));
}

/*
 * hiredis is freeing c's context right now: forget it and fail what waits
 * with `what`: errstr ("connection lost: Connection reset by peer").
 */
static void conn_gone(conn *c, const char *what, const char *errstr) {
  c->ac = NULL;
  if (!c->lost) {
    char *why = xprintf("%s: %s", what, errstr && *errstr ? errstr : "closed by the server");
    conn_lose(c, why, NULL);
    free(why);
  }
}

static void reaper_fired(uv_timer_t *t) {
  conn *c = t->data;
  uv_close((uv_handle_t *)t, free_handle);
  redisAsyncContext *ac = c->ac;
  c->ac = NULL;
  if (ac)
    redisAsyncFree(ac);
  conn_unref(c);
}

/*
 * Drop c: settle its calls with `calls_err` (default `why`), then free the
 * hiredis context, at once or, when we are inside hiredis, from a timer.
 * redisAsyncFree calls the callbacks of replies still owed with NULL; they
 * find their calls settled and only release them.
 */
static void conn_drop(conn *c, const char *why, const char *calls_err) {
  conn_lose(c, why, calls_err);
  redisAsyncContext *ac = c->ac;
  if (!ac)
    return;
  if (!in_hiredis) {
    c->ac = NULL;
    redisAsyncFree(ac);
    return;
  }
  uv_timer_t *t = malloc(sizeof *t);
  if (!t)
    abort();
  uv_timer_init(kv_loop(), t);
  t->data = c;
  c->refs++;
  kv_timer_start(t, reaper_fired, 0);
}

/* The resource's close: idempotent; pending calls fail with "closed". */
static void conn_close(kv_resource *r) {
  conn *c = (conn *)((char *)r - offsetof(conn, res));
  kv_untrack(r);
  if (c->closed)
    return;
  c->closed = 1;
  conn_drop(c, "connection closed", NULL);
}

/* ------------------------------------------------------- the poll adapter */

static void deliver_ready(void);

static void adapter_closed(uv_handle_t *h) {
  adapter *a = (adapter *)h;
  conn_unref(a->c);
  free(a);
}

/* libuv has stopped the handle on a socket error: let hiredis see it. */
static void adapter_poll_error(adapter *a, int status) {
  redisAsyncContext *ac = a->ac;
  in_hiredis++;
  if (!(ac->c.flags & REDIS_CONNECTED))
    redisAsyncHandleWrite(ac); /* the connect check reads SO_ERROR */
  else
    redisAsyncHandleRead(ac);
  in_hiredis--;
  if (a->ac) { /* hiredis saw nothing wrong, but the handle is dead */
    char *why = xprintf("connection lost: socket error (%s)", uv_strerror(status));
    conn_drop(a->c, why, NULL);
    free(why);
  }
  deliver_ready();
}

static void adapter_poll(uv_poll_t *h, int status, int events) {
  adapter *a = (adapter *)h;
  if (!a->ac)
    return;
  if (status < 0) {
    adapter_poll_error(a, status);
    return;
  }
  in_hiredis++;
  if (a->ac && (events & UV_READABLE))
    redisAsyncHandleRead(a->ac);
  if (a->ac && (events & UV_WRITABLE))
    redisAsyncHandleWrite(a->ac);
  in_hiredis--;
  deliver_ready(); /* a and its context may be gone after this */
}

static void adapter_update(adapter *a) {
  if (a->events)
    uv_poll_start(&a->poll, a->events, adapter_poll);
  else
    uv_poll_stop(&a->poll);
}

static void adapter_add_read(void *p) {
  adapter *a = p;
  a->events |= UV_READABLE;
  adapter_update(a);
}

static void adapter_del_read(void *p) {
  adapter *a = p;
  a->events &= ~UV_READABLE;
  adapter_update(a);
}

static void adapter_add_write(void *p) {
  adapter *a = p;
  a->events |= UV_WRITABLE;
  adapter_update(a);
}

static void adapter_del_write(void *p) {
  adapter *a = p;
  a->events &= ~UV_WRITABLE;
  adapter_update(a);
}

/* hiredis is freeing the context: after this it calls at most onDisconnect. */
static void adapter_cleanup(void *p) {
  adapter *a = p;
  a->ac = NULL;
  uv_close((uv_handle_t *)&a->poll, adapter_closed);
}

/* Attach ac to the loop; the adapter holds a reference to c until closed. */
static int adapter_attach(conn *c, redisAsyncContext *ac) {
  adapter *a = calloc(1, sizeof *a);
  if (!a)
    abort();
  if (uv_poll_init(kv_loop(), &a->poll, ac->c.fd) != 0) {
    free(a);
    return -1;
  }
  a->ac = ac;
  a->c = c;
  c->refs++;
  ac->ev.data = a;
  ac->ev.addRead = adapter_add_read;
  ac->ev.delRead = adapter_del_read;
  ac->ev.addWrite = adapter_add_write;
  ac->ev.delWrite = adapter_del_write;
  ac->ev.cleanup = adapter_cleanup;
  return 0;
}

static void on_connect(const redisAsyncContext *ac, int status) {
  conn *c = ac->data;
  if (status != REDIS_OK) { /* hiredis frees the context right after this */
    char *what = xprintf("cannot connect to %s", c->where);
    conn_gone(c, what, ac->errstr);
    free(what);
  }
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
  conn_gone(ac->data, "connection lost", status == REDIS_OK ? NULL : ac->errstr);
}

/* ------------------------------------------------------------------ calls */

static void call_unref(call *k) {
  if (--k->refs > 0)
    return;
  for (int i = 0; i < k->got; i++)
    reply_free(k->replies[i]);
  free(k->replies);
  free(k->err);
  conn_unref(k->c);
  free(k);
}

static void call_unlink(call *k) {
  conn *c = k->c;
  if (k->prev)
    k->prev->next = k->next;
  else if (c->calls == k)
    c->calls = k->next;
  else
    return; /* not linked */
  if (k->next)
    k->next->prev = k->prev;
  else
    c->calls_tail = k->prev;
  k->prev = k->next = NULL;
}

static void call_timer_fired(uv_timer_t *t);

/*
 * The outcome of k is known (err == NULL: all replies are in; else the
 * failure, which k now owns).  Inside hiredis it joins the ready list, which
 * the poll callback delivers after hiredis returns; elsewhere (Lua may be
 * running) it is delivered from the call's timer at 0 ms.  Either way the
 * task is resumed from a loop callback with no hiredis frame below it.
 */
static void call_settle(call *k, char *err) {
  if (k->settled || !k->w) {
    free(err);
    return;
  }
  call_unlink(k);
  k->settled = 1;
  k->err = err;
  if (in_hiredis) {
    k->refs++;
    k->ready_next = NULL;
    *ready_tail = k;
    ready_tail = &k->ready_next;
  } else {
    kv_timer_start(k->timer, call_timer_fired, 0);
  }
}

/* Resume k's task with its outcome (from a loop callback). */
static void call_deliver(call *k) {
  kv_wait *w = k->w;
  uv_close((uv_handle_t *)k->timer, free_handle);
  k->timer = NULL;
  k->w = NULL;
  kv_wait_wake(w);
}

/* Resume the tasks of calls settled inside hiredis, oldest first. */
static void deliver_ready(void) {
  while (ready_head) {
    call *k = ready_head;
    ready_head = k->ready_next;
    if (!ready_head)
      ready_tail = &ready_head;
    if (k->w) /* not cancelled meanwhile by a task resumed before it */
      call_deliver(k);
    call_unref(k);
  }
}

/*
 * Write what was just queued on c now, rather than a loop turn later when
 * the socket reports writable: one poll wakeup and two epoll_ctl calls less
 * per call.  Runs from Lua, so whatever hiredis settles meanwhile (a failed
 * write frees the context) is delivered through the timers, not from here.
 */
static void flush_now(conn *c) {
  if (!c->ac || !(c->ac->c.flags & REDIS_CONNECTED))
    return;
  in_hiredis++;
  redisAsyncHandleWrite(c->ac);
  in_hiredis--;
  while (ready_head) {
    call *k = ready_head;
    ready_head = k->ready_next;
    if (!ready_head)
      ready_tail = &ready_head;
    if (k->w)
      kv_timer_start(k->timer, call_timer_fired, 0);
    call_unref(k);
  }
}

static void call_timer_fired(uv_timer_t *t) {
  call *k = t->data;
  if (!k->settled) {
    /* A real timeout: replies still owed can no longer be matched. */
    conn *c = k->c;
    call_unlink(k);
    k->settled = 1;
    if (k->kind == K_CONNECT)
      k->err = xprintf("connect to %s timed out after %gs", c->where, c->timeout);
    else
      k->err =
          xprintf("timeout after %gs waiting for %s (connection dropped)", c->timeout, c->where);
    char *why =
        xprintf("connection lost: a call timed out after %gs, so reply order was lost", c->timeout);
    char *others = xprintf("connection lost: another call on it timed out after %gs", c->timeout);
    conn_drop(c, why, others);
    free(why);
    free(others);
  }
  call_deliver(k);
}

/* kv_wait cancel: the task is gone; replies still owed will be dropped. */
static void call_cancel(kv_wait *w) {
  call *k = *(call **)kv_wait_data(w);
  call_unlink(k);
  uv_close((uv_handle_t *)k->timer, free_handle);
  k->timer = NULL;
  k->w = NULL;
  kv_wait_wake(w);
}

static void call_dispose(kv_wait *w) { call_unref(*(call **)kv_wait_data(w)); }

/* A new call on c expecting n replies, waited for by w, its timer armed. */
static call *call_new(conn *c, kv_wait *w, enum call_kind kind, int n) {
  call *k = calloc(1, sizeof *k);
  if (!k)
    abort();
  k->replies = calloc((size_t)(n > 0 ? n : 1), sizeof *k->replies);
  if (!k->replies)
    abort();
  k->c = c;
  c->refs++;
  k->w = w;
  k->kind = kind;
  k->n = n;
  k->refs = 1;
  *(call **)kv_wait_data(w) = k;
  k->timer = malloc(sizeof *k->timer);
  if (!k->timer)
    abort();
  uv_timer_init(kv_loop(), k->timer);
  k->timer->data = k;
  kv_timer_start(k->timer, call_timer_fired, (uint64_t)(c->timeout * 1000.0 + 0.5));
  k->prev = c->calls_tail;
  if (c->calls_tail)
    c->calls_tail->next = k;
  else
    c->calls = k;
  c->calls_tail = k;
  return k;
}

/* hiredis callback: one reply (NULL: the context is being freed). */
static void reply_received(redisAsyncContext *ac, void *r, void *privdata) {
  call *k = privdata;
  if (k->w && !k->settled) {
    if (!r) {
      conn_gone(k->c, "connection lost", ac->err ? ac->errstr : NULL);
    } else if (k->got < k->n) {
      k->replies[k->got++] = reply_copy(r);
      if (k->got == k->n)
        call_settle(k, NULL);
    }
  }
  call_unref(k);
}

/* Commands hiredis 0.14 treats specially: their callbacks fire many times. */
static int command_unsupported(const char *name) {
  if (!strchr("spumSPUM", name[0]) || !name[0])
    return 0; /* the common case, without seven comparisons */
  static const char *const names[] = {"subscribe",    "psubscribe",   "ssubscribe", "unsubscribe",
                                      "punsubscribe", "sunsubscribe", "monitor",    NULL};
  for (int i = 0; names[i]; i++)
    if (strcasecmp(name, names[i]) == 0)
      return 1;
  return 0;
}

/* Queue one command for k; on failure settle k and drop the connection. */
static int call_send(call *k, int argc, const char **argv, const size_t *lens) {
  conn *c = k->c;
  if (c->ac && redisAsyncCommandArgv(c->ac, reply_received, k, argc, argv, lens) == REDIS_OK) {
    k->refs++;
    return 0;
  }
  char *why = xprintf("connection lost: cannot queue a command%s%s", c->ac ? ": " : "",
                      c->ac && c->ac->errstr ? c->ac->errstr : "");
  call_settle(k, xstrdup(why));
  conn_drop(c, why, NULL);
  free(why);
  return -1;
}

/* ------------------------------------------------------------- arguments */

/* Replace the number at index i by its decimal (or shortest float) text. */
static void number_to_string(lua_State *L, int i) {
  char buf[64];
  if (lua_isinteger(L, i)) {
    snprintf(buf, sizeof buf, "%lld", (long long)lua_tointeger(L, i));
  } else {
    double x = (double)lua_tonumber(L, i);
    for (int prec = 15; prec <= 17; prec++) {
      snprintf(buf, sizeof buf, "%.*g", prec, x);
      if (strtod(buf, NULL) == x || isnan(x))
        break;
    }
  }
  lua_pushstring(L, buf);
  lua_replace(L, i);
}

typedef struct argv_buf {
  int argc;
  const char **argv;
  size_t *lens;
} argv_buf;

/*
 * Check the arguments at stack indices first..last: strings stay, numbers
 * are replaced by their text, anything else raises, and so does a command
 * this client cannot run.
 */
static void check_args(lua_State *L, int first, int last) {
  if (last < first)
    luaL_error(L, "redis: no command given");
  for (int i = first; i <= last; i++) {
    int t = lua_type(L, i);
    if (t == LUA_TNUMBER)
      number_to_string(L, i);
    else if (t != LUA_TSTRING)
      luaL_argerror(L, i,
                    lua_pushfstring(L, "string or number expected, got %s", luaL_typename(L, i)));
  }
  if (command_unsupported(lua_tostring(L, first)))
    luaL_error(L, "redis: %s is not supported (it needs a connection of its own)",
               lua_tostring(L, first));
}

/*
 * Check the arguments at first..last and collect them into a buffer that Lua
 * owns (pushed on the stack); the strings stay on the stack.
 */
static argv_buf *collect_args(lua_State *L, int first, int last) {
  check_args(L, first, last);
  int argc = last - first + 1;
  argv_buf *b =
      lua_newuserdatauv(L, sizeof *b + (size_t)argc * (sizeof(const char *) + sizeof(size_t)), 0);
  b->argc = argc;
  b->lens = (size_t *)(b + 1);
  b->argv = (const char **)(b->lens + argc);
  for (int i = 0; i < argc; i++)
    b->argv[i] = lua_tolstring(L, first + i, &b->lens[i]);
  return b;
}

/* ------------------------------------------------------------ Lua methods */

static conn **check_ud(lua_State *L) { return luaL_checkudata(L, 1, CONN_MT); }

/* The usable connection at index 1, or NULL with the reason pushed. */
static conn *usable(lua_State *L) {
  conn *c = *check_ud(L);
  if (!c)
    lua_pushliteral(L, "redis: connection closed");
  else if (c->lost)
    lua_pushfstring(L, "redis: %s", c->lost);
  else
    return c;
  return NULL;
}

/* Fail the way `kind` does: nil, msg for pcall; raise otherwise. */
static int fail(lua_State *L, enum call_kind kind, const char *msg) {
  if (kind == K_PCALL || kind == K_CONNECT) {
    lua_pushnil(L);
    lua_pushstring(L, msg);
    return 2;
  }
  luaL_where(L, 1);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

static int reply_error(lua_State *L, enum call_kind kind, const reply *r) {
  lua_pushliteral(L, "redis: ");
  lua_pushlstring(L, r->str ? r->str : "", r->len);
  lua_concat(L, 2);
  return fail(L, kind, lua_tostring(L, -1));
}

static int push_hash(lua_State *L, const reply *r) {
  lua_createtable(L, 0, (int)(r->n / 2));
  for (size_t i = 0; i + 1 < r->n; i += 2) {
    push_reply(L, r->elem[i], 1);
    push_reply(L, r->elem[i + 1], 1);
    lua_rawset(L, -3);
  }
  return 1;
}

/* Continuation of call/pcall/hgetall/pipeline: turn the outcome into Lua. */
static int call_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  call *k = *(call **)kv_wait_data(kv_wait_of(ctx));
  if (k->err) {
    lua_pushfstring(L, "redis: %s", k->err);
    return fail(L, k->kind, lua_tostring(L, -1));
  }
  if (k->kind == K_PIPELINE) {
    lua_createtable(L, k->n, 0);
    for (int i = 0; i < k->n; i++) {
      push_reply(L, k->replies[i], 1);
      lua_rawseti(L, -2, i + 1);
    }
    return 1;
  }
  const reply *r = k->replies[0];
  if (r->type == REDIS_REPLY_ERROR)
    return reply_error(L, k->kind, r);
  if (k->kind == K_HGETALL && r->type == REDIS_REPLY_ARRAY)
    return push_hash(L, r);
  push_reply(L, r, 0);
  return 1;
}

/* Send the command at stack indices 2..top on c and wait for its reply. */
static int command(lua_State *L, enum call_kind kind) {
  conn *c = usable(L);
  if (!c)
    return fail(L, kind, lua_tostring(L, -1));
  argv_buf *b = collect_args(L, 2, lua_gettop(L));
  kv_wait *w = kv_wait_new(L, "redis", sizeof(call *), call_cancel, call_dispose);
  call *k = call_new(c, w, kind, 1);
  if (call_send(k, b->argc, b->argv, b->lens) == 0)
    flush_now(c);
  return kv_wait_yield(L, w, call_done);
}

/* c:call(cmd, ...) -> reply; raises "redis: <error>". */
static int conn_call(lua_State *L) { return command(L, K_CALL); }

/* c:pcall(cmd, ...) -> reply | nil, "redis: <error>". */
static int conn_pcall(lua_State *L) { return command(L, K_PCALL); }

/* c:hgetall(key) -> {field = value}; raises like call. */
static int conn_hgetall(lua_State *L) {
  luaL_checkany(L, 2);
  lua_settop(L, 2);
  lua_pushliteral(L, "HGETALL");
  lua_insert(L, 2);
  return command(L, K_HGETALL);
}

/* --------------------------------------------------------------- pipeline */

/*
 * A pipeline being collected.  Its user value is one flat list: for each
 * command its argument count, then its arguments (checked strings).
 */
typedef struct batch {
  int sent;
  int ncmds, nargs; /* commands, and list entries (counts included) */
} batch;

/* p:call(cmd, ...) -> index of its reply.  Arguments are checked now. */
static int pipe_call(lua_State *L) {
  batch *p = luaL_checkudata(L, 1, PIPE_MT);
  if (p->sent)
    return luaL_error(L, "redis: pipeline already sent");
  int top = lua_gettop(L);
  check_args(L, 2, top);
  lua_getiuservalue(L, 1, 1);
  lua_pushinteger(L, top - 1);
  lua_rawseti(L, -2, ++p->nargs);
  for (int i = 2; i <= top; i++) {
    lua_pushvalue(L, i);
    lua_rawseti(L, -2, ++p->nargs);
  }
  lua_pushinteger(L, ++p->ncmds);
  return 1;
}

/*
 * The argument vectors of every collected command of p (its list at index
 * `list`), in one buffer that Lua owns, pushed on the stack.  The strings
 * stay valid: the list holds them.
 */
static argv_buf *collect_pipeline(lua_State *L, const batch *p, int list) {
  int n = p->ncmds;
  size_t total = (size_t)(p->nargs - n);
  argv_buf *b = lua_newuserdatauv(
      L, (size_t)n * sizeof *b + total * (sizeof(const char *) + sizeof(size_t)), 0);
  size_t *lens = (size_t *)(b + n);
  const char **argv = (const char **)(lens + total);
  for (int i = 0, at = 1; i < n; i++) {
    lua_rawgeti(L, list, at++);
    b[i].argc = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    b[i].argv = argv;
    b[i].lens = lens;
    for (int j = 0; j < b[i].argc; j++) {
      lua_rawgeti(L, list, at++);
      argv[j] = lua_tolstring(L, -1, &lens[j]);
      lua_pop(L, 1);
    }
    argv += b[i].argc;
    lens += b[i].argc;
  }
  return b;
}

/* After fn(p): send every collected command and wait for all the replies. */
static int pipeline_send(lua_State *L, int status, lua_KContext ctx) {
  (void)status, (void)ctx;
  batch *p = lua_touserdata(L, 3);
  p->sent = 1;
  lua_settop(L, 3);
  lua_getiuservalue(L, 3, 1); /* 4: the list */
  int n = p->ncmds;
  if (n == 0) {
    lua_newtable(L);
    return 1;
  }
  conn *c = usable(L);
  if (!c)
    return fail(L, K_PIPELINE, lua_tostring(L, -1));
  argv_buf *b = collect_pipeline(L, p, 4);
  kv_wait *w = kv_wait_new(L, "redis", sizeof(call *), call_cancel, call_dispose);
  call *k = call_new(c, w, K_PIPELINE, n);
  for (int i = 0; i < n && call_send(k, b[i].argc, b[i].argv, b[i].lens) == 0; i++)
    ;
  flush_now(c);
  return kv_wait_yield(L, w, call_done);
}

/*
 * c:pipeline(fn) -> {reply, ...}: fn(p) collects commands with p:call(...);
 * they go out together and the replies come back in order, errors as
 * {err = msg}, nil as redis.null.  A lost connection or a timeout raises.
 */
static int conn_pipeline(lua_State *L) {
  check_ud(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  batch *p = lua_newuserdatauv(L, sizeof(batch), 1); /* 3 */
  p->sent = p->ncmds = p->nargs = 0;
  luaL_setmetatable(L, PIPE_MT);
  lua_newtable(L);
  lua_setiuservalue(L, 3, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_callk(L, 1, 0, 0, pipeline_send);
  return pipeline_send(L, LUA_OK, 0);
}

/* c:close(), __close and __gc: idempotent. */
static int conn_gc(lua_State *L) {
  conn **ud = check_ud(L);
  conn *c = *ud;
  if (c) {
    *ud = NULL;
    conn_close(&c->res);
    conn_unref(c);
  }
  return 0;
}

static int conn_tostring(lua_State *L) {
  conn *c = *check_ud(L);
  if (!c)
    lua_pushliteral(L, "redis connection (closed)");
  else
    lua_pushfstring(L, "redis connection (%s%s)", c->where, c->lost ? ", lost" : "");
  return 1;
}

/* ---------------------------------------------------------------- connect */

/* Continuation of connect: the handshake's replies decide. */
static int connect_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  call *k = *(call **)kv_wait_data(kv_wait_of(ctx));
  conn *c = *(conn **)lua_touserdata(L, 2);
  const char *err = k->err;
  for (int i = 0; !err && i < k->got; i++)
    if (k->replies[i]->type == REDIS_REPLY_ERROR)
      err = k->replies[i]->str;
  if (!err && c && !c->lost) {
    lua_settop(L, 2);
    return 1;
  }
  lua_pushfstring(L, "redis: %s", err ? err : "connection closed");
  if (c)
    conn_close(&c->res);
  return fail(L, K_CONNECT, lua_tostring(L, -1));
}

typedef struct connect_opts {
  const char *host, *password;
  lua_Integer port, db;
  lua_Number timeout;
} connect_opts;

static void read_opts(lua_State *L, connect_opts *o) {
  o->host = "127.0.0.1";
  o->password = NULL;
  o->port = 6379;
  o->db = 0;
  o->timeout = 5;
  if (lua_isnoneornil(L, 1))
    return;
  luaL_checktype(L, 1, LUA_TTABLE);
  /* Strings only: a number converted here would not stay referenced. */
  int t = lua_getfield(L, 1, "host");
  luaL_argcheck(L, t == LUA_TNIL || t == LUA_TSTRING, 1, "host must be a string");
  if (t == LUA_TSTRING)
    o->host = lua_tostring(L, -1);
  t = lua_getfield(L, 1, "password");
  luaL_argcheck(L, t == LUA_TNIL || t == LUA_TSTRING, 1, "password must be a string");
  if (t == LUA_TSTRING)
    o->password = lua_tostring(L, -1);
  if (lua_getfield(L, 1, "port") != LUA_TNIL)
    o->port = luaL_checkinteger(L, -1);
  if (lua_getfield(L, 1, "db") != LUA_TNIL)
    o->db = luaL_checkinteger(L, -1);
  if (lua_getfield(L, 1, "timeout") != LUA_TNIL)
    o->timeout = luaL_checknumber(L, -1);
  lua_pop(L, 5); /* the strings stay referenced by the table */
  luaL_argcheck(L, o->port > 0 && o->port < 65536, 1, "port out of range");
  luaL_argcheck(L, o->db >= 0, 1, "db must not be negative");
  luaL_argcheck(L, o->timeout > 0, 1, "timeout must be positive");
}

/* Open the TCP connection; NULL with the reason pushed on failure. */
static redisAsyncContext *open_context(lua_State *L, conn *c, const connect_opts *o) {
  redisAsyncContext *ac = redisAsyncConnect(o->host, (int)o->port);
  if (!ac) {
    lua_pushfstring(L, "redis: cannot connect to %s: out of memory", c->where);
    return NULL;
  }
  if (ac->err || adapter_attach(c, ac) < 0) {
    lua_pushfstring(L, "redis: cannot connect to %s: %s", c->where,
                    ac->err ? ac->errstr : "cannot poll the socket");
    redisAsyncFree(ac);
    return NULL;
  }
  ac->data = c;
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  return ac;
}

/* Queue AUTH, SELECT and a PING that proves the server answers. */
static void send_handshake(call *k, const connect_opts *o) {
  char db[32];
  snprintf(db, sizeof db, "%lld", (long long)o->db);
  const char *auth[] = {"AUTH", o->password}, *select[] = {"SELECT", db}, *ping[] = {"PING"};
  size_t auth_len[] = {4, o->password ? strlen(o->password) : 0};
  size_t select_len[] = {6, strlen(db)}, ping_len[] = {4};
  if (o->password && call_send(k, 2, auth, auth_len) < 0)
    return;
  if (o->db != 0 && call_send(k, 2, select, select_len) < 0)
    return;
  call_send(k, 1, ping, ping_len);
}

/*
 * redis.connect{host, port, db, password, timeout} -> c | nil, err.  Waits
 * until the server has answered the handshake (AUTH and SELECT when given,
 * then PING), so a refused, stalled or rejected connect is reported here.
 */
static int l_connect(lua_State *L) {
  connect_opts o;
  read_opts(L, &o);
  lua_settop(L, 1);
  conn **ud = lua_newuserdatauv(L, sizeof *ud, 0); /* 2 */
  *ud = NULL;
  luaL_setmetatable(L, CONN_MT);
  conn *c = calloc(1, sizeof *c);
  if (!c)
    return luaL_error(L, "redis: out of memory");
  c->refs = 1;
  c->timeout = o.timeout;
  c->where = xprintf("%s:%lld", o.host, (long long)o.port);
  *ud = c;
  kv_track(&c->res, "redis connection", conn_close);
  c->ac = open_context(L, c, &o);
  if (!c->ac) {
    conn_lose(c, "connection failed", NULL);
    conn_close(&c->res);
    return fail(L, K_CONNECT, lua_tostring(L, -1));
  }
  kv_wait *w = kv_wait_new(L, "redis.connect", sizeof(call *), call_cancel, call_dispose);
  int n = 1 + (o.password != NULL) + (o.db != 0);
  send_handshake(call_new(c, w, K_CONNECT, n), &o);
  return kv_wait_yield(L, w, connect_done);
}

/* ----------------------------------------------------------------- module */

static int null_tostring(lua_State *L) {
  lua_pushliteral(L, "redis.null");
  return 1;
}

static const luaL_Reg conn_methods[] = {{"call", conn_call},       {"pcall", conn_pcall},
                                        {"hgetall", conn_hgetall}, {"pipeline", conn_pipeline},
                                        {"close", conn_gc},        {NULL, NULL}};

static const luaL_Reg redis_funcs[] = {{"connect", l_connect}, {NULL, NULL}};

static void new_class(lua_State *L, const char *name, const luaL_Reg *methods) {
  luaL_newmetatable(L, name);
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

int luaopen_redis(lua_State *L) {
  new_class(L, CONN_MT, conn_methods);
  luaL_getmetatable(L, CONN_MT);
  lua_pushcfunction(L, conn_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, conn_gc);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, conn_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
  static const luaL_Reg pipe_methods[] = {{"call", pipe_call}, {NULL, NULL}};
  new_class(L, PIPE_MT, pipe_methods);

  luaL_newlib(L, redis_funcs);
  lua_pushfstring(L, "hiredis %d.%d.%d", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
  lua_setfield(L, -2, "version"); /* for `kvengine version` */
  lua_newuserdatauv(L, 0, 0);     /* redis.null: unique, prints as redis.null */
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, null_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &null_key);
  lua_setfield(L, -2, "null");
  return 1;
}
