-- Tests of the zmq module: engine sockets talking to each other on loopback,
-- and interop with an independent peer (Debian's python3-zmq, run as
-- /usr/bin/python3: a `python3` on PATH may lack the Debian modules).

local zmq = require("zmq")
local proc = require("proc")

local PYTHON = "/usr/bin/python3"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local PEER = here .. "zmq_peer.py"

local ANY = "tcp://127.0.0.1:0"

-- A bound publisher and a connected subscriber, subscribed and ready.
local function pair(topic, opts)
  opts = opts or {}
  local pub = assert(zmq.pub { bind = ANY, hwm = opts.hwm })
  local sub = assert(zmq.sub { connect = pub:endpoint(), subscribe = opts.subscribe or topic,
    hwm = opts.hwm })
  expect(pub:wait_subscribed(topic, { timeout = 5 })):eq(true, "the subscriber's subscription arrives")
  return pub, sub
end

test("pub binds, sub connects", function()
  local pub, sub = pair("kv@")
  expect(pub:endpoint()):matches("^tcp://127%.0%.0%.1:%d+$")
  expect(pub:endpoint():match(":(%d+)$")):ne("0", "port 0 is resolved")
  expect(pub:send { "kv@a", "x" }):eq(true)
  expect(sub:recv { timeout = 2 }):eq({ "kv@a", "x" })
  pub:close()
  sub:close()
end)

test("sub binds, pub connects (the sim's direction)", function()
  local sub <close> = assert(zmq.sub { bind = ANY })
  local pub <close> = assert(zmq.pub { connect = sub:endpoint() })
  expect(pub:wait_subscribed("anything", { timeout = 5 })):eq(true, "the default subscription is everything")
  pub:send { "t", "1" }
  expect(sub:recv { timeout = 2 }):eq({ "t", "1" })
end)

test("a wildcard bind resolves to a connectable address", function()
  local pub <close> = assert(zmq.pub { bind = "tcp://*:0" })
  local ep = pub:endpoint()
  expect(ep):matches("^tcp://127%.0%.0%.1:%d+$")
  local sub <close> = assert(zmq.sub { connect = ep })
  expect(pub:wait_subscribed("", { timeout = 5 })):eq(true)
end)

