/*
 * http_private.h - what the files of the `http` module share.
 *
 * http.c builds the module table from the client's (http_client.c), the
 * load client's (http_load.c), the server's (http_server.c) and the
 * histograms' (http_histogram.c) functions; they meet only in http_json.c,
 * the JSON bodies, and in the histograms the load client fills.
 * Dependencies run one way: http.c -> client -> load client -> histograms
 * -> http_json.c, and server -> http_json.c.
 */
#ifndef KV_HTTP_PRIVATE_H
#define KV_HTTP_PRIVATE_H

#include <stdint.h>

#include "engine.h"

/*
 * The module's functions share two upvalues: the curl client's state and
 * the load client's.  A function declared `int f(lua_State *L)` below is a
 * lua_CFunction of the module: it implements the Lua call named in its
 * comment (docs/api-modules.md is the Lua contract), raises on misuse and
 * returns nil, "http: ..." on an expected failure.
 */

/* ---------------------------------------------------------- http_client.c */

/*
 * kvh_client_push pushes a new client state (curl's multi handle and its
 * pool of easy handles, closed by its __gc), the upvalue 1 of
 * kvh_request, kvh_get, kvh_post and kvh_batch: http.request{...},
 * http.get(url [, opts]), http.post(url, body_or_opts) and
 * http.batch(requests [, opts]).  Raises when curl cannot start.
 */
void kvh_client_push(lua_State *L);
int kvh_request(lua_State *L);
int kvh_get(lua_State *L);
int kvh_post(lua_State *L);
int kvh_batch(lua_State *L);
extern const kv_option_keys kvh_client_options[]; /* http.options: request, get, post, batch */

/* ------------------------------------------------------------ http_load.c */

/*
 * kvh_load_push pushes a new load client's state (its connections, closed
 * by its __gc), the upvalue 2 of kvh_load, http.load{...}.  Raises when
 * memory runs out.
 */
void kvh_load_push(lua_State *L);
int kvh_load(lua_State *L);

/*
 * http.batch(requests, {summary = true, concurrency = conc}): the list of
 * requests at index 1 (one origin), sent on the load client, at most conc
 * at a time (conc >= 1, checked by the caller); returns the summary table.
 */
int kvh_batch_summary(lua_State *L, int conc);
extern const kv_option_keys kvh_load_options[]; /* http.options: load */

/* ------------------------------------------------------- http_histogram.c */

/*
 * A latency histogram (microseconds, HdrHistogram-like buckets): a Lua
 * userdata.  kvh_histogram_open registers its metatable, before
 * kvh_histogram (http.histogram()) or kvh_hist_push run; kvh_hist_push
 * pushes a new empty one and returns it, owned by Lua.
 */
typedef struct kvh_hist kvh_hist;
void kvh_histogram_open(lua_State *L);
int kvh_histogram(lua_State *L);
kvh_hist *kvh_hist_push(lua_State *L);

/* Count n samples of usec microseconds in h (values past the top are capped). */
void kvh_hist_add(kvh_hist *h, uint64_t usec, uint64_t n);

/* ---------------------------------------------------------- http_server.c */

/*
 * kvh_server_open registers the server's metatables, before kvh_listen
 * (http.listen{...}) runs.
 */
void kvh_server_open(lua_State *L);
int kvh_listen(lua_State *L);
extern const kv_option_keys kvh_server_options[]; /* http.options: listen */

/* ------------------------------------------------------------ http_json.c */

/* The json(self) method of a response or request: self.body decoded; raises when it is not JSON. */
int kvh_body_json(lua_State *L);

/* Push the JSON text of the value at idx; raises when it cannot be encoded. */
void kvh_json_encode(lua_State *L, int idx);

#endif
