/*
 * modules.c - how `require` finds the bindings.
 *
 * Each binding is a C module (build/lib/<name>.so next to the binary, or
 * PREFIX/lib/kvengine once installed), linked with its own library so that a
 * file that needs no HTTP never loads libcurl.  Lua's own C loader would
 * dlclose a module when the state closes, but a module's libuv handles are
 * closed through callbacks that the loop runs after that: so this searcher,
 * placed right after package.preload, loads them with RTLD_NODELETE and they
 * stay mapped until the process exits.
 *
 * The binary's folder comes from the caller (state.c), so this file calls
 * no other file of the engine.
 */
#include "internal.h"

#include <assert.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

/* The module's file under dir (the binary's folder): 0, or -1 when there is none. */
static int module_path(char *buf, size_t size, const char *dir, const char *name) {
  static const char *const places[] = {"%s/lib/%s.so", "%s/../lib/kvengine/%s.so"};
  for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
    snprintf(buf, size, places[i], dir, name);
    if (access(buf, R_OK) == 0)
      return 0;
  }
  return -1;
}

static int load_module(lua_State *L) {
  const char *path = lua_tostring(L, 2);
  const char *name = lua_tostring(L, lua_upvalueindex(1));
  void *lib = dlopen(path, RTLD_NOW | RTLD_NODELETE);
  if (!lib)
    return luaL_error(L, "cannot load %s: %s", path, dlerror());
  char sym[128];
  snprintf(sym, sizeof sym, "luaopen_%s", name);
  lua_CFunction open = (lua_CFunction)(uintptr_t)dlsym(lib, sym);
  if (!open)
    return luaL_error(L, "%s has no %s", path, sym);
  lua_pushcfunction(L, open);
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
  return 1;
}

/*
 * package.searchers entry (upvalue 1: the binary's folder): a loader for an
 * engine module, or why not.
 */
static int search(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const char *dir = lua_tostring(L, lua_upvalueindex(1));
  char path[4200];
  if (strchr(name, '.') || strchr(name, '/') || module_path(path, sizeof path, dir, name) < 0) {
    lua_pushfstring(L, "no engine module '%s' in %s/lib", name, dir);
    return 1;
  }
  lua_pushvalue(L, 1);
  lua_pushcclosure(L, load_module, 1);
  lua_pushstring(L, path);
  return 2;
}

void kv_modules_install(lua_State *L, const char *exe_dir) {
  assert(exe_dir);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "searchers");
  for (lua_Integer i = (lua_Integer)luaL_len(L, -1); i >= 2; i--) {
    lua_rawgeti(L, -1, i);
    lua_rawseti(L, -2, i + 1);
  }
  lua_pushstring(L, exe_dir);
  lua_pushcclosure(L, search, 1);
  lua_rawseti(L, -2, 2);
  lua_pop(L, 2);
}
