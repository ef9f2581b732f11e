/*
 * supervise.c - `kvengine __supervise`: the small process that stands
 * between the engine and every child it starts.
 *
 * PR_SET_PDEATHSIG covers only the process that sets it, and a target that
 * forks (a shell with `cmd &`) makes grandchildren nobody would kill if the
 * engine died by SIGKILL.  So the engine (bindings/proc.c) never execs a
 * target directly: uv_spawn runs the engine binary again in this mode, with
 * fd 3 a socket to the engine (the control socket); supervise.h has the
 * argv and the report lines both sides use.  The supervisor
 *
 *   - makes a process group of its own (its pid is the group id), sets a
 *     catchable death signal on itself, checks at once that the engine is
 *     still its parent, and becomes a child subreaper so that orphaned
 *     descendants stay its children and can be reaped;
 *   - forks and execs the target inside that group; a CLOEXEC pipe tells it
 *     whether chdir and exec worked, and it reports "P <pid>\n" or
 *     "E <stage> <errno>\n" on the control socket;
 *   - waits, in one poll over a signalfd (every signal blocked) and the
 *     control socket, for the target's exit, the engine's death (the death
 *     signal, a new parent, or EOF on the control socket: the engine also
 *     closes it to let go of a child);
 *   - then terminates the whole group (TERM, KILL after the grace), reaps
 *     every descendant it can, and exits with the target's status, raising
 *     the target's signal on itself for a signal death.
 *
 * Signals sent to the group by the engine (p:kill) reach the target directly;
 * the supervisor swallows them, so only the target decides whether it dies.
 * A descendant that leaves the group (setsid, setpgid) escapes the group
 * kill, but once its parent is gone it is the supervisor's child, and those
 * are signalled one by one too.  Only one that leaves the group while its
 * own parent keeps running outlives the supervisor.
 * The supervisor allocates nothing and runs no event loop of the engine.
 */
#include "supervise.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CTL_FD KV_SUPERVISE_CTL_FD
#define EXIT_USAGE 2
#define EXIT_NOSTART 127
#define REAP_AFTER_KILL_MS 1000

typedef struct sup {
  pid_t engine;    /* the parent we were started by */
  pid_t self;      /* our pid, and the group's id */
  pid_t target;    /* 0 until forked */
  int grace_ms;    /* between TERM and KILL */
  const char *cwd; /* NULL: inherit */
  char **argv;     /* the target's */
  int sfd;         /* signalfd for every signal */
  int status;      /* the target's wait status, once done */
  int done;        /* the target was reaped */
  int engine_gone; /* death signal, new parent, or EOF on CTL_FD */
} sup;

/* What the exec child tells its parent through the CLOEXEC pipe. */
typedef struct exec_failure {
  char stage[8]; /* "chdir" or "exec" */
  int err;
} exec_failure;

/* ------------------------------------------------------------ protocol */

size_t kv_supervise_argv(const char **out, const char *ppid, const char *grace, const char *cwd,
                         const char *const *target) {
  size_t i = 0;
  out[i++] = "kvengine";
  out[i++] = KV_SUPERVISE_MODE;
  out[i++] = "--ppid";
  out[i++] = ppid;
  out[i++] = "--grace";
  out[i++] = grace;
  if (cwd) {
    out[i++] = "--cwd";
    out[i++] = cwd;
  }
  out[i++] = "--";
  for (size_t j = 0; target[j]; j++)
    out[i++] = target[j];
  out[i] = NULL;
  return i;
}

void kv_supervise_report_pid(char *buf, long pid) {
  snprintf(buf, KV_SUPERVISE_REPORT_MAX, "P %ld\n", pid);
}

void kv_supervise_report_error(char *buf, const char *stage, int err) {
  snprintf(buf, KV_SUPERVISE_REPORT_MAX, "E %.15s %d\n", stage, err);
}

int kv_supervise_parse_report(const char *line, long *pid, char stage[16], int *err) {
  if (sscanf(line, "P %ld", pid) == 1 && *pid > 0)
    return 1;
  if (sscanf(line, "E %15s %d", stage, err) == 2)
    return 0;
  return -1;
}

/* ---------------------------------------------------------- supervisor */

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int usage(const char *why) {
  fprintf(stderr,
          "kvengine __supervise: %s\n"
          "usage: kvengine __supervise --ppid PID --grace MS [--cwd DIR] -- PROG [ARG...]\n"
          "(started by the engine with its control socket on fd 3)\n",
          why);
  return EXIT_USAGE;
}

