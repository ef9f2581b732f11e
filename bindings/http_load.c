/*
 * http_load.c - a lean HTTP/1.1 keep-alive client for load: http.load (an
 * open loop at a fixed arrival rate) and http.batch{summary = true} (closed
 * loop), both answering with counts and latency histograms, not responses.
 *
 * Why beside curl: a load generator slower than what it loads measures
 * itself.  curl's multi interface costs about as much per request as a small
 * server does (a liveness poll before each reuse, its own header parsing and
 * bookkeeping), so even driven from C it reaches about half of wrk's rate;
 * this client does per request one write, one read, one pass of http-parser
 * over the response (http_parse.c: kv_hr, no copies) and no Lua at all.  It
 * speaks only what load needs: http:// to an IP address (or localhost), one
 * origin per call, no redirects, no streaming; everything else is
 * http.request's.
 *
 * How it sits in the loop: connections are libuv TCP handles owned by the
 * client state (one per Lua state), kept alive and pooled across calls.  A
 * call is a run: it borrows up to `concurrency` connections and gives each
 * one request at a time (never pipelined); a connection that is answered
 * takes the next request at once, and the run's clock (a timerfd) sends what
 * falls due in an open loop and expires requests past their timeout.  A
 * pooled connection is unref'd, so it keeps no program running.  Requests
 * are encoded once, before the first is sent; responses are parsed in the
 * read callback from one shared buffer and leave only counters behind.  The
 * calling task waits on the run and is woken, on the way out of the last
 * callback that touched the run (run_enter/run_leave), once every request
 * has an outcome; its results are made then.
 *
 * Open loop (as wrk2): request k is due at start + k / rate whether or not
 * earlier ones finished.  A due request goes out on an idle connection, or
 * waits for one; its latency counts from when it was due (coordinated
 * omission corrected), and, kept apart, from when it went out.  A request
 * that waited past its timeout for a connection is dropped as a timeout.
 */
#include "engine.h"
#include "http_parse.h"
#include "http_private.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define CLIENT_MT "kvengine.http.loadclient"
#define RUN_MT "kvengine.http.run"

#define READ_SIZE 65536
#define IDLE_MAX 256 /* idle connections kept between calls */
#define DEFAULT_CONCURRENCY 16
#define NS 1000000000.0

typedef struct hl_client hl_client;
typedef struct hl_run hl_run;
typedef struct hl_conn hl_conn;

/*
 * A timerfd watched by the loop: libuv's timers count whole milliseconds,
 * and an open loop must send at its rate's intervals (0.1 ms at 10,000/s)
 * and not count its own lateness as the server's.
 */
typedef struct hl_clock {
  uv_poll_t poll;
  int fd;
} hl_clock;

/* One encoded request. */
typedef struct hl_req {
  size_t off, len; /* in run->bytes */
  uint64_t timeout;
  int head;
} hl_req;

/* A request on its way: which one, and its times (uv_hrtime ns). */
typedef struct hl_job {
  int req;
  int retried;
  uint64_t due, sent;
} hl_job;

enum { CONNECTING, IDLE, BUSY };

struct hl_conn {
  uv_tcp_t tcp; /* first: the handle leads back to the connection */
  uv_connect_t connect;
  uv_write_t write;
  hl_client *cl;
  hl_run *run; /* the run it is lent to, NULL in the pool */
  hl_conn *prev, *next;
  int slot; /* its index in run->lent */
  kv_hr *hr;
  struct sockaddr_storage addr;
  int state, closing, served;
  int writing; /* a uv_write of `unsent` is under way */
  hl_job job;  /* while CONNECTING with a job, or BUSY */
  int has_job;
  kv_buf unsent; /* the rest of a request after a short write */
};

struct hl_client {
  hl_conn *conns; /* every connection not closed yet */
  hl_run *runs;
  int nconns, nidle, closed;
  char rbuf[READ_SIZE];
};

struct hl_run {
  hl_client *cl; /* NULL once stopped */
  hl_run *prev, *next;
  kv_wait *wait;
  hl_clock *clock;       /* wakes the run when a request falls due or a timeout may have passed */
  uint64_t sweep, swept; /* ns between timeout checks; the last one */
  struct sockaddr_storage addr;
  char origin[96];
  kv_buf bytes;
  hl_req *reqs;
  int nreqs, cap;
  int *order;           /* closed loop: the encoding of each request */
  int total, next_req;  /* closed loop: how many, the next to send */
  int open;             /* open loop */
  double rate;          /* requests per second */
  uint64_t start;       /* ns */
  long due_next, due_n; /* open loop: next request number, how many in all */
  hl_conn **lent, **idle;
  int conc, nlent, nidle;
  kvh_hist *latency, *raw; /* in the caller's stack; NULL once stopped */
  long sent, ok, errors, dropped;
  long statuses[1000];
  char first_error[160];
  uint64_t finished;
  int depth; /* callbacks of the run under way (run_enter) */
};

