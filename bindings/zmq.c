/*
 * zmq.c - the `zmq` module: ZeroMQ publish/subscribe for scenarios.
 *
 *   local zmq = require("zmq")
 *   local pub = zmq.pub{bind = "tcp://127.0.0.1:0" | {...}, connect = ...,
 *                       hwm = 100000}                     -> s | nil, err
 *   pub:send{topic, seq, payload}          -> true | nil, err
 *   pub:wait_subscribed(topic, {timeout = 5}) -> true | nil, "timeout"
 *   local sub = zmq.sub{bind = ..., connect = ..., subscribe = "" | {...},
 *                       hwm = 100000}                     -> s | nil, err
 *   sub:recv{timeout = 5}                  -> {frame, ...} | nil, "timeout"
 *   s:endpoint([i])   the i-th bound endpoint (default the first), port 0
 *                     and a wildcard host resolved (0.0.0.0 -> 127.0.0.1)
 *   s:close()
 *   zmq.max_sockets([n]) -> the context's socket limit; n raises it, only
 *                     before the process's first socket (libzmq sizes its
 *                     slots once)
 *   zmq.event_hwm     100000, the high-water mark used by default
 *   zmq.version       "libzmq 4.3.4"
 *
 * A publisher is an XPUB socket, so it sees its subscribers' subscribe and
 * unsubscribe messages.  With ZMQ_XPUB_VERBOSER libzmq passes every one of
 * them, from every subscriber (plain VERBOSE would hide an unsubscribe while
 * another subscriber still holds the prefix), and unsubscribes for all of a
 * subscriber's prefixes when its connection ends.  The module counts them
 * per prefix: wait_subscribed(topic) is true while some prefix of topic has
 * a positive count, so a subscriber that restarted is waited for again, and
 * nothing is lost to a slow joiner.  (A subscriber that subscribes the same
 * prefix twice counts twice but unsubscribes once when it goes away.)
 *
 * High-water marks: a publisher drops messages for a subscriber whose queue
 * holds `hwm` messages (PUB semantics: send never blocks and still returns
 * true).  libzmq's default of 1000 loses bursts of KV events, so both sides
 * default to zmq.event_hwm = 100000; event publishers should use 100000 or
 * more, and so should the subscriber at the other end.
 *
 * How it sits in the loop: one process-wide context, made on first use and
 * terminated at exit (every socket has linger 0).  Each socket has a libuv
 * poll handle on its ZMQ_FD, for readability only.  That fd is
 * edge-triggered: it signals that the socket's state may have changed, not
 * that messages are queued, and it is reset by zmq_send, zmq_recv and
 * reading ZMQ_EVENTS.  So after every send and receive, and whenever the fd
 * fires, pump() reads ZMQ_EVENTS and keeps handling messages while
 * ZMQ_POLLIN is set (subscription messages on a publisher; messages for
 * waiting tasks on a subscriber).  A task that must wait is a `waiter` in
 * the socket's FIFO list with a libuv timer for its timeout; its outcome is
 * delivered from that timer (restarted at 0 ms), so Lua never runs inside
 * pump and a task that closes the socket cannot pull it from under the loop.
 *
 * Timeouts follow engine.h's rule: an option, default KV_WAIT_REPLY (5 s
 * times the time scale), 0 to take only what is already there.
 */
#include "engine.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <lauxlib.h>
#include <zmq.h>

#define SOCK_MT "kvengine.zmq.socket"

/* The default and recommended high-water mark for KV event streams. */
#define EVENT_HWM 100000

typedef struct zsock zsock;
typedef struct waiter waiter;

/* A received multipart message. */
typedef struct frames {
  zmq_msg_t *msg;
  int n, cap;
} frames;

enum { WAIT_PENDING, WAIT_OK, WAIT_TIMEOUT, WAIT_CLOSED };

