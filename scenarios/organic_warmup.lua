-- scenarios/organic_warmup.lua - the router learns from real traffic.
--
-- Nothing here is injected: requests go straight to a pod's engine, as
-- traffic that bypassed the router (a warm-up job, another gateway) would,
-- and the engine's own KV events (llm-d-inference-sim publishing
-- BlockStored / BlockRemoved over ZMQ) are all the router ever learns
-- from. That is the whole path in production: engine -> runtime sidecar ->
-- Redis -> router. The second test gives one pod a cache of 8 blocks and
-- fills it with other prompts: the engine evicts the first prompt,
-- announces it, and the router must stop sending that prompt to the pod,
-- since a stale entry would pull requests to a pod that has to recompute
-- them anyway.

local kvcache = require("kvcache")

local SMALL_CACHE = 8 -- blocks of p1's sim

local stack

before_all(function()
  stack = kvcache.stack { pods = { { kv_cache_size = SMALL_CACHE }, {}, {} }, sim = { event_batch_delay = 0.05 } }
end)

test("a prompt a pod served is announced by its sim, and the router sends the prompt back there",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(3, { tail = 5 })
  stack:serve("p2", { prompt = prompt })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  for _, other in ipairs({ "p1", "p3" }) do stack:expect_no_owner { tokens = tokens, pod = other } end

  local t = stack:expect_routed { prompt = prompt, pod = "p2", n = 3, max_tokens = 1 }
  if not stack:can("decisions") then return end -- p2 getting the prompt back is the claim; its score follows
  local whole, all = #tokens // 16, (#tokens + 15) // 16
  expect(stack:scores(t.results[1]).p2["kvcache-aware"]):eq(math.floor(whole / all * 100), string.format(
    "p2's sim cached the %d whole blocks of the %d-token prompt (%d blocks with its tail)", whole, #tokens, all))
end)

test("eviction: a pod whose small cache fills with other prompts loses the prompt, and the router follows",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  stack:serve("p1", { prompt = prompt })
  stack:serve("p2", { prompt = prompt })
  stack:expect_owner { tokens = tokens, pod = "p1" }
  stack:expect_owner { tokens = tokens, pod = "p2" }
  local before = stack:route { prompt = prompt, max_tokens = 1, n = 4 }
  expect(before.errors):eq(0, "every request is answered 200 by a pod: " .. tostring(before))
  if stack:can("decisions") then
    stack:expect_scored(before.results[1], "p2", 100, "p2 served the prompt, and its sim announced all of it")
  end
  expect(before:count("p3")):eq(0, "p1 and p2 hold the prompt and p3 does not: " .. tostring(before))

  -- Other prompts push the prompt's blocks out: they are the least
  -- recently used. Twice the cache's worth, so the check does not hang on
  -- the engine's exact order among blocks released at about the same time.
  local filled = 0
  while filled < 2 * SMALL_CACHE do
    local other, other_tokens = stack:prompt(4)
    stack:serve("p1", { prompt = other })
    filled = filled + #other_tokens // 16
  end
  stack:expect_no_owner { tokens = tokens, pod = "p1" }
  stack:expect_owner { tokens = tokens, pod = "p2", timeout = 0.5 }

  local t = stack:expect_routed { prompt = prompt, pod = "p2", n = 3, max_tokens = 1 }
  if not stack:can("decisions") then return end -- the router following the eviction is the claim
  local sc = stack:scores(t.results[1])
  expect(sc.p2["kvcache-aware"]):eq(100, "p2 still holds all 4 blocks")
  expect(sc.p1["kvcache-aware"]):is_nil("p1 evicted the prompt and its sim said so: no score left for p1")
end)
