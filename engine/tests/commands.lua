-- The engine names no fixture: commands of `kvengine` and the HTML report's
-- drawers are what fixture libraries register (engine.command,
-- engine.drawer) in a kvengine_plugins.lua on the module path.  Here a
-- library of the test's own, on KVENGINE_PATH, registers them.

package.path = debug.getinfo(1, "S").short_src:match("^(.*)/") .. "/lib/?.lua;" .. package.path
local child = require("child_engine")
local engine = require("engine")
local fs = require("fs")

local REGISTRATION = [[
local engine = require("engine")
engine.command { name = "hello", usage = "[NAME...]", summary = "greets everyone named", script = "greet" }
engine.command { name = "up", usage = "", summary = "this library's own up", script = "greet" }
engine.drawer("dots", "mylib.dots")
engine.drawer("broken", "mylib.no_such_module")
]]

local GREET = [[print("hello " .. table.concat(arg, ",") .. " from " .. arg[0]:match("[^/]*$"))]]

local DOTS = [[
local svg = require("report_svg")
return {
  draw = function(r)
    local marks = {}
    for i, v in ipairs(r.data.values) do
      marks[i] = string.format('<circle class="dot" cx="%d" cy="10" r="4" data-value="%s"/>', i * 12, v)
    end
    return svg.figure("dots", {}, "dots" .. svg.where(r), svg.svg("dots", 200, 20, marks))
  end,
  style = "svg .dot{fill:#123456}",
}
]]

local SCENARIO = [[
local engine = require("engine")
test("dots", function()
  engine.report("dots", { values = { 3, 1, 4 } })
  engine.report("broken", { x = 1 })
  engine.report("nobody-draws-this", { x = 1 })
end)
]]

local function library(extra)
  local files = { ["kvengine_plugins.lua"] = REGISTRATION, ["greet.lua"] = GREET, ["mylib/dots.lua"] = DOTS,
    ["s.lua"] = SCENARIO }
  for k, v in pairs(extra or {}) do files[k] = v end
  local dir = child.files(files)
  return dir, { KVENGINE_PATH = dir .. "/?.lua" }
end

test("a registered command runs its script with its arguments", function()
  local dir, env = library()
  local status, out, err = child.run({ "hello", "a", "b" }, env)
  expect(status):eq(0, err)
  expect(out):eq("hello a,b from greet.lua\n")
  child.remove(dir)
end)

test("a library earlier on the module path overrides a later one's command", function()
  local dir, env = library()
  local status, out, err = child.run({ "up", "x" }, env)
  expect(status):eq(0, err)
  expect(out):eq("hello x from greet.lua\n", "KVENGINE_PATH's up, not the checkout's fixtures")
  child.remove(dir)
end)

test("--help lists every library's commands, with their usage and summary", function()
  local dir, env = library()
  local status, out = child.run({ "--help" }, env)
  expect(status):eq(0)
  expect(out):matches("\n       kvengine hello %[NAME%.%.%.%] +greets everyone named\n")
  expect(out):contains("kvengine inject", "the checkout's fixture library is on the path too")
  expect(out):contains("options:")
  child.remove(dir)
end)

test("a misspelt command names the closest; a path of that name runs as a path", function()
  local dir, env = library()
  local status, out, err = child.run({ "helo" }, env)
  expect(status):eq(2, out)
  expect(err):contains("kvengine: helo: no such command, file or folder; did you mean `kvengine hello`?")
  status, out, err = child.run({ "zzzz" }, env)
  expect(status):eq(2)
  expect(err):contains("zzzz: no such file or folder", "nothing close: the word was a path")
  fs.mkdir_p(dir .. "/helo")
  fs.write(dir .. "/helo/t.lua", 'test("runs", function() end)\n')
  local cmd = string.format("cd %s && KVENGINE_PATH='%s' %s --no-color helo", dir, env.KVENGINE_PATH, child.BIN)
  local ok, why, code = os.execute(cmd .. " >/dev/null 2>&1")
  expect({ ok, why, code }):eq({ true, "exit", 0 }, "the folder helo runs")
  child.remove(dir)
end)

test("a registration that fails is named; paths still run", function()
  local dir, env = library { ["kvengine_plugins.lua"] = 'error("no such thing")\n' }
  local status, out, err = child.run({ "hello" }, env)
  expect(status):eq(3, out)
  expect(err):contains("a fixture library's registration failed:")
  expect(err):contains("kvengine_plugins.lua:1: no such thing")
  status, out = child.run({ "--help" }, env)
  expect(status):eq(0)
  expect(out):contains("no such thing")
  status, out, err = child.run({ "--no-color", dir .. "/s.lua", "--filter", "none" }, env)
  expect(status):eq(0, out .. err)
  child.remove(dir)
end)

test("engine.command and engine.drawer refuse what they cannot register", function()
  expect(function() engine.command { name = "x", usage = "", summary = "", scirpt = "x" } end)
    :raises("engine.command: unknown option `scirpt`; did you mean `script`?")
  expect(function() engine.command { name = "serve", usage = "", summary = "", script = "x" } end)
    :raises("`serve` is the engine's own command")
  expect(function() engine.command { name = "Bad", usage = "", summary = "", script = "x" } end)
    :raises("name is a name of a%-z, 0%-9, _ and %-, not Bad")
  expect(function() engine.drawer("a kind", "m") end):raises("engine.drawer: the kind is a name of letters")
  expect(function() engine.drawer("k", 3) end):raises("engine.drawer: the module is a module name")
  engine.drawer("twice-" .. engine.test_name():len(), "m")
  expect(function() engine.drawer("twice-" .. engine.test_name():len(), "n") end):raises("registered twice")
end)

test("a registered drawer draws its kind in the HTML page, with its style", function()
  local dir, env = library()
  local page = dir .. "/report.html"
  local status, out, err = child.run({ "--no-color", "--html", page, dir .. "/s.lua" }, env)
  expect(status):eq(0, out .. err)
  local html = assert(fs.read(page))
  expect(select(2, html:gsub('<circle class="dot"', ""))):eq(3, "one dot per value")
  expect(html):contains('data-kind="dots"')
  expect(html):contains("svg .dot{fill:#123456}", "the drawer's CSS is in the page")
  expect(html):contains("s.lua:4 could not be drawn: module &#39;mylib.no_such_module&#39; not found:</p>",
    "the first line of why")
  expect(html:find("nobody-draws-this", 1, true)):is_nil("a kind nobody draws is left out")
  child.remove(dir)
end)
