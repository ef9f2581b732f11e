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
-- The requests go out in waves of 16, and each wave's KV events (one per
-- block the sims stored or evicted, counted from the replies) must have
-- been applied by the pods' runtimes before the next wave goes: what is
-- compared is the routing policy, not how fast a loaded machine carries
-- events to Redis. In one continuous stream the router scored on whatever
-- had arrived, and on a shared 2-core machine (load average 13-41, a CPU
-- burner beside it) 6 of 17 runs against Kthena main failed: once
-- kvcache-aware's gain over random fell to 0.081, five times the closing
-- count of BlockRemoved events fell short, failing all three tests (the
-- reported flake of "evicts fewer blocks" was this). Of those five, some
-- runtimes were only late, others had lost a sim's first events: a sim's
-- publisher connects to its bridge after start, and what it publishes
-- before that is lost, so each pod first gets one-block warm-up prompts
-- until its runtime has applied an event (warm_up below).
--
-- Figures (the sims' usage.prompt_tokens_details.cached_tokens over prompt
-- tokens; evicted blocks = blocks each sim had to store beyond its
-- capacity) go to the artifact load.txt, the log, as a chart of the hit
-- ratios the HTML report (engine.report "chart"), and per policy as data
-- (engine.report "load_figures": --reports). kvcache-aware must
-- reach a clearly higher hit ratio (10 points at least) and clearly fewer
-- evictions (15% at least) than random; least-request is reported for
-- reference.

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
-- The thresholds, by one rule: at most half the smallest margin seen in 30
-- runs on the kthena target against Kthena main (3cc0572), a CPU burner
-- beside them on a shared 2-core machine (load average 8.4-17.4); the
-- figures are in docs/targets.md ("Routing quality under load").
--   gain in hit ratio:   min 0.224, median 0.399, max 0.502 -> 0.10 (<= 0.112)
--   eviction cut (1 - kvcache-aware's evictions / random's):
--                        min 0.389, median 0.687, max 0.866 -> 0.15 (<= 0.194)
local MIN_GAIN = 0.10 -- kvcache-aware's hit ratio over random's, at least
local MIN_EVICTION_CUT = 0.15 -- kvcache-aware evicts at most (1 - this) of random's blocks
local ANNOUNCE_TIMEOUT = 30 -- seconds (times the time scale) for one wave's KV events to be applied

local POLICIES = {
  { name = "random",
    router = { scheduler = { plugins = { Score = { enabled = { { name = "random", weight = 1 } } } } } } },
  { name = "least-request", router = { scheduler = { plugins = { Filter = { enabled = { "least-request" } },
    Score = { enabled = { { name = "least-request", weight = 1 } } } } } } },
  { name = "kvcache-aware", router = nil }, -- the stack's default: Kthena's documented configuration
}

local figures = {} -- policy name -> {hit, cached, prompt, evicted, errors, seconds, served}
local workload_skipped -- the reason the workload test was skipped, if it was

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

-- Each pod's runtime counters ({applied =, dropped =}), or nil where
-- runtimes have no /stats.
local function runtime_stats(s)
  if not s:can("event_stats") then return nil end
  local per_pod = {}
  for _, p in ipairs(s:pods()) do
    local st = s:event_stats(p.name).runtime
    if not st then return nil end
    per_pod[p.name] = st
  end
  return per_pod
end

-- The full blocks a sim stored for one reply's usage: every one it did not
-- have.
local function stored_blocks(usage)
  return usage.prompt_tokens // 16 - usage.prompt_tokens_details.cached_tokens // 16
end

-- Blocks pod `name` has evicted so far: once full, a sim evicts one block
-- for every block it stores (its warm-up blocks included).
local function evicted_by(f, name)
  return math.max(0, (f.warm[name] or 0) + (f.stored[name] or 0) - CACHE_BLOCKS)
end

