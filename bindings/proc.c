/*
 * proc.c - the `proc` module: child processes for scenarios and fixtures.
 *
 *   proc.spawn{argv=, env=, env_clear=, cwd=, log=} -> p | nil, err
 *   proc.run{argv=, env=, env_clear=, cwd=, input=, timeout=}
 *     -> code, stdout, stderr | nil, why, stdout, stderr[, signum] | nil, err
 *   p:pid() p:pgid() p:running() p:kill([sig]) p:wait{timeout=} p:close()
 *
 * How it sits in the loop: a child is a uv_process_t whose exit callback
 * wakes the tasks waiting in p:wait or proc.run; proc.run's output arrives
 * through uv pipes; a uv timer enforces the grace between SIGTERM and
 * SIGKILL when a child is let go.  Nothing blocks.
 *
 * No target is exec'd directly: uv_spawn runs the engine binary in its
 * supervisor mode (engine/supervise.c; the argv and the report lines are in
 * engine/supervise.h) with a control socket on fd 3.  The supervisor puts
 * the target in a process group of its own (the group id is the
 * supervisor's pid) and kills that whole group when the target exits, when
 * the engine closes the control socket, or when the engine dies, even by
 * SIGKILL.  It reports over the socket whether the target could be exec'd,
 * and its pid, so proc.spawn and proc.run yield until that report.
 *
 * Failures the caller should expect come back as nil, "proc: <why>"
 * ("proc: exec: prog: No such file or directory"); a timeout as nil,
 * "timeout"; wrong arguments and unknown options raise.
 *
 * Ownership: a child record is malloc'd and holds the uv handles.  It is
 * freed once its last handle has closed and nothing refers to it: the Lua
 * handle, a pending wait, and the scope that tracks it each hold a
 * reference.  Closing (the end of the test, p:close(), __gc, __close) sends
 * SIGTERM to the group, closes the control socket and arms the SIGKILL
 * timer; the record lives on until the supervisor has been reaped, counted
 * meanwhile as a leftover the runner waits for between tests
 * (kv_drain_begin/kv_drain_end, engine/drain.c).
 */
#include "engine.h"
#include "supervise.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#define PROC_MT "kvengine.proc.child"
#define SELF_EXE "/proc/self/exe"
/* The supervisor kills its group after its own grace; this is the backstop. */
#define KILL_AFTER_MS (KV_SUPERVISE_GRACE_MS + 1000)
#define READ_CHUNK 65536
#define MSG_SIZE 512

extern char **environ;

typedef struct pwait pwait;

enum start_state { START_PENDING, START_OK, START_FAILED };

/* Which of a child's uv handles are open (not yet asked to close). */
enum { H_PROC = 1, H_TIMER = 2, H_CTL = 4, H_IN = 8, H_OUT = 16, H_ERR = 32 };

typedef struct child {
  kv_resource res;
  int refs;      /* Lua handle, pending waits, tracking, callbacks in flight */
  int handles;   /* uv handles whose close callback has not run yet */
  unsigned live; /* H_* bits */
  int tracked, closing;
  uv_process_t proc;
  uv_timer_t kill_timer;
  uv_pipe_t ctl, in, out, err;
  uv_write_t wreq;
  pid_t pgid; /* the supervisor's pid, the group's id */
  pid_t pid;  /* the target's, once started */
  enum start_state start;
  int exited;
  int64_t code;
  int termsig;
  char ctlbuf[128];
  size_t ctllen;
  kv_buf cap_out, cap_err;
  char *input;
  size_t inlen;
  char *prog, *cwd; /* for messages */
  char errmsg[MSG_SIZE];
  kv_wait *start_waiters, *done_waiters; /* their data are pwaits */
} child;

/* The data of a kv_wait on a child. */
struct pwait {
  kv_wait *w;
  child *c; /* holds a reference */
  uv_timer_t *timer;
  int timed_out;
  double deadline;    /* proc.run: the end of its timeout (kv_now's clock) */
  char err[MSG_SIZE]; /* a failure found before the child existed */
};

/* The Lua handle. */
typedef struct proc_ud {
  child *c; /* NULL once closed */
  lua_Integer pid, pgid;
} proc_ud;

/* What spawn and run were asked for; the strings live on the Lua stack. */
typedef struct spawn_req {
  const char **argv;
  const char **env; /* NULL: the engine's environment */
  const char *cwd, *log, *input;
  size_t inlen;
  int capture;
  double timeout; /* proc.run: seconds, >= 0 (engine.h's rule) */
} spawn_req;

