-- scenarios/plugin_weights.lua - kvcache-aware against least-request.
--
-- Kthena scores each pod with every score plugin and sums weight x score.
-- kvcache-aware gives the pod holding a prompt's prefix up to 100;
-- least-request gives the idlest pods 100 and, as soon as the router has a
-- request in flight to a pod, that pod 0 (its formula normalises by the
-- busiest pod). So with one request in flight on the pod that holds the
-- prompt, the weights alone decide: equal weights tie it with idle pods, a
-- heavier kvcache-aware keeps the prompt there, a heavier least-request
-- sends it away. The least-request filter overrides every weight: a pod
-- whose engine reports maxWaitingRequests or more queued requests is not a
-- candidate at all. Last, kvcache-aware alone refuses a prompt no pod
-- holds (503 "request to all pods failed"): Kthena's behaviour, which is
-- why its documentation pairs it with least-request.
--
-- Each test has its own stack: the router's configuration is read once at
-- start (and on kind it is the install's one router's), so stacks with
-- different configurations never run side by side.

local kvcache = require("kvcache")
local http = require("http")

local SCALE = require("engine").time_scale()
local MAX_WAITING = 3 -- least-request's maxWaitingRequests in these stacks
-- p1 answers a request of n tokens in (n - 1) x 50 ms, so a long request
-- keeps it busy for the whole test while one-token probes answer at once;
-- two requests run at a time, the others queue.
local SLOW_POD = { sim = { inter_token_latency = 50, max_num_seqs = 2 } }
local LONG = 400 -- tokens of a request that keeps p1 busy (about 20 s)

-- The router configuration that weighs the plugins so.
local function weighted_stack_config(kv_weight, lr_weight)
  return kvcache.router_config { kvcache_aware = kv_weight, least_request = lr_weight, max_waiting = MAX_WAITING }
end

-- A stack of three pods whose router weighs the plugins so.
local function weighted_stack(kv_weight, lr_weight)
  return kvcache.stack { pods = { SLOW_POD, {}, {} }, router = weighted_stack_config(kv_weight, lr_weight) }
end

-- A prompt whose every block p1 holds.
local function cached_on_p1(s)
  local prompt, tokens = s:prompt(4)
  s:inject("p1", kvcache.stored { tokens = tokens })
  s:expect_owner { tokens = tokens, pod = "p1" }
  return prompt
end

-- A gauge of a pod's engine, from its /metrics.
local function gauge(s, pod, name)
  local r = http.get(s:pod(pod).http .. "/metrics", { timeout = 2 * SCALE })
  assert(r and r.status == 200, "GET /metrics of " .. pod .. " failed")
  return kvcache.prometheus.parse(r.body):get(name)
end

-- Background requests, cancelled by the returned function (the test calls
-- it before its stack closes).
local function background(fns)
  local tasks = {}
  for i, fn in ipairs(fns) do tasks[i] = spawn(fn) end
  return function()
    for _, t in ipairs(tasks) do t:cancel() end
  end
end

-- One long request for `prompt` through the router, which sends it to p1
-- (idle and holding the prompt); returns once p1 runs it, so the router
-- counts it in flight there.
local function busy_p1(s, prompt)
  local stop = background { function()
    s:complete { prompt = prompt, max_tokens = LONG, ignore_eos = true, timeout = 60 }
  end }
  eventually(function()
    local running = gauge(s, "p1", "vllm:num_requests_running")
    if running < 1 then
      error("the long request for a prompt p1 holds is not running on p1 (p1 runs " .. running .. " requests)")
    end
    return true
  end)
  return stop
end

-- p1 holds a prompt: requests for it while p1 is idle (expected there), then
-- n while p1 runs one long request of it. Returns both tallies.
local function idle_then_busy(s, n)
  local prompt = cached_on_p1(s)
  local idle = s:expect_routed { prompt = prompt, pod = "p1", n = 2, max_tokens = 1 }
  s:expect_scored(idle.results[1], "p1", 100, "p1 holds every block of the prompt")
  local stop = busy_p1(s, prompt)
  local busy = s:route { prompt = prompt, max_tokens = 1, n = n }
  stop()
  expect(busy.errors):eq(0, "every request is answered 200 by a pod: " .. tostring(busy))
  return idle, busy
end

test("weights 1:1: the idle pod holding the prompt wins it; with one request in flight it ties with idle pods",
  { tags = { "needs:kvcache_score" } },
  function()
    local s <close> = weighted_stack(1, 1)
    -- One request while p1 is busy: whichever pod wins the tie announces the
    -- prompt, so a second would no longer tie. Who wins a tie is the
    -- router's coin: the scores say that it is one.
    local idle, t = idle_then_busy(s, 1)
    local sc = s:scores(idle.results[1])
    expect(sc.p1):eq({ ["kvcache-aware"] = 100, ["least-request"] = 100, total = 200 }, "idle p1 holding the prompt")
    expect(sc.p2):eq({ ["least-request"] = 100, total = 100 }, "idle p2")
    sc = s:scores(t.results[1])
    expect(sc.p1):eq({ ["kvcache-aware"] = 100, ["least-request"] = 0, total = 100 },
      "busy p1: least-request gives the only pod with a request in flight 0")
    expect(sc.p2.total):eq(100, "idle p2 ties with busy p1")
    expect(sc.p3.total):eq(100, "idle p3 ties with busy p1")
  end)

