-- report_junit.lua - JUnit XML, as GitHub Actions and Jenkins read it.
--
-- <testsuites> with one <testsuite> per file (per run with --repeat); each
-- test a <testcase classname=FILE name=TEST time=S>; a failure is <failure
-- message=... type=fail|error|timeout> whose text gives file:line, details
-- and the re-run command; a skip is <skipped message=reason/>; a known gap is
-- <skipped message="known gap: reason (link)"/> with properties for its
-- whole reason and its link.  The
-- artifacts folder is named in <system-out>.  A file that failed as a whole
-- is a testcase named "(file)" with an <error>.

local Junit = {}
Junit.__index = Junit

function Junit.new(opts)
  return setmetatable({ path = opts.junit, suites = {} }, Junit)
end

local ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&apos;" }

-- Escape for XML 1.0: markup characters, and drop what XML cannot carry.
local function esc(s)
  s = tostring(s or ""):gsub("[%z\1-\8\11\12\14-\31]", "?")
  return (s:gsub("[&<>\"']", ESC))
end

local function case_xml(file, t)
  local out = { string.format('    <testcase classname="%s" name="%s" time="%.3f">', esc(file), esc(t.name),
    t.duration or 0) }
  if t.status == "fail" or t.status == "error" or t.status == "timeout" then
    local text = {}
    if t.where then text[#text + 1] = "at " .. t.where end
    if t.details then text[#text + 1] = t.details end
    if t.traceback then text[#text + 1] = t.traceback end
    if t.rerun then text[#text + 1] = "rerun: " .. t.rerun end
    out[#out + 1] = string.format('      <failure message="%s" type="%s">%s</failure>',
      esc((t.where and t.where .. ": " or "") .. (t.message or "")), t.status, esc(table.concat(text, "\n")))
  elseif t.status == "skip" then
    out[#out + 1] = string.format('      <skipped message="%s"/>', esc(t.reason))
  elseif t.status == "gap" then
    local link = t.link and ('<property name="known_gap_link" value="' .. esc(t.link) .. '"/>') or ""
    out[#out + 1] = '      <properties><property name="known_gap" value="' .. esc(t.reason) .. '"/>' .. link
      .. '</properties>'
    out[#out + 1] = string.format('      <skipped message="known gap: %s%s"/>', esc(t.reason),
      t.link and (" (" .. esc(t.link) .. ")") or "")
  end
  if t.artifacts then
    out[#out + 1] = "      <system-out>artifacts: " .. esc(t.artifacts) .. "</system-out>"
  end
  out[#out + 1] = "    </testcase>"
  return table.concat(out, "\n")
end

function Junit:file_done(job)
  local s = { name = job.file .. (job.run > 1 and (" (run " .. job.run .. ")") or ""), cases = {},
    tests = 0, failures = 0, errors = 0, skipped = 0, time = job.duration or 0 }
  for _, t in ipairs(job.tests) do
    if t.ev == "test_end" then
      s.tests = s.tests + 1
      if t.status == "fail" or t.status == "timeout" then s.failures = s.failures + 1 end
      if t.status == "error" then s.errors = s.errors + 1 end
      if t.status == "skip" or t.status == "gap" then s.skipped = s.skipped + 1 end
      s.cases[#s.cases + 1] = case_xml(job.file, t)
    end
  end
  for _, e in ipairs(job.errors) do
    s.tests, s.errors = s.tests + 1, s.errors + 1
    s.cases[#s.cases + 1] = string.format(
      '    <testcase classname="%s" name="(file)" time="0.000">\n      <error message="%s">%s</error>\n    </testcase>',
      esc(job.file), esc(e.message), esc((e.where and ("at " .. e.where .. "\n") or "") .. (e.traceback or "")))
  end
  if job.skip_reason then
    s.tests, s.skipped = s.tests + 1, s.skipped + 1
    s.cases[#s.cases + 1] = string.format(
      '    <testcase classname="%s" name="(file)" time="0.000">\n      <skipped message="%s"/>\n    </testcase>',
      esc(job.file), esc(job.skip_reason))
  end
  self.suites[#self.suites + 1] = s
end

function Junit:finish(summary)
  local totals = { tests = 0, failures = 0, errors = 0, skipped = 0 }
  local body = {}
  local stamp = os.date("!%Y-%m-%dT%H:%M:%S")
  for _, s in ipairs(self.suites) do
    for k in pairs(totals) do totals[k] = totals[k] + s[k] end
    body[#body + 1] = string.format(
      '  <testsuite name="%s" tests="%d" failures="%d" errors="%d" skipped="%d" time="%.3f" timestamp="%s">',
      esc(s.name), s.tests, s.failures, s.errors, s.skipped, s.time, stamp)
    for _, c in ipairs(s.cases) do body[#body + 1] = c end
    body[#body + 1] = "  </testsuite>"
  end
  local f, err = io.open(self.path, "w")
  if not f then
    io.stderr:write("kvengine: cannot write the JUnit report: ", err, "\n")
    return
  end
  f:write('<?xml version="1.0" encoding="UTF-8"?>\n')
  f:write(string.format('<testsuites name="kvengine" tests="%d" failures="%d" errors="%d" skipped="%d" time="%.3f">\n',
    totals.tests, totals.failures, totals.errors, totals.skipped, summary.duration))
  f:write(table.concat(body, "\n"), #body > 0 and "\n" or "", "</testsuites>\n")
  f:close()
end

return Junit
