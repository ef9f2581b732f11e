/*
 * scope.c - what a test owns: its tasks and the handles it opened.
 *
 * Every task and every tracked resource belongs to one scope.  A test gets a
 * scope of its own (its hooks and body share it); the file, or a served
 * program, runs in the root scope.  Closing a scope abandons the tasks still
 * running in it and closes its resources newest first, so a test that ends,
 * fails or times out leaves no socket, server or child behind.
 *
 * A task's error is the scope's to report once nobody can take it any more
 * (task.c decides when): a test's scope fails its test with it when it
 * closes; the root scope prints it, since no test is there to fail.
 *
 * Scopes lie below the scheduler: task.c calls this file, never the other
 * way.  A scope sees its tasks as list nodes with an outcome; to end the
 * live ones when it closes it calls the function the scheduler registered
 * (kv_scope_on_close), and it learns which task runs from running.c.
 */
#include "internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

struct kv_lost {
  struct kv_lost *next;
  char traceback[];
};

static kv_scope *root;
static kv_scope *open_scopes;
static kv_scope_fn end_tasks; /* the scheduler's: abandon a scope's live tasks */

void kv_scope_on_close(kv_scope_fn fn) { end_tasks = fn; }

kv_scope *kv_scope_new(void) {
  kv_scope *s = calloc(1, sizeof *s);
  if (!s)
    abort();
  s->refs = 1;
  KV_LIST_PUSH(open_scopes, s, prev, next);
  return s;
}

static void print_lost(const char *traceback) {
  fprintf(stderr, "kvengine: error in a background task: %s\n", traceback);
}

/* Free s's lost errors; with push, append them to the list on top of L. */
static int take_lost(kv_scope *s, lua_State *L, int push, int n) {
  while (s->lost) {
    struct kv_lost *l = s->lost;
    s->lost = l->next;
    if (push) {
      lua_pushstring(L, l->traceback);
      lua_rawseti(L, -2, ++n);
    }
    free(l);
  }
  return n;
}

void kv_scope_unref(kv_scope *s) {
  assert(s->refs > 0);
  if (--s->refs > 0)
    return;
  assert(!s->resources && !s->tasks);
  assert(s != root); /* the host clears the root before its last reference goes */
  take_lost(s, NULL, 0, 0);
  free(s);
}

kv_scope *kv_scope_root(void) { return root; }

void kv_scope_set_root(kv_scope *s) { root = s; }

kv_scope *kv_scope_current(void) {
  kv_task *t = kv_task_running();
  return t && t->scope && !t->scope->closed ? t->scope : root;
}

void kv_track(kv_resource *r, const char *what, kv_close_fn close) {
  kv_scope *s = kv_scope_current();
  assert(r && close && s && !r->scope); /* tracked once, in a scope that exists */
  r->what = what;
  r->close = close;
  r->scope = s;
  KV_LIST_PUSH(s->resources, r, prev, next);
  s->refs++;
}

void kv_untrack(kv_resource *r) {
  kv_scope *s = r->scope;
  if (!s)
    return;
  assert(s->refs > 0 && s->resources); /* r is on s's list */
  KV_LIST_REMOVE(s->resources, r, prev, next);
  r->scope = NULL;
  kv_scope_unref(s);
}

void kv_scope_add_task(kv_scope *s, kv_task *t) {
  assert(s && !t->scope); /* a closing scope still ends what its tasks spawn */
  t->scope = s;
  KV_LIST_PUSH(s->tasks, t, scope_prev, scope_next);
  s->refs++;
}

void kv_scope_remove_task(kv_task *t) {
  kv_scope *s = t->scope;
  if (!s)
    return;
  KV_LIST_REMOVE(s->tasks, t, scope_prev, scope_next);
  t->scope = NULL;
  kv_scope_unref(s);
}

/*
 * A task of s ended with an error that nobody took and nobody can take any
 * more.  A test's open scope keeps it for kv_scope_close, which fails the
 * test; the root scope (or a closed one) prints it now.
 */
void kv_scope_lost_error(kv_scope *s, const char *traceback) {
  assert(traceback);
  if (!s || s == root || s->closed) {
    print_lost(traceback);
    return;
  }
  size_t len = strlen(traceback);
  struct kv_lost *l = malloc(sizeof *l + len + 1);
  if (!l)
    abort();
  memcpy(l->traceback, traceback, len + 1);
  struct kv_lost **tail = &s->lost; /* oldest first: the first is the one a test reports */
  while (*tail)
    tail = &(*tail)->next;
  l->next = NULL;
  *tail = l;
}

/*
 * Close s: forget what was deferred on it (the runner has run that),
 * abandon its running tasks, then close its resources newest first.
 * Pushes onto L a list of the tracebacks of tasks that failed while nobody
 * waited for them, oldest loss first (a background task's error fails the
 * test): those already lost, then those whose handles nobody waited with.
 * Idempotent.
 */
int kv_scope_close(kv_scope *s, lua_State *L) {
  assert(s->refs > 0);
  s->refs++;
  s->closed = 1; /* first: what the abandoned tasks open now goes to the root */
  KV_LIST_REMOVE(open_scopes, s, prev, next);
  kv_defer_forget(L, s);
  if (s->tasks) {
    assert(end_tasks); /* a task exists only once the scheduler registered it */
    end_tasks(s);
  }
  lua_newtable(L);
  int n = take_lost(s, L, 1, 0);
  for (kv_task *t = s->tasks; t; t = t->scope_next) {
    assert(t->state == KV_TASK_DONE); /* end_tasks left none running */
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

/*
 * Close every scope still open, newest first (an interrupted run, and the
 * root at the end of every run): the root's errors nobody took are printed.
 */
void kv_scope_close_all(lua_State *L) {
  while (open_scopes) {
    kv_scope *s = open_scopes;
    kv_scope_close(s, L);
    if (s == root) {
      lua_Integer n = luaL_len(L, -1);
      for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        print_lost(lua_tostring(L, -1));
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
  }
}
