-- scenarios/sglang_path.lua - the kvcache-aware path with SGLang pods.
--
-- Kthena supports SGLang engines beside vLLM, and every link of the path
-- differs for them: the router tokenizes at the pod's IP on
-- sglangTokenizerPort (30000 by default, SGLang's port, not vLLM's 8000)
-- with SGLang's request shape (no return_token_strs, no
-- add_generation_prompt), the engine publishes SGLang's event dialect, the
-- runtime reads it with its SGLANG_ZMQ_* settings and keeps its
-- engine-hash mapping under sglang:kv:block:<pod>.<namespace>@<engine hash>
-- instead of vllm:kv:block:. A mistake in any of them and SGLang pods
-- silently lose their cache score; this file walks each link.

local kvcache = require("kvcache")

local stack

before_all(function()
  stack = kvcache.stack { pods = { { engine = "sglang" }, { engine = "sglang" }, { engine = "sglang" } },
    sim = { event_batch_delay = 0.05 } }
end)

-- A router counter or histogram count, for this stack's model.
local function router_metric(name, labels)
  local m = assert(stack:metrics())
  labels = labels or {}
  labels.model = stack.model
  return m:get(name, labels)
end

-- The runtime's engine-hash mapping key of a pod, under `prefix`.
local function mapping_key(prefix, pod, engine_hash)
  return prefix .. stack:pod(pod).owner .. "@" .. kvcache.u64(engine_hash)
end

test("the router tokenizes text and chat prompts at the SGLang port and follows their cache",
  { tags = { "needs:kvcache_score" } }, function()
  -- Kthena's tokenize counters, where the router has them; the routing
  -- claim stands on every target.
  local counted = stack:can("kthena_surface")
  local errors = counted and router_metric("kthena_router_kvcache_aware_errors_total", { stage = "tokenize" })
  local tokenized = counted and router_metric("kthena_router_kvcache_aware_tokenize_duration_seconds_count")

  local prompt, tokens = stack:prompt(3) -- tokens asked with SGLang's text body
  stack:inject("p2", kvcache.stored { tokens = tokens })
  stack:expect_owner { tokens = tokens, pod = "p2" }
  local text = stack:expect_routed { prompt = prompt, pod = "p2", n = 2, max_tokens = 1 }

  local messages = { { role = "system", content = stack:text(20) }, { role = "user", content = stack:text(30) } }
  local chat = stack:tokens { messages = messages } -- asked with SGLang's chat body
  stack:inject("p3", kvcache.stored { tokens = kvcache.prefix(chat, #chat // 16) })
  stack:expect_owner { messages = messages, pod = "p3" }
  local routed = stack:expect_routed { messages = messages, pod = "p3", n = 2, max_tokens = 1 }

  if counted then
    expect(router_metric("kthena_router_kvcache_aware_errors_total", { stage = "tokenize" })):eq(errors,
      "no tokenize error: the router reached the SGLang pods' tokenizer port and they accepted its requests")
    expect(router_metric("kthena_router_kvcache_aware_tokenize_duration_seconds_count")):ge(tokenized + 4,
      "each of the 4 requests was tokenized")
  end
  if stack:can("decisions") then
    expect(stack:scores(text.results[1]).p2["kvcache-aware"]):eq(100, "p2 holds every block of the text prompt")
    expect(stack:scores(routed.results[1]).p3["kvcache-aware"]):eq(
      math.floor((#chat // 16) / ((#chat + 15) // 16) * 100),
      string.format("p3 holds the whole blocks of the %d-token chat prompt", #chat))
  end
end)

test("SGLang's events reach Redis, with the engine-hash mapping under sglang:kv:block:", function()
  local _, tokens = stack:prompt(2)
  local stored = kvcache.stored { tokens = tokens } -- published in SGLang's dialect, as p1's engine would
  local std = stack:hashes(tokens)
  stack:inject("p1", stored)
  stack:expect_owner { tokens = tokens, pod = "p1" }

  -- The runtime's mappings in Redis, where the target keeps ownership there.
  local c <close> = stack:can("raw_redis") and stack:redis()
  for i, eh in ipairs(c and stored.hashes or {}) do
    local key = mapping_key("sglang:kv:block:", "p1", eh)
    expect(c:call("GET", key)):eq(kvcache.u64(std[i]), string.format("%s maps engine block %d to its "
      .. "standardized hash", key, i))
    local ttl = c:call("TTL", key)
    expect(ttl > 86000 and ttl <= 86400):is_true(string.format("%s expires after 24 h (TTL %d)", key, ttl))
    expect(c:call("EXISTS", mapping_key("vllm:kv:block:", "p1", eh))):eq(0,
      "an SGLang runtime writes no vllm:kv:block: mapping")
  end

  -- BlockRemoved finds the block through the mapping and drops both.
  stack:inject("p1", kvcache.removed { hashes = { stored.hashes[2] } })
  expect(stack:owners { tokens = tokens }[2][stack:pod("p1").owner]):is_nil(
    "BlockRemoved of engine block 2 takes p1 off block 2")
  stack:expect_owner { tokens = tokens, pod = "p1", blocks = 1, timeout = 0.5 }
  if c then
    expect(c:call("EXISTS", mapping_key("sglang:kv:block:", "p1", stored.hashes[2]))):eq(0,
      "the removed block's mapping is deleted with it")
  end

  -- AllBlocksCleared drops the pod from every block and every mapping.
  stack:inject("p1", kvcache.cleared {})
  stack:expect_no_owner { tokens = tokens, pod = "p1" }
  if c then
    expect(c:call("EXISTS", mapping_key("sglang:kv:block:", "p1", stored.hashes[1]))):eq(0,
      "AllBlocksCleared deletes the pod's mappings")
  end
end)

test("a prompt an SGLang pod served is announced by its engine and routed back to it",
  { tags = { "needs:kvcache_score" } }, function()
  local prompt = stack:prompt(2, { tail = 8 })
  local pod = stack:pod("p1")
  stack:serve("p1", { prompt = prompt })

  local tokens = stack:tokens { prompt = prompt }
  stack:expect_owner { tokens = tokens, pod = "p1" }
  if stack:can("raw_redis") then
    local c <close> = stack:redis()
    local maps = c:call("KEYS", "sglang:kv:block:" .. pod.owner .. "@*")
    expect(#maps):ge(#tokens // 16, "p1's runtime keeps a sglang:kv:block: mapping per block its engine announced")
  end
  local t = stack:expect_routed { prompt = prompt, pod = "p1", n = 2, max_tokens = 1 }
  if stack:can("decisions") then
    local whole, all = #tokens // 16, (#tokens + 15) // 16
    expect(stack:scores(t.results[1]).p1["kvcache-aware"]):eq(math.floor(whole / all * 100), string.format(
      "p1's engine cached the %d whole blocks of a %d-token prompt (%d blocks with the tail)", whole, #tokens, all))
  end
end)
