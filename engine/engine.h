/*
 * engine.h - the engine's C interface for bindings.
 *
 * Every binding that talks to the outside world sits on one libuv loop and
 * lets Lua code wait without blocking it.  This header is the whole contract
 * between a binding and the engine:
 *
 *   - waiting: a binding registers native work (a timer, a socket poll, a
 *     curl transfer, a hiredis callback, a child's exit) together with a
 *     kv_wait record, yields the calling task, and wakes it from a loop
 *     callback when the answer is in the record;
 *   - tracking: every handle a test opens is a kv_resource in the current
 *     scope, closed when the test ends or is abandoned;
 *   - context: the scope code runs in;
 *   - tasks: coroutines that the engine itself resumes from the loop (a test
 *     body, a spawn()ed function, an HTTP handler);
 *   - one dialect: the userdata classes, the strict option tables and the
 *     byte buffers every binding builds the same way.
 *
 * Rules a binding follows:
 *   - never resume Lua from inside a running Lua call: wake only from loop
 *     callbacks (kv_wait_wake does the resuming);
 *   - uv handles live in malloc'd memory freed in their close callback, never
 *     inside a userdata: a userdata can be collected before uv_close finishes;
 *   - __gc and __close are one function that calls the resource's close,
 *     which is idempotent and starts with kv_untrack.
 */
#ifndef KV_ENGINE_H
#define KV_ENGINE_H

#include <stddef.h>

#include <lauxlib.h>
#include <lua.h>
#include <uv.h>

/* The engine's one loop. */
uv_loop_t *kv_loop(void);

/* Monotonic time in seconds. */
double kv_now(void);

/*
 * uv_timer_start counted from now.  libuv measures a timer from the time it
 * cached at the start of the loop's turn, and Lua may have run for a while
 * since: a 2 s timeout started after 1.5 s of work would fire after 0.5 s.
 */
int kv_timer_start(uv_timer_t *timer, uv_timer_cb cb, uint64_t timeout_ms);

/* The uv_close callback of a handle that is its own malloc'd block. */
void kv_free_handle(uv_handle_t *h);

/*
 * A timer on the loop in a malloc'd block of its own, with `data` set; close
 * it with uv_close(..., kv_free_handle).  Aborts when memory runs out.
 */
uv_timer_t *kv_timer_new(void *data);

/* ---------------------------------------------------------------- waiting */

typedef struct kv_wait kv_wait;
typedef void (*kv_wait_fn)(kv_wait *w);

/*
 * Start a wait on behalf of the task running L.  `size` bytes of zeroed data
 * travel with the record (kv_wait_data).  `cancel`, if not NULL, is called
 * when the waiting task is abandoned (test timeout, scope end): it should stop
 * the native work; the binding must still call kv_wait_wake exactly once
 * later (or from inside cancel).  `dispose`, if not NULL, releases whatever
 * the data owns; it runs just before the record is freed, on every path.
 *
 * Raises a Lua error naming `who` when L cannot wait: it is not a task the
 * engine resumes (for example a coroutine the script created itself).
 */
kv_wait *kv_wait_new(lua_State *L, const char *who, size_t size, kv_wait_fn cancel,
                     kv_wait_fn dispose);

/* The data area of the record. */
void *kv_wait_data(kv_wait *w);

/*
 * Yield the task until kv_wait_wake(w).  Use as `return kv_wait_yield(L, w, k)`.
 * When woken, Lua calls k(L, LUA_YIELD, ctx) inside the task, where
 * kv_wait_of(ctx) gives the record back; k reads the answer and returns the
 * results (or raises, or waits again).
 */
int kv_wait_yield(lua_State *L, kv_wait *w, lua_KFunction k);
kv_wait *kv_wait_of(lua_KContext ctx);

/*
 * Deliver: from a loop callback, resume the waiting task (its continuation
 * runs now), then dispose of and free the record.  On a cancelled record it
 * only disposes and frees.  Call exactly once per record; never from Lua.
 */
void kv_wait_wake(kv_wait *w);

/*
 * The end of a wait whose record keeps a timer of its own (its timeout, or
 * a delivery at 0 ms): close *timer, a handle in its own malloc'd block,
 * clear *timer and *w so the record shows the wait is over, then
 * kv_wait_wake the wait.
 */
void kv_wait_finish(kv_wait **w, uv_timer_t **timer);

/*
 * Waits a binding keeps on a list of its own (the tasks waiting for one
 * child to exit): kv_wait_link puts w, on no list yet, at the head of *list
 * (the list does not own it); kv_wait_unlink takes it off its list
 * (idempotent), which the binding does before waking it, and in its cancel
 * and dispose callbacks.
 */
