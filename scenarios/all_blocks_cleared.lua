-- all_blocks_cleared.lua - an engine's AllBlocksCleared withdraws all of
-- its pod's ownership at once, and routing follows.
--
-- What it proves: when a pod's engine drops its whole prefix cache (a reset,
-- a sleep) and says so with AllBlocksCleared, the runtime removes that pod's
-- field from every block key of the model, whichever prompt the blocks came
-- from, and nothing else; the router stops preferring the pod for any of
-- them; and what the engine announces afterwards counts again.
--
-- Why it matters: a pod that has just emptied its cache is the worst place
-- for a prompt it used to hold. If the clear never reached Redis, every
-- prompt it ever cached would keep flowing to it for a day (until the
-- router's GC drops the entries).
--
-- A pod that serves a prompt announces the blocks it newly caches. Where a
-- test clears a pod after routing prompts to it, that pod has served them
-- before (served_before), so the requests it serves in the test are cache
-- hits that announce nothing which could overtake the clear.

local http = require "http"
local kvcache = require "kvcache"

local BLOCK = 16 -- blockSizeToHash of the default router configuration

-- event_batch_size = 1: engines announce each event at once.
local stack = kvcache.stack { pods = 3, sim = { event_batch_size = 1 } }

local prompts = 0
local function fresh_prompt(blocks)
  prompts = prompts + 1
  local words = {}
  for i = 1, blocks * BLOCK do words[i] = string.format("ac%dw%dr%d", prompts, i, math.random(1e6)) end
  local prompt = table.concat(words, " ")
  local tokens = stack:tokens { prompt = prompt }
  expect(#tokens):eq(#words, "the pods' tokenizer should give one token per word of a generated prompt")
  return prompt, tokens
end

-- The pod serves the prompt directly (not through the router), as it would
-- have before the test; returns once its engine's announcement of the
-- prompt's blocks is in Redis.
local function served_before(pod, prompt)
  local r, err = http.request { method = "POST", url = stack:pod(pod).http .. "/v1/completions",
    json = { model = stack.model, prompt = prompt, max_tokens = 1 }, timeout = 10 }
  expect(r and r.status):eq(200, string.format("%s serves the prompt directly: %s", pod,
    r and r.body or tostring(err)))
  stack:expect_owner { prompt = prompt, pod = pod }
end

test("a cleared pod loses every prompt it held, and the router follows", function()
  local a, ta = fresh_prompt(4)
  local b, tb = fresh_prompt(2)
  served_before("p1", a)
  served_before("p1", b)
  -- Runners-up: p2 holds the first block of a, p3 the first block of b.
  stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(ta, 1) })
  stack:inject("p3", kvcache.stored { tokens = kvcache.prefix(tb, 1) })
  stack:expect_owner { tokens = ta, pod = "p2", blocks = 1 }
  stack:expect_owner { tokens = tb, pod = "p3", blocks = 1 }
  stack:expect_routed { prompt = a, pod = "p1", n = 2, max_tokens = 1 }
  stack:expect_routed { prompt = b, pod = "p1", n = 2, max_tokens = 1 }

  stack:inject("p1", kvcache.cleared {})
  stack:expect_no_owner { tokens = ta, pod = "p1" }
  stack:expect_no_owner { tokens = tb, pod = "p1" }
  stack:expect_owner { tokens = ta, pod = "p2", blocks = 1, timeout = 0.1 }
  stack:expect_owner { tokens = tb, pod = "p3", blocks = 1, timeout = 0.1 }

  local r = assert(stack:complete { prompt = a, max_tokens = 1 })
  expect(r.pod):eq("p2", "p1 holds nothing after its clear; p2 still holds block 1 of 4")
  if r.scores then
    expect(r.scores.p1["kvcache-aware"]):is_nil("p1 owns no block any more, so it gets no kvcache-aware score")
    expect(r.scores.p2["kvcache-aware"]):eq(25, "p2 owns block 1 of 4")
  end
  stack:expect_routed { prompt = a, pod = "p2", n = 2, max_tokens = 1 }
  stack:expect_routed { prompt = b, pod = "p3", n = 3, max_tokens = 1 }
end)

test("a clear withdraws only the clearing pod's ownership", function()
  local prompt, tokens = fresh_prompt(3)
  stack:inject("p1", kvcache.stored { tokens = tokens })
  stack:inject("p3", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p1" }
  stack:expect_owner { tokens = tokens, pod = "p3" }

  stack:inject("p1", kvcache.cleared {})
  stack:expect_no_owner { tokens = tokens, pod = "p1" }
  stack:expect_owner { tokens = tokens, pod = "p3", timeout = 0.1 }
  stack:expect_routed { prompt = prompt, pod = "p3", n = 3, max_tokens = 1 }
end)

test("after a clear, what the engine announces counts again", function()
  local prompt, tokens = fresh_prompt(3)
  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  stack:inject("p2", kvcache.cleared {})
  stack:expect_no_owner { tokens = tokens, pod = "p2" }

  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  stack:expect_routed { prompt = prompt, pod = "p2", n = 3, max_tokens = 1 }
end)
