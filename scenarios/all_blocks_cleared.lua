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

local kv = require("kv")
local kvcache = require("kvcache")

-- event_batch_size = 1: engines announce each event at once.
local stack = kvcache.stack { pods = 3, sim = { event_batch_size = 1 } }

test("a cleared pod loses every prompt it held, and the router follows",
  { tags = { "needs:kvcache_score" } }, function()
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

  stack:expect_best { prompt = a, pod = "p2", why = "p1 holds nothing after its clear; p2 still holds block 1 of 4",
    scores = { p1 = { false, "p1 owns no block any more, so it gets no kvcache-aware score" },
      p2 = { 25, "p2 owns block 1 of 4" } }, n = 2, max_tokens = 1 }
  stack:expect_routed { prompt = b, pod = "p3", n = 3, max_tokens = 1 }
end)

test("a clear withdraws only the clearing pod's ownership", { tags = { "needs:kvcache_score" } }, function()
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

test("after a clear, what the engine announces counts again", { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(3)
  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  stack:inject("p2", kvcache.cleared {})
  stack:expect_no_owner { tokens = tokens, pod = "p2" }

  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  stack:expect_routed { prompt = prompt, pod = "p2", n = 3, max_tokens = 1 }
end)

test("with blocks keyed by adapter, a clear withdraws the pod under every model and leaves other pods alone",
  function()
    -- Keyed by adapter name (runtime lora_keys = "lora_name", a local
    -- option), a pod's ownership sits under more than one model: the clear
    -- must reach all of them (OWNER-4: every entry of the pod goes).
    local s <close> = kvcache.stack { pods = { { loras = { "sql" } }, { loras = { "sql" } } },
      runtime = { lora_keys = "lora_name" }, sim = { event_batch_size = 1 } }
    local sql = s:lora("sql")
    local _, base = s:prompt(3)
    local _, adapted = s:prompt(3, { model = sql })
    local before = {}
    for _, pod in ipairs({ "p1", "p2" }) do
      s:inject(pod, kvcache.stored { tokens = base },
        kvcache.stored { tokens = adapted, lora_id = 1, lora_name = sql })
      before[pod] = { base = s:expect_owner { tokens = base, pod = pod },
        [sql] = s:expect_owner { model = sql, tokens = adapted, pod = pod } }
    end

    s:inject("p1", kvcache.cleared {})
    s:expect_no_owner { tokens = base, pod = "p1", timeout = 0.1,
      why = "OWNER-4: AllBlocksCleared withdraws p1 from the base model's blocks" }
    s:expect_no_owner { model = sql, tokens = adapted, pod = "p1", timeout = 0.1,
      why = "OWNER-4: AllBlocksCleared withdraws p1 from the blocks it keyed by adapter " .. sql }
    local after = { base = s:expect_owner { tokens = base, pod = "p2", timeout = 0.1,
        why = "OWNER-4: p1's clear leaves p2's base-model blocks" },
      [sql] = s:expect_owner { model = sql, tokens = adapted, pod = "p2", timeout = 0.1,
        why = "OWNER-4: p1's clear leaves p2's blocks of adapter " .. sql } }
    for model, blocks in pairs(after) do
      for i, b in ipairs(blocks) do
        expect(b.ts):eq(before.p2[model][i].ts, string.format("OWNER-4: p1's clear leaves p2's entry at %s (block %d "
          .. "of the %s prompt) as it was", b.key, i, model))
      end
    end

    if s:can("raw_redis") then
      local c <close> = s:redis()
      local owner, left = s:pod("p1").owner, {}
      local cursor = "0"
      repeat
        local reply = c:call("SCAN", cursor, "MATCH", "matrix:kv:block:*", "COUNT", 1000)
        cursor = reply[2] and reply[1] or "0"
        for _, key in ipairs(reply[2] or {}) do
          if c:call("HEXISTS", key, owner) == 1 then left[#left + 1] = key end
        end
      until cursor == "0"
      expect(left):eq({}, "OWNER-4: after its clear no ownership key of any model names " .. owner)
      local maps = c:call("KEYS", kv.mapping_key_prefix("vllm", owner) .. "*")
      expect(maps):eq({}, "OWNER-4: after its clear p1 has no engine-hash mapping left")
    end
  end)
