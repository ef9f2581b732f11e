/*
 * loop.c - the engine's one loop, its clock and its timers: the floor.
 *
 * Every other file of the engine and every binding waits on this loop; this
 * file calls no other file of the engine, so any of them may call it.
 */
#include "engine.h"

#include <assert.h>
#include <stdlib.h>

uv_loop_t *kv_loop(void) { return uv_default_loop(); }

double kv_now(void) { return (double)uv_hrtime() / 1e9; }

int kv_timer_start(uv_timer_t *timer, uv_timer_cb cb, uint64_t timeout_ms) {
  assert(timer && cb);
  uv_update_time(timer->loop);
  return uv_timer_start(timer, cb, timeout_ms, 0);
}

void kv_free_handle(uv_handle_t *h) { free(h); }

uv_timer_t *kv_timer_new(void *data) {
  uv_timer_t *timer = malloc(sizeof *timer);
  if (!timer)
    abort(); /* as Lua's allocator fails: nothing sensible is left to do */
  uv_timer_init(kv_loop(), timer);
  timer->data = data;
  return timer;
}
