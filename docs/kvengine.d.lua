---@meta
-- Type annotations for kvengine scenarios, for editors with the Lua language
-- server (LuaLS): add this folder to "Lua.workspace.library" in .luarc.json.
-- Nothing here runs; the engine provides these names.

---@class TestOptions
---@field timeout? number  seconds; default --timeout (30)
---@field tags? string[]
---@field skip? string  skip the test, with this reason
---@field known_gap? {reason: string, match?: string}|string  expected to fail as documented

---Register a test.
---@param name string
---@param opts_or_fn TestOptions|fun()
---@param fn? fun()
function test(name, opts_or_fn, fn) end

---@param fn fun()
function before_all(fn) end
---@param fn fun()
function after_all(fn) end
---@param fn fun()
function before_each(fn) end
---@param fn fun()
function after_each(fn) end

---Run fn(test_name, artifacts_dir) when a test fails or times out, before cleanup.
---@param fn fun(test_name: string, artifacts_dir: string)
function on_failure(fn) end

---Stop the test (or, at a file's top level, the file) and report it skipped.
---@param reason string
function skip(reason) end

---Fail the test with this message.
---@param message string
function fail(message) end

---Fail because the test's infrastructure would not start (exit status 3).
---@param message string
function infra_error(message) end

---@class Expectation
local Expectation = {}
---@param expected any
---@param message? string
---@return Expectation
function Expectation:eq(expected, message) end
---@return Expectation
function Expectation:ne(unexpected, message) end
---@return Expectation
function Expectation:gt(bound, message) end
---@return Expectation
function Expectation:ge(bound, message) end
---@return Expectation
function Expectation:lt(bound, message) end
---@return Expectation
function Expectation:le(bound, message) end
---@param tol number
---@return Expectation
function Expectation:near(x, tol, message) end
---@return Expectation
function Expectation:contains(x, message) end
---@param pattern string
---@return Expectation
function Expectation:matches(pattern, message) end
---@return Expectation
function Expectation:is_nil(message) end
---@return Expectation
function Expectation:not_nil(message) end
---@return Expectation
function Expectation:is_true(message) end
---@return Expectation
function Expectation:is_false(message) end
---@return Expectation
function Expectation:truthy(message) end
---@return Expectation
function Expectation:falsy(message) end
---@param name type
---@return Expectation
function Expectation:type(name, message) end
---@param n integer
---@return Expectation
function Expectation:len(n, message) end
---@param pattern? string
---@return Expectation
function Expectation:raises(pattern, message) end

---@param actual any
---@return Expectation
function expect(actual) end

---Call fn until it returns a truthy value without raising; return what it returned.
---@generic T
---@param fn fun(): T
---@param opts? {timeout?: number, interval?: number}
---@return T
function eventually(fn, opts) end

---@param seconds number
function sleep(seconds) end

---@class Task
local Task = {}
---@return any ...
function Task:wait() end
---@return boolean
function Task:done() end
function Task:cancel() end

---@param fn function
---@return Task
function spawn(fn, ...) end

---@param fns function[]
---@return any[]
function parallel(fns) end

---Monotonic time in seconds.
---@return number
function now() end

---@param ... any
function log(...) end

---@param name string
---@param data string
---@return string path
function artifact(name, data) end
