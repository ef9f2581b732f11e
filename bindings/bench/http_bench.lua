-- HTTP benchmark, run as `kvengine serve bindings/bench/http_bench.lua [PORT] [MODE] [SECONDS]`.
--
--   MODE "batch" (default): serve on PORT (0: any free port) and measure
--     http.batch with concurrency 32 against that server, in this process,
--     for SECONDS (default 3); then close and exit.
--   MODE "serve": only serve on PORT until SIGTERM/SIGINT, for an outside
--     load generator (wrk -c 32 http://127.0.0.1:PORT/).
--   MODE "client": serve nothing; measure http.batch against the server
--     already on PORT (another process's: the same server wrk measures).
--
-- Output: `name value unit` lines.  The handler answers every request with a
-- small fixed body, so the figures are the engine's per-request cost: parser,
-- task per request, curl multi on the same loop.

local http = require "http"

local port = tonumber(arg[1] or "0") or 0
local mode = arg[2] or "batch"
local seconds = tonumber(arg[3] or "3") or 3
local CONCURRENCY = 32
local BATCH = 2000

local body = "hello from kvengine\n"
local srv = mode ~= "client" and assert(http.listen {
  host = "127.0.0.1",
  port = port,
  handler = function(_, res)
    res:header("Content-Type", "text/plain")
    res:finish(body)
  end,
})
if srv then
  port = srv:port()
  print(string.format("http_bench_port %d port", port))
  io.stdout:flush()
end

if mode == "serve" then return end -- the open server keeps the loop running
assert(mode == "batch" or mode == "client", "mode must be batch, serve or client")

local url = "http://127.0.0.1:" .. port .. "/"
local reqs = {}
for i = 1, BATCH do reqs[i] = url end

-- One batch; returns the number of requests that failed.
local function run_batch()
  local failed = 0
  for _, r in ipairs(http.batch(reqs, { concurrency = CONCURRENCY })) do
    if r.err or r.status ~= 200 or r.body ~= body then failed = failed + 1 end
  end
  return failed
end

run_batch() -- warm up: connections, pools, allocator
local done, failed = 0, 0
local t0 = now()
repeat
  failed = failed + run_batch()
  done = done + BATCH
until now() - t0 >= seconds
local elapsed = now() - t0

print(string.format("http_batch_c%d_requests %d requests", CONCURRENCY, done))
print(string.format("http_batch_c%d_failed %d requests", CONCURRENCY, failed))
print(string.format("http_batch_c%d_rate %.0f req/s", CONCURRENCY, done / elapsed))
print(string.format("http_batch_c%d_mean_time %.1f us/req", CONCURRENCY, elapsed / done * 1e6))
if srv then srv:close() end
