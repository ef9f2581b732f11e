-- ci/scoreboard/html_check.lua - the scoreboard's page as a browser shows it
-- (make scoreboard, after ci/scoreboard/run.lua): headless Chromium renders
-- SCOREBOARD_DIR/scoreboard.html (default build/scoreboard), and what it
-- lays out must be scoreboard.json: a row per router with its status, per
-- scenario file a row per test with each router's outcome, per router that
-- measured them a chart of the workload's hit ratios whose bars are its
-- figures, the added-latency charts; and in the screenshot every figure is
-- drawn, not blank. Needs what make html-check needs (ci/html-check/install.sh).

local fs = require("fs")
local json = require("json")

local HERE = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$") or "."
package.path = HERE .. "/../?.lua;" .. package.path
local browser = require("html-check.browser")
local board = require("scoreboard.board")
local xpath = browser.xpath

local DIR = os.getenv("SCOREBOARD_DIR") or "build/scoreboard"
local WIDTH = 1400

local b, dom, png

before_all(function()
  b = json.decode(assert(fs.read(DIR .. "/scoreboard.json"), "make scoreboard wrote " .. DIR .. "/scoreboard.json"))
  dom, png = browser.render(DIR .. "/scoreboard.html", fs.mkdir_p(DIR .. "/html-check"), WIDTH)
end)

local function ran() return board.ran(b) end

local function quoted(s) return "concat('" .. tostring(s):gsub("'", "', \"'\", '") .. "', '')" end

test("a row per router, with whether it ran or why not", function()
  expect(xpath(dom, 'count(//tr[@class="sb-router"])')):eq(#b.routers, "every router is listed")
  for _, rt in ipairs(b.routers) do
    local row = "//tr[@class=\"sb-router\"][@data-router=" .. quoted(rt.label) .. "]"
    expect(xpath(dom, "string(" .. row .. "/@data-status)")):eq(rt.status, rt.label)
    if rt.status ~= "ran" then expect(xpath(dom, "string(" .. row .. ")")):contains(rt.why) end
  end
end)

-- Every value of an attribute over the DOM, in document order (one
-- xmllint call, not one per cell: the board has hundreds).
local ENTITIES = { quot = '"', amp = "&", lt = "<", gt = ">", apos = "'" }
local function values(expr, attr)
  local out = {}
  for v in tostring(xpath(dom, expr .. "/@" .. attr)):gmatch(attr:gsub("%-", "%%-") .. '="(.-)"') do
    out[#out + 1] = (v:gsub("&(%a+);", ENTITIES))
  end
  return out
end

test("per scenario file, a row per test with each router's outcome", function()
  local names, outcomes = {}, {}
  for _, f in ipairs(b.files) do
    for _, t in ipairs(f.tests) do
      names[#names + 1] = t.name
      for _, rt in ipairs(ran()) do
        outcomes[#outcomes + 1] = rt.label .. " " .. (t.cells[rt.label] and t.cells[rt.label].outcome or "none")
      end
    end
  end
  local rows = '//figure[@data-kind="scoreboard"]//tr[@class="sb-test"]'
  expect(values(rows, "data-test")):eq(names, "a row per test, file after file")
  local routers, got = values(rows .. "/td[@data-router]", "data-router"), {}
  for i, o in ipairs(values(rows .. "/td[@data-router]", "data-outcome")) do got[i] = routers[i] .. " " .. o end
  expect(got):eq(outcomes, "each router's outcome, row after row")
  expect(#outcomes):gt(0, "the board has outcomes")
end)

test("the workload's hit ratios and the added latency, as charts of the board's figures", function()
  for _, rt in ipairs(ran()) do
    if rt.workload then
      local fig = "//figure[@data-title=" .. quoted(rt.label .. ": cache-hit ratio (cached / prompt tokens)") .. "]"
      for _, p in ipairs({ "kvcache-aware", "random" }) do
        local v = xpath(dom, "string(" .. fig .. '//*[name()="rect"][@data-label="' .. p .. '"]/@data-value)')
        expect(math.abs((tonumber(v) or -1) - rt.workload[p].hit)):lt(1e-6, rt.label .. " " .. p .. "'s hit ratio")
      end
    end
  end
  local latency = xpath(dom, 'count(//figure[starts-with(@data-title, "added latency at ")])')
  expect(latency):eq(4, "p50 and p99 at 128 and 2,048 tokens")
end)

test("the screenshot shows every figure drawn where the DOM lays it out", function()
  local figures = xpath(dom, 'count(//figure[contains(@class, "chart")])')
  expect(figures):gt(#b.files, "the routers, a table per file, the charts")
  local boxes = {}
  for i = 1, figures do boxes[i] = browser.box_of(dom, string.format('(//figure[contains(@class, "chart")])[%d]', i)) end
  for i, sd in ipairs(browser.blanks(png, boxes)) do
    expect(sd):gt(0.02, string.format("figure %d is drawn in its box, not blank", i))
  end
end)