/*
 * Parse the options after the "__supervise" word, which is argv[0] or
 * argv[1] (main may or may not drop its own name).  Returns 0, or -1 with
 * a message printed.
 */
static int parse_args(sup *s, int argc, char **argv) {
  int i = argc > 0 && strcmp(argv[0], KV_SUPERVISE_MODE) == 0 ? 1 : 2;
  for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
    if (i + 1 >= argc)
      return usage("option without a value"), -1;
    const char *opt = argv[i], *val = argv[i + 1];
    if (strcmp(opt, "--ppid") == 0)
      s->engine = (pid_t)strtol(val, NULL, 10);
    else if (strcmp(opt, "--grace") == 0)
      s->grace_ms = atoi(val);
    else if (strcmp(opt, "--cwd") == 0)
      s->cwd = val;
    else
      return usage("unknown option"), -1;
  }
  if (i >= argc || i + 1 >= argc)
    return usage("no program after --"), -1;
  if (s->engine <= 1)
    return usage("--ppid is required"), -1;
  if (s->grace_ms < 0)
    s->grace_ms = 0;
  s->argv = argv + i + 1;
  return 0;
}

/* Write all of buf to fd; errors are the caller's to judge. */
static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Send one report line to the engine; a failed write means it is gone. */
static void report(sup *s, const char *line) {
  if (write_all(CTL_FD, line, strlen(line)) < 0)
    s->engine_gone = 1;
}

/*
 * In the forked child: undo what the supervisor set up for itself, enter
 * cwd and exec the target.  Never returns; a failure goes to `fd`.
 */
static void exec_target(sup *s, int fd) {
  sigset_t none;
  sigemptyset(&none);
  for (int sig = 1; sig < NSIG; sig++)
    if (sig != SIGKILL && sig != SIGSTOP)
      signal(sig, SIG_DFL);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* Should the supervisor itself be killed outright, take the target along. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  exec_failure f;
  memset(&f, 0, sizeof f);
  if (getppid() != s->self) {
    _exit(EXIT_NOSTART);
  } else if (s->cwd && chdir(s->cwd) < 0) {
    strcpy(f.stage, "chdir");
    f.err = errno;
  } else {
    execvp(s->argv[0], s->argv);
    strcpy(f.stage, "exec");
    f.err = errno;
  }
  write_all(fd, (const char *)&f, sizeof f);
  _exit(EXIT_NOSTART);
}

/*
 * Fork and exec the target; report "P <pid>" or "E <stage> <errno>" to the
 * engine.  Returns 0 when the target runs, -1 when it never started.
 */
static int start_target(sup *s) {
  int p[2];
  char line[KV_SUPERVISE_REPORT_MAX];
  if (pipe2(p, O_CLOEXEC) < 0) {
    kv_supervise_report_error(line, "fork", errno);
    report(s, line);
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0)
    exec_target(s, p[1]);
  int fork_err = errno;
  close(p[1]);
  if (pid < 0) {
    close(p[0]);
    kv_supervise_report_error(line, "fork", fork_err);
    report(s, line);
    return -1;
  }
  exec_failure f;
  ssize_t n;
  do
    n = read(p[0], &f, sizeof f);
  while (n < 0 && errno == EINTR);
  close(p[0]);
  if (n == (ssize_t)sizeof f) {
    f.stage[sizeof f.stage - 1] = '\0';
    waitpid(pid, NULL, 0);
    kv_supervise_report_error(line, f.stage, f.err);
    report(s, line);
    return -1;
  }
  s->target = pid;
  kv_supervise_report_pid(line, (long)pid);
  report(s, line);
  return 0;
}

/*
 * Reap every child that has ended (the target and the orphans that we, the
 * subreaper, inherited).  Returns 1 while children remain, 0 when none do.
 */
static int reap(sup *s) {
  for (;;) {
    int st;
    pid_t pid = waitpid(-1, &st, WNOHANG);
    if (pid > 0) {
      if (pid == s->target) {
        s->status = st;
        s->done = 1;
      }
      continue;
    }
    if (pid == 0)
      return 1;
    if (errno == EINTR)
      continue;
    return 0; /* ECHILD */
  }
}

/* Drain the signalfd; any signal may mean the engine died (PDEATHSIG). */
static void drain_signals(sup *s) {
  struct signalfd_siginfo si[8];
  ssize_t n;
  while ((n = read(s->sfd, si, sizeof si)) > 0)
    if ((size_t)n < sizeof si)
      break;
  if (getppid() != s->engine)
    s->engine_gone = 1;
}

