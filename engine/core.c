/*
 * core.c - the Lua functions the engine itself provides.
 *
 * Global: sleep(s), spawn(fn, ...) -> task (task:wait(), task:done(),
 * task:cancel()), now().  Internal, for the prelude's runner only (table
 * __kv): run(fn, timeout, scope) runs fn as a guarded task and reports how
 * it ended; scope() makes a test's scope; emit(line) sends a report event
 * to the parent process; file_expired(); take_deferred(scope) hands over
 * what scope:defer collected.  For engine.lua: scope_current(),
 * spawn_in(scope, fn, ...), check_options(fname, t, keys [, level]).
 *
 * The Lua face of the layers below (tasks, scopes, the guard, deferred
 * functions, drains): it calls them, and is called only from above
 * (state.c installs it, main.c gives it the event descriptor).
 */
#include "internal.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#define TASK_MT "kvengine.task"
#define SCOPE_MT "kvengine.scope"
#define SCOPEREF_MT "kvengine.scoperef"

static int event_fd = -1;

void kv_set_event_fd(int fd) { event_fd = fd; }

/* ------------------------------------------------------------------ sleep */

static void sleep_fired(uv_timer_t *timer) {
  kv_wait *w = timer->data;
  uv_close((uv_handle_t *)timer, kv_free_handle);
  kv_wait_wake(w);
}

static void sleep_cancel(kv_wait *w) {
  uv_timer_t **timer = kv_wait_data(w);
  uv_close((uv_handle_t *)*timer, kv_free_handle);
  kv_wait_wake(w);
}

static int sleep_done(lua_State *L, int status, lua_KContext ctx) {
  (void)L, (void)status, (void)ctx;
  return 0;
}

/* sleep(seconds): let the loop run for that long (0: one turn, I/O polled). */
static int l_sleep(lua_State *L) {
  lua_Number s = luaL_checknumber(L, 1);
  luaL_argcheck(L, s >= 0, 1, "must not be negative");
  if (s == 0) {
    kv_wait *w = kv_wait_new(L, "sleep", 0, NULL, NULL);
    kv_wait_wake(w); /* Lua runs: queued for the next turn of the loop */
    return kv_wait_yield(L, w, sleep_done);
  }
  kv_wait *w = kv_wait_new(L, "sleep", sizeof(uv_timer_t *), sleep_cancel, NULL);
  uv_timer_t *timer = kv_timer_new(w);
  *(uv_timer_t **)kv_wait_data(w) = timer;
  kv_timer_start(timer, sleep_fired, (uint64_t)(s * 1000.0 + 0.5));
  return kv_wait_yield(L, w, sleep_done);
}

static int l_now(lua_State *L) {
  lua_pushnumber(L, kv_now());
  return 1;
}

/* ------------------------------------------------------------------ tasks */

static kv_task **check_task(lua_State *L) { return luaL_checkudata(L, 1, TASK_MT); }

static void push_task(lua_State *L, kv_task *t) {
  kv_task **ud = lua_newuserdatauv(L, sizeof *ud, 0);
  *ud = t;
  t->refs++;
  luaL_setmetatable(L, TASK_MT);
}

static int task_gc(lua_State *L) {
  kv_task **ud = check_task(L);
  if (*ud)
    kv_task_release(*ud);
  *ud = NULL;
  return 0;
}

/* spawn(fn, ...) -> task: run fn(...) concurrently, from the loop. */
static int l_spawn(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  kv_task *t = kv_task_new(L, NULL, lua_gettop(L) - 1);
  push_task(L, t);
  return 1;
}

static void await_dispose(kv_wait *w) { kv_task_release(*(kv_task **)kv_wait_data(w)); }

static void await_cancel(kv_wait *w) {
  kv_wait_unlink(w);
  kv_wait_wake(w);
}

/* Wait for t to end; k continues with the outcome. */
static int await_task(lua_State *L, kv_task *t, const char *who, lua_KFunction k) {
  assert(t->state !=
         KV_TASK_DONE); /* an ended task wakes nobody again: the wait would last forever */
  kv_wait *w = kv_wait_new(L, who, sizeof(kv_task *), await_cancel, await_dispose);
  *(kv_task **)kv_wait_data(w) = t;
  t->refs++;
  kv_wait_link(w, &t->waiters);
  return kv_wait_yield(L, w, k);
}

static int outcome_or_raise(lua_State *L, kv_task *t) {
  int base = lua_gettop(L);
  int n = kv_task_push_outcome(t, L);
  if (lua_toboolean(L, base + 1)) {
    lua_remove(L, base + 1);
    return n - 1;
  }
  if (n == 2)
    return luaL_error(L, "task: the task was abandoned");
  lua_pop(L, 1); /* traceback */
  return lua_error(L);
}

static int task_wait_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  return outcome_or_raise(L, *(kv_task **)kv_wait_data(kv_wait_of(ctx)));
}

/* task:wait() -> the task's results; re-raises its error. */
static int task_wait(lua_State *L) {
  kv_task *t = *check_task(L);
  luaL_argcheck(L, t != NULL, 1, "task already released");
  if (t->state == KV_TASK_DONE)
    return outcome_or_raise(L, t);
  return await_task(L, t, "task:wait", task_wait_k);
}

