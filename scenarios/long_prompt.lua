-- scenarios/long_prompt.lua - long prompts and the block settings.
--
-- Kthena's router cuts a prompt's tokens into blocks of blockSizeToHash
-- (16 by default) and looks up at most maxBlocksToMatch of them (128), so
-- only a prompt's first blockSizeToHash x maxBlocksToMatch tokens (2,048)
-- can earn cache score: a pod holding a much longer prompt in full scores
-- no better than one holding that window. Both settings are the
-- kvcache-aware plugin's args in the router configuration. Its runtime
-- takes the block size from each event (tokens / hashes), that is from the
-- engine's own block size, so an engine whose block size differs from
-- blockSizeToHash writes keys the router never asks for and its cache is
-- invisible: a silent misconfiguration this file makes visible.
--
-- Each test has its own stack: the router's configuration is read once at
-- start (and on kind it is the install's one router's), so stacks with
-- different configurations never run side by side.

local kvcache = require("kvcache")

-- A router configuration with the given kvcache-aware args.
local function router(args)
  return {
    scheduler = {
      pluginConfig = { { name = "kvcache-aware", args = args } },
      plugins = {
        Filter = { enabled = { "least-request" } },
        Score = { enabled = { { name = "least-request", weight = 1 }, { name = "kvcache-aware", weight = 1 } } },
      },
    },
  }
end
local WIDE = router { blockSizeToHash = 32, maxBlocksToMatch = 4 } -- a window of 4 x 32 = 128 tokens

-- Tokens first..last (1-based, inclusive).
local function slice(tokens, first, last)
  return table.move(tokens, first, last, 1, {})
end