/* The control socket is readable: data is ignored, EOF means let go. */
static void read_ctl(sup *s) {
  char buf[64];
  ssize_t n = read(CTL_FD, buf, sizeof buf);
  if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
    s->engine_gone = 1;
}

/* Poll the signalfd (and the control socket if `ctl`) for up to ms (-1: forever). */
static void wait_events(sup *s, int ctl, int ms) {
  struct pollfd pf[2] = {{.fd = s->sfd, .events = POLLIN}, {.fd = CTL_FD, .events = POLLIN}};
  int n = poll(pf, ctl ? 2 : 1, ms);
  if (n <= 0)
    return;
  if (pf[0].revents)
    drain_signals(s);
  if (ctl && pf[1].revents)
    read_ctl(s);
}

/* Run until the target ends or the engine goes away. */
static void supervise(sup *s) {
  while (!s->done && !s->engine_gone) {
    wait_events(s, 1, -1);
    reap(s);
  }
}

/*
 * Signal our own children one by one (as listed by /proc/<pid>/task/<pid>/
 * children).  That reaches orphans that left the group (setsid) and were
 * handed to us, the subreaper; being unreaped children, their pids are safe
 * to signal.
 */
static void signal_children(sup *s, int sig) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)s->self, (int)s->self);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return;
  buf[n] = '\0';
  for (char *p = buf, *end; *p; p = end) {
    long pid = strtol(p, &end, 10);
    if (end == p)
      break;
    if (pid > 0)
      kill((pid_t)pid, sig);
  }
}

/* Signal the group and every child we have. */
static void signal_all(sup *s, int sig) {
  kill(-s->self, sig);
  signal_children(s, sig);
}

/*
 * Terminate the group: TERM (the supervisor receives it too, blocked and
 * drained like any other), wait up to the grace for every descendant to be
 * reaped, then KILL whatever is left and reap for a bounded while.
 */
static void terminate_group(sup *s) {
  if (!reap(s))
    return;
  signal_all(s, SIGTERM);
  long long end = now_ms() + s->grace_ms;
  while (reap(s)) {
    long long left = end - now_ms();
    if (left <= 0)
      break;
    wait_events(s, 0, (int)left);
  }
  if (!reap(s))
    return;
  signal_all(s, SIGKILL);
  end = now_ms() + REAP_AFTER_KILL_MS;
  while (reap(s) && now_ms() < end)
    wait_events(s, 0, 50);
}

/* End the way the target ended: its exit code, or its signal. */
static int exit_like_target(sup *s) {
  if (!s->done)
    return 128 + SIGKILL;
  if (WIFEXITED(s->status))
    return WEXITSTATUS(s->status);
  int sig = WTERMSIG(s->status);
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none); /* a re-raised SIGSEGV must not dump our core */
  signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(SIG_UNBLOCK, &one, NULL);
  raise(sig);
  return 128 + sig; /* not reached for a terminating signal */
}

/* Make the group, take every signal through a signalfd, tie our life to the engine's. */
static int setup(sup *s) {
  s->self = getpid();
  prctl(PR_SET_NAME, "kv-supervise"); /* for ps and top: exec'd as /proc/self/exe */
  /* Group kills target -self: never the engine's group should this fail. */
  if (setpgid(0, 0) < 0 || getpgrp() != s->self) {
    perror("kvengine __supervise: setpgid");
    return -1;
  }
  if (fcntl(CTL_FD, F_SETFD, FD_CLOEXEC) < 0)
    return usage("no control socket on fd 3"), -1;
  /* Only stdio and the control socket go on: the engine's other fds are not ours. */
  kv_close_from(CTL_FD + 1);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, NULL);
  s->sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
  if (s->sfd < 0) {
    perror("kvengine __supervise: signalfd");
    return -1;
  }
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != s->engine)
    return -1; /* the engine died before the death signal was armed */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  return 0;
}

/*
 * The entry point for `kvengine __supervise ...` (argv[0] or argv[1] is
 * "__supervise").
 * Returns the exit code for main, or does not return when the target died
 * of a signal (the supervisor dies of the same one).
 */
int kv_supervise_main(int argc, char **argv) {
  sup s;
  memset(&s, 0, sizeof s);
  s.grace_ms = KV_SUPERVISE_GRACE_MS;
  if (parse_args(&s, argc, argv) < 0)
    return EXIT_USAGE;
  if (setup(&s) < 0)
    return EXIT_NOSTART;
  if (start_target(&s) < 0)
    return EXIT_NOSTART;
  supervise(&s);
  terminate_group(&s);
  return exit_like_target(&s);
}
