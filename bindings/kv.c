/*
 * kv.c - the `kv` Lua module: KV-cache facts as Kthena computes them.
 *
 * Pure functions, no I/O and no loop: scenarios and the stand-in servers use
 * them to name the blocks a prompt covers, exactly as the Kthena router and
 * runtime do, and to build and read the KV events an inference engine sends.
 *
 *   kv.block_hash(tokens) -> h
 *   kv.block_hashes(tokens, {block_size = 16, max_blocks = 128}) -> {h, ...}
 *       Kthena's "standardized" block hash: SHA-256 over the chunk's tokens,
 *       each a 4-byte big-endian uint32; the first 8 digest bytes read
 *       big-endian, top bit cleared.  An empty chunk hashes to 0.  Chunks are
 *       consecutive and independent (no parent chaining); the final partial
 *       chunk is kept; at most max_blocks chunks.  Options <= 0 or absent
 *       mean the defaults.
 *   kv.block_key(model, h) -> "matrix:kv:block:<model>@<unsigned decimal>"
 *   kv.block_key_prefix([model]) -> "matrix:kv:block:<model>@", or
 *       "matrix:kv:block:" without a model (for SCAN patterns)
 *   kv.mapping_key(engine, owner, h) -> "<engine>:kv:block:<owner>@<unsigned
 *       decimal>": the runtime's engine-hash mapping (engine "vllm"|"sglang")
 *   kv.mapping_key_prefix(engine, owner) -> "<engine>:kv:block:<owner>@"
 *   kv.owner(pod, namespace) -> "<pod>.<namespace>"
 *   kv.topic(ip, model [, port]) -> "kv@<ip>[:<port>]@<model>": the topic
 *       llm-d-inference-sim publishes its events under
 *   kv.u64(x)   integer (any 64 bits) -> unsigned decimal string (kv_u64.c);
 *               unsigned decimal string -> the integer with the same bits.
 *               Raises on anything else (junk, sign, overflow, fraction).
 *   kv.tokenize, kv.tokenize_chat               (kv_tokenize.c)
 *   kv.stored, kv.removed, kv.cleared, kv.events (kv_events.c)
 *
 * A uint64 is carried as the Lua integer with the same 64 bits, so hashes at
 * or above 2^63 read as negative integers; compare them with math.ult.
 * Wherever a hash is taken, its unsigned decimal string is accepted too.
 */
#include <assert.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <openssl/evp.h>

#include "kv.h"

#include <msgpack.h>
#include <openssl/crypto.h>

_Static_assert(sizeof(lua_Integer) == 8, "kv needs 64-bit Lua integers");

enum { DEFAULT_BLOCK_SIZE = 16, DEFAULT_MAX_BLOCKS = 128 };

#define SHA256_MT "kvengine.kv.sha256"

/* Like kv_to_u64 for argument arg; raises a usage error otherwise. */
static uint64_t check_u64_arg(lua_State *L, int arg) {
  uint64_t v = 0;
  if (!kv_to_u64(L, arg, &v))
    luaL_argerror(L, arg, "expected a uint64 (an integer or an unsigned decimal string)");
  return v;
}

/*
 * kv.u64(x): integer -> unsigned decimal string; string -> integer.
 * A float with an exact integer value counts as that integer.  Anything else,
 * including a string that is not a plain unsigned decimal below 2^64, raises.
 */
static int l_u64(lua_State *L) {
  uint64_t v = 0;
  switch (lua_type(L, 1)) {
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, 1, &len);
    if (!kv_parse_u64(s, len, &v))
      return luaL_error(L, "kv.u64: not an unsigned 64-bit decimal: '%s'", s);
    lua_pushinteger(L, (lua_Integer)v);
    return 1;
  }
  case LUA_TNUMBER:
    if (!kv_to_u64(L, 1, &v))
      return luaL_argerror(L, 1, "number has no exact 64-bit integer value");
    kv_push_u64_string(L, v);
    return 1;
  default:
    return luaL_typeerror(L, 1, "integer or string");
  }
}

/* ------------------------------------------------------------ hashing */

