/*
 * fuzz_events.c - libFuzzer target for kv.events.decode.
 *
 * Feeds each input to kv.events.decode in a long-lived lua_State, under both
 * profiles, and checks the decoder's contract:
 *   - it never raises for any bytes (it returns nil, err);
 *   - the "kthena" profile never accepts what "tolerant" rejects, and names
 *     the same dialect when both accept;
 *   - a decoded batch (without events of unknown type, or token ids outside
 *     uint32, which no producer writes) encodes in the named dialect, and
 *     that encoding decodes to a batch that encodes to the same bytes under
 *     the same dialect name.
 * A broken rule aborts, so libFuzzer keeps the input.  Memory errors are
 * ASan's and UBSan's to find.
 *
 * Build and run: `make fuzz-events` (bindings/fuzz/fuzz.mk).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int luaopen_kv(lua_State *L);

static const char check_src[] =
    "local kv, s = ...\n"
    "local b, d = kv.events.decode(s)\n"
    "local bk, dk = kv.events.decode(s, {profile = 'kthena'})\n"
    "if bk and not b then error('kthena accepted what tolerant rejected') end\n"
    "if bk and dk ~= d then error('profiles disagree on the dialect: ' .. d .. ' ' .. dk) end\n"
    "if not b then return end\n"
    "for _, e in ipairs(b.events) do\n"
    "  if e.kind == 'unknown' then return end\n"
    "  for _, t in ipairs(e.tokens or {}) do\n"
    "    if math.type(t) ~= 'integer' or t < 0 or t > 0xffffffff then return end\n"
    "  end\n"
    "end\n"
    "local bytes = kv.events.encode(b, d)\n"
    "local b2, d2 = kv.events.decode(bytes)\n"
    "if not b2 then error('re-encoded batch does not decode: ' .. d2) end\n"
    "if d2 ~= d then error('dialect changed on re-encoding: ' .. d .. ' -> ' .. d2) end\n"
    "if kv.events.encode(b2, d) ~= bytes then error('encoding is not stable') end\n";

static lua_State *L;
static int check_ref, kv_ref;

static void setup(void) {
  L = luaL_newstate();
  if (L == NULL)
    abort();
  luaL_openlibs(L);
  luaL_requiref(L, "kv", luaopen_kv, 0);
  kv_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (luaL_loadbuffer(L, check_src, sizeof check_src - 1, "=fuzz_check") != LUA_OK) {
    fprintf(stderr, "fuzz_events: %s\n", lua_tostring(L, -1));
    abort();
  }
  check_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static unsigned long runs;
  if (L == NULL)
    setup();
  lua_rawgeti(L, LUA_REGISTRYINDEX, check_ref);
  lua_rawgeti(L, LUA_REGISTRYINDEX, kv_ref);
  lua_pushlstring(L, (const char *)data, size);
  if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
    fprintf(stderr, "fuzz_events: contract broken: %s\n", lua_tostring(L, -1));
    abort();
  }
  lua_settop(L, 0);
  if (++runs % 4096 == 0)
    lua_gc(L, LUA_GCCOLLECT);
  return 0;
}
