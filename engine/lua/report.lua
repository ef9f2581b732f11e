-- report.lua - the parent's one stream of report events, and its subscribers.
--
-- Workers send JSON lines (runner.lua): file_start, test_start, log,
-- artifact, report (engine.report's data, kept with its test, or the file),
-- test_end, test_listed, file_error, file_skip, file_end.  The parent adds
-- what only it can see: a worker that died without file_end.
-- This module keeps each run of a file as a job, counts outcomes, hands
-- events to the reporters as they arrive: the console (or TAP with --tap)
-- on stdout, line-buffered so that a pipe or a log file gets each line when
-- it is written, with --junit an XML file, with --html a page that also
-- draws what engine.report sent, with --reports that data as JSON lines;
-- and once a file's worker is gone it drops the artifacts nobody needs
-- (artifacts.lua).  Every run ends
-- with the plain line "N passed, N failed, N skipped", where known gaps
-- count as skipped (and have a line of their own above it).

local artifacts = require("artifacts")
local durations = require("durations")
local json = require("json")

local M = { exit_code = 0 }

local state -- set by start

local FAILED = { fail = true, error = true, timeout = true }

local function job_of(file, run)
  return state.jobs[run .. ":" .. file]
end

local function each_reporter(method, ...)
  for _, r in ipairs(state.reporters) do
    if r[method] then r[method](r, ...) end
  end
end

local function count(kind, job)
  state.counts[kind] = state.counts[kind] + 1
  if kind == "failed" then job.failed = true end
end

-- Called by the parent with start(options, files, stdout_is_a_tty).
-- Returns nil, or an error message for a usage error.
function M.start(opts, files, tty)
  if opts.filter then
    local ok, err = pcall(string.find, "", opts.filter)
    if not ok then return "--filter: bad Lua pattern: " .. tostring(err):gsub("^.-: ", "") end
  end
  io.stdout:setvbuf("line")
  state = { opts = opts, counts = { passed = 0, failed = 0, skipped = 0 }, gaps = {}, order = {},
    jobs = {}, reporters = {}, started = now(), infra = false, artifacts = artifacts.new(opts) }
  for run = 1, opts["repeat"] do
    for _, f in ipairs(files) do
      local job = { file = f, run = run, tests = {}, errors = {}, output = {}, logs = {}, reports = {} }
      state.order[#state.order + 1] = job
      state.jobs[run .. ":" .. f] = job
    end
  end
  local color = opts.color == 1 or (opts.color == -1 and tty)
  if opts.tap then
    state.reporters[#state.reporters + 1] = require("report_tap").new(opts)
  else
    local keys = {}
    for i, job in ipairs(state.order) do keys[i] = job.run .. ":" .. job.file end
    state.reporters[#state.reporters + 1] = require("report_console").new(opts, color, tty, keys)
  end
  if opts.junit then
    state.reporters[#state.reporters + 1] = require("report_junit").new(opts)
  end
  if opts.html then
    state.reporters[#state.reporters + 1] = require("report_html").new(opts)
  end
  if opts.reports then
    state.reporters[#state.reporters + 1] = require("report_data").new(opts)
  end
  each_reporter("start", { seed = opts.seed, files = #files, jobs = #state.order, command = opts.command })
  return nil
end

local handlers = {}

function handlers.file_start(job, ev)
  job.t0 = now()
  job.dir = ev.artifacts
  each_reporter("file_start", job)
end

function handlers.test_start(job, ev)
  job.current = { name = ev.name, logs = {}, artifacts = {}, reports = {} }
end

function handlers.log(job, ev)
  local target = job.current and job.current.name == ev.test and job.current.logs or job.logs
  target[#target + 1] = ev.msg
end

function handlers.report(job, ev)
  local owner = job.current and job.current.name == ev.test and job.current or job
  owner.reports[#owner.reports + 1] = { kind = ev.kind, data = ev.data, where = ev.where, drawer = ev.drawer }
end

function handlers.artifact(job, ev)
  if job.current and job.current.name == ev.test then
    table.insert(job.current.artifacts, ev.path)
  end
end

function handlers.test_end(job, ev)
  local cur = job.current or { logs = {}, artifacts = {}, reports = {} }
  ev.logs, ev.saved, ev.reports = cur.logs, cur.artifacts, cur.reports
  job.current = nil
  job.tests[#job.tests + 1] = ev
  if ev.status == "pass" then
    count("passed", job)
  elseif FAILED[ev.status] then
    count("failed", job)
    if ev.infra then state.infra = true end
  else
    count("skipped", job)
    if ev.status == "gap" then
      state.gaps[#state.gaps + 1] = { file = job.file, name = ev.name, reason = ev.reason, link = ev.link }
    end
  end
  each_reporter("test_end", job, ev)
  return FAILED[ev.status] ~= nil
end

function handlers.test_listed(job, ev)
  job.tests[#job.tests + 1] = ev
  each_reporter("listed", job, ev)
end

function handlers.file_error(job, ev)
  job.errors[#job.errors + 1] = ev
  count("failed", job)
  if ev.infra then state.infra = true end
  each_reporter("file_error", job, ev)
  return true
end

function handlers.file_skip(job, ev)
  job.skip_reason = ev.reason
  count("skipped", job)
  each_reporter("file_skip", job, ev)
end

function handlers.file_end(job)
  job.ended = true
  job.duration = now() - (job.t0 or now())
end

-- One event line from the worker running `file` for the run-th time.
-- Returns true on a failure.
function M.event(file, run, line)
  local ok, ev = pcall(json.decode, line) -- integral numbers stay integers
  local job = job_of(file, run)
  if not ok or type(ev) ~= "table" or not job then
    if job then table.insert(job.output, "(bad event) " .. line .. "\n") end
    return false
  end
  local h = handlers[ev.ev]
  return h and h(job, ev) or false
end

function M.output(file, run, data)
  local job = job_of(file, run)
  if job then table.insert(job.output, data) end
end

-- The worker for `file` is gone: judge how, then hand the job to reporters.
function M.worker_exit(file, run, status, signal)
  local job = job_of(file, run)
  if not job then return false end
  local failed = false
  if not job.ended then
    local how = signal ~= 0 and ("was killed by signal " .. signal) or ("exited with status " .. status)
    handlers.file_error(job, { message = "the worker running this file " .. how ..
      " before the file ended", infra = status == 3 or nil })
    failed = true
  end
  state.artifacts:file_done(job)
  each_reporter("file_done", job)
  return failed
end

-- What each file that ran to its end took, for the next run's order.
local function record_durations()
  local took = {}
  for _, job in ipairs(state.order) do
    if job.ended and job.duration then took[job.file] = job.duration end
  end
  durations.record(took, state.opts.target)
end

function M.finish(interrupted)
  if interrupted == 0 then record_durations() end
  local c = state.counts
  local summary = { counts = c, gaps = state.gaps, seed = state.opts.seed, duration = now() - state.started,
    interrupted = interrupted ~= 0 and interrupted or nil, artifacts = state.artifacts:finish() }
  each_reporter("finish", summary)
  if c.failed > 0 then M.exit_code = state.infra and 3 or 1 end
  return false
end

-- The closing line, shared by every stdout reporter.  CI reads it: keep it
-- exactly this shape.
function M.closing_line(c)
  return string.format("%d passed, %d failed, %d skipped", c.passed, c.failed, c.skipped)
end

-- "1 known gap", "2 known gaps": the line above the closing line.
function M.gaps_line(gaps)
  return string.format("%d known gap%s", #gaps, #gaps == 1 and "" or "s")
end

return M