/* A waiting task; lives in its kv_wait's data. */
struct waiter {
  zsock *s; /* NULL once unlinked */
  kv_wait *w;
  uv_timer_t *timer; /* non-NULL while w is */
  waiter *prev, *next;
  int result;
  frames fr;   /* recv: the message */
  char *topic; /* wait_subscribed: the topic */
  size_t topic_len;
};

typedef struct prefix_count {
  char *prefix;
  size_t len;
  long count;
} prefix_count;

struct zsock {
  kv_resource res;
  void *z; /* NULL once closed */
  int type;
  uv_poll_t *poll;
  waiter *head, *tail;
  prefix_count *subs; /* publisher: live subscriptions by prefix */
  size_t nsubs, subs_cap;
  char **bound; /* resolved bound endpoints */
  int nbound;
  zsock *all_prev, *all_next; /* every open socket, for exit */
};

static void *ctx;
static pid_t ctx_pid;
static zsock *all_socks;
static int max_sockets; /* zmq.max_sockets's limit; 0: libzmq's default */

/* Descriptors a socket may need at once: its mailbox, a listener, a
 * connection, and the resolver's while binding. */
#define FD_HEADROOM 8

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n);
  if (!p)
    abort();
  return p;
}

/* ---------------------------------------------------------------- context */

/* At exit: close what is still open (linger 0), then end the context. */
static void context_end(void) {
  if (!ctx || getpid() != ctx_pid)
    return; /* a forked child does not own the context's threads */
  for (zsock *s = all_socks; s; s = s->all_next)
    zmq_close(s->z);
  all_socks = NULL;
  zmq_ctx_term(ctx);
  ctx = NULL;
}

static void *context(void) {
  if (!ctx) {
    ctx = zmq_ctx_new();
    if (!ctx)
      abort();
    ctx_pid = getpid();
    atexit(context_end);
    if (max_sockets > 0 && zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, max_sockets) != 0)
      abort(); /* l_max_sockets checked it against ZMQ_SOCKET_LIMIT */
  }
  return ctx;
}

/* The soft open-file limit, for an error that names it. */
static long open_file_limit(void) {
  struct rlimit r;
  return getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? (long)r.rlim_cur : -1;
}

/*
 * True when the process can still open `n` more descriptors.  libzmq
 * asserts, ending the process, when it runs out of them while binding or
 * connecting, so a socket is refused with an error naming the limit
 * before it gets that far.
 */
static int fds_to_spare(int n) {
  int fds[16], got = 0;
  assert(n > 0 && n <= 16);
  while (got < n && (fds[got] = fcntl(2, F_DUPFD_CLOEXEC, 0)) >= 0)
    got++;
  for (int i = 0; i < got; i++)
    close(fds[i]);
  return got == n;
}

/* The context's socket limit: the one asked for, else libzmq's default. */
static int socket_limit(void) {
  if (ctx)
    return zmq_ctx_get(ctx, ZMQ_MAX_SOCKETS);
  return max_sockets > 0 ? max_sockets : ZMQ_MAX_SOCKETS_DFLT;
}

/*
 * zmq.max_sockets([n]) -> limit.  libzmq allows 1,023 sockets per context
 * by default and sizes its slot table when the context is made, so a
 * process that will hold more (a pool of many pods) says so before its
 * first socket; asking later, or past what libzmq allows, raises.
 */
static int l_max_sockets(lua_State *L) {
  if (!lua_isnoneornil(L, 1)) {
    lua_Integer n = luaL_checkinteger(L, 1);
    void *probe = zmq_ctx_new();
    int most = probe ? zmq_ctx_get(probe, ZMQ_SOCKET_LIMIT) : 0;
    if (probe)
      zmq_ctx_term(probe);
    if (n < 1 || n > most)
      return luaL_error(L,
                        "zmq.max_sockets: %d is out of range (1 to %d, libzmq's ZMQ_SOCKET_LIMIT)",
                        (int)n, most);
    if (ctx && n != socket_limit())
      return luaL_error(L,
                        "zmq.max_sockets: this process already made a socket, with a limit of %d: "
                        "call zmq.max_sockets(%d) before the first socket",
                        socket_limit(), (int)n);
    max_sockets = (int)n;
  }
  lua_pushinteger(L, socket_limit());
  return 1;
}

