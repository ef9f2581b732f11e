/*
 * http_lines.c - line framing of a streamed body (http_lines.h): pure, no
 * allocation, so fuzz_lines.c can hold it to its contract.
 */
#include "http_lines.h"

#include <assert.h>
#include <string.h>

/* The length of a line of n bytes once a "\r" that ends it is stripped. */
static size_t strip_cr(const char *buf, size_t n) {
  return n > 0 && buf[n - 1] == '\r' ? n - 1 : n;
}

kvh_line_result kvh_lines_next(kvh_lines *s, const char *buf, size_t len, int end, size_t *line_len,
                               size_t *used) {
  assert(s->scanned <= len); /* the caller only appends between calls */
  const char *nl = len > s->scanned ? memchr(buf + s->scanned, '\n', len - s->scanned) : NULL;
  size_t n;
  if (nl) {
    n = (size_t)(nl - buf);
    *used = n + 1;
  } else {
    s->scanned = len;
    /* Unterminated: a final "\r" may still be half of the "\r\n" to come. */
    if (strip_cr(buf, len) > s->max)
      return KVH_LINE_TOO_LONG;
    if (!end || len == 0)
      return KVH_LINE_MORE;
    n = len;
    *used = len;
  }
  n = strip_cr(buf, n);
  if (n > s->max)
    return KVH_LINE_TOO_LONG;
  *line_len = n;
  s->scanned = 0;
  return KVH_LINE;
}
