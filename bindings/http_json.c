/*
 * http_json.c - JSON bodies, for the client and the server alike.
 *
 * A request or response table has a json() method that decodes its body,
 * and both sides send a table given as a body (json = ... on a request,
 * res:finish{...}) as JSON text.  The text is the engine's `json` module's
 * (lua-cjson with integers kept integral), so a body reads the same in a
 * handler, in a response and in a scenario.
 */
#include "http_private.h"

#include <string.h>

#include <lauxlib.h>

/*
 * Push the JSON module: require("json") (the engine's, with the integer fix),
 * falling back to lua-cjson only when there is no such module at all.
 */
static void push_json_module(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "json");
  if (lua_pcall(L, 1, 1, 0) == LUA_OK)
    return;
  const char *err = lua_tostring(L, -1);
  if (!err || !strstr(err, "module 'json' not found"))
    lua_error(L); /* the module exists but failed to load: say so */
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "cjson");
  lua_call(L, 1, 1);
}

/* json(self): self.body decoded; raises when the body is not JSON. */
int kvh_body_json(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_getfield(L, 1, "body");
  if (!lua_isstring(L, -1))
    return luaL_error(L, "json: no body to decode");
  push_json_module(L);
  lua_getfield(L, -1, "decode");
  lua_pushvalue(L, -3);
  lua_call(L, 1, 1);
  return 1;
}

void kvh_json_encode(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  push_json_module(L);
  lua_getfield(L, -1, "encode");
  lua_remove(L, -2);
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  if (!lua_isstring(L, -1))
    luaL_error(L, "json: encode returned no text");
}
