/*
 * kv_events.c - KV-cache events: Lua constructors, and the msgpack dialects
 * that inference engines put on the wire (the payload frame of a ZMQ
 * KV-event message), written with msgpack-c.
 *
 * Events and batches are plain Lua tables:
 *
 *   batch  = {ts = <float epoch seconds>, events = {ev, ...}, dp_rank = <int|nil>}
 *   stored = {kind = "stored", hashes = {h, ...}, tokens = {id, ...}, block_size = n,
 *             parent = h|nil, lora_id = n|nil, lora_name = s|nil, medium = s|nil,
 *             group_idx = n|nil, kv_cache_spec_kind = s|nil,
 *             kv_cache_spec_sliding_window = n|nil}
 *   removed = {kind = "removed", hashes = {h, ...}, medium = s|nil, group_idx = n|nil}
 *   cleared = {kind = "cleared"}
 *
 * Hashes are uint64 carried as Lua integers with the same bits (kv.u64).
 * A decoded event may also carry signed_hashes (kv_events_decode.c); encode
 * ignores it.
 *
 * kv.stored{...}, kv.removed{...}, kv.cleared{} build events: they check
 * every field (an unknown field name raises, to catch typos), turn decimal
 * hash strings into integers, and fill defaults: tokens = {},
 * block_size = 16, medium = "GPU" (pass medium = false for none).
 *
 * kv.events.encode(batch [, dialect]) -> bytes
 *   Writes the batch as the named producer does (default "vllm-array"):
 *
 *   vllm-0.9    batch [ts, events]; BlockStored [tag, hashes, parent, tokens,
 *               block_size, lora_id]; BlockRemoved [tag, hashes]
 *   vllm-array  batch [ts, events, dp_rank]; BlockStored adds medium,
 *               lora_name (8 fields; 12, with extra_keys = nil, when group_idx
 *               or a kv_cache_spec_* field is set); BlockRemoved [tag, hashes,
 *               medium (, group_idx)]
 *   vllm-map    as vllm-array but every event is a map led by "type"; the
 *               fields without a default are always written (nil as nil),
 *               group_idx and kv_cache_spec_* only when set
 *   sim-legacy  llm-d-inference-sim's arrays: BlockStored has 9 fields, tag,
 *               hashes (always uint64 `cf`), parent (`cf`; no parent -> 0),
 *               tokens (always uint32 `ce`), block_size, lora_id, medium
 *               ("GPU" when unset), lora_name, nil; BlockRemoved [tag, hashes,
 *               medium]
 *   sim-map     the sim's maps: like sim-legacy's widths, parent nil when
 *               unset, lora_id and lora_name omitted when unset
 *   sglang      vllm-0.9's events plus medium when set; batch [ts, events,
 *               attn_dp_rank]
 *
 *   AllBlocksCleared is [tag] or {type = tag} everywhere.  Integers are
 *   written in their most compact form except where a producer uses fixed
 *   widths (the sim's hashes and tokens); floats as float64.  ts defaults to
 *   the current time; dp_rank to 0 (sglang: nil).  An unset block_size is
 *   nil, or 0 in the sim dialects (a Go int).  Invalid batches raise.
 *
 * kv.events.decode(bytes [, {profile = "tolerant" | "kthena"}])
 *     -> batch, dialect | nil, err
 *   Reads any producer's payload; see kv_events_decode.c for the profiles
 *   (the "kthena" one says whether Kthena's runtime would accept it) and how
 *   the dialect is named.
 *
 * kv.events.dialects is the list of dialect names.
 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <msgpack.h>

#include "kv.h"

const char *const kv_dialect_names[] = {"vllm-0.9", "vllm-array", "vllm-map", "sim-legacy",
                                        "sim-map",  "sglang",     NULL};

enum { K_STORED, K_REMOVED, K_CLEARED };
static const char *const kind_names[] = {"stored", "removed", "cleared", NULL};

#define OUTBUF_MT "kvengine.kv.outbuf"

/* ------------------------------------------------------ output buffer */

static int outbuf_gc(lua_State *L) {
  kv_buf_free(luaL_checkudata(L, 1, OUTBUF_MT));
  return 0;
}

