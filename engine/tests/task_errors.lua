-- A task's error is told once, by whoever can still take it: the code that
-- waits for the task, however late; else its test, which fails; else, at a
-- file's top level, the engine on stderr once the task's handle is gone.

package.path = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$") .. "/lib/?.lua;" .. package.path
local child = require("child_engine")

local DETACHED = "error in a background task"

-- Run one scenario file in a child kvengine; returns its status and what
-- it printed. -v: the report shows the worker's stderr even when the file
-- passed.
local function run_file(text)
  local dir = child.files { ["t.lua"] = text }
  local status, out, err = child.run { "-v", "--no-color", "--artifacts", dir .. "/artifacts", dir .. "/t.lua" }
  child.remove(dir)
  return status, out .. err
end

-- How many times the plain text `plain` occurs in `text`.
local function count(text, plain)
  return select(2, text:gsub(plain:gsub("%p", "%%%0"), ""))
end

test("an error of a task waited for after it ended is told by the waiter alone", function()
  local status, out = run_file [[
io.stderr:write("the worker's stderr\n")
local t = spawn(function() error("the sim would not start") end)
sleep(0.05) -- the task has failed; its handle is still held
local ok, e = pcall(t.wait, t)
test("the waiter took the error", function()
  expect(ok):is_false()
  expect(e):matches("the sim would not start")
end)
test("in a test too", function()
  local late = spawn(function() error("late but taken") end)
  sleep(0.05)
  collectgarbage()
  expect(function() late:wait() end):raises("late but taken")
end)
]]
  expect(status):eq(0, "both tests pass; output:\n" .. out)
  expect(out):contains("| the worker's stderr", "the worker's stderr is shown (-v), where a detached error would be")
  expect(count(out, DETACHED)):eq(0, "the waited-for errors are not reported as detached as well:\n" .. out)
end)

test("an error nobody can take any more is still told once", function()
  local status, out = run_file [[
spawn(function() error("handle dropped at the top level") end)
kept = spawn(function() error("handle kept, never waited") end)
sleep(0.05)
collectgarbage()
test("a dropped handle in a test fails it", function()
  spawn(function() error("dropped in a test") end)
  sleep(0.05)
  collectgarbage() -- the handle is gone before the test's scope closes
end)
]]
  expect(status):eq(1, "the test with the lost error fails; output:\n" .. out)
  expect(out):contains("a background task failed: ", "the test names the lost error")
  expect(count(out, "dropped in a test")):eq(1, "the test's lost error is reported once, by the test:\n" .. out)
  expect(count(out, DETACHED)):eq(2, "both top-level errors are reported on stderr:\n" .. out)
  expect(count(out, "handle dropped at the top level")):eq(1, "once, when the handle was collected")
  expect(count(out, "handle kept, never waited")):eq(1, "once, at the end of the file, its handle still held")
end)
