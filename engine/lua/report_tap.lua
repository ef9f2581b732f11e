-- report_tap.lua - TAP version 13 on stdout, one line per test as it ends.
--
-- The seed and the command line come first, as comments; the lines of
-- files that run at once (-j) interleave, each naming its file.  A failure
-- carries a YAML block (message, at, rerun, artifacts); a skip is
-- "# SKIP reason"; a known gap is a failing test marked "# TODO known gap"
-- with its whole reason and link, which TAP consumers count as expected.  A
-- file that failed as a whole (syntax error, crash) is one "not ok".  The
-- plan comes last.

local cjson = require("cjson")
local command = require("command")
local report = require("report")

local Tap = {}
Tap.__index = Tap

function Tap.new(opts)
  return setmetatable({ opts = opts, n = 0 }, Tap)
end

local function yaml_block(fields)
  local out = { "  ---" }
  for _, kv in ipairs(fields) do
    if kv[2] then out[#out + 1] = string.format("  %s: %s", kv[1], (cjson.encode(tostring(kv[2])):gsub("\\/", "/"))) end
  end
  out[#out + 1] = "  ..."
  return table.concat(out, "\n")
end

local function clean(s) return (tostring(s):gsub("[\r\n]+", " "):gsub("#", "\\#")) end

function Tap:line(s) io.stdout:write(s, "\n") end

function Tap:start(info)
  self:line("TAP version 13")
  self:line(string.format("# seed %d", info.seed))
  self:line("# command: " .. clean(command.line(info.command)))
end

local function gap_text(g)
  return clean(g.reason or "") .. (g.link and (" (" .. clean(g.link) .. ")") or "")
end

function Tap:test_end(job, t)
  self.n = self.n + 1
  local desc = clean(job.file .. ": " .. t.name)
  if t.status == "pass" then
    self:line(string.format("ok %d - %s", self.n, desc))
  elseif t.status == "skip" then
    self:line(string.format("ok %d - %s # SKIP %s", self.n, desc, clean(t.reason or "")))
  elseif t.status == "gap" then
    self:line(string.format("not ok %d - %s # TODO known gap: %s", self.n, desc, gap_text(t)))
  else
    self:line(string.format("not ok %d - %s", self.n, desc))
    self:line(yaml_block { { "status", t.status }, { "message", t.message }, { "at", t.where },
      { "artifacts", t.artifacts }, { "rerun", t.rerun } })
  end
end

function Tap:listed(job, t)
  self.n = self.n + 1
  self:line(string.format("ok %d - %s # SKIP listed only", self.n, clean(job.file .. ": " .. t.name)))
end

function Tap:file_error(job, e)
  self.n = self.n + 1
  self:line(string.format("not ok %d - %s", self.n, clean(job.file .. ": (file)")))
  self:line(yaml_block { { "message", e.message }, { "at", e.where } })
end

function Tap:file_skip(job, e)
  self.n = self.n + 1
  self:line(string.format("ok %d - %s # SKIP %s", self.n, clean(job.file), clean(e.reason or "")))
end

function Tap:finish(s)
  self:line("1.." .. self.n)
  for _, g in ipairs(s.gaps) do self:line(string.format("# known gap: %s: %s: %s", g.file, g.name, gap_text(g))) end
  self:line(string.format("# seed %d", s.seed))
  if #s.gaps > 0 then self:line("# " .. report.gaps_line(s.gaps)) end
  self:line(report.closing_line(s.counts))
end

return Tap
