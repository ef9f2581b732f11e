/*
 * http_lines.h - line framing of a streamed response body (http.request's
 * `lines = true`), kept apart from curl and Lua so that it can be fuzzed
 * alone (bindings/fuzz/fuzz_lines.c).
 *
 * A Kubernetes watch is newline-delimited JSON over chunked encoding: the
 * chunks curl hands over split events anywhere.  The caller keeps the
 * bytes not yet handed out in one buffer, appends what arrives, and asks
 * kvh_lines_next for the next line each time.
 */
#ifndef KV_HTTP_LINES_H
#define KV_HTTP_LINES_H

#include <stddef.h>

typedef struct kvh_lines {
  size_t max;     /* the longest line handed out, in bytes (its "\r\n" not counted) */
  size_t scanned; /* bytes at the buffer's start already known to hold no '\n' */
} kvh_lines;

typedef enum {
  KVH_LINE,          /* a line: buf[0 .. *line_len); drop *used bytes */
  KVH_LINE_MORE,     /* no complete line yet (at the end: nothing left) */
  KVH_LINE_TOO_LONG, /* the next line is longer than max: give up the body */
} kvh_line_result;

/*
 * The next line of buf[0 .. len), the bytes not yet handed out; `end` says
 * the body is over, so an unterminated rest is the last line.
 *
 * Contract (checked by fuzz_lines.c):
 * - KVH_LINE: buf[0 .. *line_len) holds no '\n' and is followed, up to
 *   *used, by "\n" or "\r\n"; at the end, by nothing or "\r" with *used ==
 *   len.  So the lines joined with their terminators are the body, each
 *   byte handed out once, a "\r" before a line's end stripped.
 *   *line_len <= s->max.
 * - KVH_LINE_MORE: buf holds no '\n' and, as far as it goes, a line not
 *   longer than max; at the end, len == 0.
 * - KVH_LINE_TOO_LONG: the line starting at buf is longer than s->max
 *   (already so when more bytes are still to come).
 * Between calls the caller may append to the buffer and must drop exactly
 * *used bytes from its front after a KVH_LINE; s->scanned lets a long line
 * arriving in many pieces be scanned once.  Start s zeroed but for max.
 */
kvh_line_result kvh_lines_next(kvh_lines *s, const char *buf, size_t len, int end, size_t *line_len,
                               size_t *used);

#endif
