-- scenarios/malformed_events.lua - bad KV-event traffic is dropped, counted
-- and logged, and the data path keeps working.
--
-- An engine, a bridge or a network can deliver anything: cut-off msgpack,
-- messages with too few or too many frames, foreign topics, BlockStored
-- events whose tokens do not divide among their hashes, event types nobody
-- knows, batches of thousands of events. Whatever arrives, the bridge and
-- the runtime must keep running, drop what they cannot use with a reason
-- (counted by reason in their GET /stats, and logged), write nothing wrong
-- to Redis, and still apply the next valid event.
--
-- Who drops what: the bridge forwards 3-frame messages with a sim topic
-- (kv@<ip>[:<port>]@<model>) and drops the rest (wrong_frame_count,
-- bad_topic); the runtime decodes what it gets as Kthena's does (decode,
-- empty_payload: the whole batch; uneven_tokens: one event).
--
-- Each test sends its bad messages without waiting, then one valid event
-- with kvcache's fence: ZMQ keeps order, so when that event is in Redis
-- everything before it was dealt with, and the counters can be compared.
-- On a target whose runtime has no /stats (kind) the runtime's counters
-- and log are not checked; the bridge's and Redis are.

local kv = require("kv")
local kvcache = require("kvcache")

local stack, pod

-- Token ids no other test uses: 16 per block, from a base per test.
local function block_tokens(base, blocks)
  local t = {}
  for i = 1, blocks * 16 do t[i] = base + i end
  return t
end

-- Both sides' counters, where the target's event path reports them (nil
-- elsewhere: then only Redis is checked).
local function counters()
  if not stack:can("event_stats") then return nil end
  local s = stack:event_stats("p1")
  expect(s.bridge):not_nil("the bridge of p1 should report its counters: " .. tostring(s.errors.bridge))
  expect(s.runtime):not_nil("the runtime of p1 should report its counters: " .. tostring(s.errors.runtime))
  return { bridge = s.bridge, runtime = s.runtime }
end

-- How many ownership keys and engine-hash mappings Redis holds for this stack.
local function redis_counts()
  local c <close> = stack:redis()
  local count = "return #redis.call('KEYS', ARGV[1])"
  return { owned = c:call("EVAL", count, 0, kv.block_key_prefix(stack.model) .. "*"),
    mappings = c:call("EVAL", count, 0, kv.mapping_key_prefix(pod.engine, pod.owner) .. "*") }
end

-- What moved between two counters() snapshots: {bridge = {received, forwarded,
-- dropped = {...}}, runtime = {dropped = {...}, applied = {...}}}, zeros left out.
local function moved(a, b)
  if not (a and b) then return {} end
  local function diff(x, y)
    local out = {}
    for k, v in pairs(y or {}) do
      if type(v) == "number" and v ~= (x[k] or 0) then out[k] = v - (x[k] or 0) end
    end
    return out
  end
  local out = { bridge = diff(a.bridge, b.bridge) }
  out.bridge.dropped = diff(a.bridge.dropped, b.bridge.dropped)
  if a.runtime and b.runtime then
    out.runtime = { dropped = diff(a.runtime.dropped, b.runtime.dropped),
      applied = diff(a.runtime.applied, b.runtime.applied) }
  end
  return out
end

-- A valid BlockStored, sent and waited for (the fence), then checked in
-- Redis: the data path still works after whatever came before. `timeout`
-- covers a runtime still busy with a huge batch.
local function valid_event_applies(base, timeout)
  local tokens = block_tokens(base, 1)
  stack:inject("p1", kvcache.stored { tokens = tokens }, { timeout = timeout })
  stack:expect_owner { tokens = tokens, pod = "p1", timeout = 1 }
end

-- A sim-shaped message: [topic, seq, payload].
local seq = 1000000
local function message(payload, topic)
  seq = seq + 1
  return { topic or pod.topic, string.pack(">I8", seq), payload }
end

local function send(frames) stack:publish("p1", frames, { fence = false }) end

local function log_has(name, text, why)
  expect(stack:logs(name)):contains(text, why)
end

before_all(function()
  stack = kvcache.stack { pods = 1 }
  pod = stack:pod("p1")
end)

