/*
 * version.c - `kvengine version`: the engine's version and every library's,
 * as linked (or, for Lua modules, as loaded).
 */
#include "internal.h"

#include <stdio.h>

#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <http_parser.h>
#include <lauxlib.h>
#include <msgpack.h>
#include <openssl/crypto.h>
#include <zmq.h>

#define KV_VERSION "0.1.0"

static void lua_module_version(lua_State *L, const char *module, const char *field) {
  lua_getglobal(L, "require");
  lua_pushstring(L, module);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK && lua_istable(L, -1)) {
    lua_getfield(L, -1, field);
    printf("%-12s %s\n", module, lua_isstring(L, -1) ? lua_tostring(L, -1) : "(loaded)");
    lua_pop(L, 2);
  } else {
    printf("%-12s not found\n", module);
    lua_pop(L, 1);
  }
}

void kv_print_versions(lua_State *L) {
  int zmaj, zmin, zpat;
  zmq_version(&zmaj, &zmin, &zpat);
  unsigned long hp = http_parser_version();
  printf("%-12s %s\n", "kvengine", KV_VERSION);
  printf("%-12s %s\n", "lua", LUA_RELEASE);
  printf("%-12s %s\n", "libuv", uv_version_string());
  printf("%-12s %d.%d.%d\n", "libzmq", zmaj, zmin, zpat);
  printf("%-12s %d.%d.%d\n", "hiredis", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
  printf("%-12s %s\n", "libcurl", curl_version_info(CURLVERSION_NOW)->version);
  printf("%-12s %s\n", "msgpack-c", msgpack_version());
  printf("%-12s %s\n", "openssl", OpenSSL_version(OPENSSL_VERSION));
  printf("%-12s %lu.%lu.%lu\n", "http-parser", (hp >> 16) & 255, (hp >> 8) & 255, hp & 255);
  lua_module_version(L, "cjson", "_VERSION");
  lua_module_version(L, "yaml", "version");
}
