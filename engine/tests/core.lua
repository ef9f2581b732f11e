-- The core functions a scenario builds on: tasks, waiting, and what a test
-- leaves behind.  The CLI's behaviour is pinned by golden.lua.

local http = require("http")

test("spawn runs concurrently and wait returns the results", function()
  local order = {}
  local t = spawn(function(a, b)
    order[#order + 1] = "task starts"
    sleep(0.02)
    return a + b, "done"
  end, 1, 2)
  order[#order + 1] = "test goes on"
  local sum, word = t:wait()
  expect({ sum, word }):eq({ 3, "done" })
  expect(order):eq({ "test goes on", "task starts" }, "a spawned task starts from the loop, not inside spawn")
  expect(t:done()):is_true()
end)

test("wait re-raises the task's error", function()
  local t = spawn(function() error("pod unreachable") end)
  expect(function() t:wait() end):raises("pod unreachable")
end)

test("parallel returns results in order", function()
  local r = parallel {
    function() sleep(0.03) return "slow" end,
    function() return "fast" end,
  }
  expect(r):eq({ "slow", "fast" })
end)

test("a cancelled task never resumes", function()
  local resumed = false
  local t = spawn(function() sleep(0.05) resumed = true end)
  sleep(0)
  t:cancel()
  sleep(0.1)
  expect(resumed):is_false("the task's sleep was cancelled with it")
  expect(function() t:wait() end):raises("abandoned")
end)

test("sleep(0) yields one turn and lets I/O through", function()
  local srv <close> = assert(http.listen { handler = function(_, res) res:finish("pong") end })
  local spinning = true
  local turns = 0
  local spinner = spawn(function()
    while spinning do
      turns = turns + 1
      sleep(0)
    end
  end)
  local r = assert(http.get("http://127.0.0.1:" .. srv:port() .. "/", { timeout = 2 }))
  spinning = false
  spinner:wait()
  expect(r.body):eq("pong", "the request completed while another task spun on sleep(0)")
  expect(turns):gt(0)
end)

test("a coroutine of the script's own cannot wait", function()
  local ok, err = coroutine.resume(coroutine.create(function() sleep(0.01) end))
  expect(ok):is_false()
  expect(err):matches("cannot wait here", "the message says why")
end)

local leaked_port
test("what a test opens is closed when it ends", function()
  local srv = assert(http.listen { handler = function(_, res) res:finish("x") end })
  leaked_port = srv:port()
end)

test("so the next test finds it closed", function()
  local r, err = http.get("http://127.0.0.1:" .. leaked_port .. "/", { timeout = 1 })
  expect(r):is_nil("the previous test's server was closed with its scope")
  expect(err):matches("onnect")
end)

-- engine.spawn_in: a fixture made at file level keeps what it starts for a test.
local engine = require("engine")
local file_scope = engine.scope()
local file_port

test("spawn_in runs in the scope given, not the caller's", function()
  local srv = engine.spawn_in(file_scope, function()
    return assert(http.listen { handler = function(_, res) res:finish("alive") end })
  end):wait()
  file_port = srv:port()
  expect(engine.test_name()):eq("spawn_in runs in the scope given, not the caller's")
end)

test("so what it opened outlives the test that asked", function()
  local r = assert(http.get("http://127.0.0.1:" .. file_port .. "/", { timeout = 2 }))
  expect(r.body):eq("alive", "the server belongs to the file's scope")
end)

-- engine.helper: a library's failures point at the scenario line that called it.
package.preload.owner_check = assert(load([[
  local engine = require("engine")
  engine.helper()
  return function(pod) expect(pod):eq("p1", "the owner serves") end
]], "@engine/tests/owner_check.lua"))

test("a helper library's failure points at its caller", function()
  local check = require("owner_check")
  local ok, err = pcall(check, "p2")
  expect(ok):is_false()
  expect(err.where):eq("engine/tests/core.lua:" .. (debug.getinfo(1, "l").currentline - 2),
    "the scenario's line, not the library's")
end)

test("a timer counts from when it is started, not from the loop's last turn", function()
  local t0 = now()
  while now() - t0 < 0.3 do end -- Lua busy, the loop's clock stands still
  local t1 = now()
  sleep(0.3)
  expect(now() - t1):ge(0.29, "sleep(0.3) after busy work must not return early")
end)
