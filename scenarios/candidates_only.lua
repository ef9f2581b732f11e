-- scenarios/candidates_only.lua - only the pods a request can go to own its
-- blocks (OWNER-6 and SCORE-4 in docs/kthena.md).
--
-- What a request can use is checked on every target: who served it (and,
-- where the router reports them, its scores); the match ratio where the
-- router has Kthena's metrics.
--
-- Redis outlives the pods that wrote it: a deleted pod's ownership stays
-- until a runtime removes it or the router's GC ages it out, and a pod the
-- filters leave out still owns what it cached. Kthena drops every owner that
-- is not among the request's candidates before it walks the prompt's
-- blocks, so such blocks give no score to anybody and do not count in the
-- match ratio (kthena_router_kvcache_aware_match_ratio, the share of the
-- prompt's blocks the best candidate holds). Counting them would report
-- cache hits that no request can use.

local kvcache = require("kvcache")

-- The match ratio histogram's sum and count for a model (default the
-- stack's; an adapter request is counted under the adapter's name).
local function match_ratio(s, model)
  local m = assert(s:metrics())
  local labels = { model = model or s.model }
  return m:get("kthena_router_kvcache_aware_match_ratio_sum", labels),
    m:get("kthena_router_kvcache_aware_match_ratio_count", labels)
end

-- What the first failed request of a tally got, for a message.
local function first_failure(t)
  for _, r in ipairs(t.results) do
    if r.err then return "it failed: " .. r.err end
    if r.status ~= 200 then return string.format("request %s got %d: %s", r.request_id, r.status, r.body) end
  end
  return "none failed"
end

