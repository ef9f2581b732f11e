-- runner.lua - runs one scenario file in a worker and reports as it goes.
--
-- The file's top level registers tests and hooks; then every selected test
-- runs in a scope of its own: before_each hooks and the body share the test's
-- time limit, on_failure handlers and after_each hooks get their own, and
-- the functions deferred on the scope (engine.defer) run next, newest first,
-- and closing the scope abandons whatever the test left running and closes
-- what it opened.  What file-level code and before_all deferred runs after
-- after_all.  Every run goes through __kv.run, whose deadline the test
-- cannot catch.  Events go to the parent as JSON lines (see report.lua).
-- A file's run is a FileRun object, the steps of its lifecycle its methods.

local cjson = require("cjson")
local command = require("command")
local engine = require("engine")
local failure = require("failure")
local known_gap = require("known_gap")
local testapi = require("testapi")
local show = require("expect").show

local M = {}

local HANDLER_TIMEOUT = 30
local DRAIN_LIMIT = 5 -- seconds; a child's SIGKILL backstop (bindings/proc.c) comes sooner

local function fnv1a(s)
  local h = 2166136261
  for i = 1, #s do h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff end
  return h
end

local function derive_seed(parent, name)
  return fnv1a(tostring(parent) .. "\0" .. name) % 2147483646 + 1
end

local function slug(s)
  return (s:gsub("%.lua$", ""):gsub("[^%w%-_.]+", "_"):gsub("^_+", ""))
end

local function failed(o) return o.status == "fail" or o.status == "error" or o.status == "timeout" end

-- Map what __kv.run returned to an outcome table.
local function classify(file, limit, st, a, b)
  if st == "ok" then return { status = "pass" } end
  if st == "timeout" then
    local msg = __kv.file_expired() and "the file's time limit was reached"
      or string.format("timed out after %gs", limit)
    return { status = "timeout", message = msg, where = failure.where(nil, a, file), traceback = a }
  end
  local kind = failure.kind(a)
  if kind == "skip" then return { status = "skip", reason = a.reason } end
  if kind == "fail" then
    return { status = "fail", message = a.message, where = a.where, details = a.details, traceback = b }
  end
  local infra = kind == "infra" or nil
  return { status = "error", infra = infra, message = (infra and "infrastructure: " or "") .. failure.text(a),
    where = failure.where(a, b, file), traceback = b }
end