-- A sim's event publisher connects to its bridge once started; whatever it
-- publishes before that connection is up is lost, and on a loaded machine
-- "every process ready" can come first (seen: a pod whose first 32 blocks
-- never reached its bridge). So each pod gets one-block warm-up prompts,
-- straight to the sim, until its runtime has applied an event: the
-- workload then starts on a live event path. f.warm counts each pod's
-- warm-up blocks, f.lost those whose events never arrived (their later
-- BlockRemoved is dropped as an unknown hash).
local function warm_up(s, f)
  if not runtime_stats(s) then return end
  for _, p in ipairs(s:pods()) do
    local tries = 0
    eventually(function()
      local applied = s:event_stats(p.name).runtime.applied.blocks
      if applied > 0 then
        f.lost[p.name] = (f.warm[p.name] or 0) - applied
        return true
      end
      tries = tries + 1
      local words = {}
      for w = 1, 16 do words[w] = string.format("warm%s_%dw%d", p.name, tries, w) end
      local r = http.request { method = "POST", url = s:pod(p.name).http .. "/v1/completions", timeout = 30,
        json = { model = s.model, prompt = table.concat(words, " "), max_tokens = 1 } }
      local doc = r.status == 200 and json.safe.decode(r.body)
      if type(doc) == "table" and doc.usage then f.warm[p.name] = (f.warm[p.name] or 0) + stored_blocks(doc.usage) end
      return false
    end, { timeout = ANNOUNCE_TIMEOUT * engine.time_scale(), interval = 0.2 })
  end
end

-- Wait until every pod's runtime has dealt with the KV events of all its
-- sim stored and evicted so far (one block per BlockStored block, one
-- BlockRemoved per evicted block): the router then scores the next wave on
-- the cache as it is, however slowly a loaded machine carries the events.
local function wait_announced(s, policy, f)
  if not runtime_stats(s) then return end
  eventually(function()
    local per_pod, behind = runtime_stats(s), {}
    for _, p in ipairs(s:pods()) do
      local st, name = per_pod[p.name], p.name
      local stored = (f.warm[name] or 0) + (f.stored[name] or 0) - (f.lost[name] or 0)
      local evicted = evicted_by(f, name)
      -- applied.removed counts BlockRemoved events (one block each here),
      -- applied.blocks the stored blocks and the known blocks removed.
      local known_stored = st.applied.blocks - (st.applied.removed - st.dropped.unknown_hash)
      if known_stored ~= stored or st.applied.removed ~= evicted then
        behind[#behind + 1] = string.format("%s stored %d blocks (%d of them warm-up, %d lost before its event "
          .. "path was up) and evicted %d; its runtime applied %d stored blocks and %d BlockRemoved (%d for an "
          .. "unknown hash)", name, stored + (f.lost[name] or 0), f.warm[name] or 0, f.lost[name] or 0, evicted,
          known_stored, st.applied.removed, st.dropped.unknown_hash)
      end
    end
    if #behind > 0 then
      error(string.format("the %s run: the runtimes did not deal with one KV event per block the sims stored and "
        .. "evicted (%s)", policy.name, table.concat(behind, "; ")), 0)
    end
    return true
  end, { timeout = ANNOUNCE_TIMEOUT * engine.time_scale() })
end

