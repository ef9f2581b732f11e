/*
 * redis_batch.c - Redis commands in the wire protocol, and the batches that
 * carry them.
 *
 * A command is formatted once, as it is added (c:call's arguments, p:call
 * in a pipeline, b:call on a batch from redis.batch()), straight into the
 * batch's buffer as RESP: sending it is then a copy into hiredis's output
 * buffer.  Arguments are strings (binary-safe) or numbers (integers in
 * decimal, floats in the shortest form that reads back the same).
 * b:callf(format, ...) builds a command from hiredis's format syntax without
 * making Lua strings: spaces separate the arguments, %s inserts a string or
 * number, %d an integer, %u an integer as unsigned 64 bits (a hash above
 * 2^63), %% a percent sign.  Commands whose replies hiredis 0.14 would call
 * back many times for ((P/S)SUBSCRIBE, their UNSUBSCRIBEs, MONITOR) raise.
 *
 * Storage: a batch done with its buffers hands them to a one-slot cache
 * that the next batch starts from, so a steady stream of pipelines
 * allocates nothing here.  Nothing in this file touches the loop.
 */
#include "redis_private.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BATCH_MT "kvengine.redis.batch"

enum { SPARE_MAX = 1 << 20 }; /* larger buffers are freed, not cached */

static kv_buf spare_buf, spare_ends;

/* Give `from` to the one-slot cache `spare` (or free it); `from` is empty afterwards. */
static void spare_put(kv_buf *spare, kv_buf *from) {
  if (from->p && !spare->p && from->cap <= SPARE_MAX) {
    *spare = *from;
    spare->len = 0;
    *from = (kv_buf){0};
  } else {
    kv_buf_free(from);
  }
}

void redis_batch_release(batch *b) {
  spare_put(&spare_buf, &b->buf);
  spare_put(&spare_ends, &b->ends);
  b->n = 0;
}

void redis_batch_clear(batch *b) {
  if (b->buf.cap > SPARE_MAX) /* a big value: do not keep its buffer */
    redis_batch_release(b);
  b->n = 0;
  b->buf.len = b->ends.len = 0;
}

/* Room for `more` bytes in *into (started from the cache when empty); aborts when out of memory. */
static char *room(kv_buf *into, kv_buf *spare, size_t more) {
  if (!into->p && spare->p) {
    *into = *spare;
    *spare = (kv_buf){0};
  }
  char *p = kv_buf_room(into, more);
  if (!p)
    abort();
  return p;
}

static char *batch_room(batch *b, size_t more) { return room(&b->buf, &spare_buf, more); }

/*
 * The command just written up to p ends there.  A NUL follows it (not part
 * of the command): hiredis peeks at a formatted command's name with strchr,
 * which must stop inside the buffer.
 */
static void batch_end_command(batch *b, const char *p) {
  b->buf.len = (size_t)(p - b->buf.p);
  *batch_room(b, 1) = '\0';
  size_t end = b->buf.len;
  memcpy(room(&b->ends, &spare_ends, sizeof end), &end, sizeof end);
  b->ends.len += sizeof end;
  b->n++;
}

/* Commands hiredis 0.14 treats specially: their callbacks fire many times. */
static int command_unsupported(const char *name, size_t len) {
  static const struct {
    const char *name;
    size_t len;
  } names[] = {{"subscribe", 9},     {"psubscribe", 10},   {"ssubscribe", 10}, {"unsubscribe", 11},
               {"punsubscribe", 12}, {"sunsubscribe", 12}, {"monitor", 7}};
  if (len < 7 || len > 12)
    return 0; /* the common case, without a comparison */
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (len == names[i].len && strncasecmp(name, names[i].name, len) == 0)
      return 1;
  return 0;
}

