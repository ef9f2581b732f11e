-- Engine benchmarks, run by `make bench` as `kvengine serve engine_bench.lua`:
-- median wall time of whole kvengine runs beside `lua5.4 -e ''`, and the
-- cost of the deadline hook on a pure-Lua loop.
local proc = require("proc")

local KV = os.getenv("KVENGINE_BIN")
local HERE = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$")
local RUNS = 21

local function median_wall(argv)
  local times = {}
  for i = 1, RUNS do
    local t0 = now()
    local status = proc.run { argv = argv, timeout = 60 }
    times[i] = now() - t0
    assert(status == 0 or status == 1, table.concat(argv, " ") .. " failed")
  end
  table.sort(times)
  return times[(RUNS + 1) // 2]
end

local function row(name, value, ref, target)
  print(string.format("%-42s %9.2f ms   reference %8.2f ms   ratio %6.2f   %s", name, value * 1000,
    ref * 1000, value / ref, target))
end

local lua_ref = median_wall { "lua5.4", "-e", "" }
row("kvengine empty file (median)", median_wall { KV, HERE .. "/empty.lua" }, lua_ref, "target < 20 ms")
row("kvengine 1,000 trivial tests (median)", median_wall { KV, HERE .. "/thousand.lua" }, lua_ref,
  "target < 100 ms")

local _, engine_out = proc.run { argv = { KV, "serve", HERE .. "/spin.lua" } }
local _, lua_out = proc.run { argv = { "lua5.4", HERE .. "/spin.lua" } }
local e, l = tonumber(engine_out), tonumber(lua_out)
print(string.format("%-42s %9.2f ms   lua5.4    %8.2f ms   ratio %6.2f   (deadline hook cost)",
  "30M-iteration Lua loop", e * 1000, l * 1000, e / l))
