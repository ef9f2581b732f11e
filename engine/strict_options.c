/*
 * strict_options.c - option tables that refuse keys they do not know.
 *
 * A misspelt option (`tiemout = 1`) would otherwise be ignored, and the test
 * would run with the default in silence.  Every binding that takes an
 * options table, and the test API (test, eventually), check its keys here:
 * the error names the function, the unknown key and the valid key closest
 * to it by edit distance, at the line of the Lua code that made the call.
 * Lua code reaches the same check as engine.check_options.  A module
 * publishes the lists it checks against as its `options` table
 * (kv_set_options), which the editor types are checked against.
 */
#include "internal.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { KEY_MAX = 64 }; /* longer keys get no suggestion */

static size_t min2(size_t a, size_t b) { return a < b ? a : b; }

static int same(char a, char b) { return tolower((unsigned char)a) == tolower((unsigned char)b); }

/*
 * The optimal string alignment distance between a and b, ignoring case:
 * insertions, deletions, substitutions and swaps of neighbours each cost
 * one, so "tiemout" is 1 from "timeout".  SIZE_MAX for overlong keys.
 */
static size_t distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la >= KEY_MAX || lb >= KEY_MAX)
    return SIZE_MAX;
  size_t rows[3][KEY_MAX + 1]; /* rows i-2, i-1 and i, by i modulo 3 */
  for (size_t j = 0; j <= lb; j++)
    rows[0][j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t *cur = rows[i % 3], *up = rows[(i - 1) % 3], *up2 = rows[(i + 1) % 3];
    cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t d = min2(min2(up[j], cur[j - 1]) + 1, up[j - 1] + !same(a[i - 1], b[j - 1]));
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]))
        d = min2(d, up2[j - 2] + 1);
      cur[j] = d;
    }
  }
  return rows[la % 3][lb];
}

/* The valid key closest to k, or NULL when none is close enough to be a slip. */
static const char *closest(const char *k, const char *const *keys, size_t n) {
  const char *best = NULL;
  size_t best_d = (strlen(k) + 2) / 3 + 1;
  for (size_t i = 0; i < n; i++) {
    size_t d = distance(k, keys[i]);
    if (d < best_d) {
      best = keys[i];
      best_d = d;
    }
  }
  return best;
}

static int known(const char *k, const char *const *keys, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(k, keys[i]) == 0)
      return 1;
  return 0;
}

/* Raise: the key at top is unknown.  `level` as in luaL_where. */
static int unknown(lua_State *L, int level, const char *fname, const char *const *keys, size_t n) {
  const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
  const char *shown = luaL_tolstring(L, -1, NULL);
  const char *best = k ? closest(k, keys, n) : NULL;
  luaL_where(L, level);
  if (best) {
    lua_pushfstring(L, "%s: unknown option `%s`; did you mean `%s`?", fname, shown, best);
  } else {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    lua_pushfstring(L, "%s: unknown option `%s` (", fname, shown);
    luaL_addvalue(&b);
    luaL_addstring(&b, n ? "options: " : "it takes none");
    for (size_t i = 0; i < n; i++) {
      luaL_addstring(&b, i ? ", " : "");
      luaL_addstring(&b, keys[i]);
    }
    luaL_addchar(&b, ')');
    luaL_pushresult(&b);
  }
  lua_concat(L, 2);
  return lua_error(L);
}

/*
 * The check behind both entry points.  Of several unknown string keys the
 * first in byte order is named, so the message does not depend on the
 * table's iteration order.
 */
static void check(lua_State *L, int idx, const char *fname, const char *const *keys, size_t n,
                  int level) {
  idx = lua_absindex(L, idx);
  int t = lua_type(L, idx);
  if (t == LUA_TNONE || t == LUA_TNIL)
    return;
  if (t != LUA_TTABLE) {
    luaL_where(L, level);
    lua_pushfstring(L, "%s: options must be a table, not %s", fname, lua_typename(L, t));
    lua_concat(L, 2);
    lua_error(L);
  }
  const char *first = NULL;
  for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      lua_pushvalue(L, -2);
      unknown(L, level, fname, keys, n);
    }
    const char *k = lua_tostring(L, -2);
    if (!known(k, keys, n) && (!first || strcmp(k, first) < 0))
      first = k; /* stays valid: the table holds it */
  }
  if (first) {
    lua_pushstring(L, first);
    unknown(L, level, fname, keys, n);
  }
}

void kv_check_options(lua_State *L, int idx, const char *fname, const char *const keys[]) {
  size_t n = 0;
  while (keys[n])
    n++;
  check(L, idx, fname, keys, n, 1);
}

void kv_set_options(lua_State *L, const kv_option_keys lists[]) {
  if (lua_getfield(L, -1, "options") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "options");
  }
  for (const kv_option_keys *o = lists; o->call; o++) {
    lua_newtable(L);
    for (lua_Integer i = 0; o->keys[i]; i++) {
      lua_pushstring(L, o->keys[i]);
      lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, o->call);
  }
  lua_pop(L, 1);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * check_options(fname, t, keys [, level]) -> t: keys is a list of names or
 * a set (name = true), whose names are listed sorted in a message; level
 * as in error(), default 2: the caller of the function that checks its
 * options.
 */
int kv_l_check_options(lua_State *L) {
  const char *fname = luaL_checkstring(L, 1);
  luaL_checktype(L, 3, LUA_TTABLE);
  lua_Integer level = luaL_optinteger(L, 4, 2);
  luaL_argcheck(L, level >= 0 && level < 1000, 4, "level out of range");
  size_t n = 0;
  for (lua_pushnil(L); lua_next(L, 3); lua_pop(L, 1))
    n++;
  const char **keys = lua_newuserdatauv(L, (n ? n : 1) * sizeof *keys, 0);
  n = 0;
  int set = 0;
  for (lua_pushnil(L); lua_next(L, 3); lua_pop(L, 1)) {
    if (lua_type(L, -2) == LUA_TSTRING) {
      keys[n++] = lua_tostring(L, -2); /* a set: name = true */
      set = 1;
    } else if (lua_type(L, -1) == LUA_TSTRING) {
      keys[n++] = lua_tostring(L, -1); /* a list of names */
    } else {
      return luaL_argerror(L, 3, "keys must be a list of names or a set of names");
    }
  }
  if (set) /* its order is the table's: sorted, a message does not change from run to run */
    qsort(keys, n, sizeof *keys, by_name);
  check(L, 2, fname, keys, n, (int)level);
  lua_settop(L, 2);
  return 1;
}
