-- check.lua - the HTML report as a browser shows it (`make html-check`).
--
-- A child kvengine runs failing_run.lua against the local stack with
-- --html; headless Chromium renders the page. The DOM it dumps must hold
-- one row per test with its outcome, one chart per route call whose bars
-- are the counts the run saw, and the failing test's timeline with the
-- steps the run took; the screenshot must show, where the DOM lays a chart
-- and its bars out, the chart drawn and each bar in its colour.
--
-- Only the copy Chromium renders here gets a script, which writes each
-- element's box and colour into data- attributes of the dumped DOM; the
-- report itself has none. Needs chromium and ImageMagick's convert
-- (ci/html-check/install.sh); xmllint reads the dumped DOM.
--
--   HTML_CHECK_DIR         where the page, the DOM and the screenshot go
--                          (default build/html-check)
--   HTML_CHECK_SCREENSHOT  also copy the screenshot there (docs/img/report.png)

local fs = require("fs")
local json = require("json")
local proc = require("proc")

local HERE = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$") or "."
package.path = HERE .. "/../?.lua;" .. package.path
local browser = require("html-check.browser")
local xpath, box_of = browser.xpath, browser.box_of
local OUT = os.getenv("HTML_CHECK_DIR") or "build/html-check"
local SCREENSHOT = os.getenv("HTML_CHECK_SCREENSHOT")
if SCREENSHOT == "" then SCREENSHOT = nil end
local WIDTH = 1100