kv_buf *kv_outbuf_new(lua_State *L) {
  kv_buf *ob = lua_newuserdatauv(L, sizeof *ob, 0);
  memset(ob, 0, sizeof *ob);
  luaL_setmetatable(L, OUTBUF_MT);
  return ob;
}

/* msgpack_packer_write callback: append, remembering an allocation failure. */
static int outbuf_write(void *data, const char *buf, size_t len) {
  kv_buf *ob = data;
  return ob->oom ? -1 : kv_buf_add(ob, buf, len);
}

/* ------------------------------------------------------- constructors */

/* Raise when the table at index t has a `kind` other than `kind`. */
static void check_kind(lua_State *L, int t, const char *who, const char *kind) {
  int ty = lua_getfield(L, t, "kind");
  if (ty != LUA_TNIL && (ty != LUA_TSTRING || strcmp(lua_tostring(L, -1), kind) != 0))
    luaL_error(L, "%s: kind must be \"%s\" (or absent)", who, kind);
  lua_pop(L, 1);
}

/* Copy field `name` (a list of uint64) of table t to a new list at dst. */
static void copy_hashes(lua_State *L, int t, int dst, const char *who) {
  if (lua_getfield(L, t, "hashes") != LUA_TTABLE)
    luaL_error(L, "%s: hashes must be a list of uint64 (integers or decimal strings)", who);
  int src = lua_gettop(L);
  lua_Integer n = (lua_Integer)lua_rawlen(L, src);
  lua_createtable(L, (int)(n < 1 << 20 ? n : 1 << 20), 0);
  for (lua_Integer i = 1; i <= n; i++) {
    uint64_t h = 0;
    lua_rawgeti(L, src, i);
    if (!kv_to_u64(L, -1, &h))
      luaL_error(L, "%s: hashes[%I] is not a uint64 (an integer or unsigned decimal string)", who,
                 (LUAI_UACINT)i);
    lua_pop(L, 1);
    lua_pushinteger(L, (lua_Integer)h);
    lua_rawseti(L, -2, i);
  }
  lua_setfield(L, dst, "hashes");
  lua_pop(L, 1);
}

/* Copy an optional integer field; raise when it is present and not one. */
static void copy_opt_int(lua_State *L, int t, int dst, const char *name, const char *who,
                         int has_default, lua_Integer dflt) {
  int ty = lua_getfield(L, t, name);
  if (ty == LUA_TNIL) {
    lua_pop(L, 1);
    if (has_default) {
      lua_pushinteger(L, dflt);
      lua_setfield(L, dst, name);
    }
    return;
  }
  int isint = 0;
  lua_Integer v = lua_tointegerx(L, -1, &isint);
  if (ty != LUA_TNUMBER || !isint)
    luaL_error(L, "%s: %s must be an integer", who, name);
  lua_pop(L, 1);
  lua_pushinteger(L, v);
  lua_setfield(L, dst, name);
}

/* Copy an optional string field; `medium` style: false means none. */
static void copy_opt_str(lua_State *L, int t, int dst, const char *name, const char *who,
                         const char *dflt) {
  int ty = lua_getfield(L, t, name);
  if (ty == LUA_TNIL && dflt != NULL) {
    lua_pop(L, 1);
    lua_pushstring(L, dflt);
    lua_setfield(L, dst, name);
    return;
  }
  if (ty == LUA_TNIL || (ty == LUA_TBOOLEAN && !lua_toboolean(L, -1) && dflt != NULL)) {
    lua_pop(L, 1);
    return;
  }
  if (ty != LUA_TSTRING)
    luaL_error(L, "%s: %s must be a string%s", who, name, dflt ? " (or false for none)" : "");
  lua_setfield(L, dst, name);
}

/*
 * The start of kv.stored and kv.removed: check the table at 1 (its fields,
 * and a kind that is absent or `kind`), push the event with its kind and
 * hashes; returns its index.
 */
static int new_event(lua_State *L, const char *who, const char *kind, const char *const *fields) {
  luaL_checktype(L, 1, LUA_TTABLE);
  kv_check_options(L, 1, who, fields);
  check_kind(L, 1, who, kind);
  lua_createtable(L, 0, 10);
  int ev = lua_gettop(L);
  lua_pushstring(L, kind);
  lua_setfield(L, ev, "kind");
  copy_hashes(L, 1, ev, who);
  return ev;
}

