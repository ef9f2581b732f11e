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
-- before (stack:serve), so the requests it serves in the test are cache
-- hits that announce nothing which could overtake the clear.

local kvcache = require "kvcache"

-- event_batch_size = 1: engines announce each event at once.
local stack = kvcache.stack { pods = 3, sim = { event_batch_size = 1 } }

test("a cleared pod loses every prompt it held, and the router follows", function()
  local a, ta = stack:prompt(4)
  local b, tb = stack:prompt(2)
  stack:serve("p1", { prompt = a })
  stack:serve("p1", { prompt = b })
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
  local prompt, tokens = stack:prompt(3)
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
  local prompt, tokens = stack:prompt(3)
  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  stack:inject("p2", kvcache.cleared {})
  stack:expect_no_owner { tokens = tokens, pod = "p2" }

  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  stack:expect_routed { prompt = prompt, pod = "p2", n = 3, max_tokens = 1 }
end)
