-- report_html.lua - one self-contained HTML page of the run, for --html FILE.
--
-- The page needs nothing but itself: inline CSS, inline SVG, no script, no
-- font or image to fetch.  It holds the run's summary (counts, seed,
-- command, duration), the known gaps with their links, and for each file a
-- table of its tests (outcome, duration).  Below the table, each test with
-- more to show has a section: a failure's message, where, rerun command
-- and artifacts; then what fixtures sent with engine.report: a kvcache
-- stack's diagnosis and data-path timeline ("timeline"), a chart of the
-- pods that served each stack:route / stack:expect_routed call ("route"),
-- and bar charts a scenario draws itself ("chart").  A report it cannot
-- draw is named, not fatal.  The file is written when the run ends
-- (interrupted runs too), as well-formed XML so that tools can read it.

local command = require("command")
local report = require("report")
local svg = require("report_svg")

local esc = svg.esc

local Html = {}
Html.__index = Html

function Html.new(opts)
  return setmetatable({ path = opts.html, opts = opts, jobs = {}, info = {} }, Html)
end

local LABEL = { pass = "ok", fail = "FAIL", error = "ERROR", timeout = "TIMEOUT", skip = "skip", gap = "known gap",
  listed = "listed" }
local FAILED = { fail = true, error = true, timeout = true }

local function seconds(s) return s and string.format("%.2fs", s) or "" end

local function count(n, word) return string.format("%d %s%s", n, word, n == 1 and "" or "s") end

