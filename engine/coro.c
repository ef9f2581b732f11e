/*
 * coro.c - coroutine.resume and coroutine.wrap that say which thread runs.
 *
 * The deadline alarm (guard.c) hooks the Lua thread that is running when it
 * fires.  The scheduler knows when it resumes a task; these replacements of
 * the standard library's resume and wrap record (running.c, the one file
 * this one calls) when a script's own coroutine runs, and when control
 * comes back.  They behave as the standard
 * ones: resume returns true plus results or false plus the error; a wrapped
 * function returns the results or raises the error, with its position when it
 * is a string, after closing the dead coroutine's pending variables.
 */
#include "internal.h"

#include <lauxlib.h>

/* Resume co with the top narg values of L; returns the Lua status. */
static int resume(lua_State *L, lua_State *co, int narg, int *nres) {
  if (!lua_checkstack(co, narg)) {
    lua_pushliteral(L, "too many arguments to resume");
    return LUA_ERRRUN;
  }
  lua_xmove(L, co, narg);
  kv_running prev = kv_running_enter(kv_task_running(), co);
  int status = lua_resume(co, L, narg, nres);
  kv_running_leave(prev);
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, *nres + 1)) {
      lua_pop(co, *nres);
      lua_pushliteral(L, "too many results to resume");
      return LUA_ERRRUN;
    }
    lua_xmove(co, L, *nres);
  } else {
    lua_xmove(co, L, 1);
  }
  return status;
}

static int co_resume(lua_State *L) {
  lua_State *co = lua_tothread(L, 1);
  luaL_argexpected(L, co, 1, "coroutine");
  int nres = 0;
  int status = resume(L, co, lua_gettop(L) - 1, &nres);
  if (status == LUA_OK || status == LUA_YIELD) {
    lua_pushboolean(L, 1);
    lua_insert(L, -(nres + 1));
    return nres + 1;
  }
  lua_pushboolean(L, 0);
  lua_insert(L, -2);
  return 2;
}

static int wrapped_call(lua_State *L) {
  lua_State *co = lua_tothread(L, lua_upvalueindex(1));
  int nres = 0;
  int status = resume(L, co, lua_gettop(L), &nres);
  if (status == LUA_OK || status == LUA_YIELD)
    return nres;
  int costatus = lua_status(co);
  if (costatus != LUA_OK && costatus != LUA_YIELD) {
    lua_resetthread(co); /* close its to-be-closed variables */
    lua_settop(co, 0);
  }
  if (status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

static int co_wrap(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State *co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushcclosure(L, wrapped_call, 1);
  return 1;
}

void kv_coro_install(lua_State *L) {
  lua_getglobal(L, "coroutine");
  lua_pushcfunction(L, co_resume);
  lua_setfield(L, -2, "resume");
  lua_pushcfunction(L, co_wrap);
  lua_setfield(L, -2, "wrap");
  lua_pop(L, 1);
}
