/*
 * defer.c - functions deferred to the end of a scope.
 *
 * They wait in a registry table keyed by the scope's address:
 * registry[&defer_key][key] = {fn, ...}, oldest first.  The runner takes
 * them when the scope ends (__kv.take_deferred, core.c) and runs them newest
 * first, each guarded; closing a scope (scope.c) forgets what nobody took, so
 * a scope made later at the same address starts with none.  Only the
 * address is used here: this file knows neither scopes nor tasks, and calls
 * no other file of the engine.
 */
#include "internal.h"

#include <assert.h>

static const char defer_key = 'd';

/* Push registry[&defer_key], creating it the first time. */
static void push_all(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &defer_key) == LUA_TTABLE)
    return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &defer_key);
}

void kv_defer_add(lua_State *L, const void *key) {
  assert(key && lua_isfunction(L, -1));
  push_all(L);
  if (lua_rawgetp(L, -1, key) != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, -3, key);
  }
  lua_rotate(L, -3, -1); /* fn, all, list -> all, list, fn */
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  lua_pop(L, 2);
}

void kv_defer_take(lua_State *L, const void *key) {
  push_all(L);
  if (!key || lua_rawgetp(L, -1, key) != LUA_TTABLE) {
    if (key)
      lua_pop(L, 1);
    lua_pop(L, 1);
    lua_newtable(L);
    return;
  }
  lua_pushnil(L);
  lua_rawsetp(L, -3, key);
  lua_remove(L, -2);
}

void kv_defer_forget(lua_State *L, const void *key) {
  push_all(L);
  lua_pushnil(L);
  lua_rawsetp(L, -2, key);
  lua_pop(L, 1);
}
