/*
 * kv_tokenize.c - llm-d-inference-sim's simulated tokenizer, for kv.tokenize
 * and kv.tokenize_chat.
 *
 * Without a real tokenizer the sim cuts text into the leftmost-first,
 * non-overlapping matches of (Go RE2 syntax)
 *
 *   ({|}|:|,|-|\.|\?|!|;|@|#|\$|%|\^|&|\*|\(|\)|\+|\-|_|~|/|\\|>|<|\[|\]|=|"|'|\w+)(\s*)
 *
 * and each match, trailing whitespace included, becomes the token id
 * FNV-1a-32(match).  In RE2, \w is ASCII [0-9A-Za-z_] and \s is ASCII
 * [\t\n\f\r ] (no \v); text is matched rune by rune, and since every byte the
 * pattern can match is ASCII, any other character (a multi-byte UTF-8
 * sequence, an invalid byte, '|', '`', \v, ...) starts no match and is
 * skipped.  Leftmost-first alternation tries the single characters before
 * \w+, so a '_' at the start of a match is a token of its own, while '_'
 * inside a word run belongs to the run ("a_b" is one token, "_b" two).
 *
 * This file recognises exactly that token class with a byte scanner: the
 * three character classes below are the whole grammar.
 *
 * Chat messages are rendered first, one after the other, as
 *   "### " role ["(" tool_call_id ")"] ": " text [tool calls] "\n"
 * where text is the content string, or the content parts joined by "\n"
 * ({type="text", text=...} gives its text, {type="image_url",
 * image_url={url=...}} gives "image: <url>", other parts nothing), and each
 * tool call {["function"]={name=, arguments=}} appends "[name(arguments)]".
 */
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "kv.h"

/* The single characters the pattern lists before \w+. */
static int is_sim_punct(unsigned char c) {
  switch (c) {
  case '{':
  case '}':
  case ':':
  case ',':
  case '-':
  case '.':
  case '?':
  case '!':
  case ';':
  case '@':
  case '#':
  case '$':
  case '%':
  case '^':
  case '&':
  case '*':
  case '(':
  case ')':
  case '+':
  case '_':
  case '~':
  case '/':
  case '\\':
  case '>':
  case '<':
  case '[':
  case ']':
  case '=':
  case '"':
  case '\'':
    return 1;
  default:
    return 0;
  }
}

/* RE2's \w: ASCII letters, digits and '_'. */
static int is_word(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

/* RE2's \s: tab, newline, form feed, carriage return, space. */
static int is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

static uint32_t fnv1a32(const unsigned char *p, size_t n) {
  uint32_t h = UINT32_C(2166136261);
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= UINT32_C(16777619);
  }
  return h;
}

/* Push the token ids of s[0..n) as a sequence. */
static void push_tokens(lua_State *L, const char *text, size_t n) {
  const unsigned char *s = (const unsigned char *)text;
  lua_Integer count = 0;
  size_t i = 0;
  lua_createtable(L, (int)(n / 4 < 1024 ? n / 4 : 1024), 0);
  while (i < n) {
    size_t start = i;
    if (is_sim_punct(s[i])) {
      i++;
    } else if (is_word(s[i])) {
      while (i < n && is_word(s[i]))
        i++;
    } else {
      i++; /* no match starts here */
      continue;
    }
    while (i < n && is_space(s[i]))
      i++;
    lua_pushinteger(L, (lua_Integer)fnv1a32(s + start, i - start));
    lua_rawseti(L, -2, ++count);
  }
}

/* kv.tokenize(text) -> {id, ...}: the sim's token ids of a prompt. */
int kv_tokenize(lua_State *L) {
  size_t n;
  const char *text = luaL_checklstring(L, 1, &n);
  push_tokens(L, text, n);
  return 1;
}

/*
 * The rendered chat text is gathered as a list of strings (a Lua table at
 * index `out`, its length in *n) and concatenated once at the end; this keeps
 * the stack free for reading the messages.
 */
static void piece(lua_State *L, int out, lua_Integer *n, const char *s) {
  lua_pushstring(L, s);
  lua_rawseti(L, out, ++*n);
}

/* Move the string on top of the stack into the list; pop other values. */
static void piece_top(lua_State *L, int out, lua_Integer *n) {
  if (lua_type(L, -1) == LUA_TSTRING || lua_type(L, -1) == LUA_TNUMBER) {
    lua_tostring(L, -1);
    lua_rawseti(L, out, ++*n);
  } else {
    lua_pop(L, 1);
  }
}

