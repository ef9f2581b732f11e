/*
 * running.c - who runs now: the task the scheduler resumed, and the Lua
 * thread that runs on its behalf.
 *
 * The scheduler (task.c) records a task and its thread when it resumes it;
 * the coroutine library (coro.c) records a script's own coroutine while it
 * runs inside that task.  Scopes (scope.c) read the task, to know where a
 * handle opened now belongs; the deadline alarm (guard.c) reads the thread
 * from its signal handler, to hook it.  Those files sit on both sides of the
 * scheduler, so this record lies below them all and calls no other file of
 * the engine.
 */
#include "internal.h"

#include <assert.h>

static kv_task *task;
static lua_State *volatile thread; /* read by a signal handler */

kv_running kv_running_enter(kv_task *t, lua_State *co) {
  assert(co);
  kv_running prev = {task, thread};
  task = t;
  thread = co;
  return prev;
}

void kv_running_leave(kv_running prev) {
  task = prev.task;
  thread = prev.thread;
}

kv_task *kv_task_running(void) { return task; }

lua_State *kv_thread_running(void) { return thread; }
