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
  take_lost(s, NULL, 0, 0);
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
  KV_LIST_PUSH(s->resources, r, prev, next);
  s->refs++;
}

void kv_untrack(kv_resource *r) {
  kv_scope *s = r->scope;
  if (!s)
    return;
  KV_LIST_REMOVE(s->resources, r, prev, next);
  r->scope = NULL;
  kv_scope_unref(s);
}

void kv_scope_add_task(kv_scope *s, kv_task *t) {
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
 * waited for them, oldest loss first (a background task's error fails the
 * test): those already lost, then those whose handles nobody waited with.
 * Idempotent.
 */
int kv_scope_close(kv_scope *s, lua_State *L) {
  s->refs++;
  s->closed = 1;
  KV_LIST_REMOVE(open_scopes, s, prev, next);
  kv_defer_forget(L, s);
  kv_task *t;
  kv_sched_defer(1);
  while ((t = first_live_task(s)))
    kv_task_abandon(t);
  kv_sched_defer(0);
  lua_newtable(L);
  int n = take_lost(s, L, 1, 0);
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
