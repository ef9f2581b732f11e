/*
 * pool.c - the parent process: files to worker processes, events to reporters.
 *
 * Every file runs in a worker process of its own, at most -j at a time, so
 * a file that crashes the process costs only its own results.  The fork
 * server (forkserver.h), forked before anything else here, forks each
 * worker as a child of this process, which reaps it on SIGCHLD.  A worker
 * writes report events as JSON lines on fd 3; its stdout and stderr are
 * captured too.  The parent hands each line, in arrival order, to the
 * reporters (engine/lua/report.lua), which draw one console, one TAP
 * stream and one JUnit file and total one closing line, and which remove
 * the artifacts folders of what passed once its worker is gone (through
 * fs.remove_tree).
 */
#include "pool.h"
#include "forkserver.h"
#include "internal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#define HANG_GRACE_S 60
#define PIPE_GRACE_MS 2000

struct pipe_in {
  uv_pipe_t pipe;
  struct worker *w;
  char *buf; /* a partial line */
  size_t len;
  int events; /* 1: report events; 0: captured output */
};

struct worker {
  pid_t pid;
  struct pipe_in out, err, ev;
  uv_timer_t hang;
  const char *file;
  int run;
  int open;       /* handles not yet closed */
  int pipes_open; /* pipes not yet at EOF */
  int exited, finished;
  int64_t status;
  int term_signal;
};

static struct {
  struct kv_options *o;
  lua_State *L;
  char **files;
  size_t nfiles;
  size_t *order; /* the files' indices in the order they start */
  size_t next;   /* next job: file index * repeat */
  int running;
  int stopping;
  int interrupted; /* the signal that stopped the run */
  int broken;      /* a worker could not be started */
  struct worker **workers;
} pool;

/* ------------------------------------------------------------- reporting */

/* Call report[fn](args...) with the strings/integers pushed by the caller. */
static int report_call(const char *fn, int nargs) {
  lua_State *L = pool.L;
  lua_getglobal(L, "__report");
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  lua_insert(L, -(nargs + 1));
  if (lua_pcall(L, nargs, 1, 0) != LUA_OK) {
    fprintf(stderr, "kvengine: reporter error in %s: %s\n", fn, lua_tostring(L, -1));
    lua_pop(L, 1);
    return 0;
  }
  int r = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return r;
}

static void stop_all(int sig);
static void on_hang(uv_timer_t *t);

static void deliver_line(struct worker *w, const char *line, size_t len, int events) {
  lua_pushstring(pool.L, w->file);
  lua_pushinteger(pool.L, w->run);
  lua_pushlstring(pool.L, line, len);
  if (events) {
    if (report_call("event", 3) && pool.o->fail_fast && !pool.stopping)
      stop_all(SIGTERM);
  } else {
    report_call("output", 3);
  }
}

/* ---------------------------------------------------------------- workers */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  buf->base = malloc(suggested);
  buf->len = buf->base ? suggested : 0;
}

static void worker_closed(uv_handle_t *h) {
  struct worker *w = h->data;
  if (--w->open > 0)
    return;
  free(w->out.buf);
  free(w->err.buf);
  free(w->ev.buf);
  free(w);
}

static void flush_lines(struct pipe_in *p, int final) {
  if (!p->len)
    return;
  size_t start = 0;
  for (size_t i = 0; i < p->len; i++) {
    if (p->buf[i] == '\n') {
      deliver_line(p->w, p->buf + start, i - start + (p->events ? 0 : 1), p->events);
      start = i + 1;
    }
  }
  if (final && start < p->len) {
    deliver_line(p->w, p->buf + start, p->len - start, p->events);
    start = p->len;
  }
  memmove(p->buf, p->buf + start, p->len - start);
  p->len -= start;
}

static void maybe_finish(struct worker *w);

static void pipe_done(struct pipe_in *p) {
  uv_read_stop((uv_stream_t *)p);
  flush_lines(p, 1);
  uv_close((uv_handle_t *)p, worker_closed);
  p->w->pipes_open--;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct pipe_in *p = (struct pipe_in *)s;
  if (n > 0) {
    char *grown = realloc(p->buf, p->len + (size_t)n);
    if (!grown)
      abort();
    p->buf = grown;
    memcpy(p->buf + p->len, buf->base, (size_t)n);
    p->len += (size_t)n;
    flush_lines(p, 0);
  }
  free(buf->base);
  if (n < 0) {
    pipe_done(p);
    maybe_finish(p->w);
  }
}

static void launch_next(void);

