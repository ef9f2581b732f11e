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

/* Longer timeouts are cut to this, so that milliseconds fit a uint64_t. */
#define LONGEST 1e9

/*
 * engine.time_scale(): read where it is defined, so there is one reading,
 * and kept (the environment does not change under a run; http.load reads
 * it for each of thousands of requests).
 */
static double time_scale(lua_State *L) {
  static double kept;
  if (kept > 0)
    return kept;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "engine");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "time_scale");
  lua_call(L, 0, 1);
  double scale = lua_tonumber(L, -1);
  lua_pop(L, 2);
  assert(scale > 0);
  return kept = scale;
}

/* Raise: the value at the top is not a timeout; say what one is. */
static int refuse(lua_State *L, const char *fname, double dflt) {
  return luaL_error(L,
                    "%s: timeout = %s: a timeout is a number of seconds >= 0 "
                    "(0: poll, nil: the default, %d s times engine.time_scale())",
                    fname, luaL_tolstring(L, -1, NULL), (int)dflt);
}

double kv_opt_timeout(lua_State *L, int idx, const char *fname, double dflt) {
  assert(dflt > 0 && isfinite(dflt));
  if (idx == 0 || lua_isnoneornil(L, idx))
    return dflt * time_scale(L);
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TNUMBER) /* the positional form */
    luaL_error(L, "%s: a timeout is an option now: pass {timeout = %s}, not %s", fname,
               lua_tostring(L, idx), lua_tostring(L, idx));
  luaL_checktype(L, idx, LUA_TTABLE);
  if (lua_getfield(L, idx, "timeout") == LUA_TNIL) {
    lua_pop(L, 1);
    return dflt * time_scale(L);
  }
  double t = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
  if (!(t >= 0 && isfinite(t))) /* refuses NaN too */
    refuse(L, fname, dflt);
  lua_pop(L, 1);
  return t < LONGEST ? t : LONGEST;
}

const char *const kv_timeout_keys[] = {"timeout", NULL};

double kv_timeout_arg(lua_State *L, int idx, const char *fname, double dflt) {
  if (idx != 0 && lua_type(L, idx) == LUA_TTABLE)
    kv_check_options(L, idx, fname, kv_timeout_keys);
  return kv_opt_timeout(L, idx, fname, dflt);
}
