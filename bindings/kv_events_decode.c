/*
 * kv_events_decode.c - kv.events.decode: reading a KV-event payload that
 * came off the wire, from any producer, without trusting it.
 *
 * kv.events.decode(bytes [, {profile = "tolerant" | "kthena", dialect = true}])
 *     -> batch, dialect | nil, err
 *
 *   With dialect = false the dialect is not named (it costs a re-encoding
 *   per candidate): a consumer on a hot path gets the batch alone.
 *
 *   Returns the batch in the shape kv.events.encode takes (kv_events.c):
 *   {ts, events = {{kind = "stored" | "removed" | "cleared", ...}}, dp_rank}.
 *   Never raises for bad bytes: truncated or non-msgpack input, trailing
 *   bytes and shape errors return nil and a message that starts with
 *   "msgpack:", "shape:" or "kthena:".  (A non-string argument or an unknown
 *   profile is a programming error and raises.)
 *
 *   profile "tolerant" (default) accepts what a careful consumer should:
 *   batches as arrays (length >= 2; extra fields ignored) or maps; events as
 *   tagged arrays or maps with "type"; unknown trailing or named fields;
 *   block hashes (and parents) as integers or raw bytes (the last 8 bytes,
 *   big-endian); a missing token_ids (gives {}).  An event of an unknown type
 *   is kept as {kind = "unknown", type = <tag>}.  It rejects an event without
 *   block_hashes, and a wrong type in the fields a consumer uses (the hashes,
 *   parent, token_ids, block_size, lora_id, ts, dp_rank); the descriptive
 *   fields after lora_id (medium, lora_name, group_idx, kv_cache_spec_*) are
 *   left out of the event when they have another type.  It accepts
 *   everything the "kthena" profile accepts.
 *
 *   profile "kthena" accepts exactly what the Kthena runtime's decoder
 *   (msgspec, typed, array_like structs) accepts, and returns nil and a
 *   "kthena: ..." message for the rest: the batch must be an array, every
 *   event a tagged array of a known type (a map-shaped event, as vLLM >= 0.26
 *   sends, is rejected, and with it the whole batch); BlockStored needs at
 *   least block_hashes, parent_block_hash, token_ids, block_size and lora_id
 *   (integers, integer lists, no raw bytes; fields after lora_id are not
 *   checked); BlockRemoved needs block_hashes.  The returned batch is the
 *   same as the tolerant one, so a Kthena-faithful runtime calls decode with
 *   this profile and drops the batch on nil, and a diagnostic tool can call
 *   both profiles to say whether Kthena would have taken what it saw.
 *
 *   Token ids are any integers in both profiles, as msgspec's list[int]
 *   takes them: an id outside uint32 is the consumer's to refuse (Kthena
 *   drops the one event whose ids do not pack into 4 bytes, not the batch).
 *   Such an id is a Lua integer, or a float when it is a uint64 above
 *   2^63 - 1.  A block hash sent as a negative msgpack integer (vLLM's
 *   hashes from Python's hash() are signed) is the same Lua integer as the
 *   uint64 with its bits, but a Python consumer prints it signed: such
 *   events carry signed_hashes = {[i] = true} for those positions of
 *   hashes (the field is absent when there are none).
 *
 *   The dialect returned is the most general one that explains the bytes:
 *   the first of vllm-array, sglang, sim-legacy (array events), vllm-map,
 *   sim-map (map events) or vllm-0.9 (two-field batch) whose encoder
 *   reproduces the input byte for byte from the decoded batch; when none
 *   does (another producer's field widths, extra fields, raw-bytes hashes),
 *   the most general dialect of that shape: "vllm-0.9" for a two-field
 *   batch, "vllm-map" when any event (or the batch) is a map, else
 *   "vllm-array".  Either way kv.events.encode(batch, dialect) accepts the
 *   result (unless it holds events of unknown type).
 *
 * Untrusted bytes go through check_framing before msgpack-c sees them (see
 * there), then the object tree is walked along the expected shape only:
 * unknown fields are skipped, never converted, so nesting stays bounded.
 */