/*
 * Serialize tokens[first+1 .. first+n] of the table at index t as big-endian
 * uint32 into out (4*n bytes).  Raises, naming the argument, on a bad token.
 */
static void read_tokens(lua_State *L, int t, lua_Integer first, lua_Integer n, unsigned char *out) {
  assert(first >= 0 && n >= 0);
  for (lua_Integer i = 0; i < n; i++) {
    uint32_t tok = 0;
    lua_rawgeti(L, t, first + i + 1);
    if (!kv_to_token(L, -1, &tok)) {
      const char *msg = lua_pushfstring(L, "tokens[%I] is not a uint32 token id (got %s)",
                                        (LUAI_UACINT)(first + i + 1), luaL_typename(L, -1));
      luaL_argerror(L, t, msg);
    }
    lua_pop(L, 1);
    out[4 * i] = (unsigned char)(tok >> 24);
    out[4 * i + 1] = (unsigned char)(tok >> 16);
    out[4 * i + 2] = (unsigned char)(tok >> 8);
    out[4 * i + 3] = (unsigned char)tok;
  }
}

/* The first 8 bytes of a SHA-256 digest, big-endian, top bit cleared. */
static uint64_t digest_to_hash(const unsigned char *md) {
  uint64_t h = 0;
  for (int i = 0; i < 8; i++)
    h = (h << 8) | md[i];
  return h & UINT64_C(0x7FFFFFFFFFFFFFFF);
}

/*
 * The SHA-256 implementation, fetched once, and a digest context reused by
 * every call: an upvalue of the module's functions, freed by its __gc.
 */
typedef struct {
  EVP_MD *md;
  EVP_MD_CTX *ctx;
} sha256_box;

static int sha256_gc(lua_State *L) {
  sha256_box *box = luaL_checkudata(L, 1, SHA256_MT);
  EVP_MD_CTX_free(box->ctx);
  EVP_MD_free(box->md);
  box->ctx = NULL;
  box->md = NULL;
  return 0;
}

/*
 * Hash `nblocks` consecutive chunks of `block_size` tokens (the last one may
 * be shorter) from the serialized buffer buf of ntok tokens into hashes[].
 * Returns 0, or -1 when libcrypto fails.  No Lua call happens in between, so
 * nothing can re-enter the shared context.
 */
static int hash_chunks(sha256_box *box, const unsigned char *buf, size_t ntok, size_t block_size,
                       size_t nblocks, uint64_t *hashes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int mdlen = 0;
  assert(block_size > 0);
  for (size_t b = 0; b < nblocks; b++) {
    size_t start = b * block_size;
    assert(start <= ntok); /* no chunk starts past the tokens: ntok - start is a size */
    size_t len = ntok - start < block_size ? ntok - start : block_size;
    if (len == 0) {
      hashes[b] = 0;
      continue;
    }
    if (EVP_DigestInit_ex(box->ctx, box->md, NULL) != 1 ||
        EVP_DigestUpdate(box->ctx, buf + 4 * start, 4 * len) != 1 ||
        EVP_DigestFinal_ex(box->ctx, md, &mdlen) != 1 || mdlen < 8)
      return -1;
    hashes[b] = digest_to_hash(md);
  }
  return 0;
}

/* Option `name` of the table at index opts as a positive count, or dflt. */
static lua_Integer opt_count(lua_State *L, int opts, const char *name, lua_Integer dflt) {
  lua_Integer v = dflt;
  if (lua_isnoneornil(L, opts))
    return dflt;
  if (lua_getfield(L, opts, name) != LUA_TNIL) {
    int isint = 0;
    v = lua_tointegerx(L, -1, &isint);
    if (!isint) {
      const char *msg = lua_pushfstring(L, "option '%s' must be an integer", name);
      luaL_argerror(L, opts, msg);
    }
    if (v <= 0)
      v = dflt;
  }
  lua_pop(L, 1);
  return v;
}

/*
 * Common body of block_hash and block_hashes: hash the tokens at arg 1 in
 * chunks and push the hashes as a sequence (as_list) or the single hash.
 */
