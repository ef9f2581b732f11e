/*
 * http_histogram.c - latency histograms with a bounded relative error, as
 * HdrHistogram keeps them: http.histogram(), and what http.load and
 * http.batch{summary = true} return.
 *
 * Values are whole microseconds.  Below 256 us each value has a bucket of
 * its own; above, every power of two is cut into 128 equal buckets, so a
 * bucket is at most 1/128 (0.8%) of its values wide.  A percentile is the
 * highest value its bucket can hold (never below the true one, at most 0.8%
 * above it), capped by the largest value recorded, which is exact, as are
 * the count, the least value and the mean.  Merging adds the counts, so a
 * histogram merged from many workers or batches is the one they would have
 * recorded together.  Nothing here waits: recording is a few instructions
 * the load client does for every response, on the loop.
 */
#include "engine.h"
#include "http_private.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define HIST_MT "kvengine.http.histogram"

#define SUB_BITS 8
#define SUB_COUNT (1 << SUB_BITS) /* values below are exact */
#define HALF (SUB_COUNT / 2)      /* buckets per power of two above */
#define MAX_BITS 40               /* 2^40 us, 12 days: larger values count as that */
#define NBUCKETS (SUB_COUNT + (MAX_BITS - SUB_BITS + 1) * HALF)
#define VALUE_MAX ((UINT64_C(1) << MAX_BITS) - 1)

struct kvh_hist {
  uint64_t count, min, max;
  double sum;
  uint64_t counts[NBUCKETS];
};

static int bucket_of(uint64_t v) {
  assert(v <= VALUE_MAX); /* callers clamp: larger values have no bucket */
  if (v < SUB_COUNT)
    return (int)v;
  int top_bit = 63 - __builtin_clzll(v);
  int shift = top_bit - SUB_BITS + 1;
  int i = SUB_COUNT + (shift - 1) * HALF + (int)((v >> shift) - HALF);
  assert(i >= SUB_COUNT && i < NBUCKETS);
  return i;
}

/* The highest value bucket i holds. */
static uint64_t bucket_high(int i) {
  assert(i >= 0 && i < NBUCKETS);
  if (i < SUB_COUNT)
    return (uint64_t)i;
  int k = i - SUB_COUNT, shift = k / HALF + 1;
  uint64_t low = (uint64_t)(k % HALF + HALF) << shift;
  return low + (UINT64_C(1) << shift) - 1;
}

void kvh_hist_add(kvh_hist *h, uint64_t usec, uint64_t n) {
  if (usec > VALUE_MAX)
    usec = VALUE_MAX;
  if (n == 0)
    return;
  h->counts[bucket_of(usec)] += n;
  if (h->count == 0 || usec < h->min)
    h->min = usec;
  if (usec > h->max)
    h->max = usec;
  h->count += n;
  h->sum += (double)usec * (double)n;
  assert(h->min <= h->max && h->max <= VALUE_MAX);
}

kvh_hist *kvh_hist_push(lua_State *L) {
  kvh_hist *h = lua_newuserdatauv(L, sizeof *h, 0);
  memset(h, 0, sizeof *h);
  luaL_setmetatable(L, HIST_MT);
  return h;
}

static kvh_hist *check_hist(lua_State *L, int i) { return luaL_checkudata(L, i, HIST_MT); }

/* The value at percentile p (0..100) in microseconds; 0 when empty. */
static uint64_t hist_percentile(const kvh_hist *h, double p) {
  if (h->count == 0)
    return 0;
  double want = p / 100.0 * (double)h->count;
  uint64_t rank = (uint64_t)want, seen = 0;
  if ((double)rank < want)
    rank++; /* the rank is want rounded up */
  if (rank <= 1)
    return h->min;
  for (int i = 0; i < NBUCKETS; i++) {
    seen += h->counts[i];
    if (seen >= rank) {
      uint64_t v = bucket_high(i);
      return v > h->max ? h->max : v;
    }
  }
  return h->max;
}

static double seconds(uint64_t usec) { return (double)usec / 1e6; }

