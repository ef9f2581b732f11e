/*
 * redis.c - the `redis` module: a Redis client for scenarios, on the loop.
 *
 *   local redis = require("redis")
 *   local c = redis.connect{host = "127.0.0.1", port = 6379, db = 0,
 *                           password = nil, timeout = 5}  -- or nil, err
 *   c:call("HSET", key, field, value)   -> reply; raises "redis: <error>"
 *   c:pcall(...)                        -> reply | nil, "redis: <error>"
 *   c:hgetall(key)                      -> {field = value}
 *   c:pipeline(function(p) p:call(...) ... end) -> {reply, ...}
 *   c:pipeline(fn, {replies = "errors"})  -> nerrors, first_error | nil
 *   c:close()
 *   local b = redis.batch()             commands collected ahead of sending
 *   b:call(cmd, ...), b:callf(format, ...) -> index of its reply; #b
 *   c:pipeline(b [, {replies = ...}])   sends b (again each time it is given)
 *   redis.null (a unique sentinel), redis.version ("hiredis 0.14.1")
 *
 * Replies: status and bulk strings -> string, integer -> integer, nil ->
 * nil, array -> table (nil elements are redis.null, error elements
 * {err = msg}).  A pipeline returns one entry per command in order: error
 * replies as {err = msg}, nil replies as redis.null (so the array has no
 * holes).  Commands and their arguments: redis_batch.c.
 *
 * Failures: c:pcall and redis.connect return nil, "redis: <why>", and
 * nil, "timeout" when the connection's timeout passed (engine.h's rule:
 * default KV_WAIT_REPLY, 5 s times the time scale, for the handshake and
 * for each call); c:call, c:hgetall
 * and c:pipeline raise the same messages ("redis: timeout").  A timeout or
 * a lost server fails every call pending on the connection and drops it
 * (redis_conn.c); a scenario that restarts Redis connects again.  Unknown
 * options raise.
 *
 * Option replies = "errors" (the default is "all") reads every reply but
 * keeps only the error replies, counting too the errors inside an array
 * reply (the replies of a MULTI ... EXEC's commands come as EXEC's array):
 * the pipeline returns how many there were and the first one's message
 * (nil when none), and builds no Lua value for the others.  A batch from
 * redis.batch() is a pipeline's p made ahead of time: it is filled outside
 * any call, sent by c:pipeline(b) as often as wanted (on any connection),
 * and keeps its commands; p itself takes no commands once its pipeline was
 * sent.
 *
 * The file is the Lua surface: redis_conn.c is the connection on the loop
 * and its calls, redis_batch.c the formatting of commands.
 */
#include "redis_private.h"

#include <stdio.h>
#include <string.h>

#define CONN_MT "kvengine.redis.connection"

static const char null_key = 'n'; /* registry key of redis.null */

static void push_null(lua_State *L) { lua_rawgetp(L, LUA_REGISTRYINDEX, &null_key); }

static void push_err_table(lua_State *L, const reply *r) {
  lua_createtable(L, 0, 1);
  lua_pushlstring(L, r->str ? r->str : "", r->len);
  lua_setfield(L, -2, "err");
}

/*
 * Push r as a Lua value.  Inside an array (nested = 1) nil becomes redis.null
 * and an error becomes {err = msg}; at the top the caller handles errors.
 */
