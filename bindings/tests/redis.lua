-- Tests of the redis module against real redis-server processes on loopback,
-- each on a free port with no persistence.

local redis = require "redis"
local proc = require "proc"

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

-- Start a redis-server on a free port; returns the process and its port.
-- Ports come from below Linux's ephemeral range (32768 and up), where binds
-- to port 0 and outgoing connections of parallel test files never land.
local function start_redis(extra)
  for _ = 1, 20 do
    local port = math.random(20000, 32767)
    if not redis.connect { port = port, timeout = 0.5 } then
      local argv = { "redis-server", "--port", tostring(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--enable-debug-command", "local", "--loglevel", "warning" }
      for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
      local p = proc.spawn { argv = argv }
      local deadline = now() + 5
      while p:running() and now() < deadline do
        local c, err = redis.connect { port = port, timeout = 0.5 }
        if c or (err and err:find("NOAUTH", 1, true)) then
          if c then c:close() end
          return p, port
        end
        sleep(0.05)
      end
      p:kill("KILL")
      p:wait(5)
    end
  end
  error("could not start redis-server on a free port")
end

-- After p:kill("KILL") and p:wait(), the server may still be exiting (the
-- signal also ends its supervisor, which is what p:wait sees), and its
-- listening socket can take a connect for a few milliseconds more.
local function wait_gone(gone_port)
  eventually(function()
    local c, err = redis.connect { port = gone_port, timeout = 0.5 }
    if c then c:close() end
    return not c and err:find("cannot connect", 1, true)
  end)
end

local server, port

before_all(function()
  server, port = start_redis()
end)

after_all(function()
  server:kill("KILL")
  server:wait(5)
end)

local function connect(opts)
  opts = opts or {}
  opts.port = opts.port or port
  local c = assert(redis.connect(opts))
  return c
end

test("replies map to Lua values", function()
  local c <close> = connect()
  c:call("DEL", "s", "l")
  expect(c:call("SET", "s", "hello")):eq("OK", "status reply")
  expect(c:call("GET", "s")):eq("hello", "bulk reply")
  expect(c:call("INCR", "n:" .. math.random(1 << 30))):eq(1, "integer reply")
  expect(math.type(c:call("STRLEN", "s"))):eq("integer")
  expect(c:call("GET", "no-such-key")):is_nil("nil reply")
  expect(c:call("LRANGE", "l", 0, -1)):eq({}, "empty array")
  expect(c:call("MGET", "s", "no-such-key", "s")):eq({ "hello", redis.null, "hello" })
  -- nested arrays, a nil element and an error element, from a script
  local r = c:call("EVAL", "return {1, {2, 'x'}, false, redis.error_reply('E bad')}", 0)
  expect(r[1]):eq(1)
  expect(r[2]):eq({ 2, "x" })
  expect(r[3]):eq(redis.null)
  expect(r[4]):eq({ err = "E bad" })
  expect(#r):eq(4)
  expect(tostring(redis.null)):eq("redis.null")
end)

test("call raises a server error, pcall returns it", function()
  local c <close> = connect()
  expect(function() c:call("NO-SUCH-COMMAND") end):raises("redis: ERR unknown command")
  local v, err = c:pcall("NO-SUCH-COMMAND", "x")
  expect(v):is_nil()
  expect(err):matches("^redis: ERR unknown command")
  c:call("SET", "str", "x")
  v, err = c:pcall("HGET", "str", "f")
  expect(v):is_nil()
  expect(err):matches("^redis: WRONGTYPE")
  expect(c:pcall("PING")):eq("PONG", "the connection stays usable after errors")
end)

test("argument mistakes raise", function()
  local c <close> = connect()
  expect(function() c:call() end):raises("no command")
  expect(function() c:call("GET", {}) end):raises("string or number expected")
  expect(function() c:call("GET", true) end):raises("string or number expected")
  expect(function() c:call("SUBSCRIBE", "ch") end):raises("not supported")
  expect(function() redis.connect { host = 127 } end):raises("host must be a string")
  expect(function() redis.connect { port = 70000 } end):raises("port out of range")
  expect(function() redis.connect { timeout = 0 } end):raises("timeout must be positive")
  expect(c:call("PING")):eq("PONG")
end)

test("pipeline returns replies in order, errors in place", function()
  local c <close> = connect()
  c:call("DEL", "pl:n", "pl:s")
  local res = c:pipeline(function(p)
    for _ = 1, 50 do p:call("INCR", "pl:n") end
    p:call("SET", "pl:s", "v")
    p:call("INCR", "pl:s")
    p:call("GET", "pl:missing")
    expect(p:call("GET", "pl:s")):eq(54, "p:call returns the reply's index")
  end)
  expect(#res):eq(54)
  for i = 1, 50 do expect(res[i]):eq(i, "INCR number " .. i) end
  expect(res[51]):eq("OK")
  expect(res[52].err):matches("^ERR value is not an integer")
  expect(res[53]):eq(redis.null)
  expect(res[54]):eq("v")
  expect(c:pipeline(function() end)):eq({}, "an empty pipeline sends nothing")
end)

test("pipeline of many commands in one round trip", function()
  local c <close> = connect()
  local res = c:pipeline(function(p)
    for i = 1, 5000 do p:call("HSET", "pl:h", "f" .. i, i) end
  end)
  expect(#res):eq(5000)
  local h = c:hgetall("pl:h")
  expect(h.f1):eq("1")
  expect(h.f5000):eq("5000")
  c:call("DEL", "pl:h")
end)

test("hgetall returns a field map", function()
  local c <close> = connect()
  c:call("DEL", "h")
  expect(c:hgetall("h")):eq({}, "missing key")
  c:call("HSET", "h", "a", "1", "b", 2, "c\0d", "x\0y")
  expect(c:hgetall("h")):eq({ a = "1", b = "2", ["c\0d"] = "x\0y" })
  c:call("SET", "h:str", "x")
  expect(function() c:hgetall("h:str") end):raises("redis: WRONGTYPE")
end)

test("arguments are binary-safe", function()
  local c <close> = connect()
  local bytes = {}
  for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
  local all = table.concat(bytes)
  local key = "bin\0key\r\n" .. all
  c:call("SET", key, all .. "\0tail")
  expect(c:call("GET", key)):eq(all .. "\0tail")
  local big = string.rep("0123456789abcdef", 65536) -- 1 MiB
  c:call("SET", "big", big)
  expect(c:call("STRLEN", "big")):eq(#big)
  expect(c:call("GET", "big") == big):is_true("1 MiB value round-trips")
  c:call("DEL", "big", key)
end)

test("numbers are formatted as Redis expects", function()
  local c <close> = connect()
  c:call("SET", "num", 42)
  expect(c:call("GET", "num")):eq("42")
  c:call("SET", "num", -7)
  expect(c:call("GET", "num")):eq("-7")
  c:call("SET", "num", math.maxinteger)
  expect(c:call("GET", "num")):eq("9223372036854775807")
  c:call("SET", "num", math.mininteger)
  expect(c:call("GET", "num")):eq("-9223372036854775808")
  c:call("SET", "num", 2.5)
  expect(c:call("GET", "num")):eq("2.5")
  c:call("SET", "num", 0.1)
  expect(c:call("GET", "num")):eq("0.1")
  c:call("SET", "num", 3.0)
  expect(c:call("GET", "num")):eq("3", "an integral float is written without a fraction")
  c:call("SET", "num", 10)
  expect(c:call("INCRBY", "num", 5)):eq(15)
end)

test("db selects a database", function()
  local c3 <close> = connect { db = 3 }
  local c0 <close> = connect { db = 0 }
  c3:call("SET", "dbkey", "three")
  c0:call("DEL", "dbkey")
  expect(c3:call("GET", "dbkey")):eq("three")
  expect(c0:call("GET", "dbkey")):is_nil()
  local c, err = redis.connect { port = port, db = 100000, timeout = 1 }
  expect(c):is_nil()
  expect(err):matches("^redis: ERR")
end)

test("password authenticates", function()
  local p, auth_port = start_redis { "--requirepass", "s3cret" }
  local c, err = redis.connect { port = auth_port, timeout = 2 }
  expect(c):is_nil("no password")
  expect(err):matches("^redis: NOAUTH")
  c, err = redis.connect { port = auth_port, password = "wrong", timeout = 2 }
  expect(c):is_nil("wrong password")
  expect(err):matches("^redis: WRONGPASS")
  c = assert(redis.connect { port = auth_port, password = "s3cret", db = 2, timeout = 2 })
  expect(c:call("PING")):eq("PONG")
  c:close()
  p:kill("KILL")
  p:wait(5)
end)

test("a refused connect returns nil, err", function()
  local t0 = now()
  local c, err = redis.connect { port = 1, timeout = 2 }
  expect(c):is_nil()
  expect(err):matches("^redis: cannot connect to 127%.0%.0%.1:1: Connection refused")
  expect(now() - t0):lt(1, "refused at once, not at the timeout")
end)

test("connect to a stopped server times out", function()
  local p, stopped_port = start_redis()
  p:kill("STOP")
  local t0 = now()
  local c, err = redis.connect { port = stopped_port, timeout = 0.3 }
  expect(c):is_nil()
  expect(err):eq("redis: connect to 127.0.0.1:" .. stopped_port .. " timed out after 0.3s")
  expect(now() - t0):near(0.3, 0.2)
  p:kill("CONT")
  p:kill("KILL")
  p:wait(5)
end)

test("a timeout fails every pending call and drops the connection", function()
  local c <close> = connect { timeout = 0.3 }
  local other = spawn(function() return c:pcall("GET", "x") end)
  local third = spawn(function() return c:pcall("PING") end)
  local t0 = now()
  local v, err = c:pcall("DEBUG", "SLEEP", "0.8")
  expect(now() - t0):near(0.3, 0.2)
  expect(v):is_nil()
  expect(err):matches("^redis: timeout after 0%.3s")
  for _, t in ipairs { other, third } do
    local v2, err2 = t:wait()
    expect(v2):is_nil()
    expect(err2):matches("^redis: connection lost")
  end
  v, err = c:pcall("PING")
  expect(v):is_nil("later calls fail")
  expect(err):matches("^redis: connection lost")
  expect(function() c:call("PING") end):raises("redis: connection lost")
  -- the server itself is fine: a new connection works once the sleep is over
  local c2 <close> = connect { timeout = 2 }
  expect(c2:call("PING")):eq("PONG")
end)

test("a pipeline times out like a call", function()
  local c <close> = connect { timeout = 0.3 }
  expect(function()
    c:pipeline(function(p)
      p:call("PING")
      p:call("DEBUG", "SLEEP", "0.6")
      p:call("PING")
    end)
  end):raises("redis: timeout after 0.3s")
  expect(c:pcall("PING")):is_nil()
  sleep(0.4) -- let the server finish sleeping before the next test
end)

test("a server killed mid-call gives a clear error, never a hang", function()
  local p, kport = start_redis()
  local c <close> = connect { port = kport, timeout = 10 }
  local pending = spawn(function() return c:pcall("DEBUG", "SLEEP", "5") end)
  sleep(0.2)
  local t0 = now()
  p:kill("KILL")
  local v, err = pending:wait()
  expect(now() - t0):lt(2, "the loss is seen at once, not at the timeout")
  expect(v):is_nil()
  expect(err):matches("^redis: connection lost")
  expect(c:pcall("PING")):is_nil()
  p:wait(5)
  wait_gone(kport)
end)

test("a connection reset gives a clear error, never a hang", function()
  -- libuv reports the reset as a poll error; hiredis's own adapter ignores it
  local log = os.tmpname()
  local p = proc.spawn { argv = { "/usr/bin/python3", here .. "reset_peer.py" }, log = log }
  local rport = eventually(function()
    local f = io.open(log)
    local s = f and f:read("a")
    if f then f:close() end
    return s and tonumber(s:match("port (%d+)"))
  end)
  local t0 = now()
  local c, err = redis.connect { port = rport, timeout = 5 }
  expect(c):is_nil()
  expect(err):eq("redis: connection lost: Connection reset by peer")
  expect(now() - t0):lt(2, "seen at once, not at the timeout")
  p:kill("KILL")
  p:wait(5)
  os.remove(log)
end)

test("a stopped server times out a call", function()
  local p, sport = start_redis()
  local c <close> = connect { port = sport, timeout = 0.3 }
  expect(c:call("SET", "k", "v")):eq("OK")
  p:kill("STOP")
  local v, err = c:pcall("GET", "k")
  expect(v):is_nil()
  expect(err):matches("^redis: timeout after 0%.3s")
  p:kill("CONT")
  p:kill("KILL")
  p:wait(5)
end)

test("after a server restart the old connection is lost and a new one works", function()
  local p, rport = start_redis()
  local c <close> = connect { port = rport, timeout = 1 }
  c:call("SET", "k", "before")
  p:kill("KILL")
  p:wait(5)
  local v, err = c:pcall("GET", "k")
  expect(v):is_nil()
  expect(err):matches("^redis: connection lost")
  wait_gone(rport)
  local p2 = proc.spawn { argv = { "redis-server", "--port", tostring(rport), "--bind", "127.0.0.1",
    "--save", "", "--appendonly", "no", "--loglevel", "warning" } }
  local c2 = eventually(function() return redis.connect { port = rport, timeout = 0.5 } end)
  expect(c2:call("GET", "k")):is_nil("a fresh server")
  expect(c:pcall("PING")):is_nil("no automatic reconnect")
  c2:close()
  p2:kill("KILL")
  p2:wait(5)
end)

test("a cancelled call leaves the connection in order", function()
  local c <close> = connect { timeout = 2 }
  local t = spawn(function() return c:call("DEBUG", "SLEEP", "0.2") end)
  sleep(0.05)
  t:cancel()
  expect(c:call("SET", "after-cancel", "1")):eq("OK", "the reply of the cancelled call is dropped")
  expect(c:call("GET", "after-cancel")):eq("1")
end)

test("close is idempotent and later calls fail", function()
  local c = connect()
  c:close()
  c:close()
  local v, err = c:pcall("PING")
  expect(v):is_nil()
  expect(err):eq("redis: connection closed")
  expect(function() c:call("PING") end):raises("redis: connection closed")
  expect(tostring(c)):eq("redis connection (closed)")
  do
    local c2 <close> = connect()
    expect(c2:call("PING")):eq("PONG")
  end
end)

test("closing a connection fails calls waiting on it", function()
  local c = connect { timeout = 5 }
  local waiting = spawn(function() return c:pcall("DEBUG", "SLEEP", "0.3") end)
  sleep(0.05)
  c:close()
  local v, err = waiting:wait()
  expect(v):is_nil()
  expect(err):eq("redis: connection closed")
  sleep(0.3)
end)