-- Run the workload through a stack with this policy's router, one wave of
-- CONCURRENCY requests at a time, each wave's KV events in before the next.
local function run(policy)
  local s <close> = kvcache.stack { pods = PODS, router = policy.router, sim = SIM }
  local url = s:endpoints().router .. "/v1/completions"
  local f = { cached = 0, prompt = 0, errors = 0, served = {}, stored = {}, warm = {}, lost = {} }
  local first_error
  warm_up(s, f)
  local t0 = now()
  for w = 1, #PROMPT_LIST, CONCURRENCY do
    local requests = {}
    for i = w, math.min(w + CONCURRENCY - 1, #PROMPT_LIST) do
      requests[#requests + 1] = { method = "POST", url = url, json = { model = s.model, prompt = PROMPT_LIST[i],
        max_tokens = 1 }, timeout = 30 }
    end
    for _, r in ipairs(http.batch(requests, { concurrency = CONCURRENCY })) do
      local usage = r.status == 200 and json.safe.decode(r.body)
      usage = type(usage) == "table" and usage.usage
      local pod = r.headers and r.headers["x-inference-pod"]
      if usage and pod then
        f.cached, f.prompt = f.cached + usage.prompt_tokens_details.cached_tokens, f.prompt + usage.prompt_tokens
        f.served[pod] = (f.served[pod] or 0) + 1
        f.stored[pod] = (f.stored[pod] or 0) + stored_blocks(usage)
      else
        f.errors = f.errors + 1
        first_error = first_error or (r.err or string.format("HTTP %s: %s", tostring(r.status), tostring(r.body)))
      end
    end
    expect(f.errors):eq(0, string.format("every request of the %s run should be served; the first failure: %s "
      .. "(logs in %s)", policy.name, tostring(first_error), s.dir))
    wait_announced(s, policy, f)
  end
  f.seconds = now() - t0
  f.hit = f.cached / f.prompt
  f.scored, f.decisions, f.unscored = s:cache_scored(#PROMPT_LIST)
  f.account = s:router_account() -- where no decisions say how the router chose
  -- The workload's own evictions: what it stored beyond each sim's cache.
  f.evicted = 0
  for _, n in pairs(f.stored) do f.evicted = f.evicted + math.max(0, n - CACHE_BLOCKS) end
  figures[policy.name] = f
  -- The figures as data, for programs that run the suite (make scoreboard
  -- reads them with --reports); the HTML report draws no "load_figures".
  engine.report("load_figures", { policy = policy.name, hit = f.hit, cached = f.cached, prompt = f.prompt,
    evicted = f.evicted, errors = f.errors, seconds = f.seconds, requests = #PROMPT_LIST, served = f.served })
  local warm, lost = 0, 0
  for name, n in pairs(f.warm) do warm, lost = warm + n, lost + (f.lost[name] or 0) end
  log(string.format("%-14s hit ratio %.3f (%d of %d prompt tokens cached), %d blocks evicted, %.2fs (warm-up: %d "
    .. "blocks, %d of their events lost)%s", policy.name, f.hit, f.cached, f.prompt, f.evicted, f.seconds, warm, lost,
    f.account))
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

test("the workload under random, least-request and kvcache-aware routing (figures in load.txt)", { timeout = 600 },
  function()
    for _, p in ipairs(POLICIES) do
      local ok, err = pcall(run, p)
      if not ok then
        -- a target that cannot run a policy's stack skips it: the comparisons say so too
        if type(err) == "table" and err.kind == "skip" then workload_skipped = err.reason end
        error(err, 0)
      end
    end
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
  if workload_skipped then skip(workload_skipped) end
  if not (kv and random) then fail("no figures: the workload test above did not finish") end
  expect_cache_scored(kv)
  expect(kv.hit):ge(random.hit + MIN_GAIN, string.format("kvcache-aware should cache at least %d points more "
    .. "of the prompt tokens than random (%.3f vs %.3f); see load.txt of the test above%s", MIN_GAIN * 100, kv.hit,
    random.hit, kv.account))
end)

-- Every pod overflows its cache, so the evictions are the prompt blocks
-- minus the cached ones minus what the caches hold: they move with the
-- hit ratio (0.10 of it is 268 blocks at 40 requests per prompt). This is
-- the same figure from the side of what a user pays: recomputed prefixes.
test("kvcache-aware routing evicts fewer blocks than random routing", { tags = { "needs:kvcache_score" } }, function()
  local kv, random = figures["kvcache-aware"], figures.random
  if workload_skipped then skip(workload_skipped) end
  if not (kv and random) then fail("no figures: the workload test above did not finish") end
  expect_cache_scored(kv)
  expect(kv.evicted):le(random.evicted * (1 - MIN_EVICTION_CUT), string.format("kvcache-aware should make the "
    .. "sims evict at least %d%% fewer blocks than random (%d vs %d); see load.txt of the test above%s",
    math.floor(MIN_EVICTION_CUT * 100 + 0.5), kv.evicted, random.evicted, kv.account))
end)
