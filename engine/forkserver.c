/*
 * forkserver.c - the process that forks the parent's workers (forkserver.h).
 *
 * The parent and the server share a SOCK_SEQPACKET socket.  A request is
 * one message: its head (the repetition, and whether it is the last) and
 * the file's path, with three descriptors (the worker's stdout, stderr and
 * fd 3) as SCM_RIGHTS; the answer is one long, the worker's pid or -errno.  The server has nothing
 * else to do: it ignores SIGINT and SIGTERM (Ctrl-C and a group kill are
 * for the parent and the workers: the parent still asks nothing of it
 * then), and it ends when the parent closes the socket, or with it
 * (PR_SET_PDEATHSIG).
 *
 * It is forked before the parent made its Lua state or its loop, and it
 * makes none of its own but the warm state, so a worker inherits nothing it
 * must not have: no loop, no thread, no other file's pipes (every
 * descriptor past 3 is closed), no stdio buffer.
 */
#include "forkserver.h"
#include "internal.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lua.h>

#define SERVER_FD 3 /* the server's end of the socket, in the server */
#define NFDS 3      /* a worker's stdout, stderr and fd 3 */

static struct {
  int sock; /* the parent's end; -1: no server */
  pid_t pid;
} server = {-1, 0};

/* A request: its head, then the file's path (no NUL) to the message's end. */
struct request {
  int run;
  int last; /* no request follows: the server runs this one itself */
  char file[PATH_MAX];
};

#define HEAD offsetof(struct request, file)

/*
 * Fork a process whose parent is ours (CLONE_PARENT): fork()'s return
 * values.  The raw system call, as glibc's fork takes no flags; glibc's
 * own bookkeeping of a fork (its at-fork handlers, lock resets) has
 * nothing to do in the server, which has one thread and holds no lock.
 * s390 takes the stack first.
 */
static pid_t fork_beside(void) {
#if defined(__s390__) || defined(__s390x__)
  return (pid_t)syscall(SYS_clone, 0, CLONE_PARENT | SIGCHLD, NULL, NULL, 0);
#else
  return (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, NULL, NULL, 0);
#endif
}

/*
 * In the forked worker, or in the server for the last request: the name
 * and the signals of a worker, the given descriptors as stdout, stderr and
 * fd 3 and no others past them (the server's socket among them); then the
 * file.  Never returns.
 */
static void become_worker(const struct kv_options *o, lua_State *L, const struct request *rq,
                          const int fds[NFDS]) {
  prctl(PR_SET_NAME, "kv-worker"); /* its command line is the parent's: ps tells them so */
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  int high[NFDS]; /* none of them may be a target of the dup2s below */
  for (int i = 0; i < NFDS; i++)
    if ((high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, NFDS + 1)) < 0)
      _exit(3);
  for (int i = 0; i < NFDS; i++)
    if (dup2(high[i], i + 1) < 0)
      _exit(3);
  kv_close_from(NFDS + 1);
  struct kv_options mine = *o;
  mine.run = rq->run;
  exit(kv_worker_run(&mine, rq->file, L));
}

/*
 * Receive one request into rq (its path NUL-terminated) and its
 * descriptors into fds.  Returns 1, 0 when the parent closed the socket,
 * -1 for a request without its descriptors (they are closed).
 */
