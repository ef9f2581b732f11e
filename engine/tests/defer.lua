-- engine.defer and scope:defer: what runs when a scope ends, in which order,
-- and that a failure, a timeout or an error in a deferred function does not
-- keep the others from running.

local engine = require("engine")
local fs = require("fs")
local proc = require("proc")

local KVENGINE = assert(os.getenv("KVENGINE_BIN"), "KVENGINE_BIN is set by the engine")
local HERE = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$") or "."

local ran, collecting = {}, false

after_each(function()
  if collecting then ran[#ran + 1] = "after_each" end
end)

test("deferred functions run newest first, after the body and after_each", function()
  collecting = true
  for i = 1, 3 do
    engine.defer(function()
      ran[#ran + 1] = i
      collecting = i ~= 1
    end)
  end
  ran[#ran + 1] = "body"
end)

test("... so the next test finds them run", function()
  expect(ran):eq({ "body", "after_each", 3, 2, 1 }, "the order in which the first test's cleanup ran")
end)

local ended
test("a scope that has ended takes no more deferred functions", function()
  ended = engine.scope()
end)

test("... raises when one is given", function()
  expect(ended:open()):is_false("the previous test's scope is closed")
  expect(function() ended:defer(function() end) end):raises("defer: that scope has ended")
  expect(function() engine.defer("not a function") end):raises("function expected")
end)

-- Run defer/cases.lua in a kvengine of its own; returns its exit status, its
-- output and the lines its deferred functions wrote.
local function run_cases()
  local dir = fs.tmpdir()
  local log = dir .. "/defer.log"
  fs.write(log, "")
  local status, out, err = proc.run { argv = { KVENGINE, "--no-color", "--artifacts", dir,
    HERE .. "/defer/cases.lua" }, env = { DEFER_LOG = log }, timeout = 60 }
  local lines = {}
  for line in (fs.read(log) or ""):gmatch("[^\n]+") do lines[#lines + 1] = line end
  proc.run { argv = { "rm", "-rf", dir } }
  return status, out .. err, lines
end

test("they run after a failure and a timeout, past an error, and at the end of the file", function()
  local status, out, lines = run_cases()
  expect(lines):eq({
    "fails: 2", "fails: 1",
    "times out: 2", "times out: 1",
    "raises: 3", "raises: 1",
    "defers: outer", "defers: inner",
    "after_all",
    "file: from before_all", "file: from the top level",
  }, "each test's deferred functions newest first, then after_all, then the file's")
  expect(status):eq(1, "the run fails: three of its tests do")
  expect(out):contains("FAIL    fails")
  expect(out):contains("TIMEOUT times out")
  expect(out):matches("ERROR   one deferred function raises\n%s+deferred: cleanup broke",
    "an error in a deferred function fails a test that had passed")
  expect(out):contains("ok      a deferred function waits and defers")
end)