/* ----------------------------------------------------------------- frames */

static void frames_clear(frames *f) {
  assert(f->n >= 0 && f->n <= f->cap && (f->msg || f->cap == 0));
  for (int i = 0; i < f->n; i++)
    zmq_msg_close(&f->msg[i]);
  free(f->msg);
  f->msg = NULL;
  f->n = f->cap = 0;
}

/* Receive one whole multipart message without blocking: 0, or -1 (errno). */
static int frames_recv(void *z, frames *f) {
  assert(z && f->n == 0); /* one message per frames */
  do {
    if (f->n == f->cap) {
      f->cap = f->cap ? 2 * f->cap : 4;
      f->msg = xrealloc(f->msg, (size_t)f->cap * sizeof *f->msg);
    }
    zmq_msg_t *m = &f->msg[f->n];
    zmq_msg_init(m);
    if (zmq_msg_recv(m, z, ZMQ_DONTWAIT) < 0) {
      int e = errno;
      zmq_msg_close(m);
      if (f->n == 0) {
        errno = e;
        return -1;
      }
      break; /* libzmq delivers parts atomically: not expected */
    }
    f->n++;
  } while (zmq_msg_more(&f->msg[f->n - 1]));
  return 0;
}

/* Push the message as a list of byte strings and release it. */
static void frames_push(lua_State *L, frames *f) {
  assert(f->n >= 1); /* a message has at least one part */
  lua_createtable(L, f->n, 0);
  for (int i = 0; i < f->n; i++) {
    lua_pushlstring(L, zmq_msg_data(&f->msg[i]), zmq_msg_size(&f->msg[i]));
    lua_rawseti(L, -2, i + 1);
  }
  frames_clear(f);
}

/* ---------------------------------------------------------- subscriptions */

static prefix_count *sub_find(zsock *s, const char *p, size_t len) {
  for (size_t i = 0; i < s->nsubs; i++)
    if (s->subs[i].len == len && memcmp(s->subs[i].prefix, p, len) == 0)
      return &s->subs[i];
  return NULL;
}

static void sub_count(zsock *s, const char *p, size_t len, long delta) {
  assert(s->type == ZMQ_XPUB && (delta == 1 || delta == -1));
  prefix_count *c = sub_find(s, p, len);
  if (!c) {
    if (delta < 0)
      return;
    if (s->nsubs == s->subs_cap) {
      s->subs_cap = s->subs_cap ? 2 * s->subs_cap : 4;
      s->subs = xrealloc(s->subs, s->subs_cap * sizeof *s->subs);
    }
    c = &s->subs[s->nsubs++];
    c->prefix = malloc(len ? len : 1);
    if (!c->prefix)
      abort();
    memcpy(c->prefix, p, len);
    c->len = len;
    c->count = 0;
  }
  c->count += delta;
  if (c->count < 0)
    c->count = 0;
  assert(s->nsubs <= s->subs_cap);
}

/* True while a live subscription is a prefix of topic. */
static int subscribed(const zsock *s, const char *topic, size_t len) {
  for (size_t i = 0; i < s->nsubs; i++) {
    const prefix_count *c = &s->subs[i];
    if (c->count > 0 && c->len <= len && memcmp(c->prefix, topic, c->len) == 0)
      return 1;
  }
  return 0;
}

/* ---------------------------------------------------------------- waiters */

static void waiter_unlink(waiter *wt) {
  zsock *s = wt->s;
  if (!s)
    return;
  KV_QUEUE_REMOVE(s->head, s->tail, wt, prev, next);
  wt->s = NULL;
}

static void waiter_link(zsock *s, waiter *wt) {
  assert(!wt->s && s->z && wt->result == WAIT_PENDING); /* a new waiter, on an open socket */
  wt->s = s;
  KV_QUEUE_APPEND(s->head, s->tail, wt, prev, next);
}

