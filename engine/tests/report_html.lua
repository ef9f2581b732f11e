-- The HTML report (--html) and engine.report, which feeds it: a child
-- kvengine runs a file of known tests and reports, and the page it writes
-- is read back with xmllint (the page is well-formed XML, so XPath can ask
-- it what a reader would see). Rendering in a browser is `make html-check`.
-- The kinds drawn are the fixture library's: fixtures/kvengine_plugins.lua
-- registers their drawers (the engine draws none itself; commands.lua
-- tests the registration with a library of its own).

package.path = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$") .. "/lib/?.lua;" .. package.path
local child = require("child_engine")
local engine = require("engine")
local fs = require("fs")
local proc = require("proc")

local SCENARIO = [=[
local engine = require("engine")

engine.report("chart", { title = "a chart of the file", bars = { { label = "a", value = 2 }, { label = "b", value = 5 } } })

test("routes", function()
  engine.report("route", { method = "route", n = 10, errors = 1, counts = { p1 = 6, p2 = 3 }, pods = { "p1", "p2", "p3" } })
  engine.report("route", { method = "expect_routed", n = 4, errors = 0, counts = { p2 = 4 }, pods = { "p1", "p2" },
    expected = "p2" })
end)

test("fails <with> & markup", function()
  on_failure(function()
    engine.report("timeline", { stack = 1, target = "local", model = "m", pods = { "p1", "p2" }, dropped = 3,
      diagnosis = "ownership: 4 entries <none lost>", entries = {
        { kind = "publish", t = 0.1, pod = "p1", events = "stored (4 blocks)" },
        { kind = "fence", t = 0.15, pod = "p1", seen = true, waited = 0.05 },
        { kind = "completion", t = 0.3, took = 0.1, id = "r1", pod = "p2", chosen = "p2", status = 200 },
        { kind = "completion", t = 0.35, took = 0.02, id = "r2", err = "connection refused" },
      } })
  end)
  fail("the request went to p2")
end)

test("skipped", { skip = "not here" }, function() end)

test("a gap", { known_gap = { reason = "upstream drops it", link = "https://example.com/issues/1" } }, function()
  fail("dropped")
end)

test("a kind the page does not draw, and data it cannot", function()
  engine.report("something-else", { x = 1 })
  engine.report("route", { counts = "not a table" })
end)
]=]