static int task_done(lua_State *L) {
  kv_task *t = *check_task(L);
  lua_pushboolean(L, !t || t->state == KV_TASK_DONE);
  return 1;
}

static int task_cancel(lua_State *L) {
  kv_task *t = *check_task(L);
  if (t && t != kv_task_running())
    kv_task_abandon(t);
  return 0;
}

static const luaL_Reg task_methods[] = {
    {"wait", task_wait}, {"done", task_done}, {"cancel", task_cancel}, {NULL, NULL}};

/* ----------------------------------------------------------------- scopes */

static kv_scope **check_scope(lua_State *L, int i) { return luaL_checkudata(L, i, SCOPE_MT); }

/* __kv.scope() -> a new scope, for a test: its tasks and handles end with it. */
static int l_scope(lua_State *L) {
  kv_scope **ud = lua_newuserdatauv(L, sizeof *ud, 0);
  *ud = kv_scope_new();
  luaL_setmetatable(L, SCOPE_MT);
  return 1;
}

/* scope:close() -> list of tracebacks of background tasks that failed. */
static int scope_close(lua_State *L) {
  kv_scope **ud = check_scope(L, 1);
  if (!*ud) {
    lua_newtable(L);
    return 1;
  }
  kv_scope *s = *ud;
  *ud = NULL;
  kv_scope_close(s, L);
  kv_scope_unref(s);
  return 1;
}

static const luaL_Reg scope_methods[] = {{"close", scope_close}, {NULL, NULL}};

/* A borrowed handle on a scope someone else closes (engine.scope()). */
static int scoperef_gc(lua_State *L) {
  kv_scope **ud = luaL_checkudata(L, 1, SCOPEREF_MT);
  if (*ud)
    kv_scope_unref(*ud);
  *ud = NULL;
  return 0;
}

static int scoperef_open(lua_State *L) {
  kv_scope **ud = luaL_checkudata(L, 1, SCOPEREF_MT);
  lua_pushboolean(L, *ud && !(*ud)->closed);
  return 1;
}

/* ------------------------------------------------------------------ defer */

/*
 * The scope behind the scope handle at argument 1, given a function at
 * argument 2: raises, naming `what`, when the scope has ended, since
 * nothing may be added to a scope that is over.
 */
static kv_scope *open_scope_arg(lua_State *L, const char *what) {
  kv_scope **ud = luaL_checkudata(L, 1, SCOPEREF_MT);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  if (!*ud || (*ud)->closed)
    luaL_error(L, "%s: that scope has ended (its test or file is over)", what);
  return *ud;
}

/* scope:defer(fn): fn runs when the scope ends, however its test ends (defer.c). */
static int scoperef_defer(lua_State *L) {
  kv_scope *s = open_scope_arg(L, "defer");
  lua_settop(L, 2);
  kv_defer_add(L, s);
  return 0;
}

/* __kv.take_deferred([scope]) -> what was deferred on scope (default the root), now forgotten. */
static int l_take_deferred(lua_State *L) {
  kv_scope *s = lua_isnoneornil(L, 1) ? kv_scope_root() : *check_scope(L, 1);
  kv_defer_take(L, s);
  return 1;
}

static const luaL_Reg scoperef_methods[] = {
    {"open", scoperef_open}, {"defer", scoperef_defer}, {NULL, NULL}};

/* __kv.scope_current() -> a handle on the scope the caller runs in. */
static int l_scope_current(lua_State *L) {
  kv_scope **ud = lua_newuserdatauv(L, sizeof *ud, 0);
  *ud = kv_scope_current();
  (*ud)->refs++;
  luaL_setmetatable(L, SCOPEREF_MT);
  return 1;
}

/* __kv.spawn_in(scope, fn, ...) -> task: what fn opens belongs to that scope. */
static int l_spawn_in(lua_State *L) {
  kv_scope *s = open_scope_arg(L, "spawn_in");
  kv_task *t = kv_task_new(L, s, lua_gettop(L) - 2);
  push_task(L, t);
  return 1;
}

/* -------------------------------------------------------------------- run */

static int run_k(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  kv_task *t = *(kv_task **)kv_wait_data(kv_wait_of(ctx));
  if (kv_guard_expired()) {
    lua_pushliteral(L, "timeout");
    lua_pushstring(L, kv_guard_where() ? kv_guard_where() : t->traceback);
    return 2;
  }
  int base = lua_gettop(L);
  int n = kv_task_push_outcome(t, L);
  lua_pushstring(L, lua_toboolean(L, base + 1) ? "ok" : "error");
  lua_replace(L, base + 1);
  return n;
}

/*
 * __kv.run(fn, timeout, [scope]) runs fn() as a task in scope (default: the
 * root) under a deadline of `timeout` seconds and returns "ok", results... |
 * "error", err, traceback | "timeout", where.
 */