/* ----------------------------------------------------------- the record */

static void child_free(child *c) {
  assert(!c->res.scope && !c->start_waiters && !c->done_waiters);
  kv_buf_free(&c->cap_out);
  kv_buf_free(&c->cap_err);
  free(c->input);
  free(c->prog);
  free(c->cwd);
  free(c);
}

static void child_unref(child *c) {
  assert(c->refs > 0);
  if (--c->refs == 0 && c->handles == 0)
    child_free(c);
}

static void on_handle_closed(uv_handle_t *h) {
  child *c = h->data;
  assert(c->handles > 0);
  if (--c->handles == 0 && c->refs == 0)
    child_free(c);
}

static void handle_opened(child *c, void *h, unsigned bit) {
  assert(!(c->live & bit)); /* each handle is opened once */
  ((uv_handle_t *)h)->data = c;
  c->live |= bit;
  c->handles++;
}

static void handle_close(child *c, void *h, unsigned bit) {
  if (!(c->live & bit))
    return;
  c->live &= ~bit;
  uv_close((uv_handle_t *)h, on_handle_closed);
}

/*
 * Send sig to the child's process group.  Never after the supervisor was
 * reaped (its pid, the group id, may then be reused) nor before it exists.
 * Before the supervisor has made its group, signal the supervisor alone.
 */
static int signal_group(child *c, int sig) {
  if (c->exited || c->pgid <= 0) {
    errno = ESRCH;
    return -1;
  }
  if (kill(-c->pgid, sig) == 0)
    return 0;
  if (errno != ESRCH)
    return -1;
  return kill(c->pgid, sig);
}

/* ---------------------------------------------------------------- waits */

static void pwait_disarm(pwait *pw) {
  if (pw->timer)
    uv_close((uv_handle_t *)pw->timer, kv_free_handle);
  pw->timer = NULL;
}

static void pwait_cancel(kv_wait *w) {
  pwait *pw = kv_wait_data(w);
  kv_wait_unlink(w);
  pwait_disarm(pw);
  kv_wait_wake(w);
}

static void pwait_dispose(kv_wait *w) {
  pwait *pw = kv_wait_data(w);
  kv_wait_unlink(w);
  pwait_disarm(pw);
  if (pw->c)
    child_unref(pw->c);
  pw->c = NULL;
}

/* Start a wait for the task running L (raises when L cannot wait). */
static pwait *pwait_new(lua_State *L, const char *who) {
  kv_wait *w = kv_wait_new(L, who, sizeof(pwait), pwait_cancel, pwait_dispose);
  pwait *pw = kv_wait_data(w);
  pw->w = w;
  pw->deadline = -1;
  return pw;
}

static void pwait_attach(pwait *pw, child *c, kv_wait **list) {
  assert(!pw->c && c->refs > 0); /* one child per wait; the caller holds c */
  pw->c = c;
  c->refs++;
  kv_wait_link(pw->w, list);
}

static void pwait_timer_fired(uv_timer_t *t) {
  pwait *pw = t->data;
  assert(pw->timer == t && pw->w);
  pw->timed_out = 1;
  kv_wait_unlink(pw->w);
  pwait_disarm(pw);
  kv_wait_wake(pw->w);
}

/* Wake pw after `seconds` with timed_out set (0: on the next loop turn). */
static void pwait_arm(pwait *pw, double seconds) {
  assert(!pw->timer); /* one timer per wait */
  pw->timer = kv_timer_new(pw);
  kv_timer_start(pw->timer, pwait_timer_fired,
                 seconds > 0 ? (uint64_t)(seconds * 1000.0 + 0.5) : 0);
}

/* Wake every wait on list; runs their tasks now (from a loop callback). */
static void wake_list(child *c, kv_wait **list) {
  c->refs++;
  while (*list) {
    kv_wait *w = *list;
    kv_wait_unlink(w);
    pwait_disarm(kv_wait_data(w));
    kv_wait_wake(w);
  }
  child_unref(c);
}

/* Done: the supervisor was reaped and captured output reached EOF. */
static int child_done(const child *c) { return c->exited && !(c->live & (H_OUT | H_ERR)); }

static void check_done(child *c) {
  if (child_done(c))
    wake_list(c, &c->done_waiters);
}

static void fail_start(child *c, const char *msg) {
  if (c->start != START_PENDING)
    return;
  c->start = START_FAILED;
  snprintf(c->errmsg, sizeof c->errmsg, "%s", msg);
  wake_list(c, &c->start_waiters);
}

