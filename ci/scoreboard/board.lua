-- ci/scoreboard/board.lua - the scoreboard's table, made from the runs
-- (ci/scoreboard/run.lua runs them; this module only reads them, so that
-- fixtures/tests/scoreboard.lua can feed it made-up runs).
--
--   local board = require("scoreboard.board")
--   board.cell(result, cause_of) -> {outcome, text, cause}
--   board.files(routers) -> {{file, tests = {{name, cells = {[label] = cell}}}}}
--   board.text(b) -> the table as text
--   board.ran(b) -> the routers of b that ran, in order
--
-- A router: {label, status = "ran" | "missing", why, results (tests/lib/tap.lua),
-- cause_of = fn(key, result) -> cause name | nil, workload = {[policy] =
-- figures} | nil, workload_why, latency = {["128"] = row, ["2048"] = row} | nil,
-- latency_why, expect (its expectations file) and drifts = {...}, or causes
-- (where its failures are explained otherwise), seconds}. A cell: the test's outcome on one
-- router; text is a failure's first line, the capability a skip names (or
-- its whole reason when it names none), a known gap's reason.

local driver = require("kvcache.driver")
local expectations = require("expectations")

local M = {}

M.WORKLOAD_FILE = "scenarios/load_prefix_sharing.lua"
M.POLICIES = { "kvcache-aware", "random", "least-request" }
M.TOKENS = { 128, 2048 }

-- "<root>/scenarios/x.lua: test" -> "scenarios/x.lua", "test" (a whole-file
-- line: the test is "(file)", or nil for a file skipped whole).
function M.split(key)
  local file, test = key:match("^(.-%.lua): (.*)$")
  return file or key, test
end

function M.cell(r, cause_of)
  if r.outcome == "pass" then return { outcome = "pass" } end
  if r.outcome == "fail" then
    return { outcome = "fail", text = expectations.first_line(r.message), cause = cause_of and cause_of(r.key, r) }
  end
  if r.outcome == "gap" then return { outcome = "gap", text = r.reason } end
  local _, cap, how = driver.skip_capability(r.reason or "")
  return { outcome = "skip", text = cap and (how == "stack" and cap .. " (stack)" or cap) or r.reason,
    reason = r.reason }
end

-- Every test of every router that ran, by file, in the order first seen.
function M.files(routers)
  local files, by_file, by_key = {}, {}, {}
  for _, rt in ipairs(routers) do
    for _, r in ipairs(rt.results or {}) do
      local file, test = M.split(r.key)
      test = test or "(whole file)"
      if not by_file[file] then
        by_file[file] = { file = file, tests = {} }
        files[#files + 1] = by_file[file]
      end
      local key = file .. ": " .. test
      if not by_key[key] then
        by_key[key] = { name = test, cells = {} }
        table.insert(by_file[file].tests, by_key[key])
      end
      by_key[key].cells[rt.label] = M.cell(r, rt.cause_of)
    end
  end
  table.sort(files, function(a, b) return a.file < b.file end) -- runs under -j interleave their files
  return files
end

local WORD = { pass = "pass", fail = "FAIL", skip = "skip", gap = "gap" }

local function shorten(s, n)
  s = tostring(s or "")
  return #s > n and (s:sub(1, n - 3) .. "...") or s
end

-- One test's rows: its name, then a line per router that did not pass.
local function test_lines(t, ran, lines)
  local cols = {}
  for _, rt in ipairs(ran) do
    local c = t.cells[rt.label]
    cols[#cols + 1] = string.format("%-14s", c and WORD[c.outcome] or "-")
  end
  lines[#lines + 1] = string.format("  %-64s %s", shorten(t.name, 64), table.concat(cols, " "))
  for _, rt in ipairs(ran) do
    local c = t.cells[rt.label]
    if c and c.outcome ~= "pass" then
      lines[#lines + 1] = string.format("      %-16s %s %s%s", rt.label, WORD[c.outcome], shorten(c.text, 160),
        c.cause and (" [cause " .. c.cause .. "]") or "")
    end
  end
end

local function pct(v) return v and string.format("%.3f", v) or "-" end
local function ms(v) return v and string.format("%.2f", v * 1000) or "-" end

local function workload_lines(ran, lines)
  lines[#lines + 1] = string.format("\nrouting quality (%s: hit ratio = cached / prompt tokens; evicted blocks; "
    .. "errors), each router beside random routing on its own stack", M.WORKLOAD_FILE)
  lines[#lines + 1] = string.format("  %-16s %-14s %9s %8s %7s", "router", "policy", "hit ratio", "evicted", "errors")
  for _, rt in ipairs(ran) do
    if not rt.workload then
      lines[#lines + 1] = string.format("  %-16s not measured: %s", rt.label, tostring(rt.workload_why))
    else
      for _, p in ipairs(M.POLICIES) do
        local f = rt.workload[p]
        if f then
          lines[#lines + 1] = string.format("  %-16s %-14s %9s %8d %7d", rt.label, p, pct(f.hit), f.evicted, f.errors)
        end
      end
    end
  end
end

local function latency_lines(ran, lines)
  lines[#lines + 1] = "\nadded latency (fixtures/bench/router_decision.lua added: through the router minus straight "
    .. "to the pod, 3 pods, the prompt's blocks owned by one)"
  lines[#lines + 1] = string.format("  %-16s %7s %9s %9s %9s %9s", "router", "tokens", "p50 ms", "p99 ms",
    "added p50", "added p99")
  for _, rt in ipairs(ran) do
    if not rt.latency then
      lines[#lines + 1] = string.format("  %-16s not measured: %s", rt.label, tostring(rt.latency_why))
    else
      for _, n in ipairs(M.TOKENS) do
        local r = rt.latency[tostring(n)]
        lines[#lines + 1] = string.format("  %-16s %7d %9s %9s %9s %9s", rt.label, n, ms(r.p50), ms(r.p99),
          ms(r.p50 - r.direct_p50), ms(r.p99 - r.direct_p99))
      end
    end
  end
end

function M.ran(b)
  local out = {}
  for _, rt in ipairs(b.routers) do
    if rt.status == "ran" then out[#out + 1] = rt end
  end
  return out
end

-- The whole scoreboard as text: per file its tests, a column per router
-- that ran; the routers that did not, with why; the figures.
function M.text(b)
  local ran, lines = M.ran(b), {}
  local head = {}
  for _, rt in ipairs(ran) do head[#head + 1] = string.format("%-14s", shorten(rt.label, 14)) end
  for _, f in ipairs(b.files) do
    lines[#lines + 1] = string.format("%-66s %s", f.file, table.concat(head, " "))
    for _, t in ipairs(f.tests) do test_lines(t, ran, lines) end
  end
  lines[#lines + 1] = ""
  for _, rt in ipairs(b.routers) do
    if rt.status == "ran" then
      local c, drifts = rt.counts, rt.drifts or {}
      lines[#lines + 1] = string.format("%-16s %d passed, %d failed, %d skipped, %d known gaps in %.0fs%s", rt.label,
        c.pass, c.fail, c.skip, c.gap, rt.seconds, rt.expect and string.format("; %d drift(s) from %s", #drifts,
          rt.expect) or (rt.causes and "; causes: " .. rt.causes or ""))
      for _, d in ipairs(drifts) do lines[#lines + 1] = "    drift: " .. d end
    else
      lines[#lines + 1] = string.format("%-16s not run: %s", rt.label, rt.why)
    end
  end
  workload_lines(ran, lines)
  latency_lines(ran, lines)
  return table.concat(lines, "\n")
end

return M