static void push_reply(lua_State *L, const reply *r, int nested) {
  luaL_checkstack(L, 4, "redis: reply too deep");
  switch (r->type) {
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_STATUS:
    lua_pushlstring(L, r->str ? r->str : "", r->len);
    break;
  case REDIS_REPLY_INTEGER:
    lua_pushinteger(L, (lua_Integer)r->integer);
    break;
  case REDIS_REPLY_ARRAY:
    lua_createtable(L, (int)r->elements, 0);
    for (size_t i = 0; i < r->elements; i++) {
      push_reply(L, r->element[i], 1);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    break;
  case REDIS_REPLY_ERROR:
    push_err_table(L, r);
    break;
  default: /* REDIS_REPLY_NIL */
    if (nested)
      push_null(L);
    else
      lua_pushnil(L);
    break;
  }
}

/* ------------------------------------------------------------ Lua methods */

static conn **check_ud(lua_State *L) { return luaL_checkudata(L, 1, CONN_MT); }

/* The usable connection at index 1, or NULL with the reason pushed. */
static conn *usable(lua_State *L) {
  conn *c = *check_ud(L);
  if (!c)
    lua_pushliteral(L, "redis: connection closed");
  else if (c->lost)
    lua_pushfstring(L, "redis: %s", c->lost);
  else
    return c;
  return NULL;
}

/* Fail the way `kind` does: nil, msg for pcall; raise otherwise. */
static int fail(lua_State *L, enum call_kind kind, const char *msg) {
  if (kind == K_PCALL || kind == K_CONNECT)
    return kv_fail(L, "%s", msg);
  luaL_where(L, 1);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

static int reply_error(lua_State *L, enum call_kind kind, const reply *r) {
  lua_pushliteral(L, "redis: ");
  lua_pushlstring(L, r->str ? r->str : "", r->len);
  lua_concat(L, 2);
  return fail(L, kind, lua_tostring(L, -1));
}

static int push_hash(lua_State *L, const reply *r) {
  lua_createtable(L, 0, (int)(r->elements / 2));
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    push_reply(L, r->element[i], 1);
    push_reply(L, r->element[i + 1], 1);
    lua_rawset(L, -3);
  }
  return 1;
}

/* A pipeline that keeps only errors: their count, and the first one or nil. */
static int push_errors(lua_State *L, int nerr, const char *first) {
  lua_pushinteger(L, nerr);
  if (first)
    lua_pushstring(L, first);
  else
    lua_pushnil(L);
  return 2;
}

/* Continuation of call/pcall/hgetall/pipeline: turn the outcome into Lua. */
static int call_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  call *k = *(call **)kv_wait_data(kv_wait_of(ctx));
  if (k->timed_out)
    return k->kind == K_PCALL ? kv_timeout(L) : fail(L, k->kind, "redis: timeout");
  if (k->err) {
    lua_pushfstring(L, "redis: %s", k->err);
    return fail(L, k->kind, lua_tostring(L, -1));
  }
  if (k->kind == K_PIPELINE && !k->replies)
    return push_errors(L, k->nerr, k->first_err);
  if (k->kind == K_PIPELINE) {
    lua_createtable(L, k->n, 0);
    for (int i = 0; i < k->n; i++) {
      push_reply(L, k->replies[i], 1);
      lua_rawseti(L, -2, i + 1);
    }
    return 1;
  }
  const reply *r = k->replies[0];
  if (r->type == REDIS_REPLY_ERROR)
    return reply_error(L, k->kind, r);
  if (k->kind == K_HGETALL && r->type == REDIS_REPLY_ARRAY)
    return push_hash(L, r);
  push_reply(L, r, 0);
  return 1;
}

/* Formats single commands (sent at once, so one buffer serves them all). */
static batch one;

/* Send the command at stack indices 2..top on c and wait for its reply. */
static int command(lua_State *L, enum call_kind kind) {
  conn *c = usable(L);
  if (!c)
    return fail(L, kind, lua_tostring(L, -1));
  redis_batch_add(L, &one, 2, lua_gettop(L));
  kv_wait *w = kv_wait_new(L, "redis", sizeof(call *), redis_call_cancel, redis_call_dispose);
  redis_send(redis_call_new(c, w, kind, 1, 1), &one);
  redis_flush(c);
  redis_batch_clear(&one); /* hiredis has its own copy now */
  return kv_wait_yield(L, w, call_done);
}

/* c:call(cmd, ...) -> reply; raises "redis: <error>". */
static int conn_call(lua_State *L) { return command(L, K_CALL); }

/* c:pcall(cmd, ...) -> reply | nil, "redis: <error>". */
static int conn_pcall(lua_State *L) { return command(L, K_PCALL); }

/* c:hgetall(key) -> {field = value}; raises like call. */
static int conn_hgetall(lua_State *L) {
  luaL_checkany(L, 2);
  lua_settop(L, 2);
  lua_pushliteral(L, "HGETALL");
  lua_insert(L, 2);
  return command(L, K_HGETALL);
}

/* --------------------------------------------------------------- pipeline */

/* redis.batch() -> an empty batch. */
static int l_batch(lua_State *L) {
  redis_batch_push(L);
  return 1;
}

static const char *const pipeline_keys[] = {"replies", NULL};