/* Write "<c><v>\r\n" at p; returns the end. */
static char *put_header(char *p, char c, size_t v) {
  char digits[24], *d = digits + sizeof digits;
  do
    *--d = (char)('0' + v % 10);
  while (v /= 10);
  *p++ = c;
  size_t n = (size_t)(digits + sizeof digits - d);
  memcpy(p, d, n);
  p += n;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

/* Write one argument (a bulk string) at p; returns the end. */
static char *put_arg(char *p, const char *s, size_t len) {
  p = put_header(p, '$', len);
  memcpy(p, s, len);
  p += len;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

enum { ARG_OVERHEAD = 32, NUMBER_MAX = 64 }; /* "$<len>\r\n...\r\n"; a number's text */

/* Append a command of C strings (the connect handshake's). */
void redis_batch_add_strings(batch *b, int argc, const char *const *argv) {
  size_t more = ARG_OVERHEAD;
  for (int i = 0; i < argc; i++)
    more += strlen(argv[i]) + ARG_OVERHEAD;
  char *p = put_header(batch_room(b, more), '*', (size_t)argc);
  for (int i = 0; i < argc; i++)
    p = put_arg(p, argv[i], strlen(argv[i]));
  batch_end_command(b, p);
}

/* Two decimal digits at a time: "00" to "99". */
static const char digit_pairs[] = "00010203040506070809101112131415161718192021222324"
                                  "25262728293031323334353637383940414243444546474849"
                                  "50515253545556575859606162636465666768697071727374"
                                  "75767778798081828384858687888990919293949596979899";

/* The decimal text of v (as_unsigned: of its 64 bits unsigned) in buf; its length. */
static size_t integer_text(lua_Integer v, int as_unsigned, char *buf) {
  int minus = v < 0 && !as_unsigned;
  unsigned long long u = minus ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  char digits[24];
  size_t d = sizeof digits;
  while (u >= 100) {
    unsigned r = (unsigned)(u % 100) * 2;
    u /= 100;
    digits[--d] = digit_pairs[r + 1];
    digits[--d] = digit_pairs[r];
  }
  if (u >= 10) {
    digits[--d] = digit_pairs[u * 2 + 1];
    digits[--d] = digit_pairs[u * 2];
  } else {
    digits[--d] = (char)('0' + u);
  }
  if (minus)
    digits[--d] = '-';
  memcpy(buf, digits + d, sizeof digits - d);
  return sizeof digits - d;
}

/* The text of the number at index i: decimal, or the shortest float that reads back the same. */
static size_t number_text(lua_State *L, int i, char buf[NUMBER_MAX]) {
  if (lua_isinteger(L, i))
    return integer_text(lua_tointeger(L, i), 0, buf);
  double x = (double)lua_tonumber(L, i);
  int n = 0;
  for (int prec = 15; prec <= 17; prec++) {
    n = snprintf(buf, NUMBER_MAX, "%.*g", prec, x);
    if (strtod(buf, NULL) == x || isnan(x))
      break;
  }
  return (size_t)n;
}

/*
 * Append the command at stack indices first..last to b: strings as they
 * are, numbers as their text.  Anything else raises, and so does a command
 * this client cannot run; either way b is left as it was.
 */
void redis_batch_add(lua_State *L, batch *b, int first, int last) {
  if (last < first)
    luaL_error(L, "redis: no command given");
  if (lua_type(L, first) == LUA_TSTRING) {
    size_t len;
    const char *name = lua_tolstring(L, first, &len);
    if (command_unsupported(name, len))
      luaL_error(L, "redis: %s is not supported (it needs a connection of its own)", name);
  }
  size_t start = b->buf.len;
  char *p = put_header(batch_room(b, ARG_OVERHEAD), '*', (size_t)(last - first + 1));
  for (int i = first; i <= last; i++) {
    char num[NUMBER_MAX];
    const char *s;
    size_t len;
    int t = lua_type(L, i);
    if (t == LUA_TSTRING) {
      s = lua_tolstring(L, i, &len);
    } else if (t == LUA_TNUMBER) {
      len = number_text(L, i, num);
      s = num;
    } else {
      b->buf.len = start;
      luaL_argerror(L, i,
                    lua_pushfstring(L, "string or number expected, got %s", luaL_typename(L, i)));
      return;
    }
    b->buf.len = (size_t)(p - b->buf.p);
    p = put_arg(batch_room(b, len + ARG_OVERHEAD), s, len);
  }
  batch_end_command(b, p);
}

/* Write the value at index i as a %s, %d or %u of a format wants it at p; returns the end. */
static char *put_format_value(lua_State *L, int i, char conv, char *p) {
  int isint = 0;
  if (conv == 's') {
    size_t len;
    int t = lua_type(L, i);
    if (t == LUA_TSTRING) {
      const char *s = lua_tolstring(L, i, &len);
      memcpy(p, s, len);
      return p + len;
    }
    if (t != LUA_TNUMBER)
      luaL_argerror(L, i,
                    lua_pushfstring(L, "string or number expected, got %s", luaL_typename(L, i)));
    return p + number_text(L, i, p);
  }
  lua_Integer v = lua_tointegerx(L, i, &isint);
  if (!isint)
    luaL_argerror(
        L, i, lua_pushfstring(L, "integer expected for %%%c, got %s", conv, luaL_typename(L, i)));
  return p + integer_text(v, conv == 'u', p);
}

/* The arguments of a format: its runs of characters other than spaces. */
static int format_argc(const char *f, size_t flen) {
  int argc = 0;
  for (size_t i = 0; i < flen; i++)
    if (f[i] != ' ' && (i == 0 || f[i - 1] == ' '))
      argc++;
  return argc;
}

/*
 * Append the command that the format at index fi and its values at
 * fi+1..last describe (hiredis's format syntax): spaces separate the
 * arguments; %s inserts a string or number, %d an integer, %u an integer as
 * unsigned 64 bits, %% a percent sign; anything else raises, and so do
 * missing or extra values.  Nothing is appended when it raises.
 */
static void batch_addf(lua_State *L, batch *b, int fi, int last) {
  enum { HEADER_MAX = 24 }; /* "$<length>\r\n" */
  size_t flen;
  const char *f = luaL_checklstring(L, fi, &flen);
  int argc = format_argc(f, flen);
  if (argc == 0)
    luaL_error(L, "redis: no command given");
  /* Room for all of it at once: the format, each value's text at most, and
     each argument's header and CRLF. */
  size_t more = flen + ARG_OVERHEAD + (size_t)argc * (HEADER_MAX + 2);
  for (int i = fi + 1; i <= last; i++)
    more += (lua_type(L, i) == LUA_TSTRING ? lua_rawlen(L, i) : 0) + NUMBER_MAX;
  char *p = put_header(batch_room(b, more), '*', (size_t)argc);
  int v = fi + 1;
  for (size_t i = 0, n = 0; i < flen; n++) {
    while (i < flen && f[i] == ' ')
      i++;
    if (i == flen)
      break;
    /* The argument's text goes after room for its header, then moves up. */
    char *text = p + HEADER_MAX, *q = text;
    while (i < flen && f[i] != ' ') {
      if (f[i] != '%') {
        *q++ = f[i++];
      } else if (i + 1 < flen && f[i + 1] == '%') {
        *q++ = '%';
        i += 2;
      } else if (i + 1 < flen && (f[i + 1] == 's' || f[i + 1] == 'd' || f[i + 1] == 'u')) {
        if (v > last)
          luaL_error(L, "redis: the format wants more values than the %d given", last - fi);
        q = put_format_value(L, v++, f[i + 1], q);
        i += 2;
      } else {
        luaL_error(L, "redis: bad format: '%%%c' (%%s, %%d, %%u and %%%% are known)",
                   i + 1 < flen ? f[i + 1] : ' ');
      }
    }
    size_t len = (size_t)(q - text);
    char *data = put_header(p, '$', len);
    memmove(data, text, len);
    if (n == 0 && command_unsupported(data, len))
      luaL_error(L, "redis: %s is not supported (it needs a connection of its own)",
                 lua_pushlstring(L, data, len));
    p = data + len;
    *p++ = '\r';
    *p++ = '\n';
  }
  if (v <= last)
    luaL_error(L, "redis: %d values given for a format that uses %d", last - fi, v - fi - 1);
  batch_end_command(b, p);
}

/* ------------------------------------------------------------ Lua batches */

/*
 * The batch at index 1.  The batch's functions have its metatable as
 * upvalue 1 (kv_class_new): comparing with it is cheaper than
 * luaL_checkudata's lookup by name, and p:call runs once per command.
 */
static batch *check_batch(lua_State *L) {
  batch *b = lua_touserdata(L, 1);
  if (b && lua_getmetatable(L, 1)) {
    int ours = lua_rawequal(L, -1, lua_upvalueindex(1));
    lua_pop(L, 1);
    if (ours)
      return b;
  }
  return luaL_checkudata(L, 1, BATCH_MT); /* raises */
}

batch *redis_batch_push(lua_State *L) {
  batch *b = lua_newuserdatauv(L, sizeof *b, 0);
  memset(b, 0, sizeof *b);
  luaL_setmetatable(L, BATCH_MT);
  return b;
}

batch *redis_test_batch(lua_State *L, int i) { return luaL_testudata(L, i, BATCH_MT); }

/* Add the command that add() reads from arguments 2.. to the batch at 1; push its reply's index. */
static int batch_command(lua_State *L, void (*add)(lua_State *, batch *, int, int)) {
  batch *b = check_batch(L);
  if (b->sealed)
    return luaL_error(L, "redis: pipeline already sent");
  add(L, b, 2, lua_gettop(L));
  lua_pushinteger(L, b->n);
  return 1;
}

/* b:call(cmd, ...) -> index of its reply.  Arguments are checked now. */
static int batch_call(lua_State *L) { return batch_command(L, redis_batch_add); }

/* b:callf(format, ...) -> index of its reply: the command as batch_addf says. */
static int batch_callf(lua_State *L) { return batch_command(L, batch_addf); }

/* #b: its commands. */
static int batch_len(lua_State *L) {
  lua_pushinteger(L, check_batch(L)->n);
  return 1;
}

/* __gc and __close: the storage goes back to the cache; the batch is empty after. */
static int batch_gc(lua_State *L) {
  redis_batch_release(check_batch(L));
  return 0;
}

static int batch_tostring(lua_State *L) {
  batch *b = check_batch(L);
  lua_pushfstring(L, "redis batch (%d commands%s)", b->n, b->sealed ? ", sent" : "");
  return 1;
}

void redis_batch_open(lua_State *L) {
  static const luaL_Reg methods[] = {{"call", batch_call}, {"callf", batch_callf}, {NULL, NULL}};
  kv_class_new(L, BATCH_MT, methods, batch_gc, batch_tostring);
  luaL_getmetatable(L, BATCH_MT);
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, batch_len, 1);
  lua_setfield(L, -2, "__len");
  lua_pop(L, 1);
}
