-- scenarios/load_prefix_sharing.lua - many users over a few long shared
-- prefixes: what kvcache-aware routing buys.
--
-- The workload: 8 system prompts of 128 tokens (8 blocks), each followed by
-- a short question of its own (under one block, so never cached), 40
-- requests per system prompt in random order, 16 at a time (the shape of
-- "8 prompts x 200 requests", scaled down; LOAD_PREFIX_REQUESTS=200 runs the
-- full size, as fixtures/bench/load_prefix.sh does). The same request list
-- goes through three routers over the same kind of stack:
--
--   random          Score: random (used alone, as Kthena wants it)
--   least-request   Filter and Score: least-request
--   kvcache-aware   Kthena's documented setup: least-request as filter,
--                   least-request and kvcache-aware scoring with weight 1
--
-- Each sim caches 24 blocks: 3 of the 8 system prompts. Were a pod able to
-- hold them all, every policy would end up caching everything everywhere and
-- the comparison would mean nothing; this way only a router that keeps each
-- prompt on the pods that hold it avoids evicting and recomputing it. The
-- sims answer after 20 ms and run at most 3 requests at once (3 x 8 blocks
-- fit the cache, so no request fails for capacity), and they publish their
-- KV events within 10 ms (a real vLLM publishes every engine step; the
-- sim's 1 s batching would leave a 1-second workload blind).
--
-- Figures (the sims' usage.prompt_tokens_details.cached_tokens over prompt
-- tokens; evicted blocks = blocks each sim had to store beyond its
-- capacity) go to the artifact load.txt, the log and, as a chart of the hit
-- ratios, the HTML report (engine.report "chart"). kvcache-aware must
-- reach a clearly higher hit ratio (10 points at least) and fewer evictions
-- than random; least-request is reported for reference.

local engine = require("engine")
local http = require("http")
local json = require("json")
local kvcache = require("kvcache")

local PROMPTS = 8
local PER_PROMPT = math.tointeger(tonumber(os.getenv("LOAD_PREFIX_REQUESTS") or "")) or 40
local PREFIX_BLOCKS = 8
local CONCURRENCY = 16
local PODS = 3
local CACHE_BLOCKS = 3 * PREFIX_BLOCKS
local SIM = { kv_cache_size = CACHE_BLOCKS, time_to_first_token = 20, max_num_seqs = 3, event_batch_delay = 0.01 }
local MIN_GAIN = 0.10 -- kvcache-aware's hit ratio over random's, at least

local POLICIES = {
  { name = "random",
    router = { scheduler = { plugins = { Score = { enabled = { { name = "random", weight = 1 } } } } } } },
  { name = "least-request", router = { scheduler = { plugins = { Filter = { enabled = { "least-request" } },
    Score = { enabled = { { name = "least-request", weight = 1 } } } } } } },
  { name = "kvcache-aware", router = nil }, -- the stack's default: Kthena's documented configuration
}

local figures = {} -- policy name -> {hit, cached, prompt, evicted, errors, seconds, served}

-- The workload: system prompt i is 128 distinct words (one token each);
-- request (i, u) asks user u's question after it. Shuffled once, so every
-- policy gets the same list in the same order.
local function workload()
  local systems = {}
  for i = 1, PROMPTS do
    local words = {}
    for w = 1, PREFIX_BLOCKS * 16 do words[w] = string.format("sys%dw%d", i, w) end
    systems[i] = table.concat(words, " ")
  end
  local list = {}
  for i = 1, PROMPTS do
    for u = 1, PER_PROMPT do
      list[#list + 1] = string.format("%s user %d asks about item %d", systems[i], u, u * 7 + i)
    end
  end
  for i = #list, 2, -1 do
    local j = math.random(i)
    list[i], list[j] = list[j], list[i]
  end
  return list
end

local PROMPT_LIST = workload()

-- The runtimes' count of BlockRemoved events (one per evicted block), or
-- nil where runtimes have no /stats.
local function removed_total(s)
  if not s:can("event_stats") then return nil end
  local total = 0
  for _, p in ipairs(s:pods()) do
    local st = s:event_stats(p.name).runtime
    if not st then return nil end
    total = total + st.applied.removed
  end
  return total
end

-- Run the workload through a stack with this policy's router.
local function run(policy)
  local s <close> = kvcache.stack { pods = PODS, router = policy.router, sim = SIM }
  local url = s:endpoints().router .. "/v1/completions"
  local requests = {}
  for i, prompt in ipairs(PROMPT_LIST) do
    requests[i] = { method = "POST", url = url, json = { model = s.model, prompt = prompt, max_tokens = 1 },
      timeout = 30 }
  end
  local t0 = now()
  local replies = http.batch(requests, { concurrency = CONCURRENCY })
  local f = { cached = 0, prompt = 0, errors = 0, seconds = now() - t0, served = {}, stored = {} }
  local first_error
  for _, r in ipairs(replies) do
    local usage = r.status == 200 and json.safe.decode(r.body)
    usage = type(usage) == "table" and usage.usage
    local pod = r.headers and r.headers["x-inference-pod"]
    if usage and pod then
      local cached = usage.prompt_tokens_details.cached_tokens
      f.cached, f.prompt = f.cached + cached, f.prompt + usage.prompt_tokens
      f.served[pod] = (f.served[pod] or 0) + 1
      -- The sim stores every full block it did not have.
      f.stored[pod] = (f.stored[pod] or 0) + usage.prompt_tokens // 16 - cached // 16
    else
      f.errors = f.errors + 1
      first_error = first_error or (r.err or string.format("HTTP %s: %s", tostring(r.status), tostring(r.body)))
    end
  end
  expect(f.errors):eq(0, string.format("every request of the %s run should be served; the first failure: %s "
    .. "(logs in %s)", policy.name, tostring(first_error), s.dir))
  f.hit = f.cached / f.prompt
  f.scored, f.decisions, f.unscored = s:cache_scored(#PROMPT_LIST)
  -- Once full, a sim evicts one block for every block it stores.
  f.evicted = 0
  for _, n in pairs(f.stored) do f.evicted = f.evicted + math.max(0, n - CACHE_BLOCKS) end
  if removed_total(s) then
    -- The runtimes count every BlockRemoved the sims published: one per
    -- evicted block, once the last batches are in.
    eventually(function()
      local removed = removed_total(s)
      if removed ~= f.evicted then
        local per_pod = {}
        for _, p in ipairs(s:pods()) do
          per_pod[#per_pod + 1] = string.format("%s stored %d blocks, its runtime applied %d BlockRemoved", p.name,
            f.stored[p.name] or 0, s:event_stats(p.name).runtime.applied.removed)
        end
        error(string.format("the %s run: the runtimes applied %d BlockRemoved events (one per evicted block), "
          .. "but the sims evicted %d blocks (those stored beyond each sim's %d; %s)", policy.name, removed, f.evicted,
          CACHE_BLOCKS,
          table.concat(per_pod, "; ")), 0)
      end
      return true
    end)
  end
  figures[policy.name] = f
  log(string.format("%-14s hit ratio %.3f (%d of %d prompt tokens cached), %d blocks evicted, %.2fs", policy.name,
    f.hit, f.cached, f.prompt, f.evicted, f.seconds))
end

local function report()
  local lines = {
    string.format("prefix-sharing workload: %d system prompts of %d tokens x %d requests each (%d requests), "
      .. "a short question after each, concurrency %d", PROMPTS, PREFIX_BLOCKS * 16, PER_PROMPT, #PROMPT_LIST,
      CONCURRENCY),
    string.format("%d pods; each sim caches %d blocks of 16 tokens (%d of the %d system prompts), runs at most %d "
      .. "requests, answers after %d ms", PODS, CACHE_BLOCKS, CACHE_BLOCKS // PREFIX_BLOCKS, PROMPTS,
      SIM.max_num_seqs, SIM.time_to_first_token),
    "",
  }
  local side = {}
  for _, p in ipairs(POLICIES) do
    if figures[p.name] then side[#side + 1] = string.format("%s %.3f", p.name, figures[p.name].hit) end
  end
  lines[#lines + 1] = "hit ratios: " .. table.concat(side, " | ")
  lines[#lines + 1] = ""
  lines[#lines + 1] = string.format("%-14s %9s %22s %14s %8s  %s", "policy", "hit ratio", "cached / prompt tokens",
    "evicted blocks", "seconds", "requests per pod")
  for _, p in ipairs(POLICIES) do
    local f = figures[p.name]
    if f then
      local served = {}
      for i = 1, PODS do served[i] = string.format("p%d=%d", i, f.served["p" .. i] or 0) end
      lines[#lines + 1] = string.format("%-14s %9.3f %22s %14d %8.2f  %s", p.name, f.hit,
        f.cached .. " / " .. f.prompt, f.evicted, f.seconds, table.concat(served, " "))
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

-- The kvcache-aware run's figures mean something only if the router gave
-- some of its requests a cache score.
local function expect_cache_scored(kv)
  if kv.scored == 0 and kv.decisions > 0 then
    fail(string.format("none of the kvcache-aware run's last %d decisions gave any pod a kvcache-aware score%s",
      kv.decisions, kv.unscored))
  end
end

test("the workload under random, least-request and kvcache-aware routing (figures in load.txt)", { timeout = 120 },
  function()
    for _, p in ipairs(POLICIES) do run(p) end
    local text = report()
    artifact("load.txt", text)
    log("\n" .. text)
    local bars = {}
    for _, p in ipairs(POLICIES) do bars[#bars + 1] = { label = p.name, value = figures[p.name].hit } end
    engine.report("chart", { title = "cache-hit ratio per routing policy (cached / prompt tokens)", bars = bars,
      max = 1 })
  end)

test("kvcache-aware routing reaches a clearly higher cache-hit ratio than random routing",
  { tags = { "needs:kvcache_score" } }, function()
  local kv, random = figures["kvcache-aware"], figures.random
  if not (kv and random) then fail("no figures: the workload test above did not finish") end
  expect_cache_scored(kv)
  expect(kv.hit):ge(random.hit + MIN_GAIN, string.format("kvcache-aware should cache at least %d points more "
    .. "of the prompt tokens than random (%.3f vs %.3f); see load.txt of the test above", MIN_GAIN * 100, kv.hit,
    random.hit))
end)

test("kvcache-aware routing evicts fewer blocks than random routing", { tags = { "needs:kvcache_score" } }, function()
  local kv, random = figures["kvcache-aware"], figures.random
  if not (kv and random) then fail("no figures: the workload test above did not finish") end
  expect_cache_scored(kv)
  expect(kv.evicted):lt(random.evicted, string.format("kvcache-aware should make the sims evict fewer blocks "
    .. "than random (%d vs %d); see load.txt of the test above", kv.evicted, random.evicted))
end)