/* --------------------------------------------------------------- closing */

static void kill_timer_fired(uv_timer_t *t) { signal_group(t->data, SIGKILL); }

/*
 * Let go of c: untrack it, close the control socket (the supervisor then
 * terminates the group), send SIGTERM to the group ourselves and arm the
 * SIGKILL backstop.  Idempotent.  May free c: callers that use c afterwards
 * hold a reference.
 */
static void child_close(child *c) {
  kv_untrack(&c->res);
  c->refs++;
  if (c->tracked) {
    c->tracked = 0;
    c->refs--;
  }
  if (!c->closing) {
    c->closing = 1;
    handle_close(c, &c->ctl, H_CTL);
    handle_close(c, &c->in, H_IN);
    handle_close(c, &c->out, H_OUT);
    handle_close(c, &c->err, H_ERR);
    if (!c->exited) {
      signal_group(c, SIGTERM);
      kv_timer_start(&c->kill_timer, kill_timer_fired, KILL_AFTER_MS);
      kv_drain_begin(); /* ended in child_exited, which finds c->closing set */
    }
    fail_start(c, "proc: closed before the child started");
    check_done(c);
  }
  child_unref(c);
}

static void res_close(kv_resource *r) {
  child_close((child *)(void *)((char *)r - offsetof(child, res)));
}

/* -------------------------------------------------------- loop callbacks */

static void child_exited(uv_process_t *p, int64_t status, int sig) {
  child *c = p->data;
  c->refs++;
  c->exited = 1;
  c->code = status;
  c->termsig = sig;
  /*
   * A supervisor killed outright (SIGKILL to it alone) could not clean up.
   * Its group id cannot have been reused: libuv reaped it just now, and the
   * id stays reserved while any member lives.
   */
  if (sig == SIGKILL)
    kill(-c->pgid, SIGKILL);
  handle_close(c, &c->proc, H_PROC);
  handle_close(c, &c->kill_timer, H_TIMER);
  if (c->closing) /* let go before it exited: child_close began the drain */
    kv_drain_end();
  check_done(c);
  child_unref(c);
}

/* Parse the supervisor's report (supervise.h). */
static void parse_report(child *c) {
  c->ctlbuf[c->ctllen] = '\0';
  char *nl = strchr(c->ctlbuf, '\n');
  if (!nl)
    return;
  *nl = '\0';
  char stage[16], msg[MSG_SIZE];
  int err = 0;
  long pid = 0;
  int kind = kv_supervise_parse_report(c->ctlbuf, &pid, stage, &err);
  if (kind == 1) {
    c->pid = (pid_t)pid;
    c->start = START_OK;
    wake_list(c, &c->start_waiters);
    return;
  }
  if (kind < 0)
    snprintf(msg, sizeof msg, "proc: bad report from the supervisor: %s", c->ctlbuf);
  else if (strcmp(stage, "chdir") == 0)
    snprintf(msg, sizeof msg, "proc: chdir: %s: %s", c->cwd ? c->cwd : "", strerror(err));
  else if (strcmp(stage, "exec") == 0)
    snprintf(msg, sizeof msg, "proc: exec: %s: %s", c->prog, strerror(err));
  else
    snprintf(msg, sizeof msg, "proc: %s: %s", stage, strerror(err));
  fail_start(c, msg);
}

static void ctl_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)hint;
  child *c = h->data;
  if (c->start != START_PENDING)
    c->ctllen = 0; /* after the report, nothing more is expected: discard */
  *buf = uv_buf_init(c->ctlbuf + c->ctllen, (unsigned)(sizeof c->ctlbuf - 1 - c->ctllen));
}

static void ctl_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  child *c = s->data;
  c->refs++;
  if (n < 0) {
    handle_close(c, &c->ctl, H_CTL);
    fail_start(c, "proc: the supervisor exited before it started the child");
  } else {
    c->ctllen += (size_t)n;
    if (c->start == START_PENDING)
      parse_report(c);
  }
  child_unref(c);
}

static kv_buf *capture_of(child *c, uv_handle_t *h) {
  return h == (uv_handle_t *)&c->out ? &c->cap_out : &c->cap_err;
}

static void out_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  (void)hint;
  kv_buf *b = capture_of(h->data, h);
  if (!kv_buf_room(b, READ_CHUNK)) {
    *buf = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS */
    return;
  }
  size_t room = b->cap - b->len;
  *buf = uv_buf_init(b->p + b->len, room > INT_MAX ? INT_MAX : (unsigned)room);
}

