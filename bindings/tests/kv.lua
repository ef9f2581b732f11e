-- Tests of the kv module: Kthena's block hashing, the sim's tokenizer, Redis
-- key helpers, uint64 conversions, and the KV-event wire dialects.

local kv = require("kv")
local json = require("json")

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

-- ------------------------------------------------------------- helpers

local function fromhex(h)
  h = h:gsub("%s", "")
  return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end))
end

local function tohex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function split(s, sep)
  local out = {}
  if s == "" then return out end
  for part in (s .. sep):gmatch("(.-)" .. sep) do out[#out + 1] = part end
  return out
end

local function ints(csv)
  local out = {}
  for i, x in ipairs(split(csv, ",")) do out[i] = kv.u64(x) end
  return out
end

local function range(a, b)
  local t = {}
  for i = a, b do t[#t + 1] = i end
  return t
end

-- FNV-1a 32 of a piece, to state the tokenizer's expected ids by their text.
local function fnv(s)
  local h = 2166136261
  for i = 1, #s do h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff end
  return h
end

local function ids(pieces)
  local out = {}
  for i, p in ipairs(pieces) do out[i] = fnv(p) end
  return out
end

-- A small msgpack writer for hand-made payloads (malformed shapes included).
local mp = {}
function mp.int(n)
  if n >= 0 and n < 128 then return string.char(n) end
  return "\xd3" .. string.pack(">i8", n)
end
function mp.u64(n) return "\xcf" .. string.pack(">I8", n) end
function mp.f64(x) return "\xcb" .. string.pack(">d", x) end
mp.null = "\xc0"
function mp.str(s)
  if #s < 32 then return string.char(0xa0 + #s) .. s end
  return "\xd9" .. string.char(#s) .. s
end
function mp.bin(s) return "\xc4" .. string.char(#s) .. s end
function mp.arr(items)
  local n = #items
  local head = n < 16 and string.char(0x90 + n) or "\xdc" .. string.pack(">I2", n)
  return head .. table.concat(items)
end
function mp.map(pairs_)
  local n = #pairs_
  local parts = { n < 16 and string.char(0x80 + n) or "\xde" .. string.pack(">I2", n) }
  for _, kvp in ipairs(pairs_) do parts[#parts + 1] = kvp[1] .. kvp[2] end
  return table.concat(parts)
end

local function read_vectors(name)
  local rows = {}
  local n = 0
  for line in io.lines(here .. "vectors/" .. name) do
    n = n + 1
    if not line:find("^#") and line ~= "" then rows[#rows + 1] = { n = n, cols = split(line, "\t") } end
  end
  return rows
end

-- ------------------------------------------------------------- vectors

for _, row in ipairs(read_vectors("block_hashes.tsv")) do
  local tokens, want = row.cols[1], row.cols[2]
  test("block_hashes.tsv:" .. row.n .. " block_hash{" .. tokens .. "}", function()
    local toks = {}
    for i, x in ipairs(split(tokens, ",")) do toks[i] = math.tointeger(tonumber(x)) end
    local h = kv.block_hash(toks)
    expect(kv.u64(h)):eq(want, "standardized hash of " .. tokens)
    expect(h):eq(kv.u64(want))
    expect(h >= 0):is_true("the top bit is cleared")
  end)
end

local function param(params, name)
  return tonumber(params:match(name .. "=(%-?%d+)"))
end

for _, row in ipairs(read_vectors("kthena_vectors.tsv")) do
  local kind, input, params, want = row.cols[1], row.cols[2], row.cols[3], row.cols[4]
  test("kthena_vectors.tsv:" .. row.n .. " " .. kind, function()
    if kind == "tokenize" then
      expect(kv.tokenize(json.decode(input))):eq(ints(want), input)
    elseif kind == "tokenize_chat" then
      expect(kv.tokenize_chat(json.decode(input))):eq(ints(want), input)
    elseif kind == "block_hashes" then
      local toks = ints(input)
      local opts = { block_size = param(params, "block_size"), max_blocks = param(params, "max_blocks") }
      expect(kv.block_hashes(toks, opts)):eq(ints(want), params)
    elseif kind == "score" then
      -- No kv function: the vector pins the router's double-precision formula.
      local matched = math.tointeger(tonumber(input:match("matched=(%d+)")))
      local total = math.tointeger(tonumber(params:match("total=(%d+)")))
      expect(math.floor(matched / total * 100)):eq(math.tointeger(tonumber(want)), input .. " " .. params)
    else
      fail("unknown vector kind " .. kind)
    end
  end)
end

-- ------------------------------------------------------------- hashing

test("block_hashes: chunks are hashed independently, partial tail kept", function()
  local toks = range(1, 40)
  local hs = kv.block_hashes(toks)
  expect(#hs):eq(3)
  expect(hs[1]):eq(kv.block_hash(range(1, 16)))
  expect(hs[2]):eq(kv.block_hash(range(17, 32)))
  expect(hs[3]):eq(kv.block_hash(range(33, 40)), "the partial chunk is hashed as it is")
  expect(kv.block_hashes(range(1, 32))):eq({ hs[1], hs[2] }, "no partial chunk when it divides")
end)

test("block_hashes: options <= 0 or absent mean the defaults", function()
  local toks = range(1, 16 * 130)
  local dflt = kv.block_hashes(toks)
  expect(#dflt):eq(128, "max_blocks defaults to 128")
  expect(kv.block_hashes(toks, {})):eq(dflt)
  expect(kv.block_hashes(toks, { block_size = 0, max_blocks = -5 })):eq(dflt)
  expect(kv.block_hashes(toks, { block_size = 16, max_blocks = 128 })):eq(dflt)
  expect(#kv.block_hashes(toks, { max_blocks = 200 })):eq(130)
  expect(kv.block_hashes({})):eq({}, "no tokens, no blocks")
  expect(kv.block_hash({})):eq(0, "an empty chunk hashes to 0")
end)

test("block_hashes: bad input raises", function()
  expect(function() kv.block_hash(nil) end):raises("table expected")
  expect(function() kv.block_hash({ 1, -1 }) end):raises("tokens%[2%]")
  expect(function() kv.block_hash({ 4294967296 }) end):raises("uint32")
  expect(function() kv.block_hash({ 1.5 }) end):raises("uint32")
  expect(function() kv.block_hash({ "1" }) end):raises("uint32")
  expect(function() kv.block_hashes({ 1 }, { block_size = "x" }) end):raises("block_size")
  expect(kv.block_hash({ 3.0 })):eq(kv.block_hash({ 3 }), "an integral float is that integer")
end)

test("block_key and owner build the router's Redis names", function()
  expect(kv.block_key("llama", 42)):eq("matrix:kv:block:llama@42")
  expect(kv.block_key("m", 0x9122334455667788)):eq("matrix:kv:block:m@10457977653291284360")
  expect(kv.block_key("m", "10457977653291284360")):eq("matrix:kv:block:m@10457977653291284360")
  expect(kv.block_key("m", -1)):eq("matrix:kv:block:m@18446744073709551615")
  expect(kv.owner("pod-0", "default")):eq("pod-0.default")
  expect(function() kv.block_key("m", "x1") end):raises("uint64")
  expect(function() kv.owner("p") end):raises("string expected")
end)

test("the prefixes, mapping keys and topics the harness uses are spelt as Kthena and the sim spell them", function()
  expect(kv.block_key_prefix()):eq("matrix:kv:block:")
  expect(kv.block_key_prefix("m")):eq("matrix:kv:block:m@")
  expect(kv.mapping_key("vllm", "p1.ns", -1)):eq("vllm:kv:block:p1.ns@18446744073709551615")
  expect(kv.mapping_key("sglang", "p1.ns", "42")):eq("sglang:kv:block:p1.ns@42")
  expect(kv.mapping_key_prefix("vllm", "p1.ns")):eq("vllm:kv:block:p1.ns@")
  expect(kv.topic("127.1.2.11", "m", 8000)):eq("kv@127.1.2.11:8000@m")
  expect(kv.topic("127.1.2.11", "m")):eq("kv@127.1.2.11@m")
  expect(function() kv.mapping_key("vllm", "p1.ns", "x") end):raises("uint64")
end)

-- ------------------------------------------------------------- u64

test("u64: integers to unsigned decimal strings", function()
  expect(kv.u64(0)):eq("0")
  expect(kv.u64(1)):eq("1")
  expect(kv.u64(-1)):eq("18446744073709551615")
  expect(kv.u64(math.maxinteger)):eq("9223372036854775807")
  expect(kv.u64(math.mininteger)):eq("9223372036854775808")
  expect(kv.u64(0x9122334455667788)):eq("10457977653291284360")
  expect(kv.u64(3.0)):eq("3")
end)

test("u64: decimal strings to the integer with the same bits", function()
  expect(kv.u64("0")):eq(0)
  expect(kv.u64("18446744073709551615")):eq(-1)
  expect(kv.u64("9223372036854775807")):eq(math.maxinteger)
  expect(kv.u64("9223372036854775808")):eq(math.mininteger)
  expect(kv.u64("10457977653291284360")):eq(0x9122334455667788)
  expect(kv.u64("007")):eq(7)
  expect(math.ult(kv.u64("9223372036854775807"), kv.u64("9223372036854775808"))):is_true()
end)

test("u64: junk and overflow raise", function()
  for _, bad in ipairs({ "", "-1", "+1", " 1", "1 ", "18446744073709551616", "99999999999999999999",
    "100000000000000000000", "1e5", "0x10", "abc", "1.0" }) do
    expect(function() kv.u64(bad) end):raises("not an unsigned 64%-bit decimal", bad)
  end
  expect(function() kv.u64(1.5) end):raises("exact 64%-bit integer")
  expect(function() kv.u64(2 ^ 64) end):raises("exact 64%-bit integer")
  expect(function() kv.u64(nil) end):raises("integer or string expected")
  expect(function() kv.u64({}) end):raises("integer or string expected")
end)

test("u64: round trip of random 64-bit values", function()
  for _ = 1, 2000 do
    local x = math.random(math.mininteger, math.maxinteger)
    expect(kv.u64(kv.u64(x))):eq(x)
  end
end)

-- ------------------------------------------------------------- tokenizer

test("tokenize: the sim's token class, piece by piece", function()
  local cases = {
    { "", {} },
    { "   \t\n", {} },
    { "a_b", { "a_b" } },
    { "_b", { "_", "b" } },
    { "__x", { "_", "_", "x" } },
    { "x\vy", { "x", "y" } },                         -- \v is no RE2 \s
    { "a\r\n\t\f b", { "a\r\n\t\f ", "b" } },
    { "a | b `c`", { "a ", "b ", "c" } },            -- | and ` make no token
    { "h\xc3\xa9llo w\xffrld", { "h", "llo ", "w", "rld" } }, -- non-ASCII is skipped
    { "--x", { "-", "-", "x" } },
    { "{\"k\": [1, 2.5]}", { "{", "\"", "k", "\"", ": ", "[", "1", ", ", "2", ".", "5", "]", "}" } },
    { "\\/@#$%^&*()+~<>=';?!", { "\\", "/", "@", "#", "$", "%", "^", "&", "*", "(", ")", "+", "~", "<",
      ">", "=", "'", ";", "?", "!" } },
    { "  lead", { "lead" } },
    { "Ünïcode", { "n", "code" } },
  }
  for _, c in ipairs(cases) do
    expect(kv.tokenize(c[1])):eq(ids(c[2]), string.format("%q", c[1]))
  end
end)

test("tokenize_chat: messages rendered as the sim renders them", function()
  local function same(msgs, text)
    expect(kv.tokenize_chat(msgs)):eq(kv.tokenize(text), text)
  end
  same({}, "")
  same({ { role = "user", content = "Hi there" } }, "### user: Hi there\n")
  same({ { role = "user", content = { { type = "text", text = "a" }, { type = "text", text = "b" } } } },
    "### user: a\nb\n")
  same({ { role = "user", content = { { type = "image_url", image_url = { url = "http://x/i.png" } },
    { type = "text", text = "what?" } } } }, "### user: image: http://x/i.png\nwhat?\n")
  same({ { role = "tool", tool_call_id = "call_1", content = "sunny" } }, "### tool(call_1): sunny\n")
  same({ { role = "assistant", tool_calls = { { ["function"] = { name = "get", arguments = "{\"q\":1}" } } } } },
    "### assistant: [get({\"q\":1})]\n")
  same({ { content = "no role" } }, "### : no role\n")
  expect(function() kv.tokenize_chat({ "x" }) end):raises("messages%[1%]")
  expect(function() kv.tokenize_chat({ { role = 5 } }) end):raises("role must be a string")
  expect(function() kv.tokenize_chat({ { content = 5 } }) end):raises("content")
end)

-- ------------------------------------------------------------- events

local TOKENS16 = range(1, 16)
local H = 0x1122334455667788

-- A batch as vLLM writes it (vllm-array): ts 1700000000.5, one block, hash
-- 0x1122334455667788, tokens 1..16.
local EXAMPLE = fromhex("93 cb41d954fc40200000 91 98 ab") .. "BlockStored" ..
  fromhex("91 cf1122334455667788 c0 dc0010 0102030405060708090a0b0c0d0e0f10 10 c0 a3") .. "GPU" ..
  fromhex("c0 00")

local function example_batch()
  return { ts = 1700000000.5, dp_rank = 0,
    events = { kv.stored { hashes = { H }, tokens = TOKENS16, block_size = 16 } } }
end

test("encode reproduces a vLLM batch byte for byte", function()
  local bytes = kv.events.encode(example_batch(), "vllm-array")
  expect(tohex(bytes)):eq(tohex(EXAMPLE))
  expect(#bytes):eq(62)
  expect(kv.events.encode(example_batch())):eq(bytes, "vllm-array is the default dialect")
end)

test("encode: each dialect's layout and integer widths", function()
  local b = example_batch()
  local tag = fromhex("ab") .. "BlockStored"
  local hashes, gpu = fromhex("91 cf1122334455667788"), fromhex("a3") .. "GPU"
  local ts = fromhex("cb41d954fc40200000")
  local compact = fromhex("dc0010 0102030405060708090a0b0c0d0e0f10")
  local fixed = fromhex("dc0010")
  for i = 1, 16 do fixed = fixed .. "\xce" .. string.pack(">I4", i) end

  expect(tohex(kv.events.encode(b, "vllm-0.9"))):eq(tohex(fromhex("92") .. ts .. fromhex("91 96") .. tag ..
    hashes .. fromhex("c0") .. compact .. fromhex("10 c0")), "batch of 2, event of 6")

  local legacy = fromhex("93") .. ts .. fromhex("91 99") .. tag .. hashes .. fromhex("cf0000000000000000") ..
    fixed .. fromhex("10 c0") .. gpu .. fromhex("c0 c0 00")
  expect(tohex(kv.events.encode(b, "sim-legacy"))):eq(tohex(legacy), "uint64 cf, uint32 ce, parent 0")
  expect(#legacy):eq(135)

  local vmap = kv.events.encode(b, "vllm-map")
  expect(#vmap):eq(144, "the map example of the research notes is 144 bytes")
  expect(vmap:sub(1, 17)):eq(fromhex("93") .. ts .. fromhex("91 88") .. mp.str("type"))

  local smap = kv.events.encode(b, "sim-map")
  expect(smap:sub(12, 12)):eq("\x86", "nil lora_id and lora_name are omitted")
  expect(smap:find(fixed, 1, true) ~= nil):is_true("tokens as ce")
  expect(smap:find("lora", 1, true)):is_nil()

  local sg = kv.events.encode(b, "sglang")
  expect(tohex(sg)):eq(tohex(fromhex("93") .. ts .. fromhex("91 97") .. tag .. hashes .. fromhex("c0") ..
    compact .. fromhex("10 c0") .. gpu .. fromhex("00")), "vllm-0.9 plus medium")
  b.dp_rank = nil
  expect(sg:sub(-1)):eq("\x00")
  expect(kv.events.encode(b, "sglang"):sub(-1)):eq("\xc0", "attn_dp_rank stays nil when unset")
  expect(kv.events.encode(b, "vllm-array"):sub(-1)):eq("\x00", "vLLM fills in its rank, 0")
end)

test("encode: removed and cleared events in every dialect", function()
  local rm = { ts = 1.0, dp_rank = 0, events = { kv.removed { hashes = { H } } } }
  expect(kv.events.encode(rm, "vllm-array"):sub(11)):eq(fromhex("91 93 ac") .. "BlockRemoved" ..
    fromhex("91 cf1122334455667788 a3") .. "GPU" .. "\x00")
  expect(kv.events.encode(rm, "vllm-0.9"):sub(11)):eq(fromhex("91 92 ac") .. "BlockRemoved" ..
    fromhex("91 cf1122334455667788"))
  expect(kv.events.encode(rm, "vllm-map"):sub(12, 12)):eq("\x83")
  local cl = { ts = 1.0, events = { kv.cleared() } }
  for _, d in ipairs(kv.events.dialects) do
    local bytes = kv.events.encode(cl, d)
    local map = d == "vllm-map" or d == "sim-map"
    local want = map and (fromhex("81") .. mp.str("type") .. mp.str("AllBlocksCleared"))
      or (fromhex("91 b0") .. "AllBlocksCleared")
    expect(bytes:sub(12, 11 + #want)):eq(want, d)
  end
end)

test("encode: a default ts is the current time", function()
  local b = kv.events.decode(kv.events.encode({ events = {} }))
  expect(b.ts):near(os.time(), 5)
end)

test("constructors check fields and fill defaults", function()
  local s = kv.stored { hashes = { "10457977653291284360", 5 } }
  expect(s):eq({ kind = "stored", hashes = { 0x9122334455667788, 5 }, tokens = {}, block_size = 16,
    medium = "GPU" })
  expect(kv.stored { hashes = {}, medium = false }.medium):is_nil("medium = false means none")
  expect(kv.removed { hashes = { 1 } }):eq({ kind = "removed", hashes = { 1 }, medium = "GPU" })
  expect(kv.cleared()):eq({ kind = "cleared" })
  expect(kv.cleared {}):eq({ kind = "cleared" })
  expect(function() kv.stored { hashes = { 1 }, hash = 2 } end):raises("kv%.stored: unknown option `hash`; did you mean `hashes`%?")
  expect(function() kv.stored { tokens = { 1 } } end):raises("hashes must be a list")
  expect(function() kv.stored { hashes = { "x" } } end):raises("hashes%[1%]")
  expect(function() kv.stored { hashes = { 1 }, tokens = { -1 } } end):raises("tokens%[1%]")
  expect(function() kv.stored { hashes = { 1 }, lora_id = "a" } end):raises("lora_id")
  expect(function() kv.stored { hashes = { 1 }, medium = 3 } end):raises("medium")
  expect(function() kv.removed { hashes = { 1 }, tokens = {} } end):raises("kv%.removed: unknown option `tokens`")
  expect(function() kv.cleared { x = 1 } end):raises("kv%.cleared: unknown option `x`")
  expect(function() kv.block_hashes({ 1 }, { block_sise = 4 }) end)
    :raises("kv%.block_hashes: unknown option `block_sise`; did you mean `block_size`%?")
  expect(function() kv.events.decode("x", { profil = "kthena" }) end)
    :raises("kv%.events%.decode: unknown option `profil`; did you mean `profile`%?")
  expect(function() kv.stored { hashes = { 1 }, kind = "removed" } end):raises("kind must be \"stored\"")
  local ev = kv.events.decode(kv.events.encode({ ts = 1, events = { kv.stored { hashes = { 1 } } } })).events[1]
  expect(kv.stored(ev)):eq(ev, "a decoded event goes back through its constructor")
end)

test("encode: invalid batches raise", function()
  expect(function() kv.events.encode(nil) end):raises("table expected")
  expect(function() kv.events.encode({ events = {} }, "vllm-9") end):raises("invalid option")
  expect(function() kv.events.encode({ ts = "now", events = {} }) end):raises("ts must be a number")
  expect(function() kv.events.encode({ ts = 1 }) end):raises("events must be a list")
  expect(function() kv.events.encode({ events = { 5 } }) end):raises("events%[1%]")
  expect(function() kv.events.encode({ events = { { kind = "other" } } }) end):raises("kind 'other'")
  expect(function() kv.events.encode({ events = { { kind = "stored" } } }) end):raises("hashes")
  expect(function() kv.events.encode({ events = { { kind = "stored", hashes = { {} } } } }) end)
    :raises("hashes%[1%]")
  expect(function() kv.events.encode({ events = {}, dp_rank = 0.5 }) end):raises("dp_rank")
end)

-- A batch that exercises every field, and what each dialect keeps of it.
local function full_batch()
  return { ts = 1700000000.25, dp_rank = 1, events = {
    kv.stored { hashes = { 1, 0x9122334455667788, -1, math.mininteger, math.maxinteger },
      tokens = { 0, 1, 127, 128, 65535, 65536, 4294967295, 7, 8, 9 }, block_size = 2,
      parent = 0x8000000000000001, lora_id = 3, lora_name = "sql-lora" },
    kv.stored { hashes = { 42 }, tokens = TOKENS16, medium = false },
    kv.removed { hashes = { -2, 3 } },
    kv.cleared(),
  } }
end

local function kept_by(d, b)
  local drop_lora_name = d == "vllm-0.9" or d == "sglang"
  local drop_medium = d == "vllm-0.9"
  local sim = d == "sim-legacy" or d == "sim-map"
  for _, ev in ipairs(b.events) do
    if drop_medium then ev.medium = nil end
    if drop_lora_name then ev.lora_name = nil end
    if sim and ev.kind ~= "cleared" then ev.medium = ev.medium or "GPU" end
    if sim and ev.kind == "stored" and d == "sim-legacy" then ev.parent = ev.parent or 0 end
  end
  if d == "vllm-0.9" then b.dp_rank = nil end
  return b
end

test("every dialect round-trips through decode and is named back", function()
  for _, d in ipairs(kv.events.dialects) do
    local bytes = kv.events.encode(full_batch(), d)
    local got, dialect = kv.events.decode(bytes)
    expect(dialect):eq(d, "dialect of " .. d .. " bytes")
    expect(got):eq(kept_by(d, full_batch()), d)
    expect(kv.events.encode(got, d)):eq(bytes, d .. ": re-encoding gives the same bytes")
  end
end)

test("hashes above 2^63 round-trip exactly as wrapped integers", function()
  local hs = { 0x8000000000000000, 0x9122334455667788, -1, -2, 0, math.maxinteger }
  for _, d in ipairs(kv.events.dialects) do
    local b = kv.events.decode(kv.events.encode({ ts = 1, events = { kv.removed { hashes = hs } } }, d))
    expect(b.events[1].hashes):eq(hs, d)
    expect(kv.u64(b.events[1].hashes[2])):eq("10457977653291284360")
  end
end)

test("decode: the most general dialect that explains the bytes", function()
  local cleared = { ts = 2.0, dp_rank = 0, events = { kv.cleared() } }
  expect(select(2, kv.events.decode(kv.events.encode(cleared, "sim-legacy")))):eq("vllm-array",
    "sim-legacy bytes without a BlockStored are also vllm-array bytes")
  expect(select(2, kv.events.decode(kv.events.encode(cleared, "sim-map")))):eq("vllm-map")
  expect(select(2, kv.events.decode(kv.events.encode({ ts = 2.0, events = {} }, "sglang")))):eq("sglang",
    "only sglang leaves the rank nil")
  -- Other producers' widths or extra fields: the shape's most general dialect.
  local odd = mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockRemoved"), mp.arr { mp.int(5) },
    mp.str("GPU"), mp.null, mp.str("future") } }, mp.int(0) }
  expect({ kv.events.decode(odd) }):eq({ { ts = 1.0, dp_rank = 0, events = { { kind = "removed",
    hashes = { 5 }, medium = "GPU" } } }, "vllm-array" })
  local oddmap = mp.arr { mp.f64(1), mp.arr { mp.map { { mp.str("type"), mp.str("BlockRemoved") },
    { mp.str("block_hashes"), mp.arr { mp.u64(5) } }, { mp.str("novel"), mp.arr {} } } }, mp.int(0) }
  expect({ kv.events.decode(oddmap) }):eq({ { ts = 1.0, dp_rank = 0, events = { { kind = "removed",
    hashes = { 5 } } } }, "vllm-map" })
  expect(select(2, kv.events.decode(mp.arr { mp.f64(1), mp.arr {} }))):eq("vllm-0.9")
end)

test("decode: newer vLLM fields are read, extra ones ignored", function()
  local b = { ts = 3.0, dp_rank = 0, events = { kv.stored { hashes = { 9 }, tokens = { 1, 2 },
    group_idx = 1, kv_cache_spec_kind = "full_attention", kv_cache_spec_sliding_window = 128 },
    kv.removed { hashes = { 9 }, group_idx = 1 } } }
  local bytes = kv.events.encode(b, "vllm-array")
  expect(bytes:sub(11, 12)):eq("\x92\x9c", "12 fields when the later ones are set")
  expect({ kv.events.decode(bytes) }):eq({ b, "vllm-array" })
  expect({ kv.events.decode(kv.events.encode(b, "vllm-map")) }):eq({ b, "vllm-map" })
  -- vLLM 0.26's map capture, with extra_keys = [nil] and an unknown key.
  local capture = mp.arr { mp.f64(1789095808.83), mp.arr { mp.map {
    { mp.str("type"), mp.str("BlockStored") }, { mp.str("block_hashes"), mp.arr { mp.u64(-5) } },
    { mp.str("parent_block_hash"), mp.null }, { mp.str("token_ids"), mp.arr { mp.int(1), mp.int(2) } },
    { mp.str("block_size"), mp.int(16) }, { mp.str("lora_id"), mp.null }, { mp.str("medium"), mp.str("GPU") },
    { mp.str("lora_name"), mp.null }, { mp.str("extra_keys"), mp.arr { mp.null } },
    { mp.str("group_idx"), mp.int(0) }, { mp.str("kv_cache_spec_kind"), mp.str("full_attention") },
    { mp.str("somewhere_in_the_future"), mp.map {} } } }, mp.int(0) }
  local got, d = kv.events.decode(capture)
  expect(d):eq("vllm-map")
  expect(got.events[1]):eq({ kind = "stored", hashes = { -5 }, tokens = { 1, 2 }, block_size = 16,
    medium = "GPU", group_idx = 0, kv_cache_spec_kind = "full_attention" })
end)

test("decode: raw-bytes block hashes read as their last 8 bytes, big-endian", function()
  local digest = fromhex("00112233445566778899aabbccddeeff")
  local bytes = mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockStored"), mp.arr { mp.bin(digest),
    mp.bin("\x01\x02") }, mp.bin(digest), mp.arr { mp.int(1) }, mp.int(16), mp.null } }, mp.int(0) }
  local b = kv.events.decode(bytes)
  expect(b.events[1].hashes):eq({ 0x8899aabbccddeeff, 0x0102 })
  expect(b.events[1].parent):eq(0x8899aabbccddeeff)
  local ok, err = kv.events.decode(bytes, { profile = "kthena" })
  expect(ok):is_nil()
  expect(err):matches("^kthena: .*raw bytes")
end)

test("decode: a batch as a map, and an unknown event type, are tolerated", function()
  local bytes = mp.map { { mp.str("ts"), mp.f64(5) }, { mp.str("events"), mp.arr {
    mp.arr { mp.str("AllBlocksCleared") }, mp.arr { mp.str("KVCacheSnapshot"), mp.int(1) } } },
    { mp.str("data_parallel_rank"), mp.int(2) } }
  expect({ kv.events.decode(bytes) }):eq({ { ts = 5.0, dp_rank = 2, events = { { kind = "cleared" },
    { kind = "unknown", type = "KVCacheSnapshot" } } }, "vllm-map" })
  local _, err = kv.events.decode(bytes, { profile = "kthena" })
  expect(err):matches("^kthena: the batch is a map")
  local arr = mp.arr { mp.f64(5), mp.arr { mp.arr { mp.str("KVCacheSnapshot") } }, mp.int(0) }
  expect(select(2, kv.events.decode(arr, { profile = "kthena" }))):matches("^kthena: .*unknown type 'KVCacheSnapshot'")
  expect(function() kv.events.encode(kv.events.decode(arr)) end):raises("kind 'unknown'")
end)

test("decode profile kthena: what Kthena's runtime decoder accepts", function()
  local want = { ["vllm-0.9"] = true, ["vllm-array"] = true, ["vllm-map"] = false,
    ["sim-legacy"] = true, ["sim-map"] = false, sglang = true }
  for _, d in ipairs(kv.events.dialects) do
    local bytes = kv.events.encode(full_batch(), d)
    local b, info = kv.events.decode(bytes, { profile = "kthena" })
    if want[d] then
      expect(info):eq(d, d .. " is accepted")
      expect(b):eq(kv.events.decode(bytes), d .. ": same batch as the tolerant profile")
    else
      expect(b):is_nil(d .. " is rejected")
      expect(info):matches("^kthena: events%[1%] is a map", d)
      expect((kv.events.decode(bytes))):not_nil(d .. " is fine for a tolerant decoder")
    end
  end
  -- An old sim's BlockStored: token_ids nil, 6 fields.
  local old = mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockStored"), mp.arr { mp.u64(7) }, mp.null,
    mp.null, mp.int(0), mp.null } }, mp.int(0) }
  expect(kv.events.decode(old).events[1].tokens):eq({})
  expect(select(2, kv.events.decode(old, { profile = "kthena" }))):matches("^kthena: .*token_ids is nil")
  -- vllm-0.9 minus lora_id: too short for msgspec's struct.
  local short = mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockStored"), mp.arr { mp.int(7) }, mp.null,
    mp.arr { mp.int(1) }, mp.int(16) } } }
  expect((kv.events.decode(short))):not_nil()
  expect(select(2, kv.events.decode(short, { profile = "kthena" }))):matches("^kthena: .*has 4 fields")
  -- Fields after lora_id are nobody's business, whatever their type.
  local junk = mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockStored"), mp.arr { mp.int(7) }, mp.null,
    mp.arr { mp.int(1) }, mp.int(16), mp.null, mp.int(5) } }, mp.int(0) }
  expect(kv.events.decode(junk, { profile = "kthena" }).events[1].medium):is_nil()
  expect(kv.events.decode(junk).events[1].medium):is_nil("a medium of another type is left out")
  expect(function() kv.events.decode("", { profile = "strict" }) end):raises("profile")
end)

-- msgspec's list[int] takes any msgpack integer, and Kthena's runtime
-- fails only the event whose ids do not pack into 4 bytes
-- (python/kthena/runtime/kv_cache_manager.py:50 at 3cc0572): the decoder
-- passes such ids on, in both profiles.
test("decode: token ids outside uint32 are passed on for the consumer to refuse", function()
  local function batch(tokens)
    return mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockStored"), mp.arr { mp.int(7) }, mp.null,
      mp.arr(tokens), mp.int(2), mp.null }, mp.arr { mp.str("BlockRemoved"), mp.arr { mp.int(7) } } }, mp.int(0) }
  end
  local bytes = batch { mp.int(-1), mp.u64(2 ^ 32), mp.u64(-1), mp.int(4294967295) }
  for _, profile in ipairs { "tolerant", "kthena" } do
    local b, dialect = kv.events.decode(bytes, { profile = profile })
    expect(b.events[1].tokens):eq({ -1, 4294967296, 2.0 ^ 64, 4294967295 }, profile)
    expect(dialect):eq("vllm-array", profile .. ": named by its shape (no encoder writes such ids)")
    expect(#b.events):eq(2, profile .. ": the batch is whole")
  end
  expect(select(2, kv.events.decode(batch { mp.str("1") }, { profile = "kthena" })))
    :matches("^shape: .*token_ids%[1%] must be an integer, got a string")
end)

-- vLLM's block hashes from Python's hash() are signed; msgspec sends a
-- negative one as a negative msgpack integer, and Kthena's runtime writes it
-- signed into its mapping key (kv_cache_manager.py:72). The Lua integer is
-- the same as the uint64 with the same bits; signed_hashes tells them apart.
test("decode: block hashes sent as negative integers are named in signed_hashes", function()
  local bytes = mp.arr { mp.f64(1), mp.arr {
    mp.arr { mp.str("BlockStored"), mp.arr { mp.int(-5), mp.u64(-5), mp.int(5) }, mp.null,
      mp.arr { mp.int(1), mp.int(2), mp.int(3) }, mp.int(1), mp.null },
    mp.arr { mp.str("BlockRemoved"), mp.arr { mp.u64(9), mp.int(-9) } },
    mp.arr { mp.str("BlockRemoved"), mp.arr { mp.u64(9) } } }, mp.int(0) }
  for _, profile in ipairs { "tolerant", "kthena" } do
    local b = kv.events.decode(bytes, { profile = profile })
    expect(b.events[1].hashes):eq({ -5, -5, 5 }, profile)
    expect(b.events[1].signed_hashes):eq({ [1] = true }, profile .. ": only the negative msgpack integer")
    expect(b.events[2].signed_hashes):eq({ [2] = true }, profile)
    expect(b.events[3].signed_hashes):is_nil(profile .. ": absent when there are none")
  end
  local b = kv.events.decode(bytes)
  expect(kv.events.decode(kv.events.encode(b)).events[1].signed_hashes):is_nil("encode writes uint64 hashes")
end)

test("decode: truncated input is an error, never a crash", function()
  for _, d in ipairs(kv.events.dialects) do
    local bytes = kv.events.encode(full_batch(), d)
    for i = 0, #bytes - 1 do
      local ok, err = kv.events.decode(bytes:sub(1, i))
      expect(ok):is_nil(d .. " prefix " .. i)
      expect(err):matches("^msgpack: ", d .. " prefix " .. i)
    end
  end
  expect(select(2, kv.events.decode(""))):eq("msgpack: empty input")
end)

test("decode: garbage and wrong shapes give clear errors", function()
  local cases = {
    { "\xc1", "^msgpack: invalid type byte 0xc1" },
    { "hello", "^msgpack: 4 trailing bytes" },
    { EXAMPLE .. "\x00", "^msgpack: 1 trailing bytes" },
    { "\xdd\xff\xff\xff\xff", "^msgpack: truncated input %(a container at offset 0 declares 4294967295" },
    { "\xdf\xff\xff\xff\xff\x00", "^msgpack: truncated" },
    { "\xc6\xff\xff\xff\xff", "^msgpack: truncated" },
    { string.rep("\x91", 40) .. "\x00", "^msgpack: nested deeper than 32" },
    { mp.int(5), "^shape: the batch must be an array" },
    { mp.arr { mp.f64(1) }, "^shape: the batch is an array of 1" },
    { mp.arr { mp.str("x"), mp.arr {} }, "^shape: batch ts must be a number" },
    { mp.arr { mp.f64(1), mp.int(5) }, "^shape: batch events must be an array" },
    { mp.arr { mp.f64(1), mp.arr {}, mp.str("0") }, "^shape: batch dp_rank" },
    { mp.arr { mp.f64(1), mp.arr { mp.int(5) } }, "^shape: events%[1%] must be an array or a map" },
    { mp.arr { mp.f64(1), mp.arr { mp.arr {} } }, "^shape: events%[1%] is an array without a string tag" },
    { mp.arr { mp.f64(1), mp.arr { mp.map { { mp.str("block_hashes"), mp.arr {} } } } },
      "^shape: events%[1%] is a map without a string \"type\"" },
    { mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockStored") } } },
      "^shape: events%[1%] BlockStored without block_hashes" },
    { mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockRemoved"), mp.int(3) } } },
      "^shape: events%[1%] BlockRemoved: block_hashes must be an array" },
    { mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockRemoved"), mp.arr { mp.f64(1) } } } },
      "^shape: .*block_hashes%[1%] must be an integer or raw bytes, got a float" },
    { mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockStored"), mp.arr {}, mp.null, mp.arr { mp.f64(1) } } } },
      "^shape: .*token_ids%[1%] must be an integer, got a float" },
    { mp.arr { mp.f64(1), mp.arr { mp.arr { mp.str("BlockStored"), mp.arr {}, mp.null, mp.arr {},
      mp.str("16") } } }, "^shape: .*block_size must be an integer or nil" },
  }
  for _, c in ipairs(cases) do
    local ok, err = kv.events.decode(c[1])
    expect(ok):is_nil(tohex(c[1]))
    expect(err):matches(c[2], tohex(c[1]))
  end
  expect(function() kv.events.decode({}) end):raises("string expected")
end)

test("decode: random bytes never raise", function()
  local dialect_bytes = {}
  for _, d in ipairs(kv.events.dialects) do dialect_bytes[#dialect_bytes + 1] = kv.events.encode(full_batch(), d) end
  for i = 1, 3000 do
    local s
    if i % 2 == 0 then
      local t = {}
      for j = 1, math.random(0, 64) do t[j] = string.char(math.random(0, 255)) end
      s = table.concat(t)
    else -- mutate a valid payload
      local base = dialect_bytes[math.random(#dialect_bytes)]
      local pos = math.random(#base)
      s = base:sub(1, pos - 1) .. string.char(math.random(0, 255)) .. base:sub(pos + 1)
    end
    local ok, batch = pcall(kv.events.decode, s)
    expect(ok):is_true(tohex(s))
    if batch then
      local ok2 = pcall(kv.events.decode, s, { profile = "kthena" })
      expect(ok2):is_true(tohex(s))
    end
  end
end)

test("decode without naming the dialect returns the same batch", function()
  local bytes = kv.events.encode({ ts = 1.5, events = { kv.stored { hashes = { 7 }, tokens = { 1, 2 }, block_size = 2 } } },
    "sim-legacy")
  local named, dialect = kv.events.decode(bytes)
  local bare, none = kv.events.decode(bytes, { dialect = false })
  expect(dialect):eq("sim-legacy")
  expect(none):is_nil("no dialect asked for, none named")
  expect(bare):eq(named, "the batch does not depend on naming the dialect")
end)