#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <msgpack.h>

#include "kv.h"

enum { K_STORED, K_REMOVED, K_CLEARED };
static const char *const tag_names[] = {"BlockStored", "BlockRemoved", "AllBlocksCleared", NULL};

#define UNPACKED_MT "kvengine.kv.unpacked"

enum { MAX_DEPTH = 32 };

/*
 * The framing of msgpack's type bytes 0xc0 to 0xdf (the spec's format
 * table): `payload` bytes follow the type byte; or a big-endian length of
 * `lenbytes` bytes does (then, for an ext, its type byte), which counts the
 * payload's bytes, or for a container its elements times `per_element` (2
 * for a map's keys and values).  0xc1 is never used.
 */
struct framing {
  unsigned char known, payload, lenbytes, ext_type, per_element;
};

static const struct framing framings[32] = {
    [0x00] = {1, 0, 0, 0, 0},  /* nil */
    [0x02] = {1, 0, 0, 0, 0},  /* false */
    [0x03] = {1, 0, 0, 0, 0},  /* true */
    [0x04] = {1, 0, 1, 0, 0},  /* bin8 */
    [0x05] = {1, 0, 2, 0, 0},  /* bin16 */
    [0x06] = {1, 0, 4, 0, 0},  /* bin32 */
    [0x07] = {1, 0, 1, 1, 0},  /* ext8 */
    [0x08] = {1, 0, 2, 1, 0},  /* ext16 */
    [0x09] = {1, 0, 4, 1, 0},  /* ext32 */
    [0x0a] = {1, 4, 0, 0, 0},  /* float32 */
    [0x0b] = {1, 8, 0, 0, 0},  /* float64 */
    [0x0c] = {1, 1, 0, 0, 0},  /* uint8 */
    [0x0d] = {1, 2, 0, 0, 0},  /* uint16 */
    [0x0e] = {1, 4, 0, 0, 0},  /* uint32 */
    [0x0f] = {1, 8, 0, 0, 0},  /* uint64 */
    [0x10] = {1, 1, 0, 0, 0},  /* int8 */
    [0x11] = {1, 2, 0, 0, 0},  /* int16 */
    [0x12] = {1, 4, 0, 0, 0},  /* int32 */
    [0x13] = {1, 8, 0, 0, 0},  /* int64 */
    [0x14] = {1, 2, 0, 0, 0},  /* fixext 1 (type byte and data) */
    [0x15] = {1, 3, 0, 0, 0},  /* fixext 2 */
    [0x16] = {1, 5, 0, 0, 0},  /* fixext 4 */
    [0x17] = {1, 9, 0, 0, 0},  /* fixext 8 */
    [0x18] = {1, 17, 0, 0, 0}, /* fixext 16 */
    [0x19] = {1, 0, 1, 0, 0},  /* str8 */
    [0x1a] = {1, 0, 2, 0, 0},  /* str16 */
    [0x1b] = {1, 0, 4, 0, 0},  /* str32 */
    [0x1c] = {1, 0, 2, 0, 1},  /* array16 */
    [0x1d] = {1, 0, 4, 0, 1},  /* array32 */
    [0x1e] = {1, 0, 2, 0, 2},  /* map16 */
    [0x1f] = {1, 0, 4, 0, 2},  /* map32 */
};

/*
 * Check that buf holds exactly one complete msgpack object: every length and
 * element count is backed by bytes that are present, nesting is at most
 * MAX_DEPTH, nothing follows.  msgpack-c's C unpacker allocates a container's
 * storage from its declared count before reading the elements and has no
 * limits, so a few bytes claiming 2^32 elements would make it request tens of
 * gigabytes; after this walk the allocation is bounded by the input size.
 * This reads only the framing (type bytes and lengths); msgpack-c decodes.
 * Returns 0, or -1 with a message in err.
 */