static int push_block_hashes(lua_State *L, lua_Integer block_size, lua_Integer max_blocks,
                             int as_list) {
  luaL_checktype(L, 1, LUA_TTABLE);
  assert(block_size > 0 && max_blocks > 0); /* opt_count gives positive counts */
  lua_Integer ntok = (lua_Integer)lua_rawlen(L, 1);
  lua_Integer nblocks = ntok / block_size + (ntok % block_size != 0);
  lua_Integer used = ntok;
  if (!as_list) {
    nblocks = 1; /* one chunk of all tokens; the empty chunk hashes to 0 */
  } else if (nblocks > max_blocks) {
    nblocks = max_blocks; /* then max_blocks * block_size <= ntok: no overflow */
    used = max_blocks * block_size;
  }
  if ((uint64_t)used > SIZE_MAX / 4 - 1 || (uint64_t)nblocks > SIZE_MAX / 8 - 1)
    return luaL_error(L, "kv: token list too long");
  assert(used >= 0 && used <= ntok && nblocks >= 0);

  /* One GC-owned scratch area: serialized tokens, then the hashes. */
  size_t tokbytes = (size_t)used * 4;
  unsigned char *scratch = lua_newuserdatauv(L, tokbytes + (size_t)nblocks * 8 + 8, 0);
  uint64_t *hashes = (uint64_t *)(void *)(scratch + ((tokbytes + 7) & ~(size_t)7));
  read_tokens(L, 1, 0, used, scratch);
  sha256_box *box = lua_touserdata(L, lua_upvalueindex(1));
  if (hash_chunks(box, scratch, (size_t)used, (size_t)block_size, (size_t)nblocks, hashes) != 0)
    return luaL_error(L, "kv: SHA-256 failed in libcrypto");
  if (!as_list) {
    lua_pushinteger(L, (lua_Integer)hashes[0]);
    return 1;
  }
  lua_createtable(L, (int)nblocks, 0);
  for (lua_Integer b = 0; b < nblocks; b++) {
    lua_pushinteger(L, (lua_Integer)hashes[b]);
    lua_rawseti(L, -2, b + 1);
  }
  return 1;
}

/* kv.block_hash(tokens): the hash of all tokens as one chunk (empty -> 0). */
static int l_block_hash(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  return push_block_hashes(L, n > 0 ? n : 1, 1, 0);
}

static const char *const block_hashes_keys[] = {"block_size", "max_blocks", NULL};

/* kv.block_hashes(tokens [, opts]): the router's chunked hashes. */
static int l_block_hashes(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  if (!lua_isnoneornil(L, 2))
    luaL_checktype(L, 2, LUA_TTABLE);
  kv_check_options(L, 2, "kv.block_hashes", block_hashes_keys);
  lua_Integer bs = opt_count(L, 2, "block_size", DEFAULT_BLOCK_SIZE);
  lua_Integer mb = opt_count(L, 2, "max_blocks", DEFAULT_MAX_BLOCKS);
  return push_block_hashes(L, bs, mb, 1);
}

/* -------------------------------------------------------------- keys */

/* Push prefix .. tail .. "@" (no tail when tail is NULL). */
static void push_key_prefix(lua_State *L, const char *prefix, const char *tail) {
  if (tail)
    lua_pushfstring(L, "%s%s@", prefix, tail);
  else
    lua_pushstring(L, prefix);
}

/* Push the key prefix at the top of the stack followed by the unsigned
 * decimal of the hash at argument `arg`, replacing the prefix. */
static int push_hash_key(lua_State *L, int arg) {
  uint64_t h = check_u64_arg(L, arg);
  kv_push_u64_string(L, h);
  lua_concat(L, 2);
  return 1;
}

/* kv.block_key(model, hash): the router's Redis key of one block. */
static int l_block_key(lua_State *L) {
  push_key_prefix(L, "matrix:kv:block:", luaL_checkstring(L, 1));
  return push_hash_key(L, 2);
}

/* kv.block_key_prefix([model]): what every block key of a model (or of
 * every model) begins with. */
