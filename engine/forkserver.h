/*
 * forkserver.h - where the parent's workers come from.
 *
 * Starting a worker by exec would cost every file a second program start
 * (the dynamic linker, a Lua state, the runner's modules).  So the parent
 * forks one process at its start, before it made a Lua state, a loop or a
 * thread: the fork server.  It readies a Lua state with the runner
 * (kv_worker_warm) and then, for each file the parent asks for, forks a
 * worker from itself, which runs the file in a copy of that state
 * (kv_worker_run); the last file it runs itself.  The worker is forked as
 * the parent's child, not the server's (CLONE_PARENT): the parent reaps
 * it, signals it and is the parent its death signal follows, as if it had
 * started it itself.
 */
#ifndef KV_FORKSERVER_H
#define KV_FORKSERVER_H

#include "options.h"

#include <sys/types.h>

/*
 * Fork the server, which gives every worker the options o (settled by now:
 * the seed picked, the target set).  One server per process.  Returns 0,
 * or -errno when it could not be started.
 */
int kv_forkserver_start(const struct kv_options *o);

/*
 * Have the server fork a worker that runs file as repetition run, with
 * stdout, stderr and fd 3 dups of fds[0], fds[1] and fds[2] (the caller
 * keeps and closes its own), and stdin /dev/null.  last says that no
 * request follows: the server then runs the file itself rather than fork
 * (it is the worker from then on, and ends as one).  Waits for the answer.
 * Returns the worker's pid, a child of the caller's that the caller reaps
 * (waitpid), or -errno: the server could not fork, or is gone (EPIPE).
 */
pid_t kv_forkserver_spawn(const char *file, int run, int last, const int fds[3]);

/*
 * Ask for no more workers: the server exits once it reads that (its
 * socket closed), while the workers it forked, not its own, run on.
 * Later requests fail with EPIPE.  Returns at once; nothing happens when
 * no server runs.
 */
void kv_forkserver_close(void);

/*
 * kv_forkserver_close, then wait until the server has exited and reap
 * it.  Nothing happens when no server was started.
 */
void kv_forkserver_stop(void);

#endif