static int check_framing(const unsigned char *p, size_t len, char *err, size_t errsz) {
  uint64_t left[MAX_DEPTH + 1];
  int depth = 0;
  size_t pos = 0;
  left[0] = 1;
  for (;;) {
    while (left[depth] == 0) {
      if (depth == 0)
        goto done;
      depth--;
    }
    assert(depth >= 0 && depth <= MAX_DEPTH && pos <= len);
    left[depth]--;
    if (pos >= len)
      goto truncated;
    unsigned c = p[pos];
    size_t hdr = 1, lenbytes = 0;
    uint64_t payload = 0, children = 0, mult = 0;
    if (c <= 0x7f || c >= 0xe0) {
      /* positive and negative fixint */
    } else if (c <= 0x8f) {
      children = 2 * (uint64_t)(c & 0x0f);
    } else if (c <= 0x9f) {
      children = c & 0x0f;
    } else if (c <= 0xbf) {
      payload = c & 0x1f;
    } else {
      const struct framing *f = &framings[c - 0xc0];
      if (!f->known) {
        snprintf(err, errsz, "msgpack: invalid type byte 0x%02x at offset %zu", c, pos);
        return -1;
      }
      payload = f->payload;
      mult = f->per_element;
      lenbytes = f->lenbytes;
      if (lenbytes)
        hdr = 1 + lenbytes + f->ext_type;
      if (len - pos < hdr)
        goto truncated;
      uint64_t v = 0;
      for (size_t i = 0; i < lenbytes; i++)
        v = (v << 8) | p[pos + 1 + i];
      if (mult)
        children = mult * v;
      else if (lenbytes)
        payload = v;
    }
    if (len - pos < hdr)
      goto truncated;
    pos += hdr;
    if (payload > len - pos)
      goto truncated;
    pos += (size_t)payload;
    if (children != 0) {
      if (children > len - pos) {
        snprintf(err, errsz,
                 "msgpack: truncated input (a container at offset %zu declares %llu elements, "
                 "%zu bytes remain)",
                 pos - hdr, (unsigned long long)children, len - pos);
        return -1;
      }
      if (depth == MAX_DEPTH) {
        snprintf(err, errsz, "msgpack: nested deeper than %d levels", MAX_DEPTH);
        return -1;
      }
      left[++depth] = children;
    }
  }
done:
  if (pos != len) {
    snprintf(err, errsz, "msgpack: %zu trailing bytes after the batch", len - pos);
    return -1;
  }
  return 0;
truncated:
  snprintf(err, errsz, "msgpack: truncated input (it ends inside an object after %zu bytes)", len);
  return -1;
}

typedef struct {
  msgpack_unpacked u;
  int live;
} unpacked_box;

static int unpacked_gc(lua_State *L) {
  unpacked_box *box = luaL_checkudata(L, 1, UNPACKED_MT);
  if (box->live) {
    msgpack_unpacked_destroy(&box->u);
    box->live = 0;
  }
  return 0;
}

/* Decoder state: the profile, the first error, and facts for the dialect. */
typedef struct {
  lua_State *L;
  int kthena;
  int map_events, array_events, unknown_events;
  int wide_tokens; /* token ids outside uint32: no encoder writes them */
  char err[320];
} dstate;

static int derr(dstate *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err, sizeof s->err, fmt, ap);
  va_end(ap);
  return -1;
}

static const char *obj_type(const msgpack_object *o) {
  if (o == NULL)
    return "nothing";
  switch (o->type) {
  case MSGPACK_OBJECT_NIL:
    return "nil";
  case MSGPACK_OBJECT_BOOLEAN:
    return "a boolean";
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    return "an integer";
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64:
    return "a float";
  case MSGPACK_OBJECT_STR:
    return "a string";
  case MSGPACK_OBJECT_ARRAY:
    return "an array";
  case MSGPACK_OBJECT_MAP:
    return "a map";
  case MSGPACK_OBJECT_BIN:
    return "raw bytes";
  default:
    return "an extension";
  }
}