local function tag(name, attrs, body)
  local a = {}
  local names = {}
  for k in pairs(attrs or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do a[#a + 1] = string.format(' %s="%s"', k, esc(attrs[k])) end
  return string.format("<%s%s>%s</%s>", name, table.concat(a), body or "", name)
end

-- ------------------------------------------------------------ reports

local function figure(kind, attrs, caption, body)
  attrs.class = "chart " .. kind
  attrs["data-kind"] = kind
  return tag("figure", attrs, tag("figcaption", nil, caption) .. body)
end

local function where_text(r) return r.where and (" at " .. tag("code", nil, esc(r.where))) or "" end

-- One row per pod of the stack, in order, then any other pod that served
-- (the stack changed meanwhile), then the requests that failed.
local function route_rows(d)
  local counts, rows, expected = d.counts or {}, {}, d.expected
  local names, seen, extra = {}, {}, {}
  for _, p in ipairs(d.pods or {}) do
    names[#names + 1], seen[tostring(p)] = tostring(p), true
  end
  for p in pairs(counts) do
    if not seen[p] then extra[#extra + 1] = tostring(p) end
  end
  table.sort(extra)
  table.move(extra, 1, #extra, #names + 1, names)
  for _, p in ipairs(names) do
    local n = math.tointeger(tonumber(counts[p])) or 0
    local tone = expected and (p == expected and "bar-expected" or (n > 0 and "bar-stray" or nil)) or nil
    rows[#rows + 1] = { label = p, value = n, tone = tone, note = p == expected and "(expected)" or nil,
      attrs = { ["data-pod"] = p, ["data-value"] = n, ["data-expected"] = p == expected and "true" or nil } }
  end
  local errors = math.tointeger(tonumber(d.errors)) or 0
  if errors > 0 then
    rows[#rows + 1] = { label = "errors", value = errors, tone = "bar-error",
      attrs = { ["data-errors"] = errors, ["data-value"] = errors } }
  end
  return rows
end

local function draw_route(r)
  local d = r.data
  local n = math.tointeger(tonumber(d.n)) or 0
  local method = d.method == "expect_routed" and "stack:expect_routed" or "stack:route"
  local caption = string.format("%s%s: %s%s", esc(method), where_text(r), count(n, "request"),
    d.expected and (", expected on " .. tag("strong", nil, esc(d.expected))) or "")
  local attrs = { ["data-n"] = n, ["data-errors"] = tonumber(d.errors) or 0, ["data-expected"] = d.expected,
    ["data-method"] = d.method }
  return figure("route", attrs, caption, svg.bars { rows = route_rows(d), max = n,
    format = function(v) return string.format("%d", v) end })
end

local function draw_chart(r)
  local d = r.data
  local rows, integral = {}, true
  for _, b in ipairs(d.bars or {}) do
    local v = tonumber(b.value) or 0
    integral = integral and math.type(v) == "integer"
    rows[#rows + 1] = { label = tostring(b.label), value = v,
      attrs = { ["data-label"] = tostring(b.label), ["data-value"] = v } }
  end
  local unit = d.unit and (" " .. tostring(d.unit)) or ""
  local format = function(v) return (integral and string.format("%d", v) or string.format("%.3f", v)) .. unit end
  return figure("bars", { ["data-title"] = d.title }, esc(d.title or "chart") .. where_text(r),
    svg.bars { rows = rows, max = tonumber(d.max), format = format })
end

local function entries_table(entries)
  local rows = {}
  for _, e in ipairs(entries) do
    rows[#rows + 1] = tag("tr", { class = "entry", ["data-kind"] = e.kind, ["data-pod"] = e.pod },
      tag("td", { class = "num" }, string.format("%.3f", tonumber(e.t) or 0)) .. tag("td", nil, esc(e.kind))
      .. tag("td", nil, esc(svg.describe(e):gsub("^%+%S+ ", ""))))
  end
  return tag("table", { class = "entries" }, tag("thead", nil, "<tr><th>s</th><th>what</th><th>detail</th></tr>")
    .. tag("tbody", nil, table.concat(rows)))
end

local function draw_timeline(r)
  local d = r.data
  local entries = {}
  for _, e in ipairs(d.entries or {}) do
    if type(e) == "table" and tonumber(e.t) then
      e.t = tonumber(e.t)
      entries[#entries + 1] = e
    end
  end
  local dropped = math.tointeger(tonumber(d.dropped)) or 0
  local caption = string.format("data-path timeline of stack %s (%s target, model %s): %s%s; seconds since the "
    .. "stack started", esc(d.stack), esc(d.target), esc(d.model), count(#entries, "step"),
    dropped > 0 and string.format(", the %d before them dropped", dropped) or "")
  local key = svg.pod_key(d.pods) .. ' <span class="key"><span class="swatch fence-seen"></span>fence seen</span>'
    .. ' <span class="key"><span class="swatch fence-unseen"></span>fence not seen</span>'
    .. ' <span class="key"><span class="swatch failed"></span>failed request</span>'
  local body = svg.timeline(entries, d.pods) .. tag("p", { class = "key" }, key)
    .. tag("details", { class = "steps" }, tag("summary", nil, "every step") .. entries_table(entries))
  local diagnosis = d.diagnosis and tag("div", { class = "diagnosis" }, tag("h4", nil, "diagnosis of stack "
    .. esc(d.stack)) .. tag("pre", nil, esc(d.diagnosis))) or ""
  return diagnosis .. figure("timeline", { ["data-stack"] = d.stack, ["data-entries"] = #entries }, caption, body)
end

local DRAW = { route = draw_route, chart = draw_chart, timeline = draw_timeline }

-- Timelines (with the diagnosis) first, then the charts in the order sent.
local function draw_reports(reports)
  local first, rest = {}, {}
  for _, r in ipairs(reports or {}) do
    local draw = DRAW[r.kind]
    if draw then
      local ok, html = pcall(draw, { data = type(r.data) == "table" and r.data or {}, where = r.where })
      html = ok and html or tag("p", { class = "bad-report" }, esc(string.format(
        "the %s report%s could not be drawn: %s", r.kind, r.where and (" from " .. r.where) or "", tostring(html))))
      table.insert(r.kind == "timeline" and first or rest, html)
    end
  end
  table.move(rest, 1, #rest, #first + 1, first)
  return table.concat(first)
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
background:#fff5f5}.diagnosis pre{background:#f6f8fa;padding:8px 10px;border-radius:4px}
h4{font-size:13px;margin:14px 0 2px}
figure.chart{margin:10px 0 14px}figcaption{margin-bottom:4px;color:#30363d}
svg text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;fill:#30363d}
svg .label{text-anchor:end}svg .tick{text-anchor:middle;fill:#59636e}svg .lane-label{fill:#30363d;font-weight:600}
svg .track{fill:#f0f2f4}svg .bar{fill:#4c78a8}svg .bar-expected{fill:#2e9d5b}svg .bar-stray{fill:#e07b24}
svg .bar-error{fill:#cf222e}svg .grid{stroke:#d8dee4;stroke-width:1}svg .lane0{fill:#f6f8fa}svg .lane1{fill:#fff}
.pod0{fill:#8e6cc4;background:#8e6cc4}.pod1{fill:#4c78a8;background:#4c78a8}.pod2{fill:#e07b24;background:#e07b24}
.pod3{fill:#2e9d5b;background:#2e9d5b}.pod4{fill:#c2410c;background:#c2410c}.pod5{fill:#0891b2;background:#0891b2}
.pod6{fill:#a16207;background:#a16207}.pod7{fill:#db2777;background:#db2777}
svg .fence.seen{fill:#2e9d5b}svg .fence.unseen{fill:#fff;stroke:#cf222e;stroke-width:2}
svg .failed{stroke:#cf222e;stroke-width:2;fill-opacity:.45}
.key{margin-right:12px;white-space:nowrap}.swatch{display:inline-block;width:10px;height:10px;margin-right:4px;
border-radius:2px;vertical-align:-1px}.swatch.fence-seen{background:#2e9d5b;border-radius:5px}
.swatch.fence-unseen{border:2px solid #cf222e;border-radius:5px;width:6px;height:6px}
.swatch.failed{border:2px solid #cf222e;width:6px;height:6px}
table.entries{border-collapse:collapse;font-size:12.5px}table.entries td,table.entries th{padding:1px 8px;
text-align:left;border-bottom:1px solid #eaeef2}.bad-report{color:#b42318}
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
    tag("title", nil, esc(title)), tag("style", nil, STYLE), "</head><body>\n",
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
