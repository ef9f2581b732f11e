-- The engine is stopped by SIGTERM in the middle of a file (as a CI job's
-- timeout does): what was reported before it is in the output, then the
-- closing line.
local proc = require "proc"

-- The pid of the kvengine parent running this worker, if that is what it is.
local function engine_pid()
  local ppid = assert(io.open("/proc/self/stat")):read("a"):match("^%d+ %b() %S+ (%d+)")
  local cmdline = io.open("/proc/" .. ppid .. "/cmdline")
  local argv0 = cmdline and cmdline:read("a"):match("^[^%z]*") or ""
  return argv0:match("kvengine$") and ppid or nil
end

test("reported before the signal", function() end)

test("stops the engine", function()
  local pid = engine_pid()
  if not pid then skip("run by a kvengine parent only (not as a bare worker)") end
  proc.run { argv = { "kill", "-TERM", pid } }
  sleep(30)
end)

test("never runs", function() end)