/*
 * kv.stored{hashes=, tokens=, block_size=, parent=, lora_id=, lora_name=,
 * medium=, group_idx=, kv_cache_spec_kind=, kv_cache_spec_sliding_window=}
 * -> a BlockStored event table (see the top of the file for defaults).
 */
static const char *const stored_fields[] = {"hashes",
                                            "tokens",
                                            "block_size",
                                            "parent",
                                            "lora_id",
                                            "lora_name",
                                            "medium",
                                            "group_idx",
                                            "kv_cache_spec_kind",
                                            "kv_cache_spec_sliding_window",
                                            "kind",
                                            NULL};
static const char *const removed_fields[] = {"hashes", "medium", "group_idx", "kind", NULL};
static const char *const cleared_fields[] = {"kind", NULL};

const kv_option_keys kv_event_options[] = {{"stored", stored_fields},
                                           {"removed", removed_fields},
                                           {"cleared", cleared_fields},
                                           {NULL, NULL}};

int kv_stored(lua_State *L) {
  const char *who = "kv.stored";
  int ev = new_event(L, who, "stored", stored_fields);

  int ty = lua_getfield(L, 1, "tokens");
  if (ty != LUA_TNIL && ty != LUA_TTABLE)
    luaL_error(L, "%s: tokens must be a list of uint32 token ids", who);
  lua_Integer n = ty == LUA_TTABLE ? (lua_Integer)lua_rawlen(L, -1) : 0;
  lua_createtable(L, (int)(n < 1 << 20 ? n : 1 << 20), 0);
  for (lua_Integer i = 1; i <= n; i++) {
    uint32_t tok = 0;
    lua_rawgeti(L, -2, i);
    if (!kv_to_token(L, -1, &tok))
      luaL_error(L, "%s: tokens[%I] is not a uint32 token id", who, (LUAI_UACINT)i);
    lua_pop(L, 1);
    lua_pushinteger(L, tok);
    lua_rawseti(L, -2, i);
  }
  lua_setfield(L, ev, "tokens");
  lua_pop(L, 1);

  copy_opt_int(L, 1, ev, "block_size", who, 1, 16);
  if (lua_getfield(L, 1, "parent") != LUA_TNIL) {
    uint64_t h = 0;
    if (!kv_to_u64(L, -1, &h))
      luaL_error(L, "%s: parent must be a uint64 (an integer or unsigned decimal string)", who);
    lua_pushinteger(L, (lua_Integer)h);
    lua_setfield(L, ev, "parent");
  }
  lua_pop(L, 1);
  copy_opt_int(L, 1, ev, "lora_id", who, 0, 0);
  copy_opt_str(L, 1, ev, "lora_name", who, NULL);
  copy_opt_str(L, 1, ev, "medium", who, "GPU");
  copy_opt_int(L, 1, ev, "group_idx", who, 0, 0);
  copy_opt_str(L, 1, ev, "kv_cache_spec_kind", who, NULL);
  copy_opt_int(L, 1, ev, "kv_cache_spec_sliding_window", who, 0, 0);
  return 1;
}

/* kv.removed{hashes=, medium=, group_idx=} -> a BlockRemoved event table. */
int kv_removed(lua_State *L) {
  const char *who = "kv.removed";
  int ev = new_event(L, who, "removed", removed_fields);
  copy_opt_str(L, 1, ev, "medium", who, "GPU");
  copy_opt_int(L, 1, ev, "group_idx", who, 0, 0);
  return 1;
}

/* kv.cleared([{}]) -> an AllBlocksCleared event table. */
int kv_cleared(lua_State *L) {
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    kv_check_options(L, 1, "kv.cleared", cleared_fields);
    check_kind(L, 1, "kv.cleared", "cleared");
  }
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "cleared");
  lua_setfield(L, -2, "kind");
  return 1;
}

/* ------------------------------------------------------------- encode */

