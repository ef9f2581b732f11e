-- restart_freshness.lua - a pod's restart makes the ownership it wrote
-- before stale; what it announces afterwards counts again.
--
-- What it proves: the router drops an owner field whose timestamp is at or
-- before its pod's newest start second. After a restart the old entries
-- stay in Redis (a restarted engine never withdraws them), yet the router
-- no longer counts them; an entry stamped in the restart second itself is
-- stale too, one stamped a second later is not; a value that does not
-- parse as a second is kept; blocks the restarted pod announces after it
-- came back count as usual; and the router's GC deletes only fields older
-- than a day.
--
-- Why it matters: a restarted engine starts with an empty cache. Without
-- this rule, every prompt the pod had cached would keep going to it, for up
-- to a day (until the router's GC), and be recomputed there.

local kvcache = require("kvcache")

local BLOCK = 16 -- blockSizeToHash of the default router configuration

local stack = kvcache.stack { pods = 3 }

-- Restart the pod; returns its new start second. Each test restarts a pod
-- of its own: on a cluster, containers restarted again soon back off.
local function restart(pod)
  local before = stack:pod(pod).started_at
  stack:restart(pod)
  local started = stack:pod(pod).started_at
  expect(started):gt(before, pod .. "'s restart moves its start time")
  return started
end

-- Write pod's owner field on every full block of the prompt with the value
-- `ts`, as its runtime does when it applies a BlockStored in that second
-- (stack:restart returns only after the start second, so a test cannot
-- make the runtime itself write in it).
local function owned_at(pod, tokens, ts)
  local owner = stack:pod(pod).owner
  local c <close> = stack:redis()
  for i, h in ipairs(stack:hashes(tokens)) do
    if i * BLOCK <= #tokens then c:call("HSET", kvcache.block_key(stack.model, h), owner, tostring(ts)) end
  end
end

test("ownership written before a restart no longer counts, though Redis still holds it",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  stack:inject("p1", kvcache.stored { tokens = tokens })
  stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(tokens, 2) })
  stack:expect_owner { tokens = tokens, pod = "p1" }
  stack:expect_owner { tokens = tokens, pod = "p2", blocks = 2 }
  stack:expect_routed { prompt = prompt, pod = "p1", n = 2, max_tokens = 1 }

  local started = restart("p1")
  if stack:can("stale_ownership") then -- Kthena keeps the fields and ignores them; another router drops them
    for i, o in ipairs(stack:expect_owner { tokens = tokens, pod = "p1", timeout = 0.1 }) do
      expect(o.ts):le(started, string.format("p1's field on block %d is still in Redis, written before the "
        .. "restart", i))
    end
  end
  stack:expect_best { prompt = prompt, pod = "p2",
    why = "p1's blocks were written before its restart, so only p2's 2 of 4 blocks count",
    scores = { p1 = { false, "p1's entries are stale: no kvcache-aware score" }, p2 = { 50, "p2 owns blocks 1-2 of 4" } },
    n = 3, max_tokens = 1 }
end)

test("ownership stamped in the restart second is stale; one second later it counts",
  { tags = { "needs:kvcache_score" } }, function()
  local started = restart("p3")
  local in_second, in_second_tokens = stack:prompt(4)
  local after, after_tokens = stack:prompt(4)
  -- p2 holds half of each prompt, freshly; p3's fields differ only in their second.
  for _, tokens in ipairs({ in_second_tokens, after_tokens }) do
    stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(tokens, 2) })
    stack:expect_owner { tokens = tokens, pod = "p2", blocks = 2 }
  end
  owned_at("p3", in_second_tokens, started)
  owned_at("p3", after_tokens, started + 1)

  local r = assert(stack:complete { prompt = in_second, max_tokens = 1 })
  stack:expect_served(r, "p2", string.format("p3's fields say %d, its start second: the router cannot tell them "
    .. "from entries of the old container and drops them", started))
  if r.scores then expect(r.scores.p3["kvcache-aware"]):is_nil("p3's entries from its start second are stale") end

  r = assert(stack:complete { prompt = after, max_tokens = 1 })
  stack:expect_served(r, "p3", string.format("p3's fields say %d, a second after its start: they count (4 of 4 "
    .. "blocks beat p2's 2)", started + 1))
  if r.scores then expect(r.scores.p3["kvcache-aware"]):eq(100, "p3 owns 4 of 4 blocks, freshly") end