static int is_nil(const msgpack_object *o) { return o == NULL || o->type == MSGPACK_OBJECT_NIL; }

static int is_int(const msgpack_object *o) {
  return o != NULL &&
         (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER || o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER);
}

static lua_Integer int_of(const msgpack_object *o) {
  assert(is_int(o));
  return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (lua_Integer)o->via.u64
                                                    : (lua_Integer)o->via.i64;
}

static int str_is(const msgpack_object *o, const char *s) {
  size_t n = strlen(s);
  return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && memcmp(o->via.str.ptr, s, n) == 0;
}

/* The value of the last entry of map m whose key is the string `key`. */
static const msgpack_object *map_get(const msgpack_object *m, const char *key) {
  assert(m->type == MSGPACK_OBJECT_MAP);
  const msgpack_object *found = NULL;
  for (uint32_t i = 0; i < m->via.map.size; i++)
    if (str_is(&m->via.map.ptr[i].key, key))
      found = &m->via.map.ptr[i].val;
  return found;
}

/* An event: a tagged array (fields by position) or a map (fields by name). */
typedef struct {
  const msgpack_object *o;
  int is_map;
  int evno;
  const char *tag;
} event_view;

/* Field i (0-based after the tag) named `name`, or NULL when absent. */
static const msgpack_object *field(const event_view *ev, uint32_t i, const char *name) {
  assert(ev->o->type == (ev->is_map ? MSGPACK_OBJECT_MAP : MSGPACK_OBJECT_ARRAY));
  if (ev->is_map)
    return map_get(ev->o, name);
  return i + 1 < ev->o->via.array.size ? &ev->o->via.array.ptr[i + 1] : NULL;
}

/* A block hash: an integer (its 64 bits) or raw bytes (last 8, big-endian). */
static int get_hash(dstate *s, const event_view *ev, const msgpack_object *o, const char *what,
                    uint64_t *out) {
  const char *p;
  uint32_t n;
  if (is_int(o)) {
    *out = (uint64_t)int_of(o);
    return 0;
  }
  if (o->type == MSGPACK_OBJECT_BIN) {
    p = o->via.bin.ptr;
    n = o->via.bin.size;
  } else if (o->type == MSGPACK_OBJECT_STR) {
    p = o->via.str.ptr;
    n = o->via.str.size;
  } else {
    return derr(s, "shape: events[%d] %s: %s must be an integer or raw bytes, got %s", ev->evno,
                ev->tag, what, obj_type(o));
  }
  if (s->kthena)
    return derr(s, "kthena: events[%d] %s: %s is raw bytes; Kthena's decoder takes integers only",
                ev->evno, ev->tag, what);
  uint64_t h = 0;
  for (uint32_t i = n > 8 ? n - 8 : 0; i < n; i++)
    h = (h << 8) | (unsigned char)p[i];
  *out = h;
  return 0;
}

/*
 * Set the event's hashes (a Lua sequence) from the block_hashes field o,
 * and signed_hashes when some of them are negative msgpack integers.  The
 * event table is at the top of the stack.
 */
static int set_hashes(dstate *s, const event_view *ev, const msgpack_object *o) {
  lua_State *L = s->L;
  if (is_nil(o))
    return derr(s, "shape: events[%d] %s without block_hashes", ev->evno, ev->tag);
  if (o->type != MSGPACK_OBJECT_ARRAY)
    return derr(s, "shape: events[%d] %s: block_hashes must be an array, got %s", ev->evno, ev->tag,
                obj_type(o));
  uint32_t n = o->via.array.size, nsigned = 0;
  lua_createtable(L, (int)n, 0);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t h = 0;
    char what[48];
    snprintf(what, sizeof what, "block_hashes[%u]", i + 1);
    if (get_hash(s, ev, &o->via.array.ptr[i], what, &h) != 0)
      return -1;
    nsigned += o->via.array.ptr[i].type == MSGPACK_OBJECT_NEGATIVE_INTEGER;
    lua_pushinteger(L, (lua_Integer)h);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "hashes");
  if (nsigned == 0)
    return 0;
  lua_createtable(L, 0, (int)nsigned);
  for (uint32_t i = 0; i < n; i++) {
    if (o->via.array.ptr[i].type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
      continue;
    lua_pushboolean(L, 1);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "signed_hashes");
  return 0;
}

