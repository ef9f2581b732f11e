-- engine.lua - what fixture libraries need from the engine beyond the test
-- API: `local engine = require "engine"`.
--
--   engine.scope() -> the scope the caller runs in (its test's, or the
--     file's); engine.spawn_in(scope, fn, ...) -> task: fn runs in that
--     scope, so what it opens lives as long as that scope, not as long as the
--     caller's test (a stack made in before_all restarting a pod in a test);
--     scope:open() tells whether it still runs; scope:defer(fn) runs fn
--     when the scope ends (engine.defer(fn): the caller's scope).
--   engine.check_options(fname, t, keys [, level]) -> t: raises, naming the
--     key and the closest valid one, when t has a key not in keys (a list or
--     a set); the error points `level` frames up as error() does (default 2:
--     the caller of the function that checks).  The bindings' own check.
--   engine.helper() marks the calling file as a helper library: failures
--     raised through it (expect, fail, eventually) point at the scenario's
--     line that called it, not at the library.
--   engine.artifacts_dir() -> the running test's artifacts folder (created);
--     engine.test_name() -> its name ("" outside a test).

local failure = require "failure"
local testapi = require "testapi"

local engine = {}

function engine.scope() return __kv.scope_current() end

function engine.spawn_in(scope, fn, ...) return __kv.spawn_in(scope, fn, ...) end

-- Deferred functions run when the scope ends: the test's (after its
-- after_each hooks, whether it passed, failed or timed out) or, for code at
-- file level or in before_all, the file's (after after_all).  Newest first,
-- each guarded with its own time limit; one that fails is reported and the
-- others still run.
function engine.defer(fn) return __kv.scope_current():defer(fn) end

engine.check_options = __kv.check_options

function engine.helper()
  failure.helper(debug.getinfo(2, "S").source)
end

function engine.artifacts_dir()
  local reg = testapi.current
  if not reg then error("engine.artifacts_dir: no test runs in this process", 2) end
  return reg.artifacts_dir()
end

function engine.test_name()
  local reg = testapi.current
  return reg and reg.current and reg.current.name or ""
end

return engine
