-- report_console.lua - the human report on stdout.
--
-- One block per file, printed in the order the files were given whatever
-- order the workers finish in, so a run reads the same with -j 1 and -j 8.
-- A failure shows its message, where it happened, its artifacts and the
-- command that re-runs just that test with the same seed.  Colour only on a
-- TTY (or --color); a progress line on a TTY while files run.

local report = require "report"

local Console = {}
Console.__index = Console

local LABEL = { pass = "ok", fail = "FAIL", error = "ERROR", timeout = "TIMEOUT", skip = "skip", gap = "gap" }
local COLOR = { pass = "32", fail = "31", error = "31", timeout = "31", skip = "33", gap = "36" }
local OUTPUT_TAIL = 40

-- keys: every job's "run:file", in the order the blocks are printed.
function Console.new(opts, color, tty, keys)
  return setmetatable({ opts = opts, color = color, tty = tty, keys = keys, done = {}, next = 1,
    progress = false }, Console)
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

function Console:test_lines(t)
  local lines = {}
  local label = string.format("%-7s", LABEL[t.status] or t.status)
  local head = "  " .. self:paint(COLOR[t.status] or "0", label) .. " " .. t.name
  if self.opts.verbose and t.duration then head = head .. string.format(" (%.2fs)", t.duration) end
  if t.status == "skip" or t.status == "gap" then head = head .. ": " .. (t.reason or "") end
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
    if t.artifacts then lines[#lines + 1] = pad .. "artifacts: " .. t.artifacts end
    if t.rerun then lines[#lines + 1] = pad .. "rerun: " .. t.rerun end
  end
  if (failed or self.opts.verbose) and t.logs then
    for _, l in ipairs(t.logs) do lines[#lines + 1] = pad .. "log: " .. l end
  end
  return lines
end

function Console:block(job)
  local lines = { job.file .. (job.run > 1 and string.format(" (run %d)", job.run) or "") }
  if job.skip_reason then lines[#lines + 1] = "  " .. self:paint(COLOR.skip, "skip   ") .. " (file): " .. job.skip_reason end
  for _, t in ipairs(job.tests) do
    if t.ev == "test_listed" then
      local tags = t.tags and #t.tags > 0 and (" [" .. table.concat(t.tags, ",") .. "]") or ""
      lines[#lines + 1] = "  " .. t.name .. tags
    else
      for _, l in ipairs(self:test_lines(t)) do lines[#lines + 1] = l end
    end
  end
  for _, e in ipairs(job.errors) do
    lines[#lines + 1] = "  " .. self:paint(COLOR.error, "ERROR  ") .. " (file) " .. (e.message or "")
    if e.where and not (e.message or ""):find(e.where, 1, true) then lines[#lines + 1] = "          at " .. e.where end
  end
  for _, l in ipairs(job.logs) do
    if job.failed or self.opts.verbose then lines[#lines + 1] = "  log (file): " .. l end
  end
  if (job.failed or self.opts.verbose) and #job.output > 0 then
    local text = table.concat(job.output)
    local out = {}
    for l in text:gmatch("[^\n]*\n?") do if l ~= "" then out[#out + 1] = l:gsub("\n$", "") end end
    local first = math.max(1, #out - OUTPUT_TAIL + 1)
    lines[#lines + 1] = string.format("  output%s:", first > 1 and string.format(" (last %d lines)", OUTPUT_TAIL) or "")
    for i = first, #out do lines[#lines + 1] = "  | " .. out[i] end
  end
  return table.concat(lines, "\n")
end

function Console:test_end()
  self.finished_tests = (self.finished_tests or 0) + 1
  if self.tty then
    io.stdout:write("\r\27[K", string.format("[%d/%d files] %d tests done", self.next - 1, #self.keys,
      self.finished_tests))
    io.stdout:flush()
    self.progress = true
  end
end

function Console:listed()
  self.nlisted = (self.nlisted or 0) + 1
end

function Console:file_done(job)
  self.done[job.run .. ":" .. job.file] = self:block(job)
  while true do
    local key = self.keys[self.next]
    if not key or not self.done[key] then break end
    self:out(self.done[key])
    self.done[key] = nil
    self.next = self.next + 1
  end
end

function Console:finish(s)
  for i = self.next, #self.keys do
    local b = self.done[self.keys[i]]
    if b then self:out(b) end
  end
  if s.interrupted then self:out("interrupted by signal " .. s.interrupted .. "; the results so far:") end
  if #s.gaps > 0 then
    self:out("known gaps:")
    for _, g in ipairs(s.gaps) do
      self:out(string.format("  %s: %s: %s", g.file, g.name, g.reason))
    end
  end
  local c = s.counts
  local n = self.opts.list and (self.nlisted or 0) or (c.passed + c.failed + c.skipped)
  self:out(string.format("%s %d test%s in %.2fs, seed %d", self.opts.list and "listed" or "ran", n,
    n == 1 and "" or "s", s.duration, s.seed))
  self:out(report.closing_line(c))
end

return Console
