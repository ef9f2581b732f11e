-- The report streams when stdout is not a terminal: through a pipe, each
-- test's line arrives when the test ends, not when the run ends, and what
-- was written is there even if the engine is then killed with SIGKILL.

package.path = debug.getinfo(1, "S").short_src:match("^(.*)/") .. "/lib/?.lua;" .. package.path
local child = require("child_engine")
local fs = require("fs")
local proc = require("proc")
local procfs = require("tests.lib.procfs")

-- The first test passes at once; the second writes a marker with its
-- worker's pid, then sleeps.
local SCENARIO = [[
test("first", function() end)

test("second sleeps", function()
  local pid = assert(io.open("/proc/self/stat")):read("a"):match("^%d+")
  local f = assert(io.open(os.getenv("STREAM_DIR") .. "/worker.pid", "w"))
  f:write(pid)
  f:close()
  sleep(tonumber(os.getenv("STREAM_SLEEP")))
end)
]]

-- Start the engine on the scenario with its stdout a pipe read by cat,
-- which appends what it reads to out.log (the engine | cat >> out.log).
local function start(sleep_s)
  local dir = child.files { ["stream.lua"] = SCENARIO }
  local file = dir .. "/stream.lua"
  local fifo = dir .. "/stdout.fifo"
  expect(proc.run { argv = { "mkfifo", fifo } }):eq(0, "mkfifo makes the pipe")
  local cat = assert(proc.spawn { argv = { "cat", fifo }, log = dir .. "/out.log" })
  local engine = assert(proc.spawn { argv = { child.BIN, "--no-color", "--artifacts", dir .. "/artifacts", file },
    env = { STREAM_DIR = dir, STREAM_SLEEP = tostring(sleep_s) }, log = fifo })
  return dir, engine, cat
end

-- Poll the log; returns {line = seconds since `t0` it was first seen} once
-- `last` is among them, and whether the engine was running when each was seen.
local function watch(log, engine, t0, last, limit)
  local seen, running = {}, {}
  local ok = pcall(eventually, function()
    for line in (fs.read(log) or ""):gmatch("[^\n]+") do
      if not seen[line] then seen[line], running[line] = now() - t0, engine:running() end
    end
    return seen[last] ~= nil
  end, { timeout = limit, interval = 0.02 })
  if not ok then
    fail(string.format("%q did not reach the pipe in %gs; it holds:\n%s", last, limit, fs.read(log) or "(nothing)"))
  end
  return seen, running
end

test("through a pipe, a test's line arrives when the test ends, before the next test's sleep is over", { timeout = 60 }, function()
  local t0 = now()
  local dir, engine, cat = start(3)
  local seen, running = watch(dir .. "/out.log", engine, t0, "  ok      second sleeps", 40)
  expect(engine:wait { timeout = 20 }):eq(0, "the run passes")
  cat:wait { timeout = 5 }
  local first, second = seen["  ok      first"], seen["  ok      second sleeps"]
  expect(first):not_nil("the first test's line reached the pipe")
  expect(running["  ok      first"]):is_true("the first test's line arrived while the engine still ran")
  expect(second - first):ge(1.5, string.format("the first test's line arrived %.2fs after the run began and the "
    .. "second's, which ends 3 s of sleep later, %.2fs after: lines are written as tests end", first, second))
  for line, at in pairs(seen) do
    if line:match("^kvengine: 1 file, seed %d+$") or line:match("^command: ") then
      expect(at):le(first, "the seed and the command line come first: " .. line)
    end
  end
  child.remove(dir)
end)

test("after SIGKILL of the engine and its worker, the lines it reported are in the log", { timeout = 60 }, function()
  local dir, engine, cat = start(30)
  watch(dir .. "/out.log", engine, now(), "  ok      first", 20)
  -- read once it is whole: the file exists, empty, before the pid is written
  local pid = eventually(function() return tonumber((fs.read(dir .. "/worker.pid") or ""):match("^%d+$")) end)
  engine:kill("KILL")
  local _, how = engine:wait { timeout = 10 }
  expect(how):eq("signal", "the engine died of the signal")
  eventually(function() return procfs.gone(pid) end, { timeout = 10 }) -- no orphan either
  local log = fs.read(dir .. "/out.log")
  expect(log):matches("^kvengine: 1 file, seed %d+\ncommand: [^\n]*stream%.lua\n[^\n]*stream%.lua\n  ok      first\n",
    "the seed, the command line, the file and the first test's line were written before the kill")
  cat:close()
  child.remove(dir)
end)
