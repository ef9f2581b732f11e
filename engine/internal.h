/*
 * internal.h - what the engine's own files share and bindings do not see.
 *
 * The scheduler (task.c), scopes and resources (scope.c), deadlines
 * (guard.c) and the Lua-facing core functions (core.c) are separate files
 * that meet here.
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
  char *test;
  char *artifacts;
  int closed;
  int refs; /* Lua handle + tasks and resources pointing here */
};

/* task.c */
kv_task *kv_task_running(void);
kv_task *kv_task_of(lua_State *L);
kv_task *kv_task_new(lua_State *L, kv_scope *scope, int nargs);
void kv_task_release(kv_task *t);
void kv_task_abandon(kv_task *t);
void kv_task_requeue(kv_task *t);
int kv_task_push_outcome(kv_task *t, lua_State *L); /* results or error, see task.c */
void kv_sched_init(lua_State *L);
void kv_sched_close(void);
void kv_sched_defer(int on);

/* scope.c */
kv_scope *kv_scope_new(const char *test, const char *artifacts);
kv_scope *kv_scope_root(void);
void kv_scope_set_root(kv_scope *s);
void kv_scope_add_task(kv_scope *s, kv_task *t);
void kv_scope_remove_task(kv_task *t);
int kv_scope_close(kv_scope *s, lua_State *L); /* pushes a list of unobserved errors */
void kv_scope_lost_error(kv_scope *s, const char *traceback);
void kv_scope_unref(kv_scope *s);
void kv_scope_close_all(lua_State *L);

/* guard.c: one deadline at a time, over the task that runs a test */
void kv_guard_install(lua_State *L);
int kv_guard_start(kv_task *t, kv_task *caller, double seconds);
void kv_guard_stop(void);
int kv_guard_expired(void);
void kv_guard_hooked(kv_task *t);
void kv_guard_task_done(kv_task *t);
void kv_guard_set_file_deadline(double seconds);
int kv_file_expired(void);
const char *kv_guard_where(void);
void kv_guard_close(void);
lua_State *kv_guard_enter(lua_State *co);
void kv_guard_leave(lua_State *prev);

/* coro.c */
void kv_coro_install(lua_State *L);

/* core.c: the core Lua functions (sleep, spawn, parallel's pieces, __kv) */
int luaopen_kvcore(lua_State *L);
void kv_set_event_fd(int fd);
void kv_defer_forget(lua_State *L, kv_scope *s); /* drop what was deferred on s */

/* strict_options.c: check_options(fname, t, keys [, level]) for Lua */
int kv_l_check_options(lua_State *L);
int kv_l_drain(lua_State *L); /* __kv.drain(seconds): drain.c */

/* modules.c */
void kv_modules_install(lua_State *L);

/* state.c */
lua_State *kv_state_new(void);
const char *kv_exe_dir(void);
const char *kv_exe_path(void);

#endif
