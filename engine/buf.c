/*
 * buf.c - the growable byte buffer the bindings share (engine.h: kv_buf).
 *
 * Commands formatted for Redis, a child's captured output, HTTP bodies and
 * response heads, bytes a connection received ahead of its parser, msgpack
 * the encoder writes: each is bytes appended at the end of a block that
 * doubles when full.  Nothing here knows Lua or the loop.
 */
#include "engine.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { FIRST_CAP = 256 };

char *kv_buf_room(kv_buf *b, size_t more) {
  if (b->cap - b->len >= more)
    return b->p + b->len;
  if (more > SIZE_MAX / 2 - b->len) {
    b->oom = 1;
    return NULL;
  }
  size_t cap = b->cap ? b->cap : FIRST_CAP;
  while (cap - b->len < more)
    cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = 1;
    return NULL;
  }
  b->p = p;
  b->cap = cap;
  return b->p + b->len;
}

int kv_buf_add(kv_buf *b, const void *data, size_t n) {
  char *at = kv_buf_room(b, n);
  if (!at)
    return -1;
  if (n)
    memcpy(at, data, n);
  b->len += n;
  return 0;
}

void kv_buf_free(kv_buf *b) {
  free(b->p);
  *b = (kv_buf){0};
}
