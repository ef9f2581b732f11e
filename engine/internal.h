/*
 * internal.h - what the engine's own files share and bindings do not see.
 *
 * The engine's files call each other in one direction only, and this
 * header lists them in that order, the floor first (loop.c, whose functions
 * are engine.h's, below all): a file calls only the files of the sections
 * above its own (engine/tests/layers.lua checks it on the built objects).
 * Where a lower file must hear from a higher one (a scope ending its tasks,
 * the scheduler telling the guard that a task ended), the higher one
 * registers a callback with it.
 *
 *   loop.c, running.c, defer.c, modules.c   the floor: no engine calls
 *   scope.c    what a test owns             running.c, defer.c
 *   task.c     tasks and waits              scope.c, running.c, loop.c
 *   guard.c    deadlines                    task.c, scope.c, running.c, loop.c
 *   coro.c     the coroutine library        running.c
 *   drain.c    leftovers of closed handles  task.c, loop.c
 *   core.c     the Lua face of all above
 *   state.c    a ready Lua state            core.c, coro.c, guard.c, modules.c
 *   host.c     one program on the loop      state.c and the layers below
 *
 *   worker.c   one file in a worker         host.c, state.c, options.c
 *   forkserver.c  forks the workers         worker.c, limits.c
 *
 * pool.c (the parent process, which asks forkserver.c for its workers) and
 * main.c sit on top; options.c (the command line), dialect.c,
 * strict_options.c and buf.c (the bindings' dialect) and version.c call
 * nothing of the engine, supervise.c only limits.c.
 */
#ifndef KV_INTERNAL_H
#define KV_INTERNAL_H

#include "engine.h"

#include <signal.h>

typedef struct kv_task kv_task;

enum kv_task_state {
  KV_TASK_READY,   /* queued to be resumed from the loop */
  KV_TASK_WAITING, /* yielded on a kv_wait */
  KV_TASK_HOOKED,  /* yielded by the deadline hook, not waiting on anything */
  KV_TASK_DONE,
};

enum kv_task_end {
  KV_END_NONE,
  KV_END_OK,
  KV_END_ERROR,
  KV_END_ABANDONED,
};

struct kv_task {
  lua_State *co;
  int ref; /* registry reference to co while the task exists */
  kv_scope *scope;
  kv_task *scope_prev, *scope_next;
  kv_task *ready_next;
  kv_wait *wait;    /* pending wait, if WAITING */
  kv_wait *waiters; /* tasks waiting for this one to end */
  int refs;         /* live + Lua handle + waiters */
  int nargs;        /* arguments on co's stack for the first resume */
  enum kv_task_state state;
  enum kv_task_end end;
  int nresults;    /* values left on co's stack by a task that ended OK */
  int observed;    /* somebody took its outcome (task:wait), or its scope reported it */
  char *traceback; /* for an error: message with traceback */
};

struct kv_scope {
  kv_scope *prev, *next;  /* every open scope, for an orderly exit */
  kv_resource *resources; /* newest first */
  kv_task *tasks;
  struct kv_lost *lost; /* errors of tasks nobody can take any more, oldest first */
  int closed;
  int refs; /* Lua handle + tasks and resources pointing here */
};

/* ------------------------------------------------- running.c: who runs */

/* What runs now: the task the scheduler resumed and the Lua thread in it. */
typedef struct kv_running {
  kv_task *task;
  lua_State *thread;
} kv_running;

/*
 * Record that co runs from now on, on behalf of task t (the scheduler
 * passes the task it resumes; coro.c passes kv_task_running(), as a
 * script's coroutine runs inside the task that resumed it).  co must not be
 * NULL.  Returns what ran before, which the caller hands back to
 * kv_running_leave once co yields or ends: calls nest as resumes do.
 */
kv_running kv_running_enter(kv_task *t, lua_State *co);

/* Restore what kv_running_enter returned. */
void kv_running_leave(kv_running prev);

/* The task the scheduler is running, or NULL when the loop runs no task. */
kv_task *kv_task_running(void);

/*
 * The Lua thread running now (a task's, or a script's coroutine inside
 * it), or NULL.  Safe to call from a signal handler: it only reads.
 */
lua_State *kv_thread_running(void);

/* ------------------------------------------- defer.c: deferred functions */

/*
 * Append the function on top of L (popped) to the functions deferred on
 * `key` (a scope's address; not NULL).  They are kept in L's registry,
 * oldest first, until taken or forgotten.
 */
void kv_defer_add(lua_State *L, const void *key);

/*
 * Push the list of functions deferred on key, oldest first (an empty table
 * when there are none, or key is NULL), and forget them: the caller owns
 * the list.
 */
