-- namespace_isolation.lua - a pod is its name and its namespace: ownership
-- written by a same-named pod of another namespace never counts.
--
-- What it proves: the router matches owner fields against its candidates as
-- <pod>.<namespace>. Blocks owned by p1 of another namespace give this
-- namespace's p1 no score and do not lengthen its prefix; a bare <pod>
-- field (the older owner format) matches nobody; and the same write with
-- this namespace does count, so nothing but the namespace decides.
--
-- Why it matters: Deployments in different namespaces routinely give their
-- pods the same names and serve the same model name, so their runtimes write
-- to the very same Redis keys. Matching by name alone would send a team's
-- requests to a pod for another team's cache.
--
-- The other namespace's runtime is played by writing its owner field
-- directly (owned_by): the key is the same (same model, same block), the
-- field is p1.<other namespace>, the value the current second.

local kvcache = require("kvcache")

local stack = kvcache.stack { pods = 3 }
local other = "other-" .. stack.namespace

-- Owner field `field` on the first `blocks` blocks of the prompt, stamped
-- now, as a runtime writes a BlockStored.
local function owned_by(field, tokens, blocks)
  local c <close> = stack:redis()
  local ts = tostring(os.time())
  for i = 1, blocks do
    c:call("HSET", kvcache.block_key(stack.model, stack:hashes(tokens)[i]), field, ts)
  end
end

-- The pod that served r announces the whole prompt; waiting for it makes
-- the next decisions the same on every target, whichever engine announces
-- sooner.
local function served_announced(r, tokens)
  stack:expect_owner { tokens = tokens, pod = r.pod }
end

test("p1 of another namespace owning a prompt gives this namespace's p1 nothing",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  owned_by(kvcache.owner("p1", other), tokens, 4)
  stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(tokens, 2) })
  stack:expect_owner { tokens = tokens, pod = "p2", blocks = 2 }

  local r = stack:expect_best { prompt = prompt, pod = "p2", max_tokens = 1,
    why = string.format("all 4 blocks belong to p1.%s, not to p1.%s; only p2's 2 blocks count", other, stack.namespace),
    scores = { p1 = { false, string.format("p1.%s owns no block; p1.%s's entries are not its", stack.namespace, other) },
      p2 = { 50, "p2 owns blocks 1-2 of 4" } } }
  served_announced(r, tokens)
  stack:expect_routed { prompt = prompt, pod = "p2", n = 2, max_tokens = 1 }

  -- The same write under this namespace's owner name does count.
  local control, control_tokens = stack:prompt(4)
  owned_by(stack:pod("p1").owner, control_tokens, 4)
  stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(control_tokens, 2) })
  stack:expect_owner { tokens = control_tokens, pod = "p2", blocks = 2 }
  stack:expect_routed { prompt = control, pod = "p1", n = 2, max_tokens = 1 }
end)

test("the other namespace's blocks do not lengthen this p1's prefix", { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  -- This p1 owns 2 blocks; p1 of the other namespace all 4; p2 owns 3.
  stack:inject("p1", kvcache.stored { tokens = kvcache.prefix(tokens, 2) })
  owned_by(kvcache.owner("p1", other), tokens, 4)
  stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(tokens, 3) })
  stack:expect_owner { tokens = tokens, pod = "p1", blocks = 2 }
  stack:expect_owner { tokens = tokens, pod = "p2", blocks = 3 }

  local r = stack:expect_best { prompt = prompt, pod = "p2", max_tokens = 1,
    why = string.format("p2's 3 of 4 blocks beat p1.%s's own 2; matched by name alone p1 would hold all 4",
      stack.namespace),
    scores = { p1 = { 50, string.format("p1.%s owns blocks 1-2 of 4 itself", stack.namespace) },
      p2 = { 75, "p2 owns blocks 1-3 of 4" } } }
  served_announced(r, tokens)
  stack:expect_routed { prompt = prompt, pod = "p2", n = 2, max_tokens = 1 }
end)

test("a bare pod name, the older owner format, matches no pod", { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  owned_by("p3", tokens, 4)
  stack:inject("p1", kvcache.stored { tokens = kvcache.prefix(tokens, 1) })
  stack:expect_owner { tokens = tokens, pod = "p1", blocks = 1 }

  local r = stack:expect_best { prompt = prompt, pod = "p1", max_tokens = 1,
    why = string.format("the field \"p3\" is not p3.%s; only p1's block 1 counts", stack.namespace),
    scores = { p3 = { false, "a field without a namespace names no candidate" } } }
  served_announced(r, tokens)
  stack:expect_routed { prompt = prompt, pod = "p1", n = 2, max_tokens = 1 }
end)
