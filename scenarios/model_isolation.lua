-- model_isolation.lua - ownership of a prompt under one model never counts
-- for the same prompt under another.
--
-- What it proves: block keys carry the model (matrix:kv:block:<model>@...),
-- and the router looks up the keys of the request's own `model`, so blocks
-- the pods hold for the base model give an adapter's requests nothing, and
-- blocks held for an adapter give the base model's requests nothing, though
-- the tokens and the hashes are the same. The other model here is a LoRA
-- adapter every pod serves: the one other model a Kthena route can send to
-- the same pods.
--
-- Why it matters: a KV cache computed under one set of weights is useless
-- under another. Routing a request to a pod for blocks it holds for a
-- different model costs a full prefill there while a better pod waits.
--
-- Kthena's runtime writes every block under the model it was started with,
-- so nothing writes adapter keys by itself; the tests write them as a
-- runtime keying blocks by their adapter would (owned_as). That keying is
-- also why an adapter's own announcements count for the base model today:
-- lora_prefix.lua shows that gap (a known gap) and the fix.

local kvcache = require("kvcache")

local ADAPTER = "iso-adapter"

local stack = kvcache.stack { pods = { { loras = { ADAPTER } }, { loras = { ADAPTER } }, { loras = { ADAPTER } } } }
local adapter = stack:lora(ADAPTER)

-- The pod's owner field on the first `blocks` blocks of the prompt under
-- `model`'s keys, stamped now, as a runtime writes a BlockStored.
local function owned_as(model, pod, tokens, blocks)
  local owner, ts = stack:pod(pod).owner, tostring(os.time())
  local c <close> = stack:redis()
  for i = 1, blocks do
    c:call("HSET", kvcache.block_key(model, stack:hashes(tokens)[i]), owner, ts)
  end
  stack:expect_owner { model = model, tokens = tokens, pod = pod, blocks = blocks, timeout = 0.1 }
end

test("the base model's blocks do not count for the adapter's requests", { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  stack:inject("p1", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p1" }
  owned_as(adapter, "p2", tokens, 2)
  stack:expect_no_owner { model = adapter, tokens = tokens, pod = "p1" }

  stack:expect_routed { prompt = prompt, pod = "p1", n = 2, max_tokens = 1 }
  local r = assert(stack:complete { model = adapter, prompt = prompt, max_tokens = 1 })
  expect(r.status):eq(200, "every pod serves the adapter: " .. r.body)
  stack:expect_best { r = r, model = adapter, prompt = prompt, pod = "p2",
    why = "for the adapter only p2's 2 blocks count; p1's 4 blocks are the base model's",
    scores = { p1 = { false, "p1 holds the prompt for the base model only: no score for an adapter request" },
      p2 = { 50, "p2 holds 2 of 4 blocks under the adapter" } }, n = 3, max_tokens = 1 }
end)

test("the adapter's blocks do not count for the base model's requests", { tags = { "needs:kvcache_score" } }, function()
  local prompt, tokens = stack:prompt(4)
  owned_as(adapter, "p1", tokens, 4)
  stack:inject("p2", kvcache.stored { tokens = kvcache.prefix(tokens, 2) })
  stack:expect_owner { tokens = tokens, pod = "p2", blocks = 2 }
  stack:expect_no_owner { tokens = tokens, pod = "p1" }

  stack:expect_best { prompt = prompt, pod = "p2",
    why = "for the base model only p2's 2 blocks count; p1's 4 blocks are the adapter's",
    scores = { p1 = { false, "p1 holds the prompt for the adapter only: no score for a base-model request" },
      p2 = { 50, "p2 holds 2 of 4 blocks under the base model" } }, n = 2, max_tokens = 1 }
  -- The same entries do count where they belong.
  stack:expect_routed { model = adapter, prompt = prompt, pod = "p1", n = 2, max_tokens = 1 }
end)
