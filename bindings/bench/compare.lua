-- compare.lua - the bindings' benchmarks beside their references, in one run:
-- `make bench` runs it as `kvengine serve bindings/bench/compare.lua`.
--
--   redis: HSET ops/s through c:pipeline (batches of 32, 8 clients) vs
--          redis-benchmark -t hset -P 32 -c 8 on the same server
--   http:  requests/s of http.batch (concurrency 32) vs wrk -t 1 -c 32,
--          each from its own process against Debian's nginx (bindings/bench/
--          nginx.lua), 5 rounds side by side, medians; then http.load's
--          percentiles at three fixed rates against the same nginx
--   zmq:   pub -> sub messages/s of 200-byte frames
--   kv:    block hashes/s of 2,048-token prompts; events encoded/decoded/s
--
-- Figures, not verdicts: each line shows the ratio and the target.

local proc = require("proc")

local KV = os.getenv("KVENGINE_BIN")
local DIR = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$")

local function run(argv, timeout)
  local status, out, err = proc.run { argv = argv, timeout = timeout or 120 }
  assert(status == 0, table.concat(argv, " ") .. " failed: " .. tostring(out) .. tostring(err))
  return out
end

local function figure(out, name)
  return tonumber(out:match(name .. "%s+([%d%.]+)"))
end

local function row(name, value, unit, ref, target)
  if ref then
    print(string.format("%-34s %12.0f %-6s reference %12.0f   ratio %5.2f   %s", name, value, unit, ref,
      value / ref, target or ""))
  else
    print(string.format("%-34s %12.0f %s", name, value, unit))
  end
end

local function free_port()
  return 20000 + math.random(0, 9999)
end

-- redis ---------------------------------------------------------------------
do
  local port = free_port()
  local server <close>, client = require("tests.lib.redis_server").start { host = "127.0.0.1", port = port }
  client:close()
  local ours = figure(run { KV, "serve", DIR .. "/redis_bench.lua", "127.0.0.1", tostring(port), "8", "32",
    "400000" }, "redis_hset_pipeline32")
  local ref = run { "redis-benchmark", "-h", "127.0.0.1", "-p", tostring(port), "-t", "hset", "-P", "32",
    "-c", "8", "-n", "400000", "-q" }
  row("redis HSET, pipeline 32", ours, "ops/s", tonumber(ref:match("HSET: ([%d%.]+)")), "target >= 0.50")
end

-- http ----------------------------------------------------------------------
local function median(t)
  table.sort(t)
  return t[(#t + 1) // 2]
end

do
  local nginx = dofile(DIR .. "/nginx.lua")
  local srv, why = nginx.start()
  if not srv then
    print("http: skipped: " .. why)
  else
    local port = tostring(srv.port)
    local wrk, summary, client, latency = {}, {}, {}, nil
    for round = 1, 5 do -- alternated, so that a noisy moment hits both sides
      local out = run { "wrk", "-t", "1", "-c", "32", "-d", "2s", srv.url }
      wrk[round] = tonumber(out:match("Requests/sec:%s+([%d%.]+)"))
      out = run { KV, "serve", DIR .. "/http_bench.lua", port, "summary", "2" }
      summary[round] = figure(out, "http_batch_summary_c32_rate")
      latency = out:match("(http_batch_summary_c32_latency[^\n]*)") or latency
      client[round] = figure(run { KV, "serve", DIR .. "/http_bench.lua", port, "client", "2" },
        "http_batch_client_c32_rate")
    end
    local ref = median(wrk)
    print("http: against nginx, median of 5 rounds (each: wrk, summary, responses; 2 s each)")
    row("http.batch summary, c32 (nginx)", median(summary), "req/s", ref, "target >= 0.70")
    row("http.batch responses, c32 (nginx)", median(client), "req/s", ref, "(curl: whole responses)")
    if latency then print("  " .. latency .. ", last round") end
    for _, rate in ipairs({ 1000, 5000, 20000 }) do
      for line in run({ KV, "serve", DIR .. "/http_bench.lua", port, "open", "3", tostring(rate) }):gmatch("[^\n]+") do
        print("  " .. line)
      end
    end
    srv.stop()
  end
end

-- zmq and kv ----------------------------------------------------------------
for line in run({ KV, "serve", DIR .. "/zmq_bench.lua" }):gmatch("[^\n]+") do print(line) end
for line in run({ KV, "serve", DIR .. "/kv_bench.lua" }):gmatch("[^\n]+") do print(line) end
