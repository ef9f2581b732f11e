/*
 * host.c - runs one Lua program on the loop, from start to orderly end.
 *
 * Both a test worker (the runner over one file) and `kvengine serve` are a
 * main task in a root scope.  The host owns what surrounds it: the Lua
 * state, the root scope, SIGINT/SIGTERM, and a teardown that closes the root
 * scope (so every child and socket is gone), the Lua state, and at last
 * every libuv handle, so that nothing outlives the process's work.
 */
#include "host.h"

#include <assert.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>

static void on_signal(uv_signal_t *s, int signum) {
  struct kv_host *h = s->data;
  h->signalled = signum;
  uv_stop(kv_loop());
}

static uv_signal_t *watch_signal(struct kv_host *h, int signum) {
  uv_signal_t *s = malloc(sizeof *s);
  if (!s)
    abort();
  uv_signal_init(kv_loop(), s);
  s->data = h;
  uv_signal_start(s, on_signal, signum);
  uv_unref((uv_handle_t *)s);
  return s;
}

void kv_host_open(struct kv_host *h, lua_State *L) {
  signal(SIGPIPE, SIG_IGN);
  h->L = L ? L : kv_state_new();
  h->root = kv_scope_new();
  kv_scope_set_root(h->root);
  kv_sched_init(h->L);
  h->signals[0] = watch_signal(h, SIGINT);
  h->signals[1] = watch_signal(h, SIGTERM);
  h->signalled = 0;
  h->main = NULL;
}

/* Start the function below nargs arguments on top of h->L as the main task. */
void kv_host_start(struct kv_host *h, int nargs) {
  assert(!h->main); /* one main task per host */
  h->main = kv_task_new(h->L, h->root, nargs);
  h->main->refs++;
  h->main->observed = 1; /* the host reports how it ends */
}

/*
 * Run the loop until the main task ends (until_main), or until nothing is
 * left to wait for, or a signal.  Returns 0, or -1 when the main task waits
 * on something that can never come (the loop ran dry under it).
 */
int kv_host_run(struct kv_host *h, int until_main) {
  assert(h->main);
  while (!h->signalled) {
    int alive = uv_run(kv_loop(), UV_RUN_ONCE);
    if (h->main->state == KV_TASK_DONE && (until_main || h->main->end != KV_END_OK))
      return 0;
    if (!alive && !uv_loop_alive(kv_loop()))
      return h->main->state == KV_TASK_DONE ? 0 : -1;
  }
  return 0;
}

/*
 * Push the main task's outcome (see kv_task_push_outcome).  The traceback of
 * an error comes last.
 */
int kv_host_outcome(struct kv_host *h) {
  assert(h->main && h->main->state == KV_TASK_DONE);
  return kv_task_push_outcome(h->main, h->L);
}

static void close_walk(uv_handle_t *handle, void *arg) {
  (void)arg;
  if (!uv_is_closing(handle))
    uv_close(handle, NULL);
}

/*
 * Closing the watchers gives SIGINT and SIGTERM their default action back,
 * and a second one is common: Ctrl-C and a group kill reach a worker both
 * directly and through its parent.  Everything that signal would stop is
 * stopped by now, so from here they are ignored; blocked meanwhile, so none
 * slips in between.
 */
static void close_signal_watchers(struct kv_host *h) {
  sigset_t both;
  sigemptyset(&both);
  sigaddset(&both, SIGINT);
  sigaddset(&both, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &both, NULL);
  for (int i = 0; i < 2; i++)
    uv_close((uv_handle_t *)h->signals[i], kv_free_handle);
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  pthread_sigmask(SIG_UNBLOCK, &both, NULL);
}

void kv_host_close(struct kv_host *h) {
  kv_scope_close_all(h->L);
  if (h->main)
    kv_task_release(h->main);
  lua_close(h->L);
  kv_scope_set_root(NULL);
  kv_scope_unref(h->root);
  kv_sched_close();
  kv_guard_close();
  close_signal_watchers(h);
  uv_run(kv_loop(), UV_RUN_DEFAULT);
  /* A handle a binding forgot: close it rather than hang or leak. */
  uv_walk(kv_loop(), close_walk, NULL);
  uv_run(kv_loop(), UV_RUN_DEFAULT);
  uv_loop_close(kv_loop());
}
