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
 *   c:pipeline(fn, {replies = "errors"})  -> nerrors, first_error | nil
 *   c:close()
 *   local b = redis.batch()             commands collected ahead of sending
 *   b:call(cmd, ...), b:callf(format, ...) -> index of its reply; #b
 *   c:pipeline(b [, {replies = ...}])   sends b (again each time it is given)
 *   redis.null (a unique sentinel), redis.version ("hiredis 0.14.1")
 *
 * Replies: status and bulk strings -> string, integer -> integer, nil ->
 * nil, array -> table (nil elements are redis.null, error elements
 * {err = msg}).  A pipeline returns one entry per command in order: error
 * replies as {err = msg}, nil replies as redis.null (so the array has no
 * holes).  Arguments are strings (binary-safe) or numbers (integers in
 * decimal, floats in the shortest form that reads back the same).
 *
 * Pipelines: p:call(...) in fn (and b:call on a batch) checks and formats
 * the command at once, into one buffer that is handed to hiredis as is.
 * p:callf / b:callf build a command from hiredis's format syntax without
 * making Lua strings: spaces separate the arguments, %s inserts a string or
 * number, %d an integer, %u an integer as unsigned 64 bits (a hash above
 * 2^63), %% a percent sign; p:callf("SET %s%u %d", prefix, hash, value).
 * Option replies = "errors" (the default is "all") reads every reply but
 * keeps only the error replies, counting too the errors inside an array
 * reply (the replies of a MULTI ... EXEC's commands come as EXEC's array):
 * the pipeline returns how many there were and the first one's message
 * (nil when none), and builds no Lua value for the others.  A batch from
 * redis.batch() is a pipeline's p made ahead of
 * time: it is filled outside any call, sent by c:pipeline(b) as often as
 * wanted (on any connection), and keeps its commands; p itself takes no
 * commands once its pipeline was sent.
 *
 * How it sits in the loop: hiredis's async API over a libuv poll handle on
 * the connection's socket.  Each call (a command, a pipeline, or the connect
 * handshake) is a `call` record: it yields the calling task on a kv_wait and
 * arms a libuv timer, because hiredis 0.14 has no command timeouts.  hiredis
 * callbacks only keep replies in the record; the task is woken after
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
 * and drops the connection if hiredis does not.  It also applies what hiredis
 * asks for (write events with every command, none once its buffer is
 * written, which flush_now does at once) only before the loop polls, and
 * only when it changed: each uv_poll_start costs epoll_ctl calls.
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

/*
 * Replies are hiredis's own objects, kept past their callback: hiredis frees
 * each reply after calling back, through its reader's freeObject, which
 * every context gets from `reply_fns` below (see reader_keep_replies).
 */
typedef redisReply reply;

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
  reply **replies;  /* NULL when only errors are kept */
  reply *copies;    /* after replies, in the same block: copies of static replies */
  int nerr;         /* error replies (when only errors are kept) */
  char *first_err;  /* the first one's message */
  char *err;        /* failure, without the "redis: " prefix */
};

