/*
 * http.c - the `http` module: an HTTP client and an HTTP server for tests.
 *
 *   http.request{method, url, headers, body, json, timeout, stream, lines, tls}
 *   http.get(url, opts)  http.post(url, body_or_opts)
 *   http.batch(requests, {concurrency, summary})
 *   http.load{url, ..., rate, duration, concurrency} -> counts and histograms
 *   http.histogram([decoded_json]) -> histogram
 *   http.listen{host, port, handler, max_body} -> server
 *
 * The client (http_client.c) drives libcurl's multi socket API from the
 * engine's loop; the load client (http_load.c) is a lean keep-alive client
 * for load, which answers with counts and latency histograms
 * (http_histogram.c); the server (http_server.c) serves libuv TCP
 * connections with a request parser (http_parse.c).  All let the calling
 * task wait without blocking the loop; JSON bodies are http_json.c's.  This
 * file is the module table, and depends on the others, which never on it.
 *
 * Failures a caller should expect (a refused connection, a reset, a peer
 * that went away) come back as nil, "http: <why>" (curl's words for the
 * client), a request that ran out of time as nil, "timeout"; in http.batch
 * the same messages are the err of the request's result.  Malformed
 * requests, handlers that are not functions and unknown options raise.
 */
#include "http_private.h"

#include <curl/curl.h>
#include <http_parser.h>

#include <lauxlib.h>

static const luaL_Reg http_funcs[] = {
    {"request", kvh_request}, {"get", kvh_get},   {"post", kvh_post},
    {"batch", kvh_batch},     {"load", kvh_load}, {"histogram", kvh_histogram},
    {"listen", kvh_listen},   {NULL, NULL},
};

int luaopen_http(lua_State *L) {
  kvh_server_open(L);
  kvh_histogram_open(L);
  lua_newtable(L);
  kvh_client_push(L);
  kvh_load_push(L);
  luaL_setfuncs(L, http_funcs, 2);
  kv_set_options(L, kvh_client_options);
  kv_set_options(L, kvh_load_options);
  kv_set_options(L, kvh_server_options);
  unsigned long hp = http_parser_version();
  lua_pushfstring(L, "libcurl %s, http-parser %d.%d.%d",
                  curl_version_info(CURLVERSION_NOW)->version, (int)((hp >> 16) & 255),
                  (int)((hp >> 8) & 255), (int)(hp & 255));
  lua_setfield(L, -2, "version");
  return 1;
}