/* The fields of one event table, read and checked before packing. */
typedef struct {
  int kind;
  int evno;   /* 1-based position in batch.events, for messages */
  int hashes; /* stack index of the hashes list */
  int tokens; /* stack index of the tokens list, 0 if none */
  int has_parent, has_block_size, has_lora_id, has_group_idx, has_window;
  uint64_t parent;
  lua_Integer block_size, lora_id, group_idx, window;
  const char *medium, *lora_name, *spec_kind; /* NULL when unset */
  size_t medium_len, lora_name_len, spec_kind_len;
} ev_fields;

static int encode_error(lua_State *L, const ev_fields *f, const char *fmt, const char *what) {
  return luaL_error(L, "kv.events.encode: events[%d]: %s %s", f->evno, what, fmt);
}

static void read_opt_int(lua_State *L, int t, const char *name, const ev_fields *f, int *has,
                         lua_Integer *v) {
  int ty = lua_getfield(L, t, name);
  *has = 0;
  if (ty != LUA_TNIL) {
    int isint = 0;
    *v = lua_tointegerx(L, -1, &isint);
    if (ty != LUA_TNUMBER || !isint)
      encode_error(L, f, "must be an integer or nil", name);
    *has = 1;
  }
  lua_pop(L, 1);
}

/* The string stays alive: the event table, reachable from the batch, holds it. */
static void read_opt_str(lua_State *L, int t, const char *name, const ev_fields *f, const char **s,
                         size_t *len) {
  int ty = lua_getfield(L, t, name);
  *s = NULL;
  *len = 0;
  if (ty == LUA_TSTRING)
    *s = lua_tolstring(L, -1, len);
  else if (ty != LUA_TNIL)
    encode_error(L, f, "must be a string or nil", name);
  lua_pop(L, 1);
}

/*
 * Read and check the event table at index t.  Leaves the hashes list (and
 * the tokens list, when present) pushed on the stack; the caller pops them.
 */
static void read_event(lua_State *L, int t, int evno, ev_fields *f) {
  memset(f, 0, sizeof *f);
  f->evno = evno;
  if (lua_getfield(L, t, "kind") != LUA_TSTRING)
    encode_error(L, f, "must be \"stored\", \"removed\" or \"cleared\" (use kv.stored etc.)",
                 "kind");
  const char *kind = lua_tostring(L, -1);
  f->kind = -1;
  for (int k = 0; kind_names[k] != NULL; k++)
    if (strcmp(kind, kind_names[k]) == 0)
      f->kind = k;
  if (f->kind < 0)
    luaL_error(L, "kv.events.encode: events[%d]: cannot encode an event of kind '%s'", evno, kind);
  lua_pop(L, 1);
  if (f->kind == K_CLEARED)
    return;
  if (lua_getfield(L, t, "hashes") != LUA_TTABLE)
    encode_error(L, f, "must be a list of uint64", "hashes");
  f->hashes = lua_gettop(L);
  read_opt_str(L, t, "medium", f, &f->medium, &f->medium_len);
  read_opt_int(L, t, "group_idx", f, &f->has_group_idx, &f->group_idx);
  if (f->kind == K_REMOVED)
    return;
  int ty = lua_getfield(L, t, "tokens");
  if (ty == LUA_TTABLE)
    f->tokens = lua_gettop(L);
  else if (ty == LUA_TNIL)
    lua_pop(L, 1);
  else
    encode_error(L, f, "must be a list of uint32 token ids", "tokens");
  if (lua_getfield(L, t, "parent") != LUA_TNIL) {
    if (!kv_to_u64(L, -1, &f->parent))
      encode_error(L, f, "must be a uint64 or nil", "parent");
    f->has_parent = 1;
  }
  lua_pop(L, 1);
  read_opt_int(L, t, "block_size", f, &f->has_block_size, &f->block_size);
  read_opt_int(L, t, "lora_id", f, &f->has_lora_id, &f->lora_id);
  read_opt_str(L, t, "lora_name", f, &f->lora_name, &f->lora_name_len);
  read_opt_str(L, t, "kv_cache_spec_kind", f, &f->spec_kind, &f->spec_kind_len);
  read_opt_int(L, t, "kv_cache_spec_sliding_window", f, &f->has_window, &f->window);
}

static void pk_str(msgpack_packer *pk, const char *s, size_t n) {
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s, n);
}

static void pk_cstr(msgpack_packer *pk, const char *s) { pk_str(pk, s, strlen(s)); }