test("truncated or garbage payloads: the runtime drops each batch (decode), Redis gets nothing", function()
  local good = kv.events.encode({ events = { kvcache.stored { tokens = block_tokens(1100000, 2) } } }, "sim-legacy")
  local c0, r0 = counters(), redis_counts()
  send(message(good:sub(1, #good // 2)))            -- cut in the middle of the token list
  send(message(good:sub(1, 1)))                     -- only the batch's array header
  send(message('{"events": "not msgpack"}'))        -- JSON, not msgpack
  send(message(string.rep("\xc1", 64)))             -- 0xc1: never used in msgpack
  send(message(""))                                 -- no payload at all
  valid_event_applies(1100100)
  local m = moved(c0, counters())
  if m.bridge then
    expect(m.bridge.forwarded):eq(7, "the bridge forwards all 5 (it only checks frames and topics), the valid "
      .. "event and its fence")
    expect(m.bridge.dropped):eq({}, "the bridge drops nothing here")
  end
  if m.runtime then
    expect(m.runtime.dropped):eq({ decode = 4, empty_payload = 1 }, "the runtime drops 4 undecodable batches and "
      .. "the empty payload, and nothing else")
    expect(m.runtime.applied.stored):eq(2, "then it applies the valid event and the fence")
    log_has("p1-runtime", "dropped (decode): msgpack: truncated input", "the runtime logs why it dropped a batch")
    log_has("p1-runtime", "dropped (empty_payload)", "the runtime logs the empty payload")
  end
  expect(redis_counts()):eq({ owned = r0.owned + 1, mappings = r0.mappings + 1 },
    "Redis gains the valid event's one block and nothing of the bad batches")
end)

test("wrong frame counts: the bridge drops them (wrong_frame_count) before the runtime sees them", function()
  local payload = kv.events.encode({ events = { kvcache.stored { tokens = block_tokens(1200000, 1) } } }, "sim-legacy")
  local c0, r0 = counters(), redis_counts()
  send({ pod.topic })                                                        -- 1 frame
  send({ pod.topic, payload })                                               -- 2: no sequence number
  send({ pod.topic, string.pack(">I8", 1), payload, "trailing frame" })      -- 4
  send({ pod.topic, string.pack(">I8", 2), "", payload, "", "", "", "" })    -- 8
  valid_event_applies(1200100)
  local m = moved(c0, counters())
  if m.bridge then
    expect(m.bridge.dropped):eq({ wrong_frame_count = 4 }, "the bridge drops the 4 messages for their frame count")
    expect(m.bridge.received):eq(6, "the bridge received the 4, the valid event and its fence")
    expect(m.bridge.forwarded):eq(2, "and forwards only the valid event and its fence")
  end
  if m.runtime then
    expect(m.runtime.dropped):eq({}, "nothing malformed reaches the runtime")
  end
  log_has("p1-bridge", "dropped (wrong_frame_count): 4 frames", "the bridge logs each drop with its reason")
  expect(redis_counts()):eq({ owned = r0.owned + 1, mappings = r0.mappings + 1 },
    "Redis gains the valid event's block only: the dropped messages carried a valid payload")
end)

test("wrong topics: the bridge drops anything but a sim topic (bad_topic)", function()
  local payload = kv.events.encode({ events = { kvcache.stored { tokens = block_tokens(1300000, 1) } } }, "sim-legacy")
  local c0, r0 = counters(), redis_counts()
  for _, topic in ipairs({
    "kv-events",                                 -- the runtime's topic, sent straight to the bridge
    "not-a-sim-topic",
    "kv@not-an-ip@" .. stack.model,              -- the host must be an IP address
    "kv@" .. pod.ip .. "@",                      -- no model
    "",                                          -- empty
    "\xff\xfe\x00kv@",                           -- not text
  }) do
    send(message(payload, topic))
  end
  valid_event_applies(1300100)
  local m = moved(c0, counters())
  if m.bridge then
    expect(m.bridge.dropped):eq({ bad_topic = 6 }, "the bridge drops the 6 messages for their topic")
    expect(m.bridge.forwarded):eq(2, "and forwards only the valid event and its fence")
  end
  if m.runtime then expect(m.runtime.dropped):eq({}, "nothing malformed reaches the runtime") end
  log_has("p1-bridge", "dropped (bad_topic): 3 frames, topic not-a-sim-topic", "the bridge logs the topic it refused")
  expect(redis_counts()):eq({ owned = r0.owned + 1, mappings = r0.mappings + 1 },
    "Redis gains the valid event's block only")
end)

test("a topic other than exactly kv-events, put straight in front of the runtime, writes nothing", function()
  -- The bridge sends everything on as kv-events, so only frames published
  -- past it (on its output) reach the runtime with another topic. Kthena's
  -- runtime subscribes to the prefix kv-events and then drops every message
  -- whose topic is not exactly kv-events (WIRE-3).
  local tokens = block_tokens(1350000, 1)
  local payload = kv.events.encode({ events = { kvcache.stored { tokens = tokens } } }, "sim-legacy")
  local c0 = counters()
  local topics = { "kv-events-2", "kv-eventsx", "kv-events ", "kv-events\0" }
  for _, topic in ipairs(topics) do
    seq = seq + 1
    stack:publish_runtime("p1", { topic, string.pack(">I8", seq), payload }) -- returns once it was dealt with
  end
  stack:expect_no_owner { tokens = tokens, pod = "p1", timeout = 0.1, why = string.format("WIRE-3: the runtime "
    .. "drops a message whose topic is not exactly kv-events, though it starts with it (topics %q, %q, %q, %q)",
    table.unpack(topics)) }
  local m = moved(c0, counters())
  if m.runtime then
    expect(m.runtime.dropped):eq({ topic = #topics }, "WIRE-3: the runtime counts each message it dropped for "
      .. "its topic, and drops nothing else")
  end
  -- The same payload under the exact topic is applied: the way in works.
  seq = seq + 1
  stack:publish_runtime("p1", { "kv-events", string.pack(">I8", seq), payload })
  stack:expect_owner { tokens = tokens, pod = "p1", why = "WIRE-3: a message with the topic kv-events, put on the "
    .. "bridge's output, is the runtime's to apply" }
end)

test("uneven token and hash counts: the runtime drops that event (uneven_tokens) and applies its neighbours",
  function()
    local uneven = block_tokens(1400000, 2)    -- 32 tokens for 3 hashes: no whole block size
    local neighbour = block_tokens(1400100, 2) -- a valid event in the same batch
    local empty = kv.stored { hashes = { 42 }, tokens = {} } -- hashes but no tokens: nothing to write
    local c0, r0 = counters(), redis_counts()
    stack:inject("p1", {
      kvcache.stored { tokens = uneven, hashes = { 1 | math.mininteger, 2 | math.mininteger, 3 | math.mininteger } },
      kvcache.stored { tokens = neighbour },
      empty,
    })
    local m = moved(c0, counters())
    if m.runtime then
      expect(m.runtime.dropped):eq({ uneven_tokens = 1, empty = 1 },
        "the runtime drops the uneven event and the empty one, and nothing else")
      expect(m.runtime.applied.stored):eq(2, "it applies the neighbour and the fence")
      log_has("p1-runtime", "Token count (32) cannot match block size with 3 hashes",
        "the runtime logs Kthena's message for an uneven event")
    end
    stack:expect_no_owner { tokens = uneven, pod = "p1" }
    stack:expect_owner { tokens = neighbour, pod = "p1", timeout = 1 }
    expect(redis_counts()):eq({ owned = r0.owned + 2, mappings = r0.mappings + 2 },
      "Redis gains the neighbour's 2 blocks and nothing of the uneven event")
    valid_event_applies(1400200)
  end)

test("unknown event types: Kthena's decoder drops the whole batch (decode), its valid events too", function()
  local first, second = block_tokens(1500000, 1), block_tokens(1500100, 1)
  local events = { kvcache.stored { tokens = first }, kvcache.stored { tokens = second } }
  local payload = kv.events.encode({ events = events }, "vllm-array")
  -- Rename the second event's tag ("BlockStored", an 11-byte msgpack string)
  -- to another 11-byte name nobody knows; the bytes stay well-formed.
  local at = assert(payload:find("\xabBlockStored", payload:find("\xabBlockStored", 1, true) + 1, true))
  payload = payload:sub(1, at) .. "BlockMerged" .. payload:sub(at + 12)
  local c0, r0 = counters(), redis_counts()
  send(message(payload))
  valid_event_applies(1500200)
  local m = moved(c0, counters())
  if m.bridge then
    expect(m.bridge.forwarded):eq(3, "the bridge forwards the batch (it does not decode), the valid event, the fence")
  end
  if m.runtime then
    expect(m.runtime.dropped):eq({ decode = 1 }, "the runtime drops the batch for its unknown event")
    log_has("p1-runtime", "dropped (decode): kthena: events[2] has the unknown type 'BlockMerged'",
      "the runtime logs the unknown type")
  end
  stack:expect_no_owner { tokens = first, pod = "p1" }
  expect(redis_counts()):eq({ owned = r0.owned + 1, mappings = r0.mappings + 1 },
    "Redis gains the later valid event's block only")
end)

test("huge batches: 5,000 events, a 2,048-block event and 4 MB of garbage are applied or dropped whole", function()
  local many = {}
  for i = 1, 5000 do many[i] = kvcache.stored { tokens = block_tokens(20000000 + i * 16, 1) } end
  local long = block_tokens(30000000, 2048)
  local chunk = {}
  for i = 1, 512 do chunk[i] = string.pack("<I8", math.random(0, math.maxinteger)) end
  local garbage = string.rep(table.concat(chunk), 1024) -- 4 MB
  local c0, r0 = counters(), redis_counts()
  local t0 = now()
  stack:inject("p1", many, { wait = "sent" })
  stack:inject("p1", kvcache.stored { tokens = long }, { wait = "sent" })
  send(message("\xdd" .. garbage)) -- a msgpack array header (0xdd) over random bytes
  valid_event_applies(1600000, 30) -- Kthena's runtime (kind) writes thousands of events a second, not more
  log(string.format("5,000 + 1 events (7,048 blocks), 4 MB of garbage and a valid event handled in %.2fs",
    now() - t0))
  local m = moved(c0, counters())
  if m.bridge then
    expect(m.bridge.forwarded):eq(5, "the bridge forwards all 4 batches and the fence")
  end
  if m.runtime then
    expect(m.runtime.dropped):eq({ decode = 1 }, "the runtime drops the garbage, and only it")
    expect(m.runtime.applied.stored):eq(5000 + 1 + 1 + 1, "it applies every event of the huge batches")
  end
  expect(redis_counts()):eq({ owned = r0.owned + 5000 + 2048 + 1, mappings = r0.mappings + 5000 + 2048 + 1 },
    "Redis holds one ownership key and one mapping per block sent, and nothing else")
  stack:expect_owner { tokens = block_tokens(30000000, 128), pod = "p1", timeout = 1 }
end)
