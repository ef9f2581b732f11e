/*
 * kv_u64.c - 64-bit hashes and 32-bit token ids as Lua carries them.
 *
 * A uint64 is the Lua integer with the same 64 bits (above 2^63 it reads
 * negative), or, wherever a hash is taken, its unsigned decimal string; a
 * token id is an integer in 0..2^32-1.  The hashing (kv.c) and the event
 * constructors and encoders (kv_events.c) read and print them here.
 */
#include <inttypes.h>
#include <stdio.h>

#include <lua.h>

#include "kv.h"

int kv_parse_u64(const char *s, size_t len, uint64_t *out) {
  uint64_t v = 0;
  if (len == 0 || len > 20)
    return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned d = (unsigned char)s[i] - '0';
    if (d > 9)
      return 0;
    if (v > (UINT64_MAX - d) / 10)
      return 0;
    v = v * 10 + d;
  }
  *out = v;
  return 1;
}

int kv_to_u64(lua_State *L, int idx, uint64_t *out) {
  int isint = 0;
  if (lua_type(L, idx) == LUA_TSTRING) {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    return kv_parse_u64(s, len, out);
  }
  if (lua_type(L, idx) != LUA_TNUMBER)
    return 0;
  lua_Integer i = lua_tointegerx(L, idx, &isint);
  if (!isint)
    return 0;
  *out = (uint64_t)i;
  return 1;
}

int kv_to_token(lua_State *L, int idx, uint32_t *out) {
  int isint = 0;
  if (lua_type(L, idx) != LUA_TNUMBER)
    return 0;
  lua_Integer i = lua_tointegerx(L, idx, &isint);
  if (!isint || i < 0 || i > (lua_Integer)UINT32_MAX)
    return 0;
  *out = (uint32_t)i;
  return 1;
}

void kv_push_u64_string(lua_State *L, uint64_t v) {
  char buf[24];
  int n = snprintf(buf, sizeof buf, "%" PRIu64, v);
  lua_pushlstring(L, buf, (size_t)n);
}
