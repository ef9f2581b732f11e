/*
 * drain.c - what a closed resource leaves behind, and waiting until it is
 * gone.
 *
 * Closing a child process (the end of its test, p:close()) only begins its
 * end: the supervisor terminates the group and libuv reaps it some
 * milliseconds later.  Meanwhile it still holds its addresses, so a test
 * that starts a server on the address the test before it used could talk
 * to the old process.  A binding counts such leftovers here
 * (kv_drain_begin when the end begins, kv_drain_end when it is over), and
 * the runner waits between tests until none is left (__kv.drain), within a
 * bound: the child's own SIGKILL backstop ends every one before it.
 *
 * The waits are on the loop like any other: a list of waiting tasks, each
 * with a timer for its bound, all woken when the count reaches zero.
 */
#include "internal.h"

#include <assert.h>
#include <stdlib.h>

#include <lauxlib.h>

typedef struct drain_wait {
  kv_wait *w;
  uv_timer_t *timer;
} drain_wait;

static int pending;      /* leftovers not yet gone */
static kv_wait *waiters; /* tasks in __kv.drain */

static void disarm(drain_wait *d) {
  if (d->timer)
    uv_close((uv_handle_t *)d->timer, kv_free_handle);
  d->timer = NULL;
}

static void drain_wake(drain_wait *d) {
  kv_wait_unlink(d->w);
  disarm(d);
  kv_wait_wake(d->w);
}

void kv_drain_begin(void) { pending++; }

void kv_drain_end(void) {
  assert(pending > 0);
  if (--pending > 0)
    return;
  while (waiters)
    drain_wake(kv_wait_data(waiters));
}

static void drain_cancel(kv_wait *w) { drain_wake(kv_wait_data(w)); }

static void drain_dispose(kv_wait *w) {
  kv_wait_unlink(w);
  disarm(kv_wait_data(w));
}

static void drain_timer_fired(uv_timer_t *t) { drain_wake(t->data); }

static int drain_k(lua_State *L, int status, lua_KContext ctx) {
  (void)L, (void)status, (void)ctx;
  return 0;
}

/*
 * __kv.drain(seconds): yield the calling task until every leftover is gone,
 * or for `seconds` at most (nobody acts on the difference: the children's
 * SIGKILL backstop ends them before the bound).
 */
int kv_l_drain(lua_State *L) {
  lua_Number seconds = luaL_checknumber(L, 1);
  if (pending == 0)
    return 0;
  kv_wait *w = kv_wait_new(L, "drain", sizeof(drain_wait), drain_cancel, drain_dispose);
  drain_wait *d = kv_wait_data(w);
  d->w = w;
  d->timer = kv_timer_new(d);
  kv_timer_start(d->timer, drain_timer_fired, seconds > 0 ? (uint64_t)(seconds * 1000.0 + 0.5) : 0);
  kv_wait_link(w, &waiters);
  return kv_wait_yield(L, w, drain_k);
}
