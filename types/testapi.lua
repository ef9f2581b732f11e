---@meta _
-- The test API: the globals every scenario and test file sees
-- (engine/lua/testapi.lua, engine/core.c; docs/api.md). For the Lua language
-- server (LuaLS): the repository's .luarc.json puts this folder on its
-- library. Nothing here runs. fixtures/tests/types.lua checks these files
-- against the engine as it runs, line by line: keep one `---@class`,
-- `---@field` or `function` per line.

---Register a test. Any option key but engine.options.test's fails the file at this line,
---naming the closest valid one.
---@param name string
---@param opts_or_fn engine.options.test|fun()
---@param fn? fun()
function test(name, opts_or_fn, fn) end

---Once per file, before its first test that runs.
---@param fn fun()
function before_all(fn) end

---Once per file, after its last test that ran.
---@param fn fun()
function after_all(fn) end

---Before every test.
---@param fn fun()
function before_each(fn) end

---After every test, after failures and timeouts too.
---@param fn fun()
function after_each(fn) end

---Run fn(test_name, artifacts_dir) when a test fails or times out, before after_each and
---cleanup. At file level it serves every test; inside a test, that test only.
---@param fn fun(test_name: string, artifacts_dir: string)
function on_failure(fn) end

---Stop the test (or, at a file's top level, the file) and report it skipped.
---@param reason string
function skip(reason) end

---Fail the test with this message (and more lines under it).
---@param message string
---@param details? string
function fail(message, details) end

---Fail because the test's infrastructure would not start (the run exits 3).
---@param message string
function infra_error(message) end

---Assertions on actual: expect(x):eq(y, "why").
---@param actual any
---@return Expectation
function expect(actual) end

---Call fn until it returns a truthy value without raising; return what it returned.
---Defaults: 5 s (times engine.time_scale()), every 0.05 s.
---@generic T
---@param fn fun(): T
---@param opts? engine.options.eventually
---@return T
function eventually(fn, opts) end

---Let the loop run for seconds (0: one turn).
---@param seconds number
function sleep(seconds) end

---Run fn(...) concurrently, as a task of the caller's scope.
---@param fn function
---@param ... any
---@return Task
function spawn(fn, ...) end

---Run the functions concurrently and wait for all; their first results in order, or
---raises the first error.
---@param fns function[]
---@return any[]
function parallel(fns) end

---Monotonic time in seconds.
---@return number
function now() end

---A line in the report, shown for failed tests and with -v.
---@param ... any
function log(...) end

---Write data to name in the test's artifacts folder; returns the path.
---@param name string  a plain file name
---@param data string
---@return string path
function artifact(name, data) end

---What expect(actual) returns. Each method takes an optional last argument, the message,
---and returns the expectation, so checks chain.
---@class Expectation
local Expectation = {}

---Deep equality (tables compared by content; a failure lists the paths that differ).
---@param expected any
---@param message? string
---@return Expectation
function Expectation:eq(expected, message) end

---@param unexpected any
---@param message? string
---@return Expectation
function Expectation:ne(unexpected, message) end

---@param bound number|string
---@param message? string
---@return Expectation
function Expectation:gt(bound, message) end

---@param bound number|string
---@param message? string
---@return Expectation
function Expectation:ge(bound, message) end

---@param bound number|string
---@param message? string
---@return Expectation
function Expectation:lt(bound, message) end

---@param bound number|string
---@param message? string
---@return Expectation
function Expectation:le(bound, message) end

---abs(actual - x) <= tol
---@param x number
---@param tol number
---@param message? string
---@return Expectation
function Expectation:near(x, tol, message) end

---A substring of a string, or an element (deep-equal) of a table.
---@param x any
---@param message? string
---@return Expectation
function Expectation:contains(x, message) end

---A string matching a Lua pattern.
---@param pattern string
---@param message? string
---@return Expectation
function Expectation:matches(pattern, message) end

---@param message? string
---@return Expectation
function Expectation:is_nil(message) end

---@param message? string
---@return Expectation
function Expectation:not_nil(message) end

---@param message? string
---@return Expectation
function Expectation:is_true(message) end

---@param message? string
---@return Expectation
function Expectation:is_false(message) end

---@param message? string
---@return Expectation
function Expectation:truthy(message) end

---@param message? string
---@return Expectation
function Expectation:falsy(message) end

---type(actual) == name
---@param name type
---@param message? string
---@return Expectation
function Expectation:type(name, message) end

---#actual == n
---@param n integer
---@param message? string
---@return Expectation
function Expectation:len(n, message) end

---actual is a function that raises (an error matching pattern).
---@param pattern? string
---@param message? string
---@return Expectation
function Expectation:raises(pattern, message) end

---What spawn and engine.spawn_in return.
---@class Task
local Task = {}

---Wait for the task: its results, or raises its error.
---@return any ...
function Task:wait() end

---@return boolean
function Task:done() end

---Stop the task where it waits.
function Task:cancel() end