test("kvcache-aware 3, least-request 1: the cache outweighs a busy pod, until its queue reaches maxWaitingRequests",
  { tags = { "needs:kvcache_score" } },
  function()
    local s <close> = weighted_stack(3, 1)
    local prompt = cached_on_p1(s)
    s:expect_scored(assert(s:complete { prompt = prompt, max_tokens = 1 }), "p1", 100,
      "p1 holds every block of the prompt")
    local stop_busy = busy_p1(s, prompt)
    local busy = s:expect_routed { prompt = prompt, pod = "p1", n = 3, max_tokens = 1 }

    -- Long requests straight to p1's engine: two run, the rest queue, and
    -- the router reads the queue from p1's metrics about every second.
    local fns = {}
    for i = 1, MAX_WAITING + 1 do
      fns[i] = function()
        http.request { method = "POST", url = s:pod("p1").http .. "/v1/completions", timeout = 60,
          json = { model = s.model, prompt = s:prompt(1), max_tokens = LONG, ignore_eos = true } }
      end
    end
    local stop_queue = background(fns)
    eventually(function()
      local waiting = gauge(s, "p1", "vllm:num_requests_waiting")
      if waiting < MAX_WAITING then
        error(string.format("p1's engine reports %d requests waiting, not yet %d", waiting, MAX_WAITING))
      end
      return true
    end)
    -- Until the router has polled the queue, a request may still go to p1
    -- and wait there: those are given up after half a second.
    eventually(function()
      local r, err = s:complete { prompt = prompt, max_tokens = 1, timeout = 0.5 * SCALE }
      if not r or r.status ~= 200 or r.pod == "p1" then
        error("the router still sends the prompt to saturated p1: " .. (r and (r.status .. " from "
          .. tostring(r.pod)) or tostring(err)))
      end
      return true
    end, { timeout = 10 * SCALE })
    local t = s:route { prompt = prompt, max_tokens = 1, n = 6 }
    stop_queue()
    stop_busy()
    expect(t.errors):eq(0, "every request is answered 200 by a pod: " .. tostring(t))
    expect(t:count("p1")):eq(0, string.format("p1 has %d or more requests waiting, so the least-request filter "
      .. "takes it out whatever its cache: %s", MAX_WAITING, tostring(t)))

    expect(s:scores(busy.results[1]).p1):eq({ ["kvcache-aware"] = 100, ["least-request"] = 0, total = 300 },
      "busy p1: 3 x 100 + 1 x 0 beats the idle pods' 1 x 100")
    expect(s:scores(t.results[1]).p1):is_nil("a filtered pod is not scored")
    expect(t.results[1].decision.candidates):eq({ "p2", "p3" }, "the filter left p2 and p3 only")
  end)

test("kvcache-aware 1, least-request 3: a busy pod holding the prompt loses it to idle pods",
  { tags = { "needs:kvcache_score" } }, function()
  local s <close> = weighted_stack(1, 3)
  local idle, t = idle_then_busy(s, 6)
  expect(t:count("p1")):eq(0, "with a request in flight p1's cache (1 x 100) loses to idle pods' load score "
    .. "(3 x 100): " .. tostring(t))

  expect(s:scores(idle.results[1]).p1.total):eq(400, "idle p1: 1 x 100 + 3 x 100")
  local sc = s:scores(t.results[1])
  expect(sc.p1.total):eq(100, "busy p1: 1 x 100 + 3 x 0")
  expect(sc.p2.total):eq(300, "idle p2: 3 x 100")
end)

test("kvcache-aware alone refuses a prompt no pod holds with 503, as Kthena does (pair it with least-request)",
  { tags = { "needs:all_failed_503" } },
  function()
    local s <close> = kvcache.stack {
      pods = 2,
      router = {
        scheduler = {
          pluginConfig = { { name = "kvcache-aware", args = { blockSizeToHash = 16, maxBlocksToMatch = 128 } } },
          plugins = {
            Filter = { enabled = { "least-request" } },
            Score = { enabled = { { name = "kvcache-aware", weight = 1 } } },
          },
        },
      },
    }
    local cold = assert(s:complete { prompt = s:prompt(2), max_tokens = 1 })
    expect(cold.status):eq(503, "Kthena's scheduler keeps only scored pods; with kvcache-aware alone a prompt "
      .. "nobody holds scores nowhere and the request fails: " .. cold.body .. s:cause_note("all_failed_503"))
    expect(cold.body):contains("request to all pods failed", "Kthena's error for a request no pod was scored for")
    log("kvcache-aware as the only score plugin: a cold prompt got " .. cold.status .. " " .. cold.body
      .. "; Kthena's documentation pairs it with least-request")

    -- A prompt one pod holds is served there.
    local prompt, tokens = s:prompt(2)
    s:inject("p2", kvcache.stored { tokens = tokens })
    s:expect_owner { tokens = tokens, pod = "p2" }
    s:expect_routed { prompt = prompt, pod = "p2", n = 2, max_tokens = 1 }
  end)

