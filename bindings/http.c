/*
 * http.c - the `http` module: an HTTP client and an HTTP server for tests.
 *
 *   http.request{method, url, headers, body, json, timeout, stream}
 *   http.get(url, opts)  http.post(url, body_or_opts)
 *   http.batch(requests, {concurrency})
 *   http.listen{host, port, handler, max_body} -> server
 *
 * The client (http_client.c) drives libcurl's multi socket API from the
 * engine's loop; the server (http_server.c) serves libuv TCP connections with
 * a request parser (http_parse.c).  Both let the calling task wait without
 * blocking the loop.  This file holds the module table and what both sides
 * share: JSON bodies and error logging.
 */
#include "http_private.h"

#include <curl/curl.h>
#include <http_parser.h>

#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

/*
 * Push the JSON module: require "json" (the engine's, with the integer fix),
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

/* Log through the engine's global log() when there is one; never raises. */
void kvh_log(lua_State *L, const char *msg) {
  if (lua_getglobal(L, "log") == LUA_TFUNCTION) {
    lua_pushstring(L, msg);
    if (lua_pcall(L, 1, 0, 0) == LUA_OK)
      return;
  }
  lua_pop(L, 1);
  fprintf(stderr, "%s\n", msg);
}

static const luaL_Reg http_funcs[] = {
    {"request", kvh_request}, {"get", kvh_get},       {"post", kvh_post},
    {"batch", kvh_batch},     {"listen", kvh_listen}, {NULL, NULL},
};

int luaopen_http(lua_State *L) {
  kvh_server_open(L);
  lua_newtable(L);
  kvh_client_push(L);
  luaL_setfuncs(L, http_funcs, 1);
  unsigned long hp = http_parser_version();
  lua_pushfstring(L, "libcurl %s, http-parser %d.%d.%d",
                  curl_version_info(CURLVERSION_NOW)->version, (int)((hp >> 16) & 255),
                  (int)((hp >> 8) & 255), (int)(hp & 255));
  lua_setfield(L, -2, "version");
  return 1;
}
