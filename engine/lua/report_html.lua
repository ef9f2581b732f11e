-- report_html.lua - one self-contained HTML page of the run, for --html FILE.
--
-- The page needs nothing but itself: inline CSS, inline SVG, no script, no
-- font or image to fetch.  It holds the run's summary (counts, seed,
-- command, duration), the known gaps with their links, and for each file a
-- table of its tests (outcome, duration).  Below the table, each test with
-- more to show has a section: a failure's message, where, rerun command
-- and artifacts; then what fixtures sent with engine.report, each drawn by
-- the drawer a fixture library registered for its kind (engine.drawer:
-- plugins.lua says how it reaches this process).  The engine draws no kind
-- itself: report_svg.lua is the kit drawers draw with.  A report that
-- cannot be drawn is named, not fatal; a kind nobody draws is left out.  The file is written when the run ends
-- (interrupted runs too), as well-formed XML so that tools can read it.

local command = require("command")
local report = require("report")
local svg = require("report_svg")

local esc, tag, count = svg.esc, svg.tag, svg.count

local Html = {}
Html.__index = Html

function Html.new(opts)
  return setmetatable({ path = opts.html, opts = opts, jobs = {}, info = {} }, Html)
end

local LABEL = { pass = "ok", fail = "FAIL", error = "ERROR", timeout = "TIMEOUT", skip = "skip", gap = "known gap",
  listed = "listed" }
local FAILED = { fail = true, error = true, timeout = true }

local function seconds(s) return s and string.format("%.2fs", s) or "" end

-- ------------------------------------------------------------ reports

-- Drawers by module name: {draw =, lead =, style =}, or the reason there is none.
local drawers, why_not = {}, {}

-- The drawer a report names.  The worker looked its kind up among the
-- drawers fixture libraries registered (engine.drawer, plugins.lua) and
-- sent the module's name with the report; this process loads no fixture
-- code but that module, required through the same module path.
local function drawer_of(name)
  if drawers[name] or why_not[name] then return drawers[name], why_not[name] end
  local ok, d = pcall(require, name)
  if not ok then
    why_not[name] = tostring(d):match("^[^\n]*") -- not the module path's every folder
  elseif type(d) ~= "table" or type(d.draw) ~= "function" then
    why_not[name] = name .. " returns no table with a draw function"
  else
    drawers[name] = d
  end
  return drawers[name], why_not[name]
end

-- A report's HTML, or a line saying why it could not be drawn.
local function draw_one(r, d, err)
  local ok, html = false, err
  if d then
    ok, html = pcall(d.draw, { kind = r.kind, data = type(r.data) == "table" and r.data or {}, where = r.where })
  end
  if ok and type(html) == "string" then return html end
  return tag("p", { class = "bad-report" }, esc(string.format("the %s report%s could not be drawn: %s", r.kind,
    r.where and (" from " .. r.where) or "", tostring(html))))
end

