/*
 * version.c - `kvengine version`: the engine's version and every library's.
 *
 * The engine links Lua and libuv; each binding module reports the library
 * it links (its `version` field), and the Lua modules theirs.
 */
#include "internal.h"

#include <stdio.h>

#include <lauxlib.h>

#define KV_VERSION "0.1.0"

static const struct {
  const char *module, *field;
} libraries[] = {
    {"redis", "version"},  {"zmq", "version"},  {"http", "version"}, {"kv", "version"},
    {"cjson", "_VERSION"}, {"yaml", "version"}, {NULL, NULL},
};

void kv_print_versions(lua_State *L) {
  printf("%-10s %s\n", "kvengine", KV_VERSION);
  printf("%-10s %s\n", "lua", LUA_RELEASE);
  printf("%-10s libuv %s\n", "engine", uv_version_string());
  for (int i = 0; libraries[i].module; i++) {
    lua_getglobal(L, "require");
    lua_pushstring(L, libraries[i].module);
    if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
      lua_getfield(L, -1, libraries[i].field);
      printf("%-10s %s\n", libraries[i].module, luaL_optstring(L, -1, "(no version)"));
      lua_pop(L, 2);
    } else {
      printf("%-10s not found: %s\n", libraries[i].module, luaL_optstring(L, -1, ""));
      lua_pop(L, 1);
    }
  }
}