static void pk_opt_str(msgpack_packer *pk, const char *s, size_t n) {
  if (s != NULL)
    pk_str(pk, s, n);
  else
    msgpack_pack_nil(pk);
}

static void pk_opt_int(msgpack_packer *pk, int has, lua_Integer v) {
  if (has)
    msgpack_pack_int64(pk, v);
  else
    msgpack_pack_nil(pk);
}

/* A hash: compact (msgspec) or always 9-byte uint64 (Go's uint64). */
static void pk_hash(msgpack_packer *pk, uint64_t h, int fixed) {
  if (fixed)
    msgpack_pack_fix_uint64(pk, h);
  else
    msgpack_pack_uint64(pk, h);
}

static void pk_hash_list(lua_State *L, msgpack_packer *pk, const ev_fields *f, int fixed) {
  assert(f->hashes > 0); /* read_event checked the event has a hash list */
  size_t n = lua_rawlen(L, f->hashes);
  msgpack_pack_array(pk, n);
  for (size_t i = 1; i <= n; i++) {
    uint64_t h = 0;
    lua_rawgeti(L, f->hashes, (lua_Integer)i);
    if (!kv_to_u64(L, -1, &h))
      luaL_error(L, "kv.events.encode: events[%d]: hashes[%d] is not a uint64", f->evno, (int)i);
    lua_pop(L, 1);
    pk_hash(pk, h, fixed);
  }
}

/* Token ids: compact, or always 5-byte uint32 (Go's []uint32). */
static void pk_token_list(lua_State *L, msgpack_packer *pk, const ev_fields *f, int fixed) {
  size_t n = f->tokens ? lua_rawlen(L, f->tokens) : 0;
  msgpack_pack_array(pk, n);
  for (size_t i = 1; i <= n; i++) {
    uint32_t tok = 0;
    lua_rawgeti(L, f->tokens, (lua_Integer)i);
    if (!kv_to_token(L, -1, &tok))
      luaL_error(L, "kv.events.encode: events[%d]: tokens[%d] is not a uint32 token id", f->evno,
                 (int)i);
    lua_pop(L, 1);
    if (fixed)
      msgpack_pack_fix_uint32(pk, tok);
    else
      msgpack_pack_uint32(pk, tok);
  }
}

static void pack_stored_array(lua_State *L, msgpack_packer *pk, const ev_fields *f, kv_dialect d) {
  int sim = d == KV_SIM_LEGACY;
  int later = f->has_group_idx || f->spec_kind != NULL || f->has_window;
  size_t n = 8;
  if (d == KV_VLLM09)
    n = 6;
  else if (d == KV_SGLANG)
    n = f->medium ? 7 : 6;
  else if (d == KV_SIM_LEGACY)
    n = 9;
  else if (later)
    n = 12;
  msgpack_pack_array(pk, n);
  pk_cstr(pk, "BlockStored");
  pk_hash_list(L, pk, f, sim);
  if (sim)
    msgpack_pack_fix_uint64(pk, f->has_parent ? f->parent : 0);
  else if (f->has_parent)
    pk_hash(pk, f->parent, 0);
  else
    msgpack_pack_nil(pk);
  pk_token_list(L, pk, f, sim);
  if (sim)
    msgpack_pack_int64(pk, f->has_block_size ? f->block_size : 0);
  else
    pk_opt_int(pk, f->has_block_size, f->block_size);
  pk_opt_int(pk, f->has_lora_id, f->lora_id);
  switch (d) {
  case KV_VLLM09:
    return;
  case KV_SGLANG:
    if (f->medium)
      pk_str(pk, f->medium, f->medium_len);
    return;
  case KV_SIM_LEGACY:
    if (f->medium)
      pk_str(pk, f->medium, f->medium_len);
    else
      pk_cstr(pk, "GPU");
    pk_opt_str(pk, f->lora_name, f->lora_name_len);
    msgpack_pack_nil(pk); /* extra_keys */
    return;
  default: /* vllm-array */
    pk_opt_str(pk, f->medium, f->medium_len);
    pk_opt_str(pk, f->lora_name, f->lora_name_len);
    if (later) {
      msgpack_pack_nil(pk); /* extra_keys */
      pk_opt_int(pk, f->has_group_idx, f->group_idx);
      pk_opt_str(pk, f->spec_kind, f->spec_kind_len);
      pk_opt_int(pk, f->has_window, f->window);
    }
    return;
  }
}

