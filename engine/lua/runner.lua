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

local function guarded(file, fn, limit, scope)
  local left = math.max(limit, 0.001)
  return classify(file, limit, __kv.run(fn, left, scope))
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

function M.run_file(opts)
  local file = opts.file
  local function emit(ev)
    ev.file = file
    __kv.emit(cjson.encode(ev) .. "\n")
  end
  local file_seed = derive_seed(opts.seed, file)
  local base = opts.artifacts .. "/" .. slug(file) .. (opts.run > 1 and ("-run" .. opts.run) or "")
  local reg = testapi.install(file, emit)
  reg.file_dir = base
  __kv.file_deadline(opts.file_timeout)
  emit { ev = "file_start", seed = opts.seed, run = opts.run, artifacts = base }
  local code = 0

  local function file_error(o, prefix)
    emit { ev = "file_error", message = (prefix or "") .. (o.message or o.status), where = o.where,
      traceback = o.traceback, infra = o.infra }
    code = o.infra and 3 or math.max(code, 1)
  end

  -- Run what was deferred on scope (nil: the file's), newest first, each
  -- guarded; what one defers meanwhile runs too.  Returns the outcomes of
  -- those that failed, in the order they ran.
  local function run_deferred(scope)
    local failures = {}
    while true do
      local list = __kv.take_deferred(scope)
      if #list == 0 then return failures end
      for i = #list, 1, -1 do
        local o = guarded(file, list[i], HANDLER_TIMEOUT, scope)
        if failed(o) then failures[#failures + 1] = o end
      end
    end
  end

  -- The file is over: what its top level and before_all deferred runs now.
  local function finish_file()
    for _, d in ipairs(run_deferred(nil)) do file_error(d, "deferred: ") end
    emit { ev = "file_end" }
    return code
  end

  local chunk, err = loadfile(file, "t")
  if not chunk then
    file_error({ message = err, where = err:match("^([^:\n]+:%d+):") })
    emit { ev = "file_end" }
    return code
  end
  math.randomseed(file_seed)
  local top = guarded(file, chunk, opts.file_timeout, nil)
  if top.status == "skip" then
    emit { ev = "file_skip", reason = top.reason }
    return finish_file()
  elseif top.status ~= "pass" then
    file_error(top)
    return finish_file()
  end

  local tests = select_tests(reg, opts)
  if opts.list then
    for _, t in ipairs(tests) do emit { ev = "test_listed", name = t.name, tags = t.opts.tags } end
    return finish_file()
  end

  local function run_handlers(list, name, dir, scope)
    for _, fn in ipairs(list) do
      local o = guarded(file, function() fn(name, dir) end, HANDLER_TIMEOUT, scope)
      if failed(o) then
        emit { ev = "log", test = name, msg = "on_failure handler failed: " .. (o.message or o.status) }
      end
    end
  end

  local function finish(t, o, started)
    apply_known_gap(t, o)
    o.duration = now() - started
    o.dir = reg.current.dir
    if failed(o) then
      o.rerun = command.rerun(opts, t.name)
      o.artifacts = reg.current.dir
      write_failure(o, o.artifacts)
      code = o.infra and 3 or math.max(code, 1)
    end
    o.ev, o.name = "test_end", t.name
    o.traceback = failed(o) and o.traceback or nil
    emit(o)
  end

  local function run_test(t, before_all_failure)
    local started = now()
    local cur = { name = t.name, dir = base .. "/" .. slug(t.name), on_failure = {} }
    reg.current = cur
    emit { ev = "test_start", name = t.name }
    if t.opts.skip then
      finish(t, { status = "skip", reason = t.opts.skip }, started)
      reg.current = nil
      return
    end
    if before_all_failure then
      local o = {}
      for k, v in pairs(before_all_failure) do o[k] = v end
      o.message = "before_all failed: " .. (o.message or o.status)
      finish(t, o, started)
      reg.current = nil
      return
    end
    math.randomseed(derive_seed(file_seed, t.name))
    local limit = t.opts.timeout or opts.timeout
    local deadline = started + limit
    local scope = __kv.scope(t.name, cur.dir)
    local o = { status = "pass" }
    for _, h in ipairs(reg.hooks.before_each) do
      o = guarded(file, h, deadline - now(), scope)
      if o.status ~= "pass" then
        if failed(o) then o.message = "before_each: " .. (o.message or "") end
        break
      end
    end
    if o.status == "pass" then o = guarded(file, t.fn, deadline - now(), scope) end
    if o.status == "timeout" then
      o.message = string.format("timed out after %gs", limit)
      o.where = o.where or t.where
    end
    local gap = gap_of(t)
    if failed(o) and not (gap and known_gap.expected(gap, o)) then
      __kv.mkdir_p(cur.dir)
      run_handlers(reg.on_failure, t.name, cur.dir, scope)
      run_handlers(cur.on_failure, t.name, cur.dir, scope)
    end
    for _, h in ipairs(reg.hooks.after_each) do
      local a = guarded(file, h, limit, scope)
      if failed(a) and not failed(o) then
        o = a
        o.message = "after_each: " .. (o.message or "")
      end
    end
    for _, d in ipairs(run_deferred(scope)) do
      if not failed(o) then
        o = d
        o.message = "deferred: " .. (o.message or "")
      else
        emit { ev = "log", test = t.name, msg = "a deferred function failed too: " .. (d.message or d.status)
          .. (d.where and (" (" .. d.where .. ")") or "") }
      end
    end
    local errors = scope:close()
    -- The children it let go are gone before the next test starts: a server
    -- on the same address must be the next test's own.
    __kv.drain(DRAIN_LIMIT)
    if #errors > 0 and not failed(o) then
      o = { status = "error", message = "a background task failed: " .. errors[1]:match("^[^\n]*"),
        traceback = errors[1], where = failure.where(nil, errors[1], file) }
    end
    finish(t, o, started)
    reg.current = nil
    return failed(o)
  end

  local before_all_failure
  if #tests > 0 then
    for _, h in ipairs(reg.hooks.before_all) do
      local o = guarded(file, h, opts.timeout, nil)
      if o.status ~= "pass" then
        before_all_failure = o
        if failed(o) then run_handlers(reg.on_failure, "before_all", base, nil) end
        break
      end
    end
  end
  for _, t in ipairs(tests) do
    if __kv.file_expired() then
      file_error({ message = "the file's time limit was reached before every test ran" })
      break
    end
    if run_test(t, before_all_failure) and opts.fail_fast then break end
  end
  -- after_all runs even when before_all failed: it cleans up what that started.
  if #tests > 0 then
    for _, h in ipairs(reg.hooks.after_all) do
      local o = guarded(file, h, opts.timeout, nil)
      if failed(o) then file_error(o, "after_all: ") end
    end
  end
  return finish_file()
end

return M
