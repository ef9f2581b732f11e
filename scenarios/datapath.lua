-- datapath.lua - the whole KV-cache data path, end to end.
--
-- What it proves: a BlockStored an engine announces becomes, through the
-- runtime sidecar, one Redis hash per block at exactly the key the router
-- computes (matrix:kv:block:<model>@<Kthena block hash>), with the pod as
-- <pod>.<namespace> and the runtime's clock as the value; the router then
-- sends requests for that prompt to the owner. A prompt nobody announced is
-- left to the other score plugins, which spread it.
--
-- Why it matters: nothing else connects the engines to the router. If the
-- key, the model, the owner field or the hash differ by one character,
-- Kthena routes as if there were no cache at all, and no error says so.

local kvcache = require("kvcache")

local BLOCK = 16 -- blockSizeToHash of the default router configuration

local stack = kvcache.stack { pods = 3 }

test("a BlockStored becomes one ownership field per block, at the key the router computes", function()
  local _, tokens = stack:prompt(4)
  local p2 = stack:pod("p2")
  local before = os.time()
  local stored = kvcache.stored { tokens = tokens }
  stack:inject("p2", stored)
  local owned = stack:expect_owner { tokens = tokens, pod = "p2", blocks = 4 }
  local after = os.time()

  expect(p2.owner):eq(kvcache.owner("p2", stack.namespace),
    "the runtime names its pod <pod>.<namespace>, the form the router compares with its candidates")
  local keys = {}
  for i = 1, 4 do
    local block = table.move(tokens, (i - 1) * BLOCK + 1, i * BLOCK, 1, {})
    keys[i] = "matrix:kv:block:" .. stack.model .. "@" .. kvcache.u64(kvcache.block_hash(block)) -- the format, pinned
    expect(owned[i].key):eq(keys[i], string.format("block %d is keyed by the model and Kthena's hash of its own "
      .. "16 tokens (not the engine's block hash %s), as the router looks it up", i, kvcache.u64(stored.hashes[i])))
    expect(owned[i].ts):ge(before, "the value is the runtime's clock when it wrote the block")
    expect(owned[i].ts):le(after, "the value is the runtime's clock when it wrote the block")
  end
  if not stack:can("raw_redis") then return end -- Redis's own fields, where the target keeps ownership there
  local c <close> = stack:redis()
  for i, key in ipairs(keys) do
    expect(c:hgetall(key)):eq({ [p2.owner] = tostring(owned[i].ts) },
      string.format("block %d has exactly one owner field, p2's, holding a unix second", i))
    expect(c:call("TTL", key)):eq(-1, "ownership keys never expire; only a removal or the router's GC ends them")
  end
end)

test("requests for an announced prompt go to the pod that owns it", { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }

  stack:expect_routed { prompt = prompt, pod = "p2", n = 5, max_tokens = 2 }
  local r = assert(stack:complete { prompt = prompt, max_tokens = 2 })
  expect(r.status):eq(200, "the router serves the request: " .. r.body)
  stack:expect_served(r, "p2", "p2 holds all 4 blocks, so kvcache-aware adds 100 to its least-request score")
  if not stack:can("decisions") then return end -- the router's choice above is the claim; its scores follow
  local scores = stack:scores(r)
  expect(scores.p2["kvcache-aware"]):eq(100, "p2 owns 4 of the prompt's 4 blocks")
  expect(scores.p2.total):eq(200, "least-request 100 (idle) + kvcache-aware 100")
  for _, other in ipairs({ "p1", "p3" }) do
    expect(scores[other]["kvcache-aware"]):is_nil(other .. " owns no block of the prompt, so it gets no "
      .. "kvcache-aware score at all")
    expect(scores[other].total):eq(100, other .. " has its least-request score only")
  end
end)

test("a chat prompt follows the same path: its templated tokens are the blocks",
  { tags = { "needs:kvcache_score" } }, function()
  local messages = { { role = "user", content = (stack:prompt(3)) } }
  local tokens = stack:tokens { messages = messages }
  local full = #tokens // BLOCK
  expect(full):ge(3, "the chat template keeps the 3 blocks of the user's words")
  stack:inject("p3", kvcache.stored { tokens = kvcache.prefix(tokens, full) })
  stack:expect_owner { messages = messages, pod = "p3" }
  stack:expect_routed { messages = messages, pod = "p3", n = 3, max_tokens = 2 }
end)

test("a prompt nobody announced is spread by least-request", function()
  local t = { counts = {} }
  local n = 45
  for i = 1, n do
    -- A new prompt every time: a pod that serves a prompt announces it, and
    -- from then on that prompt is no longer cold.
    local r = assert(stack:complete { prompt = (stack:prompt(2)), max_tokens = 1 })
    expect(r.status):eq(200, "a cold prompt is still served (least-request scores every pod): " .. r.body)
    t.counts[r.pod] = (t.counts[r.pod] or 0) + 1
    if stack:can("decisions") then
      for _, p in ipairs({ "p1", "p2", "p3" }) do
        expect(r.scores[p]["kvcache-aware"]):is_nil(string.format("request %d: nobody owns the prompt, so "
          .. "%s gets no kvcache-aware score", i, p))
        expect(r.scores[p]["least-request"]):eq(100, string.format("request %d: one request at a time, so "
          .. "every pod is idle for least-request", i))
      end
    end
  end
  local served = {}
  for pod, c in pairs(t.counts) do served[#served + 1] = string.format("%s=%d", pod, c) end
  table.sort(served)
  log("cold prompts served by: " .. table.concat(served, " "))
  expect(#served):ge(2, string.format("%d cold prompts, all scored alike, should not all go to one pod "
    .. "(served by: %s)", n, table.concat(served, " ")))
end)
