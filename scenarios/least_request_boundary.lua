-- scenarios/least_request_boundary.lua - least-request's filter at its
-- boundary (FILTER-1 in docs/kthena.md).
--
-- Kthena keeps a pod while the waiting requests its engine reports are
-- below maxWaitingRequests: a pod reporting one fewer is a candidate, a pod
-- reporting exactly maxWaitingRequests, or one more, is not. An off-by-one
-- here either sends requests to a pod whose queue is already full or takes
-- a pod out one request early; neither shows in a test that only floods a
-- pod far past the limit.
--
-- How: p1's engine reports the waiting count under test through the sim's
-- fake load gauges (stack:fake_metrics: the sim's --fake-metrics and its
-- /admin/config), so the boundary is set exactly, with no queue to fill and
-- drain. The test waits until the router's view of p1 (the debug port's pod
-- dump, on Kthena as on the stand-in) shows that count, then asks for a
-- prompt only p1 holds, with kvcache-aware weighted 3: whenever p1 is a
-- candidate it wins.

local http = require("http")
local kvcache = require("kvcache")

local SCALE = require("engine").time_scale()
local MAX_WAITING = 2

local stack, prompt

-- A prompt of its own that p1 holds, and nobody else.
local function held_by_p1()
  local text, tokens = stack:prompt(4)
  stack:inject("p1", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p1" }
  return text
end

before_all(function()
  stack = kvcache.stack {
    pods = { { sim = { fake_metrics = { waiting_requests = 0 } } }, {}, {} },
    router = kvcache.router_config { kvcache_aware = 3, least_request = 1, max_waiting = MAX_WAITING },
  }
  prompt = held_by_p1()
end)

-- The waiting gauge of p1's engine, from its /metrics.
local function engine_waiting()
  local r, err = http.get(stack:pod("p1").http .. "/metrics", { timeout = 2 * SCALE })
  if not r or r.status ~= 200 then error("GET /metrics of p1 failed: " .. tostring(r and r.status or err)) end
  return kvcache.prometheus.parse(r.body):get("vllm:num_requests_waiting")
end

-- p1's engine reports `n` waiting requests; returns once the router's view
-- of p1 shows them.
local function set_waiting(n)
  stack:fake_metrics("p1", { waiting_requests = n })
  eventually(function()
    local waiting = engine_waiting()
    if waiting ~= n then error(string.format("p1's engine reports %d waiting requests, not yet %d", waiting, n)) end
    return true
  end)
  eventually(function()
    local view = stack:router_view("p1")
    if view.waiting ~= n then
      error(string.format("the router's view of p1 shows %s waiting requests, not yet the %d its engine reports",
        tostring(view.waiting), n))
    end
    return true
  end)
end

-- The prompt p1 holds must go elsewhere, at the first attempt: p1 reports
-- `waiting` waiting requests, not below maxWaitingRequests.
local function expect_filtered(waiting)
  local why = string.format("FILTER-1: p1's engine reports %d waiting requests, %s maxWaitingRequests (%d), so "
    .. "least-request must take p1 out (Kthena keeps a pod only while waiting < maxWaitingRequests)", waiting,
    waiting == MAX_WAITING and "exactly" or "more than", MAX_WAITING)
  for i = 1, 3 do
    -- A prompt of its own each time: p2 or p3, picked at random among
    -- ties, announces what it served, which would score the next request.
    local r, err = stack:complete { prompt = held_by_p1(), max_tokens = 1, timeout = 3 * SCALE }
    if not r then
      fail(string.format("%s; request %d for the prompt p1 holds got no answer within %gs (%s): it was queued "
        .. "on p1", why, i, 3 * SCALE, tostring(err)))
    end
    expect(r.status):eq(200, string.format("%s; request %s should be served by p2 or p3: %s", why, r.request_id,
      r.body))
    expect(r.pod ~= "p1"):is_true(string.format("%s; request %s was served by p1", why, r.request_id))
    local entry = stack:access_log(r.request_id)
    expect(entry.selected_pod ~= "p1"):is_true(string.format("%s; request %s was scheduled to p1 first (access "
      .. "log: %s)", why, r.request_id, entry.line))
    if r.decision then
      expect(r.decision.candidates):eq({ "p2", "p3" }, string.format("%s; the candidates of request %s",
        why, r.request_id))
    end
  end
end

test("one below maxWaitingRequests: p1 stays a candidate and wins the prompt it holds",
  { tags = { "needs:kvcache_score" } }, function()
  set_waiting(MAX_WAITING - 1)
  local r, err = stack:complete { prompt = prompt, max_tokens = 1 }
  if not r then fail("the request for the prompt p1 holds failed: " .. tostring(err)) end
  stack:expect_served(r, "p1", string.format("FILTER-1: p1's engine reported %d waiting requests, one below "
    .. "maxWaitingRequests (%d), so p1 is still a candidate, and it holds the whole prompt (request %s, status %d)",
    MAX_WAITING - 1, MAX_WAITING, r.request_id, r.status))
  if r.decision then
    expect(r.decision.candidates):eq({ "p1", "p2", "p3" }, "FILTER-1: every pod is a candidate below the limit")
  end
end)

test("exactly maxWaitingRequests, and one more: p1 is filtered out, whatever it holds", function()
  set_waiting(MAX_WAITING)
  expect_filtered(MAX_WAITING)
  set_waiting(MAX_WAITING + 1)
  expect_filtered(MAX_WAITING + 1)
end)
