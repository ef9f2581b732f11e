-- KVENGINE_TIME_SCALE is read in one place, engine.time_scale(): unset or
-- empty is 1, a number > 0 multiplies default waits (eventually's), and
-- anything else stops the run before it starts, naming the variable.

package.path = debug.getinfo(1, "S").short_src:match("^(.*)/") .. "/lib/?.lua;" .. package.path
local child = require("child_engine")

local SCENARIO = [[
local engine = require("engine")
test("scaled", function()
  log("scale " .. engine.time_scale())
  eventually(function() return false end)
end)
]]

local function run(scale)
  local dir = child.files { ["scale.lua"] = SCENARIO }
  local status, out, err = child.run({ "-v", "--artifacts", dir .. "/artifacts", dir .. "/scale.lua" },
    { KVENGINE_TIME_SCALE = scale })
  child.remove(dir)
  return status, out, err
end

test("a scale multiplies eventually's default timeout", function()
  local status, out = run("0.01")
  expect(status):eq(1)
  expect(out):contains("log: scale 0.01")
  expect(out):contains("eventually gave up after 0.05s", "5 s times 0.01")
end)

test("unset or empty, the scale is 1", function()
  expect(require("engine").time_scale()):type("number")
  local dir = child.files { ["one.lua"] = [[
test("one", function() expect(require("engine").time_scale()):eq(1) end)
]] }
  expect(child.run { dir .. "/one.lua" }):eq(0, "unset")
  expect(child.run({ dir .. "/one.lua" }, { KVENGINE_TIME_SCALE = "" })):eq(0, "empty")
  child.remove(dir)
end)

test("zero, negative or not a number: a usage error naming the variable, before any file runs", function()
  for _, bad in ipairs { "0", "-2", "fast", "1e999" } do
    local status, out, err = run(bad)
    expect(status):eq(2, "KVENGINE_TIME_SCALE=" .. bad)
    expect(err):contains("KVENGINE_TIME_SCALE=" .. bad .. ": the time scale is a number > 0")
    expect(out):eq("", "nothing ran")
  end
end)