static void out_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void)buf;
  child *c = s->data;
  if (n >= 0) {
    capture_of(c, (uv_handle_t *)s)->len += (size_t)n;
    return;
  }
  c->refs++;
  handle_close(c, s, s == (uv_stream_t *)&c->out ? H_OUT : H_ERR);
  check_done(c);
  child_unref(c);
}

/* stdin is closed once the input is written, or could not be. */
static void input_written(uv_write_t *req, int status) {
  (void)status;
  child *c = req->data;
  handle_close(c, &c->in, H_IN);
  free(c->input);
  c->input = NULL;
}

/* ---------------------------------------------------------------- spawn */

/* The stdio of the supervisor, which the target inherits; fd 3 is control. */
static void child_stdio(child *c, const spawn_req *q, int logfd, uv_stdio_container_t *io) {
  memset(io, 0, 4 * sizeof *io);
  io[0].flags = UV_IGNORE; /* /dev/null */
  if (q->input) {
    uv_pipe_init(kv_loop(), &c->in, 0);
    handle_opened(c, &c->in, H_IN);
    io[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
    io[0].data.stream = (uv_stream_t *)&c->in;
  }
  for (int fd = 1; fd <= 2; fd++) {
    if (q->capture) {
      uv_pipe_t *p = fd == 1 ? &c->out : &c->err;
      uv_pipe_init(kv_loop(), p, 0);
      handle_opened(c, p, fd == 1 ? H_OUT : H_ERR);
      io[fd].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
      io[fd].data.stream = (uv_stream_t *)p;
    } else {
      io[fd].flags = UV_INHERIT_FD;
      io[fd].data.fd = logfd >= 0 ? logfd : fd;
    }
  }
  uv_pipe_init(kv_loop(), &c->ctl, 0);
  handle_opened(c, &c->ctl, H_CTL);
  io[3].flags = UV_CREATE_PIPE | UV_READABLE_PIPE | UV_WRITABLE_PIPE;
  io[3].data.stream = (uv_stream_t *)&c->ctl;
}

/* After uv_spawn: listen to the supervisor and the captured output, feed stdin. */
static void child_attach(child *c, const spawn_req *q) {
  uv_read_start((uv_stream_t *)&c->ctl, ctl_alloc, ctl_read);
  if (q->capture) {
    uv_read_start((uv_stream_t *)&c->out, out_alloc, out_read);
    uv_read_start((uv_stream_t *)&c->err, out_alloc, out_read);
  }
  if (!q->input)
    return;
  c->input = q->inlen ? malloc(q->inlen) : NULL;
  if (!c->input) {
    handle_close(c, &c->in, H_IN);
    return;
  }
  memcpy(c->input, q->input, q->inlen);
  c->inlen = q->inlen;
  c->wreq.data = c;
  uv_buf_t b = uv_buf_init(c->input, (unsigned)c->inlen);
  if (uv_write(&c->wreq, (uv_stream_t *)&c->in, &b, 1, input_written) < 0)
    handle_close(c, &c->in, H_IN);
}

static child *child_new(const spawn_req *q) {
  child *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->prog = strdup(q->argv[0]);
  c->cwd = q->cwd ? strdup(q->cwd) : NULL;
  if (!c->prog || (q->cwd && !c->cwd)) {
    child_free(c);
    return NULL;
  }
  c->refs = 1;
  uv_timer_init(kv_loop(), &c->kill_timer);
  handle_opened(c, &c->kill_timer, H_TIMER);
  return c;
}

/*
 * Start the supervisor for q and track the child in the current scope.
 * Returns the record with one reference for the caller, or NULL with a
 * message in err.  Never raises.
 */
static child *child_start(const spawn_req *q, char *err) {
  int logfd = -1;
  if (q->log && (logfd = open(q->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0) {
    snprintf(err, MSG_SIZE, "proc: log: %s: %s", q->log, strerror(errno));
    return NULL;
  }
  int argc = 0;
  while (q->argv[argc])
    argc++;
  const char **args = malloc((size_t)(argc + KV_SUPERVISE_ARGV_EXTRA) * sizeof *args);
  child *c = args ? child_new(q) : NULL;
  if (!c) {
    free(args);
    if (logfd >= 0)
      close(logfd);
    snprintf(err, MSG_SIZE, "proc: out of memory");
    return NULL;
  }
  char ppid[24], grace[24];
  snprintf(ppid, sizeof ppid, "%ld", (long)getpid());
  snprintf(grace, sizeof grace, "%d", KV_SUPERVISE_GRACE_MS);
  kv_supervise_argv(args, ppid, grace, q->cwd, q->argv);
  uv_stdio_container_t io[4];
  child_stdio(c, q, logfd, io);
  uv_process_options_t o;
  memset(&o, 0, sizeof o);
  o.exit_cb = child_exited;
  o.file = SELF_EXE;
  o.args = (char **)args;
  o.env = (char **)q->env;
  o.stdio_count = 4;
  o.stdio = io;
  int r = uv_spawn(kv_loop(), &c->proc, &o);
  handle_opened(c, &c->proc, H_PROC); /* initialised even when it failed */
  free(args);
  if (logfd >= 0)
    close(logfd);
  if (r < 0) {
    snprintf(err, MSG_SIZE, "proc: spawn: %s", uv_strerror(r));
    c->exited = 1; /* nothing to signal */
    c->start = START_FAILED;
    handle_close(c, &c->proc, H_PROC);
    handle_close(c, &c->kill_timer, H_TIMER);
    child_close(c);
    child_unref(c);
    return NULL;
  }
  c->pgid = c->proc.pid;
  kv_track(&c->res, "child process", res_close);
  c->tracked = 1;
  c->refs++;
  child_attach(c, q);
  return c;
}

/* ------------------------------------------------------ argument parsing */

/* A string option (numbers are taken as strings) or NULL; raises on other types. */
static const char *opt_string(lua_State *L, int keep, const char *who, const char *key,
                              size_t *len) {
  lua_getfield(L, 1, key);
  const char *s = NULL;
  int t = lua_type(L, -1);
  if (t == LUA_TSTRING || t == LUA_TNUMBER) {
    s = lua_tolstring(L, -1, len);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, keep, s); /* keep it alive while the request is used */
  } else if (t != LUA_TNIL) {
    luaL_error(L, "%s: %s must be a string, not %s", who, key, luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return s;
}

/* A string for argv/env: strings and numbers, no NUL inside. */
static const char *arg_string(lua_State *L, int idx, const char *who, const char *what) {
  int t = lua_type(L, idx);
  if (t != LUA_TSTRING && t != LUA_TNUMBER)
    luaL_error(L, "%s: %s must be a string, not %s", who, what, luaL_typename(L, idx));
  size_t len;
  const char *s = lua_tolstring(L, idx, &len);
  if (strlen(s) != len)
    luaL_error(L, "%s: %s contains a NUL byte", who, what);
  return s;
}

/* argv = {prog, arg...}: a NULL-terminated array in a userdata left on the stack. */
static const char **parse_argv(lua_State *L, int keep, const char *who) {
  if (lua_getfield(L, 1, "argv") != LUA_TTABLE)
    luaL_error(L, "%s: argv must be a table {prog, arg...}", who);
  lua_Integer n = luaL_len(L, -1);
  if (n < 1 || n > 100000)
    luaL_error(L, "%s: argv must hold the program and its arguments", who);
  const char **argv = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *argv, 0);
  lua_rawsetp(L, keep, argv);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_geti(L, -1, i);
    argv[i - 1] = arg_string(L, -1, who, "every argv element");
    lua_pushvalue(L, -1);
    lua_rawsetp(L, keep, argv[i - 1]);
    lua_pop(L, 1);
  }
  argv[n] = NULL;
  if (!argv[0][0])
    luaL_error(L, "%s: argv[1] (the program) is empty", who);
  lua_pop(L, 1);
  return argv;
}

/* Fill the table at `merged` with name -> "name=value" from environ. */
static void env_inherit(lua_State *L, int merged) {
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (!eq || eq == *e)
      continue;
    lua_pushlstring(L, *e, (size_t)(eq - *e));
    lua_pushstring(L, *e);
    lua_rawset(L, merged);
  }
}

/* Apply env = {K = V | false} onto the table at `merged`. */
static void env_apply(lua_State *L, int env, int merged, const char *who) {
  lua_pushnil(L);
  while (lua_next(L, env)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      luaL_error(L, "%s: env keys must be variable names", who);
    const char *k = lua_tostring(L, -2);
    if (!*k || strchr(k, '=') || strlen(k) != lua_rawlen(L, -2))
      luaL_error(L, "%s: bad environment variable name '%s'", who, k);
    lua_pushvalue(L, -2);
    if (lua_type(L, -2) == LUA_TBOOLEAN && !lua_toboolean(L, -2))
      lua_pushnil(L); /* K = false: remove it */
    else
      lua_pushfstring(L, "%s=%s", k, arg_string(L, -2, who, "an env value"));
    lua_rawset(L, merged);
    lua_pop(L, 1);
  }
}

/* env, env_clear -> a NULL-terminated "K=V" array, or NULL for the engine's own. */
static const char **parse_env(lua_State *L, int keep, const char *who) {
  int clear = lua_getfield(L, 1, "env_clear") != LUA_TNIL && lua_toboolean(L, -1);
  int t = lua_getfield(L, 1, "env");
  if (t != LUA_TNIL && t != LUA_TTABLE)
    luaL_error(L, "%s: env must be a table {NAME = value}", who);
  if (t == LUA_TNIL && !clear) {
    lua_pop(L, 2);
    return NULL;
  }
  int env = lua_gettop(L);
  lua_newtable(L);
  int merged = env + 1;
  if (!clear)
    env_inherit(L, merged);
  if (t == LUA_TTABLE)
    env_apply(L, env, merged, who);
  size_t n = 0;
  for (lua_pushnil(L); lua_next(L, merged); lua_pop(L, 1))
    n++;
  const char **out = lua_newuserdatauv(L, (n + 1) * sizeof *out, 0);
  lua_rawsetp(L, keep, out);
  size_t i = 0;
  for (lua_pushnil(L); lua_next(L, merged); lua_pop(L, 1))
    out[i++] = lua_tostring(L, -1);
  out[i] = NULL;
  lua_pushvalue(L, merged);
  lua_rawsetp(L, keep, out + 1); /* the strings stay referenced */
  lua_pop(L, 3);
  return out;
}

static const char *const spawn_keys[] = {"argv", "env", "env_clear", "cwd", "log", NULL};
static const char *const run_keys[] = {"argv", "env", "env_clear", "cwd", "input", "timeout", NULL};

/*
 * Read spawn's or run's options table (argument 1) into q.  The strings are
 * anchored in a table pushed onto the stack, which the caller leaves there
 * while q is in use.  Raises on wrong types.
 */
static void parse_request(lua_State *L, spawn_req *q, const char *who, int run) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  kv_check_options(L, 1, who, run ? run_keys : spawn_keys);
  lua_newtable(L);
  int keep = 2;
  memset(q, 0, sizeof *q);
  q->argv = parse_argv(L, keep, who);
  q->env = parse_env(L, keep, who);
  size_t len;
  q->cwd = opt_string(L, keep, who, "cwd", &len);
  if (q->cwd && strlen(q->cwd) != len)
    luaL_error(L, "%s: cwd contains a NUL byte", who);
  q->log = opt_string(L, keep, who, "log", &len);
  if (q->log && strlen(q->log) != len)
    luaL_error(L, "%s: log contains a NUL byte", who);
  q->input = opt_string(L, keep, who, "input", &q->inlen);
  q->capture = run;
  if (run)
    q->timeout = kv_opt_timeout(L, 1, who, KV_WAIT_PROGRAM);
}

