/*
 * state.c - a ready-to-use Lua state.
 *
 * A state has the standard libraries, the engine's core functions (sleep,
 * spawn, now, and the internal __kv table), the Lua modules that ship inside
 * the binary as preloads, module paths that find the bindings and fixtures
 * next to the binary (or where `make install` put them), and the coroutine
 * library the deadline guard needs.
 *
 * This file assembles what the layers below it provide (core.c, coro.c,
 * guard.c, modules.c) and is called only from above (host.c, pool.c,
 * main.c): none of those files calls back into it.
 */
#include "internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

extern const struct kv_embedded {
  const char *name;
  const unsigned char *src;
  size_t len;
} kv_embedded[];

/* The running binary's absolute path, for workers and children. */
const char *kv_exe_path(void) {
  static char path[PATH_MAX];
  if (!path[0]) {
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0)
      return "kvengine";
    path[n] = '\0';
  }
  return path;
}

const char *kv_exe_dir(void) {
  static char dir[PATH_MAX];
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "%s", kv_exe_path());
    char *slash = strrchr(dir, '/');
    if (slash)
      *slash = '\0';
  }
  return dir;
}

/* package.preload loader for an embedded Lua module (upvalue: its index). */
static int load_embedded(lua_State *L) {
  const struct kv_embedded *m = &kv_embedded[lua_tointeger(L, lua_upvalueindex(1))];
  lua_pushfstring(L, "@engine/lua/%s.lua", m->name);
  if (luaL_loadbuffer(L, (const char *)m->src, m->len, lua_tostring(L, -1)) != LUA_OK)
    return lua_error(L);
  lua_pushstring(L, m->name);
  lua_call(L, 1, 1);
  return 1;
}

static void preload(lua_State *L) {
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (int i = 0; kv_embedded[i].name; i++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, kv_embedded[i].name);
  }
  lua_pop(L, 1);
}

/* Prepend `prefix` to package[field]. */
static void prepend(lua_State *L, const char *field, const char *prefix) {
  lua_getglobal(L, "package");
  lua_pushstring(L, prefix);
  lua_getfield(L, -2, field);
  lua_concat(L, 2);
  lua_setfield(L, -2, field);
  lua_pop(L, 1);
}

/*
 * Lua modules: KVENGINE_PATH, the fixtures next to the binary
 * (build/../fixtures), then the installed ones.  The bindings have a
 * searcher of their own (modules.c).
 */
static void set_paths(lua_State *L) {
  const char *dir = kv_exe_dir();
  const char *extra = getenv("KVENGINE_PATH");
  lua_pushfstring(L, "%s%s%s/../fixtures/?.lua;%s/../share/kvengine/fixtures/?.lua;",
                  extra ? extra : "", extra ? ";" : "", dir, dir);
  prepend(L, "path", lua_tostring(L, -1));
  lua_pop(L, 1);
  kv_modules_install(L, dir);
}

lua_State *kv_state_new(void) {
  lua_State *L = luaL_newstate();
  if (!L)
    abort();
  *(kv_task **)lua_getextraspace(L) = NULL;
  luaL_openlibs(L);
  preload(L);
  set_paths(L);
  luaL_requiref(L, "__kv", luaopen_kvcore, 1);
  lua_pop(L, 1);
  kv_coro_install(L);
  kv_guard_install();
  return L;
}
