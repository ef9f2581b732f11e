-- partial_prefix.lua - how much of a prompt a pod holds decides its score.
--
-- What it proves: Kthena's kvcache-aware plugin scores a pod by the longest
-- run of consecutive blocks it owns from the prompt's first block,
-- int(matched / blocks * 100): pods owning 1, 2 and 3 of 4 blocks score 25,
-- 50 and 75 and the longest prefix wins; a block missing in the middle
-- ends the match however many owned blocks follow; a pod without the first
-- block gets no score at all; and the prompt's trailing partial block,
-- which no engine ever announces, counts in the total, so such a prompt
-- never scores 100.
--
-- Why it matters: a prefix cache only saves work for a prefix. A router that
-- counted owned blocks anywhere in the prompt would send requests to pods
-- whose cache they cannot use.
--
-- The router's choice is checked on every target; the exact per-pod scores
-- where the target reports them, and the best pod's match ratio (matched /
-- blocks) through Kthena's kthena_router_kvcache_aware_match_ratio metric.

local kvcache = require("kvcache")

local BLOCK = 16 -- blockSizeToHash of the default router configuration

local stack = kvcache.stack { pods = 3 }

-- The tokens of blocks first..last (1-based).
local function blocks(tokens, first, last)
  return table.move(tokens, (first - 1) * BLOCK + 1, last * BLOCK, 1, {})
end

-- Blocks `list` of the prompt (1-based) are pod's, as the router reads
-- them (its owner field in Redis, where the target keeps them there).
local function expect_holds(pod, tokens, list, why)
  local owners, owner = stack:owners { tokens = tokens }, stack:pod(pod).owner
  for _, i in ipairs(list) do
    expect(owners[i][owner]):not_nil(string.format("%s should own block %d: %s", pod, i, why))
  end
end

