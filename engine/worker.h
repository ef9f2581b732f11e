/*
 * worker.h - one test file in a process of its own: a worker.
 *
 * The parent's workers are forked by the fork server (forkserver.h), which
 * readies a Lua state with the runner once (kv_worker_warm) and hands each
 * worker a copy of it; `kvengine __worker [options] FILE` runs the same
 * thing in a process of its own (ci/valgrind.sh runs files so).
 */
#ifndef KV_WORKER_H
#define KV_WORKER_H

#include "options.h"

/*
 * A Lua state with the runner loaded, for kv_worker_run, after the
 * environment the runner's modules read at load (KVENGINE_TARGET) was set
 * from o.  NULL when the runner would not load: kv_worker_run then starts
 * from a new state and fails the way a worker without one does.
 */
lua_State *kv_worker_warm(const struct kv_options *o);

/*
 * Run file with the options o (o->run is the repetition) on the loop, in
 * this process, and return its exit code: the runner's (0 passed, 1 a test
 * failed, 3 an infrastructure error), 128 + a signal that stopped it, 3
 * when the parent is already gone.  Report events go to fd 3 when it is
 * open (the parent's pipe; the worker then dies with its parent), else to
 * stdout.  L is a state from kv_worker_warm, which the worker takes over
 * and closes, or NULL for a new one.
 */
int kv_worker_run(const struct kv_options *o, const char *file, lua_State *L);

#endif
