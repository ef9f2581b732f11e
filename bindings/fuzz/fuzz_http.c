/*
 * fuzz_http.c - libFuzzer target for http_parse.c: the server's request path
 * and the load client's response path.
 *
 * It plays the part of a server connection: the first input byte picks how
 * many bytes arrive per read, the rest is the byte stream.  Unparsed bytes
 * are kept and fed again, exactly as http_server.c does, so pipelining,
 * requests split at every position and error paths are all reached.  Each
 * request handed out is checked against the wrapper's contract.  Then the
 * same bytes, read the same way, are a load client's responses
 * (http_load.c): one expected at a time, the next after each complete one.
 */
#include "http_parse.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BODY 1024

static size_t heads;

static void on_head(void *ctx, const kv_http_request *head) {
  (void)ctx;
  assert(head->method && head->path && head->query && head->url);
  heads++;
}

/* Every promise of kv_http_request, with every byte read once. */
static void check(const kv_http_request *r) {
  assert(r && r->method && r->path && r->query && r->url && r->body);
  assert(r->body_len <= MAX_BODY);
  assert(r->path[0] != '\0');
  volatile size_t sum = strlen(r->url) + strlen(r->path) + strlen(r->query);
  for (size_t i = 0; i < r->body_len; i++)
    sum += (unsigned char)r->body[i];
  for (size_t i = 0; i < r->nheaders; i++) {
    const kv_http_header *h = &r->headers[i];
    assert(h->name && h->value);
    for (const char *p = h->name; *p; p++)
      assert(!(*p >= 'A' && *p <= 'Z'));
    sum += strlen(h->value);
  }
  (void)sum;
}

/* The bytes as responses, as http_load.c reads them. */
static void fuzz_responses(const uint8_t *data, size_t size, size_t step) {
  kv_hr *p = kv_hr_new();
  assert(p);
  kv_hr_expect(p, step % 7 == 0); /* now and then the answer to a HEAD */
  kv_hr_result r = KV_HR_MORE;
  for (size_t off = 0; off < size && r != KV_HR_ERROR;) {
    size_t n = size - off < step ? size - off : step, used;
    r = kv_hr_feed(p, (const char *)data + off, n, &used);
    assert(used <= n);
    assert(kv_hr_started(p));
    if (r == KV_HR_RESPONSE) {
      assert(kv_hr_status(p) >= 0 && kv_hr_status(p) <= 999);
      kv_hr_expect(p, 0);
      off += used; /* what follows is the next response */
    } else {
      off += n;
    }
  }
  if (r == KV_HR_ERROR)
    assert(kv_hr_error_text(p)[0] != '\0');
  else if (kv_hr_eof(p) == KV_HR_RESPONSE)
    assert(kv_hr_status(p) >= 0 && kv_hr_status(p) <= 999);
  kv_hr_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  size_t step = (size_t)(data[0] % 64) + 1;
  data++, size--;
  kv_hp *p = kv_hp_new(MAX_BODY, on_head, NULL);
  char *in = malloc(size + 1);
  assert(p && in);
  size_t in_len = 0, requests = 0;
  heads = 0;
  for (size_t off = 0; off < size;) {
    size_t n = size - off < step ? size - off : step;
    memcpy(in + in_len, data + off, n);
    in_len += n;
    off += n;
    kv_hp_result r;
    do {
      size_t used;
      r = kv_hp_feed(p, in, in_len, &used);
      assert(used <= in_len);
      memmove(in, in + used, in_len - used);
      in_len -= used;
      if (r == KV_HP_REQUEST) {
        kv_http_request *q = kv_hp_take(p);
        check(q);
        kv_http_request_free(q);
        requests++;
      }
    } while (r == KV_HP_REQUEST);
    if (r == KV_HP_ERROR) {
      int status = kv_hp_error_status(p);
      assert(status >= 400 && status <= 599);
      assert(kv_hp_error_text(p)[0] != '\0');
      break;
    }
    assert(in_len == 0); /* KV_HP_MORE consumed everything */
  }
  assert(requests <= heads);
  free(in);
  kv_hp_free(p);
  fuzz_responses(data, size, step);
  return 0;
}