test("Kthena's defaults: only a prompt's first 128 blocks of 16 tokens are matched",
  { tags = { "needs:kvcache_score" } }, function()
  local s <close> = kvcache.stack { pods = 3, sim = { max_model_len = 4096 } }
  local prompt, tokens = s:prompt(128, { tail = 40 })
  expect(#tokens):gt(2048, "the prompt is longer than the 2,048 tokens Kthena looks at")
  expect(#s:hashes(tokens)):eq(128, "the router hashes at most maxBlocksToMatch = 128 blocks")
  -- p1 holds the first 2,048 tokens, p2 the whole prompt, p3 its first half.
  s:inject("p1", kvcache.stored { tokens = slice(tokens, 1, 2048) })
  s:inject("p2", kvcache.stored { tokens = kvcache.prefix(tokens, #tokens // 16) })
  s:inject("p3", kvcache.stored { tokens = slice(tokens, 1, 1024) })
  s:expect_owner { tokens = tokens, pod = "p1", blocks = 128 }
  s:expect_owner { tokens = tokens, pod = "p2", blocks = 128 }

  local t = s:route { prompt = prompt, max_tokens = 1, n = 4 }
  expect(t.errors):eq(0, "every request is answered 200 by a pod: " .. tostring(t))
  s:expect_scored(t.results[1], "p1", 100, "p1 holds all 128 blocks the router looks at: the tail past them "
    .. "costs nothing")
  expect(t:count("p3")):eq(0, "p3 holds half the window and loses to p1 and p2, which hold all of it: "
    .. tostring(t))
  local sc = s:scores(t.results[1])
  expect(sc.p2["kvcache-aware"]):eq(100, "p2's blocks past the first 128 earn nothing more")
  expect(sc.p3["kvcache-aware"]):eq(50, "p3 holds 64 of the 128 blocks")
end)

test("blockSizeToHash 32 and maxBlocksToMatch 4: four blocks of 32 tokens are matched",
  { tags = { "needs:kvcache_score" } }, function()
  local s <close> = kvcache.stack { pods = { { block_size = 32 }, { block_size = 32 }, { block_size = 32 } },
    router = WIDE }
  expect(s.hashing):eq({ block_size = 32, max_blocks = 4 }, "the stack reads the router's args")
  local prompt, tokens = s:prompt(10) -- blocks of 32, the router's
  expect(#s:hashes(tokens)):eq(4, "a 10-block prompt is looked up in its first 4 blocks only")
  -- p1 holds blocks 1-4; p2 holds 1-3 and 5-10 (everything but block 4);
  -- p3 holds 5-10 (none of the start).
  s:inject("p1", kvcache.stored { tokens = slice(tokens, 1, 128), block_size = 32 })
  s:inject("p2", kvcache.stored { tokens = slice(tokens, 1, 96), block_size = 32 },
    kvcache.stored { tokens = slice(tokens, 129, 320), block_size = 32 })
  s:inject("p3", kvcache.stored { tokens = slice(tokens, 129, 320), block_size = 32 })
  s:expect_owner { tokens = tokens, pod = "p1", blocks = 4 }
  s:expect_owner { tokens = tokens, pod = "p2", blocks = 3 }

  local t = s:expect_routed { prompt = prompt, pod = "p1", n = 3, max_tokens = 1 }
  s:expect_scored(t.results[1], "p1", 100, "p1 holds the whole window of 4 blocks")
  local sc = s:scores(t.results[1])
  expect(sc.p2["kvcache-aware"]):eq(75, "p2's prefix stops at block 3; blocks 5-10 lie past the window")
  expect(sc.p3["kvcache-aware"]):is_nil("p3 holds no first block, so it gets no score at all")

  -- Within the window a partial tail block counts: 3 whole blocks of 32
  -- and 8 tokens more score 3 of 4 at best.
  local short, st = s:prompt(3, { tail = 8 })
  s:inject("p3", kvcache.stored { tokens = kvcache.prefix(st, 3, 32), block_size = 32 })
  s:expect_owner { tokens = st, pod = "p3" }
  local r = s:expect_routed { prompt = short, pod = "p3", max_tokens = 1 }
  local looked_up = math.min(4, (#st + 31) // 32)
  expect(s:scores(r.results[1]).p3["kvcache-aware"]):eq(math.floor(3 / looked_up * 100), string.format(
    "the %d-token prompt's tail block is looked up too, and an engine with blocks of 32 never announces it: "
    .. "3 of %d blocks is the best score", #st, looked_up))
end)

test("sims at --block-size 32 are matched; a sim left at 16 writes keys the router never asks for",
  { tags = { "needs:kvcache_score" } }, function()
  local s <close> = kvcache.stack { pods = { { block_size = 32 }, { block_size = 16 }, { block_size = 32 } },
    router = WIDE, sim = { event_batch_delay = 0.05 } }
  local prompt, tokens = s:prompt(4) -- blocks of 32, the router's
  -- p1 (block size 32) and p2 (block size 16) each serve the prompt once.
  for _, pod in ipairs({ "p1", "p2" }) do s:serve(pod, { prompt = prompt }) end

  -- p1's sim announced 32-token blocks: exactly the router's keys.
  s:expect_owner { tokens = tokens, pod = "p1" }
  -- p2's sim announced 16-token blocks; the runtime keyed them so.
  local c <close> = s:redis()
  local sixteen = kvcache.block_hashes(tokens, { block_size = 16 })
  eventually(function()
    for i, h in ipairs(sixteen) do
      local key = kvcache.block_key(s.model, h)
      if c:call("HEXISTS", key, s:pod("p2").owner) ~= 1 then
        error(string.format("p2's runtime has not written block %d of 16 tokens (%s) yet", i, key))
      end
    end
    return true
  end)
  s:expect_no_owner { tokens = tokens, pod = "p2" }

  local t = s:expect_routed { prompt = prompt, pod = "p1", n = 3, max_tokens = 1 }
  s:expect_scored(t.results[1], "p1", 100, "p1 holds the 4 blocks of 32 tokens")
  local sc = s:scores(t.results[1])
  expect(sc.p2["kvcache-aware"]):is_nil("p2 cached the same prompt, but in blocks of 16 the router never "
    .. "looks up: with blockSizeToHash 32 the engine's block size must be 32 too")
end)