-- The binary as the command line in the page names it: relative to the
-- checkout when it is inside it.
local BIN = assert(os.getenv("KVENGINE_BIN"), "KVENGINE_BIN is set by the engine")
local cwd = os.getenv("PWD")
if cwd and BIN:sub(1, #cwd + 1) == cwd .. "/" then BIN = BIN:sub(#cwd + 2) end

local record, dom, png, page

before_all(function()
  proc.run { argv = { "rm", "-rf", OUT } }
  fs.mkdir_p(OUT)
  page = OUT .. "/report.html"
  local status, out = proc.run { argv = { BIN, "--no-color", "--html", page, "--artifacts", OUT .. "/artifacts",
    HERE .. "/failing_run.lua" }, env = { HTML_CHECK_RECORD = OUT .. "/record.json", KVENGINE_TARGET = false },
    timeout = 120 }
  expect(status):eq(1, "the run has its one failure:\n" .. tostring(out))
  record = json.decode(assert(fs.read(OUT .. "/record.json"), "the run wrote what it did"))
  dom, png = browser.render(page, OUT, WIDTH)
  if SCREENSHOT then proc.run { argv = { "cp", png, SCREENSHOT } } end
end)

test("one row per test, with its outcome", function()
  local want = {
    { "an announced prompt is routed to the pod that owns it", "pass" },
    { "a prompt nobody announced is spread over the pods", "pass" },
    { "a prompt p1 announced is routed to p3 (fails on purpose)", "fail" },
    { "a known gap of the router", "gap" },
    { "a test skipped for a reason", "skip" },
    { "a scenario's own chart", "pass" },
  }
  expect(xpath(dom, 'count(//tr[@class="test"])')):eq(#want, "one row per test of failing_run.lua")
  for i, w in ipairs(want) do
    local row = string.format('(//tr[@class="test"])[%d]', i)
    expect(xpath(dom, "string(" .. row .. "/@data-name)")):eq(w[1], "row " .. i .. " names its test")
    expect(xpath(dom, "string(" .. row .. "/@data-status)")):eq(w[2], w[1])
    expect(xpath(dom, "string(" .. row .. '//span[contains(@class, "badge")])')):ne("", w[1] .. " shows its outcome")
  end
end)

test("one chart per route call, each bar the count of requests its pod served", function()
  local charts = '//figure[@data-kind="route"]'
  expect(xpath(dom, "count(" .. charts .. ")")):eq(#record.routes, "one chart per stack:route / expect_routed call")
  for i, r in ipairs(record.routes) do
    local fig = string.format("(%s)[%d]", charts, i)
    expect(xpath(dom, "string(" .. fig .. "/ancestor::section[1]/@data-test)")):eq(r.test, "chart " .. i)
    expect(xpath(dom, "string(" .. fig .. "/@data-n)")):eq(r.n, "chart " .. i .. ": requests sent")
    expect(xpath(dom, "string(" .. fig .. "/@data-expected)")):eq(r.expected or "", "chart " .. i .. ": expected pod")
    for _, pod in ipairs({ "p1", "p2", "p3" }) do
      local bar = string.format('%s//*[name()="rect"][@data-pod="%s"]', fig, pod)
      expect(xpath(dom, "string(" .. bar .. "/@data-value)")):eq((r.counts or {})[pod] or 0,
        string.format("chart %d (%s): %s's bar", i, r.test, pod))
    end
  end
end)

test("the failing test has its diagnosis and a timeline of the steps the run took", function()
  local sec = '//section[@data-test="a prompt p1 announced is routed to p3 (fails on purpose)"]'
  expect(xpath(dom, "string(" .. sec .. '//pre[@class="message"])')):contains("p3 serves none of it")
  expect(xpath(dom, "string(" .. sec .. '//div[@class="diagnosis"]/pre)')):contains("ownership:")
  local marks = sec .. '//figure[@data-kind="timeline"]//*[name()="svg"]//*[@data-kind]'
  local requests = 0
  for _, r in ipairs(record.routes) do requests = requests + r.n end
  expect(xpath(dom, "count(" .. marks .. '[@data-kind="completion"])')):eq(requests, "every request of the file")
  expect(xpath(dom, "count(" .. marks .. '[@data-kind="completion"][@data-status="200"])')):eq(requests)
  expect(xpath(dom, "count(" .. marks .. '[@data-kind="publish"])')):eq(record.injects, "every inject")
  expect(xpath(dom, "count(" .. marks .. '[@data-kind="fence"][@data-seen="true"])')):eq(record.injects,
    "each inject's fence seen in the store")
  expect(xpath(dom, "count(" .. marks .. '[@data-kind="publish"][@data-pod="p1"])')):eq(1, "p1's announcement")
end)

test("the screenshot shows each chart, and each bar in its colour, where the DOM lays them out", function()
  local size = browser.convert(png, { "-format", "%w %h", "info:" })
  expect(size):eq(WIDTH .. " " .. xpath(dom, "string(/html/@data-height)"), "the screenshot is the whole page")
  local charts = xpath(dom, 'count(//figure[contains(@class, "chart")])')
  expect(charts):ge(#record.routes + 2, "the route charts, the timeline and the scenario's chart")
  for i = 1, charts do
    local b = box_of(dom, string.format('(//figure[contains(@class, "chart")])[%d]', i))
    local sd = browser.blank(png, b)
    expect(sd):gt(0.02, string.format("chart %d is drawn in its box %d,%d %dx%d, not blank", i, b.x, b.y, b.w, b.h))
  end
  local bars = xpath(dom, 'count(//*[name()="rect"][contains(@class, "bar")])')
  local checked = 0
  for i = 1, bars do
    local path = string.format('(//*[name()="rect"][contains(@class, "bar")])[%d]', i)
    local b = box_of(dom, path)
    if b.w >= 6 then
      local fill = xpath(dom, "string(" .. path .. "/@data-fill)")
      local r, g, bl = fill:match("rgb%((%d+), (%d+), (%d+)%)")
      expect(r):not_nil("the DOM gives bar " .. i .. " a colour, not " .. fill)
      expect(browser.pixel(png, b.x + b.w // 2, b.y + b.h // 2)):eq({ tonumber(r), tonumber(g), tonumber(bl) },
        string.format("bar %d's middle (%d,%d) has its colour %s", i, b.x + b.w // 2, b.y + b.h // 2, fill))
      checked = checked + 1
    end
  end
  expect(checked):ge(5, "the bars wide enough to look at")
end)
