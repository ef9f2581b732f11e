-- engine.lua - what fixture libraries need from the engine beyond the test
-- API: `local engine = require("engine")`.
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
--     engine.test_name() -> its name ("" outside a test);
--     engine.file_name() -> the scenario file this worker runs ("" outside).
--   engine.time_scale() -> the factor for default waits (KVENGINE_TIME_SCALE).
--   engine.timeout(fname, opts [, default]) -> seconds: the bindings' one
--     timeout rule for a library's own waits (opts.timeout; nil: default
--     seconds times time_scale(), or nil without a default; 0 polls); raises
--     on a bare number, a negative or a non-number timeout, naming fname.
--   engine.fd_limits() -> soft, hard: the process's open-file limits (the
--     engine raised the soft one to the hard one at start): what a fixture
--     that opens many sockets checks before it starts, to fail naming them.
--   engine.target() -> the run's target, or nil; engine.declare_target(name)
--     says which one the fixture layer picked when none was named.
--   engine.declare_version(component, version): what a driver started, for
--     known_gap marks scoped to versions.
--   engine.report(kind, data): structured data for the reports, attached to
--     the running test (outside a test, to the file) with the scenario line
--     that led to the call; the HTML report draws the kinds a fixture
--     library registered a drawer for, the other reports ignore them all.
--   engine.command{name=, usage=, summary=, script=} and
--     engine.drawer(kind, module): what a fixture library adds to the
--     engine, called from its kvengine_plugins.lua (plugins.lua).
--   engine.options.test, .eventually, .known_gap, .command: the keys test()
--     and eventually() check their options against, a known_gap mark's
--     fields, and engine.command's (as the bindings' module.options: the
--     editor types in types/ are checked against them).

local json = require("json")
local failure = require("failure")
local known_gap = require("known_gap")
local plugins = require("plugins")
local testapi = require("testapi")
local version = require("version")

local engine = {}

engine.options = { test = testapi.OPTIONS.test, eventually = testapi.OPTIONS.eventually,
  known_gap = known_gap.FIELD_NAMES, command = plugins.COMMAND_KEYS }

function engine.scope() return __kv.scope_current() end

function engine.spawn_in(scope, fn, ...) return __kv.spawn_in(scope, fn, ...) end

-- Deferred functions run when the scope ends: the test's (after its
-- after_each hooks, whether it passed, failed or timed out) or, for code at
-- file level or in before_all, the file's (after after_all).  Newest first,
-- each guarded with its own time limit; one that fails is reported and the
-- others still run.
function engine.defer(fn) return __kv.scope_current():defer(fn) end

engine.check_options = __kv.check_options
engine.timeout = __kv.timeout
engine.fd_limits = __kv.fd_limits

function engine.helper()
  failure.helper(debug.getinfo(2, "S").source)
end

function engine.artifacts_dir()
  local reg = testapi.current
  if not reg then error("engine.artifacts_dir: no test runs in this process", 2) end
  return reg.artifacts_dir()
end

function engine.file_name()
  local reg = testapi.current
  return reg and reg.file or ""
end

function engine.test_name()
  local reg = testapi.current
  return reg and reg.current and reg.current.name or ""
end


-- KVENGINE_TIME_SCALE's one reading (time_scale.lua): the parent checks it
-- before any file runs, so a run never starts with a bad value.
engine.time_scale = require("time_scale").read

local named_target = os.getenv("KVENGINE_TARGET")
if named_target == "" then named_target = nil end
local declared_target

function engine.target() return named_target or declared_target end

-- When the run names no target the fixture layer picks one; it says which.
function engine.declare_target(name)
  if type(name) ~= "string" or not name:match("^[a-z0-9_%-]+$") then
    error("engine.declare_target: a target's name is made of a-z, 0-9, _ and -", 2)
  end
  if named_target and named_target ~= name then
    error(string.format("engine.declare_target(%q): this run's target is %s", name, named_target), 2)
  end
  declared_target = name
end

function engine.declare_version(component, v) version.declare(component, v) end

engine.command = plugins.command
engine.drawer = plugins.drawer

local REPORT_MAX = 256 * 1024 -- bytes of JSON: a report is a summary, not a log

-- Sent to the parent with the other events of the test (report.lua keeps
-- it with the test), with the module of the kind's drawer: the parent,
-- which loads no fixture code, draws with it (plugins.lua). Outside a test
-- run (kvengine serve) nobody reads reports, and the call does nothing.
function engine.report(kind, data)
  if type(kind) ~= "string" or not kind:match("^[%w_%-]+$") then
    error("engine.report: the kind is a name made of letters, digits, _ and -", 2)
  end
  if type(data) ~= "table" then error("engine.report(" .. kind .. "): the data is a table, not " .. type(data), 2) end
  local ok, text = pcall(json.encode, data)
  if not ok then
    local why = tostring(text):match("json: (.*)") or tostring(text)
    error("engine.report(" .. kind .. "): JSON cannot carry the data: " .. why, 2)
  end
  if #text > REPORT_MAX then
    error(string.format("engine.report(%s): %d bytes of JSON, more than the %d a report may carry", kind, #text,
      REPORT_MAX), 2)
  end
  local reg = testapi.current
  if not reg then return end
  reg.emit { ev = "report", test = reg.current and reg.current.name, kind = kind, data = data,
    where = failure.caller(), drawer = plugins.drawer_of(kind) }
end

return engine