void kv_wait_link(kv_wait *w, kv_wait **list);
void kv_wait_unlink(kv_wait *w);

/* --------------------------------------------------------------- tracking */

typedef struct kv_scope kv_scope;
typedef struct kv_resource kv_resource;
typedef void (*kv_close_fn)(kv_resource *r);

struct kv_resource {
  kv_resource *prev, *next;
  kv_scope *scope;
  const char *what; /* "zmq socket", "child process": for diagnostics */
  kv_close_fn close;
};

/*
 * kv_track puts r (zeroed, or untracked since) in the current scope (the
 * running task's, or the file's): when the scope ends, close(r) is called,
 * newest resource first.  `what` is a static string.  The binding keeps
 * owning r's memory.  close must call kv_untrack(r) and be safe to call
 * again (it is also the __gc/__close path); kv_untrack takes r out of its
 * scope, and does nothing to a resource in none.
 */
void kv_track(kv_resource *r, const char *what, kv_close_fn close);
void kv_untrack(kv_resource *r);

/*
 * What a closed resource leaves behind (a child process let go but not yet
 * reaped): kv_drain_begin when its end begins, kv_drain_end once it is
 * over, exactly once each.  Between tests the runner waits until nothing
 * is left (engine/drain.c), so no test meets what the one before it closed.
 */
void kv_drain_begin(void);
void kv_drain_end(void);

/* --------------------------------------------------------------- context */

/* The scope code runs in now: the running task's, else the file's root. */
kv_scope *kv_scope_current(void);

/* ------------------------------------------------------------------ tasks */

/*
 * Start a new task in `scope` (NULL: the current scope) that calls the
 * function below `nargs` arguments on top of L's stack (both are popped).
 * It first runs from the loop, never from inside this call.  An error in a
 * task nobody waits for is reported against the scope's test (it fails) or,
 * outside a test, printed with its traceback.
 */
void kv_spawn(lua_State *L, kv_scope *scope, int nargs);

/* ---------------------------------------------------------- one dialect */

/*
 * Register the metatable of a binding's userdata, as liolib does for files:
 * named `name` ("kvengine.<module>.<type>"), with `methods` under __index,
 * `close` as both __gc and __close (one function: closing twice, or
 * collecting what was closed, does nothing) and `tostring` as __tostring.
 * methods, close and tostring may be NULL.  Every function gets the
 * metatable as upvalue 1, so a method called once per command can check its
 * self by comparing metatables instead of looking the name up.  Other
 * metamethods are set on luaL_getmetatable(L, name) afterwards.
 */
void kv_class_new(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction close,
                  lua_CFunction tostring);

/*
 * Expected failures, returned the way Lua's own libraries return them: push
 * nil and the message (lua_pushfstring's format, starting "<module>: "),
 * and return 2, as in `return kv_fail(L, "zmq: bind %s: %s", ep, why)`.
 * kv_timeout pushes nil, "timeout": a wait that ran out of time says only
 * that, so callers can compare.
 */
int kv_fail(lua_State *L, const char *fmt, ...);
int kv_timeout(lua_State *L);

/*
 * Raise unless every key of the options table at idx is one of `keys`
 * (NULL-terminated).  The error names the function (`fname`), the unknown
 * key and the closest valid one, and points at the Lua code that called the
 * running C function: "file.lua:12: redis.connect: unknown option
 * `tiemout`; did you mean `timeout`?".  A nil or absent table passes; any
 * other non-table raises.  Scripts reach the same check as
 * engine.check_options (engine/lua/engine.lua).
 */
void kv_check_options(lua_State *L, int idx, const char *fname, const char *const keys[]);

/*
 * The option keys of a module's calls, as the module publishes them: each
 * entry names a call ("connect", "pipeline") and the NULL-terminated list
 * its kv_check_options is given; the array ends with {NULL, NULL}.
 * kv_set_options adds options[call] = {key, ...} for each to the table at
 * the top (creating its `options` field), so the editor types of the
 * option tables (types/) are checked against the lists the checks use.
 */
typedef struct kv_option_keys {
  const char *call;
  const char *const *keys;
} kv_option_keys;
void kv_set_options(lua_State *L, const kv_option_keys lists[]);

/*
 * Intrusive doubly linked lists, as the engine and the bindings keep their
 * handles, waits and calls: a node holds its own pointers to the nodes
 * before and after it (named by the caller, so a node may sit on several
 * lists); a list is a pointer to its first node, a queue adds one to its
 * last.  Removing a node that is on no list does nothing.  Macros, so that
 * every node type shares them; they evaluate their arguments more than once.
 */
