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

/* The module's functions share two upvalues: the curl client's state and the load client's. */

/* http_client.c: these read the client state from upvalue 1. */
void kvh_client_push(lua_State *L); /* pushes the client state (the functions' upvalue) */
int kvh_request(lua_State *L);
int kvh_get(lua_State *L);
int kvh_post(lua_State *L);
int kvh_batch(lua_State *L);
extern const kv_option_keys kvh_client_options[]; /* http.options: request, get, post, batch */

/* http_load.c: these read the load client's state from upvalue 2. */
void kvh_load_push(lua_State *L);               /* pushes the load client's state */
int kvh_load(lua_State *L);                     /* http.load */
int kvh_batch_summary(lua_State *L, int conc);  /* http.batch{summary = true}: list at 1 */
extern const kv_option_keys kvh_load_options[]; /* http.options: load */

/* http_histogram.c */
typedef struct kvh_hist kvh_hist;
void kvh_histogram_open(lua_State *L); /* registers the histogram's metatable */
int kvh_histogram(lua_State *L);       /* http.histogram */
kvh_hist *kvh_hist_push(lua_State *L); /* pushes a new empty histogram */
void kvh_hist_add(kvh_hist *h, uint64_t usec, uint64_t n);

/* http_server.c */
void kvh_server_open(lua_State *L); /* registers the server's metatables */
int kvh_listen(lua_State *L);
extern const kv_option_keys kvh_server_options[]; /* http.options: listen */

/* http_json.c */
int kvh_body_json(lua_State *L);             /* the json(self) method: decodes self.body */
void kvh_json_encode(lua_State *L, int idx); /* pushes the JSON text of the value at idx */

#endif
