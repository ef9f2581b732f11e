-- The engine names no target: --target takes any name of a-z, 0-9, _ and -,
-- hands it to the fixtures as KVENGINE_TARGET, reads only max_files from
-- the target's module (targets.<name> on the module path) to cap -j, and
-- leaves an unknown name to the fixture layer.

package.path = debug.getinfo(1, "S").short_src:match("^(.*)/") .. "/lib/?.lua;" .. package.path
local child = require("child_engine")
local fs = require("fs")

-- A file that reports the target it sees and when it ran (monotonic clock,
-- one for every process), into the folder SEEN_DIR names.
local function file_recording(name)
  return string.format([[
local engine = require("engine")
test("records", function()
  local f = assert(io.open(os.getenv("SEEN_DIR") .. "/%s", "w"))
  local t0 = now()
  sleep(0.3)
  f:write(tostring(engine.target()), " ", tostring(os.getenv("KVENGINE_TARGET")), " ", t0, " ", now())
  f:close()
end)
]], name)
end

local function recorded(dir, name)
  local target, env, t0, t1 = assert(fs.read(dir .. "/" .. name)):match("^(%S+) (%S+) (%S+) (%S+)$")
  return { target = target, env = env, from = tonumber(t0), to = tonumber(t1) }
end

test("a target's max_files caps -j, and the run says so", function()
  local dir = child.files { ["targets/solo.lua"] = "return { max_files = 1 }\n",
    ["a.lua"] = file_recording("a"), ["b.lua"] = file_recording("b") }
  local status, out, err = child.run({ "-j", "2", "--target", "solo", dir .. "/a.lua", dir .. "/b.lua" },
    { KVENGINE_PATH = dir .. "/?.lua", SEEN_DIR = dir })
  expect(status):eq(0, out .. err)
  expect(err):contains("kvengine: the solo target runs 1 file at a time: -j 2 lowered to 1")
  local a, b = recorded(dir, "a"), recorded(dir, "b")
  expect(b.from >= a.to or a.from >= b.to):is_true(string.format(
    "the two files ran one after the other: a %.3f-%.3f, b %.3f-%.3f", a.from, a.to, b.from, b.to))
  expect({ a.target, a.env }):eq({ "solo", "solo" }, "the worker sees the target, as engine.target() and in the environment")
  child.remove(dir)
end)

test("a target module that does not load, or sets a bad max_files, stops the run with exit 3", function()
  local dir = child.files { ["targets/broken.lua"] = "error('no such cluster config')\n",
    ["targets/zero.lua"] = "return { max_files = 0 }\n", ["a.lua"] = file_recording("a") }
  local status, _, err = child.run({ "--target", "broken", dir .. "/a.lua" }, { KVENGINE_PATH = dir .. "/?.lua" })
  expect(status):eq(3)
  expect(err):contains("the broken target's module does not load")
  expect(err):contains("no such cluster config")
  status, _, err = child.run({ "--target", "zero", dir .. "/a.lua" }, { KVENGINE_PATH = dir .. "/?.lua" })
  expect(status):eq(3)
  expect(err):contains("targets.zero: max_files is a whole number >= 1, not 0")
  child.remove(dir)
end)

test("a name without a module is the fixture layer's to judge; no name means no target", function()
  local dir = child.files { ["a.lua"] = file_recording("a") }
  local status, out, err = child.run({ "--target", "my-cluster_2", dir .. "/a.lua" }, { SEEN_DIR = dir })
  expect(status):eq(0, out .. err)
  expect(recorded(dir, "a").target):eq("my-cluster_2")
  status, out, err = child.run({ dir .. "/a.lua" }, { SEEN_DIR = dir })
  expect(status):eq(0, out .. err)
  expect({ recorded(dir, "a").target, recorded(dir, "a").env }):eq({ "nil", "nil" },
    "without --target or KVENGINE_TARGET the workers get neither")
  expect(out):matches("\ncommand: %S+ " .. dir:gsub("%p", "%%%0") .. "/a%.lua\n", "the command line as given")
  child.remove(dir)
end)

test("a bad name is a usage error, from --target or KVENGINE_TARGET", function()
  local status, _, err = child.run { "--target", "Kind", "x.lua" }
  expect(status):eq(2)
  expect(err):contains("--target 'Kind': a target's name is made of a-z, 0-9, _ and -")
  status, _, err = child.run({ "x.lua" }, { KVENGINE_TARGET = "../kind" })
  expect(status):eq(2)
  expect(err):contains("KVENGINE_TARGET '../kind'")
end)

test("the fixture layer declares the target it picked when none was named, and only then", function()
  local dir = child.files { ["declare.lua"] = [[
local engine = require("engine")
test("declares", function()
  if os.getenv("KVENGINE_TARGET") then
    expect(function() engine.declare_target("local") end):raises("this run's target is kind")
  else
    expect(engine.target()):is_nil()
    engine.declare_target("local")
    expect(engine.target()):eq("local")
  end
end)
]] }
  for _, args in ipairs { {}, { "--target", "kind" } } do
    local argv = { table.unpack(args) }
    argv[#argv + 1] = dir .. "/declare.lua"
    local status, out, err = child.run(argv)
    expect(status):eq(0, out .. err)
  end
  child.remove(dir)
end)