/* A worker is judged once it exited and its pipes are drained. */
static void maybe_finish(struct worker *w) {
  if (!w->exited || w->pipes_open > 0 || w->finished)
    return;
  w->finished = 1;
  pool.running--;
  uv_timer_stop(&w->hang);
  uv_close((uv_handle_t *)&w->hang, worker_closed);
  for (int i = 0; i < pool.o->jobs; i++)
    if (pool.workers[i] == w)
      pool.workers[i] = NULL;
  lua_pushstring(pool.L, w->file);
  lua_pushinteger(pool.L, w->run);
  lua_pushinteger(pool.L, w->status);
  lua_pushinteger(pool.L, w->term_signal);
  if (report_call("worker_exit", 4) && pool.o->fail_fast && !pool.stopping)
    stop_all(SIGTERM);
  launch_next();
}

/* The worker was reaped with wait status st. */
static void worker_exited(struct worker *w, int st) {
  w->exited = 1;
  w->status = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
  w->term_signal = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
  /* A descendant that kept the pipes open must not hold the run forever. */
  kv_timer_start(&w->hang, on_hang, PIPE_GRACE_MS);
  maybe_finish(w);
}

static void on_hang(uv_timer_t *t) {
  struct worker *w = t->data;
  if (!w->exited) {
    kill(w->pid, SIGKILL);
    return;
  }
  for (struct pipe_in *p = &w->out; p <= &w->ev; p++)
    if (!uv_is_closing((uv_handle_t *)p))
      pipe_done(p);
  maybe_finish(w);
}

/* Read fd, a pipe's read end, as one of w's streams. */
static void pipe_open(struct worker *w, struct pipe_in *p, int fd, int events) {
  uv_pipe_init(kv_loop(), &p->pipe, 0);
  uv_pipe_open(&p->pipe, fd);
  p->pipe.data = w;
  p->w = w;
  p->events = events;
  w->open++;
  w->pipes_open++;
  uv_read_start((uv_stream_t *)p, on_alloc, on_read);
}

static void close_pipes(int pipes[][2], int n) {
  for (int i = 0; i < n; i++) {
    close(pipes[i][0]);
    close(pipes[i][1]);
  }
}

/*
 * A worker for file's run-th repetition, its stdout, stderr and fd 3
 * pipes to this process; last: no worker follows it.  Returns 0, or -1
 * with the reason printed.
 */
static int spawn_worker(const char *file, int run, int last) {
  int pipes[3][2], made = 0;
  while (made < 3 && pipe2(pipes[made], O_CLOEXEC) == 0)
    made++;
  pid_t pid = made < 3 ? -errno
                       : kv_forkserver_spawn(file, run, last,
                                             (int[]){pipes[0][1], pipes[1][1], pipes[2][1]});
  if (pid < 0) {
    close_pipes(pipes, made);
    fprintf(stderr, "kvengine: cannot start a worker: %s\n", strerror(-pid));
    return -1;
  }
  struct worker *w = calloc(1, sizeof *w);
  if (!w)
    abort();
  w->file = file;
  w->run = run;
  w->pid = pid;
  struct pipe_in *streams[3] = {&w->out, &w->err, &w->ev};
  for (int i = 0; i < 3; i++) {
    close(pipes[i][1]);
    pipe_open(w, streams[i], pipes[i][0], i == 2);
  }
  w->open++; /* the hang timer */
  uv_timer_init(kv_loop(), &w->hang);
  w->hang.data = w;
  kv_timer_start(&w->hang, on_hang, (uint64_t)((pool.o->file_timeout + HANG_GRACE_S) * 1000));
  for (int i = 0; i < pool.o->jobs; i++) {
    if (!pool.workers[i]) {
      pool.workers[i] = w;
      break;
    }
  }
  pool.running++;
  return 0;
}

/* SIGCHLD: reap the workers that ended (and only them: other children are not ours to wait for). */
static void on_child(uv_signal_t *s, int signum) {
  (void)s;
  (void)signum;
  for (int i = 0; i < pool.o->jobs; i++) {
    struct worker *w = pool.workers[i];
    int st;
    if (w && !w->exited && waitpid(w->pid, &st, WNOHANG) == w->pid)
      worker_exited(w, st);
  }
}

static void launch_next(void) {
  size_t total = pool.nfiles * (size_t)pool.o->repeat;
  while (!pool.stopping && pool.running < pool.o->jobs && pool.next < total) {
    size_t job = pool.next++;
    const char *file = pool.files[pool.order[job % pool.nfiles]];
    if (spawn_worker(file, (int)(job / pool.nfiles) + 1, pool.next == total) < 0) {
      pool.stopping = 1;
      pool.broken = 1;
    }
  }
  /* Nothing more to start: the server may go while the workers run. */
  if (pool.stopping || pool.next == total)
    kv_forkserver_close();
}