/* Push a token id: any integer (see the top of the file), else an error. */
static int push_token(dstate *s, const event_view *ev, const msgpack_object *x, uint32_t i) {
  if (!is_int(x))
    return derr(s, "shape: events[%d] BlockStored: token_ids[%u] must be an integer, got %s",
                ev->evno, i + 1, obj_type(x));
  if (x->type == MSGPACK_OBJECT_POSITIVE_INTEGER && x->via.u64 <= UINT32_MAX) {
    lua_pushinteger(s->L, (lua_Integer)x->via.u64);
    return 0;
  }
  s->wide_tokens++;
  if (x->type == MSGPACK_OBJECT_POSITIVE_INTEGER && x->via.u64 > (uint64_t)INT64_MAX)
    lua_pushnumber(s->L, (lua_Number)x->via.u64);
  else
    lua_pushinteger(s->L, int_of(x));
  return 0;
}

/*
 * Set t[key] from an optional integer (want_int) or string field o of the
 * event table at the top of the stack.  nil/absent sets nothing.  A wrong
 * type is an error, or ignored when `lenient` (fields no consumer needs).
 */
static int set_opt(dstate *s, const event_view *ev, const msgpack_object *o, const char *key,
                   int want_int, int lenient) {
  lua_State *L = s->L;
  if (is_nil(o))
    return 0;
  if (want_int && is_int(o)) {
    lua_pushinteger(L, int_of(o));
  } else if (!want_int && o->type == MSGPACK_OBJECT_STR) {
    lua_pushlstring(L, o->via.str.ptr, o->via.str.size);
  } else {
    if (lenient)
      return 0;
    return derr(s, "shape: events[%d] %s: %s must be %s or nil, got %s", ev->evno, ev->tag, key,
                want_int ? "an integer" : "a string", obj_type(o));
  }
  lua_setfield(L, -2, key);
  return 0;
}