-- Run the scenario from dir with these extra options; returns status and stdout.
local function run(dir, extra)
  local args = { "--no-color", "--seed", "42", "--artifacts", dir .. "/artifacts" }
  table.move(extra, 1, #extra, #args + 1, args)
  args[#args + 1] = dir .. "/s.lua"
  local status, out = child.run(args)
  return status, out
end

-- XPath over the page: a number for count(), else the string value.
local function xpath(page, expr)
  local status, out, err = proc.run { argv = { "xmllint", "--xpath", expr, page }, timeout = 10 }
  expect(status):eq(0, "xmllint answers " .. expr .. ": " .. tostring(err))
  out = out:gsub("\n$", "")
  return tonumber(out) or out
end

local dir = child.files { ["s.lua"] = SCENARIO }
local page = dir .. "/report.html"
local status, out

local reports = dir .. "/reports.jsonl"

before_all(function() status, out = run(dir, { "--html", page, "--reports", reports }) end)

after_all(function() child.remove(dir) end)

test("--reports writes each report as a JSON line: its file, test, kind and data", function()
  local lines = {}
  for line in assert(fs.read(reports), "the file is at " .. reports):gmatch("[^\n]+") do
    lines[#lines + 1] = require("json").decode(line)
  end
  expect(#lines):eq(6, "the file's chart, two routes, the failure's timeline, and the last test's two")
  expect(lines[1]):eq({ file = dir .. "/s.lua", run = 1, kind = "chart", data = { title = "a chart of the file",
    bars = { { label = "a", value = 2 }, { label = "b", value = 5 } } } })
  expect(lines[2].test):eq("routes")
  expect(lines[2].data.counts):eq({ p1 = 6, p2 = 3 })
  expect(lines[3].data.method):eq("expect_routed")
  expect(lines[4].test):eq("fails <with> & markup")
  expect(lines[4].kind):eq("timeline")
  expect(lines[5].kind):eq("something-else", "a kind nobody draws is data all the same")
  expect(lines[6].data):eq({ counts = "not a table" }, "so is data no drawer could draw")
end)

test("the page is written, well-formed, for a run with a failure", function()
  expect(status):eq(1, "one test fails: " .. out)
  expect(fs.read(page)):not_nil("the page is at " .. page)
  local ok, _, err = proc.run { argv = { "xmllint", "--noout", page }, timeout = 10 }
  expect(ok):eq(0, "the page is well-formed XML: " .. tostring(err))
end)

test("the summary: counts, seed, command", function()
  expect(xpath(page, 'string(//*[@id="count-passed"]/@data-count)')):eq(2)
  expect(xpath(page, 'string(//*[@id="count-failed"]/@data-count)')):eq(1)
  expect(xpath(page, 'string(//*[@id="count-skipped"]/@data-count)')):eq(2, "the skip and the known gap")
  expect(xpath(page, 'string(//*[@id="count-gaps"]/@data-count)')):eq(1)
  expect(xpath(page, 'string(//dd[@data-field="seed"])')):eq(42)
  expect(xpath(page, 'string(//dd[@data-field="command"])')):contains("--html")
  expect(xpath(page, 'string(//p[@class="closing"])')):eq("2 passed, 1 failed, 2 skipped")
end)

test("one row per test, in order, with its outcome", function()
  expect(xpath(page, 'count(//tr[@class="test"])')):eq(5)
  local want = { { "routes", "pass" }, { "fails <with> & markup", "fail" }, { "skipped", "skip" },
    { "a gap", "gap" }, { "a kind the page does not draw, and data it cannot", "pass" } }
  for i, w in ipairs(want) do
    local row = string.format('(//tr[@class="test"])[%d]', i)
    expect(xpath(page, "string(" .. row .. "/@data-name)")):eq(w[1], "row " .. i)
    expect(xpath(page, "string(" .. row .. "/@data-status)")):eq(w[2], "row " .. i)
  end
  expect(xpath(page, 'string(//tr[@data-name="routes"]/@data-duration)')):type("number")
end)

test("a route report is a chart of the pods that served, the expected pod marked", function()
  local fig = '//section[@data-test="routes"]//figure[@data-kind="route"]'
  expect(xpath(page, "count(" .. fig .. ")")):eq(2)
  local first, second = "(" .. fig .. ")[1]", "(" .. fig .. ")[2]"
  expect(xpath(page, "string(" .. first .. "/figcaption/code)")):matches("s%.lua:6$", "where the call was")
  for pod, n in pairs({ p1 = 6, p2 = 3, p3 = 0 }) do
    expect(xpath(page, string.format('string(%s//*[@data-pod="%s"]/@data-value)', first, pod))):eq(n, pod)
  end
  expect(xpath(page, "string(" .. first .. "//*[@data-errors]/@data-value)")):eq(1, "the failed request has a bar")
  expect(xpath(page, "string(" .. second .. "/@data-expected)")):eq("p2")
  expect(xpath(page, "string(" .. second .. '//*[@data-expected="true"]/@data-pod)')):eq("p2")
  expect(xpath(page, "string(" .. second .. '//*[@data-pod="p2"]/@data-value)')):eq(4)
end)

test("a failure shows its message, its diagnosis and its timeline", function()
  local sec = '//section[@data-test="fails <with> & markup"]'
  expect(xpath(page, "string(" .. sec .. '//pre[@class="message"])')):eq("the request went to p2")
  expect(xpath(page, "string(" .. sec .. '//div[@class="diagnosis"]/pre)')):eq("ownership: 4 entries <none lost>")
  local marks = sec .. '//figure[@data-kind="timeline"]//*[name()="svg"]//*[@data-kind]'
  expect(xpath(page, "count(" .. marks .. ")")):eq(4, "one mark per step")
  expect(xpath(page, "count(" .. marks .. '[@data-kind="publish"][@data-pod="p1"])')):eq(1)
  expect(xpath(page, "count(" .. marks .. '[@data-kind="fence"][@data-seen="true"])')):eq(1)
  expect(xpath(page, "count(" .. marks .. '[@data-kind="completion"])')):eq(2)
  expect(xpath(page, "string(" .. marks .. '[@data-id="r1"]/@data-status)')):eq(200)
  expect(xpath(page, "count(" .. sec .. '//tr[@class="entry"])')):eq(4, "every step is listed under the chart")
  expect(xpath(page, "string(" .. sec .. "//figcaption)")):contains("the 3 before them dropped")
  expect(xpath(page, 'string(//ul[@class="failures"]//a/@href)')):eq(xpath(page, "string(" .. sec .. "/@id)")
    and "#" .. xpath(page, "string(" .. sec .. "/@id)"), "the list of failures links to it")
end)

test("known gaps with their links; charts of the file under its table", function()
  expect(xpath(page, 'string(//ul[@class="gaps"]//a/@href)')):eq("https://example.com/issues/1")
  local fig = '//section[@class="file"]/figure[@data-kind="bars"]'
  expect(xpath(page, "count(" .. fig .. ")")):eq(1, "the file-level chart belongs to the file")
  expect(xpath(page, "string(" .. fig .. '//*[@data-label="b"]/@data-value)')):eq(5)
  expect(xpath(page, "string(" .. fig .. "/figcaption/code)")):matches("s%.lua:3$",
    "the caption names the scenario line that sent the report")
end)

test("a report the page cannot draw is named; one it does not know is left out", function()
  local sec = '//section[@data-test="a kind the page does not draw, and data it cannot"]'
  expect(xpath(page, "count(" .. sec .. '//*[@class="bad-report"])')):eq(1)
  expect(xpath(page, "string(" .. sec .. '//*[@class="bad-report"])')):contains("the route report")
  expect(xpath(page, "count(" .. sec .. "//figure)")):eq(0)
end)

test("the page fetches nothing: no script, stylesheet link, image or external font", function()
  expect(xpath(page, "count(//script | //link | //img | //iframe | //*[@src])")):eq(0)
  expect(xpath(page, 'count(//a[not(starts-with(@href, "#"))][@href != "https://example.com/issues/1"])'))
    :eq(0, "the only link out is the known gap's")
  local style = xpath(page, "string(//style)")
  expect(style):not_nil()
  expect(style:find("url(", 1, true)):is_nil("the CSS loads nothing")
  expect(style:find("@import", 1, true)):is_nil("the CSS loads nothing")
end)

test("console, TAP and JUnit leave the reports out", function()
  local st, tap = run(dir, { "--tap", "--junit", dir .. "/junit.xml" })
  expect(st):eq(1)
  local junit = fs.read(dir .. "/junit.xml")
  for _, text in ipairs({ out, tap, junit }) do
    expect(text:find("a chart of the file", 1, true)):is_nil("no report data in:\n" .. text)
    expect(text:find("stored (4 blocks)", 1, true)):is_nil("no report data in:\n" .. text)
  end
end)

test("engine.report refuses what it cannot carry, at the caller's line", function()
  expect(function() engine.report("bad kind", {}) end):raises("the kind is a name")
  expect(function() engine.report("x", "text") end):raises("the data is a table, not string")
  expect(function() engine.report("x", { f = print }) end):raises("JSON cannot carry the data")
  expect(function() engine.report("x", { s = string.rep("a", 300 * 1024) }) end):raises("more than the 262144")
end)
