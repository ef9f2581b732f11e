/*
 * kv.h - internal interface between the files of the `kv` module.
 *
 * The module is split by idea: kv.c (the module table, Kthena's block
 * hashing, Redis key helpers), kv_u64.c (uint64 and token conversions),
 * kv_tokenize.c (the simulated tokenizer of llm-d-inference-sim),
 * kv_events.c (KV-event constructors and the msgpack dialects the
 * producers write) and kv_events_decode.c (reading untrusted payloads).
 * Only kv.c has a luaopen_ function.  Dependencies run one way: kv.c uses
 * every other file; kv_events_decode.c uses kv_events.c (it re-encodes to
 * name a dialect); kv_events.c uses kv_u64.c.
 */
#ifndef KV_BINDINGS_KV_H
#define KV_BINDINGS_KV_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* -------------------------------------------------------------- kv_u64.c */

/*
 * Parse an unsigned decimal of 1 to 20 digits (no sign, no blanks) that fits
 * in 64 bits.  Returns 1 and stores the value, or 0 for anything else.
 */
int kv_parse_u64(const char *s, size_t len, uint64_t *out);

/*
 * Read the value at idx as a uint64: a Lua integer (its 64 bits), a float
 * with an exact integer value, or an unsigned decimal string.  Stores it and
 * returns 1; returns 0 (pushing nothing) when the value is none of those.
 */
int kv_to_u64(lua_State *L, int idx, uint64_t *out);

/* Read the value at idx as a uint32 token id (an integer in 0..2^32-1). */
int kv_to_token(lua_State *L, int idx, uint32_t *out);

/* Push the unsigned decimal string of v. */
void kv_push_u64_string(lua_State *L, uint64_t v);

/* ---------------------------------------------------------- kv_tokenize.c */

/*
 * lua_CFunctions: kv_tokenize is kv.tokenize(text), kv_tokenize_chat is
 * kv.tokenize_chat(messages): the token ids llm-d-inference-sim's
 * simulated tokenizer gives (docs/api-modules.md); they raise on misuse.
 */
int kv_tokenize(lua_State *L);
int kv_tokenize_chat(lua_State *L);

/* ------------------------------------------------------------ kv_events.c */

/*
 * lua_CFunctions: kv_stored, kv_removed and kv_cleared are kv.stored{...},
 * kv.removed{...} and kv.cleared{}, which build one KV event each;
 * kv_events_encode is kv.events.encode(batch [, dialect]), the msgpack
 * bytes of a batch.  They raise on an invalid event, batch or dialect.
 */
int kv_stored(lua_State *L);
int kv_removed(lua_State *L);
int kv_cleared(lua_State *L);
int kv_events_encode(lua_State *L);

/* The option keys of kv.stored, kv.removed and kv.cleared (kv.options). */
extern const kv_option_keys kv_event_options[];

/* Register the encoder's classes (before any of the above runs). */
void kv_events_open(lua_State *L);

/* The wire dialects, in the order of kv_dialect_names (NULL-terminated). */
typedef enum {
  KV_VLLM09,
  KV_VLLM_ARRAY,
  KV_VLLM_MAP,
  KV_SIM_LEGACY,
  KV_SIM_MAP,
  KV_SGLANG
} kv_dialect;
extern const char *const kv_dialect_names[];

/* Push a new empty byte buffer inside a userdata (a Lua error frees it) and return it. */
kv_buf *kv_outbuf_new(lua_State *L);

/*
 * Encode the batch table at index b in dialect d into ob (emptied first).
 * Raises on an invalid batch or event; leaves the stack as it found it.
 */
void kv_encode_batch(lua_State *L, int b, kv_dialect d, kv_buf *ob);

/* ----------------------------------------------------- kv_events_decode.c */

/*
 * lua_CFunction kv.events.decode(bytes [, opts]): the batch an untrusted
 * payload holds and the dialect it was written in, or nil and why.
 */
int kv_events_decode(lua_State *L);

/* The option keys of kv.events.decode (kv.events.options). */
extern const kv_option_keys kv_decode_options[];

/* Register the decoder's classes. */
void kv_events_decode_open(lua_State *L);

#endif