static int decode_stored(dstate *s, const event_view *ev) {
  static const char *const names[] = {"block_hashes",
                                      "parent_block_hash",
                                      "token_ids",
                                      "block_size",
                                      "lora_id",
                                      "medium",
                                      "lora_name",
                                      "extra_keys",
                                      "group_idx",
                                      "kv_cache_spec_kind",
                                      "kv_cache_spec_sliding_window"};
  lua_State *L = s->L;
  const msgpack_object *f[11];
  for (uint32_t i = 0; i < 11; i++)
    f[i] = field(ev, i, names[i]);
  if (s->kthena) {
    /* msgspec: five fields without defaults after the tag; extra ones ignored. */
    if (ev->o->via.array.size < 6)
      return derr(s,
                  "kthena: events[%d] BlockStored has %u fields after the tag; Kthena's decoder "
                  "needs block_hashes, parent_block_hash, token_ids, block_size, lora_id",
                  ev->evno, ev->o->via.array.size - 1);
    if (is_nil(f[2]))
      return derr(s, "kthena: events[%d] BlockStored: token_ids is nil", ev->evno);
    if (is_nil(f[3]))
      return derr(s, "kthena: events[%d] BlockStored: block_size is nil", ev->evno);
  }
  lua_createtable(L, 0, 8);
  lua_pushliteral(L, "stored");
  lua_setfield(L, -2, "kind");
  if (set_hashes(s, ev, f[0]) != 0)
    return -1;
  if (!is_nil(f[1])) {
    uint64_t h = 0;
    if (get_hash(s, ev, f[1], "parent_block_hash", &h) != 0)
      return -1;
    lua_pushinteger(L, (lua_Integer)h);
    lua_setfield(L, -2, "parent");
  }
  const msgpack_object *t = f[2];
  if (!is_nil(t) && t->type != MSGPACK_OBJECT_ARRAY)
    return derr(s, "shape: events[%d] BlockStored: token_ids must be an array, got %s", ev->evno,
                obj_type(t));
  uint32_t nt = is_nil(t) ? 0 : t->via.array.size;
  lua_createtable(L, (int)nt, 0);
  for (uint32_t i = 0; i < nt; i++) {
    if (push_token(s, ev, &t->via.array.ptr[i], i) != 0)
      return -1;
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "tokens");
  /* Fields after lora_id are descriptive: of another type, they are dropped. */
  int lenient = 1;
  if (set_opt(s, ev, f[3], "block_size", 1, 0) != 0 || set_opt(s, ev, f[4], "lora_id", 1, 0) != 0 ||
      set_opt(s, ev, f[5], "medium", 0, lenient) != 0 ||
      set_opt(s, ev, f[6], "lora_name", 0, lenient) != 0 ||
      set_opt(s, ev, f[8], "group_idx", 1, lenient) != 0 ||
      set_opt(s, ev, f[9], "kv_cache_spec_kind", 0, lenient) != 0 ||
      set_opt(s, ev, f[10], "kv_cache_spec_sliding_window", 1, lenient) != 0)
    return -1;
  return 0;
}

static int decode_removed(dstate *s, const event_view *ev) {
  lua_State *L = s->L;
  lua_createtable(L, 0, 4);
  lua_pushliteral(L, "removed");
  lua_setfield(L, -2, "kind");
  if (set_hashes(s, ev, field(ev, 0, "block_hashes")) != 0)
    return -1;
  if (set_opt(s, ev, field(ev, 1, "medium"), "medium", 0, 1) != 0 ||
      set_opt(s, ev, field(ev, 2, "group_idx"), "group_idx", 1, 1) != 0)
    return -1;
  return 0;
}

/* Push the Lua table of event number evno (object o). */
static int decode_event(dstate *s, const msgpack_object *o, int evno) {
  lua_State *L = s->L;
  event_view ev = {o, o->type == MSGPACK_OBJECT_MAP, evno, "event"};
  const msgpack_object *tag;
  if (ev.is_map) {
    s->map_events++;
    if (s->kthena)
      return derr(s,
                  "kthena: events[%d] is a map (the vLLM >= 0.26 layout); Kthena's decoder takes "
                  "tagged arrays only",
                  evno);
    tag = map_get(o, "type");
    if (tag == NULL || tag->type != MSGPACK_OBJECT_STR)
      return derr(s, "shape: events[%d] is a map without a string \"type\"", evno);
  } else if (o->type == MSGPACK_OBJECT_ARRAY) {
    s->array_events++;
    if (o->via.array.size == 0 || o->via.array.ptr[0].type != MSGPACK_OBJECT_STR)
      return derr(s, "shape: events[%d] is an array without a string tag first", evno);
    tag = &o->via.array.ptr[0];
  } else {
    return derr(s, "shape: events[%d] must be an array or a map, got %s", evno, obj_type(o));
  }
  for (int k = 0; tag_names[k] != NULL; k++) {
    if (!str_is(tag, tag_names[k]))
      continue;
    ev.tag = tag_names[k];
    if (k == K_STORED)
      return decode_stored(s, &ev);
    if (k == K_REMOVED)
      return decode_removed(s, &ev);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "cleared");
    lua_setfield(L, -2, "kind");
    return 0;
  }
  s->unknown_events++;
  if (s->kthena)
    return derr(s, "kthena: events[%d] has the unknown type '%.*s'", evno,
                (int)(tag->via.str.size > 64 ? 64 : tag->via.str.size), tag->via.str.ptr);
  lua_createtable(L, 0, 2);
  lua_pushliteral(L, "unknown");
  lua_setfield(L, -2, "kind");
  lua_pushlstring(L, tag->via.str.ptr, tag->via.str.size);
  lua_setfield(L, -2, "type");
  return 0;
}