/* ------------------------------------------------------ module functions */

/* nil, message for a child that never started (and let go of it). */
static int push_start_failure(lua_State *L, pwait *pw) {
  if (!pw->c)
    return kv_fail(L, "%s", pw->err);
  kv_fail(L, "%s", pw->c->errmsg[0] ? pw->c->errmsg : "proc: the child did not start");
  child_close(pw->c);
  return 2;
}

static int spawn_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  pwait *pw = kv_wait_data(kv_wait_of(ctx));
  child *c = pw->c;
  if (!c || c->start != START_OK)
    return push_start_failure(L, pw);
  proc_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->c = c;
  u->pid = c->pid;
  u->pgid = c->pgid;
  c->refs++;
  luaL_setmetatable(L, PROC_MT);
  return 1;
}

/*
 * Start q's child and yield until the supervisor reports; k continues.  A
 * failure found before the child exists is delivered from the next loop turn.
 */
static int start_and_yield(lua_State *L, const spawn_req *q, const char *who, lua_KFunction k) {
  pwait *pw = pwait_new(L, who);
  pw->deadline = kv_now() + q->timeout;
  child *c = child_start(q, pw->err);
  if (!c) {
    pwait_arm(pw, 0);
  } else {
    pwait_attach(pw, c, &c->start_waiters);
    child_unref(c);
  }
  return kv_wait_yield(L, pw->w, k);
}