static void waiter_timer_fired(uv_timer_t *t);

/* The outcome is known: deliver it from the waiter's timer at 0 ms. */
static void waiter_settle(waiter *wt, int result) {
  assert(wt->result == WAIT_PENDING && result != WAIT_PENDING && wt->w && wt->timer);
  waiter_unlink(wt);
  wt->result = result;
  kv_timer_start(wt->timer, waiter_timer_fired, 0);
}

/* Timeout (still pending) or delivery of a settled outcome. */
static void waiter_timer_fired(uv_timer_t *t) {
  waiter *wt = t->data;
  assert(wt->w && wt->timer == t);
  if (wt->result == WAIT_PENDING) {
    waiter_unlink(wt);
    wt->result = WAIT_TIMEOUT;
  }
  kv_wait_finish(&wt->w, &wt->timer);
}

static void waiter_cancel(kv_wait *w) {
  waiter *wt = kv_wait_data(w);
  waiter_unlink(wt);
  kv_wait_finish(&wt->w, &wt->timer);
}

static void waiter_dispose(kv_wait *w) {
  waiter *wt = kv_wait_data(w);
  assert(!wt->s && !wt->w && !wt->timer); /* unlinked and finished before it is freed */
  frames_clear(&wt->fr);
  free(wt->topic);
}

/*
 * A new waiter on s for the running task, for at most `timeout` seconds
 * (> 0: a poll never waits).  Only call when the task will yield right
 * after (nothing may raise).
 */
static waiter *waiter_new(lua_State *L, zsock *s, double timeout) {
  assert(timeout > 0);
  kv_wait *w = kv_wait_new(L, "zmq", sizeof(waiter), waiter_cancel, waiter_dispose);
  waiter *wt = kv_wait_data(w);
  wt->w = w;
  wt->timer = kv_timer_new(wt);
  kv_timer_start(wt->timer, waiter_timer_fired, (uint64_t)(timeout * 1000.0 + 0.5));
  waiter_link(s, wt);
  return wt;
}

/* ------------------------------------------------------------------- pump */

/* Publisher: apply one subscription message. */
static void pump_subscription(zsock *s) {
  zmq_msg_t m;
  zmq_msg_init(&m);
  if (zmq_msg_recv(&m, s->z, ZMQ_DONTWAIT) >= 0 && zmq_msg_size(&m) > 0) {
    const char *d = zmq_msg_data(&m);
    if (d[0] == 1 || d[0] == 0)
      sub_count(s, d + 1, zmq_msg_size(&m) - 1, d[0] == 1 ? 1 : -1);
  }
  zmq_msg_close(&m);
}

static void wake_subscribed(zsock *s) {
  for (waiter *wt = s->head, *next; wt; wt = next) {
    next = wt->next;
    if (subscribed(s, wt->topic, wt->topic_len))
      waiter_settle(wt, WAIT_OK);
  }
}

/*
 * Handle what ZMQ_EVENTS says is ready, until ZMQ_POLLIN clears: on a
 * publisher every subscription message, on a subscriber one message per
 * waiting task (the rest stays queued for later recv calls).  Reading
 * ZMQ_EVENTS also re-arms the edge-triggered ZMQ_FD.
 */
static void pump(zsock *s) {
  assert(s->type == ZMQ_XPUB || s->type == ZMQ_SUB);
  int changed = 0;
  while (s->z) {
    int ev = 0;
    size_t len = sizeof ev;
    if (zmq_getsockopt(s->z, ZMQ_EVENTS, &ev, &len) != 0 || !(ev & ZMQ_POLLIN))
      break;
    if (s->type == ZMQ_XPUB) {
      pump_subscription(s);
      changed = 1;
    } else if (!s->head || frames_recv(s->z, &s->head->fr) != 0) {
      break;
    } else {
      waiter_settle(s->head, WAIT_OK);
    }
  }
  if (changed)
    wake_subscribed(s);
}

