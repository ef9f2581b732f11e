/*
 * class.c - how a binding's userdata gets its metatable (engine.h).
 *
 * One shape for every handle a script holds, as Lua's own liolib makes
 * files: a metatable registered under "kvengine.<module>.<type>" (which
 * luaL_checkudata looks up and error messages print), methods under
 * __index, one close function as both __gc and __close, and __tostring.
 */
#include "engine.h"

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