/* Raise unless the value at idx is nil or a string. */
static void check_opt_string(lua_State *L, int idx, lua_Integer i, const char *what) {
  int ty = lua_type(L, idx);
  if (ty != LUA_TNIL && ty != LUA_TSTRING)
    luaL_error(L, "kv.tokenize_chat: messages[%I].%s must be a string, got %s", (LUAI_UACINT)i,
               what, lua_typename(L, ty));
}

/* Render the content parts (table at index t) of message i. */
static void render_parts(lua_State *L, int out, lua_Integer *n, int t, lua_Integer i) {
  lua_Integer count = (lua_Integer)lua_rawlen(L, t);
  int first = 1;
  for (lua_Integer k = 1; k <= count; k++) {
    int top = lua_gettop(L);
    if (lua_rawgeti(L, t, k) != LUA_TTABLE)
      luaL_error(L, "kv.tokenize_chat: messages[%I].content[%I] must be a table", (LUAI_UACINT)i,
                 (LUAI_UACINT)k);
    int part = lua_gettop(L);
    lua_getfield(L, part, "type");
    const char *type = lua_tostring(L, -1);
    if (type != NULL && strcmp(type, "text") == 0) {
      if (!first)
        piece(L, out, n, "\n");
      lua_getfield(L, part, "text");
      piece_top(L, out, n);
      first = 0;
    } else if (type != NULL && strcmp(type, "image_url") == 0 &&
               lua_getfield(L, part, "image_url") == LUA_TTABLE) {
      if (!first)
        piece(L, out, n, "\n");
      piece(L, out, n, "image: ");
      lua_getfield(L, -1, "url");
      piece_top(L, out, n);
      first = 0;
    }
    lua_settop(L, top);
  }
}

/* Render "[name(arguments)]" for each tool call of message m. */
static void render_tool_calls(lua_State *L, int out, lua_Integer *n, int m) {
  int top = lua_gettop(L);
  if (lua_getfield(L, m, "tool_calls") == LUA_TTABLE) {
    int calls = lua_gettop(L);
    lua_Integer count = (lua_Integer)lua_rawlen(L, calls);
    for (lua_Integer k = 1; k <= count; k++) {
      int base = lua_gettop(L);
      if (lua_rawgeti(L, calls, k) == LUA_TTABLE && lua_getfield(L, -1, "function") == LUA_TTABLE &&
          lua_getfield(L, -1, "name") == LUA_TSTRING) {
        piece(L, out, n, "[");
        piece_top(L, out, n);
        piece(L, out, n, "(");
        lua_getfield(L, -1, "arguments");
        piece_top(L, out, n);
        piece(L, out, n, ")]");
      }
      lua_settop(L, base);
    }
  }
  lua_settop(L, top);
}

/* kv.tokenize_chat(messages) -> {id, ...}: the sim's ids of a chat prompt. */
int kv_tokenize_chat(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer count = (lua_Integer)lua_rawlen(L, 1);
  lua_Integer n = 0;
  lua_newtable(L);
  int out = lua_gettop(L);
  for (lua_Integer i = 1; i <= count; i++) {
    if (lua_rawgeti(L, 1, i) != LUA_TTABLE)
      luaL_error(L, "kv.tokenize_chat: messages[%I] must be a table", (LUAI_UACINT)i);
    int m = lua_gettop(L);
    piece(L, out, &n, "### ");
    lua_getfield(L, m, "role");
    check_opt_string(L, -1, i, "role");
    piece_top(L, out, &n);
    lua_getfield(L, m, "tool_call_id");
    check_opt_string(L, -1, i, "tool_call_id");
    if (lua_type(L, -1) == LUA_TSTRING && lua_rawlen(L, -1) > 0) {
      piece(L, out, &n, "(");
      piece_top(L, out, &n);
      piece(L, out, &n, ")");
    } else {
      lua_pop(L, 1);
    }
    piece(L, out, &n, ": ");
    int ty = lua_getfield(L, m, "content");
    if (ty == LUA_TSTRING) {
      piece_top(L, out, &n);
    } else if (ty == LUA_TTABLE) {
      render_parts(L, out, &n, lua_gettop(L), i);
      lua_pop(L, 1);
    } else if (ty == LUA_TNIL) {
      lua_pop(L, 1);
    } else {
      luaL_error(L, "kv.tokenize_chat: messages[%I].content must be a string or a list of parts",
                 (LUAI_UACINT)i);
    }
    render_tool_calls(L, out, &n, m);
    piece(L, out, &n, "\n");
    lua_pop(L, 1); /* the message */
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (lua_Integer k = 1; k <= n; k++) {
    lua_rawgeti(L, out, k);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  push_tokens(L, text, len);
  return 1;
}
