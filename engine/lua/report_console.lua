-- report_console.lua - the human report on stdout, written as it happens.
--
-- The seed and the command line come first.  Then one block per file: its
-- name when it starts, each test's line when the test ends, the file's own
-- errors when they happen, and its logs and the tail of its output (for a
-- failed file, or with -v) when its worker is gone.  Blocks follow the order
-- the files were given: under -j, the lines of a file that runs while an
-- earlier one has not ended are held, and written when that one ends, so a
-- run reads the same with -j 1 and -j 8.  A failure shows its message, where
-- it happened, its artifacts and the command that re-runs just that test
-- with the same seed; a known gap one line, its reason's first clause and
-- its link.  Colour only on a TTY (or --color); a progress line on a TTY
-- while files run.

local command = require("command")
local report = require("report")

local Console = {}
Console.__index = Console

local LABEL = { pass = "ok", fail = "FAIL", error = "ERROR", timeout = "TIMEOUT", skip = "skip", gap = "gap" }
local COLOR = { pass = "32", fail = "31", error = "31", timeout = "31", skip = "33", gap = "36" }
local OUTPUT_TAIL = 40

-- keys: every job's "run:file", in the order the blocks are printed.
function Console.new(opts, color, tty, keys)
  return setmetatable({ opts = opts, color = color, tty = tty, keys = keys, next = 1, opened = {},
    held = {}, done = {}, progress = false, finished_tests = 0, nlisted = 0 }, Console)
end

function Console:paint(code, s)
  if not self.color then return s end
  return "\27[" .. code .. "m" .. s .. "\27[0m"
end

function Console:out(s)
  if self.progress then
    io.stdout:write("\r\27[K")
    self.progress = false
  end
  io.stdout:write(s, "\n")
end

function Console:start(info)
  self:out(string.format("kvengine: %d file%s, seed %d", info.files, info.files == 1 and "" or "s", info.seed))
  self:out("command: " .. command.line(info.command))
end

local function key(job) return job.run .. ":" .. job.file end

