-- scenarios/tokenizer_failure.lua - a failing /tokenize costs cache-aware
-- scoring, not service.
--
-- For every request the kvcache-aware plugin asks one candidate pod,
-- picked at random, to tokenize the prompt (POST /tokenize on the pod's
-- port 8000). As Kthena does it (docs/kthena.md, "The kvcache-aware score"):
--
--   * an error (here a 500) is retried once after 1 s; if the retry fails
--     too, that request gets no kvcache-aware score, least-request still
--     scores it, it is served, and
--     kthena_router_kvcache_aware_errors_total{stage="tokenize"} counts it;
--   * only the requests whose tokenizer failed lose the score: with one bad
--     pod among three, about a third of them;
--   * a tokenizer that hangs is waited for: 5 s per attempt, so a chat
--     request (10 s budget) is served about 10 s late (a text prompt, 11 s);
--   * a reply that says 200 but is not JSON is a failure too, not zero
--     tokens: the request is unscored and counted;
--   * once /tokenize answers again, scoring is back at once.
--
-- Which pod owns what is exactly what each test injects: the sims keep
-- their own KV events (a batch would leave after an hour), so the requests
-- the router spreads while it cannot score do not make more owners.
-- Faults come from stack:fault (the local sims' admin endpoint, the kthena
-- target's forwarders): the kind target has none, and kvcache skips these
-- tests there.

local kvcache = require("kvcache")

local ERRORS = "kthena_router_kvcache_aware_errors_total"
local PODS = { "p1", "p2", "p3" }
local QUIET_SIMS = { event_batch_delay = 3600, event_batch_size = 1000000 }

local stack

local function errors_at(stage)
  local m = assert(stack:metrics())
  return m:get(ERRORS, { model = stack.model, stage = stage })
end

-- p1 owns the prompt ({prompt =} or {messages =}), and the router sends it
-- there by cache score.
local function p1_owns(req)
  local tokens = stack:tokens(req)
  stack:inject("p1", kvcache.stored { tokens = kvcache.prefix(tokens, #tokens // 16) })
  stack:expect_owner { tokens = tokens, pod = "p1" }
  local t = stack:expect_routed { prompt = req.prompt, messages = req.messages, pod = "p1", max_tokens = 1 }
  stack:expect_scored(t.results[1], "p1", math.floor((#tokens // 16) / ((#tokens + 15) // 16) * 100),
    "p1 holds the prompt's full blocks")
end

-- A served request without any cache score, least-request scoring every pod.
local function expect_unscored(r, why)
  expect(r.status):eq(200, string.format("request %s is served although %s (%s)", r.request_id, why, r.body))
  for _, pod in ipairs(PODS) do
    expect(r.scores[pod]["kvcache-aware"]):is_nil(string.format("%s: no cache score for %s: %s", r.request_id, pod,
      why))
    expect(r.scores[pod]["least-request"]):not_nil(r.request_id .. ": least-request still scores " .. pod)
  end
  expect(r.decision.error or ""):contains("tokenize: ", r.request_id .. ": the decision names the tokenize failure")
end

before_all(function()
  stack = kvcache.stack { pods = 3, sim = QUIET_SIMS }
end)

after_each(function()
  for _, pod in ipairs(PODS) do stack:fault(pod, nil) end
end)

test("every /tokenize answering 500: requests are served through least-request, each failure counted",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt = stack:prompt(3, { tag = "fivehundred" })
  p1_owns { prompt = prompt }
  local before = errors_at("tokenize")
  for _, pod in ipairs(PODS) do stack:fault(pod, { tokenize = 500 }) end
  local t0 = now()
  local t = stack:route { prompt = prompt, max_tokens = 1, n = 3, concurrency = 3 }
  log(string.format("3 requests with every tokenizer failing, served in %.2fs (Kthena retries once after 1 s): %s",
    now() - t0, tostring(t)))
  for _, r in ipairs(t.results) do expect_unscored(r, "every /tokenize answers 500") end
  expect(t.results[1].decision.error):contains("/tokenize giving up after 2 attempt(s)",
    "Kthena's tokenizer client retried the 500 once, then gave up")
  expect(errors_at("tokenize") - before):eq(3, ERRORS .. '{stage="tokenize"} counts each of the 3 requests')
  expect(errors_at("redis")):eq(0, "Redis is fine: no failure at stage redis")

  for _, pod in ipairs(PODS) do stack:fault(pod, nil) end
  -- A real sim announces what it served within a second, whatever its batch
  -- delay: a pod that served the prompt unscored may hold it too, tied with p1.
  local again = stack:complete { prompt = prompt, max_tokens = 1 }
  expect(again.scores.p1["kvcache-aware"]):eq(100, "scoring is back as soon as /tokenize answers: p1 holds the prompt")
  expect(again.scores[again.pod]["kvcache-aware"]):eq(100, string.format("the request went to %s, which does not "
    .. "hold the whole prompt as p1 does (request %s)", again.pod, again.request_id))
end)

test("a /tokenize reply that is not JSON fails as a tokenize error: served unscored, each one counted",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt = stack:prompt(3, { tag = "malformed" })
  p1_owns { prompt = prompt }
  local before = errors_at("tokenize")
  for _, pod in ipairs(PODS) do stack:fault(pod, { tokenize = "malformed" }) end
  local t = stack:route { prompt = prompt, max_tokens = 1, n = 3, concurrency = 3 }
  for _, r in ipairs(t.results) do
    expect_unscored(r, "ERR-8: every /tokenize answers 200 with a body that is not JSON, which the router cannot read")
  end
  expect(errors_at("tokenize") - before):eq(3, "ERR-8: a reply that does not decode is a tokenize failure: "
    .. ERRORS .. '{stage="tokenize"} counts each of the 3 requests')
end)

test("one pod's /tokenize failing: only the requests it was asked to tokenize lose the cache score",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt = stack:prompt(3, { tag = "onebad" })
  p1_owns { prompt = prompt }
  stack:fault("p2", { tokenize = 500 })
  local before = errors_at("tokenize")
  -- The router picks the tokenizing pod at random: send requests until
  -- both outcomes were seen (30 requests miss p2 with probability 5e-6).
  local failed, scored, sent = 0, 0, 0
  while (failed == 0 or scored == 0) and sent < 30 do
    sent = sent + 1
    local r = stack:complete { prompt = prompt, max_tokens = 1 }
    if r.decision and r.decision.error then
      expect_unscored(r, "p2 was asked to tokenize and answered 500")
      failed = failed + 1
    else
      stack:expect_served(r, "p1", "a request tokenized by a healthy pod goes to the owner p1 (request "
        .. r.request_id .. ")")
      expect(r.scores.p1["kvcache-aware"]):eq(100, "and is scored by the cache")
      scored = scored + 1
    end
  end
  log(string.format("%d requests: %d tokenized by p2 and unscored, %d scored and sent to p1", sent, failed, scored))
  expect(failed > 0 and scored > 0):is_true("both outcomes in 30 requests")
  expect(errors_at("tokenize") - before):eq(failed, ERRORS .. '{stage="tokenize"} counts exactly the unscored requests')
end)

test("a /tokenize that hangs: each chat request is served unscored after Kthena's 10 s budget",
  { tags = { "needs:kvcache_score" }, timeout = 40 },
  function()
    local messages = { { role = "user", content = stack:text(48, { tag = "hang" }) } }
    p1_owns { messages = messages }
    local before = errors_at("tokenize")
    for _, pod in ipairs(PODS) do stack:fault(pod, { tokenize = "timeout" }) end
    local t0 = now()
    local t = stack:route { messages = messages, max_tokens = 1, n = 2, concurrency = 2 }
    local took = now() - t0
    log(string.format("2 chat requests with every tokenizer hanging, served in %.2fs: %s", took, tostring(t)))
    for _, r in ipairs(t.results) do expect_unscored(r, "every /tokenize hangs") end
    expect(took):ge(9.5, "each request waits for the tokenizer: 5 s, 1 s before the retry, then what is left of 10 s")
    expect(took):lt(15, "and not longer than the chat budget, plus the answer")
    expect(errors_at("tokenize") - before):eq(2, ERRORS .. '{stage="tokenize"} counts each of the 2 requests')
  end)
