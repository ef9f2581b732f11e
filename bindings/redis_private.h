/*
 * redis_private.h - what the three files of the `redis` module share.
 *
 * redis.c is the Lua surface (connect, the connection's methods, replies as
 * Lua values); redis_conn.c is a connection on the loop (hiredis's async
 * context over a libuv poll handle) and the calls that wait on it;
 * redis_batch.c formats commands into batches of wire-protocol bytes and
 * is the batch object a pipeline collects into.  redis.c uses both others,
 * redis_conn.c sends what redis_batch.c formats, and redis_batch.c needs
 * neither.
 */
#ifndef KV_REDIS_PRIVATE_H
#define KV_REDIS_PRIVATE_H

#include "engine.h"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

/* Replies are hiredis's own objects, kept past their callback (redis_conn.c). */
typedef redisReply reply;

typedef struct conn conn;
typedef struct call call;

/* What a call hands back to Lua. */
enum call_kind { K_CALL, K_PCALL, K_HGETALL, K_PIPELINE, K_CONNECT };

struct call {
  conn *c;
  kv_wait *w;        /* NULL once delivered or cancelled */
  uv_timer_t *timer; /* non-NULL exactly while w is */
  call *prev, *next; /* in c->calls while unsettled */
  int refs;          /* the wait + hiredis callbacks still to come */
  enum call_kind kind;
  int settled;      /* outcome known; the timer (at 0 ms) only delivers it */
  int timed_out;    /* the outcome is that the connection's timeout passed */
  call *ready_next; /* in the ready list (settled inside hiredis) */
  int n, got;       /* replies expected and received */
  reply **replies;  /* NULL when only errors are kept */
  int nerr;         /* error replies (when only errors are kept) */
  char *first_err;  /* the first one's message */
  char *err;        /* failure, without the "redis: " prefix */
};

struct conn {
  kv_resource res;
  redisAsyncContext *ac; /* NULL once freed, by hiredis or by us */
  char *lost;            /* why the connection is unusable; NULL while usable */
  char *where;           /* "host:port" */
  double timeout;
  call *calls; /* unsettled calls, oldest first */
  call *calls_tail;
  int refs; /* the userdata, the adapter, each call, a pending reaper */
  int closed;
};

/*
 * Commands formatted as they are added, in the wire protocol (RESP), so
 * that sending is a copy: buf holds them back to back, each followed by a
 * NUL that is not part of it, and ends (an array of size_t in a kv_buf)
 * says where command i ends.
 */
typedef struct batch {
  int n;      /* commands */
  int sealed; /* a c:pipeline(fn) batch once fn has returned */
  kv_buf buf;
  kv_buf ends;
} batch;

/* ------------------------------------------------------------ redis_conn.c */

/* A new connection to host:port (not yet open), tracked in the current scope, one reference. */
conn *redis_conn_new(const char *host, lua_Integer port, double timeout);

/* Start connecting c: 0, or -1 with "redis: cannot connect ..." pushed and c closed. */
int redis_conn_open(lua_State *L, conn *c, const char *host, int port);

/*
 * redis_conn_close is the resource's close: idempotent; pending calls fail
 * with "connection closed".  redis_conn_unref drops one of c's references
 * (c->refs); the last one frees c, which must be closed by then.
 */
void redis_conn_close(kv_resource *r);
void redis_conn_unref(conn *c);

/*
 * redis_call_new: a new call on c expecting n replies, waited for by w
 * (whose data is the call pointer), its timer armed; keep_replies = 0:
 * only the error replies are counted, the first kept.  Commands go out with
 * redis_send, then redis_flush.  w is made with redis_call_cancel and
 * redis_call_dispose as its cancel and dispose callbacks.
 */
call *redis_call_new(conn *c, kv_wait *w, enum call_kind kind, int n, int keep_replies);
void redis_call_cancel(kv_wait *w);
void redis_call_dispose(kv_wait *w);

/* Queue every command of b for k; stops at a failure, which settles k and drops c. */
void redis_send(call *k, const batch *b);

/* Write what was queued on c now rather than a loop turn later. */
void redis_flush(conn *c);

/* ----------------------------------------------------------- redis_batch.c */

/* Append the command at stack indices first..last (strings and numbers); raises on others. */
void redis_batch_add(lua_State *L, batch *b, int first, int last);

/* Append the command of C strings argv[0..argc). */
void redis_batch_add_strings(batch *b, int argc, const char *const *argv);

/* Empty b, keeping its storage (one command at a time reuses it). */
void redis_batch_clear(batch *b);

/* Give b's storage away (to a cache the next batch starts from); b is empty after. */
void redis_batch_release(batch *b);

/* Register the batch class (before redis_batch_push). */
void redis_batch_open(lua_State *L);

/* Push a new empty batch userdata (redis.batch(), and the p of c:pipeline(fn)). */
batch *redis_batch_push(lua_State *L);

/* The batch at index i, or NULL when the value there is not one. */
batch *redis_test_batch(lua_State *L, int i);

#endif