static uint64_t usec_of(lua_State *L, int i) {
  double s = luaL_checknumber(L, i);
  luaL_argcheck(L, s >= 0 && s == s, i, "a latency is a number of seconds >= 0");
  double us = s * 1e6 + 0.5;
  return us >= (double)VALUE_MAX ? VALUE_MAX : (uint64_t)us;
}

/* h:record(seconds [, n]): count a value (n times). */
static int hist_record(lua_State *L) {
  kvh_hist *h = check_hist(L, 1);
  uint64_t us = usec_of(L, 2);
  lua_Integer n = luaL_optinteger(L, 3, 1);
  luaL_argcheck(L, n >= 0, 3, "a count is >= 0");
  kvh_hist_add(h, us, (uint64_t)n);
  lua_settop(L, 1);
  return 1;
}

/* h:percentile(p) -> seconds, p in 0..100; nil when nothing was recorded. */
static int hist_percentile_l(lua_State *L) {
  kvh_hist *h = check_hist(L, 1);
  double p = luaL_checknumber(L, 2);
  luaL_argcheck(L, p >= 0 && p <= 100, 2, "a percentile is in 0..100");
  if (h->count == 0)
    return 0;
  lua_pushnumber(L, seconds(hist_percentile(h, p)));
  return 1;
}

void kvh_hist_merge(kvh_hist *into, const kvh_hist *from) {
  if (from->count == 0)
    return;
  for (int i = 0; i < NBUCKETS; i++)
    into->counts[i] += from->counts[i];
  if (into->count == 0 || from->min < into->min)
    into->min = from->min;
  if (from->max > into->max)
    into->max = from->max;
  into->count += from->count;
  into->sum += from->sum;
}

/* h:merge(other) -> h, with other's values added. */
static int hist_merge(lua_State *L) {
  kvh_hist *h = check_hist(L, 1);
  kvh_hist_merge(h, check_hist(L, 2));
  lua_settop(L, 1);
  return 1;
}

static int hist_count(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check_hist(L, 1)->count);
  return 1;
}

/* Pushes `usec` as seconds, or nothing when `h` holds no sample. */
static int push_unless_empty(lua_State *L, const kvh_hist *h, double usec) {
  if (h->count == 0)
    return 0;
  lua_pushnumber(L, usec / 1e6);
  return 1;
}

/* h:min(), h:max(), h:mean() -> seconds; nothing when empty. */
static int hist_min(lua_State *L) {
  kvh_hist *h = check_hist(L, 1);
  return push_unless_empty(L, h, (double)h->min);
}

static int hist_max(lua_State *L) {
  kvh_hist *h = check_hist(L, 1);
  return push_unless_empty(L, h, (double)h->max);
}

static int hist_mean(lua_State *L) {
  kvh_hist *h = check_hist(L, 1);
  return push_unless_empty(L, h, h->count ? h->sum / (double)h->count : 0);
}

static const struct {
  const char *name;
  double p;
} REPORTED[] = {{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p99.9", 99.9}};

/*
 * h:json() -> text: count, min, max, mean, p50, p90, p99 and p99.9 in
 * seconds, and buckets = {{value, count}, ...} (each non-empty bucket's
 * highest value), from which http.histogram(decoded) rebuilds h.
 */
static int hist_json(lua_State *L) {
  kvh_hist *h = check_hist(L, 1);
  lua_createtable(L, 0, 10);
  lua_pushliteral(L, "seconds");
  lua_setfield(L, -2, "unit");
  lua_pushinteger(L, (lua_Integer)h->count);
  lua_setfield(L, -2, "count");
  if (h->count > 0) {
    lua_pushnumber(L, seconds(h->min));
    lua_setfield(L, -2, "min");
    lua_pushnumber(L, seconds(h->max));
    lua_setfield(L, -2, "max");
    lua_pushnumber(L, h->sum / (double)h->count / 1e6);
    lua_setfield(L, -2, "mean");
    for (size_t i = 0; i < sizeof REPORTED / sizeof *REPORTED; i++) {
      lua_pushnumber(L, seconds(hist_percentile(h, REPORTED[i].p)));
      lua_setfield(L, -2, REPORTED[i].name);
    }
  }
  lua_newtable(L);
  lua_Integer n = 0;
  for (int i = 0; i < NBUCKETS; i++) {
    if (!h->counts[i])
      continue;
    lua_createtable(L, 2, 0);
    lua_pushnumber(L, seconds(bucket_high(i)));
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, (lua_Integer)h->counts[i]);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, -2, ++n);
  }
  lua_setfield(L, -2, "buckets");
  kvh_json_encode(L, -1);
  return 1;
}

