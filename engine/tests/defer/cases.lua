-- Run by engine/tests/defer.lua in a kvengine of its own: every deferred
-- function appends a line to $DEFER_LOG, which that test reads back.  The
-- tests fail, time out and raise on purpose.
local engine = require("engine")
local fs = require("fs")

local LOG = assert(os.getenv("DEFER_LOG"), "DEFER_LOG names the log file")

local function note(line)
  return function() fs.append(LOG, line .. "\n") end
end

engine.defer(note("file: from the top level"))
before_all(function() engine.defer(note("file: from before_all")) end)
after_all(note("after_all"))

test("fails", function()
  engine.defer(note("fails: 1"))
  engine.defer(note("fails: 2"))
  fail("on purpose")
end)

test("times out", { timeout = 0.2 }, function()
  engine.defer(note("times out: 1"))
  engine.scope():defer(note("times out: 2"))
  sleep(5)
end)

test("one deferred function raises", function()
  engine.defer(note("raises: 1"))
  engine.defer(function() error("cleanup broke") end)
  engine.defer(note("raises: 3"))
end)

test("a deferred function waits and defers", function()
  engine.defer(function()
    sleep(0.01)
    engine.defer(note("defers: inner"))
    fs.append(LOG, "defers: outer\n")
  end)
end)