/* opts.replies at index i: 1 for "all" (the default), 0 for "errors". */
static int keep_replies(lua_State *L, int i) {
  if (lua_isnoneornil(L, i))
    return 1;
  luaL_checktype(L, i, LUA_TTABLE);
  kv_check_options(L, i, "redis pipeline", pipeline_keys);
  lua_getfield(L, i, "replies");
  const char *mode = lua_tostring(L, -1);
  int keep = lua_isnil(L, -1) || (mode && strcmp(mode, "all") == 0);
  luaL_argcheck(L, keep || (mode && strcmp(mode, "errors") == 0), i,
                "replies must be \"all\" or \"errors\"");
  lua_pop(L, 1);
  return keep;
}

/*
 * Send b's commands on the connection at index 1 as one call and wait for
 * every reply; `keep` as from keep_replies.  A sealed batch's storage is
 * released once queued: nothing can use it again.
 */
static int send_batch(lua_State *L, batch *b, int keep) {
  if (b->n == 0) {
    if (!keep)
      return push_errors(L, 0, NULL);
    lua_newtable(L);
    return 1;
  }
  conn *c = usable(L);
  if (!c) {
    if (b->sealed)
      redis_batch_release(b);
    return fail(L, K_PIPELINE, lua_tostring(L, -1));
  }
  kv_wait *w = kv_wait_new(L, "redis", sizeof(call *), redis_call_cancel, redis_call_dispose);
  redis_send(redis_call_new(c, w, K_PIPELINE, b->n, keep), b);
  redis_flush(c);
  if (b->sealed)
    redis_batch_release(b);
  return kv_wait_yield(L, w, call_done);
}

/* After fn(p): send every collected command and wait for all the replies. */
static int pipeline_send(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  batch *b = lua_touserdata(L, 3);
  b->sealed = 1;
  lua_settop(L, 3);
  return send_batch(L, b, (int)ctx);
}

/*
 * c:pipeline(fn [, opts]) -> {reply, ...}: fn(p) collects commands with
 * p:call(...); they go out together and the replies come back in order,
 * errors as {err = msg}, nil as redis.null.  c:pipeline(b [, opts]) sends
 * the commands of a batch from redis.batch() the same way.  With opts.replies
 * = "errors" the result is the count of error replies and the first one's
 * message (or nil) instead.  A lost connection or a timeout raises.
 */
static int conn_pipeline(lua_State *L) {
  check_ud(L);
  int keep = keep_replies(L, 3);
  lua_settop(L, 2);
  if (lua_type(L, 2) != LUA_TFUNCTION) {
    batch *b = redis_test_batch(L, 2);
    luaL_argexpected(L, b != NULL, 2, "function or redis batch");
    if (b->sealed)
      return luaL_error(L, "redis: pipeline already sent");
    return send_batch(L, b, keep);
  }
  redis_batch_push(L); /* 3 */
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_callk(L, 1, 0, keep, pipeline_send);
  return pipeline_send(L, LUA_OK, keep);
}

/* c:close(), __close and __gc: idempotent. */
static int conn_gc(lua_State *L) {
  conn **ud = check_ud(L);
  conn *c = *ud;
  if (c) {
    *ud = NULL;
    redis_conn_close(&c->res);
    redis_conn_unref(c);
  }
  return 0;
}

static int conn_tostring(lua_State *L) {
  conn *c = *check_ud(L);
  if (!c)
    lua_pushliteral(L, "redis connection (closed)");
  else
    lua_pushfstring(L, "redis connection (%s%s)", c->where, c->lost ? ", lost" : "");
  return 1;
}

/* ---------------------------------------------------------------- connect */

/* Continuation of connect: the handshake's replies decide. */
static int connect_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  call *k = *(call **)kv_wait_data(kv_wait_of(ctx));
  conn *c = *(conn **)lua_touserdata(L, 2);
  const char *err = k->err;
  for (int i = 0; !err && i < k->got; i++)
    if (k->replies[i]->type == REDIS_REPLY_ERROR)
      err = k->replies[i]->str;
  if (!err && !k->timed_out && c && !c->lost) {
    lua_settop(L, 2);
    return 1;
  }
  if (c)
    redis_conn_close(&c->res);
  if (k->timed_out)
    return kv_timeout(L);
  return kv_fail(L, "redis: %s", err ? err : "connection closed");
}

typedef struct connect_opts {
  const char *host, *password;
  lua_Integer port, db;
  lua_Number timeout;
} connect_opts;

static const char *const connect_keys[] = {"host", "port", "db", "password", "timeout", NULL};

