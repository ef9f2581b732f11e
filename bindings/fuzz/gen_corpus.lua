-- gen_corpus.lua - writes the seed corpus of the KV-event fuzzer: a few
-- batches in every dialect, plus hand-made payloads the encoder never writes
-- (raw-bytes hashes, a map batch, an unknown event, an old sim's event).
--
--   kvengine serve bindings/fuzz/gen_corpus.lua [OUTDIR]
--
-- OUTDIR defaults to bindings/fuzz/corpus/events beside this script.

local kv = require("kv")

local out = ... or ((arg and arg[0] or ""):match("^(.*/)") or "./") .. "corpus/events"

local function range(a, b)
  local t = {}
  for i = a, b do t[#t + 1] = i end
  return t
end

local batches = {
  one_block = { ts = 1700000000.5, dp_rank = 0,
    events = { kv.stored { hashes = { 0x1122334455667788 }, tokens = range(1, 16) } } },
  mixed = { ts = 1700000001.25, dp_rank = 1, events = {
    kv.stored { hashes = { 1, 0x9122334455667788, -1 }, tokens = range(100, 147), parent = 7,
      lora_id = 2, lora_name = "sql-lora" },
    kv.removed { hashes = { 0x9122334455667788 } },
    kv.cleared(),
  } },
  newer_fields = { ts = 2.0, dp_rank = 0, events = {
    kv.stored { hashes = { 5 }, tokens = { 4294967295, 0 }, block_size = 1, group_idx = 1,
      kv_cache_spec_kind = "sliding_window", kv_cache_spec_sliding_window = 4096 },
    kv.removed { hashes = { 5 }, group_idx = 1 } } },
  empty = { ts = 0.0, events = {} },
}

local raw = {
  -- [ts, [["BlockStored", [bin16], bin16, [1], 16, nil]], 0]
  raw_bytes_hashes = "\x93\xcb\x41\xd9\x54\xfc\x40\x20\x00\x00\x91\x96\xabBlockStored\x91\xc4\x10" ..
    string.rep("\xab", 16) .. "\xc4\x10" .. string.rep("\xcd", 16) .. "\x91\x01\x10\xc0\x00",
  -- {ts = 5.0, events = [["AllBlocksCleared"], ["Future", 1]], data_parallel_rank = 2}
  map_batch = "\x83\xa2ts\xcb\x40\x14\x00\x00\x00\x00\x00\x00\xa6events\x92\x91\xb0AllBlocksCleared" ..
    "\x92\xa6Future\x01\xb2data_parallel_rank\x02",
  -- an old sim's BlockStored: [tag, [h], nil, nil, 0, nil]
  old_sim = "\x93\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00\x91\x96\xabBlockStored\x91\xcf" ..
    "\x00\x00\x00\x00\x00\x00\x00\x07\xc0\xc0\x00\xc0\x00",
}

local n = 0
local function write(name, bytes)
  local f = assert(io.open(out .. "/" .. name, "wb"))
  f:write(bytes)
  f:close()
  n = n + 1
end

for bname, b in pairs(batches) do
  for _, d in ipairs(kv.events.dialects) do write(d .. "-" .. bname, kv.events.encode(b, d)) end
end
for name, bytes in pairs(raw) do
  assert(kv.events.decode(bytes), name)
  write("raw-" .. name, bytes)
end
print(string.format("wrote %d seeds to %s", n, out))
