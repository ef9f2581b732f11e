/*
 * worker.c - one test file in a process of its own: the runner
 * (engine/lua/runner.lua) over the file, on the loop, report events on fd 3.
 */
#include "worker.h"
#include "host.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <lauxlib.h>

/* The runner's modules read the target at load (engine.target()). */
static void set_target(const struct kv_options *o) {
  if (o->target)
    setenv("KVENGINE_TARGET", o->target, 1);
}

/* Push require("runner"): LUA_OK, or an error status with the message pushed. */
static int push_runner(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "runner");
  return lua_pcall(L, 1, 1, 0);
}

lua_State *kv_worker_warm(const struct kv_options *o) {
  set_target(o);
  lua_State *L = kv_state_new();
  if (push_runner(L) != LUA_OK) {
    lua_close(L);
    return NULL;
  }
  lua_pop(L, 1);
  return L;
}

/*
 * A worker dies with its parent, SIGKILL included: SIGTERM then ends the
 * file the orderly way (every child stopped).  The parent holds the only
 * read end of the event pipe, so a pipe already broken means the parent
 * died before the death signal was set.
 */
static int follow_parent(void) {
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  struct pollfd events = {.fd = 3, .events = 0};
  return poll(&events, 1, 0) == 1 && (events.revents & POLLERR) ? -1 : 0;
}

/* The exit code of the runner's ended main task, or 3 when it failed. */
static int runner_code(struct kv_host *h) {
  lua_State *L = h->L;
  int base = lua_gettop(L), code = 3;
  kv_host_outcome(h);
  if (lua_toboolean(L, base + 1))
    code = (int)luaL_optinteger(L, base + 2, 0);
  else
    fprintf(stderr, "kvengine: runner failed: %s\n", luaL_tolstring(L, base + 3, NULL));
  lua_settop(L, base);
  return code;
}

int kv_worker_run(const struct kv_options *o, const char *file, lua_State *L) {
  if (fcntl(3, F_GETFD) != -1) {
    if (follow_parent() < 0) {
      if (L)
        lua_close(L);
      return 3;
    }
    kv_set_event_fd(3);
  }
  set_target(o);
  struct kv_host h;
  kv_host_open(&h, L);
  L = h.L;
  if (push_runner(L) != LUA_OK) {
    fprintf(stderr, "kvengine: %s\n", lua_tostring(L, -1));
    kv_host_close(&h);
    return 3;
  }
  lua_getfield(L, -1, "run_file");
  lua_remove(L, -2);
  kv_options_push(L, o);
  lua_pushstring(L, file);
  lua_setfield(L, -2, "file");
  kv_host_start(&h, 1);
  int code = 3;
  if (kv_host_run(&h, 1) < 0)
    fputs("kvengine: the runner waits on nothing: an engine bug\n", stderr);
  else if (h.signalled)
    code = 128 + h.signalled;
  else
    code = runner_code(&h);
  kv_host_close(&h);
  return code;
}