static double field_number(lua_State *L, int t, const char *k) {
  lua_getfield(L, t, k);
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return v;
}

/* Rebuild from t, a decoded h:json(); raises when t is not one. */
static void hist_load(lua_State *L, int t, kvh_hist *h) {
  if (lua_getfield(L, t, "buckets") != LUA_TTABLE)
    luaL_error(L, "http.histogram: the table has no buckets (is it a decoded h:json()?)");
  for (lua_Integer i = 1, n = luaL_len(L, -1); i <= n; i++) {
    lua_geti(L, -1, i);
    lua_geti(L, -1, 1);
    lua_geti(L, -2, 2);
    if (!lua_isnumber(L, -2) || !lua_isinteger(L, -1) || lua_tonumber(L, -2) < 0 ||
        lua_tointeger(L, -1) < 0)
      luaL_error(L, "http.histogram: bucket %d is not {seconds, count}", (int)i);
    kvh_hist_add(h, usec_of(L, -2), (uint64_t)lua_tointeger(L, -1));
    lua_pop(L, 3);
  }
  lua_pop(L, 1);
  if (h->count == 0)
    return;
  /* The exact figures the buckets round. */
  h->min = (uint64_t)(field_number(L, t, "min") * 1e6 + 0.5);
  h->max = (uint64_t)(field_number(L, t, "max") * 1e6 + 0.5);
  h->sum = field_number(L, t, "mean") * 1e6 * (double)h->count;
}

/* http.histogram([decoded_json]) -> an empty histogram, or the one h:json() wrote. */
int kvh_histogram(lua_State *L) {
  int t = lua_istable(L, 1);
  luaL_argexpected(L, t || lua_isnoneornil(L, 1), 1, "nil or a decoded h:json()");
  kvh_hist *h = kvh_hist_push(L);
  if (t)
    hist_load(L, 1, h);
  return 1;
}

static void format_duration(char *out, size_t n, uint64_t usec) {
  if (usec < 1000)
    snprintf(out, n, "%lluus", (unsigned long long)usec);
  else if (usec < 1000000)
    snprintf(out, n, "%.2fms", (double)usec / 1e3);
  else
    snprintf(out, n, "%.3fs", (double)usec / 1e6);
}

/* "n=600 p50=20.31ms p90=... p99=... p99.9=... max=..." */
static int hist_tostring(lua_State *L) {
  kvh_hist *h = check_hist(L, 1);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  char num[64];
  snprintf(num, sizeof num, "histogram n=%llu", (unsigned long long)h->count);
  luaL_addstring(&b, num);
  if (h->count > 0) {
    for (size_t i = 0; i < sizeof REPORTED / sizeof *REPORTED; i++) {
      format_duration(num, sizeof num, hist_percentile(h, REPORTED[i].p));
      luaL_addchar(&b, ' ');
      luaL_addstring(&b, REPORTED[i].name);
      luaL_addchar(&b, '=');
      luaL_addstring(&b, num);
    }
    format_duration(num, sizeof num, h->max);
    luaL_addstring(&b, " max=");
    luaL_addstring(&b, num);
  }
  luaL_pushresult(&b);
  return 1;
}

static const luaL_Reg hist_methods[] = {
    {"record", hist_record},
    {"percentile", hist_percentile_l},
    {"merge", hist_merge},
    {"count", hist_count},
    {"min", hist_min},
    {"max", hist_max},
    {"mean", hist_mean},
    {"json", hist_json},
    {NULL, NULL},
};

void kvh_histogram_open(lua_State *L) {
  kv_class_new(L, HIST_MT, hist_methods, NULL, hist_tostring);
}
