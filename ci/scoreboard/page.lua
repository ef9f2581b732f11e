-- ci/scoreboard/page.lua - the scoreboard as an HTML report: ci/scoreboard/run.lua
-- runs this file with --html and SCOREBOARD_JSON naming its scoreboard.json.
-- Not a suite scenario: it reads the board and sends it with engine.report,
-- the routers and a table per scenario file (kvcache/report_scoreboard.lua
-- draws them) and the figures as charts (kvcache/report_chart.lua).

local engine = require("engine")
local fs = require("fs")
local json = require("json")

local HERE = debug.getinfo(1, "S").short_src:match("^(.*)/[^/]*$") or "."
package.path = HERE .. "/../?.lua;" .. package.path
local board = require("scoreboard.board")

local PATH = os.getenv("SCOREBOARD_JSON") or ""
local b

before_all(function()
  local text = fs.read(PATH)
  if not text then fail("SCOREBOARD_JSON names no scoreboard.json (ci/scoreboard/run.lua sets it): " .. PATH) end
  b = json.decode(text)
end)

local function ran() return board.ran(b) end

test("the routers: what ran, and what did not and why", function()
  engine.report("scoreboard_routers", { routers = b.routers })
end)

test("outcomes per scenario and test, a column per router", function()
  local labels = {}
  for _, rt in ipairs(ran()) do labels[#labels + 1] = rt.label end
  for _, f in ipairs(b.files) do
    engine.report("scoreboard", { file = f.file, routers = labels, tests = f.tests })
  end
end)

-- The workload's figures per router, each policy a bar, beside random.
test("routing quality: load_prefix_sharing.lua's hit ratio and evicted blocks", function()
  for _, rt in ipairs(ran()) do
    if rt.workload then
      local hit, evicted = {}, {}
      for _, p in ipairs({ "kvcache-aware", "random", "least-request" }) do
        local f = rt.workload[p]
        if f then
          hit[#hit + 1] = { label = p, value = f.hit }
          evicted[#evicted + 1] = { label = p, value = math.tointeger(f.evicted) or f.evicted }
        end
      end
      engine.report("chart", { title = rt.label .. ": cache-hit ratio (cached / prompt tokens)", bars = hit, max = 1 })
      engine.report("chart", { title = rt.label .. ": evicted blocks", bars = evicted })
    else
      log(rt.label .. ": not measured: " .. tostring(rt.workload_why))
    end
  end
end)

test("added latency: p50 and p99 at 128 and 2,048-token prompts", function()
  for _, tokens in ipairs({ "128", "2048" }) do
    for _, q in ipairs({ "p50", "p99" }) do
      local bars = {}
      for _, rt in ipairs(ran()) do
        local r = rt.latency and rt.latency[tokens]
        if r then bars[#bars + 1] = { label = rt.label, value = (r[q] - r["direct_" .. q]) * 1000 } end
      end
      engine.report("chart", { title = string.format("added latency at %s, %s-token prompts", q, tokens), unit = "ms",
        bars = bars })
    end
  end
end)