/* Push the batch table decoded from root; fills the shape facts in s. */
static int decode_batch(dstate *s, const msgpack_object *root, uint32_t *nfields) {
  lua_State *L = s->L;
  const msgpack_object *ts, *events, *rank;
  *nfields = 0;
  if (root->type == MSGPACK_OBJECT_ARRAY) {
    uint32_t n = root->via.array.size;
    *nfields = n;
    if (n < 2)
      return derr(s, "shape: the batch is an array of %u; expected [ts, events, dp_rank]", n);
    ts = &root->via.array.ptr[0];
    events = &root->via.array.ptr[1];
    rank = n > 2 ? &root->via.array.ptr[2] : NULL;
  } else if (root->type == MSGPACK_OBJECT_MAP) {
    if (s->kthena)
      return derr(s, "kthena: the batch is a map; Kthena's decoder takes [ts, events, dp_rank]");
    ts = map_get(root, "ts");
    events = map_get(root, "events");
    rank = map_get(root, "data_parallel_rank");
    if (rank == NULL)
      rank = map_get(root, "attn_dp_rank");
    if (rank == NULL)
      rank = map_get(root, "dp_rank");
  } else {
    return derr(s, "shape: the batch must be an array [ts, events, dp_rank], got %s",
                obj_type(root));
  }
  double t;
  if (ts != NULL && ts->type == MSGPACK_OBJECT_FLOAT64)
    t = ts->via.f64;
  else if (ts != NULL && ts->type == MSGPACK_OBJECT_FLOAT32)
    t = ts->via.f64;
  else if (is_int(ts))
    t = ts->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (double)ts->via.u64 : (double)ts->via.i64;
  else
    return derr(s, "shape: batch ts must be a number, got %s", obj_type(ts));
  if (events == NULL || events->type != MSGPACK_OBJECT_ARRAY)
    return derr(s, "shape: batch events must be an array, got %s", obj_type(events));
  if (!is_nil(rank) && !is_int(rank))
    return derr(s, "shape: batch dp_rank must be an integer or nil, got %s", obj_type(rank));

  lua_createtable(L, 0, 3);
  lua_pushnumber(L, t);
  lua_setfield(L, -2, "ts");
  if (!is_nil(rank)) {
    lua_pushinteger(L, int_of(rank));
    lua_setfield(L, -2, "dp_rank");
  }
  uint32_t n = events->via.array.size;
  lua_createtable(L, (int)n, 0);
  for (uint32_t i = 0; i < n; i++) {
    if (decode_event(s, &events->via.array.ptr[i], (int)i + 1) != 0)
      return -1;
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "events");
  return 0;
}

/*
 * Name the dialect of the decoded batch at index b (see the top of the file):
 * the first candidate whose encoding equals the input, else the shape's
 * most general dialect.
 */
static kv_dialect name_dialect(lua_State *L, const dstate *s, int b, int batch_is_map,
                               uint32_t nfields, const char *data, size_t len) {
  static const kv_dialect arrays[] = {KV_VLLM_ARRAY, KV_SGLANG, KV_SIM_LEGACY};
  static const kv_dialect maps[] = {KV_VLLM_MAP, KV_SIM_MAP};
  static const kv_dialect v09[] = {KV_VLLM09};
  const kv_dialect *cand = arrays;
  size_t ncand = 3;
  kv_dialect fallback = KV_VLLM_ARRAY;
  if (batch_is_map || s->map_events > 0) {
    cand = maps;
    ncand = 2;
    fallback = KV_VLLM_MAP;
  }
  if (!batch_is_map && nfields == 2) {
    cand = v09;
    ncand = 1;
    fallback = KV_VLLM09;
  }
  if (batch_is_map || (s->map_events > 0 && s->array_events > 0) || s->unknown_events > 0 ||
      s->wide_tokens > 0 || nfields > 3)
    return fallback;
  kv_buf *ob = kv_outbuf_new(L);
  for (size_t i = 0; i < ncand; i++) {
    kv_encode_batch(L, b, cand[i], ob);
    if (ob->len == len && memcmp(ob->p, data, len) == 0) {
      lua_pop(L, 1);
      return cand[i];
    }
  }
  lua_pop(L, 1);
  return fallback;
}