/*
 * proc.spawn{argv = {prog, arg...}, env = {K = V | false}, env_clear = bool,
 * cwd = dir, log = path} -> p, or nil, "exec: prog: <reason>" (likewise
 * chdir:, log:, spawn:) when the program could not be started.
 *
 * env is merged onto the engine's environment (K = false removes K);
 * env_clear = true starts from an empty one.  PATH lookup uses the child's
 * environment.  stdin is /dev/null; stdout and stderr are the engine's, or
 * both appended to `log`.  The child belongs to the running test: it is
 * terminated with its process group when the test ends.
 */
static int l_spawn(lua_State *L) {
  spawn_req q;
  parse_request(L, &q, "proc.spawn", 0);
  return start_and_yield(L, &q, "proc.spawn", spawn_k);
}

static void push_capture(lua_State *L, const kv_buf *b) {
  lua_pushlstring(L, b->p ? b->p : "", b->len);
}

/* The results of a finished run, then let go of the child. */
static int push_run_result(lua_State *L, child *c) {
  int n = 3;
  if (c->termsig) {
    luaL_pushfail(L);
    lua_pushliteral(L, "signal");
    n = 5;
  } else {
    lua_pushinteger(L, (lua_Integer)c->code);
  }
  push_capture(L, &c->cap_out);
  push_capture(L, &c->cap_err);
  if (c->termsig)
    lua_pushinteger(L, c->termsig);
  child_close(c);
  return n;
}

