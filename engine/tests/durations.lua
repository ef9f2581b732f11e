-- With several workers the files a past run found longest start first
-- (engine/lua/durations.lua), and the report still lists them in the order
-- given; with one worker, or without figures, files start in that order.

package.path = debug.getinfo(1, "S").short_src:match("^(.*)/") .. "/lib/?.lua;" .. package.path
local child = require("child_engine")
local fs = require("fs")

-- Each file notes its name in started.log when it starts, then sleeps.
local function sleeper(name, secs)
  return string.format([[
local f = assert(io.open(os.getenv("DUR_DIR") .. "/started.log", "a"))
f:write(%q, "\n")
f:close()
test(%q, function() sleep(%s) end)
]], name, name .. " sleeps", secs)
end

local function started(dir)
  local out = {}
  for line in (fs.read(dir .. "/started.log") or ""):gmatch("[^\n]+") do out[#out + 1] = line end
  fs.write(dir .. "/started.log", "")
  return out
end

local function run(dir, jobs)
  local status, out = child.run({ "--no-color", "-j", tostring(jobs), "--artifacts", dir .. "/artifacts",
    dir .. "/a.lua", dir .. "/b.lua", dir .. "/c.lua" },
    { DUR_DIR = dir, KVENGINE_DURATIONS = dir .. "/durations" })
  expect(status):eq(0, out)
  return out
end

test("the longest file of the last run starts first; the report keeps the order given", function()
  local dir = child.files { ["a.lua"] = sleeper("a", 0.1), ["b.lua"] = sleeper("b", 0.6),
    ["c.lua"] = sleeper("c", 1.2) }
  run(dir, 2)
  local first = started(dir)
  expect(first[3]):eq("c", "without figures c, given last, waits for a worker: " .. table.concat(first, " "))
  expect(fs.read(dir .. "/durations")):matches("c%.lua\n")

  local out = run(dir, 2)
  local second = started(dir)
  expect(second[3]):eq("a", "c and b took longest last time, so they start first, a once a worker is free: "
    .. table.concat(second, " "))
  local a, b, c = out:find("a sleeps", 1, true), out:find("b sleeps", 1, true), out:find("c sleeps", 1, true)
  expect(a and b and c and a < b and b < c):is_true("the report lists a, b, c as given:\n" .. out)

  run(dir, 1)
  expect(started(dir)):eq({ "a", "b", "c" }, "one worker runs the files in the order given")
  child.remove(dir)
end)

test("a cache that cannot be read or written changes nothing but the order", function()
  local dir = child.files { ["a.lua"] = sleeper("a", 0), ["b.lua"] = sleeper("b", 0), ["c.lua"] = sleeper("c", 0) }
  fs.write(dir .. "/durations", "not\ta cache\nat all")
  run(dir, 2)
  expect(#started(dir)):eq(3, "every file ran with a garbled cache")
  local status, out = child.run({ "--no-color", "-j", "2", "--artifacts", dir .. "/artifacts", dir .. "/a.lua" },
    { DUR_DIR = dir, KVENGINE_DURATIONS = dir .. "/a.lua/durations" }) -- a folder that is a file
  expect(status):eq(0, "an unwritable cache does not fail the run: " .. out)
  child.remove(dir)
end)

-- A rewrite drops the lines of files that no longer exist, so a planted
-- line for a missing file shows whether the run rewrote the cache.
test("a run whose figure hardly moved leaves the cache alone; a moved figure rewrites it", function()
  local dir = child.files { ["a.lua"] = sleeper("a", 0) }
  local path = __kv.realpath(dir .. "/a.lua")
  local planted = "5.000\t\t" .. dir .. "/gone.lua\n"
  local function one_run()
    local status, out = child.run({ "--no-color", "--artifacts", dir .. "/artifacts", dir .. "/a.lua" },
      { DUR_DIR = dir, KVENGINE_DURATIONS = dir .. "/durations" })
    expect(status):eq(0, out)
  end
  fs.write(dir .. "/durations", planted .. "0.001\t\t" .. path .. "\n")
  one_run()
  expect(fs.read(dir .. "/durations")):eq(planted .. "0.001\t\t" .. path .. "\n",
    "a figure within 0.1 s of the last one is settled: the cache is not rewritten")
  fs.write(dir .. "/durations", planted .. "30.000\t\t" .. path .. "\n")
  one_run()
  local text = fs.read(dir .. "/durations")
  expect(text):matches("^[%d.]+\t\t" .. path:gsub("%p", "%%%0") .. "\n$",
    "a figure that moved (30 s, now about none) is written, and the missing file's line dropped")
  child.remove(dir)
end)
