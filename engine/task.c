/*
 * task.c - the coroutine scheduler and the wait primitive.
 *
 * A task is a Lua thread that the engine resumes from the loop: a test body,
 * a hook, a spawn()ed function, an HTTP handler.  A task runs until it
 * yields on a kv_wait (a binding registered native work and will wake it),
 * until the deadline hook yields it (guard.c decides what then), or until it
 * ends.  Resumption happens only from loop callbacks: a wake that arrives
 * while Lua is running (for example a scope closed from Lua abandons a task
 * that somebody waits for) is queued and delivered from the idle handle.
 *
 * Each thread's LUA_EXTRASPACE holds its task, so a binding can tell a task
 * from a coroutine the script created (whose extra space is copied from the
 * main thread, which holds NULL).
 */
#include "internal.h"

#include <assert.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

struct kv_wait {
  kv_task *task; /* NULL once cancelled */
  kv_wait *next, **pprev;
  kv_wait_fn cancel, dispose;
  int woken; /* kv_wait_wake was called; delivery may be queued */
  alignas(max_align_t) unsigned char data[];
};

static lua_State *main_L;
static const kv_sched_watcher *watcher; /* the deadline guard's (guard.c) */
static int deferring; /* > 0: wakes are queued, not delivered (see kv_sched_defer) */
static kv_task *ready_head, **ready_tail = &ready_head;
static kv_wait *deferred_head, **deferred_tail = &deferred_head;
static uv_idle_t *idle;

static void task_resume(kv_task *t);
static void ready_remove(kv_task *t);

/*
 * One turn of queued work: the wakes and tasks queued before this turn
 * began.  What they queue runs next turn, after the loop has polled for I/O,
 * so a task that keeps yielding (sleep(0)) cannot starve the sockets.
 */
static void idle_run(uv_idle_t *h) {
  (void)h;
  kv_wait *wakes = deferred_head;
  deferred_head = NULL;
  deferred_tail = &deferred_head;
  int ntasks = 0; /* tasks stay on the list, where abandoning one removes it */
  for (kv_task *t = ready_head; t; t = t->ready_next)
    ntasks++;
  while (wakes) {
    kv_wait *w = wakes;
    wakes = w->next;
    w->next = NULL;
    w->woken = 0;
    kv_wait_wake(w);
  }
  while (ntasks-- > 0 && ready_head) {
    kv_task *t = ready_head;
    ready_remove(t);
    task_resume(t);
  }
  if (!ready_head && !deferred_head)
    uv_idle_stop(idle);
}

static void idle_kick(void) {
  if (!uv_is_active((uv_handle_t *)idle))
    uv_idle_start(idle, idle_run);
}

static void ready_push(kv_task *t) {
  t->state = KV_TASK_READY;
  t->ready_next = NULL;
  *ready_tail = t;
  ready_tail = &t->ready_next;
  idle_kick();
}

static void ready_remove(kv_task *t) {
  for (kv_task **p = &ready_head; *p; p = &(*p)->ready_next) {
    if (*p == t) {
      *p = t->ready_next;
      if (!*p)
        ready_tail = p;
      t->ready_next = NULL;
      return;
    }
  }
}

/* Scopes end their live tasks through the scheduler (see kv_scope_on_close). */
static void end_scope_tasks(kv_scope *s) { kv_task_abandon_all(s, NULL); }

void kv_sched_init(lua_State *L) {
  assert(L && !main_L);
  main_L = L;
  kv_scope_on_close(end_scope_tasks);
  idle = malloc(sizeof *idle);
  if (!idle)
    abort();
  uv_idle_init(kv_loop(), idle);
}

void kv_sched_close(void) {
  if (idle)
    uv_close((uv_handle_t *)idle, kv_free_handle);
  idle = NULL;
  main_L = NULL;
}

void kv_sched_watch(const kv_sched_watcher *w) { watcher = w; }

/*
 * While on (calls nest), wakes are queued for the idle handle instead of
 * resuming at once: code that abandons several tasks must not have Lua run,
 * and free what it walks, in the middle of its walk.
 */
void kv_sched_defer(int on) {
  deferring += on ? 1 : -1;
  assert(deferring >= 0); /* each off follows its on */
}

kv_task *kv_task_of(lua_State *L) { return *(kv_task **)lua_getextraspace(L); }

/* ------------------------------------------------------------------ waits */

