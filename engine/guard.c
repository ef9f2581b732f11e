/*
 * guard.c - time limits that a test cannot catch.
 *
 * One test runs at a time in a file, so there is one guard: a task, its
 * deadline (never later than the file's), a libuv timer for a test that
 * waits, and a POSIX interval timer for a test that spins in pure Lua and so
 * never lets the loop run.  The engine always knows which Lua thread runs
 * (the scheduler and coroutine.resume/wrap record it in running.c); when the
 * interval timer fires, its signal handler sets a count hook on that thread,
 * as lua.c does for Ctrl-C.  So no hook slows Lua down until a deadline has
 * passed.  The hook removes itself and, on a task's own thread, yields back
 * to the scheduler, which abandons the test; on a coroutine the script made
 * it raises, which unwinds to the thread that resumed it, where the next
 * alarm's hook yields.  Nothing reaches the test as an error it could catch:
 * an expired test is abandoned, not resumed.
 */
#include "internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include <lauxlib.h>

#define REFIRE_USEC 10000
#define RAISES_BEFORE_YIELD 3

static struct {
  kv_task *task;
  kv_task *caller; /* the task waiting on the run: it outlives a timeout */
  double deadline;
  uv_timer_t *timer;
  int expired;
  int raised; /* how often the hook raised in a script's coroutine */
  char *where;
} guard;

static double file_deadline; /* 0: none */

static void hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  if (!guard.task || kv_now() < guard.deadline)
    return; /* early or stale: the interval timer fires again */
  kv_task *t = kv_task_of(L);
  if (t && t->co == L && t == kv_task_running() && lua_isyieldable(L)) {
    t->state = KV_TASK_HOOKED;
    lua_yield(L, 0);
    return;
  }
  /*
   * A coroutine of the script's.  Raising unwinds it to whoever resumed it;
   * if it keeps catching that, yield it instead, which returns control too.
   */
  if (++guard.raised > RAISES_BEFORE_YIELD && lua_isyieldable(L)) {
    lua_yield(L, 0);
    return;
  }
  luaL_error(L, "time limit reached");
}

/* Only async-signal-safe work: lua_sethook is designed to be called so. */
static void on_alarm(int sig) {
  (void)sig;
  lua_State *L = kv_thread_running();
  if (L)
    lua_sethook(L, hook, LUA_MASKCOUNT, 1);
}

static void task_ended(kv_task *t);
static void task_hooked(kv_task *t);

/* Catch the alarm, and hear from the scheduler how guarded tasks fare. */
void kv_guard_install(void) {
  static const kv_sched_watcher watcher = {task_ended, task_hooked};
  kv_sched_watch(&watcher);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, NULL);
}

static void alarm_arm(double seconds) {
  struct itimerval it;
  memset(&it, 0, sizeof it);
  if (seconds > 0) {
    if (seconds < 1e-6)
      seconds = 1e-6;
    it.it_value.tv_sec = (time_t)seconds;
    it.it_value.tv_usec = (suseconds_t)((seconds - (double)it.it_value.tv_sec) * 1e6);
    if (!it.it_value.tv_sec && !it.it_value.tv_usec)
      it.it_value.tv_usec = 1;
    it.it_interval.tv_usec = REFIRE_USEC;
  }
  setitimer(ITIMER_REAL, &it, NULL);
}

static void capture_where(kv_task *t) {
  free(guard.where);
  guard.where = NULL;
  if (t->state == KV_TASK_DONE)
    return;
  luaL_traceback(t->co, t->co, NULL, 0);
  guard.where = strdup(lua_tostring(t->co, -1));
  lua_pop(t->co, 1);
}

static void guard_fire(void) {
  kv_task *t = guard.task;
  if (!t)
    return;
  assert(t->state != KV_TASK_DONE); /* an ended task ends its guard */
  guard.expired = 1;
  capture_where(t);
  kv_scope *s = t->scope;
  kv_task *caller = guard.caller;
  kv_sched_defer(1); /* nobody resumes before every task is abandoned */
  s->refs++;
  kv_task_abandon(t); /* ends the guard through task_ended */
  kv_task_abandon_all(s, caller);
  kv_scope_unref(s);
  kv_sched_defer(0);
}

static void timer_fired(uv_timer_t *h) {
  (void)h;
  guard_fire();
}

/*
 * Guard t for `seconds` (capped by the file's deadline).  When time is up,
 * t and every other task of its scope are abandoned, but for `caller`, the
 * task waiting on the run (before_all runs in the root scope, beside the
 * runner that waits for it).  Returns 0, or -1 when a guard is already
 * running (runs do not nest).
 */
int kv_guard_start(kv_task *t, kv_task *caller, double seconds) {
  assert(t && t->state != KV_TASK_DONE && t != caller);
  if (guard.task)
    return -1;
  double now = kv_now(), deadline = now + seconds;
  if (file_deadline > 0 && file_deadline < deadline)
    deadline = file_deadline;
  guard.task = t;
  guard.caller = caller;
  guard.deadline = deadline;
  guard.expired = 0;
  guard.raised = 0;
  free(guard.where);
  guard.where = NULL;
  if (!guard.timer)
    guard.timer = kv_timer_new(NULL);
  double left = deadline - now;
  kv_timer_start(guard.timer, timer_fired, left > 0 ? (uint64_t)(left * 1000.0) + 1 : 0);
  alarm_arm(left > 0 ? left : 1e-6);
  return 0;
}

void kv_guard_stop(void) {
  if (!guard.task)
    return;
  if (kv_now() >= guard.deadline)
    guard.expired = 1;
  guard.task = NULL;
  alarm_arm(0);
  uv_timer_stop(guard.timer);
}

/* The scheduler's word that t ended: a guarded run is over. */
static void task_ended(kv_task *t) {
  if (guard.task == t)
    kv_guard_stop();
}

/* Did the last guarded run run out of time?  Where was it then? */
int kv_guard_expired(void) { return guard.expired; }

const char *kv_guard_where(void) { return guard.where; }

/* The hook yielded t: end the run if its time is up (the scheduler requeues t unless it ended). */
static void task_hooked(kv_task *t) {
  (void)t;
  if (guard.task && kv_now() >= guard.deadline - 1e-3)
    guard_fire();
}

void kv_guard_set_file_deadline(double seconds) {
  file_deadline = seconds > 0 ? kv_now() + seconds : 0;
}

int kv_file_expired(void) { return file_deadline > 0 && kv_now() >= file_deadline; }

void kv_guard_close(void) {
  kv_guard_stop();
  free(guard.where);
  guard.where = NULL;
  if (guard.timer)
    uv_close((uv_handle_t *)guard.timer, kv_free_handle);
  guard.timer = NULL;
}