-- One request; returns it and the match ratio the router recorded for it
-- (the best candidate's matched / blocks), nil where the router has no
-- Kthena metrics (the routing claim stands without it).
local RATIO = "kthena_router_kvcache_aware_match_ratio"
local function complete_with_ratio(prompt)
  if not stack:can("kthena_surface") then
    local r = assert(stack:complete { prompt = prompt, max_tokens = 1 })
    expect(r.status):eq(200, "the router serves the request: " .. r.body)
    return r, nil
  end
  local labels = { model = stack.model }
  local m0 = assert(stack:metrics())
  local r = assert(stack:complete { prompt = prompt, max_tokens = 1 })
  expect(r.status):eq(200, "the router serves the request: " .. r.body)
  local m1 = assert(stack:metrics())
  expect(m1:get(RATIO .. "_count", labels) - m0:get(RATIO .. "_count", labels)):eq(1,
    "the kvcache-aware plugin records one match ratio per request it scores")
  return r, m1:get(RATIO .. "_sum", labels) - m0:get(RATIO .. "_sum", labels)
end

test("pods owning 1, 2 and 3 of 4 blocks score 25, 50 and 75; the longest prefix wins",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  for i, pod in ipairs({ "p1", "p2", "p3" }) do
    stack:inject(pod, kvcache.stored { tokens = kvcache.prefix(tokens, i) })
    stack:expect_owner { tokens = tokens, pod = pod, blocks = i }
  end

  -- Once p3 served the prompt its engine caches (and announces) all of it:
  -- p3 only gets further ahead for the 4 requests after.
  local r, ratio = complete_with_ratio(prompt)
  stack:expect_best { r = r, prompt = prompt, pod = "p3", why = "p3 holds the longest prefix (3 of 4 blocks)",
    scores = { p1 = { 25, "p1 owns block 1 of 4" }, p2 = { 50, "p2 owns blocks 1-2 of 4" },
      p3 = { 75, "p3 owns blocks 1-3 of 4" } }, n = 4, max_tokens = 1 }
  if ratio then expect(ratio):near(0.75, 1e-9, "the best match is 3 of the prompt's 4 blocks") end
  if r.scores then
    expect(r.scores.p3.total):eq(175, "least-request 100 (idle) + kvcache-aware 75")
  end
end)

test("a block missing in the middle ends the match: blocks 1, 3 and 4 count as 1",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  -- p1 owns three blocks around a gap, p2 two consecutive ones.
  stack:inject("p1", kvcache.stored { tokens = blocks(tokens, 1, 1) }, kvcache.stored { tokens = blocks(tokens, 3, 4) })
  stack:inject("p2", kvcache.stored { tokens = blocks(tokens, 1, 2) })
  stack:expect_owner { tokens = tokens, pod = "p1", blocks = 1 }
  expect_holds("p1", tokens, { 3, 4 }, "they were announced beyond p1's gap")
  stack:expect_owner { tokens = tokens, pod = "p2", blocks = 2 }

  local r, ratio = complete_with_ratio(prompt)
  stack:expect_best { r = r, prompt = prompt, pod = "p2", why = "p2's blocks 1-2 are a longer prefix than p1's "
    .. "block 1; p1's blocks 3-4 come after its gap and cannot count, though p1 owns more blocks",
    scores = { p1 = { 25, "p1's match stops at its gap: 1 of 4, not 3 of 4" }, p2 = { 50, "p2 owns blocks 1-2 of 4" } },
    n = 3, max_tokens = 1 }
  if ratio then expect(ratio):near(0.5, 1e-9, "the best match is p2's 2 of 4 blocks") end
end)

test("a pod without the first block gets no score, however much of the rest it owns",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  stack:inject("p1", kvcache.stored { tokens = blocks(tokens, 1, 1) })
  stack:inject("p3", kvcache.stored { tokens = blocks(tokens, 2, 4) })
  stack:expect_owner { tokens = tokens, pod = "p1", blocks = 1 }
  expect_holds("p3", tokens, { 2, 3, 4 }, "p3 announced every block but the first")

  local r, ratio = complete_with_ratio(prompt)
  stack:expect_best { r = r, prompt = prompt, pod = "p1",
    why = "only p1 owns the first block; p3's blocks 2-4 are not a prefix",
    scores = { p1 = { 25, "p1 owns block 1 of 4" },
      p3 = { false, "p3 does not own block 1, so it gets no kvcache-aware score" } }, n = 3, max_tokens = 1 }
  if ratio then expect(ratio):near(0.25, 1e-9, "the best match is p1's 1 of 4 blocks") end
end)

test("the trailing partial block counts in the total, so the owner of every full block scores below 100",
  { tags = { "needs:kvcache_score" } }, function()
  -- 3 full blocks and 5 tokens: the router cuts 4 blocks, an engine
  -- announces only the 3 full ones.
  local prompt, tokens = stack:prompt(3, { tail = 5 })
  expect(#stack:hashes(tokens)):eq(4, "the router keeps the partial fourth block")
  stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(tokens, 3) })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  local r, ratio = complete_with_ratio(prompt)
  stack:expect_best { r = r, prompt = prompt, pod = "p2", why = "p2 owns every full block of the prompt",
    scores = { p2 = { 75, "int(3 / 4 * 100)" } } }
  if ratio then expect(ratio):near(0.75, 1e-9, "3 of 4 blocks: the partial block can never be owned") end

  -- 40 tokens: 2 full blocks of 3, the best is int(2 / 3 * 100) = 66.
  prompt, tokens = stack:prompt(2, { tail = 8 })
  stack:inject("p3", kvcache.stored { tokens = kvcache.prefix(tokens, 2) })
  stack:expect_owner { tokens = tokens, pod = "p3" }
  r, ratio = complete_with_ratio(prompt)
  stack:expect_best { r = r, prompt = prompt, pod = "p3", why = "p3 owns every full block of the prompt",
    scores = { p3 = { 66, "int(2 / 3 * 100), truncated" } } }
  if ratio then expect(ratio):near(2 / 3, 1e-9, "2 of 3 blocks") end
end)
