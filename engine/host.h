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

void kv_host_open(struct kv_host *h, const char *artifacts);
void kv_host_start(struct kv_host *h, int nargs);
int kv_host_run(struct kv_host *h, int until_main);
int kv_host_outcome(struct kv_host *h);
void kv_host_close(struct kv_host *h);

#endif
