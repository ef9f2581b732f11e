/*
 * timeout.c - the one timeout rule every call that waits follows (engine.h).
 *
 * A wait's limit is an option named `timeout`, in seconds, so a call reads
 * the same whichever binding it is: nil is the default for that kind of
 * wait, scaled as every default wait is (engine.time_scale()), 0 polls,
 * and a number > 0 bounds the wait.  Nothing waits forever by default: a
 * program that must wait for ever loops over bounded waits.  The form
 * some calls took before the rule, a bare number where the options table
 * now goes, raises naming the form to write, and so do a negative, a NaN,
 * an infinite and a non-number timeout: old code fails at its line instead
 * of waiting some other time.
 */
#include "engine.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>

/* Longer timeouts are cut to this, so that milliseconds fit a uint64_t. */
#define LONGEST 1e9

/*
 * engine.time_scale(): read where it is defined (engine/lua/time_scale.lua),
 * so there is one reading, and kept (the environment does not change under
 * a run; http.load reads it for each of thousands of requests).
 */
static double time_scale(lua_State *L) {
  static double kept;
  if (kept > 0)
    return kept;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "time_scale");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "read");
  lua_call(L, 0, 1);
  double scale = lua_tonumber(L, -1);
  lua_pop(L, 2);
  assert(scale > 0);
  return kept = scale;
}

/* Raise: the value at the top is not a timeout; say what one is (and the
 * default, where the call has one: dflt > 0). */
static int refuse(lua_State *L, const char *fname, double dflt) {
  char deflt[64] = "";
  if (dflt > 0)
    snprintf(deflt, sizeof deflt, ", %g s times engine.time_scale()", dflt);
  return luaL_error(
      L, "%s: timeout = %s: a timeout is a number of seconds >= 0 (0: poll, nil: the default%s)",
      fname, luaL_tolstring(L, -1, NULL), deflt);
}

/*
 * The rule itself, for kv_opt_timeout and __kv.timeout: the timeout at idx
 * (0: the call has no options), or -1 where none is given; raises as
 * kv_opt_timeout says.  dflt > 0 is named in the message, 0 is "none".
 */
static double given_timeout(lua_State *L, int idx, const char *fname, double dflt) {
  if (idx == 0 || lua_isnoneornil(L, idx))
    return -1;
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) /* the positional form */
    luaL_error(L, "%s: a timeout is an option now: pass {timeout = %s}, not %s", fname,
               lua_tostring(L, idx), lua_tostring(L, idx));
  luaL_checktype(L, idx, LUA_TTABLE);
  if (lua_getfield(L, idx, "timeout") == LUA_TNIL) {
    lua_pop(L, 1);
    return -1;
  }
  double t = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
  if (!(t >= 0 && isfinite(t))) /* refuses NaN too */
    refuse(L, fname, dflt);
  lua_pop(L, 1);
  return t < LONGEST ? t : LONGEST;
}

double kv_opt_timeout(lua_State *L, int idx, const char *fname, double dflt) {
  assert(dflt > 0 && isfinite(dflt));
  double t = given_timeout(L, idx, fname, dflt);
  return t >= 0 ? t : dflt * time_scale(L);
}

const char *const kv_timeout_keys[] = {"timeout", NULL};

double kv_timeout_arg(lua_State *L, int idx, const char *fname, double dflt) {
  if (idx != 0 && lua_type(L, idx) == LUA_TTABLE)
    kv_check_options(L, idx, fname, kv_timeout_keys);
  return kv_opt_timeout(L, idx, fname, dflt);
}

/*
 * __kv.timeout(fname, opts [, default]) -> seconds or nil: the rule for a
 * Lua library's own waits (engine.timeout), so that it is written once.
 * With a default (> 0), as kv_opt_timeout; without, nil where opts gives
 * no timeout (a check of an options table that may hold one).
 */
int kv_l_timeout(lua_State *L) {
  const char *fname = luaL_checkstring(L, 1);
  double dflt = luaL_optnumber(L, 3, 0);
  luaL_argcheck(L, dflt >= 0 && isfinite(dflt), 3, "a default is a number of seconds > 0");
  int idx = lua_isnoneornil(L, 2) ? 0 : 2;
  if (dflt > 0) {
    lua_pushnumber(L, kv_opt_timeout(L, idx, fname, dflt));
    return 1;
  }
  double t = given_timeout(L, idx, fname, 0);
  if (t < 0)
    lua_pushnil(L);
  else
    lua_pushnumber(L, t);
  return 1;
}