-- A stack of three pods whose router enables exactly these score plugins.
local function scored_by(plugins)
  return kvcache.stack { pods = 3, router = { scheduler = { plugins = { Score = { enabled = plugins } } } } }
end

test("random configured beside another score plugin is dropped: no pod gets a random score", function()
  local s <close> = scored_by { { name = "least-request", weight = 1 }, { name = "random", weight = 1 } }
  local t = s:route { prompt = s:prompt(2), max_tokens = 1, n = 3 }
  for _, r in ipairs(t.results) do
    for pod, score in pairs(s:scores(r)) do
      expect(score.random):is_nil(string.format("SCORE-6: random is configured beside least-request, so the "
        .. "router drops it; yet it scored %s %s for request %s", pod, tostring(score.random), r.request_id))
    end
  end
end)

test("random alone scores every pod uniformly from 0 to 100", function()
  local s <close> = scored_by { { name = "random", weight = 1 } }
  local t = s:route { prompt = s:prompt(2), max_tokens = 1, n = 10 }
  local distinct, seen = 0, {}
  for _, r in ipairs(t.results) do
    for pod, score in pairs(s:scores(r)) do
      local v = score.random
      expect(v ~= nil and v >= 0 and v <= 100):is_true(string.format("SCORE-8: random scores %s from 0 to 100, "
        .. "got %s for request %s", pod, tostring(v), r.request_id))
      if not seen[v] then seen[v], distinct = true, distinct + 1 end
    end
  end
  -- 30 uniform draws from 101 values take fewer than 5 distinct ones with
  -- a probability below 1e-30.
  expect(distinct):ge(5, "SCORE-8: 10 requests x 3 pods of uniform random scores take at least 5 distinct values")
end)

-- Least-request's base is onFlight + 100 x max(onFlight - running, 0): a
-- request the router sent that the engine does not run yet counts as
-- queued, 100 times over. p1 runs one long request; p2, which runs one
-- request at a time, runs one and queues another: bases p1 1, p2 2 + 100,
-- idle p3 0. Normalised to the busiest: p1 99, p2 0, p3 100 (without the
-- weight p1 would get 50).
test("least-request counts a request the engine has not started as queued, 100 times over",
  { tags = { "needs:kvcache_score" } }, function()
  local s <close> = kvcache.stack {
    pods = { SLOW_POD, { sim = { inter_token_latency = 50, max_num_seqs = 1 } }, {} },
    router = weighted_stack_config(3, 1),
  }
  local busy = { { "p1", "vllm:num_requests_running", 1 }, { "p2", "vllm:num_requests_running", 1 },
    { "p2", "vllm:num_requests_waiting", 1 } }
  local prompts, stops = {}, {}
  for _, b in ipairs(busy) do
    local pod, metric, n = b[1], b[2], b[3]
    if not prompts[pod] then
      local prompt, tokens = s:prompt(4)
      s:inject(pod, kvcache.stored { tokens = tokens })
      s:expect_owner { tokens = tokens, pod = pod }
      prompts[pod] = prompt
    end
    stops[#stops + 1] = background { function()
      s:complete { prompt = prompts[pod], max_tokens = LONG, ignore_eos = true, timeout = 60 }
    end }
    eventually(function()
      local got = gauge(s, pod, metric)
      if got < n then
        error(string.format("%s's engine reports %s %s, not yet %d (its request goes there by the pod's cache%s)",
          pod, metric, got, n, s:cause_note("kvcache_score")))
      end
      return true
    end)
  end
  eventually(function()
    local v1, v2 = s:router_view("p1"), s:router_view("p2")
    if v1.running ~= 1 or v2.running ~= 1 or v2.waiting ~= 1 then
      error(string.format("the router sees p1 running %s, p2 running %s and waiting %s, not yet 1, 1 and 1",
        tostring(v1.running), tostring(v2.running), tostring(v2.waiting)))
    end
    return true
  end)
  local r = assert(s:complete { prompt = s:prompt(2), max_tokens = 1 })
  for _, stop in ipairs(stops) do stop() end
  local scores = s:scores(r)
  local want = { p1 = 99, p2 = 0, p3 = 100 }
  for _, pod in ipairs({ "p1", "p2", "p3" }) do
    expect(scores[pod]["least-request"]):eq(want[pod], string.format("SCORE-7: bases p1 1 (1 in flight, 1 "
      .. "running), p2 102 (2 in flight, 1 running: 100 x 1 queued), p3 0; least-request gives %s %d, "
      .. "normalised to the busiest", pod, want[pod]))
  end
end)