static void conn_close(hl_conn *c);
static void on_clock_closed(uv_handle_t *h);
static void run_pump(hl_run *r);
static void run_check_done(hl_run *r);

/*
 * Every callback that can move a run forward brackets its work with these:
 * the caller is woken only on the way out of the outermost, since waking
 * may end the call and free the run.
 */
static void run_enter(hl_run *r) {
  if (r)
    r->depth++;
}

static void run_leave(hl_run *r) {
  assert(!r || r->depth > 0); /* paired with run_enter */
  if (r && --r->depth == 0)
    run_check_done(r);
}

/* ------------------------------------------------------------ connections */

static void on_conn_closed(uv_handle_t *h) {
  hl_conn *c = (hl_conn *)h;
  hl_client *cl = c->cl;
  assert(c->closing && !c->run && cl->nconns > 0);
  kv_hr_free(c->hr);
  kv_buf_free(&c->unsent);
  free(c);
  if (--cl->nconns == 0 && cl->closed)
    free(cl);
}

static void run_unlend(hl_run *r, hl_conn *c) {
  int i = c->slot;
  assert(c->run == r && i >= 0 && i < r->nlent && r->lent[i] == c && r->nidle <= r->nlent);
  r->lent[i] = r->lent[--r->nlent];
  r->lent[i]->slot = i;
  for (int k = 0; k < r->nidle; k++) {
    if (r->idle[k] == c) {
      r->idle[k] = r->idle[--r->nidle];
      break;
    }
  }
  c->run = NULL;
}

/* Close c (idempotent): out of its run, its list, and the loop. */
static void conn_close(hl_conn *c) {
  if (c->closing)
    return;
  c->closing = 1;
  if (c->run)
    run_unlend(c->run, c);
  else if (c->state == IDLE)
    c->cl->nidle--;
  hl_client *cl = c->cl;
  assert(cl->nidle >= 0);
  KV_LIST_REMOVE(cl->conns, c, prev, next);
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/*
 * Count a request that failed: "http: <kind><origin>: <why>" (kind
 * "connect to ", "" or "bad response from "), or only `why` when kind is
 * NULL ("timeout").  The first message is kept for the results.
 */
static void record_error(hl_run *r, const char *kind, const char *why) {
  r->errors++;
  if (r->first_error[0])
    return;
  if (kind)
    snprintf(r->first_error, sizeof r->first_error, "http: %s%s: %s", kind, r->origin, why);
  else
    snprintf(r->first_error, sizeof r->first_error, "%s", why);
}

static void conn_start(hl_run *r, hl_job job);

/*
 * c failed: it closes, and its job is an error; or, when `retry` allows
 * and c was reused and closed before any byte of the answer (the server
 * dropped it while idle), the job goes out again on a new connection.
 */
static void conn_fail(hl_conn *c, const char *kind, const char *why, int retry) {
  hl_run *r = c->run;
  hl_job job = c->job;
  int had = c->has_job;
  retry = retry && had && c->served > 0 && !kv_hr_started(c->hr) && !job.retried;
  c->has_job = 0;
  conn_close(c);
  if (!r || !had)
    return;
  if (retry) {
    job.retried = 1;
    conn_start(r, job);
    return;
  }
  record_error(r, kind, why);
  run_pump(r);
}

static void on_written(uv_write_t *req, int status) {
  hl_conn *c = req->data;
  hl_run *r = c->run;
  c->writing = 0;
  run_enter(r);
  if (status < 0 && status != UV_ECANCELED && !c->closing)
    conn_fail(c, "", uv_strerror(status), 1);
  run_leave(r);
}

/* Send c's job: one write, rarely two. */
static void conn_send(hl_conn *c) {
  hl_run *r = c->run;
  assert(r && c->has_job && !c->writing && c->job.req >= 0 && c->job.req < r->nreqs);
  hl_req *q = &r->reqs[c->job.req];
  assert(q->len > 0 && q->off + q->len <= r->bytes.len && q->len <= UINT_MAX);
  kv_hr_expect(c->hr, q->head);
  c->state = BUSY;
  c->job.sent = uv_hrtime();
  if (!c->job.due)
    c->job.due = c->job.sent;
  r->sent++;
  uv_buf_t buf = uv_buf_init(r->bytes.p + q->off, (unsigned)q->len);
  int n = uv_try_write((uv_stream_t *)&c->tcp, &buf, 1);
  if (n == (int)q->len)
    return;
  if (n < 0 && n != UV_EAGAIN) {
    conn_fail(c, "", uv_strerror(n), 1);
    return;
  }
  size_t done = n > 0 ? (size_t)n : 0;
  c->unsent.len = 0;
  if (kv_buf_add(&c->unsent, buf.base + done, q->len - done)) {
    conn_fail(c, "", "out of memory", 0);
    return;
  }
  buf = uv_buf_init(c->unsent.p, (unsigned)c->unsent.len);
  c->write.data = c;
  int err = uv_write(&c->write, (uv_stream_t *)&c->tcp, &buf, 1, on_written);
  if (err < 0)
    conn_fail(c, "", uv_strerror(err), 1);
  else
    c->writing = 1;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)hint;
  hl_conn *c = (hl_conn *)h;
  *buf = uv_buf_init(c->cl->rbuf, READ_SIZE);
}