-- One request for each of the prompts: each served, the ratios they observed
-- in total (nil where the router has no Kthena metrics: the routing claim
-- stands without them). Each prompt is asked once: a pod that serves a
-- prompt announces it, and a second request would find that announcement too.
local function observed_ratio(s, prompts)
  local counted = s:can("kthena_surface")
  local sum0, count0
  if counted then sum0, count0 = match_ratio(s) end
  local t = { results = {}, errors = 0 }
  for i, prompt in ipairs(prompts) do
    local one = s:route { prompt = prompt, max_tokens = 1 }
    t.results[i], t.errors = one.results[1], t.errors + one.errors
  end
  expect(t.errors):eq(0, string.format("OWNER-6: every request is served, whoever else owns the prompt's blocks "
    .. "(%s)", first_failure(t)))
  if not counted then return nil, t end
  local sum1, count1 = match_ratio(s)
  expect(count1 - count0):eq(#prompts, string.format("SCORE-4: each of the %d requests observes the match ratio "
    .. "once", #prompts))
  return sum1 - sum0, t
end

-- n prompts of 4 blocks each, and their tokens.
local function prompts(s, n)
  local texts, tokens = {}, {}
  for i = 1, n do texts[i], tokens[i] = s:prompt(4) end
  return texts, tokens
end

test("blocks owned only by a deleted pod give no score and no match ratio",
  { tags = { "needs:kvcache_score" } }, function()
  local s <close> = kvcache.stack { pods = 3 }
  local cold, cold_tokens = prompts(s, 4)
  local warm, warm_tokens = prompts(s, 4)
  for i = 1, 4 do
    s:inject("p3", kvcache.stored { tokens = cold_tokens[i] }, kvcache.stored { tokens = warm_tokens[i] })
    s:inject("p1", kvcache.stored { tokens = kvcache.prefix(warm_tokens[i], 1) })
    s:expect_owner { tokens = cold_tokens[i], pod = "p3" }
    s:expect_owner { tokens = warm_tokens[i], pod = "p1", blocks = 1 }
  end
  s:kill("p3") -- its ownership stays in Redis (where the router keeps it; another may drop it)
  if s:can("stale_ownership") then s:expect_owner { tokens = cold_tokens[1], pod = "p3", timeout = 0.1 } end

  local sum, t = observed_ratio(s, cold)
  if sum then
    expect(sum):eq(0, string.format("OWNER-6/SCORE-4: every block of each prompt is owned only by p3, which is no "
      .. "candidate any more, so each of the 4 requests observes a match ratio of 0; they observed %g in total "
      .. "(4 would mean p3's 4 of 4 blocks were counted)", sum))
  end
  for _, r in ipairs(t.results) do
    if r.scores then
      for pod, row in pairs(r.scores) do
        expect(row["kvcache-aware"]):is_nil(string.format("OWNER-6: request %s: %s gets no kvcache-aware score "
          .. "from blocks only a deleted pod owns", r.request_id, pod))
      end
    end
  end

  -- p1 holds block 1 of 4 of each prompt, deleted p3 all 4: the match is p1's 1 block.
  sum, t = observed_ratio(s, warm)
  for _, r in ipairs(t.results) do
    s:expect_served(r, "p1", string.format("request %s: p1 holds block 1 of the prompt, the only candidate that "
      .. "holds any", r.request_id))
    if r.scores then
      expect(r.scores.p1["kvcache-aware"]):eq(25, string.format("request %s: p1 holds 1 of 4 blocks", r.request_id))
    end
  end
  if sum then
    expect(sum):eq(1, string.format("OWNER-6/SCORE-4: the longest match among candidates is p1's 1 of 4 blocks, so "
      .. "the 4 requests observe 0.25 each, 1 in total; they observed %g (4 would mean deleted p3's blocks carried "
      .. "the match)", sum))
  end
end)

test("blocks owned by a pod the filters leave out give no score and no match ratio",
  { tags = { "needs:kvcache_score" } }, function()
  -- p3 has not loaded the adapter, so lora-affinity leaves it out of the
  -- adapter's requests. Its ownership under the adapter's keys is written
  -- directly, as a runtime keying by adapter name would write it.
  local s <close> = kvcache.stack { pods = { { loras = { "sql" } }, { loras = { "sql" } }, {} },
    router = { scheduler = {
      pluginConfig = { { name = "kvcache-aware", args = { blockSizeToHash = 16, maxBlocksToMatch = 128 } } },
      plugins = { Filter = { enabled = { "least-request", "lora-affinity" } },
        Score = { enabled = { { name = "least-request", weight = 1 }, { name = "kvcache-aware", weight = 1 } } } },
    } } }
  local sql = s:lora("sql")
  local prompt, tokens = s:prompt(4, { model = sql })
  local c <close> = s:redis()
  local now = tostring(os.time())
  for i, h in ipairs(s:hashes(tokens)) do
    c:call("HSET", kvcache.block_key(sql, h), s:pod("p3").owner, now)
    if i == 1 then c:call("HSET", kvcache.block_key(sql, h), s:pod("p2").owner, now) end
  end

  local sum0, count0 = match_ratio(s, sql)
  local t = s:route { model = sql, prompt = prompt, max_tokens = 1, n = 4 }
  expect(t.errors):eq(0, string.format("OWNER-6: every request for the adapter is served, whoever else owns its "
    .. "blocks (%s; %s)", tostring(t), first_failure(t)))
  local sum1, count1 = match_ratio(s, sql)
  for _, r in ipairs(t.results) do
    s:expect_served(r, "p2", string.format("request %s: p2 holds block 1 under %s; p3 is no candidate", r.request_id,
      sql))
    if r.scores then
      expect(r.scores.p3):is_nil(string.format("request %s: p3 was filtered out, so it has no scores", r.request_id))
    end
  end
  expect(count1 - count0):eq(4, "SCORE-4: each of the 4 requests observes the match ratio once")
  expect(sum1 - sum0):eq(1, string.format("OWNER-6/SCORE-4: p3 owns all 4 blocks but is filtered out, p2 owns block 1: "
    .. "each request observes 0.25, 1 in total; they observed %g", sum1 - sum0))
end)
