-- Artifacts only where they help: after a run, the artifacts folder holds
-- the folders of the tests that failed (and what their file wrote at file
-- level, such as a stack's logs), nothing of a file that passed, and with
-- --keep-artifacts everything.

package.path = debug.getinfo(1, "S").short_src:match("^(.*)/") .. "/lib/?.lua;" .. package.path
local child = require("child_engine")
local proc = require("proc")

-- Writes as a fixture does: a file-level stack's log from before_all, and in
-- each test a stack log of its own while it runs (engine.artifacts_dir()).
local function scenario(fails)
  return [[
local engine = require("engine")
local function write(dir, name, text)
  local f = assert(io.open(dir .. "/" .. name, "w"))
  f:write(text)
  f:close()
end

before_all(function() write(engine.artifacts_dir(), "file-stack.log", "the file's stack") end)

test("passes", function()
  write(engine.artifacts_dir(), "stack.log", "a passing test's stack")
  artifact("notes.txt", "kept only with --keep-artifacts")
end)

test("checks again", function()
  write(engine.artifacts_dir(), "stack.log", "another passing test's stack")
  ]] .. (fails and 'fail("on purpose")' or "") .. [[

end)
]]
end

-- Run kvengine on a green or red file; returns what is left under the
-- artifacts root (paths relative to it, sorted) and the exit status.
local function leftovers(fails, extra)
  local dir = child.files { ["case.lua"] = scenario(fails) }
  local root = dir .. "/artifacts"
  local argv = { "--artifacts", root, table.unpack(extra or {}) }
  argv[#argv + 1] = dir .. "/case.lua"
  local status, out, err = child.run(argv)
  local _, listing = proc.run { argv = { "find", root, "-mindepth", "1" } }
  local left = {}
  for path in (listing or ""):gmatch("[^\n]+") do left[#left + 1] = path:sub(#root + 2) end
  table.sort(left)
  child.remove(dir)
  return left, status, out .. err
end

local function relative(left)
  local out = {}
  for i, p in ipairs(left) do out[i] = p:gsub("^[^/]+", "<file>") end
  return out
end

test("a green run leaves no artifacts folder", function()
  local left, status, out = leftovers(false)
  expect(status):eq(0, out)
  expect(left):eq({}, "every folder of a file that passed is removed, the root the run made too")
end)

test("a red run keeps the failed test's folder and the file's, not the passing test's", function()
  local left, status, out = leftovers(true)
  expect(status):eq(1, out)
  expect(relative(left)):eq({ "<file>", "<file>/checks_again", "<file>/checks_again/failure.txt",
    "<file>/checks_again/stack.log", "<file>/file-stack.log" },
    "the failure's folder (its stack log and failure.txt) and the file's stack log stay; 'passes' goes")
end)

test("--keep-artifacts keeps every test's folder of a green run", function()
  local left, status, out = leftovers(false, { "--keep-artifacts" })
  expect(status):eq(0, out)
  expect(relative(left)):eq({ "<file>", "<file>/checks_again", "<file>/checks_again/stack.log",
    "<file>/file-stack.log", "<file>/passes", "<file>/passes/notes.txt", "<file>/passes/stack.log" })
  expect(out):contains("artifacts of every test: ", "the report says where they are")
end)

test("a root folder that was there before the run stays", function()
  local dir = child.files { ["case.lua"] = scenario(false) }
  expect(child.run { "--artifacts", dir, dir .. "/case.lua" }):eq(0)
  local _, listing = proc.run { argv = { "find", dir, "-mindepth", "1" } }
  expect(listing):eq(dir .. "/case.lua\n", "only the scenario is left in the folder given as --artifacts")
  child.remove(dir)
end)
