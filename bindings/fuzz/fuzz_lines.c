/*
 * fuzz_lines.c - libFuzzer target for http_lines.c: the line framing of a
 * streamed body (a Kubernetes watch read with lines = true).
 *
 * It plays the part of http_client.c: the first input byte picks how many
 * bytes arrive at a time, the second the longest line (small, so the limit
 * is reached), the rest is the body.  Bytes are appended to a buffer of
 * those not yet handed out, lines are taken until none is complete, and
 * handed-out bytes are dropped from the front now and then, as the client
 * does.  Every answer is checked against the contract in http_lines.h, with
 * the body rebuilt from the lines and their line endings, each byte once.
 */
#include "http_lines.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const uint8_t *body; /* the input, to compare the lines with */
  size_t size, at;     /* bytes of body accounted for by lines so far */
  char *buf;           /* bytes not yet handed out: buf[off .. len) */
  size_t off, len;
  kvh_lines s;
  int too_long;
} reader;

/* The line starting at p (n bytes there), stripped, as far as it goes; its end in *nl. */
static size_t line_length(const char *p, size_t n, const char **nl) {
  *nl = memchr(p, '\n', n);
  size_t k = *nl ? (size_t)(*nl - p) : n;
  return k > 0 && p[k - 1] == '\r' ? k - 1 : k;
}

/* Take lines until none is complete; returns 0 once the framing gave up. */
static int take(reader *r, int end) {
  for (;;) {
    const char *p = r->buf + r->off;
    size_t n = r->len - r->off, line_len = 0, used = 0;
    const char *nl;
    size_t want = line_length(p, n, &nl);
    kvh_line_result res = kvh_lines_next(&r->s, p, n, end, &line_len, &used);
    if (res == KVH_LINE_TOO_LONG) {
      assert(want > r->s.max); /* even unfinished, the line is already too long */
      r->too_long = 1;
      return 0;
    }
    if (res == KVH_LINE_MORE) {
      assert(!nl && want <= r->s.max);
      assert(!end || n == 0);
      return 1;
    }
    assert(res == KVH_LINE && used <= n && line_len <= r->s.max && line_len == want);
    assert(!memchr(p, '\n', line_len));
    const char *rest = p + line_len;
    size_t tail = used - line_len;
    if (nl)
      assert(rest + tail == nl + 1 &&
             ((tail == 1 && rest[0] == '\n') || (tail == 2 && rest[0] == '\r' && rest[1] == '\n')));
    else
      assert(end && used == n && (tail == 0 || (tail == 1 && rest[0] == '\r')));
    /* The bytes handed out are the body's next ones, each once. */
    assert(r->at + used <= r->size && memcmp(r->body + r->at, p, used) == 0);
    volatile unsigned sum = 0;
    for (size_t i = 0; i < line_len; i++)
      sum += (unsigned char)p[i];
    (void)sum;
    r->at += used;
    r->off += used;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2)
    return 0;
  size_t step = (size_t)(data[0] % 64) + 1;
  reader r = {.body = data + 2, .size = size - 2, .buf = malloc(size)};
  r.s.max = data[1];
  assert(r.buf);
  for (size_t off = 0; off < r.size && !r.too_long;) {
    size_t n = r.size - off < step ? r.size - off : step;
    if (r.off > 0 && (r.off == r.len || (off / step) % 3 == 0)) { /* drop what was handed out */
      memmove(r.buf, r.buf + r.off, r.len - r.off);
      r.len -= r.off;
      r.off = 0;
    }
    memcpy(r.buf + r.len, r.body + off, n);
    r.len += n;
    off += n;
    take(&r, 0);
  }
  if (!r.too_long && take(&r, 1))
    assert(r.at == r.size && r.off == r.len); /* every byte handed out */
  free(r.buf);
  return 0;
}
