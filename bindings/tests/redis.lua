-- Tests of the redis module against real redis-server processes on loopback,
-- each on a free port with no persistence.

local redis = require("redis")
local proc = require("proc")

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

-- Kill a child process and reap it. A killed redis-server's port can take a
-- connect for a moment more (wait_gone).
local function stop(p)
  p:kill("KILL")
  p:wait { timeout = 5 }
end

-- A redis-server child on port, without persistence, extra appended to its argv.
local function spawn_redis(port, extra)
  local argv = { "redis-server", "--port", tostring(port), "--bind", "127.0.0.1", "--save", "",
    "--appendonly", "no", "--enable-debug-command", "local", "--loglevel", "warning" }
  for _, a in ipairs(extra or {}) do argv[#argv + 1] = a end
  return proc.spawn { argv = argv }
end

-- Start a redis-server on a free port; returns the process and its port.
-- Ports come from below Linux's ephemeral range (32768 and up), where binds
-- to port 0 and outgoing connections of parallel test files never land.
local function start_redis(extra)
  for _ = 1, 20 do
    local port = math.random(20000, 32767)
    if not redis.connect { port = port, timeout = 0.5 } then
      local p = spawn_redis(port, extra)
      local deadline = now() + 5
      while p:running() and now() < deadline do
        local c, err = redis.connect { port = port, timeout = 0.5 }
        if c or (err and err:find("NOAUTH", 1, true)) then
          if c then c:close() end
          return p, port
        end
        sleep(0.05)
      end
      stop(p)
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

after_all(function() stop(server) end)

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

test("the timeout follows the one rule: an option in seconds, old forms refused by name", function()
  expect(function() redis.connect(5) end):raises("redis%.connect: a timeout is an option now: pass {timeout = 5}, not 5")
  expect(function() redis.connect { port = port, timeout = -1 } end)
    :raises("redis%.connect: timeout = %-1: a timeout is a number of seconds >= 0 %(0: poll, nil: the default, 5 s")
  expect(function() redis.connect { port = port, timeout = "5" } end):raises("timeout = 5: a timeout is a number")
  expect(function() redis.connect { port = port, timeout = math.huge } end):raises("timeout = inf: a timeout is a number")
  expect(function() redis.connect { port = port, timeout = 0 / 0 } end):raises("a timeout is a number of seconds >= 0")
  local c, err = redis.connect { port = port, timeout = 0 }
  expect(c == nil and err == "timeout"):is_true("0 polls: a handshake needs the server's answer, so it times out")
end)

test("argument mistakes raise", function()
  local c <close> = connect()
  expect(function() c:call() end):raises("no command")
  expect(function() c:call("GET", {}) end):raises("string or number expected")
  expect(function() c:call("GET", true) end):raises("string or number expected")
  expect(function() c:call("SUBSCRIBE", "ch") end):raises("not supported")
  expect(function() redis.connect { host = 127 } end):raises("host must be a string")
  expect(function() redis.connect { port = 70000 } end):raises("port out of range")
  expect(function() redis.connect { timeout = -1 } end):raises("timeout = %-1: a timeout is a number of seconds >= 0")
  expect(function() redis.connect { tiemout = 1 } end)
    :raises("redis%.connect: unknown option `tiemout`; did you mean `timeout`%?")
  expect(function() c:pipeline(function() end, { replys = "errors" }) end)
    :raises("redis pipeline: unknown option `replys`; did you mean `replies`%?")
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

test("replies of every size, kept from a pipeline, are intact", function()
  local c <close> = connect()
  local values = {}
  for _, n in ipairs { 0, 1, 62, 63, 64, 65, 200, 70000 } do values[#values + 1] = string.rep("v", n) end
  local res = c:pipeline(function(p)
    for i, v in ipairs(values) do p:call("SET", "sz:" .. i, v) end
    for i in ipairs(values) do p:call("GET", "sz:" .. i) end
    p:call("GET", "sz:none")
    p:call("ECHO", string.rep("e", 63))
    p:call("INCRBY", "sz:n", math.maxinteger)
  end)
  for i, v in ipairs(values) do
    expect(res[i]):eq("OK")
    expect(res[#values + i]):eq(v, "value of " .. #v .. " bytes")
  end
  expect(res[2 * #values + 1]):eq(redis.null)
  expect(res[2 * #values + 2]):eq(string.rep("e", 63))
  expect(res[2 * #values + 3]):eq(math.maxinteger)
  c:call("DEL", "sz:n")
end)

test("pipeline with replies = errors counts the error replies and keeps the first", function()
  local c <close> = connect()
  c:call("DEL", "pe:n", "pe:s")
  local n, first = c:pipeline(function(p)
    for _ = 1, 100 do p:call("INCR", "pe:n") end
  end, { replies = "errors" })
  expect(n):eq(0, "no error replies")
  expect(first):is_nil()
  expect(c:call("GET", "pe:n")):eq("100", "every command ran")
  n, first = c:pipeline(function(p)
    p:call("SET", "pe:s", "v")
    p:call("INCR", "pe:s")
    p:call("GET", "pe:missing")
    p:call("HGET", "pe:s", "f")
    p:call("INCR", "pe:n")
  end, { replies = "errors" })
  expect(n):eq(2)
  expect(first):matches("^ERR value is not an integer", "the first error, without a prefix")
  expect(c:call("GET", "pe:n")):eq("101", "commands after an error still ran")
  n, first = c:pipeline(function() end, { replies = "errors" })
  expect(n):eq(0, "an empty pipeline")
  expect(first):is_nil()
  expect(c:pipeline(function(p) p:call("PING") end, { replies = "all" })):eq({ "PONG" })
  expect(c:pipeline(function(p) p:call("PING") end, {})):eq({ "PONG" }, "all is the default")
  expect(function() c:pipeline(function() end, { replies = "none" }) end):raises('replies must be "all" or "errors"')
  expect(function() c:pipeline(function() end, "errors") end):raises("table expected")
end)

test("a pipeline with replies = errors counts the errors inside a transaction's EXEC", function()
  local c <close> = connect()
  c:call("DEL", "tx:s", "tx:n")
  c:call("SET", "tx:s", "v")
  local n, first = c:pipeline(function(p)
    p:call("MULTI")
    p:call("INCR", "tx:n")
    p:call("HSET", "tx:s", "f", "1")
    p:call("LPUSH", "tx:s", "x")
    p:call("EXEC")
    p:call("MULTI")
    p:call("INCR", "tx:n")
    p:call("EXEC")
  end, { replies = "errors" })
  expect(n):eq(2, "two commands of the first transaction failed when EXEC ran them")
  expect(first):matches("^WRONGTYPE")
  expect(c:call("GET", "tx:n")):eq("2", "the others ran")
  c:call("DEL", "tx:s", "tx:n")
end)

test("a pipeline with replies = errors of many commands, and a big reply among them", function()
  local c <close> = connect()
  c:call("SET", "pe:big", string.rep("x", 100000))
  local n, first = c:pipeline(function(p)
    for i = 1, 5000 do p:call("HSET", "pe:h", "f" .. i, i) end
    p:call("GET", "pe:big")
    p:call("LRANGE", "pe:big", 0, -1)
  end, { replies = "errors" })
  expect(n):eq(1)
  expect(first):matches("^WRONGTYPE")
  expect(c:call("HLEN", "pe:h")):eq(5000)
  c:call("DEL", "pe:h", "pe:big")
end)

test("a batch is filled ahead, sent by pipeline, and can be sent again", function()
  local c <close> = connect()
  c:call("DEL", "b:n")
  local b = redis.batch()
  expect(#b):eq(0)
  expect(b:call("INCR", "b:n")):eq(1, "call returns the reply's index")
  expect(b:call("INCRBY", "b:n", 10)):eq(2)
  expect(b:callf("GET %s", "b:n")):eq(3)
  expect(#b):eq(3)
  expect(tostring(b)):eq("redis batch (3 commands)")
  expect(c:pipeline(b)):eq({ 1, 11, "11" })
  expect(c:pipeline(b)):eq({ 12, 22, "22" }, "sent again, the same commands")
  expect(select("#", c:pipeline(b, { replies = "errors" }))):eq(2)
  expect(c:call("GET", "b:n")):eq("33")
  b:call("HGET", "b:n", "f")
  local n, first = c:pipeline(b, { replies = "errors" })
  expect(n):eq(1)
  expect(first):matches("^WRONGTYPE")
  local c2 <close> = connect()
  expect(#c2:pipeline(b)):eq(4, "a batch belongs to no connection")
  expect(c:pipeline(redis.batch())):eq({}, "an empty batch sends nothing")
  expect(function() c:pipeline(42) end):raises("function or redis batch expected")
  expect(function() c:pipeline(c) end):raises("function or redis batch expected")
  expect(function() b:call() end):raises("no command")
  expect(function() b:call("GET", {}) end):raises("string or number expected")
  expect(function() b:call("SUBSCRIBE", "ch") end):raises("not supported")
  expect(#b):eq(4, "a command that raised was not added")
end)

test("p takes no commands once its pipeline was sent", function()
  local c <close> = connect()
  local kept
  c:pipeline(function(p)
    kept = p
    p:call("PING")
  end)
  expect(function() kept:call("PING") end):raises("pipeline already sent")
  expect(function() kept:callf("PING") end):raises("pipeline already sent")
  expect(function() c:pipeline(kept) end):raises("pipeline already sent")
  expect(function()
    c:pipeline(function(p)
      p:call("PING")
      error("fn failed")
    end)
  end):raises("fn failed")
  expect(c:call("PING")):eq("PONG", "nothing of a failed fn was sent")
end)

test("callf builds commands from a format", function()
  local c <close> = connect()
  local res = c:pipeline(function(p)
    p:callf("SET cf:%s%u %d", "key@", -1, -42)         -- %u: the 64 bits unsigned
    p:callf("GET cf:key@%u", -1)
    p:callf("GET  cf:key@18446744073709551615 ")       -- extra spaces separate nothing
    p:callf("EXISTS cf:key@%u", math.mininteger)        -- 2^63, not the same key
    p:callf("SET cf:%s %s", "a b\0c\r\n", "x y")      -- values are binary-safe, spaces included
    p:callf("GET cf:%s", "a b\0c\r\n")
    p:callf("SET cf:pct %%%d%%", 5)
    p:callf("GET cf:pct")
    p:callf("SET cf:num %s", 2.5)
    p:callf("GET cf:num")
    p:callf("SET cf:empty %s", "")
    p:callf("STRLEN cf:empty")
    p:callf("ECHO %d", 7.0)
  end)
  expect(res):eq({ "OK", "-42", "-42", 0, "OK", "x y", "OK", "%5%", "OK", "2.5", "OK", 0, "7" })
  local b = redis.batch()
  expect(function() b:callf("SET %s") end):raises("wants more values")
  expect(function() b:callf("SET %s", "a", "b") end):raises("2 values given for a format that uses 1")
  expect(function() b:callf("SET %x", 1) end):raises("bad format")
  expect(function() b:callf("SET k %") end):raises("bad format")
  expect(function() b:callf("SET k %d", 1.5) end):raises("integer expected for")
  expect(function() b:callf("SET k %s", {}) end):raises("string or number expected")
  expect(function() b:callf("SUBSCRIBE ch") end):raises("not supported")
  expect(function() b:callf("   ") end):raises("no command")
  expect(#b):eq(0, "nothing of a failed callf was added")
  c:call("DEL", "cf:key@18446744073709551615", "cf:a b\0c\r\n", "cf:pct", "cf:num", "cf:empty")
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
  stop(p)
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
  expect(err):eq("timeout", "a connect that runs out of time says only that")
  expect(now() - t0):near(0.3, 0.2)
  p:kill("CONT")
  stop(p)
end)

test("a timeout fails every pending call and drops the connection", function()
  local c <close> = connect { timeout = 0.3 }
  local other = spawn(function() return c:pcall("GET", "x") end)
  local third = spawn(function() return c:pcall("PING") end)
  local t0 = now()
  local v, err = c:pcall("DEBUG", "SLEEP", "0.8")
  expect(now() - t0):near(0.3, 0.2)
  expect(v):is_nil()
  expect(err):eq("timeout")
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
  end):raises("redis: timeout$")
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
  p:wait { timeout = 5 }
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
  stop(p)
  os.remove(log)
end)

test("a stopped server times out a call", function()
  local p, sport = start_redis()
  local c <close> = connect { port = sport, timeout = 0.3 }
  local c2 <close> = connect { port = sport, timeout = 0.3 }
  expect(c:call("SET", "k", "v")):eq("OK")
  p:kill("STOP")
  local v, err = c:pcall("GET", "k")
  expect(v):is_nil()
  expect(err):eq("timeout")
  expect(function() c2:call("GET", "k") end):raises("redis: timeout$", "c:call raises the same timeout")
  p:kill("CONT")
  stop(p)
end)

test("after a server restart the old connection is lost and a new one works", function()
  local p, rport = start_redis()
  local c <close> = connect { port = rport, timeout = 1 }
  c:call("SET", "k", "before")
  stop(p)
  local v, err = c:pcall("GET", "k")
  expect(v):is_nil()
  expect(err):matches("^redis: connection lost")
  wait_gone(rport)
  local p2 = spawn_redis(rport)
  local c2 = eventually(function() return redis.connect { port = rport, timeout = 0.5 } end)
  expect(c2:call("GET", "k")):is_nil("a fresh server")
  expect(c:pcall("PING")):is_nil("no automatic reconnect")
  c2:close()
  stop(p2)
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