static int l_block_key_prefix(lua_State *L) {
  push_key_prefix(L, "matrix:kv:block:", luaL_optstring(L, 1, NULL));
  return 1;
}

/* The runtime's mapping keys: "<engine>:kv:block:<owner>@". */
static void push_mapping_prefix(lua_State *L) {
  const char *engine = luaL_checkstring(L, 1);
  const char *owner = luaL_checkstring(L, 2);
  lua_pushfstring(L, "%s:kv:block:%s@", engine, owner);
}

/* kv.mapping_key(engine, owner, hash): the runtime's key from an engine's
 * block hash to Kthena's. */
static int l_mapping_key(lua_State *L) {
  push_mapping_prefix(L);
  return push_hash_key(L, 3);
}

/* kv.mapping_key_prefix(engine, owner): what every mapping key of one pod
 * begins with. */
static int l_mapping_key_prefix(lua_State *L) {
  push_mapping_prefix(L);
  return 1;
}

/* kv.owner(pod, namespace): the field the runtime writes, "pod.namespace". */
static int l_owner(lua_State *L) {
  const char *pod = luaL_checkstring(L, 1);
  const char *ns = luaL_checkstring(L, 2);
  lua_pushfstring(L, "%s.%s", pod, ns);
  return 1;
}

/* kv.topic(ip, model [, port]): the sim's event topic; its tagged releases
 * leave the port out. */
static int l_topic(lua_State *L) {
  const char *ip = luaL_checkstring(L, 1);
  const char *model = luaL_checkstring(L, 2);
  if (lua_isnoneornil(L, 3))
    lua_pushfstring(L, "kv@%s@%s", ip, model);
  else
    lua_pushfstring(L, "kv@%s:%d@%s", ip, (int)luaL_checkinteger(L, 3), model);
  return 1;
}

static const luaL_Reg kv_funcs[] = {
    {"block_hash", l_block_hash},
    {"block_hashes", l_block_hashes},
    {"block_key", l_block_key},
    {"block_key_prefix", l_block_key_prefix},
    {"mapping_key", l_mapping_key},
    {"mapping_key_prefix", l_mapping_key_prefix},
    {"owner", l_owner},
    {"topic", l_topic},
    {"u64", l_u64},
    {"tokenize", kv_tokenize},
    {"tokenize_chat", kv_tokenize_chat},
    {"stored", kv_stored},
    {"removed", kv_removed},
    {"cleared", kv_cleared},
    {NULL, NULL},
};

static const kv_option_keys kv_options_own[] = {{"block_hashes", block_hashes_keys}, {NULL, NULL}};

/* Push the kv.events table. */
static void push_events(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"encode", kv_events_encode}, {"decode", kv_events_decode}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_createtable(L, 6, 0);
  for (int i = 0; kv_dialect_names[i] != NULL; i++) {
    lua_pushstring(L, kv_dialect_names[i]);
    lua_rawseti(L, -2, i + 1);
  }
  lua_setfield(L, -2, "dialects");
  kv_set_options(L, kv_decode_options);
}

int luaopen_kv(lua_State *L) {
  kv_class_new(L, SHA256_MT, NULL, sha256_gc, NULL);
  kv_events_open(L);
  kv_events_decode_open(L);
  luaL_newlibtable(L, kv_funcs);
  sha256_box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->md = NULL;
  box->ctx = NULL;
  luaL_setmetatable(L, SHA256_MT);
  box->md = EVP_MD_fetch(NULL, "SHA256", NULL);
  box->ctx = EVP_MD_CTX_new();
  if (box->md == NULL || box->ctx == NULL)
    return luaL_error(L, "kv: libcrypto has no SHA-256");
  luaL_setfuncs(L, kv_funcs, 1); /* every function shares the box; hashing uses it */
  kv_set_options(L, kv_options_own);
  kv_set_options(L, kv_event_options);
  push_events(L);
  lua_setfield(L, -2, "events");
  lua_pushfstring(L, "msgpack-c %s, %s", msgpack_version(), OpenSSL_version(OPENSSL_VERSION));
  lua_setfield(L, -2, "version");
  return 1;
}