/* The libuv side of one hiredis context. */
typedef struct adapter {
  uv_poll_t poll;
  uv_prepare_t sync;     /* gives the poll handle `events` before the loop polls */
  redisAsyncContext *ac; /* NULL once hiredis has cleaned up */
  conn *c;
  int events;  /* what hiredis asks for */
  int polled;  /* what the poll handle was last started with */
  int handles; /* not yet closed */
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

static char *xstrndup(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (!d)
    abort();
  memcpy(d, s, n);
  d[n] = '\0';
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

/*
 * The reader functions every context gets: hiredis's own, except that
 *  - a top-level integer, nil or short string reply (most replies: OK, a
 *    count) is built in static storage, which no allocation and no free
 *    costs: hiredis hands each reply to its callback and frees it before it
 *    reads the next one, so one such reply exists at a time, and a callback
 *    that keeps it keeps a copy;
 *  - freeObject spares the reply that the callback just kept.
 */
static redisReplyObjectFunctions reply_fns;
static const redisReplyObjectFunctions *hiredis_fns;
static void *kept;          /* the reply a callback keeps */
static redisReply scalar;   /* the current top-level scalar reply */
static char scalar_str[64]; /* its text */

static reply *scalar_reply(int type) {
  memset(&scalar, 0, sizeof scalar);
  scalar.type = type;
  return &scalar;
}

static void *create_string(const redisReadTask *task, char *str, size_t len) {
  if (task->parent || len >= sizeof scalar_str)
    return hiredis_fns->createString(task, str, len);
  reply *r = scalar_reply(task->type);
  memcpy(scalar_str, str, len);
  scalar_str[len] = '\0';
  r->str = scalar_str;
  r->len = len;
  return r;
}

static void *create_integer(const redisReadTask *task, long long value) {
  if (task->parent)
    return hiredis_fns->createInteger(task, value);
  reply *r = scalar_reply(REDIS_REPLY_INTEGER);
  r->integer = value;
  return r;
}

static void *create_nil(const redisReadTask *task) {
  return task->parent ? hiredis_fns->createNil(task) : scalar_reply(REDIS_REPLY_NIL);
}

static void free_object(void *r) {
  if (r == kept)
    kept = NULL;
  else if (r != &scalar)
    freeReplyObject(r);
}

/* Make ac's reader use reply_fns. */
static void reader_keep_replies(redisAsyncContext *ac) {
  if (!hiredis_fns) {
    hiredis_fns = ac->c.reader->fn;
    reply_fns = *hiredis_fns;
    reply_fns.createString = create_string;
    reply_fns.createInteger = create_integer;
    reply_fns.createNil = create_nil;
    reply_fns.freeObject = free_object;
  }
  ac->c.reader->fn = &reply_fns;
}

/* Keep r past its callback: the object itself, or a copy of a static one in *copy. */
static reply *reply_keep(void *r, reply *copy) {
  if (r != &scalar) {
    kept = r;
    return r;
  }
  *copy = scalar;
  if (scalar.str)
    copy->str = xstrndup(scalar.str, scalar.len);
  return copy;
}

static void reply_free(reply *r, reply *copy) {
  if (r == copy)
    free(copy->str);
  else if (r)
    freeReplyObject(r);
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
    lua_createtable(L, (int)r->elements, 0);
    for (size_t i = 0; i < r->elements; i++) {
      push_reply(L, r->element[i], 1);
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
  adapter *a = h->data;
  if (--a->handles > 0)
    return;
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
  adapter *a = h->data;
  if (!a->ac)
    return;
  if (status < 0) {
    adapter_poll_error(a, status);
    return;
  }
  in_hiredis++;
  if (a->ac && (events & UV_READABLE))
    redisAsyncHandleRead(a->ac);
  if (a->ac && (events & UV_WRITABLE) && (a->events & UV_WRITABLE))
    redisAsyncHandleWrite(a->ac);
  in_hiredis--;
  deliver_ready(); /* a and its context may be gone after this */
}

/* Before the loop polls: start or stop the poll handle as hiredis asked. */
static void adapter_sync(uv_prepare_t *h) {
  adapter *a = h->data;
  uv_prepare_stop(h);
  if (!a->ac || (a->events == a->polled && uv_is_active((uv_handle_t *)&a->poll) == !!a->events))
    return;
  a->polled = a->events;
  if (a->events)
    uv_poll_start(&a->poll, a->events, adapter_poll);
  else
    uv_poll_stop(&a->poll);
}

/*
 * hiredis asks for write events with each command and drops them once its
 * buffer is written, which flush_now does at once.  Each uv_poll_start costs
 * epoll_ctl calls, so what hiredis asks for is applied once, before the loop
 * next polls, and only when it has changed by then.
 */
static void adapter_update(adapter *a) {
  if (!uv_is_active((uv_handle_t *)&a->sync))
    uv_prepare_start(&a->sync, adapter_sync);
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
  uv_close((uv_handle_t *)&a->sync, adapter_closed);
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
  uv_prepare_init(kv_loop(), &a->sync);
  a->poll.data = a->sync.data = a;
  a->handles = 2;
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
  for (int i = 0; k->replies && i < k->got; i++)
    reply_free(k->replies[i], &k->copies[i]);
  free(k->replies);
  free(k->first_err);
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

/*
 * A new call on c expecting n replies, waited for by w, its timer armed;
 * keep_replies = 0: only the error replies are counted, the first kept.
 */
static call *call_new(conn *c, kv_wait *w, enum call_kind kind, int n, int keep_replies) {
  call *k = calloc(1, sizeof *k);
  if (!k)
    abort();
  if (keep_replies) {
    size_t slots = (size_t)(n > 0 ? n : 1);
    k->replies = calloc(slots, sizeof *k->replies + sizeof *k->copies);
    if (!k->replies)
      abort();
    k->copies = (reply *)(k->replies + slots);
  }
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

/* Count an error reply for a call that keeps only errors. */
static void note_error(call *k, const redisReply *h) {
  if (h->type == REDIS_REPLY_ERROR && k->nerr++ == 0)
    k->first_err = xstrndup(h->str ? h->str : "", h->str ? h->len : 0);
}

/* hiredis callback: one reply (NULL: the context is being freed). */
static void reply_received(redisAsyncContext *ac, void *r, void *privdata) {
  call *k = privdata;
  if (k->w && !k->settled) {
    if (!r) {
      conn_gone(k->c, "connection lost", ac->err ? ac->errstr : NULL);
    } else if (k->got < k->n) {
      const redisReply *h = r;
      if (k->replies) {
        k->replies[k->got] = reply_keep(r, &k->copies[k->got]);
      } else {
        note_error(k, h);
        for (size_t i = 0; h->type == REDIS_REPLY_ARRAY && i < h->elements; i++)
          note_error(k, h->element[i]);
      }
      if (++k->got == k->n)
        call_settle(k, NULL);
    }
  }
  call_unref(k);
}

/* Commands hiredis 0.14 treats specially: their callbacks fire many times. */
static int command_unsupported(const char *name, size_t len) {
  static const struct {
    const char *name;
    size_t len;
  } names[] = {{"subscribe", 9},     {"psubscribe", 10},   {"ssubscribe", 10}, {"unsubscribe", 11},
               {"punsubscribe", 12}, {"sunsubscribe", 12}, {"monitor", 7}};
  if (len < 7 || len > 12)
    return 0; /* the common case, without a comparison */
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (len == names[i].len && strncasecmp(name, names[i].name, len) == 0)
      return 1;
  return 0;
}

/* Queue one formatted command for k; on failure settle k and drop the connection. */
static int call_send(call *k, const char *cmd, size_t len) {
  conn *c = k->c;
  if (c->ac && redisAsyncFormattedCommand(c->ac, reply_received, k, cmd, len) == REDIS_OK) {
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

/* --------------------------------------------------------------- batches */

/*
 * Commands formatted as they are added, in the wire protocol (RESP), so
 * that sending is a copy: buf holds them back to back and ends[i] is where
 * command i ends.  Both arrays are malloc'd.  A batch done with them hands
 * them to a one-slot cache that the next batch starts from, so a steady
 * stream of pipelines allocates nothing here.
 */
typedef struct batch {
  int n;      /* commands */
  int sealed; /* a c:pipeline(fn) batch once fn has returned */
  char *buf;
  size_t len, cap;
  size_t *ends;
  size_t ends_cap;
} batch;

enum { SPARE_MAX = 1 << 20 }; /* larger buffers are freed, not cached */

static char *spare_buf;
static size_t spare_cap;
static size_t *spare_ends;
static size_t spare_ends_cap;

/* Give b's storage to the cache (or free it); b is empty afterwards. */
static void batch_release(batch *b) {
  if (b->buf && !spare_buf && b->cap <= SPARE_MAX) {
    spare_buf = b->buf;
    spare_cap = b->cap;
  } else {
    free(b->buf);
  }
  if (b->ends && !spare_ends && b->ends_cap * sizeof *b->ends <= SPARE_MAX) {
    spare_ends = b->ends;
    spare_ends_cap = b->ends_cap;
  } else {
    free(b->ends);
  }
  b->buf = NULL;
  b->ends = NULL;
  b->n = 0;
  b->len = b->cap = b->ends_cap = 0;
}

static size_t grown(size_t cap, size_t need, size_t first) {
  if (cap == 0)
    cap = first;
  while (cap < need)
    cap *= 2;
  return cap;
}

/* Room in b for `more` bytes from offset `at`; returns where they go. */
static char *batch_room_at(batch *b, size_t at, size_t more) {
  if (!b->buf && spare_buf) {
    b->buf = spare_buf;
    b->cap = spare_cap;
    spare_buf = NULL;
  }
  if (b->cap < at || b->cap - at < more) {
    b->cap = grown(b->cap, at + more, 4096);
    b->buf = realloc(b->buf, b->cap);
    if (!b->buf)
      abort();
  }
  return b->buf + at;
}

/* Room in b for `more` bytes after what it holds. */
static char *batch_room(batch *b, size_t more) { return batch_room_at(b, b->len, more); }

/*
 * The command just written up to p ends there.  A NUL follows it (not part
 * of the command): hiredis peeks at a formatted command's name with strchr,
 * which must stop inside the buffer.
 */
static void batch_end_command(batch *b, const char *p) {
  b->len = (size_t)(p - b->buf);
  *batch_room(b, 1) = '\0';
  if (!b->ends && spare_ends) {
    b->ends = spare_ends;
    b->ends_cap = spare_ends_cap;
    spare_ends = NULL;
  }
  if ((size_t)b->n == b->ends_cap) {
    b->ends_cap = grown(b->ends_cap, b->ends_cap + 1, 64);
    b->ends = realloc(b->ends, b->ends_cap * sizeof *b->ends);
    if (!b->ends)
      abort();
  }
  b->ends[b->n++] = b->len;
}

/* Write "<c><v>\r\n" at p; returns the end. */
static char *put_header(char *p, char c, size_t v) {
  char digits[24], *d = digits + sizeof digits;
  do
    *--d = (char)('0' + v % 10);
  while (v /= 10);
  *p++ = c;
  size_t n = (size_t)(digits + sizeof digits - d);
  memcpy(p, d, n);
  p += n;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

/* Write one argument (a bulk string) at p; returns the end. */
static char *put_arg(char *p, const char *s, size_t len) {
  p = put_header(p, '$', len);
  memcpy(p, s, len);
  p += len;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

enum { ARG_OVERHEAD = 32, NUMBER_MAX = 64 }; /* "$<len>\r\n...\r\n"; a number's text */

/* Append a command of C strings (the connect handshake's). */
static void batch_add_strings(batch *b, int argc, const char *const *argv) {
  size_t more = ARG_OVERHEAD;
  for (int i = 0; i < argc; i++)
    more += strlen(argv[i]) + ARG_OVERHEAD;
  char *p = put_header(batch_room(b, more), '*', (size_t)argc);
  for (int i = 0; i < argc; i++)
    p = put_arg(p, argv[i], strlen(argv[i]));
  batch_end_command(b, p);
}

/* Two decimal digits at a time: "00" to "99". */
static const char digit_pairs[] = "00010203040506070809101112131415161718192021222324"
                                  "25262728293031323334353637383940414243444546474849"
                                  "50515253545556575859606162636465666768697071727374"
                                  "75767778798081828384858687888990919293949596979899";

/* The decimal text of v (as_unsigned: of its 64 bits unsigned) in buf; its length. */
static size_t integer_text(lua_Integer v, int as_unsigned, char *buf) {
  int minus = v < 0 && !as_unsigned;
  unsigned long long u = minus ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  char digits[24];
  size_t d = sizeof digits;
  while (u >= 100) {
    unsigned r = (unsigned)(u % 100) * 2;
    u /= 100;
    digits[--d] = digit_pairs[r + 1];
    digits[--d] = digit_pairs[r];
  }
  if (u >= 10) {
    digits[--d] = digit_pairs[u * 2 + 1];
    digits[--d] = digit_pairs[u * 2];
  } else {
    digits[--d] = (char)('0' + u);
  }
  if (minus)
    digits[--d] = '-';
  memcpy(buf, digits + d, sizeof digits - d);
  return sizeof digits - d;
}

/* The text of the number at index i: decimal, or the shortest float that reads back the same. */
static size_t number_text(lua_State *L, int i, char buf[NUMBER_MAX]) {
  if (lua_isinteger(L, i))
    return integer_text(lua_tointeger(L, i), 0, buf);
  double x = (double)lua_tonumber(L, i);
  int n = 0;
  for (int prec = 15; prec <= 17; prec++) {
    n = snprintf(buf, NUMBER_MAX, "%.*g", prec, x);
    if (strtod(buf, NULL) == x || isnan(x))
      break;
  }
  return (size_t)n;
}

/*
 * Append the command at stack indices first..last to b: strings as they
 * are, numbers as their text.  Anything else raises, and so does a command
 * this client cannot run; either way b is left as it was.
 */
static void batch_add(lua_State *L, batch *b, int first, int last) {
  if (last < first)
    luaL_error(L, "redis: no command given");
  if (lua_type(L, first) == LUA_TSTRING) {
    size_t len;
    const char *name = lua_tolstring(L, first, &len);
    if (command_unsupported(name, len))
      luaL_error(L, "redis: %s is not supported (it needs a connection of its own)", name);
  }
  size_t start = b->len;
  char *p = put_header(batch_room(b, ARG_OVERHEAD), '*', (size_t)(last - first + 1));
  for (int i = first; i <= last; i++) {
    char num[NUMBER_MAX];
    const char *s;
    size_t len;
    int t = lua_type(L, i);
    if (t == LUA_TSTRING) {
      s = lua_tolstring(L, i, &len);
    } else if (t == LUA_TNUMBER) {
      len = number_text(L, i, num);
      s = num;
    } else {
      b->len = start;
      luaL_argerror(L, i,
                    lua_pushfstring(L, "string or number expected, got %s", luaL_typename(L, i)));
      return;
    }
    b->len = (size_t)(p - b->buf);
    p = put_arg(batch_room(b, len + ARG_OVERHEAD), s, len);
  }
  batch_end_command(b, p);
}

/* Write the value at index i as a %s, %d or %u of a format wants it at p; returns the end. */
static char *put_format_value(lua_State *L, int i, char conv, char *p) {
  int isint = 0;
  if (conv == 's') {
    size_t len;
    int t = lua_type(L, i);
    if (t == LUA_TSTRING) {
      const char *s = lua_tolstring(L, i, &len);
      memcpy(p, s, len);
      return p + len;
    }
    if (t != LUA_TNUMBER)
      luaL_argerror(L, i,
                    lua_pushfstring(L, "string or number expected, got %s", luaL_typename(L, i)));
    return p + number_text(L, i, p);
  }
  lua_Integer v = lua_tointegerx(L, i, &isint);
  if (!isint)
    luaL_argerror(
        L, i, lua_pushfstring(L, "integer expected for %%%c, got %s", conv, luaL_typename(L, i)));
  return p + integer_text(v, conv == 'u', p);
}

/* The arguments of a format: its runs of characters other than spaces. */
static int format_argc(const char *f, size_t flen) {
  int argc = 0;
  for (size_t i = 0; i < flen; i++)
    if (f[i] != ' ' && (i == 0 || f[i - 1] == ' '))
      argc++;
  return argc;
}

/*
 * Append the command that the format at index fi and its values at
 * fi+1..last describe (hiredis's format syntax): spaces separate the
 * arguments; %s inserts a string or number, %d an integer, %u an integer as
 * unsigned 64 bits, %% a percent sign; anything else raises, and so do
 * missing or extra values.  Nothing is appended when it raises.
 */
static void batch_addf(lua_State *L, batch *b, int fi, int last) {
  enum { HEADER_MAX = 24 }; /* "$<length>\r\n" */
  size_t flen;
  const char *f = luaL_checklstring(L, fi, &flen);
  int argc = format_argc(f, flen);
  if (argc == 0)
    luaL_error(L, "redis: no command given");
  /* Room for all of it at once: the format, each value's text at most, and
     each argument's header and CRLF. */
  size_t more = flen + ARG_OVERHEAD + (size_t)argc * (HEADER_MAX + 2);
  for (int i = fi + 1; i <= last; i++)
    more += (lua_type(L, i) == LUA_TSTRING ? lua_rawlen(L, i) : 0) + NUMBER_MAX;
  char *p = put_header(batch_room(b, more), '*', (size_t)argc);
  int v = fi + 1;
  for (size_t i = 0, n = 0; i < flen; n++) {
    while (i < flen && f[i] == ' ')
      i++;
    if (i == flen)
      break;
    /* The argument's text goes after room for its header, then moves up. */
    char *text = p + HEADER_MAX, *q = text;
    while (i < flen && f[i] != ' ') {
      if (f[i] != '%') {
        *q++ = f[i++];
      } else if (i + 1 < flen && f[i + 1] == '%') {
        *q++ = '%';
        i += 2;
      } else if (i + 1 < flen && (f[i + 1] == 's' || f[i + 1] == 'd' || f[i + 1] == 'u')) {
        if (v > last)
          luaL_error(L, "redis: the format wants more values than the %d given", last - fi);
        q = put_format_value(L, v++, f[i + 1], q);
        i += 2;
      } else {
        luaL_error(L, "redis: bad format: '%%%c' (%%s, %%d, %%u and %%%% are known)",
                   i + 1 < flen ? f[i + 1] : ' ');
      }
    }
    size_t len = (size_t)(q - text);
    char *data = put_header(p, '$', len);
    memmove(data, text, len);
    if (n == 0 && command_unsupported(data, len))
      luaL_error(L, "redis: %s is not supported (it needs a connection of its own)",
                 lua_pushlstring(L, data, len));
    p = data + len;
    *p++ = '\r';
    *p++ = '\n';
  }
  if (v <= last)
    luaL_error(L, "redis: %d values given for a format that uses %d", last - fi, v - fi - 1);
  batch_end_command(b, p);
}

/* Queue every command of b for k; stops at a failure (k is settled then). */
static void send_commands(call *k, const batch *b) {
  size_t start = 0;
  for (int i = 0; i < b->n && call_send(k, b->buf + start, b->ends[i] - start) == 0; i++)
    start = b->ends[i];
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
  lua_createtable(L, 0, (int)(r->elements / 2));
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    push_reply(L, r->element[i], 1);
    push_reply(L, r->element[i + 1], 1);
    lua_rawset(L, -3);
  }
  return 1;
}

/* A pipeline that keeps only errors: their count, and the first one or nil. */
static int push_errors(lua_State *L, int nerr, const char *first) {
  lua_pushinteger(L, nerr);
  if (first)
    lua_pushstring(L, first);
  else
    lua_pushnil(L);
  return 2;
}

/* Continuation of call/pcall/hgetall/pipeline: turn the outcome into Lua. */
static int call_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  call *k = *(call **)kv_wait_data(kv_wait_of(ctx));
  if (k->err) {
    lua_pushfstring(L, "redis: %s", k->err);
    return fail(L, k->kind, lua_tostring(L, -1));
  }
  if (k->kind == K_PIPELINE && !k->replies)
    return push_errors(L, k->nerr, k->first_err);
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

/* Formats single commands (sent at once, so one buffer serves them all). */
static batch one;

/* Send the command at stack indices 2..top on c and wait for its reply. */
static int command(lua_State *L, enum call_kind kind) {
  conn *c = usable(L);
  if (!c)
    return fail(L, kind, lua_tostring(L, -1));
  one.n = 0;
  one.len = 0;
  batch_add(L, &one, 2, lua_gettop(L));
  kv_wait *w = kv_wait_new(L, "redis", sizeof(call *), call_cancel, call_dispose);
  call *k = call_new(c, w, kind, 1, 1);
  if (call_send(k, one.buf, one.len) == 0)
    flush_now(c);
  if (one.cap > SPARE_MAX) /* a big value: do not keep its buffer */
    batch_release(&one);
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
 * The batch at index 1.  The batch methods have its metatable as upvalue 1:
 * comparing with it is cheaper than luaL_checkudata's lookup by name, and
 * p:call runs once per command.
 */
static batch *check_batch(lua_State *L) {
  batch *b = lua_touserdata(L, 1);
  if (b && lua_getmetatable(L, 1)) {
    int ours = lua_rawequal(L, -1, lua_upvalueindex(1));
    lua_pop(L, 1);
    if (ours)
      return b;
  }
  return luaL_checkudata(L, 1, PIPE_MT); /* raises */
}

static batch *new_batch(lua_State *L) {
  batch *b = lua_newuserdatauv(L, sizeof *b, 0);
  memset(b, 0, sizeof *b);
  luaL_setmetatable(L, PIPE_MT);
  return b;
}

/* redis.batch() -> an empty batch. */
static int l_batch(lua_State *L) {
  new_batch(L);
  return 1;
}

/* p:call(cmd, ...) -> index of its reply.  Arguments are checked now. */
static int batch_call(lua_State *L) {
  batch *b = check_batch(L);
  if (b->sealed)
    return luaL_error(L, "redis: pipeline already sent");
  batch_add(L, b, 2, lua_gettop(L));
  lua_pushinteger(L, b->n);
  return 1;
}

/* p:callf(format, ...) -> index of its reply: the command as batch_addf says. */
static int batch_callf(lua_State *L) {
  batch *b = check_batch(L);
  if (b->sealed)
    return luaL_error(L, "redis: pipeline already sent");
  batch_addf(L, b, 2, lua_gettop(L));
  lua_pushinteger(L, b->n);
  return 1;
}

/* #b: its commands. */
static int batch_len(lua_State *L) {
  lua_pushinteger(L, check_batch(L)->n);
  return 1;
}

static int batch_gc(lua_State *L) {
  batch_release(check_batch(L));
  return 0;
}

static int batch_tostring(lua_State *L) {
  batch *b = check_batch(L);
  lua_pushfstring(L, "redis batch (%d commands%s)", b->n, b->sealed ? ", sent" : "");
  return 1;
}

/* opts.replies at index i: 1 for "all" (the default), 0 for "errors". */
static int keep_replies(lua_State *L, int i) {
  if (lua_isnoneornil(L, i))
    return 1;
  luaL_checktype(L, i, LUA_TTABLE);
  lua_getfield(L, i, "replies");
  const char *mode = lua_tostring(L, -1);
  int keep = lua_isnil(L, -1) || (mode && strcmp(mode, "all") == 0);
  luaL_argcheck(L, keep || (mode && strcmp(mode, "errors") == 0), i,
                "replies must be \"all\" or \"errors\"");
  lua_pop(L, 1);
  return keep;
}

/*
 * Send b's commands on the connection at index 1 as one call and wait for
 * every reply; `keep` as from keep_replies.  A sealed batch's storage is
 * released once queued: nothing can use it again.
 */
static int send_batch(lua_State *L, batch *b, int keep) {
  if (b->n == 0) {
    if (!keep)
      return push_errors(L, 0, NULL);
    lua_newtable(L);
    return 1;
  }
  conn *c = usable(L);
  if (!c) {
    if (b->sealed)
      batch_release(b);
    return fail(L, K_PIPELINE, lua_tostring(L, -1));
  }
  kv_wait *w = kv_wait_new(L, "redis", sizeof(call *), call_cancel, call_dispose);
  send_commands(call_new(c, w, K_PIPELINE, b->n, keep), b);
  flush_now(c);
  if (b->sealed)
    batch_release(b);
  return kv_wait_yield(L, w, call_done);
}

/* After fn(p): send every collected command and wait for all the replies. */
static int pipeline_send(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  batch *b = lua_touserdata(L, 3);
  b->sealed = 1;
  lua_settop(L, 3);
  return send_batch(L, b, (int)ctx);
}

/*
 * c:pipeline(fn [, opts]) -> {reply, ...}: fn(p) collects commands with
 * p:call(...); they go out together and the replies come back in order,
 * errors as {err = msg}, nil as redis.null.  c:pipeline(b [, opts]) sends
 * the commands of a batch from redis.batch() the same way.  With opts.replies
 * = "errors" the result is the count of error replies and the first one's
 * message (or nil) instead.  A lost connection or a timeout raises.
 */
static int conn_pipeline(lua_State *L) {
  check_ud(L);
  int keep = keep_replies(L, 3);
  lua_settop(L, 2);
  if (lua_type(L, 2) != LUA_TFUNCTION) {
    batch *b = luaL_testudata(L, 2, PIPE_MT);
    luaL_argexpected(L, b != NULL, 2, "function or redis batch");
    if (b->sealed)
      return luaL_error(L, "redis: pipeline already sent");
    return send_batch(L, b, keep);
  }
  new_batch(L); /* 3 */
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_callk(L, 1, 0, keep, pipeline_send);
  return pipeline_send(L, LUA_OK, keep);
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
  reader_keep_replies(ac);
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  return ac;
}

/* Queue AUTH, SELECT and a PING that proves the server answers. */
static void send_handshake(call *k, const connect_opts *o) {
  char db[32];
  snprintf(db, sizeof db, "%lld", (long long)o->db);
  const char *auth[] = {"AUTH", o->password}, *select[] = {"SELECT", db}, *ping[] = {"PING"};
  batch b = {0};
  if (o->password)
    batch_add_strings(&b, 2, auth);
  if (o->db != 0)
    batch_add_strings(&b, 2, select);
  batch_add_strings(&b, 1, ping);
  send_commands(k, &b);
  batch_release(&b);
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
  send_handshake(call_new(c, w, K_CONNECT, n, 1), &o);
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

static const luaL_Reg redis_funcs[] = {{"connect", l_connect}, {"batch", l_batch}, {NULL, NULL}};

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
  /* The batch's functions get its metatable as upvalue (see check_batch). */
  static const luaL_Reg pipe_meta[] = {
      {"__gc", batch_gc}, {"__len", batch_len}, {"__tostring", batch_tostring}, {NULL, NULL}};
  static const luaL_Reg pipe_methods[] = {
      {"call", batch_call}, {"callf", batch_callf}, {NULL, NULL}};
  luaL_newmetatable(L, PIPE_MT);
  lua_pushvalue(L, -1);
  luaL_setfuncs(L, pipe_meta, 1);
  lua_newtable(L);
  lua_pushvalue(L, -2);
  luaL_setfuncs(L, pipe_methods, 1);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);

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