static int l_run(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_Number timeout = luaL_checknumber(L, 2);
  kv_scope *s = lua_isnoneornil(L, 3) ? kv_scope_root() : *check_scope(L, 3);
  luaL_argcheck(L, s != NULL, 3, "scope is closed");
  lua_settop(L, 1);
  kv_task *t = kv_task_new(L, s, 0);
  if (kv_guard_start(t, kv_task_of(L), timeout) < 0)
    return luaL_error(L, "run: runs do not nest");
  return await_task(L, t, "run", run_k);
}

static int l_emit(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  int fd = event_fd >= 0 ? event_fd : STDOUT_FILENO;
  for (size_t off = 0; off < len;) {
    ssize_t n = write(fd, s + off, len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return luaL_error(L, "emit: %s", strerror(errno));
    off += (size_t)n;
  }
  return 0;
}

/* __kv.mkdir_p(path) -> true | nil, err: the folder and its parents. */
static int l_mkdir_p(lua_State *L) {
  size_t len;
  const char *path = luaL_checklstring(L, 1, &len);
  char *buf = strdup(path);
  if (!buf)
    return luaL_error(L, "out of memory");
  int rc = 0;
  for (char *p = buf + 1; rc == 0; p++) {
    if (*p != '/' && *p != '\0')
      continue;
    char c = *p;
    *p = '\0';
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
      rc = -1;
    *p = c;
    if (!c)
      break;
  }
  free(buf);
  if (rc)
    return luaL_fileresult(L, 0, path);
  lua_pushboolean(L, 1);
  return 1;
}

/* __kv.mkdtemp() -> a new private folder under $TMPDIR (or /tmp) | nil, err. */
static int l_mkdtemp(lua_State *L) {
  const char *tmp = getenv("TMPDIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/kvengine-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(path))
    return luaL_fileresult(L, 0, path);
  lua_pushstring(L, path);
  return 1;
}

static int remove_error; /* the first errno of a remove_tree */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)ftw;
  if ((flag == FTW_DP ? rmdir(path) : unlink(path)) != 0 && !remove_error)
    remove_error = errno;
  return 0;
}

/* __kv.remove_tree(path) -> true | nil, err: path and all below it; a
 * missing path is already removed.  Symbolic links are removed, not followed. */
static int l_remove_tree(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  remove_error = 0;
  if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
    remove_error = errno;
  if (remove_error) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(remove_error));
    return 2;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* __kv.is_dir(path) -> whether path is a folder. */
static int l_is_dir(lua_State *L) {
  struct stat st;
  lua_pushboolean(L, stat(luaL_checkstring(L, 1), &st) == 0 && S_ISDIR(st.st_mode));
  return 1;
}

/* __kv.list_dir(path) -> {name, ...} (unsorted, without . and ..) | nil, err. */
static int l_list_dir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  DIR *dir = opendir(path);
  if (!dir)
    return luaL_fileresult(L, 0, path);
  lua_newtable(L);
  lua_Integer n = 0;
  for (struct dirent *e; (e = readdir(dir)) != NULL;) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    lua_pushstring(L, e->d_name);
    lua_rawseti(L, -2, ++n);
  }
  closedir(dir);
  return 1;
}

/* __kv.realpath(path) -> the absolute path without links | nil, err. */
static int l_realpath(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char *real = realpath(path, NULL);
  if (!real) {
    lua_pushnil(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  lua_pushstring(L, real);
  free(real);
  return 1;
}

static int l_file_expired(lua_State *L) {
  lua_pushboolean(L, kv_file_expired());
  return 1;
}

static int l_file_deadline(lua_State *L) {
  kv_guard_set_file_deadline(luaL_checknumber(L, 1));
  return 0;
}

static const luaL_Reg internal_funcs[] = {{"run", l_run},
                                          {"scope", l_scope},
                                          {"emit", l_emit},
                                          {"file_expired", l_file_expired},
                                          {"mkdir_p", l_mkdir_p},
                                          {"mkdtemp", l_mkdtemp},
                                          {"remove_tree", l_remove_tree},
                                          {"is_dir", l_is_dir},
                                          {"list_dir", l_list_dir},
                                          {"drain", kv_l_drain},
                                          {"realpath", l_realpath},
                                          {"scope_current", l_scope_current},
                                          {"spawn_in", l_spawn_in},
                                          {"file_deadline", l_file_deadline},
                                          {"take_deferred", l_take_deferred},
                                          {"check_options", kv_l_check_options},
                                          {"timeout", kv_l_timeout},
                                          {"fd_limits", kv_l_fd_limits},
                                          {NULL, NULL}};

static const luaL_Reg global_funcs[] = {
    {"sleep", l_sleep}, {"spawn", l_spawn}, {"now", l_now}, {NULL, NULL}};

/* Installs the globals and returns the internal table. */
int luaopen_kvcore(lua_State *L) {
  kv_class_new(L, TASK_MT, task_methods, task_gc, NULL);
  kv_class_new(L, SCOPE_MT, scope_methods, scope_close, NULL);
  kv_class_new(L, SCOPEREF_MT, scoperef_methods, scoperef_gc, NULL);
  lua_pushglobaltable(L);
  luaL_setfuncs(L, global_funcs, 0);
  lua_pop(L, 1);
  luaL_newlib(L, internal_funcs);
  return 1;
}