static void record_response(hl_run *r, hl_conn *c, int status) {
  uint64_t now = uv_hrtime();
  if (status >= 0 && status < 1000)
    r->statuses[status]++;
  if (status >= 200 && status < 400)
    r->ok++;
  if (r->latency)
    kvh_hist_add(r->latency, (now - c->job.due + 500) / 1000, 1);
  if (r->raw)
    kvh_hist_add(r->raw, (now - c->job.sent + 500) / 1000, 1);
}

/* c's response is complete: count it; c serves the run again, or closes. */
static void conn_answered(hl_conn *c, int keep) {
  hl_run *r = c->run;
  c->has_job = 0;
  c->served++;
  record_response(r, c, kv_hr_status(c->hr));
  if (keep && !c->writing) {     /* answered before it had all the request: no reuse */
    assert(r->nidle < r->nlent); /* c is lent and not idle yet */
    c->state = IDLE;
    r->idle[r->nidle++] = c;
  } else {
    conn_close(c);
  }
  run_pump(r);
}

static void conn_read(hl_conn *c, ssize_t nread, const uv_buf_t *buf) {
  if (c->state != BUSY) { /* an idle connection has nothing to hear but its end */
    conn_close(c);
    return;
  }
  if (nread < 0) {
    if (kv_hr_eof(c->hr) == KV_HR_RESPONSE)
      conn_answered(c, 0);
    else
      conn_fail(c, "", nread == UV_EOF ? kv_hr_error_text(c->hr) : uv_strerror((int)nread), 1);
    return;
  }
  size_t used;
  kv_hr_result res = kv_hr_feed(c->hr, buf->base, (size_t)nread, &used);
  if (res == KV_HR_ERROR)
    conn_fail(c, "bad response from ", kv_hr_error_text(c->hr), 0);
  else if (res == KV_HR_RESPONSE) /* bytes beyond it were never asked for */
    conn_answered(c, kv_hr_keep_alive(c->hr) && used == (size_t)nread);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  hl_conn *c = (hl_conn *)s;
  if (nread == 0 || c->closing)
    return;
  hl_run *r = c->run;
  run_enter(r);
  conn_read(c, nread, buf);
  run_leave(r);
}

static void on_connect(uv_connect_t *req, int status) {
  hl_conn *c = req->data;
  if (c->closing)
    return;
  hl_run *r = c->run;
  run_enter(r);
  if (status < 0)
    conn_fail(c, "connect to ", uv_strerror(status), 0);
  else if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
    conn_fail(c, "", "cannot read", 0);
  else
    conn_send(c);
  run_leave(r);
}