kv_wait *kv_wait_new(lua_State *L, const char *who, size_t size, kv_wait_fn cancel,
                     kv_wait_fn dispose) {
  kv_task *t = kv_task_of(L);
  if (!t || t != kv_task_running() || t->co != L || !lua_isyieldable(L))
    luaL_error(L,
               "%s: cannot wait here: only a test, a hook or a spawn()ed task can wait "
               "(not a coroutine made with coroutine.create/wrap, nor a __close or __gc)",
               who);
  kv_wait *w = calloc(1, sizeof *w + size);
  if (!w)
    luaL_error(L, "%s: out of memory", who);
  w->task = t;
  w->cancel = cancel;
  w->dispose = dispose;
  return w;
}

void *kv_wait_data(kv_wait *w) { return w->data; }

kv_wait *kv_wait_of(lua_KContext ctx) { return (kv_wait *)ctx; }

int kv_wait_yield(lua_State *L, kv_wait *w, lua_KFunction k) {
  kv_task *t = w->task;
  assert(t && t->co == L && !t->wait);
  t->wait = w;
  t->state = KV_TASK_WAITING;
  return lua_yieldk(L, 0, (lua_KContext)w, k);
}

static void wait_free(kv_wait *w) {
  if (w->dispose)
    w->dispose(w);
  free(w);
}

void kv_wait_wake(kv_wait *w) {
  kv_task *t = w->task;
  if (!t) {
    wait_free(w);
    return;
  }
  if (kv_task_running() || deferring || w->woken) {
    /* Lua is running: deliver from the loop instead. */
    if (!w->woken) {
      w->woken = 1;
      w->next = NULL;
      *deferred_tail = w;
      deferred_tail = &w->next;
      idle_kick();
    }
    return;
  }
  assert(t->wait == w);
  t->wait = NULL;
  task_resume(t);
  wait_free(w);
}

void kv_wait_finish(kv_wait **w, uv_timer_t **timer) {
  assert(*w && *timer); /* the wait is not over yet */
  kv_wait *wait = *w;
  uv_close((uv_handle_t *)*timer, kv_free_handle);
  *timer = NULL;
  *w = NULL;
  kv_wait_wake(wait);
}

/* Put w on a list of waiters (a task's, for task:wait and run). */
void kv_wait_link(kv_wait *w, kv_wait **list) {
  assert(w && list && !w->pprev); /* on one list at a time */
  w->next = *list;
  if (w->next)
    w->next->pprev = &w->next;
  w->pprev = list;
  *list = w;
}

void kv_wait_unlink(kv_wait *w) {
  if (!w->pprev)
    return;
  *w->pprev = w->next;
  if (w->next)
    w->next->pprev = w->pprev;
  w->next = NULL;
  w->pprev = NULL;
}

/* Cancel t's pending wait, if any: the native side frees it when it calls wake. */
static void wait_cancel(kv_task *t) {
  kv_wait *w = t->wait;
  if (!w)
    return;
  t->wait = NULL;
  w->task = NULL;
  if (!w->woken && w->cancel)
    w->cancel(w);
}

/* ------------------------------------------------------------------ tasks */

/*
 * Make a task in `scope` (NULL: the current one) from the function and
 * nargs arguments on top of L, which are popped.  It is queued to start from
 * the loop.  The returned task has one reference, held until it ends.
 */
kv_task *kv_task_new(lua_State *L, kv_scope *scope, int nargs) {
  assert(main_L && nargs >= 0 && lua_gettop(L) > nargs); /* the function is below its arguments */
  kv_task *t = calloc(1, sizeof *t);
  if (!t)
    luaL_error(L, "out of memory");
  lua_State *co = lua_newthread(L);
  t->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  t->co = co;
  *(kv_task **)lua_getextraspace(co) = t;
  lua_xmove(L, co, nargs + 1);
  t->nargs = nargs;
  t->refs = 1;
  kv_scope_add_task(scope ? scope : kv_scope_current(), t);
  ready_push(t);
  return t;
}

void kv_spawn(lua_State *L, kv_scope *scope, int nargs) { kv_task_new(L, scope, nargs); }

/*
 * Drop one reference to t.  With the last one gone nobody can take its
 * outcome any more (no waiter, no Lua handle to wait with), so an error
 * nobody took is lost to its scope now, and only now: a task that fails
 * before the code holding its handle gets round to waiting is no loss.
 */
void kv_task_release(kv_task *t) {
  assert(t->refs > 0);
  if (--t->refs > 0)
    return;
  assert(t->state == KV_TASK_DONE && !t->waiters && !t->wait);
  if (t->end == KV_END_ERROR && !t->observed)
    kv_scope_lost_error(t->scope, t->traceback ? t->traceback : "error");
  kv_scope_remove_task(t);
  if (main_L)
    luaL_unref(main_L, LUA_REGISTRYINDEX, t->ref);
  free(t->traceback);
  free(t);
}

