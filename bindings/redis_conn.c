/*
 * redis_conn.c - a Redis connection on the loop, and the calls that wait on it.
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
 * fails the pending calls the same way.  There is no automatic reconnect.
 * A call whose task is abandoned (test timeout, task:cancel) keeps its
 * place: its reply is read and dropped, and the connection stays usable.
 *
 * Our own poll adapter replaces hiredis's libuv adapter
 * (<hiredis/adapters/libuv.h>): that one returns early when libuv reports a
 * poll error (status < 0), and libuv has already stopped the handle by then
 * (it does so on POLLERR, for example a refused connect or a reset), so the
 * connection would hang forever.  Ours lets hiredis find the socket's error
 * and drops the connection if hiredis does not.  It also applies what hiredis
 * asks for (write events with every command, none once its buffer is
 * written, which redis_flush does at once) only before the loop polls, and
 * only when it changed: each uv_poll_start costs epoll_ctl calls.
 *
 * Memory: a connection outlives its userdata while hiredis or a call still
 * points at it (a reference count); a call outlives its task's wait while
 * hiredis still owes it replies (another count).  redisAsyncFree is never
 * called from inside hiredis: there it is deferred to a timer.
 */
#include "redis_private.h"

#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A call keeps its replies past their callback, and hiredis 0.14 frees each
 * reply right after calling back, through its reader's freeObject: so every
 * context's reader gets a freeObject that spares the reply the callback just
 * kept (reader_keep_replies).  Newer hiredis has REDIS_OPT_NO_AUTO_FREE_REPLIES
 * for this and may free replies elsewhere: check before building against it.
 */
#if HIREDIS_MAJOR != 0 || HIREDIS_MINOR != 14
/* cppcheck-suppress preprocessorErrorDirective ; cppcheck does not read hiredis's headers */
#error "not hiredis 0.14: check how redis_conn.c keeps replies (reader_keep_replies)"
#endif

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

/* Depth of hiredis entry points on the stack (read/write handlers). */
static int in_hiredis;

/*
 * Calls settled while hiredis was on the stack, each holding a reference:
 * the poll callback delivers them once hiredis has returned, which saves the
 * loop turn that a 0 ms timer would cost on every reply.
 */
static call *ready_head, **ready_tail = &ready_head;

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

static redisReplyObjectFunctions reply_fns;
static void *kept; /* the reply a callback keeps */

static void free_object(void *r) {
  if (r == kept)
    kept = NULL;
  else
    freeReplyObject(r);
}

/* Make ac's reader spare the replies that callbacks keep. */
static void reader_keep_replies(redisAsyncContext *ac) {
  if (!reply_fns.freeObject) {
    reply_fns = *ac->c.reader->fn;
    reply_fns.freeObject = free_object;
  }
  ac->c.reader->fn = &reply_fns;
}

/* Keep r past its callback. */
static reply *reply_keep(void *r) {
  kept = r;
  return r;
}

/* ------------------------------------------------------------ connections */

void redis_conn_unref(conn *c) {
  assert(c->refs > 0);
  if (--c->refs > 0)
    return;
  assert(!c->calls && !c->calls_tail); /* each unsettled call holds a reference */
  assert(!c->res.scope);               /* so does the scope that tracks it */
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
  assert(!c->calls_tail);
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
  assert(c->refs > 0 && c->lost); /* the reaper's own reference; dropped for a reason */
  uv_close((uv_handle_t *)t, kv_free_handle);
  redisAsyncContext *ac = c->ac;
  c->ac = NULL;
  if (ac)
    redisAsyncFree(ac);
  redis_conn_unref(c);
}

/*
 * Drop c: settle its calls with `calls_err` (default `why`), then free the
 * hiredis context, at once or, when we are inside hiredis, from a timer.
 * redisAsyncFree calls the callbacks of replies still owed with NULL; they
 * find their calls settled and only release them.
 */
static void conn_drop(conn *c, const char *why, const char *calls_err) {
  assert(c->refs > 0);
  conn_lose(c, why, calls_err);
  redisAsyncContext *ac = c->ac;
  if (!ac)
    return;
  if (!in_hiredis) {
    c->ac = NULL;
    redisAsyncFree(ac);
    return;
  }
  c->refs++;
  kv_timer_start(kv_timer_new(c), reaper_fired, 0);
}

void redis_conn_close(kv_resource *r) {
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
  assert(a->handles > 0 && !a->ac); /* closed only once hiredis let go of it */
  if (--a->handles > 0)
    return;
  redis_conn_unref(a->c);
  free(a);
}

