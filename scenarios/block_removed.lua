-- block_removed.lua - an engine's BlockRemoved withdraws ownership, and
-- routing follows.
--
-- What it proves: when a pod's engine evicts blocks and says so
-- (BlockRemoved, naming the engine's own block hashes), the runtime deletes
-- exactly that pod's field from exactly those blocks' keys, and the router's
-- next decision scores the pod on what it still holds: losing block 2 of 4
-- cuts its prefix to 1 block, losing every block takes it out of the
-- prompt's scoring. Other pods' ownership of the same blocks stays.
--
-- Why it matters: an eviction the router never hears of sends requests to a
-- pod that must recompute the prompt, while a pod that really holds it
-- waits idle.
--
-- A pod that serves a prompt announces the blocks it newly caches. Where a
-- test withdraws blocks from a pod after routing the prompt to it, that pod
-- has served the prompt before (stack:serve), so the requests it serves
-- in the test are cache hits that announce nothing which could overtake the
-- withdrawal. The pod that wins after a withdrawal has not served the prompt:
-- serving it, it announces the rest of the prompt, so one request is checked
-- (a second would race that announcement).

local kv = require("kv")
local kvcache = require("kvcache")

-- event_batch_size = 1: engines announce each event at once.
local stack = kvcache.stack { pods = 3, sim = { event_batch_size = 1 } }

-- The owners of block i of the prompt, as the router reads them (in Redis,
-- the block key's fields, where the target keeps them there).
local function owners(tokens, i)
  return stack:owners { tokens = tokens }[i]
end

-- A 4-block prompt that p1 served and announced whole, while `other`
-- announced its first `blocks` blocks: the router sends it to p1. Returns
-- the prompt, its tokens and p1's BlockStored.
local function p1_ahead_of(other, blocks)
  local prompt, tokens = stack:prompt(4)
  stack:serve("p1", { prompt = prompt })
  local stored = kvcache.stored { tokens = tokens }
  stack:inject("p1", stored)
  stack:inject(other, kvcache.stored { tokens = kvcache.prefix(tokens, blocks) })
  stack:expect_owner { tokens = tokens, pod = other, blocks = blocks }
  stack:expect_routed { prompt = prompt, pod = "p1", n = 3, max_tokens = 1 }
  return prompt, tokens, stored
end

test("a removed block ends the owner's prefix there, and the router follows",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens, stored = p1_ahead_of("p2", 2)

  stack:inject("p1", kvcache.removed { hashes = { stored.hashes[2] } })
  local p1, p2 = stack:pod("p1").owner, stack:pod("p2").owner
  expect(owners(tokens, 2)[p1]):is_nil(string.format("p1's engine removed block 2, so block 2 should have no owner "
    .. "%s (Kthena's runtime deletes its field there)", p1))
  expect(owners(tokens, 2)[p2]):not_nil("p2 still holds block 2: a removal touches only the removing pod's field")
  for _, i in ipairs({ 1, 3, 4 }) do
    expect(owners(tokens, i)[p1]):not_nil(string.format("p1 keeps block %d: only block 2 was removed", i))
  end

  stack:expect_best { prompt = prompt, pod = "p2",
    why = "p1's prefix now ends at its missing block 2 (1 of 4); p2 holds blocks 1-2 (2 of 4)",
    scores = { p1 = { 25, "p1 keeps block 1 only as a prefix; blocks 3-4 follow its gap" },
      p2 = { 50, "p2 owns blocks 1-2 of 4" } }, max_tokens = 1 }
end)

test("removing every block of a prompt takes the pod out of its scoring",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens, stored = p1_ahead_of("p3", 1)

  stack:inject("p1", kvcache.removed { hashes = stored.hashes })
  stack:expect_no_owner { tokens = tokens, pod = "p1" }
  stack:expect_best { prompt = prompt, pod = "p3", why = "p1 holds none of the prompt any more; p3 still holds block 1",
    scores = { p1 = { false, "p1 owns no block of the prompt, so it gets no kvcache-aware score" },
      p3 = { 25, "p3 owns block 1 of 4" } }, max_tokens = 1 }
end)

test("one pod's removal leaves the other owners of the same blocks in place",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  local from_p2 = kvcache.stored { tokens = tokens }
  stack:inject("p1", kvcache.stored { tokens = tokens })
  stack:inject("p2", from_p2)
  stack:expect_owner { tokens = tokens, pod = "p1" }
  stack:expect_owner { tokens = tokens, pod = "p2" }

  stack:inject("p2", kvcache.removed { hashes = from_p2.hashes })
  stack:expect_no_owner { tokens = tokens, pod = "p2" }
  stack:expect_owner { tokens = tokens, pod = "p1", timeout = 0.1 }
  local t = stack:expect_routed { prompt = prompt, pod = "p1", n = 3, max_tokens = 1 }
  if stack:can("decisions") then stack:expect_scored(t.results[1], "p1", 100, "p1 still owns all 4 blocks") end
end)

test("a removal names the engine's block hashes: Kthena's hashes of the same blocks remove nothing",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(2)
  stack:inject("p3", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p3" }
  -- The runtime finds a removed block by the engine hash its BlockStored
  -- carried; Kthena's hash of the tokens is not one of them.
  stack:inject("p3", kvcache.removed { hashes = stack:hashes(tokens) })
  stack:expect_owner { tokens = tokens, pod = "p3", timeout = 0.1 }
  local t = stack:expect_routed { prompt = prompt, pod = "p3", n = 2, max_tokens = 1 }
  if stack:can("decisions") then stack:expect_scored(t.results[1], "p3", 100, "p3 still holds both blocks") end
end)

test("the engine-hash mapping a removal relies on holds the block's hash for 24 hours", function()
  -- The runtime finds a removed block's key again through the mapping it
  -- wrote at BlockStored: vllm:kv:block:<owner>@<engine hash> = the block's
  -- hash, expiring after 24 h (KEY-5), while the ownership key never
  -- expires (KEY-3).
  local _, tokens = stack:prompt(2)
  local stored = kvcache.stored { tokens = tokens }
  stack:inject("p2", stored)
  stack:expect_owner { tokens = tokens, pod = "p2" }
  local c <close> = stack:redis()
  local std, prefix = stack:hashes(tokens), kv.mapping_key_prefix("vllm", stack:pod("p2").owner)
  for i, eh in ipairs(stored.hashes) do
    local key = prefix .. kvcache.u64(eh)
    expect(c:call("GET", key)):eq(kvcache.u64(std[i]), string.format("KEY-5: %s maps engine block %d to the "
      .. "block's hash", key, i))
    local ttl = c:call("TTL", key)
    expect(ttl > 86400 - 60 and ttl <= 86400):is_true(string.format("KEY-5: %s expires 24 h after it was "
      .. "written (Kthena's EXPIRE 86400); its TTL is %d s (-1: no expiry, -2: no such key)", key, ttl))
    local owned = kvcache.block_key(stack.model, std[i])
    expect(c:call("TTL", owned)):eq(-1, string.format("KEY-3: the ownership key %s never expires", owned))
  end
end)
