/*
 * host.h - one Lua program on the loop: a test worker or `kvengine serve`.
 */
#ifndef KV_HOST_H
#define KV_HOST_H

#include "internal.h"

struct kv_host {
  lua_State *L;
  kv_scope *root;
  kv_task *main;
  uv_signal_t *signals[2];
  int signalled; /* the signal that stopped the run, or 0 */
};

/*
 * Fill h: the Lua state L (one from kv_state_new, which h takes over), or
 * a new one when L is NULL, as h->L; the root scope, the scheduler, and
 * watchers that stop the loop on SIGINT and SIGTERM (h->signalled).  One
 * host per process at a time; kv_host_close undoes it all.
 */
void kv_host_open(struct kv_host *h, lua_State *L);

/*
 * Start the function below nargs arguments on top of h->L as the main
 * task, in the root scope (both are popped).  Once per host.
 */
void kv_host_start(struct kv_host *h, int nargs);

/*
 * Run the loop until the main task ends (until_main), or until nothing is
 * left to wait for, or a signal (h->signalled).  A main task that fails
 * ends the run either way.  Returns 0, or -1 when the main task waits on
 * something that can never come (the loop ran dry under it).
 */
int kv_host_run(struct kv_host *h, int until_main);

/*
 * Push the ended main task's outcome onto h->L (see kv_task_push_outcome:
 * true and its results, or false, the error and its traceback) and return
 * how many values were pushed.
 */
int kv_host_outcome(struct kv_host *h);

/*
 * Close every scope (every child and socket is gone), the Lua state, the
 * scheduler, the guard, the signal watchers and at last every handle left
 * on the loop, and close the loop: nothing of h is usable afterwards.
 */
void kv_host_close(struct kv_host *h);

#endif
