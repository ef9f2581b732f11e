-- The engine is stopped by SIGTERM in the middle of a file (as a CI job's
-- timeout does): what was reported before it is in the output, then the
-- closing line.
local proc = require "proc"

test("reported before the signal", function() end)

test("stops the engine", function()
  local stat = assert(io.open("/proc/self/stat")):read("a")
  local engine_pid = stat:match("^%d+ %b() %S+ (%d+)")
  proc.run { argv = { "kill", "-TERM", engine_pid } }
  sleep(30)
end)

test("never runs", function() end)
