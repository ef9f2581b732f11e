/*
 * http_private.h - what http.c, http_client.c and http_server.c share.
 *
 * http.c builds the module table from the functions declared here; the
 * client and the server each own their file and meet only in the helpers
 * for bodies (the json() method, JSON encoding, error logging).
 */
#ifndef KV_HTTP_PRIVATE_H
#define KV_HTTP_PRIVATE_H

#include <lua.h>

/* A request without a timeout option gets this one, so no test hangs on it. */
#define KVH_DEFAULT_TIMEOUT 30.0

/* http_client.c: these read the client state from upvalue 1. */
void kvh_client_push(lua_State *L); /* pushes the client state (the functions' upvalue) */
int kvh_request(lua_State *L);
int kvh_get(lua_State *L);
int kvh_post(lua_State *L);
int kvh_batch(lua_State *L);

/* http_server.c */
void kvh_server_open(lua_State *L); /* registers the server's metatables */
int kvh_listen(lua_State *L);

/* http.c */
int kvh_body_json(lua_State *L);             /* the json(self) method: decodes self.body */
void kvh_json_encode(lua_State *L, int idx); /* pushes the JSON text of the value at idx */
void kvh_log(lua_State *L, const char *msg); /* through the engine's log(), else stderr */

#endif