void kv_defer_take(lua_State *L, const void *key);

/* Forget what was deferred on key and not taken (the scope at key ended). */
void kv_defer_forget(lua_State *L, const void *key);

/* ----------------------------------------- modules.c: the bindings' loader */

/*
 * Put a searcher for the bindings (exe_dir/lib/<name>.so, or
 * exe_dir/../lib/kvengine/<name>.so) second in L's package.searchers.
 * exe_dir, the binary's folder, is copied.  Modules it loads stay mapped
 * until the process exits.
 */
void kv_modules_install(lua_State *L, const char *exe_dir);

/* ------------------------------------------------ scope.c: what a test owns */

/*
 * A new open scope with one reference (the caller's: kv_scope_unref, after
 * kv_scope_close).  Aborts when memory runs out.
 */
kv_scope *kv_scope_new(void);

/* The file's scope (a served program's), or NULL outside a host. */
kv_scope *kv_scope_root(void);

/*
 * Make s the root scope (NULL: none).  The root must stay referenced while
 * it is the root: the host clears it before dropping its reference.
 */
void kv_scope_set_root(kv_scope *s);

/*
 * How a closing scope ends its live tasks.  Scopes lie below the scheduler,
 * which registers its kv_task_abandon_all here once (kv_sched_init), before
 * any task exists; fn must leave no task of s running.
 */
typedef void (*kv_scope_fn)(kv_scope *s);
void kv_scope_on_close(kv_scope_fn fn);

/*
 * Put the new task t (not yet in any scope) in scope s (a closing one
 * still ends it); t holds a reference to s until kv_scope_remove_task.  For
 * task.c only.
 */
void kv_scope_add_task(kv_scope *s, kv_task *t);

/*
 * Take t out of its scope and drop the reference it held, which may free
 * the scope.  Does nothing for a task in no scope.
 */
void kv_scope_remove_task(kv_task *t);

/*
 * Close s (idempotent): mark it closed, forget what was deferred on it,
 * end its live tasks (kv_scope_on_close), then close its resources newest
 * first.  Pushes onto L a list of the tracebacks of its tasks that failed
 * while nobody waited for them, oldest loss first.  s must be referenced
 * by the caller, who still owns that reference afterwards.  Returns 1.
 */
int kv_scope_close(kv_scope *s, lua_State *L);

/*
 * A task of s ended with an error that nobody took and nobody can take any
 * more (traceback is copied).  A test's open scope keeps it for
 * kv_scope_close; the root scope, a closed one, or no scope (NULL) prints
 * it on stderr now.
 */
void kv_scope_lost_error(kv_scope *s, const char *traceback);

/*
 * Drop one reference to s; the last one frees it, which requires s to hold
 * no task and no resource (it was closed) and not to be the root.
 */
void kv_scope_unref(kv_scope *s);

/*
 * Close every scope still open, newest first (an interrupted run, and the
 * root at the end of every run), printing the root's errors nobody took.
 * Leaves L's stack as it found it.
 */
void kv_scope_close_all(lua_State *L);

/* ------------------------------------------- task.c: tasks and their waits */

/* The task whose thread L is, or NULL (the main thread, a script's coroutine). */
kv_task *kv_task_of(lua_State *L);

/*
 * Make a task in `scope` (NULL: the current one) from the function and
 * nargs arguments on top of L, which are popped.  It is queued to start
 * from the loop, never from inside this call.  The task holds one
 * reference, its own, dropped when it ends: a caller that keeps the pointer
 * past that takes a reference of its own (t->refs++, kv_task_release).
 * Requires kv_sched_init.  Raises when memory runs out.
 */
kv_task *kv_task_new(lua_State *L, kv_scope *scope, int nargs);

/*
 * Drop one reference to t; the last one frees it (t must have ended by
 * then), and an error nobody took is handed to its scope as lost.
 */
void kv_task_release(kv_task *t);

/*
 * Abandon t: cancel its wait, close its thread (its pending to-be-closed
 * variables run), end it as abandoned and wake those who wait for it.
 * Does nothing to an ended task.  Safe from Lua or from the loop; t must
 * not be the running task.
 */
void kv_task_abandon(kv_task *t);

/*
 * Abandon every live task of s but `except` (NULL: none), delivering the
 * wakes that causes only after the last one: no Lua runs in between.
 */
void kv_task_abandon_all(kv_scope *s, kv_task *except);

/*
 * Push t's outcome (t has ended) onto L and mark it taken: for an OK task,
 * true followed by its results; for an error, false, the error value and
 * the traceback; for an abandoned task, false, "abandoned".  Returns the
 * number of values pushed.
 */
int kv_task_push_outcome(kv_task *t, lua_State *L);