static void read_opts(lua_State *L, connect_opts *o) {
  o->host = "127.0.0.1";
  o->password = NULL;
  o->port = 6379;
  o->db = 0;
  o->timeout = kv_opt_timeout(L, 1, "redis.connect", KV_WAIT_REPLY);
  if (lua_isnoneornil(L, 1))
    return;
  luaL_checktype(L, 1, LUA_TTABLE);
  kv_check_options(L, 1, "redis.connect", connect_keys);
  /* Strings only: a number converted here would not stay referenced. */
  int t = lua_getfield(L, 1, "host");
  luaL_argcheck(L, t == LUA_TNIL || t == LUA_TSTRING, 1, "host must be a string");
  if (t == LUA_TSTRING)
    o->host = lua_tostring(L, -1);
  t = lua_getfield(L, 1, "password");
  luaL_argcheck(L, t == LUA_TNIL || t == LUA_TSTRING, 1, "password must be a string");
  if (t == LUA_TSTRING)
    o->password = lua_tostring(L, -1);
  if (lua_getfield(L, 1, "port") != LUA_TNIL)
    o->port = luaL_checkinteger(L, -1);
  if (lua_getfield(L, 1, "db") != LUA_TNIL)
    o->db = luaL_checkinteger(L, -1);
  lua_pop(L, 4); /* the strings stay referenced by the table */
  luaL_argcheck(L, o->port > 0 && o->port < 65536, 1, "port out of range");
  luaL_argcheck(L, o->db >= 0, 1, "db must not be negative");
}

/* Queue AUTH, SELECT and a PING that proves the server answers. */
static void send_handshake(call *k, const connect_opts *o) {
  char db[32];
  snprintf(db, sizeof db, "%lld", (long long)o->db);
  const char *auth[] = {"AUTH", o->password}, *select[] = {"SELECT", db}, *ping[] = {"PING"};
  batch b = {0};
  if (o->password)
    redis_batch_add_strings(&b, 2, auth);
  if (o->db != 0)
    redis_batch_add_strings(&b, 2, select);
  redis_batch_add_strings(&b, 1, ping);
  redis_send(k, &b);
  redis_batch_release(&b);
}

/*
 * redis.connect{host, port, db, password, timeout} -> c | nil, err.  Waits
 * until the server has answered the handshake (AUTH and SELECT when given,
 * then PING), so a refused, stalled or rejected connect is reported here.
 */
static int l_connect(lua_State *L) {
  connect_opts o;
  read_opts(L, &o);
  lua_settop(L, 1);
  conn **ud = lua_newuserdatauv(L, sizeof *ud, 0); /* 2 */
  *ud = NULL;
  luaL_setmetatable(L, CONN_MT);
  conn *c = *ud = redis_conn_new(o.host, o.port, o.timeout);
  if (redis_conn_open(L, c, o.host, (int)o.port) < 0)
    return fail(L, K_CONNECT, lua_tostring(L, -1));
  kv_wait *w =
      kv_wait_new(L, "redis.connect", sizeof(call *), redis_call_cancel, redis_call_dispose);
  int n = 1 + (o.password != NULL) + (o.db != 0);
  send_handshake(redis_call_new(c, w, K_CONNECT, n, 1), &o);
  return kv_wait_yield(L, w, connect_done);
}

/* ----------------------------------------------------------------- module */

static int null_tostring(lua_State *L) {
  lua_pushliteral(L, "redis.null");
  return 1;
}

static const luaL_Reg conn_methods[] = {{"call", conn_call},       {"pcall", conn_pcall},
                                        {"hgetall", conn_hgetall}, {"pipeline", conn_pipeline},
                                        {"close", conn_gc},        {NULL, NULL}};

static const luaL_Reg redis_funcs[] = {{"connect", l_connect}, {"batch", l_batch}, {NULL, NULL}};

static const kv_option_keys redis_options[] = {
    {"connect", connect_keys}, {"pipeline", pipeline_keys}, {NULL, NULL}};

int luaopen_redis(lua_State *L) {
  kv_class_new(L, CONN_MT, conn_methods, conn_gc, conn_tostring);
  redis_batch_open(L);
  luaL_newlib(L, redis_funcs);
  kv_set_options(L, redis_options);
  lua_pushfstring(L, "hiredis %d.%d.%d", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
  lua_setfield(L, -2, "version"); /* for `kvengine version` */
  lua_newuserdatauv(L, 0, 0);     /* redis.null: unique, prints as redis.null */
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, null_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &null_key);
  lua_setfield(L, -2, "null");
  return 1;
}
