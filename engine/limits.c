/*
 * limits.c - the process's open-file limit, raised once at start, and
 * closing every descriptor from one on (a process forked or exec'd must
 * not hold its parent's).
 *
 * A stack of many pods in one process holds thousands of descriptors (each
 * pod's listeners, ZMQ sockets and their connections), and the soft limit
 * a shell hands out is often 1,024 while the hard one is far higher.  The
 * engine raises its soft limit to the hard one before anything opens a
 * descriptor, so that a large stack is refused only by what the machine
 * truly allows, and says which limit that is (engine.fd_limits()).  Child
 * processes inherit the raised limit, as they would from a shell that ran
 * `ulimit -n $(ulimit -Hn)`.
 */
#include "internal.h"

#include <assert.h>
#include <sys/resource.h>
#include <unistd.h>

/*
 * Raise the soft RLIMIT_NOFILE to the hard one.  Best effort: a process
 * that cannot (a seccomp profile, say) keeps its limit, which
 * engine.fd_limits() then reports.
 */
void kv_raise_fd_limit(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max)
    return;
  r.rlim_cur = r.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &r);
}

void kv_close_from(int first) {
  if (close_range((unsigned)first, ~0U, 0) == 0)
    return;
  struct rlimit r; /* a kernel without close_range: each one the limit allows */
  rlim_t end = getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? r.rlim_cur : 1024;
  for (rlim_t fd = (rlim_t)first; fd < end; fd++)
    close((int)fd);
}

/* An rlim_t as a Lua integer: "unlimited" as math.maxinteger. */
static lua_Integer as_integer(rlim_t v) {
  if (v == RLIM_INFINITY || v > (rlim_t)LUA_MAXINTEGER)
    return LUA_MAXINTEGER;
  return (lua_Integer)v;
}

/* __kv.fd_limits() -> soft, hard: the open-file limits this process runs with. */
int kv_l_fd_limits(lua_State *L) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0)
    return luaL_error(L, "engine.fd_limits: getrlimit failed");
  assert(r.rlim_cur <= r.rlim_max);
  lua_pushinteger(L, as_integer(r.rlim_cur));
  lua_pushinteger(L, as_integer(r.rlim_max));
  return 2;
}
