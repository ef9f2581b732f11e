-- failing_run.lua - the run whose HTML report `make html-check` renders:
-- one test of each outcome, route calls, a chart, and a failure with its
-- diagnosis and timeline. One test fails on purpose.
--
-- Every route call's tally is also written, as the scenario saw it, to the
-- JSON file HTML_CHECK_RECORD names, with the injects it made, so that the
-- check compares the rendered page with what the run did.

local engine = require("engine")
local fs = require("fs")
local json = require("json")
local kvcache = require("kvcache")

local RECORD = assert(os.getenv("HTML_CHECK_RECORD"), "HTML_CHECK_RECORD names the file of what the run did")

local stack = kvcache.stack { pods = 3 }
local record = { routes = {}, injects = 0 }

local function recorded(test_name, tally, expected)
  record.routes[#record.routes + 1] = { test = test_name, n = tally.n, errors = tally.errors, counts = tally.counts,
    expected = expected }
  fs.write(RECORD, json.encode(record))
end

local function announce(pod, blocks)
  local prompt, tokens = stack:prompt(blocks)
  stack:inject(pod, kvcache.stored { tokens = tokens })
  record.injects = record.injects + 1
  fs.write(RECORD, json.encode(record))
  return prompt, tokens
end

test("an announced prompt is routed to the pod that owns it", function()
  local prompt, tokens = announce("p2", 4)
  stack:expect_owner { tokens = tokens, pod = "p2" }
  recorded(engine.test_name(), stack:expect_routed { prompt = prompt, pod = "p2", n = 6, max_tokens = 1 }, "p2")
end)

test("a prompt nobody announced is spread over the pods", function()
  local t = stack:route { prompt = (stack:prompt(2)), n = 12, concurrency = 3, max_tokens = 1 }
  recorded(engine.test_name(), t)
  expect(t.errors):eq(0, "every request is served: " .. tostring(t))
end)

test("a prompt p1 announced is routed to p3 (fails on purpose)", function()
  local prompt = announce("p1", 4)
  local t = stack:route { prompt = prompt, n = 4, max_tokens = 1 }
  recorded(engine.test_name(), t)
  expect(t:count("p3")):eq(4, "p1 owns the prompt, so p3 serves none of it: this test fails to show a failure "
    .. "in the report (" .. tostring(t) .. ")")
end)

test("a known gap of the router", { known_gap = {
  reason = "this test fails on purpose, as an upstream bug would make it fail, to show a known gap in the report",
  link = "https://github.com/volcano-sh/kthena/issues" } }, function()
  fail("the batch was dropped")
end)

test("a test skipped for a reason", { skip = "the target cannot do this" }, function() end)

test("a scenario's own chart", function()
  engine.report("chart", { title = "requests per second by concurrency", unit = "req/s",
    bars = { { label = "1", value = 40 }, { label = "4", value = 130 }, { label = "16", value = 310 } } })
end)