static const char *const decode_keys[] = {"profile", "dialect", NULL};

const kv_option_keys kv_decode_options[] = {{"decode", decode_keys}, {NULL, NULL}};

/* kv.events.decode(bytes [, {profile=, dialect=}]) -> batch, dialect | nil, err. */
int kv_events_decode(lua_State *L) {
  static const char *const profiles[] = {"tolerant", "kthena", NULL};
  size_t len;
  const char *data = luaL_checklstring(L, 1, &len);
  int kthena = 0, want_dialect = 1;
  if (!lua_isnoneornil(L, 2)) {
    luaL_checktype(L, 2, LUA_TTABLE);
    kv_check_options(L, 2, "kv.events.decode", decode_keys);
    lua_getfield(L, 2, "dialect");
    want_dialect = lua_isnil(L, -1) || lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, 2, "profile");
    const char *p = lua_tostring(L, -1);
    if (p != NULL && strcmp(p, profiles[1]) == 0)
      kthena = 1;
    else if (!lua_isnil(L, -1) && (p == NULL || strcmp(p, profiles[0]) != 0))
      return luaL_argerror(L, 2, "profile must be \"tolerant\" or \"kthena\"");
    lua_pop(L, 1);
  }
  lua_settop(L, 1);
  unpacked_box *box = NULL;
  dstate s;
  memset(&s, 0, sizeof s);
  s.L = L;
  s.kthena = kthena;
  if (len == 0) {
    derr(&s, "msgpack: empty input");
    goto fail;
  }
  if (check_framing((const unsigned char *)data, len, s.err, sizeof s.err) != 0)
    goto fail;

  box = lua_newuserdatauv(L, sizeof *box, 0); /* index 2 */
  box->live = 0;
  luaL_setmetatable(L, UNPACKED_MT);
  msgpack_unpacked_init(&box->u);
  box->live = 1;
  size_t off = 0;
  msgpack_unpack_return rc = msgpack_unpack_next(&box->u, data, len, &off);
  if (rc != MSGPACK_UNPACK_SUCCESS || off != len) {
    derr(&s, rc == MSGPACK_UNPACK_NOMEM_ERROR ? "msgpack: out of memory"
                                              : "msgpack: cannot decode the payload");
    goto fail;
  }
  uint32_t nfields;
  const msgpack_object *root = &box->u.data;
  if (decode_batch(&s, root, &nfields) != 0)
    goto fail;
  int b = lua_gettop(L);
  if (want_dialect) {
    kv_dialect d = name_dialect(L, &s, b, root->type == MSGPACK_OBJECT_MAP, nfields, data, len);
    lua_pushstring(L, kv_dialect_names[d]);
  } else {
    lua_pushnil(L);
  }
  msgpack_unpacked_destroy(&box->u);
  box->live = 0;
  return 2;
fail:
  if (box != NULL && box->live) {
    msgpack_unpacked_destroy(&box->u);
    box->live = 0;
  }
  lua_settop(L, 1);
  lua_pushnil(L);
  lua_pushstring(L, s.err);
  return 2;
}

void kv_events_decode_open(lua_State *L) { kv_class_new(L, UNPACKED_MT, NULL, unpacked_gc, NULL); }