/*
 * Start the scheduler over L, the main thread, before any task: its idle
 * handle goes on the loop, and it registers itself with the scopes.
 */
void kv_sched_init(lua_State *L);

/* Close the scheduler's idle handle; no task may run afterwards. */
void kv_sched_close(void);

/*
 * While on (calls nest, each on with its off), wakes are queued for the
 * loop instead of resuming at once: code that abandons several tasks must
 * not have Lua run, and free what it walks, in the middle of its walk.
 */
void kv_sched_defer(int on);

/*
 * What the deadline guard (guard.c, a layer above) hears from the
 * scheduler: ended(t) when any task ends, before its waiters wake;
 * hooked(t) when the deadline hook yielded t, which is requeued afterwards
 * unless it ended.  One watcher at a time; w is borrowed for good (static).
 */
typedef struct kv_sched_watcher {
  void (*ended)(kv_task *t);
  void (*hooked)(kv_task *t);
} kv_sched_watcher;
void kv_sched_watch(const kv_sched_watcher *w);

/* ---------------------- guard.c: one deadline at a time, over a test's run */

/* Catch the deadline alarm and register with the scheduler (kv_sched_watch). */
void kv_guard_install(void);

/*
 * Guard t for `seconds` (capped by the file's deadline).  When time is up,
 * t and every other task of its scope but `caller` (the task waiting on the
 * run) are abandoned.  t must be live and not caller.  Returns 0, or -1
 * when a guard is already running (runs do not nest).
 */
int kv_guard_start(kv_task *t, kv_task *caller, double seconds);

/* End the running guard, if any; it counts as expired if its time is up. */
void kv_guard_stop(void);

/* Whether the last guarded run ran out of time. */
int kv_guard_expired(void);

/*
 * Where the last expired run was when its time ran out (a traceback), or
 * NULL; owned by the guard, valid until the next kv_guard_start.
 */
const char *kv_guard_where(void);

/* Give the file a deadline `seconds` from now (<= 0: none): guards end by it. */
void kv_guard_set_file_deadline(double seconds);

/* Whether the file's deadline has passed. */
int kv_file_expired(void);

/* Stop the guard and close its timer (the host's end). */
void kv_guard_close(void);

/* ------------------------------------------ coro.c: the coroutine library */

/*
 * Replace coroutine.resume and coroutine.wrap in L with versions that
 * record which thread runs (kv_running_enter), as the alarm needs.
 */
void kv_coro_install(lua_State *L);

/* --------------------------------------- drain.c, strict_options.c: for core */

/*
 * __kv.drain(seconds): yield the calling task until every leftover counted
 * by kv_drain_begin is gone, or `seconds` at most.  Returns no value.
 */
int kv_l_drain(lua_State *L);

/*
 * check_options(fname, t, keys [, level]) -> t, for Lua: raises naming the
 * closest valid key when t has one not in keys (a list or a set).
 */
int kv_l_check_options(lua_State *L);

/*
 * timeout(fname, opts [, default]) -> seconds or nil, for Lua: the one
 * timeout rule (engine.h), raising as kv_opt_timeout does; without a
 * default, nil where opts gives no timeout (timeout.c).
 */
int kv_l_timeout(lua_State *L);

/* ------------------------------------------------- limits.c: open files */

/*
 * Raise the soft open-file limit to the hard one (best effort); called once
 * at start, before anything opens a descriptor.
 */
void kv_raise_fd_limit(void);

/*
 * Close every descriptor from first on: what a forked process does before
 * it runs (or execs) a program that must not hold its parent's.
 */
void kv_close_from(int first);

/* __kv.fd_limits() -> soft, hard: the open-file limits of this process. */
int kv_l_fd_limits(lua_State *L);

/* ---------------------------------------------- core.c: the Lua functions */

/*
 * lua_CFunction: install the globals sleep, spawn and now, and return the
 * internal table __kv (run, scope, emit, take_deferred...).
 */
int luaopen_kvcore(lua_State *L);

/* Send __kv.emit's report events to fd (a worker's fd 3) instead of stdout. */
void kv_set_event_fd(int fd);

/* ---------------------------------------------- state.c: a ready Lua state */

/*
 * A new Lua state with the standard libraries, the core functions, the
 * embedded Lua modules, the module paths, the engine's coroutine library and
 * the guard's alarm.  The caller owns it (lua_close).  Aborts when memory
 * runs out.
 */
lua_State *kv_state_new(void);

/* The running binary's absolute path ("kvengine" if unknown); static storage. */
const char *kv_exe_path(void);

/* The folder of the running binary, without a trailing slash; static storage. */
const char *kv_exe_dir(void);

#endif