static void poll_fired(uv_poll_t *h, int status, int events) {
  (void)status, (void)events;
  pump(h->data);
}

/* ---------------------------------------------------------------- sockets */

/* The resource's close: idempotent; waiting tasks get "closed". */
static void sock_close(kv_resource *r) {
  zsock *s = (zsock *)((char *)r - offsetof(zsock, res));
  kv_untrack(r);
  if (!s->z)
    return;
  while (s->head)
    waiter_settle(s->head, WAIT_CLOSED);
  assert(!s->tail);
  uv_close((uv_handle_t *)s->poll, kv_free_handle); /* before zmq closes its fd */
  s->poll = NULL;
  zmq_close(s->z);
  s->z = NULL;
  KV_LIST_REMOVE(all_socks, s, all_prev, all_next);
  for (size_t i = 0; i < s->nsubs; i++)
    free(s->subs[i].prefix);
  free(s->subs);
  s->subs = NULL;
  s->nsubs = 0;
  for (int i = 0; i < s->nbound; i++)
    free(s->bound[i]);
  free(s->bound);
  s->bound = NULL;
  s->nbound = 0;
}

static zsock **check_ud(lua_State *L) { return luaL_checkudata(L, 1, SOCK_MT); }

/* The open socket at index 1; raises when closed (a programming error). */
static zsock *check_open(lua_State *L) {
  zsock *s = *check_ud(L);
  if (!s || !s->z)
    luaL_error(L, "zmq: socket is closed");
  return s;
}

/* s:close(), __close and __gc. */
static int sock_gc(lua_State *L) {
  zsock **ud = check_ud(L);
  zsock *s = *ud;
  if (s) {
    *ud = NULL;
    sock_close(&s->res);
    assert(!s->z && !s->res.scope && !s->head && !s->poll); /* nothing points at s any more */
    free(s);
  }
  return 0;
}

static int zfail(lua_State *L, const char *what, const char *arg) {
  return kv_fail(L, "zmq: %s %s: %s", what, arg, zmq_strerror(zmq_errno()));
}

/* Remember a bound endpoint, with a wildcard host made connectable. */
static void remember_bound(zsock *s) {
  char ep[256];
  size_t len = sizeof ep;
  if (zmq_getsockopt(s->z, ZMQ_LAST_ENDPOINT, ep, &len) != 0)
    return;
  ep[sizeof ep - 1] = '\0';
  char out[300];
  if (strncmp(ep, "tcp://0.0.0.0:", 14) == 0)
    snprintf(out, sizeof out, "tcp://127.0.0.1:%s", ep + 14);
  else if (strncmp(ep, "tcp://[::]:", 11) == 0)
    snprintf(out, sizeof out, "tcp://[::1]:%s", ep + 11);
  else
    snprintf(out, sizeof out, "%s", ep);
  s->bound = xrealloc(s->bound, (size_t)(s->nbound + 1) * sizeof *s->bound);
  s->bound[s->nbound] = strdup(out);
  if (!s->bound[s->nbound])
    abort();
  s->nbound++;
}

/* Push opts[field] as a list of strings (a string is a list of one). */
static int string_list(lua_State *L, int opts, const char *field) {
  int t = lua_getfield(L, opts, field);
  if (t == LUA_TSTRING) {
    lua_createtable(L, 1, 0);
    lua_insert(L, -2);
    lua_rawseti(L, -2, 1);
  } else if (t == LUA_TNIL) {
    lua_pop(L, 1);
    lua_newtable(L);
  } else if (t != LUA_TTABLE) {
    return luaL_error(L, "zmq: %s must be a string or a list of strings", field);
  }
  int n = (int)lua_rawlen(L, -1);
  for (int i = 1; i <= n; i++) {
    if (lua_rawgeti(L, -1, i) != LUA_TSTRING)
      return luaL_error(L, "zmq: %s[%d] must be a string", field, i);
    lua_pop(L, 1);
  }
  return n;
}