static socklen_t addr_len(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* An idle pooled connection to addr, taken out of the pool; or NULL. */
static hl_conn *pool_take(hl_client *cl, const struct sockaddr_storage *addr) {
  for (hl_conn *c = cl->conns; c; c = c->next) {
    if (!c->run && c->state == IDLE && !c->closing && !memcmp(&c->addr, addr, addr_len(addr))) {
      cl->nidle--;
      uv_ref((uv_handle_t *)&c->tcp);
      return c;
    }
  }
  return NULL;
}

static hl_conn *conn_new(hl_client *cl, const struct sockaddr_storage *addr) {
  hl_conn *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->hr = kv_hr_new();
  if (!c->hr) {
    free(c);
    return NULL;
  }
  uv_tcp_init(kv_loop(), &c->tcp);
  c->cl = cl;
  memcpy(&c->addr, addr, sizeof *addr);
  KV_LIST_PUSH(cl->conns, c, prev, next);
  cl->nconns++;
  c->state = CONNECTING;
  return c;
}

/* Give job to a connection of r's own: pooled, or new (r has a free slot). */
static void conn_start(hl_run *r, hl_job job) {
  hl_conn *c = pool_take(r->cl, &r->addr);
  int fresh = !c;
  if (fresh && !(c = conn_new(r->cl, &r->addr))) {
    record_error(r, "", "out of memory");
    return;
  }
  assert(r->nlent < r->conc); /* the caller checked that r has a free slot */
  c->run = r;
  c->slot = r->nlent;
  r->lent[r->nlent++] = c;
  c->job = job;
  c->job.sent = uv_hrtime(); /* the timeout counts from here while connecting */
  c->has_job = 1;
  if (!fresh) {
    conn_send(c);
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  c->connect.data = c;
  int err = uv_tcp_connect(&c->connect, &c->tcp, (struct sockaddr *)&r->addr, on_connect);
  if (err < 0)
    conn_fail(c, "connect to ", uv_strerror(err), 0);
}

/* ------------------------------------------------------------------- runs */

/* When open-loop request k falls due (uv_hrtime ns). */
static uint64_t due_at(const hl_run *r, long k) {
  return r->start + (uint64_t)((double)k * NS / r->rate);
}

/* The next job due now, if any; dropped ones (waited past their timeout) counted. */
static int run_next_job(hl_run *r, uint64_t now, hl_job *job) {
  if (!r->open) {
    if (r->next_req >= r->total)
      return 0;
    *job = (hl_job){.req = r->order[r->next_req++]};
    return 1;
  }
  while (r->due_next < r->due_n) {
    uint64_t due = due_at(r, r->due_next);
    if (due > now)
      return 0;
    r->due_next++;
    if (now - due > r->reqs[0].timeout) {
      r->dropped++;
      record_error(r, NULL, "timeout");
      continue;
    }
    *job = (hl_job){.req = 0, .due = due};
    return 1;
  }
  return 0;
}

/* Start every job that is due and has a connection to go on. */
static void run_pump(hl_run *r) {
  if (!r->cl)
    return;
  uint64_t now = r->open ? uv_hrtime() : 0;
  hl_job job;
  while ((r->nidle > 0 || r->nlent < r->conc) && run_next_job(r, now, &job)) {
    if (r->nidle > 0) {
      hl_conn *c = r->idle[--r->nidle];
      assert(c->run == r && c->state == IDLE && !c->has_job);
      c->job = job;
      c->has_job = 1;
      conn_send(c);
    } else {
      conn_start(r, job);
    }
  }
}

static int run_busy(const hl_run *r) { return r->nlent - r->nidle; }

/* Give r's idle connections back to the pool and close the others. */
static void run_stop(hl_run *r) {
  if (!r->cl)
    return;
  hl_client *cl = r->cl;
  while (r->nlent > 0) {
    hl_conn *c = r->lent[r->nlent - 1];
    if (c->state == IDLE && cl->nidle < IDLE_MAX) {
      run_unlend(r, c);
      cl->nidle++;
      uv_unref((uv_handle_t *)&c->tcp); /* a pooled connection keeps no program alive */
    } else {
      conn_close(c);
    }
  }
  if (r->clock) {
    uv_close((uv_handle_t *)&r->clock->poll, on_clock_closed);
    r->clock = NULL;
  }
  KV_LIST_REMOVE(cl->runs, r, prev, next);
  r->cl = NULL;
  r->latency = r->raw = NULL;
}

/* Every request has an outcome: wake the caller (run_leave does, last). */
static void run_check_done(hl_run *r) {
  if (!r->cl || !r->wait || r->depth > 0 || run_busy(r) > 0)
    return;
  if (r->open ? r->due_next < r->due_n : r->next_req < r->total)
    return;
  r->finished = uv_hrtime();
  kv_wait *w = r->wait;
  r->wait = NULL;
  kv_wait_wake(w);
}

/* Arm the clock for the next due request or timeout check, whichever is first. */
static void run_arm(hl_run *r) {
  uint64_t at = r->swept + r->sweep;
  if (r->open && r->due_next < r->due_n) {
    uint64_t due = due_at(r, r->due_next);
    if (due < at)
      at = due;
  }
  struct itimerspec when = {.it_value = {(time_t)(at / 1000000000u), (long)(at % 1000000000u)}};
  if (at == 0)
    when.it_value.tv_nsec = 1; /* zero would disarm it */
  timerfd_settime(r->clock->fd, TFD_TIMER_ABSTIME, &when, NULL);
}

/* Expire requests past their timeout; in an open loop, send what fell due. */
static void on_clock(uv_poll_t *p, int status, int events) {
  (void)status, (void)events;
  hl_run *r = p->data;
  uint64_t expirations, now = uv_hrtime();
  ssize_t n = read(r->clock->fd, &expirations, sizeof expirations); /* clears it; may be EAGAIN */
  (void)n;
  run_enter(r);
  if (now - r->swept >= r->sweep) {
    r->swept = now;
    for (int i = r->nlent - 1; i >= 0; i--) { /* failures only move later entries */
      hl_conn *c = r->lent[i];
      if (i < r->nlent && c->has_job && now - c->job.sent > r->reqs[c->job.req].timeout)
        conn_fail(c, NULL, "timeout", 0);
    }
  }
  run_pump(r);
  if (r->clock)
    run_arm(r);
  run_leave(r);
}

static void on_clock_closed(uv_handle_t *h) {
  hl_clock *k = (hl_clock *)h;
  close(k->fd);
  free(k);
}

static void run_free(hl_run *r) {
  run_stop(r);
  kv_buf_free(&r->bytes);
  free(r->reqs);
  free(r->order);
  free(r->lent);
  free(r->idle);
  free(r);
}

/* __close and __gc of a run's anchor in its caller's stack. */
static int run_box_close(lua_State *L) {
  hl_run **box = luaL_checkudata(L, 1, RUN_MT);
  if (*box) {
    run_free(*box);
    *box = NULL;
  }
  return 0;
}

/* The waiting task was abandoned: stop sending, let go of the histograms. */
static void run_cancel(kv_wait *w) {
  hl_run *r = *(hl_run **)kv_wait_data(w);
  if (r && r->wait == w) {
    r->wait = NULL;
    run_stop(r);
  }
  kv_wait_wake(w);
}

/* -------------------------------------------------------- encoding requests */

static hl_client *client_of(lua_State *L) {
  hl_client **box = lua_touserdata(L, lua_upvalueindex(2));
  return *box;
}

/* A header name, a header value or a method: raises when it would break the head. */
static void text_ok(lua_State *L, const char *who, const char *s, const char *bad) {
  if (!*s || strpbrk(s, bad))
    luaL_error(L, "%s: invalid header or method %s", who, s);
}

/* Resolve the host of u for a connection: an IP address or localhost. */
static void origin_addr(lua_State *L, const char *who, const char *url, const kv_http_url *u,
                        struct sockaddr_storage *out) {
  char host[64];
  if (u->host.len >= sizeof host)
    luaL_error(L, "%s: host too long in %s", who, url);
  memcpy(host, url + u->host.off, u->host.len);
  host[u->host.len] = '\0';
  if (strcasecmp(host, "localhost") == 0)
    strcpy(host, "127.0.0.1");
  memset(out, 0, sizeof *out);
  if (uv_ip4_addr(host, u->port, (struct sockaddr_in *)out) &&
      uv_ip6_addr(host, u->port, (struct sockaddr_in6 *)out))
    luaL_error(L, "%s: the load client connects to an IP address or localhost, not %s", who, host);
}

static void add_text(lua_State *L, kv_buf *b, const char *s, size_t n) {
  if (kv_buf_add(b, s, n))
    luaL_error(L, "http: out of memory");
}

static void add_str(lua_State *L, kv_buf *b, const char *s) { add_text(L, b, s, strlen(s)); }

/* Append the headers of spec t; returns whether they name a content type. */
static int encode_headers(lua_State *L, const char *who, int t, kv_buf *b) {
  int has_type = 0;
  if (lua_getfield(L, t, "headers") == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  if (!lua_istable(L, -1))
    luaL_error(L, "%s: headers must be a table", who);
  int h = lua_gettop(L);
  for (lua_pushnil(L); lua_next(L, h); lua_pop(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
      luaL_error(L, "%s: header names and values must be strings", who);
    const char *k = lua_tostring(L, -2), *v = lua_tostring(L, -1);
    text_ok(L, who, k, ": \t\r\n");
    if (strpbrk(v, "\r\n"))
      luaL_error(L, "%s: invalid header %s", who, k);
    has_type |= strcasecmp(k, "content-type") == 0;
    add_str(L, b, k);
    add_str(L, b, ": ");
    add_str(L, b, v);
    add_str(L, b, "\r\n");
  }
  lua_pop(L, 1);
  return has_type;
}

/* The run's origin from the first URL; every other URL must share it. */
static void set_origin(lua_State *L, hl_run *r, const char *who, const char *url,
                       const kv_http_url *u) {
  struct sockaddr_storage addr;
  origin_addr(L, who, url, u, &addr);
  if (r->nreqs == 0) {
    memcpy(&r->addr, &addr, sizeof addr);
    snprintf(r->origin, sizeof r->origin, "%.*s", (int)u->authority.len, url + u->authority.off);
  } else if (memcmp(&addr, &r->addr, addr_len(&addr))) {
    luaL_error(L, "%s: every request goes to one origin (%s), not to %s", who, r->origin, url);
  }
}

static hl_req *req_new(lua_State *L, hl_run *r) {
  if (r->nreqs == r->cap) {
    int cap = r->cap ? r->cap * 2 : 4;
    hl_req *q = realloc(r->reqs, (size_t)cap * sizeof *q);
    if (!q)
      luaL_error(L, "http: out of memory");
    r->reqs = q, r->cap = cap;
  }
  return &r->reqs[r->nreqs];
}

/*
 * Encode the request spec at index t (a URL string, or a table with url,
 * method, headers, body, json, timeout) at the end of r->bytes; returns its
 * number.  The first spec sets the run's origin; the others must share it.
 * Raises on a spec that is wrong: it is the script's bug.
 */
static int encode_request(lua_State *L, hl_run *r, int t, const char *who) {
  int top = lua_gettop(L), is_table = lua_istable(L, t);
  if (!is_table && lua_type(L, t) != LUA_TSTRING)
    luaL_error(L, "%s: a request is a table or a URL string", who);
  if (is_table && lua_getfield(L, t, "url") != LUA_TSTRING)
    luaL_error(L, "%s: url must be a string", who);
  size_t ulen;
  const char *url = lua_tolstring(L, is_table ? -1 : t, &ulen);
  kv_http_url u;
  if (kv_http_split_url(url, ulen, &u) || u.scheme.len != 4 || strncasecmp(url, "http", 4))
    luaL_error(L, "%s: %s is not an http:// URL", who, url);
  set_origin(L, r, who, url, &u);
  const char *method = NULL, *body = NULL;
  double timeout = kv_opt_timeout(L, is_table ? t : 0, who, KV_WAIT_TRANSFER);
  size_t blen = 0;
  int json = 0;
  if (is_table) {
    if (lua_getfield(L, t, "method") != LUA_TNIL && !(method = lua_tostring(L, -1)))
      luaL_error(L, "%s: method must be a string", who);
    if ((json = lua_getfield(L, t, "json") != LUA_TNIL)) {
      kvh_json_encode(L, -1);
    } else if (lua_getfield(L, t, "body") != LUA_TNIL && !lua_isstring(L, -1)) {
      luaL_error(L, "%s: body must be a string", who);
    }
    body = lua_tolstring(L, -1, &blen);
  }
  if (!method)
    method = body ? "POST" : "GET";
  text_ok(L, who, method, ": \t\r\n");
  if (!body && (!strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH")))
    body = "";
  hl_req *q = req_new(L, r);
  kv_buf *b = &r->bytes;
  q->off = b->len;
  q->timeout = (uint64_t)(timeout * NS);
  q->head = !strcmp(method, "HEAD");
  add_str(L, b, method);
  add_str(L, b, u.target.len && url[u.target.off] == '/' ? " " : " /");
  add_text(L, b, url + u.target.off, u.target.len);
  add_str(L, b, " HTTP/1.1\r\nHost: ");
  add_text(L, b, url + u.authority.off, u.authority.len);
  add_str(L, b, "\r\n");
  if (is_table && !encode_headers(L, who, t, b) && json)
    add_str(L, b, "Content-Type: application/json\r\n");
  if (body) {
    char len[48];
    snprintf(len, sizeof len, "Content-Length: %zu\r\n", blen);
    add_str(L, b, len);
  }
  add_str(L, b, "\r\n");
  if (body)
    add_text(L, b, body, blen);
  q->len = b->len - q->off;
  lua_settop(L, top);
  return r->nreqs++;
}

/* ------------------------------------------------------------ Lua surface */

/* A new run anchored in a to-be-closed slot of the caller's stack. */
static hl_run *run_new(lua_State *L, int conc) {
  hl_client *cl = client_of(L);
  if (cl->closed)
    luaL_error(L, "http: the client is closed");
  hl_run **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, RUN_MT);
  lua_toclose(L, -1);
  hl_run *r = calloc(1, sizeof *r);
  if (r) {
    r->lent = calloc((size_t)conc, sizeof *r->lent);
    r->idle = calloc((size_t)conc, sizeof *r->idle);
  }
  if (!r || !r->lent || !r->idle) {
    if (r)
      free(r->lent), free(r->idle);
    free(r);
    luaL_error(L, "http: out of memory");
  }
  *box = r;
  r->conc = conc;
  return r;
}

static int run_results(lua_State *L, int status, lua_KContext ctx);

/* Timeouts are checked every tenth of the shortest, at most every 100 ms. */
static uint64_t sweep_of(const hl_run *r) {
  uint64_t least = (uint64_t)(KV_WAIT_TRANSFER * NS);
  for (int i = 0; i < r->nreqs; i++)
    if (r->reqs[i].timeout < least)
      least = r->reqs[i].timeout;
  least /= 10;
  return least < 1000000 ? 1000000 : least > 100000000 ? 100000000 : least;
}

/* Start r (its requests encoded) and wait until every request has an outcome. */
static int run_go(lua_State *L, hl_run *r) {
  hl_client *cl = client_of(L);
  hl_clock *k = malloc(sizeof *k);
  if (!k)
    return luaL_error(L, "http: out of memory");
  k->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (k->fd < 0 || uv_poll_init(kv_loop(), &k->poll, k->fd) < 0) {
    if (k->fd >= 0)
      close(k->fd);
    free(k);
    return luaL_error(L, "http: cannot make a timer");
  }
  k->poll.data = r;
  r->clock = k;
  r->cl = cl; /* from here run_stop closes the clock */
  KV_LIST_PUSH(cl->runs, r, prev, next);
  kv_wait *w = kv_wait_new(L, "http", sizeof(hl_run *), run_cancel, NULL);
  *(hl_run **)kv_wait_data(w) = r;
  r->wait = w;
  r->start = r->swept = uv_hrtime();
  r->sweep = sweep_of(r);
  uv_poll_start(&k->poll, UV_READABLE, on_clock);
  run_enter(r);
  run_pump(r);
  if (r->clock)
    run_arm(r);
  run_leave(r); /* a wake now (nothing to send) is delivered once the task waits */
  return kv_wait_yield(L, w, run_results);
}

static void set_int(lua_State *L, const char *k, long v) {
  lua_pushinteger(L, v);
  lua_setfield(L, -2, k);
}

/*
 * The results, when the run is over: {sent, ok, errors, dropped, statuses,
 * latency, uncorrected, elapsed, first_error}.  Stack: the histograms at 2
 * and 3 (3 is nil for a closed loop), the run's anchor at 4.
 */
static int run_results(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  hl_run *r = *(hl_run **)kv_wait_data(kv_wait_of(ctx));
  lua_createtable(L, 0, 9);
  set_int(L, "sent", r->sent);
  set_int(L, "ok", r->ok);
  set_int(L, "errors", r->errors);
  if (r->open)
    set_int(L, "dropped", r->dropped);
  lua_newtable(L);
  for (int s = 0; s < 1000; s++) {
    if (r->statuses[s]) {
      lua_pushinteger(L, r->statuses[s]);
      lua_rawseti(L, -2, s);
    }
  }
  lua_setfield(L, -2, "statuses");
  lua_pushvalue(L, 2);
  lua_setfield(L, -2, "latency");
  lua_pushvalue(L, 3);
  lua_setfield(L, -2, "uncorrected");
  lua_pushnumber(L, (double)(r->finished - r->start) / NS);
  lua_setfield(L, -2, "elapsed");
  if (r->first_error[0]) {
    lua_pushstring(L, r->first_error);
    lua_setfield(L, -2, "first_error");
  }
  return 1;
}

/*
 * http.batch(requests, {concurrency = n, summary = true}) -> {sent, ok,
 * errors, statuses, latency, elapsed, first_error}: the requests (one origin)
 * on the load client, closed loop; called by http.batch with the list at 1
 * and the concurrency checked.
 */
int kvh_batch_summary(lua_State *L, int conc) {
  const char *who = "http.batch";
  int total = (int)luaL_len(L, 1);
  lua_settop(L, 1);
  kvh_hist *latency = kvh_hist_push(L);
  lua_pushnil(L);
  hl_run *r = run_new(L, conc < total ? conc : total > 0 ? total : 1);
  r->latency = latency;
  r->total = total;
  if (total > 0 && !(r->order = malloc((size_t)total * sizeof *r->order)))
    return luaL_error(L, "http: out of memory");
  for (int i = 1; i <= total; i++) {
    lua_geti(L, 1, i);
    if (i > 1) {
      lua_geti(L, 1, i - 1);
      int same = lua_rawequal(L, -1, -2); /* a list of one URL costs one encoding */
      lua_pop(L, 1);
      if (same) {
        r->order[i - 1] = r->order[i - 2];
        lua_pop(L, 1);
        continue;
      }
    }
    if (lua_istable(L, -1)) {
      int stream = lua_getfield(L, -1, "stream") != LUA_TNIL;
      stream |= lua_getfield(L, -2, "lines") != LUA_TNIL; /* lines frame a stream */
      int tls = lua_getfield(L, -3, "tls") != LUA_TNIL;
      lua_pop(L, 3);
      if (stream || tls)
        return luaL_error(L, "%s: summary mode does not %s (request %d)", who,
                          stream ? "stream" : "speak TLS", i);
    }
    r->order[i - 1] = encode_request(L, r, lua_gettop(L), who);
    lua_pop(L, 1);
  }
  return run_go(L, r);
}

static const char *const load_keys[] = {"url",     "method", "headers",  "body",        "json",
                                        "timeout", "rate",   "duration", "concurrency", NULL};

const kv_option_keys kvh_load_options[] = {{"load", load_keys}, {NULL, NULL}};

/*
 * http.load{url, method, headers, body, json, timeout, rate, duration,
 * concurrency} -> {sent, ok, errors, dropped, statuses, latency,
 * uncorrected, elapsed, first_error}
 */
int kvh_load(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  kv_check_options(L, 1, "http.load", load_keys);
  lua_settop(L, 1);
  lua_getfield(L, 1, "rate");
  lua_getfield(L, 1, "duration");
  lua_getfield(L, 1, "concurrency");
  double rate = lua_tonumber(L, 2), duration = lua_tonumber(L, 3);
  lua_Integer conc = lua_isnil(L, 4) ? DEFAULT_CONCURRENCY : lua_tointeger(L, 4);
  luaL_argcheck(L, rate > 0 && rate <= 1e7, 1, "rate must be a number of requests per second > 0");
  luaL_argcheck(L, duration > 0 && duration <= 86400, 1, "duration must be seconds > 0");
  luaL_argcheck(L, lua_isnil(L, 4) || lua_isinteger(L, 4), 1, "concurrency must be an integer");
  luaL_argcheck(L, conc >= 1 && conc <= 100000, 1, "concurrency must be at least 1");
  lua_settop(L, 1);
  kvh_hist *latency = kvh_hist_push(L), *raw = kvh_hist_push(L);
  hl_run *r = run_new(L, (int)conc);
  r->latency = latency;
  r->raw = raw;
  encode_request(L, r, 1, "http.load");
  r->open = 1;
  r->rate = rate;
  r->due_n = (long)(rate * duration + 0.5);
  if (r->due_n < 1)
    r->due_n = 1;
  return run_go(L, r);
}

/* ------------------------------------------------------------ the client */

/* __gc of the client (the Lua state closes): stop every run, close every connection. */
static int client_gc(lua_State *L) {
  hl_client **box = luaL_checkudata(L, 1, CLIENT_MT);
  hl_client *cl = *box;
  if (!cl)
    return 0;
  *box = NULL;
  while (cl->runs)
    run_stop(cl->runs);
  while (cl->conns)
    conn_close(cl->conns);
  cl->closed = 1;
  if (cl->nconns == 0)
    free(cl);
  return 0;
}

void kvh_load_push(lua_State *L) {
  hl_client **box = lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  kv_class_new(L, CLIENT_MT, NULL, client_gc, NULL);
  kv_class_new(L, RUN_MT, NULL, run_box_close, NULL);
  luaL_setmetatable(L, CLIENT_MT);
  *box = calloc(1, sizeof **box);
  if (!*box)
    luaL_error(L, "http: out of memory");
}
