-- redis_bench.lua - HSET throughput through c:pipeline, beside redis-benchmark.
--
--   kvengine serve bindings/bench/redis_bench.lua [host] [port] [clients] [batch] [ops]
--
-- Defaults: 127.0.0.1 6379, 1 client, batches of 32, 200000 HSETs in all.
-- Each client is a task with its own connection, sending one batch at a time
-- (compare with `redis-benchmark -t hset -P <batch> -c <clients>`).
-- Prints one line: redis_hset_pipeline<batch> <ops per second> ops/s

local redis = require("redis")

local host = arg[1] or "127.0.0.1"
local port = math.tointeger(tonumber(arg[2] or "6379"))
local clients = math.tointeger(tonumber(arg[3] or "1"))
local batch = math.tointeger(tonumber(arg[4] or "32"))
local ops = math.tointeger(tonumber(arg[5] or "200000"))
assert(port and clients and batch and ops and clients > 0 and batch > 0, "bad arguments")

local key = "kvengine:bench:" .. math.random(1 << 30)
-- 4096 distinct fields, made once: the loop measures the client, not Lua's
-- number-to-string conversion (redis-benchmark's field is a constant).
local FIELDS = {}
for i = 0, 4095 do FIELDS[i] = "f" .. i end

local function client(share)
  local c <close> = assert(redis.connect { host = host, port = port, timeout = 30 })
  local done = 0
  while done < share do
    local n = math.min(batch, share - done)
    local base = done
    c:pipeline(function(p)
      for i = 1, n do p:call("HSET", key, FIELDS[(base + i) % 4096], "value") end
    end)
    done = done + n
  end
end

local t0 = now()
local tasks = {}
for i = 1, clients do
  local share = ops // clients + (i <= ops % clients and 1 or 0)
  tasks[i] = spawn(client, share)
end
for _, t in ipairs(tasks) do t:wait() end
local elapsed = now() - t0

local c <close> = assert(redis.connect { host = host, port = port })
c:call("DEL", key)
print(string.format("redis_hset_pipeline%d %.0f ops/s", batch, ops / elapsed))