/* libuv has stopped the handle on a socket error: let hiredis see it. */
static void adapter_poll_error(adapter *a, int status) {
  redisAsyncContext *ac = a->ac;
  assert(ac && status < 0);
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
 * buffer is written, which redis_flush does at once.  Each uv_poll_start costs
 * epoll_ctl calls, so what hiredis asks for is applied once, before the loop
 * next polls, and only when it has changed by then.
 */
static void adapter_want(void *p, int event, int on) {
  adapter *a = p;
  a->events = on ? a->events | event : a->events & ~event;
  if (!uv_is_active((uv_handle_t *)&a->sync))
    uv_prepare_start(&a->sync, adapter_sync);
}

static void adapter_add_read(void *p) { adapter_want(p, UV_READABLE, 1); }
static void adapter_del_read(void *p) { adapter_want(p, UV_READABLE, 0); }
static void adapter_add_write(void *p) { adapter_want(p, UV_WRITABLE, 1); }
static void adapter_del_write(void *p) { adapter_want(p, UV_WRITABLE, 0); }

/* hiredis is freeing the context: after this it calls at most onDisconnect. */
static void adapter_cleanup(void *p) {
  adapter *a = p;
  a->ac = NULL;
  uv_close((uv_handle_t *)&a->poll, adapter_closed);
  uv_close((uv_handle_t *)&a->sync, adapter_closed);
}

/* Attach ac to the loop; the adapter holds a reference to c until closed. */
static int adapter_attach(conn *c, redisAsyncContext *ac) {
  assert(!c->ac && ac->c.fd >= 0);
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
  assert(k->refs > 0);
  if (--k->refs > 0)
    return;
  assert(!k->w && !k->timer && k->c->calls != k && !k->prev && !k->next); /* delivered, unlinked */
  assert(k->got <= k->n);
  for (int i = 0; k->replies && i < k->got; i++)
    freeReplyObject(k->replies[i]);
  free(k->replies);
  free(k->first_err);
  free(k->err);
  redis_conn_unref(k->c);
  free(k);
}

static void call_unlink(call *k) { KV_QUEUE_REMOVE(k->c->calls, k->c->calls_tail, k, prev, next); }

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
  assert(k->timer); /* exactly while w is */
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
static void call_deliver(call *k) { kv_wait_finish(&k->w, &k->timer); }

/* Resume the tasks of calls settled inside hiredis, oldest first. */
static void deliver_ready(void) {
  while (ready_head) {
    call *k = ready_head;
    ready_head = k->ready_next;
    if (!ready_head)
      ready_tail = &ready_head;
    assert(k->settled && k->refs > 0); /* the ready list holds a reference */
    if (k->w)                          /* not cancelled meanwhile by a task resumed before it */
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
void redis_flush(conn *c) {
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
  assert(k->w && k->timer == t);
  if (!k->settled) {
    /* A real timeout: replies still owed can no longer be matched. */
    conn *c = k->c;
    call_unlink(k);
    k->settled = 1;
    k->timed_out = 1;
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
void redis_call_cancel(kv_wait *w) {
  call *k = *(call **)kv_wait_data(w);
  call_unlink(k);
  kv_wait_finish(&k->w, &k->timer);
}

void redis_call_dispose(kv_wait *w) { call_unref(*(call **)kv_wait_data(w)); }

call *redis_call_new(conn *c, kv_wait *w, enum call_kind kind, int n, int keep_replies) {
  assert(w && n >= 0 && c->refs > 0 && c->timeout >= 0);
  call *k = calloc(1, sizeof *k);
  if (!k)
    abort();
  if (keep_replies) {
    size_t slots = (size_t)(n > 0 ? n : 1);
    k->replies = calloc(slots, sizeof *k->replies);
    if (!k->replies)
      abort();
  }
  k->c = c;
  c->refs++;
  k->w = w;
  k->kind = kind;
  k->n = n;
  k->refs = 1;
  *(call **)kv_wait_data(w) = k;
  k->timer = kv_timer_new(k);
  kv_timer_start(k->timer, call_timer_fired, (uint64_t)(c->timeout * 1000.0 + 0.5));
  KV_QUEUE_APPEND(c->calls, c->calls_tail, k, prev, next);
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
  assert(k->refs > 0); /* the callback's own reference */
  if (k->w && !k->settled) {
    if (!r) {
      conn_gone(k->c, "connection lost", ac->err ? ac->errstr : NULL);
    } else if (k->got < k->n) {
      const redisReply *h = r;
      if (k->replies) {
        k->replies[k->got] = reply_keep(r);
      } else { /* the errors inside an EXEC's array reply count too */
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

void redis_send(call *k, const batch *b) {
  const size_t *ends = (const size_t *)(const void *)b->ends.p;
  size_t start = 0;
  assert(b->n >= 0 && b->ends.len == (size_t)b->n * sizeof *ends);
  for (int i = 0; i < b->n && call_send(k, b->buf.p + start, ends[i] - start) == 0; i++) {
    assert(ends[i] > start && ends[i] <= b->buf.len); /* every command has bytes, inside buf */
    start = ends[i];
  }
}

conn *redis_conn_new(const char *host, lua_Integer port, double timeout) {
  assert(timeout >= 0);
  conn *c = calloc(1, sizeof *c);
  if (!c)
    abort();
  c->refs = 1;
  c->timeout = timeout;
  c->where = xprintf("%s:%lld", host, (long long)port);
  kv_track(&c->res, "redis connection", redis_conn_close);
  return c;
}

int redis_conn_open(lua_State *L, conn *c, const char *host, int port) {
  assert(!c->ac && !c->lost && c->refs > 0);
  redisAsyncContext *ac = redisAsyncConnect(host, port);
  if (!ac || ac->err || adapter_attach(c, ac) < 0) {
    lua_pushfstring(L, "redis: cannot connect to %s: %s", c->where,
                    !ac       ? "out of memory"
                    : ac->err ? ac->errstr
                              : "cannot poll the socket");
    if (ac)
      redisAsyncFree(ac);
    conn_lose(c, "connection failed", NULL);
    redis_conn_close(&c->res);
    return -1;
  }
  c->ac = ac;
  ac->data = c;
  reader_keep_replies(ac);
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  return 0;
}