#define KV_LIST_PUSH(head, node, prev, next)                                                       \
  do {                                                                                             \
    (node)->prev = NULL;                                                                           \
    (node)->next = (head);                                                                         \
    if ((head))                                                                                    \
      (head)->prev = (node);                                                                       \
    (head) = (node);                                                                               \
  } while (0)

#define KV_LIST_REMOVE(head, node, prev, next)                                                     \
  do {                                                                                             \
    if ((node)->prev || (head) == (node)) {                                                        \
      if ((node)->prev)                                                                            \
        (node)->prev->next = (node)->next;                                                         \
      else                                                                                         \
        (head) = (node)->next;                                                                     \
      if ((node)->next)                                                                            \
        (node)->next->prev = (node)->prev;                                                         \
      (node)->prev = (node)->next = NULL;                                                          \
    }                                                                                              \
  } while (0)

#define KV_QUEUE_APPEND(head, tail, node, prev, next)                                              \
  do {                                                                                             \
    (node)->prev = (tail);                                                                         \
    (node)->next = NULL;                                                                           \
    if ((tail))                                                                                    \
      (tail)->next = (node);                                                                       \
    else                                                                                           \
      (head) = (node);                                                                             \
    (tail) = (node);                                                                               \
  } while (0)

#define KV_QUEUE_REMOVE(head, tail, node, prev, next)                                              \
  do {                                                                                             \
    if ((tail) == (node))                                                                          \
      (tail) = (node)->prev;                                                                       \
    KV_LIST_REMOVE(head, node, prev, next);                                                        \
  } while (0)

/*
 * A growable byte buffer: p holds len bytes in room for cap.  Start it
 * zeroed, release it with kv_buf_free.  When memory runs out the buffer
 * keeps what it held and oom is set, so code that appends many pieces can
 * check once at the end.
 */
typedef struct kv_buf {
  char *p;
  size_t len, cap;
  int oom;
} kv_buf;

/* Room for `more` bytes after len (len is not changed), or NULL. */
char *kv_buf_room(kv_buf *b, size_t more);

/* Append n bytes: 0, or -1 when out of memory. */
int kv_buf_add(kv_buf *b, const void *data, size_t n);

/* Free what b holds and zero it: b is an empty buffer again. */
void kv_buf_free(kv_buf *b);

/* -------------------------------------------------------------- timeouts */

/*
 * The one timeout rule.  Every call that waits takes its limit as an option
 * named `timeout`, in seconds:
 *   nil     the default for its kind of wait (below), times
 *           engine.time_scale() (KVENGINE_TIME_SCALE), as every default
 *           wait is;
 *   0       poll: answer from what is already there, without waiting
 *           (a wait that needs the peer, a reply or a transfer, then
 *           returns nil, "timeout");
 *   t > 0   wait at most t seconds, then nil, "timeout" (more than 1e9
 *           seconds counts as 1e9).
 * No call waits forever unless its name says so (none does: a program that
 * waits for a message for ever loops over bounded waits).  A negative, NaN,
 * infinite or non-number timeout raises, and so does a bare number where
 * the options table goes (`sub:recv(2)`, the form before this rule): the
 * message names the form to write, `{timeout = 2}`.
 *
 * The defaults, one per kind of wait:
 *   KV_WAIT_REPLY     an answer from a local peer that should come at
 *                     once: a Redis handshake or reply, a ZMQ message or
 *                     subscription;
 *   KV_WAIT_TRANSFER  an HTTP transfer, which may stream a whole
 *                     completion (http.request and friends, http.load's
 *                     requests);
 *   KV_WAIT_PROGRAM   a child program's run or exit (proc.run, p:wait).
 */
#define KV_WAIT_REPLY 5.0
#define KV_WAIT_TRANSFER 30.0
#define KV_WAIT_PROGRAM 60.0

/*
 * The `timeout` option of the options table at idx, in seconds, by the
 * rule above; `dflt` (one of the KV_WAIT_ defaults), scaled, when idx is
 * 0 (the call has no options), absent or nil, or the table has no timeout.
 * Raises, naming `fname` ("sub:recv"), on a bare number at idx or a
 * timeout that is not a finite number >= 0.  The table's other keys are
 * the caller's to check (kv_check_options).
 */
double kv_opt_timeout(lua_State *L, int idx, const char *fname, double dflt);

/*
 * As kv_opt_timeout, for a call whose options table holds nothing else:
 * any key but `timeout` raises too (kv_check_options).  kv_timeout_keys is
 * that list, {"timeout", NULL}, for the module to publish (kv_set_options).
 */
double kv_timeout_arg(lua_State *L, int idx, const char *fname, double dflt);
extern const char *const kv_timeout_keys[];

#endif