static int receive(struct request *rq, int fds[NFDS]) {
  union {
    char buf[CMSG_SPACE(NFDS * sizeof(int))];
    struct cmsghdr align;
  } u;
  struct iovec iov = {rq, sizeof *rq};
  struct msghdr m = {
      .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  ssize_t n;
  do
    n = recvmsg(SERVER_FD, &m, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return 0;
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  int got = c && c->cmsg_type == SCM_RIGHTS ? (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int)) : 0;
  int given[NFDS];
  if (got > 0)
    memcpy(given, CMSG_DATA(c), (size_t)(got < NFDS ? got : NFDS) * sizeof(int));
  size_t len = (size_t)n > HEAD ? (size_t)n - HEAD : 0;
  if (got != NFDS || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || !len || len >= sizeof rq->file) {
    for (int i = 0; i < got && i < NFDS; i++)
      close(given[i]);
    return -1;
  }
  memcpy(fds, given, sizeof given);
  rq->file[len] = '\0';
  return 1;
}

/* Answer a request: the pid, or -errno. */
static void answer(long reply) {
  ssize_t n;
  do
    n = send(SERVER_FD, &reply, sizeof reply, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
}

/*
 * The server's life: tied to the parent, stdin /dev/null, its socket on
 * SERVER_FD and nothing else past stderr, the warm state; then a worker
 * per request until the socket closes, or until the last request, which
 * the server runs itself: one process fewer, and a run of one file is two
 * processes, the parent and its worker.
 */
static int serve(const struct kv_options *o, int sock, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent)
    return 0;
  prctl(PR_SET_NAME, "kv-forkserver");
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  if (sock != SERVER_FD && dup2(sock, SERVER_FD) < 0)
    return 1;
  int null = open("/dev/null", O_RDONLY);
  if (null < 0 || (null != 0 && dup2(null, 0) < 0))
    return 1;
  kv_close_from(SERVER_FD + 1);
  lua_State *L = kv_worker_warm(o);
  struct request rq = {0};
  int fds[NFDS], got;
  while ((got = receive(&rq, fds)) != 0) {
    if (got < 0) {
      answer(-EINVAL);
      continue;
    }
    if (rq.last) {
      answer((long)getpid());
      become_worker(o, L, &rq, fds);
    }
    pid_t pid = fork_beside();
    if (pid == 0)
      become_worker(o, L, &rq, fds);
    answer(pid < 0 ? -errno : (long)pid);
    for (int i = 0; i < NFDS; i++)
      close(fds[i]);
  }
  if (L)
    lua_close(L);
  return 0;
}

int kv_forkserver_start(const struct kv_options *o) {
  int sv[2];
  if (server.sock >= 0)
    return -EBUSY;
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
    return -errno;
  pid_t parent = getpid();
  fflush(NULL); /* nothing buffered may be written twice */
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    exit(serve(o, sv[1], parent));
  }
  int err = errno;
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    return -err;
  }
  server.sock = sv[0];
  server.pid = pid;
  return 0;
}

pid_t kv_forkserver_spawn(const char *file, int run, int last, const int fds[NFDS]) {
  if (server.sock < 0)
    return -EPIPE;
  size_t len = strlen(file);
  if (len >= PATH_MAX)
    return -ENAMETOOLONG;
  union {
    char buf[CMSG_SPACE(NFDS * sizeof(int))];
    struct cmsghdr align;
  } u;
  memset(&u, 0, sizeof u);
  struct request head = {.run = run, .last = last};
  struct iovec iov[2] = {{&head, HEAD}, {(void *)file, len}};
  struct msghdr m = {
      .msg_iov = iov, .msg_iovlen = 2, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(NFDS * sizeof(int));
  memcpy(CMSG_DATA(c), fds, NFDS * sizeof(int));
  ssize_t n;
  do
    n = sendmsg(server.sock, &m, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return -errno;
  long reply;
  do
    n = recv(server.sock, &reply, sizeof reply, 0);
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof reply)
    return -EPIPE;
  if (last && reply == (long)server.pid) { /* the server is that worker now: the caller's to reap */
    server.pid = 0;
    kv_forkserver_close();
  }
  return (pid_t)reply;
}

void kv_forkserver_close(void) {
  if (server.sock < 0)
    return;
  close(server.sock);
  server.sock = -1;
}

void kv_forkserver_stop(void) {
  kv_forkserver_close();
  if (server.pid <= 0)
    return;
  while (waitpid(server.pid, NULL, 0) < 0 && errno == EINTR)
    ;
  server.pid = 0;
}
