-- Engine benchmarks, run by `make bench` as `kvengine serve engine_bench.lua`:
-- median wall time of whole kvengine runs beside `lua5.4 -e ''` (run in
-- turn with them), and the cost of the deadline hook on a pure-Lua loop.
local proc = require("proc")

local KV = os.getenv("KVENGINE_BIN")
local HERE = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$")
local RUNS = 21

local function wall(argv)
  local t0 = now()
  local status = proc.run { argv = argv, timeout = 60 }
  assert(status == 0 or status == 1, table.concat(argv, " ") .. " failed")
  return now() - t0
end

local function median(times)
  table.sort(times)
  return times[(RUNS + 1) // 2]
end

-- The median wall times of argv and of the reference, run in turn: on a
-- shared machine the load changes from one second to the next, and a
-- reference timed before or after would be timed under another load.
local function median_walls(argv, ref)
  local times, refs = {}, {}
  for i = 1, RUNS do
    refs[i] = wall(ref)
    times[i] = wall(argv)
  end
  return median(times), median(refs)
end

local function row(name, value, ref, target)
  print(string.format("%-42s %9.2f ms   reference %8.2f ms   ratio %6.2f   %s", name, value * 1000,
    ref * 1000, value / ref, target))
end

local LUA = { "lua5.4", "-e", "" }
local empty, lua_ref = median_walls({ KV, HERE .. "/empty.lua" }, LUA)
row("kvengine empty file (median)", empty, lua_ref, "target < 20 ms, 2x lua5.4")
local thousand, lua_ref2 = median_walls({ KV, HERE .. "/thousand.lua" }, LUA)
row("kvengine 1,000 trivial tests (median)", thousand, lua_ref2, "target < 100 ms")

local _, engine_out = proc.run { argv = { KV, "serve", HERE .. "/spin.lua" } }
local _, lua_out = proc.run { argv = { "lua5.4", HERE .. "/spin.lua" } }
local e, l = tonumber(engine_out), tonumber(lua_out)
print(string.format("%-42s %9.2f ms   lua5.4    %8.2f ms   ratio %6.2f   (deadline hook cost)",
  "30M-iteration Lua loop", e * 1000, l * 1000, e / l))
