/*
 * main.c - what `kvengine` was asked to do.
 *
 *   kvengine [options] PATH...     the parent: runs files in workers, reports
 *   kvengine serve SCRIPT [ARG...] a Lua program on the loop
 *   kvengine version               versions of the engine and its libraries
 *   kvengine COMMAND [ARG...]      a command a fixture library registered
 *                                  (commands.h): the engine names none
 *   kvengine __worker [options] FILE   one file in this process (internal: the
 *                                  parent forks its workers: worker.h)
 *   kvengine __supervise ...       a child's supervisor (internal: supervise.h)
 */
#include "commands.h"
#include "host.h"
#include "internal.h"
#include "options.h"
#include "pool.h"
#include "supervise.h"
#include "worker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

void kv_print_versions(lua_State *L);

static void export_engine_path(void) { setenv("KVENGINE_BIN", kv_exe_path(), 1); }

/* `kvengine __worker [options] FILE`: one file in this process. */
static int worker_main(int argc, char **argv) {
  struct kv_options o;
  if (kv_options_parse(&o, argc, argv) || o.npaths != 1)
    return 2;
  return kv_worker_run(&o, o.paths[0], NULL);
}

/* Run script with args[0..nargs) on the loop; `arg` holds them, as in lua(1). */
static int serve_script(const char *script, int nargs, char **args) {
  struct kv_host h;
  kv_host_open(&h, NULL);
  lua_State *L = h.L;
  lua_createtable(L, nargs, 1);
  lua_pushstring(L, script);
  lua_rawseti(L, -2, 0);
  for (int i = 0; i < nargs; i++) {
    lua_pushstring(L, args[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setglobal(L, "arg");
  if (luaL_loadfile(L, script) != LUA_OK) {
    fprintf(stderr, "kvengine: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
    kv_host_close(&h);
    return 1;
  }
  for (int i = 0; i < nargs; i++)
    lua_pushstring(L, args[i]);
  kv_host_start(&h, nargs);
  int code = 0;
  if (kv_host_run(&h, 0) < 0) {
    code = 1;
  } else if (h.main->state == KV_TASK_DONE && h.main->end == KV_END_ERROR) {
    int base = lua_gettop(L);
    kv_host_outcome(&h);
    fprintf(stderr, "kvengine: %s\n", lua_tostring(L, base + 3));
    lua_settop(L, base);
    code = 1;
  }
  kv_host_close(&h);
  return code;
}

static int version_main(void) {
  lua_State *L = kv_state_new();
  kv_print_versions(L);
  lua_close(L);
  return 0;
}

int main(int argc, char **argv) {
  /* Before anything else: the supervisor passes its environment on unchanged. */
  if (argc >= 2 && !strcmp(argv[1], KV_SUPERVISE_MODE))
    return kv_supervise_main(argc - 1, argv + 1);
  kv_raise_fd_limit();
  export_engine_path();
  if (argc >= 2 && !strcmp(argv[1], "__worker"))
    return worker_main(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "serve")) {
    if (argc < 3) {
      fputs("usage: kvengine serve SCRIPT [ARG...]\n", stderr);
      return 2;
    }
    return serve_script(argv[2], argc - 3, argv + 3);
  }
  if (argc == 2 && !strcmp(argv[1], "version"))
    return version_main();
  if (argc >= 2) {
    char script[4200];
    switch (kv_command_find(argv[1], script, sizeof script)) {
    case KV_COMMAND_FOUND:
      return serve_script(script, argc - 2, argv + 2);
    case KV_COMMAND_MISSPELT:
      return 2;
    case KV_COMMAND_BROKEN:
      return 3;
    case KV_COMMAND_NONE:
      break;
    }
  }
  struct kv_options o;
  if (kv_options_parse(&o, argc, argv))
    return 2;
  if (o.npaths == 0) {
    kv_usage();
    return 2;
  }
  return kv_pool_main(&o);
}