-- The reports a drawer was registered for, the leading ones (a diagnosis)
-- first, then the others in the order sent.  Kinds nobody draws are left out.
local function draw_reports(reports)
  local first, rest = {}, {}
  for _, r in ipairs(reports or {}) do
    if type(r.drawer) == "string" then
      local d, err = drawer_of(r.drawer)
      table.insert(d and d.lead and first or rest, draw_one(r, d, err))
    end
  end
  table.move(rest, 1, #rest, #first + 1, first)
  return table.concat(first)
end

-- The CSS of the drawers that drew, sorted by module name.
local function drawer_styles()
  local names, out = {}, {}
  for name, d in pairs(drawers) do
    if type(d.style) == "string" then names[#names + 1] = name end
  end
  table.sort(names)
  for _, name in ipairs(names) do out[#out + 1] = drawers[name].style end
  return table.concat(out, "\n")
end

-- ------------------------------------------------------------ tests

local function badge(status) return tag("span", { class = "badge " .. status }, LABEL[status] or esc(status)) end

local function failure_block(t)
  local parts = { tag("pre", { class = "message" }, esc(t.message)) }
  if t.details then parts[#parts + 1] = tag("pre", { class = "details" }, esc(t.details)) end
  if t.where then parts[#parts + 1] = tag("p", nil, "at " .. tag("code", nil, esc(t.where))) end
  if t.rerun then parts[#parts + 1] = tag("p", nil, "rerun: " .. tag("code", nil, esc(t.rerun))) end
  if t.artifacts then parts[#parts + 1] = tag("p", nil, "artifacts: " .. tag("code", nil, esc(t.artifacts))) end
  if t.traceback then
    parts[#parts + 1] = tag("details", nil, tag("summary", nil, "traceback") .. tag("pre", nil, esc(t.traceback)))
  end
  return tag("div", { class = "failure" }, table.concat(parts))
end

local function gap_line(g)
  return esc(g.reason) .. (g.link and (" " .. tag("a", { href = g.link }, esc(g.link))) or "")
end

-- The section below the table for a test with more to show, or nil.
local function test_detail(t, id)
  local failed = FAILED[t.status]
  local drawn = draw_reports(t.reports)
  if not failed and drawn == "" and t.status ~= "gap" then return nil end
  local parts = { tag("h3", nil, badge(t.status) .. " " .. esc(t.name)) }
  if failed then parts[#parts + 1] = failure_block(t) end
  if t.status == "gap" then parts[#parts + 1] = tag("p", { class = "gap" }, "known gap: " .. gap_line(t)) end
  parts[#parts + 1] = drawn
  if failed and t.logs and #t.logs > 0 then
    parts[#parts + 1] = tag("details", nil, tag("summary", nil, count(#t.logs, "log line"))
      .. tag("pre", { class = "logs" }, esc(table.concat(t.logs, "\n"))))
  end
  return tag("section", { class = "test-detail", id = id, ["data-test"] = t.name, ["data-status"] = t.status },
    table.concat(parts))
end

local function test_row(t, detail_id)
  local name = detail_id and tag("a", { href = "#" .. detail_id }, esc(t.name)) or esc(t.name)
  local why = (t.status == "skip" and t.reason) and tag("span", { class = "muted" }, " " .. esc(t.reason)) or ""
  return tag("tr", { class = "test", ["data-status"] = t.status, ["data-name"] = t.name,
    ["data-duration"] = t.duration and string.format("%.3f", t.duration) or nil },
    tag("td", nil, badge(t.status)) .. tag("td", nil, name .. why) .. tag("td", { class = "num" }, seconds(t.duration)))
end

-- ------------------------------------------------------------ files

local function file_status(job)
  if job.failed then return "failed" end
  if job.skip_reason then return "skipped" end
  return "passed"
end

function Html:file_section(job, index)
  local rows, details = {}, {}
  for i, t in ipairs(job.tests) do
    t.status = t.ev == "test_listed" and "listed" or t.status
    local id = string.format("f%d-t%d", index, i)
    local detail = test_detail(t, id)
    if detail then details[#details + 1] = detail end
    rows[#rows + 1] = test_row(t, detail and id)
    if FAILED[t.status] then self.failures[#self.failures + 1] = { id = id, file = job.file, name = t.name } end
  end
  local head = job.file .. (job.run > 1 and string.format(" (run %d)", job.run) or "")
  local parts = { tag("h2", nil, tag("span", { class = "badge " .. file_status(job) }, file_status(job)) .. " "
    .. esc(head) .. tag("span", { class = "muted" }, string.format(" %s, %s", count(#job.tests, "test"),
      seconds(job.duration)))) }
  for _, e in ipairs(job.errors) do
    parts[#parts + 1] = tag("div", { class = "failure file-error" }, tag("pre", { class = "message" }, esc(e.message))
      .. (e.where and tag("p", nil, "at " .. tag("code", nil, esc(e.where))) or ""))
    self.failures[#self.failures + 1] = { id = "f" .. index, file = job.file, name = "(file)" }
  end
  if job.skip_reason then parts[#parts + 1] = tag("p", { class = "skip" }, "skipped: " .. esc(job.skip_reason)) end
  if #rows > 0 then
    parts[#parts + 1] = tag("table", { class = "tests" }, "<thead><tr><th>outcome</th><th>test</th>"
      .. '<th class="num">duration</th></tr></thead>' .. tag("tbody", nil, table.concat(rows)))
  end
  parts[#parts + 1] = draw_reports(job.reports)
  parts[#parts + 1] = table.concat(details)
  return tag("section", { class = "file", id = "f" .. index, ["data-file"] = job.file,
    ["data-status"] = file_status(job) }, table.concat(parts))
end

-- ------------------------------------------------------------ the page

local STYLE = [[
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2328;
background:#fff;margin:0;padding:24px 32px;max-width:1100px}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:28px 0 8px;padding-top:8px;border-top:1px solid #d0d7de}
h3{font-size:15px;margin:18px 0 6px}code,pre{font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",monospace}
pre{white-space:pre-wrap;word-break:break-word;margin:6px 0}
.cards{display:flex;gap:10px;margin:8px 0 12px}.card{border-radius:6px;padding:8px 14px;min-width:90px;
border:1px solid #d0d7de}.card b{display:block;font-size:22px}.card.passed{background:#e6f4ea}
.card.failed{background:#fde8e8}.card.skipped{background:#fff4d6}.card.gaps{background:#e0f2f1}
dl.run{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}dl.run dt{color:#59636e}
dl.run dd{margin:0}.closing{font-weight:600}.interrupted{color:#b42318;font-weight:600}
.badge{display:inline-block;min-width:64px;text-align:center;border-radius:4px;padding:0 6px;font-size:12px;
font-weight:600;color:#fff;background:#6e7781}.badge.pass,.badge.passed{background:#1a7f37}
.badge.fail,.badge.error,.badge.timeout,.badge.failed{background:#cf222e}.badge.skip,.badge.skipped{background:#bf8700}
.badge.gap{background:#0f766e}.muted{color:#59636e;font-weight:400}
table.tests{border-collapse:collapse;width:100%}table.tests td,table.tests th{padding:3px 8px;
border-bottom:1px solid #eaeef2;text-align:left;vertical-align:top}.num{text-align:right;white-space:nowrap}
table.tests th.num{text-align:right}tr.test[data-status=fail],tr.test[data-status=error],
tr.test[data-status=timeout]{background:#fff5f5}
.test-detail{margin:14px 0 18px;padding:4px 14px 8px;border-left:3px solid #d0d7de}
.test-detail[data-status=fail],.test-detail[data-status=error],.test-detail[data-status=timeout]{border-color:#cf222e}
.failure pre.message{color:#b42318;font-weight:600}.failure{margin:6px 0}.file-error{padding:4px 10px;
background:#fff5f5}
h4{font-size:13px;margin:14px 0 2px}
figure.chart{margin:10px 0 14px}figcaption{margin-bottom:4px;color:#30363d}
svg text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;fill:#30363d}
svg .label{text-anchor:end}svg .tick{text-anchor:middle;fill:#59636e}svg .lane-label{fill:#30363d;font-weight:600}
svg .track{fill:#f0f2f4}svg .bar{fill:#4c78a8}svg .grid{stroke:#d8dee4;stroke-width:1}svg .lane0{fill:#f6f8fa}
svg .lane1{fill:#fff}.key{margin-right:12px;white-space:nowrap}.swatch{display:inline-block;width:10px;height:10px;
margin-right:4px;border-radius:2px;vertical-align:-1px}.bad-report{color:#b42318}
ul.failures li,ul.gaps li{margin:2px 0}a{color:#0969da}
]]

function Html:start(info) self.info = info end

function Html:file_done(job) self.jobs[#self.jobs + 1] = job end

local function summary_cards(c, ngaps)
  local cards = {}
  for _, k in ipairs({ "passed", "failed", "skipped" }) do
    cards[#cards + 1] = tag("div", { class = "card " .. k, ["data-count"] = c[k], id = "count-" .. k },
      tag("b", nil, tostring(c[k])) .. k)
  end
  cards[#cards + 1] = tag("div", { class = "card gaps", ["data-count"] = ngaps, id = "count-gaps" },
    tag("b", nil, tostring(ngaps)) .. "known gaps")
  return tag("div", { class = "cards" }, table.concat(cards))
end

function Html:header(s)
  local c = s.counts
  local run = {
    { "seed", tostring(s.seed) },
    { "command", tag("code", nil, esc(command.line(self.info.command or {}))) },
    { "duration", seconds(s.duration) },
    { "files", tostring(#self.jobs) },
    { "finished", os.date("!%Y-%m-%d %H:%M:%S UTC") },
  }
  if self.opts.target then table.insert(run, 3, { "target", esc(self.opts.target) }) end
  if s.artifacts then run[#run + 1] = { "artifacts", tag("code", nil, esc(s.artifacts)) } end
  local dl = {}
  for _, kv in ipairs(run) do dl[#dl + 1] = tag("dt", nil, kv[1]) .. tag("dd", { ["data-field"] = kv[1] }, kv[2]) end
  local parts = { tag("h1", nil, "kvengine report"), summary_cards(c, #s.gaps),
    tag("p", { class = "closing" }, esc(report.closing_line(c))) }
  if s.interrupted then
    parts[#parts + 1] = tag("p", { class = "interrupted" },
      "interrupted by signal " .. s.interrupted .. ": the results so far")
  end
  parts[#parts + 1] = tag("dl", { class = "run" }, table.concat(dl))
  return tag("header", nil, table.concat(parts))
end

local function list_section(id, title, items)
  if #items == 0 then return "" end
  return tag("section", { id = id }, tag("h2", nil, title) .. tag("ul", { class = id }, table.concat(items)))
end

function Html:finish(s)
  self.failures = {}
  local files = {}
  for i, job in ipairs(self.jobs) do files[i] = self:file_section(job, i) end
  local failures, gaps = {}, {}
  for _, f in ipairs(self.failures) do
    failures[#failures + 1] = tag("li", nil, tag("a", { href = "#" .. f.id }, esc(f.name)) .. " "
      .. tag("span", { class = "muted" }, esc(f.file)))
  end
  for _, g in ipairs(s.gaps) do
    gaps[#gaps + 1] = tag("li", { class = "gap", ["data-link"] = g.link }, esc(g.name) .. " "
      .. tag("span", { class = "muted" }, esc(g.file)) .. ": " .. gap_line(g))
  end
  local title = "kvengine: " .. report.closing_line(s.counts)
  local page = table.concat {
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/>',
    '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
    tag("title", nil, esc(title)), tag("style", nil, STYLE .. drawer_styles()), "</head><body>\n",
    self:header(s), "\n", list_section("failures", "Failures", failures), list_section("gaps", "Known gaps", gaps),
    "\n", table.concat(files, "\n"), "\n</body></html>\n",
  }
  local f, err = io.open(self.path, "w")
  if not f then
    io.stderr:write("kvengine: cannot write the HTML report: ", err, "\n")
    return
  end
  f:write(page)
  f:close()
end

return Html