static void pack_stored_map(lua_State *L, msgpack_packer *pk, const ev_fields *f, kv_dialect d) {
  int sim = d == KV_SIM_MAP;
  size_t n = 5;
  if (sim)
    n += 1 + (f->has_lora_id != 0) + (f->lora_name != NULL);
  else
    n += 3 + (f->has_group_idx != 0) + (f->spec_kind != NULL) + (f->has_window != 0);
  msgpack_pack_map(pk, n);
  pk_cstr(pk, "type");
  pk_cstr(pk, "BlockStored");
  pk_cstr(pk, "block_hashes");
  pk_hash_list(L, pk, f, sim);
  pk_cstr(pk, "parent_block_hash");
  if (f->has_parent)
    pk_hash(pk, f->parent, sim);
  else
    msgpack_pack_nil(pk);
  pk_cstr(pk, "token_ids");
  pk_token_list(L, pk, f, sim);
  pk_cstr(pk, "block_size");
  if (sim)
    msgpack_pack_int64(pk, f->has_block_size ? f->block_size : 0);
  else
    pk_opt_int(pk, f->has_block_size, f->block_size);
  if (sim) {
    if (f->has_lora_id) {
      pk_cstr(pk, "lora_id");
      msgpack_pack_int64(pk, f->lora_id);
    }
    pk_cstr(pk, "medium");
    if (f->medium)
      pk_str(pk, f->medium, f->medium_len);
    else
      pk_cstr(pk, "GPU");
    if (f->lora_name) {
      pk_cstr(pk, "lora_name");
      pk_str(pk, f->lora_name, f->lora_name_len);
    }
    return;
  }
  pk_cstr(pk, "lora_id");
  pk_opt_int(pk, f->has_lora_id, f->lora_id);
  pk_cstr(pk, "medium");
  pk_opt_str(pk, f->medium, f->medium_len);
  pk_cstr(pk, "lora_name");
  pk_opt_str(pk, f->lora_name, f->lora_name_len);
  if (f->has_group_idx) {
    pk_cstr(pk, "group_idx");
    msgpack_pack_int64(pk, f->group_idx);
  }
  if (f->spec_kind) {
    pk_cstr(pk, "kv_cache_spec_kind");
    pk_str(pk, f->spec_kind, f->spec_kind_len);
  }
  if (f->has_window) {
    pk_cstr(pk, "kv_cache_spec_sliding_window");
    msgpack_pack_int64(pk, f->window);
  }
}

static void pack_removed(lua_State *L, msgpack_packer *pk, const ev_fields *f, kv_dialect d) {
  const char *medium = f->medium;
  size_t mlen = f->medium_len;
  if (medium == NULL && (d == KV_SIM_LEGACY || d == KV_SIM_MAP)) {
    medium = "GPU";
    mlen = 3;
  }
  switch (d) {
  case KV_VLLM_MAP:
  case KV_SIM_MAP: {
    int gi = d == KV_VLLM_MAP && f->has_group_idx;
    msgpack_pack_map(pk, 3 + (size_t)gi);
    pk_cstr(pk, "type");
    pk_cstr(pk, "BlockRemoved");
    pk_cstr(pk, "block_hashes");
    pk_hash_list(L, pk, f, d == KV_SIM_MAP);
    pk_cstr(pk, "medium");
    pk_opt_str(pk, medium, mlen);
    if (gi) {
      pk_cstr(pk, "group_idx");
      msgpack_pack_int64(pk, f->group_idx);
    }
    return;
  }
  case KV_VLLM09:
    msgpack_pack_array(pk, 2);
    break;
  case KV_SGLANG:
    msgpack_pack_array(pk, medium ? 3 : 2);
    break;
  case KV_SIM_LEGACY:
    msgpack_pack_array(pk, 3);
    break;
  case KV_VLLM_ARRAY:
    msgpack_pack_array(pk, f->has_group_idx ? 4 : 3);
    break;
  }
  pk_cstr(pk, "BlockRemoved");
  pk_hash_list(L, pk, f, d == KV_SIM_LEGACY);
  if (d == KV_VLLM09 || (d == KV_SGLANG && medium == NULL))
    return;
  pk_opt_str(pk, medium, mlen);
  if (d == KV_VLLM_ARRAY && f->has_group_idx)
    msgpack_pack_int64(pk, f->group_idx);
}