-- Write lines of job's block now if its file heads the output, else hold
-- them until the files before it have ended.  The block opens with the
-- file's name.
function Console:write(job, lines)
  local k = key(job)
  if not self.opened[k] then
    self.opened[k] = true
    table.insert(lines, 1, job.file .. (job.run > 1 and string.format(" (run %d)", job.run) or ""))
  end
  if self.keys[self.next] == k then
    for _, l in ipairs(lines) do self:out(l) end
    return
  end
  local held = self.held[k] or {}
  table.move(lines, 1, #lines, #held + 1, held)
  self.held[k] = held
end

-- The head file ended: the next one's held lines, and so on past every
-- file that ended meanwhile.
function Console:advance()
  while self.keys[self.next] do
    local k = self.keys[self.next]
    for _, l in ipairs(self.held[k] or {}) do self:out(l) end
    self.held[k] = nil
    if not self.done[k] then return end
    self.next = self.next + 1
  end
end

local function indent(text, pad)
  return pad .. tostring(text):gsub("\n", "\n" .. pad)
end

-- The frames of a traceback that belong to the scenario, not to the engine.
local function scenario_frames(tb)
  local keep = {}
  for line in tostring(tb):gmatch("[^\n]+") do
    if line:match("^%s+[^%[]") and not line:match("engine/lua/") and not line:match("%(%.%.%.tail calls%.%.%.%)") then
      keep[#keep + 1] = line:gsub("^%s+", "")
    end
  end
  return keep
end

-- Where a test that ran out of time was waiting, when that is deeper than
-- its own line (`at`): the frames inside the libraries it called, innermost
-- first, up to that line; nil when it waited in its own code.
local WAITING_FRAMES = 6

local function waiting_frames(tb, at)
  if not tb or not at then return nil end
  local frames, lua_seen = {}, false
  for _, frame in ipairs(scenario_frames(tb)) do
    if frame:sub(1, #at + 1) == at .. ":" then break end
    lua_seen = lua_seen or not frame:match("^%[C%]")
    if #frames < WAITING_FRAMES then frames[#frames + 1] = frame end
  end
  return lua_seen and frames or nil
end

function Console:test_lines(t)
  local lines = {}
  local label = string.format("%-7s", LABEL[t.status] or t.status)
  local head = "  " .. self:paint(COLOR[t.status] or "0", label) .. " " .. t.name
  if self.opts.verbose and t.duration then head = head .. string.format(" (%.2fs)", t.duration) end
  if t.status == "skip" then head = head .. ": " .. (t.reason or "") end
  if t.status == "gap" then head = head .. ": " .. (t.summary or t.reason or "") end
  lines[#lines + 1] = head
  local pad = "          "
  local failed = t.status == "fail" or t.status == "error" or t.status == "timeout"
  if failed then
    lines[#lines + 1] = indent(t.message or "", pad)
    if t.details then lines[#lines + 1] = indent(t.details, pad) end
    if t.where then lines[#lines + 1] = pad .. "at " .. t.where end
    if t.status == "error" and t.traceback then
      local frames = scenario_frames(t.traceback)
      if #frames > 1 then lines[#lines + 1] = pad .. "traceback: " .. table.concat(frames, " <- ") end
    end
    local waiting = t.status == "timeout" and waiting_frames(t.traceback, t.where)
    if waiting then lines[#lines + 1] = pad .. "waiting in: " .. table.concat(waiting, " <- ") end
    if t.artifacts then lines[#lines + 1] = pad .. "artifacts: " .. t.artifacts end
    if t.rerun then lines[#lines + 1] = pad .. "rerun: " .. t.rerun end
  end
  if (failed or self.opts.verbose) and t.logs then
    for _, l in ipairs(t.logs) do lines[#lines + 1] = pad .. "log: " .. l end
  end
  return lines
end

function Console:file_start(job)
  self:write(job, {})
end

function Console:test_end(job, t)
  self:write(job, self:test_lines(t))
  self.finished_tests = self.finished_tests + 1
  if self.tty then
    io.stdout:write("\r\27[K", string.format("[%d/%d files] %d tests done", self.next - 1, #self.keys,
      self.finished_tests))
    io.stdout:flush()
    self.progress = true
  end
end

function Console:listed(job, t)
  self.nlisted = self.nlisted + 1
  local tags = t.tags and #t.tags > 0 and (" [" .. table.concat(t.tags, ",") .. "]") or ""
  self:write(job, { "  " .. t.name .. tags })
end

function Console:file_skip(job, e)
  self:write(job, { "  " .. self:paint(COLOR.skip, "skip   ") .. " (file): " .. (e.reason or "") })
end

function Console:file_error(job, e)
  local lines = { "  " .. self:paint(COLOR.error, "ERROR  ") .. " (file) " .. (e.message or "") }
  if e.where and not (e.message or ""):find(e.where, 1, true) then lines[2] = "          at " .. e.where end
  self:write(job, lines)
end

-- What concerns the whole file once it ended: its logs and output, shown
-- when it failed (or with -v).
function Console:file_done(job)
  local lines = {}
  local shown = job.failed or self.opts.verbose
  for _, l in ipairs(shown and job.logs or {}) do lines[#lines + 1] = "  log (file): " .. l end
  if shown and #job.output > 0 then
    local out = {}
    for l in table.concat(job.output):gmatch("[^\n]*\n?") do if l ~= "" then out[#out + 1] = l:gsub("\n$", "") end end
    local first = math.max(1, #out - OUTPUT_TAIL + 1)
    lines[#lines + 1] = string.format("  output%s:", first > 1 and string.format(" (last %d lines)", OUTPUT_TAIL) or "")
    for i = first, #out do lines[#lines + 1] = "  | " .. out[i] end
  end
  self:write(job, lines)
  self.done[key(job)] = true
  self:advance()
end

function Console:finish(s)
  for i = self.next, #self.keys do
    for _, l in ipairs(self.held[self.keys[i]] or {}) do self:out(l) end
  end
  if s.interrupted then self:out("interrupted by signal " .. s.interrupted .. "; the results so far:") end
  if s.artifacts then
    self:out((self.opts.keep_artifacts and "artifacts of every test: " or "artifacts of the failed tests: ")
      .. s.artifacts)
  end
  local c = s.counts
  local n = self.opts.list and self.nlisted or (c.passed + c.failed + c.skipped)
  self:out(string.format("%s %d test%s in %.2fs, seed %d", self.opts.list and "listed" or "ran", n,
    n == 1 and "" or "s", s.duration, s.seed))
  if #s.gaps > 0 then self:out(report.gaps_line(s.gaps)) end
  self:out(report.closing_line(c))
end

return Console