test("several endpoints on either side", function()
  local sub <close> = assert(zmq.sub { bind = { ANY, ANY } })
  expect(sub:endpoint(1)):ne(sub:endpoint(2))
  expect(sub:endpoint(3)):is_nil()
  local p1 <close> = assert(zmq.pub { connect = sub:endpoint(1) })
  local p2 <close> = assert(zmq.pub { connect = sub:endpoint(2) })
  expect(p1:wait_subscribed("", { timeout = 5 })):eq(true)
  expect(p2:wait_subscribed("", { timeout = 5 })):eq(true)
  p1:send { "from", "1" }
  p2:send { "from", "2" }
  local got = {}
  for _ = 1, 2 do got[#got + 1] = assert(sub:recv { timeout = 2 })[2] end
  table.sort(got)
  expect(got):eq({ "1", "2" })

  -- one subscriber connected to two publishers
  local q1 <close> = assert(zmq.pub { bind = ANY })
  local q2 <close> = assert(zmq.pub { bind = ANY })
  local s2 <close> = assert(zmq.sub { connect = { q1:endpoint(), q2:endpoint() } })
  expect(q1:wait_subscribed("", { timeout = 5 })):eq(true)
  expect(q2:wait_subscribed("", { timeout = 5 })):eq(true)
  q1:send { "a" }
  q2:send { "b" }
  local both = { assert(s2:recv { timeout = 2 })[1], assert(s2:recv { timeout = 2 })[1] }
  table.sort(both)
  expect(both):eq({ "a", "b" })
end)

test("recv times out", function()
  local sub <close> = assert(zmq.sub { bind = ANY })
  local t0 = now()
  local v, err = sub:recv { timeout = 0.2 }
  expect(v):is_nil()
  expect(err):eq("timeout")
  expect(now() - t0):near(0.2, 0.15)
  v, err = sub:recv { timeout = 0 }
  expect(err):eq("timeout", "recv(0) only polls")
end)

test("timeouts follow the one rule: an option in seconds, old forms refused by name", function()
  local pub <close> = assert(zmq.pub { bind = ANY })
  local sub <close> = assert(zmq.sub { connect = pub:endpoint() })
  expect(function() sub:recv(2) end):raises("sub:recv: a timeout is an option now: pass {timeout = 2}, not 2")
  expect(function() pub:wait_subscribed("t", 5) end)
    :raises("pub:wait_subscribed: a timeout is an option now: pass {timeout = 5}, not 5")
  expect(function() sub:recv { timeout = -1 } end)
    :raises("sub:recv: timeout = %-1: a timeout is a number of seconds >= 0 %(0: poll, nil: the default, 5 s")
  expect(function() pub:wait_subscribed("t", { timeout = -0.5 }) end):raises("timeout = %-0%.5: a timeout is a number")
  expect(function() sub:recv { timeout = "1" } end):raises("timeout = 1: a timeout is a number")
  expect(function() sub:recv { timeout = math.huge } end):raises("timeout = inf: a timeout is a number")
  expect(function() sub:recv { timout = 1 } end):raises("sub:recv: unknown option `timout`; did you mean `timeout`%?")
  expect(select(2, sub:recv { timeout = 0 })):eq("timeout", "0 polls")
  expect(pub:wait_subscribed("t", { timeout = 5 })):eq(true, "the option form waits")
end)

test("subscriptions filter by prefix", function()
  local pub, sub = pair("a", { subscribe = { "a", "b" } })
  expect(pub:wait_subscribed("b", { timeout = 5 })):eq(true)
  for _, t in ipairs { "a1", "c1", "b1", "xa" } do pub:send { t } end
  expect(sub:recv { timeout = 2 }):eq({ "a1" })
  expect(sub:recv { timeout = 2 }):eq({ "b1" })
  local v, err = sub:recv { timeout = 0.1 }
  expect(err):eq("timeout", "c1 and xa were filtered out")
  pub:close()
  sub:close()
end)

test("frames are binary-safe and multipart stays together", function()
  local pub, sub = pair("")
  local seq = string.pack(">I8", 0x1122334455667788)
  local bin = "\0\1\2\255" .. string.rep("z", 100000)
  pub:send { "kv@1.2.3.4@m", seq, bin, "" }
  local m = sub:recv { timeout = 2 }
  expect(#m):eq(4)
  expect(m[1]):eq("kv@1.2.3.4@m")
  expect(m[2]):eq(seq)
  expect(m[3] == bin):is_true("a 100 kB frame with NULs round-trips")
  expect(m[4]):eq("")
  expect(function() pub:send { "a", 5 } end):raises("frame 2 is a number")
  expect(function() pub:send {} end):raises("no frames")
  expect(sub:recv { timeout = 0.05 }):is_nil("a refused send sends nothing")
  pub:close()
  sub:close()
end)

test("wait_subscribed is about prefixes and times out", function()
  local pub <close> = assert(zmq.pub { bind = ANY })
  local t0 = now()
  local v, err = pub:wait_subscribed("kv@x", { timeout = 0.2 })
  expect(v):is_nil()
  expect(err):eq("timeout")
  expect(now() - t0):near(0.2, 0.15)
  local sub <close> = assert(zmq.sub { connect = pub:endpoint(), subscribe = "kv@" })
  expect(pub:wait_subscribed("kv@10.0.0.1:8000@model", { timeout = 5 })):eq(true)
  expect(pub:wait_subscribed("kv@", { timeout = 0 })):eq(true)
  v, err = pub:wait_subscribed("other", { timeout = 0.1 })
  expect(err):eq("timeout", "no subscription is a prefix of 'other'")
end)

test("a restarted subscriber must subscribe again", function()
  local pub <close> = assert(zmq.pub { bind = ANY })
  local a = assert(zmq.sub { connect = pub:endpoint(), subscribe = "t" })
  local b = assert(zmq.sub { connect = pub:endpoint(), subscribe = "t" })
  expect(pub:wait_subscribed("t", { timeout = 5 })):eq(true)
  a:close()
  sleep(0.2)
  expect(pub:wait_subscribed("t", { timeout = 0 })):eq(true, "b still holds the prefix")
  b:close()
  eventually(function() return pub:wait_subscribed("t", { timeout = 0 }) == nil end, { timeout = 5 })
  local waiter = spawn(function() return pub:wait_subscribed("t", { timeout = 5 }) end)
  sleep(0.1)
  local c <close> = assert(zmq.sub { connect = pub:endpoint(), subscribe = "t" })
  expect(waiter:wait()):eq(true, "the new subscriber is seen")
  pub:send { "t", "after restart" }
  expect(c:recv { timeout = 2 }):eq({ "t", "after restart" })
end)

test("waiting receivers are served in order", function()
  local pub, sub = pair("")
  local t1 = spawn(function() return sub:recv { timeout = 5 } end)
  local t2 = spawn(function() return sub:recv { timeout = 5 } end)
  sleep(0.05)
  pub:send { "first" }
  pub:send { "second" }
  expect(t1:wait()):eq({ "first" })
  expect(t2:wait()):eq({ "second" })
  pub:close()
  sub:close()
end)

test("closing a socket wakes its waiting task", function()
  local sub = assert(zmq.sub { bind = ANY })
  local t = spawn(function() return sub:recv() end)
  sleep(0.05)
  sub:close()
  local v, err = t:wait()
  expect(v):is_nil()
  expect(err):eq("zmq: socket closed")
  sub:close()
  expect(function() sub:recv { timeout = 0 } end):raises("closed")
  expect(tostring(sub)):eq("zmq socket (closed)")
end)

test("a bad endpoint returns nil, err", function()
  local pub <close> = assert(zmq.pub { bind = ANY })
  local s, err = zmq.sub { bind = pub:endpoint() }
  expect(s):is_nil()
  expect(err):matches("^zmq: bind tcp://127%.0%.0%.1:%d+: Address already in use")
  s, err = zmq.pub { connect = "nonsense" }
  expect(s):is_nil()
  expect(err):matches("^zmq: connect nonsense:")
  expect(function() zmq.pub {} end):raises("bind= or connect=")
  expect(function() zmq.sub { bind = ANY, subscribe = 5 } end):raises("subscribe")
end)

test("many messages in order at the event high-water mark", function()
  local pub, sub = pair("kv", { hwm = zmq.event_hwm })
  local n = 50000
  for i = 1, n do pub:send { "kv", string.pack(">I8", i) } end
  for i = 1, n do
    local m = sub:recv { timeout = 5 }
    if not m or string.unpack(">I8", m[2]) ~= i then
      fail(string.format("message %d: got %s", i, m and string.unpack(">I8", m[2]) or "nothing"))
    end
  end
  pub:close()
  sub:close()
end)

-- Run the python peer in the background; returns its process and log path.
local function peer(args)
  local log = os.tmpname()
  local argv = { PYTHON, PEER }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  return proc.spawn { argv = argv, log = log }, log
end

local function read_log(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  os.remove(path)
  return s
end

test("100,000 events reach a python3-zmq subscriber in order", { timeout = 120 }, function()
  local n = 100000
  local pub <close> = assert(zmq.pub { bind = ANY, hwm = zmq.event_hwm })
  local topic = "kv@127.0.0.1:8000@model"
  local p, log = peer { "sub", pub:endpoint(), topic, tostring(n), "--hwm", tostring(zmq.event_hwm) }
  expect(pub:wait_subscribed(topic, { timeout = 20 })):eq(true, "the python subscriber subscribes")
  local payload = string.rep("p", 100)
  for i = 0, n - 1 do
    assert(pub:send { topic, string.pack(">I8", i), payload })
  end
  p:wait { timeout = 60 }
  local out = read_log(log)
  expect(out):contains('"ok": true')
  expect(out):contains('"received": ' .. n)
end)

test("a python3-zmq publisher reaches an engine subscriber in order", { timeout = 60 }, function()
  local n = 20000
  local sub <close> = assert(zmq.sub { bind = ANY, subscribe = "py" })
  local p, log = peer { "pub", sub:endpoint(), "py", tostring(n) }
  for i = 0, n - 1 do
    local m, err = sub:recv { timeout = 20 }
    if not m then fail("message " .. i .. ": " .. err .. "; peer said: " .. read_log(log)) end
    expect(#m):eq(3)
    if string.unpack(">I8", m[2]) ~= i then fail("out of order at " .. i) end
  end
  p:wait { timeout = 20 }
  expect(read_log(log)):contains('"ok": true')
end)

-- ------------------------------------------------------------ limits

-- A child engine running `source`, optionally under an open-file limit
-- (prlimit, util-linux): its exit code and stderr.
local function child(source, nofile)
  local fs = require("fs")
  local dir = fs.tmpdir()
  fs.write(dir .. "/limits.lua", source)
  local argv = { os.getenv("KVENGINE_BIN"), "serve", dir .. "/limits.lua" }
  if nofile then argv = { "prlimit", "--nofile=" .. nofile .. ":" .. nofile, table.unpack(argv) } end
  local code, out, err = proc.run { argv = argv, timeout = 20 }
  fs.remove_tree(dir)
  return code, out, err
end

local MANY = [[
local zmq = require("zmq")
%s
local s = {}
for i = 1, %d do s[i] = zmq.pub { bind = "tcp://127.0.0.1:0" } end
print("made " .. #s .. " with a limit of " .. zmq.max_sockets())
for _, x in ipairs(s) do x:close() end -- `serve` runs while a socket is open
]]

test("the context's socket limit: libzmq's 1,023 by default, raised before the first socket", function()
  local code, _, err = child(MANY:format("", 1100))
  expect(code):ne(0, "a 1,024th socket is refused under libzmq's default limit")
  expect(err):contains("the context's limit of 1023 sockets is reached", "the error names the limit")
  local code2, out2, err2 = child(MANY:format("zmq.max_sockets(1200)", 1100), 4096)
  expect(code2):eq(0, "with zmq.max_sockets(1200) first, 1,100 sockets open: " .. tostring(err2))
  expect(out2):contains("made 1100 with a limit of 1200")
end)

test("zmq.max_sockets after the first socket, or past libzmq's ceiling, raises naming why", function()
  local sock = assert(zmq.pub { bind = ANY })
  local limit = zmq.max_sockets()
  local ok, err = pcall(zmq.max_sockets, limit + 1)
  expect(ok):eq(false)
  expect(tostring(err)):contains("before the first socket")
  expect(zmq.max_sockets(limit)):eq(limit, "asking for the limit it has is no change")
  ok, err = pcall(zmq.max_sockets, 10 ^ 9 // 1)
  expect(ok):eq(false)
  expect(tostring(err)):contains("ZMQ_SOCKET_LIMIT")
  sock:close()
end)

test("out of descriptors, a socket is refused naming the open-file limit, not a libzmq abort", function()
  local code, _, err = child(MANY:format("", 500), 128)
  expect(code):eq(1, "the script fails as a Lua error (exit 1), not an abort: " .. tostring(err))
  expect(err):contains("has open the 128 files it may", "the error names the process's open-file limit")
end)

test("the engine raises its soft open-file limit to the hard one at start", function()
  local code, out = child('print(require("engine").fd_limits())')
  expect(code):eq(0)
  local soft, hard = out:match("^(%d+)%s+(%d+)")
  expect(soft):eq(hard, "soft and hard limits are equal once the engine started")
end)