static void stop_all(int sig) {
  pool.stopping = 1;
  for (int i = 0; i < pool.o->jobs; i++)
    if (pool.workers[i] && !pool.workers[i]->exited)
      kill(pool.workers[i]->pid, sig);
}

static void on_signal(uv_signal_t *s, int signum) {
  (void)s;
  pool.interrupted = signum;
  stop_all(SIGTERM);
}

/* ------------------------------------------------------------------ files */

static void add_file(const char *path) {
  pool.files = realloc(pool.files, (pool.nfiles + 1) * sizeof *pool.files);
  if (!pool.files || !(pool.files[pool.nfiles] = strdup(path)))
    abort();
  pool.nfiles++;
}

static int add_glob(const char *pattern, int must_match) {
  glob_t g;
  int rc = glob(pattern, 0, NULL, &g);
  if (rc == GLOB_NOMATCH) {
    if (must_match) {
      fprintf(stderr, "kvengine: no file matches %s\n", pattern);
      return -1;
    }
    return 0;
  }
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) {
    struct stat st;
    if (stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode))
      add_file(g.gl_pathv[i]);
  }
  globfree(&g);
  return 0;
}

/* A file, a folder (its *.lua, sorted), or a glob the engine expands. */
static int expand(const char *path) {
  if (strpbrk(path, "*?["))
    return add_glob(path, 1);
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "kvengine: %s: no such file or folder\n", path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    add_file(path);
    return 0;
  }
  char pattern[4200];
  snprintf(pattern, sizeof pattern, "%s%s*.lua", path, path[strlen(path) - 1] == '/' ? "" : "/");
  return add_glob(pattern, 0);
}

/*
 * Call require(module)[fn](arg) in the parent's state.  Returns 0 with the
 * one result pushed, or -1 with the error printed.
 */
static int call_lua(const char *module, const char *fn, const char *arg) {
  lua_State *L = pool.L;
  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    lua_getfield(L, -1, fn);
    lua_remove(L, -2);
    lua_pushstring(L, arg);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK)
      return 0;
  }
  fprintf(stderr, "kvengine: %s\n", lua_tostring(L, -1));
  lua_pop(L, 1);
  return -1;
}

/*
 * The number of workers: -j, or without it KV_JOBS_PER_CORE per core (a
 * scenario file mostly waits: on its stack's processes, on Kthena's own
 * time budgets), at most one per file.  A target module may say how many
 * files can run against it at once (engine/lua/target.lua); the number is
 * lowered to that.  Returns -1 when the module is there but broken.
 */
enum { KV_JOBS_PER_CORE = 4 };
static int cap_jobs(struct kv_options *o) {
  int asked = o->jobs > 0;
  if (!asked) /* files mostly wait on their stacks: more workers than cores */
    o->jobs = KV_JOBS_PER_CORE * (int)sysconf(_SC_NPROCESSORS_ONLN);
  size_t files = pool.nfiles * (size_t)o->repeat;
  if (!asked && files > 0 && (size_t)o->jobs > files)
    o->jobs = (int)files;
  if (o->jobs < 1)
    o->jobs = 1;
  if (!o->target)
    return 0;
  if (call_lua("target", "max_files", o->target) < 0)
    return -1;
  lua_Integer cap = lua_isinteger(pool.L, -1) ? lua_tointeger(pool.L, -1) : 0;
  lua_pop(pool.L, 1);
  if (cap > 0 && cap < o->jobs) {
    if (asked)
      fprintf(stderr, "kvengine: the %s target runs %d file%s at a time: -j %d lowered to %d\n",
              o->target, (int)cap, cap == 1 ? "" : "s", o->jobs, (int)cap);
    o->jobs = (int)cap;
  }
  return 0;
}

static long pick_seed(void) {
  unsigned long s =
      (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16) ^ (unsigned long)uv_hrtime();
  return (long)(s % 2147483646UL) + 1;
}

/*
 * The order files start in: as given with one worker, else the longest
 * first by their last run's times (engine/lua/durations.lua), so that a long
 * file does not start last and hold the run open alone.  The reporters
 * still print files in the order given.
 */
