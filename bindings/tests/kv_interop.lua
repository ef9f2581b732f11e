-- Interoperability of kv.events with an independent msgpack implementation:
-- Debian's python3-msgpack, driven through bindings/tests/interop_events.py.
-- Python reads what the engine writes, and the engine reads what Python
-- writes, hashes above 2^63 and raw-bytes hashes included.

local kv = require("kv")
local json = require("json")

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local PYTHON = "/usr/bin/python3" -- Debian's, which has python3-msgpack
local SCRIPT = here .. "interop_events.py"

local function tohex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function fromhex(h)
  return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end))
end

-- Run the peer in `mode` over lines; return its output lines.
local function peer(mode, lines)
  local ok, proc = pcall(require, "proc")
  if not ok then skip("the proc module is not available") end
  local code, out, err = proc.run { argv = { PYTHON, SCRIPT, mode },
    input = table.concat(lines, "\n") .. "\n", timeout = 30 }
  if code == nil then infra_error("cannot run " .. PYTHON .. ": " .. tostring(out)) end
  if code == 3 then infra_error("python3-msgpack is missing: " .. tostring(err)) end
  expect(code):eq(0, "interop_events.py " .. mode .. ": " .. tostring(err))
  local res = {}
  for line in out:gmatch("[^\n]+") do res[#res + 1] = line end
  expect(#res):eq(#lines, "one output line per input line")
  return res
end

local function I(n) return "i:" .. kv.u64(n) end -- an unsigned integer, tagged
local function S(s) return "s:" .. s end
local null = json.null

local H1, H2 = 0x9122334455667788, -1 -- both above 2^63 as uint64
local batch = { ts = 1700000000.5, dp_rank = 0, events = {
  kv.stored { hashes = { H1, 5 }, tokens = { 1, 2, 3, 4 }, block_size = 2, parent = H2, lora_id = 1,
    lora_name = "sql" },
  kv.removed { hashes = { H2 } },
  kv.cleared(),
} }

local TOK = { "i:1", "i:2", "i:3", "i:4" }

-- What python-msgpack must see for each dialect (ints exact, any width).
local expected = {
  ["vllm-0.9"] = { "f:1700000000.5", {
    { S "BlockStored", { I(H1), "i:5" }, I(H2), TOK, "i:2", "i:1" },
    { S "BlockRemoved", { I(H2) } },
    { S "AllBlocksCleared" } } },
  ["vllm-array"] = { "f:1700000000.5", {
    { S "BlockStored", { I(H1), "i:5" }, I(H2), TOK, "i:2", "i:1", S "GPU", S "sql" },
    { S "BlockRemoved", { I(H2) }, S "GPU" },
    { S "AllBlocksCleared" } }, "i:0" },
  ["vllm-map"] = { "f:1700000000.5", {
    { map = { { S "type", S "BlockStored" }, { S "block_hashes", { I(H1), "i:5" } },
      { S "parent_block_hash", I(H2) }, { S "token_ids", TOK }, { S "block_size", "i:2" },
      { S "lora_id", "i:1" }, { S "medium", S "GPU" }, { S "lora_name", S "sql" } } },
    { map = { { S "type", S "BlockRemoved" }, { S "block_hashes", { I(H2) } }, { S "medium", S "GPU" } } },
    { map = { { S "type", S "AllBlocksCleared" } } } }, "i:0" },
  ["sim-legacy"] = { "f:1700000000.5", {
    { S "BlockStored", { I(H1), "i:5" }, I(H2), TOK, "i:2", "i:1", S "GPU", S "sql", null },
    { S "BlockRemoved", { I(H2) }, S "GPU" },
    { S "AllBlocksCleared" } }, "i:0" },
  ["sglang"] = { "f:1700000000.5", {
    { S "BlockStored", { I(H1), "i:5" }, I(H2), TOK, "i:2", "i:1", S "GPU" },
    { S "BlockRemoved", { I(H2) }, S "GPU" },
    { S "AllBlocksCleared" } }, "i:0" },
}
-- With every field set, and integer widths not shown, the sim's maps read as vLLM's.
expected["sim-map"] = expected["vllm-map"]

test("python-msgpack reads every dialect the engine writes", function()
  local lines = {}
  for i, d in ipairs(kv.events.dialects) do lines[i] = tohex(kv.events.encode(batch, d)) end
  local out = peer("decode", lines)
  for i, d in ipairs(kv.events.dialects) do
    expect(json.decode(out[i])):eq(expected[d], d)
  end
end)

test("the engine reads what python-msgpack writes", function()
  local digest = string.rep("ab", 24) .. "8899aabbccddeeff" -- 32 raw bytes, the last 8 count
  local inputs = {
    -- vLLM >= 0.26: map events with defaulted fields, extra_keys [None], an unknown key.
    { '["f:1789095808.83",[{"map":[["s:type","s:BlockStored"],' ..
      '["s:block_hashes",["i:18446744073709551615","i:7"]],["s:parent_block_hash",null],' ..
      '["s:token_ids",["i:1","i:2"]],["s:block_size","i:16"],["s:lora_id",null],["s:medium","s:GPU"],' ..
      '["s:lora_name",null],["s:extra_keys",[null]],["s:group_idx","i:0"],' ..
      '["s:kv_cache_spec_kind","s:full_attention"],["s:novel","e:{}"]]}],"i:0"]',
      { ts = 1789095808.83, dp_rank = 0, events = { { kind = "stored", hashes = { -1, 7 },
        tokens = { 1, 2 }, block_size = 16, medium = "GPU", group_idx = 0,
        kv_cache_spec_kind = "full_attention" } } }, "vllm-map", false },
    -- vLLM with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: 32-byte hashes as bin.
    { '["f:1.0",[["s:BlockStored",["b:' .. digest .. '"],"b:' .. digest .. '",["i:9"],"i:16",null,' ..
      '"s:GPU",null]],"i:3"]',
      { ts = 1.0, dp_rank = 3, events = { { kind = "stored", hashes = { 0x8899aabbccddeeff },
        parent = 0x8899aabbccddeeff, tokens = { 9 }, block_size = 16, medium = "GPU" } } },
      "vllm-array", false },
    -- A 12-field vLLM 0.2x BlockStored with extra_keys = [None]: extra fields are ignored.
    { '["f:2.5",[["s:BlockStored",["i:9223372036854775808"],null,["i:4294967295"],"i:1",null,' ..
      '"s:CPU",null,[null],"i:1","s:sliding_window","i:4096"]],"i:0"]',
      { ts = 2.5, dp_rank = 0, events = { { kind = "stored", hashes = { math.mininteger },
        tokens = { 4294967295 }, block_size = 1, medium = "CPU", group_idx = 1,
        kv_cache_spec_kind = "sliding_window", kv_cache_spec_sliding_window = 4096 } } },
      "vllm-array", true },
    -- SGLang: attn_dp_rank None, BlockRemoved without medium.
    { '["f:3.0",[["s:BlockRemoved",["i:1","i:2"]]],null]',
      { ts = 3.0, events = { { kind = "removed", hashes = { 1, 2 } } } }, "sglang", true },
  }
  local lines = {}
  for i, c in ipairs(inputs) do lines[i] = c[1] end
  local out = peer("encode", lines)
  for i, c in ipairs(inputs) do
    local bytes = fromhex(out[i])
    local b, d = kv.events.decode(bytes)
    expect(d):eq(c[3], "input " .. i .. ": " .. tostring(d))
    expect(b):eq(c[2], "input " .. i)
    local bk, err = kv.events.decode(bytes, { profile = "kthena" })
    if c[4] then
      expect(bk):eq(c[2], "input " .. i .. " is accepted by Kthena's decoder")
    else
      expect(bk):is_nil("input " .. i .. " is rejected by Kthena's decoder")
      expect(err):matches("^kthena: ")
    end
  end
end)

test("python re-packing keeps every batch; other widths name the shape's dialect", function()
  local lines = {}
  for i, d in ipairs(kv.events.dialects) do lines[i] = tohex(kv.events.encode(batch, d)) end
  local out = peer("repack", lines)
  for i, d in ipairs(kv.events.dialects) do
    local mine = kv.events.decode(fromhex(lines[i]))
    local b, name = kv.events.decode(fromhex(out[i]))
    expect(b):eq(mine, d .. ": same batch from python's bytes")
    local same_bytes = out[i] == lines[i]
    if d == "sim-legacy" or d == "sim-map" then
      expect(same_bytes):is_false(d .. " uses fixed widths that python-msgpack compacts")
      expect(name):eq(d == "sim-legacy" and "vllm-array" or "vllm-map", d)
    else
      expect(same_bytes):is_true(d .. ": compact widths, as python-msgpack writes them")
      expect(name):eq(d)
    end
  end
end)
