/*
 * scope.c - what a test owns: its tasks and the handles it opened.
 *
 * Every task and every tracked resource belongs to one scope.  A test gets a
 * scope of its own (its hooks and body share it); the file, or a served
 * program, runs in the root scope.  Closing a scope abandons the tasks still
 * running in it and closes its resources newest first, so a test that ends,
 * fails or times out leaves no socket, server or child behind.
 */
#include "internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

static kv_scope *root;
static kv_scope *open_scopes;

static void unlink_open(kv_scope *s) {
  if (s->prev)
    s->prev->next = s->next;
  else if (open_scopes == s)
    open_scopes = s->next;
  if (s->next)
    s->next->prev = s->prev;
  s->prev = s->next = NULL;
}

static char *dup_or_empty(const char *s) {
  char *d = strdup(s ? s : "");
  if (!d)
    abort();
  return d;
}

kv_scope *kv_scope_new(const char *test, const char *artifacts) {
  kv_scope *s = calloc(1, sizeof *s);
  if (!s)
    abort();
  s->test = dup_or_empty(test);
  s->artifacts = dup_or_empty(artifacts);
  s->refs = 1;
  s->next = open_scopes;
  if (s->next)
    s->next->prev = s;
  open_scopes = s;
  return s;
}

void kv_scope_unref(kv_scope *s) {
  assert(s->refs > 0);
  if (--s->refs > 0)
    return;
  assert(!s->resources && !s->tasks);
  free(s->test);
  free(s->artifacts);
  free(s);
}

kv_scope *kv_scope_root(void) { return root; }

void kv_scope_set_root(kv_scope *s) { root = s; }

kv_scope *kv_scope_current(void) {
  kv_task *t = kv_task_running();
  return t && t->scope && !t->scope->closed ? t->scope : root;
}

const char *kv_test_name(void) { return kv_scope_current()->test; }

const char *kv_artifacts_dir(void) { return kv_scope_current()->artifacts; }

void kv_track(kv_resource *r, const char *what, kv_close_fn close) {
  kv_scope *s = kv_scope_current();
  r->what = what;
  r->close = close;
  r->scope = s;
  r->prev = NULL;
  r->next = s->resources;
  if (r->next)
    r->next->prev = r;
  s->resources = r;
  s->refs++;
}

void kv_untrack(kv_resource *r) {
  kv_scope *s = r->scope;
  if (!s)
    return;
  if (r->prev)
    r->prev->next = r->next;
  else
    s->resources = r->next;
  if (r->next)
    r->next->prev = r->prev;
  r->prev = r->next = NULL;
  r->scope = NULL;
  kv_scope_unref(s);
}

void kv_scope_add_task(kv_scope *s, kv_task *t) {
  t->scope = s;
  t->scope_prev = NULL;
  t->scope_next = s->tasks;
  if (t->scope_next)
    t->scope_next->scope_prev = t;
  s->tasks = t;
  s->refs++;
}

void kv_scope_remove_task(kv_task *t) {
  kv_scope *s = t->scope;
  if (!s)
    return;
  if (t->scope_prev)
    t->scope_prev->scope_next = t->scope_next;
  else
    s->tasks = t->scope_next;
  if (t->scope_next)
    t->scope_next->scope_prev = t->scope_prev;
  t->scope = NULL;
  kv_scope_unref(s);
}

static kv_task *first_live_task(kv_scope *s) {
  for (kv_task *t = s->tasks; t; t = t->scope_next)
    if (t->state != KV_TASK_DONE)
      return t;
  return NULL;
}

/*
 * Close s: forget what was deferred on it (the runner has run that),
 * abandon its running tasks, then close its resources newest first.
 * Pushes onto L a list of the tracebacks of tasks that failed while nobody
 * waited for them (a background task's error fails the test).  Idempotent.
 */
int kv_scope_close(kv_scope *s, lua_State *L) {
  s->refs++;
  s->closed = 1;
  unlink_open(s);
  kv_defer_forget(L, s);
  kv_task *t;
  kv_sched_defer(1);
  while ((t = first_live_task(s)))
    kv_task_abandon(t);
  kv_sched_defer(0);
  lua_newtable(L);
  int n = 0;
  for (t = s->tasks; t; t = t->scope_next) {
    if (t->end == KV_END_ERROR && !t->observed) {
      t->observed = 1;
      lua_pushstring(L, t->traceback ? t->traceback : "error");
      lua_rawseti(L, -2, ++n);
    }
  }
  while (s->resources) {
    kv_resource *r = s->resources;
    r->close(r);
    if (s->resources == r) /* a close that forgot to untrack must not loop */
      kv_untrack(r);
  }
  kv_scope_unref(s);
  return 1;
}

/* Close every scope still open, newest first (an interrupted run). */
void kv_scope_close_all(lua_State *L) {
  while (open_scopes) {
    kv_scope_close(open_scopes, L);
    lua_pop(L, 1);
  }
}