static int set_int(zsock *s, int opt, int v) { return zmq_setsockopt(s->z, opt, &v, sizeof v); }

/* Options that must be set before bind/connect; raises on a bad hwm. */
static void apply_options(lua_State *L, zsock *s) {
  lua_Integer hwm = EVENT_HWM;
  if (lua_getfield(L, 1, "hwm") != LUA_TNIL) {
    hwm = luaL_checkinteger(L, -1);
    luaL_argcheck(L, hwm >= 0 && hwm <= 0x7fffffff, 1, "hwm out of range (0 = no limit)");
  }
  lua_pop(L, 1);
  set_int(s, ZMQ_LINGER, 0);
  set_int(s, ZMQ_SNDHWM, (int)hwm);
  set_int(s, ZMQ_RCVHWM, (int)hwm);
  if (s->type == ZMQ_XPUB)
    set_int(s, ZMQ_XPUB_VERBOSER, 1);
}

/*
 * Bind or connect s to every endpoint opts[field] names (join is zmq_bind or
 * zmq_connect), adding their number to *count: 0, or nil, err pushed (2).
 * Leaves the list pushed.
 */
static int join_endpoints(lua_State *L, zsock *s, const char *field,
                          int (*join)(void *, const char *), int *count) {
  int n = string_list(L, 1, field);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, -1, i);
    const char *ep = lua_tostring(L, -1);
    if (join(s->z, ep) != 0)
      return zfail(L, field, ep);
    if (join == zmq_bind)
      remember_bound(s);
    lua_pop(L, 1);
  }
  *count += n;
  return 0;
}