static int plan_order(void) {
  lua_State *L = pool.L;
  pool.order = malloc(pool.nfiles * sizeof *pool.order);
  if (!pool.order)
    abort();
  for (size_t i = 0; i < pool.nfiles; i++)
    pool.order[i] = i;
  if (pool.o->jobs < 2)
    return 0;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "durations");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    fprintf(stderr, "kvengine: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  lua_getfield(L, -1, "launch_order");
  lua_createtable(L, (int)pool.nfiles, 0);
  for (size_t i = 0; i < pool.nfiles; i++) {
    lua_pushstring(L, pool.files[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushstring(L, pool.o->target); /* NULL: nil */
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    fprintf(stderr, "kvengine: %s\n", lua_tostring(L, -1));
    lua_pop(L, 2);
    return -1;
  }
  for (size_t i = 0; i < pool.nfiles; i++) {
    lua_rawgeti(L, -1, (lua_Integer)i + 1);
    lua_Integer k = lua_tointeger(L, -1);
    assert(k >= 1 && (size_t)k <= pool.nfiles);
    pool.order[i] = (size_t)k - 1;
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
  return 0;
}

/* --------------------------------------------------------------------- main */

static int reporters_start(void) {
  lua_State *L = pool.L;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "report");
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    fprintf(stderr, "kvengine: %s\n", lua_tostring(L, -1));
    return -1;
  }
  lua_setglobal(L, "__report");
  kv_options_push(L, pool.o);
  lua_createtable(L, (int)pool.nfiles, 0);
  for (size_t i = 0; i < pool.nfiles; i++) {
    lua_pushstring(L, pool.files[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushboolean(L, isatty(STDOUT_FILENO));
  lua_getglobal(L, "__report");
  lua_getfield(L, -1, "start");
  lua_remove(L, -2);
  lua_insert(L, -4);
  if (lua_pcall(L, 3, 1, 0) != LUA_OK || !lua_isnil(L, -1)) {
    fprintf(stderr, "kvengine: %s\n", lua_tostring(L, -1));
    return -1;
  }
  lua_pop(L, 1);
  return 0;
}

/*
 * The run once the server is up: the parent's Lua state and its checks,
 * the reporters, the loop until every worker ended.  Returns the exit
 * status.
 */
static int run_files(struct kv_options *o) {
  pool.L = kv_state_new();
  if (call_lua("time_scale", "read", NULL) < 0)
    return 2;
  lua_pop(pool.L, 1);
  if (cap_jobs(o) < 0)
    return 3;
  pool.workers = calloc((size_t)o->jobs + 1, sizeof *pool.workers);
  if (reporters_start() < 0 || plan_order() < 0)
    return 2;
  uv_signal_t signals[3];
  const int signums[3] = {SIGINT, SIGTERM, SIGCHLD};
  for (int i = 0; i < 3; i++) {
    uv_signal_init(kv_loop(), &signals[i]);
    uv_signal_start(&signals[i], signums[i] == SIGCHLD ? on_child : on_signal, signums[i]);
    uv_unref((uv_handle_t *)&signals[i]);
  }
  launch_next();
  uv_run(kv_loop(), UV_RUN_DEFAULT);
  lua_pushinteger(pool.L, pool.interrupted);
  report_call("finish", 1);
  lua_getglobal(pool.L, "__report");
  lua_getfield(pool.L, -1, "exit_code");
  int code = (int)lua_tointeger(pool.L, -1);
  if (pool.broken)
    code = 3;
  else if (pool.interrupted)
    code = 128 + pool.interrupted;
  for (int i = 0; i < 3; i++)
    uv_close((uv_handle_t *)&signals[i], NULL);
  uv_run(kv_loop(), UV_RUN_DEFAULT);
  lua_close(pool.L);
  uv_loop_close(kv_loop());
  return code;
}

int kv_pool_main(struct kv_options *o) {
  pool.o = o;
  signal(SIGPIPE, SIG_IGN);
  for (int i = 0; i < o->npaths; i++)
    if (expand(o->paths[i]) < 0)
      return 2;
  if (!pool.nfiles) {
    fputs("kvengine: no test files found\n", stderr);
    return 2;
  }
  /* What the workers take from the server: settled before it is forked. */
  if (!o->seed)
    o->seed = pick_seed();
  if (o->target)
    setenv("KVENGINE_TARGET", o->target, 1);
  int rc = kv_forkserver_start(o);
  if (rc < 0) {
    fprintf(stderr, "kvengine: cannot start the fork server: %s\n", strerror(-rc));
    return 3;
  }
  int code = run_files(o);
  kv_forkserver_stop();
  for (size_t i = 0; i < pool.nfiles; i++)
    free(pool.files[i]);
  free(pool.files);
  free(pool.order);
  free(pool.workers);
  return code;
}
