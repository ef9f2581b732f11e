-- kv_bench.lua - throughput of the kv module's hot paths.
--
--   kvengine serve bindings/bench/kv_bench.lua [SECONDS]
--
-- Prints, one line each: Kthena block hashes per second over 2,048-token
-- prompts (128 blocks of 16), the sim tokenizer's throughput, and KV events
-- encoded and decoded per second in each dialect (a batch of 16 BlockStored
-- events of one 16-token block each, as the sim batches them).  SECONDS
-- (default 0.5) is the time spent on each measurement.

local kv = require("kv")

local clock = type(now) == "function" and now or os.clock
local budget = tonumber((...)) or 0.5

-- Run fn in growing rounds until `budget` seconds have passed; return
-- calls per second.
local function rate(fn)
  local calls, n, t0 = 0, 1, clock()
  local elapsed = 0
  repeat
    for _ = 1, n do fn() end
    calls = calls + n
    n = n * 2
    elapsed = clock() - t0
  until elapsed >= budget
  return calls / elapsed
end

local function line(what, value, unit)
  print(string.format("%-44s %14.0f %s", what, value, unit))
end

local prompt = {}
for i = 1, 2048 do prompt[i] = (i * 2654435761) % 4294967296 end

local per_call = #kv.block_hashes(prompt)
line("block_hashes, 2,048-token prompt", rate(function() kv.block_hashes(prompt) end) * per_call,
  "block hashes/s")

local text = string.rep("The quick brown fox jumps over the lazy dog, again and again. ", 160)
local ntok = #kv.tokenize(text)
line(string.format("tokenize, %d-byte prompt", #text), rate(function() kv.tokenize(text) end) * ntok,
  "tokens/s")

local events = {}
for i = 1, 16 do
  local toks = {}
  for j = 1, 16 do toks[j] = prompt[(i - 1) * 16 + j] end
  events[i] = kv.stored { hashes = { kv.block_hash(toks) | (1 << 63) }, tokens = toks }
end
local batch = { ts = 1700000000.5, dp_rank = 0, events = events }

for _, d in ipairs(kv.events.dialects) do
  local bytes = kv.events.encode(batch, d)
  line("encode " .. d, rate(function() kv.events.encode(batch, d) end) * #events, "events/s")
  line("decode " .. d, rate(function() kv.events.decode(bytes) end) * #events, "events/s")
end
