-- HTTP benchmark, run as `kvengine serve bindings/bench/http_bench.lua PORT MODE [SECONDS] [RATE]`.
--
--   MODE "serve": serve a small fixed body on PORT (0: any free port) until
--     SIGTERM/SIGINT, for an outside load generator.
--   MODE "client": http.batch at concurrency 32 with whole responses (curl)
--     against the server already on PORT, for SECONDS (default 3).
--   MODE "summary": the same through http.batch{summary = true}, the load
--     client: counts and a latency histogram, no response tables.
--   MODE "open": http.load at RATE requests/s for SECONDS, concurrency 32;
--     prints the corrected and uncorrected percentiles, and writes the
--     corrected histogram's JSON to $KVENGINE_BENCH_OUT/http_open_RATE.json
--     when that folder is set.
--
-- Output: `name value unit` lines (bindings/bench/compare.lua reads them).

local http = require("http")

local port = tonumber(arg[1] or "0") or 0
local mode = arg[2] or "client"
local seconds = tonumber(arg[3] or "3") or 3
local rate = tonumber(arg[4] or "1000") or 1000
local CONCURRENCY = 32
local BATCH = 2000

if mode == "serve" then
  local srv = assert(http.listen { host = "127.0.0.1", port = port, handler = function(_, res)
    res:header("Content-Type", "text/plain")
    res:finish("hello from kvengine\n")
  end })
  print(string.format("http_bench_port %d port", srv:port()))
  io.stdout:flush()
  return -- the open server keeps the loop running
end

local url = "http://127.0.0.1:" .. port .. "/"

if mode == "open" then
  local r = http.load { url = url, rate = rate, duration = seconds, concurrency = CONCURRENCY }
  local function row(name, h)
    print(string.format("http_open_%d_%s %.3f %.3f %.3f %.3f ms (p50 p90 p99 p99.9)", rate, name,
      h:percentile(50) * 1e3, h:percentile(90) * 1e3, h:percentile(99) * 1e3, h:percentile(99.9) * 1e3))
  end
  print(string.format("http_open_%d_sent %d requests (%d errors, %d dropped; %s)", rate, r.sent, r.errors,
    r.dropped, r.first_error or "no error"))
  row("corrected", r.latency)
  row("uncorrected", r.uncorrected)
  local dir = os.getenv("KVENGINE_BENCH_OUT")
  if dir and dir ~= "" then
    local f = assert(io.open(string.format("%s/http_open_%d.json", dir, rate), "w"))
    f:write(r.latency:json(), "\n")
    f:close()
  end
  return
end

assert(mode == "client" or mode == "summary", "mode must be serve, client, summary or open")
local reqs = {}
for i = 1, BATCH do reqs[i] = url end

-- One batch; returns the number of requests that failed.  In summary mode
-- each batch's latencies are merged into one histogram for the run.
local latency = http.histogram()
local batch = mode == "summary" and function()
  local r = http.batch(reqs, { concurrency = CONCURRENCY, summary = true })
  latency:merge(r.latency)
  return BATCH - (r.statuses[200] or 0)
end or function()
  local failed = 0
  for _, r in ipairs(http.batch(reqs, { concurrency = CONCURRENCY })) do
    if r.err or r.status ~= 200 then failed = failed + 1 end
  end
  return failed
end

batch() -- warm up: connections, pools, allocator
latency = http.histogram()
local done, failed = 0, 0
local t0 = now()
repeat
  failed = failed + batch()
  done = done + BATCH
until now() - t0 >= seconds
local elapsed = now() - t0

print(string.format("http_batch_%s_c%d_requests %d requests", mode, CONCURRENCY, done))
print(string.format("http_batch_%s_c%d_failed %d requests", mode, CONCURRENCY, failed))
print(string.format("http_batch_%s_c%d_rate %.0f req/s", mode, CONCURRENCY, done / elapsed))
if latency:count() > 0 then
  print(string.format("http_batch_%s_c%d_latency %.3f %.3f %.3f ms (p50 p99 p99.9, %d batches merged)", mode,
    CONCURRENCY, latency:percentile(50) * 1e3, latency:percentile(99) * 1e3, latency:percentile(99.9) * 1e3,
    done // BATCH))
end