static int run_done_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  pwait *pw = kv_wait_data(kv_wait_of(ctx));
  child *c = pw->c;
  if (!pw->timed_out)
    return push_run_result(L, c);
  luaL_pushfail(L);
  lua_pushliteral(L, "timeout");
  push_capture(L, &c->cap_out);
  push_capture(L, &c->cap_err);
  child_close(c);
  return 4;
}

static int run_started_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  pwait *pw = kv_wait_data(kv_wait_of(ctx));
  child *c = pw->c;
  if (!c || c->start != START_OK)
    return push_start_failure(L, pw);
  if (child_done(c))
    return push_run_result(L, c);
  pwait *done = pwait_new(L, "proc.run");
  pwait_attach(done, c, &c->done_waiters);
  pwait_arm(done, pw->deadline - kv_now());
  return kv_wait_yield(L, done->w, run_done_k);
}

/*
 * proc.run{argv=, env=, env_clear=, cwd=, input=, timeout=} runs a command
 * to its end and captures its output.  Returns
 *   code, stdout, stderr                   it exited (code is an integer)
 *   nil, "signal", stdout, stderr, signum  a signal killed it
 *   nil, "timeout", stdout, stderr         timeout seconds passed: its group
 *                                          is terminated, output so far
 *   nil, "exec: prog: <reason>"            it could not be started
 * input (a string) is written to its stdin, which is then closed; without
 * input stdin is /dev/null.  The run ends when the child has exited and its
 * output pipes are closed (the supervisor kills what the child left behind).
 */
static int l_run(lua_State *L) {
  spawn_req q;
  parse_request(L, &q, "proc.run", 1);
  return start_and_yield(L, &q, "proc.run", run_started_k);
}

/* ---------------------------------------------------------------- handle */

static proc_ud *check_ud(lua_State *L) { return luaL_checkudata(L, 1, PROC_MT); }

static child *check_open(lua_State *L) {
  proc_ud *u = check_ud(L);
  if (!u->c)
    luaL_error(L, "proc: the handle is closed");
  return u->c;
}

/* How a reaped child ended: code | nil, "signal", signum. */
static int push_status(lua_State *L, const child *c) {
  if (!c->termsig) {
    lua_pushinteger(L, (lua_Integer)c->code);
    return 1;
  }
  luaL_pushfail(L);
  lua_pushliteral(L, "signal");
  lua_pushinteger(L, c->termsig);
  return 3;
}

static int wait_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  pwait *pw = kv_wait_data(kv_wait_of(ctx));
  if (!pw->timed_out)
    return push_status(L, pw->c);
  return kv_timeout(L);
}

/*
 * p:wait([{timeout =}]) -> code (it exited), nil, "signal", signum (a signal
 * killed it), or nil, "timeout".  The status is the target's: the
 * supervisor exits with its code or dies of its signal, after it has
 * terminated the rest of the group.  The timeout follows engine.h's rule
 * (default KV_WAIT_PROGRAM); 0 only asks whether it has ended.
 */