static void task_finish(kv_task *t, enum kv_task_end end) {
  assert(t->state != KV_TASK_DONE && end != KV_END_NONE);
  t->state = KV_TASK_DONE;
  t->end = end;
  if (watcher)
    watcher->ended(t);
  while (t->waiters) {
    kv_wait *w = t->waiters;
    kv_wait_unlink(w);
    kv_wait_wake(w);
  }
  kv_task_release(t);
}

/* The error value is on top of t's stack: keep it there, save a traceback. */
static void task_failed(kv_task *t) {
  lua_State *co = t->co;
  int top = lua_gettop(co);
  const char *msg = lua_type(co, top) == LUA_TSTRING ? lua_tostring(co, top) : NULL;
  luaL_traceback(co, co, msg, 0);
  t->traceback = strdup(lua_tostring(co, -1));
  lua_settop(co, top);
  task_finish(t, KV_END_ERROR);
}

/* The deadline hook yielded t: the guard decides; t goes on unless it ended. */
static void task_hooked(kv_task *t) {
  t->refs++; /* the guard may abandon t, and with it the last reference */
  if (watcher)
    watcher->hooked(t);
  if (t->state != KV_TASK_DONE)
    ready_push(t);
  kv_task_release(t);
}

static void task_resume(kv_task *t) {
  assert(!kv_task_running() && t->state != KV_TASK_DONE);
  int nargs = t->nargs, nres = 0;
  t->nargs = 0;
  kv_running prev = kv_running_enter(t, t->co);
  int st = lua_resume(t->co, NULL, nargs, &nres);
  kv_running_leave(prev);
  if (st == LUA_OK) {
    t->nresults = nres;
    task_finish(t, KV_END_OK);
  } else if (st != LUA_YIELD) {
    task_failed(t);
  } else if (t->state == KV_TASK_HOOKED) {
    lua_pop(t->co, nres);
    task_hooked(t);
  } else if (t->wait) {
    lua_pop(t->co, nres);
  } else {
    lua_settop(t->co, 0);
    lua_pushliteral(t->co,
                    "coroutine.yield() outside a coroutine: a test waits with sleep, eventually "
                    "or a binding call, and yields only inside coroutines it created");
    task_failed(t);
  }
}

/*
 * Abandon t: cancel its wait, close its thread (pending to-be-closed
 * variables are closed; the hook raises in them if they spin), and wake those
 * who wait for it, who find it abandoned.  Safe to call from Lua or the loop.
 */
void kv_task_abandon(kv_task *t) {
  if (t->state == KV_TASK_DONE)
    return;
  assert(t != kv_task_running()); /* a thread cannot be closed while it runs */
  ready_remove(t);
  wait_cancel(t);
  t->refs++; /* closing the thread may run Lua that drops the last handle */
  lua_resetthread(t->co);
  lua_settop(t->co, 0);
  task_finish(t, KV_END_ABANDONED);
  kv_task_release(t);
}

/* The first task of s that is still live and is not `except`. */
static kv_task *first_live(kv_scope *s, kv_task *except) {
  for (kv_task *t = s->tasks; t; t = t->scope_next)
    if (t->state != KV_TASK_DONE && (!except || t != except))
      return t;
  return NULL;
}

void kv_task_abandon_all(kv_scope *s, kv_task *except) {
  kv_sched_defer(1);
  s->refs++; /* the last task's release must not free s under the walk */
  for (kv_task *t; (t = first_live(s, except));)
    kv_task_abandon(t); /* the list may change: walk again from its head */
  kv_scope_unref(s);
  kv_sched_defer(0);
}

/*
 * Push t's outcome onto L: for an OK task, true followed by its results; for
 * an error, false, the error value and the traceback; for an abandoned task,
 * false, "abandoned".  Returns the number of values pushed.
 */
int kv_task_push_outcome(kv_task *t, lua_State *L) {
  assert(t->state == KV_TASK_DONE && t->end != KV_END_NONE);
  lua_State *co = t->co;
  t->observed = 1;
  switch (t->end) {
  case KV_END_OK: {
    int n = t->nresults, base = lua_gettop(co) - n;
    luaL_checkstack(L, n + 1, "too many results");
    lua_pushboolean(L, 1);
    for (int i = 1; i <= n; i++) {
      lua_pushvalue(co, base + i);
      lua_xmove(co, L, 1);
    }
    return n + 1;
  }
  case KV_END_ERROR:
    lua_pushboolean(L, 0);
    lua_pushvalue(co, -1);
    lua_xmove(co, L, 1);
    lua_pushstring(L, t->traceback ? t->traceback : "");
    return 3;
  default:
    lua_pushboolean(L, 0);
    lua_pushliteral(L, "abandoned");
    return 2;
  }
}