local function select_tests(reg, opts)
  local wanted = {}
  for _, tag in ipairs(opts.tags) do wanted[tag] = true end
  local function has(tags, set)
    for _, tag in ipairs(tags or {}) do if set[tag] then return true end end
    return false
  end
  local excluded = {}
  for _, tag in ipairs(opts.exclude_tags) do excluded[tag] = true end
  local out = {}
  for _, t in ipairs(reg.tests) do
    local ok = (not opts.filter or t.name:find(opts.filter) ~= nil)
      and (#opts.tags == 0 or has(t.opts.tags, wanted))
      and not has(t.opts.tags, excluded)
    if ok then out[#out + 1] = t end
  end
  return out
end

-- The test's known_gap mark, when it applies to this run (known_gap.lua).
local function gap_of(t)
  local gap = t.opts.known_gap
  return known_gap.applies(gap, engine.target()) and gap or nil
end

local function apply_known_gap(t, o)
  local gap = gap_of(t)
  if not gap then return end
  if o.status == "pass" then
    o.status, o.where = "fail", t.where
    o.message = "the known gap did not show: gap closed? remove the known_gap mark (" .. known_gap.summary(gap) .. ")"
  elseif known_gap.expected(gap, o) then
    o.status, o.reason, o.link, o.summary = "gap", gap.reason, gap.link, known_gap.summary(gap)
  elseif failed(o) then
    o.message = (o.message or "") .. " (not the known gap, which fails matching " .. show(gap.match) .. ")"
  end
end

local function write_failure(o, dir)
  local ok = __kv.mkdir_p(dir)
  if not ok then return end
  local f = io.open(dir .. "/failure.txt", "w")
  if not f then return end
  f:write(o.status, ": ", o.message or "", "\n")
  if o.where then f:write("at ", o.where, "\n") end
  if o.details then f:write("\n", o.details, "\n") end
  if o.traceback then f:write("\n", o.traceback, "\n") end
  f:write("\nrerun: ", o.rerun, "\n")
  f:close()
end

-- FileRun: one file's run, from file_start to file_end.  The lifecycle is
-- its methods, in the order run calls them: load (the top level registers
-- tests and hooks), run_tests (before_all, each test, after_all), finish
-- (what the file deferred, then file_end).  Its state is in fields:
--   opts                the worker's options (kv_options_push), opts.file among them
--   file, base, seed    the scenario file, its artifacts folder, its seed
--   reg                 the file's registry (testapi.install); reg.current is
--                       the running test's record while one runs, else nil
--   code                the worker's exit code so far: 0, 1 (something failed)
--                       or 3 (an infrastructure error)
--   tests               the selected tests, once the top level has run
--   before_all_failure  the outcome of the before_all hook that did not pass
local FileRun = {}
FileRun.__index = FileRun

-- Begin the run of opts.file: install the globals a scenario sees, start the
-- file's time limit and tell the parent the file started.
function FileRun.new(opts)
  local self = setmetatable({ opts = opts, file = opts.file, code = 0 }, FileRun)
  self.seed = derive_seed(opts.seed, self.file)
  self.base = opts.artifacts .. "/" .. slug(self.file) .. (opts.run > 1 and ("-run" .. opts.run) or "")
  self.reg = testapi.install(self.file, function(ev) self:emit(ev) end)
  self.reg.file_dir = self.base
  __kv.file_deadline(opts.file_timeout)
  self:emit { ev = "file_start", seed = opts.seed, run = opts.run, artifacts = self.base }
  return self
end

-- Send one report event to the parent, marked with the file (report.lua).
function FileRun:emit(ev)
  ev.file = self.file
  __kv.emit(cjson.encode(ev) .. "\n")
end

-- Count a failed outcome in the exit code: an infrastructure error makes it
-- 3, anything else at least 1.
function FileRun:count_failure(o)
  self.code = o.infra and 3 or math.max(self.code, 1)
end

-- Report a failure of the file itself, one no test owns, with the message
-- after prefix.
function FileRun:file_error(o, prefix)
  self:emit { ev = "file_error", message = (prefix or "") .. (o.message or o.status), where = o.where,
    traceback = o.traceback, infra = o.infra }
  self:count_failure(o)
end

-- Run fn within limit seconds in scope (nil: the file's); its outcome.
function FileRun:guarded(fn, limit, scope)
  return classify(self.file, limit, __kv.run(fn, math.max(limit, 0.001), scope))
end

-- Run what was deferred on scope (nil: the file's), newest first, each
-- guarded; what one defers meanwhile runs too.  Returns the outcomes of
-- those that failed, in the order they ran.
function FileRun:run_deferred(scope)
  local failures = {}
  while true do
    local list = __kv.take_deferred(scope)
    if #list == 0 then return failures end
    for i = #list, 1, -1 do
      local o = self:guarded(list[i], HANDLER_TIMEOUT, scope)
      if failed(o) then failures[#failures + 1] = o end
    end
  end
end

-- Call each on_failure handler of list with (name, dir), each guarded: a
-- handler that fails is logged, and fails nothing, since what it diagnoses
-- has failed already.
function FileRun:run_handlers(list, name, dir, scope)
  for _, fn in ipairs(list) do
    local o = self:guarded(function() fn(name, dir) end, HANDLER_TIMEOUT, scope)
    if failed(o) then
      self:emit { ev = "log", test = name, msg = "on_failure handler failed: " .. (o.message or o.status) }
    end
  end
end

-- Setup: load the file and run its top level, which registers the tests and
-- hooks.  Returns true when its tests may run; false when the file did not
-- load, failed or skipped itself, which the parent has been told.
function FileRun:load()
  local chunk, err = loadfile(self.file, "t")
  if not chunk then
    self:file_error({ message = err, where = err:match("^([^:\n]+:%d+):") })
    return false
  end
  math.randomseed(self.seed)
  local top = self:guarded(chunk, self.opts.file_timeout, nil)
  if top.status == "skip" then
    self:emit { ev = "file_skip", reason = top.reason }
  elseif top.status ~= "pass" then
    self:file_error(top)
  end
  return top.status == "pass"
end

-- The selected tests: with --list, each is named and none runs.
function FileRun:list_tests()
  for _, t in ipairs(self.tests) do self:emit { ev = "test_listed", name = t.name, tags = t.opts.tags } end
end

-- Run the file's before_all hooks in order until one does not pass; that
-- one's outcome becomes every test's (see precluded).
function FileRun:before_all()
  for _, h in ipairs(self.reg.hooks.before_all) do
    local o = self:guarded(h, self.opts.timeout, nil)
    if o.status ~= "pass" then
      self.before_all_failure = o
      if failed(o) then self:run_handlers(self.reg.on_failure, "before_all", self.base, nil) end
      return
    end
  end
end

-- Run the file's after_all hooks; each one's failure is the file's.
function FileRun:after_all()
  for _, h in ipairs(self.reg.hooks.after_all) do
    local o = self:guarded(h, self.opts.timeout, nil)
    if failed(o) then self:file_error(o, "after_all: ") end
  end
end

-- Run each selected test in order, until the file's time is up or, with
-- --fail-fast, a test failed.
function FileRun:each_test()
  for _, t in ipairs(self.tests) do
    if __kv.file_expired() then
      self:file_error({ message = "the file's time limit was reached before every test ran" })
      return
    end
    if self:run_test(t) and self.opts.fail_fast then return end
  end
end

-- The hooks that bracket the tests, and the tests.  None runs when no test
-- was selected.  after_all runs even when before_all failed: it cleans up
-- what that started.
function FileRun:run_tests()
  if #self.tests == 0 then return end
  self:before_all()
  self:each_test()
  self:after_all()
end

-- Run test t, from test_start to test_end; reg.current is its record
-- meanwhile.  Returns true when it ran and failed: one skipped, or failed
-- because before_all did, does not stop a --fail-fast run.
function FileRun:run_test(t)
  local started = now()
  self.reg.current = { name = t.name, dir = self.base .. "/" .. slug(t.name), on_failure = {} }
  self:emit { ev = "test_start", name = t.name }
  local o = self:precluded(t)
  local ran = o == nil
  if ran then o = self:test_in_scope(t, started) end
  self:end_test(t, o, started)
  self.reg.current = nil
  return ran and failed(o)
end

-- The outcome of t when it does not run: skipped by its mark, or failed
-- because a before_all hook did not pass.  nil when it runs.
function FileRun:precluded(t)
  if t.opts.skip then return { status = "skip", reason = t.opts.skip } end
  local before = self.before_all_failure
  if not before then return nil end
  local o = {}
  for k, v in pairs(before) do o[k] = v end
  o.message = "before_all failed: " .. (o.message or o.status)
  return o
end

-- Run t in a scope of its own, its time limit counted from started: its
-- before_each hooks and body share that limit; on_failure handlers,
-- after_each hooks and deferred functions each get a budget of their own;
-- then the scope closes.  Returns the test's outcome.
function FileRun:test_in_scope(t, started)
  math.randomseed(derive_seed(self.seed, t.name))
  local cur = self.reg.current
  local limit = t.opts.timeout or self.opts.timeout
  local scope = __kv.scope()
  local o = self:test_body(t, started + limit, limit, scope)
  local gap = gap_of(t)
  if failed(o) and not (gap and known_gap.expected(gap, o)) then
    __kv.mkdir_p(cur.dir)
    self:run_handlers(self.reg.on_failure, t.name, cur.dir, scope)
    self:run_handlers(cur.on_failure, t.name, cur.dir, scope)
  end
  o = self:after_each(o, limit, scope)
  o = self:test_deferred(t, o, scope)
  return self:close_scope(o, scope)
end

-- Run the before_each hooks, then, if they all passed, the body of t, by
-- deadline; a timeout is told in t's own limit, where the test is declared
-- when the timeout has no place of its own.  Returns the outcome.
function FileRun:test_body(t, deadline, limit, scope)
  local o = { status = "pass" }
  for _, h in ipairs(self.reg.hooks.before_each) do
    o = self:guarded(h, deadline - now(), scope)
    if o.status ~= "pass" then
      if failed(o) then o.message = "before_each: " .. (o.message or "") end
      break
    end
  end
  if o.status == "pass" then o = self:guarded(t.fn, deadline - now(), scope) end
  if o.status == "timeout" then
    o.message = string.format("timed out after %gs", limit)
    o.where = o.where or t.where
  end
  return o
end

-- Run the after_each hooks, each within limit.  Returns o, or the first
-- hook's failure when o had not failed: a test fails by its first failure.
function FileRun:after_each(o, limit, scope)
  for _, h in ipairs(self.reg.hooks.after_each) do
    local a = self:guarded(h, limit, scope)
    if failed(a) and not failed(o) then
      o = a
      o.message = "after_each: " .. (o.message or "")
    end
  end
  return o
end

-- Run what t deferred on its scope.  Returns o, or the first deferred
-- failure when o had not failed; the failures after the first are logged.
function FileRun:test_deferred(t, o, scope)
  for _, d in ipairs(self:run_deferred(scope)) do
    if not failed(o) then
      o = d
      o.message = "deferred: " .. (o.message or "")
    else
      self:emit { ev = "log", test = t.name, msg = "a deferred function failed too: " .. (d.message or d.status)
        .. (d.where and (" (" .. d.where .. ")") or "") }
    end
  end
  return o
end

-- Close the test's scope, abandoning what it left running, and wait for the
-- children it let go.  Returns o, or the first error of a background task
-- when o had not failed.
function FileRun:close_scope(o, scope)
  local errors = scope:close()
  -- The children it let go are gone before the next test starts: a server
  -- on the same address must be the next test's own.
  __kv.drain(DRAIN_LIMIT)
  if #errors > 0 and not failed(o) then
    o = { status = "error", message = "a background task failed: " .. errors[1]:match("^[^\n]*"),
      traceback = errors[1], where = failure.where(nil, errors[1], self.file) }
  end
  return o
end

-- Report t's outcome o as test_end: the known gap applied, its duration
-- since started, and, when it failed, its rerun command and failure.txt in
-- its artifacts folder; a failure counts in the exit code.
function FileRun:end_test(t, o, started)
  apply_known_gap(t, o)
  local dir = self.reg.current.dir
  o.duration = now() - started
  o.dir = dir
  if failed(o) then
    o.rerun = command.rerun(self.opts, t.name)
    o.artifacts = dir
    write_failure(o, dir)
    self:count_failure(o)
  end
  o.ev, o.name = "test_end", t.name
  o.traceback = failed(o) and o.traceback or nil
  self:emit(o)
end

-- Teardown: the file is over; what its top level and before_all deferred
-- runs now, each failure the file's.  Reports file_end and returns the exit code.
function FileRun:finish()
  for _, d in ipairs(self:run_deferred(nil)) do self:file_error(d, "deferred: ") end
  self:emit { ev = "file_end" }
  return self.code
end

-- The whole lifecycle of the file; returns the worker's exit code.
function FileRun:run()
  if self:load() then
    self.tests = select_tests(self.reg, self.opts)
    if self.opts.list then self:list_tests() else self:run_tests() end
  end
  return self:finish()
end

-- Run opts.file (the worker's options, engine/main.c) and report as it goes
-- (report.lua reads the events); returns the worker's exit code.
function M.run_file(opts)
  return FileRun.new(opts):run()
end

return M