end)

test("an owner field whose value does not parse as a second counts: the router keeps what it cannot date",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(tokens, 2) })
  stack:expect_owner { tokens = tokens, pod = "p2", blocks = 2 }
  owned_at("p1", tokens, "soon")
  stack:expect_best { prompt = prompt, pod = "p1", why = "FRESH-2: p1's fields on the prompt's 4 blocks say \"soon\", "
    .. "which does not parse as a second: the router keeps them, and 4 of 4 blocks beat p2's 2",
    scores = { p1 = { 100, "FRESH-2: p1's unparsable fields count: 4 of 4 blocks" } }, max_tokens = 1 }
end)

test("blocks a restarted pod announces after it came back count again", { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  local started = restart("p2")
  if stack:can("stale_ownership") then
    for i, o in ipairs(stack:expect_owner { tokens = tokens, pod = "p2", timeout = 0.1 }) do
      expect(o.ts):le(started, string.format("block %d: p2's entry predates the restart, so it is stale", i))
    end
  end

  stack:inject("p2", kvcache.stored { tokens = tokens })
  for i, o in ipairs(stack:expect_owner { tokens = tokens, pod = "p2" }) do
    expect(o.ts):gt(started, string.format("block %d: the new announcement rewrote p2's entry after the "
      .. "restart second", i))
  end
  stack:inject("p1", kvcache.stored { tokens = kvcache.prefix(tokens, 2) })
  stack:expect_owner { tokens = tokens, pod = "p1", blocks = 2 }
  local r = assert(stack:complete { prompt = prompt, max_tokens = 1 })
  stack:expect_served(r, "p2", "p2's fresh 4 of 4 blocks beat p1's 2 of 4")
  if r.scores then expect(r.scores.p2["kvcache-aware"]):eq(100, "p2 owns 4 of 4 blocks again") end
  stack:expect_routed { prompt = prompt, pod = "p2", n = 3, max_tokens = 1 }
end)

test("the router's GC deletes owner fields older than a day and keeps younger and undated ones", function()
  stack:requires("router_gc")
  local _, tokens = stack:prompt(4)
  local now = os.time()
  owned_at("p1", tokens, now - 25 * 3600)
  owned_at("p2", tokens, now - 23 * 3600)
  owned_at("p3", tokens, "soon")
  local c <close> = stack:redis()
  local other = kvcache.block_key(stack.model, 4242)
  c:call("SET", other, "a block key that is not a hash")
  local keys = {}
  for i, h in ipairs(stack:hashes(tokens)) do keys[i] = kvcache.block_key(stack.model, h) end
  local function owners_left(pod)
    local n = 0
    for _, k in ipairs(keys) do n = n + c:call("HEXISTS", k, stack:pod(pod).owner) end
    return n
  end
  -- One GC step is one SCAN step of 100 keys: step until p1's fields are gone.
  eventually(function()
    stack:router_gc()
    expect(owners_left("p1")):eq(0, "FRESH-3: p1's fields, written 25 h ago, should be deleted by the router's GC")
    return true
  end, { timeout = 20 })
  expect(owners_left("p2")):eq(#keys, "FRESH-3: p2's fields were written 23 h ago, younger than a day: the GC "
    .. "keeps them")
  expect(owners_left("p3")):eq(#keys, "FRESH-3: p3's fields say \"soon\", which the GC cannot date: it keeps them")
  expect(c:call("GET", other)):eq("a block key that is not a hash", "FRESH-3: the GC skips a block key that is "
    .. "not a hash")
end)
