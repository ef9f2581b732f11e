/*
 * supervise.h - how the engine talks to the supervisor of each child.
 *
 * bindings/proc.c never execs a target itself: it runs the engine binary
 * again as
 *
 *   kvengine __supervise --ppid <engine pid> --grace <ms> [--cwd <dir>] -- prog arg...
 *
 * with a socket on fd 3 (the control socket), and engine/supervise.c, the
 * supervisor, answers on that socket with one line: "P <pid>" once the
 * target runs, or "E <stage> <errno>" when it could not start (stage is
 * fork, chdir or exec).  Both sides build and read those words here only.
 */
#ifndef KV_SUPERVISE_H
#define KV_SUPERVISE_H

#include <stddef.h>

#define KV_SUPERVISE_MODE "__supervise" /* argv[1] that selects the supervisor */
#define KV_SUPERVISE_CTL_FD 3
#define KV_SUPERVISE_GRACE_MS 2000 /* between TERM and KILL of the group */
#define KV_SUPERVISE_REPORT_MAX 64 /* a report line, newline and NUL included */

/* Words around the target's argv: room the caller adds for kv_supervise_argv. */
#define KV_SUPERVISE_ARGV_EXTRA 10

/*
 * Write the supervisor's argv (its argv[0] "kvengine", NULL-terminated) into
 * out, which has room for the target's words plus KV_SUPERVISE_ARGV_EXTRA.
 * ppid and grace are decimal strings; cwd may be NULL.  The strings are
 * borrowed.  Returns the number of words.
 */
size_t kv_supervise_argv(const char **out, const char *ppid, const char *grace, const char *cwd,
                         const char *const *target);

/*
 * The report lines, newline and NUL included, into buf, which has room for
 * KV_SUPERVISE_REPORT_MAX bytes: kv_supervise_report_pid writes "P <pid>",
 * kv_supervise_report_error "E <stage> <errno>" (stage: fork, chdir, exec).
 */
void kv_supervise_report_pid(char *buf, long pid);
void kv_supervise_report_error(char *buf, const char *stage, int err);

/*
 * Read one report line (without its newline): 1 for "P <pid>" (*pid set),
 * 0 for "E <stage> <errno>" (stage, 16 bytes, and *err set), -1 otherwise.
 */
int kv_supervise_parse_report(const char *line, long *pid, char stage[16], int *err);

/* The entry point for `kvengine __supervise ...`: main's exit code. */
int kv_supervise_main(int argc, char **argv);

#endif