static void pack_event(lua_State *L, msgpack_packer *pk, const ev_fields *f, kv_dialect d) {
  int map = d == KV_VLLM_MAP || d == KV_SIM_MAP;
  switch (f->kind) {
  case K_STORED:
    if (map)
      pack_stored_map(L, pk, f, d);
    else
      pack_stored_array(L, pk, f, d);
    return;
  case K_REMOVED:
    pack_removed(L, pk, f, d);
    return;
  default:
    assert(f->kind == K_CLEARED);
    if (map) {
      msgpack_pack_map(pk, 1);
      pk_cstr(pk, "type");
    } else {
      msgpack_pack_array(pk, 1);
    }
    pk_cstr(pk, "AllBlocksCleared");
    return;
  }
}

static double wall_clock(void) {
  struct timespec ts;
  if (timespec_get(&ts, TIME_UTC) != TIME_UTC)
    return 0.0;
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void kv_encode_batch(lua_State *L, int b, kv_dialect d, kv_buf *ob) {
  msgpack_packer pk;
  int top = lua_gettop(L);
  double ts = 0.0;
  int has_rank;
  lua_Integer rank;

  ob->len = 0;
  ob->oom = 0;
  msgpack_packer_init(&pk, ob, outbuf_write);
  if (lua_getfield(L, b, "ts") == LUA_TNIL)
    ts = wall_clock();
  else if (lua_type(L, -1) == LUA_TNUMBER)
    ts = lua_tonumber(L, -1);
  else
    luaL_error(L, "kv.events.encode: batch.ts must be a number (epoch seconds)");
  if (lua_getfield(L, b, "events") != LUA_TTABLE)
    luaL_error(L, "kv.events.encode: batch.events must be a list of events");
  int events = lua_gettop(L);
  int ty = lua_getfield(L, b, "dp_rank");
  has_rank = ty != LUA_TNIL;
  if (has_rank) {
    int isint = 0;
    rank = lua_tointegerx(L, -1, &isint);
    if (ty != LUA_TNUMBER || !isint)
      luaL_error(L, "kv.events.encode: batch.dp_rank must be an integer or nil");
  } else {
    has_rank = d != KV_SGLANG; /* the others fill in their rank, 0 by default */
    rank = 0;
  }

  size_t n = lua_rawlen(L, events);
  if (n > INT32_MAX)
    luaL_error(L, "kv.events.encode: too many events");
  msgpack_pack_array(&pk, d == KV_VLLM09 ? 2 : 3);
  msgpack_pack_double(&pk, ts);
  msgpack_pack_array(&pk, n);
  for (size_t i = 1; i <= n; i++) {
    ev_fields f;
    int base = lua_gettop(L);
    if (lua_rawgeti(L, events, (lua_Integer)i) != LUA_TTABLE)
      luaL_error(L, "kv.events.encode: events[%d] is not an event table", (int)i);
    read_event(L, base + 1, (int)i, &f);
    pack_event(L, &pk, &f, d);
    lua_settop(L, base);
  }
  if (d != KV_VLLM09)
    pk_opt_int(&pk, has_rank, rank);
  if (ob->oom)
    luaL_error(L, "kv.events.encode: not enough memory");
  lua_settop(L, top);
}

/* kv.events.encode(batch [, dialect]) -> bytes.  Raises on a bad batch. */
int kv_events_encode(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  kv_dialect d = (kv_dialect)luaL_checkoption(L, 2, "vllm-array", kv_dialect_names);
  lua_settop(L, 2);
  kv_buf *ob = kv_outbuf_new(L);
  kv_encode_batch(L, 1, d, ob);
  lua_pushlstring(L, ob->p, ob->len);
  return 1;
}

void kv_events_open(lua_State *L) { kv_class_new(L, OUTBUF_MT, NULL, outbuf_gc, NULL); }