/* Subscribe, bind, connect as opts say: 0, or nil, err pushed (2). */
static int attach_endpoints(lua_State *L, zsock *s) {
  if (s->type == ZMQ_SUB) {
    int n = string_list(L, 1, "subscribe");
    if (n == 0) { /* default: everything */
      lua_pushliteral(L, "");
      lua_rawseti(L, -2, ++n);
    }
    for (int i = 1; i <= n; i++) {
      size_t len;
      lua_rawgeti(L, -1, i);
      const char *topic = lua_tolstring(L, -1, &len);
      zmq_setsockopt(s->z, ZMQ_SUBSCRIBE, topic, len);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  int n = 0;
  if (join_endpoints(L, s, "bind", zmq_bind, &n) ||
      join_endpoints(L, s, "connect", zmq_connect, &n))
    return 2;
  if (n == 0)
    luaL_error(L, "zmq: give bind= or connect= (an endpoint or a list)");
  lua_pop(L, 2);
  return 0;
}

/* Make the socket, its userdata (index 2) and its poll handle. */
static zsock *sock_new(lua_State *L, int type) {
  zsock **ud = lua_newuserdatauv(L, sizeof *ud, 0);
  *ud = NULL;
  luaL_setmetatable(L, SOCK_MT);
  if (!fds_to_spare(FD_HEADROOM))
    luaL_error(
        L,
        "zmq: cannot make a socket: this process has open the %I files it may (engine.fd_limits; "
        "`ulimit -n` raises the hard limit)",
        (lua_Integer)open_file_limit());
  void *z = zmq_socket(context(), type);
  if (!z && zmq_errno() == EMFILE)
    luaL_error(L,
               "zmq: cannot make a socket: the context's limit of %d sockets is reached "
               "(zmq.max_sockets(n) "
               "before the first socket raises it)",
               socket_limit());
  if (!z)
    luaL_error(L, "zmq: cannot make a socket: %s", zmq_strerror(zmq_errno()));
  zsock *s = calloc(1, sizeof *s);
  if (!s)
    abort();
  s->z = z;
  s->type = type;
  *ud = s;
  KV_LIST_PUSH(all_socks, s, all_prev, all_next);
  kv_track(&s->res, type == ZMQ_XPUB ? "zmq pub socket" : "zmq sub socket", sock_close);
  int fd;
  size_t len = sizeof fd;
  s->poll = malloc(sizeof *s->poll);
  if (!s->poll)
    abort();
  zmq_getsockopt(z, ZMQ_FD, &fd, &len);
  uv_poll_init(kv_loop(), s->poll, fd);
  s->poll->data = s;
  uv_poll_start(s->poll, UV_READABLE, poll_fired);
  return s;
}

static const char *const pub_keys[] = {"bind", "connect", "hwm", NULL};
static const char *const sub_keys[] = {"bind", "connect", "subscribe", "hwm", NULL};

static int open_socket(lua_State *L, int type) {
  luaL_checktype(L, 1, LUA_TTABLE);
  kv_check_options(L, 1, type == ZMQ_XPUB ? "zmq.pub" : "zmq.sub",
                   type == ZMQ_XPUB ? pub_keys : sub_keys);
  lua_settop(L, 1);
  zsock *s = sock_new(L, type);
  apply_options(L, s);
  if (attach_endpoints(L, s) != 0) {
    sock_close(&s->res);
    return 2;
  }
  lua_settop(L, 2);
  return 1;
}

/* zmq.pub{bind=|connect=, hwm=} -> s | nil, err.  An XPUB socket. */
static int l_pub(lua_State *L) { return open_socket(L, ZMQ_XPUB); }

/* zmq.sub{bind=|connect=, subscribe=, hwm=} -> s | nil, err. */
static int l_sub(lua_State *L) { return open_socket(L, ZMQ_SUB); }

/* ---------------------------------------------------------------- methods */

/*
 * s:send{frame, ...} -> true | nil, err.  All frames are checked before the
 * first goes out, so a bad argument never leaves half a message.  Never
 * blocks: at the high-water mark libzmq drops the message for that
 * subscriber and this still returns true.
 */
static int sock_send(lua_State *L) {
  zsock *s = check_open(L);
  luaL_argcheck(L, s->type == ZMQ_XPUB, 1, "send needs a pub socket");
  luaL_checktype(L, 2, LUA_TTABLE);
  int n = (int)lua_rawlen(L, 2);
  luaL_argcheck(L, n > 0, 2, "no frames");
  for (int i = 1; i <= n; i++) {
    if (lua_rawgeti(L, 2, i) != LUA_TSTRING)
      return luaL_error(L, "zmq: frame %d is a %s, not a string", i, luaL_typename(L, -1));
    lua_pop(L, 1);
  }
  int rc = 0;
  for (int i = 1; i <= n && rc >= 0; i++) {
    size_t len;
    lua_rawgeti(L, 2, i);
    const char *p = lua_tolstring(L, -1, &len);
    rc = zmq_send(s->z, p, len, ZMQ_DONTWAIT | (i < n ? ZMQ_SNDMORE : 0));
    lua_pop(L, 1);
  }
  int err = zmq_errno();
  pump(s);
  if (rc < 0)
    return kv_fail(L, "zmq: send: %s", zmq_strerror(err));
  lua_pushboolean(L, 1);
  return 1;
}

/* nil and why a wait ended without its answer. */
static int push_wait_failure(lua_State *L, const waiter *wt) {
  return wt->result == WAIT_TIMEOUT ? kv_timeout(L) : kv_fail(L, "zmq: socket closed");
}

static int recv_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  waiter *wt = kv_wait_data(kv_wait_of(ctx));
  if (wt->result == WAIT_OK) {
    frames_push(L, &wt->fr);
    return 1;
  }
  return push_wait_failure(L, wt);
}

/* sub:recv([{timeout =}]) -> {frame, ...} | nil, "timeout". */
static int sock_recv(lua_State *L) {
  zsock *s = check_open(L);
  luaL_argcheck(L, s->type == ZMQ_SUB, 1, "recv needs a sub socket");
  double timeout = kv_timeout_arg(L, 2, "sub:recv", KV_WAIT_REPLY);
  if (!s->head) { /* nobody queued before us: take what is there */
    frames fr = {0};
    if (frames_recv(s->z, &fr) == 0) {
      frames_push(L, &fr);
      return 1;
    }
    frames_clear(&fr);
    if (zmq_errno() != EAGAIN)
      return kv_fail(L, "zmq: recv: %s", zmq_strerror(zmq_errno()));
  }
  if (timeout == 0)
    return kv_timeout(L);
  kv_wait *w = waiter_new(L, s, timeout)->w;
  pump(s); /* messages queued behind earlier waiters */
  return kv_wait_yield(L, w, recv_done);
}

static int subscribed_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  waiter *wt = kv_wait_data(kv_wait_of(ctx));
  if (wt->result == WAIT_OK) {
    lua_pushboolean(L, 1);
    return 1;
  }
  return push_wait_failure(L, wt);
}

