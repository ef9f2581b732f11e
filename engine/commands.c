/*
 * commands.c - `kvengine WORD [ARG...]` and the usage's list of commands,
 * from what fixture libraries register.
 *
 * The engine names no command of a fixture library (`up`, `inject` are the
 * kvcache library's): it asks engine/lua/plugins.lua, which runs the
 * registration files on the module path, what a word is.  A registered
 * command wins over a folder of the same name, as it did when the engine
 * knew its commands; any other word goes on to be a path.
 */
#include "commands.h"
#include "internal.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>

/* Whether s can name a command: a-z first, then a-z, 0-9, _ and -. */
static int is_word(const char *s) {
  return *s >= 'a' && *s <= 'z' && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == strlen(s);
}

/* Whether s names something in the file system (a file, a folder). */
static int is_path(const char *s) {
  struct stat st;
  return stat(s, &st) == 0;
}

/*
 * Call require("plugins")[fn](arg) with nres results.  Returns LUA_OK with
 * the results pushed, or an error status with the message pushed.
 */
static int call_plugins(lua_State *L, const char *fn, const char *arg, int nres) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "plugins");
  int rc = lua_pcall(L, 1, 1, 0);
  if (rc != LUA_OK)
    return rc;
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  int nargs = arg ? 1 : 0;
  if (arg)
    lua_pushstring(L, arg);
  return lua_pcall(L, nargs, nres, 0);
}

/* The outcome of plugins.script(word), its two results on top of L's stack. */
static enum kv_command judge(lua_State *L, const char *word, char *path, size_t size) {
  if (lua_isstring(L, -2)) {
    snprintf(path, size, "%s", lua_tostring(L, -2));
    return KV_COMMAND_FOUND;
  }
  if (!lua_isstring(L, -1) || is_path(word))
    return KV_COMMAND_NONE;
  fprintf(stderr, "kvengine: %s: no such command, file or folder; did you mean `kvengine %s`?\n",
          word, lua_tostring(L, -1));
  fputs("kvengine: see kvengine --help\n", stderr);
  return KV_COMMAND_MISSPELT;
}

enum kv_command kv_command_find(const char *word, char *path, size_t size) {
  assert(word && path && size > 0);
  if (!is_word(word))
    return KV_COMMAND_NONE;
  lua_State *L = kv_state_new();
  enum kv_command found;
  if (call_plugins(L, "script", word, 2) == LUA_OK) {
    found = judge(L, word, path, size);
  } else {
    /* A word that is a path still runs: the broken registration is only named. */
    found = is_path(word) ? KV_COMMAND_NONE : KV_COMMAND_BROKEN;
    fprintf(stderr, "kvengine: %s\n", lua_tostring(L, -1));
  }
  lua_close(L);
  return found;
}

void kv_commands_usage(void) {
  lua_State *L = kv_state_new();
  if (call_plugins(L, "usage", NULL, 1) == LUA_OK)
    fputs(lua_tostring(L, -1), stdout);
  else
    fprintf(stdout, "\n(the fixture libraries' commands: %s)\n", lua_tostring(L, -1));
  lua_close(L);
}
