-- scenarios/redis_outage.lua - losing Redis costs cache-aware scoring, not
-- service.
--
-- The router reads block ownership from Redis for every request. As Kthena
-- does it (docs/kthena.md, "Redis from the router's side"):
--
--   * a lookup that fails gives that request no kvcache-aware score; the
--     other plugins (least-request here) still score, the request is served,
--     and kthena_router_kvcache_aware_errors_total{stage="redis"} counts it;
--   * after a good start the router reconnects by itself: once Redis is back
--     and ownership is written again (Redis restarts empty), scoring resumes
--     without touching the router;
--   * the router PINGs Redis once, at start: a router started while Redis was
--     down scores nothing by cache for its whole life, even once Redis is
--     back, until it is restarted.
--
-- Each test has its own stack. Which pod owns what is exactly what the test
-- injects: the sims keep their own KV events (a batch would leave after an
-- hour), so the requests the router spreads while it cannot score do not
-- make more owners. The kind target cannot stop its shared Redis: kvcache
-- skips these tests there.

local kvcache = require("kvcache")

local SCALE = require("engine").time_scale()
local ERRORS = "kthena_router_kvcache_aware_errors_total"
local QUIET_SIMS = { event_batch_delay = 3600, event_batch_size = 1000000 }

-- The router's count of kvcache-aware failures at `stage` for the stack's model.
local function errors_at(s, stage)
  local m = assert(s:metrics())
  return m:get(ERRORS, { model = s.model, stage = stage })
end

-- p2 owns the prompt, and the router sends the prompt there by cache score.
local function p2_owns(s, prompt)
  local tokens = s:tokens { prompt = prompt }
  -- Right after Redis came back the runtime may still be reconnecting.
  s:inject("p2", kvcache.stored { tokens = tokens }, { timeout = 10 * SCALE })
  s:expect_owner { tokens = tokens, pod = "p2" }
  local r = assert(s:complete { prompt = prompt, max_tokens = 1 })
  s:expect_scored(r, "p2", 100, "p2 holds every block of the prompt")
  s:expect_served(r, "p2", "p2 holds every block of the prompt")
end

-- n requests for the prompt: every one served (status 200), none scored by
-- the cache, every pod scored by least-request, the decision naming the
-- Redis failure.
local function served_unscored(s, prompt, n, why)
  local t = s:route { prompt = prompt, max_tokens = 1, n = n }
  expect(t.errors):eq(0, "every request is still served (" .. tostring(t) .. ")")
  for _, r in ipairs(t.results) do
    expect(r.status):eq(200, "request " .. r.request_id .. " is served")
    for _, pod in ipairs({ "p1", "p2", "p3" }) do
      expect(r.scores[pod]["kvcache-aware"]):is_nil(string.format("%s: no cache score for %s %s", r.request_id,
        pod, why))
      expect(r.scores[pod]["least-request"]):not_nil(r.request_id .. ": least-request still scores " .. pod)
    end
    expect(r.decision.error or ""):contains("redis: ", "the decision of " .. r.request_id .. " names the Redis failure")
  end
  log(string.format("%s: %s; decision error: %s", why, tostring(t), t.results[1].decision.error))
  return t
end

test("Redis down: every request is still served through least-request, and each failure is counted (stage=redis)",
  { tags = { "needs:kvcache_score" } },
  function()
    local s <close> = kvcache.stack { pods = 3, sim = QUIET_SIMS }
    local prompt = s:prompt(3, { tag = "outage" })
    p2_owns(s, prompt)
    local before = errors_at(s, "redis")
    s:stop_redis()
    served_unscored(s, prompt, 4, "while Redis is down")
    expect(errors_at(s, "redis") - before):eq(4, ERRORS .. '{stage="redis"} counts each of the 4 failed lookups')
    expect(errors_at(s, "tokenize")):eq(0, "tokenizing still works: no failure at stage tokenize")
  end)

test("Redis back, empty: once ownership is written again the router scores it, without a restart",
  { tags = { "needs:kvcache_score" } }, function()
  local s <close> = kvcache.stack { pods = 3, sim = QUIET_SIMS }
  local prompt = s:prompt(3, { tag = "comeback" })
  p2_owns(s, prompt)
  -- Ownership of a prompt no pod ever serves shows that Redis came back
  -- empty: on the kthena target the real sim announces what it served a
  -- second later whatever its flags (DEV-3), maybe once Redis is back.
  local _, kept = s:prompt(3, { tag = "kept" })
  s:inject("p1", kvcache.stored { tokens = kept })
  s:expect_owner { tokens = kept, pod = "p1" }
  s:stop_redis()
  served_unscored(s, prompt, 1, "while Redis is down")
  s:start_redis()
  s:expect_no_owner { tokens = kept } -- Redis came back empty: it keeps nothing on disk here
  local failed = errors_at(s, "redis")
  p2_owns(s, s:prompt(3, { tag = "rewritten" }))
  expect(errors_at(s, "redis")):eq(failed, "no lookup fails once Redis is back")
end)

test("Redis down when the router starts: no cache scoring, even once Redis is back, until the router restarts",
  { tags = { "needs:kvcache_score" } },
  function()
    local s <close> = kvcache.stack { pods = 3, sim = QUIET_SIMS }
    local prompt = s:prompt(3, { tag = "coldstart" })
    s:stop_redis()
    s:restart_router() -- its one PING fails: Kthena leaves the Redis client unset
    s:start_redis()
    local tokens = s:tokens { prompt = prompt }
    s:inject("p2", kvcache.stored { tokens = tokens }, { timeout = 10 * SCALE })
    s:expect_owner { tokens = tokens, pod = "p2" } -- Redis holds the ownership...
    local t = served_unscored(s, prompt, 3, "the router started without Redis") -- ...the router never asks
    expect(t.results[1].decision.error):contains("redis client not initialized")
    expect(errors_at(s, "redis")):eq(3, ERRORS .. '{stage="redis"} counts every request of the blind router')
    s:restart_router()
    -- A prompt of its own: pods that served the blind router's requests may
    -- have announced the first one (the real sim cannot be silenced).
    p2_owns(s, s:prompt(3, { tag = "restarted" }))
    expect(errors_at(s, "redis")):eq(0, "the restarted router's lookups succeed")
  end)
