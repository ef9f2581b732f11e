/*
 * http_private.h - what the files of the `http` module share.
 *
 * http.c builds the module table from the client's (http_client.c) and the
 * server's (http_server.c) functions; those two meet only in http_json.c,
 * the JSON bodies.  Dependencies run one way: http.c -> client, server ->
 * http_json.c.
 */
#ifndef KV_HTTP_PRIVATE_H
#define KV_HTTP_PRIVATE_H

#include "engine.h"

/* A request without a timeout option gets this one, so no test hangs on it. */
#define KVH_DEFAULT_TIMEOUT 30.0

/* http_client.c: these read the client state from upvalue 1. */
void kvh_client_push(lua_State *L); /* pushes the client state (the functions' upvalue) */
int kvh_request(lua_State *L);
int kvh_get(lua_State *L);
int kvh_post(lua_State *L);
int kvh_batch(lua_State *L);
extern const kv_option_keys kvh_client_options[]; /* http.options: request, get, post, batch */

/* http_server.c */
void kvh_server_open(lua_State *L); /* registers the server's metatables */
int kvh_listen(lua_State *L);
extern const kv_option_keys kvh_server_options[]; /* http.options: listen */

/* http_json.c */
int kvh_body_json(lua_State *L);             /* the json(self) method: decodes self.body */
void kvh_json_encode(lua_State *L, int idx); /* pushes the JSON text of the value at idx */

#endif
