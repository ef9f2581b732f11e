-- The one timeout rule (engine.h, engine/timeout.c) seen from a program:
-- a call given no timeout waits the default for its kind of wait times
-- KVENGINE_TIME_SCALE, so a child run with a small scale shows each
-- binding's default in a fraction of its length.

local http = require("http")
local proc = require("proc")

local SCALE = 0.05 -- defaults 5 s, 30 s, 60 s become 0.25 s, 1.5 s, 3 s

-- The program: each wait below is given no timeout; it prints how long each took.
local PROGRAM = [[
local http, proc, zmq = require("http"), require("proc"), require("zmq")
local function timed(name, fn)
  local t0 = now()
  local v, err = fn()
  print(string.format("%s %s %.3f", name, tostring(err), now() - t0))
end
local sub <close> = assert(zmq.sub { bind = "tcp://127.0.0.1:0" })
local pub <close> = assert(zmq.pub { bind = "tcp://127.0.0.1:0" })
timed("recv", function() return sub:recv() end)
timed("wait_subscribed", function() return pub:wait_subscribed("t") end)
local p <close> = assert(proc.spawn { argv = { "sleep", "30" } })
timed("p:wait", function() return p:wait() end)
timed("proc.run", function() return proc.run { argv = { "sleep", "30" } } end)
timed("http.get", function() return http.get(arg[1]) end)
]]

test("no timeout: the default for the kind of wait, times the time scale", function()
  local srv <close> = assert(http.listen { port = 0, handler = function(_, res)
    sleep(10)
    res:finish("late")
  end })
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(PROGRAM)
  f:close()
  local code, out, err = proc.run { argv = { os.getenv("KVENGINE_BIN"), "serve", script,
    "http://127.0.0.1:" .. srv:port() .. "/" }, env = { KVENGINE_TIME_SCALE = tostring(SCALE) }, timeout = 30 }
  os.remove(script)
  expect(code):eq(0, tostring(out) .. tostring(err))
  local took = {}
  for name, why, secs in out:gmatch("(%S+) (%S+) ([%d.]+)\n") do
    expect(why):eq("timeout", name .. " ran out of time")
    took[name] = tonumber(secs)
  end
  local defaults = { recv = 5, wait_subscribed = 5, ["p:wait"] = 60, ["proc.run"] = 60, ["http.get"] = 30 }
  for name, default in pairs(defaults) do
    expect(took[name]):near(default * SCALE, default * SCALE * 0.5 + 0.3, name .. "'s default, scaled")
  end
end)