/*
 * pub:wait_subscribed(topic, [{timeout =}]) -> true once a live subscription is
 * a prefix of topic (at once if one is), nil, "timeout" otherwise.
 */
static int sock_wait_subscribed(lua_State *L) {
  zsock *s = check_open(L);
  luaL_argcheck(L, s->type == ZMQ_XPUB, 1, "wait_subscribed needs a pub socket");
  size_t len;
  const char *topic = luaL_checklstring(L, 2, &len);
  double timeout = kv_timeout_arg(L, 3, "pub:wait_subscribed", KV_WAIT_REPLY);
  pump(s);
  if (subscribed(s, topic, len)) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (timeout == 0)
    return kv_timeout(L);
  waiter *wt = waiter_new(L, s, timeout);
  wt->topic = malloc(len ? len : 1);
  if (!wt->topic)
    abort();
  memcpy(wt->topic, topic, len);
  wt->topic_len = len;
  return kv_wait_yield(L, wt->w, subscribed_done);
}

/* s:endpoint([i]) -> the i-th bound endpoint (default 1), or nil. */
static int sock_endpoint(lua_State *L) {
  zsock *s = check_open(L);
  lua_Integer i = luaL_optinteger(L, 2, 1);
  if (i < 1 || i > s->nbound)
    lua_pushnil(L);
  else
    lua_pushstring(L, s->bound[i - 1]);
  return 1;
}

static int sock_tostring(lua_State *L) {
  zsock *s = *check_ud(L);
  if (!s || !s->z)
    lua_pushliteral(L, "zmq socket (closed)");
  else
    lua_pushfstring(L, "zmq %s socket (%s)", s->type == ZMQ_XPUB ? "pub" : "sub",
                    s->nbound ? s->bound[0] : "connected");
  return 1;
}

static const luaL_Reg sock_methods[] = {
    {"send", sock_send},         {"recv", sock_recv}, {"wait_subscribed", sock_wait_subscribed},
    {"endpoint", sock_endpoint}, {"close", sock_gc},  {NULL, NULL}};

static const luaL_Reg zmq_funcs[] = {
    {"pub", l_pub}, {"sub", l_sub}, {"max_sockets", l_max_sockets}, {NULL, NULL}};

static const kv_option_keys zmq_options[] = {{"pub", pub_keys},
                                             {"sub", sub_keys},
                                             {"recv", kv_timeout_keys},
                                             {"wait_subscribed", kv_timeout_keys},
                                             {NULL, NULL}};

int luaopen_zmq(lua_State *L) {
  kv_class_new(L, SOCK_MT, sock_methods, sock_gc, sock_tostring);
  luaL_newlib(L, zmq_funcs);
  kv_set_options(L, zmq_options);
  int major, minor, patch;
  zmq_version(&major, &minor, &patch);
  lua_pushfstring(L, "libzmq %d.%d.%d", major, minor, patch);
  lua_setfield(L, -2, "version"); /* for `kvengine version` */
  lua_pushinteger(L, EVENT_HWM);
  lua_setfield(L, -2, "event_hwm");
  return 1;
}