static int p_wait(lua_State *L) {
  child *c = check_open(L);
  double t = kv_timeout_arg(L, 2, "p:wait", KV_WAIT_PROGRAM);
  if (child_done(c))
    return push_status(L, c);
  if (t == 0)
    return kv_timeout(L);
  pwait *pw = pwait_new(L, "p:wait");
  pwait_attach(pw, c, &c->done_waiters);
  pwait_arm(pw, t);
  return kv_wait_yield(L, pw->w, wait_k);
}

static const struct {
  const char *name;
  int sig;
} signal_names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},  {"ABRT", SIGABRT},
                    {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},  {"SEGV", SIGSEGV},
                    {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM},  {"CONT", SIGCONT},
                    {"STOP", SIGSTOP}, {"TSTP", SIGTSTP}, {"WINCH", SIGWINCH}};

/* A signal number, or a name with or without "SIG"; default TERM. */
static int check_signal(lua_State *L, int idx) {
  if (lua_isnoneornil(L, idx))
    return SIGTERM;
  if (lua_type(L, idx) == LUA_TNUMBER) {
    lua_Integer n = luaL_checkinteger(L, idx);
    luaL_argcheck(L, n >= 0 && n < NSIG, idx, "not a signal number");
    return (int)n;
  }
  const char *name = luaL_checkstring(L, idx);
  if (strncmp(name, "SIG", 3) == 0)
    name += 3;
  for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++)
    if (strcmp(name, signal_names[i].name) == 0)
      return signal_names[i].sig;
  return luaL_argerror(L, idx, lua_pushfstring(L, "unknown signal '%s'", lua_tostring(L, idx)));
}

/*
 * p:kill([sig]) -> true, or nil, err.  sig is a number or a name ("TERM",
 * "SIGKILL"); default TERM.  It goes to the whole process group: the target,
 * what it started, and the supervisor, which ignores it.  After the child
 * has been reaped nothing is sent: nil, "proc: the process has exited".
 */
static int p_kill(lua_State *L) {
  child *c = check_open(L);
  int sig = check_signal(L, 2);
  if (c->exited)
    return kv_fail(L, "proc: the process has exited");
  if (signal_group(c, sig) < 0)
    return luaL_fileresult(L, 0, "proc: kill");
  lua_pushboolean(L, 1);
  return 1;
}

/* p:running(): started and not yet reaped (false once the handle is closed). */
static int p_running(lua_State *L) {
  child *c = check_ud(L)->c;
  lua_pushboolean(L, c && c->start == START_OK && !c->exited);
  return 1;
}

/* p:pid(): the target's pid (not the supervisor's); still answers after close. */
static int p_pid(lua_State *L) {
  lua_pushinteger(L, check_ud(L)->pid);
  return 1;
}

/* p:pgid(): the process group id, which is the supervisor's pid. */
static int p_pgid(lua_State *L) {
  lua_pushinteger(L, check_ud(L)->pgid);
  return 1;
}

/*
 * p:close(), __close and __gc: terminate the group (SIGTERM, SIGKILL after a
 * grace, in the background) and release the handle; afterwards only pid,
 * pgid and running answer.  Idempotent.
 */
static int p_close(lua_State *L) {
  proc_ud *u = check_ud(L);
  child *c = u->c;
  if (c) {
    u->c = NULL;
    child_close(c);
    child_unref(c);
  }
  return 0;
}

static int p_tostring(lua_State *L) {
  proc_ud *u = check_ud(L);
  const char *state = !u->c ? "closed" : u->c->exited ? "exited" : "running";
  lua_pushfstring(L, "proc (pid %I, %s)", u->pid, state);
  return 1;
}

static const luaL_Reg proc_methods[] = {{"pid", p_pid},   {"pgid", p_pgid}, {"running", p_running},
                                        {"kill", p_kill}, {"wait", p_wait}, {"close", p_close},
                                        {NULL, NULL}};

static const luaL_Reg proc_funcs[] = {{"spawn", l_spawn}, {"run", l_run}, {NULL, NULL}};

static const kv_option_keys proc_options[] = {
    {"spawn", spawn_keys}, {"run", run_keys}, {"wait", kv_timeout_keys}, {NULL, NULL}};

int luaopen_proc(lua_State *L) {
  kv_class_new(L, PROC_MT, proc_methods, p_close, p_tostring);
  luaL_newlib(L, proc_funcs);
  kv_set_options(L, proc_options);
  return 1;
}
