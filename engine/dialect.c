/*
 * dialect.c - the one way every binding's Lua surface looks (engine.h).
 *
 * As Lua's own liolib: a handle a script holds is a userdata whose
 * metatable is registered under "kvengine.<module>.<type>" (which
 * luaL_checkudata looks up and error messages print), with methods under
 * __index, one close function as both __gc and __close, and __tostring.  A
 * failure the caller should expect (a refused connection, a child that
 * cannot start) comes back as nil, "<module>: <why>", a wait that ran out of
 * time as nil, "timeout"; a programming error raises.
 */
#include "engine.h"

#include <stdarg.h>

/* Set l's functions (those not NULL) on the table at the top, the metatable at mt their upvalue. */
static void set_funcs(lua_State *L, int mt, const luaL_Reg *l) {
  for (; l->name; l++) {
    if (!l->func)
      continue;
    lua_pushvalue(L, mt);
    lua_pushcclosure(L, l->func, 1);
    lua_setfield(L, -2, l->name);
  }
}

void kv_class_new(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction close,
                  lua_CFunction tostring) {
  luaL_newmetatable(L, name);
  int mt = lua_gettop(L);
  const luaL_Reg meta[] = {
      {"__gc", close}, {"__close", close}, {"__tostring", tostring}, {NULL, NULL}};
  set_funcs(L, mt, meta);
  if (methods) {
    lua_newtable(L);
    set_funcs(L, mt, methods);
    lua_setfield(L, mt, "__index");
  }
  lua_pop(L, 1);
}

int kv_fail(lua_State *L, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lua_pushnil(L);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  return 2;
}

int kv_timeout(lua_State *L) {
  lua_pushnil(L);
  lua_pushliteral(L, "timeout");
  return 2;
}
